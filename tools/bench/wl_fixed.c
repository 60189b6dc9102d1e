/*
 * wl_fixed.c -- the fixed-size malloc/free loop, fixed_run().
 *
 * The tightest allocator loop: blocks of FIXED_SIZE bytes, each iteration
 * one malloc/free pair followed by a batch of FIXED_BATCH mallocs freed in
 * reverse order.  Each block gets a word written and read back before it
 * is freed, and blocks of one batch must all be distinct.  Meant to be run
 * with THREADS=1 (a single thread); with more, each thread runs its share
 * independently.
 */
#include "bench.h"

#include <stdlib.h>

#define FIXED_ITERS 3000000u        /* iterations at scale 1, all threads */
#define FIXED_SIZE 32
#define FIXED_BATCH 16

static void fixed_thread(bench_thread_t *t)
{
  uint64_t iters = bench_share(bench_scaled(FIXED_ITERS, t->args->scale), t->id, t->nthreads);
  uint64_t *batch[FIXED_BATCH];
  uint64_t check = 0;

  for (uint64_t i = 0; i < iters; i++) {
    uint64_t *one = malloc(FIXED_SIZE);
    if (one == NULL)
      bench_fail("thread %d: malloc(%d) returned NULL", t->id, FIXED_SIZE);
    one[0] = i;
    check += *(volatile uint64_t *)one;
    free(one);

    for (int b = 0; b < FIXED_BATCH; b++) {
      batch[b] = malloc(FIXED_SIZE);
      if (batch[b] == NULL)
        bench_fail("thread %d: malloc(%d) returned NULL", t->id, FIXED_SIZE);
      batch[b][0] = i * FIXED_BATCH + (uint64_t)b;
      batch[b][3] = ~batch[b][0];
    }
    for (int b = FIXED_BATCH - 1; b >= 0; b--) {
      uint64_t want = i * FIXED_BATCH + (uint64_t)b;
      if (batch[b][0] != want || batch[b][3] != ~want)
        bench_fail("thread %d: block %p of batch %llu holds 0x%llx/0x%llx, expected "
                   "0x%llx/0x%llx (two blocks of one batch overlap)", t->id, (void *)batch[b],
                   (unsigned long long)i, (unsigned long long)batch[b][0],
                   (unsigned long long)batch[b][3], (unsigned long long)want,
                   (unsigned long long)~want);
      check += batch[b][0];
      free(batch[b]);
    }
  }
  uint64_t tri = iters * (iters - 1) / 2;
  uint64_t expected = tri + (uint64_t)FIXED_BATCH * FIXED_BATCH * tri +
                      iters * (FIXED_BATCH * (FIXED_BATCH - 1) / 2);
  if (check != expected)
    bench_fail("thread %d: read back a sum of %llu, expected %llu", t->id,
               (unsigned long long)check, (unsigned long long)expected);
  t->ops = iters * 2 * (1 + FIXED_BATCH);
  t->check = check;
}

void fixed_run(const bench_args_t *args, bench_result_t *result_p)
{
  bench_threads_run(args, fixed_thread, NULL, result_p);
}
