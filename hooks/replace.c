/*
 * replace.c -- the only unprefixed symbols pinheap defines (the allow-list
 * of test/nm_allowlist.txt): the malloc family, each one indirect jump
 * through dispatch_table, and the memory calls (mmap, mmap64, munmap,
 * mremap, madvise, shmat, shmdt, brk, sbrk), each a call of its event entry
 * point (hooks/events.h), which runs the event chain and enters the kernel.
 *
 * Linked whole into a runtime's core library that the program loads at
 * start-up, these interpose glibc's for the whole process, glibc's internal
 * calls included.  Each intercepted symbol has three names, as in UCX: the
 * exported interposer (munmap), our logic (events_munmap) and the
 * original (the raw syscall).
 */
#define PINHEAP_NO_CLASSIC_RENAME 1
#include "dispatch.h"
#include "events.h"
#include "pinheap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <unistd.h>

#define PH_REPLACE __attribute__((visibility("default")))

/* ======================================================================= */
/*  the malloc family                                                       */
/* ======================================================================= */

/* The table's pointers change (the decision, glibc's lazily looked-up
 * functions) while other threads call through them: read atomically, which
 * is still one plain indirect jump. */
#define DT(f) __atomic_load_n(&dispatch_table.f, __ATOMIC_RELAXED)

PH_HOT PH_REPLACE void *malloc(size_t n) { return DT(fn_malloc)(n); }
PH_HOT PH_REPLACE void free(void *p) { DT(fn_free)(p); }
PH_HOT PH_REPLACE void *calloc(size_t m, size_t n) { return DT(fn_calloc)(m, n); }
PH_REPLACE void *realloc(void *p, size_t n) { return DT(fn_realloc)(p, n); }
PH_REPLACE void *reallocarray(void *p, size_t m, size_t n) { return DT(fn_reallocarray)(p, m, n); }
PH_REPLACE void *memalign(size_t a, size_t n) { return DT(fn_memalign)(a, n); }
PH_REPLACE int posix_memalign(void **p, size_t a, size_t n) { return DT(fn_posix_memalign)(p, a, n); }
PH_REPLACE void *aligned_alloc(size_t a, size_t n) { return DT(fn_aligned_alloc)(a, n); }
PH_REPLACE void *valloc(size_t n) { return DT(fn_valloc)(n); }
PH_REPLACE void *pvalloc(size_t n) { return DT(fn_pvalloc)(n); }
PH_REPLACE size_t malloc_usable_size(void *p) { return DT(fn_malloc_usable_size)(p); }
PH_REPLACE int mallopt(int param, int value) { return DT(fn_mallopt)(param, value); }
PH_REPLACE struct mallinfo mallinfo(void) { return DT(fn_mallinfo)(); }
PH_REPLACE struct mallinfo2 mallinfo2(void) { return DT(fn_mallinfo2)(); }
PH_REPLACE void malloc_stats(void) { DT(fn_malloc_stats)(); }
PH_REPLACE int malloc_trim(size_t pad) { return DT(fn_malloc_trim)(pad); }

/* ======================================================================= */
/*  memory calls by anyone: the events (hooks/events.c)                     */
/* ======================================================================= */

/* Each one is its event's entry point under libc's name: the handlers run,
 * the derived VM_MAPPED/VM_UNMAPPED events fire, the kernel is entered. */
PH_HOT PH_REPLACE void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
  return events_mmap(addr, len, prot, flags, fd, off);
}

PH_HOT PH_REPLACE void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
  return events_mmap(addr, len, prot, flags, fd, off);
}

PH_HOT PH_REPLACE int munmap(void *addr, size_t len) { return events_munmap(addr, len); }

PH_HOT PH_REPLACE void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
  void *new_addr = NULL;

  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void *);
    va_end(ap);
  }
  return events_mremap(old, old_len, new_len, flags, new_addr);
}

PH_HOT PH_REPLACE int madvise(void *addr, size_t len, int advice)
{
  return events_madvise(addr, len, advice);
}

PH_HOT PH_REPLACE void *shmat(int shmid, const void *shmaddr, int shmflg)
{
  return events_shmat(shmid, shmaddr, shmflg);
}

PH_HOT PH_REPLACE int shmdt(const void *addr) { return events_shmdt(addr); }

PH_HOT PH_REPLACE int brk(void *addr) { return events_brk(addr); }

PH_HOT PH_REPLACE void *sbrk(intptr_t increment) { return events_sbrk(increment); }

/* ======================================================================= */
/*  who we are                                                              */
/* ======================================================================= */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-attributes"
extern void *replace_own_malloc(size_t) __attribute__((alias("malloc"), visibility("hidden")));
extern void replace_own_free(void *) __attribute__((alias("free"), visibility("hidden")));
extern int replace_own_munmap(void *, size_t) __attribute__((alias("munmap"), visibility("hidden")));

