/*
 * segment.c -- a heap's segments: laying one out, growing the heap (a new
 * segment, or in place into a segment's reserve), trimming the top with its
 * decay, and wholly free (idle) segments given back after the decay.  In
 * the shared heap, whose segments are slices of the region that stay their
 * process's, the same free space is given back in place instead (below:
 * "the shared heap").  Main entry point: ms_grow().
 */
#include "allocator/heap/chunk.h"

#include <time.h>

static void fence_write(mstate_t *ms, seg_t *seg)
{
  head_set(ms, (chunk_t *)seg_fence(seg), PH_CINUSE);   /* size 0, previous free */
}

/* Lays a segment out at base: header, optional room, one free chunk, fence.
 * The free chunk becomes the top. */
PH_HOT void seg_format(mstate_t *ms, char *base, size_t size, size_t chunk_off, size_t flags)
{
  seg_t *seg = (seg_t *)base;
  chunk_t *first = chunk_at(base, chunk_off);

  seg->base = base;
  seg->size = size;
  seg->chunk_off = chunk_off;
  seg->flags = flags;
  seg->spare = 0;
  seg->ms = ms;
  seg->next = ms->segs;
  ms->segs = seg;
  ms->footprint += size;
  first->prev_foot = 0;
  head_set(ms, first, (size - chunk_off - PH_FENCE_SIZE) | PH_PINUSE);
  fence_write(ms, seg);
  ((chunk_t *)seg_fence(seg))->prev_foot = chunk_size(first);
}

/* Address space mapped after a new segment of an arena and kept in reserve
 * (seg->spare): the segment grows into it in place, without a system call,
 * so that a block growing at the top stays where it is and the heap stays
 * one contiguous range, as glibc's heaps do.  Never touched until used, so
 * it costs no memory. */
PH_INLINE size_t seg_spare_for(const mstate_t *ms)
{
  return (ms->flags & PH_MS_USER) ? 0 : PH_SEG_SPARE;
}

/* Joins the add bytes after tseg's end (mapped, untouched) to the top.
 * Locked.  @return false if the owner map could not take them. */
PH_HOT static bool seg_extend(mstate_t *ms, seg_t *tseg, size_t add)
{
  char *end = tseg->base + tseg->size;

  if (os_open(end, add) != 0 || !owner_map_set(end, add, seg_owner_value(ms, tseg), ms->kind))
    return false;
  tseg->size += add;
  ms->footprint += add;
  size_t tsize = chunk_size(ms->top) + add;    /* the old fence and fresh pages */
  head_set(ms, ms->top, tsize | PH_PINUSE | (chunk_head(ms->top) & PH_DECOMMITTED));
  fence_write(ms, tseg);
  ((chunk_t *)seg_fence(tseg))->prev_foot = tsize;
  return true;
}

/* Grows the top of ms in place from its segment's reserve so that it holds
 * at least want bytes.  Locked; never drops the lock.  @return whether it
 * did. */
bool ms_grow_in_place(mstate_t *ms, size_t want)
{
  seg_t *tseg = ms->top_seg;

  if (tseg == NULL || tseg->spare == 0 || ms->top == NULL || !ms->source->grows)
    return false;
  size_t tsize = chunk_size(ms->top);
  if (want <= tsize)
    return true;
  size_t add = align_up(want - tsize, PH_GRANULE);
  if (add > tseg->spare || !seg_extend(ms, tseg, add))
    return false;
  tseg->spare -= add;
  return true;
}

/* Adds at least need bytes of top.  Called and returns locked; the lock is
 * dropped around the mmap (a misaligned mapping is trimmed, and trims call
 * the release listener). */
