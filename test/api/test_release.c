/*
 * test_release.c -- the release listener, in process.
 *
 * pinheap's OS layer calls one listener slot with (addr, len, ctx) before
 * it unmaps, decommits or shrinks anything (allocator/os/os.h).  These tests
 * install a recording listener and check what it is told: a freed huge
 * block's mapping is reported and is still readable during the call (so
 * the call comes first) and gone afterwards; counts add up; destroy_mspace
 * reports every byte it returns; ranges never touch memory the program
 * still holds; a fixed-region mspace never reports its region; a cleared
 * slot gets no calls; a listener may itself call the allocator.
 * The kernel-level half of the proof is release_trace.c under strace.
 *
 * Main entry point: rec_listener() and the rec_* queries.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinheap.h"
#include "shadow.h"

/* The OS layer's listener slot (hidden in the archive, linkable here). */
typedef void os_release_fn(void *addr, size_t len, void *ctx);
void PINHEAP_NAME(os_set_release_listener)(os_release_fn *fn, void *ctx);

#define REC_MAX 8192

typedef struct rec_s {
  uintptr_t addr;
  size_t len;
  void *ctx;
} rec_t;

/* Filled by the listener without allocating. */
static rec_t rec_log[REC_MAX];
static atomic_size_t rec_count;
static atomic_size_t rec_overflow;
/* If set, the listener reads this byte when its range covers it: a call
 * made after the unmap would crash here. */
static volatile unsigned char *rec_probe;
static atomic_int rec_probe_value = -1;

static void rec_listener(void *addr, size_t len, void *ctx)
{
  size_t i = atomic_fetch_add(&rec_count, 1);

  if (i < REC_MAX) {
    rec_log[i].addr = (uintptr_t)addr;
    rec_log[i].len = len;
    rec_log[i].ctx = ctx;
  } else {
    atomic_fetch_add(&rec_overflow, 1);
  }
  if (rec_probe != NULL && (uintptr_t)rec_probe >= (uintptr_t)addr &&
      (uintptr_t)rec_probe < (uintptr_t)addr + len)
    atomic_store(&rec_probe_value, *rec_probe);
}

static void rec_reset(void)
{
  atomic_store(&rec_count, 0);
  atomic_store(&rec_overflow, 0);
  rec_probe = NULL;
  atomic_store(&rec_probe_value, -1);
}

static size_t rec_n(void)
{
  size_t n = atomic_load(&rec_count);
  cr_assert(atomic_load(&rec_overflow) == 0, "more than %d listener calls", REC_MAX);
  return n;
}

/* Every reported range: non-empty, page aligned, whole pages. */
static void rec_assert_well_formed(void)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);

  for (size_t i = 0; i < rec_n(); i++) {
    cr_assert(rec_log[i].len > 0, "listener call %zu has length 0", i);
    cr_assert(rec_log[i].addr % page == 0 && rec_log[i].len % page == 0,
              "listener call %zu: [0x%" PRIxPTR ", +0x%zx) is not whole pages", i,
              rec_log[i].addr, rec_log[i].len);
  }
}

/* How many reported ranges contain all of [p, p+n). */
static size_t rec_containing(const void *p, size_t n)
{
  uintptr_t a = (uintptr_t)p;
  size_t hits = 0;

  for (size_t i = 0; i < rec_n(); i++)
    if (rec_log[i].addr <= a && a + n <= rec_log[i].addr + rec_log[i].len)
      hits++;
  return hits;
}

/* Index of a reported range that intersects [p, p+n), or SIZE_MAX. */
static size_t rec_intersecting(const void *p, size_t n)
{
  uintptr_t a = (uintptr_t)p;

  for (size_t i = 0; i < rec_n(); i++)
    if (rec_log[i].addr < a + n && a < rec_log[i].addr + rec_log[i].len)
      return i;
  return SIZE_MAX;
}

static size_t rec_total_bytes(void)
{
  size_t sum = 0;

  for (size_t i = 0; i < rec_n(); i++)
    sum += rec_log[i].len;
  return sum;
}

