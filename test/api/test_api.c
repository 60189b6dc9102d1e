/*
 * test_api.c -- the malloc family's glibc 2.36 semantics, entry point by
 * entry point: malloc(0), free(NULL), realloc's edge cases and content,
 * calloc zeroing and overflow, impossible sizes, reallocarray,
 * malloc_usable_size, mallopt and its effect on mmap and trimming,
 * mallinfo2's fields, malloc_stats (output, no allocation), malloc_trim and
 * errno across free.  Main entry point: the Criterion runner (suite "api").
 *
 * Criterion runs every test in a fresh process, so a test that calls
 * mallopt does not change the next one, and the dynamic mmap threshold
 * starts at its default in each test.
 */
#include "test_util.h"

/* ======================================================================= */
/*  Counting glibc's allocations (to prove malloc_stats allocates nothing)   */
/* ======================================================================= */
/*
 * The test executable interposes glibc's malloc/calloc/realloc for the
 * whole process and forwards to glibc's own entry points, counting calls
 * while api_libc_counting is set.  Not under AddressSanitizer, which owns
 * these names itself.
 */
#if !defined(__SANITIZE_ADDRESS__)
#define API_COUNT_LIBC 1
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t nmemb, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);

static atomic_int api_libc_counting;
static atomic_size_t api_libc_allocs;

void *malloc(size_t size)
{
  if (atomic_load_explicit(&api_libc_counting, memory_order_relaxed))
    atomic_fetch_add_explicit(&api_libc_allocs, 1, memory_order_relaxed);
  return __libc_malloc(size);
}

void *calloc(size_t nmemb, size_t size)
{
  if (atomic_load_explicit(&api_libc_counting, memory_order_relaxed))
    atomic_fetch_add_explicit(&api_libc_allocs, 1, memory_order_relaxed);
  return __libc_calloc(nmemb, size);
}

void *realloc(void *ptr, size_t size)
{
  if (atomic_load_explicit(&api_libc_counting, memory_order_relaxed))
    atomic_fetch_add_explicit(&api_libc_allocs, 1, memory_order_relaxed);
  return __libc_realloc(ptr, size);
}
#endif

/* ======================================================================= */
/*  Helpers                                                                 */
/* ======================================================================= */

/** One pinheap allocation and free, so that lazy initialisation is behind
 *  us before a test takes its baseline counters. */
static void heap_warm_up(void)
{
  void *p = PINHEAP_NAME(malloc)(32);
  cr_assert_not_null(p, "warm-up PINHEAP_NAME(malloc)(32) returned NULL");
  PINHEAP_NAME(free)(p);
}

static int size_cmp(const void *a, const void *b)
{
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/** Asserts that p is 16-aligned, that malloc_usable_size(p) >= n and that
 *  the full usable size can be written. */
static size_t block_assert_usable(void *p, size_t n, const char *what)
{
  cr_assert_not_null(p, "%s(%zu) returned NULL", what, n);
  cr_assert(ptr_is_aligned(p, 16), "%s(%zu) = %p is not 16-byte aligned", what, n, p);
  size_t u = PINHEAP_NAME(malloc_usable_size)(p);
  cr_assert_geq(u, n, "malloc_usable_size(%p) = %zu < %zu requested from %s", p, u, n, what);
  memset(p, 0x5A, u);
  return u;
}

/* ======================================================================= */
/*  malloc(0), free(NULL), realloc edge cases                               */
/* ======================================================================= */

Test(api, malloc_zero_unique_and_freeable)
{
  enum { N = 64 };
  uintptr_t ptrs[N];

  heap_warm_up();
  size_t base = PINHEAP_NAME(mallinfo2)().uordblks;
  for (int i = 0; i < N; i++) {
    void *p = PINHEAP_NAME(malloc)(0);
    cr_assert_not_null(p, "malloc(0) #%d returned NULL; glibc returns a unique pointer", i);
    block_assert_usable(p, 0, "malloc");
    ptrs[i] = (uintptr_t)p;
  }
  cr_assert_gt(PINHEAP_NAME(mallinfo2)().uordblks, base,
               "uordblks did not grow after %d malloc(0) calls (still %zu)", N, base);
  qsort(ptrs, N, sizeof(ptrs[0]), size_cmp);
  for (int i = 1; i < N; i++)
    cr_assert_neq(ptrs[i], ptrs[i - 1], "malloc(0) returned %p twice", (void *)ptrs[i]);
  heap_assert_sound("64 x malloc(0)");
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(free)((void *)ptrs[i]);
  cr_assert_eq(PINHEAP_NAME(mallinfo2)().uordblks, base,
               "uordblks = %zu after freeing every malloc(0) block, expected %zu",
               PINHEAP_NAME(mallinfo2)().uordblks, base);
  heap_assert_sound("freeing 64 x malloc(0)");
}

Test(api, free_null_is_noop)
{
  heap_warm_up();
  void *keep = PINHEAP_NAME(malloc)(100);
  struct mallinfo2 before = PINHEAP_NAME(mallinfo2)();
  os_stats_t os_before = os_stats_read();

  errno = 4321;
  PINHEAP_NAME(free)(NULL);
  cr_assert_eq(errno, 4321, "free(NULL) changed errno from 4321 to %d", errno);
  struct mallinfo2 after = PINHEAP_NAME(mallinfo2)();
  os_stats_t os_after = os_stats_read();
  cr_assert(memcmp(&before, &after, sizeof(before)) == 0,
            "free(NULL) changed mallinfo2 (uordblks %zu -> %zu, fordblks %zu -> %zu)",
            before.uordblks, after.uordblks, before.fordblks, after.fordblks);
  cr_assert_eq(os_after.release_calls, os_before.release_calls,
               "free(NULL) released memory (%zu releases)", os_after.release_calls - os_before.release_calls);
  PINHEAP_NAME(free)(keep);
  heap_assert_sound("free(NULL)");
}

Test(api, realloc_null_is_malloc)
{
  heap_warm_up();
  size_t base = PINHEAP_NAME(mallinfo2)().uordblks;
  void *p = PINHEAP_NAME(realloc)(NULL, 1000);
  size_t u = block_assert_usable(p, 1000, "realloc(NULL, n)");
  size_t grown = PINHEAP_NAME(mallinfo2)().uordblks;
  cr_assert_geq(grown, base + 1000, "uordblks %zu -> %zu after realloc(NULL, 1000): not an allocation",
                base, grown);
  (void)u;
  void *z = PINHEAP_NAME(realloc)(NULL, 0);
  cr_assert_not_null(z, "realloc(NULL, 0) returned NULL; glibc returns malloc(0)");
  cr_assert_neq(z, p, "realloc(NULL, 0) returned the live block %p", p);
  PINHEAP_NAME(free)(z);
  PINHEAP_NAME(free)(p);
  cr_assert_eq(PINHEAP_NAME(mallinfo2)().uordblks, base, "uordblks %zu after freeing, expected %zu",
               PINHEAP_NAME(mallinfo2)().uordblks, base);
  heap_assert_sound("realloc(NULL, n)");
}

Test(api, realloc_zero_frees_and_returns_null)
{
  static const size_t sizes[] = { 1, 100, 1000, 64 * KiB, 1 * MiB, 5 * MiB };

  heap_warm_up();
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    struct mallinfo2 before = PINHEAP_NAME(mallinfo2)();
    void *p = PINHEAP_NAME(malloc)(sizes[i]);
    cr_assert_not_null(p, "malloc(%zu) returned NULL", sizes[i]);
    memset(p, 0x77, sizes[i]);
    struct mallinfo2 mid = PINHEAP_NAME(mallinfo2)();
    cr_assert(mid.uordblks > before.uordblks || mid.hblks > before.hblks,
              "malloc(%zu) moved neither uordblks (%zu) nor hblks (%zu)", sizes[i],
              mid.uordblks, mid.hblks);
    void *q = PINHEAP_NAME(realloc)(p, 0);
    cr_assert_null(q, "realloc(%p, 0) of a %zu-byte block returned %p; glibc frees and returns NULL",
                   p, sizes[i], q);
    struct mallinfo2 after = PINHEAP_NAME(mallinfo2)();
    cr_assert_eq(after.uordblks, before.uordblks,
                 "realloc(p, 0) of %zu bytes did not free p: uordblks %zu, expected %zu",
                 sizes[i], after.uordblks, before.uordblks);
    cr_assert_eq(after.hblks, before.hblks,
                 "realloc(p, 0) of %zu bytes did not free the mapped chunk: hblks %zu, expected %zu",
                 sizes[i], after.hblks, before.hblks);
    cr_assert_eq(after.hblkhd, before.hblkhd, "hblkhd %zu after realloc(p, 0) of %zu bytes, expected %zu",
                 after.hblkhd, sizes[i], before.hblkhd);
    heap_assert_sound("realloc(p, 0)");
  }
}

