#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Controller failover's bench (issue 15): two real axctld --leader-elect on one
database (SQLite file, and a private PostgreSQL server from tests/pgserver.py with fsync
on), the defaults otherwise (leader_lease_ms 2000), STORED pending jobs in it. Each round
SIGKILLs whoever leads, and measures from the kill:
  - takeover: until the other's /healthz says "leader" (polled every 10 ms);
  - first write: until a submit through the survivor's URL is acknowledged (a client
    that knows both URLs and retries every 10 ms);
then starts the killed one again as a follower. Prints min / median / max per backend.

  bench_failover.py [--rounds 5] [--jobs 1000] [--backends sqlite,postgresql]
Binaries come from the build directory AXTEST_BUILDDIR (default: build/ next to bench/).
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
BUILD = os.path.abspath(os.environ.get("AXTEST_BUILDDIR", os.path.join(HERE, "..", "..", "build")))
os.environ.setdefault("AXCTLD", os.path.join(BUILD, "axctld"))
import axtest  # noqa: E402
from test_failover import raw_request, role  # noqa: E402

SPEC = {"name": "bench", "command": ["true"], "ranks": 1}


def until(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(0.01)
    raise SystemExit("timed out")


def submitted(url):
    try:
        return raw_request(url, "POST", "/v1/jobs", SPEC, timeout=2)[0] in (200, 201)
    except OSError:
        return False


def run(backend, rounds, jobs, pg):
    db = pg.create_database() if pg else None
    args = ["--leader-elect", "--job-retention-s", "0"]
    pair = [axtest.Cluster(0, controller_args=args, relay=False, name="failover-%d" % i, db=db)
            for i in range(2)]
    if db is None:
        pair[1].db = pair[0].db
    key = ["--log-key-file", os.path.join(pair[0].tmp, "shared.logkey")]
    for c in pair:
        c.controller_args += key
    takeover, first_write = [], []
    try:
        pair[0].start_controller()
        until(lambda: role(pair[0].url) == "leader")
        for _ in range(jobs):
            pair[0].submit(SPEC)
        pair[1].start_controller()
        until(lambda: role(pair[1].url) == "follower")
        for _ in range(rounds):
            leader, follower = pair if role(pair[0].url) == "leader" else pair[::-1]
            killed = time.monotonic()
            leader.kill_controller()
            takeover.append(until(lambda: role(follower.url) == "leader") - killed)
            first_write.append(until(lambda: submitted(follower.url)) - killed)
            leader.start_controller()
            until(lambda: role(leader.url) == "follower")
    finally:
        for c in pair:
            c.close()
            c.remove()

    def show(xs):
        return "%.2f / %.2f / %.2f s" % (min(xs), statistics.median(xs), max(xs))

    print("%-10s %d stored jobs, %d rounds: takeover %s; first acknowledged submit %s"
          % (backend, jobs, rounds, show(takeover), show(first_write)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--backends", default="sqlite,postgresql")
    a = ap.parse_args()
    for backend in a.backends.split(","):
        if backend == "postgresql":
            with axtest.PgServer(fsync=True) as pg:
                run(backend, a.rounds, a.jobs, pg)
        else:
            run(backend, a.rounds, a.jobs, None)


if __name__ == "__main__":
    main()
