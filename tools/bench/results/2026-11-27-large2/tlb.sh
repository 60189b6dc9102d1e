#!/bin/sh
# tlb.sh SO WORKLOAD THREADS: TLB flush events of one run by reason (perf's
# tlb:tlb_flush tracepoint, counted for the process and its threads), and
# its page faults.  reasons: 0 task switch, 1 remote shootdown (received),
# 2 local shootdown, 3 local MM shootdown, 4 remote IPI send, 5 wrong CPU.
so=$1; w=$2; t=$3
bench=${BENCH:-/tmp/large3/pinheap-bench}
ev=""
for r in 0 1 2 3 4 5; do ev="$ev -e tlb:tlb_flush --filter reason==$r"; done
LD_PRELOAD=$so perf stat -x, $ev -e page-faults "$bench" "$w" 1 "$t" \
  --expect-malloc "$(basename "$so")" 2>&1 >/dev/null |
  awk -F, -v n="$(basename "$so") $w t=$t" '/tlb_flush/ {r = r " r" i++ "=" $1} /page-faults/ {f = $1}
    END {print n, r, "faults=" f}'
