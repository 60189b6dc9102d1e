/*
 * test_random.c -- long randomized operation sequences checked against the
 * shadow model (shadow.h), on the global heap, on a growing mspace and on a
 * fixed-region mspace.
 *
 * Every step draws one operation (malloc, calloc, realloc grow/shrink/to 0,
 * memalign, posix_memalign, aligned_alloc, valloc, pvalloc, free,
 * malloc_usable_size, trim, mallopt, content check) and a size from one of
 * four distributions (tiny 0-64, small < 1 KiB, medium < 128 KiB, large
 * 64 KiB - 4 MiB, across the mmap threshold).  After it, the model's
 * invariants are asserted: contents intact, no overlap, alignment, usable
 * size, region bounds, and the allocator's own checker returns 0 (after
 * every step in the short runs, every N steps in the long ones).
 *
 * Main entry point: run_sequence().  Failures name the seed; rerun with
 * PINHEAP_TEST_SEED=<seed> (or "random"), scale with PINHEAP_TEST_SCALE.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinheap.h"
#include "shadow.h"

#define RUN_MAX_LIVE      2048
#define RUN_MAX_SIZE      (4 * SHADOW_MIB)
#define RUN_CANARY        0xa5
#define RUN_REGION_JUNK   0xcc

typedef enum run_op_e {
  OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_MEMALIGN, OP_POSIX_MEMALIGN, OP_ALIGNED_ALLOC,
  OP_VALLOC, OP_PVALLOC, OP_FREE, OP_USABLE, OP_VERIFY, OP_TRIM, OP_MALLOPT, OP_COUNT
} run_op_t;

static const char *const run_op_names[OP_COUNT] = {
  "malloc", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc",
  "valloc", "pvalloc", "free", "usable_size", "verify", "trim", "mallopt"
};

typedef struct run_s {
  shadow_heap_t heap;
  shadow_set_t live;
  shadow_rng_t rng;
  uint64_t seed;
  size_t step, steps;
  uint64_t next_id;
  size_t check_every;    /* heap checker period (1 = every step) */
  size_t sweep_every;    /* full content sweep period */
  size_t max_bytes;      /* above this, the run frees instead of allocating */
  size_t page;
  run_op_t op;
  char detail[160];      /* what the current step is doing */
  size_t op_count[OP_COUNT];
  size_t enomem_count;   /* FIXED: NULL + ENOMEM outcomes */
  size_t large_count;    /* allocations >= 128 KiB that succeeded */
  /* FIXED: the mapping around the region, its guard bytes */
  unsigned char *map;
  size_t map_len;
  unsigned char *lo_guard, *hi_guard;
  size_t lo_guard_len, hi_guard_len;
} run_t;

