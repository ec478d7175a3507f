#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Per-job costs of one controller with a big store (README.md): submit N jobs that no
node can run yet, cancel most of them from concurrent clients, then SIGKILL and restart
the controller and time until it serves. Prints one JSON line.

    bench/fleet/jobs.py --jobs 100000 --cancel 90000 [--clients 16] [--keep-db PATH]
"""
import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import ROOT, get, rss_mb, sigkill_and_restart, start_controller  # noqa: E402


def cancel_range(port, ids, failures):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for i in ids:
        conn.request("POST", "/v1/jobs/%d/cancel" % i, body=b"")
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            failures.append(r.status)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=100000)
    p.add_argument("--cancel", type=int, default=90000)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--retention-s", type=int, default=300)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--keep-db", help="leave the database here for bench/fleet/fleet.py --db")
    args = p.parse_args()
    args.lease_ms, args.grace_ms, args.auth = 5000, 1000, False
    args.controller_cpu = None  # fleet.py's --pin: not pinned here
    args.malloc_tunables = ""  # glibc's defaults, as the systemd unit runs axctld
    args.listener = None  # axctld listens itself (fleet.py's --socket-backlog)
    args.axctld_arg = ["--job-retention-s", str(args.retention_s)]
    db = args.keep_db or os.path.join(tempfile.mkdtemp(prefix="axjobs-"), "state.db")
    ctl, port = start_controller(args, db, 0)
    url = "http://127.0.0.1:%d" % port
    out = {"jobs": args.jobs, "rss_empty_mb": round(rss_mb(ctl.pid), 1)}

    per_client = args.jobs // 8
    t = time.monotonic()
    sub = subprocess.run([os.path.join(args.build, "bench", "bench_submit"), url, "8",
                          str(per_client)], capture_output=True, text=True)
    out["submit_s"] = round(time.monotonic() - t, 1)
    out["submit_bench"] = sub.stdout.strip().splitlines()[-1] if sub.stdout else sub.stderr
    rss = rss_mb(ctl.pid)
    out["rss_pending_mb"] = round(rss, 1)
    out["kib_per_pending_job"] = round((rss - out["rss_empty_mb"]) * 1024 / (per_client * 8), 2)

    ids = list(range(1, args.cancel + 1))
    chunks = [ids[i::args.clients] for i in range(args.clients)]
    failures = []
    threads = [threading.Thread(target=cancel_range, args=(port, c, failures)) for c in chunks]
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    took = time.monotonic() - t
    out["cancels_per_s"] = round(args.cancel / took)
    out["cancel_failures"] = len(failures)
    out["active_jobs"] = json.loads(get(url + "/healthz"))["active_jobs"]

    ctl, _, out["restart_serving_s"], out["restart_first_answer_s"] = \
        sigkill_and_restart(ctl, args, db, port, url, 60)
    out["rss_after_restart_mb"] = round(rss_mb(ctl.pid), 1)
    out["db_mb"] = round(os.path.getsize(db) / 1e6, 1)
    ctl.send_signal(signal.SIGTERM)
    ctl.wait(timeout=30)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
