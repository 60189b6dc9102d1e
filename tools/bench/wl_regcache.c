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
 * Three ways to keep the cache right (BENCH_REGCACHE_CACHE, the same loop
 * and sizes for all three; see README.md, "Tokens instead of callbacks"):
 *   callbacks  (default) the above: the release listener queues every
 *              release, each lookup first drains the queue.
 *   tokens     under pinheap only: no listener, no queue.  Each entry holds
 *              a watch token taken when it is registered (pinheap_watch,
 *              then the registration); a hit is validated by
 *              pinheap_watch_valid(token), one load: a stale entry is
 *              deregistered and the buffer registered again, as on a miss.
 *              An entry's token is unwatched when the entry goes (eviction,
 *              merge, stale).  Releases of entries never looked up again
 *              cost the cache nothing.  The example to read:
 *              regcache_lookup() and regcache_remove().
 *   ucx        UCX's ucs_rcache (libucs) instead of the sorted array, with
 *              the same limits and costs: its mem_reg/mem_dereg callbacks
 *              spend the simulated time, its own UCM_EVENT_VM_UNMAPPED
 *              handler invalidates; ucs_rcache_get at send, region_put at
 *              completion.  Only in pinheap-bench-ucx (built when libucx-dev
 *              is found).
 *
 * Reported in "extra": lookups, hits, hit_rate, invalidations, evictions,
 * registrations, registered_mib, release_events, released_mib,
 * reg_seconds (simulated registration time included in seconds) and the
 * observer; then cache (the variant), hit_ns (the mean time of the cache
 * step on a hit, drain included, the clock's own cost taken off; a hit
 * slower than 100 us was descheduled and is left out),
 * put_ns (ucx: the mean region_put at completion; 0 otherwise), release_ns
 * (the mean time of a buffer's free() that gave its first whole page back
 * -- munmap or madvise, seen with mincore() after the free -- with every
 * handler run inside it), releases_timed (how many such frees) and
 * deregistrations.  Every page word of a buffer is checked before it is
 * freed.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "pinheap.h"     /* the watch token and its inline check, watch_valid */

#ifdef BENCH_WITH_UCX
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>
#endif

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
#define REGCACHE_PROBE_RELEASES 2000 /* the release probe: registered ranges unmapped */
#define REGCACHE_PROBE_BYTES (64u << 10)
#define REGCACHE_HIT_SLOW_NS 100000   /* a hit this slow was preempted: not averaged */

typedef enum regcache_kind {
  REGCACHE_CALLBACKS,             /* a release listener queues, lookups drain */
  REGCACHE_TOKENS,                /* a watch token per entry, checked on a hit */
  REGCACHE_UCX                    /* UCX's ucs_rcache */
} regcache_kind_t;

static const char *const regcache_kind_name[] = {"callbacks", "tokens", "ucx"};

typedef struct regcache_entry {
  uintptr_t start;                /* page-aligned */
  uintptr_t end;
  uint64_t last_use;
  const pinheap_watch_t *token;   /* tokens: watched before registering; else NULL */
} regcache_entry_t;

/* pinheap's watch and unwatch, found with dlsym: the benchmark is not linked
 * with pinheap, the preload shim brings it.  The check itself is the header's
 * inline PINHEAP_NAME(watch_valid): one load, no call. */
typedef int watch_fn_t(const void *addr, size_t len, const pinheap_watch_t **token_p);
typedef void unwatch_fn_t(const pinheap_watch_t *token);
static watch_fn_t *regcache_watch;
static unwatch_fn_t *regcache_unwatch;

