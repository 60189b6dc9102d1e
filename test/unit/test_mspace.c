/*
 * test_mspace.c -- mspaces: create/destroy (bytes released, no leaked
 * mappings over many cycles), independence of two heaps, and every
 * mspace_* entry point; then fixed-region mspaces over a caller's region
 * between PROT_NONE guard pages with canary slack around it: fill until
 * NULL/ENOMEM and get everything back, randomized use checked against a
 * shadow model with mspace_check after every step, too-small and
 * misaligned regions, trim and destroy that never touch or release
 * anything, locked and unlocked variants.  Main entry point: the
 * Criterion runner (suite "mspace").
 */
#include "test_util.h"

/** Asserts that [p, p+len) lies inside [base, base+cap). */
#define region_assert_contains(base, cap, p, len, what)                                   \
  do {                                                                                    \
    uintptr_t b_ = (uintptr_t)(base), p_ = (uintptr_t)(p);                                \
    cr_assert(p_ >= b_ && p_ + (len) <= b_ + (cap),                                       \
              "%s: block [%p, +%zu) is outside the region [%p, +%zu)", (what), (void *)p_, \
              (size_t)(len), (void *)b_, (size_t)(cap));                                  \
  } while (0)

/* ======================================================================= */
/*  OS-backed mspaces                                                       */
/* ======================================================================= */

static void mspace_basic_run(int locked)
{
  /* Nothing used: destroy gives back at least the first segment. */
  pinheap_mspace m = PINHEAP_NAME(create_mspace)(0, locked);
  cr_assert_not_null(m, "create_mspace(0, %d) returned NULL (errno %d)", locked, errno);
  size_t released = PINHEAP_NAME(destroy_mspace)(m);
  cr_assert_geq(released, 1 * MiB, "destroy_mspace of a fresh default mspace (1 MiB first segment) "
                "released %zu bytes", released);

  /* Used: whatever free trimmed plus what destroy releases covers it all. */
  listener_install();
  m = PINHEAP_NAME(create_mspace)(0, locked);
  cr_assert_not_null(m, "create_mspace(0, %d) returned NULL (errno %d)", locked, errno);
  void *p = PINHEAP_NAME(mspace_malloc)(m, 100);
  cr_assert_not_null(p, "mspace_malloc(100) returned NULL");
  cr_assert(ptr_is_aligned(p, 16), "mspace_malloc(100) = %p not 16-aligned", p);
  cr_assert_geq(PINHEAP_NAME(mspace_usable_size)(p), 100, "mspace_usable_size = %zu < 100",
                PINHEAP_NAME(mspace_usable_size)(p));
  memset(p, 0x33, PINHEAP_NAME(mspace_usable_size)(p));
  mspace_assert_sound(m, "one mspace_malloc");
  PINHEAP_NAME(mspace_free)(m, p);
  mspace_assert_sound(m, "mspace_free");
  size_t trimmed = listener_bytes_get();
  released = PINHEAP_NAME(destroy_mspace)(m);
  cr_assert_gt(released, 0, "destroy_mspace released nothing");
  cr_assert_eq(listener_bytes_get() - trimmed, released,
               "destroy_mspace returned %zu but the release listener saw %zu bytes", released,
               listener_bytes_get() - trimmed);
  cr_assert_geq(listener_bytes_get(), 1 * MiB, "a used default mspace gave back only %zu bytes in all "
                "(free's trim %zu + destroy %zu)", listener_bytes_get(), trimmed, released);

  m = PINHEAP_NAME(create_mspace)(4 * MiB, locked);
  cr_assert_not_null(m, "create_mspace(4 MiB, %d) returned NULL", locked);
  released = PINHEAP_NAME(destroy_mspace)(m);
  cr_assert_geq(released, 4 * MiB, "destroy_mspace of a 4 MiB mspace released %zu bytes", released);

  /* A small first segment grows as needed. */
  m = PINHEAP_NAME(create_mspace)(8 * KiB, locked);
  cr_assert_not_null(m, "create_mspace(8 KiB, %d) returned NULL", locked);
  void *blocks[1024];
  for (int i = 0; i < 1024; i++) {
    blocks[i] = PINHEAP_NAME(mspace_malloc)(m, 4000);
    cr_assert_not_null(blocks[i], "mspace_malloc(4000) #%d in a growing mspace returned NULL", i);
    shadow_pattern_fill(blocks[i], 4000, (uint32_t)i);
  }
  for (int i = 0; i < 1024; i++)
    cr_assert_eq(shadow_pattern_find_mismatch(blocks[i], 4000, (uint32_t)i), SIZE_MAX,
                 "block %d of a growing mspace was overwritten", i);
  mspace_assert_sound(m, "growing past the first segment");
  released = PINHEAP_NAME(destroy_mspace)(m);
  cr_assert_geq(released, 1024 * 4000, "destroy_mspace after 4 MB of blocks released %zu bytes", released);
}

Test(mspace, create_use_destroy_unlocked) { mspace_basic_run(0); }
Test(mspace, create_use_destroy_locked) { mspace_basic_run(1); }

Test(mspace, create_destroy_cycles_do_not_leak)
{
  /* One cycle first, so that one-time state is not counted as a leak. */
  PINHEAP_NAME(destroy_mspace)(PINHEAP_NAME(create_mspace)(0, 0));
  os_stats_t before = os_stats_read();
  int lines_before = maps_count_lines();
  size_t released_sum = 0;

  for (int cycle = 0; cycle < 200; cycle++) {
    size_t cap = cycle % 3 == 0 ? 0 : cycle % 3 == 1 ? 64 * KiB : 2 * MiB;
    pinheap_mspace m = PINHEAP_NAME(create_mspace)(cap, cycle & 1);
    cr_assert_not_null(m, "create_mspace(%zu) returned NULL in cycle %d", cap, cycle);
    for (int i = 0; i < 50; i++) {
      void *p = PINHEAP_NAME(mspace_malloc)(m, (size_t)(i * 37 % 3000));
      cr_assert_not_null(p, "mspace_malloc returned NULL in cycle %d", cycle);
      if (i % 3 == 0)
        PINHEAP_NAME(mspace_free)(m, p);
    }
    /* Past the first segment, and one big block never freed. */
    void *grow = PINHEAP_NAME(mspace_malloc)(m, 100 * KiB);
    void *big = PINHEAP_NAME(mspace_malloc)(m, 1 * MiB + 100);
    cr_assert(grow && big, "large mspace_malloc returned NULL in cycle %d", cycle);
    size_t r = PINHEAP_NAME(destroy_mspace)(m);
    cr_assert_gt(r, 0, "destroy_mspace returned 0 in cycle %d", cycle);
    released_sum += r;
  }
  os_stats_t after = os_stats_read();
  int lines_after = maps_count_lines();
  cr_assert_eq(after.mapped, before.mapped,
               "200 create/use/destroy cycles left %zd bytes mapped (%zu before, %zu after); "
               "destroy_mspace must give back every segment and mapped chunk",
               (ssize_t)(after.mapped - before.mapped), before.mapped, after.mapped);
#if !defined(__SANITIZE_THREAD__)   /* TSan maps shadow of its own as ranges come and go */
  /* A leak adds a line or more per cycle.  A few lines may come from the
   * owner and kind maps, opened 64 KiB at a time (read-only around the
   * opened part) as heaps reach new address ranges. */
  cr_assert_leq(lines_after, lines_before + 8, "/proc/self/maps grew from %d to %d lines over 200 cycles",
                lines_before, lines_after);
#else
  (void)lines_before, (void)lines_after;
#endif
  cr_assert_leq(released_sum, after.released_bytes - before.released_bytes,
                "destroy_mspace claimed %zu bytes released, the OS layer released only %zu",
                released_sum, after.released_bytes - before.released_bytes);
}

