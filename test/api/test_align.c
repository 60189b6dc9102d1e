/*
 * test_align.c -- the alignment sweep: memalign, posix_memalign and
 * aligned_alloc for every power-of-two alignment up to 1 MiB and sizes from
 * 0 to a few MiB (results aligned, usable >= size, writable without
 * touching a neighbour, freeable, heap sound after each batch); glibc's
 * rounding of non-power-of-two memalign alignments; the EINVAL cases of
 * posix_memalign and aligned_alloc; 16-byte alignment of plain malloc;
 * valloc and pvalloc page alignment.  Main entry point: the Criterion
 * runner (suite "align").
 */
#include "test_util.h"

static const size_t align_sizes[] = {
  0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257,
  1000, 4095, 4096, 4097, 10000, 65535, 65536, 65537, 131071, 131072, 131073,
  262145, 1 * MiB, 1 * MiB + 1, 3 * MiB + 7,
};
#define ALIGN_NSIZES (sizeof(align_sizes) / sizeof(align_sizes[0]))

typedef enum align_fn_e { FN_MEMALIGN, FN_POSIX_MEMALIGN, FN_ALIGNED_ALLOC } align_fn_t;

static const char *const align_fn_names[] = { "memalign", "posix_memalign", "aligned_alloc" };

static void *align_call(align_fn_t fn, size_t align, size_t size)
{
  void *p = NULL;
  int rc;

  switch (fn) {
  case FN_MEMALIGN:
    return PINHEAP_NAME(memalign)(align, size);
  case FN_ALIGNED_ALLOC:
    return PINHEAP_NAME(aligned_alloc)(align, size);
  case FN_POSIX_MEMALIGN:
    p = (void *)0x1;
    rc = PINHEAP_NAME(posix_memalign)(&p, align, size);
    cr_assert_eq(rc, 0, "posix_memalign(&p, %zu, %zu) = %d (%s), expected 0", align, size, rc,
                 strerror(rc));
    return p;
  }
  return NULL;
}

/*
 * One batch: every size at one alignment, all live at once.  Each block is
 * filled to its full usable size with its own pattern, then every pattern
 * is checked (an overlap or a too-generous usable size shows up as a
 * changed byte), then the heap is checked, freed, checked again.
 * expect_align is the alignment the result must have.
 */
static void align_batch_run(align_fn_t fn, size_t align, size_t expect_align)
{
  void *ptrs[ALIGN_NSIZES];
  size_t usable[ALIGN_NSIZES];
  const char *name = align_fn_names[fn];
  char what[96];

  for (size_t i = 0; i < ALIGN_NSIZES; i++) {
    size_t n = align_sizes[i];
    void *p = align_call(fn, align, n);
    cr_assert_not_null(p, "%s(%zu, %zu) returned NULL (errno %d)", name, align, n, errno);
    cr_assert(ptr_is_aligned(p, expect_align), "%s(%zu, %zu) = %p is not %zu-aligned", name, align, n,
              p, expect_align);
    cr_assert(ptr_is_aligned(p, 16), "%s(%zu, %zu) = %p is not 16-aligned", name, align, n, p);
    usable[i] = PINHEAP_NAME(malloc_usable_size)(p);
    cr_assert_geq(usable[i], n, "malloc_usable_size(%s(%zu, %zu)) = %zu < %zu", name, align, n,
                  usable[i], n);
    shadow_pattern_fill(p, usable[i], (uint32_t)(i * 31 + align));
    ptrs[i] = p;
  }
  for (size_t i = 0; i < ALIGN_NSIZES; i++) {
    size_t bad = shadow_pattern_find_mismatch(ptrs[i], usable[i], (uint32_t)(i * 31 + align));
    cr_assert_eq(bad, SIZE_MAX, "%s(%zu, %zu): byte %zu of %zu usable was overwritten by another block",
                 name, align, align_sizes[i], bad, usable[i]);
  }
  snprintf(what, sizeof(what), "a batch of %s(%zu, ...)", name, align);
  heap_assert_sound(what);
  for (size_t i = 0; i < ALIGN_NSIZES; i++)
    PINHEAP_NAME(free)(ptrs[i]);
  snprintf(what, sizeof(what), "freeing a batch of %s(%zu, ...)", name, align);
  heap_assert_sound(what);
}

