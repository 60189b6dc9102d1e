#!/usr/bin/env bash
# install_consumer.sh -- the install/consumer test.  Main entry point:
# build_variant().
#
# Installs the current build into a temp prefix (cmake --install), checks the
# installed tree, then builds the consumer of test/consumer/ against it in
# three ways and runs it each time:
#   cmake    find_package(pinheap CONFIG) + pinheap::pinheap (test/consumer/CMakeLists.txt)
#   pkgconf  pkg-config --cflags --libs pinheap, after MOVING the installed
#            tree elsewhere (the .pc file must be relocatable)
#   plain    -Wl,--whole-archive libpinheap.a -Wl,--no-whole-archive and the
#            legacy -lopenmpi_malloc, as README.md documents
# Each time the consumer's core library must contain every global symbol of
# the archive (proof that it was linked whole) and the program must not
# (it gets pinheap only through the core library).  Asking the CMake package
# for a version it is not (99.0) must fail.
#
# Usage: install_consumer.sh SOURCE_DIR BUILD_DIR PREFIX CMAKE [CC]
set -euo pipefail

if [[ $# -lt 4 || $# -gt 5 ]]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR PREFIX CMAKE [CC]" >&2
  echo "  got $# argument(s): $*" >&2
  exit 2
fi
src_dir=$1
build_dir=$2
prefix=$3
cmake_bin=$4
cc_bin=${5:-cc}
consumer_dir=$src_dir/test/consumer

for tool in nm make pkg-config "$cc_bin" "$cmake_bin"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install_consumer: FAIL: required tool '$tool' not found in PATH" >&2
    exit 1
  fi
done
for f in "$consumer_dir/CMakeLists.txt" "$consumer_dir/Makefile" "$build_dir/CMakeCache.txt"; do
  if [[ ! -f $f ]]; then
    echo "install_consumer: FAIL: expected file '$f' does not exist" >&2
    exit 2
  fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pinheap-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

failures=0
fail() {
  echo "install_consumer: FAIL: $*" >&2
  failures=$((failures + 1))
}
finish() {
  if ((failures > 0)); then
    echo "install_consumer: $failures failure(s)" >&2
    exit 1
  fi
  echo "install_consumer: OK"
  exit 0
}

# ---- install ---------------------------------------------------------------------
inst=$tmp/inst
echo "install_consumer: cmake --install $build_dir --prefix $inst"
if ! "$cmake_bin" --install "$build_dir" --prefix "$inst" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  fail "cmake --install failed (log above)"
  finish
fi

archive=$(find "$inst" -name libpinheap.a -type f | head -n 1)
if [[ -z $archive ]]; then
  fail "no libpinheap.a in the installed tree:"
  find "$inst" >&2
  finish
fi
libdir=$(dirname "$archive")
for f in "$libdir/libpinheap.a" "$libdir/libopenmpi_malloc.a" \
         "$inst/include/pinheap.h" "$inst/include/pinheap_config.h" \
         "$libdir/cmake/pinheap/pinheapConfig.cmake" \
         "$libdir/cmake/pinheap/pinheapConfigVersion.cmake" \
         "$libdir/pkgconfig/pinheap.pc"; do
  [[ -f $f ]] || fail "installed tree lacks ${f#"$inst"/}"
done
((failures == 0)) || { find "$inst" >&2; finish; }
if ! grep -q "^#define PINHEAP_PREFIX $prefix\$" "$inst/include/pinheap_config.h"; then
  fail "installed pinheap_config.h does not record the prefix '$prefix'"
fi

# Every defined global of the archive, for the whole-archive proof.
nm -g --defined-only "$archive" | awk 'NF >= 3 { print $3 }' | sort -u >"$tmp/archive.syms"
if [[ ! -s $tmp/archive.syms ]]; then
  fail "the installed libpinheap.a defines no global symbol"
  finish
fi

# check_linked_whole LABEL CORE_SO PROGRAM
check_linked_whole() {
  local label=$1 core=$2 prog=$3 missing
  nm --defined-only "$core" 2>/dev/null | awk 'NF >= 3 { print $3 }' | sort -u >"$tmp/$label.core.syms"
  missing=$(comm -23 "$tmp/archive.syms" "$tmp/$label.core.syms")
  if [[ -n $missing ]]; then
    echo "$missing" | head -n 40 >&2
    fail "[$label] the core library lacks $(echo "$missing" | wc -l) symbol(s) of the archive (above): not linked whole"
  fi
  if nm --defined-only "$prog" | awk -v s="${prefix}malloc" '$3 == s { f = 1 } END { exit !f }'; then
    fail "[$label] the program itself defines ${prefix}malloc; it must get pinheap through the core library only"
  fi
}

# run_consumer LABEL PROGRAM
run_consumer() {
  local label=$1 prog=$2
  if ! "$prog" >"$tmp/$label.run" 2>&1; then
    cat "$tmp/$label.run" >&2
    fail "[$label] the consumer program failed (output above)"
  else
    sed "s/^/install_consumer: [$label] /" "$tmp/$label.run"
  fi
}

# ---- 1. CMake package ---------------------------------------------------------------
echo "install_consumer: [cmake] find_package(pinheap CONFIG) from $inst"
if ! "$cmake_bin" -S "$consumer_dir" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$inst" \
     -DPINHEAP_EXPECT_PREFIX="$prefix" -DCMAKE_C_COMPILER="$cc_bin" \
     -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$tmp/cmake.log" 2>&1; then
  cat "$tmp/cmake.log" >&2
  fail "[cmake] configuring the consumer failed (log above)"
elif ! grep -q "from $libdir/cmake/pinheap" "$tmp/cmake.log"; then
  grep pinheap "$tmp/cmake.log" >&2 || true
  fail "[cmake] find_package found a pinheap other than the one just installed"
elif ! "$cmake_bin" --build "$tmp/cmake" -j2 >"$tmp/cmake.build.log" 2>&1; then
  cat "$tmp/cmake.build.log" >&2
  fail "[cmake] building the consumer failed (log above)"
else
  check_linked_whole cmake "$tmp/cmake/libconsumer_core.so" "$tmp/cmake/consumer"
  run_consumer cmake "$tmp/cmake/consumer"
fi

echo "install_consumer: [cmake] find_package(pinheap 99.0) must fail"
if "$cmake_bin" -S "$consumer_dir" -B "$tmp/cmake99" -DCMAKE_PREFIX_PATH="$inst" \
     -DPINHEAP_REQUIRE_VERSION=99.0 -DCMAKE_C_COMPILER="$cc_bin" >"$tmp/cmake99.log" 2>&1; then
  fail "[cmake] find_package(pinheap 99.0) succeeded against version $(grep -o 'pinheap [0-9.]*' "$tmp/cmake99.log" | head -n 1)"
elif ! grep -q 'version' "$tmp/cmake99.log"; then
  cat "$tmp/cmake99.log" >&2
  fail "[cmake] find_package(pinheap 99.0) failed, but not for the version (log above)"
fi

# ---- 2. pkg-config, from a moved tree -------------------------------------------------
moved=$tmp/moved
mv "$inst" "$moved"
libdir=${libdir/#"$inst"/"$moved"}
archive=$libdir/libpinheap.a
export PKG_CONFIG_LIBDIR=$libdir/pkgconfig
unset PKG_CONFIG_PATH
pc_prefix=$(pkg-config --variable=prefix_symbols pinheap 2>"$tmp/pc.err") || true
pc_libs=$(pkg-config --libs pinheap 2>>"$tmp/pc.err") || true
pc_cflags=$(pkg-config --cflags pinheap 2>>"$tmp/pc.err") || true
echo "install_consumer: [pkgconf] --cflags: $pc_cflags"
echo "install_consumer: [pkgconf] --libs:   $pc_libs"
if [[ -s $tmp/pc.err ]]; then
  cat "$tmp/pc.err" >&2
  fail "[pkgconf] pkg-config reported errors (above)"
fi
[[ $pc_prefix == "$prefix" ]] ||
  fail "[pkgconf] prefix_symbols is '$pc_prefix', expected '$prefix'"
[[ $pc_libs == *"-Wl,--whole-archive -lpinheap -Wl,--no-whole-archive"* ]] ||
  fail "[pkgconf] --libs does not wrap -lpinheap in --whole-archive: '$pc_libs'"
pc_libdir=
[[ $pc_libs =~ -L([^ ]+) ]] && pc_libdir=$(realpath -e "${BASH_REMATCH[1]}" 2>/dev/null || true)
[[ -n $pc_libdir && $pc_libdir == "$(realpath -e "$libdir")" ]] ||
  fail "[pkgconf] --libs does not point at the moved tree $libdir: '$pc_libs'"
mkdir -p "$tmp/pc"
if ! make -f "$consumer_dir/Makefile" O="$tmp/pc" CC="$cc_bin" all >"$tmp/pc.build.log" 2>&1; then
  cat "$tmp/pc.build.log" >&2
  fail "[pkgconf] building the consumer with pkg-config failed (log above)"
else
  check_linked_whole pkgconf "$tmp/pc/libconsumer_core.so" "$tmp/pc/consumer"
  run_consumer pkgconf "$tmp/pc/consumer"
fi

# ---- 3. the plain link line of README.md ----------------------------------------------
mkdir -p "$tmp/plain"
if ! make -f "$consumer_dir/Makefile" O="$tmp/plain" CC="$cc_bin" \
     PINHEAP_CFLAGS="-I$moved/include" \
     PINHEAP_LIBS="-Wl,--whole-archive $archive -Wl,--no-whole-archive -lpthread -ldl" \
     PINHEAP_PREFIX="$prefix" MAIN_LIBS="-L$libdir -lopenmpi_malloc" \
     all >"$tmp/plain.build.log" 2>&1; then
  cat "$tmp/plain.build.log" >&2
  fail "[plain] building the consumer with a plain --whole-archive line failed (log above)"
else
  check_linked_whole plain "$tmp/plain/libconsumer_core.so" "$tmp/plain/consumer"
  run_consumer plain "$tmp/plain/consumer"
fi

finish
