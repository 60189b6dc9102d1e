#!/usr/bin/env python3
"""run.py -- the pinheap benchmark runner.  Main entry point: main().

Compares allocators on the pinheap-bench workloads by LD_PRELOAD: glibc
(nothing preloaded), jemalloc, tcmalloc, mimalloc and pinheap (its preload
shim, libpinheap-preload.so).  Runs are interleaved (A B C D E A B C ...) so
that slow drifts of a noisy machine hit every allocator alike; each
workload is reported at every thread count as the median time and the
median peak RSS of its runs, with ratios to glibc and to the best peer (the
best of glibc, jemalloc, tcmalloc, mimalloc), and a geometric-mean row.
Besides --threads (every workload), the workloads where threads matter
run at 8 and 32 threads too (--many-threads, --many-workloads), more
threads than cores here.  It also measures instructions per malloc(32)+free
pair on the fast path with callgrind (N and 2N pairs; the difference / N,
so start-up cancels), the start-up row (startup.py's row(): a trivial program
linked transitively to pinheap, against an empty core library, alternated
runs), and judges pinheap against issue 30's targets (targets_check).

Writes into --out: table.md (for the README), summary.csv, summary.json,
runs.csv (every run), callgrind.csv, chart.png (gnuplot) with its chart.dat
and chart.gp.  Python 3 standard library only.  See README.md.
"""

import argparse
import csv
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import startup as startup_tool  # the start-up row (startup.py)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# The workloads where the thread count matters, run at MANY_THREADS too.
MANY_WORKLOADS = ["larson", "churn", "prodcons", "smallobj", "tree", "falseshare_active"]
MANY_THREADS = "8,32"

# name -> soname to find on the system (None: nothing preloaded)
PEER_SONAMES = [
    ("glibc", None),
    ("jemalloc", "libjemalloc.so.2"),
    ("tcmalloc", "libtcmalloc_minimal.so.4"),
    ("mimalloc", "libmimalloc.so.2"),
]
PEERS = [name for name, _ in PEER_SONAMES]
# glibc with the old leave-pinned fallback (pinheap-bench --glibc-fallback:
# mallopt(M_TRIM_THRESHOLD, -1), mallopt(M_MMAP_MAX, 0)); not a peer, run on
# --fallback-workloads only (default regcache).
FALLBACK = "glibc_fallback"
ALL_ALLOCATORS = PEERS + ["pinheap", FALLBACK]
# The extra figures of the regcache line reported in the regcache table.
REGCACHE_FIELDS = ["hit_rate", "invalidations", "release_events", "released_mib",
                   "registrations", "registered_mib", "reg_seconds"]
PINHEAP_SHIM = "libpinheap-preload.so"


class UsageError(Exception):
    """A bad option value; the message names the option and the value."""


def note(msg):
    print("run.py: " + msg, file=sys.stderr, flush=True)


# ---- options --------------------------------------------------------------

def int_in_range(option, text, lo, hi):
    try:
        value = int(text)
    except ValueError:
        raise UsageError("%s: '%s' is not an integer; expected %d..%d" % (option, text, lo, hi))
    if value < lo or value > hi:
        raise UsageError("%s: '%s' is out of range; expected %d..%d" % (option, text, lo, hi))
    return value


def list_parse(option, text):
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise UsageError("%s: '%s' is not a comma-separated list (e.g. a,b)" % (option, text))
    if len(set(items)) != len(items):
        raise UsageError("%s: '%s' names an entry twice" % (option, text))
    return items


