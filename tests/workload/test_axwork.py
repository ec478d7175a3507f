# SPDX-License-Identifier: MIT
"""Unit test of the axwork workload, run directly (no controller): the integration tests
trust its checkpoints, resume and fault flags, so they are proven here first.

The central case is the one the suite relies on everywhere: 10 steps with a checkpoint
every 3 steps, crashed at step 5, resumed with AXCTL_RESUME_STEP=3, must print the same
final value as the uninterrupted run (and as the Python mirror in axtest.py).
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import axtest  # noqa: E402

AXWORK = axtest.AXWORK


class AxworkTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="axwork-test-")
        self.dir = self.tmp.name
        self.ckpt = os.path.join(self.dir, "ckpt")
        self.progress = os.path.join(self.dir, "progress")
        self.alog = os.path.join(self.dir, "attempts.log")

    def tearDown(self):
        self.tmp.cleanup()

    def env(self, attempt=1, rank=0, world=1, resume=0, resume_checkpoint=""):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AXCTL_")}
        env.update({"AXCTL_JOB_ID": "7", "AXCTL_ATTEMPT": str(attempt), "AXCTL_RANK": str(rank),
                    "AXCTL_WORLD_SIZE": str(world), "AXCTL_CHECKPOINT_DIR": self.ckpt,
                    "AXCTL_RESUME_STEP": str(resume) if resume else "",
                    "AXCTL_RESUME_CHECKPOINT": resume_checkpoint,
                    "AXCTL_PROGRESS_FILE": self.progress})
        return env

    def run_work(self, *args, timeout=30, **env_kw):
        argv = [AXWORK, "--step-ms", "1", "--attempt-log", self.alog] + [str(a) for a in args]
        return subprocess.run(argv, env=self.env(**env_kw), capture_output=True, text=True, timeout=timeout)

    def final(self, p):
        values = axtest.final_values(p.stdout)
        self.assertEqual(len(values), 1, "stdout: %r stderr: %r" % (p.stdout, p.stderr))
        return values[0]

    def read_progress(self):
        with open(self.progress) as f:
            return int(f.read())

    def test_expect_matches_python_mirror(self):
        for steps, seed in ((0, 0), (1, 0), (10, 0), (100, 42)):
            p = subprocess.run([AXWORK, "--expect", "--steps", str(steps), "--seed", str(seed)],
                               capture_output=True, text=True, timeout=10)
            self.assertEqual(p.returncode, 0)
            self.assertEqual(self.final(p), axtest.expected_value(steps, seed))

    def test_crash_and_resume_gives_same_value(self):
        clean = self.run_work("--steps", 10, "--checkpoint-every", 3)
        self.assertEqual(clean.returncode, 0, clean.stderr)
        expected = self.final(clean)
        self.assertEqual(expected, axtest.expected_value(10))
        self.assertEqual(self.read_progress(), 10)

        # Start over with an empty checkpoint dir: crash on reaching step 5.
        subprocess.run(["rm", "-rf", self.ckpt, self.alog], check=True)
        crashed = self.run_work("--steps", 10, "--checkpoint-every", 3, "--crash-at", "5@1")
        self.assertEqual(crashed.returncode, -signal.SIGKILL)
        self.assertEqual(axtest.final_values(crashed.stdout), [])
        self.assertEqual(self.read_progress(), 4)
        self.assertEqual(sorted(os.listdir(self.ckpt)), ["step_00000003"])
        self.assertEqual(sorted(os.listdir(os.path.join(self.ckpt, "step_00000003"))), ["index", "value"])

        # The fault is limited to attempt 1, so attempt 2 runs through.
        resumed = self.run_work("--steps", 10, "--checkpoint-every", 3, "--crash-at", "5@1",
                                attempt=2, resume=3)
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        self.assertEqual(self.final(resumed), expected)
        self.assertIn("resume_step=3", resumed.stdout)

        entries = axtest.parse_attempt_log(self.alog)
        starts = [e for e in entries if e["event"] == "start"]
        self.assertEqual([(e["attempt"], e["resume_step"]) for e in starts], [(1, 0), (2, 3)])
        ends = [e["status"] for e in entries if e["event"] == "end"]
        self.assertEqual(ends, ["crash", "ok"])
        steps2 = [e["step"] for e in entries if e["event"] == "step" and e["attempt"] == 2]
        self.assertEqual(steps2, list(range(4, 11)))
        self.assertEqual(axtest.check_no_overlap(entries), [])

    def test_resume_from_explicit_checkpoint_path(self):
        first = self.run_work("--steps", 6, "--checkpoint-every", 2)
        self.assertEqual(first.returncode, 0, first.stderr)
        path = os.path.join(self.ckpt, "step_00000004")
        p = self.run_work("--steps", 12, "--checkpoint-every", 2, attempt=2, resume=4,
                          resume_checkpoint=path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.final(p), axtest.expected_value(12))

    def test_resume_refuses_uncommitted_or_mismatched_checkpoint(self):
        os.makedirs(os.path.join(self.ckpt, "step_00000004"))
        with open(os.path.join(self.ckpt, "step_00000004", "value"), "w") as f:
            f.write("step 4\nvalue 0000000000000001\n")
        p = self.run_work("--steps", 10, resume=4)
        self.assertEqual(p.returncode, 66)  # no index: not committed
        p = self.run_work("--steps", 10, "--checkpoint-every", 2)
        self.assertEqual(p.returncode, 0)
        p = self.run_work("--steps", 10, resume=5,
                          resume_checkpoint=os.path.join(self.ckpt, "step_00000004"))
        self.assertEqual(p.returncode, 66)  # holds step 4, not 5

    def test_exit_at_and_fault_rank(self):
        p = self.run_work("--steps", 10, "--exit-at", "3:75", rank=1, world=2)
        self.assertEqual(p.returncode, 75)
        self.assertEqual(self.read_progress(), 2)
        p = self.run_work("--steps", 10, "--exit-at", "3:75", "--fault-rank", "1", rank=0, world=2)
        self.assertEqual(p.returncode, 0)
        p = self.run_work("--steps", 10, "--exit-at", "3:75@2", attempt=1)
        self.assertEqual(p.returncode, 0, "fault limited to attempt 2 fired in attempt 1")

    def test_only_rank_zero_writes_checkpoints(self):
        p = self.run_work("--steps", 6, "--checkpoint-every", 2, rank=1, world=2)
        self.assertEqual(p.returncode, 0)
        self.assertFalse(os.path.exists(self.ckpt))

    def test_hang_then_sigterm_logs_end(self):
        argv = [AXWORK, "--steps", "100", "--step-ms", "1", "--hang-at", "3",
                "--attempt-log", self.alog]
        proc = subprocess.Popen(argv, env=self.env(), stdout=subprocess.PIPE, text=True)
        try:
            axtest.wait_for(lambda: any(e["event"] == "hang" for e in axtest.parse_attempt_log(self.alog)),
                            10, "hang line")
            self.assertEqual(self.read_progress(), 2)
            time.sleep(0.1)  # a hung rank must not advance; give it the chance to be wrong
            self.assertEqual(self.read_progress(), 2)
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=10), -signal.SIGTERM)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        ends = [e for e in axtest.parse_attempt_log(self.alog) if e["event"] == "end"]
        self.assertEqual([e["status"] for e in ends], ["signal:15"])

    def test_print_env_and_bad_flags(self):
        p = self.run_work("--steps", 1, "--print-env", rank=1, world=4)
        env = axtest.env_from_log(p.stdout)
        self.assertEqual(env["AXCTL_RANK"], "1")
        self.assertEqual(env["AXCTL_WORLD_SIZE"], "4")
        for bad in (["--crash-at", "x"], ["--exit-at", "3"], ["--exit-at", "3:300"], ["--steps", "-1"],
                    ["--hang-at", "0"], ["extra"]):
            p = self.run_work(*bad)
            self.assertEqual(p.returncode, 2, bad)
        p = self.run_work("--steps", 1, rank=4, world=4)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    if not os.access(AXWORK, os.X_OK):
        print("axwork not built: %s" % AXWORK)
        sys.exit(77)
    unittest.main(verbosity=2)