PH_HOT bool ms_grow(mstate_t *ms, size_t nb)
{
  size_t need, len, spare = seg_spare_for(ms);
  char *hint = NULL, *p;

  if (!ms->source->grows)
    return false;
  need = nb + PH_MIN_CHUNK + PH_FENCE_SIZE + sizeof(seg_t) + mparams_get(top_pad);
  if (need < nb)
    return false;
  /* Segments grow with the heap (an eighth of it), within bounds. */
  size_t grow = ms->footprint / 8;
  grow = grow > PH_MAX_SEGMENT_GROW ? PH_MAX_SEGMENT_GROW : grow;
  grow = grow < ms->seg_grow ? ms->seg_grow : grow;
  len = align_up(need > grow ? need : grow, PH_GRANULE);

  seg_t *tseg = ms->top_seg;
  if (tseg != NULL)
    hint = tseg->base + tseg->size + tseg->spare;

  if (ms->source->shared) {
    /* A slice of the shared region: its tmpfs blocks reserved, no reserve
     * of address space past it. */
    spare = 0;
    p = ms_source_ops(ms)->take(len);
    if (p == NULL)
      return false;
  } else {
    ms_unlock(ms);
    /* Before the process's first segment, the kind map (2 GiB of address
     * space, reserved by the first owner_map_set; an empty range reserves
     * just that): mapped after the segment, it would lie right under it,
     * and the arenas made later (top-down, under it) 2 GiB away, each in
     * pages of its own of the owner and kind maps. */
    if (__atomic_load_n(&owner_kind_limit, __ATOMIC_ACQUIRE) == 0)
      owner_map_set(NULL, 0, 1, PH_KIND_NONE);
    /* Resident pages a freed huge block left in the cache first (huge.c:
     * huge_cache_take_resident): not adjacent, so no reserve. */
    p = ms->source->maps_huge ? huge_cache_take_resident(len) : NULL;
    if (p != NULL)
      spare = 0;
    else
      p = os_map_reserved(hint, len, spare, PH_GRANULE);
    ms_lock(ms);
    if (p == NULL)
      return false;
  }

  tseg = ms->top_seg;
  if (tseg != NULL && p == tseg->base + tseg->size + tseg->spare &&
      ms->top != NULL) {  /* no top: malloc_trim has borrowed it; start a new segment */
    /* Adjacent: the old fence, the old reserve and the new range join the top. */
    if (!seg_extend(ms, tseg, tseg->spare + len))
      goto fail;
    tseg->spare = spare;
  } else {
    if (!owner_map_set(p, len, seg_owner_value(ms, (seg_t *)p), ms->kind))
      goto fail;
    chunk_t *old_top = ms->top;
    seg_format(ms, p, len, sizeof(seg_t), 0);
    ms->top_seg = (seg_t *)p;
    ms->top_seg->spare = spare;
    ms->top = seg_first(ms->top_seg);
    if (old_top != NULL) {         /* the old top becomes an ordinary free chunk */
      size_t osize = chunk_size(old_top);
      chunk_set_free(ms, old_top, osize);
      bin_insert(ms, old_top, osize);
    }
  }
  return true;

fail:
  if (ms->source->shared)                /* a slice is never given back: it stays taken */
    return false;
  ms_unlock(ms);
  os_release(p, len + spare);
  ms_lock(ms);
  return false;
}

/* ---- the shared heap: free pages given back in place --------------------- */
/*
 * A segment of the shared heap is a slice of the region, and a slice stays
 * its process's: nothing is unmapped and no segment leaves its heap.  Where
 * the private heap unmaps free space (the top's tail, an idle segment) or
 * decommits it (malloc_trim), the shared heap gives back the whole pages
 * inside the free chunk (os_release_shared: the listener, then the pages
 * leave the shared object; in a forked child, whose copy of the region is
 * private memory, os_decommit).  Meanwhile the chunk is borrowed -- marked
 * in use and out of its bin, or taken away as the top -- so that no thread
 * and no process allocates from it while the lock is dropped around the
 * release; then it is put back, known decommitted.  Only free chunks are
 * borrowed, and the page of a chunk's header stays: the pages of a live
 * block are never released.  While another process is attached, the
 * pages leave the object only once it has heard of them (shm.c: "releases
 * every process hears"): the chunk goes back marked decommitted all the
 * same, and ms_release_settle gives its pages back later if it is still
 * free and untouched then.
 */

