/*
 * replace.c -- the only unprefixed symbols pinheap defines (the allow-list
 * of test/nm_allowlist.txt): the malloc family, each one indirect jump
 * through dispatch_table, and the interposers of munmap, mremap, madvise
 * and shmdt, which report a release to the listeners and then enter the
 * kernel.
 *
 * Linked whole into a runtime's core library that the program loads at
 * start-up, these interpose glibc's for the whole process, glibc's internal
 * calls included.  Each intercepted symbol has three names, as in UCX: the
 * exported interposer (munmap), our logic (release_dispatch) and the
 * original (the raw syscall).
 */
#define PINHEAP_NO_CLASSIC_RENAME 1
#include "dispatch.h"

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

PH_REPLACE void *malloc(size_t n) { return DT(fn_malloc)(n); }
PH_REPLACE void free(void *p) { DT(fn_free)(p); }
PH_REPLACE void *calloc(size_t m, size_t n) { return DT(fn_calloc)(m, n); }
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
/*  releases by anyone: munmap, mremap, madvise, shmdt                      */
/* ======================================================================= */

PH_REPLACE int munmap(void *addr, size_t len)
{
  release_dispatch(addr, len, 0);
  return (int)syscall(SYS_munmap, addr, len);
}

PH_REPLACE void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
  void *new_addr = NULL;

  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void *);
    va_end(ap);
  }
  /* The old range may move away: report all of it.  Staying in place, only
   * a shrink releases (the tail). */
  if (flags & (MREMAP_MAYMOVE | MREMAP_FIXED))
    release_dispatch(old, old_len, 0);
  else if (new_len < old_len)
    release_dispatch((char *)old + new_len, old_len - new_len, 0);
  return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}

PH_REPLACE int madvise(void *addr, size_t len, int advice)
{
  switch (advice) {
  case MADV_DONTNEED:
  case MADV_FREE:
  case MADV_REMOVE:
#ifdef MADV_DONTNEED_LOCKED
  case MADV_DONTNEED_LOCKED:
#endif
    release_dispatch(addr, len, 0);
    break;
  default:
    break;
  }
  return (int)syscall(SYS_madvise, addr, len, advice);
}

/* The size of the System V segment attached at addr: the length of the
 * mapping that starts there, read from /proc/self/maps without allocating.
 * 0 if none starts there. */
static size_t shm_attached_size(const void *addr)
{
  char buf[4096];
  size_t have = 0, found = 0;
  int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return 0;
  for (;;) {
    ssize_t n = read(fd, buf + have, sizeof(buf) - have);
    if (n <= 0)
      break;
    have += (size_t)n;
    size_t start = 0;
    for (size_t i = 0; i < have; i++) {
      if (buf[i] != '\n')
        continue;
      /* "lo-hi perms ..." in hex */
      uintptr_t lo = 0, hi = 0;
      size_t j = start;
      for (; j < i && buf[j] != '-'; j++)
        lo = lo * 16 + (uintptr_t)(buf[j] <= '9' ? buf[j] - '0' : (buf[j] | 0x20) - 'a' + 10);
      for (j++; j < i && buf[j] != ' '; j++)
        hi = hi * 16 + (uintptr_t)(buf[j] <= '9' ? buf[j] - '0' : (buf[j] | 0x20) - 'a' + 10);
      if (lo == (uintptr_t)addr)
        found = hi - lo;
      start = i + 1;
    }
    memmove(buf, buf + start, have - start);
    have -= start;
    if (found != 0 || have == sizeof(buf))
      break;
  }
  close(fd);
  return found;
}

PH_REPLACE int shmdt(const void *addr)
{
  size_t len = shm_attached_size(addr);
  if (len != 0)
    release_dispatch((void *)addr, len, 0);
  return (int)syscall(SYS_shmdt, addr);
}

/* ======================================================================= */
/*  who we are                                                              */
/* ======================================================================= */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-attributes"
extern void *replace_own_malloc(size_t) __attribute__((alias("malloc"), visibility("hidden")));
extern void replace_own_free(void *) __attribute__((alias("free"), visibility("hidden")));
extern int replace_own_munmap(void *, size_t) __attribute__((alias("munmap"), visibility("hidden")));
#pragma GCC diagnostic pop

const replace_self_t replace_self = {
  .self_malloc = (void *)replace_own_malloc,
  .self_free = (void *)replace_own_free,
  .self_munmap = (void *)replace_own_munmap,
};
