# SPDX-License-Identifier: MIT
"""The bash completion of axctl (cli/completion/axctl), run in a real bash: commands,
flags per command, flag values, and job ids and node names asked from a real axctld
(started on 127.0.0.1:0 with a temporary database; one job is submitted and one node
registered through the API). Binaries come from $AXCTLD and $AXCTL (meson sets them);
the completion file from $COMPLETION. Standard library only.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
COMPLETION = os.environ.get("COMPLETION", os.path.join(HERE, "axctl"))
AXCTLD = os.environ.get("AXCTLD", "")
AXCTL = os.environ.get("AXCTL", "")


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


class CompletionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="axctl-completion-")
        # `axctl` must be found on PATH, as it is once installed.
        bindir = os.path.join(cls.tmp, "bin")
        os.mkdir(bindir)
        os.symlink(AXCTL, os.path.join(bindir, "axctl"))
        cls.path = bindir + os.pathsep + os.environ.get("PATH", "")
        cls.ctld = subprocess.Popen([AXCTLD, "--listen", "127.0.0.1:0", "--db",
                                     os.path.join(cls.tmp, "axctld.db")],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    universal_newlines=True)
        cls.url = cls.ctld.stdout.readline().split()[-1]
        post(cls.url + "/v1/agent/register",
             {"node": "gpu-node-7", "hostname": "h7", "address": "127.0.0.1:1",
              "boot_id": "b", "labels": {},
              "inventory": {"cpus": 4, "memory_mb": 1000, "numa_nodes": 1,
                            "accelerators": []}})
        cls.job = post(cls.url + "/v1/jobs", {"command": ["true"], "ranks": 1})["id"]

    @classmethod
    def tearDownClass(cls):
        cls.ctld.terminate()
        cls.ctld.wait()
        cls.ctld.stdout.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def complete(self, line, env=None):
        """The completions bash offers for `line` (the cursor at its end)."""
        words = line.split(" ")
        script = ('source "$COMPLETION"\n'
                  'COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n'
                  '_axctl\n'
                  'printf "%s\\n" "${COMPREPLY[@]}"\n')
        e = dict(os.environ, COMPLETION=COMPLETION, PATH=self.path)
        e.pop("AXCTL_URL", None)
        e.update(env or {})
        p = subprocess.run(["bash", "-c", script, "bash"] + words, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, env=e,
                           cwd=self.tmp, timeout=30)
        self.assertEqual(p.stderr, "")
        return sorted(w for w in p.stdout.split("\n") if w)

    def test_commands_and_flags(self):
        self.assertEqual(self.complete("axctl s"), ["status", "submit"])
        self.assertEqual(self.complete("axctl --json un"), ["undrain"])
        self.assertEqual(self.complete("axctl --"),
                         ["--ca-file", "--help", "--json", "--url", "--version"])
        self.assertIn("--ca-file", self.complete("axctl list --c"))
        self.assertIn("--ranks-per-node", self.complete("axctl submit --ra"))
        self.assertEqual(self.complete("axctl logs --f"), ["--follow"])
        self.assertEqual(self.complete("axctl drain n1 --n"), ["--now"])
        self.assertEqual(self.complete("axctl submit --framework j"), ["jax"])
        self.assertEqual(self.complete("axctl list --state run"), ["running"])
        # A flag's value is not completed as a command or flag.
        self.assertEqual(self.complete("axctl submit --ranks "), [])
        self.assertEqual(self.complete("axctl help ca"), ["cancel"])

    def test_files(self):
        with open(os.path.join(self.tmp, "job.json"), "w") as f:
            f.write("{}")
        self.assertEqual(self.complete("axctl submit -f jo"), ["job.json"])
        # After "--" comes the training command.
        self.assertEqual(self.complete("axctl submit --ranks 2 -- jo"), ["job.json"])
        # --ca-file takes a file, before or after the command, and is skipped as a word.
        self.assertEqual(self.complete("axctl --ca-file jo"), ["job.json"])
        self.assertEqual(self.complete("axctl --ca-file job.json li"), ["list"])

    def test_jobs_and_nodes_from_the_controller(self):
        job = str(self.job)
        self.assertEqual(self.complete("axctl --url %s cancel " % self.url), [job])
        self.assertEqual(self.complete("axctl logs --url=%s " % self.url), [job])
        self.assertEqual(self.complete("axctl drain g", {"AXCTL_URL": self.url}),
                         ["gpu-node-7"])
        # One positional argument only.
        self.assertEqual(self.complete("axctl --url %s wait %s " % (self.url, job)), [])
        # No controller: no candidates, no error output.
        self.assertEqual(self.complete("axctl --url http://127.0.0.1:1 cancel "), [])


if __name__ == "__main__":
    if shutil.which("bash") is None:
        print("bash is not installed; skipping")
        sys.exit(77)
    for exe in (AXCTLD, AXCTL):
        if not exe or not os.access(exe, os.X_OK):
            print("axctld or axctl is not built; skipping")
            sys.exit(77)
    unittest.main(verbosity=2)
