/*
 * wl_regcache.c -- the registration-cache workload, regcache_run(): what a
 * communication runtime pays for the allocator's releases.
 *
 * An MPI-like loop: each thread sends REGCACHE_MESSAGES (its share) messages.
 * For each it mallocs a message buffer, looks the buffer up in a simulated
 * registration cache (registering it on a miss, as a runtime that leaves
 * memory pinned does with ibv_reg_mr), writes every page of it (the
 * payload, as the NIC's DMA would), and frees it once REGCACHE_WINDOW newer
 * messages are in flight.  A small request object (64-256 B) is allocated
 * and freed with each message, and with every other one an envelope
 * (16-48 B).
 *
 * Message sizes: most messages reuse one of REGCACHE_KINDS fixed sizes
 * (the buffers of an iterative code: halo exchanges, reductions), picked
 * with Zipf-like weights; REGCACHE_ONEOFF_PERCENT % get a fresh size.  All
 * sizes come from one mix: 60 % in 4-64 KiB, 30 % in 64 KiB-1 MiB, 9 % in
 * 1-16 MiB, 1 % in 16-64 MiB, log-uniform within each band.
 *
 * The cache: a sorted array of non-overlapping page-aligned registered
 * ranges (binary search), at most REGCACHE_ENTRIES_MAX entries and
 * REGCACHE_BYTES_MAX registered bytes (least recently used evicted).  A
 * lookup hits when one entry covers the whole buffer; a miss registers the
 * buffer merged with every entry it overlaps (those are deregistered), as
 * UCX's rcache merges regions.  Registration is costed per page with a
 * busy loop on the monotonic clock: REG_BASE_NS + REG_NS_PER_MIB per MiB
 * (defaults 2 us + 4 us/MiB; deregistration 1 us + 1 us/MiB), overridable
 * with BENCH_REGCACHE_REG_BASE_NS and BENCH_REGCACHE_REG_NS_PER_MIB.
 *
 * Invalidation: every range the allocator (or anyone) gives back to the OS
 * is reported by release_spy.c (pinheap's release listener under pinheap,
 * a seccomp trap on munmap/mremap/brk/madvise for the others) and queued;
 * before each lookup the queue is drained and every entry overlapping a
 * released range is deregistered: an invalidation.  A stale entry would
 * make the NIC write pages the process no longer owns, which is why the
 * runtime must know.
 *
 * Reported in "extra": lookups, hits, hit_rate, invalidations, evictions,
 * registrations, registered_mib, release_events, released_mib,
 * reg_seconds (simulated registration time included in seconds) and the
 * observer.  Every page word of a buffer is checked before it is freed.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REGCACHE_MESSAGES 6000u       /* messages at scale 1, all threads */
#define REGCACHE_KINDS 24
#define REGCACHE_ONEOFF_PERCENT 15
#define REGCACHE_WINDOW 4             /* messages in flight per thread */
#define REGCACHE_ENTRIES_MAX 1024
#define REGCACHE_BYTES_MAX ((uint64_t)2 << 30)
#define REGCACHE_PAGE 4096u
#define REGCACHE_DRAIN_BATCH 256
#define REG_BASE_NS_DEFAULT 2000
#define REG_NS_PER_MIB_DEFAULT 4000
#define DEREG_BASE_NS 1000
#define DEREG_NS_PER_MIB 1000

typedef struct regcache_entry {
  uintptr_t start;                /* page-aligned */
  uintptr_t end;
  uint64_t last_use;
} regcache_entry_t;

typedef struct regcache {
  pthread_mutex_t lock;
  regcache_entry_t entry[REGCACHE_ENTRIES_MAX + 1];
  size_t count;
  uint64_t bytes;                 /* registered now */
  uint64_t clock;                 /* LRU stamp */
  uint64_t reg_base_ns, reg_ns_per_mib;
  /* statistics */
  uint64_t lookups, hits, invalidations, evictions, registrations, overflows;
  uint64_t registered_bytes, reg_ns;
} regcache_t;

typedef struct regcache_shared {
  regcache_t cache;
  size_t kind_size[REGCACHE_KINDS];
  uint64_t kind_cumulative[REGCACHE_KINDS];   /* Zipf weights, scaled */
  uint64_t kind_total;
} regcache_shared_t;

typedef struct regcache_message {
  unsigned char *buf;
  size_t size;
  uint64_t *request;
  size_t request_size;
  uint64_t *envelope;             /* every other message: a 16-48 B header */
  size_t envelope_size;
  uint64_t tag;
} regcache_message_t;