def args_parse(argv):
    p = argparse.ArgumentParser(
        prog="run.py",
        description="Compare malloc implementations on the pinheap-bench workloads "
                    "(LD_PRELOAD), with callgrind fast-path counts.")
    p.add_argument("--quick", action="store_true",
                   help="small run: 2 runs, scale 0.05, 20000 callgrind pairs "
                        "(explicit --runs/--scale/--pairs still win)")
    p.add_argument("--runs", help="interleaved runs per workload and allocator (default 5)")
    p.add_argument("--scale", help="workload scale, > 0 and <= 1000 (default 1)")
    p.add_argument("--threads", default="1,2", help="thread counts of every workload (default 1,2)")
    p.add_argument("--many-threads", default=MANY_THREADS,
                   help="thread counts of the --many-workloads rows (default %s; 'none' for none)"
                        % MANY_THREADS)
    p.add_argument("--many-workloads", default=",".join(MANY_WORKLOADS),
                   help="the workloads also run at --many-threads (default %s)"
                        % ",".join(MANY_WORKLOADS))
    p.add_argument("--startup-pairs", default=None,
                   help="alternated pairs of the start-up row (default %d; --quick 100)"
                        % startup_tool.PAIRS_DEFAULT)
    p.add_argument("--no-startup", action="store_true", help="skip the start-up row")
    p.add_argument("--workloads", default="all",
                   help="comma-separated workloads (default all; see pinheap-bench list)")
    p.add_argument("--allocators", default=None,
                   help="comma-separated subset of %s (default: every one found)"
                        % ",".join(ALL_ALLOCATORS))
    p.add_argument("--pinheap", default=None,
                   help="path to %s (default BUILD/tools/%s if it exists)"
                        % (PINHEAP_SHIM, PINHEAP_SHIM))
    p.add_argument("--build", default=os.path.join(REPO, "build"),
                   help="the CMake build directory (default REPO/build)")
    p.add_argument("--bench", default=None,
                   help="pinheap-bench program (default BUILD/tools/bench/pinheap-bench)")
    p.add_argument("--pair", default=None,
                   help="pinheap-bench-pair program (default BUILD/tools/bench/pinheap-bench-pair)")
    p.add_argument("--out", default=os.path.join(os.getcwd(), "bench-results"),
                   help="output directory (default ./bench-results)")
    p.add_argument("--pairs", default=None,
                   help="callgrind: N, the smaller pair count (default 200000)")
    p.add_argument("--timeout", default="300", help="seconds allowed per run (default 300)")
    p.add_argument("--fallback-workloads", default="regcache",
                   help="workloads also run on %s, glibc with the old leave-pinned fallback "
                        "(default regcache; 'none' for none)" % FALLBACK)
    p.add_argument("--no-callgrind", action="store_true", help="skip the callgrind measurement")
    p.add_argument("--no-chart", action="store_true", help="skip the gnuplot chart")
    a = p.parse_args(argv)

    a.runs = int_in_range("--runs", a.runs, 1, 1000) if a.runs is not None else (2 if a.quick else 5)
    if a.scale is None:
        a.scale = 0.05 if a.quick else 1.0
    else:
        try:
            value = float(a.scale)
        except ValueError:
            raise UsageError("--scale: '%s' is not a number; expected > 0 and <= 1000" % a.scale)
        if not (0 < value <= 1000) or math.isnan(value):
            raise UsageError("--scale: '%s' is out of range; expected > 0 and <= 1000" % a.scale)
        a.scale = value
    a.pairs = (int_in_range("--pairs", a.pairs, 100, 100000000) if a.pairs is not None
               else (20000 if a.quick else 200000))
    a.timeout = int_in_range("--timeout", a.timeout, 1, 86400)
    a.threads = [int_in_range("--threads", t, 1, 256) for t in list_parse("--threads", a.threads)]
    a.many_threads = ([] if a.many_threads == "none" else
                      [int_in_range("--many-threads", t, 1, 256)
                       for t in list_parse("--many-threads", a.many_threads)])
    a.many_workloads = list_parse("--many-workloads", a.many_workloads)
    a.startup_pairs = (int_in_range("--startup-pairs", a.startup_pairs, 1, 100000)
                       if a.startup_pairs is not None
                       else (100 if a.quick else startup_tool.PAIRS_DEFAULT))
    a.workloads = list_parse("--workloads", a.workloads)
    a.fallback_workloads = ([] if a.fallback_workloads == "none"
                            else list_parse("--fallback-workloads", a.fallback_workloads))
    if a.allocators is not None:
        a.allocators = list_parse("--allocators", a.allocators)
        for name in a.allocators:
            if name not in ALL_ALLOCATORS:
                raise UsageError("--allocators: unknown allocator '%s'; expected some of %s"
                                 % (name, ",".join(ALL_ALLOCATORS)))
    if a.pinheap is not None and not os.path.isfile(a.pinheap):
        raise UsageError("--pinheap: '%s' does not exist; expected the path to %s "
                         "(built by the pinheap-preload target)" % (a.pinheap, PINHEAP_SHIM))
    a.bench = a.bench or os.path.join(a.build, "tools", "bench", "pinheap-bench")
    a.pair = a.pair or os.path.join(a.build, "tools", "bench", "pinheap-bench-pair")
    for option, path in (("--bench", a.bench), ("--pair", a.pair)):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise UsageError(
                "%s: '%s' is not an executable file; build it first:\n"
                "  cmake -S %s -B %s && cmake --build %s -j2 --target pinheap-bench "
                "pinheap-bench-pair\n(or pass --build DIR / %s PATH)"
                % (option, path, REPO, a.build, a.build, option))
    return a


# ---- finding the allocators ----------------------------------------------------

def library_find(soname):
    """Path of soname from `ldconfig -p`, else from the usual library dirs."""
    machine = platform.machine()
    arch_tag = {"x86_64": "x86-64", "aarch64": "AArch64"}.get(machine)
    for ldconfig in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        exe = shutil.which(ldconfig) or (ldconfig if os.path.isfile(ldconfig) else None)
        if not exe:
            continue
        try:
            out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        # lines look like: "\tlibjemalloc.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libjemalloc.so.2"
        for line in out.splitlines():
            fields = line.strip().split(" => ")
            if len(fields) != 2 or fields[0].split(" ")[0] != soname:
                continue
            if arch_tag and arch_tag not in fields[0]:
                continue
            if os.path.isfile(fields[1]):
                return fields[1]
        break
    for d in ("/usr/lib/%s-linux-gnu" % machine, "/lib/%s-linux-gnu" % machine,
              "/usr/local/lib", "/usr/lib64", "/lib64", "/usr/lib", "/lib"):
        path = os.path.join(d, soname)
        if os.path.isfile(path):
            return path
    return None