/* Moves one block through a size change with in-use neighbours on either
 * side, and checks the content, the neighbours and the heap. */
static void realloc_assert_keeps(size_t from, size_t to, uint32_t seed)
{
  void *left = PINHEAP_NAME(malloc)(200);
  void *p = PINHEAP_NAME(malloc)(from);
  void *right = PINHEAP_NAME(malloc)(200);

  cr_assert(left && p && right, "setup allocations for realloc %zu -> %zu failed", from, to);
  shadow_pattern_fill(left, 200, seed + 1);
  shadow_pattern_fill(p, from, seed);
  shadow_pattern_fill(right, 200, seed + 2);

  void *q = PINHEAP_NAME(realloc)(p, to);
  cr_assert_not_null(q, "realloc(%p, %zu) from %zu bytes returned NULL", p, to, from);
  cr_assert(ptr_is_aligned(q, 16), "realloc(%zu -> %zu) = %p is not 16-aligned", from, to, q);
  size_t keep = from < to ? from : to;
  size_t bad = shadow_pattern_find_mismatch(q, keep, seed);
  cr_assert_eq(bad, SIZE_MAX, "realloc %zu -> %zu lost content at byte %zu of %zu (got 0x%02x)",
               from, to, bad, keep, bad == SIZE_MAX ? 0 : ((uint8_t *)q)[bad]);
  size_t u = PINHEAP_NAME(malloc_usable_size)(q);
  cr_assert_geq(u, to, "usable size %zu < %zu after realloc %zu -> %zu", u, to, from, to);
  memset(q, 0xEE, u);
  bad = shadow_pattern_find_mismatch(left, 200, seed + 1);
  cr_assert_eq(bad, SIZE_MAX, "realloc %zu -> %zu (then writing %zu usable bytes) damaged the block "
               "before it at byte %zu", from, to, u, bad);
  bad = shadow_pattern_find_mismatch(right, 200, seed + 2);
  cr_assert_eq(bad, SIZE_MAX, "realloc %zu -> %zu (then writing %zu usable bytes) damaged the block "
               "after it at byte %zu", from, to, u, bad);
  heap_assert_sound("realloc");
  PINHEAP_NAME(free)(q);
  PINHEAP_NAME(free)(left);
  PINHEAP_NAME(free)(right);
  heap_assert_sound("freeing after realloc");
}

Test(api, realloc_keeps_content)
{
  static const size_t moves[][2] = {
    { 24, 100 },              /* small -> small */
    { 100, 24 },              /* shrink small */
    { 0, 50 },
    { 17, 4096 },
    { 1000, 1000 },           /* same size */
    { 8000, 100 },            /* shrink, splits a remainder */
    { 100, 64 * KiB },        /* small -> large (heap) */
    { 1000, 300 * KiB },      /* small -> mmapped */
    { 300 * KiB, 4 * MiB },   /* mmapped -> larger mmapped */
    { 4 * MiB, 2 * MiB },     /* mmapped shrink */
    { 2 * MiB, 100 },         /* mmapped -> small */
    { 64 * KiB, 200 },        /* large -> small */
  };
  heap_warm_up();
  for (size_t i = 0; i < sizeof(moves) / sizeof(moves[0]); i++)
    realloc_assert_keeps(moves[i][0], moves[i][1], (uint32_t)i * 3 + 7);
}

Test(api, realloc_grows_into_free_neighbour)
{
  heap_warm_up();
  void *a = PINHEAP_NAME(malloc)(100);
  void *b = PINHEAP_NAME(malloc)(100);
  void *c = PINHEAP_NAME(malloc)(100);
  cr_assert(a && b && c, "setup failed");
  shadow_pattern_fill(a, 100, 1);
  shadow_pattern_fill(c, 100, 3);
  PINHEAP_NAME(free)(b);
  void *a2 = PINHEAP_NAME(realloc)(a, 190);
  cr_assert_not_null(a2, "realloc(a, 190) returned NULL");
  cr_assert_eq(shadow_pattern_find_mismatch(a2, 100, 1), SIZE_MAX, "realloc into the freed neighbour lost content");
  memset(a2, 0x11, PINHEAP_NAME(malloc_usable_size)(a2));
  cr_assert_eq(shadow_pattern_find_mismatch(c, 100, 3), SIZE_MAX,
               "growing a block into its freed neighbour overwrote the next block");
  heap_assert_sound("realloc into a free neighbour");
  PINHEAP_NAME(free)(a2);
  PINHEAP_NAME(free)(c);
  heap_assert_sound("free after realloc");
}

/* A block at the top of the heap grows in place past the end of its
 * segment (the segment grows into the address space reserved after it),
 * as glibc's heap does: a growing vector is not copied at every step. */
Test(api, realloc_at_the_top_grows_in_place_past_the_segment)
{
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, 32 * 1024 * 1024), 1);
  size_t n = 64 * 1024;
  unsigned char *p = PINHEAP_NAME(malloc)(n);
  cr_assert_not_null(p);
  shadow_pattern_fill(p, n, 9);
  unsigned char *q = p;
  for (size_t m = 256 * 1024; m <= 3 * 1024 * 1024; m += 256 * 1024) {
    q = PINHEAP_NAME(realloc)(q, m);
    cr_assert_not_null(q, "realloc to %zu failed", m);
    cr_assert_eq(q, p, "realloc to %zu bytes moved the block at the top of the heap", m);
    memset(q + n, 0x5c, m - n);
  }
  cr_assert_eq(shadow_pattern_find_mismatch(q, n, 9), SIZE_MAX, "growing in place lost the contents");
  heap_assert_sound("realloc grown in place");
  PINHEAP_NAME(free)(q);
  heap_assert_sound("free of the grown block");
}

/* The address space reserved after a segment is mapped inaccessible (no
 * commit charge, even under strict overcommit) until the segment grows
 * into it: in /proc/self/maps, the heap's read-write mapping holding a
 * block is followed at once by a "---p" one. */
