#!/bin/sh
# bench_rt.sh ARGS...: the bench program under `chrt -f ${RT:-10}` (SCHED_FIFO, so that both
# threads of a 2-thread run get a CPU on this shared 2-CPU machine, as on a quiet one).  Used
# as BENCH for ../2026-11-27-churn3/ab.py (the A/B loop): exec keeps one process, so wait4's
# CPU times are the bench's.
exec chrt -f "${RT:-10}" "${REAL_BENCH:-$(dirname "$0")/../../../../build/tools/bench/pinheap-bench}" "$@"
