/*
 * chunk.h -- the inline arithmetic shared by the allocator's files: chunk
 * headers and check bytes, sizes, bins and the bin map, the designated
 * victim, segments, bundles, the owner and kind maps, and locks.  Anything
 * here is inline because a hot path uses it; everything else is a
 * hidden function with its prototype in its layer's header (heap.h and below).
 */
#ifndef PINHEAP_CHUNK_H
#define PINHEAP_CHUNK_H

#include "allocator/heap/heap.h"

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

PH_INLINE bool chunk_mem_waiting(const void *mem)
{
  return ((const uint64_t *)mem)[1] == chunk_free_key;
}
PH_INLINE void chunk_mem_wait(void *mem) { ((uint64_t *)mem)[1] = chunk_free_key; }
PH_INLINE void chunk_mem_unwait(void *mem) { ((uint64_t *)mem)[1] = 0; }
/* ---- inline chunk arithmetic -------------------------------------------- */
/* A header is written by its heap's lock holder only, and read also without
 * the lock (the fast paths, the owner of an in-use chunk whose PINUSE the
 * lock holder changes): every access is whole, relaxed. */
PH_INLINE size_t chunk_head(const chunk_t *c) { return __atomic_load_n(&c->head, __ATOMIC_RELAXED); }
PH_INLINE void chunk_head_store(chunk_t *c, size_t head) { __atomic_store_n(&c->head, head, __ATOMIC_RELAXED); }

PH_INLINE size_t chunk_size(const chunk_t *c) { return chunk_head(c) & PH_SIZE_MASK; }
/* What the rest of the top keeps of its PH_DECOMMITTED flag when a block
 * is carved from its start: the flag, in a private heap (its pages are
 * still gone); nothing in the shared heap, where the flag also stands for
 * a release posted to the other processes and not yet settled (segment.c),
 * which must never pass to a chunk at another address (settling checks
 * the flag, and a rest that kept it could be settled for the old post). */
PH_INLINE size_t top_rest_decommitted(const mstate_t *ms, const chunk_t *top)
{
  return ms->source->shared ? 0 : chunk_head(top) & PH_DECOMMITTED;
}
PH_INLINE bool chunk_cinuse(const chunk_t *c) { return (chunk_head(c) & PH_CINUSE) != 0; }
PH_INLINE bool chunk_pinuse(const chunk_t *c) { return (chunk_head(c) & PH_PINUSE) != 0; }
PH_INLINE chunk_t *chunk_at(const void *p, size_t off) { return (chunk_t *)((char *)p + off); }
/* The chunk size bytes before c (pointer arithmetic stays in range). */
PH_INLINE chunk_t *chunk_before(const chunk_t *c, size_t size) { return (chunk_t *)((char *)c - size); }
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
  chunk_head_store(c, sizeflags | head_check(ms, c, sizeflags));
}
PH_INLINE bool head_ok(const mstate_t *ms, const chunk_t *c)
{
  size_t h = chunk_head(c), sf = h & ~PH_CHECK_MASK;
  return (h & PH_CHECK_MASK) == head_check(ms, c, sf) &&
         (sf & ~(PH_SIZE_MASK | PH_FLAGS)) == 0;
}
PH_INLINE void head_set_pinuse(const mstate_t *ms, chunk_t *c, bool on)
{
  size_t sf = (chunk_head(c) & (PH_SIZE_MASK | PH_FLAGS) & ~PH_PINUSE) | (on ? PH_PINUSE : 0);
  head_set(ms, c, sf);
}

/* Chunk size for a request of n bytes (n <= PH_MAX_REQUEST). */
PH_INLINE size_t request_to_size(size_t n)
{
  size_t s = (n + PH_CHUNK_OVERHEAD + PH_ALIGN_MASK) & ~(size_t)PH_ALIGN_MASK;
  return s < PH_MIN_CHUNK ? PH_MIN_CHUNK : s;
}



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
 * designated victim instead (bins.c). */
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
/* mparams is read without a lock everywhere and written by mallopt and by
 * the dynamic threshold: each field is read and written whole, relaxed. */