Test(mspace, heaps_are_independent)
{
  enum { N = 300 };
  static void *pa[N], *pb[N];
  pinheap_mspace a = PINHEAP_NAME(create_mspace)(0, 0);
  pinheap_mspace b = PINHEAP_NAME(create_mspace)(0, 1);
  cr_assert(a && b, "create_mspace failed");

  void *warm = PINHEAP_NAME(malloc)(10);
  cr_assert_not_null(warm, "malloc(10) failed");
  struct mallinfo2 main_before = PINHEAP_NAME(mallinfo2)();
  for (int i = 0; i < N; i++) {
    size_t n = (size_t)(16 + (i * 97) % 2000);
    pa[i] = PINHEAP_NAME(mspace_malloc)(a, n);
    pb[i] = PINHEAP_NAME(mspace_malloc)(b, n);
    cr_assert(pa[i] && pb[i], "mspace_malloc(%zu) returned NULL", n);
    cr_assert_neq(pa[i], pb[i], "two mspaces returned the same block %p", pa[i]);
    shadow_pattern_fill(pa[i], n, (uint32_t)i);
    shadow_pattern_fill(pb[i], n, (uint32_t)i + 100000);
  }
  struct mallinfo2 b_before = PINHEAP_NAME(mspace_mallinfo)(b);
  shadow_rng_t rng;
  shadow_rng_seed(&rng, 12345);
  for (int i = N - 1; i > 0; i--) {  /* free all of a, shuffled */
    size_t j = shadow_rng_below(&rng, (size_t)i + 1);
    void *t = pa[i];
    pa[i] = pa[j];
    pa[j] = t;
  }
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(mspace_free)(a, pa[i]);
  mspace_assert_sound(a, "freeing everything in mspace a");
  mspace_assert_sound(b, "freeing everything in the other mspace a");
  struct mallinfo2 b_after = PINHEAP_NAME(mspace_mallinfo)(b);
  cr_assert(memcmp(&b_before, &b_after, sizeof(b_before)) == 0,
            "freeing into mspace a changed mspace b's mallinfo (uordblks %zu -> %zu, fordblks %zu -> %zu)",
            b_before.uordblks, b_after.uordblks, b_before.fordblks, b_after.fordblks);
  for (int i = 0; i < N; i++) {
    size_t n = (size_t)(16 + (i * 97) % 2000);
    cr_assert_eq(shadow_pattern_find_mismatch(pb[i], n, (uint32_t)i + 100000), SIZE_MAX,
                 "block %d of mspace b changed while mspace a was emptied", i);
  }
  struct mallinfo2 main_after = PINHEAP_NAME(mallinfo2)();
  cr_assert_eq(main_after.uordblks, main_before.uordblks,
               "mspace traffic changed the malloc heap's uordblks %zu -> %zu", main_before.uordblks,
               main_after.uordblks);
  cr_assert_eq(main_after.hblks, main_before.hblks, "mspace traffic changed the malloc heap's hblks");
  PINHEAP_NAME(destroy_mspace)(a);
  /* b outlives a and still works. */
  void *more = PINHEAP_NAME(mspace_malloc)(b, 5000);
  cr_assert_not_null(more, "mspace_malloc on b after destroying a returned NULL");
  memset(more, 1, 5000);
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(mspace_free)(b, pb[i]);
  PINHEAP_NAME(mspace_free)(b, more);
  mspace_assert_sound(b, "using b after destroying a");
  PINHEAP_NAME(destroy_mspace)(b);
  PINHEAP_NAME(free)(warm);
  heap_assert_sound("mspace independence");
}

Test(mspace, calloc_zeroes_and_checks_overflow)
{
  pinheap_mspace m = PINHEAP_NAME(create_mspace)(0, 0);
  cr_assert_not_null(m, "create_mspace failed");
  static const size_t sizes[] = { 1, 100, 4000, 70000, 300 * KiB, 2 * MiB };
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = sizes[i];
    for (int round = 0; round < 2; round++) {
      unsigned char *d = PINHEAP_NAME(mspace_malloc)(m, n);
      cr_assert_not_null(d, "mspace_malloc(%zu) returned NULL", n);
      memset(d, 0xAB, PINHEAP_NAME(mspace_usable_size)(d));
      PINHEAP_NAME(mspace_free)(m, d);
      unsigned char *z = PINHEAP_NAME(mspace_calloc)(m, 1, n);
      cr_assert_not_null(z, "mspace_calloc(1, %zu) returned NULL", n);
      size_t bad = shadow_bytes_find_not(z, n, 0);
      cr_assert_eq(bad, SIZE_MAX, "mspace_calloc(1, %zu): byte %zu is 0x%02x after reuse of dirty memory",
                   n, bad, bad == SIZE_MAX ? 0 : z[bad]);
      PINHEAP_NAME(mspace_free)(m, z);
    }
  }
  void *zero = PINHEAP_NAME(mspace_calloc)(m, 0, 10);
  cr_assert_not_null(zero, "mspace_calloc(0, 10) returned NULL");
  PINHEAP_NAME(mspace_free)(m, zero);
  static const size_t over[][2] = { { SIZE_MAX / 2 + 1, 3 }, { SIZE_MAX, SIZE_MAX }, { 1, SIZE_MAX } };
  for (size_t i = 0; i < 3; i++) {
    errno = 0;
    void *p = PINHEAP_NAME(mspace_calloc)(m, size_opaque(over[i][0]), size_opaque(over[i][1]));
    int err = errno;
    cr_assert_null(p, "mspace_calloc(%zu, %zu) returned %p", over[i][0], over[i][1], p);
    cr_assert_eq(err, ENOMEM, "mspace_calloc(%zu, %zu): errno %d, expected ENOMEM", over[i][0],
                 over[i][1], err);
  }
  errno = 0;
  void *p = PINHEAP_NAME(mspace_malloc)(m, size_opaque(SIZE_MAX));
  cr_assert_null(p, "mspace_malloc(SIZE_MAX) returned %p", p);
  cr_assert_eq(errno, ENOMEM, "mspace_malloc(SIZE_MAX): errno %d, expected ENOMEM", errno);
  errno = 0;
  p = PINHEAP_NAME(mspace_malloc)(m, size_opaque((size_t)PTRDIFF_MAX + 1));
  cr_assert_null(p, "mspace_malloc(PTRDIFF_MAX + 1) returned %p", p);
  cr_assert_eq(errno, ENOMEM, "mspace_malloc(PTRDIFF_MAX + 1): errno %d, expected ENOMEM", errno);
  mspace_assert_sound(m, "mspace_calloc");
  PINHEAP_NAME(destroy_mspace)(m);
}

