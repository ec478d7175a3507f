# SPDX-License-Identifier: MIT
"""axctld on PostgreSQL (issue 15): a real controller with `--db postgresql://...` on a
private server (tests/pgserver.py) runs a multi-rank job to success with the right
value, and after a SIGKILL and a restart on the same URL every job it acknowledged is
there, in the state it had; the URL's password shows in no log. Skipped (77) where
PostgreSQL is not installed."""

import os

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


if __name__ == "__main__":
    axtest.main(skip=axtest.pg_missing())
