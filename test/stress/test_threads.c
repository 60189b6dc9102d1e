/*
 * test_threads.c -- thread safety of the global heap and of locked mspaces.
 *
 * Three workloads, each bounded by a time budget (PINHEAP_TEST_SCALE):
 *   churn    N threads do randomized malloc/calloc/realloc/memalign/free
 *            (and now and then trim) on one heap, each block carrying the pattern of its id; at phase
 *            ends every thread stops at a barrier and one thread merges all
 *            threads' blocks into one interval set (no overlap across
 *            threads) and verifies every block's contents.
 *   handoff  producers allocate and fill, consumers (other threads) verify,
 *            maybe realloc, and free: every block is freed by a thread that
 *            did not allocate it.
 *   both of the above on a shared locked mspace (create_mspace(0, 1)), and
 *   churn on a locked fixed-region mspace (NULL + ENOMEM allowed there,
 *   every block inside the region).
 * The heap checker must return 0 at the end.
 *
 * Criterion's assertions may only run on the test's main thread, so worker
 * threads record the first failure (thr_fail) and the main thread asserts
 * after joining.  Main entry points: churn_run(), handoff_run().
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <time.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinheap.h"
#include "shadow.h"

#define THR_MAX_THREADS   8
#define THR_MAX_LIVE      384     /* per churn thread */
#define THR_QUEUE_SLOTS   256

typedef struct thr_shared_s {
  shadow_heap_t heap;
  uint64_t seed;
  double deadline;
  atomic_int failed;
  char fail_msg[512];
  pthread_mutex_t fail_lock;
  /* churn */
  int nthreads;
  size_t ops_per_phase;
  pthread_barrier_t start, phase_end, phase_go;
  bool go_on;
  size_t phases;
  shadow_set_t *sets[THR_MAX_THREADS];
  atomic_size_t enomem;
  atomic_size_t ops;
} thr_shared_t;

static void thr_fail(thr_shared_t *sh, const char *fmt, ...)
  __attribute__((format(printf, 2, 3)));

/* Records the first failure; later ones are dropped. */
static void thr_fail(thr_shared_t *sh, const char *fmt, ...)
{
  va_list ap;

  pthread_mutex_lock(&sh->fail_lock);
  if (atomic_load(&sh->failed) == 0) {
    int n = snprintf(sh->fail_msg, sizeof(sh->fail_msg), "[%s seed=0x%" PRIx64 "] ",
                     sh->heap.name, sh->seed);
    va_start(ap, fmt);
    vsnprintf(sh->fail_msg + n, sizeof(sh->fail_msg) - (size_t)n, fmt, ap);
    va_end(ap);
    atomic_store(&sh->failed, 1);
  }
  pthread_mutex_unlock(&sh->fail_lock);
}

#define THR_CHECK(sh, cond, ...)          \
  do {                                    \
    if (!(cond)) {                        \
      thr_fail((sh), __VA_ARGS__);        \
      return;                             \
    }                                     \
  } while (0)

static void thr_shared_init(thr_shared_t *sh, const char *name, uint64_t default_seed,
                            double budget_s)
{
  char err[256];
  double scale;

  memset(sh, 0, sizeof(*sh));
  cr_assert(shadow_seed_get(default_seed, err, sizeof(err), &sh->seed) == 0, "%s", err);
  cr_assert(shadow_scale_get(err, sizeof(err), &scale) == 0, "%s", err);
  sh->heap.name = name;
  sh->deadline = shadow_now() + budget_s * scale;
  pthread_mutex_init(&sh->fail_lock, NULL);
}

/* The main thread's verdict. */
static void thr_assert_ok(thr_shared_t *sh)
{
  cr_assert(atomic_load(&sh->failed) == 0, "%s (rerun: PINHEAP_TEST_SEED=0x%" PRIx64 ")",
            sh->fail_msg, sh->seed);
}

