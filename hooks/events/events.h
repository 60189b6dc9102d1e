/*
 * events.h -- the memory-event entry points: one function per intercepted
 * libc call, with exactly that call's C signature, which runs the event
 * chain (pinheap_set_event_handler) and ends in the raw system call.
 *
 * They are what the unprefixed interposers of replace.c call, and what a
 * relocation patcher may point a GOT slot at directly: events_symbols
 * lists, per event bit, the libc symbol and its entry point.  None of them
 * allocates or takes a lock; with no handler registered each is the
 * system call plus one load.  Owned by hooks/events/events_calls.c (the entry
 * points) and hooks/events/events.c (the chain).
 */
#ifndef PINHEAP_EVENTS_H
#define PINHEAP_EVENTS_H

#include "allocator/api/api.h"
#include "pinheap.h"  /* pinheap_event_t */

#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>

/* ---- the entry points (libc's signatures) ------------------------------- */
PH_HIDDEN void *events_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset);
PH_HIDDEN int events_munmap(void *addr, size_t length);
/** mremap: the fifth argument, void *new_address, is read only with
 *  MREMAP_FIXED, as the kernel reads it. */
PH_HIDDEN void *events_mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...);
PH_HIDDEN int events_madvise(void *addr, size_t length, int advice);
PH_HIDDEN void *events_shmat(int shmid, const void *shmaddr, int shmflg);
PH_HIDDEN int events_shmdt(const void *shmaddr);
/** brk/sbrk keep glibc's idea of the break (__curbrk) in step, so glibc's
 *  own sbrk, and sbrk(0), stay right. */
PH_HIDDEN int events_brk(void *addr);
PH_HIDDEN void *events_sbrk(intptr_t increment);

/** brk as the system call makes it (syscall(SYS_brk, addr)): the break
 *  after the call, never -1; addr 0 only asks. */
PH_HIDDEN uintptr_t events_brk_syscall(void *addr);

/** event bit -> libc symbol -> entry point, for the relocation patcher and
 *  the info tool.  One event may have several symbols (mmap, mmap64). */
typedef struct events_symbol_s {
  int event;                /* PINHEAP_EVENT_* */
  const char *name;         /* the libc symbol, e.g. "munmap" */
  void *entry;              /* events_munmap */
} events_symbol_t;
extern PH_HIDDEN const events_symbol_t events_symbols[];
extern PH_HIDDEN const unsigned events_symbols_count;

/* ---- the derived events, for the layers that cause them ----------------- */
/** The union of every registered handler's events (written under the
 *  table's lock, read anywhere). */
extern PH_HIDDEN atomic_int events_mask;
/** Whether any handler wants one of these events: the one load of each
 *  entry point's fast path. */
PH_INLINE bool events_wanted(int bits)
{
  return (atomic_load_explicit(&events_mask, memory_order_relaxed) & bits) != 0;
}
/** Runs the handlers of one event type in chain order (events.c), for the
 *  entry points of events_calls.c.  @return PINHEAP_EVENT_STOP if the call
 *  must not be made. */
PH_HIDDEN int events_chain_run(int type, pinheap_event_t *ev);
/** Fires VM_UNMAPPED for [addr, addr+len) (before the range goes); source
 *  is PINHEAP_EVENT_SOURCE_*.  Nothing when len is 0. */
PH_HIDDEN void events_vm_unmapped(void *addr, size_t len, int source);
/** Fires VM_MAPPED for [addr, addr+len) (after the range appeared). */
PH_HIDDEN void events_vm_mapped(void *addr, size_t len, int source);
/** The range [addr, addr+len) as the kernel rounds it: len up to pages.
 *  0 if addr is not page-aligned (the kernel refuses the call) or len is 0. */
PH_HIDDEN size_t events_page_len(const void *addr, size_t len);
/** Whether madvise with this advice takes the range's pages away (they
 *  read back as zeros or as the file, or fault): a release. */
PH_HIDDEN bool events_advice_releases(int advice);
/** Calls fn for each range shmdt(addr) is about to detach: every mapping
 *  of the segment attached at addr, fragments included (split by mprotect,
 *  its head unmapped), found in /proc/self/maps as the kernel finds them;
 *  adjacent ones as one range. */
PH_HIDDEN void events_shmdt_ranges(const void *addr, void (*fn)(void *start, size_t len));
/** Connects the allocator's OS layer (its release and map slots) to the
 *  derived events.  Idempotent. */
PH_HIDDEN void events_init(void);

/* ---- files.c: releases through a file, and syscall() --------------------- */
/* fallocate, ftruncate, truncate (the 64 names are the same on LP64): no
 * call event of their own; VM_UNMAPPED for every page of every mapping of
 * the file that the call takes out, before the call.  libc's semantics. */
PH_HIDDEN int files_fallocate(int fd, int mode, off_t offset, off_t len);
PH_HIDDEN int files_ftruncate(int fd, off_t length);
PH_HIDDEN int files_truncate(const char *path, off_t length);

#if PH_RAW_SYSCALL            /* pinheap's syscall() (replace.c) exists */
/** The system call numbers syscall() routes through the entry points: the
 *  memory calls, and those that release through a file.  A switch the
 *  compiler makes a bit test. */
PH_INLINE bool files_syscall_is_memory(long nr)
{
  switch (nr) {
  case SYS_mmap:
  case SYS_munmap:
  case SYS_mremap:
  case SYS_madvise:
  case SYS_brk:
  case SYS_shmat:
  case SYS_shmdt:
  case SYS_fallocate:
  case SYS_ftruncate:
  case SYS_truncate:
    return true;
  default:
    return false;
  }
}
/** syscall(nr, a..f) for a number files_syscall_is_memory() took: the
 *  entry point of that call, with the system call's return convention
 *  (glibc's: -1 and errno on failure; brk returns the break). */
PH_HIDDEN long files_syscall(long nr, long a, long b, long c, long d, long e, long f);
#endif

#endif /* PINHEAP_EVENTS_H */
