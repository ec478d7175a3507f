# SPDX-License-Identifier: MIT
"""Rank logs as a bounded resource (issue 12, point 4), with the real binaries.

- A rank's log is capped and rotated (`axagent --log-max-mb 1 --log-keep 2`): a rank that
  writes 5 MiB leaves at most three files of 1 MiB, never blocks or dies for it, and
  `axctl logs -f` started before the first rotation sees every line exactly once, in
  order, across the rotations; `axctl logs` afterwards shows what is kept.
- A log that cannot be rotated drops what is beyond its cap, counts it and says so in
  the log: the count and the bytes kept add up to what the rank wrote.
- The agent can always record an exit: a rank that fills the agent's state disk (a
  4 MiB tmpfs, needs root) with its output still has its real exit code reported, and
  a rank the full disk cannot hold is reported as failed instead of its job waiting for
  a rank that never starts.
- Log streams are shared out per user and node: with authentication on, alice's
  streams from one node up to the default limit (8) get 429 `too_many_streams` beyond
  it, and stop neither bob's from that node nor hers from another node.
- Log links are keyed with a secret of the controller's (0600, beside the database),
  not with what the database stores: a link signed with the agent's token hash, as
  anyone with a copy of the database could make, is refused; real ones work, also after
  a controller restart."""

import hashlib
import hmac
import http.client
import json
import os
import re
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request

import axtest

MIB = 1024 * 1024

# Writes `lines` numbered lines of 100 bytes in bursts, waiting first for `go` to exist.
WRITER = r"""
import os, sys, time
go, lines = sys.argv[1], int(sys.argv[2])
while not os.path.exists(go):
    time.sleep(0.02)
out = sys.stdout
for i in range(lines):
    out.write("line %08d %s\n" % (i, "x" * 85))
    if i % 2000 == 1999:
        out.flush()
        time.sleep(0.01)
out.write("writer done\n")
"""

# Fills the disk under its log (errors ignored, as a careless program would), then fails.
FILLER = r"""
import os, sys
chunk = b"y" * 65535 + b"\n"
for _ in range(int(sys.argv[1])):
    try:
        os.write(1, chunk)
    except OSError:
        pass
sys.exit(3)
"""

LINE_RE = re.compile(r"^line (\d{8}) x{85}$")


def line_numbers(text):
    return [int(m.group(1)) for m in map(LINE_RE.match, text.splitlines()) if m]


