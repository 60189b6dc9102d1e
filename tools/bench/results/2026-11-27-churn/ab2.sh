#!/bin/bash
# (ROOT: the tree whose build/ holds pinheap-bench; each LIB a copy of one variant's
# libpinheap-preload.so in a directory of its own, whose name labels the row; or tc / mi)
# usage: ab2.sh WORKLOAD THREADS RUNS SCALE LIB... : medians of wall (workload) and task-clock (ms, whole process)
w=$1; t=$2; n=$3; s=$4; shift 4
B=${ROOT:-/work/main}/build/tools/bench/pinheap-bench
declare -A T R C
for ((i=0;i<n;i++)); do
  for l in "$@"; do
    case $l in tc) pre=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4;; mi) pre=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2;; *) pre=$l;; esac
    out=$(PINHEAP_MODE=on LD_PRELOAD=$pre perf stat -x, -e task-clock -o /tmp/ab2.ps $B $w $s $t)
    T[$l]+="$(echo "$out" | sed 's/.*"seconds":\([0-9.]*\).*/\1/') "
    R[$l]+="$(echo "$out" | sed 's/.*"peak_rss_kb":\([0-9]*\).*/\1/') "
    C[$l]+="$(grep task-clock /tmp/ab2.ps | cut -d, -f1) "
  done
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for l in "$@"; do echo "$w $t $(basename $(dirname $l)): wall $(echo ${T[$l]} | med) cpu_ms $(echo ${C[$l]} | med) rss $(echo ${R[$l]} | med)"; done
