# SPDX-License-Identifier: MIT
"""axctl on a real NVIDIA GPU: what test_accel.py checks with hwloc exports and a fake
NVML, here against the driver itself (docs/TESTING.md, "Checked on a real H100").
Skips (exit 77) where nvidia-smi lists no GPU, so it costs nothing elsewhere;
scripts/gpu-check runs it on a machine that has one.

- inventory: the real agent's /v1/nodes entry for every GPU agrees with nvidia-smi and
  sysfs, read here independently of the agent's code: kind and model from the PCI
  device id, bus id, UUID, memory size in the model name, NUMA node and PCIe switch;
  the node's memory is /proc/meminfo's MemTotal;
- NVML: the calls the nvidia backend makes (nvidia.c) answer on this driver with the
  codes and the struct layouts the backend assumes, read here through ctypes; the node
  stays ready with no reason while the agent probes NVML twice a second, also under a
  GPU job and when its rank is killed (that failure is the job's, not the node's);
- a rank given one GPU sees exactly that GPU (CUDA_VISIBLE_DEVICES, its UUID in torch);
- examples/torch-ddp/train.py with --backend nccl on the GPU, its rank SIGKILLed after a
  checkpoint, resumes from it and ends with the digest of an uninterrupted run.

The figures the run measured are printed as `gpu-check: ...` lines.
"""

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

import axtest

EXAMPLE_DIR = os.path.join(axtest.SOURCE_ROOT, "examples", "torch-ddp")
PROFILES_DIR = os.environ.get("PROFILES_DIR", os.path.join(axtest.SOURCE_ROOT, "profiles"))
HEALTH_INTERVAL_MS = 500
STEPS = 80
CHECKPOINT_EVERY = 10
TRAIN_ARGS = ["--backend", "nccl", "--steps", STEPS, "--checkpoint-every", CHECKPOINT_EVERY,
              "--seed", 7, "--step-sleep-ms", 30]

# The subset of docs/ACCELERATORS.md's table a test machine may show.
NVIDIA_KINDS = {0x2321: "nvidia-h100", 0x2330: "nvidia-h100", 0x2331: "nvidia-h100",
                0x2339: "nvidia-h100", 0x2335: "nvidia-h200", 0x233b: "nvidia-h200",
                0x20b0: "nvidia-a100", 0x20b1: "nvidia-a100", 0x20b2: "nvidia-a100",
                0x20b5: "nvidia-a100", 0x20f1: "nvidia-a100"}

NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_TIMEOUT = 0, 3, 10
NVML_EVENT_TYPE_XID_CRITICAL_ERROR = 0x8


def figure(msg):
    axtest.log("gpu-check: " + msg)


def nvidia_smi_gpus():
    """[{field: value}] of `nvidia-smi --query-gpu`, or (None, why not)."""
    fields = ["index", "name", "uuid", "pci.bus_id", "pci.device_id", "memory.total"]
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields),
                            "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "nvidia-smi: %s" % e
    if p.returncode != 0:
        return None, "nvidia-smi exited %d: %s" % (p.returncode, p.stderr.strip())
    gpus = [dict(zip(fields, (v.strip() for v in line.split(","))))
            for line in p.stdout.splitlines() if line.strip()]
    return (gpus, None) if gpus else (None, "nvidia-smi lists no GPU")


def bus_id_short(smi_bus_id):
    """nvidia-smi's "00000000:18:00.0" as the agent writes it, "0000:18:00.0"."""
    domain, rest = smi_bus_id.lower().split(":", 1)
    return "%04x:%s" % (int(domain, 16), rest)


def sysfs_int(path, default=None):
    try:
        with open(path) as f:
            return int(f.read().strip(), 0)
    except (OSError, ValueError):
        return default


def expected_numa(bus_id):
    """The kernel's node for the device; one it cannot place is node 0 on a host of one
    node and unknown (-1) on a bigger one (docs/ACCELERATORS.md)."""
    node = sysfs_int("/sys/bus/pci/devices/%s/numa_node" % bus_id, -1)
    if node >= 0:
        return node
    try:
        nodes = [n for n in os.listdir("/sys/devices/system/node") if re.match(r"node\d+$", n)]
    except OSError:
        nodes = []
    return 0 if len(nodes) <= 1 else -1


