/*
 * internal.h -- attribute macros and the archive's cross-file prototypes,
 * grouped by the file that owns them.  Every .c file of the archive includes
 * this header first (it includes rename.h, which shifts every global name).
 */
#ifndef PINHEAP_INTERNAL_H
#define PINHEAP_INTERNAL_H

#include "../rename.h"

#include <stddef.h>
#include <stdint.h>

/* ---- attributes, defined once ------------------------------------------- */
#define ph_likely(x)     __builtin_expect(!!(x), 1)
#define ph_unlikely(x)   __builtin_expect(!!(x), 0)
#define PH_INLINE        static inline __attribute__((always_inline))
#define PH_NOINLINE      __attribute__((noinline))
#define PH_COLD          __attribute__((cold, noinline))
#define PH_NORETURN      __attribute__((noreturn))
#define PH_EXPORT        __attribute__((visibility("default")))
#define PH_HIDDEN        __attribute__((visibility("hidden")))

#ifndef PINHEAP_DEBUG
#define PINHEAP_DEBUG 1
#endif
/* PINHEAP_DEBUG (CMake cache variable of the same name):
 *   1  the default: every check that catches misuse (headers, check bytes,
 *      double frees, foreign and interior pointers) -- these are never off;
 *   2  also the full heap checker (check.c) after every public call, which
 *      ends the process naming the call after which the heap went wrong:
 *      O(heap) per call, for tests and for hunting a corruption. */
#if PINHEAP_DEBUG != 1 && PINHEAP_DEBUG != 2
#error "PINHEAP_DEBUG must be 1 or 2"
#endif

/* ======================================================================= */
/*  error.c -- the only output path; never allocates                        */
/* ======================================================================= */

/** Ends the process: writes "pinheap: <func>(): <what> <ptr>\n" with raw
 *  write(2), then abort().  ptr may be NULL (then not printed). */
PH_HIDDEN PH_COLD PH_NORETURN void ph_fatal(const char *func, const char *what, const void *ptr);
/** Writes "pinheap: warning: " + the pieces (NULL-terminated list) + "\n". */
PH_HIDDEN PH_COLD void ph_warn(const char *first, ...);
/** Writes a NUL-terminated string to fd, retrying short writes and EINTR. */
PH_HIDDEN void ph_write_str(int fd, const char *s);
/** Formats v as "0x..." / decimal into buf (at least 24 bytes); returns buf. */
PH_HIDDEN char *ph_fmt_hex(char *buf, uintptr_t v);
PH_HIDDEN char *ph_fmt_dec(char *buf, uint64_t v);

/* ======================================================================= */
/*  os.c -- the ONLY caller of mmap/munmap/madvise/mremap                   */
/* ======================================================================= */
/*
 * Contract: sizes are > 0 and multiples of os_page_size(); addresses are
 * page aligned.  Mapping functions return NULL on ENOMEM; any other kernel
 * error is a bug and ends the process.  Writable memory is charged to the
 * commit limit when it is mapped or opened (no MAP_NORESERVE), so what the
 * kernel would not back is refused there, as glibc's malloc is refused;
 * inaccessible and read-only reservations cost no commit in any overcommit
 * mode (vm.overcommit_memory 0, 1 or 2).  Every release of address space or
 * of physical backing first calls the release listener with exactly the
 * range released, then the kernel.  None of these functions changes errno
 * and none takes a lock: callers drop their heap locks before a release.
 */
typedef void os_release_fn(void *addr, size_t len, void *ctx);

PH_HIDDEN size_t os_page_size(void);
/** Fresh zeroed private anonymous memory, page aligned. */
PH_HIDDEN void  *os_map(size_t size);
/** Writable zeroed memory for pinheap's own bookkeeping (thread caches),
 *  charged like any memory: never released and not counted in the
 *  statistics.  NULL if the OS refuses. */
PH_HIDDEN void  *os_reserve_meta(size_t size);
/** A large table of pinheap's own metadata that any address may be looked
 *  up in (the owner map's leaves, the kind map): read-only and reading as
 *  zeros, no memory and no commit charge until os_open() opens a part of
 *  it for writing (that part is then charged; opening can fail under strict
 *  overcommit).  Never released, not counted in the statistics.  NULL if
 *  the OS refuses (then the caller does without). */
PH_HIDDEN void  *os_reserve_readonly(size_t size);
/** As os_map, aligned to align (a power of two multiple of the page size).
 *  hint, if not NULL, is where the caller would like the mapping (used to
 *  extend a heap segment in place); the result may be elsewhere. */
PH_HIDDEN void  *os_map_aligned(void *hint, size_t size, size_t align);
/** As os_map_aligned for size bytes, followed by reserve bytes of address
 *  space mapped inaccessible (no memory, no commit charge even under strict
 *  overcommit) until os_open() opens them. */
PH_HIDDEN void  *os_map_reserved(void *hint, size_t size, size_t reserve, size_t align);
/** Makes [addr, addr+len) of a reserve (os_map_reserved) or of a read-only
 *  table (os_reserve_readonly) readable and writable, charging it to the
 *  commit limit.  @return 0, or -1 if the OS refuses (ENOMEM: more than the
 *  machine can back, the commit limit or RLIMIT_DATA). */
PH_HIDDEN int    os_open(void *addr, size_t len);
/** Unmaps [addr, addr+len): listener first, then munmap. */
PH_HIDDEN void   os_release(void *addr, size_t len);
/** Drops the physical backing of [addr, addr+len) (MADV_DONTNEED; the range
 *  stays mapped and reads back as zeros): listener first. */
PH_HIDDEN void   os_decommit(void *addr, size_t len);
/** Resizes the mapping at addr in place (never moves).  Shrinking releases
 *  the tail, listener first.  @return 0 on success, -1 if it cannot. */
PH_HIDDEN int    os_remap(void *addr, size_t oldlen, size_t newlen);
/** The one release listener slot (NULL to clear).  The hooks layer fans it
 *  out to every registered listener. */
PH_HIDDEN void   os_set_release_listener(os_release_fn *fn, void *ctx);

typedef struct os_stats_s {
  size_t mapped;          /* bytes currently mapped by pinheap */
  size_t peak_mapped;     /* high-water mark of mapped */
  size_t map_calls;       /* mmap + successful mremap growth */
  size_t release_calls;   /* munmap + mremap shrink */
  size_t decommit_calls;  /* madvise */
  size_t released_bytes;  /* total bytes given back (unmap + decommit) */
} os_stats_t;
PH_HIDDEN void os_stats_get(os_stats_t *out_p);

#endif /* PINHEAP_INTERNAL_H */
