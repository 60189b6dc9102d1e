/*
 * wl_large.c -- the large-block workload, large_run().
 *
 * Each thread keeps LARGE_LIVE blocks alive and replaces them one at a
 * time with a block of a new size, log-uniform in 256 KiB .. 64 MiB: the
 * buffers of a communication runtime.  Each new block is written every
 * LARGE_STRIDE bytes and at its last word (so the pages really get
 * touched) and all those words are checked before it is freed.  This
 * exercises the mmap threshold, the reuse or return of large free memory,
 * and page-fault cost.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#define LARGE_ALLOCS 3000u          /* blocks at scale 1, all threads */
#define LARGE_LIVE 3                /* live blocks per thread */
#define LARGE_MIN (256u * 1024)
#define LARGE_MAX (64u * 1024 * 1024)
#define LARGE_STRIDE (64u * 1024)

typedef struct large_slot {
  unsigned char *block;
  size_t size;
  uint64_t tag;
} large_slot_t;

static uint64_t large_word(uint64_t tag, size_t off)
{
  return tag ^ (off * 0x9E3779B97F4A7C15ULL);
}

static void large_slot_fill(bench_thread_t *t, large_slot_t *slot)
{
  unsigned shift = (unsigned)rng_range(&t->rng, 0, 7);
  size_t base = (size_t)LARGE_MIN << shift;          /* 256 KiB .. 32 MiB */
  slot->size = base + (size_t)(rng_next(&t->rng) % base);
  if (slot->size > LARGE_MAX)
    slot->size = LARGE_MAX;
  slot->size &= ~(size_t)7;
  slot->tag = rng_next(&t->rng);
  slot->block = bench_malloc(slot->size, "large block");
  t->ops++;
  if (((uintptr_t)slot->block & 15) != 0)
    bench_fail("thread %d: malloc(%zu) returned %p, not 16-byte aligned", t->id, slot->size,
               (void *)slot->block);
  for (size_t off = 0; off < slot->size; off += LARGE_STRIDE) {
    uint64_t w = large_word(slot->tag, off);
    memcpy(slot->block + off, &w, sizeof(w));
  }
  uint64_t last = ~slot->tag;
  memcpy(slot->block + slot->size - sizeof(last), &last, sizeof(last));
}

static void large_slot_release(bench_thread_t *t, large_slot_t *slot)
{
  for (size_t off = 0; off < slot->size; off += LARGE_STRIDE) {
    uint64_t w;
    memcpy(&w, slot->block + off, sizeof(w));
    if (w != large_word(slot->tag, off))
      bench_fail("thread %d: block %p (%zu bytes): word at offset %zu is 0x%016llx, expected "
                 "0x%016llx (block overwritten or handed out twice)", t->id,
                 (void *)slot->block, slot->size, off, (unsigned long long)w,
                 (unsigned long long)large_word(slot->tag, off));
    t->check++;
  }
  uint64_t last;
  memcpy(&last, slot->block + slot->size - sizeof(last), sizeof(last));
  if (last != ~slot->tag)
    bench_fail("thread %d: block %p (%zu bytes): last word is 0x%016llx, expected 0x%016llx "
               "(block overwritten or handed out twice)",
               t->id, (void *)slot->block, slot->size, (unsigned long long)last,
               (unsigned long long)~slot->tag);
  free(slot->block);
  t->ops++;
  slot->block = NULL;
}

static void large_thread(bench_thread_t *t)
{
  large_slot_t slots[LARGE_LIVE] = {{0}};
  uint64_t allocs = bench_share(bench_scaled(LARGE_ALLOCS, t->args->scale), t->id, t->nthreads);
  for (uint64_t i = 0; i < allocs; i++) {
    large_slot_t *slot = &slots[i % LARGE_LIVE];
    if (slot->block != NULL)
      large_slot_release(t, slot);
    large_slot_fill(t, slot);
  }
  for (int k = 0; k < LARGE_LIVE; k++)
    if (slots[k].block != NULL)
      large_slot_release(t, &slots[k]);
}

void large_run(const bench_args_t *args, bench_result_t *result_p)
{
  bench_threads_run(args, large_thread, NULL, result_p);
  uint64_t allocs = bench_scaled(LARGE_ALLOCS, args->scale);
  if (result_p->ops != 2 * allocs)
    bench_fail("%llu allocator calls, expected %llu", (unsigned long long)result_p->ops,
               (unsigned long long)(2 * allocs));
}