Test(api, the_reserve_after_a_segment_is_inaccessible)
{
  unsigned char *p = PINHEAP_NAME(malloc)(1000);
  cr_assert_not_null(p);
  FILE *f = fopen("/proc/self/maps", "r");
  cr_assert_not_null(f, "cannot read /proc/self/maps");
  char line[512], perms[8];
  unsigned long lo, hi, rw_end = 0;
  bool found = false;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
      continue;
    if (rw_end != 0) {
      cr_assert_eq(lo, rw_end, "nothing mapped right after the segment holding %p", (void *)p);
      cr_assert_str_eq(perms, "---p", "the reserve after the segment holding %p is mapped %s",
                       (void *)p, perms);
      found = true;
      break;
    }
    if ((uintptr_t)p >= lo && (uintptr_t)p < hi) {
      cr_assert_str_eq(perms, "rw-p", "the segment holding %p is mapped %s", (void *)p, perms);
      rw_end = hi;
    }
  }
  fclose(f);
  cr_assert(found, "no mapping follows the segment holding %p", (void *)p);
  PINHEAP_NAME(free)(p);
}

/* ======================================================================= */
/*  calloc                                                                  */
/* ======================================================================= */

static void calloc_assert_zero(size_t n, size_t m)
{
  unsigned char *z = PINHEAP_NAME(calloc)(n, m);
  cr_assert_not_null(z, "calloc(%zu, %zu) returned NULL", n, m);
  cr_assert(ptr_is_aligned(z, 16), "calloc(%zu, %zu) = %p not 16-aligned", n, m, (void *)z);
  size_t bad = shadow_bytes_find_not(z, n * m, 0);
  cr_assert_eq(bad, SIZE_MAX, "calloc(%zu, %zu): byte %zu is 0x%02x, not zero", n, m, bad,
               bad == SIZE_MAX ? 0 : z[bad]);
  PINHEAP_NAME(free)(z);
}

Test(api, calloc_zeroes_fresh_and_reused_memory)
{
  static const size_t sizes[] = { 1, 16, 24, 100, 1000, 4096, 60000, 120 * KiB,
                                  130 * KiB, 1 * MiB, 8 * MiB };
  heap_warm_up();
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = sizes[i];
    calloc_assert_zero(1, n);
    /* Dirty the memory, free it, ask for it back zeroed. */
    for (int round = 0; round < 3; round++) {
      unsigned char *d = PINHEAP_NAME(malloc)(n);
      cr_assert_not_null(d, "malloc(%zu) returned NULL", n);
      memset(d, 0xAB, PINHEAP_NAME(malloc_usable_size)(d));
      PINHEAP_NAME(free)(d);
      calloc_assert_zero(1, n);
      calloc_assert_zero(n, 1);
      if (n % 8 == 0)
        calloc_assert_zero(8, n / 8);
    }
  }
  heap_assert_sound("calloc sweep");
}

Test(api, calloc_zeroes_split_remainders)
{
  heap_warm_up();
  /* A shrinking realloc leaves a dirty free remainder behind the block. */
  unsigned char *p = PINHEAP_NAME(malloc)(8000);
  unsigned char *guard = PINHEAP_NAME(malloc)(100);
  cr_assert(p && guard, "setup failed");
  memset(p, 0xEE, 8000);
  p = PINHEAP_NAME(realloc)(p, 100);
  cr_assert_not_null(p, "realloc(p, 100) returned NULL");
  calloc_assert_zero(1, 7000);
  calloc_assert_zero(70, 100);
  /* Many dirty small chunks in the bins. */
  void *ptrs[256];
  for (int i = 0; i < 256; i++) {
    ptrs[i] = PINHEAP_NAME(malloc)((size_t)(16 + i * 8));
    cr_assert_not_null(ptrs[i], "malloc(%d) returned NULL", 16 + i * 8);
    memset(ptrs[i], 0xCD, (size_t)(16 + i * 8));
  }
  for (int i = 0; i < 256; i += 2)
    PINHEAP_NAME(free)(ptrs[i]);
  for (int i = 0; i < 256; i += 2)
    calloc_assert_zero(1, (size_t)(16 + i * 8));
  for (int i = 1; i < 256; i += 2)
    PINHEAP_NAME(free)(ptrs[i]);
  PINHEAP_NAME(free)(p);
  PINHEAP_NAME(free)(guard);
  heap_assert_sound("calloc of split remainders");
}

Test(api, calloc_zero_elements_is_unique)
{
  void *a = PINHEAP_NAME(calloc)(0, 5);
  void *b = PINHEAP_NAME(calloc)(5, 0);
  void *c = PINHEAP_NAME(calloc)(0, size_opaque(SIZE_MAX));
  cr_assert(a && b && c, "calloc with a zero count returned NULL (%p %p %p); glibc returns malloc(0)",
            a, b, c);
  cr_assert(a != b && b != c && a != c, "calloc(0, n) results not unique: %p %p %p", a, b, c);
  PINHEAP_NAME(free)(a);
  PINHEAP_NAME(free)(b);
  PINHEAP_NAME(free)(c);
  heap_assert_sound("calloc(0, n)");
}

Test(api, calloc_overflow_is_enomem)
{
  static const size_t cases[][2] = {
    { SIZE_MAX / 2 + 1, 3 },
    { 3, SIZE_MAX / 2 + 1 },
    { SIZE_MAX, SIZE_MAX },
    { (size_t)1 << 32, (size_t)1 << 32 },
    { (size_t)1 << 33, (size_t)1 << 31 },
    { 1, SIZE_MAX },
    { SIZE_MAX, 1 },
    { 1, (size_t)PTRDIFF_MAX + 1 },
    { 2, (size_t)PTRDIFF_MAX / 2 + 1 },
  };
  heap_warm_up();
  struct mallinfo2 before = PINHEAP_NAME(mallinfo2)();
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    errno = 0;
    void *p = PINHEAP_NAME(calloc)(size_opaque(cases[i][0]), size_opaque(cases[i][1]));
    int err = errno;
    cr_assert_null(p, "calloc(%zu, %zu) returned %p, expected NULL", cases[i][0], cases[i][1], p);
    cr_assert_eq(err, ENOMEM, "calloc(%zu, %zu): errno %d (%s), expected ENOMEM", cases[i][0],
                 cases[i][1], err, strerror(err));
  }
  struct mallinfo2 after = PINHEAP_NAME(mallinfo2)();
  cr_assert_eq(after.uordblks, before.uordblks, "failed callocs changed uordblks %zu -> %zu",
               before.uordblks, after.uordblks);
  cr_assert_eq(after.hblks, before.hblks, "failed callocs changed hblks %zu -> %zu", before.hblks,
               after.hblks);
  heap_assert_sound("failed callocs");
}

/* ======================================================================= */
/*  Impossible sizes, reallocarray                                          */
/* ======================================================================= */

