/*
 * check.c -- the heap checker: validates every invariant of one heap.
 * Main entry point: mstate_check(), called (locked) by mspace_check() and
 * malloc_check(), and after every public call when PINHEAP_DEBUG >= 2
 * (heap_debug_check()).
 *
 * It reads the heap only through its own structures and reports each
 * problem on one line of stderr without allocating, so it can run on a
 * damaged heap and say what is wrong instead of crashing on it.
 */
#include "allocator/api/api.h"

static int check_report(const char *what, const void *where)
{
  ph_log_plain(PH_LOG_ERROR, "heap check: %s at %p", what, where);
  return 1;
}

#define CHECK(cond, what, where) \
  do {                                        \
    if (!(cond))                              \
      problems += check_report(what, where);  \
  } while (0)

static const seg_t *seg_of(const mstate_t *ms, const void *p)
{
  for (const seg_t *s = ms->segs; s != NULL; s = s->next)
    if ((const char *)p >= s->base && (const char *)p < s->base + s->size)
      return s;
  return NULL;
}

/* Walks one segment; counts its free chunks other than the top. */
static int check_segment(mstate_t *ms, const seg_t *seg, size_t *free_chunks_p)
{
  int problems = 0;
  const char *fence = seg->base + seg->size - PH_FENCE_SIZE;
  const chunk_t *c = chunk_at(seg->base, seg->chunk_off);
  bool prev_inuse = true, prev_free = false;

  CHECK(seg->ms == ms, "segment of another heap", seg);
  CHECK(seg->base == (const char *)seg, "segment header not at its base", seg);
  if (ms->source->in_owner_map) {
    CHECK(((uintptr_t)seg->base & (PH_GRANULE - 1)) == 0, "segment not granule aligned", seg);
    CHECK((seg->size & (PH_GRANULE - 1)) == 0, "segment size not whole granules", seg);
    uintptr_t want = (uintptr_t)seg | ((ms->flags & PH_MS_USER) ? PH_OWNER_USER_TAG : 0);
    for (size_t off = 0; off < seg->size; off += PH_GRANULE)
      CHECK(owner_map_get(seg->base + off) == want, "owner map does not name the segment",
            seg->base + off);
  }
  CHECK(((uintptr_t)c & PH_ALIGN_MASK) == 0, "first chunk misaligned", c);
  while ((const char *)c < fence) {
    size_t size = chunk_size(c);
    if (!head_ok(ms, c)) {
      problems += check_report("chunk header fails its check byte", c);
      return problems;
    }
    if (size < PH_MIN_CHUNK || (size & PH_ALIGN_MASK) != 0 || (const char *)c + size > fence) {
      problems += check_report("chunk size out of range", c);
      return problems;
    }
    CHECK(chunk_pinuse(c) == prev_inuse, "PINUSE disagrees with the previous chunk", c);
    CHECK(!(chunk_head(c) & PH_MMAPPED), "heap chunk flagged as mapped", c);
    if (!chunk_cinuse(c)) {
      CHECK(!prev_free, "two adjacent free chunks", c);
      if (c == ms->top) {
        CHECK((const char *)c + size == fence, "top chunk does not end at the fence", c);
      } else {
        CHECK(chunk_next(c)->prev_foot == size, "free chunk footer wrong", c);
        (*free_chunks_p)++;
      }
    }
    prev_inuse = chunk_cinuse(c);
    prev_free = !prev_inuse;
    c = chunk_next(c);
  }
  CHECK((const char *)c == fence, "chunks overrun the fence", c);
  if ((const char *)c == fence) {
    CHECK(head_ok(ms, c) && chunk_size(c) == 0 && chunk_cinuse(c), "fence damaged", c);
    CHECK(chunk_pinuse(c) == prev_inuse, "fence PINUSE disagrees with the last chunk", c);
  }
  return problems;
}

/* The two levels of the bin map agree with each other (bins.c,
 * binmap_next): a bit per non-zero word, none past the last word or the
 * last bin. */
static int check_binmap_words(mstate_t *ms)
{
  int problems = 0;

  for (unsigned w = 0; w < 64; w++) {
    bool want = w < PH_BINMAP_WORDS && ms->binmap[w] != 0;
    CHECK(((ms->binmap_words >> w) & 1) == want, "bin map summary disagrees with the bin map",
          &ms->binmap_words);
  }
  for (unsigned i = PH_NBINS; i < PH_BINMAP_WORDS * 64; i++)
    CHECK(!((ms->binmap[i >> 6] >> (i & 63)) & 1), "bin map marks a bin past the last", ms->binmap);
  return problems;
}