/* Is the page holding p mapped?  (mincore fails with ENOMEM if not.) */
static bool page_is_mapped(const void *p)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char vec;
  void *a = (void *)((uintptr_t)p & ~(uintptr_t)(page - 1));

  if (mincore(a, page, &vec) == 0)
    return true;
  cr_assert(errno == ENOMEM, "mincore(%p) failed with errno %d", a, errno);
  return false;
}

static void rec_install(void *ctx)
{
  rec_reset();
  PINHEAP_NAME(os_set_release_listener)(rec_listener, ctx);
}

static void rec_setup(void)
{
  /* a fixed threshold: blocks >= 128 KiB are mapped on their own */
  cr_assert(PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, 128 * 1024) == 1);
}

static void rec_teardown(void)
{
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

TestSuite(release, .init = rec_setup, .fini = rec_teardown, .timeout = 60);

Test(release, huge_free_is_reported_before_the_unmap)
{
  size_t n = SHADOW_MIB;
  unsigned char *p = PINHEAP_NAME(malloc)(n);
  int token;

  cr_assert(p != NULL);
  memset(p, 0x77, n);
  rec_install(&token);
  rec_probe = p + n / 2;
  PINHEAP_NAME(free)(p);
  cr_assert(rec_n() >= 1, "freeing a 1 MiB mapped block made no listener call");
  cr_assert(rec_containing(p, n) == 1,
            "exactly one listener call must cover the freed block [%p, +%zu); %zu do",
            (void *)p, n, rec_containing(p, n));
  cr_assert(atomic_load(&rec_probe_value) == 0x77,
            "the listener could not read the block's contents during the call (got %d): "
            "it was not called before the release", atomic_load(&rec_probe_value));
  cr_assert(!page_is_mapped(p) && !page_is_mapped(p + n - 1),
            "the reported block %p is still mapped after free", (void *)p);
  for (size_t i = 0; i < rec_n(); i++)
    cr_assert(rec_log[i].ctx == &token, "listener call %zu got ctx %p, expected %p", i,
              rec_log[i].ctx, (void *)&token);
  rec_assert_well_formed();
}

Test(release, every_huge_block_is_reported_once)
{
  enum { N = 40 };
  void *blocks[N];

  for (int i = 0; i < N; i++) {
    size_t n = 200 * SHADOW_KIB + (size_t)i * 33 * SHADOW_KIB;
    blocks[i] = PINHEAP_NAME(malloc)(n);
    cr_assert(blocks[i] != NULL);
    memset(blocks[i], i, n);
  }
  rec_install(NULL);
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(free)(blocks[(i * 17) % N]);
  cr_assert(rec_n() >= N, "%d mapped blocks freed but only %zu listener calls", N, rec_n());
  for (int i = 0; i < N; i++) {
    size_t n = 200 * SHADOW_KIB + (size_t)i * 33 * SHADOW_KIB;
    cr_assert(rec_containing(blocks[i], n) == 1,
              "block %d [%p, +%zu) is covered by %zu listener calls, expected exactly 1",
              i, blocks[i], n, rec_containing(blocks[i], n));
    cr_assert(!page_is_mapped(blocks[i]), "block %d is still mapped after free", i);
  }
  rec_assert_well_formed();
}

Test(release, cleared_listener_gets_no_calls)
{
  size_t n = 2 * SHADOW_MIB;
  void *p = PINHEAP_NAME(malloc)(n);

  cr_assert(p != NULL);
  memset(p, 1, n);
  rec_install(NULL);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
  PINHEAP_NAME(free)(p);
  /* the release did happen ... */
  cr_assert(!page_is_mapped(p), "a freed 2 MiB block is still mapped");
  /* ... and nobody was told */
  cr_assert(rec_n() == 0, "the cleared listener was called %zu time(s)", rec_n());
}

Test(release, replaced_listener_only_the_new_one_is_called)
{
  int first, second;
  void *p = PINHEAP_NAME(malloc)(SHADOW_MIB), *q = PINHEAP_NAME(malloc)(SHADOW_MIB);

  cr_assert(p != NULL && q != NULL);
  rec_install(&first);
  PINHEAP_NAME(free)(p);
  size_t after_first = rec_n();
  PINHEAP_NAME(os_set_release_listener)(rec_listener, &second);
  PINHEAP_NAME(free)(q);
  cr_assert(after_first >= 1 && rec_n() > after_first);
  for (size_t i = 0; i < rec_n(); i++)
    cr_assert(rec_log[i].ctx == (i < after_first ? (void *)&first : (void *)&second),
              "listener call %zu carried the wrong ctx", i);
}

Test(release, shrinking_a_huge_block_reports_only_the_tail)
{
  size_t n = 8 * SHADOW_MIB, m = 3 * SHADOW_MIB;
  unsigned char *p = PINHEAP_NAME(malloc)(n), *q;

  cr_assert(p != NULL);
  shadow_pattern_fill(p, n, 42);
  rec_install(NULL);
  q = PINHEAP_NAME(realloc)(p, m);
  cr_assert(q != NULL);
  cr_assert(shadow_pattern_find_mismatch(q, m, 42) == SIZE_MAX, "realloc lost the block's contents");
  cr_assert(rec_n() >= 1, "shrinking an 8 MiB mapped block to 3 MiB released nothing");
  size_t hit = rec_intersecting(q, PINHEAP_NAME(malloc_usable_size)(q));
  cr_assert(hit == SIZE_MAX,
            "listener call %zu [0x%" PRIxPTR ", +0x%zx) overlaps the live block [%p, +%zu)",
            hit, hit == SIZE_MAX ? 0 : rec_log[hit].addr, hit == SIZE_MAX ? 0 : rec_log[hit].len,
            (void *)q, m);
  if (q == p) {
    /* in place: the tail beyond the kept part went back */
    cr_assert(rec_containing(p + n - 1, 1) == 1, "the released tail was not reported");
    cr_assert(!page_is_mapped(p + n - 1), "the tail of a shrunk block is still mapped");
  } else {
    cr_assert(rec_containing(p, n) == 1, "the moved block's old mapping was not reported");
  }
  rec_assert_well_formed();
  PINHEAP_NAME(free)(q);
}

/* A mapped block that must move to grow is moved with mremap (its pages
 * go with it, nothing is copied): the old mapping is reported as one range
 * that covers it all, no other report touches it or the new block, and
 * the contents arrive.  (Before issue 24 it was copied, its copied pieces
 * given back as it went: one report per 128 KiB.) */
Test(release, growing_a_mapped_block_that_moves_reports_the_old_one)
{
  size_t n = 6 * SHADOW_MIB, m = 40 * SHADOW_MIB, page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *p = PINHEAP_NAME(malloc)(n);

  cr_assert(p != NULL);
  /* a page of our own right after the mapping: it cannot grow in place */
  uintptr_t end = ((uintptr_t)p + PINHEAP_NAME(malloc_usable_size)(p) + page - 1) & ~(page - 1);
  void *guard = mmap((void *)end, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                     -1, 0);
  cr_assert(guard != MAP_FAILED || errno == EEXIST, "mmap of the guard page: errno %d", errno);
  shadow_pattern_fill(p, n, 7);
  rec_install(NULL);
  unsigned char *q = PINHEAP_NAME(realloc)(p, m);
  cr_assert(q != NULL);
  cr_assert(shadow_pattern_find_mismatch(q, n, 7) == SIZE_MAX, "realloc lost the block's contents");
  size_t hit = rec_intersecting(q, PINHEAP_NAME(malloc_usable_size)(q));
  cr_assert(hit == SIZE_MAX, "listener call %zu overlaps the new block [%p, +%zu)", hit, (void *)q,
            m);
  cr_assert(q != p, "the block grew in place past the guard page");
  for (size_t off = page; off < n; off += page)     /* every page after the header's */
    cr_assert(rec_containing(p + off, 1) >= 1, "page +0x%zx of the moved block's old mapping "
              "was never reported", off);
  cr_assert(!page_is_mapped(p + n - 1), "the old mapping is still there");
  size_t touching = 0;              /* reports that touch the old block */
  for (size_t i = 0; i < rec_n(); i++)
    if (rec_log[i].addr < (uintptr_t)p + n && (uintptr_t)p < rec_log[i].addr + rec_log[i].len)
      touching++;
  cr_assert(touching == 1 && rec_containing(p, n) == 1,
            "the moved block's old mapping was reported in %zu listener calls, not one that "
            "covers it", touching);
  rec_assert_well_formed();
  PINHEAP_NAME(free)(q);
  if (guard != MAP_FAILED)
    munmap(guard, page);
}

Test(release, free_trims_the_top_and_reports_it)
{
  enum { N = 64 };
  void *blocks[N];
  shadow_set_t live;
  shadow_span_t other;

  cr_assert(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0) == 1);   /* heap only */
  cr_assert(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, 128 * 1024) == 1);
  cr_assert(PINHEAP_NAME(mallopt)(M_TOP_PAD, 0) == 1);
  cr_assert(shadow_set_init(&live, N) == 0);
  for (int i = 0; i < N; i++) {
    shadow_block_t b;
    blocks[i] = PINHEAP_NAME(malloc)(64 * SHADOW_KIB);
    cr_assert(blocks[i] != NULL);
    b.ptr = blocks[i];
    b.req = 64 * SHADOW_KIB;
    b.usable = PINHEAP_NAME(malloc_usable_size)(blocks[i]);
    b.id = (uint64_t)i;
    shadow_pattern_fill(b.ptr, b.usable, b.id);
    cr_assert(shadow_set_insert(&live, &b, &other) == 0);
  }
  rec_install(NULL);
  for (int i = N - 1; i >= 0; i--) {
    size_t before = rec_n();
    for (size_t k = 0; k < live.count; k++)
      if (live.blocks[k].ptr == blocks[i]) {
        shadow_set_remove(&live, k);
        break;
      }
    PINHEAP_NAME(free)(blocks[i]);
    for (size_t r = before; r < rec_n(); r++)
      cr_assert(!shadow_set_intersects(&live, rec_log[r].addr, rec_log[r].len, &other),
                "free of block %d released [0x%" PRIxPTR ", +0x%zx), which overlaps the live "
                "block [0x%" PRIxPTR ", 0x%" PRIxPTR ")", i, rec_log[r].addr, rec_log[r].len,
                other.start, other.end);
    for (size_t k = 0; k < live.count; k++)
      cr_assert(shadow_pattern_find_mismatch(live.blocks[k].ptr, live.blocks[k].usable,
                                             live.blocks[k].id) == SIZE_MAX,
                "a live block was damaged by a trimming free");
  }
  cr_assert(rec_n() >= 1, "freeing 4 MiB of heap blocks never trimmed the top");
  rec_assert_well_formed();
  shadow_set_fini(&live);
  cr_assert(PINHEAP_NAME(malloc_check)() == 0);
}

