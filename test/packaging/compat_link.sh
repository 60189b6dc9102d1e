#!/usr/bin/env bash
# compat_link.sh -- the compat stub test.  Main entry point: link_and_run().
#
# libopenmpi_malloc.a is kept empty so that legacy link lines with
# -lopenmpi_malloc still link.  This test proves:
#   1. it defines no symbol a program could come to rely on (nm -g
#      --defined-only lists nothing), yet is a valid archive;
#   2. a plain libc program links and runs with -lopenmpi_malloc alone;
#   3. a program calling the prefixed API links and runs with
#      -L<libdir> -lopenmpi_malloc -lpinheap -lpthread -ldl.
#
# Usage: compat_link.sh SOURCE_DIR BUILD_DIR LIB_DIR PREFIX [CC]
#   BUILD_DIR holds the generated include/pinheap.h and pinheap_config.h;
#   LIB_DIR holds both archives.
set -euo pipefail

if [[ $# -lt 4 || $# -gt 5 ]]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR LIB_DIR PREFIX [CC]" >&2
  echo "  got $# argument(s): $*" >&2
  exit 2
fi
src_dir=$1
build_dir=$2
lib_dir=$3
prefix=$4
cc_bin=${5:-cc}

prog_src=$src_dir/test/consumer/compat_main.c
for f in "$prog_src" "$build_dir/include/pinheap.h" "$build_dir/include/pinheap_config.h" \
         "$lib_dir/libopenmpi_malloc.a" "$lib_dir/libpinheap.a"; do
  if [[ ! -f $f ]]; then
    echo "compat_link: FAIL: expected file '$f' does not exist (build the project first)" >&2
    exit 1
  fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pinheap-compat.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

failures=0
fail() {
  echo "compat_link: FAIL: $*" >&2
  failures=$((failures + 1))
}

# ---- 1. the stub defines nothing --------------------------------------------------
if ! ar t "$lib_dir/libopenmpi_malloc.a" >"$tmp/members" 2>&1; then
  fail "libopenmpi_malloc.a is not a valid archive: $(cat "$tmp/members")"
fi
if ! nm -g --defined-only "$lib_dir/libopenmpi_malloc.a" >"$tmp/nm" 2>&1; then
  fail "nm failed on libopenmpi_malloc.a: $(cat "$tmp/nm")"
else
  # nm prints "member.o:" headers and blank lines; anything else is a symbol.
  defined=$(grep -Ev '^$|:$' "$tmp/nm" || true)
  if [[ -n $defined ]]; then
    echo "$defined" >&2
    fail "libopenmpi_malloc.a defines global symbols (listed above); it must stay empty"
  else
    echo "compat_link: libopenmpi_malloc.a defines no global symbol ($(wc -l <"$tmp/members") member(s))"
  fi
fi

# link_and_run NAME CFLAGS... -- LIBS...
link_and_run() {
  local name=$1
  shift
  local cflags=() libs=()
  while [[ $# -gt 0 && $1 != -- ]]; do cflags+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  libs=("$@")
  echo "compat_link: [$name] $cc_bin ${cflags[*]} compat_main.c -o $name ${libs[*]}"
  if ! "$cc_bin" -std=gnu11 -Wall "${cflags[@]}" "$prog_src" -o "$tmp/$name" "${libs[@]}" \
       >"$tmp/$name.log" 2>&1; then
    cat "$tmp/$name.log" >&2
    fail "[$name] linking with '${libs[*]}' failed (log above)"
    return
  fi
  if ! "$tmp/$name" >"$tmp/$name.out" 2>&1; then
    cat "$tmp/$name.out" >&2
    fail "[$name] the program linked with '${libs[*]}' failed (output above)"
    return
  fi
  cat "$tmp/$name.out"
}

# ---- 2. a plain program with the legacy library alone --------------------------------
link_and_run legacy_only -- -L"$lib_dir" -lopenmpi_malloc -lpthread -ldl

# ---- 3. the prefixed API with the legacy line ----------------------------------------
link_and_run legacy_with_pinheap \
  -DCOMPAT_USE_PINHEAP "-DEXPECT_PREFIX=\"$prefix\"" \
  -I"$build_dir/include" \
  -- -L"$lib_dir" -lopenmpi_malloc -lpinheap -lpthread -ldl

if ((failures > 0)); then
  echo "compat_link: $failures failure(s)" >&2
  exit 1
fi
echo "compat_link: OK"
