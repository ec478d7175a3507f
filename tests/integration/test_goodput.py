#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Goodput with the real controller, agents and workload: a rank that crashes after a
checkpoint shows lost work, restart and two start-ups, every second of the job in one
bucket; a partitioned node shows its detection time; the same figures in the job view,
GET /v1/goodput (windows, projects, bad input), /metrics, `axctl status` and `axctl
goodput`, and again after the controller restarts (store migration 7); the fleet's and
projects' figures stay the same once ended jobs leave memory and after a restart (store
migration 8)."""

import os
import re
import sys
import time

import axtest

LEASE_MS = 2000
GRACE_MS = 500
BUCKETS = ("productive", "queueing", "startup", "lost_work", "detection", "restart", "hang",
           "preemption", "checkpoint")


class GoodputTest(axtest.ClusterTestCase):
    def assert_accounted(self, view):
        """Every second from submission to the end lies in exactly one bucket."""
        g = view["goodput"]
        secs = g["seconds"]
        self.assertEqual(set(secs), set(BUCKETS))
        self.assertAlmostEqual(sum(secs.values()), g["elapsed_s"], delta=0.005)
        self.assertAlmostEqual(g["allocated_s"], g["elapsed_s"] - secs["queueing"], delta=0.005)
        created = axtest.parse_time(view["created_at"])
        end = axtest.parse_time(view["finished_at"])
        self.assertAlmostEqual(g["elapsed_s"], end - created, delta=0.005)
        self.assertAlmostEqual(g["ratio"], secs["productive"] / g["allocated_s"], delta=1e-6)
        at = created
        for seg in g["timeline"]:
            self.assertAlmostEqual(axtest.parse_time(seg["start"]), at, delta=0.0015, msg=seg)
            at = axtest.parse_time(seg["end"])
        self.assertAlmostEqual(at, end, delta=0.0015)
        return g

    def test_crash_after_checkpoint_loses_work_and_restarts(self):
        c = self.start_cluster(2)
        # A checkpoint every 3 s; rank 0 dies 1.8 s after the one at step 20.
        job = c.work_job("crash", ranks=2, ranks_per_node=1, steps=70, step_ms=150,
                         checkpoint_every=20, args=["--crash-at", "32@1", "--fault-rank", "0"],
                         restart={"max_restarts": 3, "backoff_initial_s": 0})
        job.id = c.submit(job.spec)["id"]
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual(view["attempt"], 2)
        g = self.assert_accounted(view)
        spans = axtest.goodput_by_attempt(g)
        axtest.log("buckets %r" % g["seconds"])
        # Work after the step-20 checkpoint of attempt 1 was thrown away; attempt 2 ran to
        # the end, so all its work counts.
        self.assertGreater(spans[1].get("lost_work", 0), 0.1, spans)
        self.assertLess(spans[1]["lost_work"], 3.0, spans)
        self.assertGreater(spans[1].get("productive", 0), 1.5, spans)
        self.assertNotIn("lost_work", spans[2], spans)
        self.assertGreater(spans[2].get("productive", 0), 2.0, spans)  # 50 steps of 0.15 s
        for n in (1, 2):
            self.assertGreater(spans[n].get("startup", 0), 0, spans)
        self.assertGreaterEqual(g["seconds"]["restart"], 0)
        self.assertEqual(g["seconds"]["hang"] + g["seconds"]["preemption"], 0)
        self.assertTrue(0 < g["ratio"] < 1, g)
        adv = g["checkpoint_advice"]
        self.assertAlmostEqual(adv["interval_s"], 3.0, delta=1.0)  # seen through 1 s syncs
        self.assertIsNotNone(adv["mtbf_s"])  # one interruption in the fleet
        self.assertEqual(adv["mtbf_source"], "fleet")

        # The summary view carries the figure too; the report agrees with the view.
        listed = [j for j in c.list_jobs() if j["id"] == job.id][0]
        self.assertAlmostEqual(listed["goodput"]["ratio"], g["ratio"], delta=1e-6)
        self.assertNotIn("timeline", listed["goodput"])
        report = c.api_ok("GET", "/v1/goodput?timeline=1")
        row = [j for j in report["jobs"] if j["id"] == job.id][0]
        self.assertEqual(row["accelerators"], 2)  # two ranks without accelerators
        self.assertAlmostEqual(row["ratio"], g["ratio"], delta=1e-6)
        self.assertEqual([s["bucket"] for s in row["timeline"]], [s["bucket"] for s in g["timeline"]])
        project = [p for p in report["projects"] if p["project"] == "default"][0]
        self.assertEqual(project["jobs"], 1)
        self.assertAlmostEqual(project["elapsed_s"], 2 * g["elapsed_s"], delta=0.01)
        self.assertAlmostEqual(report["fleet"]["seconds"]["lost_work"], 2 * g["seconds"]["lost_work"], delta=0.01)
        self.assertEqual(report["fleet"]["interruptions"], 1)
        # Windows and filters.
        later = c.api_ok("GET", "/v1/goodput?since=0s")  # from now: the job is over
        self.assertEqual((later["fleet"]["elapsed_s"], later["jobs"]), (0, []))
        half = c.api_ok("GET", "/v1/goodput?since=%ds" % 3)
        self.assertLessEqual(half["fleet"]["elapsed_s"], project["elapsed_s"])
        none = c.api_ok("GET", "/v1/goodput?project=other")
        self.assertEqual((none["jobs"], none["projects"]), ([], []))
        for bad in ("yesterday", "5x", "2026-13-01T00:00:00Z", "-5m", "2026-01-01T00:00:00"):
            st, ans, _ = c.api("GET", "/v1/goodput?since=" + bad)
            self.assertEqual(st, 400, (bad, ans))
            self.assertEqual((ans["error"]["code"], ans["error"]["field"]), ("bad_request", "since"))

        metrics = c.api("GET", "/metrics")[1]
        m = re.search(r'^axctl_goodput_accelerator_seconds\{project="default",bucket="lost_work"\} ([0-9.]+)$',
                      metrics, re.M)
        self.assertTrue(m, metrics)
        self.assertGreater(float(m.group(1)), 0.2)
        self.assertRegex(metrics, r'(?m)^axctl_goodput_ratio\{project="default"\} 0\.\d+$')

        p = c.cli("status", job.id)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"(?m)^goodput: +%.1f%% \(" % (g["ratio"] * 100))
        self.assertRegex(p.stdout, r"(?m)^badput: .*lost_work \d")
        p = c.cli("goodput")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"(?m)^%d +crash +default +succeeded +%.1f%%" % (job.id, g["ratio"] * 100))
        self.assertRegex(p.stdout, r"(?m)^default +1 ")
        p = c.cli("goodput", "--since", "soon")
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("since", p.stderr)

        # What the figures come from is durable: the same after a restart.
        c.restart_controller()
        again = c.job(job.id)["goodput"]
        self.assertEqual(again["seconds"], g["seconds"])
        self.assertEqual(again["timeline"], g["timeline"])

    def test_checkpoint_cost_and_advice(self):
        c = self.start_cluster(1)
        # Each checkpoint stops the steps for 3 s after 2 s of steps; one crash gives the
        # fleet a failure rate. Steps are seen at 1 s syncs: one stall is measured to
        # about a second either way.
        job = c.work_job("slowckpt", ranks=1, steps=125, step_ms=50, checkpoint_every=40,
                         args=["--checkpoint-ms", "3000", "--crash-at", "122@1"],
                         restart={"max_restarts": 3, "backoff_initial_s": 0})
        job.id = c.submit(job.spec)["id"]
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        g = self.assert_accounted(view)
        adv = g["checkpoint_advice"]
        axtest.log("buckets %r advice %r" % (g["seconds"], adv))
        self.assertIsNotNone(adv["cost_s"], adv)
        self.assertAlmostEqual(adv["cost_s"], 3.0, delta=1.2)
        # The stalls after the commits of steps 40 and 80 at least, each seen between two
        # advances of the step.
        self.assertGreater(g["seconds"]["checkpoint"], 2 * 3.0 - 2.4)
        self.assertAlmostEqual(adv["interval_s"], 5.0, delta=1.5)
        self.assertEqual(adv["mtbf_source"], "fleet")
        self.assertAlmostEqual(adv["advised_interval_s"], (2 * adv["cost_s"] * adv["mtbf_s"]) ** 0.5,
                               delta=1e-6)
        for k in ("expected_goodput_current", "expected_goodput_advised"):
            self.assertTrue(0 <= adv[k] <= 1, adv)
        p = c.cli("status", job.id)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"(?m)^advice: +checkpoint every \S+ now \(expected goodput "
                                   r"\d+\.\d%\); advised every \S+ \(expected \d+\.\d%\)$")

    def test_partition_counts_detection(self):
        c = self.start_cluster(2, lease_ms=LEASE_MS, grace_ms=GRACE_MS)
        job = c.work_job("cut", ranks=2, ranks_per_node=2, steps=150, step_ms=60,
                         checkpoint_every=50)
        job.id = c.submit(job.spec)["id"]
        ranks = c.wait_running(job.id)
        ckpt = self.wait_checkpoint(c, job, 10)["step"]

        def top_step():
            view = c.job(job.id)
            self.assertEqual(view["last_checkpoint"]["step"], ckpt)  # no newer one yet
            return max(r["step"] or 0 for r in view["ranks"])

        # Cut the node once a sync after the checkpoint's has shown more work, so that
        # work after the checkpoint is known to the controller and lost with the node.
        seen = top_step()
        axtest.wait_for(lambda: top_step() > seen, 10, "progress after checkpoint %d" % ckpt,
                        interval=0.02)
        c.cut_node(ranks[0]["node"])
        c.wait_running(job.id, timeout=30, attempt=2)
        c.heal_node(ranks[0]["node"])
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        g = self.assert_accounted(view)
        spans = axtest.goodput_by_attempt(g)
        axtest.log("buckets %r" % g["seconds"])
        # From the node's last sync to the verdict: about lease + grace, less a sync.
        detection = spans[1].get("detection", 0)
        self.assertGreater(detection, (LEASE_MS + GRACE_MS) / 1000.0 - 1.2, spans)
        self.assertLess(detection, (LEASE_MS + GRACE_MS) / 1000.0 + 1.5, spans)
        self.assertGreater(spans[1].get("lost_work", 0), 0, spans)

    def test_figures_survive_retirement_and_restart(self):
        c = self.start_cluster(1, controller_args=["--job-retention-s", "1"])
        job = c.work_job("retire", ranks=2, ranks_per_node=2, steps=30, step_ms=50,
                         checkpoint_every=10)
        job.id = c.submit(job.spec)["id"]
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        g = self.assert_accounted(view)
        # A window the job's start lies before: only its timeline tells its share.
        cut = axtest.parse_time(view["created_at"]) + g["elapsed_s"] / 2
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(cut)) + ".%03dZ" % (cut % 1 * 1000)

        def figures():
            whole = c.api_ok("GET", "/v1/goodput")
            part = c.api_ok("GET", "/v1/goodput?project=default&since=" + since)
            metrics = c.api("GET", "/metrics")[1]
            return (whole["fleet"], whole["projects"], part["fleet"], part["projects"],
                    sorted(re.findall(r"(?m)^axctl_goodput_.*$", metrics)))

        before = figures()
        fleet, projects = before[0], before[1]
        self.assertEqual(projects[0]["jobs"], 1)
        for b in BUCKETS:  # two ranks without accelerators weigh two
            self.assertAlmostEqual(fleet["seconds"][b], 2 * g["seconds"][b], delta=0.003)
        self.assertGreater(before[2]["elapsed_s"], 0)
        self.assertLess(before[2]["elapsed_s"], fleet["elapsed_s"])

        def in_memory():
            metrics = c.api("GET", "/metrics")[1]
            return int(re.search(r'(?m)^axctl_jobs\{state="succeeded"\} (\d+)$', metrics).group(1))

        axtest.wait_for(lambda: in_memory() == 0, 10, "the job to leave memory")
        self.assertEqual(figures(), before)
        self.assertEqual(c.job(job.id)["goodput"], g)  # read back whole from the store
        c.restart_controller()
        self.assertEqual(in_memory(), 0)
        self.assertEqual(figures(), before)
        self.assertEqual(c.job(job.id)["goodput"], g)


if __name__ == "__main__":
    axtest.main()
