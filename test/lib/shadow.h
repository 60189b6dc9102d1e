/*
 * shadow.h -- the shadow model behind pinheap's stress tests
 * (test_random.c, test_threads.c, test_release.c).
 *
 * The model knows, for every block the test holds, its request, its usable
 * size and an id; the block's bytes hold a pattern derived from (id, offset)
 * so that any byte written by someone else is found.  A sorted interval set
 * over [ptr, ptr+usable) proves that no two live blocks overlap.  A heap is
 * reached through a small table of functions (shadow_heap_t), so the same
 * operation sequences run on the global heap, on a growing mspace and on a
 * fixed-region mspace.
 *
 * Main entry points: shadow_set_insert() (records a fresh block, rejecting
 * overlaps), shadow_pattern_fill() / shadow_pattern_find_mismatch().
 *
 * Everything here is header-only and `static`: the test executables are not
 * part of the archive.  The model's own memory comes from glibc's malloc,
 * never from the allocator under test.
 *
 * Environment:
 *   PINHEAP_TEST_SEED   decimal or 0x-hex seed, or "random" (time based);
 *                       unset: each test's fixed default seed.
 *   PINHEAP_TEST_SCALE  positive number multiplying every step count and
 *                       time budget (default 1, or 0.25 under ASan).
 */
#ifndef PINHEAP_TEST_SHADOW_H
#define PINHEAP_TEST_SHADOW_H

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinheap.h"

#if defined(__SANITIZE_ADDRESS__)
#define SHADOW_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHADOW_UNDER_ASAN 1
#endif
#endif
#ifndef SHADOW_UNDER_ASAN
#define SHADOW_UNDER_ASAN 0
#endif

#define SHADOW_KIB ((size_t)1024)
#define SHADOW_MIB ((size_t)1024 * 1024)

/* ======================================================================= */
/*  Seeded PRNG: xoshiro256** seeded through splitmix64                     */
/* ======================================================================= */

typedef struct shadow_rng_s {
  uint64_t s[4];
} shadow_rng_t;

static inline uint64_t shadow_mix64(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static inline void shadow_rng_seed(shadow_rng_t *rng, uint64_t seed)
{
  uint64_t x = seed;

  for (int i = 0; i < 4; i++) {
    x += 0x9e3779b97f4a7c15ull;
    rng->s[i] = shadow_mix64(x);
  }
}

static inline uint64_t shadow_rotl(uint64_t x, int k)
{
  return (x << k) | (x >> (64 - k));
}

static inline uint64_t shadow_rng_next(shadow_rng_t *rng)
{
  uint64_t *s = rng->s;
  uint64_t result = shadow_rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;

  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = shadow_rotl(s[3], 45);
  return result;
}

/** Uniform in [0, n); n > 0. */
static inline uint64_t shadow_rng_below(shadow_rng_t *rng, uint64_t n)
{
  return (uint64_t)(((unsigned __int128)shadow_rng_next(rng) * n) >> 64);
}

/** Uniform in [lo, hi]. */
static inline uint64_t shadow_rng_range(shadow_rng_t *rng, uint64_t lo, uint64_t hi)
{
  return lo + shadow_rng_below(rng, hi - lo + 1);
}

/** Log-uniform in [lo, hi], lo >= 1: every size class gets its share. */
static inline size_t shadow_rng_log_range(shadow_rng_t *rng, size_t lo, size_t hi)
{
  int lo_bits = 63 - __builtin_clzll(lo);
  int hi_bits = 63 - __builtin_clzll(hi);
  int bits = (int)shadow_rng_range(rng, (uint64_t)lo_bits, (uint64_t)hi_bits);
  size_t base = (size_t)1 << bits;
  size_t v = base + (size_t)shadow_rng_below(rng, base);

  if (v < lo)
    v = lo;
  if (v > hi)
    v = hi;
  return v;
}

/* ======================================================================= */
/*  Environment: seed and scale (bad values are reported, never guessed)    */
/* ======================================================================= */

/** Reads PINHEAP_TEST_SEED.  @return 0, or -1 with a message in err. */
static inline int shadow_seed_get(uint64_t default_seed, char *err, size_t errlen,
                                  uint64_t *seed_p)
{
  const char *s = getenv("PINHEAP_TEST_SEED");
  char *end = NULL;
  unsigned long long v;

  if (s == NULL || *s == '\0') {
    *seed_p = default_seed;
    return 0;
  }
  if (strcmp(s, "random") == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *seed_p = shadow_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
                           (uint64_t)getpid());
    return 0;
  }
  errno = 0;
  v = strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
    snprintf(err, errlen,
             "PINHEAP_TEST_SEED='%s' is not a seed: expected a non-negative decimal or "
             "0x-hex integer below 2^64, or the word 'random'", s);
    return -1;
  }
  *seed_p = (uint64_t)v;
  return 0;
}

