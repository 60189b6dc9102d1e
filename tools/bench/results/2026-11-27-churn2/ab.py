#!/usr/bin/env python3
# ab4.py "wl:th,wl:th" RUNS lib...   medians of seconds and peak_rss_kb, interleaved
import sys, json, subprocess, statistics, os
cells=[c.split(':') for c in sys.argv[1].split(',')]; runs=int(sys.argv[2]); libs=sys.argv[3:]
bench=os.environ.get('BENCH','/work/main/build/tools/bench/pinheap-bench'); scale=os.environ.get('SCALE','1')
res={}
for r in range(runs):
    for wl,th in cells:
        for lib in libs:
            out=subprocess.run(['env','LD_PRELOAD='+lib,bench,wl,scale,th],capture_output=True,text=True).stdout
            d=json.loads(out.strip().splitlines()[-1]); res.setdefault((wl,th,lib),[]).append((d['seconds'],d['peak_rss_kb']))
for wl,th in cells:
    base=None
    for lib in libs:
        v=res[(wl,th,lib)]; t=statistics.median(x[0] for x in v); m=statistics.median(x[1] for x in v)
        if base is None: base=(t,m)
        print('%-10s %2s %-40s %.4f s (%.3f)  %7.0f kB (%.2f)'%(wl,th,lib[-40:],t,t/base[0],m,m/base[1]))
