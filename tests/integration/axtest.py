# SPDX-License-Identifier: MIT
"""Harness for the integration tests: starts the real axctld, axagent and axctl.

A Cluster owns one temporary directory with the controller's database, every daemon's
stdout/stderr, the agents' state directories, job checkpoint dirs and attempt logs. It
starts `axctld --listen 127.0.0.1:0`, reads the URL the controller prints, starts the
agents and waits (deadlines, never bare sleeps) until GET /v1/nodes shows them ready.

Each agent talks to the controller through a small TCP relay owned by the harness. The
relay lets a test cut one node off the network (a one-way black hole, as a partition
looks to the agent) without root, and lets the controller come back on another port
after a restart if its old one cannot be bound again.

Every rank a test starts carries AXTEST_MARKER=<cluster marker> in its environment; at
teardown the harness asserts that no process of the cluster's jobs is left, kills any
that is, and prints the tails of the daemons' logs if the test failed.

Binary paths come from the environment (AXCTLD, AXAGENT, AXCTL, AXWORK), set by
tests/meson.build; AXTEST_BUILDDIR is the fallback for running a file by hand.
Standard library only.
"""

import ctypes
import datetime
import errno
import http.client
import json
import os
import random
import select
import shutil
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pgserver  # noqa: E402  (tests/pgserver.py, shared with meson's store tests)

# A private PostgreSQL server (tests/pgserver.py): PgServer().create_database() gives a
# URL for Cluster(db=...). PgUnavailable where PostgreSQL is not installed.
PgServer = pgserver.PgServer
PgUnavailable = pgserver.Unavailable


def pg_missing():
    """Why the PostgreSQL tests cannot run here, or None (for main(skip=...))."""
    return None if pgserver.bindir() else "PostgreSQL is not installed"


class WithPgServer:
    """Mixed into a test case: one private PostgreSQL server (self.pg, fsync off) for
    all the class's tests."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pg = PgServer(fsync=False)

    @classmethod
    def tearDownClass(cls):
        cls.pg.stop()
        super().tearDownClass()

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))

TERMINAL_STATES = ("succeeded", "failed", "cancelled")


def _binary(var, *relpaths):
    path = os.environ.get(var)
    if path:
        return path
    # Absolute: daemons may run in another working directory.
    builddir = os.path.abspath(os.environ.get("AXTEST_BUILDDIR",
                                              os.path.join(SOURCE_ROOT, "build-tests")))
    for rel in relpaths:
        if os.access(os.path.join(builddir, rel), os.X_OK):
            return os.path.join(builddir, rel)
    return os.path.join(builddir, relpaths[0])


AXCTLD = _binary("AXCTLD", "axctld", "daemon/axctld")
AXAGENT = _binary("AXAGENT", "agents/axagent")
AXCTL = _binary("AXCTL", "cli/axctl")
AXWORK = _binary("AXWORK", "tests/axwork", "tests/workload/axwork")
TOPOLOGIES_DIR = os.environ.get("TOPOLOGIES_DIR", os.path.join(SOURCE_ROOT, "tests", "topologies"))
SHARED_TOPOLOGIES_DIR = os.environ.get(
    "SHARED_TOPOLOGIES_DIR", os.path.join(SOURCE_ROOT, "tests", "topologies", "hwloc"))

# Scales every deadline, for slow or loaded machines.
TIME_SCALE = float(os.environ.get("AXTEST_TIME_SCALE", "1"))


def log(msg):
    sys.stderr.write("[axtest %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


# ---------------------------------------------------------------------------------------
# The workload's state function, the same as work_step() in tests/workload/axwork.c.

MASK64 = (1 << 64) - 1
INITIAL_VALUE = 0xCBF29CE484222325


def work_step(value, step):
    z = value ^ ((step * 0x9E3779B97F4A7C15) & MASK64)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def expected_value(steps, seed=0):
    """The `final value` axwork prints after `steps` steps, however often it resumed."""
    value = INITIAL_VALUE ^ seed
    for step in range(1, steps + 1):
        value = work_step(value, step)
    return "%016x" % value


# ---------------------------------------------------------------------------------------
# Waiting.


class Timeout(AssertionError):
    pass


def parse_time(text):
    """Seconds since the epoch of a time the API shows ("2026-11-22T02:33:35.123Z")."""
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def fill_disk(path):
    """Fills the file system at path to its last page with a file path/filler, which
    the caller may delete to make room again."""
    with open(os.path.join(path, "filler"), "wb", buffering=0) as f:  # nothing to flush
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise


def wait_for(predicate, timeout, what="condition", interval=0.05):
    """Polls predicate() until it returns something truthy and returns that; raises
    Timeout naming `what` and the last value seen otherwise. Exceptions raised by the
    predicate count as "not yet" (a daemon may be restarting) but are reported."""
    deadline = time.monotonic() + timeout * TIME_SCALE
    last, last_exc = None, None
    while True:
        try:
            last = predicate()
            last_exc = None
            if last:
                return last
        except (OSError, ValueError, KeyError, http.client.HTTPException, ApiError) as e:
            last_exc = e
        if time.monotonic() >= deadline:
            detail = "last value: %r" % (last,)
            if last_exc is not None:
                detail += ", last error: %r" % (last_exc,)
            raise Timeout("timed out after %.1fs waiting for %s (%s)" % (timeout * TIME_SCALE, what, detail))
        time.sleep(interval)


# ---------------------------------------------------------------------------------------
# Processes found through /proc.


def proc_environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            k, v = item.split(b"=", 1)
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def proc_state(pid):
    """The one-letter state of pid ('R', 'S', 'T', 'Z'...) or None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2]


