/*
 * heap.h -- the allocator's types, constants and inline chunk arithmetic.
 *
 * Glossary
 *   chunk    A 16-byte aligned block with a boundary tag.  `head` holds the
 *            chunk's size, its flags and a check byte; `prev_foot` holds the
 *            size of the previous chunk when that chunk is free.  The user's
 *            payload starts 16 bytes into the chunk and may run into the next
 *            chunk's prev_foot, so an in-use chunk costs 8 bytes of overhead.
 *   bin      A list of free chunks.  Small bins (sizes < 8192) hold one exact
 *            size each; large bins hold a size range, sorted ascending, so the
 *            first fit is the best fit.  A bit map says which bins are non-empty.
 *   dv       The designated victim: the rest of the last chunk split to serve
 *            a request, kept apart in bin 0 so that the next requests carve
 *            it without moving it from bin to bin.
 *   top      The free chunk at the end of the newest segment; it is carved
 *            from when no bin fits and is never in a bin.
 *   fence    A zero-sized in-use chunk header closing every segment.
 *   segment  A contiguous stretch of heap: a 64 KiB aligned mapping from the
 *            OS (or the caller's region for create_mspace_with_base).  Its
 *            seg_t header sits at its base.
 *   huge     A chunk at or above the mmap threshold, mapped on its own, with
 *            a huge_t header at the base of the mapping.
 *   mstate   One heap: bins, top, segments, huge chunks, a lock.  The malloc
 *            family uses the static default heap; every mspace is an mstate.
 *   owner map  Maps each 64 KiB granule of address space to the segment or
 *            huge chunk of pinheap that holds it (0 = not pinheap's).  It makes
 *            "is this pointer ours, and whose" exact and cheap (two loads).
 *   check byte  The top byte of `head`: a hash of the chunk's address, its
 *            size and flags, and the heap's secret cookie.  A header that was
 *            overwritten, or a pointer that is not a chunk, fails it.
 */
#ifndef PINHEAP_HEAP_H
#define PINHEAP_HEAP_H

#include "internal.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- sizes -------------------------------------------------------------- */
#define PH_ALIGN          16u
#define PH_ALIGN_MASK     (PH_ALIGN - 1)
#define PH_CHUNK_HDR      16u                   /* prev_foot + head */
#define PH_CHUNK_OVERHEAD 8u                    /* in-use cost: the head */
#define PH_MIN_CHUNK      32u
#define PH_FENCE_SIZE     16u
#define PH_GRANULE_SHIFT  16
#define PH_GRANULE        ((size_t)1 << PH_GRANULE_SHIFT)   /* 64 KiB */
#define PH_SMALL_LIMIT    8192u                 /* sizes below: exact small bins */
#define PH_NSMALL         512u
/* Large bins are sorted lists; a free is a sorted insert, so a bin must
 * stay short.  Sizes up to 2 MiB, where a heap's free chunks crowd, get 32
 * bins per power of two (a bin spans 1/32 of it); sizes above, 4. */
#define PH_FINE_LIMIT_SHIFT 21u                 /* 2 MiB */
#define PH_NFINE          (PH_NSMALL + ((PH_FINE_LIMIT_SHIFT - 13u) << 5))
#define PH_NBINS          (PH_NFINE + ((48u - PH_FINE_LIMIT_SHIFT) << 2))   /* up to 2^47 */
#define PH_BINMAP_WORDS   ((PH_NBINS + 63) / 64)
_Static_assert(PH_BINMAP_WORDS <= 64, "mstate_t.binmap_words has a bit per word of binmap");
/* The largest request: user space is 47 bits, so nothing larger can ever
 * be mapped, and every chunk size below it has a bin (bin_index). */
#define PH_MAX_REQUEST    (((size_t)1 << 47) - 4 * PH_GRANULE)

/* ---- head layout -------------------------------------------------------- */
#define PH_PINUSE    ((size_t)1)   /* the previous chunk is in use */
#define PH_CINUSE    ((size_t)2)   /* this chunk is in use */
#define PH_MMAPPED   ((size_t)4)   /* a huge chunk, mapped on its own */
#define PH_DECOMMITTED ((size_t)8) /* free chunk: its whole interior pages were
                                      given back by malloc_trim (and not touched since) */
#define PH_FLAGS     ((size_t)0xf)
#define PH_SIZE_MASK ((size_t)0x0000fffffffffff0ULL)
#define PH_CHECK_SHIFT 56
#define PH_CHECK_MASK ((size_t)0xff << PH_CHECK_SHIFT)
/* What a chunk's header becomes when the chunk merges into the free chunk
 * before it: no header (its check byte is not one), and a free of the old
 * pointer is named a double free rather than an invalid pointer. */
