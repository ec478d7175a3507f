# SPDX-License-Identifier: MIT
"""Controller failover (issue 15): controllers that share one database elect a leader
(axctld --leader-elect). A follower redirects every request but /healthz to the leader,
takes over within the leader's lease + 1 s when the leader dies (answering the requests
it has begun to read first), and a leader that lost its lease stops before it
acknowledges anything more. These run on one SQLite file
shared by two controllers on this machine; test_pg runs them on PostgreSQL."""

import datetime
import http.client
import json
import os
import re
import signal
import socket
import sqlite3
import threading
import time
import unittest
import urllib.parse

import axtest

LEADER_LEASE_MS = 1000
LEASE_MS = 4000


def raw_request(url, method, path, body=None, timeout=5):
    """One request, no redirect followed: (status, JSON or None, headers)."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        text = resp.read().decode(errors="replace")
        try:
            decoded = json.loads(text) if text else None
        except ValueError:
            decoded = text
        return resp.status, decoded, resp.headers
    finally:
        conn.close()


def role(url):
    try:
        status, body, _ = raw_request(url, "GET", "/healthz", timeout=2)
    except OSError:
        return None
    return body.get("role") if status == 200 and isinstance(body, dict) else None


class FailoverTest(axtest.ClusterTestCase):
    def pair(self, n_agents=0, **kwargs):
        """A leader cluster (with the agents) and a second controller on its database."""
        args = ["--leader-elect", "--leader-lease-ms", str(LEADER_LEASE_MS)]
        kwargs.setdefault("lease_ms", LEASE_MS)
        kwargs.setdefault("grace_ms", 500)
        first = axtest.Cluster(n_agents, controller_args=args, relay=False,
                               name=self._testMethodName + "-a", **kwargs)
        self.addCleanup(self._finish_cluster, first)
        second = axtest.Cluster(0, controller_args=args, relay=False,
                                name=self._testMethodName + "-b", **kwargs)
        second.db = first.db
        self.addCleanup(self._finish_cluster, second)
        first.start_controller()
        axtest.wait_for(lambda: role(first.url) == "leader", 10, "the first to lead")
        second.start_controller()
        axtest.wait_for(lambda: role(second.url) == "follower", 10, "the second to follow")
        return first, second

    def test_follower_redirects_to_the_leader(self):
        a, b = self.pair()
        status, body, _ = raw_request(b.url, "GET", "/healthz")
        self.assertEqual((status, body["role"], body["leader"]), (200, "follower", a.url), body)
        # Writes and reads alike go to the leader, path and query kept, body not read.
        spec = {"name": "x", "command": ["true"], "ranks": 1}
        status, body, headers = raw_request(b.url, "POST", "/v1/jobs", spec)
        self.assertEqual(status, 307, body)
        self.assertEqual(headers["Location"], a.url + "/v1/jobs")
        self.assertEqual(body["error"]["code"], "not_leader")
        status, _, headers = raw_request(b.url, "GET", "/v1/jobs?state=pending&limit=5")
        self.assertEqual(status, 307)
        self.assertEqual(headers["Location"], a.url + "/v1/jobs?state=pending&limit=5")
        # The leader serves; nothing was written by the follower.
        self.assertEqual(a.list_jobs(), [])

    def test_follower_takes_over_with_every_acknowledged_job(self):
        a, b = self.pair()
        acked = [a.submit({"name": "j%d" % i, "command": ["true"], "ranks": 1,
                           "resources": {"cpus": 1}})["id"] for i in range(20)]
        killed = time.monotonic()
        a.kill_controller()
        axtest.wait_for(lambda: role(b.url) == "leader",
                        (LEADER_LEASE_MS + 1000) / 1000.0 + 1, "the follower to lead")
        took = time.monotonic() - killed
        axtest.log("the follower led %.2f s after the leader's SIGKILL" % took)
        self.assertLess(took, (LEADER_LEASE_MS + 1000) / 1000.0)
        ids = {j["id"] for j in b.list_jobs()}
        self.assertEqual(ids, set(acked))
        # The old leader, started again, follows the new one.
        a.start_controller()
        axtest.wait_for(lambda: role(a.url) == "follower", 10, "the old leader to follow")
        status, body, _ = raw_request(a.url, "GET", "/healthz")
        self.assertEqual(body["leader"], b.url)

    def test_a_request_in_progress_at_the_takeover_is_answered(self):
        """A request the follower has begun to read when it takes over is answered, with a
        redirect to itself (it serves once it has loaded), not cut off: axctl gives up
        when no URL answers."""
        a, b = self.pair()
        u = urllib.parse.urlsplit(b.url)
        pending = socket.create_connection((u.hostname, u.port), timeout=5)
        self.addCleanup(pending.close)
        pending.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n")  # the headers go on
        time.sleep(0.2)
        a.kill_controller()

        def stopping():
            with open(b.controller.stderr_path, errors="replace") as f:
                return "following no more" in f.read()

        axtest.wait_for(stopping, (LEADER_LEASE_MS + 1000) / 1000.0 + 2,
                        "the follower to stop following", interval=0.01)
        pending.sendall(b"\r\n")
        try:
            answer = pending.recv(4096)
        except ConnectionResetError:
            answer = b""
        self.assertTrue(answer.startswith(b"HTTP/1.1 307"), answer)
        self.assertIn(("Location: %s/v1/jobs\r\n" % b.url).encode(), answer)
        axtest.wait_for(lambda: role(b.url) == "leader", 10, "the follower to lead")

    def test_a_request_never_finished_delays_the_takeover_half_a_second_at_most(self):
        """A client that begins a request to the follower and never finishes it holds the
        takeover for the drain's half second at most, then loses its connection."""
        a, b = self.pair()
        u = urllib.parse.urlsplit(b.url)
        stuck = socket.create_connection((u.hostname, u.port), timeout=10)
        self.addCleanup(stuck.close)
        stuck.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n")  # never ended
        time.sleep(0.2)
        killed = time.monotonic()
        a.kill_controller()
        axtest.wait_for(lambda: role(b.url) == "leader",
                        (LEADER_LEASE_MS + 1500) / 1000.0 + 1, "the follower to lead")
        self.assertLess(time.monotonic() - killed, (LEADER_LEASE_MS + 1500) / 1000.0)
        try:
            self.assertEqual(stuck.recv(4096), b"", "the unfinished request was answered")
        except ConnectionResetError:
            pass

    def test_a_clean_stop_hands_over_at_once(self):
        a, b = self.pair()
        stopped = time.monotonic()
        self.assertEqual(a.controller.terminate(), 0)
        axtest.wait_for(lambda: role(b.url) == "leader", 2, "the follower to lead")
        # Resigned: no wait for the lease to run out.
        self.assertLess(time.monotonic() - stopped, LEADER_LEASE_MS / 1000.0)

    def test_a_deposed_leader_acknowledges_nothing(self):
        """The leader stops (SIGSTOP: a long GC pause, a hung disk) past its lease; the
        follower takes over. When it runs again, it exits before answering the request
        that waited for it, and that job is nowhere."""
        a, b = self.pair()
        a.controller.signal(signal.SIGSTOP)
        axtest.wait_for(lambda: role(b.url) == "leader",
                        (LEADER_LEASE_MS + 1000) / 1000.0 + 1, "the follower to lead")
        answer = {}

        def submit():
            try:
                answer["status"] = raw_request(a.url, "POST", "/v1/jobs",
                                               {"name": "late", "command": ["true"],
                                                "ranks": 1}, timeout=10)[0]
            except OSError as e:
                answer["error"] = e

        t = threading.Thread(target=submit)
        t.start()
        time.sleep(0.3)  # the request waits in the stopped leader's socket
        a.controller.signal(signal.SIGCONT)
        t.join(15)
        self.assertNotIn(answer.get("status"), (200, 201), answer)
        a.controller.proc.wait(timeout=10)
        self.assertNotEqual(a.controller.proc.returncode, 0)
        self.assertEqual([j["name"] for j in b.list_jobs()], [])
        with open(a.controller.stderr_path) as f:
            self.assertIn("another controller", f.read())

    LOAD_LEASE_MS = 600

    def long_loading_leader(self, disk_size=None):
        """A leader loading 250,000 queued jobs (two seconds or more, several of its
        leases), once it leads; a second cluster on its database, not started. With
        disk_size, the database is on a tmpfs of that size, at a.disk."""
        args = ["--leader-elect", "--leader-lease-ms", str(self.LOAD_LEASE_MS)]
        a, b = (axtest.Cluster(0, controller_args=args, relay=False,
                               name=self._testMethodName + side) for side in ("-a", "-b"))
        for c in (a, b):
            self.addCleanup(self._finish_cluster, c)
        if disk_size:
            a.disk = os.path.join(a.tmp, "small")
            self.mount_small_disk(a.disk, disk_size)
            a.db = os.path.join(a.disk, "state.db")
        # First (cleanups run last first): killed, no controller cancels 250,000 jobs.
        self.addCleanup(lambda: [c.controller.kill() for c in (a, b) if c.controller])
        b.db = a.db
        a.start_controller()
        job = a.submit({"command": ["true"], "ranks": 1, "resources": {"cpus": 64}})
        a.controller.terminate()
        axtest.grow_queue(a.db, job, 250000)
        a.start_controller(wait_serving=False)

        def log(c):  # of its last start
            with open(c.controller.stderr_path, errors="replace") as f:
                return f.read().rsplit("==== start", 1)[-1]
        axtest.wait_for(lambda: "serving up to" in log(a), 10, "the leader to load",
                        interval=0.01)
        return a, b, log

    def test_a_leader_keeps_its_lease_through_a_long_load(self):
        """The lease is renewed on a connection of its own while the state loads and
        the first turn runs: a follower does not take the lead from a leader that is
        loading."""
        a, b, log = self.long_loading_leader()
        b.start_controller(wait_serving=False)
        self.assertNotIn("serving on", log(a), "the load was over before the follower came")
        axtest.wait_for(lambda: role(a.url) == "leader", 60, "the leader to serve")
        self.assertEqual(role(b.url), "follower")
        took = re.findall(r"^(\S+) info axctld: (?:serving up to|serving on)", log(a), re.M)
        stamp = [datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ") for t in took]
        loaded_ms = (stamp[1] - stamp[0]).total_seconds() * 1000
        axtest.log("the leader loaded in %.0f ms" % loaded_ms)
        self.assertGreater(loaded_ms, 1.5 * self.LOAD_LEASE_MS,
                           "the load was too short to outlast a lease")
        time.sleep(1)
        self.assertEqual((role(a.url), role(b.url)), ("leader", "follower"))
        self.assertNotIn("lost", log(a))

    def test_a_leader_that_lost_its_lease_while_loading_stops(self):
        """Another controller takes the lead while the first loads (its row written
        here, as a takeover would): the first stops without serving what it loaded."""
        a, _, log = self.long_loading_leader()
        db = sqlite3.connect(a.db, timeout=30)
        db.execute("UPDATE leader SET holder = 'intruder', token = token + 1,"
                   " expires_ms = expires_ms + 600000")
        db.commit()
        db.close()
        self.assertNotIn("serving on", log(a), "the load was over before the takeover")
        a.controller.proc.wait(timeout=60)
        self.assertEqual(a.controller.proc.returncode, 1)
        self.assertIn("the lead was lost while the state loaded", log(a))
        self.assertNotIn("serving on", log(a))

    def test_a_leader_whose_disk_fills_while_loading_stops(self):
        """The disk fills while a leader loads: its lease can no longer be renewed, so it
        stops without serving once the lease has run out (no agent is answered for a
        lead it may have lost), and nothing stored is lost: with room again, the next
        start loads every job."""
        a, _, log = self.long_loading_leader(disk_size="512m")
        # Stopped while the disk fills and for a lease: no renewal races the filler, and
        # the lease has run out however soon the load would end.
        a.controller.signal(signal.SIGSTOP)
        self.assertNotIn("serving on", log(a), "the load was over before the disk filled")
        axtest.fill_disk(a.disk)
        time.sleep(self.LOAD_LEASE_MS / 1000 + 0.2)
        a.controller.signal(signal.SIGCONT)
        a.controller.proc.wait(timeout=60)
        self.assertEqual(a.controller.proc.returncode, 1)
        self.assertRegex(log(a), r"cannot renew the leader's lease: .*full")
        self.assertIn("the lead was lost while the state loaded", log(a))
        self.assertNotIn("serving on", log(a))
        os.unlink(os.path.join(a.disk, "filler"))
        a.start_controller()
        axtest.wait_for(lambda: role(a.url) == "leader", 60, "the restarted leader to serve")
        _, health, _ = raw_request(a.url, "GET", "/healthz")
        self.assertEqual(health["active_jobs"], 250000, health)

    def test_a_leader_killed_while_loading_hands_over(self):
        """A leader SIGKILLed while it loads: its renewer dies with it, so the follower
        takes the lead once the lease has run out, and loads and serves every job."""
        a, b, log = self.long_loading_leader()
        b.start_controller(wait_serving=False)
        self.assertNotIn("serving on", log(a), "the load was over before the kill")
        a.controller.kill()
        axtest.wait_for(lambda: role(b.url) == "leader", 60, "the follower to lead")
        db = sqlite3.connect(a.db, timeout=30)
        queued = db.execute("SELECT count(*) FROM job WHERE state = 'pending'").fetchone()[0]
        db.close()
        self.assertGreaterEqual(queued, 250000)
        _, health, _ = raw_request(b.url, "GET", "/healthz")
        self.assertEqual(health["active_jobs"], queued, health)
        self.assertIn("leading (fencing token", log(b))

    def test_a_follower_checks_its_files_at_start(self):
        """Not when it must lead: a bad quota file would fail the failover."""
        a, _ = self.pair()
        bad_quota = os.path.join(a.tmp, "quota.conf")
        with open(bad_quota, "w") as f:
            f.write("not a quota file\n")
        p = axtest.subprocess.run([axtest.AXCTLD, "--db", a.db, "--listen", "127.0.0.1:0",
                                   "--leader-elect", "--quota-file", bad_quota],
                                  capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(bad_quota, p.stderr)
        self.assertEqual(role(a.url), "leader")

    def test_bad_failover_settings_are_refused(self):
        c = axtest.Cluster(0, name="bad-settings")
        self.addCleanup(c.remove)
        for args, why in ((["--leader-elect", "--leader-lease-ms", "5000", "--lease-ms", "5000"],
                           "below the agents' lease"),
                          (["--advertise-url", "ftp://x"], "http:// or https://"),
                          (["--leader-lease-ms", "10"], "100 to 600000")):
            p = axtest.subprocess.run([axtest.AXCTLD, "--db", c.db, "--listen", "127.0.0.1:0"]
                                      + args, capture_output=True, text=True, timeout=10)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(why, p.stderr)


if __name__ == "__main__":
    axtest.main()
