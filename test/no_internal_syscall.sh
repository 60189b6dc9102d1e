#!/usr/bin/env bash
# no_internal_syscall.sh -- pinheap's own system calls never go through its
# exported syscall() (hooks/replace.c): no member of the archive but
# replace.c.o may leave `syscall` undefined.  Such a reference would bind,
# through the core library's PLT (or a slot relocation patching rewrote), to
# the interposer: each internal munmap an event again, or a loop
# (peers_munmap -> syscall -> events_munmap -> peers_munmap).  The archive's
# code uses ph_syscall (allocator/internal.h).
#
# Usage: no_internal_syscall.sh ARCHIVE
set -euo pipefail
archive=$1
bad=$(nm -A "$archive" | awk '$(NF-1) == "U" && $NF == "syscall" { print $1 }' |
      grep -v ':replace\.c\.o:' || true)
if [[ -n "$bad" ]]; then
  echo "archive member calls the exported syscall(): $bad"
  exit 1
fi
members=$(nm -A "$archive" 2>/dev/null | awk -F: '{ print $2 }' | sort -u | wc -l)
echo "ok: none of the $members members but replace.c.o references syscall"
