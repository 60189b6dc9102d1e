#!/usr/bin/env python3
"""scaling.py -- how time and peak RSS scale with the work.  Main entry
point: main().

Two sweeps, each over every allocator run.py finds (glibc, jemalloc,
tcmalloc, mimalloc, pinheap), runs interleaved, medians reported:

  live heap  the `live` workload (wl_live.c) at 1 thread with a live heap of
             small objects of 1 MiB, 4 MiB, ... (powers of 4) up to 8 GiB,
             capped by --max-live-mib and by the machine: a size is run only
             if 2.5 times it fits in MemAvailable (the peak of the worst
             allocator with room to spare for the other users of the box);
  threads    --thread-workloads (default larson and tree) at a fixed scale
             with 1, 2, 4, ... 64 threads (--threads), the same total work
             split between them, on however many cores there are.

Fitted slopes: least squares of log(time) and log(peak RSS) against
log(live MiB) (1 = linear, the ideal: the cost per object does not grow
with the heap), and of log(time) against log(threads) (0 = the same total
work takes the same time however many threads share the cores).  The
smallest sizes are dominated by start-up constants, so the live-heap slope
is fitted on the sizes from --fit-from-mib (default 16) up.

With more than one thread workload, a last table gives per thread count
the geometric mean over the workloads of each allocator's time relative
to glibc's and to the best peer's (threads_geomean.png).

--quick is the unattended run for a bigger machine, one command under
5 minutes (2m31s on this 2-core VM, shared with other jobs): 3 runs, live heaps up to 64 MiB,
the six thread workloads at scale 0.4 with 1, 2, 4, ... 64 threads and the
machine's CPU count.

Writes into --out: scaling.md (tables and slopes), scaling.csv (every
run), scaling.json, and live_*.png / threads_*.png (gnuplot, log-log).  Python 3
standard library only; reuses run.py's allocator discovery and run checks.
"""

import argparse
import csv
import datetime
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (run.py beside this file)

LIVE_MIB_AT_SCALE_1 = 64          # wl_live.c's LIVE_MIB_AT_SCALE_1
LIVE_SIZES_MIB = [1, 4, 16, 64, 256, 1024, 4096, 8192]
THREADS_DEFAULT = "1,2,4,8,16,32,64"
QUICK_WORKLOADS = "larson,tree,churn,prodcons,smallobj,falseshare_active"