/* The pages [lo, hi) of the borrowed chunk c go back: at once, or posted
 * for the other processes to hear first (the source's post; they go when
 * all have heard, ms_release_settle).  @return whether they are gone or on
 * their way (then the chunk goes back marked decommitted, and no trim posts
 * it again); not with the ring full. */
static bool shared_release(mstate_t *ms, chunk_t *c, uintptr_t lo, uintptr_t hi)
{
  const mem_source_ops_t *ops = ms_source_ops(ms);
  if (!ops->on()) {
    os_decommit((void *)lo, hi - lo);   /* a forked child: a private copy */
    return true;
  }
  switch (ops->post(ms, c, (void *)lo, hi - lo)) {
  case SOURCE_POST_NOW:
    ops->remove(ms, (void *)lo, hi - lo);
    return true;
  case SOURCE_POST_LATER:
    return true;
  default:
    return false;
  }
}

/* The whole pages of the chunk c past its header (PH_SHARED_KEEP) and keep
 * bytes more. */
static bool shared_pages(const chunk_t *c, size_t keep, uintptr_t *lo_p, uintptr_t *hi_p)
{
  size_t page = os_page_size();

  *lo_p = align_up((uintptr_t)c + PH_SHARED_KEEP + keep, page);
  *hi_p = align_down((uintptr_t)c + chunk_size(c), page);
  return *hi_p > *lo_p;
}

/* Borrows the free chunk c (out of any bin): in use until put back. */
static void shared_borrow(mstate_t *ms, chunk_t *c, chunk_t **list_p)
{
  chunk_set_inuse(ms, c, chunk_size(c));
  c->fd = *list_p;
  *list_p = c;
}

/* A borrowed chunk says so in its bk (unused while it is in use) until it
 * is put back: its own address | SHARED_BUSY, and | SHARED_GONE once its
 * pages are gone or on their way (it goes back marked decommitted). */
#define SHARED_BUSY ((uintptr_t)1)
#define SHARED_GONE ((uintptr_t)2)
PH_INLINE void shared_mark(chunk_t *c, bool gone)
{
  c->bk = (chunk_t *)((uintptr_t)c | SHARED_BUSY | (gone ? SHARED_GONE : 0));
}
PH_INLINE bool shared_busy(const chunk_t *c)
{
  return ((uintptr_t)c->bk & ~(SHARED_BUSY | SHARED_GONE)) == (uintptr_t)c &&
         ((uintptr_t)c->bk & SHARED_BUSY);
}
PH_INLINE size_t shared_marked(const chunk_t *c)
{
  return ((uintptr_t)c->bk & SHARED_GONE) ? PH_DECOMMITTED : 0;
}

/* Puts the borrowed chunks (a list through fd) and the borrowed top (NULL:
 * none; it was the top of tseg) back, marked decommitted as shared_mark
 * says.  Locked (a chunk that gained a free neighbour meanwhile is freed
 * again, which may drop the lock). */