/* An mspace's heap lives in its first segment, after the segment header;
 * its first chunk follows (state.c: ms_create; mspace.c). */
#define PH_MS_OFF align_up(sizeof(seg_t), PH_ALIGN)
#define PH_MS_CHUNK_OFF (align_up(PH_MS_OFF + sizeof(mstate_t) + PH_CHUNK_HDR, PH_ALIGN) - PH_CHUNK_HDR)

/* The default heap, or NULL before the first allocation made it. */
PH_INLINE mstate_t *heap_main_get(void) { return __atomic_load_n(&heap_main, __ATOMIC_ACQUIRE); }

#define mparams_get(field) __atomic_load_n(&mparams.field, __ATOMIC_RELAXED)
#define mparams_set(field, v) __atomic_store_n(&mparams.field, (v), __ATOMIC_RELAXED)
#if PINHEAP_DEBUG >= 2
#define PH_DEBUG_CHECK(ms, fn) heap_debug_check((ms), (fn))
#else
#define PH_DEBUG_CHECK(ms, fn) ((void)0)
#endif

/* Is c a sound in-use heap chunk of exactly size bytes of ms (its check
 * byte, in use, not mapped) that waits (chunk_mem_waiting) -- what every
 * chunk of a thread cache list, a bundle or a deferred list must be? */
PH_INLINE bool chunk_is_waiting(const mstate_t *ms, const chunk_t *c, size_t size)
{
  return head_ok(ms, c) &&
         (chunk_head(c) & (PH_SIZE_MASK | PH_CINUSE | PH_MMAPPED)) == (size | PH_CINUSE) &&
         chunk_mem_waiting(chunk_mem(c));
}

/* The owner map entry of a segment of ms. */
PH_INLINE uintptr_t seg_owner_value(const mstate_t *ms, const seg_t *seg)
{
  return (uintptr_t)seg | ((ms->flags & PH_MS_USER) ? PH_OWNER_USER_TAG : 0);
}

PH_INLINE char *seg_fence(const seg_t *seg) { return seg->base + seg->size - PH_FENCE_SIZE; }
PH_INLINE chunk_t *seg_first(const seg_t *seg) { return chunk_at(seg->base, seg->chunk_off); }

/* Two levels: binmap has a bit per non-empty bin, binmap_words a bit per
 * non-zero word of binmap, so the search for the next non-empty bin costs
 * the same however many empty bins it skips. */
PH_INLINE void binmap_mark(mstate_t *ms, unsigned i)
{
  ms->binmap[i >> 6] |= (uint64_t)1 << (i & 63);
  ms->binmap_words |= (uint64_t)1 << (i >> 6);
}

PH_INLINE void binmap_clear(mstate_t *ms, unsigned i)
{
  ms->binmap[i >> 6] &= ~((uint64_t)1 << (i & 63));
  if (ms->binmap[i >> 6] == 0)
    ms->binmap_words &= ~((uint64_t)1 << (i >> 6));
}

/* Ends the process if the binned chunk c's neighbours do not point back. */
PH_INLINE void bin_links_check(const chunk_t *c)
{
  if (ph_unlikely(c->fd->bk != c || c->bk->fd != c))
    ph_fatal("free", "corrupted free list at chunk", c);
}

/* Takes c out of its bin -- the designated victim's included (its bin has
 * no bit in the bin map). */
PH_INLINE void bin_unlink(mstate_t *ms, chunk_t *c, size_t size)
{
  chunk_t *fd = c->fd, *bk = c->bk;

  bin_links_check(c);
  fd->bk = bk;
  bk->fd = fd;
  if (fd == bk) {                /* only the bin header is left */
    unsigned i = bin_index(size);
    if (fd == bin_at(ms, i))
      binmap_clear(ms, i);
  }
}

/* The designated victim (dlmalloc's "dv"): what is left of the chunk that
 * served the last split.  Requests carved from it one after the other (a
 * thread cache refilling) would otherwise move the rest from bin to bin
 * each time.  It waits alone in bin PH_DV_BIN, outside the bin map, and
 * ms_alloc_chunk weighs it against the best binned fit, so the chunk chosen
 * is the same as if it were binned.  Anything that walks the bins or
 * unlinks a free chunk treats it like any binned chunk. */
