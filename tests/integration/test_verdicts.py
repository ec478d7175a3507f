#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Failure verdicts with the real binaries (issue 11, docs/FAILURE-RULES.md): failure
rules of the operator and of the job matched against a failed rank's log, a dump signal
before a hang is reported, and a node that cannot write its state dir as the node's
fault."""

import json
import os
import signal
import subprocess
import unittest

import axtest

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED_RULES = os.path.join(SOURCE, "profiles", "failure-rules.json")


def say_then(script):
    """A command running the shell script, then axwork with the rest of the arguments."""
    return ["/bin/sh", "-c", script + ' exec "$0" "$@"']


def read(path):
    with open(path) as f:
        return f.read()


def attempt(view, n):
    return [a for a in view["attempts"] if a["attempt"] == n][0]


class VerdictsTest(axtest.ClusterTestCase):
    def test_operator_rule_moves_the_job_but_a_log_blames_no_node(self):
        """A rank dies printing CUDA's uncorrectable-ECC message, one of the shipped
        vendor signatures: the attempt is the node's fault with the line as evidence and
        the job resumes elsewhere. The log is the job's own text, though (a hostile user
        can print any XID line): alone it blames and quarantines no node, even with
        quarantine after a single blame."""
        c = self.start_cluster(2, controller_args=["--failure-rules", SHIPPED_RULES,
                                                   "--quarantine-after", "1"])
        job = c.work_job("ecc", ranks=1, steps=30, step_ms=20, checkpoint_every=5)
        job.spec["command"] = say_then(
            'if [ "$AXCTL_ATTEMPT" = 1 ]; then echo "step 3";'
            ' echo "RuntimeError: CUDA error: uncorrectable ECC error encountered" >&2;'
            ' exit 1; fi;') + job.spec["command"]
        job.id = c.submit(job.spec)["id"]
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        first = attempt(view, 1)
        self.assertEqual((first["end_reason"], first["failure_class"]), ("node_fault", "node"),
                         first)
        self.assertIsNone(first["blamed_node"], first)
        self.assertIn("the operator's rule", first["detail"])
        self.assertIn("uncorrectable ECC error encountered", first["detail"])
        failed_on = first["detail"].split(" on ")[1].split(" ")[0]
        self.assertNotEqual(view["ranks"][0]["node"], failed_on, "moved")
        self.assertIn("node_fault", c.cli("status", job.id).stdout)
        for n in c.nodes():
            self.assertEqual(n["state"], "ready", n)

    def test_job_rules_fatal_retry_and_a_claim_that_blames_nothing(self):
        c = self.start_cluster(2, controller_args=["--quarantine-after", "1"])
        rules = [{"pattern": "^FATAL: config", "action": "fatal", "why": "bad config"},
                 {"pattern": "flaky network", "action": "retry"},
                 {"pattern": "my GPU is bad", "action": "node_fault"}]

        def run(name, script, restart):
            job = c.work_job(name, restart=restart, spec={"failure_rules": rules})
            job.spec["command"] = say_then(script) + job.spec["command"]
            job.id = c.submit(job.spec)["id"]
            return c.wait_job(job.id, timeout=40)

        # fatal: no restart, whatever the budget.
        view = run("fatal", 'echo "FATAL: config missing"; exit 1;', {"max_restarts": 5})
        self.assertEqual((view["state"], view["attempt"]), ("failed", 1), view)
        self.assertIn("fatal failure rule", view["reason"])
        self.assertIn("the job's rule 1 (fatal, bad config): FATAL: config missing",
                      attempt(view, 1)["detail"])

        # retry: spends no budget, but still waits the backoff and ends after the
        # failures in a row without progress.
        view = run("retry", 'echo "flaky network" >&2; exit 7;',
                   {"max_restarts": 0, "backoff_max_s": 1, "max_failures_without_progress": 3})
        self.assertEqual((view["state"], view["attempt"], view["restarts"]), ("failed", 3, 0),
                         view)
        self.assertIn("3 times in a row without progress", view["reason"])

        # The job's own node_fault: the job moves, but no node is blamed or quarantined,
        # however often it says so (quarantine after 1 blame here).
        view = run("claim", 'echo "my GPU is bad"; exit 1;',
                   {"max_restarts": 10, "backoff_max_s": 1, "max_failures_without_progress": 4})
        self.assertEqual((view["state"], view["attempt"]), ("failed", 4), view)
        nodes = [a["detail"].split(" on ")[1].split(" ")[0] for a in view["attempts"]]
        for a in view["attempts"]:
            self.assertEqual((a["end_reason"], a["blamed_node"]), ("node_fault", None), a)
        for earlier, later in zip(nodes, nodes[1:]):
            self.assertNotEqual(earlier, later, "each attempt avoids the node it claimed")
        for n in c.nodes():
            self.assertEqual(n["state"], "ready", n)

        # Bad rules are refused at submit with the field named.
        bad = c.work_job("bad", spec={"failure_rules": [{"pattern": "(", "action": "fatal"}]})
        p = c.cli("submit", "-f", "-", input=json.dumps(bad.spec))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("failure_rules[].pattern", p.stderr)
        # So is one that would hold the controller's loop for seconds per failure.
        slow = c.work_job("slow", spec={"failure_rules": [
            {"pattern": "(a{1,100}){1,100}b", "action": "fatal"}]})
        p = c.cli("submit", "-f", "-", input=json.dumps(slow.spec))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("could take long to match", p.stderr)

    def test_operator_rules_reload_on_sighup_and_a_bad_file_keeps_them(self):
        c = axtest.Cluster(1, name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        rules_path = os.path.join(c.tmp, "rules.json")
        with open(rules_path, "w") as f:
            f.write('[{"pattern": "disk controller reset", "action": "node_fault"}]')
        c.controller_args = ["--failure-rules", rules_path, "--quarantine-after", "0"]
        c.start()

        def fails_with(text):
            job = c.work_job("says", restart={"max_restarts": 0})
            job.spec["command"] = say_then('echo "%s"; exit 1;' % text) + job.spec["command"]
            job.id = c.submit(job.spec)["id"]
            view = c.wait_job(job.id, timeout=30)
            return attempt(view, 1)["end_reason"]

        self.assertEqual(fails_with("disk controller reset"), "node_fault")
        self.assertEqual(fails_with("PCIe link down"), "rank_exit")
        with open(rules_path, "w") as f:
            f.write('[{"pattern": "PCIe link down", "action": "node_fault"}]')
        c.controller.proc.send_signal(signal.SIGHUP)
        axtest.wait_for(lambda: "failure rules reloaded" in read(c.controller.stderr_path),
                        10, "the reload")
        self.assertEqual(fails_with("PCIe link down"), "node_fault")
        with open(rules_path, "w") as f:
            f.write('[{"pattern": "(", "action": "node_fault"}]')
        c.controller.proc.send_signal(signal.SIGHUP)
        axtest.wait_for(lambda: "keeping the old failure rules" in
                        read(c.controller.stderr_path), 10, "the refusal")
        self.assertEqual(fails_with("PCIe link down"), "node_fault")

        # At start, a bad file is a configuration error: exit 2 with the reason.
        p = subprocess.run([axtest.AXCTLD, "--listen", "127.0.0.1:0", "--db",
                            os.path.join(c.tmp, "other.db"), "--failure-rules", rules_path],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("rules.json", p.stderr)
        self.assertIn("pattern", p.stderr)

    def test_hang_signal_dumps_stacks_before_the_attempt_is_stopped(self):
        c = self.start_cluster(1)
        # A program that hangs, and prints its "stacks" on SIGUSR1.
        script = ('trap "echo dumping stacks of $$" USR1; echo 1 > "$AXCTL_PROGRESS_FILE";'
                  ' while :; do sleep 0.1; done')
        spec = {"name": "hangs", "command": ["/bin/sh", "-c", script], "ranks": 1,
                "hang_timeout_s": 1, "hang_signal": "SIGUSR1", "hang_signal_grace_s": 2,
                "restart": {"max_restarts": 0}, "env": {"AXTEST_MARKER": c.marker}}
        job_id = c.submit(spec)["id"]
        view = c.wait_job(job_id, timeout=30)
        self.assertEqual(view["state"], "failed", view)
        self.assertEqual(attempt(view, 1)["end_reason"], "hang")
        log = c.logs(job_id, 0)
        self.assertIn("dumping stacks", log)
        self.assertEqual(view["spec"]["hang_signal"], "SIGUSR1")
        # The hang was reported only after the grace: ended >= started + 1 s + 2 s.
        a = attempt(view, 1)
        took = axtest.parse_time(a["ended_at"]) - axtest.parse_time(a["started_at"])
        self.assertGreaterEqual(took, 2.9, a)
        p = c.cli("submit", "-f", "-", input=json.dumps(
            dict(spec, hang_signal="SIGKILL")))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("hang_signal", p.stderr)

    def test_a_full_state_dir_is_the_nodes_fault(self):
        """n1's state dir is a small tmpfs that fills up: its rank cannot even be laid
        out. The node turns unhealthy with the reason, the attempt is its fault, and once
        space is back the job runs and succeeds; nothing stays starting."""
        c = axtest.Cluster(2, name=self._testMethodName,
                           controller_args=["--quarantine-after", "0"])
        self.addCleanup(self._finish_cluster, c)
        disk = os.path.join(c.tmp, "n1")
        self.mount_small_disk(disk, size="8m")
        c.start()
        axtest.fill_disk(disk)
        job = c.work_job("full", ranks=2, ranks_per_node=1, steps=20, step_ms=20)
        job.id = c.submit(job.spec)["id"]
        node = axtest.wait_for(lambda: (lambda n: n if n["state"] == "unhealthy" else None)(
            {n["name"]: n for n in c.nodes()}["n1"]), 30, "n1 unhealthy")
        self.assertIn("cannot write rank state", node["reason"])
        view = c.job(job.id)
        first = attempt(view, 1)
        self.assertEqual((first["failure_class"], first["blamed_node"]), ("node", "n1"), first)
        self.assertIn(view["state"], ("restarting", "pending"))
        os.unlink(os.path.join(disk, "filler"))
        view = self.assert_succeeded_with_value(c, job, timeout=60)
        self.assertEqual({n["name"]: n for n in c.nodes()}["n1"]["state"], "ready")


if __name__ == "__main__":
    unittest.main()
