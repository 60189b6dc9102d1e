#!/usr/bin/env python3
"""regcache_tokens.py -- the registration cache three ways, on one loop.

Runs the regcache workload (wl_regcache.c) under pinheap's preload shim with
each way of keeping the cache right (BENCH_REGCACHE_CACHE):

  callbacks  pinheap's release listener queues releases, each lookup drains
  tokens     a watch token per entry, a hit validated by pinheap_watch_valid
  ucx        UCX's ucs_rcache (pinheap-bench-ucx; skipped, with the reason,
             when that program was not built)

The runs are interleaved (callbacks, tokens, ucx, callbacks, ...), same
scale and seed; with --threads 1,2 each round runs every variant with 1
thread, then with 2 (the threads share the one cache of the process, as a
runtime's threads share its registration cache: one lock, one set of
registered ranges; the messages are split between them).  Each cell is the
median of its runs.  Writes table.md (the numbers and the command) and
runs.json into --out.

Usage: regcache_tokens.py [--build DIR] [--pinheap SHIM] [--runs N]
                          [--scale X] [--threads N[,N...]] [--out DIR]
Exit status: 0, 1 if a run failed, 2 on a bad option.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

VARIANTS = ("callbacks", "tokens", "ucx")
# The figures of the "extra" member reported per variant (medians).
FIELDS = ("hit_rate", "hit_ns", "put_ns", "release_ns", "releases_timed", "registrations",
          "deregistrations", "invalidations", "release_events", "reg_seconds",
          "probe_release_ns", "probe_deferred_ns")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build", help="the build directory (default build)")
    p.add_argument("--pinheap", help="pinheap's preload shim (default BUILD/tools/libpinheap-preload.so)")
    p.add_argument("--runs", type=int, default=5, help="interleaved runs per variant (default 5)")
    p.add_argument("--scale", type=float, default=5.0, help="amount of work (default 5)")
    p.add_argument("--threads", default="1",
                   help="threads, or a comma-separated list run interleaved (default 1)")
    p.add_argument("--out", default="regcache-tokens-results", help="output directory")
    p.add_argument("--timeout", type=float, default=300, help="seconds per run (default 300)")
    a = p.parse_args(argv)
    try:
        a.thread_counts = [int(t) for t in a.threads.split(",")]
    except ValueError:
        p.error("--threads must be a number or a comma-separated list of numbers, not %r"
                % a.threads)
    if a.runs < 1 or not 0 < a.scale <= 1000 or min(a.thread_counts) < 1:
        p.error("--runs must be >= 1, --scale in (0, 1000], --threads >= 1")
    return a


def run_one(prog, shim, variant, threads, a):
    env = dict(os.environ, LD_PRELOAD=shim, BENCH_REGCACHE_CACHE=variant)
    cmd = [prog, "regcache", repr(a.scale), str(threads), "--expect-malloc", "pinheap"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (variant, r.returncode, r.stderr.strip()))
    line = json.loads(r.stdout.strip().splitlines()[-1])
    if line["extra"].get("cache") != variant:
        raise RuntimeError("%s: the run reports cache %r" % (variant, line["extra"].get("cache")))
    return line


def main(argv):
    a = parse_args(argv)
    bench_dir = os.path.join(a.build, "tools", "bench")
    shim = a.pinheap or os.path.join(a.build, "tools", "libpinheap-preload.so")
    progs = {"callbacks": os.path.join(bench_dir, "pinheap-bench"),
             "tokens": os.path.join(bench_dir, "pinheap-bench"),
             "ucx": os.path.join(bench_dir, "pinheap-bench-ucx")}
    if not os.path.exists(shim):
        print("regcache_tokens: no pinheap shim at %s (build it, or pass --pinheap)" % shim,
              file=sys.stderr)
        return 2
    skipped = {}
    if not os.path.exists(progs["ucx"]):
        skipped["ucx"] = ("pinheap-bench-ucx was not built: CMake found no libucx-dev "
                          "(ucs/memory/rcache.h, libucs, libucm)")
    variants = [v for v in VARIANTS if v not in skipped]
    keys = [(v, th) for th in a.thread_counts for v in variants]
    runs = {k: [] for k in keys}
    errors = []
    for i in range(a.runs):
        for v, th in keys:
            try:
                runs[(v, th)].append(run_one(progs[v], shim, v, th, a))
            except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
                errors.append("run %d, %d thread(s): %s" % (i + 1, th, e))
    cells = {}
    for k in keys:
        if not runs[k]:
            continue
        cell = {"runs": len(runs[k]),
                "seconds": statistics.median(r["seconds"] for r in runs[k]),
                "observer": runs[k][0]["extra"]["observer"]}
        for f in FIELDS:
            cell[f] = statistics.median(r["extra"][f] for r in runs[k])
        cells[k] = cell

    os.makedirs(a.out, exist_ok=True)
    cmd = "python3 tools/bench/regcache_tokens.py --build %s --runs %d --scale %g --threads %s" % (
        a.build, a.runs, a.scale, a.threads)
    lines = ["# Registration cache: callbacks, tokens, UCX's ucs_rcache", "",
             "Command: `%s` (all under pinheap's preload shim, interleaved, medians of %d runs; "
             "%s)." % (cmd, a.runs, " ".join(os.uname()[2:3]) + ", %d CPUs" % os.cpu_count()), "",
             "| variant | observer | threads | time s | hit rate | registrations | "
             "deregistrations | stale found | hit ns | put ns | release ns: in munmap | "
             "release ns: after | loop's releasing free ns (n) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for th, v in [(th, v) for th in a.thread_counts for v in VARIANTS]:
        if v in skipped:
            lines.append("| %s | SKIP | %d | %s | | | | | | | | | |" % (v, th, skipped[v]))
            continue
        c = cells.get((v, th))
        if c is None:
            lines.append("| %s | FAIL | %d | | | | | | | | | | |" % (v, th))
            continue
        stale = "n/a" if v == "ucx" else "%d" % c["invalidations"]
        lines.append("| %s | %s | %d | %.3f | %.4f | %d | %d | %s | %.1f | %s | %d | %s | %.0f (%d) |" % (
            v, c["observer"], th, c["seconds"], c["hit_rate"], c["registrations"],
            c["deregistrations"], stale, c["hit_ns"],
            "%.1f" % c["put_ns"] if v == "ucx" else "-", c["probe_release_ns"],
            "in its next get" if v == "ucx" else "%d" % c["probe_deferred_ns"],
            c["release_ns"], c["releases_timed"]))
    lines += ["",
              "- **threads**: the threads of a run share one cache (one mutex, one set of "
              "registered ranges, the messages split between them), as a runtime's threads share "
              "its registration cache; a release on one thread must reach the entries the other "
              "thread looks up.",
              "- **hit ns**: the cache step on a hit (lock held: callbacks drain the listener's "
              "queue then search; tokens search then `pinheap_watch_valid`; ucx `ucs_rcache_get`), "
              "the clock's own cost taken off.",
              "- **put ns** (ucx only): `ucs_rcache_region_put` at completion, which every use "
              "of a UCX region pays on top of the get.",
              "- **release ns: in munmap**: the release probe after the loop (2000 times: a fresh "
              "64 KiB mapping written, registered, unmapped): the median `munmap`, every handler "
              "inside it (callbacks: the listener queues the range; tokens: the watch index "
              "zeroes the token; ucx: UCM's handler queues the invalidation).",
              "- **release ns: after**: the mean work the cache then does for that release "
              "(callbacks: the drain that finds and deregisters the entry; tokens: the lookup "
              "that finds the token 0, deregisters and unwatches; ucx: done inside its next "
              "`ucs_rcache_get`, not separable). Simulated registration costs are off in the probe.",
              "- **loop's releasing free ns (n)**: the wall time of a buffer's `free()` that gave its "
              "first whole page back (seen with `mincore()`), munmap itself and every handler "
              "inside it included (the listener's queueing, the watch index's invalidation, "
              "UCM's handler); n is how many such frees (median).",
              "- **stale found**: entries found stale (callbacks: invalidated from the queue; "
              "tokens: a hit whose token was 0); ucs_rcache does not report it."]
    if errors:
        lines += ["", "Errors:"] + ["- " + e for e in errors]
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "runs.json"), "w") as f:
        json.dump({"command": cmd, "skipped": skipped, "errors": errors,
                   "cells": {"%s/%d" % k: c for k, c in cells.items()},
                   "runs": {"%s/%d" % k: r for k, r in runs.items()}}, f, indent=1)
    print("\n".join(lines))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
