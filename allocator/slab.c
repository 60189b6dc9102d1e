/*
 * slab.c -- slab pages: the malloc family's blocks of up to PH_SLAB_MAX
 * bytes, headerless, carved from 64 KiB pages of one size class each, with
 * a free list per page and no coalescing.  Main entry points:
 * slab_malloc_slow() and slab_free_slow(); the fast paths are inline in
 * front.h.
 *
 * A page is one granule, taken from the thread's arena as an in-use chunk
 * of PH_GRANULE bytes whose payload starts the granule; its kind map byte
 * says PH_KIND_SLAB, so free's first load tells a slab block from a chunk
 * (the owner map entry stays the segment's).  The blocks start the
 * granule and the page header (types.h: slab_page_t) follows them, a cache
 * line lower per granule in a cycle of 8 (internal.h: slab_page_at).
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
 * page has room enough (SLAB_ROOM_SHIFT) to go back to "avail": so frees
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
#include "front.h"

#include <errno.h>
#include <string.h>

#define SLAB_CUR    1u   /* its owner's current page of its class */
#define SLAB_AVAIL  2u   /* in its owner's list of pages with room */
#define SLAB_FULL   3u   /* in its owner's list of full pages */
#define SLAB_CACHED 4u   /* empty, in its arena's cache, no owner */
#define SLAB_ORPHAN 5u   /* its owner exited: in its arena's orphans */
#define SLAB_LOST   6u   /* fork child: another thread's page, in no list */

#define PH_SLAB_CACHE 4u       /* empty pages an arena keeps */
#define SLAB_FULL_SCAN 4u      /* full pages looked at for remote frees */
#define SLAB_CARVE 4096u       /* bytes of fresh blocks put on the list at once */
#define SLAB_REMOTE_BATCH 32u  /* blocks of another thread's page pushed at once */
_Static_assert(SLAB_REMOTE_BATCH <= UINT8_MAX, "a batch's count fits tcache_t's rb_count");
#define SLAB_ROOM_SHIFT 4u     /* a full page goes back to "avail" when 1/16 of
                                  its blocks (and one) are free */
/* An orphan's remote stack, whole: no block is pushed there, frees take
 * the arena's lock (blocks are 16-aligned: no stack top has this bit). */
#define SLAB_ORPHAN_TAG ((void *)(uintptr_t)1)
/* A remote stack's word: how many blocks it holds, in the bits from
 * SLAB_COUNT_SHIFT up (at least 1: the word of a stack is never 0 or the
 * tag), SLAB_STACK_WALK, and its top block's offset in the page below:
 * the owner takes a stack into an empty list whole, without walking it,
 * unless SLAB_STACK_WALK says a block was pushed alone by a thread without
 * a cache (slab_collect_stack). */
#define SLAB_COUNT_SHIFT 32u
#define SLAB_STACK_WALK ((uintptr_t)1 << 31)

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

/* ---- small helpers --------------------------------------------------------- */

PH_INLINE tcache_t *page_owner(const slab_page_t *pg)
{
  return __atomic_load_n(&pg->owner, __ATOMIC_RELAXED);
}
PH_INLINE void page_set_owner(slab_page_t *pg, tcache_t *tc)
{
  __atomic_store_n(&pg->owner, tc, __ATOMIC_RELAXED);
}
PH_INLINE char *page_first(const slab_page_t *pg)
{
  return (char *)((uintptr_t)pg & ~(PH_GRANULE - 1));
}
/* Bytes of blocks the page may hold: up to its header. */
PH_INLINE uint32_t page_area(const slab_page_t *pg)
{
  return (uint32_t)((uintptr_t)pg & (PH_GRANULE - 1));
}
PH_INLINE uint32_t page_capacity(const slab_page_t *pg) { return pg->span / pg->bsize; }
PH_INLINE uint32_t page_used(const slab_page_t *pg) { return pg->over + pg->mark; }
/* The count of blocks in use becomes `used`; the mark stays if below. */
PH_INLINE void page_used_set(slab_page_t *pg, uint32_t used)
{
  if (pg->mark >= used)
    pg->mark = 0;
  pg->over = used - pg->mark;
}
/* The slot of class c in a cache's slab_cur[] (its last). */
PH_INLINE slab_page_t **cur_slot(tcache_t *tc, unsigned c)
{
  return &tc->slab_cur[(slab_class_size[c] >> 4) - 1];
}
/* pg becomes the current page of class c: every slot of the class. */
static void cur_set(tcache_t *tc, unsigned c, slab_page_t *pg)
{
  for (unsigned i = c == 0 ? 0 : slab_class_size[c - 1] >> 4; i < slab_class_size[c] >> 4u; i++)
    tc->slab_cur[i] = pg;
}
PH_INLINE uintptr_t link_enc(const slab_page_t *pg, const void *p) { return (uintptr_t)p ^ pg->secret; }
/* The count of blocks of a remote stack's word v (0: empty), its top
 * block (v not empty), and the word of a stack of n blocks from top. */
