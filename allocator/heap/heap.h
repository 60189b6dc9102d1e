/*
 * heap.h -- the heap's cross-file names: memory sources, a heap's state,
 * arenas, bins, segments, huge chunks, the heap core, deferred frees.  Its
 * inline arithmetic is heap/chunk.h, which includes this header.
 */
#ifndef PINHEAP_HEAP_H
#define PINHEAP_HEAP_H

#include "allocator/os/os.h"

/* ======================================================================= */
/*  source.c -- the memory sources (types.h: mem_source_t)                  */
/* ======================================================================= */

/* Fresh mappings of the OS (os.c): arenas, the default heap, create_mspace. */
extern PH_HIDDEN const mem_source_t mem_source_os;
/* The caller's region (create_mspace_with_base): never grown, never given
 * back, not in the owner map. */
extern PH_HIDDEN const mem_source_t mem_source_region;
/* The sources' operations, a row per source (types.h: mem_source_ops_t),
 * indexed by mem_source_t.ops. */
extern PH_HIDDEN mem_source_ops_t mem_source_ops[MEM_SOURCE_COUNT];
/** Puts a source's row of operations (the shared heap's, at its start,
 *  before any heap of it exists). */
PH_HIDDEN void source_ops_set(unsigned id, const mem_source_ops_t *ops);

/* The operations of ms's source. */
PH_INLINE const mem_source_ops_t *ms_source_ops(const mstate_t *ms)
{
  return &mem_source_ops[ms->source->ops];
}
/* The shared region's operations, for what is the process's rather than a
 * heap's: releases to hear, new arenas. */
PH_INLINE const mem_source_ops_t *source_shared_ops(void)
{
  return &mem_source_ops[MEM_SOURCE_SHARED];
}
/* Where a chunk of the shared heap posted for release keeps the entry's
 * token (post): the first word past its header and bin links.  A later
 * post of a chunk at the same place overwrites it, so a mark on the chunk
 * is the entry's only while the token is there. */
PH_INLINE uint64_t *source_token_at(void *chunk) { return (uint64_t *)((chunk_t *)chunk + 1); }

/* ======================================================================= */
/*  state.c -- tunables, keys, a heap's set-up, heaps made and unmade       */
/* ======================================================================= */

/* Process-wide tunables (mallopt).  Read without a lock everywhere and
 * written by mallopt and by the dynamic threshold: each field is read and
 * written whole, relaxed (chunk.h: mparams_get, mparams_set). */
extern PH_HIDDEN mparams_t mparams;
/* The key a waiting chunk holds in its second payload word (chunk.h:
 * chunk_mem_waiting). */
extern PH_HIDDEN uint64_t chunk_free_key;
/* The default heap once made (heap_default, init.c; NULL before): read
 * with heap_main_get() (chunk.h). */
extern PH_HIDDEN mstate_t *heap_main;
/** Sets chunk_free_key once, before any heap exists: random, odd. */
PH_HIDDEN void chunk_free_key_init(void);
/** Sets up the heap ms (zeroed up to its bins, a fresh cookie) over the
 *  memory source src with flags PH_MS_* and the kind map byte kind, and
 *  registers it (arena.c) if its source is in the owner map. */
PH_HIDDEN void ms_init(mstate_t *ms, const mem_source_t *src, unsigned flags, unsigned kind);
/** The private heap's arena 0 (a static heap), set up. */
PH_HIDDEN mstate_t *heap_main_private(void);
/** A new OS-backed heap: flags PH_MS_LOCKED and PH_MS_USER (a caller's
 *  mspace, kind PH_KIND_USER) or 0 (an arena, kind PH_KIND_ARENA or
 *  PH_KIND_ARENA_TAG(i)).  NULL with errno ENOMEM. */
PH_HIDDEN mstate_t *ms_create(size_t capacity, unsigned flags, unsigned kind);
/** Unmaps an OS-backed heap whole.  @return bytes released. */
PH_HIDDEN size_t ms_destroy(mstate_t *ms);

/* ======================================================================= */
/*  arena.c -- arenas, the heap registry, the arenas' fork lock             */
/* ======================================================================= */

/** Adds ms to / removes ms from the registry of every heap (fork). */
PH_HIDDEN void ms_register(mstate_t *ms);
PH_HIDDEN void ms_unregister(mstate_t *ms);
/** Is any heap registered yet? */
PH_HIDDEN bool ms_any(void);
/** Fork: take every heap lock (registry order) / release them all. */
PH_HIDDEN void ms_lock_all(void);
PH_HIDDEN void ms_unlock_all(void);
/** front_init: arena 0 (the default heap, given) and the arena cap
 *  (M_ARENA_MAX, the parameter, or four per CPU). */
