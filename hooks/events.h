/*
 * events.h -- the memory-event entry points: one function per intercepted
 * libc call, with exactly that call's C signature, which runs the event
 * chain (pinheap_set_event_handler) and ends in the raw system call.
 *
 * They are what the unprefixed interposers of replace.c call, and what a
 * relocation patcher may point a GOT slot at directly: events_symbols
 * lists, per event bit, the libc symbol and its entry point.  None of them
 * allocates or takes a lock; with no handler registered each is the
 * system call plus one load.  Owned by hooks/events.c.
 */
#ifndef PINHEAP_EVENTS_H
#define PINHEAP_EVENTS_H

#include "internal.h"

#include <stdint.h>
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
/** Fires VM_UNMAPPED for [addr, addr+len) (before the range goes); source
 *  is PINHEAP_EVENT_SOURCE_*.  Nothing when len is 0. */
PH_HIDDEN void events_vm_unmapped(void *addr, size_t len, int source);
/** Fires VM_MAPPED for [addr, addr+len) (after the range appeared). */
PH_HIDDEN void events_vm_mapped(void *addr, size_t len, int source);
/** Whether madvise with this advice takes the range's pages away (they
 *  read back as zeros or as the file, or fault): a release. */
PH_HIDDEN bool events_advice_releases(int advice);
/** One line of /proc/self/maps.  path is not NUL-terminated (path_len
 *  bytes; cut for a line longer than 4 KiB); dev is major << 32 | minor. */
typedef struct events_map_s {
  uintptr_t lo, hi;
  uint64_t offset, dev, inode;
  const char *path;
  size_t path_len;
} events_map_t;
/** Calls fn for each mapping of the process in address order, reading
 *  /proc/self/maps with system calls only (nothing allocated: pinheap may
 *  be the allocator), until fn returns non-zero.  errno is kept.
 *  @return 0, or -1 if the file cannot be opened. */
PH_HIDDEN int events_maps_walk(int (*fn)(const events_map_t *m, void *ctx), void *ctx);
/** Calls fn for each range shmdt(addr) is about to detach: every mapping
 *  of the segment attached at addr, fragments included (split by mprotect,
 *  its head unmapped), found in /proc/self/maps as the kernel finds them;
 *  adjacent ones as one range. */
PH_HIDDEN void events_shmdt_ranges(const void *addr, void (*fn)(void *start, size_t len));
/** Connects the allocator's OS layer (its release and map slots) to the
 *  derived events.  Idempotent. */
PH_HIDDEN void events_init(void);
/** Events not delivered because handlers nested too deep (for the info
 *  tool and the tests). */
PH_HIDDEN size_t events_dropped(void);

#endif /* PINHEAP_EVENTS_H */
