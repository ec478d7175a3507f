#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fleet bench: a real axctld against N simulated agents (fleetsim), see README.md.

    bench/fleet/fleet.py --nodes 1000 --seconds 60 [--restart-at 40] [--build build]

Prints one JSON line per run with the simulator's figures plus the controller's CPU
(share of one core over the steady window), its RSS, nodes declared lost, and, with
--restart-at, how long a SIGKILLed controller took to serve again.
"""
import argparse
import hashlib
import json
import os
import re
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid, field="VmRSS"):
    """Resident memory, or with VmHWM its peak so far."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0


TOKEN = None  # with --auth: the admin token every request carries


def get(url, timeout=5):
    req = urllib.request.Request(url)
    if TOKEN:
        req.add_header("Authorization", "Bearer " + TOKEN)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def on_cpu(cpu):
    """For Popen: the child (and every thread it starts) runs on that CPU only."""
    return None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))


def start_controller(args, db, port):
    argv = [os.path.join(args.build, "axctld"), "--listen", "127.0.0.1:%d" % port,
            "--db", db, "--lease-ms", str(args.lease_ms), "--grace-ms", str(args.grace_ms),
            # One simulated user runs a job per node and keeps a backlog besides.
            "--max-jobs-per-user", "0"]
    if args.auth:
        argv.append("--auth")
    argv += args.axctld_arg
    env = dict(os.environ)
    env.pop("GLIBC_TUNABLES", None)
    if args.malloc_tunables:
        env["GLIBC_TUNABLES"] = args.malloc_tunables
    pass_fds = ()
    if args.listener:
        # As systemd starts it from axctld.socket: the listening socket as fd 3, named by
        # LISTEN_FDS and LISTEN_PID (the shell's pid is axctld's once it execs).
        fd = args.listener.fileno()
        pass_fds = (fd,)
        argv = ["/bin/sh", "-c", '[ "$1" = 3 ] || eval "exec 3<&$1 $1<&-"; shift; '
                'export LISTEN_PID=$$ LISTEN_FDS=1; exec "$@"', "sh", str(fd)] + argv
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(db + ".log", "ab"),
                            preexec_fn=on_cpu(args.controller_cpu), env=env, pass_fds=pass_fds)
    line = proc.stdout.readline().decode()
    m = re.search(r"listening on http://[^:]+:(\d+)", line)
    if not m:
        sys.exit("axctld did not start: %r (see %s.log)" % (line, db))
    if args.listener and int(m.group(1)) != args.listener.getsockname()[1]:
        sys.exit("axctld did not serve the socket passed to it (see %s.log)" % db)
    return proc, int(m.group(1))


def wait_serving(url, deadline):
    while time.monotonic() < deadline:
        try:
            get(url + "/healthz", timeout=0.5)
            return True
        except Exception:
            time.sleep(0.01)
    return False


def first_answer(url, deadline, out):
    """A patient client: asks /healthz as soon as the port takes connections and waits for
    the answer however long it takes; out["at"] is when it came."""
    while time.monotonic() < deadline:
        try:
            get(url + "/healthz", timeout=max(0.01, deadline - time.monotonic()))
            out["at"] = time.monotonic()
            return
        except Exception:
            time.sleep(0.01)


def sigkill_and_restart(ctl, args, db, port, url, timeout):
    """SIGKILLs the controller and starts it again on the same database and port: the new
    process, when it was killed (monotonic), the seconds from then until it serves (a
    request answered within 0.5 s, so one asked now is not held up by the restart) and
    until a request asked at once and waiting was answered."""
    ctl.send_signal(signal.SIGKILL)
    ctl.wait()
    killed = time.monotonic()
    patient = {}
    waiter = threading.Thread(target=first_answer, args=(url, killed + timeout, patient),
                              daemon=True)
    waiter.start()
    ctl, _ = start_controller(args, db, port)
    wait_serving(url, killed + timeout)
    serving = round(time.monotonic() - killed, 3)
    waiter.join()
    return ctl, killed, serving, round(patient["at"] - killed, 3) if "at" in patient else None


