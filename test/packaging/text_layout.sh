#!/bin/sh
# text_layout.sh -- the text layout that keeps a small program's resident
# pages few (PH_HOT, allocator/base/base.h; tools/preload_text.ld):
#  1. the functions marked PH_HOT (allocator/base/base.h) are in
#     .text.hot.pinheap in libpinheap.a (a sample: malloc, free and the
#     allocator's entry points);
#  2. with the preload shim, a small program (layout_probe: a
#     malloc/free loop) has at most one 64 KiB fault-around window of the
#     shim's text resident (16 pages), and none of its unwind tables.
# usage: text_layout.sh ARCHIVE PREFIX [SHIM PROBE BUILD_TYPE]
# Exit 77 (ctest: skipped) when a tool or a condition it needs is missing.
set -u
archive=$1 prefix=$2 shim=${3:-} probe=${4:-} build_type=${5:-}

if ! command -v readelf > /dev/null 2>&1 || ! command -v objdump > /dev/null 2>&1; then
  echo "SKIP: readelf or objdump not found (binutils), the sections cannot be listed"; exit 77
fi
syms=$(objdump -t "$archive" 2>/dev/null)
# in_section SECTION MARK NAME...: each NAME a function of the archive in
# SECTION (where MARK puts it), or FAIL.
in_section() {
  want=$1 mark=$2; shift 2
  for name in "$@"; do
    sec=$(printf '%s\n' "$syms" | awk -v n="$name" '$NF == n && / F / { print $4; exit }')
    if [ "$sec" != "$want" ]; then
      echo "FAIL: $archive defines $name in section '${sec:-(none)}', expected $want" \
           "(its $mark mark lost?)"
      exit 1
    fi
  done
}
# PH_HOT (allocator/base/base.h) places a function in .text.hot.pinheap.
# A sample that every process runs: the entry points and the allocator's.
in_section .text.hot.pinheap PH_HOT malloc free "${prefix}malloc" "${prefix}free" \
  "${prefix}front_malloc_slow" "${prefix}tcache_get"
echo "ok: malloc, free and the allocator's entry points are in .text.hot.pinheap"
# PH_STARTUP (allocator/base/startup.h) places a function in
# .text.startup.pinheap.  A sample of the installation's that relocation
# patching runs at start-up in the transitive case (a runtime's core library
# behind libc; test/fixture/democore.c): one left in plain .text lands far
# from the start-up text and costs one more 64 KiB fault-around window of the
# core library's text (up to 16 pages, issue 30).
in_section .text.startup.pinheap PH_STARTUP "${prefix}reloc_patched_slot" \
  "${prefix}reloc_stats_get" "${prefix}install_run"
echo "ok: the start-up functions of relocation patching are in .text.startup.pinheap"

# The copies' record (hooks/decide/copies.c) holds this copy's public API
# through hidden aliases (COPIES_SELF_ALIAS, hooks/decide/dispatch.h): in a
# core library each entry is then a relative relocation, not one symbol
# lookup of ld.so's per name at every start-up (13 of them).  A reference to
# an exported name there brings the lookups back.
relocs=$(readelf -rW "$archive" 2>/dev/null |
         awk '/^File:/ { f = $2 } /R_X86_64|R_AARCH64/ && f ~ /copies\.c\.o/ { print $5 }')
for name in set_event_handler register_release open enabled decision_text install_text \
            consumers_text fabric_monitor_import; do
  if printf '%s\n' "$relocs" | grep -qx "${prefix}$name"; then
    echo "FAIL: copies.c refers to the exported ${prefix}$name, expected its hidden alias" \
         "${prefix}${name}_self (a symbol lookup at load in a core library)"
    exit 1
  fi
  if ! printf '%s\n' "$relocs" | grep -qx "${prefix}${name}_self"; then
    echo "FAIL: copies.c does not refer to ${prefix}${name}_self (the record's $name entry)"
    exit 1
  fi
done
echo "ok: the copies' record binds the API by hidden aliases (no symbol lookup at load)"

if [ -z "$shim" ]; then
  echo "note: the shim's resident pages are not counted in this build (sanitizers and" \
       "PINHEAP_DEBUG=2 run other code by design)"
  exit 0
fi
# The bound of one window holds for the default build (-O2): at -O3 the
# code marked PH_HOT grows past 64 KiB with inlining.
case $build_type in
  RelWithDebInfo) ;;
  *) echo "SKIP: the shim's resident text is bounded for the default RelWithDebInfo build (-O2)," \
          "this is '$build_type'"; exit 77 ;;
esac
if [ "$(getconf PAGESIZE)" != 4096 ]; then
  echo "SKIP: page size $(getconf PAGESIZE), the 16-page window below assumes 4096"; exit 77
fi
# With the loop on a thread (LAYOUT_PROBE_THREAD=1, test text_layout_thread),
# the bound holds where a new arena's mapping comes aligned as the kernel
# gives it (allocator/heap/state.c: ms_create): Linux places an anonymous
# mapping whose length is a multiple of 2 MiB on a 2 MiB boundary from 6.7
# on; before, the mapping is trimmed by code outside the hot text.
if [ "${LAYOUT_PROBE_THREAD:-}" = 1 ]; then
  kv=$(uname -r) major=${kv%%.*} rest=${kv#*.}
  minor=${rest%%[!0-9]*}
  if [ "$major" -lt 6 ] 2>/dev/null || { [ "$major" -eq 6 ] && [ "${minor:-0}" -lt 7 ]; } 2>/dev/null; then
    echo "SKIP: Linux $kv places no anonymous mapping on a 2 MiB boundary (6.7 and later do):" \
         "a new arena's mapping is trimmed by code outside the hot text"; exit 77
  fi
fi
out=$(PINHEAP_MODE=on LD_PRELOAD="$shim" "$probe" "$(basename "$shim")") || {
  echo "FAIL: $probe under the shim exited with an error: $out"; exit 1; }
echo "$out"
# The mapping that holds .eh_frame (by its file offset): its resident pages.
eh_off=$(readelf -SW "$shim" | sed -n 's/.*\] \.eh_frame  *[A-Z]* *[0-9a-f]* \([0-9a-f]*\) .*/\1/p')
text_resident=0 eh_resident=
while read -r perm off pages resident; do
  [ "$perm" = r-xp ] && text_resident=$((text_resident + resident))
  if [ -n "$eh_off" ] && [ $((off)) -le $((0x$eh_off)) ] && [ $((0x$eh_off)) -lt $((off + pages * 4096)) ]; then
    eh_resident=$resident
  fi
done <<END
$out
END
if [ "$text_resident" -gt 16 ]; then
  echo "FAIL: $text_resident pages of the shim's text resident in a malloc/free loop, expected at most 16" \
       "(one 64 KiB window): a function it runs is outside .text.startup/.text.hot" \
       "(mark it PH_HOT), or those sections outgrew the first window"
  exit 1
fi
if [ -n "$eh_resident" ] && [ "$eh_resident" -ne 0 ]; then
  echo "FAIL: $eh_resident pages of the shim's unwind tables (.eh_frame at file offset 0x$eh_off) resident," \
       "expected none: read-only data shares their window again (tools/preload_text.ld)"
  exit 1
fi
echo "ok: $text_resident pages of the shim's text resident (at most 16), ${eh_resident:-0} of its unwind tables"
