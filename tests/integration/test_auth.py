#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Authentication and authorisation with the real controller: every route of the
OpenAPI document walked with no token, a bad token, and each role (admin, a user bound
to one project, an agent bound to one node), checking 401/403/allowed; tokens created and
revoked with `axctld token`; hostile input (deep JSON, oversize bodies, many connections)."""

import json
import os
import socket
import subprocess
import time
import unittest

import axtest


def token(db, *args):
    p = subprocess.run([axtest.AXCTLD, "token", "create", "--db", db] + list(args),
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError("axctld token create %s: %s" % (args, p.stderr))
    return p.stdout.strip()


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
                    if real == "/healthz":
                        want = "ok"
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

    def test_revoked_token_is_refused_at_once(self):
        st, _, _ = self.call("alice", "GET", "/v1/jobs")
        self.assertEqual(st, 200)
        p = subprocess.run([axtest.AXCTLD, "token", "revoke", "--db", self.c.db, "alice"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        st, ans, _ = self.call("alice", "GET", "/v1/jobs")
        self.assertEqual(st, 401, ans)
        p = subprocess.run([axtest.AXCTLD, "token", "revoke", "--db", self.c.db, "alice"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1)

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


if __name__ == "__main__":
    missing = axtest.missing_binaries(("AXCTLD",))
    if missing:
        print("skipping: not built: %s" % ", ".join(missing))
        raise SystemExit(77)
    unittest.main(verbosity=2)
