# SPDX-License-Identifier: MIT
"""A real PyTorch program under axctl (issue 16): examples/torch-ddp/train.py, submitted
with the example's own job.json, trains a 4-rank DistributedDataParallel gang (gloo, on
CPUs) on two agents. Interrupted, it must end with parameters bit-identical to those of
an uninterrupted run of the same program: that holds only if axctl resumed it from a
committed checkpoint and the program restored model, optimizer and data position.

- one rank is SIGKILLed after a checkpoint is committed: the gang restarts from it;
- a node is lost (its agent and its ranks SIGKILLed): the gang finishes on the nodes
  left.

Every rank prints `final params sha256 <hex>`; the uninterrupted run's digest is the
reference (computed once per process). Skips (exit 77) when no Python here imports torch
with gloo: scripts/deps installs Debian's python3-torch."""

import json
import os
import signal
import sys
import unittest

import axtest

EXAMPLE_DIR = os.path.join(axtest.SOURCE_ROOT, "examples", "torch-ddp")
LEASE_MS = 2000
GRACE_MS = 500
STEPS = 80
CHECKPOINT_EVERY = 10
# The pause keeps the run long enough to be interrupted after a checkpoint (a step of
# this model takes a few milliseconds on a fast machine).
TRAIN_ARGS = ["--steps", STEPS, "--checkpoint-every", CHECKPOINT_EVERY, "--seed", 7,
              "--step-sleep-ms", 30]


def find_torch_python():
    """(interpreter, None) for the first Python here whose torch has gloo, else
    (None, why not)."""
    python, problems = axtest.find_python(
        [os.environ.get("AXTEST_TORCH_PYTHON"), "/usr/bin/python3", sys.executable],
        "import torch.distributed as d; assert d.is_gloo_available(), 'torch has no gloo backend'")
    if python:
        return python, None
    return None, ("no Python here imports torch with gloo (apt-get install python3-torch, "
                  "as scripts/deps does): " + problems)


TORCH_PYTHON, NO_TORCH = find_torch_python()

# {tuple of train.py arguments: digest of an uninterrupted run's final parameters}
_reference_digests = {}


def final_digests(text):
    return [line.split()[3] for line in text.splitlines() if line.startswith("final params sha256 ")]


