#!/usr/bin/env bash
# deb-src.sh -- makes sure apt has a deb-src entry for the Debian archive the
# machine already uses, so that `apt-get source openmpi` works
# (tools/openmpi/build.sh; test/deps.sh runs it before the tests).  When there is
# none, it writes /etc/apt/sources.list.d/pinheap-deb-src.sources (or .list)
# from the machine's own deb entries and runs apt-get update once.  Needs
# root or sudo only then.  Exit status non-zero when it cannot.
set -euo pipefail

if grep -rqsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' \
     /etc/apt/sources.list /etc/apt/sources.list.d/; then
  exit 0
fi
sudo=()
if ((EUID != 0)); then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "deb-src.sh: apt has no deb-src entry and this is not root (no sudo): add one" \
         "for your Debian archive (see /etc/apt/sources.list.d/debian.sources)" >&2
    exit 1
  fi
  sudo=(sudo)
fi
if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
  echo "deb-src.sh: adding deb-src entries like /etc/apt/sources.list.d/debian.sources"
  sed 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
    "${sudo[@]}" tee /etc/apt/sources.list.d/pinheap-deb-src.sources >/dev/null
elif grep -qsE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list; then
  echo "deb-src.sh: adding deb-src entries like /etc/apt/sources.list"
  grep -E '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list | sed 's/^\([[:space:]]*\)deb /\1deb-src /' |
    "${sudo[@]}" tee /etc/apt/sources.list.d/pinheap-deb-src.list >/dev/null
else
  echo "deb-src.sh: no deb entry found to derive a deb-src one from" >&2
  exit 1
fi
"${sudo[@]}" apt-get update
