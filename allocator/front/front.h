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
 * 0, a kind no granule has, every slab page an empty sentinel), so the
 * fast paths need no "initialized?" test.
 *
 * Blocks of up to PH_SLAB_MAX bytes come from slab pages instead (slab.c):
 * malloc pops the free list of the thread's current page of the request's
 * size, free pushes on the list of the block's page when the kind map
 * says "slab" and the page is this thread's (full or not); anything else
 * is slab.c's slow path.  Included by the allocator's files and by hooks/dispatch.c (the
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

/* Pops b, the head of the free list of the slab page pg: the next link
 * must stay inside the page (a link overwritten while the block was free
 * is caught here).  Handed out, the block stops being free. */
PH_INLINE void *slab_pop(slab_page_t *pg, void *b)
{
  uintptr_t next = *(uintptr_t *)b ^ pg->secret;
  if (ph_unlikely(((next ^ (uintptr_t)pg) >> PH_GRANULE_SHIFT) != 0))
    return slab_corrupt(pg, b, "malloc");
  pg->free = (void *)next;
  pg->over++;
  ((uint64_t *)b)[1] = 0;
  return b;
}

PH_INLINE void *front_malloc(size_t n)
{
  tcache_t *tc = tcache_tls;
  if (ph_likely(n - 1 < tc->slab_max)) {          /* 1 .. PH_SLAB_MAX: a slab block */
    slab_page_t *pg = tc->slab_cur[(n - 1) >> 4];
    void *b = pg->free;
    if (ph_likely(b != (void *)pg))
      return slab_pop(pg, b);
    return slab_malloc_slow(n);
  }
  if (ph_likely(n <= PH_TC_MAX_REQUEST)) {
    size_t i = (n + PH_CHUNK_OVERHEAD + PH_ALIGN_MASK) >> 4;
    i = i < 2 ? 2 : i;                                    /* 32-byte minimum chunk */
    size_t size = i << 4;                 /* the chunk size, and bin i's offset */
    tc_bin_t *b = (tc_bin_t *)((char *)tc->bins + size);
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
  if (ph_unlikely(g >= __atomic_load_n(&owner_kind_limit, __ATOMIC_RELAXED)))
    return false;
  unsigned kind = __atomic_load_n(&owner_kind[g], __ATOMIC_RELAXED);
  if (ph_likely(kind == PH_KIND_SLAB)) {
    /* A slab page's block: pushed on the page's free list if this thread
     * owns the page; the block must be one (a multiple of the block size
     * from the first, below the last: one multiply, one compare) and not
     * free already.  When the count reaches its mark, the page goes empty
     * or, full, gets room again: slab.c files it. */
    slab_page_t *pg = slab_page_at(mem);
    if (ph_unlikely(__atomic_load_n(&pg->owner, __ATOMIC_RELAXED) != tc))
      return false;                                  /* another thread's: slow */
    uint64_t u = (uintptr_t)mem & (PH_GRANULE - 1);
    if (ph_unlikely(u * pg->mulc >= pg->lim))
      return false;                                  /* interior: the slow path names it */
    uint64_t key = chunk_free_key;
    if (ph_unlikely(((uint64_t *)mem)[1] == key))
      return false;                                  /* a double free: named there */
    *(uintptr_t *)mem = (uintptr_t)pg->free ^ pg->secret;
    __atomic_store_n(&((uint64_t *)mem)[1], key, __ATOMIC_RELAXED);   /* (not merged into a vector store) */
    pg->free = mem;
    if (ph_unlikely(--pg->over == 0))
      slab_page_idle(tc, pg);
    return true;
  }
  if (ph_unlikely(kind != tc->kind))
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