/* Every assertion names heap, seed, step and operation. */
#define RUN_ASSERT(r, cond, fmt, ...)                                              \
  cr_assert((cond), "[%s seed=0x%016" PRIx64 " step=%zu/%zu op=%s %s] " fmt         \
            " (rerun: PINHEAP_TEST_SEED=0x%" PRIx64 ")",                            \
            (r)->heap.name, (r)->seed, (r)->step, (r)->steps,                        \
            run_op_names[(r)->op], (r)->detail, ##__VA_ARGS__, (r)->seed)

/* ---- sizes -------------------------------------------------------------- */

static size_t run_size_draw(run_t *r)
{
  uint64_t d = shadow_rng_below(&r->rng, 1000);

  if (d < 400)
    return (size_t)shadow_rng_range(&r->rng, 0, 64);               /* tiny */
  if (d < 750)
    return (size_t)shadow_rng_range(&r->rng, 65, 1023);            /* small */
  if (d < 975)
    return shadow_rng_log_range(&r->rng, 1024, 128 * SHADOW_KIB - 1); /* medium */
  return shadow_rng_log_range(&r->rng, 64 * SHADOW_KIB, RUN_MAX_SIZE); /* large */
}

static size_t run_resize_draw(run_t *r, size_t old)
{
  uint64_t d = shadow_rng_below(&r->rng, 10);
  size_t n;

  if (d < 4) {          /* grow */
    size_t extra = (size_t)shadow_rng_range(&r->rng, 1, old * 3 + 64);
    n = old + extra;
  } else if (d < 8) {   /* shrink */
    n = old == 0 ? 0 : (size_t)shadow_rng_range(&r->rng, 1, old);
  } else {
    n = run_size_draw(r);
  }
  return n > RUN_MAX_SIZE ? RUN_MAX_SIZE : n;
}

/* ---- the model's checks ------------------------------------------------- */

static void run_verify_block(run_t *r, const shadow_block_t *b, const char *when)
{
  size_t bad = shadow_pattern_find_mismatch(b->ptr, b->usable, b->id);

  RUN_ASSERT(r, bad == SIZE_MAX,
             "%s: block %p (id %" PRIu64 ", request %zu, usable %zu) was overwritten at "
             "offset %zu", when, (void *)b->ptr, b->id, b->req, b->usable, bad);
}

static void run_verify_all(run_t *r, const char *when)
{
  for (size_t i = 0; i < r->live.count; i++)
    run_verify_block(r, &r->live.blocks[i], when);
}

static void run_verify_guards(run_t *r)
{
  if (r->heap.kind != SHADOW_HEAP_FIXED)
    return;
  for (size_t i = 0; i < r->lo_guard_len; i++)
    RUN_ASSERT(r, r->lo_guard[i] == RUN_CANARY,
               "the fixed heap wrote below its region: byte %zu before base is 0x%02x",
               r->lo_guard_len - i, r->lo_guard[i]);
  for (size_t i = 0; i < r->hi_guard_len; i++)
    RUN_ASSERT(r, r->hi_guard[i] == RUN_CANARY,
               "the fixed heap wrote past its region: byte %zu after base+capacity is 0x%02x",
               i, r->hi_guard[i]);
}

static void run_check_heap(run_t *r)
{
  int problems = shadow_heap_check(&r->heap);

  RUN_ASSERT(r, problems == 0, "the heap checker found %d problem(s) (see stderr)", problems);
  run_verify_guards(r);
}

static void run_check_mallinfo(run_t *r)
{
  struct mallinfo2 mi = shadow_heap_mallinfo(&r->heap);

  RUN_ASSERT(r, mi.uordblks + mi.hblkhd >= r->live.live_bytes,
             "mallinfo2 counts %zu bytes in use (uordblks %zu + hblkhd %zu) but the test holds "
             "%zu usable bytes", mi.uordblks + mi.hblkhd, mi.uordblks, mi.hblkhd,
             r->live.live_bytes);
  RUN_ASSERT(r, mi.uordblks + mi.fordblks <= mi.arena,
             "mallinfo2: uordblks %zu + fordblks %zu exceed arena %zu",
             mi.uordblks, mi.fordblks, mi.arena);
  RUN_ASSERT(r, mi.keepcost <= mi.fordblks,
             "mallinfo2: keepcost %zu (top) exceeds fordblks %zu (all free bytes)",
             mi.keepcost, mi.fordblks);
  RUN_ASSERT(r, (mi.hblks == 0) == (mi.hblkhd == 0),
             "mallinfo2: hblks %zu but hblkhd %zu", mi.hblks, mi.hblkhd);
  if (r->heap.kind == SHADOW_HEAP_FIXED)
    RUN_ASSERT(r, mi.hblks == 0 && mi.arena <= r->heap.hi - r->heap.lo,
               "mallinfo2 of a fixed heap: hblks %zu, arena %zu, region %zu bytes",
               mi.hblks, mi.arena, (size_t)(r->heap.hi - r->heap.lo));
}

/* NULL from an allocation: an error unless a fixed heap is out of room. */
static void run_accept_null(run_t *r, size_t n, int err)
{
  RUN_ASSERT(r, r->heap.kind == SHADOW_HEAP_FIXED,
             "returned NULL (errno %d) for %zu bytes on a heap that can grow", err, n);
  RUN_ASSERT(r, err == ENOMEM,
             "a full fixed heap returned NULL with errno %d (%s), expected ENOMEM",
             err, strerror(err));
  r->enomem_count++;
}

/* Records a fresh block: alignment, usable size, bounds, zeroing, overlap. */
static void run_adopt(run_t *r, void *p, size_t n, size_t align, bool zeroed)
{
  shadow_block_t b;
  shadow_span_t other;
  int rc;

  RUN_ASSERT(r, ((uintptr_t)p & 15) == 0, "result %p is not 16-byte aligned", p);
  RUN_ASSERT(r, ((uintptr_t)p & (align - 1)) == 0,
             "result %p is not aligned to %zu", p, align);
  b.ptr = p;
  b.req = n;
  b.usable = shadow_heap_usable(&r->heap, p);
  b.id = r->next_id++;
  RUN_ASSERT(r, b.usable >= n, "usable size %zu of %p is below the request %zu",
             b.usable, p, n);
  RUN_ASSERT(r, shadow_heap_owns(&r->heap, p, b.usable),
             "block [%p, +%zu) lies outside the fixed region [0x%" PRIxPTR ", 0x%" PRIxPTR ")",
             p, b.usable, r->heap.lo, r->heap.hi);
  if (zeroed) {
    size_t bad = shadow_bytes_find_not(p, n, 0);
    RUN_ASSERT(r, bad == SIZE_MAX, "calloc block %p of %zu bytes has a non-zero byte at offset %zu",
               p, n, bad);
  }
  rc = shadow_set_insert(&r->live, &b, &other);
  RUN_ASSERT(r, rc != -1,
             "block [%p, %p) overlaps the live block [0x%" PRIxPTR ", 0x%" PRIxPTR ")",
             p, (void *)((char *)p + b.usable), other.start, other.end);
  RUN_ASSERT(r, rc == 0, "the shadow model is full (%zu blocks)", r->live.cap);
  if (n >= 128 * SHADOW_KIB)
    r->large_count++;
  shadow_pattern_fill(p, b.usable, b.id);
}

static size_t run_pick(run_t *r)
{
  return (size_t)shadow_rng_below(&r->rng, r->live.count);
}

/* ---- operations --------------------------------------------------------- */

static void op_malloc(run_t *r)
{
  size_t n = run_size_draw(r);
  void *p;

  snprintf(r->detail, sizeof(r->detail), "size=%zu", n);
  errno = 0;
  p = shadow_heap_malloc(&r->heap, n);
  if (p == NULL)
    run_accept_null(r, n, errno);
  else
    run_adopt(r, p, n, 16, false);
}

static void op_calloc(run_t *r)
{
  size_t n = run_size_draw(r);
  size_t elem = (size_t)1 << shadow_rng_below(&r->rng, 5);
  size_t count = (n + elem - 1) / elem;
  void *p;

  snprintf(r->detail, sizeof(r->detail), "count=%zu elem=%zu", count, elem);
  errno = 0;
  p = shadow_heap_calloc(&r->heap, count, elem);
  if (p == NULL)
    run_accept_null(r, count * elem, errno);
  else
    run_adopt(r, p, count * elem, 16, true);
}

static void op_realloc(run_t *r)
{
  shadow_block_t old;
  size_t idx, n, keep, bad;
  void *q;

  if (r->live.count == 0 || (r->heap.kind == SHADOW_HEAP_GLOBAL &&
                             shadow_rng_below(&r->rng, 20) == 0)) {
    /* realloc(NULL, n) is malloc(n) */
    n = run_size_draw(r);
    snprintf(r->detail, sizeof(r->detail), "ptr=NULL size=%zu", n);
    errno = 0;
    q = shadow_heap_realloc(&r->heap, NULL, n);
    if (q == NULL)
      run_accept_null(r, n, errno);
    else
      run_adopt(r, q, n, 16, false);
    return;
  }
  idx = run_pick(r);
  old = r->live.blocks[idx];
  n = run_resize_draw(r, old.req);
  if (shadow_rng_below(&r->rng, 50) == 0)
    n = 0;  /* glibc: frees the block, returns NULL */
  snprintf(r->detail, sizeof(r->detail), "ptr=%p old=%zu new=%zu", (void *)old.ptr, old.req, n);
  run_verify_block(r, &old, "before realloc");
  errno = 0;
  q = shadow_heap_realloc(&r->heap, old.ptr, n);
  if (n == 0) {
    /* glibc (and dlmalloc's REALLOC_ZERO_BYTES_FREES): p is freed, NULL returned;
     * the same for mspace_realloc */
    RUN_ASSERT(r, q == NULL, "realloc(p, 0) returned %p, expected NULL (p freed, as glibc)", q);
    shadow_set_remove(&r->live, idx);
    return;
  }
  if (q == NULL) {
    run_accept_null(r, n, errno);
    run_verify_block(r, &old, "after a failed realloc (the old block must be untouched)");
    return;
  }
  keep = n < old.usable ? n : old.usable;
  bad = shadow_pattern_find_mismatch(q, keep, old.id);
  RUN_ASSERT(r, bad == SIZE_MAX,
             "realloc %p -> %p lost the old contents at offset %zu of %zu kept bytes",
             (void *)old.ptr, q, bad, keep);
  shadow_set_remove(&r->live, idx);
  run_adopt(r, q, n, 16, false);
}

static size_t run_align_draw(run_t *r)
{
  return (size_t)1 << shadow_rng_range(&r->rng, 3, 16);  /* 8 .. 64 KiB */
}

static void op_memalign(run_t *r)
{
  size_t a = run_align_draw(r), want = a < 16 ? 16 : a;
  size_t n = run_size_draw(r);
  void *p;

  if (r->heap.kind == SHADOW_HEAP_GLOBAL && shadow_rng_below(&r->rng, 6) == 0) {
    /* glibc rounds a non-power-of-two alignment up to the next power */
    a = a + a / 2;
    want = (size_t)1 << (64 - __builtin_clzll(a - 1));
  }
  snprintf(r->detail, sizeof(r->detail), "align=%zu size=%zu", a, n);
  errno = 0;
  p = shadow_heap_memalign(&r->heap, a, n);
  if (p == NULL)
    run_accept_null(r, n, errno);
  else
    run_adopt(r, p, n, want, false);
}

static void op_posix_memalign(run_t *r)
{
  static const size_t bad_aligns[] = { 0, 1, 4, 12, 24, 48, 4097 };
  void *sentinel = (void *)(uintptr_t)0x5e17, *p = sentinel;
  size_t n = run_size_draw(r), a;
  int rc;

  if (shadow_rng_below(&r->rng, 8) == 0) {
    a = bad_aligns[shadow_rng_below(&r->rng, sizeof(bad_aligns) / sizeof(bad_aligns[0]))];
    snprintf(r->detail, sizeof(r->detail), "bad align=%zu size=%zu", a, n);
    rc = PINHEAP_NAME(posix_memalign)(&p, a, n);
    RUN_ASSERT(r, rc == EINVAL, "posix_memalign with alignment %zu returned %d, expected EINVAL",
               a, rc);
    RUN_ASSERT(r, p == sentinel, "posix_memalign with a bad alignment wrote %p to *memptr", p);
    return;
  }
  a = run_align_draw(r);
  snprintf(r->detail, sizeof(r->detail), "align=%zu size=%zu", a, n);
  rc = PINHEAP_NAME(posix_memalign)(&p, a, n);
  RUN_ASSERT(r, rc == 0, "posix_memalign(%zu, %zu) returned %d", a, n, rc);
  run_adopt(r, p, n, a, false);
}

static void op_aligned_alloc(run_t *r)
{
  size_t n = run_size_draw(r), a;
  void *p;

  if (shadow_rng_below(&r->rng, 8) == 0) {
    a = 3 * ((size_t)1 << shadow_rng_range(&r->rng, 2, 10));  /* 12 .. 3072 */
    snprintf(r->detail, sizeof(r->detail), "bad align=%zu size=%zu", a, n);
    errno = 0;
    p = PINHEAP_NAME(aligned_alloc)(a, n);
    RUN_ASSERT(r, p == NULL && errno == EINVAL,
               "aligned_alloc with alignment %zu returned %p, errno %d; expected NULL, EINVAL",
               a, p, errno);
    return;
  }
  a = run_align_draw(r);
  snprintf(r->detail, sizeof(r->detail), "align=%zu size=%zu", a, n);
  p = PINHEAP_NAME(aligned_alloc)(a, n);
  RUN_ASSERT(r, p != NULL, "aligned_alloc(%zu, %zu) returned NULL", a, n);
  run_adopt(r, p, n, a, false);
}

static void op_valloc(run_t *r, bool rounded)
{
  size_t n = run_size_draw(r);
  size_t want = rounded ? (n == 0 ? r->page : (n + r->page - 1) & ~(r->page - 1)) : n;
  void *p;

  snprintf(r->detail, sizeof(r->detail), "%s size=%zu", rounded ? "pvalloc" : "valloc", n);
  p = rounded ? PINHEAP_NAME(pvalloc)(n) : PINHEAP_NAME(valloc)(n);
  RUN_ASSERT(r, p != NULL, "returned NULL for %zu bytes", n);
  /* pvalloc promises the whole rounded size */
  run_adopt(r, p, want, r->page, false);
}

static void op_free(run_t *r)
{
  size_t idx = run_pick(r);
  shadow_block_t b = r->live.blocks[idx];

  snprintf(r->detail, sizeof(r->detail), "ptr=%p size=%zu", (void *)b.ptr, b.req);
  run_verify_block(r, &b, "before free");
  errno = EDOM;
  shadow_heap_free(&r->heap, b.ptr);
  RUN_ASSERT(r, errno == EDOM, "free changed errno from EDOM to %d", errno);
  shadow_set_remove(&r->live, idx);
  if (shadow_rng_below(&r->rng, 64) == 0) {
    errno = EDOM;
    shadow_heap_free(&r->heap, NULL);   /* a no-op */
    RUN_ASSERT(r, errno == EDOM, "free(NULL) changed errno to %d", errno);
  }
}

static void op_usable(run_t *r)
{
  const shadow_block_t *b = &r->live.blocks[run_pick(r)];
  size_t u = shadow_heap_usable(&r->heap, b->ptr);

  snprintf(r->detail, sizeof(r->detail), "ptr=%p", (void *)b->ptr);
  RUN_ASSERT(r, u == b->usable, "usable size of %p changed from %zu to %zu while it was live",
             (void *)b->ptr, b->usable, u);
  if (r->heap.kind == SHADOW_HEAP_GLOBAL)
    RUN_ASSERT(r, PINHEAP_NAME(malloc_usable_size)(NULL) == 0,
               "malloc_usable_size(NULL) is not 0");
}

static void op_trim(run_t *r)
{
  size_t pad = (size_t)shadow_rng_below(&r->rng, 256 * SHADOW_KIB);
  int rc;

  snprintf(r->detail, sizeof(r->detail), "pad=%zu", pad);
  rc = shadow_heap_trim(&r->heap, pad);
  RUN_ASSERT(r, rc == 0 || rc == 1, "trim returned %d, expected 0 or 1", rc);
  if (r->heap.kind == SHADOW_HEAP_FIXED)
    RUN_ASSERT(r, rc == 0, "trim of a fixed heap returned %d: it must never release", rc);
  run_verify_all(r, "after trim");
}

static void op_mallopt(run_t *r)
{
  int param = 0, value = 0, want = 1;

  switch (shadow_rng_below(&r->rng, 6)) {
  case 0:
    param = M_TRIM_THRESHOLD;
    value = (int)shadow_rng_below(&r->rng, 1024 * 1024);
    break;
  case 1:
    param = M_TOP_PAD;
    value = (int)shadow_rng_below(&r->rng, 256 * 1024);
    break;
  case 2:
    param = M_MMAP_THRESHOLD;
    value = (int)shadow_rng_log_range(&r->rng, 16 * SHADOW_KIB, 4 * SHADOW_MIB);
    break;
  case 3:
    param = M_MMAP_THRESHOLD;   /* out of range: refused, as glibc */
    value = shadow_rng_below(&r->rng, 2) ? -1 : 64 * 1024 * 1024;
    want = 0;
    break;
  case 4:
    param = M_MMAP_MAX;
    value = shadow_rng_below(&r->rng, 3) == 0 ? 0 : 65536;
    break;
  default:
    param = 12345;              /* unknown */
    value = 1;
    want = 0;
    break;
  }
  snprintf(r->detail, sizeof(r->detail), "param=%d value=%d", param, value);
  RUN_ASSERT(r, PINHEAP_NAME(mallopt)(param, value) == want,
             "mallopt(%d, %d) did not return %d", param, value, want);
}

/* ---- the driver --------------------------------------------------------- */

static run_op_t run_op_draw(run_t *r)
{
  bool global = r->heap.kind == SHADOW_HEAP_GLOBAL;
  bool must_free = r->live.count >= RUN_MAX_LIVE - 8 || r->live.live_bytes > r->max_bytes;
  uint64_t d;

  if (r->live.count == 0)
    return OP_MALLOC;
  if (must_free)
    return shadow_rng_below(&r->rng, 4) ? OP_FREE : OP_REALLOC;
  d = shadow_rng_below(&r->rng, 1000);
  if (d < 250) return OP_MALLOC;
  if (d < 320) return OP_CALLOC;
  if (d < 470) return OP_REALLOC;
  if (d < 510) return OP_MEMALIGN;
  if (d < 530) return global ? OP_POSIX_MEMALIGN : OP_MEMALIGN;
  if (d < 550) return global ? OP_ALIGNED_ALLOC : OP_MALLOC;
  if (d < 555) return global ? OP_VALLOC : OP_MALLOC;
  if (d < 560) return global ? OP_PVALLOC : OP_MALLOC;
  if (d < 920) return OP_FREE;
  if (d < 950) return OP_USABLE;
  if (d < 985) return OP_VERIFY;
  if (d < 990) return OP_TRIM;
  return global ? OP_MALLOPT : OP_USABLE;
}

static void run_step(run_t *r)
{
  r->op = run_op_draw(r);
  r->detail[0] = '\0';
  switch (r->op) {
  case OP_MALLOC:         op_malloc(r); break;
  case OP_CALLOC:         op_calloc(r); break;
  case OP_REALLOC:        op_realloc(r); break;
  case OP_MEMALIGN:       op_memalign(r); break;
  case OP_POSIX_MEMALIGN: op_posix_memalign(r); break;
  case OP_ALIGNED_ALLOC:  op_aligned_alloc(r); break;
  case OP_VALLOC:         op_valloc(r, false); break;
  case OP_PVALLOC:        op_valloc(r, true); break;
  case OP_FREE:           op_free(r); break;
  case OP_USABLE:         op_usable(r); break;
  case OP_VERIFY:         run_verify_block(r, &r->live.blocks[run_pick(r)], "random check"); break;
  case OP_TRIM:           op_trim(r); break;
  case OP_MALLOPT:        op_mallopt(r); break;
  case OP_COUNT:          break;
  }
  r->op_count[r->op]++;
}

/* FIXED heaps: map guard page | low guard | region | high guard | guard page. */
static void run_region_map(run_t *r, size_t region_bytes, size_t lo_gap, size_t hi_gap,
                           unsigned char **base_p, size_t *cap_p)
{
  size_t inner = (region_bytes + r->page - 1) & ~(r->page - 1);
  unsigned char *base;

  r->map_len = inner + 2 * r->page;
  r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(r->map != MAP_FAILED, "mmap of %zu bytes for the fixed region failed", r->map_len);
  cr_assert(mprotect(r->map, r->page, PROT_NONE) == 0);
  cr_assert(mprotect(r->map + r->map_len - r->page, r->page, PROT_NONE) == 0);
  base = r->map + r->page + lo_gap;
  *cap_p = inner - lo_gap - hi_gap;
  /* The caller's region is dirty: a heap that assumes zeroed memory fails. */
  memset(r->map + r->page, RUN_CANARY, inner);
  memset(base, RUN_REGION_JUNK, *cap_p);
  r->lo_guard = r->map + r->page;
  r->lo_guard_len = lo_gap;
  r->hi_guard = base + *cap_p;
  r->hi_guard_len = hi_gap;
  *base_p = base;
}

typedef struct run_conf_s {
  shadow_heap_kind_t kind;
  const char *name;
  size_t steps;          /* before scaling */
  size_t check_every;
  size_t sweep_every;
  uint64_t default_seed;
  size_t region_bytes;   /* FIXED */
  size_t lo_gap, hi_gap; /* FIXED: base offset into the mapping, bytes left after */
} run_conf_t;

static void run_setup(run_t *r, const run_conf_t *conf)
{
  char err[256];
  double scale;

  memset(r, 0, sizeof(*r));
  r->page = (size_t)sysconf(_SC_PAGESIZE);
  cr_assert(shadow_seed_get(conf->default_seed, err, sizeof(err), &r->seed) == 0, "%s", err);
  cr_assert(shadow_scale_get(err, sizeof(err), &scale) == 0, "%s", err);
  shadow_rng_seed(&r->rng, r->seed);
  cr_assert(shadow_set_init(&r->live, RUN_MAX_LIVE) == 0, "no memory for the shadow model");
  r->steps = shadow_scaled(conf->steps, scale, 200);
  r->check_every = conf->check_every;
  r->sweep_every = conf->sweep_every;
  r->max_bytes = 48 * SHADOW_MIB;
  r->heap.kind = conf->kind;
  r->heap.name = conf->name;
  if (conf->kind == SHADOW_HEAP_MSPACE) {
    r->heap.msp = PINHEAP_NAME(create_mspace)(0, 0);
    cr_assert(r->heap.msp != NULL, "create_mspace(0, 0) returned NULL");
  } else if (conf->kind == SHADOW_HEAP_FIXED) {
    unsigned char *base;
    size_t cap;
    run_region_map(r, conf->region_bytes, conf->lo_gap, conf->hi_gap, &base, &cap);
    r->heap.lo = (uintptr_t)base;
    r->heap.hi = (uintptr_t)base + cap;
    errno = 0;
    r->heap.msp = PINHEAP_NAME(create_mspace_with_base)(base, cap, 0);
    cr_assert(r->heap.msp != NULL,
              "create_mspace_with_base(%p, %zu, 0) returned NULL, errno %d", (void *)base, cap,
              errno);
    cr_assert((uintptr_t)r->heap.msp >= r->heap.lo && (uintptr_t)r->heap.msp < r->heap.hi,
              "the fixed mspace handle %p is not inside its region", r->heap.msp);
    /* Room for several large blocks at once, so that the region fills up. */
    r->max_bytes = 4 * cap;
  }
  run_verify_guards(r);
}

static void run_teardown(run_t *r)
{
  r->op = OP_FREE;
  snprintf(r->detail, sizeof(r->detail), "teardown");
  while (r->live.count > 0) {
    shadow_block_t b = r->live.blocks[r->live.count - 1];
    run_verify_block(r, &b, "at teardown");
    shadow_heap_free(&r->heap, b.ptr);
    shadow_set_remove(&r->live, r->live.count - 1);
  }
  run_check_heap(r);
  if (r->heap.kind == SHADOW_HEAP_GLOBAL) {
    struct mallinfo2 mi = PINHEAP_NAME(mallinfo2)();
    RUN_ASSERT(r, mi.hblks == 0 && mi.hblkhd == 0,
               "every block is freed but mallinfo2 still counts %zu mapped chunks (%zu bytes)",
               mi.hblks, mi.hblkhd);
    int rc = PINHEAP_NAME(malloc_trim)(0);
    RUN_ASSERT(r, rc == 0 || rc == 1, "malloc_trim(0) returned %d", rc);
    run_check_heap(r);
  } else if (r->heap.kind == SHADOW_HEAP_MSPACE) {
    struct mallinfo2 mi = PINHEAP_NAME(mspace_mallinfo)(r->heap.msp);
    RUN_ASSERT(r, mi.hblks == 0, "every block is freed but %zu mapped chunks remain", mi.hblks);
    size_t released = PINHEAP_NAME(destroy_mspace)(r->heap.msp);
    RUN_ASSERT(r, released > 0 && released == mi.arena + mi.hblkhd,
               "destroy_mspace released %zu bytes, but mspace_mallinfo counted %zu bytes of "
               "segments (arena) and %zu of mapped chunks", released, mi.arena, mi.hblkhd);
  } else {
    /* Everything coalesced: half the region is one free block again. */
    size_t cap = r->heap.hi - r->heap.lo, half = cap / 2;
    void *p = PINHEAP_NAME(mspace_malloc)(r->heap.msp, half);
    RUN_ASSERT(r, p != NULL,
               "after every block was freed, a fixed heap of %zu bytes cannot give %zu: free "
               "space is not coalesced", cap, half);
    RUN_ASSERT(r, shadow_heap_owns(&r->heap, p, half), "block %p is outside the region", p);
    memset(p, 0x3c, half);
    PINHEAP_NAME(mspace_free)(r->heap.msp, p);
    run_check_heap(r);
    size_t released = PINHEAP_NAME(destroy_mspace)(r->heap.msp);
    RUN_ASSERT(r, released == 0,
               "destroy_mspace of a fixed heap reported %zu bytes released: the caller's "
               "region must never be released", released);
    run_verify_guards(r);
    /* Still ours, still mapped: write to both ends. */
    ((volatile char *)r->heap.lo)[0] = 1;
    ((volatile char *)r->heap.hi)[-1] = 1;
    munmap(r->map, r->map_len);
  }
  shadow_set_fini(&r->live);
}

static void run_sequence(const run_conf_t *conf)
{
  run_t *r = calloc(1, sizeof(*r));

  cr_assert(r != NULL);
  run_setup(r, conf);
  for (r->step = 1; r->step <= r->steps; r->step++) {
    run_step(r);
    if (r->step % r->check_every == 0)
      run_check_heap(r);
    if (r->step % r->sweep_every == 0) {
      run_verify_all(r, "periodic sweep");
      run_check_mallinfo(r);
    }
  }
  /* Evidence that the run exercised what it claims to. */
  r->op = OP_COUNT - 1;
  snprintf(r->detail, sizeof(r->detail), "coverage");
  for (int op = 0; op < OP_COUNT; op++) {
    bool expected = r->heap.kind == SHADOW_HEAP_GLOBAL ||
                    (op != OP_POSIX_MEMALIGN && op != OP_ALIGNED_ALLOC && op != OP_VALLOC &&
                     op != OP_PVALLOC && op != OP_MALLOPT);
    if (expected && r->steps >= 2000)
      RUN_ASSERT(r, r->op_count[op] > 0, "operation %s never ran", run_op_names[op]);
  }
  RUN_ASSERT(r, r->large_count > 0, "no allocation of 128 KiB or more succeeded");
  if (r->heap.kind == SHADOW_HEAP_FIXED)
    RUN_ASSERT(r, r->enomem_count > 0, "the fixed region never filled up (no ENOMEM seen)");
  run_teardown(r);
  free(r);
}

/* ---- the tests ---------------------------------------------------------- */

TestSuite(random, .timeout = 300);

Test(random, global_checked_every_step)
{
  run_conf_t c = {
    .kind = SHADOW_HEAP_GLOBAL, .name = "global", .steps = 20000, .check_every = 1,
    .sweep_every = 500, .default_seed = 0x51ed0001
  };
  run_sequence(&c);
}

Test(random, global_long)
{
  run_conf_t c = {
    .kind = SHADOW_HEAP_GLOBAL, .name = "global", .steps = 150000, .check_every = 500,
    .sweep_every = 5000, .default_seed = 0x51ed0002
  };
  run_sequence(&c);
}

Test(random, mspace_checked_every_step)
{
  run_conf_t c = {
    .kind = SHADOW_HEAP_MSPACE, .name = "mspace", .steps = 20000, .check_every = 1,
    .sweep_every = 500, .default_seed = 0x51ed0003
  };
  run_sequence(&c);
}

Test(random, mspace_long)
{
  run_conf_t c = {
    .kind = SHADOW_HEAP_MSPACE, .name = "mspace", .steps = 150000, .check_every = 500,
    .sweep_every = 5000, .default_seed = 0x51ed0004
  };
  run_sequence(&c);
}

Test(random, fixed_checked_every_step)
{
  /* page-aligned base, region ends at the guard page */
  run_conf_t c = {
    .kind = SHADOW_HEAP_FIXED, .name = "fixed", .steps = 20000, .check_every = 1,
    .sweep_every = 500, .default_seed = 0x51ed0005, .region_bytes = 3 * SHADOW_MIB
  };
  run_sequence(&c);
}

Test(random, fixed_long)
{
  /* base 64 bytes into the mapping, 40 guard bytes after the region */
  run_conf_t c = {
    .kind = SHADOW_HEAP_FIXED, .name = "fixed", .steps = 300000, .check_every = 200,
    .sweep_every = 5000, .default_seed = 0x51ed0006, .region_bytes = 3 * SHADOW_MIB,
    .lo_gap = 64, .hi_gap = 40
  };
  run_sequence(&c);
}

Test(random, fixed_odd_region)
{
  /* base only 8-byte aligned and a capacity that is not a multiple of 16:
   * the heap must align inside the region and still never leave it.  The
   * region is megabytes, so refusing it (NULL) is a failure, not a warning. */
  run_conf_t c = {
    .kind = SHADOW_HEAP_FIXED, .name = "fixed-odd", .steps = 50000, .check_every = 20,
    .sweep_every = 1000, .default_seed = 0x51ed0007, .region_bytes = 2 * SHADOW_MIB,
    .lo_gap = 8, .hi_gap = 13
  };
  run_sequence(&c);
}
