# SPDX-License-Identifier: MIT
"""A controller whose database cannot be written (issue 10): the turn that failed is
rolled back, its requests and every later one get 503 `unavailable`, /healthz says why,
axctld exits non-zero for systemd to restart it, and every job it acknowledged before is
there after the restart; a job that ended in the failed turn ends again after it and its
goodput is counted once. The database sits on a 4 MiB tmpfs that fills up (needs root,
as CI has).

A database file deleted or replaced under a running controller (issue 12) is the same
failure: SQLite would go on committing into a file the next start never sees, so the
next write gets 503 and nothing more is acknowledged; an idle controller notices within
about a second, and /healthz says so."""

import os
import re
import shutil
import sqlite3
import time
import unittest

import axtest


class StoreFailureTest(axtest.ClusterTestCase):
    def test_full_disk_stops_the_controller_without_losing_acknowledged_jobs(self):
        self.fill_disk_and_restart("4m")

    def test_full_disk_while_the_wal_is_checkpointed_on_the_stores_thread(self):
        """A disk large enough for the WAL to pass 1,000 pages: the store's own thread
        checkpoints it while the disk fills (and its checkpoints fail at the end), and
        still nothing acknowledged is lost."""
        checkpoints = self.fill_disk_and_restart("16m")
        self.assertGreater(checkpoints, 0, "the store's thread ran no checkpoint")

    def fill_disk_and_restart(self, size):
        """Submits jobs of 256 KiB onto a database on a tmpfs of size until one gets 503,
        then checks the controller stopped and, restarted on a larger disk, has every
        job it acknowledged. Returns the checkpoints the store's thread had run, as
        /metrics said last before the failure."""
        c = axtest.Cluster(0, name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        disk = os.path.join(c.tmp, "small")
        self.mount_small_disk(disk, size)
        c.db = os.path.join(disk, "state.db")
        c.start()
        big = "x" * 16000
        acknowledged = {}
        failed = None
        checkpoints = 0
        for i in range(200):
            spec = {"name": "fill-%d" % i, "command": ["/bin/true"], "ranks": 1,
                    "env": {"PAD_%d" % k: big for k in range(16)}}
            status, body, _ = c.api("POST", "/v1/jobs", spec)
            if status != 201:
                failed = (status, body)
                break
            acknowledged[body["id"]] = spec["name"]
            found = re.search(r'axctl_db_checkpoints_total\{on="thread"\} (\d+)',
                              c.api("GET", "/metrics")[1])
            checkpoints = int(found.group(1)) if found else checkpoints
        self.assertIsNotNone(failed, "a %s disk took 200 jobs of 256 KiB" % size)
        self.assertGreater(len(acknowledged), 0)
        status, body = failed
        self.assertEqual(status, 503, body)
        self.assertEqual(body["error"]["code"], "unavailable", body)
        self.assertIn("database", body["error"]["message"])
        # Until it exits, nothing more is acknowledged and /healthz says why.
        try:
            status, body, _ = c.api("GET", "/healthz", timeout=1)
            self.assertEqual(status, 503, body)
            self.assertEqual(body["status"], "failed", body)
            self.assertIn("database", body["reason"])
            status, body, _ = c.api("GET", "/v1/jobs", timeout=1)
            self.assertEqual(status, 503, body)
        except OSError:
            pass  # it may already have exited; the exit status below still counts
        self.assert_exits_on_database_failure(c)
        # The operator frees space (here: moves the database to a larger disk); the
        # restarted controller has every acknowledged job, intact.
        roomy = os.path.join(c.tmp, "roomy")
        os.makedirs(roomy)
        for name in os.listdir(disk):
            shutil.copy(os.path.join(disk, name), roomy)
        c.db = os.path.join(roomy, "state.db")
        c.start_controller()
        jobs = {j["id"]: j for j in c.list_jobs()}
        for job_id, name in acknowledged.items():
            self.assertIn(job_id, jobs, "acknowledged job %d was lost" % job_id)
            self.assertEqual(jobs[job_id]["name"], name)
            self.assertEqual(c.job(job_id)["spec"]["env"]["PAD_15"], big)
        self.assertEqual(len(jobs), len(acknowledged), "a job that got 503 was kept")
        return checkpoints

    def test_full_disk_as_a_job_ends_counts_its_goodput_once(self):
        """The turn that ends a job writes its state, its goodput figures and its
        project's sums: on a full disk it fails and leaves none of them, and once the
        controller runs again the job ends once and is counted once."""
        c = axtest.Cluster(1, name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        disk = os.path.join(c.tmp, "small")
        self.mount_small_disk(disk, "4m")
        c.db = os.path.join(disk, "state.db")
        c.start()
        flag = os.path.join(c.tmp, "end-now")
        job = c.submit({"name": "ends-on-a-full-disk", "ranks": 1,
                        "command": ["sh", "-c", "while [ ! -e %s ]; do sleep 0.02; done" % flag],
                        "env": {"AXTEST_MARKER": c.marker}})
        c.wait_running(job["id"])
        axtest.fill_disk(disk)
        time.sleep(1)  # a running job's syncs write nothing: the end is the next write
        self.assertEqual(c.api("GET", "/healthz")[0], 200, "a write before the job's end")
        open(flag, "w").close()
        self.assert_exits_on_database_failure(c, timeout=20)
        db = sqlite3.connect(c.db)
        self.addCleanup(db.close)
        self.assertEqual(db.execute("SELECT state FROM job WHERE id = ?",
                                    (job["id"],)).fetchone(), ("running",))
        self.assertEqual(db.execute("SELECT count(*) FROM job_goodput").fetchone(), (0,))
        self.assertEqual(db.execute("SELECT count(*) FROM goodput_total").fetchone(), (0,))
        db.close()
        # Room again (the filler goes): the agent reports the exit to the restarted
        # controller, and the job ends there.
        os.unlink(os.path.join(disk, "filler"))
        c.restart_controller()
        ended = c.wait_job(job["id"], timeout=30)
        self.assertEqual(ended["state"], "succeeded", ended)
        db = sqlite3.connect(c.db)
        self.addCleanup(db.close)
        row = db.execute("SELECT count(*), sum(productive_ms) FROM job_goodput").fetchone()
        self.assertEqual(row[0], 1)
        self.assertEqual(db.execute("SELECT jobs, productive_ms FROM goodput_total"
                                    " WHERE project = 'default'").fetchone(), (1, row[1]))
        project = [p for p in c.api_ok("GET", "/v1/goodput")["projects"]
                   if p["project"] == "default"]
        self.assertEqual([p["jobs"] for p in project], [1])

    def assert_stops(self, c, why):
        """Nothing is acknowledged any more, /healthz says why, axctld exits non-zero."""
        status, body, _ = c.api("POST", "/v1/jobs", {"command": ["/bin/true"], "ranks": 1})
        self.assertEqual(status, 503, body)
        self.assertEqual(body["error"]["code"], "unavailable", body)
        self.assertIn(why, body["error"]["message"])
        try:
            status, body, _ = c.api("GET", "/healthz", timeout=1)
            self.assertEqual((status, body["status"]), (503, "failed"), body)
            self.assertIn(why, body["reason"])
        except OSError:
            pass  # it may already have exited; the exit status below still counts
        proc = c.controller.proc
        axtest.wait_for(lambda: proc.poll() is not None, 10, "axctld to exit")
        self.assertNotEqual(proc.returncode, 0)

    def test_deleted_database_stops_acknowledging(self):
        c = self.start_cluster(0)
        c.submit({"command": ["/bin/true"], "ranks": 1})
        os.unlink(c.db)
        self.assert_stops(c, "was deleted or moved away")

    def test_replaced_database_stops_acknowledging(self):
        c = self.start_cluster(0)
        c.submit({"command": ["/bin/true"], "ranks": 1})
        shutil.copy(c.db, c.db + ".copy")
        os.rename(c.db + ".copy", c.db)
        self.assert_stops(c, "was replaced by another file")

    def test_idle_controller_notices_a_deleted_database(self):
        c = self.start_cluster(0)
        os.unlink(c.db)

        def failed():
            try:
                status, body, _ = c.api("GET", "/healthz", timeout=1)
            except OSError:
                return "exited"
            return status == 503 and body["reason"]
        reason = axtest.wait_for(failed, 5, "/healthz to report the deleted database")
        if reason != "exited":
            self.assertIn("was deleted or moved away", reason)
        proc = c.controller.proc
        axtest.wait_for(lambda: proc.poll() is not None, 10, "axctld to exit")
        self.assertNotEqual(proc.returncode, 0)


if __name__ == "__main__":
    unittest.main()
