#!/usr/bin/env bash
# nm_prefix.sh -- the name-shift test.  Main entry point: check_archive().
#
# Proves with nm that every defined global symbol of libpinheap.a (text,
# data, bss, rodata, weak, TLS, common, unique, ifunc: whatever nm -g
# --defined-only lists) starts with the configured prefix, except the names
# of the allow-list ALLOWLIST: the intercepted symbols of hooks/intercept/symbols.h,
# written at build time by test/nm_allowlist_gen.c.  (In a PINHEAP_SANITIZE build, ASan's ODR
# indicators "__odr_asan.<name>" are judged by the <name> they stand for.)  Checked for two archives:
#   1. the main build's archive, with the prefix it was configured with;
#   2. a second build of the project configured in a temp dir with
#      -DPINHEAP_PREFIX=phalt_ (tests and tools off), target pinheap only.
# For each archive it also proves that the public API is really there with
# the prefix and default visibility (so an empty or hidden archive cannot
# pass), and that the archive is position independent (no absolute 32-bit
# relocations on x86_64; it links whole into a shared object with -z text).
#
# Usage: nm_prefix.sh SOURCE_DIR MAIN_ARCHIVE MAIN_PREFIX CMAKE CC ALLOWLIST
set -euo pipefail

if [[ $# -ne 6 ]]; then
  echo "usage: $0 SOURCE_DIR MAIN_ARCHIVE MAIN_PREFIX CMAKE CC ALLOWLIST" >&2
  echo "  got $# argument(s): $*" >&2
  exit 2
fi
src_dir=$1
main_archive=$2
main_prefix=$3
cmake_bin=$4
cc_bin=$5
allowlist_file=$6
second_prefix=phalt_

for tool in nm readelf ar "$cc_bin" "$cmake_bin"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "nm_prefix: FAIL: required tool '$tool' not found in PATH (install binutils / gcc / cmake)" >&2
    exit 1
  fi
done
# The public header: a template (allocator/api/pinheap.h.in, names spelled
# @PINHEAP_PREFIX@name) or a plain header (names spelled PINHEAP_NAME(name)).
public_headers=()
for h in "$src_dir/allocator/api/pinheap.h.in" "$src_dir/allocator/pinheap.h"; do
  [[ -f $h ]] && public_headers+=("$h")
done
if [[ ! -f $src_dir/rename.h || ${#public_headers[@]} -eq 0 ]]; then
  echo "nm_prefix: FAIL: SOURCE_DIR '$src_dir' is not the pinheap source tree (no rename.h / allocator/pinheap.h[.in])" >&2
  exit 2
fi
if [[ ! $main_prefix =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
  echo "nm_prefix: FAIL: MAIN_PREFIX '$main_prefix' is not a C identifier prefix" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pinheap-nm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

failures=0
fail() {
  echo "nm_prefix: FAIL: $*" >&2
  failures=$((failures + 1))
}

# ---- the allow-list -----------------------------------------------------------
# allowed[name] = the one archive member allowed to define it, or "*".
declare -A allowed=()
if [[ -f $allowlist_file ]]; then
  lineno=0
  while IFS= read -r line || [[ -n $line ]]; do
    lineno=$((lineno + 1))
    line=${line%%#*}
    read -r -a words <<<"$line"
    case ${#words[@]} in
      0) ;;
      1) allowed[${words[0]}]='*' ;;
      2) allowed[${words[0]}]=${words[1]} ;;
      *) fail "$allowlist_file:$lineno: expected 'symbol [member.o]', got '$line'" ;;
    esac
  done <"$allowlist_file"
else
  fail "allow-list $allowlist_file is missing"
fi
echo "nm_prefix: ${#allowed[@]} allow-listed unprefixed name(s)"

# ---- the public API that must be present ----------------------------------------
# The issue's public set, plus every function the public header declares,
# so a new entry point is checked as soon as it is declared.
public_names=(malloc free calloc realloc reallocarray memalign posix_memalign
  aligned_alloc valloc pvalloc malloc_usable_size mallopt mallinfo2 malloc_stats
  malloc_trim create_mspace create_mspace_with_base destroy_mspace mspace_malloc
  mspace_free mspace_calloc mspace_realloc mspace_memalign mspace_usable_size
  mspace_trim mspace_mallinfo)
while IFS= read -r n; do
  public_names+=("$n")
done < <(cat "${public_headers[@]}" |
         grep -oE '(PINHEAP_NAME\([A-Za-z0-9_]+\)|@PINHEAP_PREFIX@[A-Za-z0-9_]+)[[:space:]]*\(' |
         sed -E 's/^PINHEAP_NAME\(([A-Za-z0-9_]+)\).*/\1/; s/^@PINHEAP_PREFIX@([A-Za-z0-9_]+).*/\1/')
mapfile -t public_names < <(printf '%s\n' "${public_names[@]}" | sort -u)

# check_archive ARCHIVE PREFIX LABEL
check_archive() {
  local archive=$1 prefix=$2 label=$3
  local nm_out="$tmp/$label.nm" elf_out="$tmp/$label.syms"
  echo "nm_prefix: [$label] checking $archive (prefix '$prefix')"
  if [[ ! -s $archive ]]; then
    fail "[$label] archive '$archive' does not exist or is empty"
    return
  fi
  if ! nm -A -P -g --defined-only "$archive" >"$nm_out" 2>"$tmp/$label.nm.err"; then
    fail "[$label] nm failed on '$archive': $(cat "$tmp/$label.nm.err")"
    return
  fi

  # 1. every defined global symbol has the prefix or is allow-listed.
  local total=0 offending=0 allow_used=0 member name type
  local base obj
  while read -r member name type _; do
    total=$((total + 1))
    # An ASan build adds an ODR indicator "__odr_asan.<global>" for each
    # instrumented global variable; it is judged by the name it stands for.
    base=${name#__odr_asan.}
    obj=${member%:}
    obj=${obj##*[}
    obj=${obj%]}
    if [[ $base == "$prefix"* ]]; then
      continue
    elif [[ -n ${allowed[$base]:-} && ( ${allowed[$base]} == '*' || ${allowed[$base]} == "$obj" ) ]]; then
      allow_used=$((allow_used + 1))
    elif [[ -n ${allowed[$base]:-} ]]; then
      offending=$((offending + 1))
      echo "nm_prefix: [$label]   UNPREFIXED: $name (nm type $type) in ${member%:}; allow-listed only in ${allowed[$base]}" >&2
    else
      offending=$((offending + 1))
      echo "nm_prefix: [$label]   UNPREFIXED: $name (nm type $type) in ${member%:}" >&2
    fi
  done <"$nm_out"
  echo "nm_prefix: [$label] $total defined global symbol(s), $offending without prefix '$prefix', $allow_used allow-listed"
  if ((offending > 0)); then
    fail "[$label] $offending defined global symbol(s) lack the prefix '$prefix' (listed above); make them static or add them to rename.h"
  fi

  # 2. the public API is defined, with the prefix, and exported (default
  #    visibility), so a runtime's shared core library exports it.
  if ! readelf -s -W "$archive" >"$elf_out" 2>"$tmp/$label.readelf.err"; then
    fail "[$label] readelf -s failed on '$archive': $(cat "$tmp/$label.readelf.err")"
    return
  fi
  local n sym vis missing=0
  for n in "${public_names[@]}"; do
    sym=$prefix$n
    if ! awk -v s="$sym" '$2 == s && $3 ~ /^[TWi]$/ { found = 1 } END { exit !found }' "$nm_out"; then
      fail "[$label] public function '$sym' is not defined as code (T/W/i) in the archive"
      missing=$((missing + 1))
      continue
    fi
    vis=$(awk -v s="$sym" '$8 == s && $7 != "UND" { print $6; exit }' "$elf_out")
    if [[ $vis != DEFAULT ]]; then
      fail "[$label] public function '$sym' has visibility '${vis:-?}', expected DEFAULT (PINHEAP_EXPORT)"
    fi
  done
  echo "nm_prefix: [$label] ${#public_names[@]} public name(s) checked, $missing missing"

  # 3. position independent code.
  if [[ $(uname -m) == x86_64 ]]; then
    local abs
    # Relocations of loaded sections only: DWARF (.rela.debug_*) uses
    # 32-bit section offsets in every object, PIC or not.
    abs=$(readelf -r -W "$archive" | awk '
      /^File: /                  { file = $2 }
      /^Relocation section /     { sec = $3; gsub(/\047/, "", sec) }
      sec !~ /^\.rela?\.debug/ && $3 ~ /^R_X86_64_(32|32S)$/ { print file " " sec ": " $0 }')
    if [[ -n $abs ]]; then
      echo "$abs" | head -n 20 >&2
      fail "[$label] archive has absolute 32-bit relocations (not -fPIC); first ones listed above"
    fi
  else
    echo "nm_prefix: [$label] relocation scan is x86_64-only; skipped on $(uname -m)"
  fi
  if ! "$cc_bin" -shared -o "$tmp/$label-whole.so" -Wl,-z,text \
       -Wl,--whole-archive "$archive" -Wl,--no-whole-archive -lpthread -ldl \
       >"$tmp/$label.ld.log" 2>&1; then
    cat "$tmp/$label.ld.log" >&2
    fail "[$label] the archive does not link whole into a shared object with -z text (not position independent?)"
  fi
}

# ---- 1. the main build -----------------------------------------------------------
check_archive "$main_archive" "$main_prefix" main

# ---- 2. a second build with another prefix -----------------------------------------
if [[ $second_prefix == "$main_prefix" ]]; then
  fail "the second prefix '$second_prefix' equals the main one; configure the main build with another prefix"
fi
echo "nm_prefix: configuring a second build with -DPINHEAP_PREFIX=$second_prefix in $tmp/build"
if ! "$cmake_bin" -S "$src_dir" -B "$tmp/build" \
     -DPINHEAP_PREFIX="$second_prefix" -DPINHEAP_BUILD_TESTS=OFF -DPINHEAP_BUILD_TOOLS=OFF \
     -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc_bin" >"$tmp/configure.log" 2>&1; then
  cat "$tmp/configure.log" >&2
  fail "configuring the second build (prefix $second_prefix) failed; log above"
elif ! "$cmake_bin" --build "$tmp/build" --target pinheap -j2 >"$tmp/build.log" 2>&1; then
  tail -n 60 "$tmp/build.log" >&2
  fail "building target pinheap with prefix $second_prefix failed; log tail above"
else
  second_archive=$(find "$tmp/build" -name libpinheap.a -type f | head -n 1)
  if [[ -z $second_archive ]]; then
    fail "the second build produced no libpinheap.a"
  else
    check_archive "$second_archive" "$second_prefix" "$second_prefix"
    # The main prefix must be gone entirely: the shift is not cosmetic.
    # (Skipped if every phalt_ name would match it, e.g. main prefix "ph".)
    if [[ $second_prefix != "$main_prefix"* ]]; then
      leftovers=$(awk -v p="$main_prefix" 'index($2, p) == 1 { print $2 }' "$tmp/$second_prefix.nm")
      if [[ -n $leftovers ]]; then
        echo "$leftovers" >&2
        fail "the $second_prefix archive still defines names with the main prefix '$main_prefix' (listed above)"
      fi
    fi
  fi
fi

if ((failures > 0)); then
  echo "nm_prefix: $failures failure(s)" >&2
  exit 1
fi
echo "nm_prefix: OK"
