#!/usr/bin/env python3
# regcache_ab.py RUNS lib...  the regcache row interleaved (lib A B C, A B C, ...) at 1 and 2
# threads: medians of the hit rate, registrations, registered MiB, release events and peak
# RSS (KiB), with min-max.  BENCH: the bench program; RT=10: under `chrt -f 10`.
import sys, json, subprocess, statistics, os
runs = int(sys.argv[1]); libs = sys.argv[2:]
bench = os.environ.get('BENCH', os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            '../../../../build/tools/bench/pinheap-bench'))
rt = ['chrt', '-f', os.environ['RT']] if os.environ.get('RT') else []
res = {}
for r in range(runs):
    for th in ('1', '2'):
        for lib in libs:
            out = subprocess.run(rt + [bench, 'regcache', '1', th], env=dict(os.environ, LD_PRELOAD=lib),
                                 stdout=subprocess.PIPE, text=True, check=True).stdout
            d = json.loads(out.strip().splitlines()[-1]); e = d['extra']
            res.setdefault((th, lib), []).append((e['hit_rate'], e['registrations'], e['registered_mib'],
                                                  e['release_events'], d['peak_rss_kb'], d['seconds']))
names = ('hit', 'regs', 'reg_mib', 'rel_ev', 'rss_kb', 's')
for th in ('1', '2'):
    for lib in libs:
        v = res[(th, lib)]
        cols = []
        for k, n in enumerate(names):
            xs = [x[k] for x in v]
            cols.append('%s %.4g [%.4g-%.4g]' % (n, statistics.median(xs), min(xs), max(xs)))
        print('regcache %s %-16s %s' % (th, os.path.basename(lib)[:16], '  '.join(cols)))
