#!/usr/bin/env bash
# deps.sh -- installs what the tests need on Debian 12 and is a no-op when
# everything is there: the packages of TEST_PACKAGES that dpkg does not know
# as installed (one apt-get update, then apt-get install
# --no-install-recommends), and a deb-src entry for the machine's Debian
# archive (tools/openmpi/deb-src.sh: the openmpi tests build Debian's Open
# MPI from its source).  Run by test/run.sh before its passes and by .ci/run.
# Needs root, or sudo, only when something is missing.  Main entry point:
# install_missing().
set -euo pipefail

# One list; areas add what their tests need (one package per line).
TEST_PACKAGES="
  cmake
  gcc
  libc6-dev
  make
  pkg-config
  binutils
  libcriterion-dev
  strace
  valgrind
  python3
  libjemalloc2
  libtcmalloc-minimal4
  libmimalloc2.0
  gnuplot-nox
  sqlite3
  perl
  git
  clang
  libclang-rt-14-dev
  llvm
  openmpi-bin
  libopenmpi-dev
  libucx-dev
  libfabric-dev
  dpkg-dev
  autoconf
  automake
  libtool
  flex
  libhwloc-dev
  libevent-dev
  libpmix-dev
"

# is_installed PKG -- 0 if dpkg knows PKG as installed.
is_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

install_missing() {
  local missing=() pkg
  for pkg in $TEST_PACKAGES; do
    is_installed "$pkg" || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    echo "deps.sh: all $(wc -w <<<"$TEST_PACKAGES") packages present"
    return 0
  fi
  echo "deps.sh: installing ${missing[*]}"
  local sudo=()
  if ((EUID != 0)); then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "deps.sh: missing packages (${missing[*]}) and not root, no sudo: install them and rerun" >&2
      exit 1
    fi
  fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "deps.sh: dpkg-query not found; this job expects Debian 12 (bookworm)" >&2
  exit 1
fi
install_missing
"$(dirname "${BASH_SOURCE[0]}")/../tools/openmpi/deb-src.sh"
