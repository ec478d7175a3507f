# SPDX-License-Identifier: MIT
"""Rank cgroups as transient systemd scopes (issue 12), against a real systemd.

The agent runs as a service of a real systemd: this host's /lib/systemd/systemd as PID 1
of new pid, mount, cgroup, UTS and IPC namespaces, whose root cgroup is a fresh cgroup of
this host's cgroup v2 hierarchy, mounted alone at /sys/fs/cgroup (a pure v2 machine, as
Debian 12 boots), with a unit directory of its own. The agent's unit has no Delegate=:
the setup where the agent has no subtree of its own to put ranks in. The namespaces
share this host's network and files, so the controller runs beside them as usual.

- The agent asks systemd for a scope per rank: it reports `cgroup-v2-scope`; the rank
  and a grandchild that left its process group and session run in
  axagent.slice/<agent>:jobJ-aA-rR.scope, which systemd made with Delegate=yes and the
  job's cpus and memory_mb as CPUQuota= and MemoryMax= (read back with systemctl).
- A cancel stops the rank and its escapee, and the scope goes away.
- An agent that lost its state directory (the service killed with the rank supervisors,
  the directory removed) kills the orphaned scope before it starts anything.

Skipped where systemd cannot be run so: not root, no systemd, unshare or nsenter, or no
cgroup v2 hierarchy."""

import os
import shutil
import signal
import subprocess
import time
import unittest

import axtest
from test_containment import ESCAPING_RANK, start_detacher

SYSTEMD = "/lib/systemd/systemd"
SLICE = "axagent.slice"

# Runs in the new namespaces: a pure cgroup v2 tree whose root is the cgroup we were
# put in, a private /run, then systemd as PID 1 with only our units.
CONTAINER = r"""
set -e
umount -R /sys/fs/cgroup
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs tmpfs /run
exec env -i container=axtest SYSTEMD_UNIT_PATH="$1" "$2" --system --unit=axtest.target \
    --log-target=console
"""


def v2_cgroup_dir():
    """This process's cgroup in the host's cgroup v2 hierarchy, or None."""
    for d in axtest.cgroup_dirs():
        if os.path.exists(os.path.join(d, "cgroup.subtree_control")):
            return d
    return None


def remove_cgroup_tree(top):
    for dirpath, dirnames, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
        for attempt in range(100):
            try:
                os.rmdir(dirpath)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)


