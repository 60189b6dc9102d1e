/*
 * slab.c -- slab pages: the malloc family's blocks of up to PH_SLAB_MAX
 * bytes, headerless, carved from 64 KiB pages of one size class each, with
 * a free list per page and no coalescing.  This file owns the size
 * classes, a page's layout, its arena's side (the cache of empty pages,
 * a page given back as a chunk) and malloc's side: refilling a page from
 * its remote stack or by carving, and taking the next page.  Main entry
 * point: slab_malloc_slow().  The free side -- frees off the fast path,
 * realloc, thread exit, flush, trim, fork, statistics and checks -- is
 * slab_free.c's; what the two share is in slab.h.  The fast paths are
 * inline in front.h.  The design, for both files:
 *
 * A page is one granule, taken from the thread's arena as an in-use chunk
 * of PH_GRANULE bytes whose payload starts the granule; its kind map byte
 * says PH_KIND_SLAB, so free's first load tells a slab block from a chunk
 * (the owner map entry stays the segment's).  The blocks start the
 * granule and the page header (types.h: slab_page_t) follows them, a cache
 * line higher per granule in a cycle of 8 (front.h: slab_page_at).
 * Pages exist for the private heap's arenas only: mspaces and the shared
 * heap keep the chunk path.
 *
 * A page belongs to one thread (its owner, a thread cache).  Per class,
 * the thread has a current page, which malloc pops from, a list of pages
 * with room ("avail") and a list of full ones (oldest first).  The owner
 * frees onto a page's local list on the fast path, full page or not.
 * Other threads gather their frees into it by class (up to
 * SLAB_REMOTE_BATCH blocks of one page) and push each batch onto the
 * page's lock-free remote stack, whose word carries its count; the owner
 * takes that stack in whole when its local list runs dry, as the list,
 * without walking it (slab_collect_stack), and looks at its oldest full
 * pages for one with free blocks before it takes a new page.
 *
 * A page's count of blocks in use (page_used: handed out, or on the remote
 * stack, plus one while the page is current) is kept as `over` a `mark`,
 * and the fast free path calls slab_page_idle() when `over` reaches 0.
 * The mark is 0 but for a full page, where it is the count at which the
 * page has room enough (SLAB_ROOM_SHIFT, _MIN) to go back to "avail": so frees
 * into a full page cost nothing more, and malloc takes it back with more
 * than one block.  Only a page that is not current can reach 0 blocks in
 * use on a free: it then goes back to the arena -- into a small cache of
 * empty pages (PH_SLAB_CACHE), else as a free chunk.
 * The pages of an exiting thread become its arena's orphans, adopted by
 * the next thread that needs a page of that class.  An orphan's remote
 * stack holds only a tag (SLAB_ORPHAN_TAG): a thread that frees into it
 * sees the tag instead of pushing, and puts its blocks on the page's list
 * under the arena's lock, which guards orphans; the orphan that frees
 * empty goes to the arena's cache, the next page of any class (it stayed
 * an orphan of its class, empty, until malloc_trim: larson's pages piled
 * up).  The cache goes back in malloc_trim.  A page's owner changes only under its arena's lock.
 *
 * Misuse is named as on the chunk path: a pointer that is not a block of
 * its page (not a multiple of the block size from the first, or past the
 * last) is an "invalid pointer"; a free block holds chunk_free_key in its second word,
 * so freeing it again is a "double free"; free list links are stored
 * xor the page's secret and must stay inside the page ("corrupted free
 * list").
 */
#include "allocator/front/slab.h"
#include "allocator/base/startup.h"     /* PH_STARTUP: once per process, thread or arena */

#include <errno.h>
#include <string.h>

slab_page_t slab_none = { .free = &slab_none };

