/*
 * shm.h -- the shared-memory heap as the rest of the archive sees it;
 * shm_region.h is what its own files share.
 */
#ifndef PINHEAP_SHM_H
#define PINHEAP_SHM_H

#include "allocator/heap/chunk.h"

/* ======================================================================= */
/*  shm.c -- the shared-memory heap: one region, one address, every process  */
/* ======================================================================= */
/*
 * Every process of a job maps one shared object at the same address; each
 * takes slices of it (an atomic cursor in its header) for its arenas, whose
 * heap state lives in the region too, so a pointer, a segment's seg_t and
 * an arena's remote stack mean the same in every process.  The owner map's
 * leaves for the region live in the region (shared); the kind map stays
 * private (PH_KIND_SHM but for this process's own slices).
 */
/** heap_default(), once, under its lock: starts the shared heap when its
 *  size is given.  @return this process's arena 0 in the region, or NULL
 *  (the mode is off, or it failed and the fallback is on: the private heap
 *  then).  Never allocates.  A failure without the fallback ends the
 *  process with one message naming the cause. */
PH_HIDDEN mstate_t *shm_start(void);
/** Is the shared heap on in this process? */
PH_HIDDEN bool shm_on(void);
/** Is mem in a part of the region another process holds?  Its heap is
 *  that process's: its lock is never taken here (heap.c, foreign_hand_back). */
PH_HIDDEN bool shm_foreign(const void *mem);
/** A new arena of this process in the region (kind: its kind map byte), or
 *  NULL when the region is full. */
PH_HIDDEN mstate_t *shm_heap_create(unsigned kind);
/** A slice of at least len bytes (a multiple of PH_GRANULE) for a heap of
 *  this process, or NULL when the region is full (then the fallback, if on,
 *  starts: see shm_fallback_active).  Lock-free. */
PH_HIDDEN void *shm_slice_take(size_t len);
/** Reserves in the tmpfs the pages of [p, p + len) in ms's part of the
 *  region that a give-back removed (see ms_carve_backed).  Locked.
 *  @return false when the tmpfs has no room (then NULL, or the fallback). */
PH_HIDDEN bool shm_back(mstate_t *ms, const void *p, size_t len);
/** The whole pages [addr, addr + len) of ms's free chunk leave the object
 *  (os_release_shared: the listener first), no longer reserved. */
PH_HIDDEN void shm_remove(mstate_t *ms, void *addr, size_t len);
/** Has the region filled up with the fallback on?  Then large requests get
 *  private huge chunks and small ones a private heap's chunks. */
PH_HIDDEN bool shm_fallback_active(void);
/** The private heap of the fallback (created on first use), or NULL. */
PH_HIDDEN mstate_t *shm_fallback_heap(void);
/** Fork, in the child: the child gets a private copy of the region at the
 *  same address (its blocks stay valid; the others' heap is untouched). */
PH_HIDDEN void shm_fork_child(void);
/** Fork, in the parent with every allocator lock held: the snapshot of the
 *  region the child gets (shm_fork_child); and after the fork, its end. */
PH_HIDDEN void shm_fork_prepare(void);
PH_HIDDEN void shm_fork_parent(void);
/** At exit (init.c's destructor, after this thread's cache gave other
 *  processes their blocks back): the process leaves the region; the last
 *  one unlinks it. */
PH_HIDDEN void shm_leave(void);
/* Releases every process hears (shm.c: "releases every process hears"). */
enum shm_post_e {   /* the source's post's results (types.h: enum source_post_e) */
  SHM_POST_NOW = SOURCE_POST_NOW,
  SHM_POST_LATER = SOURCE_POST_LATER,
  SHM_POST_FULL = SOURCE_POST_FULL
};
/** Where a chunk posted to the ring keeps its entry's token (source.c's
 *  section: source_token_at, the heap's name for it). */
PH_INLINE uint64_t *shm_rel_token_at(void *chunk) { return source_token_at(chunk); }
/** The pages [addr, addr+len) of the borrowed free chunk of this process's
 *  shared heap ms are to go back: posts them for every other process to
 *  hear first (and writes the entry's token in the chunk).  Lock-free; call
 *  it with ms unlocked.  @return enum shm_post_e. */
PH_HIDDEN int shm_rel_post(mstate_t *ms, void *chunk, void *addr, size_t len);
/** Is there a release to hear or one of this process's to settle?  A few
 *  relaxed loads. */
PH_HIDDEN bool shm_rel_due(void);
/** Calls this process's release listeners for every release other processes
 *  posted since the last time, then gives back the pages of its own that
 *  every live process has heard.  No heap lock may be held.  @return how
 *  many of its own still wait. */
PH_HIDDEN int shm_rel_poll(void);

#endif