def pid_alive(pid):
    """True if pid exists and is not a zombie (a zombie has finished running)."""
    if not pid or pid <= 0:
        return False
    state = proc_state(pid)
    return state is not None and state not in ("Z", "X")


def rank_processes(marker, job=None):
    """Live processes that are ranks of a cluster (AXCTL_JOB_ID plus the marker in their
    environment), optionally of one job: [{"pid", "job", "attempt", "rank"}]."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == os.getpid():
            continue
        env = proc_environ(pid)
        if not env or env.get("AXTEST_MARKER") != marker or "AXCTL_JOB_ID" not in env:
            continue
        if job is not None and env.get("AXCTL_JOB_ID") != str(job):
            continue
        if not pid_alive(pid):
            continue
        try:
            exe = os.readlink("/proc/%d/exe" % pid)
        except OSError:
            exe = ""
        found.append({"pid": pid, "job": env.get("AXCTL_JOB_ID"), "exe": exe,
                      "attempt": int(env.get("AXCTL_ATTEMPT") or 0),
                      "rank": int(env.get("AXCTL_RANK") or 0)})
    return found


def workload_pids(marker, job, attempt=None):
    """{rank: pid} of the axwork processes themselves (not a supervisor that may carry
    the same environment) of a job, optionally of one attempt."""
    real = os.path.realpath(AXWORK)
    pids = {}
    for p in rank_processes(marker, job):
        if p["exe"] != real:
            continue
        if attempt is not None and p["attempt"] != attempt:
            continue
        pids[p["rank"]] = p["pid"]
    return pids


def find_python(candidates, code, timeout=120):
    """(interpreter, None) for the first of candidates (None entries skipped) that runs
    `python -c code` with exit 0, as an absolute path when found on the PATH; else
    (None, what each one said)."""
    problems = []
    for python in dict.fromkeys(c for c in candidates if c):
        try:
            p = subprocess.run([python, "-c", code], capture_output=True, text=True,
                               timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            problems.append("%s: %s" % (python, e))
            continue
        if p.returncode == 0:
            return shutil.which(python) or python, None
        lines = p.stderr.strip().splitlines()
        problems.append("%s: %s" % (python, lines[-1] if lines else "exit %d" % p.returncode))
    return None, "; ".join(problems)


def tail(path, lines=60):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode(errors="replace")
    except OSError as e:
        return "<%s>" % e
    return "\n".join(data.splitlines()[-lines:])


# ---------------------------------------------------------------------------------------
# Attempt logs written by axwork --attempt-log.


def parse_attempt_log(path):
    """Entries {"event", "job", "attempt", "rank", "pid", "t", ...} in file order."""
    entries = []
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return entries
    for line in lines:
        words = line.split()
        if not words:
            continue
        e = {"event": words[0]}
        for w in words[1:]:
            if "=" in w:
                k, v = w.split("=", 1)
                e[k] = v
        for k in ("attempt", "rank", "pid", "t", "step", "resume_step"):
            if k in e:
                e[k] = int(e[k])
        entries.append(e)
    return entries


def attempt_spans(entries):
    """{attempt: (first t, last t)} over every line an attempt's ranks wrote."""
    spans = {}
    for e in entries:
        a = e["attempt"]
        lo, hi = spans.get(a, (e["t"], e["t"]))
        spans[a] = (min(lo, e["t"]), max(hi, e["t"]))
    return spans


def goodput_by_attempt(g):
    """A job's goodput timeline (its view's "goodput" with the timeline) summed per attempt
    and bucket: {attempt: {bucket: seconds}}."""
    spans = {}
    for seg in g["timeline"]:
        spans.setdefault(seg["attempt"], {}).setdefault(seg["bucket"], 0.0)
        spans[seg["attempt"]][seg["bucket"]] += seg["seconds"]
    return spans


def check_no_overlap(entries):
    """Returns a list of problems: attempts whose lines interleave in time. The last line
    of attempt N (a step, or the end line written on SIGTERM) must come before the first
    line of any later attempt; a rank killed by SIGKILL writes nothing more, so its last
    step line is the last proof of life it gave."""
    spans = attempt_spans(entries)
    problems = []
    attempts = sorted(spans)
    for i, a in enumerate(attempts):
        for b in attempts[i + 1:]:
            if spans[a][1] >= spans[b][0]:
                problems.append("attempt %d was still writing %.3fs after attempt %d started"
                                % (a, (spans[a][1] - spans[b][0]) / 1e9, b))
    return problems


# ---------------------------------------------------------------------------------------
# A TCP relay between one agent and the controller, which can black-hole the link.


