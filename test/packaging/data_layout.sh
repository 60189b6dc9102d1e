#!/bin/sh
# data_layout.sh -- the writable data a small program keeps resident
# (PH_COLD_BSS, PH_HOT_DATA: allocator/base/startup.h): with the preload shim, a
# malloc/free loop (layout_probe) holds at most 16 pages of the shim's
# writable segment: its file-backed part (.data, .got) and the pages of
# .bss/.lbss it writes.  (22 before the big tables moved out of .bss: each
# small static between two of them made one more page resident.  15 or
# 16 today, from run to run with the same shim: address-space layout.)
# usage: data_layout.sh SHIM PROBE COMPILER-ID PROCESSOR
# Exit 77 (ctest: skipped) when a tool or a condition it needs is missing.
set -u
shim=$1 probe=$2 compiler=$3 processor=$4
limit=16

case $compiler/$processor in
  GNU/x86_64|GNU/AMD64|GNU/amd64) ;;
  *) echo "SKIP: PH_COLD_BSS moves the big tables out of .bss with GCC on x86-64 only" \
          "(this is $compiler on $processor), and the bound assumes it"; exit 77 ;;
esac

if ! command -v readelf > /dev/null 2>&1; then
  echo "SKIP: readelf not found (binutils), the shim's segments cannot be listed"; exit 77
fi
if [ "$(getconf PAGESIZE)" != 4096 ]; then
  echo "SKIP: page size $(getconf PAGESIZE), the bound of $limit pages assumes 4096"; exit 77
fi
# The end of the writable PT_LOAD (p_vaddr + p_memsz), from the load base.
seg_end=$(readelf -lW "$shim" | awk '$1 == "LOAD" && $7 ~ /W/ { print $3, $6 }' | tail -n 1)
[ -n "$seg_end" ] || { echo "FAIL: $shim has no writable PT_LOAD segment"; exit 1; }
set -- $seg_end
end=$(printf '%x' $(($1 + $2)))
out=$(PINHEAP_MODE=on LD_PRELOAD="$shim" "$probe" "$(basename "$shim")" "$end") || {
  echo "FAIL: $probe under the shim exited with an error: $out"; exit 1; }
echo "$out"
set -- $out
if [ "$#" -ne 4 ] || [ "$1" != data ] || [ "$3" != bss ]; then
  echo "FAIL: $probe printed '$out', expected 'data N bss M'"; exit 1
fi
total=$(($2 + $4))
if [ "$total" -gt "$limit" ]; then
  echo "FAIL: $total pages of the shim's writable segment resident in a malloc/free loop" \
       "($2 of .data, $4 written of .bss/.lbss), expected at most $limit: a big table a small" \
       "program does not write is back in .bss between small statics (mark it PH_COLD_BSS)," \
       "or .data grew"
  exit 1
fi
echo "ok: $total pages of the shim's writable segment resident (at most $limit)"
