/*
 * test_thread_pages.c -- the pages a new thread makes resident for
 * pinheap's own bookkeeping when it only allocates small blocks (a
 * malloc(32)/free loop, as pinheap-bench's fixed): its thread cache
 * (allocator/front/tcache.c: one page, the part from `kind` on, laid out
 * on a page boundary and not zeroed when fresh; 2-3 before, the cache
 * zeroed whole and its chunk lists' limits set) and its arena's first
 * segment (allocator/heap/state.c: ms_create; 4 pages: the mstate's head,
 * the first slab page's chunk header, the slab page, the fence; 5 before,
 * with a lead chunk between the mstate and the first granule), and both
 * together: the cache of the thread that made the arena lies in the
 * arena's first granule (4 pages, not 5).  Pages are
 * counted with /proc/self/pagemap: present and mapped by this process
 * alone (a page only read is the shared zero page and costs nothing).
 * Main entry point: the Test() cases.
 */
#include "test_util.h"

#include "allocator/front/front.h"     /* tcache_tls, the cache's layout */

#define PM_PRESENT   ((uint64_t)1 << 63)
#define PM_EXCLUSIVE ((uint64_t)1 << 56)

/* Pages of [lo, hi) present and exclusive; -1 if pagemap cannot be read. */
static long pages_written(const void *lo, const void *hi)
{
  long page = sysconf(_SC_PAGESIZE);
  int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0)
    return -1;
  long n = 0;
  for (uintptr_t a = (uintptr_t)lo / page * page; a < (uintptr_t)hi; a += page) {
    uint64_t e = 0;
    if (pread(fd, &e, sizeof(e), (off_t)(a / page * sizeof(e))) != (ssize_t)sizeof(e)) {
      close(fd);
      return -1;
    }
    n += (e & PM_PRESENT) && (e & PM_EXCLUSIVE);
  }
  close(fd);
  return n;
}

typedef struct seen_s {
  long cache_pages;       /* of the thread's cache */
  long arena_pages;       /* of its arena's first segment */
  long both_pages;        /* of the two together (the cache may lie in the segment) */
  bool fresh_arena;       /* the arena is the thread's own, new one */
  size_t seg_size;
} seen_t;

static void *small_loop(void *arg)
{
  seen_t *seen = arg;
  void *volatile blocks[16];
  for (int round = 0; round < 2000; round++) {
    for (int i = 0; i < 16; i++)
      blocks[i] = PINHEAP_NAME(malloc)(32);
    for (int i = 0; i < 16; i++)
      PINHEAP_NAME(free)(blocks[i]);
  }
  tcache_t *tc = tcache_tls;
  seen->cache_pages = pages_written(tc, tc + 1);
  mstate_t *ms = tc->arena;
  seg_t *home = NULL;
  for (seg_t *s = ms->segs; s != NULL; s = s->next)
    if (s->flags & PH_SEG_HOLDS_MS)
      home = s;
  seen->fresh_arena = home != NULL && ms->segs == home && home->next == NULL;
  if (home != NULL) {
    seen->seg_size = home->size;
    seen->arena_pages = pages_written(home->base, home->base + home->size);
    bool inside = (char *)tc >= home->base && (char *)(tc + 1) <= home->base + home->size;
    seen->both_pages = seen->arena_pages + (inside ? 0 : seen->cache_pages);
  }
  return NULL;
}

static seen_t run_thread(void)
{
  seen_t seen = { -1, -1, -1, false, 0 };
  pthread_t t;
  /* the main thread allocates first: the new thread's arena is not arena 0 */
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(32));
  cr_assert_eq(pthread_create(&t, NULL, small_loop, &seen), 0);
  cr_assert_eq(pthread_join(t, NULL), 0);
  if (seen.cache_pages < 0)
    cr_skip_test("SKIP: /proc/self/pagemap cannot be read here");
  return seen;
}

/* run_thread, where the thread made a new arena (the bounds below are a
 * new arena's). */
static seen_t run_thread_new_arena(void)
{
  seen_t seen = run_thread();
  if (!seen.fresh_arena)
    cr_skip_test("SKIP: the thread did not get a new arena of one segment (the shared heap, or "
                 "an arena limit), the bound is for a new one");
  return seen;
}

/* Before: the cache (7.4 kB) zeroed whole with every chunk list's limit
 * set, its chunk lists between `kind` and the slab fields: 2-3 pages. */
Test(thread_pages, a_small_blocks_thread_writes_one_page_of_its_cache)
{
  seen_t seen = run_thread();
  cr_assert_leq(seen.cache_pages, 1,
                "a thread that only allocates 32-byte blocks has %ld pages of its cache (%zu "
                "bytes) resident, expected at most 1: the part from `kind` on (tcache_t) on a "
                "page of its own", seen.cache_pages, sizeof(tcache_t));
}

/* Before: a lead chunk from the end of the mstate (15.5 kB) to the first
 * granule, its header one more page: 5 pages. */
Test(thread_pages, a_new_arena_writes_four_pages_of_its_segment)
{
  seen_t seen = run_thread_new_arena();
  cr_assert_leq(seen.arena_pages, 4,
                "a new arena's first segment (%zu bytes) has %ld pages resident after a "
                "malloc(32)/free loop, expected at most 4: the mstate's head, the first slab "
                "page's chunk header, the slab page, the fence", seen.seg_size, seen.arena_pages);
}

/* The cache of the thread that made the arena lies in the arena's first
 * granule, on the page of the first slab page's chunk header (state.c:
 * cache_slot_in): together 4 pages.  Before: 1 + 4 (the cache in the
 * pool), and 3 + 5 before that. */
Test(thread_pages, a_new_arenas_thread_and_its_cache_write_four_pages)
{
  seen_t seen = run_thread_new_arena();
  cr_assert_leq(seen.both_pages, 4,
                "a thread that made a new arena and allocates 32-byte blocks has %ld pages of its "
                "cache and its arena's first segment resident, expected at most 4 (its cache on "
                "the page of the first slab page's chunk header)", seen.both_pages);
}
