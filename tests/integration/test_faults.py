# SPDX-License-Identifier: MIT
"""Fault tolerance (issue 3) with the real binaries: every failure mode of DESIGN.md §4
and §5 is injected into a running gang and the outcome is checked, not the mechanism:

- the job ends as it must (succeeded with the value of an uninterrupted run, or failed
  with a reason), with the attempt and restart counts the restart policy implies;
- a new attempt resumes from the last committed checkpoint;
- attempts never overlap in time (the attempt log every rank appends to), which is what
  lease fencing promises even when a node is cut off;
- daemons restarting disturb no rank (same pids, still attempt 1).

Controller leases are shortened (--lease-ms 2000 --grace-ms 500) when axctld has those
flags, so node-loss tests take seconds; deadlines follow the lease in effect."""

import os
import signal
import time
import unittest

import axtest

LEASE_MS = 2000
GRACE_MS = 500


def lease_s():
    if axtest.supports_flag(axtest.AXCTLD, "--lease-ms"):
        return (LEASE_MS + GRACE_MS) / 1000.0
    return 6.0  # the defaults of docs/PROTOCOL.md: 5000 + 1000 ms


class FaultsTest(axtest.ClusterTestCase):
    def cluster(self, n_agents=2):
        return self.start_cluster(n_agents, lease_ms=LEASE_MS, grace_ms=GRACE_MS)

    def attempt(self, view, n):
        for a in view.get("attempts", []):
            if a["attempt"] == n:
                return a
        self.fail("job %d has no attempt %d: %r" % (view["id"], n, view.get("attempts")))

    def starts(self, job, attempt):
        return [e for e in job.entries() if e["event"] == "start" and e["attempt"] == attempt]

    # ---- a rank dies --------------------------------------------------------------

    def test_rank_sigkill_resumes_from_last_checkpoint(self):
        c = self.cluster(2)
        job = c.work_job("kill", ranks=2, ranks_per_node=1, steps=60, step_ms=50,
                         checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        c.wait_running(job.id)
        self.wait_checkpoint(c, job, 10)
        pids = axtest.workload_pids(c.marker, job.id, 1)
        self.assertEqual(sorted(pids), [0, 1])
        os.kill(pids[0], signal.SIGKILL)  # rank 0 is the checkpoint writer: nothing after this
        committed = job.committed_steps()[-1]

        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 2)
        self.assertEqual(view["restarts"], 1)
        first = self.attempt(view, 1)
        self.assertEqual(first["end_reason"], "rank_exit")
        self.assertEqual(self.attempt(view, 2)["resume_step"], committed)
        starts = self.starts(job, 2)
        self.assertEqual(len(starts), 2, starts)
        self.assertEqual({e["resume_step"] for e in starts}, {committed})
        self.assert_no_overlap(job)
        killed = [r for r in view["ranks"] if r["attempt"] == 1 and r["rank"] == 0]
        if killed:  # the job view may show only the latest attempt's ranks
            self.assertEqual(killed[0]["signal"], signal.SIGKILL)

    def test_fatal_exit_code_fails_without_restart(self):
        c = self.cluster(2)
        job = c.work_job("fatal", ranks=2, ranks_per_node=1, steps=40, step_ms=20,
                         args=["--exit-at", "5:42", "--fault-rank", "0"],
                         restart={"max_restarts": 3, "fatal_exit_codes": [42]})
        job.id = c.submit(job.spec)["id"]
        view = c.wait_job(job.id, timeout=40)
        self.assertEqual(view["state"], "failed", view.get("reason"))
        self.assertEqual(view["exit_code"], 42)
        self.assertEqual(view["attempt"], 1)
        self.assertEqual(view["restarts"], 0)
        self.assertTrue(view["reason"])
        self.assertEqual(len(self.starts(job, 2)), 0, "a fatal exit must not start attempt 2")
        self.assert_no_ranks_alive(c, job.id)

    def test_retry_exit_code_restarts_without_spending_budget(self):
        c = self.cluster(2)
        # max_restarts 0: if the retry spent budget the job would fail instead.
        job = c.work_job("retry", ranks=2, ranks_per_node=1, steps=30, step_ms=20,
                         checkpoint_every=5, args=["--exit-at", "12:75@1", "--fault-rank", "1"],
                         restart={"max_restarts": 0, "retry_exit_codes": [75]})
        job.id = c.submit(job.spec)["id"]
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 2)
        self.assertEqual(view["restarts"], 0)
        self.assert_no_overlap(job)

    def test_rank_that_cannot_start_fails_the_job_at_once_without_blame(self):
        c = self.cluster(2)
        cases = (("nocmd", {"command": ["/nonexistent/axctl-test-program"]}, "cannot execute"),
                 ("noworkdir", {"workdir": "/nonexistent/axctl-test-dir"},
                  "cannot change to working directory"))
        for name, spec, logged in cases:
            job = c.work_job(name, ranks=2, ranks_per_node=1, spec=spec)
            job.id = c.submit(job.spec)["id"]
            view = c.wait_job(job.id, timeout=30)
            self.assertEqual(view["state"], "failed", view)
            self.assertEqual((view["attempt"], view["restarts"]), (1, 0))
            self.assertIn("could not start", view["reason"])
            first = self.attempt(view, 1)
            self.assertEqual((first["end_reason"], first["failure_class"], first["blamed_node"]),
                             ("start_failed", "start", None))
            self.assertIn(logged, c.logs(job.id, 0) + c.logs(job.id, 1))
        self.assertEqual({n["state"] for n in c.nodes()}, {"ready"})

    def test_max_restarts_exhausted_fails_with_reason(self):
        c = self.cluster(2)
        job = c.work_job("exhaust", ranks=2, ranks_per_node=1, steps=40, step_ms=20,
                         checkpoint_every=100, args=["--crash-at", "3", "--fault-rank", "1"],
                         restart={"max_restarts": 2, "backoff_initial_s": 0})
        job.id = c.submit(job.spec)["id"]
        view = c.wait_job(job.id, timeout=60)
        self.assertEqual(view["state"], "failed")
        self.assertEqual(view["attempt"], 3)
        self.assertEqual(view["restarts"], 2)
        self.assertTrue(view["reason"], "a job that ran out of restarts says so")
        self.assertEqual(len({e["attempt"] for e in job.entries()}), 3)
        self.assert_no_overlap(job)
        self.assert_no_ranks_alive(c, job.id)

    def test_hang_restarts_without_blame(self):
        c = self.cluster(2)
        # Rank 0 (the checkpoint writer) hangs after committing step 5: the other rank
        # carries on (axwork ranks are independent), so only the hung one stalls.
        job = c.work_job("hang", ranks=2, ranks_per_node=1, steps=100, step_ms=50,
                         checkpoint_every=5, args=["--hang-at", "8@1", "--fault-rank", "0"],
                         hang_timeout_s=2)
        job.id = c.submit(job.spec)["id"]
        ranks = c.wait_running(job.id)
        hung_node = [r["node"] for r in ranks if r["rank"] == 0][0]
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 2)
        first = self.attempt(view, 1)
        self.assertEqual(first["end_reason"], "hang")
        # A hang is no evidence against the hardware: the job's failure, nobody blamed.
        self.assertEqual(first["failure_class"], "job")
        self.assertIsNone(first["blamed_node"])
        self.assertIn("rank 0", first["detail"])
        self.assertIn(hung_node, [n["name"] for n in c.nodes() if n["state"] == "ready"])
        self.assertEqual(self.attempt(view, 2)["resume_step"], 5)
        self.assert_no_overlap(job)

    # ---- a node is lost -----------------------------------------------------------

    def node_of(self, ranks):
        nodes = {r["node"] for r in ranks}
        self.assertEqual(len(nodes), 1, ranks)
        return nodes.pop()

    def test_node_partition_fences_and_restarts_elsewhere(self):
        c = self.cluster(2)
        job = c.work_job("partition", ranks=2, ranks_per_node=2, steps=120, step_ms=50,
                         checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        lost = self.node_of(c.wait_running(job.id))
        other = "n2" if lost == "n1" else "n1"
        self.wait_checkpoint(c, job, 5)
        pids = axtest.workload_pids(c.marker, job.id, 1)
        c.cut_node(lost)
        t_cut = time.monotonic()

        # Self-fencing: the cut-off agent kills its ranks within its lease.
        axtest.wait_for(lambda: not any(axtest.pid_alive(p) for p in pids.values()),
                        lease_s() + 3, "ranks on the cut-off node %s to be fenced" % lost)
        fenced_after = time.monotonic() - t_cut
        ranks = c.wait_running(job.id, timeout=lease_s() + 20, attempt=2)
        self.assertEqual(self.node_of(ranks), other)
        lost_view = [n for n in c.nodes() if n["name"] == lost][0]
        self.assertEqual(lost_view["state"], "down")
        axtest.log("fenced after %.2fs, attempt 2 running after %.2fs"
                   % (fenced_after, time.monotonic() - t_cut))

        c.heal_node(lost)
        c.wait_nodes_ready([lost], timeout=30)
        # The healed node must not bring attempt 1 back.
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 2)
        first = self.attempt(view, 1)
        self.assertEqual(first["end_reason"], "node_lost")
        self.assertEqual(first["failure_class"], "node")
        self.assertEqual(first["blamed_node"], lost)
        self.assertEqual(len(self.starts(job, 1)), 2)
        self.assert_no_overlap(job)

    def test_node_crash_agent_and_ranks_killed(self):
        c = self.cluster(2)
        job = c.work_job("crash", ranks=2, ranks_per_node=2, steps=100, step_ms=50,
                         checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        lost = self.node_of(c.wait_running(job.id))
        other = "n2" if lost == "n1" else "n1"
        self.wait_checkpoint(c, job, 5)
        pids = axtest.workload_pids(c.marker, job.id, 1)
        c.agents[lost].kill()
        for pid in pids.values():
            os.kill(pid, signal.SIGKILL)

        ranks = c.wait_running(job.id, timeout=lease_s() + 20, attempt=2)
        self.assertEqual(self.node_of(ranks), other)
        c.start_agent(lost)
        c.wait_nodes_ready([lost], timeout=30)
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 2)
        self.assertEqual(self.attempt(view, 1)["end_reason"], "node_lost")
        self.assertEqual(len(self.starts(job, 1)), 2)
        self.assert_no_overlap(job)

    # ---- daemons restart ----------------------------------------------------------

    def test_agent_restart_keeps_ranks(self):
        c = self.start_cluster(2)  # default lease: the restart is well within it
        job = c.work_job("agentrestart", ranks=2, ranks_per_node=1, steps=80, step_ms=50,
                         checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        ranks = c.wait_running(job.id)
        pids = axtest.workload_pids(c.marker, job.id, 1)
        node = [r["node"] for r in ranks if r["rank"] == 0][0]
        status = c.agents[node].terminate()
        self.assertEqual(status, 0, "axagent should exit 0 on SIGTERM")
        self.assertTrue(all(axtest.pid_alive(p) for p in pids.values()),
                        "stopping the agent killed ranks")
        c.start_agent(node)
        c.wait_nodes_ready([node])
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 1)
        self.assertEqual(view["restarts"], 0)
        self.assertEqual(len(self.starts(job, 1)), 2, "no rank may be started twice")
        self.assertEqual({e["rank"]: e["pid"] for e in self.starts(job, 1)}, pids)

    def test_agent_crash_readopts_ranks(self):
        c = self.start_cluster(2)
        job = c.work_job("agentcrash", ranks=2, ranks_per_node=1, steps=80, step_ms=50,
                         checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        ranks = c.wait_running(job.id)
        pids = axtest.workload_pids(c.marker, job.id, 1)
        node = [r["node"] for r in ranks if r["rank"] == 1][0]
        c.restart_agent(node, signal.SIGKILL)
        c.wait_nodes_ready([node])
        self.assertTrue(all(axtest.pid_alive(p) for p in pids.values()),
                        "an agent crash killed ranks")
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 1)
        self.assertEqual({e["rank"]: e["pid"] for e in self.starts(job, 1)}, pids)

    def test_ranks_finish_while_agent_down(self):
        """The exit of a rank whose agent is down must be recorded where the restarted
        agent finds it: the job succeeds, it is not lost."""
        c = self.start_cluster(2)
        job = c.work_job("agentdown", ranks=2, ranks_per_node=1, steps=30, step_ms=50,
                         checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        ranks = c.wait_running(job.id)
        node = [r["node"] for r in ranks if r["rank"] == 0][0]
        pids = axtest.workload_pids(c.marker, job.id, 1)
        c.agents[node].kill()
        axtest.wait_for(lambda: not axtest.pid_alive(pids[0]), 10, "rank 0 to finish")
        c.start_agent(node)
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 1)
        rank0 = [r for r in view["ranks"] if r["rank"] == 0 and r["attempt"] == 1][0]
        self.assertEqual(rank0["exit_code"], 0)

    def test_controller_sigkill_during_run_disturbs_nothing(self):
        c = self.start_cluster(2)
        job = c.work_job("ctlkill", ranks=2, ranks_per_node=1, steps=80, step_ms=50,
                         checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        c.wait_running(job.id)
        pids = axtest.workload_pids(c.marker, job.id, 1)
        c.kill_controller()
        # Stay down for a while: the ranks keep stepping (within the agents' lease).
        steps_then = len(job.entries())
        axtest.wait_for(lambda: len(job.entries()) >= steps_then + 20, 10,
                        "ranks to keep stepping while the controller is down")
        self.assertTrue(all(axtest.pid_alive(p) for p in pids.values()))
        c.restart_controller()
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 1)
        self.assertEqual(view["restarts"], 0)
        self.assertEqual({e["rank"]: e["pid"] for e in self.starts(job, 1)}, pids)


    def test_partition_across_controller_restart(self):
        """A node cut off just before the controller crashes must still be declared lost
        by the new controller (it cannot trust leases it never saw), and the job must
        move only after the old ranks have fenced themselves."""
        c = self.cluster(2)
        job = c.work_job("cutrestart", ranks=2, ranks_per_node=2, steps=120, step_ms=50,
                         checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        lost = self.node_of(c.wait_running(job.id))
        other = "n2" if lost == "n1" else "n1"
        self.wait_checkpoint(c, job, 5)
        c.cut_node(lost)
        c.restart_controller()
        ranks = c.wait_running(job.id, timeout=lease_s() + 20, attempt=2)
        self.assertEqual(self.node_of(ranks), other)
        c.heal_node(lost)
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 2)
        self.assertEqual(self.attempt(view, 1)["end_reason"], "node_lost")
        self.assert_no_overlap(job)

    def test_checkpoint_committed_while_controller_down_is_used(self):
        """Checkpoints committed while the controller is down reach it after the restart:
        rank 0 hangs right after committing step 20, which happened during the outage,
        so attempt 2 must resume from 20."""
        c = self.start_cluster(2)
        job = c.work_job("ckptdown", ranks=2, ranks_per_node=1, steps=60, step_ms=50,
                         checkpoint_every=5, args=["--hang-at", "23@1", "--fault-rank", "0"],
                         hang_timeout_s=2)
        job.id = c.submit(job.spec)["id"]
        c.wait_running(job.id)
        self.wait_checkpoint(c, job, 5)
        c.kill_controller()
        axtest.wait_for(lambda: 20 in job.committed_steps(), 10,
                        "checkpoint 20 committed while the controller is down")
        c.restart_controller()
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 2)
        self.assertEqual(self.attempt(view, 1)["end_reason"], "hang")
        self.assertEqual(self.attempt(view, 2)["resume_step"], 20)
        self.assert_no_overlap(job)


if __name__ == "__main__":
    axtest.main()