/* The size classes (types.h): 16-byte steps to 128, then four per doubling. */
const uint16_t slab_class_size[PH_SLAB_NCLASS] = {
  16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024,
};
/* By (n - 1) >> 4: the smallest class that holds n bytes. */
const uint8_t slab_class_of[PH_SLAB_MAX >> 4] = {
  0, 1, 2, 3, 4, 5, 6, 7,                                 /*   16 ..  128 */
  8, 8, 9, 9, 10, 10, 11, 11,                             /*  144 ..  256 */
  12, 12, 12, 12, 13, 13, 13, 13,                         /*  272 ..  384 */
  14, 14, 14, 14, 15, 15, 15, 15,                         /*  400 ..  512 */
  16, 16, 16, 16, 16, 16, 16, 16,                         /*  528 ..  640 */
  17, 17, 17, 17, 17, 17, 17, 17,                         /*  656 ..  768 */
  18, 18, 18, 18, 18, 18, 18, 18,                         /*  784 ..  896 */
  19, 19, 19, 19, 19, 19, 19, 19,                         /*  912 .. 1024 */
};

/* ---- small helpers (slab.h) ------------------------------------------------ */

void *slab_corrupt(slab_page_t *pg, void *b, const char *fn)
{
  (void)pg;
  ph_fatal(fn, "corrupted free list at block", b);
}

/* ---- the owner's lists (slab.h), the full list's append ---------------------- */

/* pg, with no free block, goes to the back of the full list; its mark is
 * set so that the free that gives it room enough calls slab_page_idle(). */
PH_HOT static void full_append(tcache_t *tc, slab_page_t *pg)
{
  unsigned c = pg->cls;
  uint32_t used = page_used(pg), room = page_capacity(pg) >> SLAB_ROOM_SHIFT;
  room = (room > SLAB_ROOM_MIN ? room : SLAB_ROOM_MIN) + 1;
  pg->mark = used > room ? used - room : 0;
  pg->over = used - pg->mark;
  pg->next = NULL;
  pg->prev = tc->slab_full_tail[c];
  if (pg->prev != NULL)
    pg->prev->next = pg;
  else
    tc->slab_full[c] = pg;
  tc->slab_full_tail[c] = pg;
  pg->state = SLAB_FULL;
}

/* ---- the arena's side: lay out, cache, give back ---------------------------- */

PH_HOT static void slab_format(slab_page_t *pg, mstate_t *ms, unsigned cls, tcache_t *tc)
{
  uint32_t bsize = slab_class_size[cls];
  uint32_t n = page_area(pg) / bsize;

  pg->secret = (((uintptr_t)pg ^ ms->cookie ^ chunk_free_key) * PH_CHECK_MUL) ^ chunk_free_key;
  pg->free = pg;
  pg->over = pg->mark = 0;
  pg->span = n * bsize;
  /* floor(2^64 / bsize) + 1 = (2^64 + e) / bsize with 0 < e <= bsize: u *
   * mulc (mod 2^64) is i * e for the i-th block's offset u, and at least
   * mulc (> 2^53) for any offset inside a block */
  pg->mulc = UINT64_MAX / bsize + 1 + ((bsize & (bsize - 1)) == 0);
  pg->lim = (uint64_t)n * (pg->mulc * bsize);
  page_set_owner(pg, tc);
  __atomic_store_n(&pg->remote, NULL, __ATOMIC_RELAXED);
  pg->bsize = bsize;
  pg->cls = (uint16_t)cls;
  pg->state = 0;
  pg->bump = page_first(pg) + pg->span;  /* nothing carved: slab_carve goes down */
  pg->next = pg->prev = NULL;
  pg->ms = ms;
  pg->magic = pg->secret ^ (uintptr_t)pg;
  ms->slab_sparse[cls] = PH_SLAB_SPARSE;   /* the class has had a page: pages from now on */
}

static void all_unlink(mstate_t *ms, slab_page_t *pg)
{
  if (pg->all_prev != NULL)
    pg->all_prev->all_next = pg->all_next;
  else
    ms->slab_all = pg->all_next;
  if (pg->all_next != NULL)
    pg->all_next->all_prev = pg->all_prev;
}

/* pg has no block in use: every carved block is on its free list and
 * holds the free key in its second word.  A chunk carved there later (the
 * page given back), or a block of another class (the page formatted
 * anew), could have its second word on one and be taken for a freed one
 * ("double free"): every key goes.  The carved blocks are swept in address
 * order, not along the list: the list's order is the order of the frees,
 * scattered over the page, and following it is one dependent cache miss
 * per block (in the live workload, a third of the whole run's last-level
 * misses, each waited for); a sweep is a stream the prefetcher runs ahead
 * of.  Each block's link is checked
 * on the way, as the walk did: it must lead into the page. */