Test(mspace, realloc_keeps_content)
{
  static const size_t moves[][2] = {
    { 24, 100 }, { 100, 24 }, { 1000, 1000 }, { 8000, 100 }, { 100, 64 * KiB },
    { 1000, 300 * KiB }, { 300 * KiB, 4 * MiB }, { 4 * MiB, 2 * MiB }, { 2 * MiB, 100 },
  };
  pinheap_mspace m = PINHEAP_NAME(create_mspace)(0, 1);
  cr_assert_not_null(m, "create_mspace failed");
  void *n0 = PINHEAP_NAME(mspace_realloc)(m, NULL, 500);
  cr_assert_not_null(n0, "mspace_realloc(NULL, 500) returned NULL");
  cr_assert_geq(PINHEAP_NAME(mspace_usable_size)(n0), 500, "mspace_realloc(NULL, 500): usable %zu",
                PINHEAP_NAME(mspace_usable_size)(n0));
  PINHEAP_NAME(mspace_free)(m, n0);
  for (size_t i = 0; i < sizeof(moves) / sizeof(moves[0]); i++) {
    size_t from = moves[i][0], to = moves[i][1];
    void *left = PINHEAP_NAME(mspace_malloc)(m, 100);
    void *p = PINHEAP_NAME(mspace_malloc)(m, from);
    void *right = PINHEAP_NAME(mspace_malloc)(m, 100);
    cr_assert(left && p && right, "setup for %zu -> %zu failed", from, to);
    shadow_pattern_fill(left, 100, 1);
    shadow_pattern_fill(p, from, (uint32_t)i + 10);
    shadow_pattern_fill(right, 100, 2);
    void *q = PINHEAP_NAME(mspace_realloc)(m, p, to);
    cr_assert_not_null(q, "mspace_realloc %zu -> %zu returned NULL", from, to);
    size_t keep = from < to ? from : to;
    size_t bad = shadow_pattern_find_mismatch(q, keep, (uint32_t)i + 10);
    cr_assert_eq(bad, SIZE_MAX, "mspace_realloc %zu -> %zu lost content at byte %zu", from, to, bad);
    size_t u = PINHEAP_NAME(mspace_usable_size)(q);
    cr_assert_geq(u, to, "mspace_realloc %zu -> %zu: usable %zu", from, to, u);
    memset(q, 0x99, u);
    cr_assert_eq(shadow_pattern_find_mismatch(left, 100, 1), SIZE_MAX, "mspace_realloc %zu -> %zu damaged the "
                 "block before", from, to);
    cr_assert_eq(shadow_pattern_find_mismatch(right, 100, 2), SIZE_MAX, "mspace_realloc %zu -> %zu damaged the "
                 "block after", from, to);
    mspace_assert_sound(m, "mspace_realloc");
    PINHEAP_NAME(mspace_free)(m, q);
    PINHEAP_NAME(mspace_free)(m, left);
    PINHEAP_NAME(mspace_free)(m, right);
  }
  mspace_assert_sound(m, "freeing after mspace_realloc");
  PINHEAP_NAME(destroy_mspace)(m);
}

Test(mspace, memalign_and_usable_size)
{
  pinheap_mspace m = PINHEAP_NAME(create_mspace)(0, 0);
  cr_assert_not_null(m, "create_mspace failed");
  static const size_t sizes[] = { 0, 1, 17, 100, 4096, 70000, 200 * KiB };
  void *ptrs[21 * 7];
  size_t lens[21 * 7];
  int k = 0;

  cr_assert_eq(PINHEAP_NAME(mspace_usable_size)(NULL), 0, "mspace_usable_size(NULL) = %zu",
               PINHEAP_NAME(mspace_usable_size)(NULL));
  for (size_t a = 1; a <= 1 * MiB; a <<= 1) {
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
      void *p = PINHEAP_NAME(mspace_memalign)(m, a, sizes[i]);
      cr_assert_not_null(p, "mspace_memalign(%zu, %zu) returned NULL", a, sizes[i]);
      cr_assert(ptr_is_aligned(p, a < 16 ? 16 : a), "mspace_memalign(%zu, %zu) = %p misaligned", a,
                sizes[i], p);
      lens[k] = PINHEAP_NAME(mspace_usable_size)(p);
      cr_assert_geq(lens[k], sizes[i], "mspace_usable_size(mspace_memalign(%zu, %zu)) = %zu", a,
                    sizes[i], lens[k]);
      shadow_pattern_fill(p, lens[k], (uint32_t)k);
      ptrs[k++] = p;
    }
  }
  for (int i = 0; i < k; i++)
    cr_assert_eq(shadow_pattern_find_mismatch(ptrs[i], lens[i], (uint32_t)i), SIZE_MAX,
                 "aligned mspace block %d (usable %zu) was overwritten", i, lens[i]);
  mspace_assert_sound(m, "mspace_memalign sweep");
  for (int i = 0; i < k; i++)
    PINHEAP_NAME(mspace_free)(m, ptrs[i]);
  mspace_assert_sound(m, "freeing the mspace_memalign sweep");
  PINHEAP_NAME(destroy_mspace)(m);
}

/* The next block a fresh mspace's top hands out: where a probe lands (given
 * back at once, so it merges into the top again). */
static char *mspace_next_block(pinheap_mspace m)
{
  char *t = PINHEAP_NAME(mspace_malloc)(m, 16);
  cr_assert_not_null(t, "mspace_malloc(16) returned NULL");
  PINHEAP_NAME(mspace_free)(m, t);
  return t;
}

/* A free chunk too small for the old way of aligning (take size + alignment
 * and cut both ends) but holding an aligned region of the size: memalign
 * must find it, not grow into the top.  The free chunk is laid out between
 * two blocks in use, from 16 KiB before a 64 KiB boundary to 16 KiB after
 * the 64 KiB that follow it. */