static void shared_put_back(mstate_t *ms, chunk_t *list, chunk_t *top, seg_t *tseg)
{
  if (top != NULL) {
    size_t ts = chunk_size(top);
    if (ms->top == NULL && ms->top_seg == tseg && chunk_pinuse(top)) {
      /* untouched meanwhile: the top again */
      head_set(ms, top, ts | PH_PINUSE | shared_marked(top));
      top->bk = NULL;                   /* not borrowed any more */
      head_set_pinuse(ms, chunk_at(top, ts), false);
      ms->top = top;
      top = NULL;
    } else {
      top->fd = list;                   /* freed below, as the others */
      list = top;
    }
  }
  while (list != NULL) {
    chunk_t *c = list;
    size_t cs = chunk_size(c);
    chunk_t *next = chunk_at(c, cs);
    size_t mark = shared_marked(c);
    list = c->fd;
    c->bk = NULL;                       /* not borrowed any more */
    if (c != top && chunk_pinuse(c) && next != ms->top && chunk_cinuse(next)) {
      /* no free neighbour appeared: back in its bin */
      chunk_set_free(ms, c, cs);
      head_set(ms, c, cs | PH_PINUSE | mark);
      bin_insert(ms, c, cs);
      continue;
    }
    release_t rel = { NULL, 0 };        /* stays empty: nothing is unmapped here */
    ms_free_chunk(ms, owner_seg(owner_map_get(chunk_mem(c))), c, cs, &rel, "free");
  }
  /* The old top was freed as a chunk; nobody grew meanwhile: the free end
   * of its segment is the top again. */
  if (top != NULL && ms->top == NULL && ms->top_seg == tseg) {
    chunk_t *fence = (chunk_t *)seg_fence(tseg);
    size_t ls = fence->prev_foot;
    chunk_t *last = chunk_before(fence, ls);
    if (chunk_pinuse(fence))
      ph_fatal("free", "lost the top chunk of shared heap", ms);
    bin_unlink(ms, last, ls);
    head_set(ms, last, ls | PH_PINUSE);
    ms->top = last;
  }
}

/* Gives back the pages of the borrowed chunks (a list through fd) and of
 * the borrowed top (NULL: none; past tkeep bytes; it was the top of tseg),
 * then puts them back.  Called and returns locked; the lock is dropped
 * around the releases, and after, if the releases of other processes are
 * to be heard or this process's to be settled (the source's poll). */
static void shared_give_back(mstate_t *ms, chunk_t *list, chunk_t *top, seg_t *tseg, size_t tkeep)
{
  uintptr_t lo, hi;

  if (top != NULL)
    shared_mark(top, false);
  for (chunk_t *c = list; c != NULL; c = c->fd)
    shared_mark(c, false);
  ms_unlock(ms);
  if (top != NULL)
    shared_mark(top, !shared_pages(top, tkeep, &lo, &hi) || shared_release(ms, top, lo, hi));
  for (chunk_t *c = list; c != NULL; c = c->fd)
    shared_mark(c, !shared_pages(c, 0, &lo, &hi) || shared_release(ms, c, lo, hi));
  ms_lock(ms);
  shared_put_back(ms, list, top, tseg);
  if (ms_source_ops(ms)->due()) {
    ms_unlock(ms);
    ms_source_ops(ms)->poll();
    ms_lock(ms);
  }
}

/* Is c a chunk of ms: its top, or a chunk boundary of its segment (not a
 * stale header inside a chunk that grew over it, as realloc leaves)?
 * Walks the segment from its start.  Locked. */
static bool shared_is_chunk(mstate_t *ms, const chunk_t *c)
{
  if (c == ms->top)
    return true;
  uintptr_t o = owner_map_get(c);
  if (o == 0 || (o & PH_OWNER_TAGS) != 0 || owner_seg(o)->ms != ms)
    return false;
  seg_t *seg = owner_seg(o);
  for (chunk_t *x = seg_first(seg); (char *)x < seg_fence(seg) && x <= c; x = chunk_next(x)) {
    if (x == c)
      return true;
    if (!head_ok(ms, x) || chunk_size(x) < PH_MIN_CHUNK)
      return false;
  }
  return false;
}

/* The release [addr, addr+len) of ms's free chunk, posted to the ring by
 * this process, has been heard by every other process (shm.c).  If chunk is
 * still that free chunk -- a chunk of ms, free, marked decommitted (by this
 * entry: its token is still in it), covering the range: nothing of it was
 * allocated since -- its pages go now, listener first, as
 * shared_give_back gives them back.  Otherwise the entry is dropped (and a
 * top that kept the mark of a chunk it was carved from loses it, so that a
 * trim gives it back later).  Takes and drops ms's lock.  @return 1 if the
 * pages went, 0 if the entry is dropped, -1 if the chunk is borrowed by a
 * give-back under way (which posted the entry: ask again later). */
