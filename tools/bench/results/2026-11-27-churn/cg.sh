#!/bin/bash
# cg.sh LIB WORKLOAD THREADS SCALE -- cachegrind of pinheap-bench under LD_PRELOAD=LIB (a pinheap
# preload shim, or tc / mi), with this machine's cache geometry (L1d 48 KiB 12-way, L2 2 MiB
# 16-way; the 2026-11-27 runs also used --D1=32768,8,64 --LL=1048576,16,64): prints the totals.
lib=$1; w=$2; t=$3; s=$4
case $lib in
 tc) pre=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4;;
 mi) pre=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2;;
 *) pre=$lib;;
esac
here=$(cd "$(dirname "$0")" && pwd); root=${ROOT:-$here/../../../..}
out=$(mktemp /tmp/cg.XXXXXX)
PINHEAP_MODE=on LD_PRELOAD=$pre valgrind --tool=cachegrind --cache-sim=yes --D1=49152,12,64 \
  --LL=2097152,16,64 --cachegrind-out-file=$out.out "$root/build/tools/bench/pinheap-bench" $w $s $t \
  > /dev/null 2> $out
echo "$lib $w $t: $(grep -E 'I *refs|D1  misses|LLd misses' $out | sed 's/==[0-9]*== //' | tr -s ' ' | tr '\n' ';')"