def expected_switch(bus_id):
    """The switch's upstream port from the device's sysfs path: with bridges
    [root port, upstream, downstream] above the device, the upstream port."""
    path = os.path.realpath("/sys/bus/pci/devices/" + bus_id)
    chain = [c for c in path.split("/") if re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", c)]
    if len(chain) < 4:
        return -1
    domain, bus, devfn = chain[-3].split(":")
    dev, fn = devfn.split(".")
    return ((int(domain, 16) & 0x7fff) << 16) | (int(bus, 16) << 8) | (int(dev, 16) << 3) | int(fn)


def find_cuda_python():
    """An interpreter whose torch sees a GPU with NCCL, or (None, why not)."""
    python, problems = axtest.find_python(
        [os.environ.get("AXTEST_TORCH_PYTHON"), "python3", sys.executable],
        "import torch, torch.distributed as d; "
        "assert torch.cuda.is_available() and d.is_nccl_available()", timeout=300)
    if python:
        return python, None
    return None, "no Python here has torch with CUDA and NCCL: " + problems


class Nvml:
    """The NVML calls of agents/accel/nvidia.c, made with the same argument types."""

    class Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]

    class EventData(ctypes.Structure):
        _fields_ = [("device", ctypes.c_void_p), ("event_type", ctypes.c_ulonglong),
                    ("event_data", ctypes.c_ulonglong), ("gpu_instance_id", ctypes.c_uint),
                    ("compute_instance_id", ctypes.c_uint)]

    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        started = time.monotonic()
        rc = self.lib.nvmlInit_v2()
        figure("nvmlInit_v2: %d in %.3f s" % (rc, time.monotonic() - started))
        if rc != NVML_SUCCESS:
            raise AssertionError("nvmlInit_v2: %d" % rc)

    def close(self):
        self.lib.nvmlShutdown()

    def probe(self, bus_id):
        """{call: (return code, value)} for one GPU."""
        lib, out = self.lib, {}
        h = ctypes.c_void_p()
        out["handle"] = (lib.nvmlDeviceGetHandleByPciBusId_v2(bus_id.encode(), ctypes.byref(h)), None)
        if out["handle"][0] != NVML_SUCCESS:
            return out
        uuid = ctypes.create_string_buffer(96)
        out["uuid"] = (lib.nvmlDeviceGetUUID(h, uuid, 96), uuid.value.decode())
        mem = self.Memory()
        out["memory"] = (lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(mem)), mem.total)
        ecc = ctypes.c_ulonglong(0)
        # NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC
        out["ecc_uncorrected_volatile"] = (lib.nvmlDeviceGetTotalEccErrors(h, 1, 0, ctypes.byref(ecc)),
                                           ecc.value)
        rows = [ctypes.c_uint(0) for _ in range(4)]
        out["remapped_rows"] = (lib.nvmlDeviceGetRemappedRows(h, *[ctypes.byref(r) for r in rows]),
                                [r.value for r in rows])
        pending = ctypes.c_int(0)
        out["retired_pages_pending"] = (lib.nvmlDeviceGetRetiredPagesPendingStatus(h, ctypes.byref(pending)),
                                        pending.value)
        events = ctypes.c_void_p()
        rc = lib.nvmlEventSetCreate(ctypes.byref(events))
        out["event_set"] = (rc, None)
        if rc == NVML_SUCCESS:
            out["register_xid"] = (lib.nvmlDeviceRegisterEvents(
                h, ctypes.c_ulonglong(NVML_EVENT_TYPE_XID_CRITICAL_ERROR), events), None)
            data = self.EventData()
            out["event_wait_0ms"] = (lib.nvmlEventSetWait_v2(events, ctypes.byref(data), 0),
                                     data.event_data)
            lib.nvmlEventSetFree(events)
        # Not read by the backend; shown for the record.
        temp = ctypes.c_uint(0)
        out["temperature_c"] = (lib.nvmlDeviceGetTemperature(h, 0, ctypes.byref(temp)), temp.value)
        return out


GPUS, NO_GPU = nvidia_smi_gpus()
CUDA_PYTHON, NO_CUDA = find_cuda_python() if GPUS else (None, NO_GPU)


def final_digests(text):
    return [line.split()[3] for line in text.splitlines() if line.startswith("final params sha256 ")]