class Relay:
    """Forwards 127.0.0.1:port to the controller. cut() makes it a black hole: bytes are
    read and dropped both ways and new connections are accepted but never answered, as
    a network partition looks to the agent. heal() closes the black-holed connections
    (their peers would see resets) and forwards again."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.cut_flag = False
        self.stopping = False
        self.epoch = 0
        self.lock = threading.Lock()
        self.conns = set()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)
        self.thread.start()

    scheme = "http"  # "https" when the controller serves TLS: the relay only moves bytes

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % (self.scheme, self.port)

    def cut(self):
        with self.lock:
            self.cut_flag = True
            self.epoch += 1

    def heal(self):
        with self.lock:
            self.cut_flag = False
            self.epoch += 1

    def retarget(self, port):
        with self.lock:
            self.target_port = port

    def close(self):
        self.stopping = True
        try:
            self.listener.close()
        except OSError:
            pass

    def _accept_loop(self):
        while not self.stopping:
            try:
                r, _, _ = select.select([self.listener], [], [], 0.1)
                if not r:
                    continue
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pump, args=(client,), daemon=True).start()

    def _pump(self, client):
        with self.lock:
            epoch, cut, port = self.epoch, self.cut_flag, self.target_port
        upstream = None
        if not cut:
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=2)
                upstream.settimeout(None)
            except OSError:
                client.close()
                return
        try:
            while not self.stopping:
                with self.lock:
                    changed = self.epoch != epoch
                    now_cut = self.cut_flag
                if changed and now_cut and upstream is not None:
                    # The partition starts: this connection stops carrying anything.
                    upstream.close()
                    upstream = None
                    epoch = self.epoch
                elif changed and not now_cut and upstream is None:
                    return  # healed: the black-holed connection is dead for its peer
                elif changed:
                    epoch = self.epoch
                socks = [client] + ([upstream] if upstream is not None else [])
                r, _, _ = select.select(socks, [], [], 0.1)
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    if upstream is None:
                        continue
                    (upstream if s is client else client).sendall(data)
        except OSError:
            return
        finally:
            for s in (client, upstream):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass


# ---------------------------------------------------------------------------------------
# Daemons.


PR_SET_PDEATHSIG = 1
try:
    # Resolved here, not in the child: the child of a threaded process (the relays) must
    # not dlopen or malloc before exec.
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None


def _die_with_parent():
    """Runs in the forked child: SIGKILL it if the test process dies (meson's timeout, a
    crash), so that no daemon outlives its test. Tests only start daemons from the
    main thread, whose exit is what the kernel watches."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


