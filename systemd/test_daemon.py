# SPDX-License-Identifier: MIT
"""axctld as systemd runs it, without systemd:

- socket activation: `systemd-socket-activate -l 127.0.0.1:PORT axctld ...` binds the
  port and starts axctld on the first connection with the socket in LISTEN_FDS; the
  test's GET /healthz is answered through that socket;
- the notify protocol: NOTIFY_SOCKET names a datagram socket the test listens on, with
  WATCHDOG_USEC=200000 and WATCHDOG_PID set to the daemon's pid (the shell execs it,
  so `$$` is that pid); the test expects READY=1, STATUS= with the job and node counts,
  at least two WATCHDOG=1 pings within a deadline, and STOPPING=1 on SIGTERM;
- the configuration file: values from --config, flags over them, and errors that name
  the file and line.

The binary comes from $AXCTLD (set by systemd/meson.build). Deadlines, never bare
sleeps. Standard library only.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

SOURCE_DIR = os.path.dirname(os.path.abspath(__file__))
AXCTLD = os.environ.get("AXCTLD", os.path.join(SOURCE_DIR, "..", "build", "axctld"))
TIME_SCALE = float(os.environ.get("AXTEST_TIME_SCALE", "1"))


def deadline(seconds):
    return time.monotonic() + seconds * TIME_SCALE


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


class DaemonTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="axctl-systemd-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, argv, env_extra=None, **kw):
        env = dict(os.environ)
        for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
                  "JOURNAL_STREAM"):
            env.pop(k, None)
        env.update(env_extra or {})
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, **kw)
        self.procs.append(p)
        return p

    def stop(self, p):
        """SIGTERM, then the exit status and stderr."""
        p.send_signal(signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=10 * TIME_SCALE)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            self.fail("axctld did not exit on SIGTERM: %s" % err)
        return p.returncode, err

    def db(self):
        return os.path.join(self.tmp, "axctld.db")

    def test_socket_activation(self):
        if shutil.which("systemd-socket-activate") is None:
            self.skipTest("systemd-socket-activate is not installed")
        for _ in range(5):
            port = free_port()
            p = self.start(["systemd-socket-activate", "-l", "127.0.0.1:%d" % port,
                            AXCTLD, "--db", self.db(), "--listen", "127.0.0.1:1"])
            # systemd-socket-activate says "Listening on ..." once it has bound.
            line = p.stderr.readline()
            if "Listening on" in line:
                break
            p.kill()
            p.wait()
        else:
            self.fail("systemd-socket-activate could not bind a port: %s" % line)
        # The first connection starts axctld (exec'd in place, same pid), which serves
        # the passed socket instead of its --listen address (port 1 would fail).
        status, body = http_get("http://127.0.0.1:%d/healthz" % port, timeout=10 * TIME_SCALE)
        self.assertEqual(status, 200)
        self.assertTrue(body)
        out = p.stdout.readline()
        self.assertEqual(out.strip(), "listening on http://127.0.0.1:%d" % port)
        status, body = http_get("http://127.0.0.1:%d/v1/nodes" % port)
        self.assertEqual(status, 200)
        self.assertIn("nodes", json.loads(body))
        rc, err = self.stop(p)
        self.assertEqual(rc, 0, err)

    def notify_socket(self):
        path = os.path.join(self.tmp, "notify")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(path)
        self.addCleanup(s.close)
        return s, path

    def receive(self, sock, until, seconds):
        """Collects notify messages (lists of lines) until until(messages) holds."""
        messages = []
        end = deadline(seconds)
        while not until(messages):
            left = end - time.monotonic()
            if left <= 0:
                self.fail("timed out; notify messages so far: %r" % messages)
            sock.settimeout(left)
            try:
                data = sock.recv(4096)
            except socket.timeout:
                continue
            messages.append(data.decode().split("\n"))
        return messages

    def start_notified(self, watchdog_pid_is_self=True):
        sock, path = self.notify_socket()
        # WATCHDOG_PID must be the daemon's pid: the shell execs axctld, keeping $$.
        script = 'WATCHDOG_PID=%s exec "$@"' % ("$$" if watchdog_pid_is_self else "1")
        p = self.start(["sh", "-c", script, "sh", AXCTLD, "--db", self.db(),
                        "--listen", "127.0.0.1:0"],
                       env_extra={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"})
        return p, sock

    def test_notify_and_watchdog(self):
        p, sock = self.start_notified()
        start = time.monotonic()

        def count(msgs, field):
            return sum(1 for m in msgs for l in m if l == field)

        msgs = self.receive(sock, lambda m: count(m, "WATCHDOG=1") >= 2, 5)
        elapsed = time.monotonic() - start
        lines = [l for m in msgs for l in m]
        self.assertIn("READY=1", msgs[0], "READY=1 must come first")
        self.assertEqual(count(msgs, "READY=1"), 1)
        statuses = [l for l in lines if l.startswith("STATUS=")]
        self.assertTrue(statuses, lines)
        self.assertRegex(statuses[0], r"^STATUS=0 active jobs, 0 ready nodes; serving on "
                                      r"127\.0\.0\.1:\d+$")
        # WatchdogSec=0.2 s: pings every 0.1 s, so two within well under a second.
        self.assertLess(elapsed, 2 * TIME_SCALE)
        # The daemon is really serving while it pings.
        url = p.stdout.readline().split()[-1]
        self.assertEqual(http_get(url + "/healthz")[0], 200)
        self.receive(sock, lambda m: count(m, "WATCHDOG=1") >= 2, 5)
        rc, err = self.stop(p)
        self.assertEqual(rc, 0, err)
        rest = self.receive(sock, lambda m: any("STOPPING=1" in x for x in m), 5)
        self.assertTrue(rest)

    def test_watchdog_for_another_pid(self):
        """WATCHDOG_PID names another process: READY=1, but no pings from us."""
        p, sock = self.start_notified(watchdog_pid_is_self=False)
        msgs = self.receive(sock, lambda m: len(m) >= 1, 5)
        self.assertIn("READY=1", msgs[0])
        sock.settimeout(0.5 * TIME_SCALE)
        extra = []
        try:
            while True:
                extra.append(sock.recv(4096).decode())
        except socket.timeout:
            pass
        self.assertFalse([m for m in extra if "WATCHDOG=1" in m], extra)
        rc, err = self.stop(p)
        self.assertEqual(rc, 0, err)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_config_file(self):
        conf = self.write("axctld.conf",
                          "# test\n"
                          "listen = 127.0.0.1:1\n"
                          "db = %s\n"
                          "lease_ms = 4000\n"
                          "log_level = debug\n" % self.db())
        # The flag wins over the file's listen (port 1 could not be bound).
        p = self.start([AXCTLD, "--config", conf, "--listen", "127.0.0.1:0"])
        line = p.stdout.readline()
        self.assertTrue(line.startswith("listening on http://127.0.0.1:"), line)
        rc, err = self.stop(p)
        self.assertEqual(rc, 0, err)
        self.assertIn("configuration read from %s" % conf, err)
        # log_level = debug from the file took effect.
        self.assertIn(" debug axctld: ", err)
        self.assertTrue(os.path.exists(self.db()))

    def test_config_errors(self):
        cases = [
            ("bad-key.conf", "lease_ms = 4000\nleese_ms = 1\n",
             "bad-key.conf:2: unknown key 'leese_ms'"),
            ("bad-value.conf", "\nlease_ms = 50\n",
             "bad-value.conf:2: lease_ms = \"50\": needs milliseconds, at least 100"),
            ("bad-syntax.conf", "listen\n", "bad-syntax.conf:1: expected '=' after 'listen'"),
            ("bad-combination.conf", "lease_ms = 1000\nsync_period_ms = 1000\n",
             "the sync period (1000 ms) must be below the lease (1000 ms)"),
        ]
        for name, text, message in cases:
            conf = self.write(name, text)
            p = subprocess.run([AXCTLD, "--config", conf, "--db", self.db()],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=10)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(message, p.stderr)
        # A missing explicit file is an error; a flag's bad value names the flag.
        p = subprocess.run([AXCTLD, "--config", os.path.join(self.tmp, "none.conf")],
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=10)
        self.assertEqual(p.returncode, 2)
        self.assertIn("none.conf: No such file or directory", p.stderr)
        p = subprocess.run([AXCTLD, "--grace-ms", "-1"], stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=10)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--grace-ms needs milliseconds, at least 0, not '-1'", p.stderr)


if __name__ == "__main__":
    if not os.access(AXCTLD, os.X_OK):
        print("axctld is not built at %s; skipping" % AXCTLD)
        sys.exit(77)
    unittest.main(verbosity=2)
