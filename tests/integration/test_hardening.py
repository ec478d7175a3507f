#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The smaller holes of issue 12, each closed against the real binaries:

- An agent's `address` is host:port and nothing else, so the controller's log proxy
  cannot be pointed at another path, query or user of some server.
- An idempotency key is its project's own: the same key in another project is another
  key (no 409 that tells one tenant the job id of another), also after a restart.
- axctl prints nothing a hostile node or rank sends as a terminal control (a node's
  health reason in `nodes` and `events`; a rank's log when stdout is a terminal, while a
  pipe gets the log's own bytes), and a FIFO as its config file is refused, not waited on.
- The database and its -wal and -shm files are 0600 whatever the umask, whether
  `axctld token create` or axctld makes them.
- Jobs of hundreds of shapes and users waiting at once do not stop the scheduler.
- One user's jobs that have not ended are bounded (max_jobs_per_user): a user with a
  valid token cannot grow the queue every pass and every restart walks without end.
"""

import os
import pty
import stat
import subprocess
import tempfile
import unittest

import axtest
from test_auth import token


class AddressTest(axtest.ClusterTestCase):
    def register(self, c, address):
        body = {"node": "n1", "address": address, "inventory": {"cpus": 0}}
        return c.api("POST", "/v1/agent/register", body)

    def test_register_takes_host_and_port_only(self):
        c = self.start_cluster(0)
        for address in ("127.0.0.1:18495/secret?", "127.0.0.1:80?x=1", "admin@127.0.0.1:80",
                        "127.0.0.1:80#x", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536",
                        "host name:80", "[::1]:80/x", "127.0.0.1:80\r\nX-Evil: 1"):
            status, body, _ = self.register(c, address)
            self.assertEqual(status, 400, (address, body))
            self.assertEqual(body["error"]["code"], "bad_request", body)
            self.assertEqual(body["error"]["field"], "address", body)
        self.assertEqual(c.nodes(), [], "a refused registration left a node behind")
        for address in ("127.0.0.1:9", "[::1]:9", "node-1.example.com:65535"):
            status, body, _ = self.register(c, address)
            self.assertEqual(status, 200, (address, body))
            self.assertEqual(c.nodes()[0]["address"], address)


class IdempotencyTest(axtest.ClusterTestCase):
    def test_a_key_is_its_projects_own(self):
        c = axtest.Cluster(0, controller_args=["--auth"], name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        alice = token(c.db, "--name", "alice", "--role", "user", "--project", "p1")
        bob = token(c.db, "--name", "bob", "--role", "user", "--project", "p2")
        c.start_controller()

        def submit(who, project, command):
            spec = {"command": command, "ranks": 1, "project": project}
            headers = {"Authorization": "Bearer " + who, "Idempotency-Key": "nightly"}
            return c.api("POST", "/v1/jobs", spec, headers=headers)

        status, a, _ = submit(alice, "p1", ["true"])
        self.assertEqual(status, 201, a)
        for restarted in (False, True):
            # Another spec under the same key, in another project: simply another job.
            status, b, _ = submit(bob, "p2", ["false"])
            self.assertIn(status, (200, 201) if restarted else (201,), b)
            self.assertNotEqual(b["id"], a["id"])
            # Within a project the key still names one job.
            status, again, _ = submit(bob, "p2", ["false"])
            self.assertEqual((status, again["id"]), (200, b["id"]), again)
            status, conflict, _ = submit(alice, "p1", ["false"])
            self.assertEqual(status, 409, conflict)
            self.assertIn(str(a["id"]), conflict["error"]["message"])
            c.restart_controller()


HOSTILE = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b6n"


class ManyShapesTest(axtest.ClusterTestCase):
    def test_jobs_of_many_shapes_do_not_stop_the_scheduler(self):
        """One user with a valid token submits 300 jobs, each of its own shape. The
        scheduler's pass over all of them (the first after a restart) once never
        returned, and the watchdog's restart met the same pass again."""
        c = self.start_cluster(0)  # no nodes yet: every job waits, each a shape and user
        ids = []
        for i in range(300):
            spec = {"command": ["true"], "ranks": 1, "user": "u%d" % i,
                    "resources": {"cpus": 1, "memory_mb": 1 + i}}
            ids.append(c.submit(spec)["id"])
        c.restart_controller()
        status, body, _ = c.api("GET", "/healthz", timeout=10)
        self.assertEqual(status, 200, body)
        # A loaded job waits "for capacity" until the first pass judges it: wait for
        # that pass's verdict, not for any reason.
        for job_id in (ids[0], ids[-1]):
            job = axtest.wait_for(lambda: (lambda j: j if "constraints" in j["reason"] else None)(
                c.job(job_id)), 20, "job %d judged by a pass" % job_id)
            self.assertEqual(job["state"], "pending")


class JobsPerUserTest(axtest.ClusterTestCase):
    def test_a_users_jobs_are_bounded(self):
        c = axtest.Cluster(0, controller_args=["--auth", "--max-jobs-per-user", "3"],
                           name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        alice = token(c.db, "--name", "alice", "--role", "user", "--project", "p1")
        bob = token(c.db, "--name", "bob", "--role", "user", "--project", "p1")
        c.start_controller()

        def submit(who, key=None):
            headers = {"Authorization": "Bearer " + who}
            if key:
                headers["Idempotency-Key"] = key
            spec = {"command": ["true"], "ranks": 1, "project": "p1"}
            return c.api("POST", "/v1/jobs", spec, headers=headers)

        ids = []
        for i in range(3):
            status, job, _ = submit(alice, key="k%d" % i)
            self.assertEqual(status, 201, job)
            ids.append(job["id"])
        for restarted in (False, True):
            status, body, _ = submit(alice)
            self.assertEqual(status, 429, body)
            self.assertEqual(body["error"]["code"], "too_many_jobs", body)
            self.assertIn("max_jobs_per_user", body["error"]["message"])
            # A known key still names its job; it adds none.
            status, again, _ = submit(alice, key="k0")
            self.assertEqual((status, again["id"]), (200, ids[0]), again)
            c.restart_controller()
        c.token = alice
        p = c.cli("submit", "--project", "p1", "--ranks", "1", "--", "true")
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("max_jobs_per_user", p.stderr)
        # Another user is not held back; a job that ends frees its place.
        status, body, _ = submit(bob)
        self.assertEqual(status, 201, body)
        status, body, _ = c.api("POST", "/v1/jobs/%d/cancel" % ids[1],
                                headers={"Authorization": "Bearer " + alice})
        self.assertEqual(status, 200, body)
        status, body, _ = submit(alice)
        self.assertEqual(status, 201, body)
        status, body, _ = submit(alice)
        self.assertEqual(status, 429, body)
        jobs = c.api_ok("GET", "/v1/jobs", headers={"Authorization": "Bearer " + alice})["jobs"]
        states = sorted(j["state"] for j in jobs if j["user"] == "alice")
        self.assertEqual(states, ["cancelled", "pending", "pending", "pending"])


class TerminalTest(axtest.ClusterTestCase):
    def test_node_reason_is_escaped(self):
        c = self.start_cluster(0)
        identity = {"boot_id": "b1", "agent_id": "a" * 32}
        reg = dict(identity, node="n1", address="127.0.0.1:9", inventory={"cpus": 0})
        c.api_ok("POST", "/v1/agent/register", reg, expect=(200,))
        sync = dict(identity, node="n1", ranks=[], health={"healthy": False, "reason": HOSTILE})
        c.api_ok("POST", "/v1/agent/sync?wait_ms=0&version=0", sync, expect=(200,))
        axtest.wait_for(lambda: "2J" in c.nodes()[0]["reason"], 10, "the node's reason")
        for args in (["nodes"], ["events"]):
            p = subprocess.run([axtest.AXCTL, "--url", c.url] + args, capture_output=True,
                               timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            for control in (b"\x1b", b"\x07", b"\xc2\x9b"):
                self.assertNotIn(control, p.stdout, args)
            self.assertIn(b"\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\u009b6n", p.stdout, args)

    def test_logs_escaped_on_a_terminal_only(self):
        c = self.start_cluster(1)
        script = "printf 'plain\\033[31m red\\007\\r\\n'"
        job_id = c.submit({"name": "colours", "command": ["sh", "-c", script], "ranks": 1,
                           "env": {"AXTEST_MARKER": c.marker}})["id"]
        self.assertEqual(c.wait_job(job_id)["state"], "succeeded")
        argv = [axtest.AXCTL, "--url", c.url, "logs", str(job_id)]
        piped = subprocess.run(argv, capture_output=True, timeout=30)
        self.assertEqual(piped.returncode, 0, piped.stderr)
        self.assertTrue(piped.stdout.endswith(b"plain\x1b[31m red\x07\r\n"), piped.stdout)

        pid, fd = pty.fork()
        if pid == 0:
            os.execv(argv[0], argv)
        seen = b""
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not data:
                break
            seen += data
        _, status = os.waitpid(pid, 0)
        os.close(fd)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, seen)
        # The terminal turns \n into \r\n; the rank's \r stays, the rest is shown.
        self.assertTrue(seen.endswith(b"plain\\x1b[31m red\\x07\r\r\n"), seen)

    def test_fifo_config_is_refused(self):
        tmp = self.enterContext(tempfile.TemporaryDirectory())
        fifo = os.path.join(tmp, "config")
        os.mkfifo(fifo, 0o600)
        env = dict(os.environ, AXCTL_CONFIG=fifo)
        p = subprocess.run([axtest.AXCTL, "list"], capture_output=True, text=True, env=env,
                           timeout=10)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stderr, "axctl: %s is not a regular file\n" % fifo)


class FileModeTest(axtest.ClusterTestCase):
    def assert_private(self, db, suffixes):
        for suffix in suffixes:
            mode = stat.S_IMODE(os.stat(db + suffix).st_mode)
            self.assertEqual(mode, 0o600, "%s%s is %o" % (db, suffix, mode))

    def test_database_files_are_private_whatever_the_umask(self):
        c = axtest.Cluster(0, name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        old = os.umask(0)
        try:
            token(c.db, "--name", "root", "--role", "admin")
            self.assert_private(c.db, [""])
            os.unlink(c.db)
            c.start_controller()  # inherits the umask of 0
        finally:
            os.umask(old)
        c.submit({"command": ["/bin/true"], "ranks": 1})
        self.assert_private(c.db, ["", "-wal", "-shm"])


if __name__ == "__main__":
    unittest.main()