int ms_release_settle(mstate_t *ms, void *chunk, void *addr, size_t len, uint64_t token)
{
  chunk_t *c = chunk, *list = NULL, *top = NULL;
  uintptr_t lo = (uintptr_t)addr, hi = lo + len;
  seg_t *tseg = NULL;

  ms_lock(ms);
  bool ours = *source_token_at(c) == token && head_ok(ms, c) &&
              lo >= (uintptr_t)c + sizeof(chunk_t) && hi <= (uintptr_t)c + chunk_size(c) &&
              shared_is_chunk(ms, c);
  if (ours && chunk_cinuse(c) && shared_busy(c)) {
    ms_unlock(ms);
    return -1;
  }
  if (!ours || chunk_cinuse(c) || !(chunk_head(c) & PH_DECOMMITTED)) {
    chunk_t *t = ms->top;
    if (t != NULL && (chunk_head(t) & PH_DECOMMITTED) && (uintptr_t)t > (uintptr_t)c &&
        (uintptr_t)t < hi)
      head_set(ms, t, chunk_head(t) & (PH_SIZE_MASK | PH_FLAGS) & ~PH_DECOMMITTED);
    ms_unlock(ms);
    return 0;
  }
  if (c == ms->top) {
    chunk_set_inuse(ms, c, chunk_size(c));   /* the fence now follows an in-use chunk */
    ms->top = NULL;                         /* a grow meanwhile makes a new top */
    top = c;
    tseg = ms->top_seg;
  } else {
    bin_unlink(ms, c, chunk_size(c));
    shared_borrow(ms, c, &list);
  }
  shared_mark(c, true);
  ms_unlock(ms);
  ms_source_ops(ms)->remove(ms, addr, len);
  ms_lock(ms);
  shared_put_back(ms, list, top, tseg);
  ms_unlock(ms);
  return 1;
}

/* ms_trim_top in the shared heap: the top's pages past pad go back. */
static void shared_trim_top(mstate_t *ms, size_t pad)
{
  chunk_t *t = ms->top;
  size_t keep = align_up(PH_MIN_CHUNK + pad, PH_ALIGN);
  uintptr_t lo, hi;

  if (t == NULL || (chunk_head(t) & PH_DECOMMITTED) || !shared_pages(t, keep, &lo, &hi))
    return;
  chunk_set_inuse(ms, t, chunk_size(t));  /* the fence now follows an in-use chunk */
  ms->top = NULL;                         /* a grow meanwhile makes a new top */
  shared_give_back(ms, NULL, t, ms->top_seg, keep);
}

/* ms_idle_collect in the shared heap: the idle segments' pages go back
 * after the decay (all of them if force, with every free chunk's pages:
 * malloc_trim), the segments stay.  @return 0: nothing to unmap. */
static unsigned shared_idle_collect(mstate_t *ms, bool force)
{
  uint64_t now = now_ms();
  chunk_t *list = NULL;

  if (ms->idle_segs != 0 && (force || now - ms->idle_scan_at >= PH_TRIM_DECAY_MS / 2)) {
    ms->idle_scan_at = now;
    for (seg_t *seg = ms->segs; seg != NULL; seg = seg->next) {
      if (seg->idle_since == 0)
        continue;
      chunk_t *c = seg_first(seg);
      bool whole = seg != ms->top_seg && !chunk_cinuse(c) && (char *)chunk_next(c) == seg_fence(seg);
      if (whole && !force && now - seg->idle_since < PH_TRIM_DECAY_MS)
        continue;
      seg->idle_since = 0;                /* in use again, or given back now */
      ms->idle_segs--;
      if (whole && !(chunk_head(c) & PH_DECOMMITTED)) {
        bin_unlink(ms, c, chunk_size(c));
        shared_borrow(ms, c, &list);
      }
    }
  }
  if (force) {
    uintptr_t lo, hi;
    dv_flush(ms);
    for (unsigned i = bin_index(align_up(os_page_size() + PH_MIN_CHUNK, PH_ALIGN)); i < PH_NBINS; i++) {
      chunk_t *bin = bin_at(ms, i);
      if (!bin_live(ms, i))
        continue;
      for (chunk_t *c = bin->fd, *nx; c != bin; c = nx) {
        nx = c->fd;
        if (!(chunk_head(c) & PH_DECOMMITTED) && shared_pages(c, 0, &lo, &hi)) {
          bin_unlink(ms, c, chunk_size(c));
          shared_borrow(ms, c, &list);
        }
      }
    }
  }
  if (list != NULL) {
    shared_give_back(ms, list, NULL, NULL, 0);
  } else if (force && ms_source_ops(ms)->due()) {   /* malloc_trim hears the others' releases too */
    ms_unlock(ms);
    ms_source_ops(ms)->poll();
    ms_lock(ms);
  }
  return 0;
}

