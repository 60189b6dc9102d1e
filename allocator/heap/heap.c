/*
 * heap.c -- the heap core, written in the dlmalloc/ptmalloc lineage (see
 * types.h for the glossary): taking a chunk from the bins or the top,
 * freeing one (coalescing), realloc, memalign and calloc on one heap, and
 * the validation of every pointer handed in.  One lock per heap.  Every
 * call that gives memory back to the OS works out what to release while
 * locked and calls the OS layer after unlocking, so a release listener may
 * itself call malloc.  Main entry points: ms_malloc() and ms_free_owned().
 */
#include "allocator/heap/chunk.h"

#include <errno.h>
#include <string.h>

/* Takes a chunk of nb bytes (a chunk size) from the bins or the top,
 * growing the heap if needed.  Locked.  NULL when out of memory. */
PH_HOT chunk_t *ms_alloc_chunk(mstate_t *ms, size_t nb)
{
  unsigned i = bin_index(nb);
  chunk_t *b = bin_at(ms, i);
  chunk_t *c = NULL, *dv;

  if (atomic_load_explicit(&ms->remote, memory_order_relaxed) != NULL)
    ms_drain_remote(ms);

  if (!bin_live(ms, i)) {
    /* empty: a larger bin's, below */
  } else if (i < PH_NSMALL) {               /* exact fit */
    c = b->fd;
    if (!ms_carve_backed(ms, c, nb, nb))
      return NULL;
    bin_unlink(ms, c, nb);
    chunk_set_inuse(ms, c, nb);
    return c;
  } else {
    for (chunk_t *x = b->fd; x != b; x = x->fd) {   /* sorted: first fit is best */
      if (chunk_size(x) >= nb) {
        c = x;
        break;
      }
    }
  }
  if (c == NULL) {
    i = binmap_next(ms, i + 1);
    if (i < PH_NBINS)                       /* smallest chunk of a larger bin */
      c = bin_at(ms, i)->fd;
  }
  /* c is the best binned fit; the designated victim wins if it fits as
   * well or better. */
  dv = dv_get(ms);
  if (dv != NULL) {
    size_t ds = chunk_size(dv);
    if (ds >= nb && (c == NULL || ds <= chunk_size(c)))
      return ms_carve_backed(ms, dv, ds, nb) ? dv_take(ms, dv, ds, nb) : NULL;
  }
  if (c != NULL) {
    size_t cs = chunk_size(c);
    if (!ms_carve_backed(ms, c, cs, nb))
      return NULL;
    bin_unlink(ms, c, cs);
    return chunk_carve(ms, c, cs, nb);
  }
  for (;;) {
    c = ms->top;
    if (c != NULL) {
      size_t ts = chunk_size(c);
      if (ts >= nb + PH_MIN_CHUNK) {
        if (!ms_carve_backed(ms, c, ts, nb))
          return NULL;
        chunk_t *rest = chunk_at(c, nb);
        head_set(ms, rest, (ts - nb) | PH_PINUSE | top_rest_decommitted(ms, c));
        head_set(ms, c, nb | PH_CINUSE | PH_PINUSE);
        ms->top = rest;
        if (ts - nb < ms->trim_low)                /* decay: the top was reused */
          ms->trim_low = ts - nb;
        return c;
      }
    }
    /* Before the heap grows, the deferred chunks are coalesced: they may
     * make room (then start over with the bins). */
    if (ms->fast_bytes != 0 && ms_fast_consolidate(ms))
      return ms_alloc_chunk(ms, nb);
    if (!ms_grow(ms, nb))
      return NULL;
    /* the lock was dropped: a bin may fit now, but the top surely does */
  }
}