def args_parse(argv):
    p = argparse.ArgumentParser(prog="scaling.py",
                                description="Time and peak RSS as the live heap and the thread "
                                            "count grow, per allocator (LD_PRELOAD).")
    p.add_argument("--quick", action="store_true",
                   help="the unattended run (2m31s on 2 cores): --runs 3 --max-live-mib 64 "
                        "--thread-workloads %s --thread-scale 0.4, threads %s and the CPU count "
                        "(explicit options still win)" % (QUICK_WORKLOADS, THREADS_DEFAULT))
    p.add_argument("--runs", default="3", help="interleaved runs per point (default 3)")
    p.add_argument("--max-live-mib", default=None,
                   help="largest live heap to run, MiB (default 1024; the sweep goes to 8192)")
    p.add_argument("--fit-from-mib", default="16",
                   help="smallest live heap the slope is fitted on (default 16)")
    p.add_argument("--threads", default=None,
                   help="thread counts of the thread sweep (default %s)" % THREADS_DEFAULT)
    p.add_argument("--thread-workloads", default=None,
                   help="workloads of the thread sweep (default larson,tree)")
    p.add_argument("--thread-scale", default=None,
                   help="scale of the thread sweep's runs (default 0.25)")
    p.add_argument("--sweeps", default="live,threads", help="live, threads or both (default)")
    p.add_argument("--allocators", default=None,
                   help="subset of %s (default: every one found)" % ",".join(run.ALL_ALLOCATORS))
    p.add_argument("--pinheap", default=None, help="path to %s" % run.PINHEAP_SHIM)
    p.add_argument("--build", default=os.path.join(run.REPO, "build"),
                   help="the CMake build directory (default REPO/build)")
    p.add_argument("--bench", default=None, help="pinheap-bench (default BUILD/tools/bench/pinheap-bench)")
    p.add_argument("--out", default=os.path.join(os.getcwd(), "bench-scaling"),
                   help="output directory (default ./bench-scaling)")
    p.add_argument("--timeout", default="900", help="seconds allowed per run (default 900)")
    p.add_argument("--no-chart", action="store_true", help="skip the gnuplot charts")
    a = p.parse_args(argv)
    if a.max_live_mib is None:
        a.max_live_mib = "64" if a.quick else "1024"
    if a.thread_workloads is None:
        a.thread_workloads = QUICK_WORKLOADS if a.quick else "larson,tree"
    if a.thread_scale is None:
        a.thread_scale = "0.4" if a.quick else "0.25"
    if a.threads is None:
        a.threads = THREADS_DEFAULT
        cpus = os.cpu_count() or 1
        if a.quick and str(cpus) not in a.threads.split(",") and cpus <= 256:
            a.threads = ",".join(str(t) for t in sorted(set(
                [int(t) for t in a.threads.split(",")] + [cpus])))
    a.runs = run.int_in_range("--runs", a.runs, 1, 100)
    a.max_live_mib = run.int_in_range("--max-live-mib", a.max_live_mib, 1, 1 << 20)
    a.fit_from_mib = run.int_in_range("--fit-from-mib", a.fit_from_mib, 1, 1 << 20)
    a.timeout = run.int_in_range("--timeout", a.timeout, 1, 86400)
    a.threads = [run.int_in_range("--threads", t, 1, 256) for t in run.list_parse("--threads", a.threads)]
    a.thread_workloads = run.list_parse("--thread-workloads", a.thread_workloads)
    try:
        a.thread_scale = float(a.thread_scale)
    except ValueError:
        raise run.UsageError("--thread-scale: '%s' is not a number; expected > 0 and <= 1000"
                             % a.thread_scale)
    if not (0 < a.thread_scale <= 1000):
        raise run.UsageError("--thread-scale: '%s' is out of range; expected > 0 and <= 1000"
                             % a.thread_scale)
    a.sweeps = run.list_parse("--sweeps", a.sweeps)
    for s in a.sweeps:
        if s not in ("live", "threads"):
            raise run.UsageError("--sweeps: unknown sweep '%s'; expected live and/or threads" % s)
    if a.allocators is not None:
        a.allocators = run.list_parse("--allocators", a.allocators)
        for name in a.allocators:
            if name not in run.ALL_ALLOCATORS:
                raise run.UsageError("--allocators: unknown allocator '%s'; expected some of %s"
                                     % (name, ",".join(run.ALL_ALLOCATORS)))
    if a.pinheap is not None and not os.path.isfile(a.pinheap):
        raise run.UsageError("--pinheap: '%s' does not exist" % a.pinheap)
    a.bench = a.bench or os.path.join(a.build, "tools", "bench", "pinheap-bench")
    if not (os.path.isfile(a.bench) and os.access(a.bench, os.X_OK)):
        raise run.UsageError("--bench: '%s' is not an executable file; build the pinheap-bench "
                             "target first (or pass --build DIR)" % a.bench)
    return a