/* After a free merged into the top: give the top's tail back when it has
 * grown past the trim threshold.  Locked; fills *rel for after unlock. */
PH_HOT void ms_trim_top(mstate_t *ms, size_t pad, release_t *rel)
{
  seg_t *seg = ms->top_seg;
  size_t tsize = chunk_size(ms->top);
  size_t keep = PH_MIN_CHUNK + pad;
  size_t len;

  if (ms->source->shared) {
    shared_trim_top(ms, pad);
    return;
  }
  if (!ms->source->releases || seg == NULL || tsize <= keep)
    return;
  len = align_down(tsize - keep, PH_GRANULE);
  if (len == 0)
    return;
  char *end = seg->base + seg->size;
  owner_map_set(end - len, len, 0, PH_KIND_NONE);
  seg->size -= len;
  ms->footprint -= len;
  head_set(ms, ms->top, (tsize - len) | PH_PINUSE | (chunk_head(ms->top) & PH_DECOMMITTED));
  fence_write(ms, seg);
  ((chunk_t *)seg_fence(seg))->prev_foot = tsize - len;
  rel->addr = end - len;
  rel->len = len + seg->spare;               /* the reserve goes with the tail */
  seg->spare = 0;
}

uint64_t now_ms(void)
{
  return ph_clock_ns(CLOCK_MONOTONIC_COARSE) / 1000000u + 1u;
}

/* The top has grown past the trim threshold (a free merged into it).  With
 * a threshold set by mallopt, trim now; otherwise give back only what has
 * stayed unused for PH_TRIM_DECAY_MS: the part of the top below its lowest
 * point since it crossed the threshold. */
PH_HOT void ms_trim_decay(mstate_t *ms, release_t *rel)
{
  size_t tsize = chunk_size(ms->top);

  if (mparams_get(mmap_threshold_set)) {
    ms_trim_top(ms, mparams_get(top_pad), rel);
    return;
  }
  uint64_t now = now_ms();
  if (ms->trim_since == 0 || tsize < ms->trim_low) {
    if (ms->trim_since == 0)
      ms->trim_since = now;
    ms->trim_low = tsize < ms->trim_low || ms->trim_low == 0 ? tsize : ms->trim_low;
  }
  if (now - ms->trim_since < PH_TRIM_DECAY_MS)
    return;
  /* [top + (tsize - trim_low), end) was never reused: release it, keeping
   * the threshold's worth as a cushion. */
  size_t keep = tsize - ms->trim_low + mparams_get(trim_threshold) / 2;
  ms->trim_since = 0;
  ms->trim_low = 0;
  if (tsize > keep + PH_GRANULE)
    ms_trim_top(ms, keep, rel);
}

/* Takes the segment *pp (wholly free, its chunk out of any bin) out of the
 * heap; the caller releases *rel after unlocking. */
void seg_take_out(mstate_t *ms, seg_t **pp, release_t *rel)
{
  seg_t *seg = *pp;

  if (ms->source->shared) {             /* a slice stays: its pages go back in place */
    chunk_t *list = NULL;
    if (seg->idle_since != 0) {
      seg->idle_since = 0;
      ms->idle_segs--;
    }
    shared_borrow(ms, seg_first(seg), &list);
    shared_give_back(ms, list, NULL, NULL, 0);
    return;
  }
  *pp = seg->next;
  ms->footprint -= seg->size;
  owner_map_set(seg->base, seg->size, 0, PH_KIND_NONE);
  rel->addr = seg->base;
  rel->len = seg->size + seg->spare;
}