Test(release, malloc_trim_reports_only_free_memory)
{
  enum { N = 96 };
  void *blocks[N];
  shadow_set_t live;
  shadow_span_t other;

  cr_assert(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0) == 1);
  cr_assert(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, 64 * 1024 * 1024) == 1); /* no auto trim */
  cr_assert(shadow_set_init(&live, N) == 0);
  for (int i = 0; i < N; i++) {
    blocks[i] = PINHEAP_NAME(malloc)(48 * SHADOW_KIB);
    cr_assert(blocks[i] != NULL);
  }
  for (int i = 0; i < N; i++) {
    if (i % 2 == 0) {
      PINHEAP_NAME(free)(blocks[i]);   /* holes with whole free pages inside */
      continue;
    }
    shadow_block_t b = { blocks[i], 48 * SHADOW_KIB,
                         PINHEAP_NAME(malloc_usable_size)(blocks[i]), (uint64_t)i };
    shadow_pattern_fill(b.ptr, b.usable, b.id);
    cr_assert(shadow_set_insert(&live, &b, &other) == 0);
  }
  rec_install(NULL);
  int rc = PINHEAP_NAME(malloc_trim)(0);
  cr_assert(rc == 1, "malloc_trim(0) returned %d with ~2 MiB of free pages in the heap", rc);
  cr_assert(rec_n() >= 1, "malloc_trim released memory but made no listener call");
  for (size_t r = 0; r < rec_n(); r++)
    cr_assert(!shadow_set_intersects(&live, rec_log[r].addr, rec_log[r].len, &other),
              "malloc_trim released [0x%" PRIxPTR ", +0x%zx), which overlaps the live block "
              "[0x%" PRIxPTR ", 0x%" PRIxPTR ")", rec_log[r].addr, rec_log[r].len,
              other.start, other.end);
  for (size_t k = 0; k < live.count; k++)
    cr_assert(shadow_pattern_find_mismatch(live.blocks[k].ptr, live.blocks[k].usable,
                                           live.blocks[k].id) == SIZE_MAX,
              "a live block was damaged by malloc_trim");
  /* every hole's whole pages were given back, and reported */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < N; i += 2) {
    uintptr_t lo = ((uintptr_t)blocks[i] + 64 + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)blocks[i] + 48 * SHADOW_KIB - 64) & ~(uintptr_t)(page - 1);
    cr_assert(rec_containing((void *)lo, hi - lo) == 1,
              "the free pages [0x%" PRIxPTR ", 0x%" PRIxPTR ") of hole %d were not reported "
              "exactly once by malloc_trim", lo, hi, i);
  }
  rec_assert_well_formed();
  cr_assert(PINHEAP_NAME(malloc_check)() == 0);
  /* the decommitted memory is usable again */
  for (int i = 0; i < N; i += 2) {
    blocks[i] = PINHEAP_NAME(malloc)(48 * SHADOW_KIB);
    cr_assert(blocks[i] != NULL);
    memset(blocks[i], 0x11, 48 * SHADOW_KIB);
  }
  cr_assert(PINHEAP_NAME(malloc_check)() == 0);
  shadow_set_fini(&live);
}