Test(api, impossible_sizes_are_enomem)
{
  static const size_t sizes[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 15, SIZE_MAX - 4095, SIZE_MAX / 2,
    (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX,
  };
  heap_warm_up();
  void *keep = PINHEAP_NAME(malloc)(300);
  cr_assert_not_null(keep, "malloc(300) returned NULL");
  shadow_pattern_fill(keep, 300, 99);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = size_opaque(sizes[i]);
    void *p;

    errno = 0;
    p = PINHEAP_NAME(malloc)(n);
    cr_assert_null(p, "malloc(%zu) returned %p, expected NULL", n, p);
    cr_assert_eq(errno, ENOMEM, "malloc(%zu): errno %d, expected ENOMEM (%d)", n, errno, ENOMEM);

    errno = 0;
    p = PINHEAP_NAME(realloc)(keep, n);
    cr_assert_null(p, "realloc(p, %zu) returned %p, expected NULL", n, p);
    cr_assert_eq(errno, ENOMEM, "realloc(p, %zu): errno %d, expected ENOMEM", n, errno);
    cr_assert_eq(shadow_pattern_find_mismatch(keep, 300, 99), SIZE_MAX,
                 "a failed realloc(p, %zu) changed the content of p", n);

    errno = 0;
    p = PINHEAP_NAME(memalign)(64, n);
    cr_assert_null(p, "memalign(64, %zu) returned %p", n, p);
    cr_assert_eq(errno, ENOMEM, "memalign(64, %zu): errno %d, expected ENOMEM", n, errno);

    errno = 0;
    p = PINHEAP_NAME(aligned_alloc)(4096, n);
    cr_assert_null(p, "aligned_alloc(4096, %zu) returned %p", n, p);
    cr_assert_eq(errno, ENOMEM, "aligned_alloc(4096, %zu): errno %d, expected ENOMEM", n, errno);

    errno = 0;
    p = PINHEAP_NAME(valloc)(n);
    cr_assert_null(p, "valloc(%zu) returned %p", n, p);
    cr_assert_eq(errno, ENOMEM, "valloc(%zu): errno %d, expected ENOMEM", n, errno);

    errno = 0;
    p = PINHEAP_NAME(pvalloc)(n);
    cr_assert_null(p, "pvalloc(%zu) returned %p", n, p);
    cr_assert_eq(errno, ENOMEM, "pvalloc(%zu): errno %d, expected ENOMEM", n, errno);

    void *out = (void *)0x5151;
    int rc = PINHEAP_NAME(posix_memalign)(&out, 64, n);
    cr_assert_eq(rc, ENOMEM, "posix_memalign(&p, 64, %zu) = %d, expected ENOMEM", n, rc);
    cr_assert_eq(out, (void *)0x5151, "posix_memalign failing with ENOMEM changed *memptr to %p", out);
  }
  cr_assert_geq(PINHEAP_NAME(malloc_usable_size)(keep), 300, "p lost its usable size after failed reallocs");
  PINHEAP_NAME(free)(keep);
  heap_assert_sound("impossible sizes");
}

/* With direct mappings off (M_MMAP_MAX 0) every request takes the heap
 * path: sizes beyond the 47-bit address space must be refused there too,
 * before any bin is indexed by them (UBSan saw the bin map read out of
 * bounds from 2^48 on). */
Test(api, sizes_beyond_the_address_space_are_enomem_on_the_heap_path)
{
  static const size_t sizes[] = {
    (size_t)1 << 47, (size_t)1 << 48, ((size_t)1 << 53) + 1000, (size_t)1 << 60,
    (size_t)PTRDIFF_MAX / 2,
  };
  heap_warm_up();
  void *keep = PINHEAP_NAME(malloc)(300);
  cr_assert_not_null(keep, "malloc(300) returned NULL");
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0), 1, "mallopt(M_MMAP_MAX, 0) failed");
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = size_opaque(sizes[i]);
    errno = 0;
    void *p = PINHEAP_NAME(malloc)(n);
    cr_assert(p == NULL && errno == ENOMEM, "malloc(%zu) = %p, errno %d: expected NULL, ENOMEM", n, p,
              errno);
    errno = 0;
    p = PINHEAP_NAME(calloc)(1, n);
    cr_assert(p == NULL && errno == ENOMEM, "calloc(1, %zu) = %p, errno %d", n, p, errno);
    errno = 0;
    p = PINHEAP_NAME(memalign)(4096, n);
    cr_assert(p == NULL && errno == ENOMEM, "memalign(4096, %zu) = %p, errno %d", n, p, errno);
    errno = 0;
    p = PINHEAP_NAME(realloc)(keep, n);
    cr_assert(p == NULL && errno == ENOMEM, "realloc(p, %zu) = %p, errno %d", n, p, errno);
  }
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 65536), 1);
  PINHEAP_NAME(free)(keep);
  heap_assert_sound("sizes beyond the address space");
}

Test(api, reallocarray_overflow_keeps_original)
{
  heap_warm_up();
  void *p = PINHEAP_NAME(reallocarray)(NULL, 10, 10);
  block_assert_usable(p, 100, "reallocarray(NULL, 10, 10)");
  shadow_pattern_fill(p, 100, 5);
  size_t u = PINHEAP_NAME(malloc_usable_size)(p);

  static const size_t cases[][2] = {
    { SIZE_MAX / 2 + 1, 3 }, { 3, SIZE_MAX / 2 + 1 }, { SIZE_MAX, SIZE_MAX },
    { (size_t)1 << 32, (size_t)1 << 32 }, { 1, SIZE_MAX },
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    errno = 0;
    void *q = PINHEAP_NAME(reallocarray)(p, size_opaque(cases[i][0]), size_opaque(cases[i][1]));
    int err = errno;
    cr_assert_null(q, "reallocarray(p, %zu, %zu) returned %p, expected NULL", cases[i][0],
                   cases[i][1], q);
    cr_assert_eq(err, ENOMEM, "reallocarray(p, %zu, %zu): errno %d, expected ENOMEM", cases[i][0],
                 cases[i][1], err);
    cr_assert_eq(shadow_pattern_find_mismatch(p, 100, 5), SIZE_MAX,
                 "failed reallocarray(p, %zu, %zu) changed p's content", cases[i][0], cases[i][1]);
    cr_assert_eq(PINHEAP_NAME(malloc_usable_size)(p), u, "failed reallocarray changed p's usable size");
  }
  void *q = PINHEAP_NAME(reallocarray)(p, 50, 20);
  cr_assert_not_null(q, "reallocarray(p, 50, 20) returned NULL");
  cr_assert_eq(shadow_pattern_find_mismatch(q, 100, 5), SIZE_MAX, "reallocarray(p, 50, 20) lost content");
  block_assert_usable(q, 1000, "reallocarray(p, 50, 20)");
  PINHEAP_NAME(free)(q);
  heap_assert_sound("reallocarray");
}

/* ======================================================================= */
/*  malloc_usable_size                                                      */
/* ======================================================================= */

Test(api, usable_size_is_writable)
{
  enum { N = 2049 };
  static void *ptrs[N];
  static size_t usable[N];

  cr_assert_eq(PINHEAP_NAME(malloc_usable_size)(NULL), 0, "malloc_usable_size(NULL) = %zu, expected 0",
               PINHEAP_NAME(malloc_usable_size)(NULL));
  for (size_t n = 0; n < N; n++) {
    ptrs[n] = PINHEAP_NAME(malloc)(n);
    cr_assert_not_null(ptrs[n], "malloc(%zu) returned NULL", n);
    usable[n] = PINHEAP_NAME(malloc_usable_size)(ptrs[n]);
    cr_assert_geq(usable[n], n, "malloc_usable_size(malloc(%zu)) = %zu", n, usable[n]);
    shadow_pattern_fill(ptrs[n], usable[n], (uint32_t)n);
  }
  /* Writing every usable byte of every block must not touch another block
   * nor any chunk header. */
  for (size_t n = 0; n < N; n++) {
    size_t bad = shadow_pattern_find_mismatch(ptrs[n], usable[n], (uint32_t)n);
    cr_assert_eq(bad, SIZE_MAX, "block malloc(%zu) (usable %zu) was overwritten at byte %zu by a "
                 "neighbour's usable bytes", n, usable[n], bad);
  }
  heap_assert_sound("writing the full usable size of 2049 blocks");
  for (size_t n = 0; n < N; n++)
    PINHEAP_NAME(free)(ptrs[n]);
  heap_assert_sound("freeing 2049 blocks");

  static const size_t big[] = { 100 * KiB, 129 * KiB, 1 * MiB, 3 * MiB + 5 };
  void *b[4];
  for (int i = 0; i < 4; i++) {
    b[i] = PINHEAP_NAME(malloc)(big[i]);
    block_assert_usable(b[i], big[i], "malloc");
    shadow_pattern_fill(b[i], PINHEAP_NAME(malloc_usable_size)(b[i]), (uint32_t)i + 5000);
  }
  for (int i = 0; i < 4; i++)
    cr_assert_eq(shadow_pattern_find_mismatch(b[i], PINHEAP_NAME(malloc_usable_size)(b[i]), (uint32_t)i + 5000),
                 SIZE_MAX, "large block of %zu bytes overwritten", big[i]);
  heap_assert_sound("large blocks written to their usable size");
  for (int i = 0; i < 4; i++)
    PINHEAP_NAME(free)(b[i]);
  heap_assert_sound("freeing large blocks");
}