static size_t thr_size_draw(shadow_rng_t *rng)
{
  uint64_t d = shadow_rng_below(rng, 1000);

  if (d < 450)
    return (size_t)shadow_rng_range(rng, 0, 64);
  if (d < 800)
    return (size_t)shadow_rng_range(rng, 65, 1023);
  if (d < 990)
    return shadow_rng_log_range(rng, 1024, 64 * SHADOW_KIB);
  return shadow_rng_log_range(rng, 128 * SHADOW_KIB, SHADOW_MIB);  /* mapped chunks */
}

/* ======================================================================= */
/*  churn                                                                   */
/* ======================================================================= */

typedef struct thr_worker_s {
  thr_shared_t *sh;
  int index;
  pthread_t tid;
  shadow_rng_t rng;
  shadow_set_t live;
  uint64_t next_id;
} thr_worker_t;

/* A fresh block: alignment, region, usable size, overlap with own blocks. */
static void churn_adopt(thr_worker_t *w, void *p, size_t n, size_t align, bool zeroed)
{
  thr_shared_t *sh = w->sh;
  shadow_block_t b = { p, n, 0, 0 };
  shadow_span_t other;
  int rc;

  THR_CHECK(sh, ((uintptr_t)p & (align - 1)) == 0 && ((uintptr_t)p & 15) == 0,
            "thread %d: %p is not aligned to %zu", w->index, p, align);
  b.usable = shadow_heap_usable(&sh->heap, p);
  /* ids are unique across threads: thread index in the top byte */
  b.id = ((uint64_t)w->index << 56) | w->next_id++;
  THR_CHECK(sh, b.usable >= n, "thread %d: usable %zu of %p below request %zu",
            w->index, b.usable, p, n);
  THR_CHECK(sh, shadow_heap_owns(&sh->heap, p, b.usable),
            "thread %d: block [%p, +%zu) is outside the fixed region", w->index, p, b.usable);
  if (zeroed) {
    size_t bad = shadow_bytes_find_not(p, n, 0);
    THR_CHECK(sh, bad == SIZE_MAX, "thread %d: calloc block %p has a non-zero byte at %zu",
              w->index, p, bad);
  }
  rc = shadow_set_insert(&w->live, &b, &other);
  THR_CHECK(sh, rc == 0, "thread %d: block [%p, +%zu) overlaps own block [0x%" PRIxPTR
            ", 0x%" PRIxPTR ")", w->index, p, b.usable, other.start, other.end);
  shadow_pattern_fill(p, b.usable, b.id);
}

static bool churn_null_ok(thr_worker_t *w, size_t n, int err)
{
  thr_shared_t *sh = w->sh;

  if (sh->heap.kind == SHADOW_HEAP_FIXED && err == ENOMEM) {
    atomic_fetch_add(&sh->enomem, 1);
    return true;
  }
  thr_fail(sh, "thread %d: NULL (errno %d) for %zu bytes", w->index, err, n);
  return false;
}

static void churn_verify(thr_worker_t *w, const shadow_block_t *b, const char *when)
{
  size_t bad = shadow_pattern_find_mismatch(b->ptr, b->usable, b->id);

  if (bad != SIZE_MAX)
    thr_fail(w->sh, "thread %d %s: block %p (id 0x%" PRIx64 ", usable %zu) overwritten at "
             "offset %zu", w->index, when, (void *)b->ptr, b->id, b->usable, bad);
}