Test(release, destroy_mspace_reports_every_byte)
{
  pinheap_mspace msp = PINHEAP_NAME(create_mspace)(0, 0);
  void *blocks[6];
  size_t sizes[6] = { 100, 5000, 60 * SHADOW_KIB, 900 * SHADOW_KIB, 3 * SHADOW_MIB, 700 };

  cr_assert(msp != NULL);
  for (int i = 0; i < 6; i++) {
    blocks[i] = PINHEAP_NAME(mspace_malloc)(msp, sizes[i]);
    cr_assert(blocks[i] != NULL);
    memset(blocks[i], 0x5a, sizes[i]);
  }
  rec_install(NULL);
  size_t released = PINHEAP_NAME(destroy_mspace)(msp);
  cr_assert(released >= 4 * SHADOW_MIB, "destroy_mspace released %zu bytes while holding "
            "more than 4 MiB of blocks", released);
  cr_assert(rec_total_bytes() == released,
            "destroy_mspace returned %zu bytes released, the listener was told %zu bytes "
            "in %zu calls", released, rec_total_bytes(), rec_n());
  for (int i = 0; i < 6; i++) {
    cr_assert(rec_containing(blocks[i], sizes[i]) == 1,
              "block %d [%p, +%zu) of the destroyed mspace was not reported exactly once",
              i, blocks[i], sizes[i]);
    cr_assert(!page_is_mapped(blocks[i]), "block %d is still mapped after destroy_mspace", i);
  }
  cr_assert(rec_containing(msp, 1) == 1, "the mspace's own header was not reported");
  rec_assert_well_formed();
}