Test(mspace, memalign_finds_an_aligned_region_inside_a_free_chunk)
{
  pinheap_mspace m = PINHEAP_NAME(create_mspace)(0, 0);
  cr_assert_not_null(m, "create_mspace failed");
  char *x1 = mspace_next_block(m);
  uintptr_t a = ((uintptr_t)x1 + 32 * KiB + 64 * KiB - 1) & ~(uintptr_t)(64 * KiB - 1);
  char *f = (char *)a - 16 * KiB;
  /* x1 up to f: sized by trial, as the chunk overhead is the allocator's */
  size_t want = (size_t)(f - x1) - 16;
  for (int k = 0; k < 4; k++) {
    char *got = PINHEAP_NAME(mspace_malloc)(m, want);
    cr_assert_eq(got, x1, "mspace_malloc(%zu) = %p, expected the top's next block %p", want,
                 (void *)got, (void *)x1);
    char *next = mspace_next_block(m);
    if (next == f)
      break;
    PINHEAP_NAME(mspace_free)(m, got);
    cr_assert_eq(mspace_next_block(m), x1, "freeing the block before the top did not merge it");
    want += (size_t)(f - next);
  }
  cr_assert_eq(mspace_next_block(m), f, "could not make the top's next block %p", (void *)f);
  char *fb = PINHEAP_NAME(mspace_malloc)(m, 96 * KiB - 16);
  void *x2 = PINHEAP_NAME(mspace_malloc)(m, 100);
  cr_assert(fb == f && x2 != NULL, "mspace_malloc(96 KiB - 16) = %p, expected %p", (void *)fb,
            (void *)f);
  PINHEAP_NAME(mspace_free)(m, fb);
  mspace_assert_sound(m, "the free chunk laid out");

  void *p = PINHEAP_NAME(mspace_memalign)(m, 64 * KiB, 64 * KiB - 16);
  cr_assert_eq((uintptr_t)p, a, "mspace_memalign(64 KiB, 64 KiB - 16) = %p, expected %p: the free "
               "chunk at %p (96 KiB) holds it aligned", p, (void *)a, (void *)f);
  mspace_assert_sound(m, "memalign inside the free chunk");
  void *q = PINHEAP_NAME(mspace_malloc)(m, 8 * KiB);
  cr_assert(q != NULL && ((uintptr_t)q == (uintptr_t)f || (uintptr_t)q >= a + 64 * KiB),
            "the free chunk's lead or tail was not given back (mspace_malloc(8 KiB) = %p)", q);
  mspace_assert_sound(m, "a block from the lead or the tail");
  PINHEAP_NAME(destroy_mspace)(m);
}

Test(mspace, mallinfo_moves)
{
  pinheap_mspace m = PINHEAP_NAME(create_mspace)(0, 0);
  cr_assert_not_null(m, "create_mspace failed");
  struct mallinfo2 m0 = PINHEAP_NAME(mspace_mallinfo)(m);
  cr_assert_gt(m0.arena, 0, "a fresh mspace has arena 0");
  void *a = PINHEAP_NAME(mspace_malloc)(m, 1000), *b = PINHEAP_NAME(mspace_malloc)(m, 1000);
  void *c = PINHEAP_NAME(mspace_malloc)(m, 1000);
  cr_assert(a && b && c, "mspace_malloc failed");
  struct mallinfo2 m1 = PINHEAP_NAME(mspace_mallinfo)(m);
  cr_assert_geq(m1.uordblks, m0.uordblks + 3000, "3 x 1000 bytes: uordblks %zu -> %zu", m0.uordblks,
                m1.uordblks);
  PINHEAP_NAME(mspace_free)(m, b);
  struct mallinfo2 m2 = PINHEAP_NAME(mspace_mallinfo)(m);
  cr_assert_geq(m2.fordblks, m1.fordblks + 1000, "free(1000): fordblks %zu -> %zu", m1.fordblks,
                m2.fordblks);
  cr_assert_eq(m2.ordblks, m1.ordblks + 1, "free of an isolated chunk: ordblks %zu -> %zu", m1.ordblks,
               m2.ordblks);
  cr_assert_leq(m2.keepcost, m2.fordblks, "keepcost %zu > fordblks %zu", m2.keepcost, m2.fordblks);
  /* Growth past the first segment raises arena. */
  void *big[16];
  for (int i = 0; i < 16; i++) {
    big[i] = PINHEAP_NAME(mspace_malloc)(m, 100 * KiB);
    cr_assert_not_null(big[i], "mspace_malloc(100 KiB) returned NULL");
  }
  struct mallinfo2 m3 = PINHEAP_NAME(mspace_mallinfo)(m);
  cr_assert_gt(m3.arena, m2.arena, "1.6 MiB more in a 1 MiB mspace did not raise arena (%zu -> %zu)",
               m2.arena, m3.arena);
  cr_assert_leq(m3.uordblks + m3.fordblks, m3.arena + m3.hblkhd, "uordblks + fordblks > arena + hblkhd");
  for (int i = 0; i < 16; i++)
    PINHEAP_NAME(mspace_free)(m, big[i]);
  PINHEAP_NAME(mspace_free)(m, a);
  PINHEAP_NAME(mspace_free)(m, c);
  struct mallinfo2 m4 = PINHEAP_NAME(mspace_mallinfo)(m);
  cr_assert_eq(m4.uordblks, m0.uordblks, "all freed: uordblks %zu, expected %zu", m4.uordblks, m0.uordblks);
  mspace_assert_sound(m, "mspace_mallinfo");
  PINHEAP_NAME(destroy_mspace)(m);
}

Test(mspace, trim_reports_release)
{
  pinheap_mspace m = PINHEAP_NAME(create_mspace)(0, 0);
  cr_assert_not_null(m, "create_mspace failed");
  listener_install();
  static void *ptrs[1024];
  for (int i = 0; i < 1024; i++) {
    ptrs[i] = PINHEAP_NAME(mspace_malloc)(m, 8 * KiB);
    cr_assert_not_null(ptrs[i], "mspace_malloc(8 KiB) returned NULL");
    memset(ptrs[i], 0x42, 8 * KiB);
  }
  os_stats_t start = os_stats_read();
  for (int i = 0; i < 1024; i++)
    PINHEAP_NAME(mspace_free)(m, ptrs[i]);
  os_stats_t before = os_stats_read();
  size_t calls_before = listener_calls_get();
  int rc = PINHEAP_NAME(mspace_trim)(m, 0);
  os_stats_t after = os_stats_read();
  /* free may already have trimmed; together, most of 8 MiB went back. */
  cr_assert_geq(after.released_bytes - start.released_bytes, 4 * MiB,
                "freeing 8 MiB in an mspace and mspace_trim(0) released only %zu bytes",
                after.released_bytes - start.released_bytes);
  cr_assert_eq(rc != 0, after.released_bytes != before.released_bytes,
               "mspace_trim returned %d but released %zu bytes", rc,
               after.released_bytes - before.released_bytes);
  cr_assert_eq(rc != 0, listener_calls_get() != calls_before,
               "mspace_trim returned %d; listener calls %zu -> %zu", rc, calls_before, listener_calls_get());
  mspace_assert_sound(m, "mspace_trim");
  before = os_stats_read();
  rc = PINHEAP_NAME(mspace_trim)(m, 0);
  after = os_stats_read();
  cr_assert_eq(rc, 0, "a second mspace_trim(0), with nothing left to release, returned %d (and "
               "released %zu bytes again)", rc, after.released_bytes - before.released_bytes);
  cr_assert_eq(after.released_bytes, before.released_bytes, "a second mspace_trim released %zu bytes",
               after.released_bytes - before.released_bytes);
  void *p = PINHEAP_NAME(mspace_malloc)(m, 500 * KiB);
  cr_assert_not_null(p, "mspace_malloc after trim returned NULL");
  memset(p, 7, 500 * KiB);
  PINHEAP_NAME(mspace_free)(m, p);
  mspace_assert_sound(m, "use after mspace_trim");
  PINHEAP_NAME(destroy_mspace)(m);
}