/* Takes wholly free segments that have stayed unused for the decay (all of
 * them if force) out of the heap, up to max, into out[].  Locked; the
 * caller releases them after unlocking.  @return how many. */
static unsigned idle_collect(mstate_t *ms, release_t *out, size_t *spare, unsigned max,
                             bool force)
{
  uint64_t now = now_ms();
  unsigned n = 0;

  if (ms->idle_segs == 0 || (!force && now - ms->idle_scan_at < PH_TRIM_DECAY_MS / 2))
    return 0;
  ms->idle_scan_at = now;
  for (seg_t **pp = &ms->segs; *pp != NULL && n < max;) {
    seg_t *seg = *pp;
    if (seg->idle_since != 0) {
      chunk_t *c = seg_first(seg);
      bool whole = seg != ms->top_seg && !chunk_cinuse(c) && (char *)chunk_next(c) == seg_fence(seg);
      if (!whole) {                         /* in use again */
        seg->idle_since = 0;
        ms->idle_segs--;
      } else if (force || now - seg->idle_since >= PH_TRIM_DECAY_MS) {
        bin_unlink(ms, c, chunk_size(c));
        ms->idle_segs--;
        if (spare != NULL)
          spare[n] = seg->spare;
        seg_take_out(ms, pp, &out[n++]);
        continue;
      }
    }
    pp = &seg->next;
  }
  return n;
}

unsigned ms_idle_collect(mstate_t *ms, release_t *out, unsigned max, bool force)
{
  if (ms->source->shared)
    return shared_idle_collect(ms, force);
  return idle_collect(ms, out, NULL, max, force);
}

/* What ms holds idle, taken out at once for the caller to use or release
 * (the relief, huge.c): up to max ranges in out[], the wholly free segments
 * and then the top's free tail past pad, each out[i].len writable bytes
 * (mapped, pages resident where they were touched) followed by spare[i]
 * bytes of inaccessible reserve.  Locked; not for the shared heap.
 * @return how many (max: there may be more). */
unsigned ms_take_idle(mstate_t *ms, size_t pad, release_t *out, size_t *spare, unsigned max)
{
  ms_drain_remote(ms);
  ms_fast_consolidate(ms);
  unsigned n = idle_collect(ms, out, spare, max, true);
  for (unsigned i = 0; i < n; i++)
    out[i].len -= spare[i];
  if (n < max && ms->top != NULL && ms->top_seg != NULL) {
    size_t sp = ms->top_seg->spare;
    release_t rel = { NULL, 0 };
    ms_trim_top(ms, pad, &rel);
    if (rel.len != 0) {
      spare[n] = sp;
      out[n].addr = rel.addr;
      out[n++].len = rel.len - sp;
    }
  }
  return n;
}

/* What ms holds idle goes back at once, not after the decay: blocks that
 * wait are taken in, its wholly free segments released (the lock dropped
 * around each batch, so that the listeners run unlocked), and its top's
 * free tail past pad left in *rel, which the caller releases after
 * unlocking.  Locked on entry and on return.  @return whether a segment
 * was released. */
bool ms_give_back_idle(mstate_t *ms, size_t pad, release_t *rel)
{
  bool released = false;

  ms_drain_remote(ms);
  ms_fast_consolidate(ms);
  for (;;) {
    release_t idle[8];
    unsigned n = ms_idle_collect(ms, idle, 8, true);
    if (n == 0)
      break;
    ms_unlock(ms);
    for (unsigned i = 0; i < n; i++)
      os_release(idle[i].addr, idle[i].len);
    released = true;
    ms_lock(ms);
  }
  if (ms->top != NULL)
    ms_trim_top(ms, pad, rel);
  return released;
}
