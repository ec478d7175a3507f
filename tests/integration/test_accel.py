# SPDX-License-Identifier: MIT
"""Heterogeneous accelerators end to end (issue 4): real agents, each given a host's
hwloc export (--topology) and a fake device root (--dev-root: a temporary directory
with empty dev/nvidia0, dev/accel0, dev/neuron0 ... files), report their inventory; the
scheduler places ranks on devices by PCIe/NUMA locality; every vendor's rank gets its
exact visibility environment plus the framework's; launch profiles fill tuning
variables the job did not set; and a bad GPU (the fake NVML library of tests/fakenvml,
loaded by the agent through LD_LIBRARY_PATH since it dlopen()s "libnvidia-ml.so.1")
or a failing --health-cmd makes the node unhealthy, moves its job elsewhere, and lets
the node back once healthy.

The expected devices of each host are read from its XML here, independently of the
agent's code: PCI bus ids of the vendors' known device ids, the NUMA node of the
nearest non-I/O ancestor, and the PCIe switch (upstream port above the device's
downstream port, when that port is not a root port), as docs/ACCELERATORS.md defines
them.
"""

import getpass
import json
import os
import re
import shutil
import signal
import tempfile
import unittest
import xml.etree.ElementTree as ET

import axtest

PROFILES_DIR = os.environ.get("PROFILES_DIR", os.path.join(axtest.SOURCE_ROOT, "profiles"))

# PCI ids of the backends' model tables (docs/ACCELERATORS.md). NVIDIA: display or 3D
# class only, so NVSwitches (class 0680) are not GPUs.
NVIDIA_KINDS = {
    0x15f7: "nvidia-p100", 0x15f8: "nvidia-p100", 0x15f9: "nvidia-p100",
    0x1db1: "nvidia-v100", 0x1db4: "nvidia-v100", 0x1db5: "nvidia-v100",
    0x1db6: "nvidia-v100", 0x1db8: "nvidia-v100", 0x1df6: "nvidia-v100",
    0x20b0: "nvidia-a100", 0x20b1: "nvidia-a100", 0x20b2: "nvidia-a100",
    0x20b5: "nvidia-a100", 0x20f1: "nvidia-a100",
    0x2321: "nvidia-h100", 0x2330: "nvidia-h100", 0x2331: "nvidia-h100", 0x2339: "nvidia-h100",
    0x2335: "nvidia-h200", 0x233b: "nvidia-h200",
}
TPU_KINDS = {0x005e: "tpu-v4", 0x0062: "tpu-v5p", 0x0063: "tpu-v5e", 0x006f: "tpu-v6e"}
NEURON_KINDS = {0x7164: "trn1", 0x7264: "inf2", 0x7364: "trn2"}
NEURON_CORES = {"trn1": 2, "inf2": 2, "trn2": 8}

# host -> (topology file, device node prefix, kind, device count)
HOSTS = {
    "dgx2": (os.path.join(axtest.SHARED_TOPOLOGIES_DIR, "nvidia-dgx2-v100x16.xml"), "nvidia",
             "nvidia-v100", 16),
    "power8": (os.path.join(axtest.SHARED_TOPOLOGIES_DIR, "power8-4gpu.xml"), "nvidia",
               "nvidia-p100", 4),
    "h100": (os.path.join(axtest.TOPOLOGIES_DIR, "nvidia-h100x8.xml"), "nvidia", "nvidia-h100", 8),
    "tpu": (os.path.join(axtest.TOPOLOGIES_DIR, "tpu-v5p-4chip.xml"), "accel", "tpu-v5p", 4),
    "trn2": (os.path.join(axtest.TOPOLOGIES_DIR, "trn2-16dev.xml"), "neuron", "trn2", 16),
}

USER = getpass.getuser()
BUS_ID_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


# ---------------------------------------------------------------------------------------
# What the topology files say.


def bus_key(bus_id):
    d, b, rest = bus_id.split(":")
    dev, fn = rest.split(".")
    return (int(d, 16), int(b, 16), int(dev, 16), int(fn, 16))


def switch_code(bus_id):
    d, b, dev, fn = bus_key(bus_id)
    return ((d & 0x7FFF) << 16) | (b << 8) | (dev << 3) | fn


def nodeset_bits(text):
    """The set bits of an hwloc bitmap string ("0x00000303,0x03030000,,0x0")."""
    value = 0
    for word in text.split(","):
        value = (value << 32) | (int(word, 16) if word else 0)
    return [i for i in range(value.bit_length()) if value >> i & 1]