static void churn_step(thr_worker_t *w)
{
  thr_shared_t *sh = w->sh;
  uint64_t d = shadow_rng_below(&w->rng, 100);
  bool full = w->live.count >= THR_MAX_LIVE - 4;
  void *p;
  size_t n;

  if (shadow_rng_below(&w->rng, 400) == 0) {
    /* trim while the other threads allocate and free */
    int rc = shadow_heap_trim(&sh->heap, (size_t)shadow_rng_below(&w->rng, 128 * SHADOW_KIB));
    THR_CHECK(sh, rc == 0 || rc == 1, "thread %d: trim returned %d", w->index, rc);
    return;
  }
  if (w->live.count > 0 && (full || d < 45)) {
    size_t idx = (size_t)shadow_rng_below(&w->rng, w->live.count);
    shadow_block_t b = w->live.blocks[idx];
    churn_verify(w, &b, "before free/realloc");
    if (d < 15 && !full) {
      /* never 0: realloc(p, 0) frees p (glibc) */
      n = shadow_rng_below(&w->rng, 2) ? b.req / 2 + 1 : b.req * 2 + 16;
      errno = 0;
      p = shadow_heap_realloc(&sh->heap, b.ptr, n);
      if (p == NULL) {
        if (churn_null_ok(w, n, errno))
          churn_verify(w, &b, "after a failed realloc");
        return;
      }
      size_t keep = n < b.usable ? n : b.usable;
      size_t bad = shadow_pattern_find_mismatch(p, keep, b.id);
      THR_CHECK(sh, bad == SIZE_MAX, "thread %d: realloc %p -> %p lost contents at offset %zu",
                w->index, (void *)b.ptr, p, bad);
      shadow_set_remove(&w->live, idx);
      churn_adopt(w, p, n, 16, false);
      return;
    }
    shadow_heap_free(&sh->heap, b.ptr);
    shadow_set_remove(&w->live, idx);
    return;
  }
  n = thr_size_draw(&w->rng);
  errno = 0;
  if (d < 85) {
    p = shadow_heap_malloc(&sh->heap, n);
    if (p != NULL)
      churn_adopt(w, p, n, 16, false);
  } else if (d < 93) {
    p = shadow_heap_calloc(&sh->heap, 1, n);
    if (p != NULL)
      churn_adopt(w, p, n, 16, true);
  } else {
    size_t a = (size_t)1 << shadow_rng_range(&w->rng, 4, 12);
    p = shadow_heap_memalign(&sh->heap, a, n);
    if (p != NULL)
      churn_adopt(w, p, n, a, false);
  }
  if (p == NULL)
    churn_null_ok(w, n, errno);
}

/* At a phase end, with every worker parked: no overlap across threads, and
 * every block still holds its pattern. */
static void churn_cross_check(thr_shared_t *sh)
{
  shadow_set_t all;
  shadow_span_t other;

  if (shadow_set_init(&all, (size_t)sh->nthreads * THR_MAX_LIVE) != 0) {
    thr_fail(sh, "no memory for the merged shadow set");
    return;
  }
  for (int t = 0; t < sh->nthreads && atomic_load(&sh->failed) == 0; t++)
    for (size_t i = 0; i < sh->sets[t]->count; i++) {
      const shadow_block_t *b = &sh->sets[t]->blocks[i];
      size_t bad = shadow_pattern_find_mismatch(b->ptr, b->usable, b->id);
      if (bad != SIZE_MAX) {
        thr_fail(sh, "phase %zu: block %p of thread %d overwritten at offset %zu",
                 sh->phases, (void *)b->ptr, t, bad);
        break;
      }
      if (shadow_set_insert(&all, b, &other) != 0) {
        thr_fail(sh, "phase %zu: block [%p, +%zu) of thread %d overlaps another thread's "
                 "block [0x%" PRIxPTR ", 0x%" PRIxPTR ")", sh->phases, (void *)b->ptr,
                 b->usable, t, other.start, other.end);
        break;
      }
    }
  shadow_set_fini(&all);
}

static void *churn_worker(void *arg)
{
  thr_worker_t *w = arg;
  thr_shared_t *sh = w->sh;

  pthread_barrier_wait(&sh->start);
  for (;;) {
    for (size_t k = 0; k < sh->ops_per_phase && atomic_load(&sh->failed) == 0; k++)
      churn_step(w);
    atomic_fetch_add(&sh->ops, sh->ops_per_phase);
    pthread_barrier_wait(&sh->phase_end);
    if (w->index == 0) {
      sh->phases++;
      churn_cross_check(sh);
      /* two phases at least, however slow the machine (or PINHEAP_DEBUG=2) */
      sh->go_on = atomic_load(&sh->failed) == 0 && (sh->phases < 2 || shadow_now() < sh->deadline);
    }
    pthread_barrier_wait(&sh->phase_go);
    if (!sh->go_on)
      break;
  }
  while (w->live.count > 0 && atomic_load(&sh->failed) == 0) {
    shadow_block_t b = w->live.blocks[w->live.count - 1];
    churn_verify(w, &b, "at the end");
    shadow_heap_free(&sh->heap, b.ptr);
    shadow_set_remove(&w->live, w->live.count - 1);
  }
  return NULL;
}

