#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The status page in a real browser: Debian's chromium, headless, loads axctld's / from
a live controller with --auth and a user's token, runs its script, and the rendered DOM
is checked: the user's jobs with their goodput figure and timeline, the queue with its
wait reason, the nodes; another project's job absent; a failure reason carrying markup
shown as text, never run. Without a token the page asks for one. Skips (exit 77) only
where chromium is not installed. AXTEST_SCREENSHOT=PATH also saves the page's picture
there (docs/status-page.png is made so)."""

import decimal
import html.parser
import os
import shutil
import subprocess
import sys
import tempfile

import axtest

HOSTILE = '<img src=x onerror="document.title=1"><script>document.title="pwned"</script>'


def chromium():
    for name in ("chromium", "chromium-headless-shell", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def to_fixed_1(x):
    """JavaScript's x.toFixed(1): a tie (41.25) rounds up, where Python's '%.1f' rounds it
    to even (41.2)."""
    return str(decimal.Decimal(x).quantize(decimal.Decimal("0.1"), decimal.ROUND_HALF_UP))


class Dom(html.parser.HTMLParser):
    """The rendered DOM as a list of elements (tag, attrs, text inside) in order."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.elements, self.stack = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        e = {"tag": tag, "attrs": dict(attrs), "text": "", "children": []}
        if self.stack:
            self.stack[-1]["children"].append(e)
        self.elements.append(e)
        if tag not in ("img", "input", "meta", "link", "br"):
            self.stack.append(e)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for e in self.stack:
            e["text"] += data

    def find(self, tag=None, **attrs):
        return [e for e in self.elements if (tag is None or e["tag"] == tag)
                and all(e["attrs"].get(k.replace("_", "-")) == v for k, v in attrs.items())]


def descendants(e):
    for c in e["children"]:
        yield c
        yield from descendants(c)


