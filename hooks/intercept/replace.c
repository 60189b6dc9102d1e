/*
 * replace.c -- the only unprefixed symbols pinheap defines (hooks/intercept/symbols.h
 * lists them; the allow-list of test/nm_prefix.sh is made from it): the malloc family, each one indirect jump
 * through dispatch_table, the memory calls (mmap, mmap64, munmap, mremap,
 * madvise, shmat, shmdt, brk, sbrk), each a call of its event entry point
 * (hooks/events/events.h), which runs the event chain and enters the kernel, and
 * the calls that release pages through a file (fallocate, ftruncate,
 * truncate and their 64 names) and syscall() (hooks/events/files.c).
 *
 * Linked whole into a runtime's core library that the program loads at
 * start-up, these interpose glibc's for the whole process, glibc's internal
 * calls included.  Each intercepted symbol has three names, as in UCX: the
 * exported interposer (munmap), our logic (events_munmap) and the
 * original (the raw syscall).
 */
#define PINHEAP_NO_CLASSIC_RENAME 1
#include "hooks/decide/dispatch.h"
#include "hooks/events/events.h"
#include "hooks/intercept/peers.h"
#include "pinheap.h"
#include "hooks/intercept/symbols.h"

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
/*  memory calls by anyone: the events (hooks/events/events_calls.c)        */
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
/*  releases through a file, syscall() (hooks/events/files.c)               */
/* ======================================================================= */

/* No call event of their own: the pages of the file's mappings that the
 * call takes out are reported (VM_UNMAPPED) before it.  On LP64 the 64
 * names take the same off_t. */
PH_REPLACE int fallocate(int fd, int mode, off_t off, off_t len)
{
  return files_fallocate(fd, mode, off, len);
}

PH_REPLACE int fallocate64(int fd, int mode, off_t off, off_t len)
{
  return files_fallocate(fd, mode, off, len);
}

PH_REPLACE int ftruncate(int fd, off_t len) { return files_ftruncate(fd, len); }
PH_REPLACE int ftruncate64(int fd, off_t len) { return files_ftruncate(fd, len); }
PH_REPLACE int truncate(const char *path, off_t len) { return files_truncate(path, len); }
PH_REPLACE int truncate64(const char *path, off_t len) { return files_truncate(path, len); }

#if PH_RAW_SYSCALL
/* The memory numbers go to their entry points, as the libc calls do; every
 * other one is the system call, as glibc's syscall() makes it (six
 * argument words passed on whatever the number takes, -1 and errno for
 * -4095..-1).  Defined with named arguments under the assembler name
 * "syscall" rather than as `long syscall(long, ...)`: on x86-64 and
 * aarch64 a variadic call passes its first arguments exactly as named ones
 * (registers, then the stack, where glibc's syscall.S reads the sixth too),
 * and the fast path then spills no register save area for a va_list --
 * 14 instructions to the trap and back where the va_list version took 32,
 * glibc's 11 (callgrind, syscall(SYS_getppid)). */
PH_HOT PH_REPLACE long replace_syscall(long nr, long a, long b, long c, long d, long e, long f)
    __asm__("syscall");
PH_HOT PH_REPLACE long replace_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
  if (ph_likely(!files_syscall_is_memory(nr)) || peers_exempt_at(__builtin_return_address(0)))
    return ph_syscall6(nr, a, b, c, d, e, f);   /* (libucm's and Open MPI's hooks make */
  return files_syscall(nr, a, b, c, d, e, f);   /* their announced calls this way) */
}
#endif

/* ======================================================================= */
/*  who we are                                                              */
/* ======================================================================= */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-attributes"
extern void *replace_own_malloc(size_t) __attribute__((alias("malloc"), visibility("hidden")));
extern void replace_own_free(void *) __attribute__((alias("free"), visibility("hidden")));
extern int replace_own_munmap(void *, size_t) __attribute__((alias("munmap"), visibility("hidden")));

/* Every definition under a name of this file only (symbols.h lists them;
 * a row whose definition is missing fails here): what the process
 * resolves a symbol to is compared with it (did interposition take?), and
 * a patched slot of the malloc family points at it. */
#define OWN(name, ret, params, event, entry) static ret own_##name params __attribute__((alias(#name)));
PH_INTERCEPTED(OWN)
#undef OWN
#pragma GCC diagnostic pop

const replace_self_t replace_self = {
  .self_malloc = (void *)replace_own_malloc,
  .self_free = (void *)replace_own_free,
  .self_munmap = (void *)replace_own_munmap,
};

/* In symbols.h's order: the memory calls first (their event entry points
 * are what a patched slot gets), then the ones without a call event, which
 * derive VM_UNMAPPED only (install.c verifies them by what the process
 * resolves, syscall by its munmap number), then the malloc family (patched
 * slots get these). */
#define ROW_ENTRY(name, ret, params, event, entry) { #name, event, (void *)own_##name, (void *)entry },
#define ROW_SELF(name, ret, params, event, entry) { #name, event, (void *)own_##name, (void *)own_##name },
const replace_symbol_t replace_symbols[] = {
  PH_INTERCEPTED_CALLS(ROW_ENTRY)
  PH_INTERCEPTED_FILES(ROW_ENTRY)
  PH_INTERCEPTED_SYSCALL(ROW_SELF)
  PH_INTERCEPTED_FAMILY(ROW_SELF)
};
#undef ROW_ENTRY
#undef ROW_SELF
const unsigned replace_symbols_count = sizeof(replace_symbols) / sizeof(replace_symbols[0]);
