/*
 * wl_live.c -- the live-heap workload, live_run(): how time and memory
 * scale with the amount of live small objects (scaling.py sweeps it from
 * 1 MiB to 8 GiB).
 *
 * The live heap is SCALE x LIVE_MIB_AT_SCALE_1 MiB of objects of 16-128 B
 * (multiples of 8, mean 72 B), split between the threads.  Each thread
 *   1. builds its share: allocates the objects and pushes each onto one of
 *      its lists chosen at random (about 64 objects per list);
 *   2. churns: as many times as it has objects, pops the head of a random
 *      list, checks and frees it, and pushes a new object of a new size
 *      onto another random list (so the frees are scattered over the whole
 *      heap, as in a long-running application);
 *   3. frees everything, list by list.
 * The work is proportional to the live heap: an allocator whose cost per
 * call does not grow with the heap shows a time slope of 1 (log-log),
 * and its peak RSS should be the live bytes plus a constant share.
 *
 * The list heads live in an mmap'd array (not malloc'd), so they weigh the
 * same for every allocator.  Each object holds a tag whose top byte is a
 * hash of the rest and whose low bits give the size, its list link, and
 * (from 24 B) the complemented tag in its last word; all are checked
 * before the object is freed.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define LIVE_MIB_AT_SCALE_1 64
#define LIVE_SIZE_MEAN 72
#define LIVE_PER_LIST 64

typedef struct live_object {
  uint64_t tag;
  struct live_object *next;
} live_object_t;

static uint64_t live_tag_make(uint64_t r, size_t size)
{
  uint64_t low = (r & ((1ULL << 56) - 1) & ~(uint64_t)31) | (uint64_t)(size / 8);
  return low | (((low * 0x9E3779B97F4A7C15ULL) >> 56) << 56);
}

static size_t live_tag_size(uint64_t tag)
{
  return (size_t)(tag & 31) * 8;
}

static void live_object_check(const bench_thread_t *t, const live_object_t *o)
{
  uint64_t low = o->tag & ((1ULL << 56) - 1);
  size_t size = live_tag_size(o->tag);
  uint64_t tail = ~o->tag;
  if ((o->tag >> 56) != ((low * 0x9E3779B97F4A7C15ULL) >> 56) || size < 16 || size > 128 ||
      (size >= 24 && memcmp((const char *)o + size - 8, &tail, 8) != 0))
    bench_fail("thread %d: object %p has a broken tag 0x%016llx or tail (object overwritten or "
               "handed out twice)", t->id, (const void *)o, (unsigned long long)o->tag);
}

static live_object_t *live_object_new(bench_thread_t *t)
{
  size_t size = 8 * (size_t)rng_range(&t->rng, 2, 16);
  live_object_t *o = bench_malloc(size, "live object");
  t->ops++;
  if (((uintptr_t)o & 15) != 0)
    bench_fail("thread %d: malloc(%zu) returned %p, not 16-byte aligned", t->id, size,
               (void *)o);
  o->tag = live_tag_make(rng_next(&t->rng), size);
  if (size >= 24) {
    uint64_t tail = ~o->tag;
    memcpy((char *)o + size - 8, &tail, 8);
  }
  return o;
}

static void live_object_free(bench_thread_t *t, live_object_t *o)
{
  live_object_check(t, o);
  free(o);
  t->ops++;
  t->check++;
}

static void live_thread(bench_thread_t *t)
{
  uint64_t bytes = bench_share((uint64_t)(t->args->scale * LIVE_MIB_AT_SCALE_1 * 1048576.0),
                               t->id, t->nthreads);
  uint64_t objects = bytes / LIVE_SIZE_MEAN;
  if (objects == 0)
    objects = 1;
  uint64_t nlists = objects / LIVE_PER_LIST;
  if (nlists < 16)
    nlists = 16;
  size_t heads_size = (size_t)nlists * sizeof(live_object_t *);
  live_object_t **head = mmap(NULL, heads_size, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (head == MAP_FAILED)
    bench_fail("thread %d: mmap of %zu bytes of list heads failed: %s", t->id, heads_size,
               strerror(errno));

  for (uint64_t i = 0; i < objects; i++) {
    live_object_t *o = live_object_new(t);
    uint64_t l = rng_next(&t->rng) % nlists;
    o->next = head[l];
    head[l] = o;
  }
  for (uint64_t i = 0; i < objects; i++) {
    uint64_t l = rng_next(&t->rng) % nlists;
    live_object_t *o = head[l];
    if (o != NULL) {
      head[l] = o->next;
      live_object_free(t, o);
    }
    o = live_object_new(t);
    l = rng_next(&t->rng) % nlists;
    o->next = head[l];
    head[l] = o;
  }
  for (uint64_t l = 0; l < nlists; l++) {
    while (head[l] != NULL) {
      live_object_t *o = head[l];
      head[l] = o->next;
      live_object_free(t, o);
    }
  }
  munmap(head, heads_size);
}

void live_run(const bench_args_t *args, bench_result_t *result_p)
{
  bench_threads_run(args, live_thread, NULL, result_p);
  /* Every object allocated was checked and freed. */
  if (result_p->ops != 2 * result_p->check)
    bench_fail("%llu allocator calls but %llu objects checked and freed; expected half as many "
               "frees as calls", (unsigned long long)result_p->ops,
               (unsigned long long)result_p->check);
  snprintf(result_p->extra, sizeof(result_p->extra), "\"live_mib\":%.3f",
           args->scale * LIVE_MIB_AT_SCALE_1);
}