static void churn_run(thr_shared_t *sh, int nthreads)
{
  thr_worker_t w[THR_MAX_THREADS];

  cr_assert(nthreads >= 2 && nthreads <= THR_MAX_THREADS);
  sh->nthreads = nthreads;
  sh->ops_per_phase = 2000;
  pthread_barrier_init(&sh->start, NULL, (unsigned)nthreads);
  pthread_barrier_init(&sh->phase_end, NULL, (unsigned)nthreads);
  pthread_barrier_init(&sh->phase_go, NULL, (unsigned)nthreads);
  for (int t = 0; t < nthreads; t++) {
    memset(&w[t], 0, sizeof(w[t]));
    w[t].sh = sh;
    w[t].index = t;
    shadow_rng_seed(&w[t].rng, shadow_mix64(sh->seed + (uint64_t)t));
    cr_assert(shadow_set_init(&w[t].live, THR_MAX_LIVE) == 0);
    sh->sets[t] = &w[t].live;
  }
  for (int t = 0; t < nthreads; t++)
    cr_assert(pthread_create(&w[t].tid, NULL, churn_worker, &w[t]) == 0);
  for (int t = 0; t < nthreads; t++)
    pthread_join(w[t].tid, NULL);
  thr_assert_ok(sh);
  cr_assert(sh->phases >= 2, "only %zu phase(s) ran", sh->phases);
  for (int t = 0; t < nthreads; t++)
    shadow_set_fini(&w[t].live);
  pthread_barrier_destroy(&sh->start);
  pthread_barrier_destroy(&sh->phase_end);
  pthread_barrier_destroy(&sh->phase_go);
}

/* ======================================================================= */
/*  handoff: blocks freed by a thread that did not allocate them            */
/* ======================================================================= */

typedef struct thr_queue_s {
  shadow_block_t slot[THR_QUEUE_SLOTS];
  size_t head, count;
  int producers_live;
  pthread_mutex_t lock;
  pthread_cond_t not_empty, not_full;
  size_t produced, consumed, reallocated;
} thr_queue_t;

typedef struct thr_hand_s {
  thr_shared_t *sh;
  thr_queue_t *q;
  int index;
  pthread_t tid;
  shadow_rng_t rng;
} thr_hand_t;