class LogCapTest(axtest.ClusterTestCase):
    def writer_job(self, c, lines):
        go = os.path.join(c.tmp, "go-%d" % lines)
        spec = {"name": "writer", "ranks": 1, "env": {"AXTEST_MARKER": c.marker},
                "command": [sys.executable, "-c", WRITER, go, str(lines)]}
        job_id = c.submit(spec)["id"]
        c.wait_running(job_id)
        log = os.path.join(c.tmp, "n1", "logs", str(job_id), "1", "rank-0.log")
        return job_id, go, log

    def test_log_is_capped_and_rotated_and_followed(self):
        c = self.start_cluster(1, agent_args=[["--log-max-mb", "1", "--log-keep", "2"]])
        lines = 52000  # 5.2 MB
        job_id, go, log = self.writer_job(c, lines)
        env = dict(c.env, AXCTL_URL=c.url)
        follower = subprocess.Popen([axtest.AXCTL, "logs", str(job_id), "--rank", "0", "-f"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.addCleanup(follower.kill)
        # The environment header comes first: the stream is open before any rotation.
        self.assertIn("axctl environment", follower.stdout.readline().decode())
        open(go, "w").close()

        view = c.wait_job(job_id, timeout=60)
        self.assertEqual(view["state"], "succeeded", view.get("reason"))
        out, err = follower.communicate(timeout=30)
        self.assertEqual(follower.returncode, 0, err)
        self.assertEqual(line_numbers(out.decode()), list(range(lines)),
                         "the follower missed or repeated lines across rotations")
        self.assertIn("writer done", out.decode())

        sizes = {}
        for name in os.listdir(os.path.dirname(log)):
            sizes[name] = os.path.getsize(os.path.join(os.path.dirname(log), name))
        self.assertEqual(sorted(sizes), ["rank-0.log", "rank-0.log.1", "rank-0.log.2"], sizes)
        self.assertTrue(all(size <= MIB for size in sizes.values()), sizes)
        # Rotated files end at a line end, so every line is whole.
        with open(log + ".2") as f:
            kept = f.read()
        with open(log + ".1") as f:
            kept += f.read()
        with open(log) as f:
            kept += f.read()
        numbers = line_numbers(kept)
        self.assertEqual(numbers, list(range(numbers[0], lines)))
        self.assertGreater(len(kept), 2 * MIB)
        # Without -f: every kept file, oldest first.
        self.assertEqual(c.logs(job_id, 0), kept)

    def test_log_that_cannot_rotate_drops_and_counts(self):
        c = self.start_cluster(1, agent_args=[["--log-max-mb", "1", "--log-keep", "1"]])
        lines = 30000  # 3 MB
        job_id, go, log = self.writer_job(c, lines)
        # A directory where the oldest rotated file goes: the rotation cannot remove it.
        os.makedirs(os.path.join(log + ".1", "blocker"))
        open(go, "w").close()

        view = c.wait_job(job_id, timeout=60)
        self.assertEqual(view["state"], "succeeded", view.get("reason"))
        with open(log) as f:
            text = f.read()
        self.assertIn("axagent: cannot rotate this log", text)
        m = re.search(r"axagent: (\d+) bytes of the rank's output were dropped", text)
        self.assertIsNotNone(m, text[-500:])
        numbers = line_numbers(text)
        self.assertEqual(numbers, list(range(len(numbers))), "kept lines are the first ones")
        written = 100 * lines + len("writer done\n")
        kept = 100 * len(numbers) + (len("writer done\n") if "writer done" in text else 0)
        self.assertEqual(int(m.group(1)) + kept, written)
        # The cap holds but for the two lines that say what happened.
        self.assertLess(os.path.getsize(log), MIB + 512)


class FullStateDiskTest(axtest.ClusterTestCase):
    def test_exit_recorded_and_next_start_reported_on_a_full_disk(self):
        c = axtest.Cluster(1, name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        state = os.path.join(c.tmp, "n1")
        self.mount_small_disk(state)
        c.start()
        spec = {"name": "filler", "ranks": 1, "env": {"AXTEST_MARKER": c.marker},
                "command": [sys.executable, "-c", FILLER, "96"],  # 6 MiB
                "restart": {"max_restarts": 0}}
        view = c.wait_job(c.submit(spec)["id"], timeout=30)
        self.assertEqual(view["state"], "failed", view)
        # The rank's own exit code, not a guess: its record was written on a full disk.
        self.assertIn("exited with code 3", view["attempts"][0]["detail"])

        # What the rank's record gave back is taken too: no rank fits any more.
        axtest.fill_disk(state)
        # That is the node's fault, not the job's (issue 11): the node says why in its
        # health, and the attempt is blamed on it instead of staying "starting".
        spec.update(name="nospace", command=["/bin/true"])
        view = c.wait_job(c.submit(spec)["id"], timeout=30)
        self.assertEqual(view["state"], "failed", view)
        first = view["attempts"][0]
        self.assertEqual((first["failure_class"], first["blamed_node"]), ("node", "n1"), first)
        self.assertIn("cannot write rank state", first["detail"])
        with open(c.agents["n1"].stderr_path) as f:
            self.assertIn("cannot write rank state", f.read())
        node = c.nodes()[0]
        self.assertEqual(node["state"], "unhealthy", node)
        self.assertIn("No space left on device", node["reason"])

TICKER = ["sh", "-c", "while :; do echo tick; sleep 0.1; done"]


class AuthLogTest(axtest.ClusterTestCase):
    def auth_cluster(self, n_agents=1):
        """Agents n1... with their tokens; users alice and bob of project p1."""
        c = axtest.Cluster(n_agents, controller_args=["--auth"], name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        tokens = {"admin": axtest.create_token(c.db, "--name", "root", "--role", "admin")}
        for user in ("alice", "bob"):
            tokens[user] = axtest.create_token(c.db, "--name", user, "--role", "user", "--project", "p1")
        c.agent_args = []
        for i in range(1, n_agents + 1):
            node = "n%d" % i
            path = os.path.join(c.tmp, node + ".token")
            with open(path, "w") as f:
                f.write(axtest.create_token(c.db, "--name", node, "--role", "agent",
                                            "--node", node) + "\n")
            os.chmod(path, 0o600)
            c.agent_args.append(["--token-file", path])
        self.agent_token_path = os.path.join(c.tmp, "n1.token")
        c.token = tokens["admin"]
        c.start()
        return c, tokens

    def ticker_job(self, c, tokens, ranks=1):
        spec = {"name": "ticker", "ranks": ranks, "ranks_per_node": 1, "project": "p1",
                "user": "alice", "env": {"AXTEST_MARKER": c.marker}, "command": TICKER}
        job_id = c.submit(spec)["id"]
        c.wait_running(job_id)
        return job_id

    def open_stream(self, c, token, job_id, rank=0):
        conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
        self.addCleanup(conn.close)
        conn.request("GET", "/v1/jobs/%d/logs?rank=%d&follow=1" % (job_id, rank),
                     headers={"Authorization": "Bearer " + token})
        return conn, conn.getresponse()

    def assert_streaming(self, resp):
        self.assertEqual(resp.status, 200)
        self.assertIn(b"axctl environment", resp.readline())

    def test_log_streams_are_limited_per_user_and_node(self):
        c, tokens = self.auth_cluster(2)
        job_id = self.ticker_job(c, tokens, ranks=2)
        nodes = {r["rank"]: r["node"] for r in c.running_ranks(job_id)}
        self.assertNotEqual(nodes[0], nodes[1])
        alice = []
        for _ in range(8):
            conn, resp = self.open_stream(c, tokens["alice"], job_id)
            self.assert_streaming(resp)
            alice.append(conn)
        conn, resp = self.open_stream(c, tokens["alice"], job_id)
        self.assertEqual(resp.status, 429)
        error = json.loads(resp.read())["error"]
        self.assertEqual(error["code"], "too_many_streams", error)
        self.assertIn("alice on node %s" % nodes[0], error["message"])
        # Another user of the same node is not held back by alice's streams, nor is
        # alice on another node.
        for _ in range(2):
            self.assert_streaming(self.open_stream(c, tokens["bob"], job_id)[1])
        for _ in range(8):
            self.assert_streaming(self.open_stream(c, tokens["alice"], job_id, rank=1)[1])
        # A stream alice closes is hers to open again.
        alice[0].close()
        axtest.wait_for(lambda: self.open_stream(c, tokens["alice"], job_id)[1].status == 200,
                        10, "alice's closed stream to be counted off")

    def test_log_links_are_not_derivable_from_the_database(self):
        c, tokens = self.auth_cluster()
        job_id = self.ticker_job(c, tokens)
        secret = c.db + ".logkey"
        self.assertEqual(stat.S_IMODE(os.stat(secret).st_mode), 0o600)
        self.assertIn("tick", c.logs(job_id, 0))

        # What the database gives away: the agent token's hash.
        with open(self.agent_token_path) as f:
            token_hash = hashlib.sha256(f.read().strip().encode()).hexdigest()
        address = c.nodes()[0]["address"]
        path = "/v1/logs/%d/1/0" % job_id
        expires = int(time.time()) + 60
        sig = hmac.new(token_hash.encode(), ("%s %d" % (path, expires)).encode(),
                       hashlib.sha256).hexdigest()
        try:
            with urllib.request.urlopen("http://%s%s?expires=%d&sig=%s"
                                        % (address, path, expires, sig), timeout=10) as r:
                status = r.status
        except urllib.error.HTTPError as e:
            status = e.code
        self.assertEqual(status, 403, "a log link forged from the database was accepted")

        # The secret outlives the controller: links it signs after a restart still work
        # on an agent that did not register again.
        with open(secret) as f:
            before = f.read()
        c.restart_controller()
        with open(secret) as f:
            self.assertEqual(f.read(), before)
        self.assertIn("tick", c.logs(job_id, 0))


if __name__ == "__main__":
    axtest.main()