PH_HOT static void page_keys_clear(slab_page_t *pg, const char *fn)
{
  uint32_t bsize = pg->bsize;
  uintptr_t secret = pg->secret;
  for (char *b = pg->bump, *end = page_first(pg) + pg->span; b < end; b += bsize) {
    uintptr_t next = *(uintptr_t *)b ^ secret;
    if (ph_unlikely(((next ^ (uintptr_t)pg) >> PH_GRANULE_SHIFT) != 0))
      slab_corrupt(pg, b, fn);
    ((uint64_t *)b)[1] = 0;
  }
}

/* pg (no block in use, in no list but the arena's) becomes a free chunk of
 * ms again.  Locked; a range to release after unlocking: *rel.  fn: the
 * call that gives it back, named if pg is found damaged. */
void slab_page_release_locked(mstate_t *ms, slab_page_t *pg, release_t *rel, const char *fn)
{
  char *base = page_first(pg);
  uintptr_t o = owner_map_get(base);
  seg_t *seg = owner_seg(o);
  chunk_t *c = mem_chunk(base);

  if (o == 0 || (o & PH_OWNER_TAGS) || seg->ms != ms || !head_ok(ms, c) || !chunk_cinuse(c) ||
      chunk_size(c) < PH_GRANULE)
    ph_fatal(fn, "corrupted chunk header", base);
  page_keys_clear(pg, fn);
  all_unlink(ms, pg);
  owner_map_set(base, PH_GRANULE, o, ms->kind);
  ms_free_chunk(ms, seg, c, chunk_size(c), rel, fn);
}

/* Releases what a give-back left to release, the lock dropped. */
void slab_release(release_t *rel, release_t *idle, unsigned nidle)
{
  if (rel->len != 0)
    os_release(rel->addr, rel->len);
  for (unsigned i = 0; i < nidle; i++)
    os_release(idle[i].addr, idle[i].len);
}

/* pg has no block in use and is in none of its owner's lists: into the
 * arena's cache.  A cache over PH_SLAB_CACHE gives one page back as a free
 * chunk -- unless !may_release: an exiting thread's pages wait in the cache
 * (a release would run the release listeners on a thread that is going
 * away, and whatever they allocate there would be lost). */
PH_HOT unsigned slab_cache_put_locked(mstate_t *ms, slab_page_t *pg, bool may_release,
                                      release_t *rel, release_t idle[4], const char *fn)
{
  page_set_owner(pg, NULL);
  pg->state = SLAB_CACHED;
  pg->next = ms->slab_cache;
  ms->slab_cache = pg;
  ms->slab_cached++;
  if (!may_release || ms->slab_cached <= PH_SLAB_CACHE)
    return 0;
  pg = ms->slab_cache;
  ms->slab_cache = pg->next;
  ms->slab_cached--;
  slab_page_release_locked(ms, pg, rel, fn);
  return ms->idle_segs != 0 ? ms_idle_collect(ms, idle, 4, false) : 0;
}

PH_HOT static void slab_page_give_to(slab_page_t *pg, bool may_release, const char *fn)
{
  mstate_t *ms = pg->ms;
  release_t rel = { NULL, 0 }, idle[4];

  ms_lock(ms);
  unsigned nidle = slab_cache_put_locked(ms, pg, may_release, &rel, idle, fn);
  ms_unlock(ms);
  slab_release(&rel, idle, nidle);
}

PH_HOT void slab_page_give(slab_page_t *pg, const char *fn) { slab_page_give_to(pg, true, fn); }

/* ---- the owner's side: refill ------------------------------------------------ */

/* The last block of pg's local list (not empty), if the list is at most
 * `most` blocks long; else NULL.  Each link is checked on the way. */
static void *slab_list_last(slab_page_t *pg, uint32_t most, const char *fn)
{
  void *b = pg->free;
  for (uint32_t k = 1;; k++) {
    uintptr_t next = *(uintptr_t *)b ^ pg->secret;
    if (ph_unlikely(((next ^ (uintptr_t)pg) >> PH_GRANULE_SHIFT) != 0))
      slab_corrupt(pg, b, fn);
    if (next == (uintptr_t)pg)
      return b;
    if (k >= most)
      return NULL;
    b = (void *)next;
  }
}