Test(release, fixed_region_is_never_reported)
{
  size_t cap = 4 * SHADOW_MIB;
  char *region = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  pinheap_mspace msp;
  void *p[16];

  cr_assert(region != MAP_FAILED);
  rec_install(NULL);
  msp = PINHEAP_NAME(create_mspace_with_base)(region, cap, 0);
  cr_assert(msp != NULL);
  for (int i = 0; i < 16; i++) {   /* 1.1 MiB in all, some above the mmap threshold */
    size_t n = (size_t)(i % 8 + 1) * 32 * SHADOW_KIB;
    p[i] = PINHEAP_NAME(mspace_malloc)(msp, n);
    cr_assert(p[i] != NULL, "allocation %d (%zu bytes) in a 4 MiB region failed", i, n);
    memset(p[i], 0x33, n);
  }
  for (int i = 0; i < 16; i++)
    PINHEAP_NAME(mspace_free)(msp, p[i]);
  PINHEAP_NAME(mspace_trim)(msp, 0);
  size_t released = PINHEAP_NAME(destroy_mspace)(msp);
  cr_assert(released == 0, "destroy_mspace of a fixed region reported %zu bytes", released);
  size_t hit = rec_intersecting(region, cap);
  cr_assert(hit == SIZE_MAX, "the listener was told of [0x%" PRIxPTR ", +0x%zx) inside the "
            "caller's region", hit == SIZE_MAX ? 0 : rec_log[hit].addr,
            hit == SIZE_MAX ? 0 : rec_log[hit].len);
  cr_assert(page_is_mapped(region) && page_is_mapped(region + cap - 1));
  munmap(region, cap);
}