def expected_devices(topology):
    """[{kind, pci_bus_id, numa_node, pcie_switch}] of the accelerators in an hwloc XML,
    in inventory order: backend by backend (nvidia, tpu, neuron), then PCI bus order."""
    root = ET.parse(topology).getroot()
    found = []

    def walk(obj, ancestors):
        if obj.get("type") == "PCIDev":
            klass, ids = obj.get("pci_type").split()[:2]
            vendor, device = (int(x, 16) for x in ids.strip("[]").split(":"))
            kind, order = None, None
            if vendor == 0x10de and klass in ("0300", "0302"):
                kind, order = NVIDIA_KINDS.get(device, "nvidia-gpu"), 0
            elif vendor == 0x1ae0 and device in TPU_KINDS:
                kind, order = TPU_KINDS[device], 1
            elif vendor == 0x1d0f and device in NEURON_KINDS:
                kind, order = NEURON_KINDS[device], 2
            if kind:
                found.append((order, bus_key(obj.get("pci_busid")), {
                    "kind": kind, "pci_bus_id": obj.get("pci_busid"),
                    "numa_node": numa_of(ancestors), "pcie_switch": switch_of(ancestors)}))
        for child in obj.findall("object"):
            walk(child, ancestors + [obj])

    def numa_of(ancestors):
        for a in reversed(ancestors):
            if a.get("type") in ("Bridge", "PCIDev", "OSDev"):
                continue
            bits = nodeset_bits(a.get("nodeset", "0x0"))
            if a.get("type") == "Machine" and len(bits) > 1:
                return -1
            return bits[0] if bits else -1
        return -1

    def switch_of(ancestors):
        # parent: the downstream port; above it the switch's upstream port, which must
        # itself sit below a PCI-PCI bridge (else the "switch" is a root port).
        if len(ancestors) < 3:
            return -1
        down, up, above = ancestors[-1], ancestors[-2], ancestors[-3]
        if not all(o.get("type") == "Bridge" and o.get("pci_busid") for o in (down, up, above)):
            return -1
        return switch_code(up.get("pci_busid"))

    walk(root, [])
    found.sort(key=lambda t: (t[0], t[1]))
    return [d for _, _, d in found]


def vendor_of(kind):
    if kind.startswith(("nvidia-", "tpu-")):
        return kind.split("-")[0]
    return "neuron" if kind in NEURON_CORES else kind


