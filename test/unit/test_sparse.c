/*
 * test_sparse.c -- a slab class met rarely takes no page of its own
 * (allocator/front/slab.c: slab_next_page, tcache.c: tcache_sparse_malloc):
 * in an arena that has slab pages, the first PH_SLAB_SPARSE mallocs of a
 * class are chunks, the next one takes the class's page; the chunks are
 * freed, reused, reallocated and checked as chunks, and misuse of them is
 * named.  Each case runs its blocks on a thread of its own, whose arena is
 * new (no thread has exited in the test's process).  Main entry point: the
 * Test() cases.
 */
#include "test_util.h"

#include "allocator/heap/chunk.h"      /* the kind map */

#include <pthread.h>

#define SPARSE_SIZE 600                /* class 640 */

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

/* The case's blocks, made on a new thread (a new arena). */
static void *sp_blk[PH_SLAB_SPARSE + 1];
static void *sp_first;

static void *sparse_blocks(void *arg)
{
  (void)arg;
  sp_first = PINHEAP_NAME(malloc)(32);   /* the arena's first page: a slab block at once */
  for (unsigned k = 0; k <= PH_SLAB_SPARSE; k++) {
    sp_blk[k] = PINHEAP_NAME(malloc)(SPARSE_SIZE);
    if (sp_blk[k] != NULL)
      memset(sp_blk[k], (int)k + 1, SPARSE_SIZE);
  }
  return NULL;
}

static void sparse_run(void)
{
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, sparse_blocks, NULL), 0);
  pthread_join(t, NULL);
  cr_assert_not_null(sp_first);
  for (unsigned k = 0; k <= PH_SLAB_SPARSE; k++)
    cr_assert_not_null(sp_blk[k]);
}

Test(sparse, a_class_met_rarely_takes_no_page_until_the_threshold)
{
  sparse_run();
  cr_assert(in_slab_page(sp_first), "an arena's first class (malloc(32) = %p) has no page", sp_first);
  for (unsigned k = 0; k < PH_SLAB_SPARSE; k++) {
    cr_assert(!in_slab_page(sp_blk[k]), "malloc(%d) number %u of its class = %p is in a slab page "
              "of its own, expected a chunk", SPARSE_SIZE, k + 1, sp_blk[k]);
    size_t u = PINHEAP_NAME(malloc_usable_size)(sp_blk[k]);
    cr_assert(u >= SPARSE_SIZE && u < 640, "chunk %p: usable %zu", sp_blk[k], u);
  }
  void *last = sp_blk[PH_SLAB_SPARSE];
  cr_assert(in_slab_page(last), "malloc(%d) number %u = %p: still no page for the class",
            SPARSE_SIZE, PH_SLAB_SPARSE + 1, last);
  cr_assert_eq(PINHEAP_NAME(malloc_usable_size)(last), 640);
  for (unsigned k = 0; k <= PH_SLAB_SPARSE; k++)
    for (size_t i = 0; i < SPARSE_SIZE; i++)
      cr_assert_eq(((unsigned char *)sp_blk[k])[i], k + 1, "block %u overwritten at %zu", k, i);
  /* realloc keeps a chunk's bytes, whatever it moves to */
  unsigned char *r = PINHEAP_NAME(realloc)(sp_blk[0], 900);
  cr_assert_not_null(r);
  for (size_t i = 0; i < SPARSE_SIZE; i++)
    cr_assert_eq(r[i], 1, "realloc lost byte %zu", i);
  sp_blk[0] = r;
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
  for (unsigned k = 0; k <= PH_SLAB_SPARSE; k++)    /* another thread's: the chunks' remote path */
    PINHEAP_NAME(free)(sp_blk[k]);
  PINHEAP_NAME(free)(sp_first);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* On the thread that met the class: a freed chunk comes back for the same
 * size (its thread cache), and every malloc counts, so that a class used
 * in a malloc/free loop reaches its page after PH_SLAB_SPARSE rounds and
 * leaves the slow path. */
static void *loop_blocks(void *arg)
{
  void **out = arg;
  out[0] = PINHEAP_NAME(malloc)(32);
  void *first = PINHEAP_NAME(malloc)(SPARSE_SIZE);
  PINHEAP_NAME(free)(first);
  unsigned same = 1;
  for (unsigned k = 1; k < PH_SLAB_SPARSE; k++) {
    void *p = PINHEAP_NAME(malloc)(SPARSE_SIZE);
    same += p == first;
    PINHEAP_NAME(free)(p);
  }
  out[1] = (void *)(uintptr_t)same;
  out[2] = first;
  out[3] = PINHEAP_NAME(malloc)(SPARSE_SIZE);
  out[4] = (void *)(uintptr_t)PINHEAP_NAME(malloc_check)();
  return NULL;
}

Test(sparse, a_freed_chunk_is_reused_and_every_malloc_counts)
{
  static void *out[5];
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, loop_blocks, out), 0);
  pthread_join(t, NULL);
  cr_assert_eq((uintptr_t)out[1], PH_SLAB_SPARSE, "%u of %u malloc/free rounds got the freed chunk "
               "back", (unsigned)(uintptr_t)out[1], PH_SLAB_SPARSE);
  cr_assert(!in_slab_page(out[2]), "the first malloc(%d) = %p is a slab block", SPARSE_SIZE, out[2]);
  cr_assert(in_slab_page(out[3]), "after %u rounds malloc(%d) = %p is still a chunk", PH_SLAB_SPARSE,
            SPARSE_SIZE, out[3]);
  cr_assert_eq((uintptr_t)out[4], 0, "the heap checker found problems");
  PINHEAP_NAME(free)(out[3]);
  PINHEAP_NAME(free)(out[0]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
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
