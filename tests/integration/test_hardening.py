#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The smaller holes of issue 12, each closed against the real binaries:

- An agent's `address` is host:port and nothing else, so the controller's log proxy
  cannot be pointed at another path, query or user of some server.
"""

import unittest

import axtest


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


if __name__ == "__main__":
    unittest.main()
