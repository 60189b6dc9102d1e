#!/bin/sh
# CPU time (perf stat's task-clock, seconds; the machine is shared, so not
# the wall time), A/B interleaved: pinheap-bench-pair (N pairs) and the
# pinheap-bench workloads given (NAME:THREADS, scale 0.2), builds A and B,
# R rounds.  Usage: timing.sh A B R N WORKLOAD...   prints: name build seconds
A=$1 B=$2 R=$3 N=$4; shift 4
T=$(mktemp)
t() {
  perf stat -x, -e task-clock -o $T "$@" >/dev/null || exit 1
  awk -F, '/task-clock/ {printf "%.4f\n", $1 / 1000}' $T
}
for r in $(seq $R); do
  for X in $A $B; do
    P="env PINHEAP_MODE=on LD_PRELOAD=$X/tools/libpinheap-preload.so"
    E="--expect-malloc libpinheap-preload.so"
    echo "pair $X $(t $P $X/tools/bench/pinheap-bench-pair $N $E)"
    for w in "$@"; do
      wl=${w%:*} th=${w#*:}
      echo "$w $X $(t $P $X/tools/bench/pinheap-bench $wl 0.2 $th $E)"
    done
  done
done
rm -f $T