/* ---- the simulated registration cost ----------------------------------------- */

static uint64_t clock_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cost_spend(regcache_t *c, uint64_t ns)
{
  uint64_t end = clock_ns() + ns;
  while (clock_ns() < end)
    ;
  c->reg_ns += ns;
}

static uint64_t cost_register(const regcache_t *c, uint64_t bytes)
{
  return c->reg_base_ns + bytes * c->reg_ns_per_mib / (1u << 20);
}

static uint64_t cost_deregister(uint64_t bytes)
{
  return DEREG_BASE_NS + bytes * DEREG_NS_PER_MIB / (1u << 20);
}

/* ---- the cache (lock held) ------------------------------------------------------- */

/** Index of the first entry whose end is above address (entries are sorted
 *  and disjoint, so ends are sorted too). */
static size_t regcache_first_above(const regcache_t *c, uintptr_t address)
{
  size_t lo = 0, hi = c->count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c->entry[mid].end <= address)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/** Deregisters and removes entries [i, j). */
static void regcache_remove(regcache_t *c, size_t i, size_t j)
{
  for (size_t k = i; k < j; k++) {
    uint64_t bytes = c->entry[k].end - c->entry[k].start;
    cost_spend(c, cost_deregister(bytes));
    c->bytes -= bytes;
  }
  memmove(&c->entry[i], &c->entry[j], (c->count - j) * sizeof(c->entry[0]));
  c->count -= j - i;
}

static void regcache_invalidate(regcache_t *c, uintptr_t address, size_t length)
{
  uintptr_t s = address & ~(uintptr_t)(REGCACHE_PAGE - 1);
  uintptr_t e = (address + length + REGCACHE_PAGE - 1) & ~(uintptr_t)(REGCACHE_PAGE - 1);
  size_t i = regcache_first_above(c, s);
  size_t j = i;
  while (j < c->count && c->entry[j].start < e)
    j++;
  c->invalidations += j - i;
  regcache_remove(c, i, j);
}

static void regcache_drain(regcache_t *c)
{
  bench_release_t batch[REGCACHE_DRAIN_BATCH];
  for (;;) {
    int overflowed = 0;
    size_t n = release_spy_drain(batch, REGCACHE_DRAIN_BATCH, &overflowed);
    if (overflowed) {             /* releases were lost: nothing can be trusted */
      c->overflows++;
      c->invalidations += c->count;
      regcache_remove(c, 0, c->count);
    }
    for (size_t k = 0; k < n; k++)
      regcache_invalidate(c, batch[k].address, batch[k].length);
    if (n < REGCACHE_DRAIN_BATCH)
      return;
  }
}

/** Evicts the least recently used entry other than index keep; returns the
 *  new index of keep. */
static size_t regcache_evict(regcache_t *c, size_t keep)
{
  size_t victim = keep == 0 ? 1 : 0;
  for (size_t k = 0; k < c->count; k++)
    if (k != keep && c->entry[k].last_use < c->entry[victim].last_use)
      victim = k;
  regcache_remove(c, victim, victim + 1);
  c->evictions++;
  return victim < keep ? keep - 1 : keep;
}

/** Looks [address, address+length) up, registering it on a miss.
 *  @return 1 on a hit. */
static int regcache_lookup(regcache_t *c, uintptr_t address, size_t length)
{
  uintptr_t s = address & ~(uintptr_t)(REGCACHE_PAGE - 1);
  uintptr_t e = (address + length + REGCACHE_PAGE - 1) & ~(uintptr_t)(REGCACHE_PAGE - 1);
  c->lookups++;
  c->clock++;
  size_t i = regcache_first_above(c, s);
  if (i < c->count && c->entry[i].start <= s && c->entry[i].end >= e) {
    c->entry[i].last_use = c->clock;
    c->hits++;
    return 1;
  }
  size_t j = i;
  while (j < c->count && c->entry[j].start < e) {
    if (c->entry[j].start < s)
      s = c->entry[j].start;
    if (c->entry[j].end > e)
      e = c->entry[j].end;
    j++;
  }
  regcache_remove(c, i, j);
  cost_spend(c, cost_register(c, e - s));
  memmove(&c->entry[i + 1], &c->entry[i], (c->count - i) * sizeof(c->entry[0]));
  c->entry[i] = (regcache_entry_t){s, e, c->clock};
  c->count++;
  c->bytes += e - s;
  c->registrations++;
  c->registered_bytes += e - s;
  while (c->count > REGCACHE_ENTRIES_MAX || (c->bytes > REGCACHE_BYTES_MAX && c->count > 1))
    i = regcache_evict(c, i);
  return 0;
}