Test(align, memalign_powers_of_two)
{
  for (size_t a = 1; a <= 1 * MiB; a <<= 1)
    align_batch_run(FN_MEMALIGN, a, a);
}

Test(align, posix_memalign_powers_of_two)
{
  for (size_t a = sizeof(void *); a <= 1 * MiB; a <<= 1)
    align_batch_run(FN_POSIX_MEMALIGN, a, a);
}

Test(align, aligned_alloc_powers_of_two)
{
  for (size_t a = 1; a <= 1 * MiB; a <<= 1)
    align_batch_run(FN_ALIGNED_ALLOC, a, a);
}

Test(align, memalign_rounds_non_powers_up)
{
  static const size_t odd[] = { 3, 5, 12, 17, 24, 33, 48, 100, 1000, 3000, 4097, 65535, 100000, 1000000 };
  for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
    align_batch_run(FN_MEMALIGN, odd[i], size_next_pow2(odd[i]));
  /* glibc: an alignment up to 16 is plain malloc, 0 included. */
  align_batch_run(FN_MEMALIGN, 0, 16);
}

Test(align, memalign_impossible_alignments)
{
  static const size_t einval[] = { SIZE_MAX / 2 + 2, SIZE_MAX - 1, SIZE_MAX };
  for (size_t i = 0; i < sizeof(einval) / sizeof(einval[0]); i++) {
    errno = 0;
    void *p = PINHEAP_NAME(memalign)(size_opaque(einval[i]), 1);
    int err = errno;
    cr_assert_null(p, "memalign(%zu, 1) returned %p, expected NULL", einval[i], p);
    cr_assert_eq(err, EINVAL, "memalign(%zu, 1): errno %d, expected EINVAL (glibc: alignment > "
                 "SIZE_MAX/2+1)", einval[i], err);
  }
  errno = 0;
  void *p = PINHEAP_NAME(memalign)(size_opaque(SIZE_MAX / 2 + 1), 1);
  int err = errno;
  cr_assert_null(p, "memalign(2^63, 1) returned %p", p);
  cr_assert_eq(err, ENOMEM, "memalign(2^63, 1): errno %d, expected ENOMEM", err);
  heap_assert_sound("impossible memalign");
}

Test(align, aligned_alloc_rejects_non_powers)
{
  static const size_t bad[] = { 3, 5, 12, 24, 48, 100, 4097, 65535, SIZE_MAX };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    errno = 0;
    void *p = PINHEAP_NAME(aligned_alloc)(size_opaque(bad[i]), 64);
    int err = errno;
    cr_assert_null(p, "aligned_alloc(%zu, 64) returned %p; a non-power-of-two alignment must fail",
                   bad[i], p);
    cr_assert_eq(err, EINVAL, "aligned_alloc(%zu, 64): errno %d, expected EINVAL", bad[i], err);
  }
  heap_assert_sound("rejected aligned_alloc");
}