/* Takes v, a remote stack's word taken from pg, into its local list.  The
 * owner's (or the arena lock holder's, for a page without owner).  The
 * stack is not walked: its blocks were written last by the threads that
 * freed them, on other cores, and a walk here is one cache miss after the
 * other (a quarter of larson's time at 2 threads).  It becomes the list
 * when the list is empty, or goes after the list's last block when the
 * list is short (its blocks are this thread's: in its cache); malloc
 * reads each link as it hands the block out, the block's caller writes
 * the block next anyway, and the links are checked there as every list's
 * are (slab_pop).  Otherwise the stack is walked onto the list, each link
 * checked -- and so is a stack with a block pushed alone by a thread
 * without a cache (SLAB_STACK_WALK): such a thread only frees, often in
 * the order the blocks were handed out, and the walk (its misses one after
 * the other, but on neighbours the prefetcher runs ahead of) hands them
 * out again in that order; taken whole, they came out backwards, a miss
 * in each malloc (prodcons: 1.6 times slower).  @return how many. */
PH_HOT uint32_t slab_collect_stack(slab_page_t *pg, void *v, const char *fn)
{
  uint32_t n = remote_count(v), cap = page_capacity(pg);
  if (n == 0)
    return 0;                            /* empty (or the orphan tag) */
  void *r = remote_top(pg, v);
  if (ph_likely(n <= page_used(pg) && !((uintptr_t)v & SLAB_STACK_WALK))) {
    if (pg->free == (void *)pg) {
      pg->free = r;
    } else {
      void *last = slab_list_last(pg, 8 * n + 8, fn);
      if (last == NULL)
        goto walk;
      *(uintptr_t *)last = link_enc(pg, r);
    }
    page_used_set(pg, page_used(pg) - n);
    return n;
  }
walk:
  n = 0;
  while (r != (void *)pg) {
    uintptr_t next = *(uintptr_t *)r ^ pg->secret;
    if (ph_unlikely(((next ^ (uintptr_t)pg) >> PH_GRANULE_SHIFT) != 0 || n >= cap))
      slab_corrupt(pg, r, fn);
    *(uintptr_t *)r = link_enc(pg, pg->free);
    pg->free = r;
    n++;
    r = (void *)next;
  }
  page_used_set(pg, page_used(pg) - n);
  return n;
}

/* Takes the remote stack of pg into its local list.  The owner's.
 * @return how many. */
uint32_t slab_collect(slab_page_t *pg, const char *fn)
{
  return slab_collect_stack(pg, __atomic_exchange_n(&pg->remote, NULL, __ATOMIC_ACQUIRE), fn);
}

/* Puts fresh blocks of pg on its (empty) list: those that start in the
 * SLAB_CARVE bytes (a page) that hold the last block not carved yet, at
 * least one.  Blocks are carved from the end of the page's area down: the
 * first ones share the page of the page header, which malloc and free
 * touch anyway, so that a size class a thread uses a little costs one
 * page, not two (the first blocks at the granule's start, the header at
 * its end).  In a small program, one page per size class it uses and
 * thread; in the fixed workload at 1 thread, 3 of the 44 pages of its
 * arenas.  Each carve touches one new page, as the carves of 4096 bytes
 * up from the start did; the blocks of one carve go on the list in
 * address order. */
static bool slab_carve(slab_page_t *pg)
{
  uint32_t bsize = pg->bsize;
  char *first = page_first(pg), *stop = pg->bump;
  if (stop <= first)
    return false;
  size_t below = (size_t)(stop - first) / bsize;          /* blocks not carved */
  size_t from = align_down((size_t)(stop - first) - 1, SLAB_CARVE);
  size_t low = (from + bsize - 1) / bsize;                /* the first block starting there */
  if (low >= below)
    low = below - 1;
  char *start = first + low * bsize;
  void *next = pg->free;
  for (char *b = stop - bsize; b >= start; b -= bsize) {
    *(uintptr_t *)b = link_enc(pg, next);
    ((uint64_t *)b)[1] = chunk_free_key;
    next = b;
  }
  pg->free = next;
  pg->bump = start;
  return true;
}

/* Does pg have a free block on its list after taking its remote frees or
 * carving? */
