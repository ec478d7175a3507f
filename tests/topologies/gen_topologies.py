#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the synthetic hwloc v2 topologies used by the accelerator backend tests.

There are no public hwloc exports of Google TPU or AWS Trainium hosts, and the real
NVIDIA exports (hwloc/) predate the H100, so these are built by
hand in the shape of those real exports: a Machine with one Package per socket, each
holding its NUMANode, a few cores, and its PCI trees (host bridge -> root port ->
switch upstream port -> downstream ports -> devices), as `lstopo --of xml` writes them.

Run it from anywhere: it rewrites the .xml files next to itself.

    python3 tests/topologies/gen_topologies.py

The PCI IDs are those of the real parts where they are public (see
docs/ACCELERATORS.md). PCI classes that are not public are marked as assumptions in
the host descriptions below; the backends do not filter TPU or Neuron devices on class.
"""

import os
import sys
from xml.sax.saxutils import quoteattr

HERE = os.path.dirname(os.path.abspath(__file__))


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 1

    def gp_index(self):
        self.gp += 1
        return self.gp

    def open(self, depth, attrs, leaf=False):
        text = " ".join(f"{k}={quoteattr(str(v))}" for k, v in attrs)
        self.lines.append("  " * depth + f"<object {text}" + ("/>" if leaf else ">"))

    def close(self, depth):
        self.lines.append("  " * depth + "</object>")

    def info(self, depth, name, value):
        self.lines.append("  " * depth + f"<info name={quoteattr(name)} value={quoteattr(value)}/>")


def mask(bits):
    value = 0
    for b in bits:
        value |= 1 << b
    return f"0x{value:08x}"


def busid(domain, bus, dev, fn):
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn:x}"


# A PCI tree node: ("bridge", (bus, dev, fn), vendor:device, [children]) for a PCI-PCI
# bridge (its secondary bus is the smallest bus below it), or
# ("dev", (bus, dev, fn), class, vendor:device, subsystem, name) for an endpoint.
def bus_range(node):
    if node[0] == "dev":
        return node[1][0], node[1][0]
    lo, hi = None, None
    for child in node[3]:
        clo, chi = bus_range(child)
        lo = clo if lo is None else min(lo, clo)
        hi = chi if hi is None else max(hi, chi)
    return lo, hi


def write_pci(w, depth, node, level, domain=0):
    if node[0] == "dev":
        _, (bus, dev, fn), klass, ids, subsys, name = node
        w.open(depth, [("type", "PCIDev"), ("gp_index", w.gp_index()),
                       ("pci_busid", busid(domain, bus, dev, fn)),
                       ("pci_type", f"{klass:04x} [{ids}] [{subsys}] a1"),
                       ("pci_link_speed", "31.507692")])
        if name:
            w.info(depth + 1, "PCIDevice", name)
        w.close(depth)
        return
    _, (bus, dev, fn), ids, children = node
    lo, hi = bus_range(node)
    lo = min(lo, max(c[1][0] for c in children))
    w.open(depth, [("type", "Bridge"), ("gp_index", w.gp_index()), ("bridge_type", "1-1"),
                   ("depth", level), ("bridge_pci", f"{domain:04x}:[{lo:02x}-{hi:02x}]"),
                   ("pci_busid", busid(domain, bus, dev, fn)),
                   ("pci_type", f"0604 [{ids}] [{ids}] 00"),
                   ("pci_link_speed", "31.507692")])
    for child in children:
        write_pci(w, depth + 1, child, level + 1, domain)
    w.close(depth)


def write_host_bridge(w, depth, children, domain=0):
    lo = min(bus_range(c)[0] for c in children)
    lo = min(lo, min(c[1][0] for c in children))
    hi = max(bus_range(c)[1] for c in children)
    w.open(depth, [("type", "Bridge"), ("gp_index", w.gp_index()), ("bridge_type", "0-1"),
                   ("depth", 0), ("bridge_pci", f"{domain:04x}:[{lo:02x}-{hi:02x}]")])
    for child in children:
        write_pci(w, depth + 1, child, 1, domain)
    w.close(depth)


def write_topology(path, product, packages, mem_per_node):
    """packages: list of (cpu model, [host bridge children lists])."""
    w = Writer()
    cores = 2
    all_pus = list(range(cores * len(packages)))
    w.lines += ['<?xml version="1.0" encoding="UTF-8"?>',
                '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                '<topology version="2.0">']
    cpuset, nodeset = mask(all_pus), mask(range(len(packages)))
    w.open(1, [("type", "Machine"), ("os_index", 0), ("cpuset", cpuset),
               ("complete_cpuset", cpuset), ("allowed_cpuset", cpuset), ("nodeset", nodeset),
               ("complete_nodeset", nodeset), ("allowed_nodeset", nodeset), ("gp_index", 1)])
    w.info(2, "DMIProductName", product)
    w.info(2, "Architecture", "x86_64")
    w.info(2, "Backend", "Linux")
    w.info(2, "SyntheticSource", "axctl tests/topologies/gen_topologies.py")
    for p, (cpu, bridges) in enumerate(packages):
        pus = list(range(p * cores, (p + 1) * cores))
        pcpus, pnodes = mask(pus), mask([p])
        w.open(2, [("type", "Package"), ("os_index", p), ("cpuset", pcpus),
                   ("complete_cpuset", pcpus), ("nodeset", pnodes), ("complete_nodeset", pnodes),
                   ("gp_index", w.gp_index())])
        w.info(3, "CPUModel", cpu)
        w.open(3, [("type", "NUMANode"), ("os_index", p), ("cpuset", pcpus),
                   ("complete_cpuset", pcpus), ("nodeset", pnodes), ("complete_nodeset", pnodes),
                   ("gp_index", w.gp_index()), ("local_memory", mem_per_node)], leaf=True)
        for pu in pus:
            one = mask([pu])
            w.open(3, [("type", "Core"), ("os_index", pu), ("cpuset", one),
                       ("complete_cpuset", one), ("nodeset", pnodes),
                       ("complete_nodeset", pnodes), ("gp_index", w.gp_index())])
            w.open(4, [("type", "PU"), ("os_index", pu), ("cpuset", one),
                       ("complete_cpuset", one), ("nodeset", pnodes),
                       ("complete_nodeset", pnodes), ("gp_index", w.gp_index())], leaf=True)
            w.close(3)
        for children in bridges:
            write_host_bridge(w, 3, children)
        w.close(2)
    w.close(1)
    w.lines.append("</topology>")
    with open(path, "w") as f:
        f.write("\n".join(w.lines) + "\n")


PLX = "1000:c030"  # Broadcom PEX89xxx PCIe switch
ROOT = "8086:352a"  # Intel root port


def switch(root_bus, up_bus, endpoints):
    """Root port -> switch upstream port -> one downstream port per endpoint."""
    down_bus = up_bus + 1
    ports = []
    for i, ep in enumerate(endpoints):
        ports.append(("bridge", (down_bus, i, 0), PLX, [ep]))
    return ("bridge", (root_bus, 1, 0), ROOT,
            [("bridge", (up_bus, 0, 0), PLX, ports)])


def h100_host():
    """HGX H100 8-GPU: per socket 2 PCIe switches, each with 2 GPUs and 1 ConnectX-7;
    4 NVSwitches (10de:22a3, class 0680: not GPUs) and the BMC's VGA on socket 0."""
    gpu = "10de:2330"
    cx7 = "15b3:1021"

    def sw(root_bus, first_dev_bus):
        up = root_bus + 1
        return switch(root_bus, up, [
            ("dev", (first_dev_bus, 0, 0), 0x0302, gpu, "10de:16c1", "H100 SXM5 80GB"),
            ("dev", (first_dev_bus + 1, 0, 0), 0x0302, gpu, "10de:16c1", "H100 SXM5 80GB"),
            ("dev", (first_dev_bus + 2, 0, 0), 0x0207, cx7, "15b3:0041", "ConnectX-7"),
        ])

    nvswitches = switch(0x05, 0x06, [
        ("dev", (0x08 + i, 0, 0), 0x0680, "10de:22a3", "10de:1796", "H100 NVSwitch")
        for i in range(4)])
    bmc = [("bridge", (0x02, 0, 0), ROOT,
            [("dev", (0x03, 0, 0), 0x0300, "1a03:2000", "1a03:2000", "ASPEED VGA")])]
    socket0 = [bmc, [nvswitches], [sw(0x15, 0x18)], [sw(0x3f, 0x42)]]
    socket1 = [[sw(0x95, 0x98)], [sw(0xc5, 0xc8)]]
    cpu = "Intel(R) Xeon(R) Platinum 8480C"
    write_topology(os.path.join(HERE, "nvidia-h100x8.xml"), "Synthetic HGX H100 8-GPU",
                   [(cpu, socket0), (cpu, socket1)], 1099511627776)