PH_INLINE uint32_t remote_count(const void *v) { return (uint32_t)((uintptr_t)v >> SLAB_COUNT_SHIFT); }
PH_INLINE void *remote_top(const slab_page_t *pg, const void *v)
{
  return page_first(pg) + ((uintptr_t)v & (PH_GRANULE - 1));
}
PH_INLINE void *remote_word(const void *top, uint32_t n, uintptr_t walk)
{
  return (void *)(((uintptr_t)n << SLAB_COUNT_SHIFT) | walk | ((uintptr_t)top & (PH_GRANULE - 1)));
}

void *slab_corrupt(slab_page_t *pg, void *b, const char *fn)
{
  (void)pg;
  ph_fatal(fn, "corrupted free list at block", b);
}

/* Names a pointer into pg that is not one of its blocks, or a free one. */
static void slab_block_check(const slab_page_t *pg, const void *mem, const char *fn)
{
  uint64_t u = (uintptr_t)mem & (PH_GRANULE - 1);
  if (u * pg->mulc >= pg->lim)
    ph_fatal(fn, "invalid pointer", mem);
  if (((const uint64_t *)mem)[1] == chunk_free_key)
    ph_fatal(fn, "double free", mem);
}

/* ---- the owner's lists ------------------------------------------------------ */

/* Every list of pages (an owner's avail and full lists, an arena's orphans)
 * is doubly linked through prev/next from *head; only the full list keeps
 * a tail (tail NULL for the others). */
static void page_push_front(slab_page_t **head, slab_page_t *pg)
{
  pg->prev = NULL;
  pg->next = *head;
  if (*head != NULL)
    (*head)->prev = pg;
  *head = pg;
}

static void page_unlink(slab_page_t **head, slab_page_t **tail, slab_page_t *pg)
{
  if (pg->prev != NULL)
    pg->prev->next = pg->next;
  else
    *head = pg->next;
  if (pg->next != NULL)
    pg->next->prev = pg->prev;
  else if (tail != NULL)
    *tail = pg->prev;
}

static void avail_push(tcache_t *tc, slab_page_t *pg)
{
  page_push_front(&tc->slab_avail[pg->cls], pg);
  pg->state = SLAB_AVAIL;
}

static void avail_remove(tcache_t *tc, slab_page_t *pg)
{
  page_unlink(&tc->slab_avail[pg->cls], NULL, pg);
}

/* pg, with no free block, goes to the back of the full list; its mark is
 * set so that the free that gives it room enough calls slab_page_idle(). */