def store_node_tokens(db, nodes, tmp):
    """An agent token for each simulated node, bound to it, as `axctld token create --role
    agent --node NODE` stores one (10,000 runs of it would take minutes): fleetsim's
    agent NODE sends SECRET.NODE. Returns the file holding SECRET."""
    secret = secrets.token_hex(16)
    now = int(time.time() * 1000)
    with sqlite3.connect(db) as con:
        # A kept database (--db) has them from the last run, with another secret.
        con.execute("DELETE FROM token WHERE name LIKE 'node-sim%'")
        con.executemany(
            "INSERT INTO token (name, hash, role, projects, node, created_ms)"
            " VALUES (?, ?, 'agent', '[]', ?, ?)",
            (("node-%s" % n, hashlib.sha256(("%s.%s" % (secret, n)).encode()).hexdigest(), n,
              now) for n in ("sim%05d" % i for i in range(nodes))))
    path = os.path.join(tmp, "node-token")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(secret + "\n")
    return path


def churn_tokens(args, db, stop, out):
    """Creates a token every args.token_churn_s seconds, from another process, as an
    operator adding a node's token does; until stop is set. Counts those created and
    those that failed (out["tokens_churned"], out["token_churn_failures"])."""
    n = 0
    out["tokens_churned"] = out["token_churn_failures"] = 0
    while not stop.wait(args.token_churn_s):
        n += 1
        done = subprocess.run([os.path.join(args.build, "axctld"), "token", "create", "--db",
                               db, "--name", "churn-%d-%d" % (os.getpid(), n), "--role", "user",
                               "--project", "default"], capture_output=True)
        out["tokens_churned" if done.returncode == 0 else "token_churn_failures"] += 1


def token_lookups(text):
    """Bearer tokens identified from the cache and from the store, from /metrics."""
    return {m[0]: int(m[1]) for m in
            re.findall(r'axctl_token_lookups_total\{from="(\w+)"\} (\d+)', text)}


def watch_store_lookups(url, stop, out):
    """The most tokens read from the store in one second (/metrics each second), into
    out["token_lookups_store_max_per_s"], until stop is set."""
    last, most = None, 0
    while not stop.wait(1.0):
        try:
            now = token_lookups(get(url + "/metrics")).get("store", 0)
        except Exception:
            last = None  # a restart: counting starts again
            continue
        if last is not None:
            most = max(most, now - last)
        last = now
        out["token_lookups_store_max_per_s"] = most


def node_lost_total(text):
    """Restarts for lost nodes, from the controller's /metrics text."""
    m = re.search(r'axctl_restarts_total\{reason="node_lost"\} (\d+)', text)
    return int(m.group(1)) if m else 0


def node_losses(db, since_ms, vanished, bound_ms):
    """From the store's events since since_ms (wall): how soon each vanished node was first
    declared down after the send of its last request, and the nodes declared down while
    they had not vanished (false losses)."""
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT node, time_ms FROM event WHERE kind = 'node_state'"
                           " AND detail LIKE '% -> down%' AND time_ms >= ? ORDER BY seq",
                           (since_ms,)).fetchall()
    last_send = {v["node"]: v["last_send_ms"] for v in vanished}
    first_after, false_losses = {}, set()
    for node, at in rows:
        if node in last_send and at >= last_send[node]:
            first_after.setdefault(node, at)
        else:
            false_losses.add(node)
    delays = sorted(at - last_send[n] for n, at in first_after.items())
    out = {"vanished_nodes": len(last_send),
           "vanished_declared_down": len(delays),
           "false_node_losses": len(false_losses)}
    if delays:
        out["detection_ms_min"], out["detection_ms_max"] = delays[0], delays[-1]
        out["detection_bound_ms"] = bound_ms
        out["detection_within_bound"] = sum(1 for d in delays if d <= bound_ms)
    return out


LOOP_HISTOGRAMS = {"pass": "axctl_scheduler_pass_seconds", "commit": "axctl_db_commit_seconds",
                   "turn": "axctl_loop_turn_seconds"}


# Longer than these (seconds, bucket bounds of the histograms): the long turns the
# rank-exit p99 is made of, and commits slow on a busy disk.
LOOP_TAILS = {"turn": ("0.025", "0.05"), "commit": ("0.005", "0.01")}


