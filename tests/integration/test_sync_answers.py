#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The short answer to a sync (issue 13, docs/PROTOCOL.md "POST /v1/agent/sync"):

- An agent that announces `accept=unchanged` and has applied its node's desired version
  is answered without the ranks while that version stands. The real axagent keeps its
  ranks and its lease on such answers for several leases, and still sees every change.
- A sync without the capability (an agent older than it) gets the whole desired state,
  at once and after a hold, so a rolling upgrade fences nothing.
- A restarted controller goes on from each node's stored version: the agents' first
  syncs after a SIGKILL and restart are answered short, and changes still arrive. Each
  agent's first sync is answered at once, not held: its lease still counts from a
  request the killed controller had. Likewise an agent whose lease is half spent (its
  held sync was answered late) asks for no hold, and news (a rank that ended) does not
  make it drop a long-poll that is late rather than held: that one's answer renews the
  lease, and a new request would queue behind the rest of a restarted fleet's. The
  long-poll an agent dropped for news is answered soon after (409 superseded), not held
  to its end; an agent that reads such an answer syncs again, still registered.
- Held syncs on many connections (spread over the controller's shards) are each
  answered at their deadline, shortly after it, and one whose node changed at once.
- An agent that announces `accept=shared_env` gets a gang's host list once per answer,
  not in every rank's environment; merged, its ranks are those of the whole answer.
- A sync body that repeats the connection's last one byte for byte is not parsed again
  (its decoding was kept), and is handled as before: a change after repeats is seen,
  and other bytes are parsed and checked as ever.
"""

import http.client
import json
import os
import re
import select
import signal
import time
import unittest

import axtest


def sync_answers(c):
    """The controller's count of sync answers by body: {"whole": n, "unchanged": n}."""
    text = c.api_ok("GET", "/metrics")
    found = dict(re.findall(r'^axctl_agent_sync_answers_total\{body="(\w+)"\} (\d+)$', text, re.M))
    return {body: int(found.get(body, 0)) for body in ("whole", "unchanged")}


def sync_reports(c):
    """The controller's count of sync bodies: {"parsed": n, "repeated": n}."""
    text = c.api_ok("GET", "/metrics")
    found = dict(re.findall(r'^axctl_agent_sync_reports_total\{decoded="(\w+)"\} (\d+)$',
                            text, re.M))
    return {how: int(found.get(how, 0)) for how in ("parsed", "repeated")}


def node_last_seen(c, name):
    """The node's last contact as the controller shows it (ISO 8601 with milliseconds)."""
    nodes = c.api_ok("GET", "/v1/nodes")["nodes"]
    return next(n["last_seen"] for n in nodes if n["name"] == name)


def cpu_seconds(pid):
    """User and system CPU time of pid so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def register_by_hand(c, node, agent_id):
    """Registers node as an agent would, by hand; the body of its syncs with no ranks."""
    identity = {"node": node, "boot_id": "boot-" + node, "agent_id": agent_id}
    register = dict(identity, address="127.0.0.1:9", inventory={"cpus": 8, "memory_mb": 16000})
    c.api_ok("POST", "/v1/agent/register", register, expect=(200,))
    return dict(identity, ranks=[], health={"healthy": True, "reason": ""})


class SyncAnswerTest(axtest.ClusterTestCase):
    def test_agent_keeps_its_ranks_on_short_answers_and_sees_changes(self):
        # A short lease, so that a lease not renewed by short answers would show.
        c = self.start_cluster(1, lease_ms=2000, grace_ms=500)
        # An idle agent's syncs repeat byte for byte: the controller parses them once.
        axtest.wait_for(lambda: sync_reports(c)["repeated"] >= 2, 10,
                        "the idle agent's sync bodies repeated")
        job = c.work_job("steady", steps=100000, step_ms=50, checkpoint_every=1000)
        job.id = c.submit(job.spec)["id"]
        pid = c.wait_running(job.id)[0]["pid"]

        # Nothing changes for n1 now: its agent's syncs are held and answered short.
        # Three leases of them: the ranks would have fenced themselves had any not
        # counted as contact.
        before = sync_answers(c)
        started = time.monotonic()
        axtest.wait_for(lambda: time.monotonic() - started > 3 * 2.0
                        and sync_answers(c)["unchanged"] - before["unchanged"] >= 6,
                        20, "three leases of short answers", interval=0.2)
        after = sync_answers(c)
        self.assertEqual(after["whole"], before["whole"],
                         "a sync of an unchanged node was answered with its whole state")
        self.assertTrue(axtest.pid_alive(pid), "the rank was stopped on short answers")
        view = c.job(job.id)
        self.assertEqual((view["state"], view["attempt"]), ("running", 1), view["reason"])
        self.assertEqual(view["ranks"][0]["pid"], pid)

        # Changes still reach the agent: a new job starts, the first one stops.
        other = c.work_job("next", steps=100000, step_ms=50, checkpoint_every=1000)
        other.id = c.submit(other.spec)["id"]
        c.wait_running(other.id)
        self.assertEqual(c.cancel(job.id)[0], 200)
        axtest.wait_for(lambda: not axtest.pid_alive(pid), 10, "the cancelled rank stopped")
        self.assertEqual(c.wait_job(job.id)["state"], "cancelled")
        self.assertEqual(c.job(other.id)["state"], "running")
        self.assertGreater(sync_answers(c)["whole"], after["whole"])
        self.assertEqual(c.cancel(other.id)[0], 200)
        c.wait_job(other.id)

    def test_a_restarted_controller_answers_short(self):
        c = self.start_cluster(2, lease_ms=2000, grace_ms=500)
        job = c.work_job("steady", ranks=2, ranks_per_node=1, steps=100000, step_ms=50,
                         checkpoint_every=1000)
        job.id = c.submit(job.spec)["id"]
        pids = [r["pid"] for r in c.wait_running(job.id)]
        # Both agents applied the version that placed the ranks (their syncs are short).
        before = sync_answers(c)
        axtest.wait_for(lambda: sync_answers(c)["unchanged"] - before["unchanged"] >= 4, 20,
                        "short answers before the restart", interval=0.2)

        c.restart_controller(sigkill=True)
        axtest.wait_for(lambda: sync_answers(c)["unchanged"] >= 4, 20,
                        "short answers from the restarted controller", interval=0.2)
        self.assertEqual(sync_answers(c)["whole"], 0,
                         "an agent was sent its whole state though nothing changed")
        view = c.job(job.id)
        self.assertEqual((view["state"], view["attempt"]), ("running", 1), view["reason"])
        self.assertEqual([r["pid"] for r in view["ranks"]], pids)
        self.assertTrue(all(axtest.pid_alive(p) for p in pids))

        # A change after the restart still reaches the agents.
        self.assertEqual(c.cancel(job.id)[0], 200)
        axtest.wait_for(lambda: not any(axtest.pid_alive(p) for p in pids), 10,
                        "the cancelled ranks stopped")
        self.assertEqual(c.wait_job(job.id)["state"], "cancelled")
        self.assertGreater(sync_answers(c)["whole"], 0)

    def test_a_restarted_controller_holds_no_first_sync(self):
        c = self.start_cluster(0)
        body = register_by_hand(c, "held1", "b" * 32)

        def timed_sync(wait_ms, version):
            took = time.monotonic()
            ans = c.api_ok("POST", "/v1/agent/sync?wait_ms=%d&version=%d&accept=unchanged"
                           % (wait_ms, version), body, expect=(200,))
            return ans, time.monotonic() - took

        v = timed_sync(0, 0)[0]["version"]
        took = timed_sync(1000, v)[1]
        self.assertGreater(took, 0.9, "a sync with nothing new was not held")
        # Answered with the sweep of deadlines after its end (every 50 ms under load).
        self.assertLess(took, 2.0, "a held sync was answered long after its wait")
        c.restart_controller(sigkill=True)
        ans, took = timed_sync(1000, v)
        self.assertEqual((ans["version"], ans.get("unchanged")), (v, True), ans)
        self.assertLess(took, 0.7, "the first sync after the restart was held")
        self.assertGreater(timed_sync(1000, v)[1], 0.9, "the next sync was not held")

    def test_held_syncs_on_many_connections_are_each_answered_on_time(self):
        c = self.start_cluster(0)
        query = "/v1/agent/sync?wait_ms=%d&version=%d&accept=unchanged"
        agents = []
        for i in range(48):
            body = register_by_hand(c, "h%02d" % i, "%032x" % i)
            version = c.api_ok("POST", query % (0, 0), body, expect=(200,))["version"]
            conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=30)
            self.addCleanup(conn.close)
            agents.append((conn, body, version))

        def hold_all():
            sent = time.monotonic()
            for conn, body, version in agents:
                conn.request("POST", query % (1000, version), json.dumps(body),
                             {"Content-Type": "application/json"})
            return sent

        def answer(conn):
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())

        # Nothing changes: each is held for its wait, and answered soon after it (its
        # shard sweeps at most every 50 ms).
        sent = hold_all()
        for conn, _, version in agents:
            status, ans = answer(conn)
            self.assertEqual((status, ans["version"], ans.get("unchanged")), (200, version, True))
            took = time.monotonic() - sent
            self.assertGreater(took, 0.9, "a sync with nothing new was not held")
        self.assertLess(time.monotonic() - sent, 2.5, "held syncs were answered late")

        # A rank placed on one node: that node's held sync is answered at once, whatever
        # its shard, and the others stay held.
        sent = hold_all()
        c.submit({"command": ["true"], "ranks": 1})
        socks = {conn.sock: conn for conn, _, _ in agents}
        ready, _, _ = select.select(list(socks), [], [], 0.7)
        self.assertEqual(len(ready), 1, "not one held sync answered for the placed rank")
        status, ans = answer(socks[ready[0]])
        self.assertEqual((status, len(ans["ranks"])), (200, 1), ans)
        self.assertLess(time.monotonic() - sent, 0.9)
        for conn, _, _ in agents:
            if conn.sock is not ready[0]:
                self.assertEqual(answer(conn)[0], 200)

    def test_a_long_poll_dropped_for_news_is_answered_soon(self):
        # The agent drops its held sync for news, which is answered at once. The one it
        # dropped is answered soon after, not held to its deadline (5 s here), so that
        # its connection is let go of: 409 superseded, since the news's answer carries
        # the node's state.
        c = self.start_cluster(0, lease_ms=20000, controller_args=["--sync-period-ms", "5000"])
        body = register_by_hand(c, "drop1", "d" * 32)
        query = "/v1/agent/sync?wait_ms=%d&version=%d&accept=unchanged"
        v = c.api_ok("POST", query % (0, 0), body, expect=(200,))["version"]
        held = http.client.HTTPConnection("127.0.0.1", c.port, timeout=30)
        self.addCleanup(held.close)
        sent = time.monotonic()
        held.request("POST", query % (5000, v), json.dumps(body),
                     {"Content-Type": "application/json"})
        axtest.wait_for(lambda: sum(sync_reports(c).values()) == 2, 10, "the sync held")
        self.assertEqual(c.api_ok("POST", query % (0, v), body, expect=(200,))["version"], v)
        news_answered = time.monotonic()
        resp = held.getresponse()
        self.assertEqual((resp.status, json.loads(resp.read())["error"]["code"]), (409, "superseded"))
        self.assertLess(time.monotonic() - sent, 3, "the dropped long-poll was held to its end")
        # With the next sweep of deadlines (every 50 ms), whatever else happens.
        self.assertLess(time.monotonic() - news_answered, 1.0, "the dropped long-poll was late")

    def test_an_agent_told_its_sync_was_superseded_syncs_again(self):
        # A held sync after which the controller read another sync of its node is
        # answered 409 superseded. An agent reads one only when an older sync of its own
        # arrived late (here: one sent by hand in its name); it syncs again and stays
        # registered, where the other 409s make it register again.
        c = self.start_cluster(1)
        axtest.wait_for(lambda: sync_reports(c)["repeated"] >= 2, 10, "the agent syncing")
        with open(os.path.join(c.tmp, "n1", "agent-id")) as f:
            agent_id = f.read().strip()
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot_id = f.read().strip()
        body = {"node": "n1", "boot_id": boot_id, "agent_id": agent_id, "ranks": [],
                "health": {"healthy": True, "reason": ""}}
        log_path = c.agents["n1"].stderr_path

        def agent_log():
            with open(log_path) as f:
                return f.read()

        registered = agent_log().count("Registered as n1")
        self.assertEqual(registered, 1)

        def superseded():
            # The agent's sync is held nearly always: this one, read after it, drops it.
            c.api_ok("POST", "/v1/agent/sync?wait_ms=0&version=0", body, expect=(200,))
            time.sleep(0.2)
            return "superseded" in agent_log()

        axtest.wait_for(superseded, 15, "the agent told its sync was superseded")
        before = sync_reports(c)
        axtest.wait_for(lambda: sum(sync_reports(c).values()) >= sum(before.values()) + 2, 10,
                        "the agent syncing again")
        self.assertEqual(agent_log().count("Registered as n1"), registered,
                         "a superseded sync made the agent register again")
        node = next(n for n in c.api_ok("GET", "/v1/nodes")["nodes"] if n["name"] == "n1")
        self.assertEqual(node["state"], "ready")

    def test_an_agent_with_its_lease_half_spent_asks_for_no_hold(self):
        # A lease of 6 s: holds of 1 s, half the lease 3 s, so an answer would have to
        # come 2 s late for a sync to ask for no hold before the stall.
        c = self.start_cluster(1, lease_ms=6000, grace_ms=1000,
                               agent_args=[["--log-level", "debug"]])
        c.wait_nodes_ready(["n1"])
        log = c.agents["n1"].stderr_path
        held = r"Sending sync \d+ .*\(wait [1-9]\d* ms\)"
        at_once = r"Sending sync \d+ .*\(wait 0 ms\)"

        def since(mark):
            with open(log, errors="replace") as f:
                return f.read()[mark:]

        axtest.wait_for(lambda: len(re.findall(held, since(0))) >= 2, 10, "held syncs")
        text = since(0)
        mark = len(text)
        self.assertNotRegex(text[re.search(held, text).start():], at_once,
                            "an agent with nothing new asked for no hold")
        # The controller stalls for more than half the lease: the held sync is answered
        # late, so the agent's lease runs from a request sent before the stall.
        c.controller.signal(signal.SIGSTOP)
        time.sleep(3.5)
        c.controller.signal(signal.SIGCONT)
        axtest.wait_for(lambda: re.search(at_once + r"[\s\S]*" + held, since(mark)), 10,
                        "a sync asking for no hold, then held ones again")
        self.assertEqual(c.nodes()[0]["state"], "ready")

    def test_news_keeps_a_late_long_poll(self):
        # A lease of 7 s: holds of 1 s, the agent's patience 5 s beyond a hold, half the
        # lease 3.5 s. The controller stalls as a held sync goes out; the rank ends 3.8 s
        # later, when the last contact (the request before) is 3.8-4.9 s old and the
        # long-poll has 2 s left before the agent gives up on it.
        c = self.start_cluster(1, lease_ms=7000, grace_ms=1000,
                               agent_args=[["--log-level", "debug"]])
        c.wait_nodes_ready(["n1"])
        go = os.path.join(c.jobs_dir, "go")
        spec = {"name": "news", "ranks": 1, "env": {"AXTEST_MARKER": c.marker},
                "command": ["sh", "-c", "while [ ! -e %s ]; do sleep 0.05; done" % go]}
        job_id = c.submit(spec)["id"]
        c.wait_running(job_id)
        log = c.agents["n1"].stderr_path
        held = r"Sending sync \d+ .*\(wait [1-9]\d* ms\)"

        def since(mark):
            with open(log, errors="replace") as f:
                return f.read()[mark:]

        seen = len(re.findall(held, since(0)))
        axtest.wait_for(lambda: len(re.findall(held, since(0))) > seen, 10, "a held sync",
                        interval=0.01)
        c.controller.signal(signal.SIGSTOP)
        try:
            mark = len(since(0))
            time.sleep(3.8)
            cpu = cpu_seconds(c.agents["n1"].pid)
            open(go, "w").close()
            time.sleep(0.7)
            self.assertNotRegex(since(mark), r"Sending sync",
                                "news dropped a long-poll that was late, not held")
            # Waiting for that answer, the agent sleeps; it does not spin.
            self.assertLess(cpu_seconds(c.agents["n1"].pid) - cpu, 0.3)
        finally:
            c.controller.signal(signal.SIGCONT)
        # The late long-poll's answer renews the lease; the news follows it.
        self.assertEqual(c.wait_job(job_id, timeout=20)["state"], "succeeded")
        self.assertEqual(c.job(job_id)["attempt"], 1)
        self.assertEqual(c.nodes()[0]["state"], "ready")

    def test_a_sync_without_the_capability_gets_the_whole_answer(self):
        c = self.start_cluster(0)
        body = register_by_hand(c, "old1", "a" * 32)

        def sync(query):
            return c.api_ok("POST", "/v1/agent/sync?" + query, body, expect=(200,))

        first = sync("wait_ms=0&version=0&accept=unchanged")
        v = first["version"]
        whole = {"version": v, "lease_ms": first["lease_ms"],
                 "sync_period_ms": first["sync_period_ms"], "ranks": []}
        short = {"version": v, "lease_ms": first["lease_ms"],
                 "sync_period_ms": first["sync_period_ms"], "unchanged": True}
        self.assertEqual(first, whole, "an agent that applied nothing gets the whole state")

        # Without the capability (or with only others): the whole state, at once and
        # at the end of a hold.
        for query in ("wait_ms=0&version=%d", "wait_ms=300&version=%d",
                      "wait_ms=0&version=%d&accept=gzip", "wait_ms=0&version=%d&accept=unchanged2"):
            self.assertEqual(sync(query % v), whole, query)
        # With it: the short answer, at once and at the end of a hold.
        for query in ("wait_ms=0&version=%d&accept=unchanged",
                      "wait_ms=300&version=%d&accept=gzip,unchanged"):
            took = time.monotonic()
            self.assertEqual(sync(query % v), short, query)
            if "wait_ms=300" in query:
                self.assertGreater(time.monotonic() - took, 0.25, "the sync was not held")
        # An older version than the node's: whole, capability or not.
        self.assertEqual(sync("wait_ms=0&version=%d&accept=unchanged" % (v - 1)), whole)

        # A rank placed on the node is a new version: every agent hears of it whole.
        job = c.submit({"name": "placed", "command": ["sleep", "300"], "ranks": 1})
        ans = axtest.wait_for(lambda: (lambda a: a if a.get("ranks") else None)(
            sync("wait_ms=0&version=%d&accept=unchanged" % v)), 10, "the rank in an answer")
        self.assertGreater(ans["version"], v)
        self.assertNotIn("unchanged", ans)
        self.assertEqual([r["job"] for r in ans["ranks"]], [job["id"]])
        v2 = ans["version"]
        self.assertEqual(sync("wait_ms=0&version=%d" % v2), ans)
        self.assertEqual(sync("wait_ms=0&version=%d&accept=unchanged" % v2),
                         dict(short, version=v2))
        # It leaves the node when cancelled: the version moves on, the answer is whole.
        self.assertEqual(c.cancel(job["id"])[0], 200)
        ans = sync("wait_ms=0&version=%d&accept=unchanged" % v2)
        self.assertGreater(ans["version"], v2)
        self.assertEqual(ans["ranks"], [])

    def test_a_gangs_host_list_is_sent_once_to_agents_that_share(self):
        # Two nodes of one gang, registered by hand with their own addresses.
        c = self.start_cluster(0)
        bodies = {}
        for i, name in enumerate(("gang1", "gang2")):
            identity = {"node": name, "boot_id": "boot-" + name, "agent_id": "%d" % i * 32}
            c.api_ok("POST", "/v1/agent/register",
                     dict(identity, address="10.0.0.%d:9" % (i + 1),
                          inventory={"cpus": 8, "memory_mb": 16000}), expect=(200,))
            bodies[name] = dict(identity, ranks=[], health={"healthy": True, "reason": ""})
        job = c.submit({"name": "gang", "command": ["sleep", "300"], "ranks": 4,
                        "ranks_per_node": 2})

        def sync(accept):
            return c.api_ok("POST", "/v1/agent/sync?wait_ms=0&version=0&accept=" + accept,
                            bodies["gang1"], expect=(200,))

        whole = axtest.wait_for(lambda: (lambda a: a if len(a["ranks"]) == 2 else None)(
            sync("unchanged")), 10, "the gang's ranks in gang1's answer")
        self.assertNotIn("shared_env", whole)
        hosts = whole["ranks"][0]["env"]["AXCTL_NODE_HOSTNAMES"]
        self.assertEqual(sorted(hosts.split(",")), ["10.0.0.1", "10.0.0.2"])

        # An agent that shares gets the list once, and each rank names it.
        shared = sync("unchanged,shared_env")
        as_sent = json.dumps(shared, sort_keys=True)
        name = str(job["id"])
        self.assertEqual(shared["shared_env"], {name: {"AXCTL_NODE_HOSTNAMES": hosts}})
        self.assertEqual(shared["version"], whole["version"])
        self.assertEqual(len(shared["ranks"]), 2)
        for own, full in zip(shared["ranks"], whole["ranks"]):
            self.assertEqual(own.pop("shared_env"), name)
            self.assertNotIn("AXCTL_NODE_HOSTNAMES", own["env"])
            # Merged, the rank is the whole answer's, variable for variable.
            own["env"].update(shared["shared_env"][name])
            self.assertEqual(own, full)

        # The list lives in memory only: a controller killed and restarted builds it again
        # from what it stored, the same for every agent.
        c.restart_controller(sigkill=True)
        self.assertEqual(json.dumps(sync("unchanged,shared_env"), sort_keys=True), as_sent)
        self.assertEqual(sync("unchanged"), whole)

    def test_a_repeated_sync_body_is_decoded_once_and_handled_as_ever(self):
        c = self.start_cluster(0)
        body = register_by_hand(c, "memo1", "b" * 32)
        # One keep-alive connection, as an agent's: the memo is the connection's.
        conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
        self.addCleanup(conn.close)

        def sync(raw):
            conn.request("POST", "/v1/agent/sync?wait_ms=0&version=0", raw,
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, json.loads(r.read())

        def counted(raw, how):
            before = sync_reports(c)
            status, ans = sync(raw)
            after = sync_reports(c)
            self.assertEqual({k: after[k] - before[k] for k in after},
                             {"parsed": int(how == "parsed"), "repeated": int(how == "repeated")},
                             raw)
            return status, ans

        idle = json.dumps(body).encode()
        self.assertEqual(counted(idle, "parsed")[0], 200)
        self.assertEqual(counted(idle, "repeated")[0], 200)

        # A rank placed here, reported running three times: parsed once.
        job = c.submit({"name": "memo", "command": ["sleep", "300"], "ranks": 1})
        placed = axtest.wait_for(lambda: (lambda a: a["ranks"] or None)(sync(idle)[1]), 10,
                                 "the rank in an answer")[0]
        rank = {"job": job["id"], "attempt": placed["attempt"], "rank": placed["rank"],
                "pid": 4242, "step": 3}
        running = json.dumps(dict(body, ranks=[dict(rank, state="running")])).encode()
        counted(running, "parsed")
        for _ in range(2):
            self.assertEqual(counted(running, "repeated")[0], 200)
        view = c.job(job["id"])
        self.assertEqual((view["state"], view["ranks"][0]["pid"]), ("running", 4242))
        # A repeat still counts as contact: the node's last_seen moves with it.
        seen = node_last_seen(c, "memo1")
        time.sleep(0.05)
        self.assertEqual(counted(running, "repeated")[0], 200)
        self.assertGreater(node_last_seen(c, "memo1"), seen)

        # Bytes that differ from the kept ones are parsed and checked: a body with junk
        # after the same JSON, then a report for a node this connection is not.
        status, ans = counted(running + b"x", "none")
        self.assertEqual((status, ans["error"]["code"]), (400, "bad_json"))
        status, ans = counted(json.dumps(dict(body, node="nosuch")).encode(), "parsed")
        self.assertEqual(status, 404, ans)

        # After the repeats, the exit is seen: the job succeeds.
        exited = json.dumps(dict(body, ranks=[dict(rank, state="exited", exit_code=0)]))
        self.assertEqual(counted(exited.encode(), "parsed")[0], 200)
        self.assertEqual(c.wait_job(job["id"])["state"], "succeeded")
        self.assertEqual(counted(exited.encode(), "repeated")[0], 200)
        self.assertEqual(c.job(job["id"])["state"], "succeeded")


if __name__ == "__main__":
    unittest.main()
