# SPDX-License-Identifier: MIT
"""The lease holds whatever happens to the agent (issue 18). Every rank's supervisor
(the shim) kills its whole rank when the node's lease runs out, so when an agent dies,
is stopped or hangs while its ranks live on, those ranks are gone before the controller
declares the node lost (lease + grace) and starts the next attempt elsewhere.

Each test checks the outcome with the ranks' own liveness records (the attempt log every
axwork rank appends a line to at each step) and with /proc: no two attempts of the job
are ever alive at once, and the job ends with the value of a failure-free run."""

import os
import signal
import time
import unittest

import axtest

LEASE_MS = 2000
GRACE_MS = 500


class FencingTest(axtest.ClusterTestCase):
    def cluster(self, n_agents=2, **kwargs):
        kwargs.setdefault("lease_ms", LEASE_MS)
        kwargs.setdefault("grace_ms", GRACE_MS)
        return self.start_cluster(n_agents, **kwargs)

    def node_of(self, ranks):
        nodes = {r["node"] for r in ranks}
        self.assertEqual(len(nodes), 1, ranks)
        return nodes.pop()

    def start_job(self, c, name, steps=120):
        job = c.work_job(name, ranks=1, steps=steps, step_ms=50, checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        node = self.node_of(c.wait_running(job.id))
        self.wait_checkpoint(c, job, 5)
        return job, node

    def assert_one_attempt_alive(self, c, job):
        alive = {p["attempt"] for p in axtest.rank_processes(c.marker, job.id)}
        self.assertLessEqual(len(alive), 1, "attempts alive at once: %r" % alive)

    def assert_fenced_then_moved(self, c, job, lost, pids, t_lost):
        """The agent of `lost` is gone or stopped since t_lost: its ranks must die
        within the lease, before the controller could start attempt 2, which then runs
        on the other node while attempt 1 stays dead."""
        deadline = (LEASE_MS + GRACE_MS) / 1000.0
        axtest.wait_for(lambda: not any(axtest.pid_alive(p) for p in pids.values()),
                        deadline + 2, "the shims on %s to fence attempt 1 %r" % (lost, pids))
        fenced_after = time.monotonic() - t_lost
        self.assertLess(fenced_after, deadline,
                        "ranks outlived lease + grace: the controller may already run "
                        "attempt 2")
        ranks = c.wait_running(job.id, timeout=deadline + 20, attempt=2)
        self.assertNotEqual(self.node_of(ranks), lost)
        self.assert_one_attempt_alive(c, job)
        axtest.log("fenced after %.2fs, attempt 2 running after %.2fs"
                   % (fenced_after, time.monotonic() - t_lost))

    def assert_recovered(self, c, job, lost):
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 2)
        first = [a for a in view["attempts"] if a["attempt"] == 1][0]
        self.assertEqual(first["end_reason"], "node_lost")
        self.assert_no_overlap(job)
        return view

    def test_agent_sigkill_alone_fences_its_ranks(self):
        c = self.cluster()
        job, lost = self.start_job(c, "agentkill")
        pids = axtest.workload_pids(c.marker, job.id, 1)
        c.agents[lost].kill()  # the agent only: its ranks run on, as after an OOM kill
        t_lost = time.monotonic()
        self.assert_fenced_then_moved(c, job, lost, pids, t_lost)
        self.assert_recovered(c, job, lost)
        # An agent started after the lease finds its rank fenced and rejoins the fleet.
        c.start_agent(lost)
        c.wait_nodes_ready([lost], timeout=30)
        self.assert_one_attempt_alive(c, job)

    def test_agent_stopped_longer_than_lease_fences_its_ranks(self):
        c = self.cluster()
        job, lost = self.start_job(c, "agentstop", steps=160)
        pids = axtest.workload_pids(c.marker, job.id, 1)
        c.agents[lost].signal(signal.SIGSTOP)
        t_lost = time.monotonic()
        self.assert_fenced_then_moved(c, job, lost, pids, t_lost)
        # The agent runs again: it reports the fenced rank, starts nothing of attempt 1.
        c.agents[lost].signal(signal.SIGCONT)
        c.wait_nodes_ready([lost], timeout=30)
        self.assert_one_attempt_alive(c, job)
        self.assert_recovered(c, job, lost)

    def test_full_state_disk_neither_fences_nor_loses_ranks(self):
        """The agent's state directory fills up (a rank's log did it): renewing the lease
        needs no new space, so the rank is not fenced while its agent lives, and an agent
        restarted on the full disk re-adopts it."""
        c = self.cluster(n_agents=1)
        state = os.path.join(c.tmp, "n1")
        c.agents["n1"].terminate()
        with open(os.path.join(state, "agent-id")) as f:
            agent_id = f.read()
        self.mount_small_disk(state)
        # The same agent on a new disk: its identity moves with it.
        with open(os.path.join(state, "agent-id"), "w") as f:
            f.write(agent_id)
        c.start_agent("n1")
        c.wait_nodes_ready(["n1"])
        job, node = self.start_job(c, "fulldisk", steps=300)
        pids = axtest.workload_pids(c.marker, job.id, 1)
        axtest.fill_disk(state)
        time.sleep(2 * LEASE_MS / 1000.0)
        self.assertTrue(all(axtest.pid_alive(p) for p in pids.values()),
                        "a full state disk fenced the rank of a live agent")
        c.restart_agent("n1", signal.SIGKILL)
        c.wait_nodes_ready(["n1"])
        time.sleep(2 * LEASE_MS / 1000.0)
        self.assertTrue(all(axtest.pid_alive(p) for p in pids.values()),
                        "an agent restarted on a full state disk lost its rank")
        self.assertEqual(c.job(job.id)["attempt"], 1)

    def test_agent_restarted_within_lease_keeps_ranks(self):
        # The default lease (5 s): an agent restart, crash included, takes far less.
        c = self.cluster(lease_ms=5000, grace_ms=1000)
        job, node = self.start_job(c, "agentquick", steps=200)
        pids = axtest.workload_pids(c.marker, job.id, 1)
        c.restart_agent(node, signal.SIGKILL)
        c.wait_nodes_ready([node])
        # Past the lease the old agent last renewed: the new agent renews it.
        time.sleep(6.5)
        self.assertTrue(all(axtest.pid_alive(p) for p in pids.values()),
                        "ranks were fenced although their agent came back within the lease")
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 1)
        self.assertEqual(view["restarts"], 0)
        starts = [e for e in job.entries() if e["event"] == "start"]
        self.assertEqual({e["rank"]: e["pid"] for e in starts}, pids)


if __name__ == "__main__":
    axtest.main()
