/*
 * wl_falseshare.c -- the false-sharing workloads, falseshare_active_run()
 * and falseshare_passive_run() (after the cache-thrash and cache-scratch
 * benchmarks of Hoard).
 *
 * Active: every thread repeatedly allocates a small object, writes it
 * FS_WRITES times and frees it.  An allocator that hands neighbouring
 * objects of one cache line to different threads makes the threads fight
 * over that line.
 * Passive: the main thread allocates one small object per thread, back to
 * back, and hands them out; each thread writes its object, frees it and
 * then runs the active loop.  An allocator that lets a thread reuse the
 * object it was given (freed from a foreign heap) keeps the threads on the
 * main thread's shared cache lines.
 * Each object must hold exactly the number of writes made to it.
 */
#include "bench.h"

#include <stdlib.h>

#define FS_OBJECTS 1000000u         /* objects at scale 1, all threads */
#define FS_WRITES 2000              /* writes to each object */
#define FS_SIZE 8                   /* object size */

typedef struct fs_shared {
  void *handed[BENCH_THREADS_MAX];  /* passive: one object per thread */
} fs_shared_t;

static uint64_t fs_object_write(volatile uint64_t *obj, int thread_id)
{
  *obj = 0;
  for (int w = 0; w < FS_WRITES; w++)
    *obj += 1;
  uint64_t v = *obj;
  if (v != FS_WRITES)
    bench_fail("thread %d: object %p holds %llu after %d increments (another thread wrote "
               "into it)", thread_id, (void *)obj, (unsigned long long)v, FS_WRITES);
  return v;
}

static void fs_thread(bench_thread_t *t)
{
  fs_shared_t *shared = t->shared;
  uint64_t objects = bench_share(bench_scaled(FS_OBJECTS, t->args->scale), t->id, t->nthreads);

  if (shared->handed[t->id] != NULL) {
    t->check += fs_object_write(shared->handed[t->id], t->id);
    free(shared->handed[t->id]);
    t->ops++;
  }
  for (uint64_t i = 0; i < objects; i++) {
    uint64_t *obj = bench_malloc(FS_SIZE, "falseshare object");
    t->check += fs_object_write(obj, t->id);
    free(obj);
    t->ops += 2;
  }
}

static void fs_run(const bench_args_t *args, int passive, bench_result_t *result_p)
{
  static fs_shared_t shared;
  uint64_t ops = 0;
  for (int i = 0; i < args->threads; i++) {
    shared.handed[i] = passive ? bench_malloc(FS_SIZE, "falseshare handed object") : NULL;
    ops += passive ? 1 : 0;
  }
  bench_threads_run(args, fs_thread, &shared, result_p);
  result_p->ops += ops;

  uint64_t expected = (bench_scaled(FS_OBJECTS, args->scale) +
                       (passive ? (uint64_t)args->threads : 0)) * FS_WRITES;
  if (result_p->check != expected)
    bench_fail("objects hold %llu increments in all, expected %llu",
               (unsigned long long)result_p->check, (unsigned long long)expected);
}

void falseshare_active_run(const bench_args_t *args, bench_result_t *result_p)
{
  fs_run(args, 0, result_p);
}

void falseshare_passive_run(const bench_args_t *args, bench_result_t *result_p)
{
  fs_run(args, 1, result_p);
}
