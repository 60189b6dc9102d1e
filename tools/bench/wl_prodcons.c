/*
 * wl_prodcons.c -- the producer/consumer workload, prodcons_run().
 *
 * THREADS is the number of producer/consumer pairs (so THREADS=1 runs two
 * threads).  A producer allocates blocks of 24-512 bytes, stamps each with
 * its pair and sequence number, and passes them in batches of PC_BATCH
 * through a small bounded queue to its consumer, which checks every block
 * (sequence numbers must arrive exactly in order) and frees it.  Every
 * block is therefore freed by a thread other than the one that allocated
 * it: the cross-thread free path of the allocator, under load.
 */
#include "bench.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PC_ITEMS 4000000u          /* blocks at scale 1, all pairs together */
#define PC_BATCH 64
#define PC_RING 8
#define PC_SIZE_MIN 24             /* tag, size, tail tag */
#define PC_SIZE_MAX 512

typedef struct pc_batch {
  uint32_t count;
  void *item[PC_BATCH];
} pc_batch_t;

typedef struct pc_pair {
  _Alignas(64) pthread_mutex_t lock;
  pthread_cond_t not_empty;
  pthread_cond_t not_full;
  uint64_t head;                   /* batches taken by the consumer */
  uint64_t tail;                   /* batches put by the producer */
  int done;                        /* producer finished */
  pc_batch_t ring[PC_RING];
  int id;
  uint64_t items;                  /* blocks this pair moves */
  uint64_t rng;
  uint64_t producer_ops;
  uint64_t consumer_ops;
  uint64_t consumed;
  uint64_t check;
} pc_pair_t;

static pc_pair_t pc_pairs[BENCH_THREADS_MAX];

static uint64_t pc_tag(int pair, uint64_t seq)
{
  return ((uint64_t)pair << 48) ^ seq ^ 0x5052304443303053ULL;
}

static void pc_batch_put(pc_pair_t *pair, const pc_batch_t *batch)
{
  pthread_mutex_lock(&pair->lock);
  while (pair->tail - pair->head == PC_RING)
    pthread_cond_wait(&pair->not_full, &pair->lock);
  pair->ring[pair->tail % PC_RING] = *batch;
  pair->tail++;
  pthread_cond_signal(&pair->not_empty);
  pthread_mutex_unlock(&pair->lock);
}

/** @return 0 when the producer is done and the queue is empty. */
static int pc_batch_take(pc_pair_t *pair, pc_batch_t *batch_p)
{
  pthread_mutex_lock(&pair->lock);
  while (pair->tail == pair->head && !pair->done)
    pthread_cond_wait(&pair->not_empty, &pair->lock);
  if (pair->tail == pair->head) {
    pthread_mutex_unlock(&pair->lock);
    return 0;
  }
  *batch_p = pair->ring[pair->head % PC_RING];
  pair->head++;
  pthread_cond_signal(&pair->not_full);
  pthread_mutex_unlock(&pair->lock);
  return 1;
}

static void *pc_producer(void *arg)
{
  pc_pair_t *pair = arg;
  pc_batch_t batch = {0};
  uint64_t rng = pair->rng;        /* locals: no sharing with the consumer */
  uint64_t items = pair->items;
  for (uint64_t seq = 0; seq < items; seq++) {
    size_t size = (size_t)rng_range(&rng, PC_SIZE_MIN, PC_SIZE_MAX);
    uint64_t *block = bench_malloc(size, "prodcons producer");
    bench_mark(block, size, pc_tag(pair->id, seq), "prodcons producer");
    block[1] = size;
    batch.item[batch.count++] = block;
    if (batch.count == PC_BATCH || seq + 1 == items) {
      pc_batch_put(pair, &batch);
      batch.count = 0;
    }
  }
  pthread_mutex_lock(&pair->lock);
  pair->producer_ops = items;
  pair->done = 1;
  pthread_cond_signal(&pair->not_empty);
  pthread_mutex_unlock(&pair->lock);
  return NULL;
}

static void *pc_consumer(void *arg)
{
  pc_pair_t *pair = arg;
  pc_batch_t batch;
  uint64_t seq = 0, check = 0;
  while (pc_batch_take(pair, &batch)) {
    for (uint32_t i = 0; i < batch.count; i++) {
      uint64_t *block = batch.item[i];
      uint64_t size = block[1];
      if (size < PC_SIZE_MIN || size > PC_SIZE_MAX)
        bench_fail("pair %d: block %p seq %llu: size word is %llu, expected %d..%d "
                   "(block overwritten)", pair->id, (void *)block, (unsigned long long)seq,
                   (unsigned long long)size, PC_SIZE_MIN, PC_SIZE_MAX);
      bench_mark_check(block, size, pc_tag(pair->id, seq), "prodcons consumer");
      check += seq ^ size;
      free(block);
      seq++;
    }
  }
  pair->consumer_ops = seq;
  pair->consumed = seq;
  pair->check = check;
  return NULL;
}

void prodcons_run(const bench_args_t *args, bench_result_t *result_p)
{
  int n = args->threads;
  uint64_t total = bench_scaled(PC_ITEMS, args->scale);
  pthread_t producers[BENCH_THREADS_MAX], consumers[BENCH_THREADS_MAX];

  for (int i = 0; i < n; i++) {
    pc_pair_t *pair = &pc_pairs[i];
    memset(pair, 0, sizeof(*pair));
    pthread_mutex_init(&pair->lock, NULL);
    pthread_cond_init(&pair->not_empty, NULL);
    pthread_cond_init(&pair->not_full, NULL);
    pair->id = i;
    pair->items = bench_share(total, i, n);
    pair->rng = rng_seed((uint64_t)i, 0x7072);
  }
  for (int i = 0; i < n; i++) {
    if (pthread_create(&consumers[i], NULL, pc_consumer, &pc_pairs[i]) != 0 ||
        pthread_create(&producers[i], NULL, pc_producer, &pc_pairs[i]) != 0)
      bench_fail("pthread_create for pair %d of %d failed", i, n);
  }
  result_p->ops = 0;
  result_p->check = 0;
  for (int i = 0; i < n; i++) {
    pc_pair_t *pair = &pc_pairs[i];
    pthread_join(producers[i], NULL);
    pthread_join(consumers[i], NULL);
    if (pair->consumed != pair->items)
      bench_fail("pair %d: consumer freed %llu blocks, producer made %llu", i,
                 (unsigned long long)pair->consumed, (unsigned long long)pair->items);
    result_p->ops += pair->producer_ops + pair->consumer_ops;
    result_p->check += pair->check;
    pthread_mutex_destroy(&pair->lock);
    pthread_cond_destroy(&pair->not_empty);
    pthread_cond_destroy(&pair->not_full);
  }
}
