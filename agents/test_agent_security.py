#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Security behaviour of the real axagent against a throwaway fake controller.

The fake controller is a small HTTP(S) server in this process that records every request
and answers register and sync with a desired state the test chooses. The test checks:
the agent refuses a token file others can read (exit 2) and sends
`Authorization: Bearer <token>` on register and sync; a rank runs as the account the
policy maps its job user to (as root: `nobody`), with HOME/USER from that account, no
agent credential in its environment and no descriptor beyond 0-2; root is refused with
exit 126 and a line in the rank's log; a 401 is logged as a credentials problem; and an
https controller is only trusted with the right --ca-file. Standard library only, plus
the openssl command for the TLS case (skipped without it).

AXAGENT names the binary (set by agents/meson.build).
"""

import http.server
import json
import os
import pwd
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import testca  # noqa: E402  (the CA helper shared with tests/integration)

AXAGENT = os.environ.get("AXAGENT", "build/agents/axagent")
TOKEN = "axt_agent_n1_0123456789abcdef"


class FakeController:
    """Answers register and sync; the desired ranks are set by the test. As a follower
    (redirect_to set, test_agent_failover.py) it answers 307 not_leader to that URL, and
    with no_leader 503 no_leader, as a follower axctld does; with lease_only, it answers
    syncs as a restarted axctld still loading its state may (daemon/early-leases.h)."""

    def __init__(self, tls=None):
        self.requests = []  # (path, headers dict, body dict)
        self.desired = []
        self.status = 200
        self.redirect_to = None
        self.no_leader = False
        self.lease_only = False  # answer syncs as a restarted controller still loading
        self.connections = set()  # open ones, which stop() breaks as a dying process would
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with fake.lock:
                    fake.connections.add(self.connection)

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n) or b"{}")
                with fake.lock:
                    fake.requests.append((self.path, dict(self.headers), body))
                    status, desired = fake.status, list(fake.desired)
                    redirect_to, no_leader = fake.redirect_to, fake.no_leader
                    lease_only = fake.lease_only
                headers = {}
                if redirect_to:
                    status, headers["Location"] = 307, redirect_to + self.path
                    answer = {"error": {"code": "not_leader", "message": "follower",
                                        "status": 307}}
                elif no_leader:
                    status, headers["Retry-After"] = 503, "1"
                    answer = {"error": {"code": "no_leader", "message": "no leader",
                                        "status": 503}}
                elif status != 200:
                    answer = {"error": {"code": "unauthorized", "message": "bad token"}}
                elif self.path.startswith("/v1/agent/register"):
                    answer = {"node": "n1", "lease_ms": 5000, "sync_period_ms": 200}
                elif lease_only:
                    version = re.search(r"[?&]version=(\d+)", self.path).group(1)
                    answer = {"version": int(version), "lease_ms": 5000, "lease_only": True}
                    time.sleep(0.05)
                else:
                    answer = {"version": len(desired), "lease_ms": 5000, "ranks": desired}
                    # The long-poll is not the point here: answer at once, but not in a
                    # busy loop.
                    time.sleep(0.05)
                data = json.dumps(answer).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the agent dropped a long-poll to report news: expected

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls[0], tls[1])
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = "%s://localhost:%d" % (scheme, self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            for c in self.connections:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def last_report(self, job, rank):
        with self.lock:
            for path, _, body in reversed(self.requests):
                if path.startswith("/v1/agent/sync"):
                    for r in body.get("ranks", []):
                        if r["job"] == job and r["rank"] == rank:
                            return r
        return None


def wait_for(what, fn, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class AgentSecurityTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="axagent-sec-")
        self.state = os.path.join(self.tmp, "state")
        self.token_file = os.path.join(self.tmp, "token")
        with open(self.token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(self.token_file, 0o600)
        self.agent = None
        self.fake = None
        self.log_path = os.path.join(self.tmp, "agent.log")

    def tearDown(self):
        if self.agent and self.agent.poll() is None:
            self.agent.terminate()
            self.agent.wait(10)
        if self.fake:
            self.fake.stop()
        # Ranks still running (a failed test) must not outlive it: their process groups
        # are recorded by the shims.
        ranks = os.path.join(self.state, "ranks")
        for d in os.listdir(ranks) if os.path.isdir(ranks) else []:
            try:
                with open(os.path.join(ranks, d, "rank.pid")) as f:
                    os.killpg(int(f.read()), 9)
            except (OSError, ValueError):
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_agent(self, *extra, url=None):
        argv = [AXAGENT, "--controller", url or self.fake.url, "--node", "n1",
                "--state-dir", self.state, "--token-file", self.token_file,
                "--log-level", "debug",
                # Not about containment: no cgroups, which a run beside it would share.
                "--cgroup", "no"] + list(extra)
        self.log = open(self.log_path, "w")
        env = dict(os.environ, AGENT_ONLY_SECRET="agent-environment-secret")
        self.agent = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                      env=env, cwd=self.tmp)
        self.log.close()

    def agent_log(self):
        with open(self.log_path) as f:
            return f.read()

    def rank_log(self, job, rank):
        path = os.path.join(self.state, "logs", str(job), "1", "rank-%d.log" % rank)
        try:
            with open(path) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def rank(self, job, user, script):
        return {"job": job, "attempt": 1, "rank": 0, "user": user, "workdir": "/",
                "argv": ["sh", "-c", script], "env": {"AXCTL_JOB_ID": str(job)},
                "devices": [], "hang_timeout_s": 0}

    def test_private_token_file_required(self):
        self.fake = FakeController()
        os.chmod(self.token_file, 0o644)
        self.start_agent()
        self.assertEqual(self.agent.wait(10), 2)
        self.assertIn("run chmod 600 " + self.token_file, self.agent_log())
        self.assertNotIn(TOKEN, self.agent_log())
        self.assertEqual(self.fake.requests, [])

    def test_token_sent_and_refusal_logged(self):
        self.fake = FakeController()
        self.start_agent("--allow-root")
        wait_for("a sync", lambda: any(p.startswith("/v1/agent/sync")
                                       for p, _, _ in self.fake.requests))
        for path, headers, _ in list(self.fake.requests):
            self.assertEqual(headers.get("Authorization"), "Bearer " + TOKEN, path)
        self.fake.status = 401
        wait_for("the credentials warning",
                 lambda: "refused the agent's credentials" in self.agent_log())
        self.assertNotIn(TOKEN, self.agent_log())

    @unittest.skipUnless(os.geteuid() == 0, "switching users needs root")
    def test_rank_isolation_as_root(self):
        self.fake = FakeController()
        nobody = pwd.getpwnam("nobody")
        script = ('id -u; echo "HOME=$HOME USER=$USER"; env; '
                  # A child started before any pipe shows the fds the rank got; the
                  # shell's own list would race with the pipe of this very command.
                  # Listed once it runs sleep: between fork and exec the shell opens
                  # /dev/null for its stdin (as fd 3, then moved to 0).
                  'sleep 5 & p=$!; n=0; until [ "$(readlink /proc/$p/exe)" = '
                  '"$(readlink -f "$(command -v sleep)")" ] || [ $n -ge 500 ]; do '
                  'n=$((n+1)); done; ls /proc/$p/fd | tr "\\n" " "; echo; kill $p; umask')
        self.fake.desired = [self.rank(1, "nobody", script),
                             self.rank(2, "root", "touch %s/pwned" % self.tmp),
                             self.rank(3, "no-such-user-axtest", "true")]
        self.start_agent()
        for job in (1, 2, 3):
            wait_for("rank %d to exit" % job,
                     lambda: (self.fake.last_report(job, 0) or {}).get("state") == "exited")
        self.assertEqual(self.fake.last_report(1, 0)["exit_code"], 0)
        out = self.rank_log(1, 0).split("--- end environment ---\n", 1)[1]
        lines = out.splitlines()
        self.assertEqual(lines[0], str(nobody.pw_uid))
        self.assertEqual(lines[1], "HOME=%s USER=nobody" % nobody.pw_dir)
        self.assertNotIn(TOKEN, out)
        self.assertNotIn(self.token_file, out)
        self.assertNotIn("agent-environment-secret", out)
        self.assertIn("0 1 2 \n0022", out)
        st = os.stat(os.path.join(self.state, "logs", "1", "1", "rank-0.log"))
        self.assertEqual(st.st_uid, nobody.pw_uid)

        self.assertEqual(self.fake.last_report(2, 0)["exit_code"], 126)
        self.assertIn("user root is root, which this agent refuses", self.rank_log(2, 0))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "pwned")))
        self.assertEqual(self.fake.last_report(3, 0)["exit_code"], 126)
        self.assertIn("does not exist on this node", self.rank_log(3, 0))

    @unittest.skipUnless(os.geteuid() == 0, "switching users needs root")
    def test_checkpoints_are_read_as_the_jobs_user(self):
        # Two jobs of nobody: one names a directory only root may list, the other one
        # anybody may. The agent reports only what nobody itself can see, also once it
        # has restarted and adopted the ranks.
        self.fake = FakeController()
        os.chmod(self.tmp, 0o755)
        dirs = {}
        for job, mode, step in ((1, 0o700, 40), (2, 0o755, 5)):
            d = dirs[job] = os.path.join(self.tmp, "ckpt-%d" % job)
            os.makedirs(os.path.join(d, "step_%08d" % step))
            open(os.path.join(d, "step_%08d" % step, "index"), "w").close()
            os.chmod(d, mode)
        self.fake.desired = [dict(self.rank(job, "nobody", "exec sleep 60"),
                                  checkpoint_dir=dirs[job]) for job in (1, 2)]

        def reported(since):
            with self.fake.lock:
                syncs = [b for p, _, b in self.fake.requests[since:]
                         if p.startswith("/v1/agent/sync")]
            return {c["job"]: c for b in syncs for c in b.get("checkpoints", [])}

        for restart in (False, True):
            since = len(self.fake.requests)
            if restart:
                self.agent.kill()
                self.agent.wait(10)
            self.start_agent()
            seen = wait_for("job 2's checkpoint", lambda: 2 in reported(since) and
                            reported(since))
            self.assertEqual(seen[2]["path"], os.path.join(dirs[2], "step_00000005"))
            self.assertEqual(seen[2]["step"], 5)
            self.assertNotIn(1, seen, "a step name from a directory nobody may not read")
        # A directory the job's user may read is still seen as it changes.
        os.makedirs(os.path.join(dirs[2], "step_00000010"))
        open(os.path.join(dirs[2], "step_00000010", "index"), "w").close()
        since = len(self.fake.requests)
        wait_for("step 10", lambda: reported(since).get(2, {}).get("step") == 10)
        self.assertNotIn(1, reported(0))

    def test_https_needs_the_right_ca(self):
        if not shutil.which("openssl"):
            self.skipTest("no openssl command")
        # Valid for localhost only, so that connecting by address tests name checking.
        ca, crt, key = testca.make_test_ca(self.tmp, names=("DNS:localhost",))
        self.fake = FakeController(tls=(crt, key))

        # Without the CA: no request gets through the handshake.
        self.start_agent("--allow-root")
        wait_for("a TLS failure", lambda: "Controller unreachable" in self.agent_log())
        self.assertEqual(self.fake.requests, [])
        self.agent.terminate()
        self.agent.wait(10)

        self.start_agent("--allow-root", "--ca-file", ca)
        wait_for("register over https", lambda: self.fake.requests)
        self.assertEqual(self.fake.requests[0][1].get("Authorization"), "Bearer " + TOKEN)
        self.agent.terminate()
        self.agent.wait(10)

        # The right CA but another name: refused (the host name is checked too).
        self.fake.requests.clear()
        port = self.fake.server.server_address[1]
        self.start_agent("--allow-root", "--ca-file", ca, url="https://127.0.0.1:%d" % port)
        wait_for("a name mismatch", lambda: "Controller unreachable" in self.agent_log())
        self.assertEqual(self.fake.requests, [])


if __name__ == "__main__":
    if not os.path.exists(AXAGENT):
        print("no axagent at %s" % AXAGENT)
        sys.exit(77)
    unittest.main(verbosity=2)
