#!/bin/sh
# text_layout.sh -- the text layout that keeps a small program's resident
# pages few (config/text_layout.cmake, tools/preload_text.ld):
#  1. every function config/resident_text.txt names that has a section of
#     its own in libpinheap.a has it renamed .text.hot.*, and every name is
#     a function of the sources (a renamed or removed function must leave
#     the list, or its replacement join it);
#  2. with the preload shim, a small program (text_layout_probe: a
#     malloc/free loop) has at most one 64 KiB fault-around window of the
#     shim's text resident (16 pages), and none of its unwind tables.
# usage: text_layout.sh ARCHIVE LIST PREFIX [SHIM PROBE]
# Exit 77 (ctest: skipped) when a tool or a condition it needs is missing.
set -u
archive=$1 list=$2 prefix=$3 shim=${4:-} probe=${5:-}

if ! command -v readelf > /dev/null 2>&1; then
  echo "SKIP: readelf not found (binutils), the sections cannot be listed"; exit 77
fi
sections=$(readelf -SW "$archive" 2>/dev/null | sed -n 's/.*\] \(\.text\.hot\.[^ ]*\).*/\1/p' | sort -u)
if [ -z "$sections" ]; then
  echo "FAIL: $archive has no .text.hot.* section: the renames of config/text_layout.cmake did not run" \
       "(objcopy missing or failing: see the build's output)"
  exit 1
fi
# A listed function the compiler inlined everywhere, or cloned under
# another suffix, has no section of its own at this build's optimisation
# level (-O3 inlines more than the default -O2): nothing to place.  It
# must still be a function of the sources; one that has a section but not
# a hot one was not renamed.
all=$(readelf -SW "$archive" 2>/dev/null | sed -n 's/.*\] \(\.text\.[^ ]*\).*/\1/p' | sort -u)
srcdir=$(cd "$(dirname "$list")/.." && pwd)
bad=0 count=0 hot=0 absent=
for name in $(sed -e 's/#.*//' "$list"); do
  count=$((count + 1))
  if printf '%s\n' "$sections" | grep -qxF -e ".text.hot.$name" -e ".text.hot.$prefix$name"; then
    hot=$((hot + 1))
  elif printf '%s\n' "$all" | grep -qxF -e ".text.$name" -e ".text.$prefix$name"; then
    echo "FAIL: $archive has the section .text.$name, not .text.hot.$name: the rename of" \
         "config/text_layout.cmake did not reach it"
    bad=1
  elif ! grep -rqw --include='*.[ch]' -e "${name%%.*}" "$srcdir/allocator" "$srcdir/hooks" "$srcdir/config"; then
    echo "FAIL: $list names '$name', which no source file defines (renamed or removed?): update the list"
    bad=1
  else
    absent="$absent $name"
  fi
done
[ $bad -eq 0 ] || exit 1
echo "ok: $hot of the $count functions of $list are in .text.hot.* sections; the others have no" \
     "section of their own in this build (inlined or cloned):${absent:- none}"
if [ "$hot" -lt $((count / 2)) ]; then
  echo "FAIL: fewer than half of the listed functions have a section of their own: the list no" \
       "longer describes this build's functions"
  exit 1
fi

[ -n "$shim" ] || exit 0
if [ "$(getconf PAGESIZE)" != 4096 ]; then
  echo "SKIP: page size $(getconf PAGESIZE), the 16-page window below assumes 4096"; exit 77
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
       "(add it to $list), or those sections outgrew the first window"
  exit 1
fi
if [ -n "$eh_resident" ] && [ "$eh_resident" -ne 0 ]; then
  echo "FAIL: $eh_resident pages of the shim's unwind tables (.eh_frame at file offset 0x$eh_off) resident," \
       "expected none: read-only data shares their window again (tools/preload_text.ld)"
  exit 1
fi
echo "ok: $text_resident pages of the shim's text resident (at most 16), ${eh_resident:-0} of its unwind tables"
