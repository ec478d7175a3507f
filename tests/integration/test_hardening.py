#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The smaller holes of issue 12, each closed against the real binaries:

- An agent's `address` is host:port and nothing else, so the controller's log proxy
  cannot be pointed at another path, query or user of some server.
- An idempotency key is its project's own: the same key in another project is another
  key (no 409 that tells one tenant the job id of another), also after a restart.
"""

import unittest

import axtest
from test_auth import token


class AddressTest(axtest.ClusterTestCase):
    def register(self, c, address):
        body = {"node": "n1", "address": address, "inventory": {"cpus": 0}}
        return c.api("POST", "/v1/agent/register", body)

    def test_register_takes_host_and_port_only(self):
        c = self.start_cluster(0)
        for address in ("127.0.0.1:18495/secret?", "127.0.0.1:80?x=1", "admin@127.0.0.1:80",
                        "127.0.0.1:80#x", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536",
                        "host name:80", "[::1]:80/x", "127.0.0.1:80\r\nX-Evil: 1"):
            status, body, _ = self.register(c, address)
            self.assertEqual(status, 400, (address, body))
            self.assertEqual(body["error"]["code"], "bad_request", body)
            self.assertEqual(body["error"]["field"], "address", body)
        self.assertEqual(c.nodes(), [], "a refused registration left a node behind")
        for address in ("127.0.0.1:9", "[::1]:9", "node-1.example.com:65535"):
            status, body, _ = self.register(c, address)
            self.assertEqual(status, 200, (address, body))
            self.assertEqual(c.nodes()[0]["address"], address)


class IdempotencyTest(axtest.ClusterTestCase):
    def test_a_key_is_its_projects_own(self):
        c = axtest.Cluster(0, controller_args=["--auth"], name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        alice = token(c.db, "--name", "alice", "--role", "user", "--project", "p1")
        bob = token(c.db, "--name", "bob", "--role", "user", "--project", "p2")
        c.start_controller()

        def submit(who, project, command):
            spec = {"command": command, "ranks": 1, "project": project}
            headers = {"Authorization": "Bearer " + who, "Idempotency-Key": "nightly"}
            return c.api("POST", "/v1/jobs", spec, headers=headers)

        status, a, _ = submit(alice, "p1", ["true"])
        self.assertEqual(status, 201, a)
        for restarted in (False, True):
            # Another spec under the same key, in another project: simply another job.
            status, b, _ = submit(bob, "p2", ["false"])
            self.assertIn(status, (200, 201) if restarted else (201,), b)
            self.assertNotEqual(b["id"], a["id"])
            # Within a project the key still names one job.
            status, again, _ = submit(bob, "p2", ["false"])
            self.assertEqual((status, again["id"]), (200, b["id"]), again)
            status, conflict, _ = submit(alice, "p1", ["false"])
            self.assertEqual(status, 409, conflict)
            self.assertIn(str(a["id"]), conflict["error"]["message"])
            c.restart_controller()


if __name__ == "__main__":
    unittest.main()
