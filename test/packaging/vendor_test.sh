#!/usr/bin/env bash
# vendor_test.sh -- pinheap vendored into a runtime's build, and built as a
# new user builds it on a fresh machine.  Main entry point: the mode.
#
# usage: vendor_test.sh subdir|fetch|fresh SOURCE_DIR WORK_DIR
#   subdir  test/packaging/vendor adds pinheap with add_subdirectory,
#   fetch   ... with FetchContent from a tarball of SOURCE_DIR (a file:// URL);
#           each with the prefix set as a normal variable.  Checks: the first
#           configure takes that prefix; pinheap adds no test or tool target
#           and no CMAKE_BUILD_TYPE to the parent's cache; the parent's
#           `cmake --install` succeeds and installs its own targets beside
#           pinheap's files; the installed program runs served by pinheap.
#   fresh   the README's main job with no pkg-config package visible
#           (Criterion included): configure, build and run pinheap-info, then
#           `cmake --install`, which installs pinheap-info and the preload shim.
# Prints "FAIL: ..." for each broken check and exits 1; "ok ..." otherwise.
set -euo pipefail

mode=$1 src=$(cd "$2" && pwd) work=$3
rm -rf "$work"
mkdir -p "$work"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
run() {
  echo "+ $*"
  local rc=0
  "$@" >"$work/last.log" 2>&1 || rc=$?
  if ((rc != 0)); then
    cat "$work/last.log"
    fail "$* exited $rc"
    return 1
  fi
}

# The source as a release tarball would hold it: the tracked and the new
# files, no build directory.
tarball() {
  (cd "$src" && git ls-files -co --exclude-standard 2>/dev/null) >"$work/files" ||
    (cd "$src" && find . -path ./build\* -prune -o -type f -print) >"$work/files"
  tar -C "$src" -czf "$work/pinheap.tar.gz" --transform 's,^\(\./\)\?,pinheap/,' -T "$work/files"
}

case $mode in
subdir|fetch)
  args=(-DPINHEAP_VENDOR="$mode")
  if [[ $mode == subdir ]]; then
    args+=(-DPINHEAP_SOURCE="$src")
  else
    tarball
    args+=(-DPINHEAP_TARBALL="file://$work/pinheap.tar.gz")
  fi
  run cmake -S "$src/test/packaging/vendor" -B "$work/build" "${args[@]}" || exit 1
  cache=$work/build/CMakeCache.txt
  grep -q '^CMAKE_BUILD_TYPE:STRING=$' "$cache" ||
    fail "the parent's CMAKE_BUILD_TYPE was set: $(grep '^CMAKE_BUILD_TYPE' "$cache")"
  run cmake --build "$work/build" -j2 || exit 1
  for t in test_api pinheap-info pinheap-preload fuzz_ops; do
    if cmake --build "$work/build" --target help | grep -qw "$t"; then
      fail "vendored pinheap added the target $t to the parent's build"
    fi
  done
  nm -D --defined-only "$work/build/libmyrt_core.so" | grep -qw myrt_heap_malloc ||
    fail "libmyrt_core.so has no myrt_heap_malloc: the first configure did not take the parent's prefix"
  run cmake --install "$work/build" --prefix "$work/inst" || exit 1
  for f in bin/myrt_app lib/libmyrt_core.so lib/libpinheap.a include/pinheap.h \
           include/pinheap_config.h lib/cmake/pinheap/pinheapConfig.cmake lib/pkgconfig/pinheap.pc; do
    [[ -e $work/inst/$f ]] || fail "the parent's install has no $f"
  done
  out=$(OMPI_MCA_mpi_leave_pinned=1 "$work/inst/bin/myrt_app" 2>&1) || fail "myrt_app: $out"
  echo "$out"
  [[ $out == "myrt_core: prefix myrt_heap_, enabled 1, owns malloc's block 1" ]] ||
    fail "the installed program is not served by pinheap with the parent's prefix: $out"
  ;;
fresh)
  empty=$work/no-pkg-config
  mkdir -p "$empty"
  export PKG_CONFIG_LIBDIR=$empty PKG_CONFIG_PATH=
  run cmake -S "$src" -B "$work/build" || exit 1
  grep -q 'Criterion not found' "$work/last.log" ||
    fail "configure did not say the tests are left out without Criterion"
  run cmake --build "$work/build" -j2 || exit 1
  out=$("$work/build/tools/pinheap-info" 2>&1) || fail "pinheap-info exited $?"
  grep -q '^decision: ' <<<"$out" || fail "pinheap-info printed no decision: $(head -3 <<<"$out")"
  run cmake --install "$work/build" --prefix "$work/inst" || exit 1
  [[ -x $work/inst/bin/pinheap-info ]] || fail "cmake --install did not install bin/pinheap-info"
  [[ -e $work/inst/lib/libpinheap-preload.so ]] ||
    fail "cmake --install did not install lib/libpinheap-preload.so"
  "$work/inst/bin/pinheap-info" >/dev/null 2>&1 || fail "the installed pinheap-info does not run"
  ;;
*)
  echo "vendor_test.sh: mode '$mode', expected subdir, fetch or fresh" >&2
  exit 2
  ;;
esac
if ((fails)); then
  exit 1
fi
echo "ok $mode"
rm -rf "$work"