PH_HOT void *ms_malloc(mstate_t *ms, size_t n)
{
  size_t nb;
  chunk_t *c;

  if (ph_unlikely(n > PH_MAX_REQUEST)) {
    errno = ENOMEM;
    return NULL;
  }
  nb = request_to_size(n);
  if (ph_unlikely(nb >= mparams_get(mmap_threshold)) && ms->source->maps_huge &&
      atomic_load_explicit(&huge_total, memory_order_relaxed) < (size_t)mparams_get(mmap_max)) {
    void *p = huge_alloc(ms, nb, PH_ALIGN);
    if (p != NULL)
      return p;
  }
  ms_lock(ms);
  c = ms_alloc_chunk(ms, nb);
  ms_unlock(ms);
  if (ph_unlikely(c == NULL)) {
    mstate_t *fb = ms_fallback(ms);
    if (fb != NULL)
      return ms_malloc(fb, n);
    errno = ENOMEM;
    return NULL;
  }
  return chunk_mem(c);
}

/* Frees the in-use chunk c (validated) of seg: coalesces, bins or merges
 * into the top.  Locked.  A range to release after unlocking goes to *rel. */
PH_HOT void ms_free_chunk(mstate_t *ms, seg_t *seg, chunk_t *c, size_t size, release_t *rel,
                          const char *fn)
{
  chunk_t *next = chunk_at(c, size);

  if (!chunk_pinuse(c)) {
    size_t psize = c->prev_foot;
    chunk_t *prev = chunk_before(c, psize);
    if (psize < PH_MIN_CHUNK || (char *)prev < (char *)seg_first(seg) || !head_ok(ms, prev) ||
        chunk_size(prev) != psize || chunk_cinuse(prev))
      ph_fatal(fn, "corrupted chunk header", chunk_mem(c));
    bin_unlink(ms, prev, psize);
    chunk_head_store(c, PH_HEAD_MERGED);          /* no header now: a second free is named */
    c = prev;
    size += psize;
  }
  if (next == ms->top) {
    size += chunk_size(next);
    ms->top = c;
    head_set(ms, c, size | PH_PINUSE);
    if (size >= mparams_get(trim_threshold))
      ms_trim_decay(ms, rel);
    return;
  }
  if (!chunk_cinuse(next)) {
    size_t nsize = chunk_size(next);
    bin_unlink(ms, next, nsize);
    chunk_head_store(next, PH_HEAD_MERGED);
    size += nsize;
    /* The chunk after next already has PINUSE clear: only the footer moves. */
    head_set(ms, c, size | PH_PINUSE);
    chunk_at(c, size)->prev_foot = size;
  } else {
    chunk_set_free(ms, c, size);
  }
  /* A whole segment (not the top's, not the one holding the heap) free and
   * at least the trim threshold: give it back -- at once with a threshold
   * set by mallopt (glibc's way), else once it has stayed unused for
   * PH_TRIM_DECAY_MS (ms_idle_collect), so a program that frees and
   * allocates big blocks in turn does not map and fault them in each time. */
  if (c == seg_first(seg) && (char *)chunk_at(c, size) == seg_fence(seg) && seg != ms->top_seg &&
      ms->source->releases && !(seg->flags & PH_SEG_HOLDS_MS) &&
      seg->size >= mparams_get(trim_threshold) &&
      !mparams_get(mmap_threshold_set)) {
    bin_insert(ms, c, size);
    if (seg->idle_since == 0)
      ms->idle_segs++;
    seg->idle_since = now_ms();
    return;
  }
  if (c == seg_first(seg) && (char *)chunk_at(c, size) == seg_fence(seg) && seg != ms->top_seg &&
      ms->source->releases && !(seg->flags & PH_SEG_HOLDS_MS) &&
      seg->size >= mparams_get(trim_threshold)) {
    seg_t **pp = &ms->segs;
    while (*pp != seg)
      pp = &(*pp)->next;
    seg_take_out(ms, pp, rel);
    return;
  }
  bin_insert(ms, c, size);
}

/* Is c a chunk boundary of seg?  Walks from the segment start; used only to
 * name the error once a header failed its check. */
static bool seg_has_chunk(mstate_t *ms, seg_t *seg, const chunk_t *c)
{
  const char *fence = seg_fence(seg);
  for (chunk_t *x = seg_first(seg); (char *)x < fence; x = chunk_next(x)) {
    if (x == c)
      return true;
    if (!head_ok(ms, x) || chunk_size(x) < PH_MIN_CHUNK)
      return false;
  }
  return false;
}