@unittest.skipIf(GPUS is None, NO_GPU)
class GpuTest(axtest.ClusterTestCase):
    def cluster(self):
        args = ["--health-interval-ms", str(HEALTH_INTERVAL_MS), "--profile-dir", PROFILES_DIR]
        started = time.monotonic()
        c = self.start_cluster(1, lease_ms=2000, grace_ms=500, agent_args=[args])
        figure("controller and agent started, node ready in %.2f s" % (time.monotonic() - started))
        return c

    def node(self, c):
        return c.nodes()[0]

    def assert_node_healthy(self, c):
        node = self.node(c)
        self.assertEqual((node["state"], node["reason"]), ("ready", ""), node)

    def gpu_job(self, c, name, command, steps=None, framework=None):
        job_dir = os.path.join(c.jobs_dir, name)
        os.makedirs(job_dir)
        ckpt = os.path.join(job_dir, "ckpt")
        spec = {"name": name, "command": command, "ranks": 1, "workdir": EXAMPLE_DIR,
                "resources": {"accelerator": self.kind, "accelerators_per_rank": 1},
                "checkpoint_dir": ckpt, "env": {"AXTEST_MARKER": c.marker},
                "restart": {"max_restarts": 3}, "hang_timeout_s": 300}
        if framework:
            spec["framework"] = framework
        job = axtest.WorkJob(spec, job_dir, ckpt, None, None, steps)
        job.id = c.submit(spec)["id"]
        return job

    @property
    def kind(self):
        return NVIDIA_KINDS.get(int(GPUS[0]["pci.device_id"], 16) >> 16, "nvidia-gpu")

    def test_inventory_matches_nvidia_smi(self):
        c = self.cluster()
        inventory = self.node(c)["inventory"]
        # The kernel's MemTotal: this VM's NUMA node counted a few GiB of its 126 while
        # it initialised the rest lazily, and hwloc reports the node's count.
        with open("/proc/meminfo") as f:
            mem_kib = int(re.search(r"^MemTotal:\s+(\d+) kB", f.read(), re.M).group(1))
        figure("memory: agent %d MiB, /proc/meminfo %d MiB" % (inventory["memory_mb"], mem_kib // 1024))
        self.assertEqual(inventory["memory_mb"], mem_kib // 1024)
        accels = inventory["accelerators"]
        figure("inventory %s" % json.dumps(accels))
        self.assertEqual(len(accels), len(GPUS), "nvidia-smi: %r" % GPUS)
        by_bus = {a["pci_bus_id"]: a for a in accels}
        for gpu in GPUS:
            bus = bus_id_short(gpu["pci.bus_id"])
            self.assertIn(bus, by_bus)
            a = by_bus[bus]
            device_id = int(gpu["pci.device_id"], 16) >> 16
            self.assertEqual(a["kind"], NVIDIA_KINDS.get(device_id, "nvidia-gpu"), gpu)
            self.assertEqual(a["uuid"], gpu["uuid"])
            self.assertEqual(a["numa_node"], expected_numa(bus))
            self.assertEqual(a["pcie_switch"], expected_switch(bus))
            # The model's "80GB" are GiB less what the driver keeps: 81559 MiB on the H100.
            gb = int(re.search(r"(\d+)GB", a["model"]).group(1))
            mib = int(gpu["memory.total"])
            self.assertLess(abs(gb * 1024 - mib), gb * 1024 * 0.05,
                            "%s for %d MiB" % (a["model"], mib))
            figure("GPU %s: nvidia-smi %r, agent %r" % (bus, gpu["name"], a["model"]))
        self.assertEqual([a["index"] for a in accels], list(range(len(accels))))

    def test_nvml_calls_and_node_health(self):
        nvml = Nvml()
        self.addCleanup(nvml.close)
        for gpu in GPUS:
            bus = bus_id_short(gpu["pci.bus_id"])
            got = nvml.probe(bus)
            figure("NVML %s: %s" % (bus, json.dumps(got)))
            self.assertEqual(got["handle"][0], NVML_SUCCESS, "lookup by %s" % bus)
            self.assertEqual(got["uuid"], (NVML_SUCCESS, gpu["uuid"]))
            self.assertEqual(got["memory"][0], NVML_SUCCESS)
            self.assertEqual(got["memory"][1] // (1024 * 1024), int(gpu["memory.total"]))
            # A healthy GPU: what the backend reads is there (or unsupported) and clean.
            for call in ("ecc_uncorrected_volatile", "retired_pages_pending"):
                self.assertIn(got[call][0], (NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED), call)
                self.assertEqual(got[call][1], 0, call)
            self.assertIn(got["remapped_rows"][0], (NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED))
            self.assertEqual(got["remapped_rows"][1][2:], [0, 0], "pending, failure")
            self.assertEqual(got["event_set"][0], NVML_SUCCESS)
            self.assertIn(got["register_xid"][0], (NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED))
            self.assertEqual(got["event_wait_0ms"][0], NVML_ERROR_TIMEOUT, "no XID pending")

        c = self.cluster()
        # The agent keeps NVML loaded from detection on (the UUIDs come from it).
        with open("/proc/%d/maps" % c.agents["n1"].pid) as f:
            libs = {l.split()[-1] for l in f if "libnvidia-ml" in l}
        figure("agent maps %s" % sorted(libs))
        self.assertTrue(libs, "the agent has no NVML loaded")
        # A GPU NVML could not find, or any bad counter, would make the node unhealthy
        # at the next probe: it must stay ready across several of them.
        deadline = time.monotonic() + 6 * HEALTH_INTERVAL_MS / 1000.0
        while time.monotonic() < deadline:
            self.assert_node_healthy(c)
            time.sleep(0.1)

    @unittest.skipIf(CUDA_PYTHON is None, NO_CUDA)
    def test_rank_sees_its_gpu(self):
        c = self.cluster()
        code = ("import os, torch; p = torch.cuda.get_device_properties(0); "
                "print('visible', os.environ.get('CUDA_VISIBLE_DEVICES'), "
                "os.environ.get('CUDA_DEVICE_ORDER'), os.environ.get('NCCL_DEBUG')); "
                "print('count', torch.cuda.device_count()); print('uuid GPU-%s' % p.uuid); "
                "print('name', p.name)")
        started = time.monotonic()
        job = self.gpu_job(c, "visible", [CUDA_PYTHON, "-c", code])
        view = c.wait_job(job.id, timeout=120)
        figure("one-rank CUDA job: submit to succeeded in %.2f s" % (time.monotonic() - started))
        self.assertEqual(view["state"], "succeeded", view.get("reason"))
        out = c.logs(job.id, 0)
        lines = {l.split(" ", 1)[0]: l.split(" ", 1)[1] for l in out.splitlines()
                 if l.split(" ", 1)[0] in ("visible", "count", "uuid", "name")}
        accels = self.node(c)["inventory"]["accelerators"]
        placed = view["ranks"][0]["devices"]
        self.assertEqual(len(placed), 1)
        gpu = accels[placed[0]]
        self.assertEqual(lines["visible"], "0 PCI_BUS_ID WARN")
        self.assertEqual(lines["count"], "1")
        self.assertEqual(lines["uuid"].lower(), gpu["uuid"].lower())
        figure("rank saw %s" % lines)

    @unittest.skipIf(CUDA_PYTHON is None, NO_CUDA)
    def test_nccl_train_rank_kill_resumes_bit_identical(self):
        c = self.cluster()
        command = [CUDA_PYTHON, "train.py"] + [str(a) for a in TRAIN_ARGS]

        started = time.monotonic()
        ref = self.gpu_job(c, "reference", command, STEPS, "torch")
        view = c.wait_job(ref.id, timeout=300)
        figure("uninterrupted run: %d steps in %.2f s from submit" % (STEPS, time.monotonic() - started))
        self.assertEqual((view["state"], view["attempt"]), ("succeeded", 1), view.get("reason"))
        reference = final_digests(c.logs(ref.id, 0))
        self.assertEqual(len(reference), 1)

        job = self.gpu_job(c, "rank-kill", command, STEPS, "torch")
        submitted = time.monotonic()
        c.wait_running(job.id, timeout=120)
        axtest.wait_for(lambda: (c.job(job.id).get("last_checkpoint") or {}).get("step", 0) >= 20,
                        120, "checkpoint 20 reported")
        axtest.wait_for(lambda: (c.job(job.id)["ranks"][0].get("step") or 0) >= 20, 30,
                        "progress past step 20")
        figure("submit to checkpoint 20 known: %.2f s" % (time.monotonic() - submitted))
        python = os.path.realpath(CUDA_PYTHON)
        pids = [p["pid"] for p in axtest.rank_processes(c.marker, job.id)
                if p["attempt"] == 1 and os.path.realpath(p["exe"]) == python]
        self.assertEqual(len(pids), 1, axtest.rank_processes(c.marker, job.id))
        committed = job.committed_steps()[-1]
        self.assertLess(committed, STEPS, "the run ended before it could be interrupted")
        os.kill(pids[0], signal.SIGKILL)
        killed = time.monotonic()

        axtest.wait_for(lambda: c.job(job.id)["attempt"] >= 2, 30, "attempt 2")
        figure("SIGKILL to attempt 2 created: %.2f s" % (time.monotonic() - killed))
        c.wait_running(job.id, timeout=60, attempt=2)
        figure("SIGKILL to attempt 2 running: %.2f s" % (time.monotonic() - killed))
        resumed = "resumed at step %d from %s/step_%08d" % (committed, job.checkpoint_dir, committed)
        axtest.wait_for(lambda: resumed in c.logs(job.id, 0, attempt=2), 120, "the resume line")
        figure("SIGKILL to checkpoint %d loaded on the GPU: %.2f s" % (committed, time.monotonic() - killed))
        view = c.wait_job(job.id, timeout=300)
        self.assertEqual(view["state"], "succeeded", view.get("reason"))
        self.assertEqual(final_digests(c.logs(job.id, 0)), reference)
        attempts = {a["attempt"]: a for a in view["attempts"]}
        self.assertEqual(sorted(attempts), [1, 2])
        self.assertEqual(attempts[1]["end_reason"], "rank_exit")
        self.assertEqual(attempts[2]["resume_step"], committed)
        figure("digest %s, attempt 1 ended %s, resumed at %d" %
               (reference[0], attempts[1]["end_reason"], committed))
        self.assert_node_healthy(c)
        self.assert_no_ranks_alive(c, job.id)


if __name__ == "__main__":
    axtest.main(skip=NO_GPU if GPUS is None else None)