Test(mspace, malloc_zero_is_unique)
{
  pinheap_mspace m = PINHEAP_NAME(create_mspace)(0, 0);
  cr_assert_not_null(m, "create_mspace failed");
  void *a = PINHEAP_NAME(mspace_malloc)(m, 0), *b = PINHEAP_NAME(mspace_malloc)(m, 0);
  cr_assert(a && b && a != b, "mspace_malloc(0) twice gave %p and %p", a, b);
  PINHEAP_NAME(mspace_free)(m, a);
  PINHEAP_NAME(mspace_free)(m, b);
  PINHEAP_NAME(mspace_free)(m, NULL);
  mspace_assert_sound(m, "mspace_malloc(0)");
  PINHEAP_NAME(destroy_mspace)(m);
}

/* ======================================================================= */
/*  Fixed-region mspaces                                                    */
/* ======================================================================= */

/* A fixed-region heap under test: the region between guards, the part of
 * it given to create_mspace_with_base, and the OS-layer counters at start. */
typedef struct fixed_s {
  region_t region;
  uint8_t *base;
  size_t cap;
  pinheap_mspace msp;
  os_stats_t os_start;
} fixed_t;

/** Maps rw_len bytes between guards and creates a heap over
 *  [rw + head, rw + head + cap).  cap 0 means up to rw_len - head - tail. */
static void fixed_create(size_t rw_len, size_t head, size_t tail, int locked, fixed_t *fixed_p)
{
  region_map(rw_len, &fixed_p->region);
  fixed_p->base = fixed_p->region.rw + head;
  fixed_p->cap = fixed_p->region.rw_len - head - tail;
  listener_install();
  fixed_p->os_start = os_stats_read();
  fixed_p->msp = PINHEAP_NAME(create_mspace_with_base)(fixed_p->base, fixed_p->cap, locked);
  cr_assert_not_null(fixed_p->msp, "create_mspace_with_base(%p, %zu, %d) returned NULL (errno %d)",
                     (void *)fixed_p->base, fixed_p->cap, locked, errno);
}

/** The region's promises: nothing outside it written, nothing mapped or
 *  released by the heap. */
static void fixed_assert_untouched_outside(const fixed_t *f, const char *when)
{
  os_stats_t now = os_stats_read();
  region_assert_canaries(&f->region, f->base, f->cap, when);
  cr_assert_eq(now.map_calls, f->os_start.map_calls,
               "%s: a fixed-region heap mapped memory from the OS (%zu map calls)", when,
               now.map_calls - f->os_start.map_calls);
  cr_assert_eq(listener_calls_get(), 0, "%s: a fixed-region heap released %zu bytes in %zu calls", when,
               listener_bytes_get(), listener_calls_get());
}

static void fixed_destroy(fixed_t *f)
{
  size_t r = PINHEAP_NAME(destroy_mspace)(f->msp);
  cr_assert_eq(r, 0, "destroy_mspace of a fixed-region heap released %zu bytes; the region is the "
               "caller's", r);
  fixed_assert_untouched_outside(f, "destroy_mspace");
  /* The region is still the caller's, mapped and writable. */
  memset(f->base, 0, f->cap);
  region_unmap(&f->region);
}

/** Allocates from a deterministic size sequence until NULL; every block
 *  inside the region, 16-aligned, filled with its pattern.  @return count. */
static size_t fixed_fill(fixed_t *f, uint64_t seed, void **ptrs, size_t *lens, size_t max)
{
  shadow_rng_t rng;
  shadow_rng_seed(&rng, seed);
  size_t n = 0;

  for (;;) {
    size_t want = seed == 0 ? 1000 : (shadow_rng_below(&rng, 8) == 0 ? shadow_rng_below(&rng, 20000) : shadow_rng_below(&rng, 600));
    cr_assert_lt(n, max, "more than %zu blocks from a %zu-byte region: not bounded by the region", max,
                 f->cap);
    errno = 0;
    void *p = PINHEAP_NAME(mspace_malloc)(f->msp, want);
    if (p == NULL) {
      cr_assert_eq(errno, ENOMEM, "mspace_malloc(%zu) on a full region: NULL with errno %d, expected "
                   "ENOMEM", want, errno);
      break;
    }
    size_t u = PINHEAP_NAME(mspace_usable_size)(p);
    cr_assert_geq(u, want, "mspace_usable_size %zu < %zu", u, want);
    cr_assert(ptr_is_aligned(p, 16), "fixed-region block %p not 16-aligned", p);
    region_assert_contains(f->base, f->cap, p, u, "mspace_malloc");
    shadow_pattern_fill(p, u, (uint32_t)n);
    ptrs[n] = p;
    lens[n] = u;
    n++;
  }
  for (size_t i = 0; i < n; i++) {
    size_t bad = shadow_pattern_find_mismatch(ptrs[i], lens[i], (uint32_t)i);
    cr_assert_eq(bad, SIZE_MAX, "fixed-region block %zu (%p, usable %zu) overwritten at byte %zu", i,
                 ptrs[i], lens[i], bad);
  }
  return n;
}

static void fixed_free_all(fixed_t *f, void **ptrs, size_t n, uint64_t seed)
{
  shadow_rng_t rng;
  shadow_rng_seed(&rng, seed | 1);
  for (size_t i = n; i > 1; i--) {
    size_t j = shadow_rng_below(&rng, i);
    void *t = ptrs[i - 1];
    ptrs[i - 1] = ptrs[j];
    ptrs[j] = t;
  }
  for (size_t i = 0; i < n; i++)
    PINHEAP_NAME(mspace_free)(f->msp, ptrs[i]);
}