/** Reads PINHEAP_TEST_SCALE.  @return 0, or -1 with a message in err. */
static inline int shadow_scale_get(char *err, size_t errlen, double *scale_p)
{
  const char *s = getenv("PINHEAP_TEST_SCALE");
  char *end = NULL;
  double v;

  if (s == NULL || *s == '\0') {
    *scale_p = SHADOW_UNDER_ASAN ? 0.25 : 1.0;
    return 0;
  }
  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v > 0.0) || v > 1000.0) {
    snprintf(err, errlen,
             "PINHEAP_TEST_SCALE='%s' is not a scale: expected a number in (0, 1000], "
             "e.g. 0.25 or 4", s);
    return -1;
  }
  *scale_p = v;
  return 0;
}

/** n scaled, at least min_n. */
static inline size_t shadow_scaled(size_t n, double scale, size_t min_n)
{
  double v = (double)n * scale;
  return v < (double)min_n ? min_n : (size_t)v;
}

static inline double shadow_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ======================================================================= */
/*  Content pattern: word i of block id is a hash of (id, i)                */
/* ======================================================================= */

static inline uint64_t shadow_pattern_word(uint64_t id, size_t word)
{
  /* Cheap and distinct for every (id, word): two odd multipliers and a
   * final xorshift, so neighbouring words and neighbouring ids differ in
   * many bits. */
  uint64_t x = (id + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)word + 1) * 0xc2b2ae3d27d4eb4full;
  return x ^ (x >> 29);
}

/** Fills len bytes at p (any alignment) with the pattern of id. */
static inline void shadow_pattern_fill(void *p, size_t len, uint64_t id)
{
  size_t words = len / 8, i;

  for (i = 0; i < words; i++) {
    uint64_t w = shadow_pattern_word(id, i);
    memcpy((char *)p + i * 8, &w, 8);
  }
  if (len % 8 != 0) {
    uint64_t last = shadow_pattern_word(id, words);
    memcpy((char *)p + words * 8, &last, len % 8);
  }
}

/** @return the offset of the first byte in [0, len) that does not hold the
 *  pattern of id, or SIZE_MAX if all do. */
static inline size_t shadow_pattern_find_mismatch(const void *p, size_t len, uint64_t id)
{
  for (size_t i = 0; i < len; i += 8) {
    uint64_t want = shadow_pattern_word(id, i / 8);
    const unsigned char *a = (const unsigned char *)p + i, *b = (const unsigned char *)&want;
    for (size_t k = 0; k < 8 && i + k < len; k++)
      if (a[k] != b[k])
        return i + k;
  }
  return SIZE_MAX;
}

/** @return the offset of the first byte in [0, len) that is not c, or SIZE_MAX. */
static inline size_t shadow_bytes_find_not(const void *p, size_t len, uint8_t c)
{
  const unsigned char *b = p;

  for (size_t i = 0; i < len; i++)
    if (b[i] != c)
      return i;
  return SIZE_MAX;
}

/* ======================================================================= */
/*  Live blocks and the interval set                                        */
/* ======================================================================= */

typedef struct shadow_block_s {
  char *ptr;
  size_t req;      /* bytes asked for */
  size_t usable;   /* malloc_usable_size at allocation time */
  uint64_t id;     /* pattern id */
} shadow_block_t;

/*
 * blocks[] is unordered (swap-remove, so a random pick is O(1)); sorted[]
 * holds the same blocks' (start, end) ordered by start, so an insertion
 * finds its neighbours by binary search and any overlap is seen at once.
 * Both arrays are sized once: the test never has more than cap blocks.
 */
typedef struct shadow_span_s {
  uintptr_t start, end;
} shadow_span_t;

typedef struct shadow_set_s {
  shadow_block_t *blocks;
  shadow_span_t *sorted;
  size_t count, cap;
  size_t live_bytes;  /* sum of usable */
} shadow_set_t;

static inline int shadow_set_init(shadow_set_t *set, size_t cap)
{
  memset(set, 0, sizeof(*set));
  set->blocks = calloc(cap, sizeof(*set->blocks));
  set->sorted = calloc(cap, sizeof(*set->sorted));
  set->cap = cap;
  return set->blocks != NULL && set->sorted != NULL ? 0 : -1;
}

static inline void shadow_set_fini(shadow_set_t *set)
{
  free(set->blocks);
  free(set->sorted);
  memset(set, 0, sizeof(*set));
}