/* A listener that calls back into the allocator: the OS layer is entered
 * without heap locks held (allocator/os/os.h), so this must not deadlock. */
static atomic_int reentry_depth, reentry_calls;

static void reentrant_listener(void *addr, size_t len, void *ctx)
{
  (void)ctx;
  rec_listener(addr, len, NULL);
  if (atomic_fetch_add(&reentry_depth, 1) == 0) {
    /* a small block, and one too big for any free chunk of the heap */
    void *p = PINHEAP_NAME(malloc)(48);
    void *q = PINHEAP_NAME(malloc)(100 * 1024);
    if (p != NULL && q != NULL) {
      memset(p, 0, 48);
      memset(q, 0, 100 * 1024);
      atomic_fetch_add(&reentry_calls, 1);
    }
    PINHEAP_NAME(free)(q);
    PINHEAP_NAME(free)(p);
  }
  atomic_fetch_sub(&reentry_depth, 1);
}

Test(release, listener_may_call_the_allocator)
{
  void *big = PINHEAP_NAME(malloc)(2 * SHADOW_MIB);
  pinheap_mspace msp = PINHEAP_NAME(create_mspace)(0, 1);

  void *holes[24];

  cr_assert(big != NULL && msp != NULL);
  cr_assert(PINHEAP_NAME(mspace_malloc)(msp, SHADOW_MIB) != NULL);
  /* a heap with free pages between live blocks and a big top: malloc_trim
   * below decommits and unmaps while the listener allocates */
  cr_assert(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0) == 1);
  cr_assert(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, 64 * 1024 * 1024) == 1);
  for (int i = 0; i < 24; i++) {
    holes[i] = PINHEAP_NAME(malloc)(48 * SHADOW_KIB);
    cr_assert(holes[i] != NULL);
  }
  for (int i = 0; i < 24; i += 2)
    PINHEAP_NAME(free)(holes[i]);
  PINHEAP_NAME(free)(holes[23]);
  cr_assert(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 65536) == 1);
  rec_reset();
  PINHEAP_NAME(os_set_release_listener)(reentrant_listener, NULL);
  PINHEAP_NAME(free)(big);
  PINHEAP_NAME(destroy_mspace)(msp);
  PINHEAP_NAME(malloc_trim)(0);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
  cr_assert(atomic_load(&reentry_calls) >= 2,
            "the listener ran %d allocator round trips, expected one per release (>= 2)",
            atomic_load(&reentry_calls));
  cr_assert(PINHEAP_NAME(malloc_check)() == 0);
}