/* ---- the message loop ------------------------------------------------------------ */

/** A size from the mix of the banner. */
static size_t regcache_size_draw(uint64_t *rng)
{
  static const double band_lo[4] = {4096.0, 65536.0, 1048576.0, 16777216.0};
  static const double band_span[4] = {16.0, 16.0, 16.0, 4.0};   /* the last ends at 64 MiB */
  int pick = (int)(rng_next(rng) % 100);
  int band = pick < 60 ? 0 : pick < 90 ? 1 : pick < 99 ? 2 : 3;
  double u = (double)(rng_next(rng) >> 11) / 9007199254740992.0;
  size_t size = (size_t)(band_lo[band] * exp(u * log(band_span[band])));
  size &= ~(size_t)7;
  return size < 4096 ? 4096 : size;
}

static uint64_t regcache_word(uint64_t tag, size_t off)
{
  return tag ^ (off * 0xA24BAED4963EE407ULL);
}

static void regcache_send(bench_thread_t *t, regcache_message_t *m, size_t size)
{
  regcache_shared_t *shared = t->shared;
  regcache_t *c = &shared->cache;
  m->size = size;
  m->tag = rng_next(&t->rng);
  m->buf = bench_malloc(size, "regcache message buffer");
  m->request_size = (size_t)rng_range(&t->rng, 64, 256);
  m->request = bench_malloc(m->request_size, "regcache request");
  t->ops += 2;
  bench_mark(m->request, m->request_size, m->tag, "regcache request");
  m->envelope = NULL;
  if (m->tag & 1) {               /* varies the pattern of calls the allocator sees */
    m->envelope_size = (size_t)rng_range(&t->rng, 16, 48);
    m->envelope = bench_malloc(m->envelope_size, "regcache envelope");
    t->ops++;
    bench_mark(m->envelope, m->envelope_size, ~m->tag, "regcache envelope");
  }
  if (((uintptr_t)m->buf & 15) != 0)
    bench_fail("thread %d: malloc(%zu) returned %p, not 16-byte aligned", t->id, size,
               (void *)m->buf);

  pthread_mutex_lock(&c->lock);
  regcache_drain(c);
  regcache_lookup(c, (uintptr_t)m->buf, size);
  pthread_mutex_unlock(&c->lock);

  for (size_t off = 0; off < size - sizeof(uint64_t); off += REGCACHE_PAGE) {
    uint64_t w = regcache_word(m->tag, off);
    memcpy(m->buf + off, &w, sizeof(w));
  }
  uint64_t last = ~m->tag;
  memcpy(m->buf + size - sizeof(last), &last, sizeof(last));
}

static void regcache_complete(bench_thread_t *t, regcache_message_t *m)
{
  for (size_t off = 0; off < m->size - sizeof(uint64_t); off += REGCACHE_PAGE) {
    uint64_t w;
    memcpy(&w, m->buf + off, sizeof(w));
    if (w != regcache_word(m->tag, off))
      bench_fail("thread %d: buffer %p (%zu bytes): word at offset %zu is 0x%016llx, expected "
                 "0x%016llx (buffer overwritten or handed out twice)", t->id, (void *)m->buf,
                 m->size, off, (unsigned long long)w,
                 (unsigned long long)regcache_word(m->tag, off));
  }
  uint64_t last;
  memcpy(&last, m->buf + m->size - sizeof(last), sizeof(last));
  if (last != ~m->tag)
    bench_fail("thread %d: buffer %p (%zu bytes): last word is 0x%016llx, expected 0x%016llx "
               "(buffer overwritten or handed out twice)", t->id, (void *)m->buf, m->size,
               (unsigned long long)last, (unsigned long long)~m->tag);
  bench_mark_check(m->request, m->request_size, m->tag, "regcache request");
  if (m->envelope != NULL) {
    bench_mark_check(m->envelope, m->envelope_size, ~m->tag, "regcache envelope");
    free(m->envelope);
    t->ops++;
  }
  free(m->request);
  free(m->buf);
  t->ops += 2;
  t->check++;
  m->buf = NULL;
}

