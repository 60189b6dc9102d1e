/*
 * symbols.h -- the one list of the symbols pinheap intercepts: every
 * unprefixed name hooks/intercept/replace.c defines, in the order of
 * pinheap_install_info() (the memory calls, the releases through a file,
 * syscall(), then the malloc family).  Main entry point: PH_INTERCEPTED().
 *
 * Generated from it: replace.c's aliases of its own definitions and its
 * table replace_symbols (install.c installs what it lists), the fields of
 * the dispatch table (dispatch.h) and their setting by the decision
 * (dispatch.c), events_symbols (events_calls.c), copies.c's table of the
 * malloc family, and the allow-list of the name-shift test
 * (test/nm_allowlist_gen.c, run at build time; test/nm_prefix.sh reads
 * its output).  replace.c's definitions themselves are written by hand:
 * each row's alias fails to compile when its definition is missing, and
 * nm_prefix fails on a definition that has no row.
 *
 * Each group calls X(name, ret, params, event, entry) once per symbol:
 *   name    the libc symbol, a token (#name is the string);
 *   ret, params   its C type as replace.c defines it (params in parentheses);
 *   event   the PINHEAP_EVENT_* of its call; PINHEAP_EVENT_VM_UNMAPPED for
 *           the calls that only derive releases; 0 for the malloc family;
 *   entry   what a patched slot points at: the event entry point (events.h,
 *           files.c), or the name itself where replace.c's definition is the
 *           entry (syscall, the malloc family).
 * Stands alone: nothing is declared, and the tokens are only read where a
 * user's X expands them.
 */
#ifndef PINHEAP_SYMBOLS_H
#define PINHEAP_SYMBOLS_H

#include "allocator/base/raw_syscall.h"   /* PH_RAW_SYSCALL */

/* The memory calls, each with an event of its own (events_calls.c). */
#define PH_INTERCEPTED_CALLS(X)                                                              \
  X(mmap, void *, (void *, size_t, int, int, int, off_t), PINHEAP_EVENT_MMAP, events_mmap)   \
  X(mmap64, void *, (void *, size_t, int, int, int, off_t), PINHEAP_EVENT_MMAP, events_mmap) \
  X(munmap, int, (void *, size_t), PINHEAP_EVENT_MUNMAP, events_munmap)                      \
  X(mremap, void *, (void *, size_t, size_t, int, ...), PINHEAP_EVENT_MREMAP, events_mremap) \
  X(madvise, int, (void *, size_t, int), PINHEAP_EVENT_MADVISE, events_madvise)              \
  X(shmat, void *, (int, const void *, int), PINHEAP_EVENT_SHMAT, events_shmat)              \
  X(shmdt, int, (const void *), PINHEAP_EVENT_SHMDT, events_shmdt)                           \
  X(brk, int, (void *), PINHEAP_EVENT_BRK, events_brk)                                       \
  X(sbrk, void *, (intptr_t), PINHEAP_EVENT_SBRK, events_sbrk)

/* The calls that release pages through a file: no call event, they derive
 * VM_UNMAPPED (files.c).  On LP64 the 64 names take the same off_t. */
#define PH_INTERCEPTED_FILES(X)                                                              \
  X(fallocate, int, (int, int, off_t, off_t), PINHEAP_EVENT_VM_UNMAPPED, files_fallocate)    \
  X(fallocate64, int, (int, int, off_t, off_t), PINHEAP_EVENT_VM_UNMAPPED, files_fallocate)  \
  X(ftruncate, int, (int, off_t), PINHEAP_EVENT_VM_UNMAPPED, files_ftruncate)                \
  X(ftruncate64, int, (int, off_t), PINHEAP_EVENT_VM_UNMAPPED, files_ftruncate)              \
  X(truncate, int, (const char *, off_t), PINHEAP_EVENT_VM_UNMAPPED, files_truncate)         \
  X(truncate64, int, (const char *, off_t), PINHEAP_EVENT_VM_UNMAPPED, files_truncate)

/* syscall(), where pinheap makes system calls itself (raw_syscall.h): its
 * memory numbers go to their entry points.  Defined with named arguments
 * (replace.c says why). */
#if PH_RAW_SYSCALL
#define PH_INTERCEPTED_SYSCALL(X)                                                            \
  X(syscall, long, (long, long, long, long, long, long, long), PINHEAP_EVENT_VM_UNMAPPED, syscall)
#else
#define PH_INTERCEPTED_SYSCALL(X)
#endif

/* The malloc family: one indirect jump each, through the dispatch table
 * (dispatch.h: fn_<name>, in this order). */
#define PH_INTERCEPTED_FAMILY(X)                                                             \
  X(malloc, void *, (size_t), 0, malloc)                                                     \
  X(free, void, (void *), 0, free)                                                           \
  X(calloc, void *, (size_t, size_t), 0, calloc)                                             \
  X(realloc, void *, (void *, size_t), 0, realloc)                                           \
  X(reallocarray, void *, (void *, size_t, size_t), 0, reallocarray)                         \
  X(memalign, void *, (size_t, size_t), 0, memalign)                                         \
  X(posix_memalign, int, (void **, size_t, size_t), 0, posix_memalign)                       \
  X(aligned_alloc, void *, (size_t, size_t), 0, aligned_alloc)                               \
  X(valloc, void *, (size_t), 0, valloc)                                                     \
  X(pvalloc, void *, (size_t), 0, pvalloc)                                                   \
  X(malloc_usable_size, size_t, (void *), 0, malloc_usable_size)                             \
  X(mallopt, int, (int, int), 0, mallopt)                                                    \
  X(mallinfo, struct mallinfo, (void), 0, mallinfo)                                          \
  X(mallinfo2, struct mallinfo2, (void), 0, mallinfo2)                                       \
  X(malloc_stats, void, (void), 0, malloc_stats)                                             \
  X(malloc_trim, int, (size_t), 0, malloc_trim)

/* Every intercepted symbol, in pinheap_install_info()'s order. */
#define PH_INTERCEPTED(X)                                                                    \
  PH_INTERCEPTED_CALLS(X) PH_INTERCEPTED_FILES(X) PH_INTERCEPTED_SYSCALL(X)                  \
  PH_INTERCEPTED_FAMILY(X)

/* How many: PH_INTERCEPTED(PH_INTERCEPTED_ONE) is a sum of ones. */
#define PH_INTERCEPTED_ONE(name, ...) +1

#endif /* PINHEAP_SYMBOLS_H */
