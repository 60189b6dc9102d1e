/*
 * wl_largechurn.c -- the large-block churn workload, largechurn_run().
 *
 * The process keeps LARGECHURN_LIVE blocks alive (split between the
 * threads, at least one each) and, round after round, each thread replaces
 * one of its blocks chosen at random by a new block whose size is
 * log-uniform in 256 KiB .. 64 MiB (mean about 11.5 MiB).  Every page of a
 * new block is written (one word per 4 KiB, and the last word), and every
 * one of those words is checked before the block is freed.
 *
 * Unlike `large` (3 blocks per thread replaced in turn, written every
 * 64 KiB), this one writes every page, so what an allocator pays for
 * giving freed large blocks back to the OS (page faults on the next use)
 * and what it holds for keeping them (peak RSS) both show.
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LARGECHURN_ALLOCS 400u       /* blocks allocated at scale 1, all threads */
#define LARGECHURN_LIVE 8            /* live blocks, all threads (at least 1 per thread) */
#define LARGECHURN_SLOTS_MAX 8
#define LARGECHURN_MIN (256.0 * 1024)
#define LARGECHURN_MAX (64.0 * 1024 * 1024)
#define LARGECHURN_PAGE 4096u

typedef struct largechurn_slot {
  unsigned char *block;
  size_t size;
  uint64_t tag;
} largechurn_slot_t;

static uint64_t largechurn_word(uint64_t tag, size_t off)
{
  return tag ^ (off * 0xC2B2AE3D27D4EB4FULL);
}

static void largechurn_fill(bench_thread_t *t, largechurn_slot_t *slot)
{
  double u = (double)(rng_next(&t->rng) >> 11) / 9007199254740992.0;   /* [0, 1) */
  size_t size = (size_t)(LARGECHURN_MIN * exp(u * log(LARGECHURN_MAX / LARGECHURN_MIN)));
  size &= ~(size_t)7;   /* >= 256 KiB: the last word never meets a page word */
  slot->size = size;
  slot->tag = rng_next(&t->rng);
  slot->block = bench_malloc(size, "largechurn block");
  t->ops++;
  if (((uintptr_t)slot->block & 15) != 0)
    bench_fail("thread %d: malloc(%zu) returned %p, not 16-byte aligned", t->id, size,
               (void *)slot->block);
  for (size_t off = 0; off < size - sizeof(uint64_t); off += LARGECHURN_PAGE) {
    uint64_t w = largechurn_word(slot->tag, off);
    memcpy(slot->block + off, &w, sizeof(w));
  }
  uint64_t last = ~slot->tag;
  memcpy(slot->block + size - sizeof(last), &last, sizeof(last));
}

static void largechurn_release(bench_thread_t *t, largechurn_slot_t *slot)
{
  for (size_t off = 0; off < slot->size - sizeof(uint64_t); off += LARGECHURN_PAGE) {
    uint64_t w;
    memcpy(&w, slot->block + off, sizeof(w));
    if (w != largechurn_word(slot->tag, off))
      bench_fail("thread %d: block %p (%zu bytes): word at offset %zu is 0x%016llx, expected "
                 "0x%016llx (block overwritten or handed out twice)", t->id,
                 (void *)slot->block, slot->size, off, (unsigned long long)w,
                 (unsigned long long)largechurn_word(slot->tag, off));
  }
  uint64_t last;
  memcpy(&last, slot->block + slot->size - sizeof(last), sizeof(last));
  if (last != ~slot->tag)
    bench_fail("thread %d: block %p (%zu bytes): last word is 0x%016llx, expected 0x%016llx "
               "(block overwritten or handed out twice)", t->id, (void *)slot->block,
               slot->size, (unsigned long long)last, (unsigned long long)~slot->tag);
  free(slot->block);
  t->ops++;
  t->check++;
  slot->block = NULL;
}

static void largechurn_thread(bench_thread_t *t)
{
  largechurn_slot_t slots[LARGECHURN_SLOTS_MAX] = {{0}};
  int live = (int)bench_share(LARGECHURN_LIVE, t->id, t->nthreads);
  if (live < 1)
    live = 1;
  uint64_t allocs = bench_share(bench_scaled(LARGECHURN_ALLOCS, t->args->scale), t->id,
                                t->nthreads);
  for (uint64_t i = 0; i < allocs; i++) {
    /* The first rounds fill the slots; then a random one is replaced. */
    largechurn_slot_t *slot =
        i < (uint64_t)live ? &slots[i] : &slots[rng_next(&t->rng) % (uint64_t)live];
    if (slot->block != NULL)
      largechurn_release(t, slot);
    largechurn_fill(t, slot);
  }
  for (int k = 0; k < live; k++)
    if (slots[k].block != NULL)
      largechurn_release(t, &slots[k]);
}

void largechurn_run(const bench_args_t *args, bench_result_t *result_p)
{
  bench_threads_run(args, largechurn_thread, NULL, result_p);
  uint64_t allocs = bench_scaled(LARGECHURN_ALLOCS, args->scale);
  if (result_p->ops != 2 * allocs || result_p->check != allocs)
    bench_fail("%llu allocator calls and %llu blocks checked, expected %llu and %llu",
               (unsigned long long)result_p->ops, (unsigned long long)result_p->check,
               (unsigned long long)(2 * allocs), (unsigned long long)allocs);
}
