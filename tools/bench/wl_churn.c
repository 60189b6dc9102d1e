/*
 * wl_churn.c -- the server churn workload, churn_run().
 *
 * Each thread owns a set of CHURN_SLOTS live blocks of 16-1024 bytes and,
 * round after round, frees a random slot and fills it with a new block of
 * a random size: the steady state of a server handling requests.  Every
 * CHURN_SWAP_EVERY rounds a thread swaps its whole set through a shared
 * mailbox with whichever thread comes next, so blocks go on to be freed by
 * a thread that did not allocate them (as in the Larson benchmark).  Every
 * block is marked at both ends and checked before it is freed.
 */
#include "bench.h"

#include <stdatomic.h>
#include <stdlib.h>

#define CHURN_ROUNDS 20000000u     /* total rounds at scale 1, all threads */
#define CHURN_SLOTS 2000
#define CHURN_SWAP_EVERY 25000
#define CHURN_SIZE_MIN 16
#define CHURN_SIZE_MAX 1024

typedef struct churn_slot {
  void *block;
  uint64_t tag;
  uint32_t size;
} churn_slot_t;

typedef struct churn_set {
  churn_slot_t slot[CHURN_SLOTS];
} churn_set_t;

typedef struct churn_shared {
  _Atomic(churn_set_t *) mailbox;
} churn_shared_t;

static void churn_slot_fill(bench_thread_t *t, churn_slot_t *slot)
{
  slot->size = (uint32_t)rng_range(&t->rng, CHURN_SIZE_MIN, CHURN_SIZE_MAX);
  slot->tag = rng_next(&t->rng);
  slot->block = bench_malloc(slot->size, "churn slot");
  bench_mark(slot->block, slot->size, slot->tag, "churn slot");
  t->ops++;
}

static void churn_slot_release(bench_thread_t *t, churn_slot_t *slot)
{
  bench_mark_check(slot->block, slot->size, slot->tag, "churn slot");
  free(slot->block);
  slot->block = NULL;
  t->ops++;
  t->check++;
}

static churn_set_t *churn_set_new(bench_thread_t *t)
{
  churn_set_t *set = bench_malloc(sizeof(*set), "churn slot set");
  t->ops++;
  for (int i = 0; i < CHURN_SLOTS; i++)
    churn_slot_fill(t, &set->slot[i]);
  return set;
}

static void churn_set_release(bench_thread_t *t, churn_set_t *set)
{
  for (int i = 0; i < CHURN_SLOTS; i++)
    churn_slot_release(t, &set->slot[i]);
  free(set);
  t->ops++;
}

static void churn_thread(bench_thread_t *t)
{
  churn_shared_t *shared = t->shared;
  churn_set_t *set = churn_set_new(t);
  uint64_t rounds = bench_share(bench_scaled(CHURN_ROUNDS, t->args->scale), t->id, t->nthreads);

  for (uint64_t r = 0; r < rounds; r++) {
    churn_slot_t *slot = &set->slot[rng_next(&t->rng) % CHURN_SLOTS];
    churn_slot_release(t, slot);
    churn_slot_fill(t, slot);
    if ((r + 1) % CHURN_SWAP_EVERY == 0) {
      churn_set_t *other = atomic_exchange(&shared->mailbox, set);
      set = other != NULL ? other : churn_set_new(t);
    }
  }
  churn_set_release(t, set);
}

void churn_run(const bench_args_t *args, bench_result_t *result_p)
{
  static churn_shared_t shared;
  atomic_store(&shared.mailbox, NULL);
  bench_threads_run(args, churn_thread, &shared, result_p);

  churn_set_t *left = atomic_exchange(&shared.mailbox, NULL);
  if (left != NULL) {
    bench_thread_t main_thread = {.args = args};
    churn_set_release(&main_thread, left);
    result_p->ops += main_thread.ops;
    result_p->check += main_thread.check;
  }
  /* One checked release per round, plus the sets' contents at the end. */
  uint64_t rounds = bench_scaled(CHURN_ROUNDS, args->scale);
  if (result_p->check < rounds + CHURN_SLOTS)
    bench_fail("only %llu blocks were checked and released, expected at least %llu",
               (unsigned long long)result_p->check, (unsigned long long)(rounds + CHURN_SLOTS));
}