PH_INLINE chunk_t *dv_get(mstate_t *ms)
{
  chunk_t *b = bin_at(ms, PH_DV_BIN);
  return b->fd != b ? b->fd : NULL;
}

/* Marks c (size bytes, previous in use) in use and sets the next chunk's
 * PINUSE. */
PH_INLINE void chunk_set_inuse(mstate_t *ms, chunk_t *c, size_t size)
{
  head_set(ms, c, size | PH_CINUSE | PH_PINUSE);
  head_set_pinuse(ms, chunk_at(c, size), true);
}

/* Marks c (size bytes, previous in use) free: head, footer, next's PINUSE. */
PH_INLINE void chunk_set_free(mstate_t *ms, chunk_t *c, size_t size)
{
  chunk_t *next = chunk_at(c, size);
  head_set(ms, c, size | PH_PINUSE);
  next->prev_foot = size;
  head_set_pinuse(ms, next, false);
}

/* Carves nb bytes, in use, from the front of the free chunk c (csize >=
 * nb), already out of its bin; the rest, if it makes a chunk, becomes the
 * designated victim.  The chunk after c keeps its head: the chunk before
 * it stays free. */
PH_INLINE chunk_t *chunk_carve(mstate_t *ms, chunk_t *c, size_t csize, size_t nb)
{
  if (csize - nb < PH_MIN_CHUNK) {
    chunk_set_inuse(ms, c, csize);
    return c;
  }
  chunk_t *rem = chunk_at(c, nb);
  head_set(ms, c, nb | PH_CINUSE | PH_PINUSE);
  head_set(ms, rem, (csize - nb) | PH_PINUSE);
  chunk_at(rem, csize - nb)->prev_foot = csize - nb;
  dv_replace(ms, rem);
  return c;
}

/* The bytes at the start of a free chunk of the shared heap that stay
 * reserved when its pages are given back (segment.c: shared_pages): its
 * header and a release's token (source_token_at). */
#define PH_SHARED_KEEP (sizeof(chunk_t) + sizeof(uint64_t))

/* Before nb bytes are carved from the start of the chunk c (csize bytes,
 * free), their pages -- and those of the rest's header -- are reserved
 * in the tmpfs again where a give-back of the shared heap removed them
 * (shm.c: "tmpfs blocks: reserved, not hoped for"; the source's back).
 * Nothing to do, one load, in a heap with no page given back: every
 * private heap.  Locked.  @return false (nothing changed) when the tmpfs
 * has no room. */
PH_INLINE bool ms_carve_backed(mstate_t *ms, const chunk_t *c, size_t csize, size_t nb)
{
  if (ph_likely(__atomic_load_n(&ms->unbacked, __ATOMIC_RELAXED) == 0))
    return true;
  return ms_source_ops(ms)->back(ms, c, nb + PH_SHARED_KEEP < csize ? nb + PH_SHARED_KEEP : csize);
}

/* Where a request the shared heap ms could not serve goes: the private
 * heap of the fallback once the region (or the tmpfs behind it) is full
 * and the fallback is on (shm.c); NULL otherwise (a cold path). */
PH_INLINE mstate_t *ms_fallback(const mstate_t *ms)
{
  if (!ms->source->shared || !ms_source_ops(ms)->fallback_active())
    return NULL;
  return ms_source_ops(ms)->fallback_heap();
}

PH_INLINE uintptr_t *bundle_word(void *mem) { return &((uintptr_t *)mem)[2]; }
PH_INLINE unsigned bundle_len(void *mem) { return (unsigned)(*bundle_word(mem) >> PH_BUNDLE_SHIFT); }
PH_INLINE void *bundle_next(void *mem) { return (void *)(*bundle_word(mem) & PH_BUNDLE_LINK_MASK); }

#endif /* PINHEAP_CHUNK_H */