PH_HOT static void full_append(tcache_t *tc, slab_page_t *pg)
{
  unsigned c = pg->cls;
  uint32_t used = page_used(pg), room = (page_capacity(pg) >> SLAB_ROOM_SHIFT) + 1;
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

/* Takes pg out of the full list: its mark goes. */
static void full_remove(tcache_t *tc, slab_page_t *pg)
{
  unsigned c = pg->cls;
  pg->over += pg->mark;
  pg->mark = 0;
  page_unlink(&tc->slab_full[c], &tc->slab_full_tail[c], pg);
}

/* Takes pg out of whichever of its owner's lists it is in. */
static void owner_list_remove(tcache_t *tc, slab_page_t *pg)
{
  if (pg->state == SLAB_AVAIL)
    avail_remove(tc, pg);
  else if (pg->state == SLAB_FULL)
    full_remove(tc, pg);
  else if (pg->state == SLAB_CUR)
    cur_set(tc, pg->cls, &slab_none);
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
  pg->bump = page_first(pg);
  pg->next = pg->prev = NULL;
  pg->ms = ms;
  pg->magic = pg->secret ^ (uintptr_t)pg;
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
  for (char *b = page_first(pg), *end = pg->bump; b < end; b += bsize) {
    uintptr_t next = *(uintptr_t *)b ^ secret;
    if (ph_unlikely(((next ^ (uintptr_t)pg) >> PH_GRANULE_SHIFT) != 0))
      slab_corrupt(pg, b, fn);
    ((uint64_t *)b)[1] = 0;
  }
}

/* pg (no block in use, in no list but the arena's) becomes a free chunk of
 * ms again.  Locked; a range to release after unlocking: *rel.  fn: the
 * call that gives it back, named if pg is found damaged. */
static void slab_page_release_locked(mstate_t *ms, slab_page_t *pg, release_t *rel,
                                     const char *fn)
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
static void slab_release(release_t *rel, release_t *idle, unsigned nidle)
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
PH_HOT static unsigned slab_cache_put_locked(mstate_t *ms, slab_page_t *pg, bool may_release,
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

PH_HOT static void slab_page_give(slab_page_t *pg, const char *fn) { slab_page_give_to(pg, true, fn); }

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
PH_HOT static uint32_t slab_collect_stack(slab_page_t *pg, void *v, const char *fn)
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
static uint32_t slab_collect(slab_page_t *pg, const char *fn)
{
  return slab_collect_stack(pg, __atomic_exchange_n(&pg->remote, NULL, __ATOMIC_ACQUIRE), fn);
}

/* Puts up to SLAB_CARVE bytes of fresh blocks of pg on its (empty) list. */
static bool slab_carve(slab_page_t *pg)
{
  uint32_t bsize = pg->bsize;
  char *bump = pg->bump, *end = page_first(pg) + pg->span;
  if (bump >= end)
    return false;
  uint32_t k = SLAB_CARVE / bsize;
  char *stop = bump + (size_t)(k == 0 ? 1 : k) * bsize;
  if (stop > end)
    stop = end;
  void *next = pg->free;
  for (char *b = stop - bsize; b >= bump; b -= bsize) {
    *(uintptr_t *)b = link_enc(pg, next);
    ((uint64_t *)b)[1] = chunk_free_key;
    next = b;
  }
  pg->free = next;
  pg->bump = stop;
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
static chunk_t *slab_chunk_reuse(mstate_t *ms, release_t *rel)
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

/* A page of class c with room for tc, out of every list, or NULL: one
 * with room, a full one freed into (fewer than its mark's blocks by this
 * thread, or any by others), an orphan, a cached page, a new page. */
static slab_page_t *slab_next_page(tcache_t *tc, unsigned c)
{
  slab_page_t *pg = tc->slab_avail[c];
  if (pg != NULL) {
    avail_remove(tc, pg);
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
  chunk_t *ch = slab_chunk_reuse(ms, &rel);
  if (ch == NULL)
    ch = ms_alloc_aligned_locked(ms, PH_GRANULE, PH_GRANULE, &rel);
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
      ms_free_chunk(ms, owner_seg(o), ch, chunk_size(ch), &rel, "malloc");
      tc->slab_on = false;
      tc->slab_max = 0;
      pg = NULL;
    }
  }
  ms_unlock(ms);
  slab_release(&rel, NULL, 0);
  return pg;
}

/* Slabs off (the shared heap, no kind map): the thread cache's chunks. */
static void *slab_chunk_path(tcache_t *tc, size_t n)
{
  size_t nb = request_to_size(n);
  tc_bin_t *b = &tc->bins[nb >> 4];
  if (b->head != NULL)
    return tc_bin_pop(b, b->head, nb);
  return front_malloc_slow(n);
}

PH_HOT void *slab_malloc_slow(size_t n)
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
    slab_page_t *next = tc->slab_avail[c];
    if (next != NULL) {                  /* the common case: a page with room */
      avail_remove(tc, next);            /* (every page there has free blocks) */
      next->state = SLAB_CUR;
      next->over++;
      cur_set(tc, c, next);
      return slab_pop(next, next->free);
    }
    cur_set(tc, c, &slab_none);
  }
  int saved = errno;
  for (;;) {
    pg = slab_next_page(tc, c);
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

/* ---- free ----------------------------------------------------------------------- */

/* Puts the chain head .. tail (n blocks of pg, linked ^ secret, the
 * tail's link to be set) on the list of pg, an orphan while its remote
 * stack is the tag, under its arena's lock; an orphan left without a block
 * in use goes to the arena's cache, over PH_SLAB_CACHE as an exiting
 * thread's pages do: the next page of any class of the arena, and given
 * back in malloc_trim (a free chunk at once, to be carved again for the
 * next thread's page, cost larson 8 threads twice its time).  The blocks,
 * still counted in use, keep the page from going away meanwhile.
 * @return false if pg was adopted meanwhile (its frees are pushed again). */
static bool slab_orphan_free(slab_page_t *pg, void *head, void *tail, uint32_t n)
{
  mstate_t *ms = pg->ms;

  ms_lock(ms);
  if (__atomic_load_n(&pg->remote, __ATOMIC_RELAXED) != SLAB_ORPHAN_TAG) {
    ms_unlock(ms);
    return false;
  }
  if (ph_unlikely(pg->state != SLAB_ORPHAN || n > page_used(pg)))
    ph_fatal("free", "double free", head);  /* more blocks freed than it has in use */
  *(uintptr_t *)tail = link_enc(pg, pg->free);
  pg->free = head;
  pg->over -= n;                         /* (an orphan's mark is 0) */
  if (pg->over == 0) {
    page_unlink(&ms->slab_orphans[pg->cls], NULL, pg);
    slab_cache_put_locked(ms, pg, false, NULL, NULL, "free");
  }
  ms_unlock(ms);
  return true;
}

/* Pushes the chain head .. tail (n blocks of pg, linked ^ secret, the
 * tail's link to be set) on pg's remote stack, the count of its word
 * raised by n; an orphan's go to its list (slab_orphan_free).  A stack
 * ends with a link to the page header, as a list does. */
PH_HOT static void slab_remote_push(slab_page_t *pg, void *head, void *tail, unsigned n,
                                    uintptr_t walk)
{
  void *old = __atomic_load_n(&pg->remote, __ATOMIC_RELAXED);
  for (;;) {
    if (ph_unlikely(old == SLAB_ORPHAN_TAG)) {
      if (slab_orphan_free(pg, head, tail, n))
        return;
      old = __atomic_load_n(&pg->remote, __ATOMIC_RELAXED);
      continue;
    }
    uint32_t count = remote_count(old);
    *(uintptr_t *)tail = link_enc(pg, count != 0 ? remote_top(pg, old) : (void *)pg);
    void *word = remote_word(head, count + n, walk | ((uintptr_t)old & SLAB_STACK_WALK));
    if (__atomic_compare_exchange_n(&pg->remote, &old, word, true, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED))
      return;
  }
}

/* Pushes tc's batch of remote frees of class i, if any. */
static void slab_remote_flush_one(tcache_t *tc, unsigned i)
{
  void *head = tc->rb_head[i];
  if (head == NULL)
    return;
  slab_page_t *pg = slab_page_at(head);
  void *tail = page_first(pg) + tc->rb_tail[i];
  unsigned n = tc->rb_count[i];
  tc->rb_head[i] = NULL;
  tc->rb_count[i] = 0;
  slab_remote_push(pg, head, tail, n, 0);
}

void slab_remote_flush(tcache_t *tc)
{
  for (unsigned i = 0; i < PH_SLAB_NCLASS; i++)
    slab_remote_flush_one(tc, i);
}

PH_HOT void slab_page_idle(tcache_t *tc, slab_page_t *pg)
{
  if (pg->mark != 0) {                   /* a full page with room enough */
    full_remove(tc, pg);
    avail_push(tc, pg);
    return;
  }
  int saved = errno;
  owner_list_remove(tc, pg);
  slab_page_give(pg, "free");
  errno = saved;
}

PH_HOT void slab_free_slow(void *mem, const char *fn)
{
  slab_page_t *pg = slab_page_at(mem);
  tcache_t *tc = tcache_tls;
  int saved = errno;

  slab_block_check(pg, mem, fn);
  if (page_owner(pg) == tc) {            /* this thread's (a caller without the fast path) */
    *(uintptr_t *)mem = link_enc(pg, pg->free);
    ((uint64_t *)mem)[1] = chunk_free_key;
    pg->free = mem;
    if (--pg->over == 0)
      slab_page_idle(tc, pg);
    errno = saved;
    return;
  }
  /* another thread's page, or one without owner: gathered, then pushed on
   * its remote stack with the others of that page.  A batch per class:
   * with a single batch, a thread freeing blocks of several classes in
   * turn pushed them one at a time, a compare-and-swap on a contended
   * cache line each (larson at 2 threads: 504,000 pushes for 533,000
   * blocks).  A batch waits until it is full, a block of another page of
   * its class comes, or the thread exits or flushes: it holds back
   * PH_SLAB_NCLASS pages at most. */
  ((uint64_t *)mem)[1] = chunk_free_key;
  unsigned i = pg->cls;
  void *head = tc->rb_head[i];
  if (head == NULL || (((uintptr_t)head ^ (uintptr_t)mem) >> PH_GRANULE_SHIFT) != 0) {
    if (tc->arena == NULL) {             /* a sentinel, no cache: pushed alone */
      slab_remote_push(pg, mem, mem, 1, SLAB_STACK_WALK);
      errno = saved;
      return;
    }
    slab_remote_flush_one(tc, i);
    head = NULL;
    tc->rb_tail[i] = (uint16_t)((uintptr_t)mem & (PH_GRANULE - 1));
  }
  *(uintptr_t *)mem = link_enc(pg, head);
  tc->rb_head[i] = mem;
  if (++tc->rb_count[i] >= SLAB_REMOTE_BATCH)
    slab_remote_flush_one(tc, i);
  errno = saved;
}

size_t slab_usable(const void *mem, const char *fn)
{
  const slab_page_t *pg = slab_page_at(mem);
  slab_block_check(pg, mem, fn);
  return pg->bsize;
}

void *slab_realloc(void *mem, size_t n, const char *fn)
{
  slab_page_t *pg = slab_page_at(mem);
  slab_block_check(pg, mem, fn);
  size_t bsize = pg->bsize;
  if (n > PH_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  if (n <= bsize && n >= bsize / 2)      /* its class, or close: in place */
    return mem;
  void *fresh = front_malloc(n);
  if (fresh == NULL)
    return NULL;                         /* errno is ENOMEM; mem untouched */
  memcpy(fresh, mem, n < bsize ? n : bsize);
  if (!front_free_fast(mem))
    slab_free_slow(mem, fn);
  return fresh;
}

/* ---- thread exit, flush, trim, fork ------------------------------------------- */

/* pg, out of its owner's lists, loses its owner: back to the arena if
 * empty (into the cache: the thread is going away), else an orphan.  Its
 * remote stack becomes the tag in the same step as it is taken in: every
 * later free into it takes the arena's lock (held here). */
PH_HOT static void slab_abandon(slab_page_t *pg)
{
  mstate_t *ms = pg->ms;
  unsigned c = pg->cls;
  ms_lock(ms);
  slab_collect_stack(pg, __atomic_exchange_n(&pg->remote, SLAB_ORPHAN_TAG, __ATOMIC_ACQUIRE),
                     "pthread_exit");
  if (page_used(pg) == 0) {
    slab_cache_put_locked(ms, pg, false, NULL, NULL, "pthread_exit");
    ms_unlock(ms);
    return;
  }
  page_set_owner(pg, NULL);
  pg->state = SLAB_ORPHAN;
  page_push_front(&ms->slab_orphans[c], pg);
  ms_unlock(ms);
}

PH_HOT void slab_thread_exit(tcache_t *tc)
{
  slab_remote_flush(tc);
  for (unsigned c = 0; c < PH_SLAB_NCLASS; c++) {
    slab_page_t *pg = *cur_slot(tc, c);
    if (pg != &slab_none) {
      cur_set(tc, c, &slab_none);
      pg->over--;
      slab_abandon(pg);
    }
    while ((pg = tc->slab_avail[c]) != NULL) {
      avail_remove(tc, pg);
      slab_abandon(pg);
    }
    while ((pg = tc->slab_full[c]) != NULL) {
      full_remove(tc, pg);
      slab_abandon(pg);
    }
  }
}

/* A give-back may release memory, and a release listener may then free or
 * malloc on this thread and change its lists: after each, the walk starts
 * over. */
void slab_flush_mine(tcache_t *tc, const char *fn)
{
  slab_remote_flush(tc);
  for (unsigned c = 0; c < PH_SLAB_NCLASS; c++) {
  restart:;
    slab_page_t *pg = *cur_slot(tc, c);
    if (pg != &slab_none) {
      slab_collect(pg, fn);
      if (pg->over == 1) {               /* only its being current */
        cur_set(tc, c, &slab_none);
        pg->over = 0;
        slab_page_give(pg, fn);
        goto restart;
      }
    }
    for (slab_page_t *p = tc->slab_avail[c]; p != NULL; p = p->next) {
      slab_collect(p, fn);
      if (p->over == 0) {
        avail_remove(tc, p);
        slab_page_give(p, fn);
        goto restart;
      }
    }
    for (slab_page_t *next, *p = tc->slab_full[c]; p != NULL; p = next) {
      next = p->next;
      if (__atomic_load_n(&p->remote, __ATOMIC_RELAXED) != NULL && slab_collect(p, fn) != 0) {
        full_remove(tc, p);
        if (p->over == 0) {
          slab_page_give(p, fn);
          goto restart;
        }
        avail_push(tc, p);
      }
    }
  }
}

void slab_trim(mstate_t *ms)
{
  for (;;) {
    release_t rel = { NULL, 0 };
    ms_lock(ms);
    slab_page_t *pg = ms->slab_cache;
    if (pg == NULL) {
      ms_unlock(ms);
      return;
    }
    ms->slab_cache = pg->next;
    ms->slab_cached--;
    slab_page_release_locked(ms, pg, &rel, "malloc_trim");
    ms_unlock(ms);
    slab_release(&rel, NULL, 0);
  }
}

/* Called with every heap lock held (the fork handlers). */
static void slab_fork_arena(mstate_t *ms, void *arg)
{
  tcache_t *me = arg;
  for (slab_page_t *pg = ms->slab_all; pg != NULL; pg = pg->all_next) {
    tcache_t *o = page_owner(pg);
    if (o != NULL && o != me) {          /* its thread is not in the child */
      page_set_owner(pg, NULL);
      pg->state = SLAB_LOST;
    }
  }
}

void slab_fork_child(void)
{
  arena_for_each(slab_fork_arena, tcache_tls);
}

PH_HOT void slab_tcache_init(tcache_t *tc)
{
  for (unsigned i = 0; i < PH_SLAB_NSLOT; i++)
    tc->slab_cur[i] = &slab_none;
}

/* ---- statistics and checks --------------------------------------------------- */

size_t slab_info(mstate_t *ms)
{
  tcache_t *me = tcache_tls;
  size_t free_bytes = 0;
  for (slab_page_t *pg = ms->slab_all; pg != NULL; pg = pg->all_next) {
    tcache_t *o = page_owner(pg);       /* others' pages: their fields are theirs */
    size_t whole = chunk_size(mem_chunk(page_first(pg)));
    if (o == NULL && pg->state == SLAB_CACHED)
      free_bytes += whole;
    else if (o == NULL || o == me)
      free_bytes += whole - (size_t)(page_used(pg) - (pg->state == SLAB_CUR)) * pg->bsize;
  }
  return free_bytes;
}

#define SLAB_CHECK(cond, what, at)                                                              \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      ph_log_plain(PH_LOG_ERROR, "heap check: %s at %p", (what), (const void *)(at));         \
      problems++;                                                                               \
    }                                                                                           \
  } while (0)

static int slab_check_header(mstate_t *ms, const slab_page_t *pg)
{
  int problems = 0;
  uintptr_t g = (uintptr_t)pg >> PH_GRANULE_SHIFT;
  SLAB_CHECK(pg == slab_page_at(pg), "slab page header misplaced", pg);
  SLAB_CHECK(pg->magic == (pg->secret ^ (uintptr_t)pg) && pg->ms == ms, "slab page header damaged",
             pg);
  /* atomic, as every access of the kind map: a granule's byte is written
   * again when its memory comes back as another heap's, which a checker's
   * plain read would race with in TSan's eyes (munmap and mmap order
   * nothing for it) */
  SLAB_CHECK(g < owner_kind_limit && __atomic_load_n(&owner_kind[g], __ATOMIC_RELAXED) == PH_KIND_SLAB,
             "slab page without its kind map byte", pg);
  SLAB_CHECK(pg->cls < PH_SLAB_NCLASS && pg->bsize == slab_class_size[pg->cls] &&
                 pg->span == page_area(pg) / pg->bsize * pg->bsize,
             "slab page with a wrong block size", pg);
  const chunk_t *c = mem_chunk(page_first(pg));
  SLAB_CHECK(head_ok(ms, c) && chunk_cinuse(c) && chunk_size(c) >= PH_GRANULE,
             "slab page not an in-use chunk of its arena", pg);
  return problems;
}

int slab_check_arena(mstate_t *ms)
{
  int problems = 0;
  size_t n = 0, cached = 0;
  for (slab_page_t *pg = ms->slab_all; pg != NULL; pg = pg->all_next) {
    if (++n > ms->footprint / PH_GRANULE + 1) {
      SLAB_CHECK(false, "slab page list runs in a loop", ms);
      break;
    }
    SLAB_CHECK(pg->all_next == NULL || pg->all_next->all_prev == pg, "slab page list broken", pg);
    problems += slab_check_header(ms, pg);
  }
  for (slab_page_t *pg = ms->slab_cache; pg != NULL && cached <= n; pg = pg->next) {
    SLAB_CHECK(pg->state == SLAB_CACHED && page_owner(pg) == NULL, "cached slab page in use", pg);
    cached++;
  }
  SLAB_CHECK(cached == ms->slab_cached, "slab page cache count wrong", ms);
  for (unsigned c = 0; c < PH_SLAB_NCLASS; c++)
    for (slab_page_t *pg = ms->slab_orphans[c]; pg != NULL; pg = pg->next) {
      SLAB_CHECK(pg->state == SLAB_ORPHAN && pg->cls == c && page_owner(pg) == NULL,
                 "orphan slab page misfiled", pg);
      SLAB_CHECK(__atomic_load_n(&pg->remote, __ATOMIC_RELAXED) == SLAB_ORPHAN_TAG,
                 "orphan slab page with a remote stack (expected its tag)", pg);
      SLAB_CHECK(page_used(pg) != 0, "orphan slab page with no block in use (not given back)", pg);
    }
  return problems;
}

/* Checks one page of tc: owner, state, and its local free list. */
static int slab_check_page(tcache_t *tc, slab_page_t *pg, unsigned c, unsigned state)
{
  int problems = 0;
  SLAB_CHECK(page_owner(pg) == tc && pg->cls == c && pg->state == state,
             "thread's slab page misfiled", pg);
  if (problems != 0)
    return problems;
  uint32_t cap = page_capacity(pg), nfree = 0;
  for (void *b = pg->free; b != (void *)pg; b = (void *)(*(uintptr_t *)b ^ pg->secret)) {
    uint32_t u = (uint32_t)((uintptr_t)b & (PH_GRANULE - 1));
    if ((char *)b - u != page_first(pg) || u >= pg->span || u % pg->bsize ||
        (char *)b >= pg->bump || nfree > cap) {
      SLAB_CHECK(false, "slab free list leads off its blocks", b);
      return problems;
    }
    SLAB_CHECK(((uint64_t *)b)[1] == chunk_free_key, "free slab block written after free", b);
    nfree++;
  }
  uint32_t carved = (uint32_t)((pg->bump - page_first(pg)) / pg->bsize);
  SLAB_CHECK(state != SLAB_AVAIL || nfree != 0, "slab page with room has no free block", pg);
  SLAB_CHECK(page_used(pg) + nfree == carved + (state == SLAB_CUR) &&
                 (pg->mark == 0 || (state == SLAB_FULL && pg->over != 0)),
             "slab page count wrong", pg);
  return problems;
}

int slab_check_mine(tcache_t *tc)
{
  int problems = 0;
  for (unsigned c = 0; c < PH_SLAB_NCLASS; c++) {
    slab_page_t *cur = *cur_slot(tc, c);
    for (unsigned i = c == 0 ? 0 : slab_class_size[c - 1] >> 4; i < slab_class_size[c] >> 4u; i++)
      SLAB_CHECK(tc->slab_cur[i] == cur, "thread's current slab pages disagree", tc);
    if (cur != &slab_none)
      problems += slab_check_page(tc, cur, c, SLAB_CUR);
    for (slab_page_t *pg = tc->slab_avail[c]; pg != NULL; pg = pg->next)
      problems += slab_check_page(tc, pg, c, SLAB_AVAIL);
    for (slab_page_t *pg = tc->slab_full[c]; pg != NULL; pg = pg->next)
      problems += slab_check_page(tc, pg, c, SLAB_FULL);
  }
  return problems;
}