def allocators_find(a):
    """[(name, preload path or None)] to run, and notes about what was skipped."""
    wanted = a.allocators or ALL_ALLOCATORS
    found, notes = [], []
    for name, soname in PEER_SONAMES:
        if name not in wanted:
            continue
        if soname is None:
            found.append((name, None))
            continue
        path = library_find(soname)
        if path is None:
            msg = "%s skipped: %s not found (ldconfig -p, /usr/lib/%s-linux-gnu)" % (
                name, soname, platform.machine())
            if a.allocators:
                raise UsageError("--allocators: " + msg)
            notes.append(msg)
        else:
            found.append((name, path))
    if "pinheap" in wanted:
        path = a.pinheap or os.path.join(a.build, "tools", PINHEAP_SHIM)
        if os.path.isfile(path):
            found.append(("pinheap", os.path.abspath(path)))
        else:
            msg = ("pinheap skipped: no preload shim at %s (build the pinheap-preload target or "
                   "pass --pinheap PATH)" % path)
            if a.allocators:
                raise UsageError("--allocators: " + msg)
            notes.append(msg)
    if FALLBACK in wanted and (a.allocators or "glibc" in wanted):
        found.append((FALLBACK, None))
    if not found:
        raise UsageError("--allocators: none of the requested allocators is available")
    return found, notes


def page_cache_drop(allocators):
    """Asks the kernel to drop each preloaded library's cached pages, so that
    every allocator starts from a file read back the same way.  A shim
    linked a moment ago sits in the page cache as the linker wrote it, and
    ran `fixed` 1.6x slower than a byte-identical copy until its pages were
    dropped (cause not found: how the kernel holds pages just written, most
    likely).  Best effort:
    a library that cannot be opened is left as it is."""
    for name, path in allocators:
        if path is None:
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            note("%s: page cache of %s not dropped (%s)" % (name, path, e.strerror))
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def expect_token(name, path):
    """What the file defining malloc must contain for this allocator."""
    return "libc.so" if path is None else os.path.basename(path)


def env_for(path):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if path is not None:
        env["LD_PRELOAD"] = path
    return env


def origin_check(name, path, result):
    """Error text if the run was not served by the allocator it was meant for."""
    lib = result.get("malloc_lib", "?")
    if path is None:
        if not os.path.basename(lib).startswith("libc.so"):
            return "glibc run got malloc from '%s'" % lib
    elif os.path.realpath(lib) != os.path.realpath(path):
        return "%s run got malloc from '%s', not from %s (preload failed?)" % (name, lib, path)
    if name == "pinheap" and result.get("pinheap_enabled") == 0:
        return "pinheap shim loaded but pinheap_enabled() is 0: it forwarded to glibc"
    if (name == FALLBACK) != bool(result.get("glibc_fallback")):
        return "%s run reports glibc_fallback %s" % (name, result.get("glibc_fallback"))
    return None


# ---- running ----------------------------------------------------------------------

