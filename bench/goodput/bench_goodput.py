#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Goodput under Llama 3's failure rate, replayed against the real binaries.

A real axctld and N real axagents (each node standing for --gpus-per-node GPUs) run one
long axwork job over --job-nodes nodes that checkpoints every --ckpt-s seconds. A
failure trace is drawn at Llama 3's published rate (Dubey et al. 2024: 466 interruptions
in 54 days on 16,384 GPUs, about one every 3 hours), scaled to the simulated fleet's
GPUs, and replayed with time compressed so that the fleet sees one failure every
--mean-gap-s seconds: at each failure a random node of the fleet crashes (its agent and
ranks SIGKILLed, as a host that dies) and comes back --repair-s later. A failure of a
node the job runs on interrupts it; others do not.

At the end it reads the job's goodput (docs/GOODPUT.md) and prints what orchestration
(detection + restart) cost against the floor the lease imposes (each lost node is
declared lost lease + grace after its last sync, and not before), and what lost work
cost against the floor of the checkpoint interval (half an interval per interruption,
on average). Goodput ratios are what compression keeps; seconds per interruption are
what a real fleet at the same lease would lose.

  bench_goodput.py [--nodes 4] [--job-nodes 2] [--seconds 150] [--mean-gap-s 12]
                   [--lease-ms 2000] [--grace-ms 500] [--ckpt-s 2] [--seed 1]
Binaries come from AXCTLD, AXAGENT, AXCTL and AXWORK, or else from the build directory
AXTEST_BUILDDIR (default: build/ next to bench/).
"""
import argparse
import json
import os
import random
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
BUILD = os.environ.get("AXTEST_BUILDDIR", os.path.join(HERE, "..", "..", "build"))
for var, rel in (("AXCTLD", "axctld"), ("AXAGENT", "agents/axagent"), ("AXCTL", "cli/axctl"),
                 ("AXWORK", "tests/axwork")):
    os.environ.setdefault(var, os.path.join(BUILD, rel))
import axtest  # noqa: E402

LLAMA3_GPUS = 16384
LLAMA3_INTERRUPTIONS = 466
LLAMA3_DAYS = 54
STEP_MS = 50


def trace(seed, seconds, mean_gap_s, n_nodes):
    """(offset_s, node) of each failure: a Poisson process over the fleet's nodes."""
    rng = random.Random(seed)
    t, out = 0.0, []
    while True:
        t += rng.expovariate(1.0 / mean_gap_s)
        if t >= seconds:
            return out
        out.append((t, "n%d" % rng.randint(1, n_nodes)))


