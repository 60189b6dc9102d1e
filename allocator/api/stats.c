/*
 * stats.c -- statistics and trimming: ms_trim and ms_info on one heap, and
 * the process-wide mallinfo2, malloc_stats, malloc_trim and malloc_check
 * over every arena.  Main entry point: ms_trim().
 */
#include "allocator/api/api.h"

#include <malloc.h>
#include <string.h>

#include "pinheap.h"

/* Gives back the top's tail and the whole pages inside free chunks.  The
 * free chunks (the top included) are borrowed -- marked in use, out of
 * their bins -- while their pages are decommitted with the lock dropped,
 * then freed again; a chunk that then ends the top segment becomes the top
 * once more.  @return 1 if anything was released. */
int ms_trim(mstate_t *ms, size_t pad)
{
  release_t rel = { NULL, 0 };
  chunk_t *borrowed = NULL, *top_borrowed = NULL;
  seg_t *top_seg = NULL;                    /* where the borrowed top lives */
  size_t page = os_page_size();
  size_t keep;
  if (pad > PH_MAX_REQUEST)                 /* keeps all anyway; no overflow below */
    pad = PH_MAX_REQUEST;
  keep = align_up(PH_MIN_CHUNK + pad, PH_ALIGN);
  int released = 0;

  if (!ms->source->releases)
    return 0;
  slab_trim(ms);                            /* empty slab pages become free chunks */
  if (huge_cache_decay(true))
    released = 1;
  ms_lock(ms);
  if (ms_give_back_idle(ms, pad, &rel))     /* idle segments whole, the top's tail */
    released = 1;
  /* The decommit pass below is the private heap's: in the shared heap's
   * region MADV_DONTNEED would leave the pages in the object (marked
   * decommitted, so never given back), and another process must hear a
   * release first -- its trim (segment.c, shared_idle_collect) did both. */
  if (ms->top != NULL && !ms->source->shared) {
    chunk_t *t = ms->top;
    size_t ts = chunk_size(t);
    if (!(chunk_head(t) & PH_DECOMMITTED) &&
        align_down((uintptr_t)t + ts, page) > align_up((uintptr_t)t + keep + sizeof(chunk_t), page)) {
      chunk_set_inuse(ms, t, ts);           /* the fence now follows an in-use chunk */
      ms->top = NULL;                       /* a grow meanwhile makes a new top */
      top_seg = ms->top_seg;
      t->fd = borrowed;
      borrowed = top_borrowed = t;
    }
  }
  dv_flush(ms);
  for (unsigned i = bin_index(align_up(os_page_size() + PH_MIN_CHUNK, PH_ALIGN));
       i < PH_NBINS && !ms->source->shared; i++) {
    chunk_t *bin = bin_at(ms, i);
    if (!bin_live(ms, i))
      continue;
    for (chunk_t *c = bin->fd, *nx; c != bin; c = nx) {
      size_t cs = chunk_size(c);
      nx = c->fd;
      if (!(chunk_head(c) & PH_DECOMMITTED) &&
          align_down((uintptr_t)c + cs, page) > align_up((uintptr_t)c + sizeof(chunk_t), page)) {
        bin_unlink(ms, c, cs);
        chunk_set_inuse(ms, c, cs);
        c->fd = borrowed;
        borrowed = c;
      }
    }
  }
  ms_unlock(ms);

  if (rel.len != 0) {
    os_release(rel.addr, rel.len);
    released = 1;
  }
  for (chunk_t *c = borrowed; c != NULL; c = c->fd) {
    uintptr_t lo = align_up((uintptr_t)c + (c == top_borrowed ? keep : 0) + sizeof(chunk_t), page);
    uintptr_t hi = align_down((uintptr_t)c + chunk_size(c), page);
    if (hi > lo) {
      os_decommit((void *)lo, hi - lo);
      released = 1;
    }
  }

  ms_lock(ms);
  while (borrowed != NULL) {
    chunk_t *c = borrowed;
    size_t cs = chunk_size(c);
    chunk_t *next = chunk_at(c, cs);
    release_t r2 = { NULL, 0 };
    borrowed = c->fd;
    if (c == top_borrowed && ms->top == NULL && ms->top_seg == top_seg && chunk_pinuse(c)) {
      /* untouched meanwhile: the top again, known decommitted */
      head_set(ms, c, cs | PH_PINUSE | PH_DECOMMITTED);
      head_set_pinuse(ms, next, false);
      ms->top = c;
      continue;
    }
    if (c != top_borrowed && chunk_pinuse(c) && next != ms->top && chunk_cinuse(next)) {
      /* no free neighbour appeared: back in its bin, known decommitted */
      chunk_set_free(ms, c, cs);
      head_set(ms, c, cs | PH_PINUSE | PH_DECOMMITTED);
      bin_insert(ms, c, cs);
      continue;
    }
    ms_free_chunk(ms, owner_seg(owner_map_get(chunk_mem(c))), c, cs, &r2, "malloc_trim");
    if (r2.len != 0) {
      ms_unlock(ms);
      os_release(r2.addr, r2.len);
      ms_lock(ms);
    }
  }
  /* Nobody grew meanwhile: the free end of the same segment is the top
   * again.  (Had someone grown, the freed chunk stays binned in its old
   * segment, as an old top does.) */
  if (top_borrowed != NULL && ms->top == NULL && ms->top_seg == top_seg) {
    chunk_t *fence = (chunk_t *)seg_fence(ms->top_seg);
    chunk_t *last = chunk_before(fence, fence->prev_foot);
    size_t ls = fence->prev_foot;
    if (chunk_pinuse(fence))
      ph_fatal("malloc_trim", "lost the top chunk of heap", ms);
    bin_unlink(ms, last, ls);
    head_set(ms, last, ls | PH_PINUSE);
    ms->top = last;
  }
  ms_unlock(ms);
  return released;
}

