#!/usr/bin/env python3
"""faults.py FIXTURE_DIR CORE_LIB [RUNS] -- which pages of the core library's
.bss/.lbss a start-up writes (issue 30 item 4, the transitive case).

Runs FIXTURE_DIR/B/app (built by fixtures.py: its core library is CORE_LIB)
under `perf record -e minor-faults -d` with PINHEAP_MODE=on, RUNS times
(default 3), and prints the number of page faults of the process and of
anonymous pages that the core library's own code touched, then, for the
last run, each such page with the variable at the faulting address (nm of
CORE_LIB).  Needs perf (root, or perf_event_paranoid <= 1)."""
import bisect
import os
import subprocess
import sys
import tempfile


def faults(app, out):
    subprocess.run(["perf", "record", "-q", "-e", "minor-faults", "-c", "1", "-d", "-o", out,
                    "env", "-i", "PATH=/usr/bin:/bin", "PINHEAP_MODE=on", app],
                   capture_output=True, check=True)
    p = subprocess.run(["perf", "script", "-i", out, "-F", "comm,addr,ip,sym,dso"],
                       capture_output=True, text=True)
    return [line for line in p.stdout.splitlines() if " app " in line]


def main():
    fx, lib = sys.argv[1], os.path.abspath(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    syms = []
    for line in subprocess.run(["nm", "-S", "--defined-only", lib], capture_output=True,
                               text=True).stdout.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "bBdD":
            syms.append((int(p[0], 16), int(p[1], 16), p[3]))
    syms.sort()
    starts = [s[0] for s in syms]
    init = int(subprocess.run(["sh", "-c", "nm %s | awk '$3 == \"_init\" {print $1}'" % lib],
                              capture_output=True, text=True).stdout.split()[0], 16)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(runs):
            lines = faults(os.path.join(fx, "B", "app"), os.path.join(tmp, "perf.data"))
            anon = [line for line in lines if "//anon" in line and os.path.basename(lib) in line]
            print("run %d: %d page faults, %d of anonymous pages written by the core library"
                  % (r + 1, len(lines), len(anon)))
    base = None
    for line in lines:
        f = line.split()
        if base is None and len(f) > 2 and f[2] == "_init" and os.path.basename(lib) in line:
            base = int(f[1], 16) - init
    for line in anon if base is not None else []:
        f = line.split()
        off = int(f[1], 16) - base
        i = bisect.bisect_right(starts, off) - 1
        print("  page %#x  %-24s (at %#x, by %s)" % (off >> 12, syms[i][2] if i >= 0 else "?",
                                                    off, f[-2]))


if __name__ == "__main__":
    main()