#define PH_HEAD_MERGED ((size_t)0x004d455247454421ULL)
/* ---- defaults (mallopt) ------------------------------------------------- */
#define PH_DEFAULT_MMAP_THRESHOLD  ((size_t)128 * 1024)
#define PH_MAX_MMAP_THRESHOLD      ((size_t)32 * 1024 * 1024)
#define PH_DEFAULT_TRIM_THRESHOLD  ((size_t)128 * 1024)
#define PH_DEFAULT_MMAP_MAX        65536
#define PH_DEFAULT_SEGMENT         ((size_t)1024 * 1024)
#define PH_MAX_SEGMENT_GROW        ((size_t)16 * 1024 * 1024)
/* Address space reserved after each new segment of an arena (seg_t.spare). */
#define PH_SEG_SPARE               ((size_t)3 * 1024 * 1024)
/* With the default (dynamic) thresholds, the top's tail is given back only
 * once it has stayed unused this long: memory follows the program without
 * a map/unmap per free.  A threshold set with mallopt trims at once, as
 * glibc does. */
#define PH_TRIM_DECAY_MS           100u

/* Deferred coalescing: small chunks coming back from the thread caches wait
 * in per-size lists of their heap ("fast" lists, as glibc's fastbins) and
 * are handed out again as they are; they are coalesced only when the heap
 * would otherwise grow, when the lists hold too much, and before trim and
 * statistics. */
#define PH_FAST_MAX_CHUNK 2032u
#define PH_FAST_NBINS ((PH_FAST_MAX_CHUNK >> 4) + 1)
/* The deferred chunks of one size move between a heap and the thread
 * caches in bundles, whole: a bundle is a list of chunks linked through
 * the first word of their payloads, and its first chunk's third word holds
 * the next bundle and, in its top 16 bits, the bundle's length.  (The
 * third word exists in the smallest chunk, as it runs into the next
 * chunk's prev_foot.)  Every chunk of a bundle is waiting (below).  So a
 * thread cache refills and gives back in O(1), without walking the chunks;
 * each chunk's header is checked when malloc hands it out (front.h). */
#define PH_BUNDLE_SHIFT 48
#define PH_BUNDLE_LINK_MASK (((uintptr_t)1 << PH_BUNDLE_SHIFT) - 1)

/* Length of a bundle of chunks of size s: half a thread cache bin's
 * capacity, about 2 KiB of chunks, 2..32. */
PH_INLINE unsigned bundle_cap(size_t s)
{
  size_t n = 2048 / s;
  return (unsigned)(n < 2 ? 2 : n > 32 ? 32 : n);
}

/* A small in-use chunk that the program freed and that waits -- in a
 * thread cache list or spare, a bundle, a remote stack, a deferred list --
 * until it is handed out again holds chunk_free_key in its second payload
 * word.  Only the thread that frees a chunk writes that word (headers of
 * in-use chunks are the heap lock holder's: it updates their PINUSE), and
 * the word is cleared exactly where a chunk stops waiting: when a thread
 * cache hands it out and when its heap coalesces it.  So a free that finds
 * the key is a double free, wherever the chunk waits; the key is a random
 * secret, and a live block holds it only if the program read freed memory. */
extern PH_HIDDEN uint64_t chunk_free_key;

PH_INLINE bool chunk_mem_waiting(const void *mem)
{
  return ((const uint64_t *)mem)[1] == chunk_free_key;
}
PH_INLINE void chunk_mem_wait(void *mem) { ((uint64_t *)mem)[1] = chunk_free_key; }
PH_INLINE void chunk_mem_unwait(void *mem) { ((uint64_t *)mem)[1] = 0; }

typedef struct chunk_s {
  size_t prev_foot;          /* size of the previous chunk, if it is free */
  size_t head;               /* size | flags | check byte << 56 */
  struct chunk_s *fd;        /* free chunks only: bin links */
  struct chunk_s *bk;
} chunk_t;

struct mstate_s;