Test(align, posix_memalign_einval_leaves_out_untouched)
{
  static const size_t bad[] = { 0, 1, 2, 3, 4, 6, 12, 24, 40, 48, 4097, 65535,
                                SIZE_MAX / 2 + 2, SIZE_MAX };
  void *const sentinel = (void *)(uintptr_t)0xDEADBEEF0BADF00DULL;

  struct mallinfo2 before = PINHEAP_NAME(mallinfo2)();
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    void *out = sentinel;
    errno = 777;
    int rc = PINHEAP_NAME(posix_memalign)(&out, size_opaque(bad[i]), 64);
    cr_assert_eq(rc, EINVAL, "posix_memalign(&p, %zu, 64) = %d, expected EINVAL (%d)", bad[i], rc, EINVAL);
    cr_assert_eq(out, sentinel, "posix_memalign(&p, %zu, 64) failed but changed *memptr to %p", bad[i], out);
    cr_assert_eq(errno, 777, "posix_memalign(&p, %zu, 64) changed errno to %d (it reports by return value)",
                 bad[i], errno);
  }
  /* Valid alignment, impossible size: ENOMEM, still untouched. */
  void *out = sentinel;
  int rc = PINHEAP_NAME(posix_memalign)(&out, 64, size_opaque(SIZE_MAX - 100));
  cr_assert_eq(rc, ENOMEM, "posix_memalign(&p, 64, SIZE_MAX - 100) = %d, expected ENOMEM", rc);
  cr_assert_eq(out, sentinel, "posix_memalign failing with ENOMEM changed *memptr to %p", out);
  rc = PINHEAP_NAME(posix_memalign)(&out, size_opaque(SIZE_MAX / 2 + 1), 1);
  cr_assert_eq(rc, ENOMEM, "posix_memalign(&p, 2^63, 1) = %d, expected ENOMEM", rc);
  cr_assert_eq(out, sentinel, "posix_memalign(&p, 2^63, 1) changed *memptr to %p", out);

  struct mallinfo2 after = PINHEAP_NAME(mallinfo2)();
  cr_assert_eq(after.uordblks, before.uordblks, "failed posix_memalign calls changed uordblks %zu -> %zu",
               before.uordblks, after.uordblks);
  cr_assert_eq(after.hblks, before.hblks, "failed posix_memalign calls left mapped chunks (%zu -> %zu)",
               before.hblks, after.hblks);

  /* Size 0 is valid: a unique pointer. */
  void *z1 = sentinel, *z2 = sentinel;
  cr_assert_eq(PINHEAP_NAME(posix_memalign)(&z1, 32, 0), 0, "posix_memalign(&p, 32, 0) failed");
  cr_assert_eq(PINHEAP_NAME(posix_memalign)(&z2, 32, 0), 0, "posix_memalign(&p, 32, 0) failed");
  cr_assert(z1 != sentinel && z1 != NULL && z2 != NULL && z1 != z2,
            "posix_memalign(&p, 32, 0) results not unique: %p %p", z1, z2);
  cr_assert(ptr_is_aligned(z1, 32) && ptr_is_aligned(z2, 32), "posix_memalign(32, 0) not 32-aligned");
  PINHEAP_NAME(free)(z1);
  PINHEAP_NAME(free)(z2);
  heap_assert_sound("posix_memalign errors");
}

Test(align, malloc_results_are_16_aligned)
{
  enum { N = 4097 };
  static void *ptrs[N];

  for (size_t n = 0; n < N; n++) {
    ptrs[n] = PINHEAP_NAME(malloc)(n);
    cr_assert_not_null(ptrs[n], "malloc(%zu) returned NULL", n);
    cr_assert(ptr_is_aligned(ptrs[n], 16), "malloc(%zu) = %p is not 16-aligned", n, ptrs[n]);
  }
  /* Free every other one, then allocate again from the holes. */
  for (size_t n = 0; n < N; n += 2)
    PINHEAP_NAME(free)(ptrs[n]);
  for (size_t n = 0; n < N; n += 2) {
    ptrs[n] = PINHEAP_NAME(malloc)(N - 1 - n);
    cr_assert_not_null(ptrs[n], "malloc(%zu) returned NULL", N - 1 - n);
    cr_assert(ptr_is_aligned(ptrs[n], 16), "malloc(%zu) from a hole = %p is not 16-aligned", N - 1 - n,
              ptrs[n]);
  }
  heap_assert_sound("4097 small mallocs");
  for (size_t n = 0; n < N; n++)
    PINHEAP_NAME(free)(ptrs[n]);

  static const size_t big[] = { 100 * KiB, 128 * KiB, 128 * KiB + 1, 200 * KiB, 1 * MiB + 3, 8 * MiB };
  for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
    void *p = PINHEAP_NAME(malloc)(big[i]);
    cr_assert_not_null(p, "malloc(%zu) returned NULL", big[i]);
    cr_assert(ptr_is_aligned(p, 16), "malloc(%zu) = %p is not 16-aligned", big[i], p);
    void *c = PINHEAP_NAME(calloc)(1, big[i]);
    cr_assert(c != NULL && ptr_is_aligned(c, 16), "calloc(1, %zu) = %p is not 16-aligned", big[i], c);
    void *r = PINHEAP_NAME(realloc)(p, big[i] + 4097);
    cr_assert(r != NULL && ptr_is_aligned(r, 16), "realloc(p, %zu) = %p is not 16-aligned", big[i] + 4097, r);
    PINHEAP_NAME(free)(r);
    PINHEAP_NAME(free)(c);
  }
  heap_assert_sound("large mallocs");
}