def loop_sums(text):
    """Per loop histogram (scheduling passes, commits, turns that wrote): count, sum and,
    for LOOP_TAILS, how many were within each bound."""
    sums = {}
    for key, name in LOOP_HISTOGRAMS.items():
        c = re.search(r"^%s_count (\S+)" % name, text, re.M)
        s = re.search(r"^%s_sum (\S+)" % name, text, re.M)
        within = []
        for le in LOOP_TAILS.get(key, ()):
            b = re.search(r'^%s_bucket\{le="%s"\} (\S+)' % (name, le), text, re.M)
            within.append(float(b.group(1)) if b else 0.0)
        sums[key] = (float(c.group(1)) if c else 0.0, float(s.group(1)) if s else 0.0, within)
    return sums


def wal_pages(text):
    """Pages the controller's commits wrote into SQLite's WAL, from /metrics."""
    m = re.search(r"^axctl_db_wal_pages_total (\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def cpu_ticks():
    """The machine's (all CPUs') busy and stolen clock ticks: a VM's steal is time its
    vCPUs wanted and the host gave to someone else."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[7]


def host_loop_s(cpu):
    """Seconds a fixed loop takes on the controller's CPU (any, unpinned) just before the
    run: a host whose hypervisor reports no steal still shows a slow hour here."""
    allowed = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    t = time.perf_counter()
    sum(range(20_000_000))
    took = time.perf_counter() - t
    os.sched_setaffinity(0, allowed)
    return round(took, 3)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--warmup", type=int, default=20, help="seconds before CPU is measured")
    p.add_argument("--backlog", type=int, default=2000)
    p.add_argument("--rank-min-s", type=float, default=30)
    p.add_argument("--rank-max-s", type=float, default=60)
    p.add_argument("--ramp-per-s", type=int, default=2000)
    p.add_argument("--lease-ms", type=int, default=5000)
    p.add_argument("--grace-ms", type=int, default=1000)
    p.add_argument("--restart-at", type=float, default=0,
                   help="SIGKILL and restart the controller this many seconds in")
    p.add_argument("--db", help="use (and keep) this database instead of a fresh one")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--axctld-arg", action="append", default=[])
    p.add_argument("--gang-nodes", type=int, default=1,
                   help="nodes per job (8 ranks on each); 3000 with --nodes 3000: one gang")
    p.add_argument("--no-shared-env", action="store_true",
                   help="agents that get every rank's whole environment (older than shared_env)")
    p.add_argument("--no-unchanged", action="store_true",
                   help="agents older than the short sync answer: every answer whole")
    p.add_argument("--no-lease-only", action="store_true",
                   help="agents older than the lease-only answer of a restarted controller")
    p.add_argument("--step-s", type=float, default=0,
                   help="ranks report a step that grows every this many seconds (else 1)")
    p.add_argument("--auth", action="store_true",
                   help="bearer tokens on: the agents and the submitter use one admin token")
    p.add_argument("--node-tokens", action="store_true",
                   help="with --auth: each agent uses its own agent token, bound to its node")
    p.add_argument("--token-churn-s", type=float, default=0,
                   help="with --auth: a token is created every this many seconds")
    p.add_argument("--vanish", type=int, default=0,
                   help="this many nodes vanish (no FIN, no more requests) --vanish-at seconds in;"
                        " reports how soon each was declared down, and false losses")
    p.add_argument("--vanish-at", type=int, default=0,
                   help="with --vanish: seconds in (default: the warm-up's end)")
    p.add_argument("--no-hold", action="store_true",
                   help="agents that are never held: a sync a second, at once with news (not "
                        "axagent's protocol: what holding syncs costs at the same rate)")
    p.add_argument("--synchronized-start", action="store_true",
                   help="every node's first job starts at its beginning, so jobs end in waves a "
                        "job's length apart (fleetsim.c's job_part_left says why the default "
                        "starts them part-way through)")
    p.add_argument("--pin", action="store_true",
                   help="axctld on the first CPU, fleetsim on the second: the controller has "
                        "one core of its own")
    p.add_argument("--socket-backlog", type=int, default=0,
                   help="hold the listening socket across restarts with this backlog (the "
                        "kernel caps it at net.core.somaxconn) and pass it to axctld, as "
                        "axctld.socket does; default: axctld listens itself, so connects "
                        "during a restart are refused")
    p.add_argument("--malloc-tunables", default="",
                   help="GLIBC_TUNABLES for axctld alone (default: none, as the systemd unit "
                        "runs it), e.g. glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1")
    args = p.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin and len(cpus) < 2:
        p.error("--pin needs two CPUs, this process may use %d" % len(cpus))
    args.controller_cpu, sim_cpu = (cpus[0], cpus[1]) if args.pin else (None, None)
    if (args.node_tokens or args.token_churn_s) and not args.auth:
        p.error("--node-tokens and --token-churn-s need --auth")
    if args.vanish < 0 or args.vanish > args.nodes or args.vanish_at < 0:
        p.error("--vanish takes 0 to --nodes nodes, --vanish-at a time from the start")
    if args.vanish:
        args.vanish_at = args.vanish_at or args.warmup
        if args.vanish_at <= 0:
            p.error("--vanish needs --vanish-at, or a warm-up to vanish at its end")
        # Detection needs lease + grace after the last contact, plus the margin judged.
        if args.vanish_at + (args.lease_ms + args.grace_ms + 500) / 1000 + 2 > args.seconds - 1:
            p.error("--vanish-at leaves no time to see the nodes declared down before the end")

    args.listener = None
    if args.socket_backlog > 0:
        args.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        args.listener.bind(("127.0.0.1", 0))
        args.listener.listen(args.socket_backlog)
    loop_s = host_loop_s(args.controller_cpu)
    tmp = tempfile.mkdtemp(prefix="axfleet-")
    db = args.db or os.path.join(tmp, "state.db")
    global TOKEN
    if args.auth:
        TOKEN = subprocess.run([os.path.join(args.build, "axctld"), "token", "create", "--db", db,
                                "--name", "fleet-%d" % os.getpid(), "--role", "admin"],
                               check=True, capture_output=True, text=True).stdout.strip()
        # The simulator reads it from a private file, as axagent does, not from its argv.
        token_file = os.path.join(tmp, "token")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(TOKEN + "\n")
    node_token_file = store_node_tokens(db, args.nodes, tmp) if args.node_tokens else None
    started_wall_ms = int(time.time() * 1000)
    ctl, port = start_controller(args, db, 0)
    url = "http://127.0.0.1:%d" % port
    sim = subprocess.Popen([os.path.join(args.build, "bench", "fleetsim"), "--url", url,
                            "--nodes", str(args.nodes), "--seconds", str(args.seconds),
                            "--backlog", str(args.backlog), "--rank-min-s", str(args.rank_min_s),
                            "--rank-max-s", str(args.rank_max_s),
                            "--ramp-per-s", str(args.ramp_per_s),
                            "--lease-ms", str(args.lease_ms), "--warmup-s", str(args.warmup)]
                           + (["--no-unchanged"] if args.no_unchanged else [])
                           + (["--no-lease-only"] if args.no_lease_only else [])
                           + (["--no-shared-env"] if args.no_shared_env else [])
                           + ["--gang-nodes", str(args.gang_nodes)]
                           + (["--step-s", str(args.step_s)] if args.step_s else [])
                           + (["--token-file", token_file] if TOKEN else [])
                           + (["--node-token-file", node_token_file] if node_token_file else [])
                           + (["--no-hold"] if args.no_hold else [])
                           + (["--synchronized-start"] if args.synchronized_start else [])
                           + (["--vanish", str(args.vanish), "--vanish-at",
                               str(args.vanish_at)] if args.vanish else []),
                           stdout=subprocess.PIPE, preexec_fn=on_cpu(sim_cpu))
    stop_churn = threading.Event()
    churned = {}
    if args.token_churn_s:
        threading.Thread(target=churn_tokens, args=(args, db, stop_churn, churned),
                         daemon=True).start()
    # Whatever goes wrong (a /metrics that times out under a stalled controller), leave
    # no controller or simulator running to skew the next measurement.
    try:
        t0 = time.monotonic()
        out = {"host_loop_s": loop_s, "malloc_tunables": args.malloc_tunables or None,
               "socket_backlog": args.socket_backlog or None}
        time.sleep(args.warmup)
        cpu0, w0 = cpu_seconds(ctl.pid), time.monotonic()
        metrics = get(url + "/metrics")
        lost_before, loop0 = node_lost_total(metrics), loop_sums(metrics)
        ticks0, wal0 = cpu_ticks(), wal_pages(metrics)
        tokens0 = token_lookups(metrics)
        stop_watch = threading.Event()
        if args.auth:
            threading.Thread(target=watch_store_lookups, args=(url, stop_watch, out),
                             daemon=True).start()
        if args.restart_at:
            time.sleep(max(0, args.restart_at - (time.monotonic() - t0)))
            ctl, killed, out["restart_serving_s"], out["restart_first_answer_s"] = \
                sigkill_and_restart(ctl, args, db, port, url, 30)
            cpu0, w0, lost_before = 0.0, killed, 0
            loop0 = {key: (0.0, 0.0, [0.0] * len(LOOP_TAILS.get(key, ())))
                     for key in LOOP_HISTOGRAMS}
            wal0 = 0
            tokens0 = {}
        remaining = args.seconds - (time.monotonic() - t0) - 1
        if remaining > 0:
            time.sleep(remaining)
        cpu1, w1 = cpu_seconds(ctl.pid), time.monotonic()
        out["controller_cpu"] = round((cpu1 - cpu0) / (w1 - w0), 3)
        out["controller_rss_mb"] = round(rss_mb(ctl.pid), 1)
        out["controller_peak_rss_mb"] = round(rss_mb(ctl.pid, "VmHWM"), 1)
        metrics = get(url + "/metrics")
        out["node_lost_restarts"] = node_lost_total(metrics) - lost_before
        loop1 = loop_sums(metrics)
        tokens1 = token_lookups(metrics)
        stop_watch.set()
        for where in ("cache", "store"):  # per second, over the measured window
            out["token_lookups_%s_per_s" % where] = round(
                (tokens1.get(where, 0) - tokens0.get(where, 0)) / (w1 - w0), 1)
        for key in LOOP_HISTOGRAMS:  # how many per second, and their mean length
            n, s = loop1[key][0] - loop0[key][0], loop1[key][1] - loop0[key][1]
            plural = key + ("es" if key.endswith("s") else "s")  # passes, commits, turns
            out["%s_per_s" % plural] = round(n / (w1 - w0), 1)
            out["%s_mean_ms" % key] = round(1000 * s / n, 2) if n else None
            for le, before, after in zip(LOOP_TAILS.get(key, ()), loop0[key][2], loop1[key][2]):
                out["%s_over_%gms" % (plural, float(le) * 1000)] = int(n - (after - before))
        wal = wal_pages(metrics) - wal0
        out["wal_pages_per_s"] = round(wal / (w1 - w0), 1)
        n_commits = loop1["commit"][0] - loop0["commit"][0]
        out["wal_pages_per_commit"] = round(wal / n_commits, 1) if n_commits else None
        ticks1 = cpu_ticks()
        out["machine_steal"] = round((ticks1[1] - ticks0[1]) / max(1, ticks1[0] - ticks0[0]), 3)
        m = re.search(r'axctl_nodes\{state="down"\} (\d+)', metrics)
        out["nodes_down"] = int(m.group(1)) if m else 0
        out["whole_answers"] = sum(int(n) for n in re.findall(
            r'axctl_agent_sync_answers_total\{body="whole"\} (\d+)', metrics))
        reports = dict(re.findall(r'axctl_agent_sync_reports_total\{decoded="(\w+)"\} (\d+)',
                                  metrics))
        parsed, repeated = int(reports.get("parsed", 0)), int(reports.get("repeated", 0))
        out["repeated_reports"] = round(repeated / (parsed + repeated), 3) if parsed + repeated else None
        health = json.loads(get(url + "/healthz"))
        out["ready_nodes"] = health.get("ready_nodes")
        out.update(churned)
        if args.pin:
            out["pinned"] = True
        simout = sim.communicate(timeout=60)[0].decode()
        out.update(json.loads(simout))
        ctl.send_signal(signal.SIGTERM)
        ctl.wait(timeout=30)
        out.update(node_losses(db, started_wall_ms, out.pop("vanished", []),
                               args.lease_ms + args.grace_ms + 500))
    finally:
        stop_churn.set()
        for proc in (sim, ctl):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