/* At the base of every segment.  sizeof is a multiple of 16. */
typedef struct seg_s {
  struct seg_s *next;
  struct mstate_s *ms;
  char *base;                /* == (char *)this */
  size_t size;               /* bytes from base to the end of the fence */
  size_t chunk_off;          /* offset of the first chunk from base */
  size_t flags;              /* PH_SEG_* */
  uint64_t idle_since;       /* wholly free since (ms, monotonic); 0: in use */
  size_t spare;              /* bytes mapped after base + size, not yet part of
                                the segment: it grows into them in place */
} seg_t;
#define PH_SEG_EXTERN  1u    /* the caller's region: never grown or released */
#define PH_SEG_HOLDS_MS 2u   /* the mstate lives in this segment (an mspace) */

/* At the base of every huge mapping.  sizeof is 48: the chunk follows. */
typedef struct huge_s {
  struct huge_s *next;
  struct huge_s *prev;
  size_t map_size;
  struct mstate_s *ms;
  size_t chunk_off;          /* offset of the chunk from the base */
  size_t recycled;           /* 1: reused from the mapping cache (not zeroed) */
} huge_t;

typedef struct bin_s {
  chunk_t *fd;
  chunk_t *bk;
} bin_t;

typedef struct ph_lock_s {
  atomic_int held;
} ph_lock_t;

typedef struct mstate_s {
  ph_lock_t lock;
  unsigned flags;            /* PH_MS_* */
  unsigned kind;             /* the kind map byte of its segments (PH_KIND_*) */
  size_t cookie;             /* secret mixed into every check byte */
  chunk_t *top;
  seg_t *top_seg;
  seg_t *segs;               /* every segment, newest first */
  huge_t *huge;              /* every live huge chunk */
  size_t huge_count;
  size_t huge_bytes;         /* mapped bytes of huge chunks */
  size_t footprint;          /* bytes of all segments */
  size_t max_footprint;
  size_t seg_grow;           /* least size of the next segment */
  unsigned idle_segs;        /* segments with idle_since set */
  uint64_t idle_scan_at;     /* when they were last looked at */
  uint64_t trim_since;       /* decay: when the top last rose above the trim
                                threshold (ms, monotonic), 0 if it is below */
  size_t trim_low;           /* the top's smallest size since then */
  void *fast[PH_FAST_NBINS]; /* freed small chunks kept in use, not coalesced:
                                by chunk size >> 4, a stack of bundles (below) */
  size_t fast_bytes;
  void *_Atomic remote;      /* bundles of in-use chunks freed by other threads
                                (a stack, as fast[]); drained under the lock */
  struct mstate_s *all_next; /* every heap of the process (fork, statistics) */
  uint64_t binmap[PH_BINMAP_WORDS];
  uint64_t binmap_words;     /* bit w: binmap[w] != 0, so a search skips
                                runs of empty bins in one step */
  bin_t bins[PH_NBINS];      /* last: a bin's header is written when it first
                                holds a chunk (bin_live), so the pages of
                                bins never used stay untouched */
} mstate_t;
#define PH_MS_LOCKED  1u     /* take the lock on every call */
#define PH_MS_FIXED   2u     /* over the caller's region: never touches the OS */
#define PH_MS_INIT    4u
#define PH_MS_USER    8u     /* an mspace of the caller's (not an arena) */

/* Process-wide tunables (mallopt). */
typedef struct mparams_s {
  size_t mmap_threshold;
  size_t trim_threshold;
  size_t top_pad;
  int mmap_max;
  bool mmap_threshold_set;   /* set by mallopt: stops the dynamic threshold */
} mparams_t;

/* ---- inline chunk arithmetic -------------------------------------------- */
PH_INLINE size_t chunk_size(const chunk_t *c) { return c->head & PH_SIZE_MASK; }
PH_INLINE size_t chunk_flags(const chunk_t *c) { return c->head & PH_FLAGS; }
PH_INLINE bool chunk_cinuse(const chunk_t *c) { return (c->head & PH_CINUSE) != 0; }
PH_INLINE bool chunk_pinuse(const chunk_t *c) { return (c->head & PH_PINUSE) != 0; }
PH_INLINE chunk_t *chunk_at(const void *p, size_t off) { return (chunk_t *)((char *)p + off); }
PH_INLINE chunk_t *chunk_next(const chunk_t *c) { return chunk_at(c, chunk_size(c)); }
PH_INLINE void *chunk_mem(const chunk_t *c) { return (char *)c + PH_CHUNK_HDR; }
PH_INLINE chunk_t *mem_chunk(const void *m) { return (chunk_t *)((char *)m - PH_CHUNK_HDR); }

/* The check byte always has its top bit set, so that a header of zeros (or
 * any small number) never passes, whatever the address and the cookie. */
