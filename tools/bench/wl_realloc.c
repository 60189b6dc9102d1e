/*
 * wl_realloc.c -- the realloc growth workload, realloc_run().
 *
 * Each round grows two things from nothing:
 *   - a string, appended in random pieces of 1-48 characters, with a
 *     realloc to the exact new length for every piece (the naive string
 *     builder), up to a random length of 1-64 KiB;
 *   - a vector of 32-bit values pushed one by one, whose capacity doubles
 *     with realloc when full (the usual dynamic array), up to a random
 *     count of 1 Ki-256 Ki values.
 * realloc must keep the old contents: both are checked in full at the end
 * of the round.
 */
#include "bench.h"

#include <stdlib.h>

#define REALLOC_ROUNDS 3200u        /* rounds at scale 1, all threads */
#define REALLOC_STR_MIN 1024
#define REALLOC_STR_MAX (64 * 1024)
#define REALLOC_PIECE_MAX 48
#define REALLOC_VEC_MIN 1024
#define REALLOC_VEC_MAX (256 * 1024)

static char string_char(uint64_t round, uint64_t pos)
{
  return (char)('a' + (pos * 7 + round) % 26);
}

static uint32_t vector_value(uint64_t round, uint64_t i)
{
  return (uint32_t)((i + round) * 2654435761u);
}

static void string_grow(bench_thread_t *t, uint64_t round)
{
  size_t target = (size_t)rng_range(&t->rng, REALLOC_STR_MIN, REALLOC_STR_MAX);
  char *s = NULL;
  size_t len = 0;
  while (len < target) {
    size_t piece = (size_t)rng_range(&t->rng, 1, REALLOC_PIECE_MAX);
    s = bench_realloc(s, len + piece + 1, "realloc string");
    t->ops++;
    for (size_t i = 0; i < piece; i++)
      s[len + i] = string_char(round, len + i);
    len += piece;
    s[len] = '\0';
  }
  for (size_t i = 0; i < len; i++)
    if (s[i] != string_char(round, i))
      bench_fail("thread %d: string %p of %zu characters: byte %zu is 0x%02x, expected '%c' "
                 "(realloc lost data)", t->id, (void *)s, len, i, (unsigned char)s[i],
                 string_char(round, i));
  if (s[len] != '\0')
    bench_fail("thread %d: string %p lost its terminator at %zu", t->id, (void *)s, len);
  t->check += len;
  free(s);
  t->ops++;
}

static void vector_grow(bench_thread_t *t, uint64_t round)
{
  size_t target = (size_t)rng_range(&t->rng, REALLOC_VEC_MIN, REALLOC_VEC_MAX);
  size_t capacity = 4, count = 0;
  uint32_t *v = bench_malloc(capacity * sizeof(*v), "realloc vector");
  t->ops++;
  while (count < target) {
    if (count == capacity) {
      capacity *= 2;
      v = bench_realloc(v, capacity * sizeof(*v), "realloc vector");
      t->ops++;
    }
    v[count] = vector_value(round, count);
    count++;
  }
  for (size_t i = 0; i < count; i++)
    if (v[i] != vector_value(round, i))
      bench_fail("thread %d: vector %p of %zu values: value %zu is %u, expected %u "
                 "(realloc lost data)", t->id, (void *)v, count, i, v[i], vector_value(round, i));
  t->check += count;
  free(v);
  t->ops++;
}

static void realloc_thread(bench_thread_t *t)
{
  uint64_t rounds = bench_share(bench_scaled(REALLOC_ROUNDS, t->args->scale), t->id, t->nthreads);
  for (uint64_t r = 0; r < rounds; r++) {
    string_grow(t, r);
    vector_grow(t, r);
  }
}

void realloc_run(const bench_args_t *args, bench_result_t *result_p)
{
  bench_threads_run(args, realloc_thread, NULL, result_p);
}