static void regcache_thread(bench_thread_t *t)
{
  regcache_shared_t *shared = t->shared;
  regcache_message_t window[REGCACHE_WINDOW];
  memset(window, 0, sizeof(window));
  uint64_t messages = bench_share(bench_scaled(REGCACHE_MESSAGES, t->args->scale), t->id,
                                  t->nthreads);
  for (uint64_t i = 0; i < messages; i++) {
    regcache_message_t *m = &window[i % REGCACHE_WINDOW];
    if (m->buf != NULL)
      regcache_complete(t, m);
    size_t size;
    if (rng_next(&t->rng) % 100 < REGCACHE_ONEOFF_PERCENT) {
      size = regcache_size_draw(&t->rng);
    } else {
      uint64_t r = rng_next(&t->rng) % shared->kind_total;
      int k = 0;
      while (shared->kind_cumulative[k] <= r)
        k++;
      size = shared->kind_size[k];
    }
    regcache_send(t, m, size);
  }
  for (int k = 0; k < REGCACHE_WINDOW; k++)
    if (window[k].buf != NULL)
      regcache_complete(t, &window[k]);
}

static uint64_t env_u64(const char *name, uint64_t fallback)
{
  const char *s = getenv(name);
  if (s == NULL || *s == '\0')
    return fallback;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end != '\0' || v > 1000000000ULL)
    bench_fail("%s='%s' is not a number of nanoseconds (0..1000000000)", name, s);
  return v;
}

void regcache_run(const bench_args_t *args, bench_result_t *result_p)
{
  static regcache_shared_t shared;
  memset(&shared, 0, sizeof(shared));
  pthread_mutex_init(&shared.cache.lock, NULL);
  shared.cache.reg_base_ns = env_u64("BENCH_REGCACHE_REG_BASE_NS", REG_BASE_NS_DEFAULT);
  shared.cache.reg_ns_per_mib = env_u64("BENCH_REGCACHE_REG_NS_PER_MIB", REG_NS_PER_MIB_DEFAULT);
  uint64_t rng = rng_seed(4242, 77);
  for (int k = 0; k < REGCACHE_KINDS; k++) {
    shared.kind_size[k] = regcache_size_draw(&rng);
    shared.kind_total += 1000000u / (uint64_t)(k + 1);
    shared.kind_cumulative[k] = shared.kind_total;
  }

  const char *observer = release_spy_start();
  bench_threads_own_stacks(1);
  uint64_t events0, bytes0, events1, bytes1;
  release_spy_totals(&events0, &bytes0);
  bench_threads_run(args, regcache_thread, &shared, result_p);
  bench_threads_own_stacks(0);
  release_spy_totals(&events1, &bytes1);

  regcache_t *c = &shared.cache;
  pthread_mutex_lock(&c->lock);
  regcache_drain(c);                              /* the last releases count too */
  pthread_mutex_unlock(&c->lock);
  uint64_t messages = bench_scaled(REGCACHE_MESSAGES, args->scale);
  if (result_p->check != messages || c->lookups != messages)
    bench_fail("%llu messages completed and %llu lookups, expected %llu of each",
               (unsigned long long)result_p->check, (unsigned long long)c->lookups,
               (unsigned long long)messages);
  snprintf(result_p->extra, sizeof(result_p->extra),
           "\"observer\":\"%s\",\"lookups\":%llu,\"hits\":%llu,\"hit_rate\":%.4f,"
           "\"invalidations\":%llu,\"evictions\":%llu,\"registrations\":%llu,"
           "\"registered_mib\":%.1f,\"release_events\":%llu,\"released_mib\":%.1f,"
           "\"overflows\":%llu,\"reg_seconds\":%.4f,\"reg_ns_per_mib\":%llu",
           observer, (unsigned long long)c->lookups, (unsigned long long)c->hits,
           c->lookups ? (double)c->hits / (double)c->lookups : 0.0,
           (unsigned long long)c->invalidations, (unsigned long long)c->evictions,
           (unsigned long long)c->registrations, (double)c->registered_bytes / 1048576.0,
           (unsigned long long)(events1 - events0), (double)(bytes1 - bytes0) / 1048576.0,
           (unsigned long long)c->overflows, (double)c->reg_ns * 1e-9,
           (unsigned long long)c->reg_ns_per_mib);
  /* Leave nothing registered for a later workload in "all" mode. */
  pthread_mutex_lock(&c->lock);
  regcache_remove(c, 0, c->count);
  pthread_mutex_unlock(&c->lock);
}
