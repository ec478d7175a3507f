# SPDX-License-Identifier: MIT
"""Chaos (issue 3): N jobs on 3 agents while the harness SIGKILLs ranks, crashes and
restarts agents and the controller, cuts one node off the network for longer than its
lease, and some jobs hang on purpose. At the end:

- no acknowledged job is lost (every submit that got a 2xx answer is listed);
- every job succeeded, and every rank printed the value of an uninterrupted run;
- attempts of a job never overlapped in time, and no rank was started twice within one
  attempt (the attempt logs all ranks append to);
- no rank process is left (checked by the harness at teardown).

Size: AXCTL_CHAOS_SIZE jobs (default 4), AXCTL_CHAOS_SECONDS of fault injection (default
20). Reproduce a run with AXCTL_CHAOS_SEED (the seed is printed first). The sequence of
faults depends on timing too, so a seed reproduces the plan, not every interleaving."""

import http.client
import os
import random
import signal
import time
import unittest

import axtest

LEASE_MS = 2000
GRACE_MS = 500

# (ranks, ranks_per_node): every shape fits on two nodes, so one node may be down.
SHAPES = [(1, None), (2, 1), (2, 2), (4, 2)]


class Chaos:
    def __init__(self, test, cluster, rng):
        self.test = test
        self.c = cluster
        self.rng = rng
        self.timeline = []
        self.t0 = time.monotonic()
        self.cut = None  # (node, heal at)
        self.counts = {}

    def note(self, what):
        line = "%7.2fs %s" % (time.monotonic() - self.t0, what)
        self.timeline.append(line)
        axtest.log("chaos: " + line)

    def count(self, kind):
        self.counts[kind] = self.counts.get(kind, 0) + 1

    # -- actions ----------------------------------------------------------------------

    def kill_rank(self):
        procs = [p for p in axtest.rank_processes(self.c.marker)
                 if p["exe"] == os.path.realpath(axtest.AXWORK)]
        if not procs:
            return
        p = self.rng.choice(procs)
        try:
            os.kill(p["pid"], signal.SIGKILL)
        except ProcessLookupError:
            return
        self.count("kill_rank")
        self.note("SIGKILL rank %d of job %s attempt %d (pid %d)"
                  % (p["rank"], p["job"], p["attempt"], p["pid"]))

    def crash_agent(self):
        node = self.rng.choice(sorted(self.c.agents))
        if self.cut and self.cut[0] == node:
            return
        down_s = self.rng.uniform(0.1, 0.8)  # back well within the lease
        self.c.agents[node].kill()
        self.note("SIGKILL agent %s for %.2fs" % (node, down_s))
        time.sleep(down_s)  # the outage itself is the fault being injected
        self.c.start_agent(node)
        self.count("crash_agent")

    def crash_controller(self):
        self.note("SIGKILL controller")
        self.c.restart_controller()
        self.count("crash_controller")
        self.note("controller back at %s" % self.c.url)

    def cut_node(self):
        if self.cut:
            return
        node = self.rng.choice(sorted(self.c.agents))
        hold = self.rng.uniform(1.5, 3.0) * (LEASE_MS + GRACE_MS) / 1000.0
        self.c.cut_node(node)
        self.cut = (node, time.monotonic() + hold)
        self.count("cut_node")
        self.note("cut %s off for %.1fs" % (node, hold))

    def heal_if_due(self, force=False):
        if self.cut and (force or time.monotonic() >= self.cut[1]):
            self.c.heal_node(self.cut[0])
            self.note("healed %s" % self.cut[0])
            self.cut = None

    def step(self):
        self.heal_if_due()
        action = self.rng.choices(
            [self.kill_rank, self.crash_agent, self.crash_controller, self.cut_node],
            weights=[5, 2, 1, 1])[0]
        action()