/* ---- listeners that free, malloc and realloc, on every release path -------- */

/*
 * A registration cache dropping entries is a listener that frees blocks of
 * the very sizes being given back.  Each thread keeps a pool of blocks the
 * listener frees (and replaces) on every call; the releases come from the
 * trims that consolidation causes while a thread cache gives a list back,
 * while it refills, and from freeing huge blocks.  Every block carries its
 * owner's pattern: a block handed out twice, a leak or a lost list shows
 * as a mismatch, an abort, or in-use bytes that do not come back.
 */
#define CHURN_POOL 96
#define CHURN_SIZES 3

typedef struct churn_pool_s {
  void *blk[CHURN_POOL];
  uint32_t seed[CHURN_POOL];
  size_t size[CHURN_POOL];
  unsigned n;
  unsigned next_seed;
  int depth;
} churn_pool_t;

static __thread churn_pool_t churn_pool;
static atomic_size_t churn_calls;
static const size_t churn_sizes[CHURN_SIZES] = { 48, 112, 400 };

static void churn_fill(void *p, size_t n, uint32_t seed)
{
  for (size_t i = 0; i < n; i++)
    ((unsigned char *)p)[i] = (unsigned char)(seed * 31u + i);
}

static bool churn_intact(const void *p, size_t n, uint32_t seed)
{
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != (unsigned char)(seed * 31u + i))
      return false;
  return true;
}

static void churn_pool_add(churn_pool_t *pl, size_t size)
{
  void *p = PINHEAP_NAME(malloc)(size);
  if (p == NULL || pl->n == CHURN_POOL) {
    PINHEAP_NAME(free)(p);
    return;
  }
  pl->seed[pl->n] = pl->next_seed++;
  pl->size[pl->n] = size;
  churn_fill(p, size, pl->seed[pl->n]);
  pl->blk[pl->n++] = p;
}

static void churn_listener(void *addr, size_t len, void *ctx)
{
  churn_pool_t *pl = &churn_pool;
  (void)addr, (void)len, (void)ctx;
  atomic_fetch_add(&churn_calls, 1);
  if (pl->depth++ == 0) {
    /* free half the pool (checking each block), realloc one, refill */
    for (unsigned k = 0; k < pl->n / 2; k++) {
      unsigned i = pl->n - 1 - k;
      cr_assert(churn_intact(pl->blk[i], pl->size[i], pl->seed[i]),
                "a pooled block of %zu bytes at %p changed while the pool held it",
                pl->size[i], pl->blk[i]);
      PINHEAP_NAME(free)(pl->blk[i]);
    }
    pl->n -= pl->n / 2;
    if (pl->n > 0) {
      void *r = PINHEAP_NAME(realloc)(pl->blk[0], pl->size[0] + 16);
      cr_assert_not_null(r);
      cr_assert(churn_intact(r, pl->size[0], pl->seed[0]), "realloc inside a listener lost data");
      pl->blk[0] = r;
      pl->size[0] += 16;
      churn_fill(r, pl->size[0], pl->seed[0]);
    }
    for (unsigned k = 0; pl->n < CHURN_POOL && k < CHURN_POOL / 2; k++)
      churn_pool_add(pl, churn_sizes[(pl->n + k) % CHURN_SIZES]);
  }
  pl->depth--;
}

typedef struct churn_arg_s {
  unsigned id;
  unsigned rounds;
  atomic_int *failures;
} churn_arg_t;

#define CHURN_BLOCKS 12000

