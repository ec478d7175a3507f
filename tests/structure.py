# SPDX-License-Identifier: MIT
"""Checks the shape of the tree (issue 10): no source file over 1,500 lines; no cycle
among the C files of the programs, where a file depends on another when it calls a
function or uses a variable that the other defines (read from the built objects with
nm); and no state of a job, attempt, rank or node, nor a rank's `alive`, written in the
controller or the API but by daemon/transition.c. Usage: structure.py SOURCE_ROOT
BUILD_ROOT"""

import collections
import glob
import os
import re
import subprocess
import sys

MAX_LINES = 1500
# An assignment to a model object's state (a struct field or a designated initializer);
# store records take names (`_to_string(`) and are not states. In daemon/, also a state
# parsed from its name (api/ parses them for list filters).
STATE_WRITE = re.compile(r"(->|\.)(state|end_reason)\s*=[^=]")
# Whether a rank may still have a process is state too. A store record's designated
# initializer that copies it from the model (`.alive = rk->alive,`) reads it.
ALIVE_WRITE = re.compile(r"(->|\.)alive\s*=[^=]")
ALIVE_COPY = re.compile(r"^\s*\.alive\s*=\s*\w+->alive\s*,?\s*$")
STATE_PARSE = re.compile(r"\b(job_state|rank_state|node_state|end_reason)_from_string\(")
STATE_WRITER = "daemon/transition.c"


def main():
    source, build = sys.argv[1], sys.argv[2]
    failures = []
    files = subprocess.run(["git", "-C", source, "ls-files", "*.c", "*.h", "*.py"],
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        with open(os.path.join(source, f), errors="replace") as fh:
            n = sum(1 for _ in fh)
        if n > MAX_LINES:
            failures.append("%s has %d lines (at most %d)" % (f, n, MAX_LINES))
        if (f.split("/")[0] in ("daemon", "api") and f.endswith(".c") and f != STATE_WRITER
                and not os.path.basename(f).startswith("test-")):
            with open(os.path.join(source, f), errors="replace") as fh:
                for i, line in enumerate(fh, 1):
                    parsed = f.startswith("daemon/") and STATE_PARSE.search(line)
                    alive = ALIVE_WRITE.search(line) and not ALIVE_COPY.match(line)
                    if (STATE_WRITE.search(line) and "_to_string(" not in line) or parsed or alive:
                        failures.append("%s:%d writes a state outside %s: %s"
                                        % (f, i, STATE_WRITER, line.strip()))

    defined, used = {}, {}
    for obj in glob.glob(os.path.join(build, "**", "*.c.o"), recursive=True):
        rel = os.path.relpath(obj, build)
        if ".p" + os.sep not in rel or any(x in rel for x in ("test-", "fuzz", "bench")):
            continue
        name = rel.split(os.sep)[0] + "/" + rel.split(".p" + os.sep)[-1][:-2]
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDRB":
                defined.setdefault(parts[2], set()).add(name)
            elif len(parts) == 2 and parts[0] == "U":
                used.setdefault(name, set()).add(parts[1])
    if not used:
        failures.append("no objects found under %s" % build)
    graph = collections.defaultdict(set)
    for name, symbols in used.items():
        for s in symbols:
            graph[name] |= defined.get(s, set()) - {name}

    def path(a, b, seen):
        if a == b:
            return [a]
        seen.add(a)
        for n in sorted(graph[a]):
            if n not in seen:
                p = path(n, b, seen)
                if p:
                    return [a] + p
        return None

    for a in sorted(graph):
        for b in sorted(graph[a]):
            back = path(b, a, set())
            if back:
                failures.append("cycle: " + " -> ".join([a] + back))
    for f in failures:
        print(f)
    print("structure: %s" % ("ok" if not failures else "%d problems" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
