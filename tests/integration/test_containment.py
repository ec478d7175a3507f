# SPDX-License-Identifier: MIT
"""Containment and identity (issue 12) with the real binaries.

- A node speaks only for itself: a checkpoint report from a node that runs no rank of
  the job's current attempt, or naming a path outside the job's checkpoint_dir, never
  becomes the job's resume point.
- One node name, one agent: a second agent for a node whose lease is live (another
  state directory, as after a lost one) is refused and starts nothing until that lease
  runs out, by which time the ranks of the first have fenced themselves.
- Clean shutdown: SIGTERM while `axctl logs -f` streams and agents long-poll exits 0;
  SIGTERM while submits are in flight exits 0, and every submit answered 2xx is in the
  database after the restart, whole, as is every job found there.
- A rank and everything it starts are one unit: a rank that ignores SIGTERM, leaves its
  process group for its supervisor's and double-forks a child into a new session is
  gone, child included, after a cancel. Where the agent has cgroups the rank and its
  escapees are in the rank's own cgroup, which a cancel kills even after the rank's
  supervisor was killed, which goes away with the rank, and which an agent that lost its
  state directory finds and kills before it starts anything; a rank over its memory_mb
  is killed by the OOM killer and its attempt says so.
- A stop is graceful for every process of a rank: SIGTERM reaches a double-forked
  grandchild in a session of its own (through the rank's cgroup, and through its
  supervisor's process tree where the agent has no cgroups), which has the kill grace
  to shut down before SIGKILL."""

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import axtest

ESCAPING_RANK = r"""
import os, signal, subprocess, sys, time
out = sys.argv[1]
signal.signal(signal.SIGTERM, signal.SIG_IGN)
# A grandchild in a session of its own, the way a daemon detaches.
subprocess.Popen(["setsid", "sh", "-c", "echo $$ > %s.esc.tmp; mv %s.esc.tmp %s.esc; "
                  "exec sleep 300" % (out, out, out)])
os.setpgid(0, os.getsid(0))   # into the supervisor's process group
with open(out + ".tmp", "w") as f:
    f.write("%d\n" % os.getpid())
os.rename(out + ".tmp", out)
while True:
    time.sleep(1)
"""


# The rank ignores SIGTERM; its detached grandchild records that SIGTERM reached it.
GRACEFUL_GRANDCHILD = r"""
import os, signal, sys, time
out = sys.argv[1]
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        def stop(sig, frame):
            with open(out + ".term.tmp", "w") as f:
                f.write("%d\n" % os.getpid())
            os.rename(out + ".term.tmp", out + ".term")
            os._exit(0)
        signal.signal(signal.SIGTERM, stop)
        with open(out + ".tmp", "w") as f:
            f.write("%d\n" % os.getpid())
        os.rename(out + ".tmp", out)
        while True:
            time.sleep(1)
    os._exit(0)
os.wait()
with open(out + ".rank.tmp", "w") as f:
    f.write("%d\n" % os.getpid())
os.rename(out + ".rank.tmp", out + ".rank")
while True:
    time.sleep(1)
"""


MEMORY_HOG = r"""
import time
hog = bytearray(512 << 20)  # zero-filled: every page is touched
time.sleep(60)
"""


def start_detacher(c, name, program, suffixes, resources=None):
    """Submits a 1-rank job running program with a path argument, and waits until it has
    written a pid to that path plus each of suffixes. Returns the job id and the pids."""
    out = os.path.join(c.tmp, name + ".pid")
    paths = [out + s for s in suffixes]
    for path in paths:
        if os.path.exists(path):
            os.unlink(path)
    spec = {"name": name, "ranks": 1, "env": {"AXTEST_MARKER": c.marker},
            "command": [sys.executable, "-c", program, out]}
    if resources:
        spec["resources"] = resources
    job_id = c.submit(spec)["id"]
    c.wait_running(job_id)
    axtest.wait_for(lambda: all(read_pid(p) for p in paths), 20,
                    "the rank of %s to detach a process and write its pids" % name)
    return job_id, [read_pid(p) for p in paths]


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None