#define PH_CHECK_MUL 0x9e3779b97f4a7c15ULL
/* The hash before its top bit is forced: sizeflags shifted past the check
 * byte's place, so that the fast path may hash a whole header as it is. */
PH_INLINE uint64_t head_hash(size_t cookie, const chunk_t *c, size_t head)
{
  return ((uintptr_t)c ^ (head << 8) ^ cookie) * PH_CHECK_MUL;
}
PH_INLINE size_t head_check_cookie(size_t cookie, const chunk_t *c, size_t sizeflags)
{
  return (size_t)(head_hash(cookie, c, sizeflags) | ((uint64_t)1 << 63)) & PH_CHECK_MASK;
}
/* Does the whole header head of c carry its check byte?  (Bits 48-55 are
 * not covered: callers test them with the rest of the flags.) */
PH_INLINE bool head_check_matches(size_t cookie, const chunk_t *c, size_t head)
{
  return ((head_hash(cookie, c, head) | ((uint64_t)1 << 63)) ^ head) >> PH_CHECK_SHIFT == 0;
}
PH_INLINE size_t head_check(const mstate_t *ms, const chunk_t *c, size_t sizeflags)
{
  return head_check_cookie(ms->cookie, c, sizeflags);
}
PH_INLINE void head_set(const mstate_t *ms, chunk_t *c, size_t sizeflags)
{
  c->head = sizeflags | head_check(ms, c, sizeflags);
}
PH_INLINE bool head_ok(const mstate_t *ms, const chunk_t *c)
{
  size_t sf = c->head & ~PH_CHECK_MASK;
  return (c->head & PH_CHECK_MASK) == head_check(ms, c, sf) &&
         (sf & ~(PH_SIZE_MASK | PH_FLAGS)) == 0;
}
PH_INLINE void head_set_pinuse(const mstate_t *ms, chunk_t *c, bool on)
{
  size_t sf = (c->head & (PH_SIZE_MASK | PH_FLAGS) & ~PH_PINUSE) | (on ? PH_PINUSE : 0);
  head_set(ms, c, sf);
}

/* Chunk size for a request of n bytes (n <= PH_MAX_REQUEST). */
PH_INLINE size_t request_to_size(size_t n)
{
  size_t s = (n + PH_CHUNK_OVERHEAD + PH_ALIGN_MASK) & ~(size_t)PH_ALIGN_MASK;
  return s < PH_MIN_CHUNK ? PH_MIN_CHUNK : s;
}

PH_INLINE size_t align_up(size_t v, size_t a) { return (v + a - 1) & ~(a - 1); }
PH_INLINE size_t align_down(size_t v, size_t a) { return v & ~(a - 1); }

/* Bin of a free chunk of size s (a multiple of 16, >= PH_MIN_CHUNK). */
PH_INLINE unsigned bin_index(size_t s)
{
  if (s < PH_SMALL_LIMIT)
    return (unsigned)(s >> 4);
  unsigned b = 63u - (unsigned)__builtin_clzll(s);     /* 13 .. 47 */
  if (b < PH_FINE_LIMIT_SHIFT)
    return PH_NSMALL + ((b - 13u) << 5) + (unsigned)((s >> (b - 5u)) & 31u);
  return PH_NFINE + ((b - PH_FINE_LIMIT_SHIFT) << 2) + (unsigned)((s >> (b - 2u)) & 3u);
}

/* Bin 0 holds no size (the least chunk is 32 bytes): it holds the
 * designated victim instead (malloc.c). */
#define PH_DV_BIN 0u

PH_INLINE chunk_t *bin_at(mstate_t *ms, unsigned i)
{
  return (chunk_t *)((char *)&ms->bins[i] - offsetof(chunk_t, fd));
}

/* May bin i be read?  Bins are set up lazily: one whose bin map bit is
 * clear is empty, and its header may never have been written. */
PH_INLINE bool bin_live(const mstate_t *ms, unsigned i)
{
  return i == PH_DV_BIN || ((ms->binmap[i >> 6] >> (i & 63)) & 1);
}

/* ---- malloc.c / check.c ------------------------------------------------- */
extern PH_HIDDEN mparams_t mparams;
/* mparams is read without a lock everywhere and written by mallopt and by
 * the dynamic threshold: each field is read and written whole, relaxed. */
