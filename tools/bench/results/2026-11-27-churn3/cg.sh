#!/bin/sh
# cg.sh SHIM OUT [WL SCALE THREADS]: callgrind of the bench (churn 0.05 1 by default) under SHIM,
# per instruction (--dump-instr=yes, for cgasm.py), into OUT; prints the run's instruction total.
# Calls and inclusive costs: callgrind_annotate --inclusive=yes --tree=caller OUT.
B=$(dirname "$0")/../../../../build/tools/bench/pinheap-bench
PINHEAP_MODE=on LD_PRELOAD=$1 valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$2" \
  "$B" "${3:-churn}" "${4:-0.05}" "${5:-1}" 2>&1 | sed -n 's/.*Collected : //p'