/* ======================================================================= */
/*  mallopt                                                                 */
/* ======================================================================= */

Test(api, mallopt_return_values)
{
  static const struct { int param, value, expect; const char *name; } cases[] = {
    { M_TRIM_THRESHOLD, 256 * 1024, 1, "M_TRIM_THRESHOLD" },
    { M_TOP_PAD, 64 * 1024, 1, "M_TOP_PAD" },
    { M_MMAP_THRESHOLD, 256 * 1024, 1, "M_MMAP_THRESHOLD" },
    { M_MMAP_THRESHOLD, 32 * 1024 * 1024, 1, "M_MMAP_THRESHOLD (32 MiB)" },
    { M_MMAP_MAX, 65536, 1, "M_MMAP_MAX" },
    { M_MMAP_MAX, 0, 1, "M_MMAP_MAX (0)" },
    { M_MMAP_THRESHOLD, 32 * 1024 * 1024 + 1, 0, "M_MMAP_THRESHOLD (32 MiB + 1)" },
    { M_MMAP_THRESHOLD, 64 * 1024 * 1024, 0, "M_MMAP_THRESHOLD (64 MiB)" },
    { M_MMAP_THRESHOLD, INT_MAX, 0, "M_MMAP_THRESHOLD (INT_MAX)" },
    { M_MMAP_THRESHOLD, -1, 0, "M_MMAP_THRESHOLD (-1)" },
    { M_MMAP_THRESHOLD, INT_MIN, 0, "M_MMAP_THRESHOLD (INT_MIN)" },
    /* accepted with no effect, as glibc 2.36 answers them (said at level info) */
    { M_PERTURB, 165, 1, "M_PERTURB" },
    { M_CHECK_ACTION, 3, 1, "M_CHECK_ACTION" },
    { M_ARENA_TEST, 8, 1, "M_ARENA_TEST" },
    { M_MXFAST, 64, 1, "M_MXFAST" },
    { M_MXFAST, 0, 1, "M_MXFAST (0)" },
    { M_MXFAST, -1, 0, "M_MXFAST (-1)" },
    { M_MXFAST, 161, 0, "M_MXFAST (161, past glibc's 160)" },
    { 0, 1, 0, "unknown parameter 0" },
    { 12345, 1, 0, "unknown parameter 12345" },
    { -12345, 1, 0, "unknown parameter -12345" },
    { INT_MIN, 1, 0, "unknown parameter INT_MIN" },
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int rc = PINHEAP_NAME(mallopt)(cases[i].param, cases[i].value);
    cr_assert_eq(rc, cases[i].expect, "mallopt(%s = %d, %d) returned %d, expected %d", cases[i].name,
                 cases[i].param, cases[i].value, rc, cases[i].expect);
  }
}

/* Mallocs n bytes and reports whether the block was mapped directly
 * (hblks went up by one and hblkhd by at least n). */
static int malloc_is_mapped(size_t n, void **out_p)
{
  struct mallinfo2 before = PINHEAP_NAME(mallinfo2)();
  void *p = PINHEAP_NAME(malloc)(n);
  cr_assert_not_null(p, "malloc(%zu) returned NULL", n);
  memset(p, 0x3C, n);
  struct mallinfo2 after = PINHEAP_NAME(mallinfo2)();
  *out_p = p;
  if (after.hblks == before.hblks) {
    cr_assert_eq(after.hblkhd, before.hblkhd, "malloc(%zu): hblks unchanged but hblkhd %zu -> %zu", n,
                 before.hblkhd, after.hblkhd);
    return 0;
  }
  cr_assert_eq(after.hblks, before.hblks + 1, "malloc(%zu): hblks %zu -> %zu, expected +0 or +1", n,
               before.hblks, after.hblks);
  cr_assert_geq(after.hblkhd, before.hblkhd + n, "malloc(%zu) mapped: hblkhd %zu -> %zu, expected +%zu",
                n, before.hblkhd, after.hblkhd, n);
  return 1;
}

Test(api, mmap_threshold_default_and_dynamic)
{
  void *p;

  heap_warm_up();
  cr_assert_eq(malloc_is_mapped(128 * KiB - 64, &p), 0,
               "malloc(128 KiB - 64) was mapped directly; the default threshold is 128 KiB");
  PINHEAP_NAME(free)(p);
  cr_assert_eq(malloc_is_mapped(128 * KiB + 64, &p), 1,
               "malloc(128 KiB + 64) was not mapped directly; the default threshold is 128 KiB");
  void *big;
  cr_assert_eq(malloc_is_mapped(1 * MiB, &big), 1, "malloc(1 MiB) was not mapped directly by default");
  PINHEAP_NAME(free)(p);
  /* glibc: freeing a mapped chunk raises the threshold to its size. */
  PINHEAP_NAME(free)(big);
  cr_assert_eq(malloc_is_mapped(1 * MiB - 4096, &p), 0,
               "after freeing a 1 MiB mapped chunk, malloc(1 MiB - 4 KiB) was still mapped: the "
               "dynamic threshold did not rise");
  PINHEAP_NAME(free)(p);
  heap_assert_sound("dynamic mmap threshold");
}

Test(api, mmap_threshold_set_by_mallopt)
{
  static const size_t thresholds[] = { 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB };
  void *p;

  heap_warm_up();
  for (size_t i = 0; i < sizeof(thresholds) / sizeof(thresholds[0]); i++) {
    size_t t = thresholds[i];
    cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, (int)t), 1, "mallopt(M_MMAP_THRESHOLD, %zu) failed", t);
    cr_assert_eq(malloc_is_mapped(t - 64, &p), 0, "threshold %zu: malloc(%zu) was mapped directly", t,
                 t - 64);
    PINHEAP_NAME(free)(p);
    cr_assert_eq(malloc_is_mapped(t + 64, &p), 1, "threshold %zu: malloc(%zu) was not mapped directly",
                 t, t + 64);
    /* A set threshold is fixed: freeing a mapped chunk must not move it. */
    PINHEAP_NAME(free)(p);
    cr_assert_eq(malloc_is_mapped(t + 64, &p), 1, "threshold %zu set by mallopt moved after a free", t);
    PINHEAP_NAME(free)(p);
  }
  /* A rejected value leaves the threshold alone. */
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, 64 * 1024), 1, "mallopt(M_MMAP_THRESHOLD, 64K) failed");
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, 64 * 1024 * 1024), 0, "64 MiB threshold accepted");
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, -5), 0, "negative threshold accepted");
  cr_assert_eq(malloc_is_mapped(100 * KiB, &p), 1,
               "after rejected mallopt values, malloc(100 KiB) is not mapped: the 64 KiB threshold was lost");
  PINHEAP_NAME(free)(p);
  heap_assert_sound("mallopt(M_MMAP_THRESHOLD)");
}