PH_HIDDEN void arena_init(mstate_t *arena0);
/** Fork: the arena table's lock (malloc_prefork_lock's first). */
PH_HIDDEN void arena_fork_lock(void);
PH_HIDDEN void arena_fork_unlock(void);
/** mallopt(M_ARENA_MAX, value).  @return 1, or 0 if value is out of range. */
PH_HIDDEN int arena_max_set(int value);
/** The arena of a thread that allocates for the first time. */
PH_HIDDEN mstate_t *arena_pick(void);
/** Calls fn on every arena of the malloc family (never on an mspace).
 *  Arenas are never destroyed, so the walk needs no lock; fn may take the
 *  arena's lock. */
PH_HIDDEN void arena_for_each(void (*fn)(mstate_t *ms, void *arg), void *arg);

/* ======================================================================= */
/*  bins.c -- the bins of free chunks and the designated victim             */
/* ======================================================================= */

/** First non-empty bin at or above i, or PH_NBINS. */
PH_HIDDEN unsigned binmap_next(const mstate_t *ms, unsigned i);
/** Bins the free chunk c of size bytes (large bins stay sorted). */
PH_HIDDEN void bin_insert(mstate_t *ms, chunk_t *c, size_t size);
/** Makes the free chunk c the designated victim; the old one is binned. */
PH_HIDDEN void dv_replace(mstate_t *ms, chunk_t *c);
/** Takes nb bytes from the designated victim dv (dsize >= nb). */
PH_HIDDEN chunk_t *dv_take(mstate_t *ms, chunk_t *dv, size_t dsize, size_t nb);
/** Puts the designated victim into its bin (before a walk of the bins). */
PH_HIDDEN void dv_flush(mstate_t *ms);

/* ======================================================================= */
/*  segment.c -- segments: grow, extend in place, trim the top, decay, idle */
/* ======================================================================= */

/** Milliseconds of CLOCK_MONOTONIC_COARSE, plus one (never 0). */
PH_HIDDEN uint64_t now_ms(void);
/** Lays a segment out at base: header, room, one free chunk, fence. */
PH_HIDDEN void seg_format(mstate_t *ms, char *base, size_t size, size_t chunk_off, size_t flags);
/** Grows the top in place from its segment's reserve to hold want bytes.
 *  Locked; never drops the lock. */
PH_HIDDEN bool ms_grow_in_place(mstate_t *ms, size_t want);
/** Adds at least nb bytes of top.  Locked; the lock is dropped around the
 *  mmap. */
PH_HIDDEN bool ms_grow(mstate_t *ms, size_t nb);
/** Gives the top's tail beyond pad back (after unlocking: *rel).  The
 *  shared heap gives its pages back in place, the lock dropped meanwhile
 *  (*rel stays empty; so for the two below). */
PH_HIDDEN void ms_trim_top(mstate_t *ms, size_t pad, release_t *rel);
/** The top grew past the trim threshold: trim now or after the decay. */
PH_HIDDEN void ms_trim_decay(mstate_t *ms, release_t *rel);
/** Takes the wholly free segment *pp out of the heap (release *rel). */
PH_HIDDEN void seg_take_out(mstate_t *ms, seg_t **pp, release_t *rel);
/** Takes idle segments out (all if force), up to max, into out[]. */
PH_HIDDEN unsigned ms_idle_collect(mstate_t *ms, release_t *out, unsigned max, bool force);
PH_HIDDEN bool ms_give_back_idle(mstate_t *ms, size_t pad, release_t *rel);
/** What ms holds idle (wholly free segments, the top's tail past pad) taken
 *  out at once, for the caller to use or release: out[i].len writable bytes
 *  then spare[i] bytes of reserve.  Locked; not the shared heap.  Up to max;
 *  @return how many. */
PH_HIDDEN unsigned ms_take_idle(mstate_t *ms, size_t pad, release_t *out, size_t *spare,
                                unsigned max);
/** The shared heap: the pages [addr, addr+len) of the free chunk of ms that
 *  this process posted (token: the entry's) go now, if the chunk stayed free
 *  and untouched.  Takes the lock.  @return 1 gone, 0 dropped, -1 not yet. */
PH_HIDDEN int ms_release_settle(mstate_t *ms, void *chunk, void *addr, size_t len, uint64_t token);

/* ======================================================================= */
/*  huge.c -- huge chunks and the mapping cache                             */
/* ======================================================================= */