class Systemd:
    """A systemd in namespaces of its own; `ctl` runs systemctl against it."""

    def __init__(self, tmp, name):
        self.tmp = tmp
        self.units = os.path.join(tmp, "units")
        os.makedirs(self.units, exist_ok=True)
        self.write_unit("axtest.target", "[Unit]\nDescription=axtest\n")
        self.cgroup = os.path.join(v2_cgroup_dir(), name)
        self.proc = None
        self.pid1 = None

    def write_unit(self, name, text):
        with open(os.path.join(self.units, name), "w") as f:
            f.write(text)

    def start(self):
        os.mkdir(self.cgroup)
        procs = os.path.join(self.cgroup, "cgroup.procs")

        def enter_cgroup():
            with open(procs, "w") as f:
                f.write("0")

        self.log = open(os.path.join(self.tmp, "systemd.log"), "w")
        self.proc = subprocess.Popen(
            ["unshare", "--cgroup", "--mount", "--pid", "--uts", "--ipc", "--fork",
             "--mount-proc", "--propagation", "private",
             "sh", "-c", CONTAINER, "container", self.units, SYSTEMD],
            preexec_fn=enter_cgroup, stdout=self.log, stderr=subprocess.STDOUT)

        def pid1():
            path = "/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)
            with open(path) as f:
                children = f.read().split()
            return int(children[0]) if children else None

        axtest.wait_for(pid1, 10, "unshare to fork systemd")
        self.pid1 = pid1()

        def running():
            r = self.ctl("is-system-running", check=False)
            return r.stdout.strip() in ("running", "degraded")

        axtest.wait_for(running, 20, "systemd to be running", interval=0.1)

    def ctl(self, *args, check=True):
        r = subprocess.run(["nsenter", "-t", str(self.pid1), "-m", "-p", "-C", "-u", "-i",
                            "--", "systemctl", "--no-pager", *args],
                           capture_output=True, text=True, timeout=20)
        if check and r.returncode != 0:
            raise AssertionError("systemctl %s: exit %d: %s" % (" ".join(args), r.returncode,
                                                                 r.stderr.strip()))
        return r

    def host_pid(self, ns_pid):
        """The pid, as this host numbers it, of process ns_pid of systemd's namespace."""
        ns = os.readlink("/proc/%d/ns/pid" % self.pid1)
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink("/proc/%s/ns/pid" % name) != ns:
                    continue
                with open("/proc/%s/status" % name) as f:
                    nspid = [line.split()[1:] for line in f if line.startswith("NSpid:")]
            except OSError:
                continue
            if nspid and int(nspid[0][-1]) == ns_pid:
                return int(name)
        return None

    def show(self, unit, *props):
        out = self.ctl("show", unit, *("-p" + p for p in props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def stop(self):
        if self.proc is not None:
            if self.pid1:
                try:
                    os.kill(self.pid1, signal.SIGKILL)  # ends every process of its pid ns
                except ProcessLookupError:
                    pass
            self.proc.wait(timeout=20)
            self.log.close()
        if os.path.isdir(self.cgroup):
            remove_cgroup_tree(self.cgroup)


def missing():
    if os.geteuid() != 0:
        return "not root"
    for tool in ("unshare", "nsenter"):
        if not shutil.which(tool):
            return "no %s" % tool
    if not os.access(SYSTEMD, os.X_OK):
        return "no %s" % SYSTEMD
    if not v2_cgroup_dir():
        return "no writable cgroup v2 hierarchy"
    return None


@unittest.skipIf(missing(), missing())
class SystemdScopeTest(axtest.ClusterTestCase):
    def start_agent_service(self, c):
        self.name = c.cgroup_name("n1")
        self.state = os.path.join(c.tmp, "n1")
        self.agent_log = os.path.join(c.tmp, "axagent-n1.log")
        argv = [os.path.abspath(axtest.AXAGENT), "--controller", c.url, "--node", "n1", "--state-dir",
                self.state, "--allow-root", "--default-user", "root", "--cgroup", self.name]
        # No Delegate=: systemd owns the unit's cgroup, the agent none below it.
        self.systemd.write_unit("axtest-agent.service", (
            "[Unit]\nDefaultDependencies=no\n[Service]\nType=exec\nExecStart=%s\n"
            "KillMode=process\n"
            "StandardOutput=append:%s\nStandardError=append:%s\n")
            % (" ".join(argv), self.agent_log, self.agent_log))
        self.systemd.ctl("daemon-reload")
        self.systemd.ctl("start", "axtest-agent.service")
        c.wait_nodes_ready(["n1"], timeout=30)

    def setUp(self):
        self.c = self.start_cluster(0, lease_ms=2000, grace_ms=1000)
        self.systemd = Systemd(self.c.tmp, "axtest-systemd-" + self.c.marker[:12])
        # Run before the cluster's (cleanups run last first): the end of systemd's pid
        # namespace is the end of every process in it.
        self.addCleanup(self.systemd.stop)
        self.systemd.start()
        self.start_agent_service(self.c)

    def unit(self, job_id):
        return "%s:job%d-a1-r0.scope" % (self.name, job_id)

    def scope_cgroup(self, pid):
        with open("/proc/%d/cgroup" % pid) as f:
            return [line.split(":", 2)[2].strip() for line in f if line.startswith("0::")][0]

    def start_escaper(self, resources=None):
        job_id, ns_pids = start_detacher(self.c, "escaper", ESCAPING_RANK, ("", ".esc"),
                                         resources)
        # They wrote their pids as systemd's pid namespace numbers them.
        rank, escapee = (self.systemd.host_pid(p) for p in ns_pids)
        self.assertTrue(rank and escapee)
        return job_id, rank, escapee

    def assert_gone(self, *pids, timeout=15):
        axtest.wait_for(lambda: not any(axtest.pid_alive(p) for p in pids), timeout,
                        "processes %s to be gone" % (pids,))

    def test_rank_runs_in_a_scope_with_its_limits_and_stops_whole(self):
        c = self.c
        node = {n["name"]: n for n in c.nodes()}["n1"]
        self.assertEqual(node["inventory"]["containment"], "cgroup-v2-scope")
        job_id, rank, escapee = self.start_escaper({"cpus": 1, "memory_mb": 128})
        unit = self.unit(job_id)
        # Both in the scope, which systemd made in our slice.
        want = "/%s/%s" % (SLICE, unit)
        self.assertTrue(self.scope_cgroup(rank).endswith(want), self.scope_cgroup(rank))
        self.assertEqual(self.scope_cgroup(escapee), self.scope_cgroup(rank))
        props = self.systemd.show(unit, "ActiveState", "Slice", "Delegate", "MemoryMax",
                                  "MemorySwapMax", "CPUQuotaPerSecUSec")
        self.assertEqual(props, {"ActiveState": "active", "Slice": SLICE, "Delegate": "yes",
                                 "MemoryMax": str(128 << 20), "MemorySwapMax": "0",
                                 "CPUQuotaPerSecUSec": "1s"})
        scope_dir = os.path.join(self.systemd.cgroup, SLICE, unit)
        if os.path.exists(os.path.join(scope_dir, "memory.max")):
            # Where the v2 hierarchy has the memory controller, the kernel enforces it.
            with open(os.path.join(scope_dir, "memory.max")) as f:
                self.assertEqual(f.read().strip(), str(128 << 20))

        c.cancel(job_id)
        self.assertEqual(c.wait_job(job_id, timeout=30)["state"], "cancelled")
        self.assert_gone(rank, escapee)
        axtest.wait_for(lambda: not os.path.isdir(scope_dir), 10, "the scope's cgroup to go")
        axtest.wait_for(
            lambda: self.systemd.show(unit, "ActiveState")["ActiveState"] == "inactive", 10,
            "systemd to collect the scope")

    def test_agent_that_lost_its_state_stops_the_orphaned_scope(self):
        c = self.c
        job_id, rank, escapee = self.start_escaper()
        # The agent and the rank supervisors (its unit's processes) die, the state
        # directory is lost: only the scope holds the rank now.
        self.systemd.ctl("kill", "--signal=SIGKILL", "axtest-agent.service")
        shutil.rmtree(self.state)
        os.makedirs(self.state)
        time.sleep(0.5)
        self.assertTrue(axtest.pid_alive(rank) and axtest.pid_alive(escapee))
        self.systemd.ctl("reset-failed", "axtest-agent.service", check=False)
        self.systemd.ctl("start", "axtest-agent.service")
        self.assert_gone(rank, escapee, timeout=30)

        def logged():
            with open(self.agent_log) as f:
                return "Stopped 1 orphaned ranks" in f.read()
        axtest.wait_for(logged, 10, "the agent to say it stopped the orphan")
        c.cancel(job_id)
        c.wait_job(job_id, timeout=30)


if __name__ == "__main__":
    axtest.main()