class StatusPageTest(axtest.ClusterTestCase):
    def browse(self, url, *extra):
        """Loads url, runs its script in virtual time; stdout (the DOM with --dump-dom)."""
        profile = tempfile.mkdtemp(prefix="axtest-chromium-")
        self.addCleanup(shutil.rmtree, profile, True)
        argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--user-data-dir=" + profile, "--virtual-time-budget=8000",
                "--window-size=1400,1000"] + list(extra or ["--dump-dom"]) + [url]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=90 * axtest.TIME_SCALE)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        return p.stdout

    def test_page_renders_jobs_goodput_and_escapes(self):
        c = axtest.Cluster(1, controller_args=["--auth"], name=self._testMethodName)
        self.addCleanup(self._finish_cluster, c)
        c.token = axtest.create_token(c.db, "--name", "root", "--role", "admin")
        alice = axtest.create_token(c.db, "--name", "alice", "--role", "user", "--project", "p1")
        token_file = os.path.join(c.tmp, "n1.token")
        with open(token_file, "w") as f:
            f.write(axtest.create_token(c.db, "--name", "n1", "--role", "agent", "--node", "n1"))
        os.chmod(token_file, 0o600)
        c.agent_args = [["--token-file", token_file]]
        c.start()

        hostile = c.submit({"name": "hostile", "project": "p1", "ranks": 1,
                            "command": ["sh", "-c", "echo '%s'; exit 3" % HOSTILE],
                            "env": {"AXTEST_MARKER": c.marker},
                            "failure_rules": [{"pattern": "script", "action": "fatal"}]})
        crash = c.work_job("crash", ranks=1, steps=30, step_ms=100, checkpoint_every=10,
                           args=["--crash-at", "25@1"],
                           restart={"max_restarts": 3, "backoff_initial_s": 0},
                           spec={"project": "p1"})
        crash.id = c.submit(crash.spec)["id"]
        self.assertEqual(c.wait_job(hostile["id"])["state"], "failed")
        self.assertEqual(c.wait_job(crash.id)["state"], "succeeded")
        cpus = c.nodes()[0]["inventory"]["cpus"]
        big = {"resources": {"cpus": cpus}, "project": "p1"}
        running = c.work_job("long", ranks=1, steps=100000, step_ms=100, spec=big)
        running.id = c.submit(running.spec)["id"]
        c.wait_running(running.id)
        waiting = c.submit(dict(c.work_job("queued", ranks=1, spec=big).spec))
        other = c.submit(dict(c.work_job("secret", ranks=1, spec={"project": "p2"}).spec))
        why = axtest.wait_for(lambda: c.job(waiting["id"])["reason"], 10, "a wait reason")

        dom = Dom(self.browse(c.url + "/#token=" + alice))
        error = dom.find("p", id="error")[0]
        self.assertIn("hidden", error["attrs"], error["text"])
        rows = {e["attrs"]["data-job-id"]: e for e in dom.find("tr") if "data-job-id" in e["attrs"]}
        # Alice's jobs, not p2's.
        self.assertNotIn(str(other["id"]), rows)
        for j in (hostile["id"], crash.id, running.id, waiting["id"]):
            self.assertIn(str(j), rows, sorted(rows))
        view = c.job(crash.id)
        row = rows[str(crash.id)]
        cells = [d for d in descendants(row) if d["tag"] == "td"]
        goodput = [d for d in cells if "goodput" in d["attrs"].get("class", "")]
        self.assertEqual([g["text"] for g in goodput], [to_fixed_1(view["goodput"]["ratio"] * 100) + " %"])
        bars = [d for d in descendants(row) if d["attrs"].get("class") == "timeline"]
        self.assertEqual(len(bars), 1)
        buckets = [s["attrs"].get("data-bucket") for s in bars[0]["children"]]
        self.assertEqual(buckets, [s["bucket"] for s in view["goodput"]["timeline"]])
        self.assertEqual(buckets.count("startup"), 2)  # two attempts
        self.assertIn("productive", buckets)
        # The queue, with why the job waits.
        queue_rows = [e for e in dom.find("tr") if e["attrs"].get("data-job-id") == str(waiting["id"])]
        self.assertIn(why, queue_rows[0]["text"])
        self.assertIn("running", rows[str(running.id)]["text"])
        # Nodes by state and kind, and the node list.
        self.assertTrue(dom.find("tr", data_node="n1"))
        self.assertIn("cpu only", " ".join(e["text"] for e in dom.find("td")))
        # The hostile reason is text: no element came of it, and the title is the page's.
        self.assertIn(HOSTILE, rows[str(hostile["id"])]["text"])
        self.assertEqual([e for e in dom.elements if e["tag"] == "img"], [])
        self.assertEqual(len(dom.find("script")), 1)
        self.assertEqual(dom.find("title")[0]["text"], "axctl status")
        # The token left the address at once.
        self.assertNotIn(alice, " ".join(str(e["attrs"]) for e in dom.elements))

        # Without a token: the form, and no data.
        bare = Dom(self.browse(c.url + "/"))
        form = bare.find("form", id="token-form")[0]
        self.assertNotIn("hidden", form["attrs"])
        self.assertIn("needs an API token", bare.find("p", id="error")[0]["text"])
        self.assertFalse([e for e in bare.find("tr") if "data-job-id" in e["attrs"]])

        shot = os.environ.get("AXTEST_SCREENSHOT") or os.path.join(c.tmp, "status-page.png")
        self.browse(c.url + "/#token=" + alice, "--screenshot=" + os.path.abspath(shot),
                    "--hide-scrollbars")
        with open(shot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertGreater(os.path.getsize(shot), 10000)

        for j in (running.id, waiting["id"], other["id"]):
            c.cancel(j)
        c.wait_job(running.id)


if __name__ == "__main__":
    if not chromium():
        print("skipping: chromium is not installed (apt-get install chromium; scripts/deps)")
        sys.exit(77)
    axtest.main()
