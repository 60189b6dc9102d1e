#!/usr/bin/env bash
# build.sh -- Open MPI 4.1.4 (Debian 12's) built with pinheap as its memory
# component (memory/pinheap), in one command.
#
# Usage: tools/openmpi/build.sh [--without-pinheap] [OUT_DIR]
#   OUT_DIR defaults to build/openmpi in the repository (build/openmpi-patcher
#   with --without-pinheap: the same source and options without the
#   component, so Open MPI's own memory/patcher is built -- the baseline the
#   component is measured against; no autogen then, the tarball's configure
#   serves).  Everything goes under it:
#     pinheap-build/  pinheap built with the opal_memory_pinheap_ prefix
#     pinheap/        ... and installed (include/pinheap.h, lib/libpinheap.a)
#     src/            Debian's Open MPI source (apt-get source openmpi), with
#                     tools/openmpi/memory_pinheap/ as opal/mca/memory/pinheap
#     obj/            the Open MPI build (out of the source tree)
#     install/        the installed Open MPI: install/bin/mpicc, mpirun, ompi_info
#     stamps/         what each phase last did
# Phases: pinheap, source, component, autogen, configure, make, install; each
# says how long it took.  A re-run reuses what is built: the source is
# fetched once, autogen.pl runs again only when the component's
# configure.m4 or Makefile.am changed, configure when autogen ran or the
# options changed, make and install are incremental.
#
# Needs: Debian 12 with a deb-src entry for its archive (added, with one
# apt-get update, if there is none: root), dpkg-dev, autoconf, automake,
# libtool, flex, make, gcc, cmake, libhwloc-dev, libevent-dev, libpmix-dev,
# libucx-dev (.ci/run installs them).  Exit status non-zero on any failure,
# with the phase named and the end of its log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
with_pinheap=1
if [[ ${1:-} == --without-pinheap ]]; then
  with_pinheap=0
  shift
fi
case ${1:-} in
  -*) echo "build.sh: unknown option '$1' (expected --without-pinheap or an output folder)" >&2
      exit 2 ;;
esac
if (( with_pinheap )); then
  out=${1:-$repo/build/openmpi}
else
  out=${1:-$repo/build/openmpi-patcher}
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${JOBS:-2}
version=4.1.4
mkdir -p "$out/stamps" "$out/logs"