/* Every other definition under a name of this file only: what the process
 * resolves a symbol to is compared with it (did interposition take?), and
 * a patched slot of the malloc family points at it. */
#define OWN(ret, name, args) static ret own_##name args __attribute__((alias(#name)));
OWN(void *, calloc, (size_t, size_t))
OWN(void *, realloc, (void *, size_t))
OWN(void *, reallocarray, (void *, size_t, size_t))
OWN(void *, memalign, (size_t, size_t))
OWN(int, posix_memalign, (void **, size_t, size_t))
OWN(void *, aligned_alloc, (size_t, size_t))
OWN(void *, valloc, (size_t))
OWN(void *, pvalloc, (size_t))
OWN(size_t, malloc_usable_size, (void *))
OWN(int, mallopt, (int, int))
OWN(struct mallinfo, mallinfo, (void))
OWN(struct mallinfo2, mallinfo2, (void))
OWN(void, malloc_stats, (void))
OWN(int, malloc_trim, (size_t))
OWN(void *, mmap, (void *, size_t, int, int, int, off_t))
OWN(void *, mmap64, (void *, size_t, int, int, int, off_t))
OWN(void *, mremap, (void *, size_t, size_t, int, ...))
OWN(int, madvise, (void *, size_t, int))
OWN(void *, shmat, (int, const void *, int))
OWN(int, shmdt, (const void *))
OWN(int, brk, (void *))
OWN(void *, sbrk, (intptr_t))
#undef OWN
#pragma GCC diagnostic pop

const replace_self_t replace_self = {
  .self_malloc = (void *)replace_own_malloc,
  .self_free = (void *)replace_own_free,
  .self_munmap = (void *)replace_own_munmap,
};

/* The memory calls first (their event entry points are what a patched
 * slot gets), then the malloc family (patched slots get these). */
const replace_symbol_t replace_symbols[] = {
  { "mmap", PINHEAP_EVENT_MMAP, (void *)own_mmap, (void *)events_mmap },
  { "mmap64", PINHEAP_EVENT_MMAP, (void *)own_mmap64, (void *)events_mmap },
  { "munmap", PINHEAP_EVENT_MUNMAP, (void *)replace_own_munmap, (void *)events_munmap },
  { "mremap", PINHEAP_EVENT_MREMAP, (void *)own_mremap, (void *)events_mremap },
  { "madvise", PINHEAP_EVENT_MADVISE, (void *)own_madvise, (void *)events_madvise },
  { "shmat", PINHEAP_EVENT_SHMAT, (void *)own_shmat, (void *)events_shmat },
  { "shmdt", PINHEAP_EVENT_SHMDT, (void *)own_shmdt, (void *)events_shmdt },
  { "brk", PINHEAP_EVENT_BRK, (void *)own_brk, (void *)events_brk },
  { "sbrk", PINHEAP_EVENT_SBRK, (void *)own_sbrk, (void *)events_sbrk },
  { "malloc", 0, (void *)replace_own_malloc, (void *)replace_own_malloc },
  { "free", 0, (void *)replace_own_free, (void *)replace_own_free },
  { "calloc", 0, (void *)own_calloc, (void *)own_calloc },
  { "realloc", 0, (void *)own_realloc, (void *)own_realloc },
  { "reallocarray", 0, (void *)own_reallocarray, (void *)own_reallocarray },
  { "memalign", 0, (void *)own_memalign, (void *)own_memalign },
  { "posix_memalign", 0, (void *)own_posix_memalign, (void *)own_posix_memalign },
  { "aligned_alloc", 0, (void *)own_aligned_alloc, (void *)own_aligned_alloc },
  { "valloc", 0, (void *)own_valloc, (void *)own_valloc },
  { "pvalloc", 0, (void *)own_pvalloc, (void *)own_pvalloc },
  { "malloc_usable_size", 0, (void *)own_malloc_usable_size, (void *)own_malloc_usable_size },
  { "mallopt", 0, (void *)own_mallopt, (void *)own_mallopt },
  { "mallinfo", 0, (void *)own_mallinfo, (void *)own_mallinfo },
  { "mallinfo2", 0, (void *)own_mallinfo2, (void *)own_mallinfo2 },
  { "malloc_stats", 0, (void *)own_malloc_stats, (void *)own_malloc_stats },
  { "malloc_trim", 0, (void *)own_malloc_trim, (void *)own_malloc_trim },
};
const unsigned replace_symbols_count = sizeof(replace_symbols) / sizeof(replace_symbols[0]);