struct mallinfo2 ms_info(mstate_t *ms)
{
  struct mallinfo2 mi;
  size_t free_bytes = 0, free_count = 0, overhead = 0;

  memset(&mi, 0, sizeof(mi));
  ms_lock(ms);
  ms_drain_remote(ms);                      /* chunks freed by other threads, */
  ms_fast_consolidate(ms);                  /* and deferred ones, count as free */
  for (unsigned i = 0; i < PH_NBINS; i++) {
    chunk_t *b = bin_at(ms, i);
    for (chunk_t *c = b->fd; bin_live(ms, i) && c != b; c = c->fd) {
      free_bytes += chunk_size(c);
      free_count++;
    }
  }
  if (ms->top != NULL) {
    free_bytes += chunk_size(ms->top);
    free_count++;
    mi.keepcost = chunk_size(ms->top);
  }
  free_bytes += slab_info(ms);              /* the free blocks of slab pages */
  for (seg_t *s = ms->segs; s != NULL; s = s->next)
    overhead += s->chunk_off + PH_FENCE_SIZE;
  mi.arena = ms->footprint;
  mi.ordblks = free_count;
  mi.hblks = ms->huge_count;
  mi.hblkhd = ms->huge_bytes;
  mi.usmblks = 0;
  mi.fordblks = free_bytes;
  mi.uordblks = ms->footprint - free_bytes - overhead;
  ms_unlock(ms);
  return mi;
}

static void info_add(mstate_t *ms, void *arg)
{
  struct mallinfo2 *sum = arg, one = ms_info(ms);
  sum->arena += one.arena;
  sum->ordblks += one.ordblks;
  sum->hblks += one.hblks;
  sum->hblkhd += one.hblkhd;
  sum->uordblks += one.uordblks;
  sum->fordblks += one.fordblks;
  sum->keepcost += one.keepcost;
}

struct mallinfo2 mallinfo2(void)
{
  struct mallinfo2 sum;
  memset(&sum, 0, sizeof(sum));
  heap_default();
  tcache_flush_mine("mallinfo2");
  arena_for_each(info_add, &sum);
  return sum;
}

static void stats_line(const char *label, size_t v)
{
  char num[24];
  ph_write_str(2, label);
  ph_write_str(2, ph_fmt_dec(num, v));
  ph_write_str(2, "\n");
}

static void stats_arena(mstate_t *ms, void *arg)
{
  unsigned *n = arg;
  char num[24];
  struct mallinfo2 mi = ms_info(ms);
  ph_write_str(2, "Arena ");
  ph_write_str(2, ph_fmt_dec(num, (*n)++));
  ph_write_str(2, ":\n");
  stats_line("system bytes     = ", mi.arena);
  stats_line("in use bytes     = ", mi.uordblks);
  stats_line("free bytes       = ", mi.fordblks);
  stats_line("free chunks      = ", mi.ordblks);
}

void malloc_stats(void)
{
  struct mallinfo2 mi = mallinfo2();
  os_stats_t os;
  unsigned n = 0;

  arena_for_each(stats_arena, &n);
  os_stats_get(&os);
  ph_write_str(2, "Total (incl. mmap):\n");
  stats_line("system bytes     = ", mi.arena + mi.hblkhd);
  stats_line("in use bytes     = ", mi.uordblks + mi.hblkhd);
  stats_line("mmap regions     = ", mi.hblks);
  stats_line("mmap bytes       = ", mi.hblkhd);
  stats_line("os mapped bytes  = ", os.mapped);
  stats_line("os peak mapped   = ", os.peak_mapped);
  stats_line("os released bytes= ", os.released_bytes);
}

static void trim_one(mstate_t *ms, void *arg)
{
  const size_t *pad_and_result = arg;
  if (ms_trim(ms, pad_and_result[0]))
    ((size_t *)arg)[1] = 1;
}

int malloc_trim(size_t pad)
{
  size_t arg[2] = { pad, 0 };

  heap_default();
  tcache_flush_mine("malloc_trim");
  arena_for_each(trim_one, arg);
  return (int)arg[1];
}

int malloc_check(void)
{
  int problems = 0;
  heap_default();
  tcache_flush_mine("malloc_check");
  arena_for_each(mstate_check_add, &problems);
  return problems + tcache_check_mine();
}