static void fixed_fill_run(int locked, size_t head, size_t tail)
{
  enum { MAX = 1 << 16 };
  static void *ptrs[MAX];
  static size_t lens[MAX];
  fixed_t f;

  fixed_create(1 * MiB + 2 * 4096, head, tail, locked, &f);
  struct mallinfo2 fresh = PINHEAP_NAME(mspace_mallinfo)(f.msp);
  cr_assert_leq(fresh.arena, f.cap, "fixed-region arena %zu > capacity %zu", fresh.arena, f.cap);
  mspace_assert_sound(f.msp, "create_mspace_with_base");

  /* Too big for the region: NULL/ENOMEM, never a direct mapping, even
   * above the mmap threshold. */
  errno = 0;
  void *huge = PINHEAP_NAME(mspace_malloc)(f.msp, 2 * f.cap);
  cr_assert_null(huge, "mspace_malloc(%zu) in a %zu-byte region returned %p", 2 * f.cap, f.cap, huge);
  cr_assert_eq(errno, ENOMEM, "mspace_malloc(2 x capacity): errno %d, expected ENOMEM", errno);
  void *above = PINHEAP_NAME(mspace_malloc)(f.msp, 200 * KiB);
  cr_assert_not_null(above, "mspace_malloc(200 KiB) in a 1 MiB region returned NULL");
  region_assert_contains(f.base, f.cap, above, PINHEAP_NAME(mspace_usable_size)(above), "mspace_malloc(200 KiB)");
  PINHEAP_NAME(mspace_free)(f.msp, above);
  fixed_assert_untouched_outside(&f, "a block above the mmap threshold");

  /* Same-size blocks: fill, empty, fill again: the same count. */
  size_t n1 = fixed_fill(&f, 0, ptrs, lens, MAX);
  cr_assert_geq(n1 * 1000, f.cap / 2, "only %zu blocks of 1000 bytes fit in %zu bytes", n1, f.cap);
  mspace_assert_sound(f.msp, "filling the region");
  fixed_assert_untouched_outside(&f, "filling the region");

  /* A full heap says ENOMEM through every entry point, and keeps blocks. */
  errno = 0;
  cr_assert_null(PINHEAP_NAME(mspace_calloc)(f.msp, 1, 2000), "mspace_calloc on a full region succeeded");
  cr_assert_eq(errno, ENOMEM, "mspace_calloc on a full region: errno %d", errno);
  errno = 0;
  cr_assert_null(PINHEAP_NAME(mspace_memalign)(f.msp, 4096, 2000), "mspace_memalign on a full region succeeded");
  cr_assert_eq(errno, ENOMEM, "mspace_memalign on a full region: errno %d", errno);
  errno = 0;
  void *r = PINHEAP_NAME(mspace_realloc)(f.msp, ptrs[0], 100 * KiB);
  cr_assert_null(r, "mspace_realloc(100 KiB) on a full region returned %p", r);
  cr_assert_eq(errno, ENOMEM, "mspace_realloc on a full region: errno %d", errno);
  cr_assert_eq(shadow_pattern_find_mismatch(ptrs[0], lens[0], 0), SIZE_MAX, "a failed mspace_realloc changed the block");

  fixed_free_all(&f, ptrs, n1, 7);
  mspace_assert_sound(f.msp, "freeing every block");
  struct mallinfo2 emptied = PINHEAP_NAME(mspace_mallinfo)(f.msp);
  cr_assert_eq(emptied.uordblks, fresh.uordblks, "after freeing everything uordblks is %zu, was %zu fresh",
               emptied.uordblks, fresh.uordblks);
  size_t n2 = fixed_fill(&f, 0, ptrs, lens, MAX);
  cr_assert_eq(n2, n1, "refilling the emptied region gave %zu blocks, the first fill %zu", n2, n1);
  fixed_free_all(&f, ptrs, n2, 8);

  /* Mixed sizes: the same sequence gives the same count. */
  size_t k1 = fixed_fill(&f, 0xABCDEF, ptrs, lens, MAX);
  fixed_free_all(&f, ptrs, k1, 9);
  mspace_assert_sound(f.msp, "mixed fill and free");
  size_t k2 = fixed_fill(&f, 0xABCDEF, ptrs, lens, MAX);
  cr_assert_eq(k2, k1, "refilling with the same mixed sizes gave %zu blocks, the first time %zu", k2, k1);
  fixed_free_all(&f, ptrs, k2, 10);
  mspace_assert_sound(f.msp, "second mixed fill and free");
  fixed_assert_untouched_outside(&f, "fill/free rounds");
  fixed_destroy(&f);
}

/* Page-aligned region tight between the guard pages. */
Test(mspace, fixed_fill_until_enomem_unlocked) { fixed_fill_run(0, 0, 0); }
Test(mspace, fixed_fill_until_enomem_locked) { fixed_fill_run(1, 0, 0); }
/* Canary slack on both sides, capacity not a multiple of 16. */
Test(mspace, fixed_fill_with_canary_slack_unlocked) { fixed_fill_run(0, 48, 40); }
Test(mspace, fixed_fill_with_canary_slack_locked) { fixed_fill_run(1, 4096 + 16, 4096 + 8); }

