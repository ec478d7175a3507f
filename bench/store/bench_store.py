#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The store's bench (issue 15): a real axctld on SQLite and on PostgreSQL (a private
server from tests/pgserver.py, fsync on), without agents, so every job stays pending,
stored and loaded. For each backend it prints:
  - acknowledged submits/s of bench/bench_submit (CLIENTS keep-alive clients) into an
    empty database, SUBMITS jobs;
  - restart time with N stored jobs for each N of --jobs: SIGKILL, start again on the
    same database, first 200 on /healthz (polled every 50 ms, so up to 50 ms of slack).
    The jobs beyond the submitted ones are copies of the first, written by SQL while
    the controller is down: submitting 100,000 pending jobs through the API would
    measure the scheduler's passes over its queue, not the store.

  bench_store.py [--clients 32] [--submits 10000] [--jobs 10000,100000]
                 [--backends sqlite,postgresql]
Binaries come from the build directory AXTEST_BUILDDIR (default: build/ next to bench/).
"""
import argparse
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
BUILD = os.path.abspath(os.environ.get("AXTEST_BUILDDIR", os.path.join(HERE, "..", "..", "build")))
os.environ.setdefault("AXCTLD", os.path.join(BUILD, "axctld"))
import axtest  # noqa: E402

BENCH_SUBMIT = os.path.join(BUILD, "bench", "bench_submit")


def submit(c, clients, total):
    """Submits total jobs through bench_submit; acknowledged submits/s."""
    per = max(1, total // clients)
    p = subprocess.run([BENCH_SUBMIT, c.url, str(clients), str(per)], capture_output=True,
                       text=True)
    m = re.search(r"throughput (\d+) acknowledged submits/s", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError("bench_submit failed:\n%s%s" % (p.stdout, p.stderr))
    return int(m.group(1)), clients * per


# Copies of job 1 with the ids after the highest, in SQL both engines speak.
FILL = ("WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < %d)"
        " INSERT INTO job (id, name, project, \"user\", priority, spec, state, attempt,"
        " restarts, reason, created_ms, tier, quick_failures)"
        " SELECT (SELECT MAX(id) FROM job) + n, name, project, \"user\", priority, spec,"
        " state, attempt, restarts, reason, created_ms, tier, quick_failures"
        " FROM job, g WHERE id = 1")


def fill(c, pg, n):
    """Adds n stored jobs while the controller is down."""
    if pg is None:
        with sqlite3.connect(c.db) as db:
            db.execute(FILL % n)
    else:
        pg.psql(FILL % n, database=c.db.rsplit("/", 1)[1])


def restart_s(c, pg=None, add=0):
    c.kill_controller()
    if add > 0:
        fill(c, pg, add)
    t0 = time.monotonic()
    c.start_controller(c.port, timeout=600)
    return time.monotonic() - t0


def run(backend, pg, clients, submits, sizes):
    db = pg.create_database() if pg else None
    # All submits are one user's: no per-user bound on its queue.
    c = axtest.Cluster(0, db=db, name="bench-store-" + backend,
                       controller_args=["--max-jobs-per-user", "0"])
    try:
        c.start()
        rate, stored = submit(c, clients, submits)
        print("%-10s submits: %d acknowledged/s (%d clients, %d jobs into an empty database)"
              % (backend, rate, clients, stored), flush=True)
        for n in sizes:
            took = restart_s(c, pg, n - stored)
            stored = max(stored, n)
            print("%-10s restart with %d stored jobs: %.2f s to the first 200 on /healthz"
                  % (backend, stored, took), flush=True)
    finally:
        c.kill_controller()  # close() would cancel every pending job through the API
        c.close()
        c.remove()


def main():
    # A SIGTERM (timeout(1)) unwinds, so the private server and directories go too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--submits", type=int, default=10000)
    ap.add_argument("--jobs", default="10000,100000")
    ap.add_argument("--backends", default="sqlite,postgresql")
    args = ap.parse_args()
    sizes = sorted(int(n) for n in args.jobs.split(","))
    for backend in args.backends.split(","):
        if backend == "sqlite":
            run(backend, None, args.clients, args.submits, sizes)
        elif backend == "postgresql":
            with axtest.PgServer(fsync=True) as pg:
                run(backend, pg, args.clients, args.submits, sizes)
        else:
            sys.exit("unknown backend %s (sqlite, postgresql)" % backend)


if __name__ == "__main__":
    main()