static int check_bins(mstate_t *ms, size_t *binned_p)
{
  int problems = 0;

  problems += check_binmap_words(ms);
  for (unsigned i = 0; i < PH_NBINS; i++) {
    chunk_t *b = bin_at(ms, i);
    bool marked = (ms->binmap[i >> 6] >> (i & 63)) & 1;
    size_t last = 0, count = 0;
    /* The designated victim's bin is outside the bin map and holds any
     * size, but one chunk at most. */
    bool dv = i == PH_DV_BIN;
    if (!dv && !marked)
      continue;                             /* empty; its header may be unset */
    CHECK(dv || b->fd != b, "bin map marks an empty bin", &ms->bins[i]);
    for (chunk_t *c = b->fd; c != b; c = c->fd) {
      if (c->fd->bk != c || c->bk->fd != c) {
        problems += check_report("broken bin links", c);
        break;
      }
      if (seg_of(ms, c) == NULL) {
        problems += check_report("binned chunk outside every segment", c);
        break;
      }
      size_t size = chunk_size(c);
      CHECK(head_ok(ms, c), "binned chunk header fails its check byte", c);
      CHECK(!chunk_cinuse(c), "binned chunk is in use", c);
      CHECK(c != ms->top, "top chunk in a bin", c);
      CHECK(dv || bin_index(size) == i, "chunk in the wrong bin", c);
      CHECK(size >= last, "large bin not sorted", c);
      count++;
      CHECK(!dv || count == 1, "more than one designated victim", c);
      last = size;
      (*binned_p)++;
    }
  }
  return problems;
}

static int check_huge(mstate_t *ms)
{
  int problems = 0;
  size_t count = 0, bytes = 0;

  for (huge_t *h = ms->huge; h != NULL; h = h->next) {
    const chunk_t *c;
    count++;
    bytes += h->map_size;
    CHECK(h->ms == ms, "huge chunk of another heap", h);
    CHECK(h->next == NULL || h->next->prev == h, "broken huge list", h);
    CHECK(((uintptr_t)h & (PH_GRANULE - 1)) == 0, "huge mapping not granule aligned", h);
    for (size_t off = 0; off < h->map_size; off += PH_GRANULE)
      CHECK(owner_map_get((char *)h + off) == ((uintptr_t)ms | PH_OWNER_HUGE_TAG),
            "owner map does not name the huge chunk", (char *)h + off);
    c = chunk_at(h, h->chunk_off);
    CHECK(head_ok(ms, c) && (chunk_head(c) & PH_MMAPPED) && chunk_cinuse(c) &&
          c->prev_foot + chunk_size(c) == h->map_size,
          "huge chunk header damaged", c);
  }
  CHECK(count == ms->huge_count, "huge chunk count wrong", ms);
  CHECK(bytes == ms->huge_bytes, "huge byte count wrong", ms);
  return problems;
}

int mstate_check(mstate_t *ms)
{
  int problems = 0;
  size_t free_walked = 0, binned = 0, footprint = 0;
  bool top_found = ms->top == NULL;

  for (const seg_t *s = ms->segs; s != NULL; s = s->next) {
    footprint += s->size;
    problems += check_segment(ms, s, &free_walked);
    if (ms->top != NULL && seg_of(ms, ms->top) == s) {
      top_found = true;
      CHECK(s == ms->top_seg, "top chunk outside the top segment", ms->top);
    }
  }
  CHECK(top_found, "top chunk outside every segment", ms->top);
  if (ms->top != NULL) {
    CHECK(!chunk_cinuse(ms->top) && chunk_pinuse(ms->top), "top chunk flags wrong", ms->top);
    CHECK(chunk_size(ms->top) >= PH_MIN_CHUNK, "top chunk too small", ms->top);
  }
  CHECK(footprint == ms->footprint, "footprint disagrees with the segments", ms);
  size_t fast = 0;
  for (unsigned i = 0; i < PH_FAST_NBINS; i++) {
    for (void *bundle = ms->fast[i]; bundle != NULL;) {
      unsigned len = bundle_len(bundle), n = 0;
      void *m;
      for (m = bundle; m != NULL && n <= len; m = *(void **)m, n++) {
        const chunk_t *c = mem_chunk(m);
        if (seg_of(ms, c) == NULL) {
          problems += check_report("deferred chunk outside every segment", c);
          return problems;
        }
        CHECK(chunk_is_waiting(ms, c, (size_t)i << 4),
              "deferred chunk damaged, not waiting, or in the wrong list", c);
        fast += chunk_size(c);
      }
      CHECK(n == len && len != 0, "deferred bundle length wrong", bundle);
      bundle = bundle_next(bundle);
    }
  }
  CHECK(fast == ms->fast_bytes, "deferred byte count wrong", ms);
  problems += check_bins(ms, &binned);
  CHECK(binned == free_walked, "free chunks missing from the bins", ms);
  problems += check_huge(ms);
  problems += slab_check_arena(ms);
  return problems;
}

void mstate_check_add(mstate_t *ms, void *arg)
{
  ms_lock(ms);
  *(int *)arg += mstate_check(ms);
  ms_unlock(ms);
}

void heap_debug_check(mstate_t *ms, const char *fn)
{
  int problems = 0;

  if (ms != NULL) {
    mstate_check_add(ms, &problems);
  } else {
    arena_for_each(mstate_check_add, &problems);
    problems += tcache_check_mine();
  }
  if (problems != 0)
    ph_fatal(fn, "the heap checker (PINHEAP_DEBUG=2) found the problems above after this call on heap",
             ms != NULL ? (void *)ms : (void *)heap_default());
}
