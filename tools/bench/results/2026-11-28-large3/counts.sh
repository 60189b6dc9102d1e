#!/bin/sh
# counts.sh SO...: for each shim, largechurn at 1 and 2 threads (scale 1): TLB flushes by reason
# and page faults (../2026-11-27-large2/tlb.sh, 3 runs each, under `chrt -f 10` so that both
# threads run), and the memory system calls of one run (strace -f -c, the counts and the failed
# calls).
d=$(dirname "$0")
export BENCH="${BENCH:-$d/../../../../build/tools/bench/pinheap-bench}"
for so in "$@"; do
  for t in 1 2; do
    for i in 1 2 3; do chrt -f 10 sh "$d/../2026-11-27-large2/tlb.sh" "$so" largechurn "$t"; done
    strace -f -c -e trace=memory -o /tmp/counts-strace.txt env LD_PRELOAD="$so" \
      "$BENCH" largechurn 1 "$t" >/dev/null
    echo "$(basename "$so") t=$t syscalls: $(awk 'NF >= 5 && $NF != "total" && $1 ~ /^[0-9.]+$/ {
      printf "%s=%s%s ", $NF, $4, (NF == 6 ? "(" $5 " failed)" : "")}' /tmp/counts-strace.txt)"
  done
done
