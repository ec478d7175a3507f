#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Recovery and start latency of the real binaries on this machine.

Prints, for a 4-rank job on 2 agents (ranks_per_node 2):
  - submit -> every rank running (fresh start)
  - rank SIGKILL -> every rank of the next attempt running (zero backoff)
  - node loss (agent and its ranks SIGKILLed) -> every rank running on the other nodes
  - the agent alone SIGKILLed -> its ranks fenced by their supervisors, and the next
    attempt running on the other nodes
  - hang (progress stops) -> every rank of the next attempt running
Times are taken by polling the API every 2 ms, so they carry up to ~2 ms of slack.

  bench_recovery.py [--runs N] [--lease-ms L] [--grace-ms G]
Binaries come from AXCTLD, AXAGENT, AXCTL and AXWORK, or else from the build
directory AXTEST_BUILDDIR (default: build/ next to bench/).
"""
import argparse
import os
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
BUILD = os.environ.get("AXTEST_BUILDDIR",
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
for var, rel in (("AXCTLD", "axctld"), ("AXAGENT", "agents/axagent"), ("AXCTL", "cli/axctl"),
                 ("AXWORK", "tests/axwork")):
    os.environ.setdefault(var, os.path.join(BUILD, rel))
import axtest  # noqa: E402

POLL = 0.002


def wait_all_running(c, job_id, attempt, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = c.job(job_id)
        ranks = [r for r in view.get("ranks", []) if r["attempt"] == attempt]
        if view["attempt"] == attempt and ranks and len(ranks) == view["world_size"] and \
                all(r["state"] == "running" and r.get("pid") for r in ranks):
            return time.monotonic(), view
        time.sleep(POLL)
    raise RuntimeError("job %d attempt %d did not run within %ss" % (job_id, attempt, timeout))


def summary(name, values, target=None):
    values = sorted(values)
    p50 = statistics.median(values)
    p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
    line = "%-34s n=%-3d p50 %8.1f ms  p90 %8.1f ms  max %8.1f ms" % (
        name, len(values), p50 * 1e3, p90 * 1e3, values[-1] * 1e3)
    if target is not None:
        line += "  (target %s)" % target
    print(line, flush=True)


def long_job(c, name, **kw):
    job = c.work_job(name, ranks=4, ranks_per_node=2, steps=100000, step_ms=20,
                     checkpoint_every=50, restart={"max_restarts": 1000, "backoff_max_s": 0,
                                                           "max_failures_without_progress": 1000},
                     **kw)
    return job


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--lease-ms", type=int, default=2000)
    ap.add_argument("--grace-ms", type=int, default=500)
    ap.add_argument("--hang-timeout-s", type=int, default=2)
    args = ap.parse_args()

    # Injected kills are not the nodes' fault: quarantine would take them out of the bench.
    c = axtest.Cluster(3, lease_ms=args.lease_ms, grace_ms=args.grace_ms, name="bench",
                       controller_args=["--quarantine-after", "0"]).start()
    try:
        # Fresh start.
        starts = []
        for i in range(args.runs):
            job = c.work_job("start", ranks=4, ranks_per_node=2, steps=100000, step_ms=20)
            t0 = time.monotonic()
            jid = c.submit(job.spec)["id"]
            t1, _ = wait_all_running(c, jid, 1)
            starts.append(t1 - t0)
            c.cancel(jid)
        summary("submit -> all 4 ranks running", starts)

        # Rank SIGKILL after progress (zero backoff).
        job = long_job(c, "kill")
        jid = c.submit(job.spec)["id"]
        _, view = wait_all_running(c, jid, 1)
        kills = []
        for i in range(args.runs):
            # Each attempt makes progress (a new checkpoint) before its rank dies, as in
            # a real run: failures without progress back off by design (at least 1 s).
            step = (c.job(jid).get("last_checkpoint") or {}).get("step", -1)
            axtest.wait_for(lambda: (c.job(jid).get("last_checkpoint") or {}).get("step", -1)
                            > step, 30, "a new checkpoint", interval=0.02)
            _, view = wait_all_running(c, jid, view["attempt"])
            attempt = view["attempt"]
            pid = view["ranks"][1]["pid"]
            t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            t1, view = wait_all_running(c, jid, attempt + 1)
            kills.append(t1 - t0)
        c.cancel(jid)
        summary("rank SIGKILL -> next attempt running", kills, "p50 < 500 ms")

        # Hang: progress stops; the agent notices after hang_timeout_s.
        hangs = []
        for i in range(max(1, args.runs // 5)):
            job = long_job(c, "hang", hang_timeout_s=args.hang_timeout_s,
                           args=["--hang-at", "20@1", "--fault-rank", "2"])
            jid = c.submit(job.spec)["id"]
            wait_all_running(c, jid, 1)
            t1, _ = wait_all_running(c, jid, 2, timeout=args.hang_timeout_s + 30)
            # The moment rank 2 stopped advancing: axwork logs "hang" then (CLOCK_REALTIME ns).
            hung = [e["t"] / 1e9 for e in job.entries()
                    if e["event"] == "hang" and e.get("attempt") == 1 and e.get("rank") == 2]
            hangs.append(time.time() - (time.monotonic() - t1) - hung[0])
            c.cancel(jid)
        summary("hang -> next attempt running", hangs,
                "< hang_timeout + 1 s = %d ms" % (args.hang_timeout_s * 1000 + 1000))

        # Node loss: SIGKILL an agent and its ranks, as a crashed host; then the agent
        # alone, as an OOM kill would (its ranks' supervisors fence them on the lease).
        losses, agent_deaths, fences = [], [], []
        for ranks_too, times in ((True, losses), (False, agent_deaths)):
            for i in range(max(1, args.runs // 5)):
                job = long_job(c, "loss")
                jid = c.submit(job.spec)["id"]
                _, view = wait_all_running(c, jid, 1)
                victim = view["ranks"][0]["node"]
                pids = [r["pid"] for r in view["ranks"] if r["node"] == victim]
                t0 = time.monotonic()
                c.agents[victim].kill()
                for p in pids if ranks_too else []:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                if not ranks_too:
                    axtest.wait_for(lambda: not any(axtest.pid_alive(p) for p in pids),
                                    args.lease_ms / 1000 + 5, "the victim's ranks fenced",
                                    interval=POLL)
                    fences.append(time.monotonic() - t0)
                t1, _ = wait_all_running(c, jid, 2, timeout=args.lease_ms / 1000 + 30)
                times.append(t1 - t0)
                c.cancel(jid)
                c.start_agent(victim)
                c.wait_nodes_ready()
        summary("node loss -> next attempt running", losses,
                "< lease + grace + 1 s = %d ms" % (args.lease_ms + args.grace_ms + 1000))
        summary("agent alone SIGKILLed -> its ranks fenced", fences,
                "<= lease + 10 ms = %d ms, well before lease + grace" % (args.lease_ms + 10))
        summary("agent alone SIGKILLed -> next attempt running", agent_deaths,
                "< lease + grace + 1 s = %d ms" % (args.lease_ms + args.grace_ms + 1000))
    except BaseException:
        print("kept %s for inspection" % c.tmp, file=sys.stderr)
        c.close()
        raise
    c.close()
    c.remove()


if __name__ == "__main__":
    main()
