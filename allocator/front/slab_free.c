/*
 * slab_free.c -- the free side of slab pages (the design: slab.c; what
 * the two files share: slab.h).  It owns the frees that miss front.h's
 * fast path: a block of another thread's page, gathered in a batch per
 * size class and pushed on the page's remote stack (an orphan's go on its
 * list under its arena's lock), and a page whose count of blocks in use
 * reaches its mark (back among the pages with room, or to the arena);
 * realloc and the usable size of a block; a thread's exit (its pages
 * become orphans), the flush of its pages, trim and fork; statistics and
 * the checker's view of pages.  Main entry points: slab_free_slow(),
 * slab_page_idle(), slab_thread_exit(), slab_flush_mine(), slab_trim(),
 * slab_check_arena() and slab_check_mine().
 */
#include "allocator/front/slab.h"
#include "allocator/base/startup.h"     /* PH_STARTUP: once per process, thread or arena */

#include <errno.h>
#include <string.h>

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
  int saved = errno;                     /* (a lock's futex call may set it) */

  ms_lock(ms);
  if (__atomic_load_n(&pg->remote, __ATOMIC_RELAXED) != SLAB_ORPHAN_TAG) {
    ms_unlock(ms);
    errno = saved;
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
  errno = saved;
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

/* Pushes tc's batch of remote frees of class i, if any.  PH_HOT: every
 * thread's exit runs it (slab_thread_exit); outside the hot text it made
 * one more 64 KiB window of the shim resident in a program with a thread. */
PH_HOT static void slab_remote_flush_one(tcache_t *tc, unsigned i)
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

PH_STARTUP void slab_remote_flush(tcache_t *tc)
{
  for (unsigned i = 0; i < PH_SLAB_NCLASS; i++)
    slab_remote_flush_one(tc, i);
}

/* slab_page_idle: pg has no block in use left, and goes back to the arena. */
PH_HOT PH_NOINLINE static void slab_page_empty(tcache_t *tc, slab_page_t *pg)
{
  int saved = errno;
  owner_list_remove(tc, pg);
  slab_page_give(pg, "free");
  errno = saved;
}

/* The full page's case apart, without a call: it saves no registers
 * (churn: one free in 26 files a full page back, 37 instructions each). */
PH_HOT void slab_page_idle(tcache_t *tc, slab_page_t *pg)
{
  if (ph_likely(pg->mark != 0)) {        /* a full page with room enough */
    full_remove(tc, pg);
    avail_push(tc, pg);
    return;
  }
  slab_page_empty(tc, pg);
}

/* errno: kept by the calls that may set it (a lock, a new cache, a page
 * given back), not saved here: one free in 16 comes here in churn at 8
 * threads (others' blocks), and the two __errno_location calls were a
 * tenth of its instructions. */
PH_HOT void slab_free_slow(void *mem, const char *fn)
{
  slab_page_t *pg = slab_page_at(mem);
  tcache_t *tc = tcache_tls;

  slab_block_check(pg, mem, fn);
  if (page_owner(pg) == tc) {            /* this thread's (a caller without the fast path) */
    *(uintptr_t *)mem = link_enc(pg, pg->free);
    ((uint64_t *)mem)[1] = chunk_free_key;
    pg->free = mem;
    if (--pg->over == 0)
      slab_page_idle(tc, pg);
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
  if (ph_unlikely(tc->arena == NULL)) {  /* a sentinel: a thread that only frees */
    /* Given a cache now, for its batches: pushed alone, each block of a
     * consumer that never allocates cost a compare-and-swap on the page's
     * remote line (tools/bench/paths.py, remote_nocache: 1.0 atomic per
     * block, against 0.034 with a cache).  None while the thread exits. */
    int saved = errno;
    tc = tcache_get();
    errno = saved;
    if (tc == NULL) {
      slab_remote_push(pg, mem, mem, 1, SLAB_STACK_WALK);
      return;
    }
  }
  unsigned i = pg->cls;
  void *head = tc->rb_head[i];
  if (head == NULL || (((uintptr_t)head ^ (uintptr_t)mem) >> PH_GRANULE_SHIFT) != 0) {
    slab_remote_flush_one(tc, i);
    head = NULL;
    tc->rb_tail[i] = (uint16_t)((uintptr_t)mem & (PH_GRANULE - 1));
  }
  *(uintptr_t *)mem = link_enc(pg, head);
  tc->rb_head[i] = mem;
  if (++tc->rb_count[i] >= SLAB_REMOTE_BATCH)
    slab_remote_flush_one(tc, i);
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
PH_STARTUP static void slab_abandon(slab_page_t *pg)
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

PH_STARTUP void slab_thread_exit(tcache_t *tc)
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

PH_STARTUP void slab_tcache_init(tcache_t *tc)
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
        (char *)b < pg->bump || nfree > cap) {
      SLAB_CHECK(false, "slab free list leads off its blocks", b);
      return problems;
    }
    SLAB_CHECK(((uint64_t *)b)[1] == chunk_free_key, "free slab block written after free", b);
    nfree++;
  }
  uint32_t carved = (uint32_t)((page_first(pg) + pg->span - pg->bump) / pg->bsize);
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
