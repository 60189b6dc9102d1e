#!/bin/bash
# usage: ab-mt.sh workload threads runs scale lib...   (pinheap-bench takes WORKLOAD SCALE THREADS)
w=$1 t=$2 n=$3 sc=$4; shift 4
B=${BENCH:-build/tools/bench/pinheap-bench}
for r in $(seq $n); do for lib in "$@"; do
  PINHEAP_MODE=on LD_PRELOAD=$lib $B $w $sc $t | python3 -c "import json,sys; d=json.load(sys.stdin); print('$(basename $lib)', d['seconds'], d['peak_rss_kb'])"
done; done | python3 -c "
import sys,statistics as s,collections
d=collections.defaultdict(list)
for l in sys.stdin:
    n,a,b=l.split(); d[n].append((float(a),int(b)))
for n,v in d.items(): print(n, 'median s %.3f'%s.median(x[0] for x in v), 'rss', s.median(x[1] for x in v), 'runs', len(v))
"