def crash(c, node):
    """SIGKILLs the node's agent and the ranks it runs, as a host that dies."""
    pids = [r["pid"] for j in c.list_jobs() if j["state"] == "running"
            for r in c.job(j["id"]).get("ranks", []) if r["node"] == node and r.get("pid")]
    c.agents[node].kill()
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--job-nodes", type=int, default=2)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=150)
    ap.add_argument("--mean-gap-s", type=float, default=12)
    ap.add_argument("--repair-s", type=float, default=8)
    ap.add_argument("--lease-ms", type=int, default=2000)
    ap.add_argument("--grace-ms", type=int, default=500)
    ap.add_argument("--ckpt-s", type=float, default=2)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    fleet_gpus = args.nodes * args.gpus_per_node
    real_gap_h = LLAMA3_DAYS * 24.0 / LLAMA3_INTERRUPTIONS * LLAMA3_GPUS / fleet_gpus
    compression = real_gap_h * 3600 / args.mean_gap_s
    failures = trace(args.seed, args.seconds, args.mean_gap_s, args.nodes)
    print("fleet: %d nodes x %d GPUs; Llama 3's rate is one failure per %.0f h on it;"
          " compressed %.0fx to one per %.1f s: %d failures in %.0f s"
          % (args.nodes, args.gpus_per_node, real_gap_h, compression, args.mean_gap_s,
             len(failures), args.seconds), flush=True)

    # Injected crashes are not the nodes' fault: quarantine would shrink the fleet.
    c = axtest.Cluster(args.nodes, lease_ms=args.lease_ms, grace_ms=args.grace_ms,
                       name="bench-goodput", controller_args=["--quarantine-after", "0"]).start()
    try:
        every = max(1, int(args.ckpt_s * 1000 / STEP_MS))
        job = c.work_job("goodput", ranks=args.job_nodes, ranks_per_node=1, steps=10 ** 7,
                         step_ms=STEP_MS, checkpoint_every=every,
                         restart={"max_restarts": 10000, "backoff_max_s": 0,
                                  "max_failures_without_progress": 1000})
        jid = c.submit(job.spec)["id"]
        c.wait_running(jid)
        t0 = time.monotonic()
        down = {}  # node -> when it comes back
        pending = list(failures)
        hits = 0
        while time.monotonic() - t0 < args.seconds:
            now = time.monotonic() - t0
            while pending and pending[0][0] <= now:
                _, node = pending.pop(0)
                if node in down:
                    continue  # already down: a second failure of a dead host
                ranks = c.job(jid).get("ranks", [])
                hits += any(r["node"] == node and r["state"] == "running" for r in ranks)
                crash(c, node)
                down[node] = now + args.repair_s
            for node, back in list(down.items()):
                if back <= now:
                    c.start_agent(node)
                    del down[node]
            time.sleep(0.05)
        view = c.job(jid)
        c.cancel(jid)
    except BaseException:
        print("kept %s for inspection" % c.tmp, file=sys.stderr)
        c.close()
        raise
    c.close()
    c.remove()

    g = view["goodput"]
    s = g["seconds"]
    n = view["attempt"] - 1  # interruptions the job saw
    lease_s = (args.lease_ms + args.grace_ms) / 1000.0
    alloc = g["allocated_s"]
    orch = s["detection"] + s["restart"]
    floor_orch = n * lease_s
    floor_lost = n * args.ckpt_s / 2
    out = {
        "failures": len(failures), "job_interruptions": n, "hits_seen": hits,
        "allocated_s": round(alloc, 2), "goodput": g["ratio"],
        "seconds": {k: round(v, 2) for k, v in s.items()},
        "orchestration_s": round(orch, 2), "orchestration_floor_s": round(floor_orch, 2),
        "lost_work_s": round(s["lost_work"], 2), "lost_work_floor_s": round(floor_lost, 2),
        "ended_for": [(a["end_reason"], a["blamed_node"], a["detail"])
                      for a in view["attempts"][:-1]],
        "detection_per_attempt": {str(a): round(v.get("detection", 0), 2)
                                  for a, v in axtest.goodput_by_attempt(g).items()
                                  if a < view["attempt"]},
    }
    print(json.dumps(out, indent=1))
    if n == 0 or alloc <= 0:
        print("no interruption hit the job: run longer or with a shorter --mean-gap-s")
        return
    per = orch / n
    print("per interruption: detection + restart %.2f s (floor: lease + grace %.2f s),"
          " lost work %.2f s (floor: half the interval, %.2f s), start-up %.2f s"
          % (per, lease_s, s["lost_work"] / n, args.ckpt_s / 2, s["startup"] / n))
    short = [a for a, v in axtest.goodput_by_attempt(g).items()
             if 0 < a < view["attempt"] and v.get("detection", 0) < lease_s - 0.1]
    if short:
        # The node had died (stopped syncing) before this attempt was placed on it,
        # within its lease: part of the failure's detection fell before the attempt.
        print("attempts %s were placed on a node already silent: detection below the lease"
              % short)
    print("goodput lost to orchestration: %.1f%% of allocated time (floor %.1f%%);"
          " to lost work %.1f%% (floor %.1f%%)"
          % (100 * orch / alloc, 100 * floor_orch / alloc, 100 * s["lost_work"] / alloc,
             100 * floor_lost / alloc))
    print("at Llama 3's scale (16,384 GPUs, one interruption per %.1f h, same lease):"
          " detection + restart cost %.3f%% of its time"
          % (LLAMA3_DAYS * 24.0 / LLAMA3_INTERRUPTIONS,
             100 * per / (LLAMA3_DAYS * 24.0 / LLAMA3_INTERRUPTIONS * 3600)))


if __name__ == "__main__":
    main()