def read_profile(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("export "):
                line = line[7:].lstrip()
            k, v = line.split("=", 1)
            if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
                v = v[1:-1]
            env[k] = v
    return env


def profile_env(kind):
    """What the launch profiles give a rank of kind: model file first, vendor file
    for keys the model file lacks."""
    env = {}
    parts = kind.split("-")
    for n in range(len(parts), 0, -1):
        path = os.path.join(PROFILES_DIR, "-".join(parts[:n]) + ".env")
        if os.path.exists(path):
            for k, v in read_profile(path).items():
                env.setdefault(k, v)
    return env


def fakenvml_library():
    path = os.environ.get("FAKENVML_LIBRARY")
    if path:
        return path
    builddir = os.path.dirname(os.path.dirname(os.path.abspath(axtest.AXAGENT)))
    return os.path.join(builddir, "tests", "fakenvml", "libnvidia-ml.so.1")


# ---------------------------------------------------------------------------------------
# A cluster whose agents may each have their own environment.


class AccelCluster(axtest.Cluster):
    def __init__(self, *args, agent_env=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.agent_env = agent_env or {}

    def start_agent(self, node):
        if node not in self.agents and node in self.agent_env:
            if self.use_relay and node not in self.relays:
                self.relays[node] = axtest.Relay(self.port)
            env = dict(self.env)
            env.update(self.agent_env[node])
            self.agents[node] = axtest.Daemon("axagent-%s" % node, self._agent_argv(node),
                                              self.tmp, env)
        return super().start_agent(node)


class AccelTest(axtest.ClusterTestCase):
    def setUp(self):
        missing = [p for p, _, _, _ in HOSTS.values() if not os.path.exists(p)]
        if missing:
            self.skipTest("topologies missing: %s" % ", ".join(missing))
        self.scratch = tempfile.mkdtemp(prefix="axtest-accel-")
        self.addCleanup(shutil.rmtree, self.scratch, True)
        self._roots = 0

    def host_args(self, host, missing=(), extra=()):
        """Agent argv for a host: its topology and a dev root holding every device node
        but those in `missing` (positions). The same directory is the sys root, so that
        no backend looks at this machine's real /sys (the TPU health probe would find
        the synthetic chips missing from its PCI bus)."""
        topology, prefix, _, count = HOSTS[host]
        self._roots += 1
        root = os.path.join(self.scratch, "root%d-%s" % (self._roots, host))
        os.makedirs(os.path.join(root, "dev"))
        for i in range(count):
            if i not in missing:
                open(os.path.join(root, "dev", "%s%d" % (prefix, i)), "w").close()
        args = ["--topology", topology, "--dev-root", root, "--sys-root", root]
        if os.geteuid() == 0 and axtest.supports_flag(axtest.AXAGENT, "--allow-root"):
            args.append("--allow-root")  # ranks run as the test's own account
        return args + list(extra)

    def start_accel_cluster(self, agent_args, agent_env=None, start_all=True):
        c = AccelCluster(len(agent_args), agent_args=agent_args, agent_env=agent_env,
                         name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        axtest.log("%s: cluster in %s" % (self.id(), c.tmp))
        if start_all:
            c.start()
        else:
            c.start_controller()
        return c

    def node(self, c, name):
        return {n["name"]: n for n in c.nodes()}[name]

    def accel_job(self, c, name, ranks, per_rank, kind, ranks_per_node=None, framework=None,
                  env=None, long=False, spec=None):
        extra = {}
        if per_rank:
            extra["resources"] = {"accelerator": kind, "accelerators_per_rank": per_rank}
        if framework:
            extra["framework"] = framework
        extra.update(spec or {})
        extra.setdefault("user", USER)
        job = c.work_job(name, ranks=ranks, ranks_per_node=ranks_per_node,
                         steps=10000 if long else 1, step_ms=50 if long else 1,
                         checkpoint_every=5, print_env=not long, spec=extra)
        job.spec["env"].update(env or {})
        job.id = c.submit(job.spec)["id"]
        return job

    def rank_devices(self, view):
        ranks = [r for r in view["ranks"] if r["attempt"] == view["attempt"]]
        return {r["rank"]: (r["node"], r["devices"]) for r in ranks}

    def assert_inventory(self, node, host, missing=()):
        expected = expected_devices(HOSTS[host][0])
        _, _, kind, count = HOSTS[host]
        self.assertEqual(len(expected), count, "the oracle's reading of %s" % host)
        expected = [d for i, d in enumerate(expected) if i not in missing]
        accels = node["inventory"]["accelerators"]
        self.assertEqual([a["index"] for a in accels], list(range(len(expected))))
        for a, e in zip(accels, expected):
            with self.subTest(host=host, device=a["index"]):
                self.assertEqual(a["kind"], kind)
                self.assertTrue(a.get("model"), a)
                self.assertRegex(a["pci_bus_id"], BUS_ID_RE)
                for key in ("pci_bus_id", "numa_node", "pcie_switch"):
                    self.assertEqual(a[key], e[key], "%s of %s" % (key, a))
        self.assertEqual(len(accels), len(expected),
                         "%s: %r" % (host, [a["pci_bus_id"] for a in accels]))
        self.assertEqual(node["free"]["accelerators"].get(kind), len(expected))
        return accels

    # -- 1. inventory ---------------------------------------------------------------

    def test_inventory_per_host(self):
        hosts = ["dgx2", "power8", "h100", "tpu", "trn2", "h100"]
        args = [self.host_args(h) for h in hosts[:-1]] + [self.host_args("h100", missing=(3,))]
        c = self.start_accel_cluster(args)
        nodes = {n["name"]: n for n in c.nodes()}

        dgx2 = self.assert_inventory(nodes["n1"], "dgx2")
        self.assertEqual({a["model"] for a in dgx2}, {"Tesla V100 SXM3 32GB"})
        self.assertEqual(nodes["n1"]["inventory"]["numa_nodes"], 2)
        self.assertEqual([a["numa_node"] for a in dgx2], [0] * 8 + [1] * 8)
        switches = [a["pcie_switch"] for a in dgx2]
        self.assertEqual(switches[0], 0x3200, "34:00.0 is under the switch at 32:00.0")
        self.assertEqual([switches.count(s) for s in switches], [2] * 16, "GPU pairs per switch")
        self.assertEqual(switches[::2], switches[1::2])

        power8 = self.assert_inventory(nodes["n2"], "power8")
        self.assertEqual({a["model"] for a in power8}, {"Tesla P100 SXM2 16GB"})
        self.assertEqual([a["pci_bus_id"][:4] for a in power8], ["0002", "0003", "000a", "000b"])
        self.assertEqual([a["numa_node"] for a in power8], [0, 0, 1, 1])
        self.assertEqual({a["pcie_switch"] for a in power8}, {-1})

        h100 = self.assert_inventory(nodes["n3"], "h100")
        self.assertEqual({a["model"] for a in h100}, {"H100 SXM5 80GB"})
        self.assertEqual([a["numa_node"] for a in h100], [0] * 4 + [1] * 4)
        self.assertEqual(len({a["pcie_switch"] for a in h100}), 4)

        tpu = self.assert_inventory(nodes["n4"], "tpu")
        self.assertEqual({a["model"] for a in tpu}, {"TPU v5p"})
        self.assertEqual([a["numa_node"] for a in tpu], [0, 0, 1, 1])
        self.assertEqual({a["pcie_switch"] for a in tpu}, {-1}, "chips sit on host bridges")

        trn2 = self.assert_inventory(nodes["n5"], "trn2")
        self.assertEqual({a["model"] for a in trn2}, {"Trainium2"})
        self.assertEqual({a.get("cores") for a in trn2}, {NEURON_CORES["trn2"]})
        self.assertEqual([a["numa_node"] for a in trn2], [0] * 8 + [1] * 8)
        switches = [a["pcie_switch"] for a in trn2]
        self.assertEqual(len(set(switches)), 4)
        self.assertEqual([switches.count(s) for s in switches], [4] * 16)

        # No /dev/nvidia3: the fourth GPU in bus order is not offered, the rest are.
        seven = self.assert_inventory(nodes["n6"], "h100", missing=(3,))
        self.assertNotIn(h100[3]["pci_bus_id"], [a["pci_bus_id"] for a in seven])

        p = c.cli("nodes")
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {line.split()[0]: line for line in p.stdout.splitlines()[1:] if line.strip()}
        want = {"n1": "nvidia-v100 x16 (16 free)", "n2": "nvidia-p100 x4 (4 free)",
                "n3": "nvidia-h100 x8 (8 free)", "n4": "tpu-v5p x4 (4 free)",
                "n5": "trn2 x16 (16 free)", "n6": "nvidia-h100 x7 (7 free)"}
        for name, text in want.items():
            self.assertIn(name, rows, p.stdout)
            self.assertIn(text, rows[name])
            self.assertIn("ready", rows[name])
        p = c.cli("--json", "nodes")
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = {n["name"]: n for n in json.loads(p.stdout)["nodes"]}
        for name, node in nodes.items():
            self.assertEqual(listed[name]["inventory"]["accelerators"],
                             node["inventory"]["accelerators"])

    # -- 2. locality ------------------------------------------------------------------

    def test_locality_on_dgx2(self):
        c = self.start_accel_cluster([self.host_args("dgx2")])
        inv = self.node(c, "n1")["inventory"]["accelerators"]
        by_index = {a["index"]: a for a in inv}

        pairs = self.accel_job(c, "pairs", 2, 2, "nvidia-v100", ranks_per_node=2, long=True)
        c.wait_running(pairs.id)
        quad = self.accel_job(c, "quad", 1, 4, "nvidia-v100", long=True)
        c.wait_running(quad.id)
        pair_devs = self.rank_devices(c.job(pairs.id))
        quad_devs = self.rank_devices(c.job(quad.id))
        taken = []
        for rank, (node, devs) in sorted(pair_devs.items()):
            self.assertEqual(len(devs), 2, pair_devs)
            switches = {by_index[d]["pcie_switch"] for d in devs}
            self.assertEqual(len(switches), 1, "rank %d's GPUs %r share one switch" % (rank, devs))
            self.assertNotEqual(switches, {-1})
            taken += devs
        node, devs = quad_devs[0]
        self.assertEqual(len(devs), 4)
        self.assertEqual(len({by_index[d]["numa_node"] for d in devs}), 1,
                         "4 GPUs (more than a switch holds) on one NUMA node: %r" % devs)
        taken += devs
        self.assertEqual(len(taken), len(set(taken)), "devices given twice: %r %r"
                         % (pair_devs, quad_devs))
        self.assertEqual(self.node(c, "n1")["free"]["accelerators"]["nvidia-v100"], 8)
        for job in (pairs, quad):
            c.cancel(job.id)
        for job in (pairs, quad):
            c.wait_job(job.id, "cancelled", timeout=20)

        halves = self.accel_job(c, "halves", 2, 8, "nvidia-v100", ranks_per_node=2)
        view = c.wait_job(halves.id, timeout=30)
        self.assertEqual(view["state"], "succeeded", view.get("reason"))
        devs = self.rank_devices(view)
        numa = []
        for rank in (0, 1):
            got = devs[rank][1]
            self.assertEqual(len(got), 8)
            nodes = {by_index[d]["numa_node"] for d in got}
            self.assertEqual(len(nodes), 1, "rank %d's 8 GPUs on one NUMA node: %r" % (rank, got))
            numa += nodes
            env = axtest.env_from_log(c.logs(halves.id, rank))
            # Every GPU of the host is present, so vendor index = inventory index.
            self.assertEqual(env["CUDA_VISIBLE_DEVICES"], ",".join(map(str, sorted(got))))
            self.assertEqual(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID")
            self.assertNotIn("NCCL_DEBUG", env, "no --profile-dir, no profile")
        self.assertEqual(sorted(numa), [0, 1])
        self.assertFalse(set(devs[0][1]) & set(devs[1][1]))

    # -- 3 and 4. environment per vendor, launch profiles ---------------------------

    def check_framework(self, envs, framework):
        world = len(envs)
        coord = {e["AXCTL_COORDINATOR"] for e in envs.values()}
        self.assertEqual(len(coord), 1, "one coordinator for the gang: %r" % coord)
        coord = coord.pop()
        host, port = coord.rsplit(":", 1)
        for rank, env in envs.items():
            with self.subTest(framework=framework, rank=rank):
                if framework == "torch":
                    self.assertEqual(env["MASTER_ADDR"], host)
                    self.assertEqual(env["MASTER_PORT"], port)
                    self.assertEqual(env["RANK"], str(rank))
                    self.assertEqual(env["WORLD_SIZE"], str(world))
                    self.assertEqual(env["LOCAL_RANK"], env["AXCTL_LOCAL_RANK"])
                else:
                    self.assertEqual(env["JAX_COORDINATOR_ADDRESS"], coord)
                    self.assertEqual(env["NUM_PROCESSES"], str(world))
                    self.assertEqual(env["PROCESS_ID"], str(rank))

    def vendor_index(self, inventory, index):
        """The device's number among its own backend's devices, as the runtime counts."""
        vendor = vendor_of(inventory[index]["kind"])
        same = [a["index"] for a in inventory if vendor_of(a["kind"]) == vendor]
        return same.index(index)

    def job_envs(self, c, job):
        view = c.wait_job(job.id, timeout=45)
        self.assertEqual(view["state"], "succeeded",
                         "job %s: %r" % (job.spec["name"], view.get("reason")))
        envs = {r: axtest.env_from_log(c.logs(job.id, r)) for r in range(job.spec["ranks"])}
        return view, envs

    def test_vendor_environment(self):
        profile = ["--profile-dir", PROFILES_DIR]
        args = [self.host_args("h100", extra=profile + ["--labels", "host=h100a"]),
                self.host_args("h100", missing=(3,), extra=profile + ["--labels", "host=h100b"]),
                self.host_args("tpu", extra=profile), self.host_args("tpu", extra=profile),
                self.host_args("trn2", extra=profile)]
        c = self.start_accel_cluster(args)
        inv = {n["name"]: n["inventory"]["accelerators"] for n in c.nodes()}

        nv = self.accel_job(c, "nv", 4, 3, "nvidia-h100", ranks_per_node=2, framework="torch",
                            env={"NCCL_DEBUG": "INFO"})
        none = self.accel_job(c, "none", 1, 0, None, framework="torch",
                              env={"MASTER_PORT": "29500"},
                              spec={"constraints": {"node_selector": {"host": "h100a"}}})
        tpu = self.accel_job(c, "tpu", 2, 4, "tpu-v5p", ranks_per_node=1, framework="jax")
        trn = self.accel_job(c, "trn", 2, 2, "trn2", ranks_per_node=2, framework="torch")
        tpu_shared = self.accel_job(c, "tpu2", 4, 2, "tpu-v5p", ranks_per_node=2, framework="jax")

        # NVIDIA: visible GPUs by vendor index in bus order; the job's env beats the
        # profile's NCCL_DEBUG; every other profile key is there.
        view, envs = self.job_envs(c, nv)
        self.check_framework(envs, "torch")
        want_profile = profile_env("nvidia-h100")
        self.assertIn("NCCL_NVLS_ENABLE", want_profile, "profiles/nvidia-h100.env")
        self.assertIn("TORCH_NCCL_ASYNC_ERROR_HANDLING", profile_env("nvidia"))
        seen = set()
        for rank, (node, devs) in self.rank_devices(view).items():
            with self.subTest(job="nv", rank=rank):
                env = envs[rank]
                self.assertEqual(len(devs), 3)
                vidx = sorted(self.vendor_index(inv[node], d) for d in devs)
                self.assertEqual(env["CUDA_VISIBLE_DEVICES"], ",".join(map(str, vidx)))
                buses = [inv[node][d]["pci_bus_id"] for d in sorted(devs)]
                self.assertEqual(buses, sorted(buses, key=bus_key))
                self.assertEqual(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID")
                for key, value in want_profile.items():
                    self.assertEqual(env.get(key), "INFO" if key == "NCCL_DEBUG" else value, key)
                seen |= {(node, d) for d in devs}
        self.assertEqual(len(seen), 12, "no GPU shared between ranks")
        # n2 lacks /dev/nvidia3: the GPUs after the gap are numbered one lower, as
        # CUDA numbers the GPUs it can open, and the ranks there were numbered so.
        h100 = expected_devices(HOSTS["h100"][0])
        self.assertEqual([a["pci_bus_id"] for a in inv["n2"]],
                         [d["pci_bus_id"] for i, d in enumerate(h100) if i != 3])
        self.assertEqual(sorted(node for node, _ in self.rank_devices(view).values()),
                         ["n1", "n1", "n2", "n2"])

        # `axctl status --env` shows what the logs show.
        p = c.cli("--json", "status", nv.id, "--env")
        self.assertEqual(p.returncode, 0, p.stderr)
        listed = {r["rank"]: r["env"] for r in json.loads(p.stdout)["ranks"]}
        for rank in range(4):
            for key in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "MASTER_ADDR", "RANK",
                        "NCCL_DEBUG", "NCCL_NVLS_ENABLE", "AXCTL_COORDINATOR"):
                self.assertEqual(listed[rank].get(key), envs[rank][key], (rank, key))
        p = c.cli("status", nv.id, "--env", "--rank", 1)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("CUDA_VISIBLE_DEVICES=%s" % envs[1]["CUDA_VISIBLE_DEVICES"], p.stdout)

        # A rank without accelerators on a GPU host sees none, and gets no profile.
        view, envs = self.job_envs(c, none)
        self.assertEqual(self.rank_devices(view)[0], ("n1", []))
        self.assertEqual(envs[0].get("CUDA_VISIBLE_DEVICES"), "")
        self.assertEqual(envs[0].get("CUDA_DEVICE_ORDER"), "PCI_BUS_ID")
        self.assertNotIn("NCCL_NVLS_ENABLE", envs[0])
        # The job's own variables beat the framework's defaults, one by one.
        coordinator_port = envs[0]["AXCTL_COORDINATOR"].rsplit(":", 1)[1]
        self.assertEqual(envs[0]["MASTER_PORT"], "29500")
        self.assertNotEqual(coordinator_port, "29500")
        envs[0]["MASTER_PORT"] = coordinator_port
        self.check_framework(envs, "torch")

        # TPU, one process per host: the host's 4 chips as a 2x2x1 block, hosts in a line.
        view, envs = self.job_envs(c, tpu)
        self.check_framework(envs, "jax")
        want_profile = profile_env("tpu-v5p")
        self.assertIn("LIBTPU_INIT_ARGS", want_profile)
        hosts = envs[0]["AXCTL_NODE_HOSTNAMES"]
        self.assertEqual(len(hosts.split(",")), 2)
        for rank, (node, devs) in self.rank_devices(view).items():
            with self.subTest(job="tpu", rank=rank):
                env = envs[rank]
                self.assertEqual(sorted(devs), [0, 1, 2, 3])
                self.assertEqual(env["TPU_VISIBLE_CHIPS"], "0,1,2,3")
                self.assertEqual(env["TPU_CHIPS_PER_PROCESS_BOUNDS"], "2,2,1")
                self.assertEqual(env["TPU_PROCESS_BOUNDS"], "1,1,2")
                self.assertEqual(env["TPU_WORKER_ID"], env["AXCTL_NODE_RANK"])
                self.assertEqual(env["TPU_WORKER_ID"], str(rank))
                self.assertEqual(env["TPU_WORKER_HOSTNAMES"], hosts)
                self.assertNotIn("TPU_PROCESS_PORT", env, "one process per host")
                for key, value in want_profile.items():
                    self.assertEqual(env.get(key), value, key)
                self.assertNotIn("CUDA_VISIBLE_DEVICES", env)

        # TPU, two processes per host: 2 chips each, a port and a task id per process.
        view, envs = self.job_envs(c, tpu_shared)
        self.check_framework(envs, "jax")
        per_host = {}
        for rank, (node, devs) in self.rank_devices(view).items():
            with self.subTest(job="tpu2", rank=rank):
                env = envs[rank]
                self.assertEqual(len(devs), 2)
                self.assertEqual(env["TPU_VISIBLE_CHIPS"], ",".join(map(str, sorted(devs))))
                self.assertEqual(env["TPU_CHIPS_PER_PROCESS_BOUNDS"], "2,1,1")
                self.assertEqual(env["TPU_PROCESS_BOUNDS"], "1,1,4")
                self.assertEqual(env["TPU_WORKER_ID"], env["AXCTL_NODE_RANK"])
                self.assertEqual(env["TPU_PROCESS_PORT"], str(8476 + int(env["AXCTL_LOCAL_RANK"])))
                self.assertEqual(env["CLOUD_TPU_TASK_ID"], str(rank))
                hl = env["AXCTL_NODE_HOSTNAMES"].split(",")
                self.assertEqual(env["TPU_PROCESS_ADDRESSES"],
                                 ",".join("%s:%d" % (h, 8476 + l) for h in hl for l in (0, 1)))
                per_host.setdefault(node, []).extend(devs)
        for node, devs in per_host.items():
            self.assertEqual(sorted(devs), [0, 1, 2, 3], "%s's chips shared out once" % node)

        # Neuron: 8 physical cores per Trainium2, the runtime's bootstrap on the port
        # after the coordinator's.
        view, envs = self.job_envs(c, trn)
        self.check_framework(envs, "torch")
        want_profile = profile_env("trn2")
        self.assertEqual(want_profile.get("NEURON_LOGICAL_NC_CONFIG"), "1")
        cores_seen = []
        for rank, (node, devs) in self.rank_devices(view).items():
            with self.subTest(job="trn", rank=rank):
                env = envs[rank]
                self.assertEqual(len(devs), 2)
                cores = NEURON_CORES["trn2"]
                ranges = ["%d-%d" % (v * cores, v * cores + cores - 1)
                          for v in sorted(self.vendor_index(inv[node], d) for d in devs)]
                self.assertEqual(env["NEURON_RT_VISIBLE_CORES"], ",".join(ranges))
                host, port = env["AXCTL_COORDINATOR"].rsplit(":", 1)
                self.assertEqual(env["NEURON_RT_ROOT_COMM_ID"], "%s:%d" % (host, int(port) + 1))
                self.assertEqual(env["NEURON_PJRT_PROCESS_INDEX"], str(rank))
                self.assertEqual(env["NEURON_PJRT_PROCESSES_NUM_DEVICES"], "16,16")
                for key, value in want_profile.items():
                    self.assertEqual(env.get(key), value, key)
                switches = {inv[node][d]["pcie_switch"] for d in devs}
                self.assertEqual(len(switches), 1, "2 devices under one switch: %r" % devs)
                cores_seen += ranges
        self.assertEqual(len(cores_seen), len(set(cores_seen)))

    def test_launch_profiles(self):
        args = [self.host_args("h100", extra=["--profile-dir", PROFILES_DIR, "--labels", "p=yes"]),
                self.host_args("h100", extra=["--labels", "p=no"])]
        c = self.start_accel_cluster(args)
        model = read_profile(os.path.join(PROFILES_DIR, "nvidia-h100.env"))
        vendor = read_profile(os.path.join(PROFILES_DIR, "nvidia.env"))
        self.assertTrue(any(k.startswith("NCCL_") for k in model), "nvidia-h100.env has NCCL_*")

        plain = self.accel_job(c, "plain", 1, 8, "nvidia-h100",
                               spec={"constraints": {"node_selector": {"p": "yes"}}})
        _, envs = self.job_envs(c, plain)
        env = envs[0]
        for key, value in model.items():
            self.assertEqual(env.get(key), value, "%s from nvidia-h100.env" % key)
        for key, value in vendor.items():
            self.assertEqual(env.get(key), model.get(key, value), "%s: model file first" % key)
        self.assertEqual(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7")

        # The job's env wins over the profile, variable by variable; visibility wins
        # over the job's env.
        override = self.accel_job(c, "override", 1, 8, "nvidia-h100",
                                  env={"NCCL_DEBUG": "TRACE", "NCCL_NVLS_ENABLE": "0",
                                       "CUDA_VISIBLE_DEVICES": "7"},
                                  spec={"constraints": {"node_selector": {"p": "yes"}}})
        _, envs = self.job_envs(c, override)
        env = envs[0]
        self.assertEqual(env["NCCL_DEBUG"], "TRACE")
        self.assertEqual(env["NCCL_NVLS_ENABLE"], "0")
        self.assertEqual(env["XLA_FLAGS"], model["XLA_FLAGS"])
        self.assertEqual(env["CUDA_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7")

        # An agent without --profile-dir adds nothing.
        bare = self.accel_job(c, "bare", 1, 2, "nvidia-h100",
                              spec={"constraints": {"node_selector": {"p": "no"}}})
        view, envs = self.job_envs(c, bare)
        self.assertEqual(self.rank_devices(view)[0][0], "n2")
        for key in model:
            self.assertNotIn(key, envs[0])

    # -- 5. health ----------------------------------------------------------------------

    def wait_node(self, c, name, state, timeout=15):
        def reached():
            node = self.node(c, name)
            return node if node["state"] == state else None
        return axtest.wait_for(reached, timeout, "node %s %s" % (name, state), interval=0.1)

    def wait_attempt_running(self, c, job_id, attempt, timeout=30):
        def running():
            view = c.job(job_id)
            if view["attempt"] != attempt:
                return None
            return c.running_ranks(job_id, attempt)
        return axtest.wait_for(running, timeout, "job %d attempt %d running" % (job_id, attempt),
                               interval=0.1)

    def node_row(self, c, name):
        p = c.cli("nodes")
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [line for line in p.stdout.splitlines() if line.split()[:1] == [name]]
        self.assertEqual(len(rows), 1, p.stdout)
        return rows[0]

    def fake_nvml(self):
        """The fake NVML library's directory (for LD_LIBRARY_PATH) and its config file."""
        library = fakenvml_library()
        if not os.path.exists(library):
            self.skipTest("fake NVML library not built: %s" % library)
        libdir = os.path.join(self.scratch, "nvml")
        os.makedirs(libdir)
        os.symlink(os.path.abspath(library), os.path.join(libdir, "libnvidia-ml.so.1"))
        config = os.path.join(self.scratch, "fakenvml.conf")
        open(config, "w").close()
        return libdir, config

    def test_nvml_health(self):
        libdir, config = self.fake_nvml()
        h100 = expected_devices(HOSTS["h100"][0])
        good = "%s uuid=GPU-axtest-0\n" % h100[0]["pci_bus_id"]
        with open(config, "w") as f:
            f.write(good)
        fast = ["--health-interval-ms", "200"]
        c = self.start_accel_cluster(
            [self.host_args("h100", extra=fast), self.host_args("h100")],
            agent_env={"n1": {"LD_LIBRARY_PATH": libdir, "FAKENVML_CONFIG": config}},
            start_all=False)
        c.start_agent("n1")
        c.wait_nodes_ready(["n1"])
        inv = self.node(c, "n1")["inventory"]["accelerators"]
        self.assertEqual(inv[0]["uuid"], "GPU-axtest-0", "UUIDs come from NVML")

        job = c.work_job("nvml", ranks=1, steps=10000, step_ms=50,
                         restart={"max_restarts": 5, "backoff_initial_s": 0},
                         spec={"user": USER, "resources": {"accelerator": "nvidia-h100",
                                             "accelerators_per_rank": 8}})
        job.id = c.submit(job.spec)["id"]
        first = self.wait_attempt_running(c, job.id, 1)
        self.assertEqual(first[0]["node"], "n1")
        c.start_agent("n2")
        c.wait_nodes_ready(["n1", "n2"])

        bad = h100[5]["pci_bus_id"]
        with open(config, "w") as f:
            f.write(good + "%s ecc=3\n" % bad)
        node = self.wait_node(c, "n1", "unhealthy")
        self.assertIn("nvidia %s: 3 uncorrected ECC errors" % bad, node["reason"])
        row = self.node_row(c, "n1")
        self.assertIn("unhealthy", row)
        self.assertIn(bad, row)

        second = self.wait_attempt_running(c, job.id, 2)
        self.assertEqual(second[0]["node"], "n2")
        view = c.job(job.id)
        ended = [a for a in view["attempts"] if a["attempt"] == 1][0]
        self.assertEqual(ended["end_reason"], "unhealthy", ended)
        self.assertEqual(ended["blamed_node"], "n1", ended)
        alive = [p["pid"] for p in axtest.rank_processes(c.marker, job.id)]
        self.assertNotIn(first[0]["pid"], alive, "attempt 1's rank is gone")

        with open(config, "w") as f:
            f.write(good)
        self.wait_node(c, "n1", "ready")
        self.assertIn("ready", self.node_row(c, "n1"))

        # A GPU that fell off the bus.
        lost = h100[2]["pci_bus_id"]
        with open(config, "w") as f:
            f.write(good + "%s lost\n" % lost)
        node = self.wait_node(c, "n1", "unhealthy")
        self.assertIn("nvidia %s: GPU lost (fallen off the bus)" % lost, node["reason"])
        with open(config, "w") as f:
            f.write(good)
        self.wait_node(c, "n1", "ready")

        # A critical XID needs a GPU reset: it stays until the agent restarts, while an
        # application's XID (13) is no fault of the node.
        xid = h100[7]["pci_bus_id"]
        with open(config, "w") as f:
            f.write(good + "%s xid=79\n%s xid=13\n" % (xid, h100[6]["pci_bus_id"]))
        node = self.wait_node(c, "n1", "unhealthy")
        self.assertEqual(node["reason"], "nvidia %s: critical XID 79" % xid)
        with open(config, "w") as f:
            f.write(good)
        for _ in range(2):  # a few probes later it is still recorded
            axtest.wait_for(lambda: self.node(c, "n1")["last_seen"] != node["last_seen"], 10,
                            "n1 to sync again")
            node = self.node(c, "n1")
            self.assertEqual(node["state"], "unhealthy", node)
        c.restart_agent("n1")
        self.wait_node(c, "n1", "ready")
        self.assertEqual(c.job(job.id)["attempt"], 2, "an idle node's health moves no job")
        c.cancel(job.id)
        c.wait_job(job.id, "cancelled", timeout=20)
        self.assert_no_overlap(job)
        self.assert_clean_exit(c, "n1")

    def test_gpu_failure_under_a_dying_rank_is_the_nodes_fault(self):
        """A rank dies while its GPU reports uncorrected ECC errors, long before the next
        periodic probe: the agent probes at the exit, so the sync that carries the exit
        also carries the evidence, and the attempt ends as the node's fault (issue 11)."""
        libdir, config = self.fake_nvml()
        slow = ["--health-interval-ms", "600000"]
        c = self.start_accel_cluster(
            [self.host_args("h100", extra=slow)],
            agent_env={"n1": {"LD_LIBRARY_PATH": libdir, "FAKENVML_CONFIG": config}})
        job = c.work_job("ecc", ranks=1, steps=10000, step_ms=50,
                         restart={"max_restarts": 5, "backoff_initial_s": 0},
                         spec={"user": USER, "resources": {"accelerator": "nvidia-h100",
                                                           "accelerators_per_rank": 8}})
        job.id = c.submit(job.spec)["id"]
        rank = self.wait_attempt_running(c, job.id, 1)[0]
        bad = expected_devices(HOSTS["h100"][0])[3]["pci_bus_id"]
        with open(config, "w") as f:
            f.write("%s ecc=2\n" % bad)
        os.kill(rank["pid"], signal.SIGKILL)
        view = axtest.wait_for(lambda: (lambda v: v if v["attempts"][0]["end_reason"] else None)(
            c.job(job.id)), 20, "attempt 1 to end")
        first = view["attempts"][0]
        self.assertEqual((first["end_reason"], first["failure_class"], first["blamed_node"]),
                         ("unhealthy", "node", "n1"), first)
        self.assertIn("nvidia %s: 2 uncorrected ECC errors" % bad, first["detail"])
        c.cancel(job.id)
        c.wait_job(job.id, "cancelled", timeout=20)

    def assert_clean_exit(self, c, node):
        """SIGTERM: the agent (with NVML loaded, under the sanitizers: no leak) exits 0."""
        daemon = c.agents[node]
        status = daemon.terminate()
        self.assertEqual(status, 0, axtest.tail(daemon.stderr_path, 30))

    def test_health_command(self):
        flag = os.path.join(self.scratch, "broken")
        script = os.path.join(self.scratch, "health.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nif [ -e %s ]; then echo 'scratch disk /local is read-only'; "
                    "exit 1; fi\nexit 0\n" % flag)
        os.chmod(script, 0o755)
        hc = ["--health-cmd", script, "--health-interval-ms", "1000"]
        c = self.start_accel_cluster([self.host_args("h100", extra=hc), self.host_args("h100")],
                                     start_all=False)
        c.start_agent("n1")
        c.wait_nodes_ready(["n1"])
        job = c.work_job("hc", ranks=1, steps=10000, step_ms=50,
                         restart={"max_restarts": 5, "backoff_initial_s": 0},
                         spec={"user": USER, "resources": {"accelerator": "nvidia-h100",
                                             "accelerators_per_rank": 4}})
        job.id = c.submit(job.spec)["id"]
        first = self.wait_attempt_running(c, job.id, 1)
        self.assertEqual(first[0]["node"], "n1")
        c.start_agent("n2")
        c.wait_nodes_ready(["n1", "n2"])

        open(flag, "w").close()
        node = self.wait_node(c, "n1", "unhealthy")
        self.assertEqual(node["reason"], "scratch disk /local is read-only")
        self.assertIn("scratch disk /local is read-only", self.node_row(c, "n1"))
        second = self.wait_attempt_running(c, job.id, 2)
        self.assertEqual(second[0]["node"], "n2")
        ended = [a for a in c.job(job.id)["attempts"] if a["attempt"] == 1][0]
        self.assertEqual((ended["end_reason"], ended["blamed_node"]), ("unhealthy", "n1"))

        os.unlink(flag)
        self.wait_node(c, "n1", "ready")
        c.cancel(job.id)
        c.wait_job(job.id, "cancelled", timeout=20)
        self.assert_no_overlap(job)


    def test_tpu_and_neuron_health(self):
        fast = ["--health-interval-ms", "200"]
        tpu_args, trn_args = self.host_args("tpu", extra=fast), self.host_args("trn2", extra=fast)
        tpu_root, trn_root = tpu_args[3], trn_args[3]
        chips = expected_devices(HOSTS["tpu"][0])
        for chip in chips:
            os.makedirs(os.path.join(tpu_root, "sys/bus/pci/devices", chip["pci_bus_id"]))
        c = self.start_accel_cluster([tpu_args, trn_args])

        # A TPU chip gone from the PCI bus, then its device node gone.
        gone = os.path.join(tpu_root, "sys/bus/pci/devices", chips[2]["pci_bus_id"])
        os.rmdir(gone)
        node = self.wait_node(c, "n1", "unhealthy")
        self.assertEqual(node["reason"],
                         "tpu %s: chip is gone from the PCI bus" % chips[2]["pci_bus_id"])
        os.makedirs(gone)
        self.wait_node(c, "n1", "ready")
        accel1 = os.path.join(tpu_root, "dev", "accel1")
        os.unlink(accel1)
        node = self.wait_node(c, "n1", "unhealthy")
        self.assertIn("tpu %s: device node " % chips[1]["pci_bus_id"], node["reason"])
        self.assertIn("accel1 is gone", node["reason"])
        open(accel1, "w").close()
        self.wait_node(c, "n1", "ready")

        # Trainium2: the driver's uncorrected HBM ECC counter of neuron5.
        devs = expected_devices(HOSTS["trn2"][0])
        stats = os.path.join(trn_root, "sys/devices/virtual/neuron_device/neuron5/stats/hardware")
        os.makedirs(stats)
        with open(os.path.join(stats, "mem_ecc_uncorrected"), "w") as f:
            f.write("2\n")
        node = self.wait_node(c, "n2", "unhealthy")
        self.assertEqual(node["reason"], "neuron %s (neuron5): 2 uncorrected HBM ECC errors"
                         % devs[5]["pci_bus_id"])
        self.assertIn("unhealthy", self.node_row(c, "n2"))
        with open(os.path.join(stats, "mem_ecc_uncorrected"), "w") as f:
            f.write("0\n")
        self.wait_node(c, "n2", "ready")
        self.assertEqual(self.node(c, "n1")["state"], "ready")
        for node in ("n1", "n2"):
            self.assert_clean_exit(c, node)

if __name__ == "__main__":
    axtest.main()