typedef struct regcache {
  pthread_mutex_t lock;
  regcache_kind_t kind;
  regcache_entry_t entry[REGCACHE_ENTRIES_MAX + 1];
  size_t count;
  uint64_t bytes;                 /* registered now */
  uint64_t clock;                 /* LRU stamp */
  uint64_t reg_base_ns, reg_ns_per_mib;
  int no_cost;                    /* the release probe: registration is free */
  /* statistics */
  uint64_t lookups, hits, invalidations, evictions, registrations, overflows;
  uint64_t registered_bytes, reg_ns, deregistrations;
  /* the costs measured (ns): cache steps that hit, region puts, releasing frees */
  uint64_t hit_ns, hits_slow, puts, put_ns, releases_timed, release_ns, clock_cost_ns;
#ifdef BENCH_WITH_UCX
  ucs_rcache_t *ucx;
#endif
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
  void *region;                   /* ucx: the region held until completion */
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
  if (c->no_cost)
    return;
  uint64_t end = clock_ns() + ns;
  while (clock_ns() < end)
    ;
  __atomic_fetch_add(&c->reg_ns, ns, __ATOMIC_RELAXED);   /* ucx: from any thread */
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

/** Deregisters and removes entries [i, j).  tokens: an entry's watch ends
 *  with it (after the deregistration: the range stays watched while pinned). */
static void regcache_remove(regcache_t *c, size_t i, size_t j)
{
  for (size_t k = i; k < j; k++) {
    uint64_t bytes = c->entry[k].end - c->entry[k].start;
    cost_spend(c, cost_deregister(bytes));
    c->bytes -= bytes;
    c->deregistrations++;
    if (c->entry[k].token != NULL)
      regcache_unwatch(c->entry[k].token);
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
    /* tokens: the hit counts only if nothing of the entry was released since
     * it was watched.  One load; no listener ever touched the cache. */
    if (c->entry[i].token == NULL || PINHEAP_NAME(watch_valid)(c->entry[i].token)) {
      c->entry[i].last_use = c->clock;
      c->hits++;
      return 1;
    }
    c->invalidations++;           /* stale: deregister (and unwatch), then a miss */
    regcache_remove(c, i, i + 1);
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
  /* tokens: watch first, then register (pin): a release racing with the
   * registration then makes the token invalid and the next hit re-registers. */
  const pinheap_watch_t *token = NULL;
  if (c->kind == REGCACHE_TOKENS) {
    int rc = regcache_watch((const void *)s, e - s, &token);
    if (rc != 0)
      bench_fail("pinheap watch(%p, %zu) returned %d (%s)", (void *)s, (size_t)(e - s), rc,
                 strerror(rc));
  }
  cost_spend(c, cost_register(c, e - s));
  memmove(&c->entry[i + 1], &c->entry[i], (c->count - i) * sizeof(c->entry[0]));
  c->entry[i] = (regcache_entry_t){s, e, c->clock, token};
  c->count++;
  c->bytes += e - s;
  c->registrations++;
  c->registered_bytes += e - s;
  while (c->count > REGCACHE_ENTRIES_MAX || (c->bytes > REGCACHE_BYTES_MAX && c->count > 1))
    i = regcache_evict(c, i);
  return 0;
}

/* ---- ucx: UCX's ucs_rcache in place of the sorted array ------------------------- */

#ifdef BENCH_WITH_UCX
static ucs_status_t regcache_ucx_reg(void *context, ucs_rcache_t *rcache, void *arg,
                                     ucs_rcache_region_t *region, uint16_t flags)
{
  regcache_t *c = context;
  uint64_t bytes = region->super.end - region->super.start;
  (void)rcache, (void)arg, (void)flags;
  cost_spend(c, cost_register(c, bytes));
  __atomic_fetch_add(&c->registrations, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&c->registered_bytes, bytes, __ATOMIC_RELAXED);
  return UCS_OK;
}

static void regcache_ucx_dereg(void *context, ucs_rcache_t *rcache, ucs_rcache_region_t *region)
{
  regcache_t *c = context;
  (void)rcache;
  cost_spend(c, cost_deregister(region->super.end - region->super.start));
  __atomic_fetch_add(&c->deregistrations, 1, __ATOMIC_RELAXED);
}

static void regcache_ucx_dump(void *context, ucs_rcache_t *rcache, ucs_rcache_region_t *region,
                              char *buf, size_t max)
{
  (void)context, (void)rcache, (void)region;
  if (max > 0)
    buf[0] = '\0';
}

/** The rcache with the sorted array's limits: page-aligned regions, at most
 *  REGCACHE_ENTRIES_MAX regions and REGCACHE_BYTES_MAX bytes (LRU), and
 *  invalidated by its own UCM_EVENT_VM_UNMAPPED handler. */
static void regcache_ucx_start(regcache_t *c)
{
  static const ucs_rcache_ops_t ops = {regcache_ucx_reg, regcache_ucx_dereg, regcache_ucx_dump};
  const ucs_rcache_params_t p = {
    .region_struct_size = sizeof(ucs_rcache_region_t), .alignment = REGCACHE_PAGE,
    .max_alignment = REGCACHE_PAGE, .ucm_events = UCM_EVENT_VM_UNMAPPED,
    .ucm_event_priority = 1000, .ops = &ops, .context = c, .flags = UCS_RCACHE_FLAG_NO_PFN_CHECK,
    .max_regions = REGCACHE_ENTRIES_MAX, .max_size = REGCACHE_BYTES_MAX,
    .max_unreleased = SIZE_MAX};
  ucs_status_t st = ucs_rcache_create(&p, "pinheap-bench", NULL, &c->ucx);
  if (st != UCS_OK)
    bench_fail("ucs_rcache_create: %s", ucs_status_string(st));
}

/** ucs_rcache_get of the buffer (lock held); the region is kept in m until
 *  completion.  @return 1 on a hit: no registration happened. */
static int regcache_ucx_get(regcache_t *c, regcache_message_t *m)
{
  uint64_t regs = c->registrations;
  ucs_rcache_region_t *region = NULL;
  ucs_status_t st = ucs_rcache_get(c->ucx, m->buf, m->size, PROT_READ | PROT_WRITE, NULL, &region);
  if (st != UCS_OK)
    bench_fail("ucs_rcache_get(%p, %zu): %s", (void *)m->buf, m->size, ucs_status_string(st));
  m->region = region;
  c->lookups++;
  int hit = c->registrations == regs;
  c->hits += (uint64_t)hit;
  return hit;
}
#endif

/* ---- the message loop ------------------------------------------------------------ */

/** Whether the page at address (page-aligned) has left the process or lost
 *  its physical page: unmapped (mincore fails with ENOMEM) or not resident. */
static int regcache_page_gone(uintptr_t address)
{
  unsigned char resident = 0;
  if (mincore((void *)address, REGCACHE_PAGE, &resident) != 0)
    return 1;
  return (resident & 1) == 0;
}

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

  /* The cache step, timed: what a hit costs the sender, everything included. */
  pthread_mutex_lock(&c->lock);
  uint64_t t0 = clock_ns();
  int hit;
  if (c->kind == REGCACHE_UCX) {
#ifdef BENCH_WITH_UCX
    hit = regcache_ucx_get(c, m);
#else
    hit = 0;
#endif
  } else {
    if (c->kind == REGCACHE_CALLBACKS)
      regcache_drain(c);          /* the listener's queue: every release since */
    hit = regcache_lookup(c, (uintptr_t)m->buf, size);
  }
  uint64_t dt = clock_ns() - t0;
  if (hit && dt > REGCACHE_HIT_SLOW_NS)
    c->hits_slow++;               /* descheduled: a hit makes no system call */
  else if (hit)
    c->hit_ns += dt > c->clock_cost_ns ? dt - c->clock_cost_ns : 0;
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
#ifdef BENCH_WITH_UCX
  regcache_shared_t *shared = t->shared;
  regcache_t *c = &shared->cache;
  if (m->region != NULL) {        /* the transfer is done: the region's hold ends */
    pthread_mutex_lock(&c->lock);
    uint64_t p0 = clock_ns();
    ucs_rcache_region_put(c->ucx, m->region);
    uint64_t pdt = clock_ns() - p0;
    c->put_ns += pdt > c->clock_cost_ns ? pdt - c->clock_cost_ns : 0;
    c->puts++;
    pthread_mutex_unlock(&c->lock);
    m->region = NULL;
  }
#endif
  /* The buffer's free, timed; it counts as a release when the buffer's first
   * whole page is gone after it (every handler then ran inside the free). */
  uintptr_t first = ((uintptr_t)m->buf + REGCACHE_PAGE - 1) & ~(uintptr_t)(REGCACHE_PAGE - 1);
  int probe = first + REGCACHE_PAGE <= (uintptr_t)m->buf + m->size;
  uint64_t f0 = clock_ns();
  free(m->buf);
  uint64_t fdt = clock_ns() - f0;
  if (probe && regcache_page_gone(first)) {
    regcache_shared_t *sh = t->shared;
    __atomic_fetch_add(&sh->cache.releases_timed, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&sh->cache.release_ns, fdt, __ATOMIC_RELAXED);
  }
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

static int regcache_u64_cmp(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/** The release probe, after the loop: REGCACHE_PROBE_RELEASES times a fresh
 *  64 KiB mapping is written, registered (a miss: the simulated costs off)
 *  and unmapped.  *release_ns_p: the median munmap, every handler inside it
 *  (the listener's queueing, the watch index, UCM's handler).
 *  *deferred_ns_p: the mean work the cache does for it afterwards --
 *  callbacks: the drain that deregisters the entry; tokens: the lookup that
 *  finds the token 0 and deregisters and unwatches; ucx: inside its next
 *  ucs_rcache_get, not separable (0).  Also checks that the cache did
 *  learn of each release. */
static void regcache_release_probe(regcache_t *c, uint64_t *release_ns_p, uint64_t *deferred_ns_p)
{
  uint64_t *in_release = malloc(REGCACHE_PROBE_RELEASES * sizeof(uint64_t));
  if (in_release == NULL)
    bench_fail("the release probe: malloc failed");
  uint64_t deferred = 0;
  c->no_cost = 1;
  for (int k = 0; k < REGCACHE_PROBE_RELEASES; k++) {
    unsigned char *p = mmap(NULL, REGCACHE_PROBE_BYTES, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      bench_fail("the release probe: mmap failed");
    memset(p, 1, REGCACHE_PROBE_BYTES);
    pthread_mutex_lock(&c->lock);
    if (c->kind == REGCACHE_UCX) {
#ifdef BENCH_WITH_UCX
      regcache_message_t m = {.buf = p, .size = REGCACHE_PROBE_BYTES};
      regcache_ucx_get(c, &m);
      ucs_rcache_region_put(c->ucx, m.region);
#endif
    } else {
      if (c->kind == REGCACHE_CALLBACKS)
        regcache_drain(c);
      regcache_lookup(c, (uintptr_t)p, REGCACHE_PROBE_BYTES);
    }
    pthread_mutex_unlock(&c->lock);
    uint64_t t0 = clock_ns();
    munmap(p, REGCACHE_PROBE_BYTES);
    uint64_t dt = clock_ns() - t0;
    in_release[k] = dt > c->clock_cost_ns ? dt - c->clock_cost_ns : 0;
    pthread_mutex_lock(&c->lock);
    uint64_t d0 = clock_ns();
    size_t i = regcache_first_above(c, (uintptr_t)p);
    int held = i < c->count && c->entry[i].start <= (uintptr_t)p;   /* ends above p */
    if (c->kind == REGCACHE_CALLBACKS) {
      regcache_drain(c);
      i = regcache_first_above(c, (uintptr_t)p);
      held = i < c->count && c->entry[i].start <= (uintptr_t)p;   /* ends above p */
      if (held)
        bench_fail("the release probe: callbacks: %p still cached after its munmap", (void *)p);
    } else if (c->kind == REGCACHE_TOKENS) {
      if (!held || PINHEAP_NAME(watch_valid)(c->entry[i].token))
        bench_fail("the release probe: tokens: %p %s after its munmap", (void *)p,
                   held ? "has a valid token" : "is not cached");
      c->invalidations++;
      regcache_remove(c, i, i + 1);
    }
    uint64_t ddt = clock_ns() - d0;
    deferred += ddt > c->clock_cost_ns ? ddt - c->clock_cost_ns : 0;
    pthread_mutex_unlock(&c->lock);
  }
  c->no_cost = 0;
  qsort(in_release, REGCACHE_PROBE_RELEASES, sizeof(uint64_t), regcache_u64_cmp);
  *release_ns_p = in_release[REGCACHE_PROBE_RELEASES / 2];
  *deferred_ns_p = c->kind == REGCACHE_UCX ? 0 : deferred / REGCACHE_PROBE_RELEASES;
  free(in_release);
}

/** The variant named by BENCH_REGCACHE_CACHE (callbacks when unset). */
static regcache_kind_t regcache_kind_get(void)
{
  const char *s = getenv("BENCH_REGCACHE_CACHE");
  if (s == NULL || *s == '\0' || strcmp(s, "callbacks") == 0)
    return REGCACHE_CALLBACKS;
  if (strcmp(s, "tokens") == 0)
    return REGCACHE_TOKENS;
  if (strcmp(s, "ucx") == 0)
    return REGCACHE_UCX;
  bench_fail("BENCH_REGCACHE_CACHE='%s' is not one of callbacks, tokens, ucx", s);
  return REGCACHE_CALLBACKS;
}

/** The smallest cost of two back-to-back clock reads, taken off each timing. */
static uint64_t clock_cost(void)
{
  uint64_t best = UINT64_MAX;
  for (int k = 0; k < 1000; k++) {
    uint64_t a = clock_ns();
    uint64_t b = clock_ns();
    if (b - a < best)
      best = b - a;
  }
  return best;
}

void regcache_run(const bench_args_t *args, bench_result_t *result_p)
{
  static regcache_shared_t shared;
  memset(&shared, 0, sizeof(shared));
  pthread_mutex_init(&shared.cache.lock, NULL);
  regcache_t *c = &shared.cache;
  c->kind = regcache_kind_get();
  c->clock_cost_ns = clock_cost();
  shared.cache.reg_base_ns = env_u64("BENCH_REGCACHE_REG_BASE_NS", REG_BASE_NS_DEFAULT);
  shared.cache.reg_ns_per_mib = env_u64("BENCH_REGCACHE_REG_NS_PER_MIB", REG_NS_PER_MIB_DEFAULT);
  uint64_t rng = rng_seed(4242, 77);
  for (int k = 0; k < REGCACHE_KINDS; k++) {
    shared.kind_size[k] = regcache_size_draw(&rng);
    shared.kind_total += 1000000u / (uint64_t)(k + 1);
    shared.kind_cumulative[k] = shared.kind_total;
  }

  const char *observer;
  if (c->kind == REGCACHE_CALLBACKS) {
    observer = release_spy_start();
  } else if (c->kind == REGCACHE_TOKENS) {
    /* No listener: pinheap's watch and unwatch only (the shim's). */
    regcache_watch = (watch_fn_t *)dlsym(RTLD_DEFAULT, PINHEAP_PREFIX_STRING "watch");
    regcache_unwatch = (unwatch_fn_t *)dlsym(RTLD_DEFAULT, PINHEAP_PREFIX_STRING "unwatch");
    if (regcache_watch == NULL || regcache_unwatch == NULL)
      bench_fail("BENCH_REGCACHE_CACHE=tokens needs pinheap's preload shim (%swatch and "
                 "%sunwatch not found)", PINHEAP_PREFIX_STRING, PINHEAP_PREFIX_STRING);
    observer = "pinheap_watch";
  } else {
#ifdef BENCH_WITH_UCX
    regcache_ucx_start(c);
    observer = "ucm_events";
#else
    bench_fail("BENCH_REGCACHE_CACHE=ucx needs pinheap-bench-ucx (this program is built "
               "without UCX; pinheap-bench-ucx is built when libucx-dev is found)");
    observer = "";
#endif
  }
  bench_threads_own_stacks(1);
  uint64_t events0, bytes0, events1, bytes1;
  release_spy_totals(&events0, &bytes0);
  bench_threads_run(args, regcache_thread, &shared, result_p);
  bench_threads_own_stacks(0);
  release_spy_totals(&events1, &bytes1);

  if (c->kind == REGCACHE_CALLBACKS) {
    pthread_mutex_lock(&c->lock);
    regcache_drain(c);                            /* the last releases count too */
    pthread_mutex_unlock(&c->lock);
  }
  uint64_t messages = bench_scaled(REGCACHE_MESSAGES, args->scale);
  if (result_p->check != messages || c->lookups != messages)
    bench_fail("%llu messages completed and %llu lookups, expected %llu of each",
               (unsigned long long)result_p->check, (unsigned long long)c->lookups,
               (unsigned long long)messages);
  /* The loop's figures are reported; the probe's own lookups are not. */
  static regcache_t loop;
  loop = *c;
  uint64_t probe_release_ns, probe_deferred_ns;
  regcache_release_probe(c, &probe_release_ns, &probe_deferred_ns);
  c = &loop;
  snprintf(result_p->extra, sizeof(result_p->extra),
           "\"observer\":\"%s\",\"lookups\":%llu,\"hits\":%llu,\"hit_rate\":%.4f,"
           "\"invalidations\":%llu,\"evictions\":%llu,\"registrations\":%llu,"
           "\"registered_mib\":%.1f,\"release_events\":%llu,\"released_mib\":%.1f,"
           "\"overflows\":%llu,\"reg_seconds\":%.4f,\"reg_ns_per_mib\":%llu,"
           "\"cache\":\"%s\",\"hit_ns\":%.1f,\"put_ns\":%.1f,\"release_ns\":%.1f,"
           "\"releases_timed\":%llu,\"deregistrations\":%llu,"
           "\"probe_release_ns\":%llu,\"probe_deferred_ns\":%llu",
           observer, (unsigned long long)c->lookups, (unsigned long long)c->hits,
           c->lookups ? (double)c->hits / (double)c->lookups : 0.0,
           (unsigned long long)c->invalidations, (unsigned long long)c->evictions,
           (unsigned long long)c->registrations, (double)c->registered_bytes / 1048576.0,
           (unsigned long long)(events1 - events0), (double)(bytes1 - bytes0) / 1048576.0,
           (unsigned long long)c->overflows, (double)c->reg_ns * 1e-9,
           (unsigned long long)c->reg_ns_per_mib, regcache_kind_name[c->kind],
           c->hits > c->hits_slow ? (double)c->hit_ns / (double)(c->hits - c->hits_slow) : 0.0,
           c->puts ? (double)c->put_ns / (double)c->puts : 0.0,
           c->releases_timed ? (double)c->release_ns / (double)c->releases_timed : 0.0,
           (unsigned long long)c->releases_timed, (unsigned long long)c->deregistrations,
           (unsigned long long)probe_release_ns, (unsigned long long)probe_deferred_ns);
  c = &shared.cache;
  /* Leave nothing registered for a later workload in "all" mode. */
  pthread_mutex_lock(&c->lock);
  regcache_remove(c, 0, c->count);
#ifdef BENCH_WITH_UCX
  if (c->ucx != NULL) {
    ucs_rcache_destroy(c->ucx);
    c->ucx = NULL;
  }
#endif
  pthread_mutex_unlock(&c->lock);
}
