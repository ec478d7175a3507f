#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 13's connection policy, against a real axctld whose descriptor limit is small
enough to fill: agents behind one address are not capped per address; agents can never
take the connections kept for API users, and one node's agent cannot take the fleet's
(eight connections a node); an agent turned away gets 503 `busy` and its
connection closed, and gets in once other agents let go of theirs. And a controller that
is loading a big database accepts the connections that come meanwhile, rather than
leaving them to a listen backlog whose overflow waits for TCP's SYN retransmits."""

import http.client
import json
import os
import re
import signal
import socket
import struct
import time
import unittest

import axtest

# API_AGENT_CONNECTIONS_PER_NODE (api/api-internal.h): its held poll, the request with news
# that replaced it, and polls it dropped for news, answered with the next sweep.
PER_NODE = 8


def metric(c, name):
    _, text, _ = c.api("GET", "/metrics")
    m = re.search(r"^%s (\d+)$" % name, text, re.M)
    return int(m.group(1)) if m else None


class ConnectionReserveTest(axtest.ClusterTestCase):
    def register(self, conn, node):
        body = json.dumps({"node": node, "address": "127.0.0.1:9", "inventory": {"cpus": 0}})
        conn.request("POST", "/v1/agent/register", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}"), resp

    def test_agents_never_take_the_api_users_reserve(self):
        c = axtest.Cluster(0, name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        argv = c._controller_argv
        # 1,000 descriptors: axctld serves 500 connections and keeps a sixteenth of them
        # (31) for API users.
        c._controller_argv = lambda listen: ["prlimit", "--nofile=1000:1000", "--"] + argv(listen)
        c.start_controller()
        limit = metric(c, "axctl_agent_connections_limit")
        self.assertEqual(limit, 500 - 31)
        self.assertGreater(limit, 256, "more agents than the old per-address cap")

        agents = []
        self.addCleanup(lambda: [a.close() for a in agents])
        for i in range(limit):
            conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
            agents.append(conn)
            status, body, _ = self.register(conn, "a%03d" % i)
            self.assertEqual(status, 200, (i, body))
        self.assertEqual(metric(c, "axctl_agent_connections"), limit)

        # One agent more: turned away, its connection closed.
        extra = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
        self.addCleanup(extra.close)
        status, body, resp = self.register(extra, "late")
        self.assertEqual(status, 503, body)
        self.assertEqual(body["error"]["code"], "busy", body)
        self.assertEqual(resp.getheader("Connection"), "close")
        self.assertEqual(resp.getheader("Retry-After"), "1")
        extra.close()

        # API users are served beside them, several at once, each on its own connection.
        users = [http.client.HTTPConnection("127.0.0.1", c.port, timeout=10) for _ in range(10)]
        self.addCleanup(lambda: [u.close() for u in users])
        for u in users:
            u.request("GET", "/v1/nodes")
            resp = u.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertEqual(len(json.loads(resp.read())["nodes"]), limit)

        # An agent that holds a connection goes on using it.
        status, body, _ = self.register(agents[0], "a000")
        self.assertEqual(status, 200, body)

        # One lets go: the late agent gets in.
        agents.pop().close()
        deadline = time.monotonic() + 10
        while metric(c, "axctl_agent_connections") != limit - 1:
            self.assertLess(time.monotonic(), deadline, "the closed connection was not counted")
            time.sleep(0.05)
        late = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
        self.addCleanup(late.close)
        status, body, _ = self.register(late, "late")
        self.assertEqual(status, 200, body)
        self.assertGreaterEqual(metric(c, "axctl_agent_requests_turned_away_total"), 1)

    def test_one_node_cannot_take_the_fleets_connections(self):
        # A broken or hostile agent (with its node's token it speaks only for its node)
        # opens connection after connection: it gets eight (API_AGENT_CONNECTIONS_PER_NODE),
        # the rest of the fleet its own.
        c = self.start_cluster(0)
        hog = []
        self.addCleanup(lambda: [h.close() for h in hog])
        for i in range(PER_NODE):
            conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
            hog.append(conn)
            status, body, _ = self.register(conn, "hog")
            self.assertEqual(status, 200, (i, body))
        self.assertEqual(metric(c, "axctl_agent_connections"), PER_NODE)
        more = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
        self.addCleanup(more.close)
        status, body, resp = self.register(more, "hog")
        self.assertEqual(status, 503, body)
        self.assertEqual(body["error"]["code"], "busy", body)
        self.assertIn("one node", body["error"]["message"])
        self.assertEqual(resp.getheader("Connection"), "close")
        more.close()
        self.assertEqual(metric(c, "axctl_agent_connections"), PER_NODE)

        # Another node is served; a held connection of the hog goes on being served.
        other = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
        self.addCleanup(other.close)
        self.assertEqual(self.register(other, "other")[0], 200)
        self.assertEqual(self.register(hog[0], "hog")[0], 200)
        self.assertEqual(metric(c, "axctl_agent_connections"), PER_NODE + 1)

        # A connection that speaks for another node counts for that one: the hog's count
        # drops and a new connection of it gets in.
        self.assertEqual(self.register(hog[1], "moved")[0], 200)
        again = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
        self.addCleanup(again.close)
        self.assertEqual(self.register(again, "hog")[0], 200)
        self.assertEqual(metric(c, "axctl_agent_connections"), PER_NODE + 2)

        # Closed connections are let go of.
        for h in hog + [other, again]:
            h.close()
        deadline = time.monotonic() + 10
        while metric(c, "axctl_agent_connections") != 0:
            self.assertLess(time.monotonic(), deadline, "closed connections were still counted")
            time.sleep(0.05)

    def test_hundreds_of_writes_waiting_for_one_commit_are_all_answered(self):
        # A write is answered once its turn commits (api.c keeps the requests that wait
        # for it): 400 submits sent at once, many in one turn, are each answered once
        # and stored, and clients that leave before their answer disturb no other (they
        # wait unsuspended, so a leaver's reset may be seen before the commit).
        c = self.start_cluster(0)
        spec = json.dumps({"command": ["true"], "ranks": 1})
        request = ("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n%s" % (len(spec), spec)).encode()
        leavers = [socket.create_connection(("127.0.0.1", c.port), timeout=10)
                   for _ in range(50)]
        clients = [socket.create_connection(("127.0.0.1", c.port), timeout=30)
                   for _ in range(400)]
        self.addCleanup(lambda: [s.close() for s in clients + leavers])
        for s in leavers + clients:
            s.sendall(request)
        for s in leavers:  # reset, not closed: the controller sees them go at once
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        ids = set()
        for s in clients:
            resp = http.client.HTTPResponse(s)
            resp.begin()
            body = resp.read()
            self.assertEqual(resp.status, 201, body)
            ids.add(json.loads(body)["id"])
        self.assertEqual(len(ids), 400)
        # Each answered job is stored; the leavers' submits landed or not, whole.
        listed = {j["id"] for j in c.api_ok("GET", "/v1/jobs?limit=1000")["jobs"]}
        self.assertTrue(ids <= listed)
        self.assertLessEqual(len(listed), 450)
        self.assertEqual(c.api_ok("GET", "/healthz")["status"], "ok")


class LoadingTest(axtest.ClusterTestCase):
    def start_loading(self, descriptors=None):
        """A cluster whose controller was restarted on a database that takes most of a
        second to load (axtest.restart_loading). Returns the cluster, the controller's
        process, its port and its stderr's path."""
        c = self.start_cluster(0)
        return (c,) + axtest.restart_loading(self, c, descriptors)

    def test_connections_that_come_while_loading_are_accepted(self):
        c, proc, port, stderr = self.start_loading()
        # 60 clients connect while it loads (most of a second; it starts accepting
        # once its database is open); each is accepted at once, not left to retransmit
        # its SYN for a second or more.
        time.sleep(0.1)
        clients, slow = [], []
        for _ in range(60):
            time.sleep(0.005)  # as a fleet arrives, spread: the accepting thread keeps up
            t = time.monotonic()
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            clients.append(s)
            if time.monotonic() - t > 0.5:
                slow.append(round(time.monotonic() - t, 2))
        self.addCleanup(lambda: [s.close() for s in clients])
        self.assertEqual(slow, [], "connections waited for SYN retransmits")
        # Each is then served as any other, once the load is over: 120,000 jobs take
        # about 10 s in the sanitizer build on two busy cores.
        for s in clients:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        for s in clients:
            s.settimeout(60)
            self.assertTrue(s.recv(64).startswith(b"HTTP/1.1 200"))
        with open(stderr) as f:
            found = re.search(r"(\d+) connections came while the state loaded", f.read())
        self.assertIsNotNone(found, "the load was over before the clients connected")
        self.assertGreater(int(found.group(1)), 20)

    def test_connections_accepted_while_loading_stay_within_the_limit(self):
        """The load needs descriptors too: with 64, 32 connections are accepted while it
        runs (the HTTP server's limit, spread over its shards); the rest wait in the
        listen backlog and are served once the first are done, none closed unanswered."""
        c, proc, port, stderr = self.start_loading(descriptors=64)

        def log():
            with open(stderr) as f:
                return f.read()
        axtest.wait_for(lambda: "serving up to 32 connections" in log(), 30,
                        "the HTTP server to start", interval=0.005)
        def sockets():  # the listening ones (one per HTTP shard) and those accepted
            n = 0
            for fd in os.listdir("/proc/%d/fd" % proc.pid):
                try:
                    n += os.readlink("/proc/%d/fd/%s" % (proc.pid, fd)).startswith("socket:")
                except FileNotFoundError:
                    pass  # closed meanwhile
            return n
        listening = sockets()
        clients = []
        for _ in range(40):
            time.sleep(0.005)  # spread, as in the test above: no SYN dropped
            clients.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        self.addCleanup(lambda: [s.close() for s in clients])
        axtest.wait_for(lambda: sockets() >= listening + 32, 10, "32 connections accepted")
        self.assertNotIn("serving on", log(), "the load was over before the clients connected")
        for s in clients:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        for i, s in enumerate(clients):
            s.settimeout(60)
            self.assertTrue(s.recv(64).startswith(b"HTTP/1.1 200"), "client %d" % i)
        found = re.search(r"(\d+) connections came while the state loaded", log())
        self.assertIsNotNone(found, log())
        self.assertEqual(int(found.group(1)), 32)

    def test_requests_that_came_while_loading_outlive_a_stalled_load(self):
        """Requests that come while the state loads wait for it however long it takes (a
        stalled disk, here SIGSTOP past the 30 s idle timeout) and are answered once
        serving starts. A connection that sends nothing is closed by the idle timeout
        as any other, also while the state loads."""
        c, proc, port, stderr = self.start_loading()

        def log():
            with open(stderr) as f:
                return f.read()
        axtest.wait_for(lambda: "serving up to" in log(), 30, "the HTTP server to start",
                        interval=0.005)
        clients = [socket.create_connection(("127.0.0.1", port), timeout=10)
                   for _ in range(11)]
        self.addCleanup(lambda: [s.close() for s in clients])
        silent = clients.pop()
        for s in clients:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(0.05)
        proc.send_signal(signal.SIGSTOP)
        self.assertNotIn("serving on", log(), "the load was over before the stall")
        time.sleep(31)
        proc.send_signal(signal.SIGCONT)
        silent.settimeout(60)
        self.assertEqual(silent.recv(64), b"", "a silent connection was answered")
        self.assertNotIn("serving on", log(), "the silent connection was closed only after")
        axtest.wait_for(lambda: "serving on" in log(), 30, "serving to start", interval=0.005)
        for s in clients:
            s.settimeout(60)
            self.assertTrue(s.recv(64).startswith(b"HTTP/1.1 200"))

if __name__ == "__main__":
    unittest.main()