def mem_available_mib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def fit_slope(xs, ys):
    """Least-squares slope of log(y) on log(x); None with fewer than 2 points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def sweep_run(a, allocators, points, label):
    """points: [(key, workload, scale, threads)].  Interleaved runs; returns
    {(alloc, key): [result, ...]}, failures {(alloc, key): text}, log rows."""
    results, failures, log = {}, {}, []
    total = a.runs * len(points) * len(allocators)
    done = 0
    started = time.monotonic()
    for r in range(a.runs):
        for key, workload, scale, threads in points:
            a.scale = scale
            for name, path in allocators:
                done += 1
                if (name, key) in failures:
                    continue
                res, err = run.bench_run(a, name, path, workload, threads)
                if err:
                    failures[(name, key)] = err
                    run.note("%s [%d/%d] %s %s FAILED: %s" % (label, done, total, key, name, err))
                    continue
                results.setdefault((name, key), []).append(res)
                log.append([label, name, workload, scale, threads, r + 1, res["seconds"],
                            res["peak_rss_kb"], res["rss_end_kb"], res["ops"]])
                elapsed = time.monotonic() - started
                run.note("%s [%d/%d] %-14s %-9s %8.3f s %9.1f MiB  (elapsed %.0f s)"
                         % (label, done, total, key, name, res["seconds"],
                            res["peak_rss_kb"] / 1024.0, elapsed))
    for key in failures:
        results.pop(key, None)
    return results, failures, log


def median_of(results, name, key, field):
    rs = results.get((name, key))
    return statistics.median(r[field] for r in rs) if rs else None


def chart(a, png, title, xlabel, xs, series, ylabel):
    """series: [(title, [y or None per x])]; log-log lines."""
    gnuplot = shutil.which("gnuplot")
    if a.no_chart or gnuplot is None:
        return "chart skipped: %s" % ("--no-chart" if a.no_chart else "gnuplot not installed")
    dat = png[:-4] + ".dat"
    with open(dat, "w") as f:
        f.write("x " + " ".join('"%s"' % t for t, _ in series) + "\n")
        for i, x in enumerate(xs):
            f.write("%g %s\n" % (x, " ".join("%.6g" % s[i] if s[i] else "NaN" for _, s in series)))
    gp = png[:-4] + ".gp"
    with open(gp, "w") as f:
        f.write("set terminal pngcairo size 1000,650 noenhanced font ',10'\n"
                "set output '%s'\nset datafile missing 'NaN'\nset logscale xy 2\nset grid\n"
                "set key outside right top autotitle columnheader\nset title '%s'\n"
                "set xlabel '%s'\nset ylabel '%s'\n"
                "plot for [i=2:%d] '%s' using 1:i with linespoints lw 2\n"
                % (png, title, xlabel, ylabel, 1 + len(series), dat))
    proc = subprocess.run([gnuplot, gp], capture_output=True, text=True, timeout=120)
    return None if proc.returncode == 0 else "chart failed: " + proc.stderr.strip()[-300:]


def threads_geomean(a, names, per_workload):
    """The thread sweep summed up: per thread count, each allocator's
    geometric mean over the workloads of its median time relative to
    glibc's and to the row's best peer's.  (Markdown lines, JSON, chart
    error or None.)"""
    peers = [n for n in run.PEERS if n in names]
    out = {n: {"vs_glibc": [], "vs_best_peer": []} for n in names}
    for i, t in enumerate(a.threads):
        for n in names:
            g, b = [], []
            for w, per in per_workload.items():
                mine = per[n]["seconds"][i]
                glibc = per.get("glibc", {}).get("seconds", [None] * len(a.threads))[i]
                best = min((per[p]["seconds"][i] for p in peers if per[p]["seconds"][i]), default=None)
                g.append(run.ratio(mine, glibc))
                b.append(run.ratio(mine, best))
            out[n]["vs_glibc"].append(run.geomean(g))
            out[n]["vs_best_peer"].append(run.geomean(b))
    md = ["**Geometric mean over the %d thread workloads** (%s; per thread count: time relative to "
          "glibc's / to each row's best peer's)" % (len(per_workload), ", ".join(per_workload)), "",
          "| threads | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    for i, t in enumerate(a.threads):
        md.append("| %d | %s |" % (t, " | ".join("%s / %s" % (
            run.fmt_ratio(out[n]["vs_glibc"][i]), run.fmt_ratio(out[n]["vs_best_peer"][i]))
            for n in names)))
    md.append("")
    err = chart(a, os.path.join(a.out, "threads_geomean.png"),
                "geometric mean over %s: time relative to the best peer, on %d cores"
                % (",".join(per_workload), os.cpu_count() or 0),
                "threads", a.threads, [(n, out[n]["vs_best_peer"]) for n in names],
                "time relative to the best peer (geometric mean)")
    return md, out, err


def main(argv):
    try:
        a = args_parse(argv)
        allocators, notes = run.allocators_find(a)
        if a.allocators is None:       # glibc_fallback only when named
            allocators = [(n, p) for n, p in allocators if n != run.FALLBACK]
    except run.UsageError as e:
        print("scaling.py: " + str(e), file=sys.stderr)
        return 2
    names = [n for n, _ in allocators]
    os.makedirs(a.out, exist_ok=True)
    started = time.monotonic()
    md, js, log_all, failed = [], {"allocators": names, "notes": notes}, [], {}

    if "live" in a.sweeps:
        avail = mem_available_mib()
        sizes, over_flag, over_mem = [], [], []
        for mib in LIVE_SIZES_MIB:
            if mib > a.max_live_mib:
                over_flag.append(mib)
            elif avail is not None and 2.5 * mib > avail:
                over_mem.append(mib)
            else:
                sizes.append(mib)
        if over_flag:
            notes.append("live heaps of %s MiB not run: above --max-live-mib %d"
                         % (", ".join(map(str, over_flag)), a.max_live_mib))
        if over_mem:
            notes.append("live heaps of %s MiB not run: 2.5x the size does not fit in "
                         "MemAvailable (%d MiB)" % (", ".join(map(str, over_mem)), avail))
        points = [("%dMiB" % m, "live", m / float(LIVE_MIB_AT_SCALE_1), 1) for m in sizes]
        res, fails, log = sweep_run(a, allocators, points, "live")
        log_all += log
        failed.update(fails)
        md.append("**Live heap of small objects** (`live`, 1 thread; median time s / median peak "
                  "RSS MiB; %d interleaved runs per point)" % a.runs)
        md.append("")
        md.append("| live MiB | " + " | ".join(names) + " |")
        md.append("|---:|" + "---:|" * len(names))
        for m in sizes:
            cells = []
            for n in names:
                t = median_of(res, n, "%dMiB" % m, "seconds")
                r = median_of(res, n, "%dMiB" % m, "peak_rss_kb")
                cells.append("FAIL" if (n, "%dMiB" % m) in fails else
                             "%.3f / %.1f" % (t, r / 1024.0) if t is not None else "-")
            md.append("| %d | %s |" % (m, " | ".join(cells)))
        fit_sizes = [m for m in sizes if m >= a.fit_from_mib]
        md.append("| **slope time / RSS** (fit on %s MiB) | %s |" % (
            ",".join(map(str, fit_sizes)) or "-",
            " | ".join("%s / %s" % tuple(
                run.fmt_ratio(fit_slope(fit_sizes, [median_of(res, n, "%dMiB" % m, f) for m in fit_sizes]))
                for f in ("seconds", "peak_rss_kb")) for n in names)))
        md.append("")
        js["live"] = {n: {"mib": sizes,
                          "seconds": [median_of(res, n, "%dMiB" % m, "seconds") for m in sizes],
                          "peak_rss_kb": [median_of(res, n, "%dMiB" % m, "peak_rss_kb") for m in sizes],
                          "slope_time": fit_slope(fit_sizes, [median_of(res, n, "%dMiB" % m, "seconds")
                                                              for m in fit_sizes]),
                          "slope_rss": fit_slope(fit_sizes, [median_of(res, n, "%dMiB" % m, "peak_rss_kb")
                                                             for m in fit_sizes])}
                      for n in names}
        for field, png, ylabel in (("seconds", "live_time.png", "median seconds"),
                                   ("peak_rss_kb", "live_rss.png", "median peak RSS, KiB")):
            err = chart(a, os.path.join(a.out, png), "live workload, 1 thread: %s vs live heap" % ylabel,
                        "live heap, MiB", sizes,
                        [(n, js["live"][n][field]) for n in names], ylabel)
            if err:
                notes.append(err)

    if "threads" in a.sweeps:
        js["threads"] = {}
        for w in a.thread_workloads:
            points = [("%s/%d" % (w, t), w, a.thread_scale, t) for t in a.threads]
            res, fails, log = sweep_run(a, allocators, points, "threads")
            log_all += log
            failed.update(fails)
            md.append("**Threads on %d cores** (`%s` at scale %g, the same total work split between "
                      "the threads; median time s / median peak RSS MiB)" % (os.cpu_count() or 0, w,
                                                                              a.thread_scale))
            md.append("")
            md.append("| threads | " + " | ".join(names) + " |")
            md.append("|---:|" + "---:|" * len(names))
            for t in a.threads:
                cells = []
                for n in names:
                    sec = median_of(res, n, "%s/%d" % (w, t), "seconds")
                    rss = median_of(res, n, "%s/%d" % (w, t), "peak_rss_kb")
                    cells.append("FAIL" if (n, "%s/%d" % (w, t)) in fails else
                                 "%.3f / %.1f" % (sec, rss / 1024.0) if sec is not None else "-")
                md.append("| %d | %s |" % (t, " | ".join(cells)))
            slopes = {n: (fit_slope(a.threads, [median_of(res, n, "%s/%d" % (w, t), "seconds") for t in a.threads]),
                          fit_slope(a.threads, [median_of(res, n, "%s/%d" % (w, t), "peak_rss_kb") for t in a.threads]))
                      for n in names}
            md.append("| **slope time / RSS** | %s |" % " | ".join(
                "%s / %s" % (run.fmt_ratio(slopes[n][0]), run.fmt_ratio(slopes[n][1])) for n in names))
            md.append("")
            js["threads"][w] = {n: {"threads": a.threads,
                                    "seconds": [median_of(res, n, "%s/%d" % (w, t), "seconds") for t in a.threads],
                                    "peak_rss_kb": [median_of(res, n, "%s/%d" % (w, t), "peak_rss_kb") for t in a.threads],
                                    "slope_time": slopes[n][0], "slope_rss": slopes[n][1]}
                                for n in names}
            err = chart(a, os.path.join(a.out, "threads_%s.png" % w),
                        "%s at scale %g: time vs threads on %d cores" % (w, a.thread_scale, os.cpu_count() or 0),
                        "threads", a.threads, [(n, js["threads"][w][n]["seconds"]) for n in names],
                        "median seconds")
            if err:
                notes.append(err)

    if "threads" in a.sweeps and len(a.thread_workloads) > 1:
        geo_md, geo_js, err = threads_geomean(a, names, js["threads"])
        md += geo_md
        js["threads_geomean"] = geo_js
        if err:
            notes.append(err)
    md.append("Slopes: least squares of log(y) on log(x). Live heap: time slope 1 is linear (the "
              "cost per object does not grow with the heap), RSS slope 1 is proportional. Threads: "
              "time slope 0 means the same total work takes the same time however many threads "
              "share the cores.")
    for (n, key), e in failed.items():
        notes.append("%s failed at %s: %s" % (n, key, e.splitlines()[0]))
    for n in dict.fromkeys(notes):          # each note once, in order
        md.append("")
        md.append("Note: " + n)
    info = run.machine_info()
    wall = time.monotonic() - started
    md.insert(0, "Scaling run of %s on %s (%s, %d CPUs); wall time %dm%02ds; command: "
              "`scaling.py %s`.\n" % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), info["host"],
                                      info["cpu"], info["cpus"], wall // 60, wall % 60,
                                      " ".join(argv)))
    text = "\n".join(md) + "\n"
    with open(os.path.join(a.out, "scaling.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "scaling.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["sweep", "allocator", "workload", "scale", "threads", "run", "seconds",
                     "peak_rss_kb", "rss_end_kb", "ops"])
        wr.writerows(log_all)
    with open(os.path.join(a.out, "scaling.json"), "w") as f:
        json.dump(js, f, indent=1, sort_keys=True)
        f.write("\n")
    print(text)
    run.note("scaling results in %s" % a.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