#define mparams_get(field) __atomic_load_n(&mparams.field, __ATOMIC_RELAXED)
#define mparams_set(field, v) __atomic_store_n(&mparams.field, (v), __ATOMIC_RELAXED)
/** The heap behind the malloc family (initialized on first use). */
PH_HIDDEN mstate_t *heap_default(void);
/** Validates every invariant of ms; ms must be locked by the caller.
 *  @return the number of problems (each written to stderr). */
PH_HIDDEN int mstate_check(mstate_t *ms);

/* ---- heap operations (malloc.c), used by the front end (front.c) ------- */
/** A new OS-backed heap: flags PH_MS_LOCKED and PH_MS_USER (a caller's
 *  mspace, kind PH_KIND_USER) or 0 (an arena, kind PH_KIND_ARENA or
 *  PH_KIND_ARENA_TAG(i)).  NULL with errno ENOMEM. */
PH_HIDDEN mstate_t *ms_create(size_t capacity, unsigned flags, unsigned kind);
/** Unmaps an OS-backed heap whole.  @return bytes released. */
PH_HIDDEN size_t ms_destroy(mstate_t *ms);
PH_HIDDEN void *ms_malloc(mstate_t *ms, size_t n);
PH_HIDDEN void *ms_calloc(mstate_t *ms, size_t n, size_t elem);
PH_HIDDEN void *ms_memalign(mstate_t *ms, size_t align, size_t n);
/** want: the heap mem must belong to, or NULL for any heap. */
PH_HIDDEN void *ms_realloc(mstate_t *want, void *mem, size_t n, const char *fn);
/** Frees mem, whose owner map entry o (non-zero) was already read. */
PH_HIDDEN void ms_free_owned(uintptr_t o, void *mem, const char *fn);
PH_HIDDEN int ms_trim(mstate_t *ms, size_t pad);
PH_HIDDEN struct mallinfo2 ms_info(mstate_t *ms);
/** Usable bytes of mem; lenient: accept pointers outside the owner map. */
PH_HIDDEN size_t mem_usable(const void *mem, const char *fn, bool lenient);
/** A list of up to k (>= 1) chunks of size nb (nb <= PH_FAST_MAX_CHUNK),
 *  linked through their payload: deferred ones (every header checked), or
 *  new ones.  @return how many (0: out of memory). */
PH_HIDDEN unsigned ms_alloc_batch(mstate_t *ms, size_t nb, unsigned k, void **list_p);
/** Takes back n in-use chunks of ms, all of size `size` (a list linked
 *  through their payload, from a thread cache of ms), as one bundle. */
PH_HIDDEN void ms_defer_bundle(mstate_t *ms, void *list, unsigned n, size_t size);
/** Hands n in-use chunks of ms, all of one size (a list linked through
 *  their payload), to ms as a bundle, without its lock. */
PH_HIDDEN void ms_remote_push(mstate_t *ms, void *list, unsigned n);
/** Fork: take every heap lock (registry order) / release them all. */
PH_HIDDEN void ms_lock_all(void);
PH_HIDDEN void ms_unlock_all(void);

/* ---- front.c, used by the checker --------------------------------------- */
/** Calls fn on every arena of the malloc family (never on an mspace).
 *  Arenas are never destroyed, so the walk needs no lock; fn may take the
 *  arena's lock. */
PH_HIDDEN void arena_for_each(void (*fn)(mstate_t *ms, void *arg), void *arg);
/** Checks the calling thread's cache: every chunk waiting there is an
 *  in-use, waiting chunk of the right size with a sound header.
 *  @return the number of problems (each written to stderr). */
PH_HIDDEN int tcache_check_mine(void);

/* ---- check.c -------------------------------------------------------------- */
/** PINHEAP_DEBUG >= 2: the full checker after a public call fn, on the
 *  mspace ms, or on every arena and this thread's cache if ms is NULL.
 *  Ends the process naming fn if anything is wrong. */
PH_HIDDEN void heap_debug_check(mstate_t *ms, const char *fn);
#if PINHEAP_DEBUG >= 2
#define PH_DEBUG_CHECK(ms, fn) heap_debug_check((ms), (fn))
#else
#define PH_DEBUG_CHECK(ms, fn) ((void)0)
#endif

/* ---- the owner map (allocator/owner.c) ---------------------------------- */
/*
 * Two levels over the 47-bit user address space: a static root of 2^15
 * leaf pointers (bits 32..46), leaves of 2^16 granule entries (bits 16..31)
 * mapped on first use and never freed.  An entry is a seg_t * (heap
 * segment), or an mstate_t * | 1 (huge chunk owned by that heap), or 0.
 */
