#!/bin/sh
# sweep.sh SO...: 1-thread runs (deterministic sequences) of largechurn, regcache and large at
# scales 0.5, 1 and 2, one run each: peak RSS (MiB) and page faults; for regcache the hit rate
# and the registrations.  Another scale is another random sequence, so a policy's effect is
# told from chance by looking at all three.
d=$(dirname "$0"); bench=${BENCH:-$d/../../../../build/tools/bench/pinheap-bench}
for w in largechurn regcache large; do
  for sc in 0.5 1 2; do
    line="$w scale $sc:"
    for so in "$@"; do
      line="$line $(basename "$so" .so)=$(LD_PRELOAD=$so /usr/bin/time -f '%R' "$bench" $w $sc 1 2>&1 |
        python3 -c "import sys, json
L = sys.stdin.read().splitlines(); d = json.loads(L[0]); e = d.get('extra', {})
print('%dMiB/%dk' % (d['peak_rss_kb'] // 1024, int(L[1]) // 1000) +
      ('/hit=%s/regs=%d' % (e['hit_rate'], e['registrations']) if 'hit_rate' in e else ''))")"
    done
    echo "$line"
  done
done