class Daemon:
    """One daemon process with its stderr (and stdout) in files of the cluster dir."""

    def __init__(self, name, argv, logdir, env, cwd=None):
        self.name = name
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.stderr_path = os.path.join(logdir, "%s.stderr" % name)
        self.stdout_path = os.path.join(logdir, "%s.stdout" % name)
        self.proc = None
        self.starts = 0
        self.stopped = False
        self.reader = None  # thread draining a captured stdout

    def start(self, capture_stdout=False):
        self.starts += 1
        err = open(self.stderr_path, "ab")
        err.write(("==== start %d: %s\n" % (self.starts, " ".join(self.argv))).encode())
        err.flush()
        out = subprocess.PIPE if capture_stdout else open(self.stdout_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=err, env=self.env,
                                     cwd=self.cwd, start_new_session=True, close_fds=True,
                                     preexec_fn=_die_with_parent)
        err.close()
        if not capture_stdout:
            out.close()
        self.stopped = False
        return self.proc

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.running():
            os.kill(self.proc.pid, sig)
            if sig == signal.SIGSTOP:
                self.stopped = True
            elif sig == signal.SIGCONT:
                self.stopped = False

    def kill(self):
        """SIGKILL and reap."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.stopped = False
        self._close_stdout()

    def _close_stdout(self):
        if self.reader is not None:
            self.reader.join(5)
            self.reader = None
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def terminate(self, timeout=10):
        """SIGTERM and wait for a clean exit; returns the exit status."""
        if self.stopped:
            self.signal(signal.SIGCONT)
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            status = self.proc.wait(timeout=timeout * TIME_SCALE)
            self._close_stdout()
            return status
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._close_stdout()
            raise AssertionError("%s did not exit within %ss of SIGTERM" % (self.name, timeout))


def _help_text(binary):
    try:
        p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10)
        return p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


_HELP_CACHE = {}


def supports_flag(binary, flag):
    if binary not in _HELP_CACHE:
        _HELP_CACHE[binary] = _help_text(binary)
    return flag in _HELP_CACHE[binary]


def cgroup_dirs(pid="self"):
    """The cgroup of a process (by default this one, below which the agents it starts
    make theirs) in every hierarchy mounted here, as directories."""
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] in ("cgroup", "cgroup2"):
                opts = set(fields[sep + 3].split(","))
                mounts.append((fields[3], fields[4].replace("\\040", " "),
                               fields[sep + 1] == "cgroup2", opts))
    dirs = []
    with open("/proc/%s/cgroup" % pid) as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            wanted = set(names.split(",")) if names else set()
            for root, point, v2, opts in mounts:
                if v2 != (not names) or not wanted <= opts:
                    continue
                if root != "/" and path != root and not path.startswith(root + "/"):
                    continue
                rest = path[len(root):] if root != "/" else path
                dirs.append(point + rest.rstrip("/"))
                break
    return dirs


def remove_cgroups(prefix):
    """Kills what is left in the cgroups named prefix* of agents that were killed, and
    removes them: a cluster leaves no cgroup behind."""
    for base in cgroup_dirs():
        try:
            names = [n for n in os.listdir(base) if n.startswith(prefix)]
        except OSError:
            continue
        for name in names:
            top = os.path.join(base, name)
            for sub in [os.path.join(top, n) for n in os.listdir(top)
                        if os.path.isdir(os.path.join(top, n))] + [top]:
                def gone(sub=sub):
                    try:
                        with open(os.path.join(sub, "cgroup.procs")) as f:
                            for pid in f.read().split():
                                os.kill(int(pid), signal.SIGKILL)
                        os.rmdir(sub)
                    except FileNotFoundError:
                        pass
                    except OSError:
                        return False
                    return True
                try:
                    wait_for(gone, 5, "cgroup %s to be removed" % sub)
                except Timeout:
                    log("cannot remove cgroup %s" % sub)


class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__("HTTP %d: %s" % (status, body))
        self.status = status
        self.body = body


class Cluster:
    """A controller and n agents on this machine, in one temporary directory.

    lease_ms/grace_ms are passed to axctld when it has those flags. agent_args is a list
    (one per agent) of extra argv, e.g. ["--topology", path]. agent_controllers, when
    given, turns (node, the controller URL its agent would use) into the agent's
    --controller value (several URLs, test_follow_leader); cli_url, when set, is axctl's
    --url instead of the controller's URL. db: the controller's database, a PostgreSQL
    URL (PgServer.create_database()); default a SQLite file in the cluster's directory."""

    def __init__(self, n_agents=2, lease_ms=None, grace_ms=None, controller_args=(),
                 agent_args=None, relay=True, name="cluster", agent_controllers=None,
                 db=None):
        self.marker = uuid.uuid4().hex
        self.cgroup_prefix = "axtest-" + self.marker[:12]
        self.tmp = tempfile.mkdtemp(prefix="axtest-%s-" % name)
        self.n_agents = n_agents
        self.lease_ms = lease_ms
        self.grace_ms = grace_ms
        self.controller_args = list(controller_args)
        self.agent_args = agent_args or [[] for _ in range(n_agents)]
        self.agent_controllers = agent_controllers or (lambda node, url: url)
        self.cli_url = None
        self.use_relay = relay
        self.db = db or os.path.join(self.tmp, "state.db")
        self.url = None
        self.port = None
        self.controller = None
        self.agents = {}
        self.relays = {}
        self.jobs_dir = os.path.join(self.tmp, "jobs")
        os.makedirs(self.jobs_dir)
        self._job_counter = 0
        self.env = dict(os.environ)
        self.env["AXTEST_MARKER"] = self.marker
        # An illegal state transition in axctld aborts it, failing the test.
        self.env["AXCTLD_STRICT_TRANSITIONS"] = "1"
        # Credentials the harness's own API and CLI calls use (authentication, TLS).
        self.token = None
        self.ca_file = None
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=0")

    # -- lifecycle ------------------------------------------------------------------

    def start(self):
        self.start_controller()
        for i in range(1, self.n_agents + 1):
            self.start_agent("n%d" % i)
        self.wait_nodes_ready()
        return self

    def _controller_argv(self, listen):
        argv = [AXCTLD, "--listen", listen, "--db", self.db]
        if self.lease_ms is not None and supports_flag(AXCTLD, "--lease-ms"):
            argv += ["--lease-ms", str(self.lease_ms)]
        if self.grace_ms is not None and supports_flag(AXCTLD, "--grace-ms"):
            argv += ["--grace-ms", str(self.grace_ms)]
        return argv + self.controller_args

    def start_controller(self, port=0, timeout=20, wait_serving=True):
        """Starts axctld and waits for its `listening on http://...` line, then (unless
        not wait_serving) for its /healthz, which waits for the state to load."""
        listen = "127.0.0.1:%d" % port
        # In the cluster's directory: with a URL for --db, axctld keeps its log-link key
        # in its working directory.
        self.controller = Daemon("axctld", self._controller_argv(listen), self.tmp, self.env,
                                 cwd=self.tmp)
        proc = self.controller.start(capture_stdout=True)
        found = threading.Event()
        result = {}
        out_path = self.controller.stdout_path

        def reader():
            with open(out_path, "ab") as out:
                for raw in proc.stdout:
                    out.write(raw)
                    out.flush()
                    line = raw.decode(errors="replace").strip()
                    if not found.is_set() and "listening on http" in line:
                        start = line.index("listening on ") + len("listening on ")
                        result["url"] = line[start:].split()[0].rstrip("/")
                        found.set()

        self.controller.reader = threading.Thread(target=reader, daemon=True)
        self.controller.reader.start()
        deadline = time.monotonic() + timeout * TIME_SCALE
        while not found.wait(0.05):
            if proc.poll() is not None:
                raise AssertionError("axctld exited with %s before listening:\n%s"
                                     % (proc.returncode, tail(self.controller.stderr_path)))
            if time.monotonic() > deadline:
                raise AssertionError("axctld printed no 'listening on' line within %ss:\n%s"
                                     % (timeout, tail(self.controller.stderr_path)))
        self.url = result["url"]
        self.port = int(self.url.rsplit(":", 1)[1])
        for relay in self.relays.values():
            relay.retarget(self.port)
        if wait_serving:
            wait_for(lambda: self.api("GET", "/healthz")[0] == 200, 10, "GET /healthz")
        return self.url

    def kill_controller(self):
        self.controller.kill()

    def restart_controller(self, sigkill=True):
        """Stops the controller (SIGKILL by default, as a crash) and starts it again on the
        same database, preferably on the same port so that nothing else must change."""
        if sigkill:
            self.controller.kill()
        else:
            self.controller.terminate()
        old_port = self.port
        try:
            wait_for(lambda: self._try_start_controller(old_port), 10,
                     "axctld to bind port %d again" % old_port, interval=0.2)
        except Timeout:
            if not self.use_relay:
                raise
            log("port %d not bindable again; restarting axctld on a new port" % old_port)
            self.start_controller(0)
        return self.url

    def _try_start_controller(self, port):
        try:
            self.start_controller(port, timeout=5)
            return True
        except AssertionError as e:
            log("axctld restart on port %d failed: %s" % (port, str(e).splitlines()[0]))
            if self.controller.running():
                self.controller.kill()
            return False

    def _agent_argv(self, node):
        index = int(node[1:]) - 1 if node[1:].isdigit() else 0
        extra = self.agent_args[index] if index < len(self.agent_args) else []
        controller = self.relays[node].url if self.use_relay else self.url
        state_dir = os.path.join(self.tmp, node)
        os.makedirs(state_dir, exist_ok=True)
        argv = [AXAGENT, "--controller", self.agent_controllers(node, controller), "--node", node,
                "--state-dir", state_dir]
        if os.geteuid() == 0:
            # Tests run as root and their jobs name no local account: the agent refuses
            # both by default (docs/SECURITY.md), so allow them here explicitly.
            argv += ["--allow-root", "--default-user", "root"]
        if supports_flag(AXAGENT, "--cgroup"):
            # Clusters run side by side on one host with the same node names: each agent
            # needs cgroups of its own, or one would sweep another's ranks as orphans.
            argv += ["--cgroup", self.cgroup_name(node)]
        return argv + list(extra)

    def cgroup_name(self, node):
        """The cgroup the agent of node makes below its own (axagent --cgroup)."""
        return "%s-%s" % (self.cgroup_prefix, node)

    def start_agent(self, node):
        if self.use_relay and node not in self.relays:
            self.relays[node] = Relay(self.port)
            if self.ca_file:
                self.relays[node].scheme = "https"
        daemon = self.agents.get(node)
        if daemon is None:
            daemon = Daemon("axagent-%s" % node, self._agent_argv(node), self.tmp, self.env)
            self.agents[node] = daemon
        daemon.start()
        return daemon

    def restart_agent(self, node, sig=signal.SIGTERM):
        """Stops an agent (SIGTERM: clean, SIGKILL: crash) and starts it on the same
        state directory."""
        daemon = self.agents[node]
        if sig == signal.SIGKILL:
            daemon.kill()
        else:
            daemon.terminate()
        return self.start_agent(node)

    def cut_node(self, node):
        self.relays[node].cut()

    def heal_node(self, node):
        self.relays[node].heal()

    def nodes(self):
        return self.api_ok("GET", "/v1/nodes")["nodes"]

    def wait_nodes_ready(self, names=None, timeout=20):
        names = set(names or ["n%d" % i for i in range(1, self.n_agents + 1)])

        def ready():
            nodes = {n["name"]: n for n in self.nodes()}
            return all(n in nodes and nodes[n]["state"] == "ready" for n in names)

        wait_for(ready, timeout, "nodes %s ready" % sorted(names), interval=0.1)

    def close(self):
        """Stops everything. Returns the rank processes of the cluster's jobs that were
        still alive once the jobs had ended (and kills them)."""
        leftovers = []
        try:
            for d in self.agents.values():
                if d.stopped:
                    d.signal(signal.SIGCONT)
            for r in self.relays.values():
                r.heal()
            if self.controller is not None and self.controller.running():
                try:
                    for job in self.list_jobs():
                        if job["state"] not in TERMINAL_STATES:
                            self.api("POST", "/v1/jobs/%d/cancel" % job["id"])
                except (OSError, ApiError, KeyError, ValueError, http.client.HTTPException):
                    pass
            try:
                wait_for(lambda: not rank_processes(self.marker), 15,
                         "the cluster's rank processes to end")
            except Timeout:
                leftovers = rank_processes(self.marker)
        finally:
            for d in list(self.agents.values()) + [self.controller]:
                if d is not None and d.proc is not None:
                    if d.stopped:
                        d.signal(signal.SIGCONT)
                    d.kill()
            for r in self.relays.values():
                r.close()
            self.kill_stray_ranks()
            remove_cgroups(self.cgroup_prefix)
        return leftovers

    def kill_stray_ranks(self):
        for p in rank_processes(self.marker):
            try:
                os.kill(p["pid"], signal.SIGCONT)
                os.kill(p["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def dump(self, stream=sys.stderr):
        """Writes the tails of every daemon's logs and the jobs, for a failed test."""
        stream.write("\n======== cluster %s (marker %s)\n" % (self.tmp, self.marker))
        daemons = ([self.controller] if self.controller else []) + list(self.agents.values())
        for d in daemons:
            stream.write("---- %s stderr (tail)\n%s\n" % (d.name, tail(d.stderr_path, 80)))
            stream.write("---- %s stdout (tail)\n%s\n" % (d.name, tail(d.stdout_path, 20)))
        try:
            if self.controller and self.controller.running():
                for job in self.list_jobs()[:50]:
                    stream.write("---- job %s\n%s\n" % (job["id"], json.dumps(self.job(job["id"]), indent=None)))
        except Exception as e:  # noqa: BLE001 - best effort while reporting a failure
            stream.write("---- jobs unavailable: %r\n" % (e,))
        stream.flush()

    # -- HTTP API --------------------------------------------------------------------

    def api(self, method, path, body=None, headers=None, raw=None, timeout=10):
        """Returns (status, decoded JSON or text, headers); never raises on 4xx/5xx."""
        data = raw
        hdrs = dict(headers or {})
        if body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        if self.token:
            hdrs.setdefault("Authorization", "Bearer " + self.token)
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        context = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None
        try:
            with urllib.request.urlopen(req, timeout=timeout * TIME_SCALE, context=context) as resp:
                status, payload, rh = resp.status, resp.read(), resp.headers
        except urllib.error.HTTPError as e:
            status, payload, rh = e.code, e.read(), e.headers
        text = payload.decode(errors="replace")
        try:
            decoded = json.loads(text) if text else None
        except ValueError:
            decoded = text
        return status, decoded, rh

    def api_ok(self, method, path, body=None, headers=None, expect=(200, 201)):
        status, decoded, _ = self.api(method, path, body, headers)
        if status not in expect:
            raise ApiError(status, decoded)
        return decoded

    def list_jobs(self, query=""):
        """Every job (following next_after), newest first."""
        jobs, after = [], None
        while True:
            q = query + ("&" if query else "") + ("after=%d" % after if after else "")
            page = self.api_ok("GET", "/v1/jobs" + ("?" + q if q else ""))
            jobs += page["jobs"]
            after = page.get("next_after")
            if not after or not page["jobs"]:
                return jobs

    def submit(self, spec, key=None):
        headers = {"Idempotency-Key": key} if key else None
        return self.api_ok("POST", "/v1/jobs", spec, headers)

    def job(self, job_id):
        return self.api_ok("GET", "/v1/jobs/%d" % job_id)

    def cancel(self, job_id):
        return self.api("POST", "/v1/jobs/%d/cancel" % job_id)

    def wait_job(self, job_id, states=TERMINAL_STATES, timeout=60):
        if isinstance(states, str):
            states = (states,)

        def reached():
            view = self.job(job_id)
            return view if view["state"] in states else None

        try:
            return wait_for(reached, timeout, "job %d in %s" % (job_id, "/".join(states)), interval=0.1)
        except Timeout as e:
            try:
                view = self.job(job_id)
                raise Timeout("%s; job is %s (attempt %s, reason %r)"
                              % (e, view.get("state"), view.get("attempt"), view.get("reason"))) from None
            except (OSError, ApiError, urllib.error.URLError):
                raise e from None

    def running_ranks(self, job_id, attempt=None):
        """The job view's ranks of the given (default: current) attempt, once all of them
        report running with a pid; None before that."""
        view = self.job(job_id)
        attempt = attempt or view["attempt"]
        ranks = [r for r in view.get("ranks", []) if r.get("attempt", attempt) == attempt]
        world = view.get("spec", {}).get("ranks")
        if not ranks or (world and len(ranks) < world):
            return None
        if all(r["state"] == "running" and r.get("pid") for r in ranks):
            return sorted(ranks, key=lambda r: r["rank"])
        return None

    def wait_running(self, job_id, timeout=30, attempt=None):
        return wait_for(lambda: self.running_ranks(job_id, attempt), timeout,
                        "job %d's ranks running" % job_id, interval=0.1)

    # -- CLI -------------------------------------------------------------------------

    def cli(self, *args, timeout=30, input=None):
        argv = [AXCTL, "--url", self.cli_url or self.url] + [str(a) for a in args]
        env = dict(self.env)
        if self.token:
            env["AXCTL_TOKEN"] = self.token
        if self.ca_file:
            env["AXCTL_CA_FILE"] = self.ca_file
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout * TIME_SCALE,
                              input=input, env=env)

    def logs(self, job_id, rank, attempt=None):
        args = ["logs", job_id, "--rank", rank]
        if attempt is not None:
            args += ["--attempt", attempt]
        p = self.cli(*args)
        if p.returncode != 0:
            raise AssertionError("axctl %s exited %d: %s" % (" ".join(map(str, args)), p.returncode, p.stderr.strip()))
        return p.stdout

    # -- workload jobs ---------------------------------------------------------------

    def work_job(self, name="work", ranks=1, ranks_per_node=None, steps=20, step_ms=50,
                 checkpoint_every=5, args=(), print_env=False, restart=None,
                 hang_timeout_s=None, seed=0, spec=None):
        """A WorkJob: an axwork spec with its own checkpoint dir and attempt log."""
        self._job_counter += 1
        job_dir = os.path.join(self.jobs_dir, "%s-%d" % (name, self._job_counter))
        os.makedirs(job_dir)
        ckpt = os.path.join(job_dir, "ckpt")
        attempt_log_path = os.path.join(job_dir, "attempts.log")
        command = [AXWORK, "--steps", str(steps), "--step-ms", str(step_ms),
                   "--checkpoint-every", str(checkpoint_every), "--attempt-log", attempt_log_path,
                   "--seed", str(seed)] + [str(a) for a in args]
        if print_env:
            command.append("--print-env")
        s = {"name": name, "command": command, "ranks": ranks, "checkpoint_dir": ckpt,
             "env": {"AXTEST_MARKER": self.marker}}
        if ranks_per_node is not None:
            s["ranks_per_node"] = ranks_per_node
        if restart is not None:
            s["restart"] = restart
        if hang_timeout_s is not None:
            s["hang_timeout_s"] = hang_timeout_s
        s.update(spec or {})
        return WorkJob(s, job_dir, ckpt, attempt_log_path, expected_value(steps, seed), steps)


class WorkJob:
    def __init__(self, spec, job_dir, checkpoint_dir, attempt_log, expected, steps):
        self.spec = spec
        self.dir = job_dir
        self.checkpoint_dir = checkpoint_dir
        self.attempt_log = attempt_log
        self.expected = expected
        self.steps = steps
        self.id = None

    def entries(self):
        return parse_attempt_log(self.attempt_log)

    def committed_steps(self):
        """Steps whose checkpoint is committed (has its index), ascending."""
        try:
            names = os.listdir(self.checkpoint_dir)
        except FileNotFoundError:
            return []
        steps = []
        for n in names:
            if n.startswith("step_") and os.path.exists(os.path.join(self.checkpoint_dir, n, "index")):
                steps.append(int(n[5:]))
        return sorted(steps)


def final_values(text):
    return [line.split()[2] for line in text.splitlines() if line.startswith("final value ")]


def env_from_log(text):
    env = {}
    for line in text.splitlines():
        if line.startswith("env ") and "=" in line:
            k, v = line[4:].split("=", 1)
            env[k] = v
    return env


# ---------------------------------------------------------------------------------------
# unittest glue.


def create_token(db, *args):
    """`axctld token create --db DB ARGS...`: the new token."""
    p = subprocess.run([AXCTLD, "token", "create", "--db", db] + list(args),
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError("axctld token create %s: %s" % (args, p.stderr))
    return p.stdout.strip()


def grow_queue(path, job, jobs, prepare=None):
    """Fills the database at path, with no controller on it, with queued copies of job up
    to id `jobs`; prepare(db) may change it further (sqlite3) before the commit."""
    db = sqlite3.connect(path)
    rows = db.execute("SELECT name, project, user, priority, spec, created_ms FROM job"
                      " WHERE id = ?", (job["id"],)).fetchone()
    db.executemany("INSERT INTO job (id, name, project, user, priority, spec, state,"
                   " attempt, restarts, reason, created_ms, queued_ms)"
                   " VALUES (?,?,?,?,?,?,'pending',0,0,'',?,?)",
                   ((i,) + rows + (rows[-1],) for i in range(job["id"] + 1, jobs + 1)))
    if prepare:
        prepare(db)
    db.commit()
    db.close()


def restart_loading(test, c, descriptors=None, jobs=120000, job=None, prepare=None,
                    backlog=16):
    """Stops c's controller and starts another, with c's arguments, on c's database grown
    to `jobs` queued jobs, copies of job (one submitted here if None): most of a second
    to load. It serves on a listening socket with a backlog of 16 (or backlog) handed
    over as systemd would: without anyone accepting, the 18th connection would wait for
    a SYN retransmit. With descriptors, that is its descriptor limit; prepare(db) may change the
    database (sqlite3) before it starts. Returns its process, its port and its stderr's
    path."""
    job = job or c.submit({"command": ["true"], "ranks": 1})
    c.controller.terminate()
    grow_queue(c.db, job, jobs, prepare)
    listener = socket.socket()
    test.addCleanup(listener.close)
    listener.bind(("127.0.0.1", 0))
    listener.listen(backlog)
    port = listener.getsockname()[1]
    stderr = os.path.join(c.tmp, "loading.stderr")
    log = open(stderr, "wb")
    test.addCleanup(log.close)
    as_fd_3 = ("import os, sys; os.dup2(int(sys.argv[1]), 3);"
               " os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1');"
               " os.execv(sys.argv[2], sys.argv[2:])")
    limit = ["prlimit", "--nofile=%d:%d" % (descriptors, descriptors), "--"] \
        if descriptors else []
    proc = subprocess.Popen(
        limit + [sys.executable, "-c", as_fd_3, str(listener.fileno()), AXCTLD,
                 "--db", c.db] + c.controller_args,
        stdout=subprocess.DEVNULL, stderr=log, pass_fds=(listener.fileno(),), env=c.env)
    test.addCleanup(lambda: (proc.kill(), proc.wait()))
    listener.close()
    return proc, port, stderr


def missing_binaries(names=("AXCTLD", "AXAGENT", "AXCTL", "AXWORK")):
    paths = {"AXCTLD": AXCTLD, "AXAGENT": AXAGENT, "AXCTL": AXCTL, "AXWORK": AXWORK}
    return [n + "=" + paths[n] for n in names if not os.access(paths[n], os.X_OK)]


class ClusterTestCase(unittest.TestCase):
    """Base class: self.start_cluster() gives a started Cluster that is torn down, checked
    for leftover ranks, and dumped on failure after the test."""

    def start_cluster(self, n_agents=2, **kwargs):
        cluster = Cluster(n_agents, name=self._testMethodName, **kwargs)
        self.addCleanup(self._finish_cluster, cluster)
        log("%s: cluster in %s" % (self.id(), cluster.tmp))
        cluster.start()
        return cluster

    def _failed(self):
        outcome = getattr(self, "_outcome", None)
        if outcome is None:
            return False
        if hasattr(outcome, "errors"):  # Python <= 3.10
            return any(exc for _, exc in outcome.errors)
        # 3.11+: cleanups run in a fresh "part" whose success flag is reset, so look at
        # what the result recorded for this test (or one of its subtests).
        result = outcome.result
        recorded = getattr(result, "failures", []) + getattr(result, "errors", [])
        return any(getattr(t, "test_case", t) is self for t, _ in recorded)

    def _finish_cluster(self, cluster):
        failed = self._failed()
        try:
            if failed:
                cluster.dump()
        finally:
            # Even if reporting fails (a closed stderr pipe), nothing may keep running.
            leftovers = cluster.close()
        if failed or leftovers or os.environ.get("AXTEST_KEEP"):
            log("keeping %s" % cluster.tmp)
        else:
            cluster.remove()
        if leftovers:
            if not failed:
                cluster.dump()
            raise AssertionError("rank processes of this test survived its jobs: %r" % leftovers)

    # -- assertions shared by the test files ----------------------------------------

    def assert_succeeded_with_value(self, cluster, job, view=None, timeout=60):
        view = view or cluster.wait_job(job.id, timeout=timeout)
        self.assertEqual(view["state"], "succeeded", "job %d: %r" % (job.id, view.get("reason")))
        world = job.spec["ranks"]
        for rank in range(world):
            values = final_values(cluster.logs(job.id, rank))
            self.assertEqual(values, [job.expected], "rank %d's final value" % rank)
        return view

    def wait_checkpoint(self, cluster, job, step):
        """Waits until the controller knows a committed checkpoint >= step of job."""
        def known():
            lc = cluster.job(job.id).get("last_checkpoint")
            return lc if lc and lc.get("step", 0) >= step else None
        return wait_for(known, 30, "job %d's checkpoint %d reported" % (job.id, step))

    def assert_no_overlap(self, job):
        problems = check_no_overlap(job.entries())
        self.assertEqual(problems, [], "attempts of job %s overlapped" % job.id)

    def mount_small_disk(self, path, size="4m"):
        """Mounts a tmpfs of `size` on path (created if missing) for a full-disk case,
        unmounted after the test; skips the test where that needs root we lack."""
        os.makedirs(path, exist_ok=True)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", path],
                          capture_output=True).returncode != 0:
            if os.geteuid() == 0:
                self.fail("root could not mount a tmpfs for the full-disk case")
            self.skipTest("mounting a tmpfs needs root")
        self.addCleanup(subprocess.run, ["umount", "-l", path])

    def assert_exits_on_database_failure(self, cluster, timeout=10):
        """axctld exits non-zero, its log saying it stopped because its database failed."""
        proc = cluster.controller.proc
        wait_for(lambda: proc.poll() is not None, timeout, "axctld to exit")
        self.assertNotEqual(proc.returncode, 0)
        with open(cluster.controller.stderr_path, errors="replace") as f:
            self.assertIn("stopping: the state database failed", f.read())

    def assert_no_ranks_alive(self, cluster, job_id, timeout=10):
        wait_for(lambda: not rank_processes(cluster.marker, job_id), timeout,
                 "no rank process of job %d alive" % job_id)
        # Nor in the store, in any attempt: a rank row left alive would load its job at
        # every start, long after it ended.
        if os.path.exists(cluster.db):
            wait_for(lambda: stored_alive_ranks(cluster.db, job_id) == 0, timeout,
                     "no rank of job %d alive in the store" % job_id)


def stored_alive_ranks(db, job_id):
    """How many rank rows of the job, in any attempt, a SQLite store holds alive."""
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
    try:
        return con.execute("SELECT count(*) FROM rank WHERE job = ? AND alive = 1",
                           (job_id,)).fetchone()[0]
    finally:
        con.close()


def main(skip=None):
    """Runs the file's tests; exits 77 (skipped) with `skip` when it names a reason
    the whole file cannot run here, or when a binary is missing."""
    if skip:
        print("skipping: " + skip)
        sys.exit(77)
    missing = missing_binaries()
    if missing:
        print("skipping: binaries not built yet: %s" % ", ".join(missing))
        sys.exit(77)
    seed = os.environ.get("AXTEST_SEED")
    if seed is not None:
        random.seed(int(seed))
    unittest.main(verbosity=2)