/* Live huge chunks of all heaps (against M_MMAP_MAX). */
extern PH_HIDDEN atomic_size_t huge_total;
/** Fork: hold / release the mapping cache's lock. */
PH_HIDDEN void huge_cache_fork_lock(void);
PH_HIDDEN void huge_cache_fork_unlock(void);
/** The cache's decay: decommits entries unused for PH_TRIM_DECAY_MS and
 *  releases decommitted ones kept for long (every entry released if all).
 *  @return whether anything was released or decommitted. */
PH_HIDDEN bool huge_cache_decay(bool all);
/** A resident cached mapping of exactly len bytes (a multiple of
 *  PH_GRANULE) for a heap's new segment, its pages kept and its contents
 *  not cleared (the tail of a bigger one stays cached), or NULL. */
PH_HIDDEN char *huge_cache_take_resident(size_t len);
/** A huge chunk of nb bytes aligned to align for ms, or NULL. */
PH_HIDDEN void *huge_alloc(mstate_t *ms, size_t nb, size_t align);
/** Validates the huge chunk c of ms (locked); returns its mapping header. */
PH_HIDDEN huge_t *huge_check(mstate_t *ms, chunk_t *c, const char *fn);
/** Frees the huge chunk behind mem, of ms. */
PH_HIDDEN void huge_free(mstate_t *ms, void *mem, const char *fn);
/** realloc of the huge chunk mem of ms to chunk size nb: resized with
 *  mremap, in place or moved (pages kept, nothing copied).  @return mem or
 *  its new address; NULL (errno untouched) when it is to move by copy: into
 *  the heap (shrunk below half the threshold), the shared heap, or a move
 *  the OS refused.  *old_usable_p: its usable bytes before. */
PH_HIDDEN void *huge_realloc(mstate_t *ms, void *mem, size_t nb, const char *fn,
                             size_t *old_usable_p);
/** Copies n bytes of the huge chunk src to dst, decommitting src behind. */
PH_HIDDEN void huge_move_copy(void *dst, const void *src, size_t n);

/* ======================================================================= */
/*  heap.c -- the heap core: alloc, free, realloc, memalign, calloc         */
/* ======================================================================= */

/** Takes a chunk of nb bytes from the bins or the top, growing the heap
 *  if needed.  Locked.  NULL when out of memory. */
PH_HIDDEN chunk_t *ms_alloc_chunk(mstate_t *ms, size_t nb);
PH_HIDDEN void *ms_malloc(mstate_t *ms, size_t n);
PH_HIDDEN void *ms_calloc(mstate_t *ms, size_t n, size_t elem);
PH_HIDDEN void *ms_memalign(mstate_t *ms, size_t align, size_t n);
/** want: the heap mem must belong to, or NULL for any heap.  mem is a
 *  chunk's, never a slab block's (the malloc family's realloc takes those,
 *  and a NULL mem, itself); a NULL mem needs a heap (want). */
PH_HIDDEN void *ms_realloc(mstate_t *want, void *mem, size_t n, const char *fn);
/** Frees the in-use chunk c (validated) of seg: coalesces, bins or merges
 *  into the top.  Locked.  A range to release after unlocking: *rel. */
PH_HIDDEN void ms_free_chunk(mstate_t *ms, seg_t *seg, chunk_t *c, size_t size, release_t *rel,
                             const char *fn);
/** Frees mem (NULL: nothing), a chunk of the heap want (NULL: any heap). */
PH_HIDDEN void ms_free_mem(mstate_t *want, void *mem, const char *fn);
/** Frees mem, a chunk (not a slab block) whose owner map entry o
 *  (non-zero) was already read. */
PH_HIDDEN void ms_free_owned(uintptr_t o, void *mem, const char *fn);
/** A chunk of nb bytes whose payload is aligned to align (> 16), ms
 *  locked (dropped around a grow).  A range to release after unlocking:
 *  *rel.  NULL when out of memory. */
PH_HIDDEN chunk_t *ms_alloc_aligned_locked(mstate_t *ms, size_t nb, size_t align, release_t *rel);
/** Frees one waiting chunk of a deferred list, ms locked. */
PH_HIDDEN void ms_free_locked(mstate_t *ms, void *mem, const char *fn);
/** Usable bytes of mem, a chunk (not a slab block); lenient: accept
 *  pointers outside the owner map. */
PH_HIDDEN size_t mem_usable(const void *mem, const char *fn, bool lenient);

/* ======================================================================= */
/*  defer.c -- deferred bundles, the remote stack, consolidation            */
/* ======================================================================= */

/** Takes the bundles of ms->remote into the deferred lists.  Locked. */
PH_HIDDEN void ms_drain_remote(mstate_t *ms);
/** Coalesces every deferred chunk into the heap.  Locked.  @return
 *  whether there was any. */
PH_HIDDEN bool ms_fast_consolidate(mstate_t *ms);
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


#endif