/* Randomized use against a shadow model, mspace_check after every step. */
static void fixed_random_run(int locked, uint64_t seed)
{
  enum { SLOTS = 96, STEPS = 3000 };
  void *ptr[SLOTS] = { 0 };
  size_t len[SLOTS] = { 0 };
  uint32_t tag[SLOTS] = { 0 };
  fixed_t f;
  shadow_rng_t rng;
  shadow_rng_seed(&rng, seed);
  size_t nulls = 0;

  fixed_create(512 * KiB, 32, 24, locked, &f);
  for (int step = 0; step < STEPS; step++) {
    size_t i = shadow_rng_below(&rng, SLOTS);
    size_t op = shadow_rng_below(&rng, 10);
    size_t want = shadow_rng_below(&rng, 16) == 0 ? shadow_rng_below(&rng, 64 * KiB) : shadow_rng_below(&rng, 1500);
    char what[96];

    if (ptr[i] != NULL && op < 4) {          /* free */
      size_t bad = shadow_pattern_find_mismatch(ptr[i], len[i], tag[i]);
      cr_assert_eq(bad, SIZE_MAX, "step %d: block %zu (%p, %zu bytes) changed at byte %zu before free",
                   step, i, ptr[i], len[i], bad);
      PINHEAP_NAME(mspace_free)(f.msp, ptr[i]);
      ptr[i] = NULL;
      snprintf(what, sizeof(what), "step %d: mspace_free", step);
    } else if (ptr[i] != NULL && want == 0) { /* realloc(p, 0) frees, as glibc's */
      errno = 0;
      cr_assert_null(PINHEAP_NAME(mspace_realloc)(f.msp, ptr[i], 0), "step %d: mspace_realloc(p, 0)", step);
      cr_assert_eq(errno, 0, "step %d: mspace_realloc(p, 0) set errno %d", step, errno);
      ptr[i] = NULL;
      snprintf(what, sizeof(what), "step %d: mspace_realloc(0)", step);
    } else if (ptr[i] != NULL) {             /* realloc */
      errno = 0;
      void *q = PINHEAP_NAME(mspace_realloc)(f.msp, ptr[i], want);
      if (q == NULL) {
        cr_assert_eq(errno, ENOMEM, "step %d: mspace_realloc NULL with errno %d", step, errno);
        nulls++;
        cr_assert_eq(shadow_pattern_find_mismatch(ptr[i], len[i], tag[i]), SIZE_MAX,
                     "step %d: failed mspace_realloc changed the block", step);
      } else {
        size_t keep = len[i] < want ? len[i] : want;
        size_t bad = shadow_pattern_find_mismatch(q, keep, tag[i]);
        cr_assert_eq(bad, SIZE_MAX, "step %d: mspace_realloc %zu -> %zu lost byte %zu", step, len[i],
                     want, bad);
        ptr[i] = q;
        len[i] = want;
        tag[i] = (uint32_t)step;
        region_assert_contains(f.base, f.cap, q, PINHEAP_NAME(mspace_usable_size)(q), "mspace_realloc");
        shadow_pattern_fill(q, want, tag[i]);
      }
      snprintf(what, sizeof(what), "step %d: mspace_realloc(%zu)", step, want);
    } else {                                 /* malloc / calloc / memalign */
      void *p;
      size_t align = 0;
      errno = 0;
      if (op < 5) {
        p = PINHEAP_NAME(mspace_calloc)(f.msp, 1, want);
        if (p != NULL)
          cr_assert_eq(shadow_bytes_find_not(p, want, 0), SIZE_MAX, "step %d: mspace_calloc(%zu) not zeroed",
                       step, want);
      } else if (op < 7) {
        align = (size_t)32 << shadow_rng_below(&rng, 8);
        p = PINHEAP_NAME(mspace_memalign)(f.msp, align, want);
        if (p != NULL)
          cr_assert(ptr_is_aligned(p, align), "step %d: mspace_memalign(%zu) = %p", step, align, p);
      } else {
        p = PINHEAP_NAME(mspace_malloc)(f.msp, want);
      }
      if (p == NULL) {
        cr_assert_eq(errno, ENOMEM, "step %d: allocation of %zu NULL with errno %d", step, want, errno);
        nulls++;
      } else {
        cr_assert(ptr_is_aligned(p, 16), "step %d: %p not 16-aligned", step, p);
        region_assert_contains(f.base, f.cap, p, PINHEAP_NAME(mspace_usable_size)(p), "allocation");
        cr_assert_geq(PINHEAP_NAME(mspace_usable_size)(p), want, "step %d: usable %zu < %zu", step,
                      PINHEAP_NAME(mspace_usable_size)(p), want);
        ptr[i] = p;
        len[i] = want;
        tag[i] = (uint32_t)step;
        shadow_pattern_fill(p, want, tag[i]);
      }
      snprintf(what, sizeof(what), "step %d: allocation of %zu (align %zu)", step, want, align);
    }
    mspace_assert_sound(f.msp, what);
  }
  /* Whether the random steps ran the region out depends on where the
   * first chunk lands (the size of the heap's header in the region): fill
   * what is left with 64 KiB blocks, so running out is always tested. */
  void *fill[16];
  size_t nfill = 0;
  while (nfill < 16 && (fill[nfill] = PINHEAP_NAME(mspace_malloc)(f.msp, 64 * KiB)) != NULL)
    nfill++;
  if (nfill < 16) {
    cr_assert_eq(errno, ENOMEM, "filling the region: NULL with errno %d", errno);
    nulls++;
  }
  mspace_assert_sound(f.msp, "filling the region");
  while (nfill > 0)
    PINHEAP_NAME(mspace_free)(f.msp, fill[--nfill]);
  for (size_t i = 0; i < SLOTS; i++) {
    if (ptr[i] != NULL) {
      cr_assert_eq(shadow_pattern_find_mismatch(ptr[i], len[i], tag[i]), SIZE_MAX, "final: block %zu changed", i);
      PINHEAP_NAME(mspace_free)(f.msp, ptr[i]);
    }
  }
  mspace_assert_sound(f.msp, "freeing the random run's blocks");
  fixed_assert_untouched_outside(&f, "random run");
  cr_assert_gt(nulls, 0, "the random run never filled the region; it does not test running out");
  fixed_destroy(&f);
}

Test(mspace, fixed_random_unlocked) { fixed_random_run(0, 0x1234567ULL); }
Test(mspace, fixed_random_locked) { fixed_random_run(1, 0x7654321ULL); }

Test(mspace, fixed_too_small_is_einval)
{
  static const size_t caps[] = { 0, 1, 8, 16, 64 };
  region_t r;

  region_map(64 * KiB, &r);
  for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
    for (int locked = 0; locked < 2; locked++) {
      uint8_t *base = r.rw + 4096;
      errno = 0;
      pinheap_mspace m = PINHEAP_NAME(create_mspace_with_base)(base, caps[i], locked);
      int err = errno;
      cr_assert_null(m, "create_mspace_with_base(%p, %zu, %d) returned %p for a too-small region",
                     (void *)base, caps[i], locked, m);
      cr_assert_eq(err, EINVAL, "create_mspace_with_base(cap %zu): errno %d, expected EINVAL", caps[i], err);
      region_assert_canaries(&r, base, caps[i], "a rejected too-small region");
    }
  }
  errno = 0;
  pinheap_mspace m = PINHEAP_NAME(create_mspace_with_base)(NULL, 1 * MiB, 0);
  int err = errno;
  cr_assert_null(m, "create_mspace_with_base(NULL, 1 MiB) returned %p", m);
  cr_assert_eq(err, EINVAL, "create_mspace_with_base(NULL, 1 MiB): errno %d, expected EINVAL", err);
  region_unmap(&r);
}

/*
 * Around the smallest capacity that works: each capacity either gives
 * NULL/EINVAL or a heap that serves what fits and then says ENOMEM, and
 * never writes a byte past its capacity.
 */
Test(mspace, fixed_capacities_near_the_minimum)
{
  region_t r;
  size_t min_ok = 0;

  region_map(128 * KiB, &r);
  for (size_t cap = 64; cap <= 64 * KiB; cap *= 2) {
    memset(r.rw, REGION_CANARY, r.rw_len);
    pinheap_mspace m = PINHEAP_NAME(create_mspace_with_base)(r.rw + 64, cap, 0);
    if (m != NULL) {
      min_ok = cap;
      PINHEAP_NAME(destroy_mspace)(m);
      break;
    }
  }
  cr_assert_neq(min_ok, 0, "no capacity up to 64 KiB is accepted by create_mspace_with_base");
  /* the least capacity accepted, to 8 bytes */
  size_t least = min_ok;
  for (size_t cap = min_ok / 2 > 64 ? min_ok / 2 : 64; cap < min_ok; cap += 8) {
    pinheap_mspace m = PINHEAP_NAME(create_mspace_with_base)(r.rw + 64, cap, 0);
    if (m != NULL) {
      least = cap;
      PINHEAP_NAME(destroy_mspace)(m);
      break;
    }
  }
  size_t lo = least > 1024 ? least - 1024 : 64;
  for (size_t cap = lo; cap <= least + 1024; cap += 8) {
    uint8_t *base = r.rw + 64;
    memset(r.rw, REGION_CANARY, r.rw_len);
    listener_install();
    errno = 0;
    pinheap_mspace m = PINHEAP_NAME(create_mspace_with_base)(base, cap, 0);
    if (m == NULL) {
      cr_assert_eq(errno, EINVAL, "create_mspace_with_base(cap %zu) NULL with errno %d", cap, errno);
    } else {
      size_t got = 0;
      for (int i = 0; i < 200; i++) {
        errno = 0;
        void *p = PINHEAP_NAME(mspace_malloc)(m, (size_t)(i % 3) * 24);
        if (p == NULL) {
          cr_assert_eq(errno, ENOMEM, "cap %zu: mspace_malloc NULL with errno %d", cap, errno);
          break;
        }
        region_assert_contains(base, cap, p, PINHEAP_NAME(mspace_usable_size)(p), "near-minimum region");
        memset(p, 0x77, PINHEAP_NAME(mspace_usable_size)(p));
        got++;
      }
      cr_assert_lt(got, 200, "cap %zu: 200 blocks from a near-minimum region", cap);
      mspace_assert_sound(m, "a near-minimum region");
      PINHEAP_NAME(destroy_mspace)(m);
    }
    region_assert_canaries(&r, base, cap, "a near-minimum region");
    cr_assert_eq(listener_calls_get(), 0, "cap %zu: a fixed region released memory", cap);
  }
  region_unmap(&r);
}

