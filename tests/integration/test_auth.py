#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Authentication and authorisation with the real controller: every route of the
OpenAPI document walked with no token, a bad token, and each role (admin, a user bound
to one project, an agent bound to one node), checking 401/403/allowed; tokens created and
revoked with `axctld token`; hostile input (deep JSON, oversize bodies, many connections)."""

import hashlib
import hmac
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import axtest
import testca


token = axtest.create_token


class AuthTest(axtest.ClusterTestCase):
    def setUp(self):
        # No agents: the matrix needs only the API, and nodes are registered by hand with
        # the agent token below. Tokens go into the database before the controller serves.
        self.c = axtest.Cluster(0, controller_args=["--auth"], name=self._testMethodName)
        self.addCleanup(self._finish_cluster, self.c)
        db = self.c.db
        self.tokens = {
            "admin": token(db, "--name", "root", "--role", "admin"),
            "alice": token(db, "--name", "alice", "--role", "user", "--project", "p1"),
            "bob": token(db, "--name", "bob", "--role", "user", "--project", "p2"),
            "agent": token(db, "--name", "n1-agent", "--role", "agent", "--node", "n1"),
        }
        self.c.start_controller()

    def call(self, who, method, path, body=None, raw=None):
        headers = {}
        if who == "bad":
            headers["Authorization"] = "Bearer axt_" + "0" * 64
        elif who:
            headers["Authorization"] = "Bearer " + self.tokens[who]
        return self.c.api(method, path, body=body, raw=raw, headers=headers)

    def test_tokens_are_random_and_stored_as_hashes(self):
        t = self.tokens["admin"]
        self.assertRegex(t, r"^axt_[0-9a-f]{64}$")
        self.assertEqual(len(set(self.tokens.values())), 4)
        with open(self.c.db, "rb") as f:
            data = f.read()
        for wal in (self.c.db + "-wal",):
            if os.path.exists(wal):
                data += open(wal, "rb").read()
        for t in self.tokens.values():
            self.assertNotIn(t.encode(), data, "a token is stored in clear")

    def test_matrix_of_routes_and_roles(self):
        # A job in p1 (alice's) and one in p2 (bob's), and node n1 registered by its agent.
        st, j1, _ = self.call("alice", "POST", "/v1/jobs", {"command": ["true"], "ranks": 1, "project": "p1"})
        self.assertEqual(st, 201, j1)
        st, j2, _ = self.call("bob", "POST", "/v1/jobs", {"command": ["true"], "ranks": 1, "project": "p2"})
        self.assertEqual(st, 201, j2)
        # No CPUs: nothing is placed, so no answer redirects to this fake address.
        reg = {"node": "n1", "address": "127.0.0.1:9", "inventory": {"cpus": 0}}
        st, body, _ = self.call("agent", "POST", "/v1/agent/register", reg)
        self.assertEqual(st, 200, body)

        _, doc, _ = self.c.api("GET", "/healthz")
        st, doc, _ = self.call("admin", "GET", "/v1/openapi.json")
        self.assertEqual(st, 200)
        concrete = {"{id}": str(j1["id"]), "{name}": "n1"}
        walked = 0
        for path, item in doc["paths"].items():
            real = path
            for k, v in concrete.items():
                real = real.replace(k, v)
            for method in item:
                m = method.upper()
                body = None
                if real == "/v1/jobs" and m == "POST":
                    body = {"command": ["true"], "ranks": 1, "project": "p1"}
                elif real == "/v1/agent/register":
                    body = reg
                elif real == "/v1/agent/sync":
                    body = {"node": "n1", "ranks": []}
                elif real.endswith("/drain"):
                    body = {}
                for who in (None, "bad", "admin", "alice", "agent"):
                    st, ans, _ = self.call(who, m, real, body=body)
                    walked += 1
                    agent_route = real.startswith("/v1/agent/")
                    admin_only = real.endswith("/drain") or real.endswith("/undrain")
                    if real == "/healthz" or real == "/" or real.startswith("/ui/"):
                        want = "ok"  # open: the status page's files hold no data
                    elif who in (None, "bad"):
                        want = 401
                    elif who == "admin":
                        want = "ok"
                    elif who == "agent":
                        want = "ok" if agent_route else 403
                    else:  # alice, a user of p1
                        want = 403 if agent_route or admin_only else "ok"
                    what = "%s %s as %s: %s %s" % (m, real, who, st, ans)
                    if want == "ok":
                        # Allowed: the route's own answer (a 409 for a second cancel, a
                        # 404 for logs of a job not started), never an auth refusal.
                        self.assertLess(st, 500, what)
                        self.assertNotIn(st, (401, 403), what)
                    else:
                        self.assertEqual(st, want, what)
                        self.assertIn(ans["error"]["code"], ("unauthorized", "forbidden"), what)
        self.assertGreater(walked, 60)

        # Projects: alice cannot see, cancel or read the events of bob's job.
        for m, path in (("GET", "/v1/jobs/%d" % j2["id"]), ("POST", "/v1/jobs/%d/cancel" % j2["id"]),
                        ("GET", "/v1/jobs/%d/events" % j2["id"]), ("GET", "/v1/jobs?project=p2")):
            st, ans, _ = self.call("alice", m, path)
            self.assertEqual(st, 403, (m, path, ans))
        _, listing, _ = self.call("alice", "GET", "/v1/jobs")
        self.assertEqual({j["project"] for j in listing["jobs"]}, {"p1"})
        _, events, _ = self.call("alice", "GET", "/v1/events")
        self.assertTrue(events["events"])
        self.assertEqual({e["job"] for e in events["events"]} - {j1["id"]} - {j["id"] for j in listing["jobs"]}, set())
        # A user submits as itself, into its projects only.
        st, ans, _ = self.call("alice", "POST", "/v1/jobs", {"command": ["true"], "ranks": 1, "project": "p2"})
        self.assertEqual(st, 403, ans)
        st, ans, _ = self.call("alice", "POST", "/v1/jobs", {"command": ["true"], "ranks": 1, "project": "p1", "user": "root"})
        self.assertEqual(st, 403, ans)
        st, ans, _ = self.call("alice", "POST", "/v1/jobs", {"command": ["true"], "ranks": 1, "project": "p1",
                                                             "resources": {"cpus": 0}})
        self.assertEqual((st, ans.get("user")), (201, "alice"), ans)
        # An agent speaks only for its own node.
        st, ans, _ = self.call("agent", "POST", "/v1/agent/sync", {"node": "n2", "ranks": []})
        self.assertEqual(st, 403, ans)

    def test_router_denies_by_default(self):
        # A path next to a real route is no route at all: 404 for a valid user token (no
        # fall-through to the log stream), and for no token either.
        st, job, _ = self.call("alice", "POST", "/v1/jobs", {"command": ["true"], "ranks": 1, "project": "p1"})
        self.assertEqual(st, 201, job)
        for method, path in (("GET", "/v1/jobs/%d/x" % job["id"]), ("GET", "/v1/jobs/%d/logs/extra" % job["id"]),
                             ("GET", "/v1/jobsx"), ("POST", "/v1/jobs/%d/cancel/x" % job["id"])):
            for who in ("alice", "admin", None):
                st, ans, _ = self.call(who, method, path)
                what = "%s %s as %s: %s %s" % (method, path, who, st, ans)
                self.assertEqual(st, 404, what)
                self.assertEqual(ans["error"]["code"], "not_found", what)
                self.assertTrue(ans["error"]["message"], what)
        # A user on an agent route, and an agent on a user route: the table says no.
        for who, method, path, body in (
                ("alice", "POST", "/v1/agent/sync", {"node": "n1", "ranks": []}),
                ("alice", "POST", "/v1/agent/register", {"node": "n1", "address": "127.0.0.1:9", "inventory": {"cpus": 0}}),
                ("alice", "POST", "/v1/nodes/n1/drain", {}),
                ("agent", "GET", "/v1/jobs/%d" % job["id"], None)):
            st, ans, _ = self.call(who, method, path, body=body)
            what = "%s %s as %s: %s %s" % (method, path, who, st, ans)
            self.assertEqual(st, 403, what)
            self.assertEqual(ans["error"]["code"], "forbidden", what)

    def test_repeated_sync_bytes_are_checked_against_each_token(self):
        # The controller keeps a connection's last sync body decoded (api/syncmemo.c):
        # the same bytes under another token on that connection are checked again.
        self.tokens["n2"] = token(self.c.db, "--name", "n2-agent", "--role", "agent",
                                  "--node", "n2")
        reg = {"node": "n1", "address": "127.0.0.1:9", "inventory": {"cpus": 0}}
        st, body, _ = self.call("agent", "POST", "/v1/agent/register", reg)
        self.assertEqual(st, 200, body)
        conn = http.client.HTTPConnection("127.0.0.1", self.c.port, timeout=10)
        self.addCleanup(conn.close)
        n1 = json.dumps({"node": "n1", "ranks": []})

        def sync(who):
            conn.request("POST", "/v1/agent/sync?wait_ms=0&version=0", n1,
                         {"Authorization": "Bearer " + self.tokens[who]})
            r = conn.getresponse()
            return r.status, json.loads(r.read())

        for who, status in (("agent", 200), ("agent", 200), ("n2", 403), ("alice", 403),
                            ("agent", 200), ("n2", 403)):
            st, ans = sync(who)
            self.assertEqual(st, status, (who, ans))
        text = self.call("admin", "GET", "/metrics")[1]
        self.assertRegex(text, r'axctl_agent_sync_reports_total\{decoded="repeated"\} [1-9]')

    def test_revoked_token_is_refused_at_once(self):
        """The controller keeps the identities it read, and looks at the token table's
        stamp every 0.1 s (daemon/tokencache.h): a revoked token that was just used is
        refused within that, and for good."""
        for _ in range(3):
            st, _, _ = self.call("alice", "GET", "/v1/jobs")
            self.assertEqual(st, 200)
        p = subprocess.run([axtest.AXCTLD, "token", "revoke", "--db", self.c.db, "alice"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        revoked = time.monotonic()
        while True:
            st, ans, _ = self.call("alice", "GET", "/v1/jobs")
            if st == 401:
                break
            self.assertEqual(st, 200, ans)
            self.assertLess(time.monotonic() - revoked, 0.5, "the revoked token still works")
            time.sleep(0.05)
        self.assertEqual(ans["error"]["code"], "unauthorized", ans)
        time.sleep(0.3)  # past the next look at the table: refused still
        st, ans, _ = self.call("alice", "GET", "/v1/jobs")
        self.assertEqual(st, 401, ans)
        p = subprocess.run([axtest.AXCTLD, "token", "revoke", "--db", self.c.db, "alice"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1)

    def test_retired_jobs_keep_their_project(self):
        """Jobs that left memory (--job-retention-s 0) are read back from the store under
        the same rules: another project's is 403 to get, cancel, list or read events of
        or read the goodput of; an idempotency key still finds its own project's job;
        after a restart too."""
        self.c.controller_args = ["--auth", "--job-retention-s", "0"]
        self.c.restart_controller()
        spec = {"command": ["true"], "ranks": 1}
        key = {"Idempotency-Key": "k1"}

        def submit(who, project):
            headers = dict(key, Authorization="Bearer " + self.tokens[who])
            return self.c.api("POST", "/v1/jobs", body=dict(spec, project=project),
                              headers=headers)

        st, mine, _ = submit("alice", "p1")
        self.assertEqual(st, 201, mine)
        st, theirs, _ = submit("bob", "p2")
        self.assertEqual(st, 201, theirs)
        time.sleep(0.05)  # queued a while: goodput figures that are not zero
        for who, job in (("alice", mine), ("bob", theirs)):
            self.assertEqual(self.call(who, "POST", "/v1/jobs/%d/cancel" % job["id"])[0], 200)

        def retired():
            st, text, _ = self.call("admin", "GET", "/metrics")
            return st == 200 and 'axctl_jobs{state="cancelled"} 0' in text
        axtest.wait_for(retired, 10, "the cancelled jobs to leave memory")

        for restarted in (False, True):
            if restarted:
                self.c.restart_controller()
            st, job, _ = self.call("alice", "GET", "/v1/jobs/%d" % mine["id"])
            self.assertEqual((st, job["state"]), (200, "cancelled"), job)
            self.assertEqual(self.call("alice", "POST", "/v1/jobs/%d/cancel" % mine["id"])[0],
                             409)
            for method, path in (("GET", "/v1/jobs/%d"), ("POST", "/v1/jobs/%d/cancel"),
                                 ("GET", "/v1/jobs/%d/events")):
                st, body, _ = self.call("alice", method, path % theirs["id"])
                self.assertEqual(st, 403, (method, path, body))
            st, listed, _ = self.call("alice", "GET", "/v1/jobs")
            self.assertEqual([j["id"] for j in listed["jobs"]], [mine["id"]])
            st, listed, _ = self.call("admin", "GET", "/v1/jobs?state=cancelled")
            self.assertEqual([j["id"] for j in listed["jobs"]], [theirs["id"], mine["id"]])
            st, again, _ = submit("alice", "p1")
            self.assertEqual((st, again["id"]), (200, mine["id"]), again)
            # Goodput since the beginning (sums kept in memory) and over a window (summed
            # in the store): a user sees its own projects, in the fleet's figures too.
            for query in ("", "?since=1h"):
                st, report, _ = self.call("alice", "GET", "/v1/goodput" + query)
                self.assertEqual([p["project"] for p in report["projects"]], ["p1"], report)
                self.assertEqual(report["fleet"]["elapsed_s"],
                                 report["projects"][0]["elapsed_s"], report)
                st, report, _ = self.call("admin", "GET", "/v1/goodput" + query)
                self.assertEqual([p["project"] for p in report["projects"]], ["p1", "p2"])
            self.assertEqual(self.call("alice", "GET", "/v1/goodput?project=p2")[0], 403)

    def test_hostile_input(self):
        deep = b"[" * 100 + b"]" * 100
        st, ans, _ = self.call("admin", "POST", "/v1/jobs", raw=deep)
        self.assertEqual((st, ans["error"]["code"]), (400, "bad_json"))
        st, ans, _ = self.call("admin", "POST", "/v1/jobs", raw=b"{" + b" " * (2 * 1024 * 1024) + b"}")
        self.assertEqual(st, 413)
        spec = {"command": ["x" * 9000], "ranks": 1}
        st, ans, _ = self.call("admin", "POST", "/v1/jobs", spec)
        self.assertEqual((st, ans["error"]["field"]), (400, "command"))
        spec = {"command": ["x"] * 2000, "ranks": 1}
        st, ans, _ = self.call("admin", "POST", "/v1/jobs", spec)
        self.assertEqual((st, ans["error"]["field"]), (400, "command"))
        spec = {"command": ["x"], "ranks": 10 ** 9}
        st, ans, _ = self.call("admin", "POST", "/v1/jobs", spec)
        self.assertEqual((st, ans["error"]["field"]), (400, "ranks"))
        spec = {"command": ["x"], "ranks": 1, "env": {"K%d" % i: "v" for i in range(600)}}
        st, ans, _ = self.call("admin", "POST", "/v1/jobs", spec)
        self.assertEqual((st, ans["error"]["field"]), (400, "env"))
        spec = {"command": ["x"], "ranks": 1, "workdir": "relative/path"}
        st, ans, _ = self.call("admin", "POST", "/v1/jobs", spec)
        self.assertEqual((st, ans["error"]["field"]), (400, "workdir"))
        st, ans, _ = self.call("admin", "GET", "/v1/jobs/1%27%20OR%201=1")
        self.assertEqual(st, 404)

        # Half-open connections that never finish their request do not stop the server.
        host, port = self.c.url.split("//")[1].split(":")
        idle = []
        try:
            for _ in range(100):
                s = socket.create_connection((host, int(port)), timeout=5)
                s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
                idle.append(s)
            st, _, _ = self.c.api("GET", "/healthz")
            self.assertEqual(st, 200)
            st, _, _ = self.call("admin", "GET", "/v1/jobs")
            self.assertEqual(st, 200)
        finally:
            for s in idle:
                s.close()


class ConfigBooleanTest(axtest.ClusterTestCase):
    """Both daemons read flags, files and booleans with one parser (common/config.c):
    `auth = on` in axctld's file turns authentication on, and a value that is not a
    boolean stops either daemon with exit 2 and one line naming the key and the value."""

    BOOL = "needs true or false (or yes/no, on/off, 1/0)"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="axtest-config-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_auth_on_in_the_controller_file(self):
        conf = self.write("axctld.conf", "# as an operator writes it\nauth = On\n")
        c = axtest.Cluster(0, controller_args=["--config", conf], name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        admin = token(c.db, "--name", "root", "--role", "admin")
        c.start_controller()
        st, ans, _ = c.api("GET", "/v1/jobs")
        self.assertEqual((st, ans["error"]["code"]), (401, "unauthorized"), ans)
        st, ans, _ = c.api("GET", "/v1/jobs", headers={"Authorization": "Bearer " + admin})
        self.assertEqual(st, 200, ans)
        # A flag wins over the file, in any spelling.
        self.assertEqual(c.controller.terminate(), 0)
        c.controller_args = ["--config", conf, "--auth=OFF"]
        c.start_controller()
        st, ans, _ = c.api("GET", "/v1/jobs")
        self.assertEqual(st, 200, ans)

    def test_bad_boolean_is_refused_by_both_daemons(self):
        db = os.path.join(self.tmp, "state.db")
        ctl = [axtest.AXCTLD, "--listen", "127.0.0.1:0", "--db", db]
        agent = [axtest.AXAGENT, "--controller", "http://127.0.0.1:9", "--node", "n1",
                 "--state-dir", os.path.join(self.tmp, "n1")]
        ctl_conf = self.write("axctld.conf", "lease_ms = 5000\nauth = maybe\n")
        agent_conf = self.write("axagent.conf", "allow_root = enabled\n")
        cases = (
            (ctl + ["--config", ctl_conf], 'axctld: %s:2: auth = "maybe": %s' % (ctl_conf, self.BOOL)),
            (ctl + ["--auth=sure"], "axctld: --auth %s, not 'sure'" % self.BOOL),
            (agent + ["--config", agent_conf], 'axagent: %s:1: allow_root = "enabled": %s' % (agent_conf, self.BOOL)),
            (agent + ["--strict-user=2"], "axagent: --strict-user %s, not '2'" % self.BOOL),
        )
        for argv, want in cases:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            what = "%s: %s %r" % (" ".join(argv[1:]), p.returncode, p.stderr)
            self.assertEqual(p.returncode, 2, what)
            self.assertEqual(p.stderr, want + "\n", what)
        self.assertFalse(os.path.exists(db), "axctld opened its database after a bad setting")

    def test_agent_reads_booleans_in_any_spelling(self):
        # The agent logs its account policy at start: root allowed (as root) or other
        # users refused (as another user) proves the file's values were read as true.
        conf = self.write("axagent.conf", "allow_root = ON\nstrict_user = Yes\n")
        argv = [axtest.AXAGENT, "--config", conf, "--controller", "http://127.0.0.1:9",
                "--node", "n1", "--state-dir", os.path.join(self.tmp, "n1")]
        want = "root allowed" if os.geteuid() == 0 else "jobs of other users are refused"
        err_path = os.path.join(self.tmp, "axagent.stderr")
        with open(err_path, "wb") as err:
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        try:
            def logged():
                with open(err_path) as f:
                    return want in f.read()
            axtest.wait_for(logged, 10, "the agent's policy line")
        finally:
            p.terminate()
            p.wait(timeout=10)


class SecureClusterTest(axtest.ClusterTestCase):
    """The whole flow with authentication and TLS on: agents with their own tokens over
    https, a user submitting through axctl, logs streamed through the controller."""

    def test_submit_to_success_over_tls_with_tokens(self):
        tmp = tempfile.mkdtemp(prefix="axtest-tls-")
        self.addCleanup(shutil.rmtree, tmp, True)
        ca, crt, key = testca.make_test_ca(tmp)
        c = axtest.Cluster(2, controller_args=["--auth", "--tls-cert", crt, "--tls-key", key],
                           name="tls")
        self.addCleanup(self._finish_cluster, c)
        admin = token(c.db, "--name", "root", "--role", "admin")
        user = token(c.db, "--name", "carol", "--role", "user", "--project", "ml")
        args = []
        for n in ("n1", "n2"):
            path = os.path.join(tmp, n + ".token")
            with open(path, "w") as f:
                f.write(token(c.db, "--name", n, "--role", "agent", "--node", n) + "\n")
            os.chmod(path, 0o600)
            args.append(["--token-file", path, "--ca-file", ca])
        c.agent_args = args
        c.ca_file = ca
        c.token = admin
        c.start()
        self.assertTrue(c.url.startswith("https://"), c.url)

        # A user, through the CLI, over TLS.
        c.token = user
        job = c.work_job("secure", ranks=2, ranks_per_node=1, steps=20, step_ms=10,
                         spec={"project": "ml", "user": "carol"})
        del job.spec["user"]  # the server fills in the token's user
        spec_path = os.path.join(tmp, "job.json")
        with open(spec_path, "w") as f:
            json.dump(job.spec, f)
        p = c.cli("submit", "-f", spec_path)
        self.assertEqual(p.returncode, 0, p.stderr)
        job.id = int(p.stdout.split()[0])
        p = c.cli("wait", job.id, "--timeout", "60")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        view = c.job(job.id)
        self.assertEqual((view["state"], view["user"]), ("succeeded", "carol"))
        out = c.logs(job.id, 0)
        self.assertEqual(axtest.final_values(out), [job.expected])

        # The log streams through the controller, which checks the token's project and
        # signs its request to the agent; the agent refuses the path unsigned, forged or
        # expired, and serves it with a signature made from its token as PROTOCOL.md says.
        st, text, _ = c.api("GET", "/v1/jobs/%d/logs?rank=1" % job.id)
        self.assertEqual(st, 200)
        self.assertIn(job.expected, text)
        st, ans, _ = c.api("GET", "/v1/jobs/%d/logs?rank=1" % job.id,
                           headers={"Authorization": "Bearer " + admin})
        self.assertEqual(st, 200)
        node = {n["name"]: n for n in c.nodes()}[view["ranks"][1]["node"]]
        path = "/v1/logs/%d/1/1" % job.id
        plain = "http://%s%s" % (node["address"], path)
        # The node's key, as the controller derives it from its secret beside the database.
        secret = open(c.db + ".logkey").read().strip()
        key = hmac.new(secret.encode(), ("axctl log key of node %s" % node["name"]).encode(),
                       hashlib.sha256).hexdigest().encode()
        expires = int(time.time()) + 60
        good = hmac.new(key, ("%s %d" % (path, expires)).encode(), hashlib.sha256).hexdigest()
        stale = int(time.time()) - 5
        old = hmac.new(key, ("%s %d" % (path, stale)).encode(), hashlib.sha256).hexdigest()
        for url in (plain, plain + "?expires=%d&sig=%s" % (expires, "0" * 64),
                    plain + "?expires=%d&sig=%s" % (stale, old)):
            try:
                urllib.request.urlopen(url, timeout=10)
                self.fail("the agent served %s" % url)
            except urllib.error.HTTPError as e:
                self.assertEqual(e.code, 403, url)
        with urllib.request.urlopen(plain + "?expires=%d&sig=%s" % (expires, good), timeout=10) as r:
            self.assertIn(job.expected, r.read().decode())

        # Without the CA, the CLI refuses the server; without a token, the server refuses.
        c.ca_file = None
        p = c.cli("list")
        self.assertNotEqual(p.returncode, 0)
        c.ca_file = ca
        c.token = None
        p = c.cli("list")
        self.assertEqual(p.returncode, 7, p.stderr)
        c.token = admin


if __name__ == "__main__":
    missing = axtest.missing_binaries(("AXCTLD",))
    if missing:
        print("skipping: not built: %s" % ", ".join(missing))
        raise SystemExit(77)
    unittest.main(verbosity=2)
