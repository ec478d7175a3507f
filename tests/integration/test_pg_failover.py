# SPDX-License-Identifier: MIT
"""Controller failover on PostgreSQL (issue 15, part 4): test_follow_leader's cases
(SIGKILL of the leader with a multi-rank job running and axctl following; steady
submits through the failover; the leader's host hanging) with the two controllers on
one private PostgreSQL server, and the leader cut off from the database: the follower
takes over within the leader's lease + 1 s, the ranks run on, and the cut-off leader
acknowledges nothing more and exits. Skipped (77) where PostgreSQL is not installed."""

import time
import urllib.parse

import axtest
import test_follow_leader
from test_failover import role
from test_follow_leader import LEADER_LEASE_MS


class PgFollowLeaderTest(axtest.WithPgServer, test_follow_leader.FollowLeaderTest):
    # Its controller's database does not matter: test_follow_leader runs it.
    test_first_url_dead = None

    def database(self):
        return self.pg.create_database()

    def database_of_first(self, shared):
        """Through a relay that can black-hole the first controller's connections."""
        self.relay = axtest.Relay(self.pg.port)
        self.addCleanup(self.relay.close)
        u = urllib.parse.urlsplit(shared)
        return u._replace(netloc="%s@127.0.0.1:%d" % (u.username, self.relay.port)).geturl()

    def test_leader_cut_off_from_the_database(self):
        a, b = self.leader_pair()
        job = a.work_job("cut", ranks=2, ranks_per_node=1, steps=120, step_ms=50,
                         checkpoint_every=10)
        job.id = a.submit(job.spec)["id"]
        pids = {r["rank"]: r["pid"] for r in a.wait_running(job.id)}
        acked = {a.submit({"name": "before", "command": ["true"], "ranks": 1})["id"]}

        cut = time.monotonic()
        self.relay.cut()
        axtest.wait_for(lambda: role(b.url) == "leader", (LEADER_LEASE_MS + 1000) / 1000.0 + 1,
                        "the follower to lead")
        took = time.monotonic() - cut
        axtest.log("the follower led %.2f s after the leader lost its database" % took)
        self.assertLess(took, (LEADER_LEASE_MS + 1000) / 1000.0)
        axtest.wait_for(lambda: {n["name"]: n["state"] for n in b.nodes()}
                        == {"n1": "ready", "n2": "ready"}, 10, "both nodes ready with b")
        acked.add(b.submit({"name": "after", "command": ["true"], "ranks": 1})["id"])

        view = b.wait_job(job.id, timeout=60)
        self.assertEqual((view["state"], view["attempt"]), ("succeeded", 1), view.get("reason"))
        self.assert_succeeded_with_value(b, job, view)
        self.assert_no_overlap(job)
        self.assertEqual(len([e for e in job.entries() if e["event"] == "start"]), 2)
        self.assertEqual({j["id"] for j in b.list_jobs()}, acked | {job.id})
        self.assertTrue(pids)

        # The old leader hangs on its database (the relay swallows its bytes, so TCP
        # never gives up) until its statement's deadline, 10 s, and acknowledges nothing
        # meanwhile; then it exits, without the partition healing.
        status = None
        try:
            status = test_follow_leader.ctl(a.url, "submit", "-f", "-", timeout=20,
                                            input='{"name":"late","command":["true"],'
                                                  '"ranks":1}').returncode
        except axtest.subprocess.TimeoutExpired:
            pass
        self.assertNotEqual(status, 0)
        a.controller.proc.wait(timeout=15)
        self.relay.heal()
        self.assertNotEqual(a.controller.proc.returncode, 0)
        self.assertNotIn("late", [j["name"] for j in b.list_jobs()])


if __name__ == "__main__":
    axtest.main(skip=axtest.pg_missing())