class ChaosTest(axtest.ClusterTestCase):
    def test_chaos(self):
        size = int(os.environ.get("AXCTL_CHAOS_SIZE", "4"))
        seconds = float(os.environ.get("AXCTL_CHAOS_SECONDS", "20"))
        seed = int(os.environ.get("AXCTL_CHAOS_SEED", str(random.SystemRandom().randrange(1 << 32))))
        print("chaos seed %d (AXCTL_CHAOS_SEED=%d AXCTL_CHAOS_SIZE=%d to reproduce)"
              % (seed, seed, size), flush=True)
        axtest.log("chaos seed %d size %d" % (seed, size))
        rng = random.Random(seed)

        c = self.start_cluster(3, lease_ms=LEASE_MS, grace_ms=GRACE_MS)
        chaos = Chaos(self, c, rng)
        jobs = []
        for i in range(size):
            ranks, rpn = rng.choice(SHAPES)
            args = []
            if rng.random() < 0.3:
                args = ["--hang-at", str(rng.randrange(10, 40)) + "@1", "--fault-rank", "0"]
            job = c.work_job("chaos%d" % i, ranks=ranks, ranks_per_node=rpn,
                             steps=rng.randrange(60, 140), step_ms=50, checkpoint_every=5,
                             args=args, seed=rng.randrange(1 << 32), hang_timeout_s=3,
                             restart={"max_restarts": 1000, "backoff_initial_s": 0,
                                      "max_failures_without_progress": 1000},
                             spec={"resources": {"cpus": 0}})
            job.key = "chaos-%d-%d" % (seed, i)
            jobs.append(job)
        pending = list(jobs)
        submit_by = {id(j): chaos.t0 + rng.uniform(0, seconds / 2) for j in jobs}

        # Fault injection phase: submit jobs over its first half, inject a fault every
        # 0.5-2 s. Submits retry with their Idempotency-Key until acknowledged, through
        # controller crashes, as a careful client would.
        end = chaos.t0 + seconds * axtest.TIME_SCALE
        next_fault = time.monotonic() + rng.uniform(0.5, 2.0)
        while time.monotonic() < end or pending:
            now = time.monotonic()
            for job in list(pending):
                if now >= submit_by[id(job)]:
                    try:
                        job.id = c.submit(job.spec, key=job.key)["id"]
                        pending.remove(job)
                        chaos.note("submitted %s as job %d (%d ranks)" % (job.key, job.id, job.spec["ranks"]))
                    except (OSError, axtest.ApiError, http.client.HTTPException) as e:
                        chaos.note("submit %s not acknowledged yet: %s" % (job.key, e))
            if now >= next_fault and now < end:
                chaos.step()
                next_fault = time.monotonic() + rng.uniform(0.5, 2.0)
            chaos.heal_if_due()
            time.sleep(0.05)  # pacing of the injection loop, not a wait for a condition
        chaos.heal_if_due(force=True)
        chaos.note("fault injection over: %r" % chaos.counts)

        # Quiesce: everything must converge and succeed. Random rank kills get nodes
        # blamed and, after a few, quarantined (as they should); an operator's undrain
        # returns them, so the quarantine path is exercised too.
        def undrain_quarantined():
            for n in c.nodes():
                if n["state"] in ("quarantined", "drained", "draining"):
                    chaos.note("undrain %s (was %s: %s)" % (n["name"], n["state"], n.get("reason")))
                    c.api_ok("POST", "/v1/nodes/%s/undrain" % n["name"])
            return True
        axtest.wait_for(undrain_quarantined, 30, "undrain of quarantined nodes")
        c.wait_nodes_ready(timeout=60)
        listed = {j["id"] for j in c.list_jobs()}
        for job in jobs:
            self.assertIn(job.id, listed, "acknowledged job %s (%d) lost" % (job.key, job.id))
        failures = []
        for job in jobs:
            try:
                view = c.wait_job(job.id, timeout=180)
            except axtest.Timeout as e:
                failures.append("job %d did not finish: %s" % (job.id, e))
                continue
            if view["state"] != "succeeded":
                failures.append("job %d %s: %s" % (job.id, view["state"], view.get("reason")))
                continue
            for rank in range(job.spec["ranks"]):
                values = axtest.final_values(c.logs(job.id, rank))
                if values != [job.expected]:
                    failures.append("job %d rank %d printed %r, want %s"
                                    % (job.id, rank, values, job.expected))
            entries = job.entries()
            for problem in axtest.check_no_overlap(entries):
                failures.append("job %d: %s" % (job.id, problem))
            starts = {}
            for e in entries:
                if e["event"] == "start":
                    key = (e["attempt"], e["rank"])
                    starts[key] = starts.get(key, 0) + 1
            for (attempt, rank), n in sorted(starts.items()):
                if n > 1:
                    failures.append("job %d attempt %d rank %d started %d times"
                                    % (job.id, attempt, rank, n))
            axtest.log("job %d: %d attempts, restarts %s" % (job.id, view["attempt"], view["restarts"]))
        if failures:
            print("chaos timeline (seed %d):\n%s" % (seed, "\n".join(chaos.timeline)), flush=True)
        self.assertEqual(failures, [], "chaos seed %d" % seed)


if __name__ == "__main__":
    axtest.main()