Test(api, mmap_max_limits_direct_mappings)
{
  void *p, *q;

  heap_warm_up();
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0), 1, "mallopt(M_MMAP_MAX, 0) failed");
  size_t arena0 = PINHEAP_NAME(mallinfo2)().arena;
  cr_assert_eq(malloc_is_mapped(4 * MiB, &p), 0, "M_MMAP_MAX 0: malloc(4 MiB) was still mapped directly");
  cr_assert_geq(PINHEAP_NAME(mallinfo2)().arena, arena0 + 4 * MiB,
                "M_MMAP_MAX 0: the heap did not grow for a 4 MiB block (arena %zu -> %zu)", arena0,
                PINHEAP_NAME(mallinfo2)().arena);
  heap_assert_sound("4 MiB from the heap");
  PINHEAP_NAME(free)(p);

  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 1), 1, "mallopt(M_MMAP_MAX, 1) failed");
  cr_assert_eq(malloc_is_mapped(2 * MiB, &p), 1, "M_MMAP_MAX 1: the first 2 MiB block was not mapped");
  cr_assert_eq(malloc_is_mapped(2 * MiB, &q), 0, "M_MMAP_MAX 1: a second mapped chunk was created");
  PINHEAP_NAME(free)(p);
  PINHEAP_NAME(free)(q);
  heap_assert_sound("M_MMAP_MAX");
}

Test(api, trim_threshold_controls_release_on_free)
{
  heap_warm_up();
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0), 1, "mallopt(M_MMAP_MAX, 0) failed");
  /* Threshold out of reach: free keeps the memory. */
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, INT_MAX), 1, "mallopt(M_TRIM_THRESHOLD, INT_MAX) failed");
  void *p = PINHEAP_NAME(malloc)(8 * MiB);
  cr_assert_not_null(p, "malloc(8 MiB) returned NULL");
  memset(p, 1, 8 * MiB);
  os_stats_t before = os_stats_read();
  PINHEAP_NAME(free)(p);
  os_stats_t after = os_stats_read();
  cr_assert_eq(after.released_bytes, before.released_bytes,
               "free released %zu bytes although M_TRIM_THRESHOLD is INT_MAX",
               after.released_bytes - before.released_bytes);
  /* Low threshold: freeing a big block at the top gives memory back. */
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, 128 * 1024), 1, "mallopt(M_TRIM_THRESHOLD, 128K) failed");
  p = PINHEAP_NAME(malloc)(8 * MiB);
  cr_assert_not_null(p, "malloc(8 MiB) returned NULL");
  memset(p, 1, 8 * MiB);
  before = os_stats_read();
  PINHEAP_NAME(free)(p);
  after = os_stats_read();
  cr_assert_geq(after.released_bytes - before.released_bytes, 4 * MiB,
                "free of an 8 MiB top block released only %zu bytes with M_TRIM_THRESHOLD 128 KiB",
                after.released_bytes - before.released_bytes);
  heap_assert_sound("M_TRIM_THRESHOLD");
}

Test(api, top_pad_grows_heap_by_extra)
{
  heap_warm_up();
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0), 1, "mallopt(M_MMAP_MAX, 0) failed");
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_TOP_PAD, 16 * 1024 * 1024), 1, "mallopt(M_TOP_PAD, 16 MiB) failed");
  struct mallinfo2 before = PINHEAP_NAME(mallinfo2)();
  size_t want = before.keepcost + 1 * MiB;  /* cannot come from the current top */
  void *p = PINHEAP_NAME(malloc)(want);
  cr_assert_not_null(p, "malloc(%zu) returned NULL", want);
  struct mallinfo2 after = PINHEAP_NAME(mallinfo2)();
  /* Even if the new memory extends the old top, the heap has to grow by
   * the missing 1 MiB plus the 16 MiB pad. */
  cr_assert_geq(after.arena, before.arena + 1 * MiB + 16 * MiB,
                "M_TOP_PAD 16 MiB: heap grew by %zu bytes for a %zu-byte request with a %zu-byte top, "
                "expected at least 1 MiB + 16 MiB", after.arena - before.arena, want, before.keepcost);
  PINHEAP_NAME(free)(p);
  heap_assert_sound("M_TOP_PAD");
}

/* ======================================================================= */
/*  mallinfo2                                                               */
/* ======================================================================= */

static void mallinfo_assert_consistent(const struct mallinfo2 *m, const char *when)
{
  cr_assert_leq(m->keepcost, m->fordblks, "%s: keepcost %zu > fordblks %zu (top is free memory)", when,
                m->keepcost, m->fordblks);
  cr_assert_leq(m->fordblks, m->arena, "%s: fordblks %zu > arena %zu", when, m->fordblks, m->arena);
  cr_assert_leq(m->uordblks + m->fordblks, m->arena + m->hblkhd,
                "%s: uordblks %zu + fordblks %zu exceed arena %zu + hblkhd %zu", when, m->uordblks,
                m->fordblks, m->arena, m->hblkhd);
}

