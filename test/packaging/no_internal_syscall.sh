#!/usr/bin/env bash
# no_internal_syscall.sh -- pinheap's own system calls never go through its
# exported syscall() (hooks/replace.c): no member of the archive but
# replace.c.o may leave `syscall` undefined.  Such a reference would bind,
# through the core library's PLT (or a slot relocation patching rewrote), to
# the interposer: each internal munmap an event again, or a loop
# (peers_munmap -> syscall -> events_munmap -> peers_munmap).  The archive's
# code uses ph_syscall (allocator/base/base.h).
#
# Usage: no_internal_syscall.sh ARCHIVE
set -euo pipefail
archive=$1
# (and no member may call a function replace.c.o defines -- fallocate,
# ftruncate, truncate, mmap ...: the reference would also link replace.c.o,
# and so pinheap's malloc, into any program that links the archive for
# something else, an ASan test among them)
defined=$(nm -A "$archive" | awk '/:replace\.c\.o:/ && $(NF-1) == "T" { print $NF }' | sort -u)
bad=$(nm -A "$archive" | awk -v defs="$defined" '
        BEGIN { n = split(defs, d, "\n"); for (i = 1; i <= n; i++) want[d[i]] = 1 }
        $(NF-1) == "U" && ($NF in want) { print $1 $NF }' |
      grep -v ':replace\.c\.o:' || true)
if [[ -n "$bad" ]]; then
  echo "archive member calls a function replace.c.o exports (syscall(), ftruncate, ...): $bad"
  exit 1
fi
members=$(nm -A "$archive" 2>/dev/null | awk -F: '{ print $2 }' | sort -u | wc -l)
echo "ok: none of the $members members but replace.c.o references syscall() or another function replace.c.o exports"