/** First index in sorted[] whose start is >= key. */
static inline size_t shadow_set_lower_bound(const shadow_set_t *set, uintptr_t key)
{
  size_t lo = 0, hi = set->count;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (set->sorted[mid].start < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/**
 * Records a block.  An empty span (usable 0) is given one byte, so that two
 * blocks at the same address are still an overlap.
 * @return 0; 1 if the set is full; -1 if [ptr, ptr+usable) overlaps a live
 * block, whose span is stored in *other_p.
 */
static inline int shadow_set_insert(shadow_set_t *set, const shadow_block_t *blk,
                                    shadow_span_t *other_p)
{
  uintptr_t start = (uintptr_t)blk->ptr;
  uintptr_t end = start + (blk->usable ? blk->usable : 1);
  size_t at;

  if (set->count == set->cap)
    return 1;
  at = shadow_set_lower_bound(set, start);
  if (at < set->count && set->sorted[at].start < end) {
    *other_p = set->sorted[at];
    return -1;
  }
  if (at > 0 && set->sorted[at - 1].end > start) {
    *other_p = set->sorted[at - 1];
    return -1;
  }
  memmove(&set->sorted[at + 1], &set->sorted[at], (set->count - at) * sizeof(set->sorted[0]));
  set->sorted[at].start = start;
  set->sorted[at].end = end;
  set->blocks[set->count++] = *blk;
  set->live_bytes += blk->usable;
  return 0;
}

/** Forgets blocks[idx] (the caller has already freed or moved it). */
static inline void shadow_set_remove(shadow_set_t *set, size_t idx)
{
  shadow_block_t *blk = &set->blocks[idx];
  size_t at = shadow_set_lower_bound(set, (uintptr_t)blk->ptr);

  if (at < set->count && set->sorted[at].start == (uintptr_t)blk->ptr)
    memmove(&set->sorted[at], &set->sorted[at + 1],
            (set->count - at - 1) * sizeof(set->sorted[0]));
  set->live_bytes -= blk->usable;
  set->blocks[idx] = set->blocks[--set->count];
}

/** @return 1 if [addr, addr+len) intersects a live block (its span in
 *  *other_p), else 0. */
static inline int shadow_set_intersects(const shadow_set_t *set, uintptr_t addr, size_t len,
                                        shadow_span_t *other_p)
{
  uintptr_t end = addr + len;
  size_t at = shadow_set_lower_bound(set, addr);

  if (at < set->count && set->sorted[at].start < end) {
    *other_p = set->sorted[at];
    return 1;
  }
  if (at > 0 && set->sorted[at - 1].end > addr) {
    *other_p = set->sorted[at - 1];
    return 1;
  }
  return 0;
}

/* ======================================================================= */
/*  A heap under test, behind one table                                     */
/* ======================================================================= */

typedef enum shadow_heap_kind_e {
  SHADOW_HEAP_GLOBAL,  /* pinheap_malloc and friends */
  SHADOW_HEAP_MSPACE,  /* create_mspace: grows from the OS */
  SHADOW_HEAP_FIXED    /* create_mspace_with_base: never leaves its region */
} shadow_heap_kind_t;

typedef struct shadow_heap_s {
  shadow_heap_kind_t kind;
  const char *name;
  pinheap_mspace msp;        /* NULL for the global heap */
  uintptr_t lo, hi;          /* FIXED: the caller's region */
} shadow_heap_t;

static inline void *shadow_heap_malloc(const shadow_heap_t *h, size_t n)
{
  return h->msp ? PINHEAP_NAME(mspace_malloc)(h->msp, n) : PINHEAP_NAME(malloc)(n);
}

static inline void *shadow_heap_calloc(const shadow_heap_t *h, size_t n, size_t m)
{
  return h->msp ? PINHEAP_NAME(mspace_calloc)(h->msp, n, m) : PINHEAP_NAME(calloc)(n, m);
}

static inline void *shadow_heap_realloc(const shadow_heap_t *h, void *p, size_t n)
{
  return h->msp ? PINHEAP_NAME(mspace_realloc)(h->msp, p, n) : PINHEAP_NAME(realloc)(p, n);
}

static inline void *shadow_heap_memalign(const shadow_heap_t *h, size_t a, size_t n)
{
  return h->msp ? PINHEAP_NAME(mspace_memalign)(h->msp, a, n) : PINHEAP_NAME(memalign)(a, n);
}

static inline void shadow_heap_free(const shadow_heap_t *h, void *p)
{
  if (h->msp)
    PINHEAP_NAME(mspace_free)(h->msp, p);
  else
    PINHEAP_NAME(free)(p);
}

static inline size_t shadow_heap_usable(const shadow_heap_t *h, void *p)
{
  return h->msp ? PINHEAP_NAME(mspace_usable_size)(p) : PINHEAP_NAME(malloc_usable_size)(p);
}

static inline int shadow_heap_trim(const shadow_heap_t *h, size_t pad)
{
  return h->msp ? PINHEAP_NAME(mspace_trim)(h->msp, pad) : PINHEAP_NAME(malloc_trim)(pad);
}

static inline int shadow_heap_check(const shadow_heap_t *h)
{
  return h->msp ? PINHEAP_NAME(mspace_check)(h->msp) : PINHEAP_NAME(malloc_check)();
}

static inline struct mallinfo2 shadow_heap_mallinfo(const shadow_heap_t *h)
{
  return h->msp ? PINHEAP_NAME(mspace_mallinfo)(h->msp) : PINHEAP_NAME(mallinfo2)();
}

/** FIXED heaps: is [p, p+len) inside the caller's region? */
static inline bool shadow_heap_owns(const shadow_heap_t *h, const void *p, size_t len)
{
  uintptr_t a = (uintptr_t)p;

  if (h->kind != SHADOW_HEAP_FIXED)
    return true;
  return a >= h->lo && a <= h->hi && len <= h->hi - a;
}

#endif /* PINHEAP_TEST_SHADOW_H */
