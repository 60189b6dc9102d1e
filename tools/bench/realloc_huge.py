#!/usr/bin/env python3
"""realloc_huge.py -- one huge realloc (64 -> 256 MiB by default, every page
of the old block written first), pinheap through its preload shim with
PINHEAP_MODE=on against glibc: RUNS interleaved runs of pinheap-realloc-huge
(one realloc per process), and the medians of the realloc's time, with the
release listener's calls pinheap made during it.  Main entry point: main().

Usage: realloc_huge.py [--build DIR] [--runs N] [--from MIB] [--to MIB]
"""

import argparse
import os
import statistics
import subprocess
import sys


def run_once(prog, args, preload):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
        env["PINHEAP_MODE"] = "on"
    out = subprocess.run([prog] + args, env=env, check=True, capture_output=True, text=True).stdout
    fields = dict(f.split("=", 1) for f in out.split()[1:])
    return float(fields["us"]), fields["releases"], fields["moved"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--from", dest="frm", type=int, default=64)
    ap.add_argument("--to", type=int, default=256)
    a = ap.parse_args()
    if a.runs < 1:
        sys.exit("realloc_huge.py: --runs %d: need at least 1" % a.runs)
    prog = os.path.join(a.build, "tools", "bench", "pinheap-realloc-huge")
    shim = os.path.join(a.build, "tools", "libpinheap-preload.so")
    for path in (prog, shim):
        if not os.path.exists(path):
            sys.exit("realloc_huge.py: %s not found (build first, or pass --build)" % path)
    allocs = [("glibc", None), ("pinheap", shim)]
    times = {name: [] for name, _ in allocs}
    notes = {name: set() for name, _ in allocs}
    for _ in range(a.runs):
        for name, preload in allocs:
            us, rel, moved = run_once(prog, [str(a.frm), str(a.to)], preload)
            times[name].append(us)
            notes[name].add("moved=%s releases=%s" % (moved, rel))
    base = statistics.median(times["glibc"])
    print("realloc %d -> %d MiB, %d interleaved runs each (median, min-max, microseconds)"
          % (a.frm, a.to, a.runs))
    for name, _ in allocs:
        med = statistics.median(times[name])
        print("  %-8s %9.1f us  (%.1f-%.1f)  %.2fx glibc  %s"
              % (name, med, min(times[name]), max(times[name]), med / base,
                 ", ".join(sorted(notes[name]))))


if __name__ == "__main__":
    main()