Test(align, valloc_and_pvalloc_are_page_aligned)
{
  static const size_t sizes[] = { 0, 1, 100, 4095, 4096, 4097, 100 * KiB, 1 * MiB, 1 * MiB + 1 };
  size_t page = page_size_get();
  void *ptrs[2 * (sizeof(sizes) / sizeof(sizes[0]))];
  size_t lens[2 * (sizeof(sizes) / sizeof(sizes[0]))];
  size_t k = 0;

  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = sizes[i];
    void *v = PINHEAP_NAME(valloc)(n);
    cr_assert_not_null(v, "valloc(%zu) returned NULL", n);
    cr_assert(ptr_is_aligned(v, page), "valloc(%zu) = %p is not page (%zu) aligned", n, v, page);
    lens[k] = PINHEAP_NAME(malloc_usable_size)(v);
    cr_assert_geq(lens[k], n, "usable size of valloc(%zu) is %zu", n, lens[k]);
    ptrs[k++] = v;

    size_t rounded = n == 0 ? page : (n + page - 1) & ~(page - 1);
    void *pv = PINHEAP_NAME(pvalloc)(n);
    cr_assert_not_null(pv, "pvalloc(%zu) returned NULL", n);
    cr_assert(ptr_is_aligned(pv, page), "pvalloc(%zu) = %p is not page aligned", n, pv);
    lens[k] = PINHEAP_NAME(malloc_usable_size)(pv);
    cr_assert_geq(lens[k], rounded, "usable size of pvalloc(%zu) is %zu, expected at least the "
                  "page-rounded %zu", n, lens[k], rounded);
    ptrs[k++] = pv;
  }
  for (size_t i = 0; i < k; i++)
    shadow_pattern_fill(ptrs[i], lens[i], (uint32_t)i + 40);
  for (size_t i = 0; i < k; i++)
    cr_assert_eq(shadow_pattern_find_mismatch(ptrs[i], lens[i], (uint32_t)i + 40), SIZE_MAX,
                 "valloc/pvalloc block #%zu (usable %zu) was overwritten by another", i, lens[i]);
  heap_assert_sound("valloc/pvalloc");
  for (size_t i = 0; i < k; i++)
    PINHEAP_NAME(free)(ptrs[i]);
  heap_assert_sound("freeing valloc/pvalloc blocks");
}

Test(align, realloc_of_aligned_blocks_keeps_content)
{
  static const size_t aligns[] = { 32, 64, 256, 4096, 65536 };
  for (size_t i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
    void *before = PINHEAP_NAME(malloc)(64);
    void *p = PINHEAP_NAME(memalign)(aligns[i], 1000);
    void *after = PINHEAP_NAME(malloc)(64);
    cr_assert(before && p && after, "setup for alignment %zu failed", aligns[i]);
    shadow_pattern_fill(before, 64, 1);
    shadow_pattern_fill(p, 1000, 2);
    shadow_pattern_fill(after, 64, 3);
    p = PINHEAP_NAME(realloc)(p, 5000);
    cr_assert_not_null(p, "realloc(memalign(%zu, 1000), 5000) returned NULL", aligns[i]);
    cr_assert_eq(shadow_pattern_find_mismatch(p, 1000, 2), SIZE_MAX, "growing a %zu-aligned block lost content",
                 aligns[i]);
    p = PINHEAP_NAME(realloc)(p, 100);
    cr_assert_not_null(p, "realloc(p, 100) returned NULL");
    cr_assert_eq(shadow_pattern_find_mismatch(p, 100, 2), SIZE_MAX, "shrinking a %zu-aligned block lost content",
                 aligns[i]);
    cr_assert_eq(shadow_pattern_find_mismatch(before, 64, 1), SIZE_MAX, "block before a %zu-aligned block damaged",
                 aligns[i]);
    cr_assert_eq(shadow_pattern_find_mismatch(after, 64, 3), SIZE_MAX, "block after a %zu-aligned block damaged",
                 aligns[i]);
    heap_assert_sound("realloc of an aligned block");
    PINHEAP_NAME(free)(p);
    PINHEAP_NAME(free)(before);
    PINHEAP_NAME(free)(after);
  }
  heap_assert_sound("freeing reallocated aligned blocks");
}
