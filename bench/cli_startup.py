#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What one short axctl command costs, against sbatch where Slurm is installed.

For each command, /usr/bin/time times a shell loop of N calls (default 100) with the
output thrown away, and the row gives per call: the wall time and the CPU time (user +
system, which other load on the machine disturbs less). The same loop over /bin/true is
the floor: what starting any process costs here. Each figure is the median of R rounds
(default 5), taken in turn, so a burst of load from elsewhere hits one round, not a row.

The axctl rows run against a fresh axctld on 127.0.0.1 without agents (submitted jobs
queue): `axctl --version`, `axctl submit --ranks 1 -- true` (an accepted, durable
submit), `axctl status N`. With sbatch on the PATH: `sbatch --version` and
`sbatch --wrap=true`. Last, the controller's share: the median time of the submit's and
the status's request sent from the bench itself over a new connection, no process
started.

  cli_startup.py [--calls N] [--rounds R] [--also AXCTL_BINARY]...
--also adds the rows of another axctl build (an older commit), timed in the same rounds
so that both see the same load. Binaries come from AXCTLD and AXCTL, or else from the build directory AXTEST_BUILDDIR
(default: build/ next to bench/). Results: docs/PERFORMANCE.md.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
BUILD = os.environ.get("AXTEST_BUILDDIR",
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
for var, rel in (("AXCTLD", "axctld"), ("AXCTL", "cli/axctl")):
    os.environ.setdefault(var, os.path.join(BUILD, rel))
import axtest  # noqa: E402

TIME = "/usr/bin/time"


def time_loop(argv, calls, env):
    """Runs argv calls times in a shell loop under /usr/bin/time; returns (wall, cpu) in
    ms per call, or None when a call failed."""
    with tempfile.NamedTemporaryFile("r") as out:
        cmd = " ".join("'%s'" % a.replace("'", "'\\''") for a in argv)
        loop = "for i in $(seq %d); do %s >/dev/null 2>&1 || exit 1; done" % (calls, cmd)
        p = subprocess.run([TIME, "-f", "%e %U %S", "-o", out.name, "sh", "-c", loop], env=env)
        if p.returncode != 0:
            return None
        wall, user, system = (float(x) for x in out.read().split()[-3:])
    return wall * 1000 / calls, (user + system) * 1000 / calls


def controller_ms(url, method, path, body, calls):
    """Median ms of one request on a new connection from this process: the controller's
    share of a command, without any process start."""
    import http.client
    import json
    import urllib.parse
    u = urllib.parse.urlsplit(url)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        c.request(method, path, body=json.dumps(body) if body else None,
                  headers={"Content-Type": "application/json", "Connection": "close"})
        r = c.getresponse()
        r.read()
        c.close()
        if r.status >= 300:
            return None
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--also", action="append", default=[], metavar="AXCTL_BINARY")
    args = ap.parse_args()
    if not os.access(TIME, os.X_OK):
        sys.exit("cli_startup: needs %s (Debian package time)" % TIME)

    c = axtest.Cluster(0, name="cli-startup")
    try:
        c.start()
        env = dict(os.environ)
        env.pop("AXCTL_CONFIG", None)
        env.pop("AXCTL_TOKEN", None)
        env["AXCTL_URL"] = c.url
        env["XDG_CONFIG_HOME"] = c.tmp  # no config file, as on a CI runner
        axctl = os.environ["AXCTL"]
        first = subprocess.run([axctl, "submit", "--ranks", "1", "--", "true"], env=env,
                               capture_output=True, text=True, check=True)
        job = first.stdout.split()[0]

        rows = [("/bin/true (floor)", ["/bin/true"])]
        for binary in [axctl] + args.also:
            label = "" if binary == axctl else " [%s]" % binary
            rows += [("axctl --version" + label, [binary, "--version"]),
                     ("axctl submit --ranks 1 -- true" + label,
                      [binary, "submit", "--ranks", "1", "--", "true"]),
                     ("axctl status %s%s" % (job, label), [binary, "status", job])]
        sbatch = shutil.which("sbatch")
        if sbatch:
            rows += [("sbatch --version", [sbatch, "--version"]),
                     ("sbatch --wrap=true", [sbatch, "--wrap=true"])]
        else:
            print("sbatch: not installed, no Slurm rows", file=sys.stderr)

        print("load before: %s" % load())
        samples = {name: [] for name, _ in rows}
        for _ in range(args.rounds):
            for name, argv in rows:
                samples[name].append(time_loop(argv, args.calls, env))
        server = [("POST /v1/jobs", controller_ms(c.url, "POST", "/v1/jobs",
                                                  {"ranks": 1, "command": ["true"]}, args.calls)),
                  ("GET /v1/jobs/%s" % job, controller_ms(c.url, "GET", "/v1/jobs/" + job, None,
                                                         args.calls))]
        print("load after: %s" % load())
        print()
        print("| command (%d calls x %d rounds) | wall per call | CPU per call |" % (args.calls, args.rounds))
        print("|---|---|---|")
        for name, _ in rows:
            got = [s for s in samples[name] if s]
            if len(got) < len(samples[name]):
                print("| %s | failed | failed |" % name)
                continue
            print("| %s | %.1f ms | %.1f ms |" % (name, statistics.median(w for w, _ in got),
                                                  statistics.median(u for _, u in got)))
        print()
        print("The controller's share, one request on a new connection from the bench itself:")
        for name, ms in server:
            print("- %s: %s" % (name, "failed" if ms is None else "%.1f ms (median)" % ms))
    finally:
        c.close()


if __name__ == "__main__":
    main()
