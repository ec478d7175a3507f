# SPDX-License-Identifier: MIT
"""`systemd-analyze verify` on the units of systemd/, and checks of the choices the
units document (notify + watchdog, KillMode=process for the agent, ...).

verify insists that ExecStart= names an existing executable, and the installed units
point at bindir, where nothing is installed during a build. So the test writes copies
of the unit templates whose ExecStart points at the binaries in the build tree (from
$AXCTLD and $AXAGENT, set by systemd/meson.build) into a temporary directory and
verifies those. Exits 77 (skipped) only when systemd-analyze is not installed.
Standard library only.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

SOURCE_DIR = os.environ.get("SYSTEMD_SOURCE_DIR", os.path.dirname(os.path.abspath(__file__)))
BUILD_ROOT = os.environ.get("AXTEST_BUILDDIR", os.path.join(SOURCE_DIR, "..", "build"))
AXCTLD = os.environ.get("AXCTLD", os.path.join(BUILD_ROOT, "axctld"))
AXAGENT = os.environ.get("AXAGENT", os.path.join(BUILD_ROOT, "agents", "axagent"))
UNITS = ["axctld.service", "axctld.socket", "axagent.service"]


def render(name, outdir):
    """Writes unit `name` from its template into outdir with build-tree paths."""
    src = os.path.join(SOURCE_DIR, name + ".in")
    if not os.path.exists(src):
        src = os.path.join(SOURCE_DIR, name)
    with open(src) as f:
        text = f.read()
    for key, value in {"AXCTLD": AXCTLD, "AXAGENT": AXAGENT, "CONFIG_DIR": SOURCE_DIR}.items():
        text = text.replace("@%s@" % key, value)
    leftover = re.findall(r"@[A-Z_]+@", text)
    if leftover:
        raise AssertionError("%s: unsubstituted %s" % (name, leftover))
    path = os.path.join(outdir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def unit_settings(path):
    """{section: {key: [values]}} of a unit file, enough for the checks below."""
    settings, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = settings.setdefault(line.strip("[]"), {})
                continue
            key, _, value = line.partition("=")
            section.setdefault(key, []).append(value)
    return settings


class UnitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="axctl-units-")
        cls.paths = {name: render(name, cls.tmp) for name in UNITS}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_verify(self):
        for exe in (AXCTLD, AXAGENT):
            if not os.access(exe, os.X_OK):
                self.fail("%s is not built; ExecStart= must name an executable" % exe)
        # --man=no: the man pages are not installed during a build (docs/man has them).
        cmd = ["systemd-analyze", "verify", "--man=no"] + [self.paths[u] for u in UNITS]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=60)
        # verify also reports problems of unrelated units of the host it loads as
        # dependencies; only lines about ours count.
        ours = [l for l in p.stdout.splitlines()
                if any(u in l for u in UNITS) or self.tmp in l]
        sys.stderr.write("systemd-analyze verify: exit %d\n%s\n" % (p.returncode, p.stdout))
        self.assertEqual(ours, [], "systemd-analyze verify found problems in our units")
        self.assertEqual(p.returncode, 0, p.stdout)

    def test_controller_choices(self):
        unit = unit_settings(self.paths["axctld.service"])
        s = unit["Service"]
        self.assertEqual(s["Type"], ["notify"])
        self.assertTrue(s["WatchdogSec"][0].rstrip("s").isdigit())
        self.assertEqual(s["User"], ["axctl"])
        self.assertEqual(s["StateDirectory"], ["axctl"])
        self.assertEqual(s["ProtectSystem"], ["strict"])
        self.assertEqual(s["RestartPreventExitStatus"], ["2"])
        # Back well within the agents' lease after a crash (docs/OPERATIONS.md), and
        # retried while a full disk is freed, but not when it cannot start at all.
        self.assertEqual(s["RestartSec"], ["100ms"])
        u = unit["Unit"]
        self.assertEqual((u["StartLimitIntervalSec"], u["StartLimitBurst"]), (["10s"], ["10"]))
        self.assertIn("--config", s["ExecStart"][0])
        sock = unit_settings(self.paths["axctld.socket"])["Socket"]
        self.assertTrue(sock["ListenStream"])
        # Deep enough for a whole fleet's reconnects while the controller restarts: as
        # axctld's own listen(2), up to the kernel's cap.
        self.assertEqual(sock["Backlog"], ["65535"])

    def test_agent_choices(self):
        s = unit_settings(self.paths["axagent.service"])["Service"]
        # Ranks must survive an agent restart.
        self.assertEqual(s["KillMode"], ["process"])
        self.assertEqual(s["Restart"], ["always"])
        self.assertEqual(s["OOMPolicy"], ["continue"])
        # Root (it switches ranks to their users) and nothing that ranks inherit and
        # that would stop them from writing checkpoints or opening accelerators.
        self.assertNotIn("User", s)
        for key in ("ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices",
                    "DeviceAllow", "ProtectClock", "NoNewPrivileges", "MemoryDenyWriteExecute",
                    "SystemCallFilter", "RestrictNamespaces", "ReadOnlyPaths"):
            self.assertNotIn(key, s)
        self.assertEqual(s["LimitMEMLOCK"], ["infinity"])
        self.assertEqual(s["TasksMax"], ["infinity"])
        self.assertIn("CAP_SYS_MODULE", s["CapabilityBoundingSet"][0])

    def test_sysusers_and_tmpfiles(self):
        """The entries apply cleanly to an empty root: user first, then directories."""
        if os.geteuid() != 0:
            self.skipTest("systemd-sysusers and systemd-tmpfiles --root need root")
        for tool in ("systemd-sysusers", "systemd-tmpfiles"):
            if shutil.which(tool) is None:
                self.skipTest("%s is not installed" % tool)
        root = os.path.join(self.tmp, "root")
        for kind in ("sysusers.d", "tmpfiles.d"):
            os.makedirs(os.path.join(root, "usr", "lib", kind))
            shutil.copy(os.path.join(SOURCE_DIR, kind, "axctl.conf"),
                        os.path.join(root, "usr", "lib", kind))
        os.makedirs(os.path.join(root, "etc"))
        for cmd in (["systemd-sysusers", "--root", root, "axctl.conf"],
                    ["systemd-tmpfiles", "--root", root, "--create", "axctl.conf"],
                    ["systemd-tmpfiles", "--root", root, "--clean", "axctl.conf"]):
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True, timeout=30)
            self.assertEqual(p.returncode, 0, "%s: %s" % (cmd, p.stdout))
        with open(os.path.join(root, "etc", "passwd")) as f:
            entry = [l for l in f if l.startswith("axctl:")]
        self.assertEqual(len(entry), 1)
        uid = int(entry[0].split(":")[2])
        st = os.stat(os.path.join(root, "var", "lib", "axctl"))
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (uid, 0o750))
        self.assertTrue(os.path.isdir(os.path.join(root, "var", "lib", "axagent")))

    def test_config_files_name_real_keys(self):
        """Every key the default configuration files mention is a flag of the daemon."""
        for conf, exe in (("axctld.conf", AXCTLD), ("axagent.conf.in", AXAGENT)):
            help_text = subprocess.run([exe, "--help"], stdout=subprocess.PIPE,
                                       universal_newlines=True, timeout=10).stdout
            with open(os.path.join(SOURCE_DIR, conf)) as f:
                for line in f:
                    m = re.match(r"^#?([a-z_]+) =", line)
                    if m:
                        flag = "--" + m.group(1).replace("_", "-")
                        self.assertIn(flag, help_text, "%s: %s" % (conf, m.group(0)))

    def test_config_files_list_every_key(self):
        """Every option of a daemon but --config and --help is a key, commented or not,
        in its default configuration file, so the file documents all of them."""
        for conf, exe in (("axctld.conf", AXCTLD), ("axagent.conf.in", AXAGENT)):
            with open(os.path.join(SOURCE_DIR, conf)) as f:
                keys = set(re.findall(r"^#?([a-z_]+) =", f.read(), re.M))
            for flag in help_flags([exe, "--help"]) - {"config", "help"}:
                self.assertIn(flag.replace("-", "_"), keys, "%s lacks %s" % (conf, flag))

    def test_man_pages_name_every_option(self):
        """The man pages name every long option the binaries' --help shows."""
        pages = {"axctld.8": [[AXCTLD, "--help"], [AXCTLD, "token", "--help"]],
                 "axagent.8": [[AXAGENT, "--help"]]}
        if os.access(AXCTL, os.X_OK):
            cmds = [[AXCTL, "--help"]] + [[AXCTL, c, "--help"] for c in AXCTL_COMMANDS]
            pages["axctl.1"] = cmds
        for page, cmds in pages.items():
            with open(os.path.join(SOURCE_DIR, "..", "docs", "man", page)) as f:
                text = f.read()
            groff = shutil.which("groff")
            if groff:
                p = subprocess.run([groff, "-man", "-ww", "-z", "-Tutf8"], input=text,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   universal_newlines=True, timeout=30)
                self.assertEqual(p.stdout, "", "%s: groff warnings" % page)
            for cmd in cmds:
                for flag in help_flags(cmd):
                    self.assertIn("\\-\\-" + flag.replace("-", "\\-"), text,
                                  "%s lacks --%s (from %s)" % (page, flag, " ".join(cmd[1:])))


AXCTL = os.environ.get("AXCTL", os.path.join(BUILD_ROOT, "cli", "axctl"))
AXCTL_COMMANDS = ["submit", "status", "list", "cancel", "wait", "logs", "events", "nodes",
                  "drain", "undrain"]


def help_flags(cmd):
    """The long options a --help text names (--foo, --foo-bar), without the '--'."""
    text = subprocess.run(cmd, stdout=subprocess.PIPE, universal_newlines=True,
                          timeout=10).stdout
    return set(re.findall(r"(?<![\w-])--([a-z][a-z-]*[a-z])", text))


if __name__ == "__main__":
    if shutil.which("systemd-analyze") is None:
        print("systemd-analyze is not installed; skipping")
        sys.exit(77)
    unittest.main(verbosity=2)