/* A base that is not 16-aligned: either EINVAL, or a heap whose blocks are
 * 16-aligned and inside [base, base+capacity). */
Test(mspace, fixed_unaligned_base)
{
  static const size_t offsets[] = { 1, 3, 8, 12 };
  enum { MAX = 1 << 14 };
  static void *ptrs[MAX];
  static size_t lens[MAX];

  for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
    fixed_t f;
    region_map(256 * KiB, &f.region);
    f.base = f.region.rw + 4096 + offsets[i];
    f.cap = 200 * KiB + offsets[i];
    listener_install();
    f.os_start = os_stats_read();
    errno = 0;
    f.msp = PINHEAP_NAME(create_mspace_with_base)(f.base, f.cap, (int)(i & 1));
    if (f.msp == NULL) {
      cr_assert_eq(errno, EINVAL, "create_mspace_with_base(base %% 16 = %zu) NULL with errno %d, "
                   "expected EINVAL", offsets[i], errno);
      region_assert_canaries(&f.region, f.base, f.cap, "a rejected unaligned region");
      region_unmap(&f.region);
      continue;
    }
    size_t n = fixed_fill(&f, 0, ptrs, lens, MAX);
    cr_assert_gt(n, 0, "an unaligned region accepted but no block allocated");
    mspace_assert_sound(f.msp, "filling an unaligned region");
    fixed_free_all(&f, ptrs, n, 3);
    mspace_assert_sound(f.msp, "emptying an unaligned region");
    fixed_assert_untouched_outside(&f, "an unaligned region");
    fixed_destroy(&f);
  }
}

Test(mspace, fixed_trim_touches_nothing)
{
  enum { MAX = 1 << 14 };
  static void *ptrs[MAX];
  static size_t lens[MAX];
  fixed_t f;

  fixed_create(1 * MiB, 16, 16, 0, &f);
  size_t n = fixed_fill(&f, 0, ptrs, lens, MAX);
  /* Trim with blocks in use, then with everything free. */
  int rc = PINHEAP_NAME(mspace_trim)(f.msp, 0);
  cr_assert_eq(rc, 0, "mspace_trim on a full fixed region returned %d", rc);
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(shadow_pattern_find_mismatch(ptrs[i], lens[i], (uint32_t)i), SIZE_MAX,
                 "mspace_trim changed block %zu", i);
  fixed_free_all(&f, ptrs, n, 5);
  rc = PINHEAP_NAME(mspace_trim)(f.msp, 0);
  cr_assert_eq(rc, 0, "mspace_trim on an emptied fixed region returned %d; it never releases", rc);
  fixed_assert_untouched_outside(&f, "mspace_trim");
  mspace_assert_sound(f.msp, "mspace_trim");
  size_t n2 = fixed_fill(&f, 0, ptrs, lens, MAX);
  cr_assert_eq(n2, n, "after mspace_trim the region holds %zu blocks instead of %zu", n2, n);
  fixed_free_all(&f, ptrs, n2, 6);
  fixed_destroy(&f);
}

typedef struct churn_arg_s {
  pinheap_mspace msp;
  uint32_t seed;
  uint8_t *base;
  size_t cap;
} churn_arg_t;

static void *fixed_churn(void *arg)
{
  churn_arg_t *a = arg;
  shadow_rng_t rng;
  shadow_rng_seed(&rng, 0x9E3779B97F4A7C15ULL ^ a->seed);
  void *slots[32] = { 0 };
  size_t sizes[32] = { 0 };

  for (int step = 0; step < 20000; step++) {
    size_t i = shadow_rng_below(&rng, 32);
    if (slots[i] != NULL) {
      if (shadow_pattern_find_mismatch(slots[i], sizes[i], a->seed + (uint32_t)i) != SIZE_MAX)
        return (void *)1;
      PINHEAP_NAME(mspace_free)(a->msp, slots[i]);
      slots[i] = NULL;
    } else {
      sizes[i] = shadow_rng_below(&rng, 2000);
      slots[i] = PINHEAP_NAME(mspace_malloc)(a->msp, sizes[i]);
      if (slots[i] == NULL)
        continue;  /* full: fine */
      if ((uint8_t *)slots[i] < a->base || (uint8_t *)slots[i] + sizes[i] > a->base + a->cap)
        return (void *)2;
      shadow_pattern_fill(slots[i], sizes[i], a->seed + (uint32_t)i);
    }
  }
  for (int i = 0; i < 32; i++)
    PINHEAP_NAME(mspace_free)(a->msp, slots[i]);
  return NULL;
}

Test(mspace, fixed_locked_shared_by_two_threads)
{
  fixed_t f;
  pthread_t t[2];
  churn_arg_t args[2];

  fixed_create(256 * KiB, 16, 16, 1, &f);
  for (int i = 0; i < 2; i++) {
    args[i] = (churn_arg_t){ f.msp, (uint32_t)(i + 1) * 7919, f.base, f.cap };
    cr_assert_eq(pthread_create(&t[i], NULL, fixed_churn, &args[i]), 0, "pthread_create failed");
  }
  for (int i = 0; i < 2; i++) {
    void *r;
    pthread_join(t[i], &r);
    cr_assert_null(r, "thread %d: %s", i,
                   r == (void *)1 ? "a block was changed by the other thread" : "a block outside the region");
  }
  mspace_assert_sound(f.msp, "two threads on a locked fixed region");
  struct mallinfo2 mi = PINHEAP_NAME(mspace_mallinfo)(f.msp);
  cr_assert_eq(mi.hblks, 0, "a fixed region has %zu mapped chunks", mi.hblks);
  fixed_assert_untouched_outside(&f, "two threads");
  fixed_destroy(&f);
}