def workloads_list(bench):
    out = subprocess.run([bench, "list"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise UsageError("--bench: '%s list' failed: %s" % (bench, out.stderr.strip()))
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


def bench_run(a, name, path, workload, threads):
    """One run: (result dict, None) or (None, error text)."""
    cmd = [a.bench, workload, repr(a.scale), str(threads),
           "--expect-malloc", expect_token(name, path)]
    if name == FALLBACK:
        cmd.append("--glibc-fallback")
    try:
        proc = subprocess.run(cmd, env=env_for(path), capture_output=True, text=True,
                              timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s: %s" % (a.timeout, " ".join(cmd))
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        return None, "exit status %d: %s\n%s" % (proc.returncode, " ".join(cmd), tail)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        return None, "no result line from: %s\nstdout: %s" % (" ".join(cmd), proc.stdout[-500:])
    if result.get("workload") != workload or result.get("threads") != threads:
        return None, "result line is for another run: %s" % lines[-1]
    problem = origin_check(name, path, result)
    if problem:
        return None, problem
    return result, None


def callgrind_ir(a, name, path, pairs):
    """Total instructions (Ir) of pinheap-bench-pair `pairs` under callgrind."""
    with tempfile.TemporaryDirectory(prefix="pinheap-cg-") as tmp:
        out_file = os.path.join(tmp, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out_file,
               a.pair, str(pairs), "--expect-malloc", expect_token(name, path)]
        env = env_for(path)
        if name == "pinheap":
            # Under valgrind pinheap leaves malloc to glibc unless told (a memory
            # checker must keep it); callgrind replaces nothing, so pinheap is on.
            env["PINHEAP_MODE"] = "on"
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=max(a.timeout, 600))
        if proc.returncode != 0:
            raise RuntimeError("exit status %d: %s\n%s" % (
                proc.returncode, " ".join(cmd), "\n".join(proc.stderr.splitlines()[-5:])))
        try:
            result = json.loads([l for l in proc.stdout.splitlines() if l.startswith("{")][-1])
        except (IndexError, ValueError):
            raise RuntimeError("no result line from: " + " ".join(cmd))
        problem = origin_check(name, path, result)
        if problem:
            raise RuntimeError(problem)
        totals = None
        with open(out_file) as f:
            for line in f:
                if line.startswith("totals:") or (totals is None and line.startswith("summary:")):
                    totals = int(line.split()[1])
        if totals is None:
            raise RuntimeError("no totals line in callgrind output of: " + " ".join(cmd))
        return totals


def callgrind_measure(a, allocators, notes):
    if a.no_callgrind:
        notes.append("callgrind measurement skipped (--no-callgrind)")
        return {}
    if shutil.which("valgrind") is None:
        notes.append("callgrind measurement skipped: valgrind not installed (apt-get install valgrind)")
        return {}
    n = a.pairs   # the program prints n once; its cost per digit is noise next to n pairs
    results = {}
    for name, path in allocators:
        if name == FALLBACK:       # the pair probe has no fallback mode; glibc's count stands
            continue
        try:
            ir1 = callgrind_ir(a, name, path, n)
            ir2 = callgrind_ir(a, name, path, 2 * n)
            results[name] = (ir2 - ir1) / n
            note("callgrind %-9s %.1f instructions per malloc(32)+free" % (name, results[name]))
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            notes.append("callgrind failed for %s: %s" % (name, e))
            note("callgrind failed for %s: %s" % (name, e))
    return results


def startup_measure(a, names, notes):
    """startup_tool.row() for pinheap's row, or None (said in notes)."""
    if a.no_startup:
        notes.append("start-up row skipped (--no-startup)")
        return None
    if "pinheap" not in names:
        return None
    try:
        return startup_tool.row(a.build, a.startup_pairs, log=note)
    except (startup_tool.StartupError, OSError, subprocess.SubprocessError) as e:
        notes.append("start-up row not measured: %s" % str(e).splitlines()[0])
        note("start-up row not measured: %s" % e)
        return None


# ---- statistics and output ----------------------------------------------------

def geomean(values):
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ratio(x, y):
    return None if x is None or y is None or y <= 0 else x / y


def cells_list(a):
    """The (workload, threads) rows of this run, in order: every workload at
    --threads, then the --many-workloads ones at --many-threads."""
    cells = [(w, t) for w in a.workloads for t in a.threads]
    cells += [(w, t) for w in a.workloads if w in a.many_workloads
              for t in a.many_threads if t not in a.threads]
    return cells


def thread_counts(cells):
    return sorted(set(t for _, t in cells))


def summarize(allocs, cells, runs):
    """rows[(workload, threads)] = {alloc: stats}, plus best peers."""
    rows = {}
    threads = thread_counts(cells)
    for w, t in cells:
        row = {}
        for name in allocs:
            rs = runs.get((name, w, t), [])
            if not rs:
                row[name] = None
                continue
            secs = [r["seconds"] for r in rs]
            rss = [r["peak_rss_kb"] for r in rs]
            row[name] = {
                "median_seconds": statistics.median(secs),
                "min_seconds": min(secs), "max_seconds": max(secs),
                "median_peak_rss_kb": statistics.median(rss),
                "min_peak_rss_kb": min(rss), "max_peak_rss_kb": max(rss),
                "median_rss_end_kb": statistics.median(r["rss_end_kb"] for r in rs),
                "runs": len(rs),
            }
            extras = [r.get("extra") or {} for r in rs]
            if w == "regcache" and all(extras):
                row[name]["regcache"] = {
                    k: statistics.median(e[k] for e in extras) for k in REGCACHE_FIELDS
                    if all(k in e for e in extras)}
                row[name]["regcache"]["observer"] = extras[0].get("observer")
        peers = [(row[p]["median_seconds"], p) for p in PEERS if row.get(p)]
        peers_rss = [(row[p]["median_peak_rss_kb"], p) for p in PEERS if row.get(p)]
        best_t = min(peers) if peers else (None, None)
        best_m = min(peers_rss) if peers_rss else (None, None)
        glibc = row.get("glibc")
        for name in allocs:
            s = row[name]
            if s is None:
                continue
            s["time_vs_glibc"] = ratio(s["median_seconds"], glibc and glibc["median_seconds"])
            s["time_vs_best_peer"] = ratio(s["median_seconds"], best_t[0])
            s["rss_vs_glibc"] = ratio(s["median_peak_rss_kb"], glibc and glibc["median_peak_rss_kb"])
            s["rss_vs_best_peer"] = ratio(s["median_peak_rss_kb"], best_m[0])
        rows[(w, t)] = {"allocators": row, "best_peer_time": best_t[1],
                        "best_peer_rss": best_m[1]}
    keys = ("time_vs_glibc", "time_vs_best_peer", "rss_vs_glibc", "rss_vs_best_peer")
    geo = {}
    for name in allocs:
        # The fallback runs on a few workloads only: no geometric mean.
        mine = [r["allocators"][name] for r in rows.values()
                if r["allocators"].get(name) and name != FALLBACK]
        geo[name] = {k: geomean([c[k] for c in mine]) for k in keys}
        for t in threads:
            cells_t = [r["allocators"][name] for (w, tt), r in rows.items()
                       if tt == t and r["allocators"].get(name) and name != FALLBACK]
            geo[name]["threads_%d" % t] = {k: geomean([c[k] for c in cells_t]) for k in keys}
    return rows, geo


# Issue 30's targets, judged on what this run measured.  Rows at 1-2
# threads ("few") and at 8 or 32 threads ("many": more threads than this
# 2-core machine has) have targets of their own; other thread counts are
# reported but not judged.
TARGETS = {
    "few": {"threads": (1, 2), "geo_vs_glibc": 0.40, "row_vs_best_peer": 1.25,
            "geo_rss_vs_glibc": 1.0, "row_rss_vs_glibc": 1.3},
    "many": {"threads": (8, 32), "geo_vs_best_peer": 0.9, "row_vs_best_peer": 1.25},
}
FAST_PATH_TARGET = 40.0
# A trivial program's peak RSS over glibc's, MiB: the `fixed` workload at
# 1 thread (through the preload shim), and the start-up row's program.
TRIVIAL_ROW = ("fixed", 1)
TRIVIAL_RSS_MIB = 0.2
STARTUP_MS = 0.1          # added start-up, strictly below


def targets_check(allocs, rows, callgrind, startup=None, subject="pinheap"):
    """Each target that this run can judge, for subject: a list of
    {"target", "value", "limit", "op", "met", "detail"} (op "<=" or "<").
    "The best peer" of a geometric-mean target is the peer whose geometric
    mean over the group is lowest; the row-by-row reading (each row against
    its own best peer, a stricter bar) is reported beside it as detail.
    startup: startup_tool.row()'s dict, or None."""
    out = []
    if subject not in allocs:
        return out
    peers = [p for p in PEERS if p in allocs]

    def add(target, value, limit, detail="", op="<="):
        if value is not None:
            out.append({"target": target, "value": value, "limit": limit, "op": op,
                        "met": value < limit if op == "<" else value <= limit, "detail": detail})

    for group, tg in TARGETS.items():
        cells = {k: r["allocators"] for k, r in rows.items() if k[1] in tg["threads"]}
        cells = {k: c for k, c in cells.items() if c.get(subject)}
        if not cells:
            continue
        label = "%s threads" % "/".join(str(t) for t in tg["threads"])
        geo_t = {n: geomean([c[n]["time_vs_glibc"] for c in cells.values() if c.get(n)])
                 for n in peers + [subject]}
        best = min(((geo_t[p], p) for p in peers if geo_t[p] is not None), default=(None, None))
        strict = geomean([c[subject]["time_vs_best_peer"] for c in cells.values()])
        if "geo_vs_glibc" in tg:
            add("%s: geometric-mean time vs glibc" % label, geo_t[subject], tg["geo_vs_glibc"],
                "best peer %s %s" % (best[1], fmt_ratio(best[0])) if best[1] else "")
        if "geo_vs_best_peer" in tg:
            add("%s: geometric-mean time vs the best peer's (%s)" % (label, best[1]),
                ratio(geo_t[subject], best[0]), tg["geo_vs_best_peer"],
                "row by row, against each row's best peer: %s" % fmt_ratio(strict))
        worst = max(((c[subject]["time_vs_best_peer"], k) for k, c in cells.items()
                     if c[subject]["time_vs_best_peer"] is not None), default=(None, None))
        over = ["%s-%d %.2fx" % (k[0], k[1], c[subject]["time_vs_best_peer"])
                for k, c in cells.items()
                if (c[subject]["time_vs_best_peer"] or 0) > tg["row_vs_best_peer"]]
        add("%s: slowest row vs its best peer (%s-%d)" % ((label,) + (worst[1] or ("?", 0))),
            worst[0], tg["row_vs_best_peer"], "above: " + (", ".join(over) or "none"))
        if "geo_rss_vs_glibc" in tg:
            add("%s: geometric-mean peak RSS vs glibc" % label,
                geomean([c[subject]["rss_vs_glibc"] for c in cells.values()]), tg["geo_rss_vs_glibc"])
            worst = max(((c[subject]["rss_vs_glibc"], k) for k, c in cells.items()
                         if c[subject]["rss_vs_glibc"] is not None), default=(None, None))
            over = ["%s-%d %.2fx" % (k[0], k[1], c[subject]["rss_vs_glibc"])
                    for k, c in cells.items()
                    if (c[subject]["rss_vs_glibc"] or 0) > tg["row_rss_vs_glibc"]]
            add("%s: largest row peak RSS vs glibc (%s-%d)" % ((label,) + (worst[1] or ("?", 0))),
                worst[0], tg["row_rss_vs_glibc"], "above: " + (", ".join(over) or "none"))
    trivial = rows.get(TRIVIAL_ROW, {}).get("allocators", {})
    if trivial.get(subject) and trivial.get("glibc"):
        mine, glibc = trivial[subject]["median_peak_rss_kb"], trivial["glibc"]["median_peak_rss_kb"]
        add("trivial program (%s-%d, preloaded): peak RSS over glibc's, MiB" % TRIVIAL_ROW,
            (mine - glibc) / 1024.0, TRIVIAL_RSS_MIB,
            "%.2f MiB against %.2f" % (mine / 1024.0, glibc / 1024.0))
    if startup:
        add("trivial program linked transitively: peak RSS over an empty core library's, MiB",
            (startup["rss_a_kb"] - startup["rss_b_kb"]) / 1024.0, TRIVIAL_RSS_MIB,
            "%.2f MiB against %.2f; the start-up row's program%s" % (
                startup["rss_a_kb"] / 1024.0, startup["rss_b_kb"] / 1024.0,
                "; private (anonymous) %+.2f MiB, the rest shared page cache" % (
                    (startup["anon_a_kb"] - startup["anon_b_kb"]) / 1024.0)
                if startup.get("anon_a_kb", -1) >= 0 and startup.get("anon_b_kb", -1) >= 0 else ""))
        ins = ""
        if startup.get("instructions_a") is not None and startup.get("instructions_b") is not None:
            ins = "; instructions %+d over %d" % (startup["instructions_a"] - startup["instructions_b"],
                                                 startup["instructions_b"])
        add("start-up added, transitive, code patching: ms", startup["added_ms"], STARTUP_MS,
            "median of %d alternated pair differences; %.3f ms against %.3f%s" % (
                startup["pairs"], startup["a_ms"], startup["b_ms"], ins), op="<")
    if subject in callgrind:
        best = min(((callgrind[p], p) for p in peers if p in callgrind), default=None)
        add("fast path: instructions per malloc(32)+free pair", callgrind[subject], FAST_PATH_TARGET,
            ("best peer %s %.1f; " % (best[1], best[0]) if best else "")
            + "the harness's own loop and calls included")
    return out


def targets_markdown(checks, subject="pinheap"):
    if not checks:
        return []
    lines = ["**Targets** (%s, judged on this run's medians; the machine is noisy: a margin under "
             "~1.3x is not significant unless repeated)" % subject, "",
             "| target | measured | limit | met | |", "|---|---:|---:|---|---|"]
    for c in checks:
        lines.append("| %s | %s | %s %s | %s | %s |" % (
            c["target"], "%.2f" % c["value"], c.get("op", "<="), "%g" % c["limit"],
            "yes" if c["met"] else "**no**", c["detail"]))
    lines.append("")
    return lines


def fmt_ratio(r):
    return "-" if r is None else "%.2f" % r


def table_markdown(a, allocs, rows, geo, callgrind, startup, meta, notes, failures):
    lines = []
    lines.append("Benchmark run of %s on %s (%s, %d CPUs); %d interleaved run(s) per cell, "
                 "scale %g; runner wall time %s." % (
                     meta["date"], meta["host"], meta["cpu"], meta["cpus"], a.runs, a.scale,
                     meta["wall_time"]))
    lines.append("")
    for title, key, unit, fmt, rkey, best in (
            ("Time", "median_seconds", "s", lambda v: "%.3f" % v, "time", "best_peer_time"),
            ("Peak RSS", "median_peak_rss_kb", "MiB", lambda v: "%.1f" % (v / 1024.0), "rss",
             "best_peer_rss")):
        lines.append("**%s** (median, %s; in parentheses: ratio to glibc / ratio to the best peer)"
                     % (title, unit))
        lines.append("")
        lines.append("| workload | threads | " + " | ".join(allocs) + " | best peer |")
        lines.append("|---|---:|" + "---:|" * len(allocs) + "---|")
        for (w, t), row in rows.items():
            cells = []
            for name in allocs:
                s = row["allocators"].get(name)
                if s is None:
                    cells.append("FAIL" if (name, w, t) in failures else "-")
                else:
                    cells.append("%s (%s / %s)" % (fmt(s[key]), fmt_ratio(s[rkey + "_vs_glibc"]),
                                                    fmt_ratio(s[rkey + "_vs_best_peer"])))
            lines.append("| %s | %d | %s | %s |" % (w, t, " | ".join(cells), row[best] or "-"))
        cells = ["%s / %s" % (fmt_ratio(geo[n][rkey + "_vs_glibc"]),
                              fmt_ratio(geo[n][rkey + "_vs_best_peer"])) for n in allocs]
        lines.append("| **geometric mean** | | %s | |" % " | ".join(cells))
        counts = thread_counts(rows.keys())
        if len(counts) > 1:
            for t in counts:
                g = {n: geo[n].get("threads_%d" % t, {}) for n in allocs}
                cells = ["%s / %s" % (fmt_ratio(g[n].get(rkey + "_vs_glibc")),
                                      fmt_ratio(g[n].get(rkey + "_vs_best_peer"))) for n in allocs]
                lines.append("| geometric mean | %d | %s | |" % (t, " | ".join(cells)))
        lines.append("")
    regcache_rows = [((w, t), row) for (w, t), row in rows.items() if w == "regcache"]
    if regcache_rows:
        lines.append("**Registration cache** (`regcache`, medians: time s, peak RSS MiB, hit rate, "
                     "invalidations, release events seen / MiB released, registrations / MiB "
                     "registered, simulated registration s; observer)")
        lines.append("")
        lines.append("| allocator | threads | time | peak RSS | hit rate | invalidations | releases / MiB "
                     "| registrations / MiB | reg s | observer |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for (w, t), row in regcache_rows:
            for name in allocs:
                s = row["allocators"].get(name)
                if s is None:
                    if (name, w, t) in failures:
                        lines.append("| %s | %d | FAIL | | | | | | | |" % (name, t))
                    continue
                rc = s.get("regcache", {})
                lines.append("| %s | %d | %.3f | %.1f | %.3f | %d | %d / %.0f | %d / %.0f | %.3f | %s |" % (
                    name, t, s["median_seconds"], s["median_peak_rss_kb"] / 1024.0,
                    rc.get("hit_rate", float("nan")), rc.get("invalidations", -1),
                    rc.get("release_events", -1), rc.get("released_mib", float("nan")),
                    rc.get("registrations", -1), rc.get("registered_mib", float("nan")),
                    rc.get("reg_seconds", float("nan")), rc.get("observer", "?")))
        lines.append("")
    if callgrind:
        lines.append("**Fast path** (callgrind: instructions per malloc(32)+free pair, "
                     "(I(2N) - I(N)) / N with N = %d)" % a.pairs)
        lines.append("")
        lines.append("| allocator | instructions per pair | ratio to glibc |")
        lines.append("|---|---:|---:|")
        for name in allocs:
            if name in callgrind:
                lines.append("| %s | %.1f | %s |" % (name, callgrind[name],
                                                    fmt_ratio(ratio(callgrind[name], callgrind.get("glibc")))))
        lines.append("")
    if startup:
        lines.append(startup_tool.row_markdown(startup))
        lines.append("")
    lines.extend(targets_markdown(targets_check(allocs, rows, callgrind, startup)))
    lines.append("Peers: " + ", ".join("%s (%s)" % (n, p or "no preload") for n, p in meta["libraries"])
                 + ". The machine is noisy: treat differences under ~1.3x as noise unless repeated.")
    for n in notes:
        lines.append("")
        lines.append("Note: " + n)
    return "\n".join(lines) + "\n"


def outputs_write(a, allocs, runs_log, rows, geo, callgrind, startup, meta, notes, failures):
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "runs.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["allocator", "workload", "threads", "run", "seconds", "peak_rss_kb",
                     "rss_end_kb", "ops", "malloc_lib"])
        for r in runs_log:
            wr.writerow(r)
    keys = ["median_seconds", "min_seconds", "max_seconds", "median_peak_rss_kb",
            "min_peak_rss_kb", "max_peak_rss_kb", "median_rss_end_kb", "time_vs_glibc",
            "time_vs_best_peer", "rss_vs_glibc", "rss_vs_best_peer", "runs"]
    with open(os.path.join(a.out, "summary.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["allocator", "workload", "threads"] + keys + ["best_peer_time", "best_peer_rss"])
        for (w, t), row in rows.items():
            for name in allocs:
                s = row["allocators"].get(name)
                if s is None:
                    wr.writerow([name, w, t] + ["FAIL" if (name, w, t) in failures else ""] * len(keys)
                                + [row["best_peer_time"], row["best_peer_rss"]])
                else:
                    wr.writerow([name, w, t] + [s[k] for k in keys]
                                + [row["best_peer_time"], row["best_peer_rss"]])
        for name in allocs:
            g = geo[name]
            wr.writerow([name, "geometric_mean", ""] + [""] * 7 +
                        [g["time_vs_glibc"], g["time_vs_best_peer"], g["rss_vs_glibc"],
                         g["rss_vs_best_peer"], ""] + ["", ""])
    with open(os.path.join(a.out, "callgrind.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["allocator", "instructions_per_pair", "pairs"])
        for name in allocs:
            if name in callgrind:
                wr.writerow([name, "%.2f" % callgrind[name], a.pairs])
    summary = {
        "meta": meta, "notes": notes,
        "failures": [{"allocator": n, "workload": w, "threads": t, "error": e}
                     for (n, w, t), e in failures.items()],
        "rows": [{"workload": w, "threads": t, "best_peer_time": row["best_peer_time"],
                  "best_peer_rss": row["best_peer_rss"], "allocators": row["allocators"]}
                 for (w, t), row in rows.items()],
        "geometric_mean": geo,
        "callgrind_instructions_per_pair": callgrind,
        "startup": startup,
        "targets": targets_check(allocs, rows, callgrind, startup),
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
        f.write("\n")
    table = table_markdown(a, allocs, rows, geo, callgrind, startup, meta, notes, failures)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table)
    return table


def chart_write(a, allocs, rows, notes):
    if a.no_chart:
        return
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        notes.append("chart skipped: gnuplot not installed (apt-get install gnuplot-nox)")
        return
    others = [n for n in allocs if n not in ("glibc", FALLBACK)]
    if "glibc" not in allocs or not others:
        notes.append("chart skipped: it plots ratios to glibc, so it needs glibc and another allocator")
        return
    dat = os.path.join(a.out, "chart.dat")
    with open(dat, "w") as f:
        f.write("label " + " ".join(others) + " " + " ".join(others) + "\n")
        for (w, t), row in rows.items():
            vals = []
            for k in ("time_vs_glibc", "rss_vs_glibc"):
                for n in others:
                    s = row["allocators"].get(n)
                    vals.append("%.4f" % s[k] if s and s[k] else "NaN")
            f.write("%s/%d %s\n" % (w, t, " ".join(vals)))
    k = len(others)
    gp = os.path.join(a.out, "chart.gp")
    with open(gp, "w") as f:
        f.write("""# chart.gp -- written by run.py; plots chart.dat into chart.png
set terminal pngcairo size 1400,900 noenhanced font ",10"
set output '%(png)s'
set datafile missing 'NaN'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set logscale y 2
set key outside right top
set xtics rotate by -35 scale 0
set multiplot layout 2,1
set title 'Median time relative to glibc (lower is better; log scale)'
plot for [i=2:%(last_t)d] '%(dat)s' using i:xtic(1) title columnheader(i), 1 with lines lc rgb 'black' dt 2 notitle
set title 'Median peak RSS relative to glibc (lower is better; log scale)'
plot for [i=%(first_m)d:%(last_m)d] '%(dat)s' using i:xtic(1) title columnheader(i), 1 with lines lc rgb 'black' dt 2 notitle
unset multiplot
""" % {"png": os.path.join(a.out, "chart.png"), "dat": dat, "last_t": 1 + k,
       "first_m": 2 + k, "last_m": 1 + 2 * k})
    proc = subprocess.run([gnuplot, gp], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        notes.append("chart failed: gnuplot: " + proc.stderr.strip()[-300:])


def machine_info():
    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"host": "%s %s" % (platform.system(), platform.release()), "cpu": cpu,
            "cpus": os.cpu_count() or 0}


# ---- main ----------------------------------------------------------------------------

def main(argv):
    try:
        a = args_parse(argv)
        known = workloads_list(a.bench)
        if a.workloads == ["all"]:
            a.workloads = known
        for w in a.workloads:
            if w not in known:
                raise UsageError("--workloads: unknown workload '%s'; expected some of %s"
                                 % (w, ",".join(known)))
        allocators, notes = allocators_find(a)
    except UsageError as e:
        print("run.py: " + str(e), file=sys.stderr)
        return 2
    for n in notes:
        note(n)
    page_cache_drop(allocators)

    started = time.monotonic()
    names = [n for n, _ in allocators]
    def wanted(name, w):
        return name != FALLBACK or w in a.fallback_workloads
    cells = cells_list(a)
    total = a.runs * sum(1 for w, t in cells for n, _ in allocators if wanted(n, w))
    note("%d runs: %d x %s x threads %s (and %s at %s) x %s, scale %g" % (
        total, a.runs, ",".join(a.workloads), ",".join(map(str, a.threads)),
        ",".join(w for w in a.workloads if w in a.many_workloads) or "none",
        ",".join(map(str, a.many_threads)) or "-", ",".join(names), a.scale))
    runs, runs_log, failures = {}, [], {}
    done = 0
    for r in range(a.runs):
        for w, t in cells:
            for name, path in allocators:     # interleaved: A B C D E, A B C D E, ...
                if not wanted(name, w):
                    continue
                done += 1
                if (name, w, t) in failures:
                    continue
                result, err = bench_run(a, name, path, w, t)
                if err:
                    failures[(name, w, t)] = err
                    note("[%d/%d] %s %s t=%d FAILED: %s" % (done, total, w, name, t, err))
                    continue
                runs.setdefault((name, w, t), []).append(result)
                runs_log.append([name, w, t, r + 1, result["seconds"], result["peak_rss_kb"],
                                 result["rss_end_kb"], result["ops"], result["malloc_lib"]])
                elapsed = time.monotonic() - started
                note("[%d/%d] %-18s t=%d %-9s %8.3f s %8.1f MiB   (elapsed %.0f s, ~%.0f s left)"
                     % (done, total, w, t, name, result["seconds"],
                        result["peak_rss_kb"] / 1024.0, elapsed,
                        elapsed / done * (total - done)))
    for key in failures:
        runs.pop(key, None)    # a cell with a failed run is reported as FAIL, never half-measured

    callgrind = callgrind_measure(a, allocators, notes)
    startup = startup_measure(a, names, notes)
    rows, geo = summarize(names, cells, runs)
    wall = time.monotonic() - started
    meta = dict(machine_info())
    meta.update({"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                 "wall_time": "%dm%02ds" % (wall // 60, wall % 60), "wall_seconds": round(wall, 1),
                 "runs": a.runs, "scale": a.scale, "threads": a.threads, "workloads": a.workloads,
                 "many_threads": a.many_threads, "many_workloads": a.many_workloads,
                 "libraries": allocators, "callgrind_pairs": a.pairs})
    os.makedirs(a.out, exist_ok=True)
    chart_write(a, names, rows, notes)
    for (n, w, t), e in failures.items():
        notes.append("%s failed on %s at %d thread(s): %s" % (n, w, t, e.splitlines()[0]))
    table = outputs_write(a, names, runs_log, rows, geo, callgrind, startup, meta, notes, failures)
    print(table)
    note("results in %s (table.md, summary.csv, summary.json, runs.csv, callgrind.csv%s)"
         % (a.out, ", chart.png" if os.path.exists(os.path.join(a.out, "chart.png")) else ""))
    if failures:
        note("%d workload/allocator cell(s) FAILED; see the notes above" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