PH_HOT static bool slab_refill(slab_page_t *pg)
{
  if (pg->free != (void *)pg)
    return true;
  if (__atomic_load_n(&pg->remote, __ATOMIC_RELAXED) != NULL && slab_collect(pg, "malloc") != 0)
    return true;
  return slab_carve(pg);
}

/* A page given back as a free chunk, taken again where it lies: the
 * first chunk of the bin that holds a granule, if it is one granule whose
 * payload starts a granule (a page's chunk, freed between chunks in use).
 * Locked; NULL if there is none.  ms_alloc_aligned_locked asks for twice a
 * granule, which such a chunk never is: without this, every page given
 * back stayed resident, unused by the slab path, and the next page came
 * from fresh memory (churn at 2 threads: peak RSS grew with the run's
 * length, 8.8 MiB at scale 0.2 to 14.5 at scale 2).  Taking larger chunks
 * that start a granule too raised frag's peak RSS at 2 threads by 1.2 MiB. */
PH_STARTUP static chunk_t *slab_chunk_reuse(mstate_t *ms, release_t *rel)
{
  unsigned i = binmap_next(ms, bin_index(PH_GRANULE));
  if (i >= PH_NBINS)
    return NULL;
  chunk_t *x = bin_at(ms, i)->fd;
  if (chunk_size(x) != PH_GRANULE || ((uintptr_t)chunk_mem(x) & (PH_GRANULE - 1)) != 0)
    return NULL;
  chunk_t *ch = ms_alloc_chunk(ms, PH_GRANULE);   /* x, or an as good designated victim */
  if (ch != NULL && ((uintptr_t)chunk_mem(ch) & (PH_GRANULE - 1)) != 0) {
    uintptr_t o = owner_map_get(chunk_mem(ch));
    ms_free_chunk(ms, owner_seg(o), ch, chunk_size(ch), rel, "malloc");
    ch = NULL;
  }
  return ch;
}

/* A new page from the top, when no free chunk can hold one (no chunk of a
 * granule or more in the bins or as the designated victim, no bundle waiting to
 * be drained, no deferred chunk: ms_alloc_aligned_locked would find none
 * either): the top's first granule, the top cut in place, after growing
 * the heap if the top is too small (or not made yet: arena 0's first
 * page).  ms_alloc_aligned_locked takes twice a granule from the top and
 * gives back what is left over, writing the top's header a granule past
 * the page's end on the way: one page of memory touched for nothing (the
 * fixed workload at 1 thread: one in each of its two arenas).  The lead,
 * from the top's start to the granule, becomes the designated victim, as a
 * split's rest does, the one before going to its bin (a new arena's lead,
 * after its mstate_t, then writes no bin at the mstate's far end: one page
 * more).  Locked (dropped around
 * a growth, as ms_grow does); NULL when anything else is free (then the
 * general way), or out of memory.  Run once per page: compiled for size
 * (PH_STARTUP), in the window of text every process has resident. */
PH_STARTUP static chunk_t *slab_top_take(mstate_t *ms)
{
  for (bool grown = false;; grown = true) {
    chunk_t *t = ms->top, *dv = dv_get(ms);
    if ((t != NULL && !chunk_pinuse(t)) || (dv != NULL && chunk_size(dv) >= PH_GRANULE) ||
        ms->fast_bytes != 0 ||
        atomic_load_explicit(&ms->remote, memory_order_relaxed) != NULL ||
        binmap_next(ms, bin_index(PH_GRANULE)) < PH_NBINS)
      return NULL;
    size_t ts = t != NULL ? chunk_size(t) : 0, lead = 0;
    if (t != NULL) {
      uintptr_t m = (uintptr_t)chunk_mem(t), am = align_up(m, PH_GRANULE);
      lead = am - m + (am != m && am - m < PH_MIN_CHUNK ? PH_GRANULE : 0);
    }
    if (t == NULL || ts < lead + PH_GRANULE + PH_MIN_CHUNK) {
      if (grown || !ms_grow(ms, 2 * PH_GRANULE + PH_MIN_CHUNK))
        return NULL;
      continue;
    }
    if (!ms_carve_backed(ms, t, ts, lead + PH_GRANULE))
      return NULL;
    chunk_t *c = chunk_at(t, lead), *rest = chunk_at(c, PH_GRANULE);
    size_t rsize = ts - lead - PH_GRANULE;
    head_set(ms, rest, rsize | PH_PINUSE | top_rest_decommitted(ms, t));
    ms->top = rest;
    if (rsize < ms->trim_low)              /* decay: the top was reused */
      ms->trim_low = rsize;
    if (lead == 0) {
      head_set(ms, c, PH_GRANULE | PH_CINUSE | PH_PINUSE);
      return c;
    }
    head_set(ms, c, PH_GRANULE | PH_CINUSE);   /* previous: the lead, free */
    c->prev_foot = lead;
    head_set(ms, t, lead | PH_PINUSE);
    dv_replace(ms, t);
    return c;
  }
}

