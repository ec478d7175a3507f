# SPDX-License-Identifier: MIT
"""A private PostgreSQL server for tests and benches (Debian's postgresql package).

PgServer() makes a cluster in a temporary directory with initdb and starts postgres on
a unix socket in that directory and a free loopback port, as an unprivileged user
(`nobody` when we are root: initdb and postgres refuse root). fsync stays on unless
asked otherwise, so timings are those of a durable server. stop() kills it and removes
the directory; the server also dies with the process that started it.

As a program it wraps a command (what meson's PostgreSQL tests do):

    pgserver.py run [--no-fsync] -- COMMAND ARGS...

runs COMMAND with AXTEST_PG_URL set to the URL of a fresh database and the server
stopped afterwards, whatever happens; exit 77 (skipped) when PostgreSQL is missing.
"""

import ctypes
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
SUPERUSER = "axtest"


class Unavailable(Exception):
    """No PostgreSQL server binaries on this machine."""


def bindir():
    """The directory of initdb and postgres, or None."""
    wanted = os.environ.get("PG_BINDIR")
    candidates = [wanted] if wanted else sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                                                key=lambda p: int(p.split("/")[-2])
                                                if p.split("/")[-2].isdigit() else 0,
                                                reverse=True)
    for d in candidates:
        if d and os.access(os.path.join(d, "postgres"), os.X_OK):
            return d
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class PgServer:
    def __init__(self, fsync=True, start=True):
        self.bindir = bindir()
        if not self.bindir:
            raise Unavailable("PostgreSQL is not installed (apt-get install postgresql)")
        self.fsync = fsync
        self.dir = None
        self.proc = None
        self.port = None
        self._databases = 0
        if start:
            self.start()

    def _account(self):
        """(uid, gid) to run the server as: ours, or nobody's when we are root."""
        if os.geteuid() != 0:
            return None
        pw = pwd.getpwnam("nobody")
        return pw.pw_uid, pw.pw_gid

    def _run(self, argv, **kwargs):
        account = self._account()
        if account:
            kwargs.update(user=account[0], group=account[1], extra_groups=[])
        return subprocess.run(argv, capture_output=True, text=True, **kwargs)

    def start(self, timeout=30):
        self.dir = tempfile.mkdtemp(prefix="axtest-pg-")
        account = self._account()
        if account:
            os.chown(self.dir, *account)
        os.chmod(self.dir, 0o700)
        data = os.path.join(self.dir, "data")
        p = self._run([os.path.join(self.bindir, "initdb"), "-D", data, "-U", SUPERUSER,
                       "-A", "trust", "-E", "UTF8", "--no-sync", "--locale=C"])
        if p.returncode != 0:
            self.stop()
            raise RuntimeError("initdb failed:\n%s%s" % (p.stdout, p.stderr))
        for attempt in range(5):
            self.port = _free_port()
            if self._start_postgres(data, timeout):
                return self
        log = self.log_tail()
        self.stop()
        raise RuntimeError("postgres did not start:\n%s" % log)

    def _start_postgres(self, data, timeout):
        account = self._account()
        kwargs = {}
        if account:
            kwargs.update(user=account[0], group=account[1], extra_groups=[])
        self.log_path = os.path.join(self.dir, "postgres.log")
        log = open(self.log_path, "ab")
        argv = [os.path.join(self.bindir, "postgres"), "-D", data, "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + self.dir,
                "-c", "fsync=" + ("on" if self.fsync else "off"),
                "-c", "max_connections=200", "-c", "shared_buffers=64MB"]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True,
                                     preexec_fn=_die_with_parent, **kwargs)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # the port was taken meanwhile: try another
            ready = subprocess.run([os.path.join(self.bindir, "pg_isready"), "-q", "-h", self.dir,
                                    "-p", str(self.port)])
            if ready.returncode == 0:
                return True
            time.sleep(0.05)
        self._kill()
        return False

    def log_tail(self, lines=40):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except (OSError, AttributeError):
            return ""

    def url(self, database="postgres"):
        """A URL of database over loopback TCP (what a remote controller would use)."""
        return "postgresql://%s@127.0.0.1:%d/%s" % (SUPERUSER, self.port, database)

    def psql(self, sql, database="postgres"):
        """Runs sql through psql on the unix socket; its stdout."""
        p = subprocess.run([os.path.join(self.bindir, "psql"), "-X", "-q", "-At",
                            "-v", "ON_ERROR_STOP=1", "-h", self.dir, "-p", str(self.port),
                            "-U", SUPERUSER, "-d", database, "-c", sql],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("psql: %s" % p.stderr.strip())
        return p.stdout

    def create_database(self, name=None):
        """A fresh, empty database; its URL."""
        if name is None:
            self._databases += 1
            name = "axtest%d" % self._databases
        self.psql('CREATE DATABASE "%s"' % name)
        return self.url(name)

    def _kill(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def stop(self):
        self._kill()
        self.proc = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def main(argv):
    if len(argv) < 2 or argv[0] != "run" or "--" not in argv:
        sys.stderr.write("usage: pgserver.py run [--no-fsync] -- COMMAND ARGS...\n")
        return 2
    # meson stops a test that ran too long with SIGTERM: unwind, so the server goes too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sep = argv.index("--")
    options, command = argv[1:sep], argv[sep + 1:]
    try:
        server = PgServer(fsync="--no-fsync" not in options)
    except Unavailable as e:
        print("skipping: %s" % e)
        return SKIP
    try:
        env = dict(os.environ, AXTEST_PG_URL=server.create_database())
        return subprocess.run(command, env=env).returncode
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
