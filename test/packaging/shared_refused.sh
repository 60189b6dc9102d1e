#!/usr/bin/env bash
# shared_refused.sh -- a shared libpinheap must be refused at configure time.
# Main entry point: configure().
#
# Configures the project in a temp dir with -DBUILD_SHARED_LIBS=ON and
# requires that CMake fails with an error that explains why (the output names
# BUILD_SHARED_LIBS and says the library must be static).  A control run
# with -DBUILD_SHARED_LIBS=OFF must configure, so the failure is proven to
# come from the option and not from a broken tree or toolchain.
#
# Usage: shared_refused.sh SOURCE_DIR CMAKE [CC]
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 SOURCE_DIR CMAKE [CC]" >&2
  echo "  got $# argument(s): $*" >&2
  exit 2
fi
src_dir=$1
cmake_bin=$2
cc_bin=${3:-cc}
if [[ ! -f $src_dir/CMakeLists.txt ]]; then
  echo "shared_refused: FAIL: SOURCE_DIR '$src_dir' has no CMakeLists.txt" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pinheap-shared.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# configure NAME SHARED -> exit status of cmake; output in $tmp/NAME.log
configure() {
  local name=$1 shared=$2 rc=0
  "$cmake_bin" -S "$src_dir" -B "$tmp/$name" -DBUILD_SHARED_LIBS="$shared" \
    -DPINHEAP_BUILD_TESTS=OFF -DPINHEAP_BUILD_TOOLS=OFF -DCMAKE_C_COMPILER="$cc_bin" \
    >"$tmp/$name.log" 2>&1 || rc=$?
  return "$rc"
}

failures=0
fail() {
  echo "shared_refused: FAIL: $*" >&2
  failures=$((failures + 1))
}

if configure shared ON; then
  cat "$tmp/shared.log" >&2
  fail "configuring with -DBUILD_SHARED_LIBS=ON succeeded; it must fail (output above)"
else
  echo "shared_refused: -DBUILD_SHARED_LIBS=ON failed to configure, as required; its message:"
  sed -n '/CMake Error/,/^-- Configuring incomplete/p' "$tmp/shared.log" | head -n 20
  grep -q 'CMake Error' "$tmp/shared.log" ||
    fail "the failure is not a CMake error (no 'CMake Error' in the output)"
  grep -q 'BUILD_SHARED_LIBS' "$tmp/shared.log" ||
    fail "the error does not name BUILD_SHARED_LIBS"
  grep -qi 'static' "$tmp/shared.log" ||
    fail "the error does not say the library must be static"
  if [[ $failures -gt 0 ]]; then cat "$tmp/shared.log" >&2; fi
fi

if ! configure control OFF; then
  cat "$tmp/control.log" >&2
  fail "the control configure with -DBUILD_SHARED_LIBS=OFF failed too, so the refusal proves nothing (output above)"
fi

if ((failures > 0)); then
  echo "shared_refused: $failures failure(s)" >&2
  exit 1
fi
echo "shared_refused: OK"