/* Validates the in-use chunk behind mem in seg; ms is locked.  waiting:
 * the chunk comes from a deferred list (it must be waiting) rather than
 * from the program (where a waiting chunk means it was freed before). */
PH_HOT static chunk_t *chunk_check_inuse(mstate_t *ms, seg_t *seg, void *mem, const char *fn, bool waiting)
{
  chunk_t *c = mem_chunk(mem);

  if ((char *)c < (char *)seg_first(seg) || (char *)c >= seg_fence(seg))
    ph_fatal(fn, "invalid pointer", mem);
  if (!head_ok(ms, c)) {
    if (chunk_head(c) == PH_HEAD_MERGED)
      ph_fatal(fn, "double free", mem);
    ph_fatal(fn, seg_has_chunk(ms, seg, c) ? "corrupted chunk header" : "invalid pointer", mem);
  }
  if (!chunk_cinuse(c))
    ph_fatal(fn, "double free", mem);
  /* (a larger chunk waits only on its way back from another process of the
   * shared heap: foreign_hand_back) */
  if ((chunk_size(c) <= PH_FAST_MAX_CHUNK || ms->source->shared) &&
      chunk_mem_waiting(mem) != waiting)
    ph_fatal(fn, waiting ? "write after free" : "double free", mem);
  size_t size = chunk_size(c);
  chunk_t *next = chunk_at(c, size);
  if ((chunk_head(c) & PH_MMAPPED) || size < PH_MIN_CHUNK || (char *)next > seg_fence(seg) ||
      !head_ok(ms, next))
    ph_fatal(fn, "corrupted chunk header", mem);
  if (!chunk_pinuse(next))     /* a stale header inside a free chunk it merged into */
    ph_fatal(fn, "double free", mem);
  return c;
}

/* Finds who owns mem.  want: the heap it must belong to (NULL = any heap
 * in the owner map).  Returns the heap; *seg_p is the segment, or NULL for
 * a huge chunk.  Ends the process on a pointer pinheap did not return. */
static mstate_t *mem_owner(mstate_t *want, const void *mem, const char *fn, seg_t **seg_p)
{
  if (ph_unlikely(((uintptr_t)mem & PH_ALIGN_MASK) != 0))
    ph_fatal(fn, "invalid pointer", mem);
  if (want != NULL && !want->source->in_owner_map) {   /* its one segment is its range */
    seg_t *seg = want->segs;
    if ((const char *)mem < seg->base || (const char *)mem >= seg->base + seg->size)
      ph_fatal(fn, "invalid pointer", mem);
    *seg_p = seg;
    return want;
  }
  uintptr_t o = owner_map_get(mem);
  mstate_t *ms;
  if (ph_unlikely(o == 0))
    ph_fatal(fn, "invalid pointer", mem);
  if (o & PH_OWNER_HUGE_TAG) {
    ms = (mstate_t *)(o & ~PH_OWNER_HUGE_TAG);
    *seg_p = NULL;
  } else {
    *seg_p = owner_seg(o);
    ms = (*seg_p)->ms;
  }
  if (want != NULL && ms != want)
    ph_fatal(fn, "invalid pointer", mem);
  return ms;
}

/* A block of another process's heap in the shared region.  Its heap's
 * lock is never taken from here: a process killed while holding it would
 * hang the owner and every other process that frees there, and a misuse
 * caught under it would end this process holding it.  The chunk is checked
 * without the lock (its own header: an in-use chunk's is stable but for
 * PINUSE, which the checks ignore), so that a misuse ends this process
 * with nothing of the other's held.  @return the chunk. */