/* A granule of ms's memory made a page of class c for tc: a page given back
 * as a chunk, the top's next granule, or an aligned allocation.  Locked;
 * NULL when out of memory, or without a kind map (then tc's slabs go off).
 * Run once per page: compiled for size, in the window of text every
 * process has resident (PH_STARTUP). */
PH_STARTUP static slab_page_t *slab_page_new_locked(mstate_t *ms, tcache_t *tc, unsigned c,
                                                    release_t *rel)
{
  slab_page_t *pg = NULL;
  chunk_t *ch = slab_chunk_reuse(ms, rel);
  if (ch == NULL)
    ch = slab_top_take(ms);
  if (ch == NULL)
    ch = ms_alloc_aligned_locked(ms, PH_GRANULE, PH_GRANULE, rel);
  if (ch != NULL) {
    char *base = chunk_mem(ch);
    pg = slab_page_at(base);
    if (owner_map_set(base, PH_GRANULE, owner_map_get(base), PH_KIND_SLAB)) {
      slab_format(pg, ms, c, tc);
      pg->all_prev = NULL;
      pg->all_next = ms->slab_all;
      if (ms->slab_all != NULL)
        ms->slab_all->all_prev = pg;
      ms->slab_all = pg;
    } else {                             /* no kind map: no slabs */
      uintptr_t o = owner_map_get(base);
      ms_free_chunk(ms, owner_seg(o), ch, chunk_size(ch), rel, "malloc");
      tc->slab_on = false;
      tc->slab_max = 0;
      pg = NULL;
    }
  }
  return pg;
}

/* A page of class c with room for tc, out of every list, or NULL: one
 * with room, a full one freed into (fewer than its mark's blocks by this
 * thread, or any by others), an orphan, a cached page, a new page; or
 * &slab_none (then a chunk: tcache_sparse_malloc) while the arena, arena 0
 * with pages, has served fewer than PH_SLAB_SPARSE mallocs of the class. */
PH_HOT static slab_page_t *slab_next_page(tcache_t *tc, unsigned c)
{
  slab_page_t *pg = tc->slab_avail[c];
  if (pg != NULL) {
    avail_pop(tc, c, pg);
    return pg;
  }
  /* the oldest full pages first; those looked at go to the back */
  for (unsigned k = 0; k < SLAB_FULL_SCAN && (pg = tc->slab_full[c]) != NULL; k++) {
    full_remove(tc, pg);
    if (pg->free != (void *)pg ||
        (__atomic_load_n(&pg->remote, __ATOMIC_RELAXED) != NULL && slab_collect(pg, "malloc") != 0))
      return pg;
    full_append(tc, pg);
    if (pg == tc->slab_full[c])
      break;                             /* the only one */
  }
  mstate_t *ms = tc->arena;
  release_t rel = { NULL, 0 };
  ms_lock(ms);
  while ((pg = ms->slab_orphans[c]) != NULL) {
    page_unlink(&ms->slab_orphans[c], NULL, pg);
    page_set_owner(pg, tc);
    /* its frees went to its list (the tag): from now on, they are pushed */
    __atomic_store_n(&pg->remote, NULL, __ATOMIC_RELEASE);
    ms_unlock(ms);
    return pg;                           /* (the caller files it as full if it is) */
  }
  pg = ms->slab_cache;
  if (pg != NULL) {
    ms->slab_cache = pg->next;
    ms->slab_cached--;
    page_keys_clear(pg, "malloc");       /* its old class's keys */
    slab_format(pg, ms, c, tc);
    ms_unlock(ms);
    return pg;
  }
  if (ms == heap_main_get() && ms->slab_all != NULL && ms->slab_sparse[c] < PH_SLAB_SPARSE) {
    /* a class met rarely: a chunk */
    ms->slab_sparse[c]++;
    ms_unlock(ms);
    return &slab_none;
  }
  pg = slab_page_new_locked(ms, tc, c, &rel);
  ms_unlock(ms);
  slab_release(&rel, NULL, 0);
  return pg;
}

