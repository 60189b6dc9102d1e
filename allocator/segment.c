/*
 * segment.c -- a heap's segments: laying one out, growing the heap (a new
 * segment, or in place into a segment's reserve), trimming the top with its
 * decay, and wholly free (idle) segments given back after the decay.
 * Main entry point: ms_grow().
 */
#include "chunk.h"

#include <time.h>

static void fence_write(mstate_t *ms, seg_t *seg)
{
  head_set(ms, (chunk_t *)seg_fence(seg), PH_CINUSE);   /* size 0, previous free */
}

/* Lays a segment out at base: header, optional room, one free chunk, fence.
 * The free chunk becomes the top. */
void seg_format(mstate_t *ms, char *base, size_t size, size_t chunk_off, size_t flags)
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
static bool seg_extend(mstate_t *ms, seg_t *tseg, size_t add)
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
bool ms_grow(mstate_t *ms, size_t nb)
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
    /* A slice of the shared region: lock-free, no system call, no reserve. */
    spare = 0;
    p = shm_slice_take(len);
    if (p == NULL)
      return false;
  } else {
    ms_unlock(ms);
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

/* After a free merged into the top: give the top's tail back when it has
 * grown past the trim threshold.  Locked; fills *rel for after unlock. */
void ms_trim_top(mstate_t *ms, size_t pad, release_t *rel)
{
  seg_t *seg = ms->top_seg;
  size_t tsize = chunk_size(ms->top);
  size_t keep = PH_MIN_CHUNK + pad;
  size_t len;

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
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + 1u;
}

/* The top has grown past the trim threshold (a free merged into it).  With
 * a threshold set by mallopt, trim now; otherwise give back only what has
 * stayed unused for PH_TRIM_DECAY_MS: the part of the top below its lowest
 * point since it crossed the threshold. */
void ms_trim_decay(mstate_t *ms, release_t *rel)
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
  *pp = seg->next;
  ms->footprint -= seg->size;
  owner_map_set(seg->base, seg->size, 0, PH_KIND_NONE);
  rel->addr = seg->base;
  rel->len = seg->size + seg->spare;
}

/* Takes wholly free segments that have stayed unused for the decay (all of
 * them if force) out of the heap, up to max, into out[].  Locked; the
 * caller releases them after unlocking.  @return how many. */
unsigned ms_idle_collect(mstate_t *ms, release_t *out, unsigned max, bool force)
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
        seg_take_out(ms, pp, &out[n++]);
        continue;
      }
    }
    pp = &seg->next;
  }
  return n;
}
