#!/bin/bash
# usage: fastpair.sh SO (a file named libpinheap-preload.so) -> instructions per malloc(32)+free pair
so=$1; B=${ROOT:-/work/main}/build/tools/bench/pinheap-bench-pair
for N in 200000 400000; do
  PINHEAP_MODE=on LD_PRELOAD=$so valgrind --tool=callgrind --callgrind-out-file=/tmp/fp.x.$N $B $N --expect-malloc libpinheap-preload.so >/dev/null 2>/tmp/fp.err.$N
  eval I$N=$(grep -E "^summary:|^totals:" /tmp/fp.x.$N | head -1 | awk '{print $2}')
done
echo "scale=2; ($I400000 - $I200000) / 200000" | bc
