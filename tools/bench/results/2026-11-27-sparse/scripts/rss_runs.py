#!/usr/bin/env python3
"""rss_runs.py WL:THREADS RUNS SHIM... : peak RSS (pinheap-bench's
peak_rss_kb) of each preload shim, runs alternated and rotated; prints each
shim's median and every run, sorted.  SCALE (default 1) and BENCH from the
environment."""
import sys, json, subprocess, statistics, os
libs = sys.argv[3:]; wl, th = sys.argv[1].split(':'); runs = int(sys.argv[2])
res = {l: [] for l in libs}
for r in range(runs):
    for l in (libs[r % len(libs):] + libs[:r % len(libs)]):
        out = subprocess.run(['env', 'PINHEAP_MODE=on', 'LD_PRELOAD=' + l, os.environ.get('BENCH', '/tmp/sparse-new/tools/bench/pinheap-bench'), wl, os.environ.get('SCALE', '1'), th], capture_output=True, text=True).stdout
        d = json.loads(out.strip().splitlines()[-1]); res[l].append(d['peak_rss_kb'])
for l in libs:
    v = sorted(res[l]); print("%-50s median %6d  %s" % (l[-50:], statistics.median(v), v))