static PH_NOINLINE chunk_t *foreign_check(mstate_t *ms, seg_t *seg, void *mem, const char *fn)
{
  chunk_t *c = mem_chunk(mem);

  if ((char *)c < (char *)seg_first(seg) || (char *)c >= seg_fence(seg))
    ph_fatal(fn, "invalid pointer", mem);
  /* (its owner may have taken a block freed before into a larger free
   * chunk meanwhile: a header no longer there can be either misuse) */
  if (!head_ok(ms, c))
    ph_fatal(fn, chunk_head(c) == PH_HEAD_MERGED ? "double free" : "invalid pointer or double free",
             mem);
  if (!chunk_cinuse(c))
    ph_fatal(fn, "double free", mem);
  size_t size = chunk_size(c);
  if ((chunk_head(c) & PH_MMAPPED) || size < PH_MIN_CHUNK || (char *)chunk_at(c, size) > seg_fence(seg))
    ph_fatal(fn, "corrupted chunk header", mem);
  return c;
}

/* Is mem (of ms, in segment seg) a block of another process's heap in the
 * shared region? */
PH_INLINE bool mem_foreign(const mstate_t *ms, const seg_t *seg, const void *mem)
{
  return ph_unlikely(ms->source->shared) && seg != NULL && ms_source_ops(ms)->foreign(mem);
}

/* Hands the checked block mem of another process's heap (foreign_check)
 * back to it: marked waiting by one compare-and-swap, so that a second free
 * of it, from any process, finds the mark, then pushed on its heap's remote
 * stack, a bundle of one, which the owner drains under its own lock
 * (defer.c).  A process killed here leaves at most this block. */
static PH_NOINLINE void foreign_hand_back(mstate_t *ms, void *mem, const char *fn)
{
  uint64_t *mark = &((uint64_t *)mem)[1];
  uint64_t seen = __atomic_load_n(mark, __ATOMIC_RELAXED);
  if (seen == chunk_free_key ||
      !__atomic_compare_exchange_n(mark, &seen, chunk_free_key, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_RELAXED))
    ph_fatal(fn, "double free", mem);
  *(void **)mem = NULL;                   /* the bundle's only chunk */
  ms_remote_push(ms, mem, 1);
}

PH_HOT static void ms_free_resolved(mstate_t *ms, seg_t *seg, void *mem, const char *fn)
{
  release_t rel = { NULL, 0 }, idle[4];
  unsigned nidle = 0;

  if (mem_foreign(ms, seg, mem)) {
    foreign_check(ms, seg, mem, fn);
    foreign_hand_back(ms, mem, fn);
    return;
  }
  if (seg == NULL) {
    huge_free(ms, mem, fn);
    return;
  }
  ms_lock(ms);
  chunk_t *c = chunk_check_inuse(ms, seg, mem, fn, false);
  ms_free_chunk(ms, seg, c, chunk_size(c), &rel, fn);
  if (ms->idle_segs != 0)
    nidle = ms_idle_collect(ms, idle, 4, false);
  ms_unlock(ms);
  if (rel.len != 0)
    os_release(rel.addr, rel.len);
  for (unsigned i = 0; i < nidle; i++)
    os_release(idle[i].addr, idle[i].len);
}

void ms_free_mem(mstate_t *want, void *mem, const char *fn)
{
  seg_t *seg;

  if (mem == NULL)
    return;
  mstate_t *ms = mem_owner(want, mem, fn, &seg);
  ms_free_resolved(ms, seg, mem, fn);
}

PH_HOT void ms_free_owned(uintptr_t o, void *mem, const char *fn)
{
  if (ph_unlikely(((uintptr_t)mem & PH_ALIGN_MASK) != 0))
    ph_fatal(fn, "invalid pointer", mem);
  if (o & PH_OWNER_HUGE_TAG) {
    huge_free((mstate_t *)(o & ~PH_OWNER_TAGS), mem, fn);
  } else {
    seg_t *seg = owner_seg(o);
    ms_free_resolved(seg->ms, seg, mem, fn);
  }
}

/* Frees one waiting chunk of a deferred list, ms locked; a release drops
 * the lock briefly. */