static void *handoff_producer(void *arg)
{
  thr_hand_t *h = arg;
  thr_shared_t *sh = h->sh;
  thr_queue_t *q = h->q;
  uint64_t id = (uint64_t)h->index << 56;

  while (atomic_load(&sh->failed) == 0 && shadow_now() < sh->deadline) {
    size_t n = thr_size_draw(&h->rng);
    void *p;
    shadow_block_t b;

    errno = 0;
    p = shadow_heap_malloc(&sh->heap, n);
    if (p == NULL) {
      if (sh->heap.kind == SHADOW_HEAP_FIXED && errno == ENOMEM) {
        atomic_fetch_add(&sh->enomem, 1);
        continue;
      }
      thr_fail(sh, "producer %d: NULL (errno %d) for %zu bytes", h->index, errno, n);
      break;
    }
    b.ptr = p;
    b.req = n;
    b.usable = shadow_heap_usable(&sh->heap, p);
    b.id = id++;
    if (b.usable < n || ((uintptr_t)p & 15) != 0) {
      thr_fail(sh, "producer %d: block %p usable %zu for %zu bytes", h->index, p, b.usable, n);
      break;
    }
    shadow_pattern_fill(p, b.usable, b.id);
    pthread_mutex_lock(&q->lock);
    while (q->count == THR_QUEUE_SLOTS && atomic_load(&sh->failed) == 0)
      pthread_cond_wait(&q->not_full, &q->lock);
    if (q->count == THR_QUEUE_SLOTS) {   /* failed elsewhere: stop */
      pthread_mutex_unlock(&q->lock);
      shadow_heap_free(&sh->heap, p);
      break;
    }
    q->slot[(q->head + q->count) % THR_QUEUE_SLOTS] = b;
    q->count++;
    q->produced++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
  }
  pthread_mutex_lock(&q->lock);
  q->producers_live--;
  pthread_cond_broadcast(&q->not_empty);
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

static void handoff_consume(thr_hand_t *h, shadow_block_t b)
{
  thr_shared_t *sh = h->sh;
  size_t bad = shadow_pattern_find_mismatch(b.ptr, b.usable, b.id);

  THR_CHECK(sh, bad == SIZE_MAX, "consumer %d: handed-off block %p (id 0x%" PRIx64
            ", usable %zu) overwritten at offset %zu", h->index, (void *)b.ptr, b.id,
            b.usable, bad);
  if (shadow_rng_below(&h->rng, 4) == 0) {
    size_t n = b.req / 2 + 1 + (size_t)shadow_rng_below(&h->rng, b.req + 64);
    void *p;
    errno = 0;
    p = shadow_heap_realloc(&sh->heap, b.ptr, n);
    if (p == NULL) {
      THR_CHECK(sh, sh->heap.kind == SHADOW_HEAP_FIXED && errno == ENOMEM,
                "consumer %d: realloc(%p, %zu) returned NULL, errno %d", h->index,
                (void *)b.ptr, n, errno);
    } else {
      size_t keep = n < b.usable ? n : b.usable;
      bad = shadow_pattern_find_mismatch(p, keep, b.id);
      THR_CHECK(sh, bad == SIZE_MAX, "consumer %d: realloc of a handed-off block %p -> %p lost "
                "contents at offset %zu", h->index, (void *)b.ptr, p, bad);
      b.ptr = p;
      pthread_mutex_lock(&h->q->lock);
      h->q->reallocated++;
      pthread_mutex_unlock(&h->q->lock);
    }
  }
  shadow_heap_free(&sh->heap, b.ptr);
}

static void *handoff_consumer(void *arg)
{
  thr_hand_t *h = arg;
  thr_queue_t *q = h->q;

  for (;;) {
    shadow_block_t b;

    pthread_mutex_lock(&q->lock);
    while (q->count == 0 && q->producers_live > 0)
      pthread_cond_wait(&q->not_empty, &q->lock);
    if (q->count == 0) {
      pthread_mutex_unlock(&q->lock);
      break;
    }
    b = q->slot[q->head];
    q->head = (q->head + 1) % THR_QUEUE_SLOTS;
    q->count--;
    q->consumed++;
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->lock);
    handoff_consume(h, b);
    if (atomic_load(&h->sh->failed) != 0) {
      /* wake producers blocked on a full queue so they see the failure */
      pthread_mutex_lock(&q->lock);
      pthread_cond_broadcast(&q->not_full);
      pthread_mutex_unlock(&q->lock);
    }
  }
  return NULL;
}

static void handoff_run(thr_shared_t *sh, int producers, int consumers)
{
  thr_queue_t *q = calloc(1, sizeof(*q));
  thr_hand_t h[THR_MAX_THREADS];
  int n = producers + consumers;

  cr_assert(q != NULL && n <= THR_MAX_THREADS);
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->not_empty, NULL);
  pthread_cond_init(&q->not_full, NULL);
  q->producers_live = producers;
  for (int t = 0; t < n; t++) {
    h[t].sh = sh;
    h[t].q = q;
    h[t].index = t;
    shadow_rng_seed(&h[t].rng, shadow_mix64(sh->seed ^ ((uint64_t)t << 32)));
  }
  for (int t = 0; t < n; t++)
    cr_assert(pthread_create(&h[t].tid, NULL, t < producers ? handoff_producer : handoff_consumer,
                             &h[t]) == 0);
  for (int t = 0; t < n; t++)
    pthread_join(h[t].tid, NULL);
  thr_assert_ok(sh);
  cr_assert(q->produced == q->consumed, "produced %zu blocks but consumed %zu",
            q->produced, q->consumed);
  cr_assert(q->produced >= 1000, "only %zu blocks were handed off", q->produced);
  cr_assert(q->reallocated > 0, "no handed-off block was reallocated");
  free(q);
}