static void *churn_thread(void *argp)
{
  churn_arg_t *arg = argp;
  void **blk = calloc(CHURN_BLOCKS, sizeof(void *));
  cr_assert_not_null(blk);
  for (unsigned k = 0; k < CHURN_POOL / 2; k++)
    churn_pool_add(&churn_pool, churn_sizes[k % CHURN_SIZES]);
  for (unsigned r = 0; r < arg->rounds; r++) {
    for (unsigned i = 0; i < CHURN_BLOCKS; i++) {
      size_t size = churn_sizes[i % CHURN_SIZES];
      blk[i] = PINHEAP_NAME(malloc)(size);
      cr_assert_not_null(blk[i]);
      churn_fill(blk[i], size, arg->id * 1000003u + i);
    }
    /* a huge block: its free is a release of its own */
    void *huge = PINHEAP_NAME(malloc)(64 * SHADOW_MIB);
    cr_assert_not_null(huge);
    for (unsigned i = 0; i < CHURN_BLOCKS; i++) {
      size_t size = churn_sizes[i % CHURN_SIZES];
      if (!churn_intact(blk[i], size, arg->id * 1000003u + i)) {
        atomic_fetch_add(arg->failures, 1);
        cr_log_error("thread %u round %u: block %u (%zu bytes at %p) was handed out twice or "
                     "overwritten", arg->id, r, i, size, blk[i]);
        break;
      }
    }
    /* After two plain rounds: a mapped block shrunk in place releases its
     * tail, grown it may move; trim and decommit. */
    if (r >= 2) {
      huge = PINHEAP_NAME(realloc)(huge, 40 * SHADOW_MIB);
      cr_assert_not_null(huge);
      huge = PINHEAP_NAME(realloc)(huge, 80 * SHADOW_MIB);
      cr_assert_not_null(huge);
    }
    for (unsigned i = 0; i < CHURN_BLOCKS; i++)
      PINHEAP_NAME(free)(blk[(i * 7919u) % CHURN_BLOCKS]);
    PINHEAP_NAME(free)(huge);
    if (r >= 2 && r % 2 == 1)
      PINHEAP_NAME(malloc_trim)(0);
  }
  churn_pool.depth++;                    /* the listener leaves the pool alone now */
  for (unsigned i = 0; i < churn_pool.n; i++) {
    cr_assert(churn_intact(churn_pool.blk[i], churn_pool.size[i], churn_pool.seed[i]),
              "thread %u: a pooled block changed", arg->id);
    PINHEAP_NAME(free)(churn_pool.blk[i]);
  }
  churn_pool.n = 0;
  churn_pool.depth--;
  free(blk);
  return NULL;
}

static size_t in_use_bytes(void)
{
  PINHEAP_NAME(malloc_trim)(0);
  return PINHEAP_NAME(mallinfo2)().uordblks;
}

Test(release, listeners_that_free_and_malloc_leave_every_cache_consistent)
{
  enum { THREADS = 4 };
  pthread_t t[THREADS];
  churn_arg_t arg[THREADS];
  atomic_int failures = 0;

  /* A set threshold trims at once: every consolidation that reaches the
   * top releases, inside a give-back or a refill. */
  cr_assert(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, 64 * 1024) == 1);
  size_t before = in_use_bytes();
  PINHEAP_NAME(os_set_release_listener)(churn_listener, NULL);
  for (unsigned i = 0; i < THREADS; i++) {
    arg[i] = (churn_arg_t){ .id = i, .rounds = 6, .failures = &failures };
    cr_assert_eq(pthread_create(&t[i], NULL, churn_thread, &arg[i]), 0);
  }
  for (unsigned i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  /* and once on this thread, alone: a lost or doubled list shows in the count */
  arg[0].rounds = 4;
  churn_thread(&arg[0]);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
  cr_assert_eq(atomic_load(&failures), 0, "blocks were handed out twice (details above)");
  cr_assert_gt(atomic_load(&churn_calls), 20, "only %zu releases reached the listener: the test "
               "did not exercise the release paths", atomic_load(&churn_calls));
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
  size_t after = in_use_bytes();
  cr_assert_eq(after, before, "in-use bytes went from %zu to %zu with every block freed: "
               "chunks were lost", before, after);
}