/* Slabs off (the shared heap, no kind map): the thread cache's chunks. */
PH_HOT static void *slab_chunk_path(tcache_t *tc, size_t n)
{
  size_t nb = request_to_size(n);
  tc_bin_t *b = &tc->bins[nb >> 4];
  if (b->head != NULL)
    return tc_bin_pop(b, b->head, nb);
  return front_malloc_slow(n);
}

/* The current page of n's class has no free block left, or there is none
 * (a class's first malloc, n 0, slabs off): the way through the arena's
 * pages, or the chunk path. */
PH_HOT PH_STARTUP_SIZE PH_NOINLINE static void *slab_malloc_page(size_t n)
{
  if (n == 0)
    n = 1;
  tcache_t *tc = tcache_get();
  if (tc == NULL)
    return ms_malloc(heap_default(), n);
  if (!tc->slab_on)
    return slab_chunk_path(tc, n);
  unsigned c = slab_class_of[(n - 1) >> 4];
  slab_page_t *pg = *cur_slot(tc, c);
  if (pg != &slab_none) {
    if (slab_refill(pg))
      return slab_pop(pg, pg->free);
    pg->over--;                          /* not current any more (its mark is 0) */
    full_append(tc, pg);
    cur_set(tc, c, &slab_none);
  }
  int saved = errno;
  for (;;) {
    pg = slab_next_page(tc, c);
    if (pg == &slab_none)                /* no page yet (tcache.c) */
      return tcache_sparse_malloc(tc, n, saved);
    if (pg == NULL) {
      if (!tc->slab_on)
        return slab_chunk_path(tc, n);
      errno = ENOMEM;
      return NULL;
    }
    if (slab_refill(pg))
      break;
    full_append(tc, pg);                 /* (an orphan taken in full) */
  }
  errno = saved;
  /* a release listener run meanwhile may have made a current page */
  if (ph_unlikely(*cur_slot(tc, c) != &slab_none)) {
    slab_page_t *other = *cur_slot(tc, c);
    cur_set(tc, c, &slab_none);
    other->over--;
    if (other->over == 0)
      slab_page_give(other, "malloc");
    else if (slab_refill(other))
      avail_push(tc, other);
    else
      full_append(tc, other);
  }
  pg->state = SLAB_CUR;
  pg->over++;
  cur_set(tc, c, pg);
  return slab_pop(pg, pg->free);
}

/* The common page switch first (churn: one malloc in 25): the current page
 * pg has handed out every block (none on its list, none left to carve,
 * no remote frees to take in) and a page with room waits (every page on
 * that list has a free block).  pg goes to the back of the full list and
 * the other becomes current, without the general way's steps
 * (slab_malloc_page: the cache made if need be, the class looked up, a
 * refill tried, six registers saved): churn's slab_malloc_slow 116
 * instructions a call instead of 179 (full_append's included). */
PH_HOT PH_STARTUP_SIZE void *slab_malloc_slow(size_t n)
{
  tcache_t *tc = tcache_tls;
  if (ph_likely(n != 0)) {
    slab_page_t *pg = tc->slab_cur[(n - 1) >> 4];
    if (ph_unlikely(pg->free != (void *)pg))   /* not empty: its link failed (front.h) */
      return slab_corrupt(pg, pg->free, "malloc");
    unsigned c = pg->cls;
    slab_page_t *next = tc->slab_avail[c];
    if (next != NULL && pg != &slab_none &&
        pg->bump <= page_first(pg) && __atomic_load_n(&pg->remote, __ATOMIC_RELAXED) == NULL) {
      pg->over--;                        /* not current any more (its mark is 0) */
      full_append(tc, pg);
      avail_pop(tc, c, next);
      next->state = SLAB_CUR;
      next->over++;
      cur_set(tc, c, next);
      return slab_pop(next, next->free);
    }
  }
  return slab_malloc_page(n);
}
