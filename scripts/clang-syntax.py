#!/usr/bin/env python3
"""clang-syntax.py BUILD_DIR - checks every C file of a gcc build with
clang's front end (-fsyntax-only, the build's own flags, so -Werror).

Why: `make test` builds with gcc, `make fuzz` with clang, and a warning
only clang gives (-Wunsequenced once, in a test) broke `make fuzz`
unseen by CI. Run after the build (generated sources and headers exist
then), it takes seconds: nothing is code-generated or linked.

Exit status 1 if any file has a diagnostic; each file's output is
printed. Needs BUILD_DIR/compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS).
"""
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys

# gcc options clang does not take, or that mean something else there.
DROP_PREFIXES = ("-fsanitize", "-fno-sanitize")


def clang_args(entry, clang):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out = [clang]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c" or a.startswith(DROP_PREFIXES):
            continue
        out.append(a)
    # gcc-only warning names in the flags must not become errors
    out += ["-fsyntax-only", "-Wno-unknown-warning-option"]
    return out


def check(entry, clang):
    p = subprocess.run(clang_args(entry, clang), cwd=entry["directory"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return entry["file"], p.returncode, p.stdout.decode(errors="replace")


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    clang = shutil.which("clang")
    if not clang:
        print("clang-syntax: clang not found (make deps installs it)", file=sys.stderr)
        return 2
    with open(os.path.join(sys.argv[1], "compile_commands.json")) as f:
        entries = [e for e in json.load(f) if e["file"].endswith(".c")]
    failed = 0
    jobs = os.cpu_count() or 1
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for path, rc, out in ex.map(lambda e: check(e, clang), entries):
            if rc != 0 or out.strip():
                failed += 1
                print("clang-syntax: %s\n%s" % (path, out), end="" if out.endswith("\n") else "\n")
    print("clang-syntax: %d files, %d with diagnostics" % (len(entries), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