t_all=$(date +%s)
phase_start() { phase=$1; t0=$(date +%s); echo "== openmpi build: $phase ..."; }
phase_end() { echo "== openmpi build: $phase: $(( $(date +%s) - t0 )) s${1:+ ($1)}"; }
# run LOG CMD...: the command's output goes to LOG; on failure, its end.
run() {
  local log=$out/logs/$1; shift
  if ! "$@" >"$log" 2>&1; then
    echo "== openmpi build: $phase FAILED: $* (log: $log)" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# ---- pinheap with Open MPI's memory component prefix ----------------------
# (reading this Open MPI's etc/openmpi-mca-params.conf, as it does)
phase_start pinheap
if (( with_pinheap )); then
run pinheap-configure.log cmake -S "$repo" -B "$out/pinheap-build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPINHEAP_PREFIX=opal_memory_pinheap_ -DPINHEAP_BUILD_TESTS=OFF -DPINHEAP_BUILD_TOOLS=OFF \
  -DPINHEAP_OMPI_SYSCONFDIR="$out/install/etc" -DCMAKE_INSTALL_PREFIX="$out/pinheap"
run pinheap-build.log cmake --build "$out/pinheap-build" -j "$jobs"
run pinheap-install.log cmake --install "$out/pinheap-build"
phase_end
else
phase_end "skipped: --without-pinheap"
fi

# ---- Debian's Open MPI source ---------------------------------------------
phase_start source
src=$out/src/openmpi-$version
if [[ ! -f $src/autogen.pl ]]; then
  mkdir -p "$out/src"
  # apt-get source needs a deb-src entry for the archive the machine uses.
  run deb-src.log bash "$here/deb-src.sh"
  (cd "$out/src" && run source.log apt-get source --download-only openmpi)
  orig=$(ls "$out/src"/openmpi_"$version".orig.tar.* 2>/dev/null | head -n 1 || true)
  if [[ -z $orig ]]; then
    echo "== openmpi build: source FAILED: no openmpi_$version.orig tarball (Debian 12 ships" \
         "$version; found: $(ls "$out/src" | tr '\n' ' '))" >&2
    exit 1
  fi
  # The release tarball as Open MPI shipped it; Debian's patches are about
  # its packaging (paths, Fortran, manuals), not the memory framework.
  run extract.log tar -C "$out/src" -xf "$orig"
  phase_end "fetched and unpacked"
else
  phase_end "reused"
fi

# ---- the component --------------------------------------------------------
phase_start component
comp=$src/opal/mca/memory/pinheap
if (( with_pinheap )); then
  mkdir -p "$comp"
  for f in configure.m4 Makefile.am memory_pinheap_component.c; do
    cmp -s "$here/memory_pinheap/$f" "$comp/$f" || cp "$here/memory_pinheap/$f" "$comp/$f"
  done
  phase_end
else
  if [[ -d $comp ]]; then
    echo "== openmpi build: component FAILED: $src has memory/pinheap; --without-pinheap" \
         "needs an OUT_DIR of its own (default build/openmpi-patcher)" >&2
    exit 1
  fi
  phase_end "none: Open MPI's memory/patcher"
fi

# ---- autogen.pl (a release tarball's tree needs --force) ------------------
phase_start autogen
if (( ! with_pinheap )); then
  phase_end "skipped: the release tarball's configure"
else
want=$(hash_of "$here/memory_pinheap/configure.m4" "$here/memory_pinheap/Makefile.am")
if [[ ! -f $out/stamps/autogen || $(cat "$out/stamps/autogen") != "$want" ]]; then
  (cd "$src" && run autogen.log ./autogen.pl --force)
  echo "$want" >"$out/stamps/autogen"
  rm -f "$out/stamps/configure"
  phase_end "ran"
else
  phase_end "reused"
fi
fi

# ---- configure: lean, external hwloc/libevent/PMIx, UCX -------------------
phase_start configure
pmix=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)/pmix2
conf=(--prefix="$out/install")
(( with_pinheap )) && conf+=(--with-pinheap="$out/pinheap")
conf+=(--disable-mpi-fortran --disable-oshmem --disable-mpi-cxx
      --with-hwloc=external --with-libevent=external --with-pmix="$pmix"
      --with-ucx --without-verbs --without-libfabric --disable-silent-rules)
memory=pinheap
(( with_pinheap )) || memory=patcher
want=$(echo "${conf[*]}" | sha256sum | cut -c1-16)
if [[ ! -f $out/stamps/configure || $(cat "$out/stamps/configure") != "$want" ||
      ! -f $out/obj/config.status ]]; then
  mkdir -p "$out/obj"
  (cd "$out/obj" && run configure.log "$src/configure" "${conf[@]}")
  if ! grep -q "MCA component memory:$memory.*yes" "$out/logs/configure.log"; then
    echo "== openmpi build: configure FAILED: memory:$memory was not chosen" >&2
    grep -n "memory:" "$out/logs/configure.log" | tail -n 20 >&2
    exit 1
  fi
  echo "$want" >"$out/stamps/configure"
  phase_end "ran"
else
  phase_end "reused"
fi

# ---- make, install --------------------------------------------------------
phase_start make
(cd "$out/obj" && run make.log make -j "$jobs")
phase_end
phase_start install
# Again only when make changed a library (Open MPI's test/ folder aside:
# its make check builds there).
if [[ ! -f $out/stamps/install || -n $(find "$out/obj" -path "$out/obj/test" -prune -o \
      -newer "$out/stamps/install" -type f \( -name '*.so*' -o -name '*.la' -o -name '*.a' \) \
      -print -quit) ]]; then
  (cd "$out/obj" && run install.log make -j "$jobs" install)
  touch "$out/stamps/install"
  phase_end "ran"
else
  phase_end "reused"
fi
echo "== openmpi build: done in $(( $(date +%s) - t_all )) s: $out/install/bin/mpicc," \
     "$out/install/bin/mpirun, $out/install/bin/ompi_info"
