#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Scheduling with the real binaries: quotas from a file, a borrower preempted by a
job within its project's quota that later resumes from its checkpoint without spending
its restart budget, the quota view, SIGHUP reload, and why a job waits."""

import os
import signal
import unittest

import axtest

QUOTAS = """\
# Two projects, equal shares of every resource kind.
[project alpha]
share = 1
[project beta]
share = 1
"""


class SchedTest(axtest.ClusterTestCase):
    def cluster(self, quota_text=QUOTAS):
        tmp_quota = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                 "axtest-quota-%d-%s" % (os.getpid(), self._testMethodName))
        with open(tmp_quota, "w") as f:
            f.write(quota_text)
        self.addCleanup(os.unlink, tmp_quota)
        # The agents report this machine's CPUs; each project's quota is half of them.
        c = self.start_cluster(2, controller_args=["--quota-file", tmp_quota,
                                                   "--quarantine-after", "0"])
        c.quota_path = tmp_quota
        return c

    def test_in_quota_job_preempts_borrower_which_resumes(self):
        c = self.cluster()
        cpus = sum(n["inventory"]["cpus"] for n in c.nodes())
        self.assertGreaterEqual(cpus, 4)
        # beta takes the whole fleet: half of it is borrowed, so it runs at tier 1.
        borrower = c.work_job("borrower", ranks=cpus, steps=400, step_ms=25, checkpoint_every=20,
                              spec={"project": "beta", "resources": {"cpus": 1}})
        borrower.id = c.submit(borrower.spec)["id"]
        c.wait_running(borrower.id)
        self.assertEqual(c.job(borrower.id)["tier"], 1)
        axtest.wait_for(lambda: (c.job(borrower.id).get("last_checkpoint") or {}).get("step", 0) >= 20,
                        30, "a checkpoint of the borrower")

        # alpha asks for its own half back.
        owner = c.work_job("owner", ranks=cpus // 2, steps=40, step_ms=25, checkpoint_every=10,
                           spec={"project": "alpha", "priority": 5, "resources": {"cpus": 1}})
        owner.id = c.submit(owner.spec)["id"]
        view = c.wait_job(borrower.id, states=("preempted", "pending"), timeout=30)
        self.assertIn("preempt", view["reason"])
        c.wait_running(owner.id, timeout=30)
        self.assertEqual(c.job(owner.id)["tier"], 0)

        # The owner finishes; the borrower comes back from its checkpoint, budget intact.
        self.assert_succeeded_with_value(c, owner, timeout=60)
        view = self.assert_succeeded_with_value(c, borrower, timeout=120)
        self.assertEqual(view["restarts"], 0)
        first = view["attempts"][0]
        self.assertEqual(first["end_reason"], "preempted")
        second = view["attempts"][1]
        self.assertGreater(second["resume_step"], 0)
        axtest.check_no_overlap(borrower.entries())

    def test_quota_view_and_reload(self):
        c = self.cluster()
        status, body, _ = c.api("GET", "/v1/quotas")
        self.assertEqual(status, 200)
        projects = {p["project"]: p for p in body["projects"]}
        self.assertIn("alpha", projects)
        self.assertIn("cpus", body["kinds"])
        total = sum(n["inventory"]["cpus"] for n in c.nodes())
        self.assertAlmostEqual(projects["alpha"]["quota"]["cpus"], total / 2, delta=0.01)

        # A broken file is refused and the old quotas stay.
        with open(c.quota_path, "w") as f:
            f.write("[project alpha\nshare = x\n")
        c.controller.signal(signal.SIGHUP)
        axtest.wait_for(lambda: "keeping the old quotas" in open(c.controller.stderr_path).read(),
                        10, "the reload error in the log")
        status, body, _ = c.api("GET", "/v1/quotas")
        self.assertIn("alpha", {p["project"] for p in body["projects"]})

        # A good one is taken.
        with open(c.quota_path, "w") as f:
            f.write("[project gamma]\nshare = 3\n[project alpha]\nshare = 1\n")
        c.controller.signal(signal.SIGHUP)

        def gamma():
            _, b, _ = c.api("GET", "/v1/quotas")
            p = {x["project"]: x for x in b["projects"]}
            return p.get("gamma")
        g = axtest.wait_for(gamma, 10, "gamma's quota")
        self.assertAlmostEqual(g["quota"]["cpus"], total * 3 / 4, delta=0.01)

    def test_waiting_job_says_why(self):
        c = self.cluster()
        cpus = sum(n["inventory"]["cpus"] for n in c.nodes())
        big = c.work_job("big", ranks=cpus, steps=200, step_ms=25,
                         spec={"project": "alpha", "resources": {"cpus": 1}})
        big.id = c.submit(big.spec)["id"]
        c.wait_running(big.id)
        small = c.work_job("small", ranks=1, steps=5,
                           spec={"project": "alpha", "resources": {"cpus": 1}})
        small.id = c.submit(small.spec)["id"]
        view = axtest.wait_for(lambda: (lambda v: v if v["reason"] else None)(c.job(small.id)),
                               10, "a reason for the waiting job")
        self.assertEqual(view["state"], "pending")
        p = c.cli("list", "--state", "pending")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(view["reason"].split(":")[0][:20], p.stdout)
        c.cancel(big.id)
        self.assert_succeeded_with_value(c, small, timeout=60)


if __name__ == "__main__":
    missing = axtest.missing_binaries()
    if missing:
        print("skipping: not built: %s" % ", ".join(missing))
        raise SystemExit(77)
    unittest.main(verbosity=2)