Test(api, mallinfo2_fields_move_as_documented)
{
  heap_warm_up();
  struct mallinfo2 m0 = PINHEAP_NAME(mallinfo2)();
  mallinfo_assert_consistent(&m0, "start");
  cr_assert_gt(m0.arena, 0, "arena is 0 after the first malloc");

  void *p = PINHEAP_NAME(malloc)(1000);
  struct mallinfo2 m1 = PINHEAP_NAME(mallinfo2)();
  cr_assert_geq(m1.uordblks, m0.uordblks + 1000, "malloc(1000): uordblks %zu -> %zu, expected +1000",
                m0.uordblks, m1.uordblks);
  cr_assert_eq(m1.hblks, m0.hblks, "malloc(1000) changed hblks %zu -> %zu", m0.hblks, m1.hblks);
  mallinfo_assert_consistent(&m1, "after malloc(1000)");

  void *big = PINHEAP_NAME(malloc)(2 * MiB);
  struct mallinfo2 m2 = PINHEAP_NAME(mallinfo2)();
  cr_assert_eq(m2.hblks, m1.hblks + 1, "malloc(2 MiB): hblks %zu -> %zu, expected +1", m1.hblks, m2.hblks);
  cr_assert_geq(m2.hblkhd, m1.hblkhd + 2 * MiB, "malloc(2 MiB): hblkhd %zu -> %zu", m1.hblkhd, m2.hblkhd);
  cr_assert_eq(m2.arena, m1.arena, "a directly mapped chunk changed arena %zu -> %zu", m1.arena, m2.arena);
  mallinfo_assert_consistent(&m2, "after malloc(2 MiB)");
  PINHEAP_NAME(free)(big);
  struct mallinfo2 m3 = PINHEAP_NAME(mallinfo2)();
  cr_assert_eq(m3.hblks, m1.hblks, "free(2 MiB): hblks %zu, expected %zu", m3.hblks, m1.hblks);
  cr_assert_eq(m3.hblkhd, m1.hblkhd, "free(2 MiB): hblkhd %zu, expected %zu", m3.hblkhd, m1.hblkhd);

  /* A free chunk between two chunks in use (1100 bytes: chunks, not slab
   * blocks, which are counted free but are no free chunk): of six, one
   * whose neighbours on both sides are two others, as far apart as it is
   * from each (where the heap put them, and in which order, is the
   * thread cache's business: a size's first malloc is one chunk, then
   * bundles). */
  enum { NQ = 6 };
  uintptr_t q[NQ];
  for (int i = 0; i < NQ; i++)
    cr_assert_not_null((void *)(q[i] = (uintptr_t)PINHEAP_NAME(malloc)(1100)));
  qsort(q, NQ, sizeof(q[0]), size_cmp);
  int mid = 0;
  for (int i = 1; i < NQ - 1 && mid == 0; i++)
    if (q[i] - q[i - 1] == q[i + 1] - q[i] && q[i] - q[i - 1] < 1200)
      mid = i;
  cr_assert_neq(mid, 0, "no three of six chunks of 1100 bytes lie side by side (scenario)");
  void *b = (void *)q[mid];
  struct mallinfo2 m4 = PINHEAP_NAME(mallinfo2)();
  PINHEAP_NAME(free)(b);
  struct mallinfo2 m5 = PINHEAP_NAME(mallinfo2)();
  cr_assert_eq(m5.ordblks, m4.ordblks + 1, "free of an isolated chunk: ordblks %zu -> %zu, expected +1",
               m4.ordblks, m5.ordblks);
  cr_assert_geq(m5.fordblks, m4.fordblks + 1000, "free(1000 bytes): fordblks %zu -> %zu, expected +1000",
                m4.fordblks, m5.fordblks);
  cr_assert_leq(m5.uordblks + 1000, m4.uordblks, "free(1000 bytes): uordblks %zu -> %zu, expected -1000",
                m4.uordblks, m5.uordblks);
  cr_assert_eq(m5.uordblks + m5.fordblks, m4.uordblks + m4.fordblks,
               "free moved bytes out of the heap: used+free %zu -> %zu",
               m4.uordblks + m4.fordblks, m5.uordblks + m5.fordblks);
  mallinfo_assert_consistent(&m5, "after free");
  for (int i = 0; i < NQ; i++)
    if (i != mid)
      PINHEAP_NAME(free)((void *)q[i]);
  PINHEAP_NAME(free)(p);
  struct mallinfo2 m6 = PINHEAP_NAME(mallinfo2)();
  cr_assert_eq(m6.uordblks, m0.uordblks, "everything freed: uordblks %zu, expected %zu", m6.uordblks,
               m0.uordblks);
  mallinfo_assert_consistent(&m6, "end");
  heap_assert_sound("mallinfo2 checks");
}

/* ======================================================================= */
/*  malloc_stats                                                            */
/* ======================================================================= */

Test(api, malloc_stats_writes_without_allocating)
{
  char out[1 << 16];
  stderr_capture_t cap;

  heap_warm_up();
  void *keep[8];
  for (int i = 0; i < 8; i++)
    keep[i] = PINHEAP_NAME(malloc)((size_t)100 << i);
  void *big = PINHEAP_NAME(malloc)(1 * MiB);
  PINHEAP_NAME(free)(keep[3]);

  listener_install();
  struct mallinfo2 before = PINHEAP_NAME(mallinfo2)();
  os_stats_t os_before = os_stats_read();
#ifdef API_COUNT_LIBC
  size_t libc_before = atomic_load(&api_libc_allocs);
#endif
  stderr_capture_begin(&cap);
#ifdef API_COUNT_LIBC
  atomic_store(&api_libc_counting, 1);
#endif
  PINHEAP_NAME(malloc_stats)();
#ifdef API_COUNT_LIBC
  atomic_store(&api_libc_counting, 0);
#endif
  size_t len = stderr_capture_end(&cap, out, sizeof(out));
  struct mallinfo2 after = PINHEAP_NAME(mallinfo2)();
  os_stats_t os_after = os_stats_read();

  cr_assert_gt(len, 0, "malloc_stats wrote nothing to stderr");
  cr_assert_not_null(strchr(out, '\n'), "malloc_stats output has no complete line: \"%s\"", out);
  cr_assert(memcmp(&before, &after, sizeof(before)) == 0,
            "malloc_stats changed pinheap's mallinfo2 (uordblks %zu -> %zu, arena %zu -> %zu, "
            "ordblks %zu -> %zu)", before.uordblks, after.uordblks, before.arena, after.arena,
            before.ordblks, after.ordblks);
  cr_assert_eq(os_after.map_calls, os_before.map_calls, "malloc_stats mapped memory (%zu map calls)",
               os_after.map_calls - os_before.map_calls);
  cr_assert_eq(listener_calls_get(), 0, "malloc_stats released memory (%zu listener calls)",
               listener_calls_get());
#ifdef API_COUNT_LIBC
  cr_assert_eq(atomic_load(&api_libc_allocs), libc_before,
               "malloc_stats called glibc's allocator %zu time(s) (stdio?)",
               atomic_load(&api_libc_allocs) - libc_before);
#endif
  for (int i = 0; i < 8; i++)
    if (i != 3)
      PINHEAP_NAME(free)(keep[i]);
  PINHEAP_NAME(free)(big);
  heap_assert_sound("malloc_stats");
}

/* ======================================================================= */
/*  malloc_trim                                                             */
/* ======================================================================= */

Test(api, malloc_trim_reports_release)
{
  enum { N = 1024 };
  static void *ptrs[N];

  heap_warm_up();
  listener_install();
  /* Keep free() from trimming by itself, and keep blocks in the heap. */
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, INT_MAX), 1, "mallopt(M_TRIM_THRESHOLD) failed");
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0), 1, "mallopt(M_MMAP_MAX, 0) failed");
  for (int i = 0; i < N; i++) {
    ptrs[i] = PINHEAP_NAME(malloc)(8 * KiB);
    cr_assert_not_null(ptrs[i], "malloc(8 KiB) #%d returned NULL", i);
    memset(ptrs[i], 0x42, 8 * KiB);
  }
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(free)(ptrs[i]);
  heap_assert_sound("freeing 8 MiB");

  os_stats_t before = os_stats_read();
  size_t calls_before = listener_calls_get();
  int rc = PINHEAP_NAME(malloc_trim)(0);
  os_stats_t after = os_stats_read();
  cr_assert_eq(rc, 1, "malloc_trim(0) after freeing 8 MiB returned %d, expected 1", rc);
  cr_assert_geq(after.released_bytes - before.released_bytes, 4 * MiB,
                "malloc_trim(0) returned 1 but released only %zu bytes of 8 MiB free",
                after.released_bytes - before.released_bytes);
  cr_assert_gt(listener_calls_get(), calls_before, "malloc_trim released memory without telling the listener");
  heap_assert_sound("malloc_trim(0)");

  before = os_stats_read();
  calls_before = listener_calls_get();
  rc = PINHEAP_NAME(malloc_trim)(0);
  after = os_stats_read();
  cr_assert_eq(rc, 0, "a second malloc_trim(0), with nothing left to release, returned %d (and "
               "released %zu bytes again in %zu listener calls)", rc,
               after.released_bytes - before.released_bytes, listener_calls_get() - calls_before);
  cr_assert_eq(after.released_bytes, before.released_bytes,
               "malloc_trim returned 0 but released %zu bytes", after.released_bytes - before.released_bytes);
  cr_assert_eq(listener_calls_get(), calls_before, "malloc_trim returned 0 but the listener was called");

  /* The heap still works after trimming. */
  void *p = PINHEAP_NAME(malloc)(100 * KiB);
  block_assert_usable(p, 100 * KiB, "malloc after trim");
  PINHEAP_NAME(free)(p);
  heap_assert_sound("malloc after trim");
}

