#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 13's restart: a restarted controller answers each stored agent's first sync from
the database while the rest of its state loads (daemon/early-leases.h), so that the
agents' leases are renewed before the load and the first turn are over. Only what the
database holds as committed is answered so: the node keeps a lease, and the agent, its
boot and its token are the stored ones; with the stored desired-state version the
answer is `unchanged`, with another it renews the lease only (`lease_only`), each only
to an agent that accepts it. Everything else, and the next sync on a connection
answered so, waits for the loaded controller. Tried with
the requests a careless or hostile agent would send, with authentication on."""

import http.client
import json
import re
import socket
import time
import unittest

import axtest

token = axtest.create_token


def sync_path(version, accept="unchanged,lease_only"):
    return "/v1/agent/sync?wait_ms=0&version=%d&accept=%s" % (version, accept)


class RestartLeasesTest(axtest.ClusterTestCase):
    def setUp(self):
        self.c = axtest.Cluster(0, controller_args=["--auth"], name=self._testMethodName)
        self.addCleanup(self._finish_cluster, self.c)
        db = self.c.db
        self.tokens = {n: token(db, "--name", n + "-agent", "--role", "agent", "--node", n)
                       for n in ("n1", "n2", "n3")}
        self.c.token = token(db, "--name", "root", "--role", "admin")
        self.c.start_controller()

    def connect(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        self.addCleanup(conn.close)
        return conn

    def send(self, conn, node, path, body, who=None):
        conn.request("POST", path, json.dumps(body),
                     {"Content-Type": "application/json",
                      "Authorization": "Bearer " + self.tokens[who or node]})

    def answer(self, conn):
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")

    def sync_body(self, node, boot="boot-1"):
        return {"node": node, "boot_id": boot, "agent_id": "agent-" + node, "ranks": [],
                "checkpoints": [], "health": {"healthy": True, "reason": ""}}

    def log(self):
        with open(self.stderr) as f:
            return f.read()

    def loaded(self):
        return "connections came while the state loaded" in self.log()

    def test_first_syncs_are_answered_from_the_database_while_it_loads(self):
        c = self.c
        self.port = c.port
        # A job that fits no node: nothing is placed, so no desired state changes after
        # the versions below are read.
        job = c.submit({"command": ["true"], "ranks": 1, "resources": {"cpus": 64}})
        versions = {}
        for node in ("n1", "n2", "n3"):
            conn = self.connect()
            self.send(conn, node, "/v1/agent/register",
                      {"node": node, "address": "127.0.0.1:9", "boot_id": "boot-1",
                       "agent_id": "agent-" + node, "inventory": {"cpus": 8}})
            self.assertEqual(self.answer(conn)[0], 200)
            self.send(conn, node, sync_path(0), self.sync_body(node))
            status, ans = self.answer(conn)
            self.assertEqual(status, 200, ans)
            versions[node] = ans["version"]
        # n3 was declared lost before the restart: it keeps no lease.
        proc, self.port, self.stderr = axtest.restart_loading(
            self, c, job=job, jobs=120000 + job["id"],
            prepare=lambda db: db.execute("UPDATE node SET state = 'down' WHERE name = 'n3'"))
        axtest.wait_for(lambda: "serving up to" in self.log(), 30,
                        "the HTTP server to start", interval=0.005)

        # What must wait for the loaded controller, each on its own connection.
        waiting = {}
        for what, node, path, body, who in (
                ("another boot", "n2", sync_path(versions["n2"]),
                 self.sync_body("n2", boot="boot-2"), None),
                ("another agent", "n2", sync_path(versions["n2"]),
                 dict(self.sync_body("n2"), agent_id="intruder"), None),
                ("another node's token", "n2", sync_path(versions["n2"]),
                 self.sync_body("n2"), "n1"),
                ("an older version, no lease-only answer", "n2",
                 sync_path(versions["n2"] - 1, accept="unchanged"), self.sync_body("n2"), None),
                ("neither answer", "n2", sync_path(versions["n2"], accept="shared_env"),
                 self.sync_body("n2"), None),
                ("a node down", "n3", sync_path(versions["n3"]), self.sync_body("n3"), None)):
            conn = self.connect()
            self.send(conn, node, path, body, who)
            waiting[what] = conn

        # The agent that the database knows, as it knows it: answered while it loads.
        conn = self.connect()
        self.send(conn, "n1", sync_path(versions["n1"]), self.sync_body("n1"))
        status, ans = self.answer(conn)
        self.assertFalse(self.loaded(), "the load was over before the first answer")
        self.assertEqual(status, 200, ans)
        self.assertEqual(ans.get("unchanged"), True, ans)
        self.assertEqual(ans["version"], versions["n1"])
        self.assertGreater(ans["lease_ms"], 0)
        self.assertNotIn("ranks", ans)
        # Its next sync on that connection waits: no agent polls in a loop meanwhile.
        self.send(conn, "n1", sync_path(versions["n1"]), self.sync_body("n1"))
        waiting["the next sync"] = conn

        # An agent that missed the old controller's last answer: the database cannot
        # vouch for its ranks, so its lease is renewed and nothing more, at its version.
        conn = self.connect()
        self.send(conn, "n2", sync_path(versions["n2"] - 1), self.sync_body("n2"))
        status, ans = self.answer(conn)
        self.assertFalse(self.loaded(), "the load was over before the lease-only answer")
        self.assertEqual(status, 200, ans)
        self.assertEqual(ans.get("lease_only"), True, ans)
        self.assertEqual(ans["version"], versions["n2"] - 1)
        self.assertNotIn("unchanged", ans)
        self.assertNotIn("ranks", ans)

        for what, conn in waiting.items():
            status, ans = self.answer(conn)
            self.assertTrue(self.loaded(), "%s was answered before the state loaded: %s %s"
                            % (what, status, ans))
        found = re.search(r"(\d+) agents' leases renewed meanwhile", self.log())
        self.assertIsNotNone(found, self.log())
        self.assertEqual(int(found.group(1)), 2)
        conn = self.connect()
        conn.request("GET", "/metrics", headers={"Authorization": "Bearer " + c.token})
        metrics = conn.getresponse().read().decode()
        self.assertRegex(metrics, r"(?m)^axctl_agent_syncs_answered_while_loading_total 2$")
        self.assertNotIn("aborting", self.log())
        self.assertIsNone(proc.poll(), "the controller exited")


    def test_a_leader_answers_from_the_database_while_it_loads(self):
        """With --leader-elect the early answers stop where the leadership may lapse: at
        the end of the lease as the loading leader last renewed it (daemon/main.c hands
        the renewer's to early_leases_load). So an agent is still answered early once the
        lease taken before the load has run out, while the load goes on."""
        c = self.c
        self.port = c.port
        job = c.submit({"command": ["true"], "ranks": 1, "resources": {"cpus": 64}})
        conn = self.connect()
        self.send(conn, "n1", "/v1/agent/register",
                  {"node": "n1", "address": "127.0.0.1:9", "boot_id": "boot-1",
                   "agent_id": "agent-n1", "inventory": {"cpus": 8}})
        self.assertEqual(self.answer(conn)[0], 200)
        self.send(conn, "n1", sync_path(0), self.sync_body("n1"))
        status, ans = self.answer(conn)
        self.assertEqual(status, 200, ans)
        version = ans["version"]
        lease_ms = 400
        c.controller_args = c.controller_args + ["--leader-elect", "--leader-lease-ms",
                                                 str(lease_ms)]
        # 250,000 jobs: a load of over a second here, several of those leases.
        proc, self.port, self.stderr = axtest.restart_loading(self, c, job=job,
                                                              jobs=250000 + job["id"])
        axtest.wait_for(lambda: "serving up to" in self.log(), 30,
                        "the HTTP server to start", interval=0.005)
        self.assertIn("stands for leader", self.log())
        # The lease was taken before the HTTP server started: it has run out since.
        time.sleep(1.25 * lease_ms / 1000)
        conn = self.connect()
        self.send(conn, "n1", sync_path(version), self.sync_body("n1"))
        status, ans = self.answer(conn)
        self.assertFalse(self.loaded(), "the load was over before the first answer")
        self.assertEqual(status, 200, ans)
        self.assertEqual(ans.get("unchanged"), True, ans)
        self.assertEqual(ans["version"], version)
        # Once loaded, the leader answers whole and goes on leading.
        self.send(conn, "n1", sync_path(version), self.sync_body("n1"))
        status, ans = self.answer(conn)
        self.assertTrue(self.loaded())
        self.assertEqual(status, 200, ans)
        conn.request("GET", "/healthz")
        self.assertEqual(self.answer(conn)[1].get("role"), "leader")
        self.assertNotIn("lost", self.log())
        self.assertIsNone(proc.poll(), "the controller exited")


class ManyRenewedTest(axtest.ClusterTestCase):
    def test_every_renewed_agent_is_answered_after_the_load(self):
        """The loaded controller reads the renewed agents' next syncs a bounded number a
        turn (API_RENEWED_RESUMED_PER_TURN, 512), oldest renewals first: with 600
        renewed, the last of them still get their answer."""
        n = 600
        c = axtest.Cluster(0, name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        c.start_controller()
        # A job that will fit no node, as above: no version moves after those read here.
        job = c.submit({"command": ["true"], "ranks": 1, "resources": {"cpus": 64}})
        body = {node: {"node": node, "boot_id": "boot-1", "agent_id": "agent-" + node,
                       "ranks": [], "checkpoints": [],
                       "health": {"healthy": True, "reason": ""}}
                for node in ("n%d" % i for i in range(n))}
        versions = {}
        conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=60)
        for node in body:
            conn.request("POST", "/v1/agent/register", json.dumps(
                {"node": node, "address": "127.0.0.1:9", "boot_id": "boot-1",
                 "agent_id": "agent-" + node, "inventory": {"cpus": 8}}))
            resp = conn.getresponse()
            resp.read()
            self.assertEqual(resp.status, 200, node)
            conn.request("POST", sync_path(0), json.dumps(body[node]))
            versions[node] = json.loads(conn.getresponse().read())["version"]
        conn.close()
        # A backlog as axctld.socket's: the fleet's connects do not wait on accepts.
        proc, port, stderr = axtest.restart_loading(self, c, job=job, jobs=240000,
                                                    backlog=1024)

        def log():
            with open(stderr) as f:
                return f.read()
        axtest.wait_for(lambda: "serving up to" in log(), 30, "the HTTP server to start",
                        interval=0.005)
        # Raw sockets, connected first and then sent to in one go, so that the syncs
        # come within the load (a second or more).
        socks = {}
        for node in body:
            socks[node] = socket.create_connection(("127.0.0.1", port), timeout=60)
            self.addCleanup(socks[node].close)
        request = {node: ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: %d\r\n\r\n%s" % (
                              sync_path(versions[node]), len(json.dumps(body[node])),
                              json.dumps(body[node]))).encode()
                   for node in body}
        for node, sock in socks.items():
            sock.sendall(request[node])
        for rnd in ("while it loads", "once loaded"):
            for node, sock in socks.items():
                resp = http.client.HTTPResponse(sock)
                resp.begin()
                self.assertEqual(resp.status, 200, (rnd, node))
                self.assertTrue(json.loads(resp.read()).get("unchanged"), (rnd, node))
                if rnd == "while it loads":
                    sock.sendall(request[node])  # the next sync: waits for the load
        found = re.search(r"(\d+) agents' leases renewed meanwhile", log())
        self.assertIsNotNone(found, log())
        # More than a turn's worth was renewed while it loaded, so the last came later.
        self.assertGreater(int(found.group(1)), 512, "the load was over too soon")
        self.assertIsNone(proc.poll(), "the controller exited")


if __name__ == "__main__":
    unittest.main()