#define PH_OWNER_ROOT_BITS 15
#define PH_OWNER_LEAF_BITS 16
#define PH_OWNER_HUGE_TAG  ((uintptr_t)1)  /* mstate_t * | 1: a huge chunk */
#define PH_OWNER_USER_TAG  ((uintptr_t)2)  /* seg_t * | 2: a segment of a caller's mspace */
#define PH_OWNER_TAGS      ((uintptr_t)3)  /* seg_t * alone: a segment of an arena */
extern PH_HIDDEN _Atomic(uintptr_t *) owner_map_root[(size_t)1 << PH_OWNER_ROOT_BITS];

PH_INLINE uintptr_t owner_map_get(const void *p)
{
  uintptr_t a = (uintptr_t)p;
  uintptr_t *leaf;

  if (ph_unlikely(a >> (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS + PH_OWNER_ROOT_BITS)))
    return 0;
  leaf = atomic_load_explicit(&owner_map_root[a >> (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS)],
                              memory_order_acquire);
  if (ph_unlikely(leaf == NULL))
    return 0;
  return __atomic_load_n(&leaf[(a >> PH_GRANULE_SHIFT) & (((uintptr_t)1 << PH_OWNER_LEAF_BITS) - 1)],
                         __ATOMIC_RELAXED);
}
PH_INLINE seg_t *owner_seg(uintptr_t o) { return (seg_t *)(o & ~PH_OWNER_TAGS); }
PH_INLINE chunk_t *seg_first_chunk(const seg_t *seg) { return chunk_at(seg->base, seg->chunk_off); }

/* The kind map: one byte per granule, the fast paths' ownership test (one
 * bounds check and one load).  It mirrors the owner map's entries, coarsely:
 * PH_KIND_NONE, or what kind of pinheap memory.  A flat reservation of
 * 2 GiB of address space (a byte per 64 KiB of 47-bit space); pages are
 * touched only where pinheap has memory.  If the OS refuses it, the limit
 * stays 0 and every pointer takes the owner map instead. */
#define PH_KIND_NONE  0u
#define PH_KIND_ARENA 1u     /* a segment of an arena without a tag of its own */
#define PH_KIND_HUGE  2u
#define PH_KIND_USER  3u     /* a segment of a caller's mspace */
#define PH_KIND_UNKNOWN 0xffu
/* A segment of arena i < PH_KIND_TAGS: the thread caches of that arena's
 * threads take its chunks on their fast path (one compare). */
#define PH_KIND_TAGS 126u
#define PH_KIND_ARENA_TAG(i) (0x80u | (unsigned)(i))
#define PH_KIND_NOTHING 0xfeu  /* the sentinel caches' tag: matches no granule */
extern PH_HIDDEN uint8_t *owner_kind;
extern PH_HIDDEN uintptr_t owner_kind_limit;

PH_INLINE unsigned owner_kind_get(const void *p)
{
  uintptr_t g = (uintptr_t)p >> PH_GRANULE_SHIFT;
  if (ph_unlikely(g >= owner_kind_limit))
    return PH_KIND_UNKNOWN;
  return owner_kind[g];
}

/** Fork: hold / release the owner map's creation lock. */
PH_HIDDEN void owner_fork_lock(void);
PH_HIDDEN void owner_fork_unlock(void);

/** Sets the entry of every granule of [base, base+len) (both granule
 *  aligned) to value, and its kind map byte to kind.  @return false if a
 *  leaf could not be mapped. */
PH_HIDDEN bool owner_map_set(const void *base, size_t len, uintptr_t value, unsigned kind);

/* ---- locks --------------------------------------------------------------- */
PH_HIDDEN void ph_lock_slow(ph_lock_t *l);
PH_INLINE void ph_lock(ph_lock_t *l)
{
  int expected = 0;
  if (ph_likely(atomic_compare_exchange_weak_explicit(&l->held, &expected, 1,
                                                      memory_order_acquire, memory_order_relaxed)))
    return;
  ph_lock_slow(l);
}
PH_INLINE void ph_unlock(ph_lock_t *l) { atomic_store_explicit(&l->held, 0, memory_order_release); }

PH_INLINE void ms_lock(mstate_t *ms)
{
  if (ms->flags & PH_MS_LOCKED)
    ph_lock(&ms->lock);
}

PH_INLINE void ms_unlock(mstate_t *ms)
{
  if (ms->flags & PH_MS_LOCKED)
    ph_unlock(&ms->lock);
}

#endif /* PINHEAP_HEAP_H */
