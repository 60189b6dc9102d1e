#!/usr/bin/env python3
"""rss.py RUNS WORKLOAD SCALE THREADS NAME=SHIM ... : peak RSS (VmHWM,
pinheap-bench's peak_rss_kb) of glibc and of each preload shim, runs
alternated (glibc, then each shim, every round; the order rotated), medians
and ranges.  The bench binary is BENCH (env, default build's)."""
import json, os, statistics, subprocess, sys
runs, wl, scale, thr = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
shims = [("glibc", None)] + [tuple(a.split("=", 1)) for a in sys.argv[5:]]
bench = os.environ.get("BENCH", "build/tools/bench/pinheap-bench")
res = {n: {"rss": [], "sec": []} for n, _ in shims}
for r in range(runs):
    k = r % len(shims)
    for name, shim in shims[k:] + shims[:k]:
        env = dict(os.environ)
        args = [bench, wl, scale, thr]
        if shim:
            env.update(PINHEAP_MODE="on", LD_PRELOAD=shim)
            args += ["--expect-malloc", os.path.basename(shim)]
        out = json.loads(subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout)
        res[name]["rss"].append(out["peak_rss_kb"])
        res[name]["sec"].append(out["seconds"])
g = statistics.median(res["glibc"]["rss"])
for name, _ in shims:
    x = res[name]["rss"]
    print("%-8s peak RSS median %6.0f kB (%d .. %d), %+6.0f kB over glibc; time median %.4f s"
          % (name, statistics.median(x), min(x), max(x), statistics.median(x) - g,
             statistics.median(res[name]["sec"])))