/* ======================================================================= */
/*  the tests                                                               */
/* ======================================================================= */

TestSuite(threads, .timeout = 240);

Test(threads, global_churn)
{
  thr_shared_t *sh = calloc(1, sizeof(*sh));

  thr_shared_init(sh, "global", 0x7ead0001, 3.0);
  sh->heap.kind = SHADOW_HEAP_GLOBAL;
  churn_run(sh, 6);
  cr_assert(PINHEAP_NAME(malloc_check)() == 0, "the global heap is unsound after churn");
  free(sh);
}

Test(threads, global_handoff)
{
  thr_shared_t *sh = calloc(1, sizeof(*sh));

  thr_shared_init(sh, "global", 0x7ead0002, 2.0);
  sh->heap.kind = SHADOW_HEAP_GLOBAL;
  handoff_run(sh, 3, 3);
  cr_assert(PINHEAP_NAME(malloc_check)() == 0, "the global heap is unsound after handoff");
  struct mallinfo2 mi = PINHEAP_NAME(mallinfo2)();
  cr_assert(mi.hblks == 0, "every block was freed but %zu mapped chunks remain", mi.hblks);
  free(sh);
}

Test(threads, locked_mspace_churn)
{
  thr_shared_t *sh = calloc(1, sizeof(*sh));

  thr_shared_init(sh, "locked-mspace", 0x7ead0003, 3.0);
  sh->heap.kind = SHADOW_HEAP_MSPACE;
  sh->heap.msp = PINHEAP_NAME(create_mspace)(0, 1);
  cr_assert(sh->heap.msp != NULL, "create_mspace(0, 1) returned NULL");
  churn_run(sh, 6);
  cr_assert(PINHEAP_NAME(mspace_check)(sh->heap.msp) == 0, "the mspace is unsound after churn");
  cr_assert(PINHEAP_NAME(destroy_mspace)(sh->heap.msp) > 0);
  cr_assert(PINHEAP_NAME(malloc_check)() == 0);
  free(sh);
}

Test(threads, locked_mspace_handoff)
{
  thr_shared_t *sh = calloc(1, sizeof(*sh));

  thr_shared_init(sh, "locked-mspace", 0x7ead0004, 2.0);
  sh->heap.kind = SHADOW_HEAP_MSPACE;
  sh->heap.msp = PINHEAP_NAME(create_mspace)(0, 1);
  cr_assert(sh->heap.msp != NULL, "create_mspace(0, 1) returned NULL");
  handoff_run(sh, 2, 4);
  cr_assert(PINHEAP_NAME(mspace_check)(sh->heap.msp) == 0,
            "the mspace is unsound after cross-thread frees");
  struct mallinfo2 mi = PINHEAP_NAME(mspace_mallinfo)(sh->heap.msp);
  cr_assert(mi.hblks == 0, "every block was freed but %zu mapped chunks remain", mi.hblks);
  cr_assert(PINHEAP_NAME(destroy_mspace)(sh->heap.msp) > 0);
  free(sh);
}

Test(threads, locked_fixed_churn)
{
  thr_shared_t *sh = calloc(1, sizeof(*sh));
  size_t cap = 6 * SHADOW_MIB;
  char *region = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  cr_assert(region != MAP_FAILED);
  thr_shared_init(sh, "locked-fixed", 0x7ead0005, 3.0);
  sh->heap.kind = SHADOW_HEAP_FIXED;
  sh->heap.lo = (uintptr_t)region;
  sh->heap.hi = (uintptr_t)region + cap;
  sh->heap.msp = PINHEAP_NAME(create_mspace_with_base)(region, cap, 1);
  cr_assert(sh->heap.msp != NULL, "create_mspace_with_base(%p, %zu, 1) returned NULL",
            (void *)region, cap);
  churn_run(sh, 6);
  cr_assert(PINHEAP_NAME(mspace_check)(sh->heap.msp) == 0, "the fixed mspace is unsound");
  PINHEAP_NAME(destroy_mspace)(sh->heap.msp);
  munmap(region, cap);
  free(sh);
}

