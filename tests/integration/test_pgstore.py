# SPDX-License-Identifier: MIT
"""axctld on PostgreSQL (issue 15): a real controller with `--db postgresql://...` on a
private server (tests/pgserver.py) runs a multi-rank job to success with the right
value, and after a SIGKILL and a restart on the same URL every job it acknowledged is
there, in the state it had; the URL's password shows in no log. A full disk under the
database's tables stops it as on SQLite, without losing what it acknowledged. Skipped
(77) where PostgreSQL is not installed."""

import os
import pwd
import subprocess

import axtest

PASSWORD = "s3cret-never-logged"


class PgStoreTest(axtest.WithPgServer, axtest.ClusterTestCase):
    def test_jobs_survive_a_sigkilled_controller(self):
        # The server trusts loopback, so the password is never asked for: it is here to
        # show that the controller does not log it.
        url = self.pg.create_database().replace("axtest@", "axtest:%s@" % PASSWORD)
        c = self.start_cluster(2, db=url)
        work = c.work_job(ranks=4, ranks_per_node=2, steps=60, step_ms=50)
        work.id = c.submit(work.spec)["id"]
        acknowledged = {work.id: work.spec["name"]}
        for i in range(30):
            body = c.submit({"name": "quick-%d" % i, "command": ["/bin/true"], "ranks": 1},
                            key="k-%d" % i)
            acknowledged[body["id"]] = "quick-%d" % i
        c.wait_running(work.id)

        # Killed while the gang runs: it goes on, and the new controller finds everything.
        c.restart_controller(sigkill=True)
        listed = {j["id"]: j["name"] for j in c.list_jobs()}
        self.assertEqual(listed, acknowledged)
        self.assert_succeeded_with_value(c, work)
        for job_id in acknowledged:
            self.assertEqual(c.wait_job(job_id)["state"], "succeeded")
        # The idempotency keys came back with the jobs: a retry names the same job.
        again = c.submit({"name": "quick-0", "command": ["/bin/true"], "ranks": 1}, key="k-0")
        self.assertIn(again["id"], acknowledged)
        # And the restarted controller goes on taking work, with new ids.
        more = c.submit({"name": "after", "command": ["/bin/true"], "ranks": 2})
        self.assertGreater(more["id"], max(acknowledged))
        self.assertEqual(c.wait_job(more["id"])["state"], "succeeded")

        # The harness writes each start's command line into the log; axctld nothing.
        logs = ""
        for name in ("axctld.stderr", "axctld.stdout"):
            with open(os.path.join(c.tmp, name), errors="replace") as f:
                logs += "".join(line for line in f if not line.startswith("==== start"))
        self.assertIn("state in postgresql://axtest:***@", logs)
        self.assertNotIn(PASSWORD, logs)

    def test_a_full_disk_stops_the_controller_without_losing_acknowledged_jobs(self):
        """The database's tables on a tablespace of 16 MiB that fills up (the server's
        WAL is elsewhere, so PostgreSQL itself goes on): the statement that cannot
        extend a table fails, the turn is rolled back, that request and the next get
        503, axctld exits non-zero, and after the disk grows the restarted controller
        has every job it acknowledged and none it refused."""
        disk = os.path.join(self.pg.dir, "small-%s" % self._testMethodName[-8:])
        self.mount_small_disk(disk, "16m")
        nobody = pwd.getpwnam("nobody")
        os.chown(disk, nobody.pw_uid, nobody.pw_gid)
        os.chmod(disk, 0o700)
        self.pg.psql("CREATE TABLESPACE small LOCATION '%s'" % disk)
        self.addCleanup(self.pg.psql, "DROP TABLESPACE small")
        self.pg.psql('CREATE DATABASE "small" TABLESPACE small')
        self.addCleanup(self.pg.psql, 'DROP DATABASE "small" WITH (FORCE)')
        c = self.start_cluster(0, db=self.pg.url("small"))
        acknowledged, refused = {}, None
        for i in range(200):
            # Random hex: PostgreSQL compresses what repeats.
            spec = {"name": "fill-%d" % i, "command": ["/bin/true"], "ranks": 1,
                    "env": {"PAD_%d" % k: os.urandom(8000).hex() for k in range(16)}}
            status, body, _ = c.api("POST", "/v1/jobs", spec)
            if status != 201:
                refused = (status, body)
                break
            acknowledged[body["id"]] = spec
        self.assertIsNotNone(refused, "a 16 MiB tablespace took 200 jobs of 256 KiB")
        self.assertGreater(len(acknowledged), 0)
        status, body = refused
        self.assertEqual((status, body["error"]["code"]), (503, "unavailable"), body)
        self.assertIn("database", body["error"]["message"])
        self.assert_exits_on_database_failure(c)
        # The operator grows the disk; the restarted controller has every job it
        # acknowledged, whole, and takes new ones.
        subprocess.run(["mount", "-o", "remount,size=64m", disk], check=True)
        c.restart_controller()
        jobs = {j["id"]: j for j in c.list_jobs()}
        self.assertEqual(set(jobs), set(acknowledged), "a job was lost or a refused one kept")
        for job_id, spec in acknowledged.items():
            self.assertEqual(c.job(job_id)["spec"]["env"], spec["env"])
        more = c.submit({"name": "after", "command": ["/bin/true"], "ranks": 1})
        self.assertGreater(more["id"], max(acknowledged))


if __name__ == "__main__":
    axtest.main(skip=axtest.pg_missing())