def tpu_v5p_host():
    """Cloud TPU v5p VM (ct5p-hightpu-4t): 4 chips (1ae0:0062) on the virtual root bus of
    each NUMA node's host bridge, no switches; a gVNIC (1ae0:0042) that is Google's
    but not a TPU. ASSUMPTION: chip class 0xff00 (unassigned); not public."""
    chip = "1ae0:0062"
    node0 = [
        ("dev", (0x00, 3, 0), 0x0200, "1ae0:0042", "1ae0:0058", "gVNIC"),
        ("dev", (0x00, 4, 0), 0xff00, chip, "1ae0:0062", "TPU v5p"),
        ("dev", (0x00, 5, 0), 0xff00, chip, "1ae0:0062", "TPU v5p"),
    ]
    node1 = [
        ("dev", (0x80, 4, 0), 0xff00, chip, "1ae0:0062", "TPU v5p"),
        ("dev", (0x80, 5, 0), 0xff00, chip, "1ae0:0062", "TPU v5p"),
    ]
    cpu = "AMD EPYC 9B14"
    write_topology(os.path.join(HERE, "tpu-v5p-4chip.xml"), "Google Compute Engine",
                   [(cpu, [node0]), (cpu, [node1])], 236223201280)


def trn2_host():
    """trn2.48xlarge: 16 Trainium2 (1d0f:7364), 8 per NUMA node behind 2 switches of 4,
    each switch also carrying an EFA NIC (1d0f:efa2); EBS NVMe (1d0f:8061) and ENA
    (1d0f:ec20) on socket 0 -- Amazon's vendor ID, not Neuron devices.
    ASSUMPTION: Trainium2 class 0x0880 (system peripheral); not public."""
    trn = "1d0f:7364"
    efa = "1d0f:efa2"

    def sw(root_bus, first):
        eps = [("dev", (first + i, 0, 0), 0x0880, trn, "1d0f:0000", "Trainium2")
               for i in range(4)]
        eps.append(("dev", (first + 4, 0, 0), 0x0200, efa, "1d0f:0000", "EFA"))
        return switch(root_bus, root_bus + 1, eps)

    base = [("dev", (0x00, 4, 0), 0x0108, "1d0f:8061", "1d0f:8061", "EBS NVMe"),
            ("dev", (0x00, 5, 0), 0x0200, "1d0f:ec20", "1d0f:ec20", "ENA")]
    socket0 = [base, [sw(0x10, 0x13)], [sw(0x20, 0x23)]]
    socket1 = [[sw(0x90, 0x93)], [sw(0xa0, 0xa3)]]
    cpu = "Intel(R) Xeon(R) Platinum 8488C"
    write_topology(os.path.join(HERE, "trn2-16dev.xml"), "Amazon EC2 trn2.48xlarge",
                   [(cpu, socket0), (cpu, socket1)], 1099511627776)


def main():
    h100_host()
    tpu_v5p_host()
    trn2_host()
    return 0


if __name__ == "__main__":
    sys.exit(main())
