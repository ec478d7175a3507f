# SPDX-License-Identifier: MIT
"""Jobs end to end on real agents (issue 2): a gang across two nodes with the rank
environment of DESIGN.md §6 and the right result, a failing rank's exit code, cancel
that leaves no process behind, and a controller crash that loses nothing and disturbs
no running rank."""

import json
import os
import signal
import unittest

import axtest


class JobsTest(axtest.ClusterTestCase):
    def test_four_ranks_on_two_nodes(self):
        c = self.start_cluster(2)
        job = c.work_job("gang", ranks=4, ranks_per_node=2, steps=20, step_ms=20,
                         checkpoint_every=5, print_env=True)
        path = os.path.join(job.dir, "spec.json")
        with open(path, "w") as f:
            json.dump(job.spec, f)
        p = c.cli("submit", "-f", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        job.id = int(p.stdout.split()[0])
        p = c.cli("wait", job.id, timeout=90)
        self.assertEqual(p.returncode, 0, "wait: %r %r" % (p.stdout, p.stderr))
        view = self.assert_succeeded_with_value(c, job)
        self.assertEqual(view["attempt"], 1)
        self.assertEqual(view["restarts"], 0)

        ranks = sorted(view["ranks"], key=lambda r: r["rank"])
        self.assertEqual([r["rank"] for r in ranks], [0, 1, 2, 3])
        self.assertTrue(all(r["state"] == "succeeded" for r in ranks), ranks)
        self.assertTrue(all(r["exit_code"] == 0 for r in ranks), ranks)
        nodes = {r["node"] for r in ranks}
        self.assertEqual(nodes, {"n1", "n2"})

        envs = [axtest.env_from_log(c.logs(job.id, r)) for r in range(4)]
        node_rank_of = {}
        local_ranks = {}
        for r, env in enumerate(envs):
            with self.subTest(rank=r):
                self.assertEqual(env["AXCTL_JOB_ID"], str(job.id))
                self.assertEqual(env["AXCTL_ATTEMPT"], "1")
                self.assertEqual(env["AXCTL_RANK"], str(r))
                self.assertEqual(env["AXCTL_WORLD_SIZE"], "4")
                self.assertEqual(env["AXCTL_LOCAL_WORLD_SIZE"], "2")
                self.assertEqual(env["AXCTL_NUM_NODES"], "2")
                self.assertEqual(env["AXCTL_CHECKPOINT_DIR"], job.checkpoint_dir)
                self.assertEqual(env.get("AXCTL_RESUME_STEP", ""), "")
                self.assertTrue(env.get("AXCTL_PROGRESS_FILE"))
                self.assertTrue(env.get("AXCTL_COORDINATOR"))
                node = ranks[r]["node"]
                node_rank = int(env["AXCTL_NODE_RANK"])
                local_rank = int(env["AXCTL_LOCAL_RANK"])
                # One node rank per node, and ranks numbered contiguously per node as
                # torchrun and JAX expect: rank = node_rank * local_world + local_rank.
                self.assertEqual(node_rank_of.setdefault(node, node_rank), node_rank)
                self.assertEqual(r, node_rank * 2 + local_rank)
                local_ranks.setdefault(node, set()).add(local_rank)
        self.assertEqual(sorted(node_rank_of.values()), [0, 1])
        self.assertEqual(local_ranks, {n: {0, 1} for n in ("n1", "n2")})
        coordinators = {env["AXCTL_COORDINATOR"] for env in envs}
        self.assertEqual(len(coordinators), 1, "every rank must get the same coordinator")
        self.assertEqual(job.committed_steps(), [5, 10, 15, 20])
        self.assert_no_ranks_alive(c, job.id)

    def test_rank_exit_code_fails_job(self):
        c = self.start_cluster(2)
        job = c.work_job("exit3", ranks=2, ranks_per_node=1, steps=50, step_ms=20,
                         args=["--exit-at", "5:3", "--fault-rank", "1"],
                         restart={"max_restarts": 0})
        job.id = c.submit(job.spec)["id"]
        p = c.cli("wait", job.id, timeout=60)
        self.assertEqual(p.returncode, 1, "wait: %r %r" % (p.stdout, p.stderr))
        p = c.cli("status", job.id, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        view = json.loads(p.stdout)
        self.assertEqual(view["state"], "failed")
        self.assertEqual(view["exit_code"], 3)
        self.assertTrue(view["reason"], "a failed job says why")
        rank1 = [r for r in view["ranks"] if r["rank"] == 1 and r["attempt"] == view["attempt"]]
        self.assertEqual(len(rank1), 1, view["ranks"])
        self.assertEqual(rank1[0]["exit_code"], 3)
        self.assertEqual(rank1[0]["state"], "failed")
        # Gang semantics: the healthy rank was stopped, not left running.
        self.assert_no_ranks_alive(c, job.id)
        rank0 = [r for r in view["ranks"] if r["rank"] == 0 and r["attempt"] == view["attempt"]][0]
        self.assertIn(rank0["state"], ("killed", "failed"), rank0)

    def test_cancel_running_job_leaves_no_process(self):
        c = self.start_cluster(2)
        job = c.work_job("cancel", ranks=4, ranks_per_node=2, steps=10000, step_ms=50)
        job.id = c.submit(job.spec)["id"]
        ranks = c.wait_running(job.id)
        pids = [r["pid"] for r in ranks]
        self.assertEqual(len(pids), 4)
        self.assertTrue(all(axtest.pid_alive(pid) for pid in pids), pids)
        self.assertEqual(len(axtest.rank_processes(c.marker, job.id)), 4)

        p = c.cli("cancel", job.id)
        self.assertEqual(p.returncode, 0, p.stderr)
        view = c.wait_job(job.id, "cancelled", timeout=30)
        self.assertEqual(view["state"], "cancelled")
        axtest.wait_for(lambda: not any(axtest.pid_alive(pid) for pid in pids), 15,
                        "the cancelled job's ranks %r to die" % pids)
        self.assert_no_ranks_alive(c, job.id)
        p = c.cli("wait", job.id)
        self.assertEqual(p.returncode, 3, p.stderr)
        p = c.cli("cancel", job.id)
        self.assertEqual(p.returncode, 1, "cancelling a cancelled job: %r" % p.stderr)

    def test_controller_restart_keeps_jobs(self):
        c = self.start_cluster(2)
        done = c.work_job("done", steps=2, step_ms=1)
        done.id = c.submit(done.spec)["id"]
        failed = c.work_job("failed", steps=20, step_ms=1, args=["--exit-at", "2:3"],
                            restart={"max_restarts": 0})
        failed.id = c.submit(failed.spec)["id"]
        cancelled = c.work_job("cancelled", steps=10000, step_ms=50)
        cancelled.id = c.submit(cancelled.spec)["id"]
        c.wait_job(done.id, timeout=30)
        c.wait_job(failed.id, timeout=30)
        c.wait_running(cancelled.id)
        c.cancel(cancelled.id)
        c.wait_job(cancelled.id, timeout=30)

        running = c.work_job("running", ranks=2, ranks_per_node=1, steps=80, step_ms=50)
        running.id = c.submit(running.spec, key="restart-key")["id"]
        pids = [r["pid"] for r in c.wait_running(running.id)]

        before = {j["id"]: j for j in c.api_ok("GET", "/v1/jobs")["jobs"]}
        self.assertEqual(before[done.id]["state"], "succeeded")
        self.assertEqual(before[failed.id]["state"], "failed")
        self.assertEqual(before[cancelled.id]["state"], "cancelled")

        c.restart_controller()
        after = {j["id"]: j for j in c.api_ok("GET", "/v1/jobs")["jobs"]}
        self.assertEqual(sorted(after), sorted(before))
        for job_id in (done.id, failed.id, cancelled.id):
            for key in ("state", "name", "attempt", "exit_code", "created_at"):
                self.assertEqual(after[job_id][key], before[job_id][key], (job_id, key))
        self.assertIn(after[running.id]["state"], ("running", "starting"))
        # The idempotency key survives too.
        again = c.submit(running.spec, key="restart-key")
        self.assertEqual(again["id"], running.id)

        view = self.assert_succeeded_with_value(c, running, timeout=60)
        self.assertEqual(view["attempt"], 1, "a controller restart must not restart ranks")
        self.assertEqual(sorted(r["pid"] for r in view["ranks"] if r["attempt"] == 1), sorted(pids))
        starts = [e for e in running.entries() if e["event"] == "start"]
        self.assertEqual(len(starts), 2, "each rank started exactly once")
        # A job submitted after the restart gets a new id and runs.
        fresh = c.work_job("fresh", steps=2, step_ms=1)
        fresh.id = c.submit(fresh.spec)["id"]
        self.assertNotIn(fresh.id, before)
        self.assert_succeeded_with_value(c, fresh, timeout=30)


    def test_acknowledged_submits_survive_controller_crash(self):
        """Every submit answered 2xx is durable: SIGKILL right after the last answer."""
        c = self.start_cluster(1)
        ids, specs = [], []
        for i in range(20):
            specs.append(c.work_job("durable%d" % i, steps=1, step_ms=1).spec)
            ids.append(c.submit(specs[i], key="durable-%d" % i)["id"])
        self.assertEqual(len(set(ids)), 20)
        c.restart_controller()
        listed = {j["id"]: j for j in c.list_jobs()}
        self.assertEqual(sorted(i for i in listed if i in ids), sorted(ids))
        for i, job_id in enumerate(ids):
            again = c.submit(specs[i], key="durable-%d" % i)
            self.assertEqual(again["id"], job_id, "idempotency key %d forgotten" % i)
        for job_id in ids:
            self.assertEqual(c.wait_job(job_id, timeout=60)["state"], "succeeded")


if __name__ == "__main__":
    axtest.main()