Test(api, malloc_trim_keeps_pad)
{
  heap_warm_up();
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, INT_MAX), 1, "mallopt(M_TRIM_THRESHOLD) failed");
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0), 1, "mallopt(M_MMAP_MAX, 0) failed");
  void *p = PINHEAP_NAME(malloc)(8 * MiB);
  cr_assert_not_null(p, "malloc(8 MiB) returned NULL");
  memset(p, 1, 8 * MiB);
  PINHEAP_NAME(free)(p);
  size_t top_before = PINHEAP_NAME(mallinfo2)().keepcost;
  cr_assert_geq(top_before, 8 * MiB, "freed 8 MiB did not return to top (keepcost %zu)", top_before);

  /* A pad bigger than the top: the top stays whole; whatever the result,
   * it must say whether something was released. */
  os_stats_t before = os_stats_read();
  int rc = PINHEAP_NAME(malloc_trim)(top_before + 1 * MiB);
  os_stats_t after = os_stats_read();
  cr_assert_eq(PINHEAP_NAME(mallinfo2)().keepcost, top_before,
               "malloc_trim(pad %zu > top %zu) shrank the top to %zu", top_before + MiB, top_before,
               PINHEAP_NAME(mallinfo2)().keepcost);
  cr_assert_eq(rc != 0, after.released_bytes != before.released_bytes,
               "malloc_trim(pad %zu) returned %d but released %zu bytes", top_before + MiB, rc,
               after.released_bytes - before.released_bytes);

  /* A 2 MiB pad: most of the 8 MiB top goes back, 2 MiB stays. */
  before = os_stats_read();
  rc = PINHEAP_NAME(malloc_trim)(2 * MiB);
  after = os_stats_read();
  cr_assert_eq(rc, 1, "malloc_trim(2 MiB) with an 8 MiB top returned %d", rc);
  cr_assert_geq(after.released_bytes - before.released_bytes, 4 * MiB,
                "malloc_trim(2 MiB) with an 8 MiB top released only %zu bytes",
                after.released_bytes - before.released_bytes);
  size_t top_after = PINHEAP_NAME(mallinfo2)().keepcost;
  cr_assert_geq(top_after, 2 * MiB, "malloc_trim(2 MiB) left a top of %zu bytes, below the pad", top_after);
  heap_assert_sound("malloc_trim(pad)");
}

/* ======================================================================= */
/*  errno across free                                                       */
/* ======================================================================= */

Test(api, free_preserves_errno)
{
  heap_warm_up();
  static const size_t sizes[] = { 0, 24, 1000, 100 * KiB, 1 * MiB, 16 * MiB };
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    void *p = PINHEAP_NAME(malloc)(sizes[i]);
    cr_assert_not_null(p, "malloc(%zu) returned NULL", sizes[i]);
    errno = 1234;
    PINHEAP_NAME(free)(p);
    cr_assert_eq(errno, 1234, "free of a %zu-byte block changed errno from 1234 to %d", sizes[i], errno);
  }
  /* A free that unmaps (mapped chunk) and frees that trim the top. */
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, 64 * 1024), 1, "mallopt failed");
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, 64 * 1024), 1, "mallopt failed");
  os_stats_t before = os_stats_read();
  void *m = PINHEAP_NAME(malloc)(512 * KiB);
  cr_assert_not_null(m, "malloc(512 KiB) returned NULL");
  errno = 1234;
  PINHEAP_NAME(free)(m);
  cr_assert_eq(errno, 1234, "free of a mapped chunk changed errno to %d", errno);
  cr_assert_gt(os_stats_read().release_calls, before.release_calls,
               "free of a 512 KiB mapped chunk (threshold 64 KiB) did not release it");
  void *ptrs[64];
  for (int i = 0; i < 64; i++) {
    ptrs[i] = PINHEAP_NAME(malloc)(60 * KiB);
    cr_assert_not_null(ptrs[i], "malloc(60 KiB) #%d returned NULL", i);
  }
  for (int i = 63; i >= 0; i--) {
    errno = 1234;
    PINHEAP_NAME(free)(ptrs[i]);
    cr_assert_eq(errno, 1234, "free #%d (trimming the top) changed errno to %d", i, errno);
  }
  errno = 1234;
  PINHEAP_NAME(free)(NULL);
  cr_assert_eq(errno, 1234, "free(NULL) changed errno to %d", errno);
  heap_assert_sound("free and errno");
}

/* ======================================================================= */
/*  Threads: the heap has a lock                                            */
/* ======================================================================= */

static void *thread_churn(void *arg)
{
  uint32_t seed = (uint32_t)(uintptr_t)arg;
  shadow_rng_t rng;
  shadow_rng_seed(&rng, 0x9E3779B97F4A7C15ULL ^ seed);
  void *slots[64] = { 0 };
  size_t sizes[64] = { 0 };

  for (int step = 0; step < 20000; step++) {
    size_t i = shadow_rng_below(&rng, 64);
    if (slots[i] != NULL) {
      if (shadow_pattern_find_mismatch(slots[i], sizes[i], seed + (uint32_t)i) != SIZE_MAX)
        return (void *)1;
      PINHEAP_NAME(free)(slots[i]);
      slots[i] = NULL;
    } else {
      sizes[i] = shadow_rng_below(&rng, 4000);
      slots[i] = PINHEAP_NAME(malloc)(sizes[i]);
      if (slots[i] == NULL)
        return (void *)2;
      shadow_pattern_fill(slots[i], sizes[i], seed + (uint32_t)i);
    }
  }
  for (int i = 0; i < 64; i++)
    PINHEAP_NAME(free)(slots[i]);
  return NULL;
}

Test(api, two_threads_share_the_heap)
{
  pthread_t t[2];
  for (uintptr_t i = 0; i < 2; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, thread_churn, (void *)(i * 1000 + 1)), 0, "pthread_create");
  for (int i = 0; i < 2; i++) {
    void *r;
    pthread_join(t[i], &r);
    cr_assert_null(r, "thread %d: %s", i,
                   r == (void *)1 ? "a block's content was changed by the other thread"
                                  : "malloc returned NULL");
  }
  heap_assert_sound("two threads");
}

/* A mapped chunk's usable size must cover the request even when the
 * mapping ends exactly where the request does (granule boundaries). */
Test(api, usable_size_of_mapped_chunks_at_granule_edges)
{
  /* a fixed threshold: every block here is mapped on its own */
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, 128 * 1024), 1);
  for (size_t k = 3; k < 80; k++) {
    for (size_t d = 0; d < 96; d += 8) {
      size_t n = k * 65536 - d;
      char *p = PINHEAP_NAME(malloc)(n);
      cr_assert_not_null(p, "malloc(%zu)", n);
      size_t u = PINHEAP_NAME(malloc_usable_size)(p);
      cr_assert_geq(u, n, "malloc(%zu): usable size %zu is below the request", n, u);
      p[n - 1] = 1;
      char *q = PINHEAP_NAME(realloc)(p, n + 65536);
      cr_assert_not_null(q);
      cr_assert_geq(PINHEAP_NAME(malloc_usable_size)(q), n + 65536, "realloc(%zu): usable %zu", n + 65536,
                    PINHEAP_NAME(malloc_usable_size)(q));
      PINHEAP_NAME(free)(q);
    }
  }
}
