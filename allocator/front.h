/*
 * front.h -- the fast paths of malloc and free: per-thread caches.
 *
 * Each thread keeps, per chunk size up to PH_TC_MAX_CHUNK, a short LIFO
 * list of in-use chunks of its arena.  malloc pops, free pushes: no lock,
 * no atomic read-modify-write.  A miss or a full list tail-calls a named
 * slow path in tcache.c that swaps in the spare list or moves a whole
 * bundle (types.h) from or to the arena under its lock, or hands chunks of
 * another arena over through its lock-free remote stack.  The thread's
 * cache pointer starts at an empty sentinel (all lists empty, all limits
 * 0, a kind no granule has), so the fast paths need no "initialized?"
 * test.  Included by the allocator's files and by hooks/dispatch.c (the
 * enabled free).
 */
#ifndef PINHEAP_FRONT_H
#define PINHEAP_FRONT_H

#include "chunk.h"

/* Pops p, the head of b, a list of chunks of `size` bytes.  Every chunk of
 * such a list is in use and `size` bytes: a header that says otherwise was
 * overwritten while the chunk was free (the low 32 bits are compared: size
 * and flags, but for PINUSE).  Handed out, it stops waiting. */
PH_INLINE void *tc_bin_pop(tc_bin_t *b, void *p, size_t size)
{
  if (ph_unlikely(((uint32_t)chunk_head(mem_chunk(p)) & ~(uint32_t)PH_PINUSE) !=
                  (uint32_t)size + PH_CINUSE))
    front_malloc_corrupt(p);
  b->head = *(void **)p;
  b->count--;
  chunk_mem_unwait(p);
  return p;
}

PH_INLINE void *front_malloc(size_t n)
{
  if (ph_likely(n <= PH_TC_MAX_REQUEST)) {
    size_t i = (n + PH_CHUNK_OVERHEAD + PH_ALIGN_MASK) >> 4;
    i = i < 2 ? 2 : i;                                    /* 32-byte minimum chunk */
    size_t size = i << 4;                 /* the chunk size, and bin i's offset */
    tc_bin_t *b = (tc_bin_t *)((char *)tcache_tls->bins + size);
    void *p = b->head;
    if (ph_likely(p != NULL))
      return tc_bin_pop(b, p, size);
  }
  return front_malloc_slow(n);
}

/* Pushes mem, an in-use chunk just freed (validated by the caller), onto
 * bin b (room checked by the caller): it waits from now on. */
PH_INLINE void tc_bin_push(tc_bin_t *b, void *mem)
{
  chunk_mem_wait(mem);
  *(void **)mem = b->head;
  b->head = mem;
  b->count++;
}

/* Pushes mem onto this thread's cache if the kind map says it lies in a
 * segment of this thread's arena and its header is a small in-use chunk's
 * with the arena's check byte; false when it must take the slow path (any
 * other memory, NULL, misaligned, a header that is not one -- an interior
 * pointer --, a double free).  So a cache holds only valid chunks of its
 * own arena, and gives them back whole, without looking at each. */
PH_INLINE bool front_free_fast(void *mem)
{
  uintptr_t g = (uintptr_t)mem >> PH_GRANULE_SHIFT;
  tcache_t *tc = tcache_tls;
  if (ph_unlikely(g >= __atomic_load_n(&owner_kind_limit, __ATOMIC_RELAXED) ||
                  __atomic_load_n(&owner_kind[g], __ATOMIC_RELAXED) != tc->kind))
    return false;
  /* Misaligned, or at the very start of a granule (its header would lie in
   * the granule before, which may not be pinheap's): the slow path. */
  uintptr_t in_granule = (uintptr_t)mem & (PH_GRANULE - 1);
  if (ph_unlikely((in_granule & PH_ALIGN_MASK) != 0 || in_granule == 0))
    return false;
  const chunk_t *c = mem_chunk(mem);
  size_t head = chunk_head(c);
  if (ph_unlikely((head & PH_TC_HEAD_MASK) != PH_CINUSE))
    return false;
  if (ph_unlikely(!head_check_matches(tc->cookie, c, head)))
    return false;
  /* bin (head >> 4) & 0x7f: bins are 16 bytes, so the offset is head & 0x7f0 */
  tc_bin_t *b = (tc_bin_t *)((char *)tc->bins + (head & 0x7f0));
  if (ph_unlikely(chunk_mem_waiting(mem)))          /* a double free: the slow path names it */
    return false;
  if (ph_unlikely(b->count >= b->limit)) {
    front_free_full(tc, b, mem);
    return true;
  }
  tc_bin_push(b, mem);
  return true;
}

#endif /* PINHEAP_FRONT_H */
