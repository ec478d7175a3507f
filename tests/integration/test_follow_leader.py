# SPDX-License-Identifier: MIT
"""Agents and axctl follow the leader (issue 15, part 3): `axagent --controller` and
`axctl --url` name several controllers, comma separated. With the first URL dead, both
work through the second. With two real controllers on one database (axctld
--leader-elect, test_failover.py), the agents (given the URLs in either order) and axctl
reach the leader through the follower's redirect; after the leader's SIGKILL they go on
with the follower once it leads: the ranks keep running (same pids, one attempt), the
job ends with the value of an uninterrupted run, `axctl wait` reports it, and
`axctl logs -f` prints the whole log once."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import uuid

import axtest
from test_failover import role

LEADER_LEASE_MS = 1000
LEASE_MS = 4000


def dead_url(test):
    """A URL where connections are refused: bound, so nothing else takes the port, but
    not listening."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    test.addCleanup(s.close)
    return "http://127.0.0.1:%d" % s.getsockname()[1]


def ctl(urls, *args, timeout=30, input=None):
    return subprocess.run([axtest.AXCTL, "--url", urls] + [str(a) for a in args],
                          capture_output=True, text=True, input=input,
                          timeout=timeout * axtest.TIME_SCALE)


class FollowLeaderTest(axtest.ClusterTestCase):
    def database(self):
        """The database the controllers share: None for the first's SQLite file."""
        return None

    def database_of_first(self, shared):
        """The first controller's way to it (the PostgreSQL tests put a relay between)."""
        return shared

    def submit(self, urls, job):
        p = ctl(urls, "submit", "-f", "-", input=json.dumps(job.spec))
        self.assertEqual(p.returncode, 0, p.stderr)
        return int(p.stdout)

    def test_first_url_dead(self):
        dead = dead_url(self)
        c = self.start_cluster(1, agent_controllers=lambda node, url: dead + "," + url)
        urls = dead + "," + c.url
        job = c.work_job("first-dead", ranks=1, steps=20, step_ms=20)
        job.id = self.submit(urls, job)
        p = ctl(urls, "wait", job.id, "--timeout", 60, timeout=70)
        self.assertEqual((p.returncode, p.stdout), (0, "succeeded (exit code 0)\n"), p.stderr)
        p = ctl(urls, "status", job.id, "--json")
        self.assertEqual(json.loads(p.stdout)["state"], "succeeded", p.stderr)
        self.assert_succeeded_with_value(c, job)

    def leader_pair(self):
        """Two controllers on one database, the first leading, and two agents: n1 given
        (leader, follower), n2 (follower, leader)."""
        args = ["--leader-elect", "--leader-lease-ms", str(LEADER_LEASE_MS)]
        urls = {}

        def controllers(node, url):
            first, second = urls["a"], urls["b"]
            return "%s,%s" % ((first, second) if node == "n1" else (second, first))

        shared = self.database()
        a = axtest.Cluster(2, controller_args=args, relay=False, lease_ms=LEASE_MS,
                           grace_ms=500, name=self._testMethodName + "-a",
                           agent_controllers=controllers, db=self.database_of_first(shared))
        self.addCleanup(self._finish_cluster, a)
        b = axtest.Cluster(0, controller_args=args, relay=False, lease_ms=LEASE_MS,
                           grace_ms=500, name=self._testMethodName + "-b", db=shared)
        if shared is None:  # SQLite: the first cluster's file
            b.db = a.db
        # One log-link key for both (by default each makes its own beside its database
        # or, on PostgreSQL, in its working directory).
        key = ["--log-key-file", os.path.join(a.tmp, "shared.logkey")]
        a.controller_args += key
        b.controller_args += key
        self.addCleanup(self._finish_cluster, b)
        urls["a"] = a.start_controller()
        axtest.wait_for(lambda: role(a.url) == "leader", 10, "the first to lead")
        urls["b"] = b.start_controller()
        axtest.wait_for(lambda: role(b.url) == "follower", 10, "the second to follow")
        for node in ("n1", "n2"):
            a.start_agent(node)
        a.wait_nodes_ready()
        return a, b

    def stop_between_writes(self, a):
        """SIGSTOPs the leader. On SQLite, at a moment it holds no write lock: a leader
        stopped inside a commit holds the whole file, and no follower can take its
        lease until it runs again (docs/OPERATIONS.md, "What does not fail over")."""
        for _ in range(100):
            a.controller.signal(signal.SIGSTOP)
            if self.database() is not None:
                return
            db = sqlite3.connect(a.db, timeout=0)
            try:
                db.execute("BEGIN IMMEDIATE")
                db.rollback()
                return
            except sqlite3.OperationalError:
                a.controller.signal(signal.SIGCONT)
                time.sleep(0.01)
            finally:
                db.close()
        self.fail("the leader never stopped outside a write")

    def test_leader_killed_clients_follow(self):
        a, b = self.leader_pair()
        urls = "%s,%s" % (b.url, a.url)  # the follower first: its redirect is followed
        job = a.work_job("failover", ranks=2, ranks_per_node=1, steps=160, step_ms=50,
                         checkpoint_every=10)
        job.id = self.submit(urls, job)
        ranks = a.wait_running(job.id)
        self.assertEqual({r["node"] for r in ranks}, {"n1", "n2"})
        pids = {r["rank"]: r["pid"] for r in ranks}

        waiter = subprocess.Popen([axtest.AXCTL, "--url", urls, "wait", str(job.id)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        follower = subprocess.Popen([axtest.AXCTL, "--url", urls, "logs", str(job.id), "-f"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: [p.kill() for p in (waiter, follower) if p.poll() is None])
        axtest.wait_for(lambda: job.committed_steps(), 30, "a first checkpoint")

        killed = time.monotonic()
        a.controller.kill()
        axtest.wait_for(lambda: role(b.url) == "leader", (LEADER_LEASE_MS + 1000) / 1000.0 + 2,
                        "the follower to lead")
        axtest.log("the follower led %.2f s after the leader's SIGKILL"
                   % (time.monotonic() - killed))

        # Both agents sync with the new leader; the ranks were never stopped.
        axtest.wait_for(lambda: {n["name"]: n["state"] for n in b.nodes()}
                        == {"n1": "ready", "n2": "ready"}, 10, "both nodes ready with b")
        for rank, pid in pids.items():
            self.assertTrue(axtest.pid_alive(pid), "rank %d (pid %d) was stopped" % (rank, pid))
        for node in ("n1", "n2"):
            axtest.wait_for(lambda: "Controller at %s answers now" % b.url
                            in axtest.tail(a.agents[node].stderr_path, 400), 10,
                            "%s to say it syncs with b" % node)

        view = b.wait_job(job.id, timeout=60)
        self.assertEqual((view["state"], view["attempt"], view["restarts"]),
                         ("succeeded", 1, 0), view.get("reason"))
        self.assert_succeeded_with_value(b, job, view)
        self.assert_no_overlap(job)
        starts = [e for e in job.entries() if e["event"] == "start"]
        self.assertEqual(len(starts), 2, "one start per rank: %r" % starts)

        out, err = waiter.communicate(timeout=30)
        self.assertEqual((waiter.returncode, out), (0, "succeeded (exit code 0)\n"), err)
        out, err = follower.communicate(timeout=30)
        self.assertEqual(follower.returncode, 0, err)
        self.assertEqual(out, b.logs(job.id, 0), "logs -f printed the log once, in full")
        self.assertEqual(axtest.final_values(out), [job.expected])

    def test_steady_submits_through_a_failover(self):
        """Submits keep coming through axctl while the leader is SIGKILLed: every one
        acknowledged is on the new leader, once, and axctl's own retries (the same
        Idempotency-Key) made no second job."""
        a, b = self.leader_pair()
        urls = "%s,%s" % (a.url, b.url)
        acked, failed, stop = [], [], threading.Event()
        spec = json.dumps({"name": "load", "command": ["true"], "ranks": 1,
                           "resources": {"cpus": 1}})

        def load():
            while not stop.is_set():
                p = ctl(urls, "submit", "-f", "-", "--idempotency-key", uuid.uuid4().hex,
                        input=spec, timeout=60)
                (acked if p.returncode == 0 else failed).append(p.stdout.strip() or p.stderr)

        t = threading.Thread(target=load)
        t.start()
        try:
            axtest.wait_for(lambda: len(acked) >= 10, 30, "submits before the failover")
            a.controller.kill()
            axtest.wait_for(lambda: role(b.url) == "leader",
                            (LEADER_LEASE_MS + 1000) / 1000.0 + 2, "the follower to lead")
            n = len(acked)
            axtest.wait_for(lambda: len(acked) >= n + 10, 30, "submits after the failover")
        finally:
            stop.set()
            t.join(90)
        self.assertEqual(failed, [], "axctl gave up during the failover")
        ids = [j["id"] for j in b.list_jobs()]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertEqual(sorted(ids), sorted(int(x) for x in acked))

    def test_leader_host_hangs(self):
        """The leader stops dead (SIGSTOP: a hung host, no connection is ever reset). The
        agents give up on it within a fifth of their lease beyond the wait, wait for the
        follower to lead instead of going back, and their ranks run on. The old leader,
        woken, exits without acknowledging anything."""
        a, b = self.leader_pair()
        job = a.work_job("hang", ranks=2, ranks_per_node=1, steps=120, step_ms=50,
                         checkpoint_every=10)
        job.id = a.submit(job.spec)["id"]
        pids = {r["rank"]: r["pid"] for r in a.wait_running(job.id)}
        self.stop_between_writes(a)
        axtest.wait_for(lambda: role(b.url) == "leader", (LEADER_LEASE_MS + 1000) / 1000.0 + 2,
                        "the follower to lead")
        axtest.wait_for(lambda: {n["name"]: n["state"] for n in b.nodes()}
                        == {"n1": "ready", "n2": "ready"}, 10, "both nodes ready with b")
        view = b.wait_job(job.id, timeout=60)
        self.assertEqual((view["state"], view["attempt"]), ("succeeded", 1), view.get("reason"))
        self.assert_succeeded_with_value(b, job, view)
        starts = [e for e in job.entries() if e["event"] == "start"]
        self.assertEqual(len(starts), 2, "one start per rank: %r" % starts)
        for node in ("n1", "n2"):
            self.assertNotIn("fenc", axtest.tail(a.agents[node].stderr_path, 400).lower())
        a.controller.signal(signal.SIGCONT)
        a.controller.proc.wait(timeout=10)
        self.assertNotEqual(a.controller.proc.returncode, 0)
        self.assertTrue(pids)


if __name__ == "__main__":
    axtest.main()
