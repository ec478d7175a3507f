# SPDX-License-Identifier: MIT
"""REST API contract of docs/PROTOCOL.md against the real controller (issue 2): input
validation with the field at fault, error codes and statuses, idempotent submission,
and the CLI's exit status for a bad spec. One controller and one agent serve every test
of this file; the jobs here are tiny."""

import json
import os
import unittest

import axtest


class ApiTest(axtest.ClusterTestCase):
    def setUp(self):
        self.c = self.start_cluster(1)

    def quick_spec(self, name="quick", **extra):
        spec = {"name": name, "command": [axtest.AXWORK, "--steps", "1", "--step-ms", "1"],
                "ranks": 1, "env": {"AXTEST_MARKER": self.c.marker}}
        spec.update(extra)
        return spec

    def assert_error(self, status, body, want_status, want_code, want_field=None):
        self.assertEqual(status, want_status, body)
        self.assertIsInstance(body, dict, body)
        err = body.get("error")
        self.assertIsInstance(err, dict, body)
        self.assertEqual(err.get("code"), want_code, body)
        self.assertTrue(err.get("message"), "error without a message: %r" % body)
        if want_field is not None:
            self.assertEqual(err.get("field"), want_field, body)

    def test_healthz(self):
        status, body, _ = self.c.api("GET", "/healthz")
        self.assertEqual(status, 200)
        self.assertEqual(body["status"], "ok")
        self.assertEqual(body["ready_nodes"], len(self.c.agents))

    def test_malformed_json_is_bad_json(self):
        for raw in (b"{", b"{\"ranks\": 1,}", b"not json", b"\xff\xfe"):
            status, body, _ = self.c.api("POST", "/v1/jobs", raw=raw)
            self.assert_error(status, body, 400, "bad_json")
        # A body that is JSON but not an object is a request of the wrong shape.
        status, body, _ = self.c.api("POST", "/v1/jobs", raw=b"[1, 2]")
        self.assertEqual(status, 400, body)
        self.assertIn(body["error"]["code"], ("bad_json", "invalid_spec", "bad_request"))

    def test_invalid_specs_name_the_field(self):
        base = self.quick_spec()
        cases = [
            ({"ranks": 0}, "ranks"),
            ({"ranks": "x"}, "ranks"),
            ({"ranks": 1.5}, "ranks"),
            ({"bogus": 1}, "bogus"),
            ({"command": "echo hi"}, "command"),
            ({"command": ["echo", 1]}, "command"),
            ({"command": []}, "command"),
            ({"priority": -1}, "priority"),
            ({"priority": 1001}, "priority"),
            ({"ranks": 4, "ranks_per_node": 3}, "ranks_per_node"),
            ({"restart": {"max_restarts": -1}}, "restart.max_restarts"),
            ({"restart": {"bogus": 1}}, "restart.bogus"),
            # An unlimited crash loop is not something a user may ask for.
            ({"restart": {"max_failures_without_progress": 0}},
             "restart.max_failures_without_progress"),
            ({"env": {"A": 1}}, "env"),
        ]
        for change, field in cases:
            spec = dict(base)
            spec.update(change)
            status, body, _ = self.c.api("POST", "/v1/jobs", spec)
            with self.subTest(change=change):
                self.assert_error(status, body, 400, "invalid_spec")
                self.assertTrue(body["error"].get("field", "").startswith(field),
                                "field %r for %r" % (body["error"].get("field"), change))
        missing = dict(base)
        del missing["command"]
        status, body, _ = self.c.api("POST", "/v1/jobs", missing)
        self.assert_error(status, body, 400, "invalid_spec", "command")
        missing = dict(base)
        del missing["ranks"]
        status, body, _ = self.c.api("POST", "/v1/jobs", missing)
        self.assert_error(status, body, 400, "invalid_spec", "ranks")
        # None of them may have created a job.
        self.assertEqual(self.c.api_ok("GET", "/v1/jobs")["jobs"], [])

    def test_cli_rejects_bad_spec_with_exit_2(self):
        path = os.path.join(self.c.tmp, "bad.json")
        for spec in ({"command": ["true"], "ranks": 0}, {"command": "true", "ranks": 1},
                     {"command": ["true"], "ranks": 1, "bogus": True}):
            with open(path, "w") as f:
                json.dump(spec, f)
            p = self.c.cli("submit", "-f", path)
            with self.subTest(spec=spec):
                self.assertEqual(p.returncode, 2, "stdout %r stderr %r" % (p.stdout, p.stderr))
                lines = p.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, "want one line, got %r" % p.stderr)
        with open(path, "w") as f:
            f.write("{ not json")
        p = self.c.cli("submit", "-f", path)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertEqual(self.c.api_ok("GET", "/v1/jobs")["jobs"], [])

    def test_body_over_one_mib_is_413(self):
        spec = self.quick_spec()
        spec["env"]["PAD"] = "x" * (1024 * 1024 + 16)
        status, body, _ = self.c.api("POST", "/v1/jobs", spec)
        self.assertEqual(status, 413, body)
        if isinstance(body, dict):
            self.assertEqual(body["error"]["code"], "too_large")
        # The controller is still fine afterwards.
        self.assertEqual(self.c.api("GET", "/healthz")[0], 200)

    def test_a_browsers_headers_are_served_and_huge_ones_refused(self):
        # Each connection's memory is 16 KiB (api/api.c, API_CONNECTION_MEMORY), of
        # which libmicrohttpd keeps cookies twice (the header and each cookie parsed):
        # a browser's headers with a few KiB of cookies, as another site on the same
        # host name may leave, are served; headers of 20 KiB get 431.
        cookies = {"Cookie": "; ".join("k%d=%s" % (i, "v" * 40) for i in range(100))}
        for headers in ({"Cookie": "c=" + "x" * 6144}, cookies, {"X-Pad": "x" * 12288}):
            status, body, _ = self.c.api("GET", "/v1/jobs", headers=headers)
            self.assertEqual(status, 200, body)
        status, body, _ = self.c.api("GET", "/v1/jobs", headers={"X-Pad": "x" * 20480})
        self.assertEqual(status, 431, body)
        # A body larger than the connection's memory still arrives whole.
        spec = self.quick_spec()
        spec["env"].update(PAD1="y" * 16000, PAD2="z" * 16000)
        status, body, _ = self.c.api("POST", "/v1/jobs", spec)
        self.assertEqual(status, 201, body)
        job = self.c.api_ok("GET", "/v1/jobs/%d" % body["id"])
        self.assertEqual(job["spec"]["env"]["PAD1"], "y" * 16000)
        self.assertEqual(job["spec"]["env"]["PAD2"], "z" * 16000)
        self.assertEqual(self.c.api("GET", "/healthz")[0], 200)

    def test_unknown_job_is_404(self):
        for method, path in (("GET", "/v1/jobs/987654"), ("POST", "/v1/jobs/987654/cancel"),
                             ("GET", "/v1/jobs/987654/events")):
            status, body, _ = self.c.api(method, path)
            with self.subTest(path=path):
                self.assert_error(status, body, 404, "not_found")
        status, body, _ = self.c.api("GET", "/v1/nope")
        self.assertEqual(status, 404, body)
        p = self.c.cli("status", "987654")
        self.assertNotEqual(p.returncode, 0)

    def test_unknown_job_subpath_is_404(self):
        # Deny by default: a path beside a real route is not served by that route.
        view = self.c.submit(self.quick_spec())
        for method, path in (("GET", "/v1/jobs/%d/x" % view["id"]),
                             ("GET", "/v1/jobs/%d/logs/extra" % view["id"]),
                             ("GET", "/v1/jobsx"), ("GET", "/v1/jobs/%d/" % view["id"])):
            status, body, _ = self.c.api(method, path)
            with self.subTest(path=path):
                self.assert_error(status, body, 404, "not_found")
        self.c.wait_job(view["id"], timeout=30)

    def test_wrong_method_is_405(self):
        status, body, _ = self.c.api("DELETE", "/v1/jobs")
        self.assert_error(status, body, 405, "method_not_allowed")

    def test_cancel_finished_job_is_409(self):
        view = self.c.submit(self.quick_spec())
        self.assertIn(view["state"], ("pending", "starting", "running", "succeeded"), view)
        done = self.c.wait_job(view["id"], timeout=30)
        self.assertEqual(done["state"], "succeeded", done)
        status, body, _ = self.c.cancel(view["id"])
        self.assert_error(status, body, 409, "conflict")
        self.assertEqual(self.c.job(view["id"])["state"], "succeeded")

    def test_idempotency_key_gives_one_job(self):
        spec = self.quick_spec(name="idem")
        status1, first, _ = self.c.api("POST", "/v1/jobs", spec, {"Idempotency-Key": "k-123"})
        status2, second, _ = self.c.api("POST", "/v1/jobs", spec, {"Idempotency-Key": "k-123"})
        self.assertEqual(status1, 201, first)
        self.assertEqual(status2, 200, second)
        self.assertEqual(first["id"], second["id"])
        jobs = self.c.api_ok("GET", "/v1/jobs")["jobs"]
        self.assertEqual([j["id"] for j in jobs if j["name"] == "idem"], [first["id"]])
        # The same key with another spec is a conflict, not a second job.
        other = self.quick_spec(name="idem-other")
        status, body, _ = self.c.api("POST", "/v1/jobs", other, {"Idempotency-Key": "k-123"})
        self.assert_error(status, body, 409, "conflict")
        # Without a key, the same spec is a new job.
        third = self.c.submit(spec)
        self.assertNotEqual(third["id"], first["id"])
        self.assertEqual(len(self.c.api_ok("GET", "/v1/jobs")["jobs"]), 2)
        for job_id in (first["id"], third["id"]):
            self.c.wait_job(job_id, timeout=30)

    def test_job_view_and_list_shape(self):
        view = self.c.submit(self.quick_spec(name="shape", priority=7))
        for key in ("id", "name", "project", "user", "priority", "state", "attempt", "restarts",
                    "reason", "exit_code", "created_at", "last_checkpoint", "ranks", "spec"):
            self.assertIn(key, view)
        self.assertEqual(view["priority"], 7)
        self.assertEqual(view["spec"]["command"], self.quick_spec()["command"])
        done = self.c.wait_job(view["id"], timeout=30)
        self.assertEqual(done["state"], "succeeded", done)
        self.assertIn(done["exit_code"], (0, None))
        listed = self.c.api_ok("GET", "/v1/jobs?state=succeeded")
        self.assertIn(view["id"], [j["id"] for j in listed["jobs"]])
        self.assertIn("next_after", listed)
        events = self.c.api_ok("GET", "/v1/jobs/%d/events" % view["id"])["events"]
        self.assertTrue(events, "a finished job has an audit trail")
        p = self.c.cli("status", view["id"], "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["state"], "succeeded")
        p = self.c.cli("wait", view["id"])
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    axtest.main()