class ContainmentTest(axtest.ClusterTestCase):
    def identity(self, c, node):
        """The boot and agent identity the agent of `node` sends."""
        with open(os.path.join(c.tmp, node, "agent-id")) as f:
            agent_id = f.read().strip()
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot_id = f.read().strip()
        return {"boot_id": boot_id, "agent_id": agent_id}

    def forged_sync(self, c, node, job_id, step, path):
        # The attacker is root on `node`: it speaks with that agent's own identity.
        body = self.identity(c, node)
        body.update({"node": node, "ranks": [],
                     "checkpoints": [{"job": job_id, "attempt": 1, "step": step, "path": path}],
                     "health": {"healthy": True, "reason": ""}})
        # version=0: the sender claims to have applied nothing, so its empty rank list
        # says nothing about the ranks the real agent runs.
        c.api_ok("POST", "/v1/agent/sync?wait_ms=0&version=0", body, expect=(200,))

    def test_checkpoint_only_from_own_node_and_own_dir(self):
        c = self.start_cluster(2)
        job = c.work_job("inject", ranks=1, steps=100, step_ms=50, checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        ranks = c.wait_running(job.id)
        owner = ranks[0]["node"]
        other = "n2" if owner == "n1" else "n1"
        self.wait_checkpoint(c, job, 5)

        # Without the node's agent identity, or from another boot, a sync is refused.
        for key, value, code in (("agent_id", "0" * 32, "node_claimed"),
                                 ("boot_id", "forged", "boot_mismatch")):
            body = self.identity(c, owner)
            body.update({"node": owner, "ranks": [], "health": {"healthy": True, "reason": ""}})
            body[key] = value
            status, answer, _ = c.api("POST", "/v1/agent/sync?wait_ms=0&version=0", body)
            self.assertEqual((status, answer["error"]["code"]), (409, code), answer)

        # Another node, a path outside the job's directory, and the job's own node with
        # a path outside its directory: none of them counts.
        self.forged_sync(c, other, job.id, 999999, "/etc/shadow")
        self.forged_sync(c, other, job.id, 999998,
                         os.path.join(job.checkpoint_dir, "step_00999998"))
        self.forged_sync(c, owner, job.id, 999997, "/etc/shadow")
        self.forged_sync(c, owner, job.id, 999996,
                         os.path.join(job.checkpoint_dir, "..", "step_00999996"))
        self.forged_sync(c, owner, job.id, 999995,
                         os.path.join(job.checkpoint_dir, "step_00000001"))
        lc = c.job(job.id).get("last_checkpoint") or {}
        self.assertLess(lc.get("step", 0), 999995, lc)
        self.assertTrue(lc.get("path", "").startswith(job.checkpoint_dir + "/step_"), lc)

        # The job's own node naming a step directory of its own dir is a real report.
        self.forged_sync(c, owner, job.id, 999994,
                         os.path.join(job.checkpoint_dir, "step_00999994"))
        lc = c.job(job.id)["last_checkpoint"]
        self.assertEqual(lc["step"], 999994)
        c.cancel(job.id)
        c.wait_job(job.id)

    def test_one_node_name_one_agent(self):
        # A lease that outlasts a controller restart while the holder is stopped, with
        # seconds to spare for a sanitizer build's agent to come back after SIGCONT.
        c = self.start_cluster(2, lease_ms=6000, grace_ms=1000)
        job = c.work_job("claim", ranks=1, steps=160, step_ms=50, checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        node = c.wait_running(job.id)[0]["node"]
        self.wait_checkpoint(c, job, 5)
        first_pids = axtest.workload_pids(c.marker, job.id)

        # A second agent claims the node with a state directory of its own.
        argv = c._agent_argv(node)
        state = argv[argv.index("--state-dir") + 1]
        argv[argv.index("--state-dir") + 1] = state + "-second"
        second = axtest.Daemon("axagent-%s-second" % node, argv, c.tmp, c.env)
        c.agents[node + "-second"] = second  # stopped with the cluster
        second.start()

        def refused():
            with open(second.stderr_path) as f:
                return "node_claimed" in f.read()
        axtest.wait_for(refused, 15, "the second agent for %s to be refused" % node)
        time.sleep(1.5)
        self.assertEqual(axtest.workload_pids(c.marker, job.id), first_pids,
                         "a second agent for the node started a second copy of the rank")
        self.assertEqual(c.job(job.id)["attempt"], 1)

        # A controller killed and restarted meanwhile still knows who holds the node,
        # even when the second agent is the first to come back to it.
        c.agents[node].signal(signal.SIGSTOP)
        c.restart_controller()
        time.sleep(1.0)
        self.assertEqual(axtest.workload_pids(c.marker, job.id), first_pids,
                         "after a controller restart a second agent started the rank again")
        c.agents[node].signal(signal.SIGCONT)
        c.wait_nodes_ready([node], timeout=30)
        self.assertEqual(c.job(job.id)["attempt"], 1)

        # The first agent dies: its rank fences itself, and the second agent takes the
        # node once the lease has run out; one attempt at a time throughout.
        c.agents[node].kill()
        view = self.assert_succeeded_with_value(c, job, timeout=90)
        self.assertEqual(view["attempt"], 2)
        self.assert_no_overlap(job)
        c.wait_nodes_ready([node], timeout=30)

    def test_sigterm_while_logs_stream_exits_cleanly(self):
        c = self.start_cluster(1)
        job = c.work_job("stream", ranks=1, steps=400, step_ms=50, checkpoint_every=5)
        job.id = c.submit(job.spec)["id"]
        c.wait_running(job.id)
        self.wait_checkpoint(c, job, 2)
        env = dict(c.env, AXCTL_URL=c.url)
        follower = subprocess.Popen([axtest.AXCTL, "logs", str(job.id), "--rank", "0", "-f"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.addCleanup(follower.kill)
        # The stream is running (its first bytes arrived) and waits for more.
        self.assertTrue(follower.stdout.readline())
        time.sleep(0.5)
        self.assertEqual(c.controller.terminate(), 0,
                         "axctld must exit 0 on SIGTERM with a log stream suspended")
        # The stream broke; axctl waits out 15 s for a controller to come back (a
        # restart, a failover), then gives up with an error rather than hang.
        self.assertNotEqual(follower.wait(timeout=25), 0)

    def test_sigterm_answers_a_held_long_poll(self):
        # A node with no agent: a real agent's next sync would supersede the held one
        # (409 superseded, docs/PROTOCOL.md).
        c = self.start_cluster(0)
        body = {"node": "h1", "boot_id": "boot-h1", "agent_id": "a" * 32}
        c.api_ok("POST", "/v1/agent/register",
                 dict(body, address="127.0.0.1:9", inventory={"cpus": 8, "memory_mb": 16000}))
        body.update({"ranks": [], "health": {"healthy": True, "reason": ""}})
        version = c.api_ok("POST", "/v1/agent/sync?wait_ms=0&version=0", body)["version"]
        # A sync with nothing new is held for up to a sync period (1 s here).
        conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
        self.addCleanup(conn.close)
        conn.request("POST", "/v1/agent/sync?wait_ms=1000&version=%d" % version,
                     json.dumps(body), {"Content-Type": "application/json"})
        # Time for the request to arrive; held or not shows only in its answer.
        time.sleep(0.2 * axtest.TIME_SCALE)
        self.assertEqual(c.controller.terminate(), 0,
                         "axctld must exit 0 on SIGTERM with a long-poll held")
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200, "a held long-poll was cut off, not answered")
        self.assertEqual(json.loads(resp.read())["version"], version)

    def test_sigterm_during_submits_keeps_every_acknowledged_job(self):
        c = self.start_cluster(1)
        port, stop = c.port, threading.Event()
        acked, lock = {}, threading.Lock()
        pad = "p" * 10000

        def submitter(k):
            for i in range(10000):
                if stop.is_set():
                    return
                name = "s%d-%d" % (k, i)
                spec = {"name": name, "ranks": 1, "command": ["sleep", "300"],
                        "env": {"AXTEST_MARKER": c.marker, "PAD": pad}}
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    conn.request("POST", "/v1/jobs", json.dumps(spec),
                                 {"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    body = resp.read()
                    conn.close()
                except (OSError, http.client.HTTPException):
                    continue  # the controller is going away: no answer, no promise
                if 200 <= resp.status < 300:
                    with lock:
                        acked[name] = json.loads(body)["id"]

        threads = [threading.Thread(target=submitter, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        try:
            axtest.wait_for(lambda: len(acked) >= 20, 20, "submits acknowledged")
            status = c.controller.terminate()
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        self.assertEqual(status, 0, "axctld must exit 0 on SIGTERM with submits in flight")
        with open(c.controller.stderr_path) as f:
            self.assertNotIn("abort", f.read().lower())

        c.start_controller(0)
        jobs = {j["name"]: j for j in c.list_jobs()}
        for name, job_id in acked.items():
            self.assertIn(name, jobs, "acknowledged job %s was lost" % name)
            self.assertEqual(jobs[name]["id"], job_id)
        for name, job in jobs.items():
            view = c.job(job["id"])
            self.assertEqual((view["spec"]["command"], view["spec"]["env"]["PAD"]),
                             (["sleep", "300"], pad), "job %s is not whole" % name)
        c.wait_nodes_ready()

    def start_escaper(self, c, node="n1"):
        """Runs ESCAPING_RANK; returns the job id, the rank's pid and its escapee's."""
        job_id, (rank, escapee) = start_detacher(c, "escaper", ESCAPING_RANK, ("", ".esc"))
        self.assertNotEqual(os.getpgid(rank), rank)
        self.assertEqual(os.getsid(escapee), escapee)
        return job_id, rank, escapee

    def containment(self, c, node="n1"):
        nodes = {n["name"]: n for n in c.nodes()}
        return nodes[node]["inventory"].get("containment", "subreaper")

    def require_cgroups(self, c, node="n1"):
        kind = self.containment(c, node)
        if not kind.startswith("cgroup"):
            self.skipTest("the agent has no cgroups here (%s)" % kind)

    def rank_cgroup_dirs(self, c, pid, job_id, node="n1"):
        """The directories of the rank cgroup of job_id (attempt 1, rank 0) pid is in: in
        the agent's own cgroup, or the systemd scope made for it (cgroup-v2-scope)."""
        name = "job%d-a1-r0" % job_id
        suffixes = ("/%s/%s" % (c.cgroup_name(node), name),
                    "/%s:%s.scope" % (c.cgroup_name(node), name))
        return [d for d in axtest.cgroup_dirs(pid) if d.endswith(suffixes)]

    def assert_gone(self, *pids, timeout=10):
        axtest.wait_for(lambda: not any(axtest.pid_alive(p) for p in pids), timeout,
                        "processes %s to be gone" % (pids,))

    def test_cancel_stops_a_rank_and_all_it_started(self):
        c = self.start_cluster(1)
        job_id, rank, escapee = self.start_escaper(c)
        dirs = []
        if self.containment(c) != "subreaper":
            # The rank and what escaped its group and session share the rank's cgroup.
            dirs = self.rank_cgroup_dirs(c, rank, job_id)
            self.assertTrue(dirs, axtest.cgroup_dirs(rank))
            self.assertEqual(self.rank_cgroup_dirs(c, escapee, job_id), dirs)

        c.cancel(job_id)
        view = c.wait_job(job_id, timeout=30)
        self.assertEqual(view["state"], "cancelled")
        # SIGTERM is ignored: the agent's kill grace (3 s) passes, then SIGKILL.
        self.assert_gone(rank, escapee)
        # The rank's cgroups go with it.
        axtest.wait_for(lambda: not any(os.path.isdir(d) for d in dirs), 10,
                        "the rank's cgroups %s to be removed" % dirs)

    def graceful_stop_reaches_grandchild(self, c):
        job_id, (grandchild, rank) = start_detacher(c, "graceful", GRACEFUL_GRANDCHILD,
                                                    ("", ".rank"))
        out = os.path.join(c.tmp, "graceful.pid")
        self.assertNotEqual(os.getsid(grandchild), os.getsid(rank))
        self.assertNotEqual(os.getpgid(grandchild), os.getpgid(rank))
        c.cancel(job_id)
        self.assertEqual(c.wait_job(job_id, timeout=30)["state"], "cancelled")
        # Gone either way: by its own exit on SIGTERM, or by SIGKILL after the grace.
        self.assert_gone(grandchild, rank)
        self.assertEqual(read_pid(out + ".term"), grandchild,
                         "SIGTERM did not reach the rank's detached grandchild")

    def test_sigterm_reaches_a_detached_grandchild(self):
        c = self.start_cluster(1)
        self.graceful_stop_reaches_grandchild(c)

    def test_sigterm_reaches_a_detached_grandchild_without_cgroups(self):
        c = self.start_cluster(1, agent_args=[["--cgroup", "no"]])
        self.assertEqual(self.containment(c), "subreaper")
        self.graceful_stop_reaches_grandchild(c)

    def shim_pid(self, c, job_id, node="n1"):
        return read_pid(os.path.join(c.tmp, node, "ranks", "%d-1-0" % job_id, "shim.pid"))

    def test_cancel_kills_the_cgroup_after_its_supervisor_was_killed(self):
        # Without its supervisor, the subreaper, only the cgroup still holds the escapee.
        c = self.start_cluster(1)
        self.require_cgroups(c)
        job_id, rank, escapee = self.start_escaper(c)
        os.kill(self.shim_pid(c, job_id), signal.SIGKILL)
        time.sleep(0.3)
        self.assertTrue(axtest.pid_alive(rank) and axtest.pid_alive(escapee))

        c.cancel(job_id)
        self.assertEqual(c.wait_job(job_id, timeout=30)["state"], "cancelled")
        self.assert_gone(rank, escapee)

    def test_agent_restart_keeps_ranks_and_their_cgroups(self):
        c = self.start_cluster(1)
        self.require_cgroups(c)
        job_id, rank, escapee = self.start_escaper(c)
        dirs = self.rank_cgroup_dirs(c, rank, job_id)
        c.restart_agent("n1", signal.SIGKILL)
        c.wait_nodes_ready(["n1"])
        time.sleep(1.0)  # a sync or two: the restarted agent's sweep has run
        self.assertTrue(axtest.pid_alive(rank) and axtest.pid_alive(escapee))
        self.assertEqual(self.rank_cgroup_dirs(c, escapee, job_id), dirs)
        self.assertEqual(c.job(job_id)["attempt"], 1)
        c.cancel(job_id)
        c.wait_job(job_id, timeout=30)
        self.assert_gone(rank, escapee)

    def test_agent_that_lost_its_state_stops_the_orphans_first(self):
        c = self.start_cluster(1, lease_ms=2000, grace_ms=1000)
        self.require_cgroups(c)
        job_id, rank, escapee = self.start_escaper(c)
        # The agent and the rank's supervisor die (nothing fences the rank now), and the
        # state directory is lost.
        shim = self.shim_pid(c, job_id)
        c.agents["n1"].kill()
        os.kill(shim, signal.SIGKILL)
        state = os.path.join(c.tmp, "n1")
        shutil.rmtree(state)
        os.makedirs(state)
        time.sleep(2.5)  # the old agent's lease is over: only the cgroup holds the rank
        self.assertTrue(axtest.pid_alive(rank) and axtest.pid_alive(escapee))

        c.start_agent("n1")
        self.assert_gone(rank, escapee, timeout=20)

        def logged():
            with open(c.agents["n1"].stderr_path) as f:
                return "Stopped 1 orphaned ranks" in f.read()
        axtest.wait_for(logged, 5, "the agent to say it stopped the orphan")
        c.cancel(job_id)
        c.wait_job(job_id, timeout=30)

    def test_memory_limit_is_enforced(self):
        c = self.start_cluster(1)
        self.require_cgroups(c)
        with open(c.agents["n1"].stderr_path) as f:
            if "limits: memory_mb" not in f.read():
                self.skipTest("no memory controller for the agent here")
        spec = {"name": "hog", "ranks": 1, "env": {"AXTEST_MARKER": c.marker},
                "resources": {"memory_mb": 128}, "restart": {"max_restarts": 0},
                "command": [sys.executable, "-c", MEMORY_HOG]}
        job_id = c.submit(spec)["id"]
        view = c.wait_job(job_id, timeout=30)
        self.assertEqual(view["state"], "failed", view)
        self.assertIn("ran out of memory", view["reason"])
        self.assertIn("memory_mb", view["reason"])


if __name__ == "__main__":
    axtest.main()
