#!/bin/sh
# pair.sh SHIM: callgrind instructions per malloc(32)+free pair, (I(2N) - I(N)) / N, N = 200000
B=$(dirname "$0")/../../../../build/tools/bench/pinheap-bench-pair
t() { PINHEAP_MODE=on LD_PRELOAD=$1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
      $B $2 --expect-malloc libpinheap-preload.so 2>&1 | sed -n 's/.*Collected : //p'; }
a=$(t "$1" 200000); b=$(t "$1" 400000)
echo "$1: $a $b pair $(echo "scale=2; ($b - $a) / 200000" | bc)"
