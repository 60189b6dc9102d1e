#!/usr/bin/env python3
"""watch_bench.py -- what watches cost, against issue 29's targets.

  python3 tools/events_bench/watch_bench.py BUILD_DIR [--runs R] [--watches W]
                                            [--releases N] [--no-callgrind]

1. The check: watch_cost's noinline watch_check_once() disassembled
   (objdump: its instructions, and whether any is a locked or exchanging
   one), and its instructions per call under callgrind (the function's own
   cost / its calls).
2. A release: ns per mmap+munmap pair of a fresh page with no watch ever
   made (no handler), with the handler and no watch, and with W watches the
   release does not meet; R runs of each, interleaved (one process per run),
   medians.  Every configuration reserves the same region of W pages (the
   watches' place), so that the kernel's layout of mappings around the
   released page is the same: with the region left out for W = 0 a
   release was ~200 ns cheaper for reasons of the kernel's (the jump came
   between 10 and 100 watched pages and stayed flat up to a million).
   The time is the process's CPU time (user + system), which a
   loaded machine disturbs less than the wall clock.  The target: W = 1e6
   within 1.2x of none.  The same with each release falling at a random
   place between the watches (watch_cost scatter: the index's path out of
   cache), and with the watches themselves at random places (watch_cost
   sparse: one page watched at a random page of each block of 64 pages,
   each release another page of a random block).  Then the instructions
   per munmap (pinheap's
   interposer and everything under it but the kernel) under callgrind, with
   0 and W watches.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def check_instructions(exe, no_callgrind):
    dis = run(["objdump", "-d", "--no-show-raw-insn", exe])
    m = re.search(r"<watch_check_once>:\n(.*?)\n\n", dis, re.S)
    body = [l.split("\t", 1)[-1].strip() for l in m.group(1).splitlines()] if m else []
    body = [i for i in body if not i.startswith(("nop", "xchg   %ax,%ax", "data16", "cs nop"))]
    rmw = [i for i in body if re.match(r"(lock|xchg|cmpxchg)", i)]
    print("check, disassembled: %d instructions: %s" % (len(body), "; ".join(body)))
    print("check, atomic read-modify-write instructions: %d" % len(rmw))
    if no_callgrind or shutil.which("valgrind") is None:
        print("check, callgrind: not run")
        return
    calls = 100000
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, exe,
                        "check", str(calls)], capture_output=True, check=True)
        ann = run(["callgrind_annotate", "--threshold=100", out])
    for line in ann.splitlines():
        if "watch_check_once" in line:
            ir = int(line.split()[0].replace(",", ""))
            print("check, callgrind: %.2f instructions per check (%d calls)" % (ir / calls, calls))
            return
    print("check, callgrind: watch_check_once not found in the profile")


def release_costs(exe, mode, what, runs, watches, releases):
    configs = [("no handler", -1), ("handler, 0 watches", 0),
               ("%d watches" % watches, watches)]
    times = {name: [] for name, _ in configs}
    for _ in range(runs):
        for name, w in configs:
            out = run([exe, mode, str(w), str(releases), str(watches)])
            times[name].append(float(out.split()[-1]))
    med = {name: statistics.median(v) for name, v in times.items()}
    base = med["handler, 0 watches"]
    for name, _ in configs:
        print("%s with %s: median %.0f ns per %s (%s), %.3fx of 0 watches"
              % (mode, name, med[name], what, " ".join("%.0f" % t for t in times[name]),
                 med[name] / base))


def munmap_instructions(exe, watches):
    if shutil.which("valgrind") is None:
        print("release, callgrind: not run")
        return
    n = 2000
    for w in (0, watches):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "cg.out")
            subprocess.run(["valgrind", "--tool=callgrind", "--toggle-collect=munmap",
                            "--callgrind-out-file=" + out, exe, "release", str(w), str(n),
                            str(max(watches, 1))],
                           capture_output=True, check=True)
            ann = run(["callgrind_annotate", out])
        m = re.search(r"^([0-9,]+) .*PROGRAM TOTALS", ann, re.M)
        ir = int(m.group(1).replace(",", "")) if m else 0
        print("release, callgrind: %.0f instructions per munmap with %d watches" % (ir / (n * 1.1), w))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--watches", type=int, default=1000000)
    ap.add_argument("--releases", type=int, default=200000)
    ap.add_argument("--no-callgrind", action="store_true")
    a = ap.parse_args()
    if a.runs < 5:
        sys.exit("watch_bench: runs must be at least 5 (medians of interleaved runs)")
    exe = os.path.join(a.build, "tools", "events_bench", "watch_cost")
    check_instructions(exe, a.no_callgrind)
    release_costs(exe, "release", "mmap+munmap pair", a.runs, a.watches, a.releases)
    release_costs(exe, "scatter", "munmap between watches + refill", a.runs, a.watches,
                  a.releases)
    release_costs(exe, "sparse", "munmap at a random place + refill", a.runs, a.watches,
                  a.releases)
    if not a.no_callgrind:
        munmap_instructions(exe, a.watches)


if __name__ == "__main__":
    main()
