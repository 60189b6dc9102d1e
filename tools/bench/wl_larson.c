/*
 * wl_larson.c -- the Larson-style server workload, larson_run().
 *
 * Each of THREADS workers owns LARSON_SLOTS live blocks of 16-512 bytes.
 * Round after round it frees a random slot and fills it with a new block of
 * a random size.  Every LARSON_HANDOFF_EVERY rounds it takes
 * LARSON_BATCH blocks out of random slots (refilling those slots), hands
 * them to the next worker's inbox, and frees whatever other workers handed
 * to it: a steady stream of blocks freed by a thread that did not allocate
 * them.  As in the original Larson benchmark the threads are short-lived:
 * each worker runs LARSON_GENERATIONS threads one after the other, and
 * each new thread takes over its predecessor's slots, so an allocator's
 * per-thread caches of exited threads must be handed on or given back.
 *
 * At the end the workers wait for each other (no handoff after that),
 * free what is left in their inboxes, then their slots.  Every block is
 * marked at both ends and checked before it is freed; the counts of
 * blocks allocated and freed must match.
 */
#include "bench.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LARSON_ROUNDS 12000000u      /* rounds at scale 1, all threads */
#define LARSON_SLOTS 1000
#define LARSON_SIZE_MIN 16
#define LARSON_SIZE_MAX 512
#define LARSON_HANDOFF_EVERY 256
#define LARSON_BATCH 32
#define LARSON_GENERATIONS 8

typedef struct larson_block {
  void *p;
  uint64_t tag;
  uint32_t size;
} larson_block_t;

typedef struct larson_batch {
  struct larson_batch *next;
  int count;
  larson_block_t block[LARSON_BATCH];
} larson_batch_t;

typedef struct larson_inbox {
  _Alignas(64) pthread_mutex_t lock;
  larson_batch_t *head;
} larson_inbox_t;

typedef struct larson_shared {
  larson_inbox_t inbox[BENCH_THREADS_MAX];
  pthread_barrier_t done;
} larson_shared_t;

/** One generation: a short-lived thread working on its worker's slots. */
typedef struct larson_generation {
  bench_thread_t *t;
  larson_block_t *slot;
  uint64_t rounds;
} larson_generation_t;

static void larson_fill(bench_thread_t *t, larson_block_t *b)
{
  b->size = (uint32_t)rng_range(&t->rng, LARSON_SIZE_MIN, LARSON_SIZE_MAX);
  b->tag = rng_next(&t->rng);
  b->p = bench_malloc(b->size, "larson block");
  bench_mark(b->p, b->size, b->tag, "larson block");
  t->ops++;
}

static void larson_release(bench_thread_t *t, larson_block_t *b)
{
  bench_mark_check(b->p, b->size, b->tag, "larson block");
  free(b->p);
  b->p = NULL;
  t->ops++;
  t->check++;
}

static void larson_inbox_drain(bench_thread_t *t)
{
  larson_shared_t *shared = t->shared;
  larson_inbox_t *box = &shared->inbox[t->id];
  pthread_mutex_lock(&box->lock);
  larson_batch_t *batch = box->head;
  box->head = NULL;
  pthread_mutex_unlock(&box->lock);
  while (batch != NULL) {
    larson_batch_t *next = batch->next;
    for (int k = 0; k < batch->count; k++)
      larson_release(t, &batch->block[k]);
    free(batch);
    t->ops++;
    batch = next;
  }
}

static void larson_handoff(bench_thread_t *t, larson_block_t *slot)
{
  larson_shared_t *shared = t->shared;
  larson_batch_t *batch = bench_malloc(sizeof(*batch), "larson batch");
  t->ops++;
  batch->count = LARSON_BATCH;
  for (int k = 0; k < LARSON_BATCH; k++) {
    larson_block_t *from = &slot[rng_next(&t->rng) % LARSON_SLOTS];
    batch->block[k] = *from;
    larson_fill(t, from);
  }
  larson_inbox_t *box = &shared->inbox[(t->id + 1) % t->nthreads];
  pthread_mutex_lock(&box->lock);
  batch->next = box->head;
  box->head = batch;
  pthread_mutex_unlock(&box->lock);
  larson_inbox_drain(t);
}

static void *larson_generation_main(void *arg)
{
  larson_generation_t *g = arg;
  bench_thread_t *t = g->t;
  for (uint64_t r = 0; r < g->rounds; r++) {
    larson_block_t *b = &g->slot[rng_next(&t->rng) % LARSON_SLOTS];
    larson_release(t, b);
    larson_fill(t, b);
    if ((r + 1) % LARSON_HANDOFF_EVERY == 0)
      larson_handoff(t, g->slot);
  }
  return NULL;
}

static void larson_thread(bench_thread_t *t)
{
  larson_shared_t *shared = t->shared;
  larson_block_t *slot = bench_malloc(LARSON_SLOTS * sizeof(*slot), "larson slot array");
  t->ops++;
  for (int i = 0; i < LARSON_SLOTS; i++)
    larson_fill(t, &slot[i]);

  uint64_t rounds = bench_share(bench_scaled(LARSON_ROUNDS, t->args->scale), t->id, t->nthreads);
  for (int gen = 0; gen < LARSON_GENERATIONS; gen++) {
    larson_generation_t g = {t, slot, bench_share(rounds, gen, LARSON_GENERATIONS)};
    pthread_t tid;
    int rc = pthread_create(&tid, NULL, larson_generation_main, &g);
    if (rc != 0)
      bench_fail("thread %d: pthread_create for generation %d failed: %s", t->id, gen,
                 strerror(rc));
    rc = pthread_join(tid, NULL);
    if (rc != 0)
      bench_fail("thread %d: pthread_join for generation %d failed: %s", t->id, gen,
                 strerror(rc));
  }

  pthread_barrier_wait(&shared->done);   /* no more handoffs after this */
  larson_inbox_drain(t);
  for (int i = 0; i < LARSON_SLOTS; i++)
    larson_release(t, &slot[i]);
  free(slot);
  t->ops++;
}

void larson_run(const bench_args_t *args, bench_result_t *result_p)
{
  static larson_shared_t shared;
  for (int i = 0; i < args->threads; i++) {
    pthread_mutex_init(&shared.inbox[i].lock, NULL);
    shared.inbox[i].head = NULL;
  }
  int rc = pthread_barrier_init(&shared.done, NULL, (unsigned)args->threads);
  if (rc != 0)
    bench_fail("pthread_barrier_init(%d) failed: %s", args->threads, strerror(rc));
  bench_threads_run(args, larson_thread, &shared, result_p);
  pthread_barrier_destroy(&shared.done);

  /* Every block allocated was checked and freed, exactly once: one per
   * round, every handed-off block, and the slots at the end. */
  uint64_t rounds = bench_scaled(LARSON_ROUNDS, args->scale);
  uint64_t batches = 0;
  for (int i = 0; i < args->threads; i++) {
    uint64_t mine = bench_share(rounds, i, args->threads);
    for (int gen = 0; gen < LARSON_GENERATIONS; gen++)
      batches += bench_share(mine, gen, LARSON_GENERATIONS) / LARSON_HANDOFF_EVERY;
  }
  uint64_t blocks = rounds + batches * LARSON_BATCH + (uint64_t)args->threads * LARSON_SLOTS;
  if (result_p->check != blocks)
    bench_fail("%llu blocks were checked and freed, expected %llu",
               (unsigned long long)result_p->check, (unsigned long long)blocks);
  for (int i = 0; i < args->threads; i++)
    if (shared.inbox[i].head != NULL)
      bench_fail("thread %d's inbox still holds blocks at the end", i);
}
