#!/bin/sh
# text_layout_core.sh -- the text layout in a runtime's core library (issue
# 30): libdemocore.so holds libpinheap.a whole (test/fixture/democore.c),
# linked by GNU ld's own script, which gathers .text.startup.* and
# .text.hot.* ahead of the rest of .text.  A small program that reaches it
# through another library (layout_probe_core -> libdemompi.so ->
# libdemocore.so, as a program reaches libopen-pal through libmpi), with
# code patching on, runs pinheap's start-up, the start-up row's blocks (up
# to 2032 bytes: the chunk caches too) and a malloc/free loop; the kernel
# maps a library's text 64 KiB at a time around each page a process runs
# (fault-around).  Every resident page of the core library's text must lie
# in a window from the text's start (.init, .plt) to the end of the
# functions marked PH_STARTUP, PH_STARTUP_RARE, PH_HOT and PH_WARM: a
# function it runs that is left in plain .text lies past them and makes one
# more window resident (16 pages; tcache_grow, ms_alloc_batch and
# os_notify did, 37 text pages resident against 21-30).  A page past them
# that shares a large page-cache folio with a page inside is the kernel
# mapping the folio whole, not code run there: told by the page frames
# (root; without them such a page makes the test skip).
# usage: text_layout_core.sh ARCHIVE CORE PROBE
# Exit 77 (ctest: skipped) when a tool or a condition it needs is missing.
set -u
archive=$1 core=$2 probe=$3

for tool in objdump nm awk; do
  if ! command -v $tool > /dev/null 2>&1; then
    echo "SKIP: $tool not found (binutils), the sections cannot be listed"; exit 77
  fi
done
if [ "$(getconf PAGESIZE)" != 4096 ]; then
  echo "SKIP: page size $(getconf PAGESIZE), the 64 KiB windows below assume 4096-byte pages"; exit 77
fi
# The end of the marked text in the core library: the highest end of a
# function the archive defines in .text.startup.pinheap* or .text.hot.pinheap*
# (by name: a name the archive defines twice, two files' static functions,
# is left out).
marked=$(objdump -t "$archive" 2>/dev/null |
         awk '/ F / { n[$NF]++; if ($4 ~ /^\.text\.startup\.pinheap/ || $4 ~ /^\.text\.hot\.pinheap/) m[$NF] = 1 }
              END { for (f in m) if (n[f] == 1) print f }')
if [ -z "$marked" ]; then
  echo "FAIL: $archive has no function in .text.startup.pinheap* or .text.hot.pinheap*" \
       "(PH_STARTUP and PH_HOT lost?)"
  exit 1
fi
syms=$(nm -S -n --defined-only "$core" 2>/dev/null | awk 'NF == 4 && ($3 == "t" || $3 == "T")')
hot_end=0
for pair in $(printf '%s\n' "$syms" | awk -v names="$marked" '
    BEGIN { n = split(names, a, "\n"); for (i = 1; i <= n; i++) want[a[i]] = 1 }
    want[$4] { print $1 ":" $2 }'); do
  e=$((0x${pair%:*} + 0x${pair#*:}))
  [ "$e" -gt "$hot_end" ] && hot_end=$e
done
if [ "$hot_end" -eq 0 ]; then
  echo "FAIL: none of the archive's marked functions is defined in $core"; exit 1
fi

out=$(PINHEAP_MODE=on LAYOUT_PROBE_PAGES=1 "$probe" "$(basename "$core")") || {
  echo "FAIL: $probe exited with an error: $out"; exit 1; }
line=$(printf '%s\n' "$out" | grep '^pages r-xp ')
if [ -z "$line" ]; then
  echo "FAIL: $probe found no text mapping of $(basename "$core"): $out"; exit 1
fi
set -- $line
off=$(($3)) start=$((${4%:}))
last_window=$(( (start + hot_end - off - 1) >> 16 ))
last_idx=$(( (((last_window + 1) << 16) - start) / 4096 - 1 ))
# Each resident page past last_idx, the last page of the last allowed
# window, is either code run there or a page of a large page-cache folio
# that also holds a page inside: the kernel maps a folio whole (6.x), so
# where ASLR puts a window's boundary inside one (1 load in 16 here), its
# pages past the boundary come in with it.  The folio is read from the page
# frames (root): the page is a tail, and the pages back to the window are
# its folio's (consecutive frames, no head between).
verdict=$(printf '%s\n' "$line" | awk -v last="$last_idx" '
  function hex(s,   v, i) { v = 0; for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1; return v }
  { for (k = 5; k <= NF; k++) {
      t = $k; i = t; f = ""; fr = ""
      if (index(t, "@") > 0) {
        i = substr(t, 1, index(t, "@") - 1); fr = substr(t, index(t, "@") + 1)
        if (fr ~ /[ht]$/) { f = substr(fr, length(fr)); fr = substr(fr, 1, length(fr) - 1) }
      }
      i += 0; res[i] = 1; flag[i] = f; frame[i] = fr; order[n++] = i
    } }
  END {
    out = 0; unknown = 0; far = 0; first = -1
    for (m = 0; m < n; m++) {
      i = order[m]
      if (i <= last) continue
      if (frame[i] == "") { unknown++; if (i > last + 15) far++; continue }
      k = i
      while (k > last && flag[k] == "t" && res[k - 1] && frame[k - 1] != "" &&
             (flag[k - 1] == "h" || flag[k - 1] == "t") && hex(frame[k - 1]) == hex(frame[k]) - 1)
        k--
      if (k > last) { out++; if (first < 0) first = i }
    }
    print out, unknown, far, first
  }')
set -- $verdict
outside=$1 unknown=$2 far=$3 first_idx=$4
printf 'core library text: %s pages resident, marked text ends at file offset 0x%x\n' \
  "$(printf '%s\n' "$line" | awk '{ print NF - 4 }')" "$hot_end"
if [ "$outside" -eq 0 ] && [ "$far" -eq 0 ] && [ "$unknown" -gt 0 ]; then
  echo "SKIP: $unknown resident text pages just past the window that holds the end of the start-up" \
       "and hot text, and no page frames to tell a large folio mapped whole from code run there" \
       "(/proc/self/pagemap shows frames to root only)"
  exit 77
fi
if [ "$outside" -gt 0 ] || [ "$far" -gt 0 ]; then
  [ "$first_idx" -ge 0 ] 2>/dev/null || first_idx=$((last_idx + 16))
  first_out=$((off + first_idx * 4096))
  names=$(printf '%s\n' "$syms" | awk -v lo="$first_out" '
    { a = 0; for (i = 1; i <= length($1); i++) a = a * 16 + index("0123456789abcdef", substr($1, i, 1)) - 1 }
    a >= lo && a < lo + 65536 { print $4 }' | head -8 | tr '\n' ' ')
  printf 'FAIL: %d resident text pages of %s lie past the window that holds the end of the' \
    "$((outside + far))" "$(basename "$core")"
  printf ' start-up and hot text (the first at file offset 0x%x, among: %s): a function a small' \
    "$first_out" "$names"
  echo " program runs is in plain .text (mark it PH_HOT, PH_WARM or PH_STARTUP)"
  exit 1
fi
echo "ok: the core library's resident text lies within the start-up and hot text's windows"
