/*
 * test_sparse.c -- a slab class met rarely takes no page of its own
 * (allocator/front/slab.c: slab_next_page, tcache.c: tcache_sparse_malloc):
 * in arena 0 (the main thread's, which has slab pages), the first
 * PH_SLAB_SPARSE mallocs of a class are chunks, the next one takes the
 * class's page; the chunks are freed (on another thread too), reused,
 * reallocated and checked as chunks, and misuse of them is named; a
 * thread's own arena gives a class its page at once.  Main entry point:
 * the Test() cases.
 */
#include "test_util.h"

#include "allocator/front/front.h"     /* the kind map, front_arena */

#include <pthread.h>

/* A request of a class this thread's arena (arena 0) has not met: no page
 * of it in the arena or the thread, no malloc of it counted. */
static size_t sparse_size;

static size_t unmet_class_size(void)
{
  PINHEAP_NAME(malloc_trim)(0);         /* cached empty pages are taken first */
  static void *volatile keep;           /* and an arena without pages takes one at once: */
  keep = PINHEAP_NAME(malloc)(16);      /* it has one (its class met first, or before) */
  mstate_t *ms = heap_main_get();
  cr_assert_not_null(ms->slab_all, "arena 0 has no slab page (scenario)");
  tcache_t *tc = tcache_tls;
  cr_assert_eq(front_arena(), ms, "the test's thread is not on arena 0");
  for (unsigned c = PH_SLAB_NCLASS; c-- > 0;) {
    size_t n = slab_class_size[c];
    if (ms->slab_sparse[c] == 0 && ms->slab_orphans[c] == NULL && tc->slab_avail[c] == NULL &&
        tc->slab_full[c] == NULL && tc->slab_cur[(n - 1) >> 4] == &slab_none)
      return n;
  }
  cr_assert_fail("every class has been met in arena 0 (scenario)");
  return 0;
}
#define SPARSE_SIZE sparse_size

static bool in_slab_page(const void *p)
{
  return owner_kind[(uintptr_t)p >> PH_GRANULE_SHIFT] == PH_KIND_SLAB;
}

static void act_free(void *p) { PINHEAP_NAME(free)(p); }
static void act_free_twice(void *p)
{
  PINHEAP_NAME(free)(p);
  PINHEAP_NAME(free)(p);
}

/* The case's blocks, made on this thread (arena 0, which has pages). */
static void *sp_blk[PH_SLAB_SPARSE + 1];

static void sparse_run(void)
{
  sparse_size = unmet_class_size();
  for (unsigned k = 0; k <= PH_SLAB_SPARSE; k++) {
    sp_blk[k] = PINHEAP_NAME(malloc)(SPARSE_SIZE);
    cr_assert_not_null(sp_blk[k]);
    memset(sp_blk[k], (int)k + 1, SPARSE_SIZE);
  }
}

/* Frees the blocks on another thread: the chunks' remote path. */
static void *free_blocks(void *arg)
{
  (void)arg;
  for (unsigned k = 0; k <= PH_SLAB_SPARSE; k++)
    PINHEAP_NAME(free)(sp_blk[k]);
  return NULL;
}

Test(sparse, a_class_met_rarely_takes_no_page_until_the_threshold)
{
  sparse_run();
  for (unsigned k = 0; k < PH_SLAB_SPARSE; k++) {
    cr_assert(!in_slab_page(sp_blk[k]), "malloc(%zu) number %u of its class = %p is in a slab page "
              "of its own, expected a chunk", SPARSE_SIZE, k + 1, sp_blk[k]);
    size_t u = PINHEAP_NAME(malloc_usable_size)(sp_blk[k]);
    cr_assert_geq(u, SPARSE_SIZE, "chunk %p: usable %zu", sp_blk[k], u);
  }
  void *last = sp_blk[PH_SLAB_SPARSE];
  cr_assert(in_slab_page(last), "malloc(%zu) number %u = %p: still no page for the class",
            SPARSE_SIZE, PH_SLAB_SPARSE + 1, last);
  cr_assert_eq(PINHEAP_NAME(malloc_usable_size)(last), SPARSE_SIZE);
  for (unsigned k = 0; k <= PH_SLAB_SPARSE; k++)
    for (size_t i = 0; i < SPARSE_SIZE; i++)
      cr_assert_eq(((unsigned char *)sp_blk[k])[i], k + 1, "block %u overwritten at %zu", k, i);
  /* realloc keeps a chunk's bytes, whatever it moves to */
  unsigned char *r = PINHEAP_NAME(realloc)(sp_blk[0], SPARSE_SIZE + 700);
  cr_assert_not_null(r);
  for (size_t i = 0; i < SPARSE_SIZE; i++)
    cr_assert_eq(r[i], 1, "realloc lost byte %zu", i);
  sp_blk[0] = r;
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, free_blocks, NULL), 0);
  pthread_join(t, NULL);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* On the thread that met the class: a freed chunk comes back for the same
 * size (its thread cache), and every malloc counts, so that a class used
 * in a malloc/free loop reaches its page after PH_SLAB_SPARSE rounds and
 * leaves the slow path. */
Test(sparse, a_freed_chunk_is_reused_and_every_malloc_counts)
{
  sparse_size = unmet_class_size();
  void *first = PINHEAP_NAME(malloc)(SPARSE_SIZE);
  cr_assert_not_null(first);
  cr_assert(!in_slab_page(first), "the first malloc(%zu) = %p is a slab block", SPARSE_SIZE, first);
  PINHEAP_NAME(free)(first);
  unsigned same = 1;
  for (unsigned k = 1; k < PH_SLAB_SPARSE; k++) {
    void *p = PINHEAP_NAME(malloc)(SPARSE_SIZE);
    same += p == first;
    PINHEAP_NAME(free)(p);
  }
  cr_assert_eq(same, PH_SLAB_SPARSE, "%u of %u malloc/free rounds got the freed chunk back", same,
               PH_SLAB_SPARSE);
  void *next = PINHEAP_NAME(malloc)(SPARSE_SIZE);
  cr_assert(in_slab_page(next), "after %u rounds malloc(%zu) = %p is still a chunk", PH_SLAB_SPARSE,
            SPARSE_SIZE, next);
  PINHEAP_NAME(free)(next);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* A thread's own arena gives every class its page at once (the classes
 * met rarely are arena 0's: a thread's arena serves a workload). */
static void *thread_block(void *arg)
{
  *(void **)arg = PINHEAP_NAME(malloc)(SPARSE_SIZE);
  return NULL;
}

Test(sparse, a_threads_arena_takes_pages_at_once)
{
  void *p = NULL;
  pthread_t t;
  sparse_size = unmet_class_size();
  cr_assert_eq(pthread_create(&t, NULL, thread_block, &p), 0);
  pthread_join(t, NULL);
  cr_assert_not_null(p);
  cr_assert(in_slab_page(p), "a new thread's malloc(%zu) = %p is a chunk", SPARSE_SIZE, p);
  PINHEAP_NAME(free)(p);
}

Test(sparse, misuse_of_a_chunk_of_a_class_met_rarely_is_named)
{
  sparse_run();
  char *p = sp_blk[1];
  cr_assert(!in_slab_page(p));
  misuse_assert(act_free_twice, p, "free", "double free", p);
  misuse_assert(act_free, p + 16, "free", "invalid pointer", p + 16);
  misuse_assert(act_free, p + 8, "free", "invalid pointer", p + 8);
}
