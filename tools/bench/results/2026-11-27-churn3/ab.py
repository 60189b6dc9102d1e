#!/usr/bin/env python3
# ab.py "wl:th,wl:th" RUNS lib...   runs the cells interleaved (lib A B C, A B C, ...) and prints
# per cell and lib the medians of the workload's own seconds, of the process's CPU time (user +
# sys, from wait4) and of peak_rss_kb, each with its ratio to the first lib's and its spread
# (min-max).  BENCH: the bench program; SCALE: its scale (1).
import sys, json, subprocess, statistics, os
cells = [c.split(':') for c in sys.argv[1].split(',')]; runs = int(sys.argv[2]); libs = sys.argv[3:]
bench = os.environ.get('BENCH', os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            '../../../../build/tools/bench/pinheap-bench'))
scale = os.environ.get('SCALE', '1')
res = {}
for r in range(runs):
    for wl, th in cells:
        for lib in libs:
            env = dict(os.environ, LD_PRELOAD=lib)
            p = subprocess.Popen([bench, wl, scale, th], env=env, stdout=subprocess.PIPE, text=True)
            out = p.stdout.read()
            _, status, ru = os.wait4(p.pid, 0)
            d = json.loads(out.strip().splitlines()[-1])
            res.setdefault((wl, th, lib), []).append(
                (d['seconds'], ru.ru_utime + ru.ru_stime, d['peak_rss_kb']))
def fmt(v, k, base, f):
    m = statistics.median(x[k] for x in v)
    return m, (f + ' (%.3f) [' + f + '-' + f + ']') % (m, m / base[k] if base else 1.0,
                                                        min(x[k] for x in v), max(x[k] for x in v))
for wl, th in cells:
    base = None
    for lib in libs:
        v = res[(wl, th, lib)]
        cols = [fmt(v, k, base, f) for k, f in ((0, '%.4f'), (1, '%.3f'), (2, '%.0f'))]
        if base is None:
            base = [c[0] for c in cols]
        print('%-9s %2s %-14s wall %s  cpu %s  rss %s' % (wl, th, os.path.basename(lib)[:14],
                                                         cols[0][1], cols[1][1], cols[2][1]))
    sys.stdout.flush()