void ms_free_locked(mstate_t *ms, void *mem, const char *fn)
{
  release_t rel = { NULL, 0 };
  uintptr_t o = owner_map_get(mem);
  seg_t *seg = owner_seg(o);

  if (seg == NULL || (o & PH_OWNER_HUGE_TAG) || seg->ms != ms)
    ph_fatal(fn, "invalid pointer", mem);
  chunk_t *c = chunk_check_inuse(ms, seg, mem, fn, true);
  chunk_mem_unwait(mem);                 /* it stops waiting: coalesced */
  ms_free_chunk(ms, seg, c, chunk_size(c), &rel, fn);
  if (rel.len != 0) {
    ms_unlock(ms);
    os_release(rel.addr, rel.len);
    ms_lock(ms);
  }
}

void *ms_realloc(mstate_t *want, void *mem, size_t n, const char *fn)
{
  seg_t *seg;
  release_t rel = { NULL, 0 };
  size_t nb, old_usable;
  void *fresh;

  if (mem == NULL)                       /* an mspace's (malloc.c takes its own NULL) */
    return ms_malloc(want, n);
  if (n == 0) {
    ms_free_mem(want, mem, fn);
    return NULL;
  }
  mstate_t *ms = mem_owner(want, mem, fn, &seg);
  if (n > PH_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  if (mem_foreign(ms, seg, mem)) {
    /* another process's block: copied into this process's heap, and
     * handed back to its owner (its lock is not taken here) */
    old_usable = chunk_size(foreign_check(ms, seg, mem, fn)) - PH_CHUNK_OVERHEAD;
    fresh = ms_malloc(heap_main_get(), n);   /* made: the region's block is here */
    if (fresh == NULL)
      return NULL;
    memcpy(fresh, mem, old_usable < n ? old_usable : n);
    foreign_hand_back(ms, mem, fn);
    return fresh;
  }
  nb = request_to_size(n);

  if (seg == NULL) {                        /* huge: resized with mremap */
    void *p = huge_realloc(ms, mem, nb, fn, &old_usable);
    if (p != NULL)
      return p;
  } else {
    ms_lock(ms);
    chunk_t *c = chunk_check_inuse(ms, seg, mem, fn, false);
    size_t size = chunk_size(c);
    size_t pin = chunk_head(c) & PH_PINUSE;      /* the previous chunk may be free */
    old_usable = size - PH_CHUNK_OVERHEAD;
    chunk_t *next = chunk_at(c, size);
    if (nb <= size) {                       /* shrink in place */
      if (size - nb >= PH_MIN_CHUNK) {
        chunk_t *rem = chunk_at(c, nb);
        head_set(ms, c, nb | PH_CINUSE | pin);
        head_set(ms, rem, (size - nb) | PH_CINUSE | PH_PINUSE);
        ms_free_chunk(ms, seg, rem, size - nb, &rel, fn);
      }
      ms_unlock(ms);
      if (rel.len != 0)
        os_release(rel.addr, rel.len);
      return mem;
    }
    if (next == ms->top && seg == ms->top_seg && nb < mparams_get(mmap_threshold) &&
        size + chunk_size(next) < nb + PH_MIN_CHUNK)
      ms_grow_in_place(ms, nb + PH_MIN_CHUNK - size);   /* from the reserve */
    if (next == ms->top && size + chunk_size(next) >= nb + PH_MIN_CHUNK &&
        nb < mparams_get(mmap_threshold) &&
        ms_carve_backed(ms, c, size + chunk_size(next), nb)) {     /* grow into the top */
      size_t tsize = size + chunk_size(next) - nb;
      size_t dec = top_rest_decommitted(ms, next);
      chunk_t *rest = chunk_at(c, nb);
      head_set(ms, c, nb | PH_CINUSE | pin);
      head_set(ms, rest, tsize | PH_PINUSE | dec);
      ms->top = rest;
      ms_unlock(ms);
      return mem;
    }
    if (next != ms->top && !chunk_cinuse(next) && size + chunk_size(next) >= nb &&
        ms_carve_backed(ms, c, size + chunk_size(next), nb)) {
      size_t nsize = chunk_size(next);       /* grow into the free neighbour */
      bin_unlink(ms, next, nsize);
      size += nsize;
      if (size - nb >= PH_MIN_CHUNK) {
        chunk_t *rem = chunk_at(c, nb);
        head_set(ms, c, nb | PH_CINUSE | pin);
        chunk_set_free(ms, rem, size - nb);
        bin_insert(ms, rem, size - nb);
      } else {
        head_set(ms, c, size | PH_CINUSE | pin);
        head_set_pinuse(ms, chunk_at(c, size), true);
      }
      ms_unlock(ms);
      return mem;
    }
    ms_unlock(ms);
  }
  /* Move. */
  fresh = ms_malloc(ms, n);
  if (fresh == NULL)
    return NULL;                            /* errno is ENOMEM; mem untouched */
  if (seg == NULL && old_usable < n)       /* huge to huge, not by mremap */
    huge_move_copy(fresh, mem, old_usable);
  else                                      /* a heap chunk, or a huge one into the heap */
    memcpy(fresh, mem, old_usable < n ? old_usable : n);
  ms_free_mem(ms, mem, fn);
  return fresh;
}

void *ms_memalign(mstate_t *ms, size_t align, size_t n)
{
  release_t rel = { NULL, 0 };
  size_t nb;

  if (align <= PH_ALIGN)
    return ms_malloc(ms, n);
  if ((align & (align - 1)) != 0) {         /* glibc rounds up to a power of two */
    if (align > ((size_t)1 << 62)) {
      errno = EINVAL;
      return NULL;
    }
    align = (size_t)1 << (64 - __builtin_clzll(align));
  }
  if (n > PH_MAX_REQUEST || align > PH_MAX_REQUEST - n) {
    errno = ENOMEM;
    return NULL;
  }
  nb = request_to_size(n);
  if (nb >= mparams_get(mmap_threshold) && ms->source->maps_huge &&
      atomic_load_explicit(&huge_total, memory_order_relaxed) < (size_t)mparams_get(mmap_max)) {
    void *p = huge_alloc(ms, nb, align);
    if (p != NULL)
      return p;
  }
  ms_lock(ms);
  chunk_t *c = ms_alloc_aligned_locked(ms, nb, align, &rel);
  ms_unlock(ms);
  if (rel.len != 0)
    os_release(rel.addr, rel.len);
  if (c == NULL) {
    mstate_t *fb = ms_fallback(ms);
    if (fb != NULL)
      return ms_memalign(fb, align, n);
    errno = ENOMEM;
    return NULL;
  }
  return chunk_mem(c);
}

#define ALIGNED_FIT_LOOK 32u   /* free chunks looked at for an aligned fit */

/* Where a free chunk x of size bytes holds nb bytes at an align boundary
 * (its lead before them 0 or a chunk of its own): the lead, or size if it
 * does not hold them. */
PH_INLINE size_t aligned_lead(const chunk_t *x, size_t size, size_t nb, size_t align)
{
  uintptr_t m = (uintptr_t)chunk_mem(x);
  uintptr_t am = align_up(m, align);
  if (am != m && am - m < PH_MIN_CHUNK)
    am += align;
  return am - m + nb <= size ? am - m : size;
}

/* A free chunk, binned or the designated victim, that holds nb bytes at an
 * align boundary, taken out and marked in use; NULL if none of the first
 * ALIGNED_FIT_LOOK looked at does.  Without it an aligned request always
 * took nb + align more bytes from the bins or the top, so memory freed
 * between chunks in use was never found again by a request that could fit
 * there once aligned (a slab page given back next to a free chunk). */
static chunk_t *ms_aligned_fit(mstate_t *ms, size_t nb, size_t align)
{
  chunk_t *dv = dv_get(ms);
  if (dv != NULL) {
    size_t ds = chunk_size(dv);
    size_t lead;
    if (ds >= nb && (lead = aligned_lead(dv, ds, nb, align)) < ds)
      /* whole: the caller cuts both ends */
      return ms_carve_backed(ms, dv, ds, lead + nb) ? dv_take(ms, dv, ds, ds) : NULL;
  }
  unsigned looked = 0;
  for (unsigned i = binmap_next(ms, bin_index(nb)); i < PH_NBINS; i = binmap_next(ms, i + 1)) {
    chunk_t *b = bin_at(ms, i);
    for (chunk_t *x = b->fd; x != b; x = x->fd) {
      if (++looked > ALIGNED_FIT_LOOK)
        return NULL;
      size_t size = chunk_size(x), lead;
      if (size >= nb && (lead = aligned_lead(x, size, nb, align)) < size) {
        if (!ms_carve_backed(ms, x, size, lead + nb))
          return NULL;
        bin_unlink(ms, x, size);
        chunk_set_inuse(ms, x, size);
        return x;
      }
    }
  }
  return NULL;
}

chunk_t *ms_alloc_aligned_locked(mstate_t *ms, size_t nb, size_t align, release_t *rel)
{
  chunk_t *c = ms_aligned_fit(ms, nb, align);
  if (c == NULL)
    c = ms_alloc_chunk(ms, nb + align + PH_MIN_CHUNK);
  if (c == NULL)
    return NULL;
  seg_t *seg = NULL;
  if (!ms->source->in_owner_map) {
    seg = ms->segs;
  } else {
    seg = owner_seg(owner_map_get(chunk_mem(c)));
  }
  size_t size = chunk_size(c);
  uintptr_t m = (uintptr_t)chunk_mem(c);
  if ((m & (align - 1)) != 0) {
    uintptr_t am = align_up(m, align);
    if (am - m < PH_MIN_CHUNK)
      am += align;
    chunk_t *ac = mem_chunk((void *)am);
    size_t lead = (uintptr_t)ac - (uintptr_t)c;
    head_set(ms, ac, (size - lead) | PH_CINUSE);          /* previous: the lead, freed next */
    head_set(ms, c, lead | PH_CINUSE | (chunk_head(c) & PH_PINUSE));
    ms_free_chunk(ms, seg, c, lead, rel, "memalign");
    c = ac;
    size -= lead;
  }
  if (size - nb >= PH_MIN_CHUNK) {
    chunk_t *rem = chunk_at(c, nb);
    head_set(ms, c, nb | PH_CINUSE | (chunk_head(c) & PH_PINUSE));
    head_set(ms, rem, (size - nb) | PH_CINUSE | PH_PINUSE);
    ms_free_chunk(ms, seg, rem, size - nb, rel, "memalign");
  }
  return c;
}

void *ms_calloc(mstate_t *ms, size_t n, size_t elem)
{
  size_t total;
  void *p;

  if (__builtin_mul_overflow(n, elem, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  p = ms_malloc(ms, total);
  if (p != NULL) {
    chunk_t *c = mem_chunk(p);
    /* fresh mappings are zero; heap chunks and recycled mappings are not */
    if (!(chunk_head(c) & PH_MMAPPED) || ((huge_t *)((char *)c - c->prev_foot))->recycled)
      memset(p, 0, total);
  }
  return p;
}

/* Usable bytes behind mem.  lenient: a pointer outside the owner map may be
 * a fixed-region heap's; its header is read as it is, as dlmalloc does. */
size_t mem_usable(const void *mem, const char *fn, bool lenient)
{
  const chunk_t *c;
  seg_t *seg;

  if (mem == NULL)
    return 0;
  c = mem_chunk(mem);
  if (lenient && owner_map_get(mem) == 0) {
    if (((uintptr_t)mem & PH_ALIGN_MASK) != 0 || !chunk_cinuse(c))
      return 0;
    return chunk_size(c) - PH_CHUNK_OVERHEAD;
  }
  mstate_t *ms = mem_owner(NULL, mem, fn, &seg);
  size_t usable;
  if (mem_foreign(ms, seg, mem))
    return chunk_size(foreign_check(ms, seg, (void *)mem, fn)) - PH_CHUNK_OVERHEAD;
  ms_lock(ms);
  if (seg == NULL) {
    huge_check(ms, mem_chunk(mem), fn);
    usable = chunk_size(c) - PH_CHUNK_HDR;
  } else {
    chunk_check_inuse(ms, seg, (void *)mem, fn, false);
    usable = chunk_size(c) - PH_CHUNK_OVERHEAD;
  }
  ms_unlock(ms);
  return usable;
}
