#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 13's connection policy, against a real axctld whose descriptor limit is small
enough to fill: agents behind one address are not capped per address; agents can never
take the connections kept for API users; an agent turned away gets 503 `busy` and its
connection closed, and gets in once other agents let go of theirs."""

import http.client
import json
import re
import time
import unittest

import axtest


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


if __name__ == "__main__":
    unittest.main()
