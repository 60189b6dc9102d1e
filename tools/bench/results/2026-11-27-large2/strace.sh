#!/bin/sh
# strace.sh OUTDIR SO...: `strace -c -f` of one run of large and largechurn at
# 1 and 2 threads per shim (scale 1); the mapping calls' counts and errors
# summed into OUTDIR/strace-summary.txt, the full tables beside it.
out=$1; shift
bench=${BENCH:-/tmp/large3/pinheap-bench}
mkdir -p "$out"
for w in large largechurn; do for t in 1 2; do for so in "$@"; do
  n=$(basename "$so" .so)
  LD_PRELOAD=$so strace -f -c -o "$out/strace-$w-$t-$n.txt" "$bench" "$w" 1 "$t" \
    --expect-malloc "$(basename "$so")" >/dev/null
  awk -v k="$w t=$t $n" '$NF ~ /^(mmap|munmap|mremap|madvise|mincore|mprotect|brk)$/ {
      c = ($5 ~ /^[0-9]+$/) ? $4 " (" $5 " failed)" : $4; s = s " " $NF "=" c }
    END {print k ":" s}' "$out/strace-$w-$t-$n.txt" >> "$out/strace-summary.txt"
done; done; done
