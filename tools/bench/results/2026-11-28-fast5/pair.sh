#!/bin/sh
# Instructions per malloc(32)+free pair under callgrind, through the preload
# shim: (I(400000) - I(200000)) / 200000.  Usage: pair.sh [builddir]
B=${1:-build}
T=$(mktemp -d)
for n in 200000 400000; do
  PINHEAP_MODE=on LD_PRELOAD=$B/tools/libpinheap-preload.so valgrind --tool=callgrind \
    --callgrind-out-file=$T/cg.$n $B/tools/bench/pinheap-bench-pair $n \
    --expect-malloc libpinheap-preload.so >/dev/null 2>$T/err.$n || { cat $T/err.$n; exit 1; }
  eval I$n=$(grep -m1 '^summary:' $T/cg.$n | awk '{print $2}')
done
echo "$I200000 $I400000" | awk '{printf "%.2f instructions per pair\n", ($2-$1)/200000}'
rm -rf $T
