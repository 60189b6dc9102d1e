/*
 * wl_frag.c -- the fragmentation workload, frag_run().
 *
 * Its figure of merit is the peak RSS that pinheap-bench reports (and the
 * RSS left at the end, after everything was freed).  Each round, every
 * thread:
 *   1. allocates FRAG_SMALL_BYTES (its share) of 16-256 byte blocks;
 *   2. frees 15 of every 16 of them, so the survivors pin most pages;
 *   3. allocates FRAG_MEDIUM_BYTES of 1-8 KiB blocks, which fit only into
 *      the holes an allocator managed to coalesce, or into new memory;
 *   4. frees every other medium block and allocates half as many small
 *      blocks again, which can reuse those holes;
 *   5. frees everything.
 * Every block is marked at both ends and checked before it is freed.
 */
#include "bench.h"

#include <stdlib.h>

#define FRAG_ROUNDS 6u              /* rounds at scale 1 (scale also shrinks the sizes) */
#define FRAG_SMALL_BYTES (48u << 20)  /* per round at scale 1, all threads */
#define FRAG_MEDIUM_BYTES (32u << 20)
#define FRAG_SMALL_MIN 16
#define FRAG_SMALL_MAX 256
#define FRAG_MEDIUM_MIN 1024
#define FRAG_MEDIUM_MAX 8192
#define FRAG_KEEP_EVERY 16

typedef struct frag_block {
  void *p;
  uint64_t tag;
  uint32_t size;
} frag_block_t;

typedef struct frag_list {
  frag_block_t *block;
  size_t count;
  size_t capacity;
} frag_list_t;

static void frag_list_init(bench_thread_t *t, frag_list_t *list, size_t capacity)
{
  list->block = bench_malloc(capacity * sizeof(*list->block), "frag block list");
  t->ops++;
  list->count = 0;
  list->capacity = capacity;
}

static void frag_list_destroy(bench_thread_t *t, frag_list_t *list)
{
  free(list->block);
  t->ops++;
}

/** Allocates blocks of min..max bytes until bytes are reached (or the list is full). */
static void frag_list_fill(bench_thread_t *t, frag_list_t *list, uint64_t bytes, size_t min,
                           size_t max)
{
  uint64_t got = 0;
  while (got < bytes && list->count < list->capacity) {
    frag_block_t *b = &list->block[list->count++];
    b->size = (uint32_t)rng_range(&t->rng, min, max);
    b->tag = rng_next(&t->rng);
    b->p = bench_malloc(b->size, "frag block");
    bench_mark(b->p, b->size, b->tag, "frag block");
    t->ops++;
    got += b->size;
  }
}

static void frag_block_release(bench_thread_t *t, frag_block_t *b)
{
  bench_mark_check(b->p, b->size, b->tag, "frag block");
  free(b->p);
  b->p = NULL;
  t->ops++;
  t->check++;
}

/** Frees the blocks whose index i has (i % every != keep), compacting the list. */
static void frag_list_thin(bench_thread_t *t, frag_list_t *list, size_t every, size_t keep)
{
  size_t out = 0;
  for (size_t i = 0; i < list->count; i++) {
    if (i % every == keep)
      list->block[out++] = list->block[i];
    else
      frag_block_release(t, &list->block[i]);
  }
  list->count = out;
}

static void frag_thread(bench_thread_t *t)
{
  double scale = t->args->scale < 1.0 ? t->args->scale : 1.0;
  uint64_t rounds = bench_scaled(FRAG_ROUNDS, t->args->scale > 1.0 ? t->args->scale : 1.0);
  uint64_t small_bytes = bench_share(bench_scaled(FRAG_SMALL_BYTES, scale), t->id, t->nthreads);
  uint64_t medium_bytes = bench_share(bench_scaled(FRAG_MEDIUM_BYTES, scale), t->id, t->nthreads);
  size_t small_cap = (size_t)(small_bytes / FRAG_SMALL_MIN) + 1;
  size_t medium_cap = (size_t)(medium_bytes / FRAG_MEDIUM_MIN) + 1;

  for (uint64_t r = 0; r < rounds; r++) {
    frag_list_t small, medium, again;
    frag_list_init(t, &small, small_cap);
    frag_list_init(t, &medium, medium_cap);
    frag_list_init(t, &again, small_cap / 2 + 1);

    frag_list_fill(t, &small, small_bytes, FRAG_SMALL_MIN, FRAG_SMALL_MAX);
    frag_list_thin(t, &small, FRAG_KEEP_EVERY, 0);
    frag_list_fill(t, &medium, medium_bytes, FRAG_MEDIUM_MIN, FRAG_MEDIUM_MAX);
    frag_list_thin(t, &medium, 2, 0);
    frag_list_fill(t, &again, small_bytes / 2, FRAG_SMALL_MIN, FRAG_SMALL_MAX);

    frag_list_thin(t, &again, 1, 1);   /* i % 1 is never 1: frees all */
    frag_list_thin(t, &medium, 1, 1);
    frag_list_thin(t, &small, 1, 1);
    frag_list_destroy(t, &again);
    frag_list_destroy(t, &medium);
    frag_list_destroy(t, &small);
  }
}

void frag_run(const bench_args_t *args, bench_result_t *result_p)
{
  bench_threads_run(args, frag_thread, NULL, result_p);
  /* Every block made is released after its check: ops = 2 * blocks + 6 lists per round. */
  uint64_t lists = 6 * bench_scaled(FRAG_ROUNDS, args->scale > 1.0 ? args->scale : 1.0) *
                   (uint64_t)args->threads;
  if (result_p->ops != 2 * result_p->check + lists)
    bench_fail("%llu blocks checked and released, but %llu allocator calls were made "
               "(expected %llu)", (unsigned long long)result_p->check,
               (unsigned long long)result_p->ops,
               (unsigned long long)(2 * result_p->check + lists));
}
