/*
 * pinheap.h -- the public API of libpinheap.a.
 *
 * Every function here is name-shifted: it is linked as <PINHEAP_PREFIX><name>,
 * where PINHEAP_PREFIX was chosen when the archive was configured and is
 * recorded in pinheap_config.h.  With the default prefix the names are
 * pinheap_malloc, pinheap_free, ...; code that must work with any prefix
 * writes PINHEAP_NAME(malloc).
 *
 * The allocator functions have glibc's and dlmalloc's signatures and
 * semantics.  None of them is glibc's malloc: linking libpinheap.a changes
 * nothing in a program until it calls these names.
 */
#ifndef PINHEAP_H
#define PINHEAP_H

#include <stddef.h>
#include <malloc.h>   /* struct mallinfo2, M_* mallopt parameters */

#include "pinheap_config.h"

#ifndef PINHEAP_NAME
#define PINHEAP_CAT_(a, b) a##b
#define PINHEAP_CAT(a, b) PINHEAP_CAT_(a, b)
#define PINHEAP_NAME(n) PINHEAP_CAT(PINHEAP_PREFIX, n)
#endif

#if defined(__GNUC__)
#define PINHEAP_EXPORT __attribute__((visibility("default")))
#define PINHEAP_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#else
#define PINHEAP_EXPORT
#define PINHEAP_MALLOC_ATTR
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================= */
/*  The malloc family (glibc signatures)                                    */
/* ======================================================================= */

PINHEAP_EXPORT PINHEAP_MALLOC_ATTR void *PINHEAP_NAME(malloc)(size_t size);
PINHEAP_EXPORT void PINHEAP_NAME(free)(void *ptr);
PINHEAP_EXPORT PINHEAP_MALLOC_ATTR void *PINHEAP_NAME(calloc)(size_t nmemb, size_t size);
PINHEAP_EXPORT void *PINHEAP_NAME(realloc)(void *ptr, size_t size);
PINHEAP_EXPORT void *PINHEAP_NAME(reallocarray)(void *ptr, size_t nmemb, size_t size);
PINHEAP_EXPORT PINHEAP_MALLOC_ATTR void *PINHEAP_NAME(memalign)(size_t alignment, size_t size);
/** @return 0, EINVAL (alignment not a power of two multiple of sizeof(void*);
 *  *memptr untouched) or ENOMEM (*memptr untouched). */
PINHEAP_EXPORT int PINHEAP_NAME(posix_memalign)(void **memptr, size_t alignment, size_t size);
PINHEAP_EXPORT PINHEAP_MALLOC_ATTR void *PINHEAP_NAME(aligned_alloc)(size_t alignment, size_t size);
PINHEAP_EXPORT PINHEAP_MALLOC_ATTR void *PINHEAP_NAME(valloc)(size_t size);
PINHEAP_EXPORT PINHEAP_MALLOC_ATTR void *PINHEAP_NAME(pvalloc)(size_t size);
PINHEAP_EXPORT size_t PINHEAP_NAME(malloc_usable_size)(void *ptr);
/** M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX.
 *  @return 1 on success, 0 for an unknown parameter or a bad value. */
PINHEAP_EXPORT int PINHEAP_NAME(mallopt)(int param, int value);
PINHEAP_EXPORT struct mallinfo2 PINHEAP_NAME(mallinfo2)(void);
/** Writes a summary to stderr without allocating. */
PINHEAP_EXPORT void PINHEAP_NAME(malloc_stats)(void);
/** @return 1 if memory was given back to the OS, else 0. */
PINHEAP_EXPORT int PINHEAP_NAME(malloc_trim)(size_t pad);

/* ======================================================================= */
/*  mspaces: independent heaps (dlmalloc signatures)                        */
/* ======================================================================= */

typedef void *pinheap_mspace;

/** A heap that grows from the OS as needed.  capacity is the size of its
 *  first segment (0 = the default, 1 MiB).  locked != 0 makes it safe for
 *  concurrent use. */
PINHEAP_EXPORT pinheap_mspace PINHEAP_NAME(create_mspace)(size_t capacity, int locked);
/** A heap over the caller's region [base, base+capacity): it never grows,
 *  never releases, and never touches memory outside the region.  Its own
 *  bookkeeping lives at the start of the region.  NULL (errno EINVAL) if
 *  the region is too small to hold it. */
PINHEAP_EXPORT pinheap_mspace PINHEAP_NAME(create_mspace_with_base)(void *base, size_t capacity, int locked);
/** Gives every OS-backed byte back.  @return bytes released. */
PINHEAP_EXPORT size_t PINHEAP_NAME(destroy_mspace)(pinheap_mspace msp);
PINHEAP_EXPORT PINHEAP_MALLOC_ATTR void *PINHEAP_NAME(mspace_malloc)(pinheap_mspace msp, size_t bytes);
PINHEAP_EXPORT void PINHEAP_NAME(mspace_free)(pinheap_mspace msp, void *mem);
PINHEAP_EXPORT PINHEAP_MALLOC_ATTR void *PINHEAP_NAME(mspace_calloc)(pinheap_mspace msp, size_t n, size_t elem_size);
PINHEAP_EXPORT void *PINHEAP_NAME(mspace_realloc)(pinheap_mspace msp, void *mem, size_t newsize);
PINHEAP_EXPORT PINHEAP_MALLOC_ATTR void *PINHEAP_NAME(mspace_memalign)(pinheap_mspace msp, size_t alignment, size_t bytes);
PINHEAP_EXPORT size_t PINHEAP_NAME(mspace_usable_size)(const void *mem);
PINHEAP_EXPORT int PINHEAP_NAME(mspace_trim)(pinheap_mspace msp, size_t pad);
PINHEAP_EXPORT struct mallinfo2 PINHEAP_NAME(mspace_mallinfo)(pinheap_mspace msp);

/* ======================================================================= */
/*  Heap checking                                                           */
/* ======================================================================= */

/** Validates every invariant of an mspace (chunk boundaries and tags,
 *  coalescing, bin membership and order, bin map, top chunk, segment list,
 *  counters).  @return 0 if the heap is sound; otherwise writes one line
 *  per problem to stderr (without allocating) and returns the number of
 *  problems found. */
PINHEAP_EXPORT int PINHEAP_NAME(mspace_check)(pinheap_mspace msp);
/** The same for the heap behind PINHEAP_NAME(malloc). */
PINHEAP_EXPORT int PINHEAP_NAME(malloc_check)(void);

#ifdef __cplusplus
}
#endif

#endif /* PINHEAP_H */
