# SPDX-License-Identifier: MIT
"""The AXLearn job specs of examples/axlearn (issue 16) on agents that stand in for an
8-GPU H100 host, a 4-chip TPU v5p host and a 16-device Trainium2 host (the topologies and
fake device roots of test_accel.py), with the launch profiles of profiles/.

No JAX here: each spec's interpreter, `python -m axlearn.common.launch_trainer_main`, is
replaced by tests/workload/axlearn_standin.py, which checks that the distributed flags
the spec's shell fills in are the gang's, and keeps AXLearn's checkpoint layout under
--trainer_dir and its own choice of the step to restore. Each test kills one rank after
a checkpoint and checks that the restarted gang's trainer restores the step axctl
resumed from, with its devices and the profile's tuning in its environment."""

import json
import os
import signal
import sys
import unittest

import axtest
from test_accel import HOSTS, PROFILES_DIR

EXAMPLE_DIR = os.path.join(axtest.SOURCE_ROOT, "examples", "axlearn")
STANDIN = os.path.join(axtest.SOURCE_ROOT, "tests", "workload", "axlearn_standin.py")
LAUNCHER = "/opt/axlearn/venv/bin/python -m axlearn.common.launch_trainer_main"


def env_lines(text):
    return dict(line[4:].split("=", 1) for line in text.splitlines() if line.startswith("env "))


class AxlearnExamplesTest(axtest.ClusterTestCase):
    def cluster(self, host, extra=()):
        """Two agents with the devices of `host` (a key of test_accel.HOSTS)."""
        topology, prefix, _, count = HOSTS[host]
        if not os.path.exists(topology):
            self.skipTest("topology missing: %s" % topology)
        c = axtest.Cluster(2, name=self._testMethodName, lease_ms=2000, grace_ms=500)
        for i in range(2):
            root = os.path.join(c.tmp, "root-n%d" % (i + 1))
            os.makedirs(os.path.join(root, "dev"))
            for d in range(count):
                open(os.path.join(root, "dev", "%s%d" % (prefix, d)), "w").close()
            # The fake root is the sys root too: no backend looks at this machine's /sys.
            c.agent_args[i] = ["--topology", topology, "--dev-root", root, "--sys-root", root,
                               "--profile-dir", PROFILES_DIR] + list(extra)
        self.addCleanup(self._finish_cluster, c)
        c.start()
        return c

    def run_interrupted(self, c, spec_file):
        """Submits the example on 2 ranks, kills rank 1 after a checkpoint and returns
        (job view, {rank: log of the last attempt})."""
        with open(os.path.join(EXAMPLE_DIR, spec_file)) as f:
            spec = json.load(f)
        script = spec["command"][2]
        self.assertIn(LAUNCHER, script)
        spec["command"][2] = script.replace(LAUNCHER, "%s %s" % (sys.executable, STANDIN))
        job_dir = os.path.join(c.jobs_dir, spec["name"])
        # AXLearn keeps its checkpoints in <trainer_dir>/checkpoints, which the spec's
        # shell derives from checkpoint_dir.
        spec["checkpoint_dir"] = os.path.join(job_dir, "trainer", "checkpoints")
        spec["ranks"] = 2
        spec["env"]["AXTEST_MARKER"] = c.marker
        job = axtest.WorkJob(spec, job_dir, spec["checkpoint_dir"], None, None, None)
        job.id = c.submit(spec)["id"]
        c.wait_running(job.id)
        self.wait_checkpoint(c, job, 3)
        python = os.path.realpath(sys.executable)
        pids = {p["rank"]: p["pid"] for p in axtest.rank_processes(c.marker, job.id)
                if p["attempt"] == 1 and p["exe"] == python}
        self.assertEqual(sorted(pids), [0, 1])
        os.kill(pids[1], signal.SIGKILL)

        view = c.wait_job(job.id, timeout=60)
        self.assertEqual(view["state"], "succeeded", view.get("reason"))
        self.assertEqual(view["attempt"], 2)
        resumed = [a for a in view["attempts"] if a["attempt"] == 2][0]["resume_step"]
        self.assertGreaterEqual(resumed, 3)
        logs = {r: c.logs(job.id, r) for r in range(2)}
        for rank, log in logs.items():
            self.assertIn("flags ok", log, "rank %d" % rank)
            # AXLearn picks the latest committed step itself: the one axctl resumed from.
            self.assertIn("restored step %d\n" % resumed, log, "rank %d" % rank)
            self.assertIn("done step 12", log, "rank %d" % rank)
        self.assertTrue(os.path.exists(os.path.join(spec["checkpoint_dir"], "step_00000012", "index")))
        return view, {r: env_lines(log) for r, log in logs.items()}

    def test_gpu(self):
        c = self.cluster("h100")
        _, envs = self.run_interrupted(c, "job-gpu.json")
        for env in envs.values():
            # utils_spmd.py gives jax.distributed local_device_ids 0-7: a rank is a host.
            self.assertEqual(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7")
            self.assertIn("--xla_gpu_enable_latency_hiding_scheduler=true", env["XLA_FLAGS"])
            self.assertEqual(env["DATA_DIR"], "/shared/tensorflow_datasets")

    def test_tpu(self):
        # The spec keeps the gang in one slice: hosts labelled with the same tpu-slice.
        c = self.cluster("tpu", extra=["--labels", "tpu-slice=s1"])
        _, envs = self.run_interrupted(c, "job-tpu.json")
        for rank, env in envs.items():
            self.assertEqual(env["TPU_VISIBLE_CHIPS"], "0,1,2,3")
            self.assertEqual(env["TPU_WORKER_ID"], str(rank))
            self.assertIn("--xla_tpu_enable_latency_hiding_scheduler=true", env["LIBTPU_INIT_ARGS"])

    def test_trainium(self):
        c = self.cluster("trn2")
        _, envs = self.run_interrupted(c, "job-trainium.json")
        cores = ",".join("%d-%d" % (8 * d, 8 * d + 7) for d in range(16))
        for rank, env in envs.items():
            self.assertEqual(env["NEURON_RT_VISIBLE_CORES"], cores)
            self.assertEqual(env["NEURON_PJRT_PROCESS_INDEX"], str(rank))
            self.assertEqual(env["NEURON_LOGICAL_NC_CONFIG"], "1")
            self.assertIn("--cache_dir=", env["NEURON_CC_FLAGS"])


if __name__ == "__main__":
    axtest.main()
