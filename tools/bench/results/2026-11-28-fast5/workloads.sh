#!/bin/sh
# Callgrind instruction totals of pinheap-bench workloads (scale 0.05, 1 and
# 2 threads) through the preload shim, for each build dir given.
# Usage: workloads.sh BUILD_A BUILD_B ...   (prints: workload threads build Ir)
T=$(mktemp -d)
for w in fixed churn tree larson; do
  for th in 1 2; do
    for B in "$@"; do
      PINHEAP_MODE=on LD_PRELOAD=$B/tools/libpinheap-preload.so valgrind --tool=callgrind \
        --callgrind-out-file=$T/cg $B/tools/bench/pinheap-bench $w 0.05 $th \
        --expect-malloc libpinheap-preload.so >/dev/null 2>$T/err || { cat $T/err; exit 1; }
      echo "$w $th $B $(grep -m1 '^summary:' $T/cg | awk '{print $2}')"
    done
  done
done
rm -rf $T