@unittest.skipIf(TORCH_PYTHON is None, NO_TORCH)
class TorchDdpTest(axtest.ClusterTestCase):
    def cluster(self, n_agents):
        return self.start_cluster(n_agents, lease_ms=LEASE_MS, grace_ms=GRACE_MS)

    def submit(self, c, name):
        """Submits examples/torch-ddp/job.json as a user would, with this cluster's
        interpreter, checkpoint dir and the short run of TRAIN_ARGS."""
        with open(os.path.join(EXAMPLE_DIR, "job.json")) as f:
            spec = json.load(f)
        job_dir = os.path.join(c.jobs_dir, name)
        os.makedirs(job_dir)
        ckpt = os.path.join(job_dir, "ckpt")
        spec["name"] = name
        self.assertEqual(spec["command"][:2], ["python3", "train.py"])
        spec["command"] = [TORCH_PYTHON, "train.py"] + [str(a) for a in TRAIN_ARGS]
        spec["workdir"] = EXAMPLE_DIR
        spec["checkpoint_dir"] = ckpt
        spec["env"]["AXTEST_MARKER"] = c.marker
        job = axtest.WorkJob(spec, job_dir, ckpt, None, None, STEPS)
        job.id = c.submit(spec)["id"]
        return job

    def digests(self, c, job, view):
        """The final digest every rank printed; all ranks must agree."""
        self.assertEqual(view["state"], "succeeded", "job %d: %r" % (job.id, view.get("reason")))
        digests = [final_digests(c.logs(job.id, rank)) for rank in range(job.spec["ranks"])]
        for rank, d in enumerate(digests):
            self.assertEqual(len(d), 1, "rank %d printed %r" % (rank, d))
        self.assertEqual(len({d[0] for d in digests}), 1, "ranks disagree: %r" % digests)
        return digests[0][0]

    def reference(self, c):
        """The digest of an uninterrupted run, run once per process."""
        key = tuple(TRAIN_ARGS)
        if key not in _reference_digests:
            job = self.submit(c, "reference")
            view = c.wait_job(job.id, timeout=90)
            self.assertEqual(view["attempt"], 1, "the reference run was interrupted")
            _reference_digests[key] = self.digests(c, job, view)
            self.assertEqual(job.committed_steps(),
                             list(range(CHECKPOINT_EVERY, STEPS + 1, CHECKPOINT_EVERY)))
        return _reference_digests[key]

    def rank_pids(self, c, job, attempt):
        """{rank: pid} of the job's Python processes of one attempt."""
        python = os.path.realpath(TORCH_PYTHON)
        return {p["rank"]: p["pid"] for p in axtest.rank_processes(c.marker, job.id)
                if p["attempt"] == attempt and p["exe"] == python}

    def attempt(self, view, n):
        for a in view.get("attempts", []):
            if a["attempt"] == n:
                return a
        self.fail("job %d has no attempt %d: %r" % (view["id"], n, view.get("attempts")))

    def interrupt_after_checkpoint(self, c, job, step):
        """Waits for the controller to know checkpoint `step` and for every rank to have
        reported progress past it; returns the ranks of attempt 1 by rank."""
        c.wait_running(job.id, timeout=60)
        self.wait_checkpoint(c, job, step)

        def progressed():
            ranks = [r for r in c.job(job.id)["ranks"] if r["attempt"] == 1]
            done = len(ranks) == 4 and all((r.get("step") or 0) >= step for r in ranks)
            return ranks if done else None

        ranks = axtest.wait_for(progressed, 30, "every rank's progress file at step %d" % step)
        return {r["rank"]: r for r in ranks}

    def assert_checkpoints_committed(self, job):
        for step in job.committed_steps():
            step_dir = os.path.join(job.checkpoint_dir, "step_%08d" % step)
            with open(os.path.join(step_dir, "index")) as f:
                index = json.load(f)
            self.assertEqual(index["step"], step)
            for name in index["files"]:
                self.assertTrue(os.path.isfile(os.path.join(step_dir, name)), "%s/%s" % (step_dir, name))

    def test_rank_sigkill_resumes_bit_identical(self):
        c = self.cluster(2)
        reference = self.reference(c)
        job = self.submit(c, "rank-kill")
        ranks = self.interrupt_after_checkpoint(c, job, 20)
        self.assertEqual({r["node"] for r in ranks.values()}, {"n1", "n2"})
        pids = self.rank_pids(c, job, 1)
        self.assertEqual(sorted(pids), [0, 1, 2, 3])
        # Rank 0 writes the checkpoints: nothing it had not committed can be used.
        os.kill(pids[0], signal.SIGKILL)
        committed = job.committed_steps()[-1]
        self.assertLess(committed, STEPS, "the run ended before it could be interrupted")

        view = c.wait_job(job.id, timeout=90)
        self.assertEqual(self.digests(c, job, view), reference)
        self.assertEqual(view["attempt"], 2)
        self.assertEqual(view["restarts"], 1)
        self.assertEqual(self.attempt(view, 1)["end_reason"], "rank_exit")
        self.assertEqual(self.attempt(view, 2)["resume_step"], committed)
        resumed = "resumed at step %d from %s/step_%08d" % (committed, job.checkpoint_dir, committed)
        for rank in range(4):
            self.assertIn(resumed, c.logs(job.id, rank, attempt=2))
        self.assert_checkpoints_committed(job)
        self.assertEqual(job.committed_steps()[-1], STEPS)
        self.assert_no_ranks_alive(c, job.id)

    def test_node_loss_finishes_elsewhere_bit_identical(self):
        c = self.cluster(3)
        reference = self.reference(c)
        job = self.submit(c, "node-loss")
        ranks = self.interrupt_after_checkpoint(c, job, 20)
        # The node without rank 0: the ranks left there must notice on their own that
        # their peers are gone.
        lost = ranks[3]["node"]
        self.assertNotEqual(lost, ranks[0]["node"])
        pids = self.rank_pids(c, job, 1)
        c.agents[lost].kill()
        for rank, pid in pids.items():
            if ranks[rank]["node"] == lost:
                os.kill(pid, signal.SIGKILL)

        view = c.wait_job(job.id, timeout=90)
        self.assertEqual(self.digests(c, job, view), reference)
        final = [r for r in view["ranks"] if r["attempt"] == view["attempt"]]
        self.assertEqual(len(final), 4, final)
        self.assertNotIn(lost, {r["node"] for r in final})
        self.assertEqual({n["name"]: n["state"] for n in c.nodes()}[lost], "down")
        self.assertGreaterEqual(self.attempt(view, view["attempt"])["resume_step"], 20)
        self.assertIn(self.attempt(view, 1)["end_reason"], ("rank_exit", "node_lost"))
        self.assert_checkpoints_committed(job)
        self.assert_no_ranks_alive(c, job.id)


if __name__ == "__main__":
    axtest.main(skip=NO_TORCH if TORCH_PYTHON is None else None)
