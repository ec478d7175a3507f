#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""axagent with several controllers (--controller URL,URL), against fake controllers.

The fakes of test_agent_security.py play a leader, a follower that answers 307
not_leader with a URL, and one that answers 503 no_leader. The test checks: a bad list
stops the agent with one line and exit 2; a follower's redirect to a configured
controller is followed with the same request and token, and that controller is asked
directly from then on; a redirect anywhere else is not followed (that server sees
nothing, least of all the token); 503 no_leader sends the agent to the next URL after
the retry pause; when the controller it syncs with goes away, the agent syncs with the
next one without registering again and its rank keeps running (same pid) past a lease.

AXAGENT names the binary (set by agents/meson.build).
"""

import os
import pwd
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_agent_security as security  # noqa: E402
from test_agent_security import AXAGENT, TOKEN, FakeController, wait_for  # noqa: E402


def paths(fake, since=0):
    with fake.lock:
        return [p.split("?")[0] for p, _, _ in fake.requests[since:]]


class AgentFailoverTest(unittest.TestCase):
    # The agent's start, logs and teardown as the security tests have them.
    start_agent = security.AgentSecurityTest.start_agent
    agent_log = security.AgentSecurityTest.agent_log
    rank = security.AgentSecurityTest.rank

    def setUp(self):
        security.AgentSecurityTest.setUp(self)
        self.fakes = []

    def tearDown(self):
        security.AgentSecurityTest.tearDown(self)
        for f in self.fakes:
            try:
                f.stop()
            except OSError:
                pass

    def fake_controller(self):
        f = FakeController()
        self.fakes.append(f)
        return f

    def start_with(self, *fakes, extra=()):
        self.start_agent("--allow-root", *extra, url=",".join(f.url for f in fakes))

    def test_bad_controller_list_refused(self):
        for value, why in (("http://localhost:1,,http://localhost:2", "an empty URL in the list"),
                           ("http://localhost:1,ftp://x", "ftp://x: unsupported URL"),
                           ("http://localhost:1,http://u@x", "http://u@x: invalid URL"),
                           ("http://localhost:1/?q", "no query or fragment")):
            self.start_agent(url=value)
            self.assertEqual(self.agent.wait(10), 2, value)
            log = self.agent_log()
            self.assertIn(why, log)
            self.assertTrue(log.startswith("axagent: --controller ") and log.count("\n") == 1, log)

    def test_follows_a_redirect_to_a_listed_leader(self):
        leader, follower = self.fake_controller(), self.fake_controller()
        follower.redirect_to = leader.url
        self.start_with(follower, leader)
        wait_for("syncs with the leader", lambda: paths(leader).count("/v1/agent/sync") >= 5)
        # The register went to the follower, then as it was to the leader; everything
        # after to the leader at once.
        self.assertEqual(paths(follower), ["/v1/agent/register"])
        self.assertEqual(paths(leader)[0], "/v1/agent/register")
        with follower.lock, leader.lock:
            self.assertEqual(follower.requests[0][2], leader.requests[0][2])
            for _, headers, _ in leader.requests + follower.requests:
                self.assertEqual(headers.get("Authorization"), "Bearer " + TOKEN)
        self.assertIn("follows the leader at " + leader.url, self.agent_log())

    def test_redirect_elsewhere_not_followed(self):
        leader, follower, rogue = (self.fake_controller() for _ in range(3))
        follower.redirect_to = rogue.url
        self.start_with(follower, leader)
        wait_for("register with the leader", lambda: "/v1/agent/sync" in paths(leader))
        self.assertEqual(paths(follower), ["/v1/agent/register"])
        self.assertEqual(rogue.requests, [])
        self.assertIn("which is not one of --controller: not followed", self.agent_log())
        self.assertNotIn(TOKEN, self.agent_log())

    def test_no_leader_then_failover_keeps_the_rank(self):
        first, second = self.fake_controller(), self.fake_controller()
        first.no_leader = True
        user = pwd.getpwuid(os.geteuid()).pw_name
        first.desired = second.desired = [self.rank(1, user, "exec sleep 60")]
        self.start_with(first, second)
        wait_for("register with the second", lambda: "/v1/agent/register" in paths(second))
        # One 503 from the first, then the second after the retry pause.
        self.assertEqual(paths(first), ["/v1/agent/register"])
        with first.lock, second.lock:
            self.assertEqual(first.requests[0][2], second.requests[0][2])
        running = wait_for("the rank running", lambda: (
            (second.last_report(1, 0) or {}).get("state") == "running"
            and second.last_report(1, 0)))
        pid = running["pid"]

        # The second goes away; the first leads. The agent syncs with it, without a new
        # registration, and the rank stays as it is through more than a lease.
        first.no_leader = False
        since = len(first.requests)
        switched = time.monotonic()
        second.stop()
        wait_for("syncs with the first", lambda: "/v1/agent/sync" in paths(first, since))
        self.assertLess(time.monotonic() - switched, 2.0)
        time.sleep(6)  # past the 5 s lease: a missed renewal would have fenced the rank
        self.assertNotIn("/v1/agent/register", paths(first, since))
        report = first.last_report(1, 0)
        self.assertEqual((report["state"], report["pid"]), ("running", pid))
        os.kill(pid, 0)
        self.assertNotIn("killing", self.agent_log())
        self.assertIn("answers now (was %s)" % second.url, self.agent_log())

    def test_lease_only_answers_renew_and_change_nothing(self):
        fake = self.fake_controller()
        user = pwd.getpwuid(os.geteuid()).pw_name
        fake.desired = [self.rank(1, user, "exec sleep 60"), self.rank(2, user, "exit 3")]
        self.start_with(fake)
        running = wait_for("rank 1 running and rank 2's exit reported", lambda: (
            (fake.last_report(2, 0) or {}).get("exit_code") == 3
            and (fake.last_report(1, 0) or {}).get("state") == "running"
            and fake.last_report(1, 0)))
        pid = running["pid"]

        # A controller still loading after a restart renews the lease only. Its desired
        # state (nothing) is not in those answers, so the agent applies none of it: rank
        # 1 runs on through more than a lease, and rank 2's exit, which no controller
        # has let go of, is still reported.
        with fake.lock:
            fake.lease_only, fake.desired = True, []
            since = len(fake.requests)
        time.sleep(6)  # past the 5 s lease: renewals that did not count would fence
        with fake.lock:
            syncs = [p for p, _, _ in fake.requests[since:] if p.startswith("/v1/agent/sync")]
        self.assertGreater(len(syncs), 10, syncs)
        for path in syncs:
            self.assertIn("version=2&", path)  # still the last whole answer's
            self.assertRegex(path, r"accept=[^&]*\blease_only\b")
        report = fake.last_report(1, 0)
        self.assertEqual((report["state"], report["pid"]), ("running", pid))
        os.kill(pid, 0)
        self.assertEqual(fake.last_report(2, 0)["exit_code"], 3)
        log = self.agent_log()
        self.assertNotIn("killing", log)
        self.assertNotIn("Stopping rank", log)
        self.assertNotIn("failed", log.lower())
        self.assertIn("renewed the lease only", log)

        # The loaded controller answers whole: now the agent applies it.
        with fake.lock:
            fake.lease_only, fake.desired = False, [self.rank(1, user, "exec sleep 60")]
            since = len(fake.requests)

        def let_go():
            with fake.lock:
                bodies = [b for p, _, b in fake.requests[since:] if "/sync" in p]
            return len(bodies) >= 2 and all(r["job"] != 2 for r in bodies[-1]["ranks"])
        wait_for("rank 2 let go of", let_go)
        self.assertEqual(fake.last_report(1, 0)["pid"], pid)


if __name__ == "__main__":
    if not os.path.exists(AXAGENT):
        print("no axagent at %s" % AXAGENT)
        sys.exit(77)
    unittest.main(verbosity=2)
