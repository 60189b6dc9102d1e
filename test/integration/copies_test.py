#!/usr/bin/env python3
"""copies_test.py -- two copies of pinheap in one process, end to end.

Runs one fixture program (test/fixture/copies_app.c: two core libraries,
each holding a libpinheap.a whole) with leave-pinned unset (the driver
probe under an empty tree: pinheap disabled) and set to 1 (enabled), and
checks each run:
  - it runs to the end (exit status 0; before hooks/copies.c the run with
    leave-pinned set died before main in glibc's free);
  - every check of the program passed (its "FAIL" lines are repeated);
  - stderr holds exactly two warning lines about the copies, one from each,
    each naming both libraries, both prefixes and the fix.

With --refused THIS OTHER (the program's first copy is one no copy of
today can read): each run must end before main with exit status 1 and one
fatal line naming THIS (the copy that refuses, with its prefix), OTHER and
the fix, and nothing on stdout.

usage: copies_test.py PROGRAM LEAVE_PINNED_VAR PROBE_ROOT_VAR [--refused THIS OTHER]
  (the build's names of OMPI_MCA_mpi_leave_pinned and PINHEAP_PROBE_ROOT)
Prints one line per check ("ok" or "FAIL") and "N passed, M failed" last;
exit 1 on failure.
"""
import os
import subprocess
import sys
import tempfile

FIX = "link libpinheap.a into exactly one library"
# [passed, failed]
tally = [0, 0]


def check(cond, what):
    tally[0 if cond else 1] += 1
    print(("ok   " if cond else "FAIL ") + what)


def environment(extra):
    """A clean environment for the program, plus extra."""
    return dict({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}, **extra)


def copies_of(out):
    """(core library name, prefix, path) of each copy, from the program's
    "copy NAME (PREFIX, PATH)" lines."""
    found = []
    for line in out.splitlines():
        if line.startswith("copy ") and line.endswith(")"):
            name, rest = line[5:].split(" (", 1)
            prefix, path = rest[:-1].split(", ", 1)
            found.append((name, prefix, path))
    return found


def run(program, label, extra):
    try:
        p = subprocess.run([program], env=environment(extra), capture_output=True, text=True,
                           timeout=240)
    except subprocess.TimeoutExpired:
        check(False, label + ": finished within 240 s")
        return
    check(p.returncode == 0, "%s: exit status 0 (got %d; stderr: %s)"
          % (label, p.returncode, " | ".join(p.stderr.strip().splitlines()[-4:])))
    for line in p.stdout.splitlines():
        if line.startswith("FAIL"):
            check(False, "%s: %s" % (label, line[5:]))
        elif line.startswith("ok"):
            tally[0] += 1
    copies = copies_of(p.stdout)
    check(len(copies) == 2, "%s: the program named both copies" % label)
    warnings = [l for l in p.stderr.splitlines() if FIX in l]
    check(len(warnings) == 2, "%s: two warning lines on the copies, one from each (got %d: %s)"
          % (label, len(warnings), warnings))
    for w in warnings:
        named = all(c[2] in w and ("prefix " + c[1]) in w for c in copies)
        check(w.startswith("pinheap: warning: ") and named,
              "%s: the warning names both objects and prefixes: %s" % (label, w))
    print("---- %s: stdout" % label)
    print(p.stdout.rstrip())
    print("---- %s: stderr" % label)
    print(p.stderr.rstrip())


def run_refused(program, label, extra, this, other):
    p = subprocess.run([program], env=environment(extra), capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 1, "%s: exit status 1 (got %d)" % (label, p.returncode))
    check(p.stdout == "", "%s: main was not reached (stdout: %r)" % (label, p.stdout[:200]))
    lines = p.stderr.splitlines()
    check(len(lines) == 1 and lines[0].startswith("pinheap: fatal: ") and this in lines[0]
          and other in lines[0] and FIX in lines[0],
          "%s: one fatal line naming both objects and the fix (got %r)" % (label, lines))


def main():
    refused = len(sys.argv) == 7 and sys.argv[4] == "--refused"
    if len(sys.argv) != 4 and not refused:
        print("usage: copies_test.py PROGRAM LEAVE_PINNED_VAR PROBE_ROOT_VAR "
              "[--refused THIS OTHER]", file=sys.stderr)
        return 2
    program, leave_pinned, probe_root = sys.argv[1:4]
    name = os.path.basename(program)
    with tempfile.TemporaryDirectory(prefix="pinheap-copies.") as root:
        for label, extra in ((" leave-pinned unset", {probe_root: root}),
                             (" leave-pinned 1", {probe_root: root, leave_pinned: "1"})):
            if refused:
                run_refused(program, name + label, extra, sys.argv[5], sys.argv[6])
            else:
                run(program, name + label, extra)
    print("%d passed, %d failed" % (tally[0], tally[1]))
    return 1 if tally[1] else 0


if __name__ == "__main__":
    sys.exit(main())