/* ---- heap walks against destroy_mspace ------------------------------------ */

/*
 * mallinfo2, malloc_trim, malloc_stats and malloc_check walk the heaps of
 * the malloc family while other threads create, use and destroy mspaces
 * of their own, locked and unlocked.  The walks must never touch an mspace
 * (one being destroyed would be unmapped memory; an unlocked one belongs to
 * its owner alone), and every check must come out clean.
 */
typedef struct walk_shared_s {
  atomic_bool stop;
  atomic_size_t created, walks;
  atomic_int problems;
} walk_shared_t;

static void *walk_mspace_owner(void *arg)
{
  walk_shared_t *ws = arg;
  for (unsigned round = 0; !atomic_load(&ws->stop); round++) {
    pinheap_mspace msp = PINHEAP_NAME(create_mspace)(round % 3 == 0 ? 0 : 256 * 1024, round & 1);
    if (msp == NULL)
      continue;
    void *blk[32];
    for (unsigned i = 0; i < 32; i++) {
      blk[i] = PINHEAP_NAME(mspace_malloc)(msp, 64 + i * 1000);
      if (blk[i] != NULL)
        memset(blk[i], (int)i, 64);
    }
    for (unsigned i = 0; i < 32; i += 2)
      PINHEAP_NAME(mspace_free)(msp, blk[i]);
    PINHEAP_NAME(destroy_mspace)(msp);
    atomic_fetch_add(&ws->created, 1);
  }
  return NULL;
}

static void *walk_stats(void *arg)
{
  walk_shared_t *ws = arg;
  for (unsigned round = 0; !atomic_load(&ws->stop); round++) {
    void *p = PINHEAP_NAME(malloc)(100 + round % 5000);
    struct mallinfo2 mi = PINHEAP_NAME(mallinfo2)();
    if (mi.arena == 0)
      atomic_fetch_add(&ws->problems, 1);
    PINHEAP_NAME(malloc_trim)(0);
    PINHEAP_NAME(malloc_stats)();
    if (PINHEAP_NAME(malloc_check)() != 0)
      atomic_fetch_add(&ws->problems, 1);
    PINHEAP_NAME(free)(p);
    atomic_fetch_add(&ws->walks, 1);
  }
  return NULL;
}

Test(threads, heap_walks_while_mspaces_come_and_go)
{
  walk_shared_t ws = { 0 };
  pthread_t owners[2], walkers[2];
  int devnull = open("/dev/null", O_WRONLY);
  int saved = dup(STDERR_FILENO);

  cr_assert(devnull >= 0 && saved >= 0);
  dup2(devnull, STDERR_FILENO);           /* malloc_stats writes there */
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(pthread_create(&owners[i], NULL, walk_mspace_owner, &ws), 0);
    cr_assert_eq(pthread_create(&walkers[i], NULL, walk_stats, &ws), 0);
  }
  struct timespec budget = { 1, 500000000 };
  nanosleep(&budget, NULL);
  atomic_store(&ws.stop, true);
  for (int i = 0; i < 2; i++) {
    pthread_join(owners[i], NULL);
    pthread_join(walkers[i], NULL);
  }
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(devnull);
  cr_assert_eq(atomic_load(&ws.problems), 0, "%d heap walks found problems", atomic_load(&ws.problems));
  cr_assert_gt(atomic_load(&ws.created), 50, "only %zu mspaces came and went",
               atomic_load(&ws.created));
  cr_assert_gt(atomic_load(&ws.walks), 20, "only %zu walks ran", atomic_load(&ws.walks));
}
