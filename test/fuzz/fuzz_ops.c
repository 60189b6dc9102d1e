/*
 * fuzz_ops.c -- libFuzzer harness: the input is a sequence of operations over
 * pinheap's prefixed allocator API and over mspaces (growing ones and ones
 * over a caller's fixed region), checked against the shadow model of
 * test/lib/shadow.h.  Main entry point: LLVMFuzzerTestOneInput().
 *
 * Encoding (see README.md beside this file; make_corpus.py writes seeds):
 *   every operation starts with one byte: low 5 bits the operation
 *   (fuzz_op_t, modulo OP_COUNT), high 3 bits the heap slot (0-3: the
 *   global heap, 4-7: mspace slots 1-4; an empty slot falls back to the
 *   global heap).  The operation's arguments follow (sizes, alignments,
 *   block picks), each read by in_*(); a short input reads as zeros.
 *
 * After every step: the touched heap's checker (malloc_check() or
 * mspace_check()) must return 0, one sampled block of that heap must still
 * hold its pattern, and a fixed region's guard bytes must be intact.  Every
 * block is checked before it is freed or reallocated.  Failed allocations
 * must return NULL with errno ENOMEM (EINVAL for a bad alignment) and leave
 * everything else as it was.  At the end of each input every block is freed,
 * every mspace destroyed and the mallopt values restored, so that inputs do
 * not leak state into each other (the heap's shape may still differ).
 *
 * Environment:
 *   PINHEAP_FUZZ_CHECK_EVERY=N  run the heap checker every N steps (default 1)
 *   PINHEAP_FUZZ_TRACE=1        print each operation to stderr (to read a
 *                               crash input as an operation list)
 *   PINHEAP_FUZZ_ABSURD=0       never request absurd sizes (beyond RAM+swap
 *                               or PTRDIFF_MAX), alignments (1 GiB and
 *                               up, 0) or trim pads (near SIZE_MAX);
 *                               default 1
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "pinheap.h"
#include "shadow.h"

#define FZ_SLOTS        5                       /* 0 = global, 1..4 mspaces */
#define FZ_MAX_LIVE     512                     /* blocks per heap */
#define FZ_BUDGET       ((size_t)96 << 20)      /* live bytes, all heaps */
#define FZ_REGION       ((size_t)4 << 20)       /* a fixed region's buffer */
#define FZ_REGIONS      2
#define FZ_CANARY       0xa5
#define FZ_JUNK         0xcc
#define FZ_GUARD_CHECK  4096                    /* bytes checked after a region */

typedef enum fuzz_op_e {
  OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_REALLOC_NULL, OP_REALLOCARRAY, OP_MEMALIGN,
  OP_POSIX_MEMALIGN, OP_ALIGNED_ALLOC, OP_VALLOC, OP_PVALLOC, OP_FREE, OP_FREE2,
  OP_USABLE, OP_VERIFY, OP_TRIM, OP_MALLOPT, OP_MALLINFO, OP_CREATE, OP_CREATE_FIXED,
  OP_DESTROY, OP_FREE_ALL, OP_REALLOC_NEAR, OP_COUNT
} fuzz_op_t;

static const char *const op_names[OP_COUNT] = {
  "malloc", "calloc", "realloc", "realloc_null", "reallocarray", "memalign",
  "posix_memalign", "aligned_alloc", "valloc", "pvalloc", "free", "free",
  "usable_size", "verify", "trim", "mallopt", "mallinfo", "create_mspace",
  "create_mspace_with_base", "destroy_mspace", "free_all", "realloc_near"
};

/* ---- the input ---------------------------------------------------------- */

typedef struct in_s {
  const uint8_t *p;
  size_t n;
} in_t;

static uint8_t in_u8(in_t *in)
{
  if (in->n == 0)
    return 0;
  in->n--;
  return *in->p++;
}

static uint32_t in_u32(in_t *in)
{
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v = v << 8 | in_u8(in);
  return v;
}

/* ---- state -------------------------------------------------------------- */

typedef struct region_s {
  unsigned char *map;      /* guard page | data | guard page */
  unsigned char *data;
  size_t map_len;
  int used_by;             /* slot, or -1 */
} region_t;

typedef struct slot_s {
  bool used;
  shadow_heap_t heap;      /* msp NULL for the global heap */
  shadow_set_t live;
  region_t *region;        /* FIXED */
  unsigned char *base;     /* FIXED: what the caller passed */
  size_t cap;
} slot_t;

typedef struct fz_s {
  slot_t slot[FZ_SLOTS];
  region_t region[FZ_REGIONS];
  size_t page;
  size_t absurd_over;      /* requests above this must fail */
  size_t check_every;
  bool trace, absurd;
  /* per input */
  size_t step;
  uint64_t next_id;
  size_t live_total;
  fuzz_op_t op;
  char detail[200];
} fz_t;

static fz_t fz;

static void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fz_fail(const char *fmt, ...)
{
  va_list ap;

  fprintf(stderr, "fuzz_ops: FAILED at step %zu, op %s [%s]: ", fz.step, op_names[fz.op],
          fz.detail);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(rerun this input with PINHEAP_FUZZ_TRACE=1 to see every step)\n");
  abort();
}

#define FZ_ASSERT(cond, ...) do { if (!(cond)) fz_fail(__VA_ARGS__); } while (0)

/* ---- sizes and alignments ----------------------------------------------- */

static const size_t edge_sizes[] = {
  0, 1, 7, 8, 15, 16, 17, 24, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256, 511, 512,
  1000, 1023, 1024, 2016, 2032, 2033, 2048, 4095, 4096, 4097, 8192, 65535, 65536,
  131071, 131072, 131073, 262144, 1048576, 4194304, (size_t)16 << 20, (size_t)32 << 20,
  ((size_t)32 << 20) + 1,
};

static const size_t absurd_sizes[] = {
  (size_t)1 << 40, (size_t)4 << 40, (size_t)1 << 47, (size_t)1 << 53, ((size_t)1 << 53) + 4096,
  (size_t)1 << 62, PTRDIFF_MAX, (size_t)PTRDIFF_MAX + 1, SIZE_MAX - 4095, SIZE_MAX - 15,
  SIZE_MAX,
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static size_t in_size(in_t *in)
{
  uint8_t sel = in_u8(in);

  switch (sel & 7) {
  case 0: case 1: case 2:
    return in_u8(in) % 65;                               /* tiny */
  case 3: case 4:
    return in_u32(in) % 1024;                            /* small */
  case 5:
    return 1024 + in_u32(in) % (128 * 1024);             /* medium */
  case 6:
    return 64 * 1024 + in_u32(in) % (4 * 1024 * 1024);   /* large */
  default:
    if ((sel & 0x80) && fz.absurd)
      return absurd_sizes[((sel >> 3) & 15) % COUNT_OF(absurd_sizes)];
    return edge_sizes[in_u8(in) % COUNT_OF(edge_sizes)];
  }
}

static bool size_is_absurd(size_t n)
{
  return n > fz.absurd_over;
}

/* Plausible but beyond the test's budget: not requested at all. */
static bool size_over_budget(size_t n)
{
  return !size_is_absurd(n) && (n > FZ_BUDGET || fz.live_total + n > FZ_BUDGET);
}

static const size_t absurd_aligns[] = {
  0, (size_t)1 << 30, (size_t)1 << 40, (size_t)1 << 62, (size_t)1 << 63, SIZE_MAX,
  ((size_t)1 << 62) + 1, 3,
};

static size_t in_align(in_t *in)
{
  uint8_t a = in_u8(in);

  if (a < 200)
    return (size_t)1 << (a % 21);                      /* 1 .. 1 MiB */
  if (a < 230 || !fz.absurd)
    return ((size_t)3 << (a % 14)) + ((a & 1) ? 0 : 8); /* not powers of two */
  return absurd_aligns[a % COUNT_OF(absurd_aligns)];
}

static bool is_pow2(size_t a)
{
  return a != 0 && (a & (a - 1)) == 0;
}

/* The alignment glibc gives for memalign(a, ...): at least 16, a rounded up. */
static size_t memalign_effective(size_t a)
{
  if (a <= 16)
    return 16;
  if (!is_pow2(a))
    return (size_t)1 << (64 - __builtin_clzll(a));
  return a;
}

/* ---- the model ---------------------------------------------------------- */

static slot_t *slot_of(uint8_t opbyte)
{
  unsigned hs = opbyte >> 5;
  slot_t *s = &fz.slot[hs < 4 ? 0 : hs - 3];
  return s->used ? s : &fz.slot[0];
}

static void verify_block(const slot_t *s, const shadow_block_t *b, const char *when)
{
  size_t bad = shadow_pattern_find_mismatch(b->ptr, b->usable, b->id);
  FZ_ASSERT(bad == SIZE_MAX,
            "%s: heap %s block %p (id %" PRIu64 ", request %zu, usable %zu) was overwritten "
            "at offset %zu", when, s->heap.name, (void *)b->ptr, b->id, b->req, b->usable, bad);
}

static void verify_guards(const slot_t *s)
{
  const region_t *r = s->region;
  const unsigned char *end, *stop;

  if (r == NULL)
    return;
  for (const unsigned char *g = r->data; g < s->base; g++)
    FZ_ASSERT(*g == FZ_CANARY, "fixed heap %s wrote %zu bytes below its region base %p",
              s->heap.name, (size_t)(s->base - g), (void *)s->base);
  end = s->base + s->cap;
  stop = r->data + FZ_REGION;
  if ((size_t)(stop - end) > FZ_GUARD_CHECK)
    stop = end + FZ_GUARD_CHECK;
  for (const unsigned char *g = end; g < stop; g++)
    FZ_ASSERT(*g == FZ_CANARY, "fixed heap %s wrote %zu bytes past its region end %p",
              s->heap.name, (size_t)(g - end), (void *)end);
}

static void check_heap(const slot_t *s)
{
  int problems = shadow_heap_check(&s->heap);
  FZ_ASSERT(problems == 0, "the heap checker found %d problem(s) in heap %s (see stderr)",
            problems, s->heap.name);
  verify_guards(s);
}

static void check_mallinfo(const slot_t *s)
{
  struct mallinfo2 mi = shadow_heap_mallinfo(&s->heap);

  FZ_ASSERT(mi.uordblks + mi.hblkhd >= s->live.live_bytes,
            "mallinfo of %s counts %zu bytes in use (uordblks %zu + hblkhd %zu) but the model "
            "holds %zu usable bytes", s->heap.name, mi.uordblks + mi.hblkhd, mi.uordblks,
            mi.hblkhd, s->live.live_bytes);
  FZ_ASSERT(mi.uordblks + mi.fordblks <= mi.arena,
            "mallinfo of %s: uordblks %zu + fordblks %zu exceed arena %zu", s->heap.name,
            mi.uordblks, mi.fordblks, mi.arena);
  FZ_ASSERT(mi.keepcost <= mi.fordblks, "mallinfo of %s: keepcost %zu exceeds fordblks %zu",
            s->heap.name, mi.keepcost, mi.fordblks);
  FZ_ASSERT((mi.hblks == 0) == (mi.hblkhd == 0), "mallinfo of %s: hblks %zu but hblkhd %zu",
            s->heap.name, mi.hblks, mi.hblkhd);
  if (s->heap.kind == SHADOW_HEAP_FIXED)
    FZ_ASSERT(mi.hblks == 0 && mi.arena <= s->cap,
              "mallinfo of fixed heap %s: hblks %zu, arena %zu, region %zu bytes",
              s->heap.name, mi.hblks, mi.arena, s->cap);
}

/* NULL from an allocation of n bytes: only a full fixed heap or an absurd
 * request may fail, and only with ENOMEM (or EINVAL where allowed). */
static void accept_null(const slot_t *s, size_t n, int err, bool einval_ok)
{
  FZ_ASSERT(err == ENOMEM || (einval_ok && err == EINVAL),
            "a failed allocation of %zu bytes on heap %s set errno %d (%s), expected ENOMEM",
            n, s->heap.name, err, strerror(err));
  FZ_ASSERT(s->heap.kind == SHADOW_HEAP_FIXED || size_is_absurd(n) || einval_ok,
            "heap %s returned NULL (errno %d) for %zu bytes, a request it can serve",
            s->heap.name, err, n);
}

/* Records a fresh block: alignment, usable size, bounds, zeroing, overlap. */
static void adopt(slot_t *s, void *p, size_t n, size_t align, bool zeroed)
{
  shadow_block_t b;
  shadow_span_t other;
  int rc;

  FZ_ASSERT(!size_is_absurd(n), "heap %s returned %p for an absurd request of %zu bytes: "
            "glibc fails it with ENOMEM (RAM+swap is below it, or it exceeds PTRDIFF_MAX)",
            s->heap.name, p, n);
  FZ_ASSERT(((uintptr_t)p & 15) == 0, "result %p is not 16-byte aligned", p);
  FZ_ASSERT(((uintptr_t)p & (align - 1)) == 0, "result %p is not aligned to %zu", p, align);
  b.ptr = p;
  b.req = n;
  b.usable = shadow_heap_usable(&s->heap, p);
  b.id = fz.next_id++;
  FZ_ASSERT(b.usable >= n, "usable size %zu of %p is below the request %zu", b.usable, p, n);
  FZ_ASSERT(shadow_heap_owns(&s->heap, p, b.usable),
            "block [%p, +%zu) lies outside the fixed region [0x%" PRIxPTR ", 0x%" PRIxPTR ")",
            p, b.usable, s->heap.lo, s->heap.hi);
  if (zeroed) {
    size_t bad = shadow_bytes_find_not(p, n, 0);
    FZ_ASSERT(bad == SIZE_MAX, "calloc block %p of %zu bytes has a non-zero byte at offset %zu",
              p, n, bad);
  }
  rc = shadow_set_insert(&s->live, &b, &other);
  FZ_ASSERT(rc != -1, "block [%p, %p) overlaps the live block [0x%" PRIxPTR ", 0x%" PRIxPTR ")",
            p, (void *)((char *)p + b.usable), other.start, other.end);
  FZ_ASSERT(rc == 0, "the model is full");
  fz.live_total += b.usable;
  shadow_pattern_fill(p, b.usable, b.id);
}

static void forget(slot_t *s, size_t idx)
{
  fz.live_total -= s->live.blocks[idx].usable;
  shadow_set_remove(&s->live, idx);
}

static bool slot_full(const slot_t *s)
{
  return s->live.count >= s->live.cap;
}

static size_t pick(slot_t *s, in_t *in)
{
  uint8_t hi = in_u8(in), lo = in_u8(in);
  return ((size_t)hi << 8 | lo) % s->live.count;
}

static void detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void detail(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fz.detail, sizeof(fz.detail), fmt, ap);
  va_end(ap);
}

/* ---- operations --------------------------------------------------------- */

static void op_malloc(slot_t *s, size_t n)
{
  void *p;

  detail("%s size=%zu", s->heap.name, n);
  if (slot_full(s) || size_over_budget(n))
    return;
  errno = 0;
  p = shadow_heap_malloc(&s->heap, n);
  if (p == NULL)
    accept_null(s, n, errno, false);
  else
    adopt(s, p, n, 16, false);
}

static const size_t calloc_elems[] = {
  1, 2, 4, 8, 16, 24, 1000, 4096, (size_t)1 << 32, SIZE_MAX / 2 + 1, SIZE_MAX,
};

static void op_calloc(slot_t *s, in_t *in)
{
  size_t elem = calloc_elems[in_u8(in) % COUNT_OF(calloc_elems)], count, total;
  bool overflow;
  void *p;

  if (elem <= 4096) {
    size_t n = in_size(in);
    count = (n + elem - 1) / elem;
  } else {
    static const size_t counts[] = { 0, 1, 2, 3, (size_t)1 << 32, SIZE_MAX };
    count = counts[in_u8(in) % COUNT_OF(counts)];
  }
  overflow = __builtin_mul_overflow(count, elem, &total);
  detail("%s count=%zu elem=%zu", s->heap.name, count, elem);
  if (slot_full(s) || (!overflow && size_over_budget(total)))
    return;
  errno = 0;
  p = shadow_heap_calloc(&s->heap, count, elem);
  if (overflow) {
    FZ_ASSERT(p == NULL && errno == ENOMEM,
              "calloc(%zu, %zu) overflows but returned %p, errno %d; expected NULL, ENOMEM",
              count, elem, p, errno);
    return;
  }
  if (p == NULL)
    accept_null(s, total, errno, false);
  else
    adopt(s, p, total, 16, true);
}

/* realloc of block idx to n; reallocarray when is_array (global heap). */
static void realloc_to(slot_t *s, size_t idx, size_t n, bool is_array, size_t nmemb,
                       size_t elem)
{
  shadow_block_t old = s->live.blocks[idx];
  size_t keep, bad;
  void *q;

  detail("%s ptr=%p old=%zu new=%zu%s", s->heap.name, (void *)old.ptr, old.req, n,
         is_array ? " (reallocarray)" : "");
  if (n > old.usable && size_over_budget(n - old.usable))
    return;
  verify_block(s, &old, "before realloc");
  errno = 0;
  q = is_array ? PINHEAP_NAME(reallocarray)(old.ptr, nmemb, elem)
               : shadow_heap_realloc(&s->heap, old.ptr, n);
  if (n == 0) {
    FZ_ASSERT(q == NULL, "realloc(p, 0) returned %p, expected NULL (p freed, as glibc)", q);
    forget(s, idx);
    return;
  }
  if (q == NULL) {
    accept_null(s, n, errno, false);
    verify_block(s, &old, "after a failed realloc (the old block must be untouched)");
    FZ_ASSERT(shadow_heap_usable(&s->heap, old.ptr) == old.usable,
              "a failed realloc changed the old block's usable size");
    return;
  }
  keep = n < old.usable ? n : old.usable;
  bad = shadow_pattern_find_mismatch(q, keep, old.id);
  FZ_ASSERT(bad == SIZE_MAX, "realloc %p -> %p lost the old contents at offset %zu of %zu kept bytes",
            (void *)old.ptr, q, bad, keep);
  forget(s, idx);
  adopt(s, q, n, 16, false);
  /* adopt() refilled the block with a new id's pattern: fine, the old
   * contents were checked above. */
}

static void op_realloc(slot_t *s, in_t *in, bool near)
{
  size_t idx, n;

  if (s->live.count == 0) {
    op_malloc(s, in_size(in));
    return;
  }
  idx = pick(s, in);
  if (near) {
    int8_t delta = (int8_t)in_u8(in);
    size_t req = s->live.blocks[idx].req;
    n = delta < 0 && (size_t)-delta > req ? 0 : req + (size_t)(ptrdiff_t)delta;
  } else {
    n = in_size(in);
  }
  realloc_to(s, idx, n, false, 0, 0);
}

static void op_realloc_null(slot_t *s, in_t *in)
{
  size_t n = in_size(in);
  void *q;

  detail("%s ptr=NULL size=%zu", s->heap.name, n);
  if (slot_full(s) || size_over_budget(n))
    return;
  errno = 0;
  q = shadow_heap_realloc(&s->heap, NULL, n);
  if (q == NULL)
    accept_null(s, n, errno, false);
  else
    adopt(s, q, n, 16, false);
}

static void op_reallocarray(slot_t *s, in_t *in)
{
  size_t elem = calloc_elems[in_u8(in) % COUNT_OF(calloc_elems)], nmemb, total, idx;
  bool overflow;

  if (s->heap.kind != SHADOW_HEAP_GLOBAL || s->live.count == 0) {
    op_realloc(s, in, false);
    return;
  }
  idx = pick(s, in);
  if (elem <= 4096) {
    size_t n = in_size(in);
    nmemb = (n + elem - 1) / elem;
  } else {
    static const size_t counts[] = { 0, 1, 2, 3, (size_t)1 << 32, SIZE_MAX };
    nmemb = counts[in_u8(in) % COUNT_OF(counts)];
  }
  overflow = __builtin_mul_overflow(nmemb, elem, &total);
  if (overflow) {
    shadow_block_t old = s->live.blocks[idx];
    void *q;
    detail("global ptr=%p nmemb=%zu elem=%zu (overflows)", (void *)old.ptr, nmemb, elem);
    errno = 0;
    q = PINHEAP_NAME(reallocarray)(old.ptr, nmemb, elem);
    FZ_ASSERT(q == NULL && errno == ENOMEM,
              "reallocarray(%p, %zu, %zu) overflows but returned %p, errno %d; expected NULL, "
              "ENOMEM", (void *)old.ptr, nmemb, elem, q, errno);
    verify_block(s, &old, "after an overflowing reallocarray (the block must be untouched)");
    return;
  }
  realloc_to(s, idx, total, true, nmemb, elem);
}

typedef enum align_api_e { API_MEMALIGN, API_POSIX, API_ALIGNED, API_VALLOC, API_PVALLOC } align_api_t;

static void op_aligned(slot_t *s, in_t *in, align_api_t api)
{
  size_t a = (api == API_VALLOC || api == API_PVALLOC) ? fz.page : in_align(in);
  size_t n = in_size(in), want = n, align_want;
  bool global = s->heap.kind == SHADOW_HEAP_GLOBAL;
  bool absurd_align = a >= ((size_t)1 << 30);
  void *p = NULL;
  int err;

  if (!global && api != API_MEMALIGN)
    api = API_MEMALIGN;           /* mspaces only have memalign */
  if (api == API_PVALLOC)
    want = n == 0 ? fz.page : (n > SIZE_MAX - fz.page ? n : (n + fz.page - 1) & ~(fz.page - 1));
  detail("%s %s align=%zu size=%zu", s->heap.name,
         api == API_MEMALIGN ? "memalign" : api == API_POSIX ? "posix_memalign" :
         api == API_ALIGNED ? "aligned_alloc" : api == API_VALLOC ? "valloc" : "pvalloc", a, n);
  if (slot_full(s) || size_over_budget(want))
    return;

  switch (api) {
  case API_POSIX: {
    void *sentinel = (void *)(uintptr_t)0x5e17;
    bool bad = a == 0 || a % sizeof(void *) != 0 || !is_pow2(a);
    int rc;
    p = sentinel;
    rc = PINHEAP_NAME(posix_memalign)(&p, a, n);
    if (bad) {
      FZ_ASSERT(rc == EINVAL && p == sentinel,
                "posix_memalign with alignment %zu returned %d and wrote %p; expected EINVAL and "
                "*memptr untouched", a, rc, p);
      return;
    }
    if (rc != 0) {
      FZ_ASSERT(rc == ENOMEM && p == sentinel,
                "posix_memalign(%zu, %zu) returned %d, *memptr %p; expected 0, or ENOMEM with "
                "*memptr untouched", a, n, rc, p);
      FZ_ASSERT(size_is_absurd(n) || absurd_align,
                "posix_memalign(%zu, %zu) failed with ENOMEM for a request it can serve", a, n);
      return;
    }
    FZ_ASSERT(p != NULL && p != sentinel, "posix_memalign returned 0 but *memptr is %p", p);
    align_want = a < 16 ? 16 : a;
    break;
  }
  case API_ALIGNED:
    errno = 0;
    p = PINHEAP_NAME(aligned_alloc)(a, n);
    err = errno;
    if (!is_pow2(a)) {
      FZ_ASSERT(p == NULL && err == EINVAL,
                "aligned_alloc with alignment %zu returned %p, errno %d; expected NULL, EINVAL",
                a, p, err);
      return;
    }
    if (p == NULL) {
      FZ_ASSERT(absurd_align || size_is_absurd(n),
                "aligned_alloc(%zu, %zu) returned NULL (errno %d) for a request it can serve",
                a, n, err);
      accept_null(s, n, err, true);
      return;
    }
    align_want = a < 16 ? 16 : a;
    break;
  case API_VALLOC:
  case API_PVALLOC:
    errno = 0;
    p = api == API_VALLOC ? PINHEAP_NAME(valloc)(n) : PINHEAP_NAME(pvalloc)(n);
    if (p == NULL) {
      accept_null(s, want, errno, false);
      return;
    }
    align_want = fz.page;
    break;
  default:
    errno = 0;
    p = shadow_heap_memalign(&s->heap, a, n);
    err = errno;
    if (p == NULL) {
      FZ_ASSERT(err == ENOMEM || err == EINVAL,
                "memalign(%zu, %zu) on %s returned NULL with errno %d; expected ENOMEM or EINVAL",
                a, n, s->heap.name, err);
      FZ_ASSERT(absurd_align || size_is_absurd(n) || s->heap.kind == SHADOW_HEAP_FIXED,
                "memalign(%zu, %zu) on %s returned NULL (errno %d) for a request it can serve",
                a, n, s->heap.name, err);
      return;
    }
    align_want = memalign_effective(a);
    if (absurd_align && !is_pow2(a))
      align_want = 16;            /* the rounded alignment may not exist */
    break;
  }
  adopt(s, p, want, align_want, false);
}

static void op_free(slot_t *s, in_t *in)
{
  size_t idx;
  shadow_block_t b;

  if (s->live.count == 0) {
    detail("%s free(NULL)", s->heap.name);
    errno = EDOM;
    shadow_heap_free(&s->heap, NULL);
    FZ_ASSERT(errno == EDOM, "free(NULL) changed errno to %d", errno);
    return;
  }
  idx = pick(s, in);
  b = s->live.blocks[idx];
  detail("%s ptr=%p size=%zu", s->heap.name, (void *)b.ptr, b.req);
  verify_block(s, &b, "before free");
  errno = EDOM;
  shadow_heap_free(&s->heap, b.ptr);
  FZ_ASSERT(errno == EDOM, "free changed errno from EDOM to %d", errno);
  forget(s, idx);
}

static void op_free_all(slot_t *s)
{
  detail("%s free all %zu blocks", s->heap.name, s->live.count);
  while (s->live.count > 0) {
    shadow_block_t b = s->live.blocks[s->live.count - 1];
    verify_block(s, &b, "before free (free all)");
    shadow_heap_free(&s->heap, b.ptr);
    forget(s, s->live.count - 1);
  }
}

static void op_usable(slot_t *s, in_t *in)
{
  const shadow_block_t *b;
  size_t u;

  if (s->live.count == 0) {
    detail("usable(NULL)");
    FZ_ASSERT(PINHEAP_NAME(malloc_usable_size)(NULL) == 0, "malloc_usable_size(NULL) is not 0");
    return;
  }
  b = &s->live.blocks[pick(s, in)];
  detail("%s ptr=%p", s->heap.name, (void *)b->ptr);
  u = shadow_heap_usable(&s->heap, b->ptr);
  FZ_ASSERT(u == b->usable, "usable size of %p changed from %zu to %zu while it was live",
            (void *)b->ptr, b->usable, u);
}

static void op_trim(slot_t *s, in_t *in)
{
  size_t pad = (size_t)in_u32(in) % (1u << 20);
  int rc;

  if (in_u8(in) == 0xff && fz.absurd)
    pad = SIZE_MAX - pad;
  detail("%s pad=%zu", s->heap.name, pad);
  rc = shadow_heap_trim(&s->heap, pad);
  FZ_ASSERT(rc == 0 || rc == 1, "trim returned %d, expected 0 or 1", rc);
  FZ_ASSERT(s->heap.kind != SHADOW_HEAP_FIXED || rc == 0,
            "trim of a fixed heap returned %d: it must never release", rc);
  for (size_t i = 0; i < s->live.count; i++)
    verify_block(s, &s->live.blocks[i], "after trim");
}

static void op_mallopt(in_t *in)
{
  uint8_t sel = in_u8(in);
  uint32_t raw = in_u32(in);
  int param, value, want;

  switch (sel % 8) {
  case 0: param = M_TRIM_THRESHOLD; value = (int)(raw % (4u << 20)); want = 1; break;
  case 1: param = M_TOP_PAD;        value = (int)(raw % (1u << 20)); want = 1; break;
  case 2: param = M_MMAP_THRESHOLD; value = (int)(raw % ((32u << 20) + 1)); want = 1; break;
  case 3: param = M_MMAP_THRESHOLD; value = (raw & 1) ? -1 : (int)((32u << 20) + 1 + raw % 1000);
          want = 0; break;
  case 4: param = M_MMAP_MAX;       value = (int)(raw % 4 == 0 ? 0 : raw % 65537); want = 1; break;
  case 5: param = M_ARENA_MAX;      value = (int)(1 + raw % 256); want = 1; break;
  case 6: param = M_ARENA_MAX;      value = (raw & 1) ? 0 : 257; want = 0; break;
  default: param = 12345;           value = 1; want = 0; break;
  }
  detail("param=%d value=%d", param, value);
  FZ_ASSERT(PINHEAP_NAME(mallopt)(param, value) == want, "mallopt(%d, %d) did not return %d",
            param, value, want);
}

static const size_t create_caps[] = {
  0, 1, 4096, 65536, (size_t)1 << 20, ((size_t)3 << 20) + 5, (size_t)16 << 20,
};

static slot_t *slot_for_create(uint8_t opbyte)
{
  unsigned hs = opbyte >> 5;

  if (hs >= 4)
    return &fz.slot[hs - 3];
  for (int i = 1; i < FZ_SLOTS; i++)
    if (!fz.slot[i].used)
      return &fz.slot[i];
  return &fz.slot[1 + hs % (FZ_SLOTS - 1)];
}

static void slot_destroy(slot_t *s);

static void op_create(uint8_t opbyte, in_t *in)
{
  slot_t *s = slot_for_create(opbyte);
  uint8_t sel = in_u8(in);
  size_t cap = create_caps[sel % COUNT_OF(create_caps)];
  int locked = (sel >> 7) & 1;

  if (s->used)
    slot_destroy(s);
  detail("slot %d capacity=%zu locked=%d", (int)(s - fz.slot), cap, locked);
  errno = 0;
  s->heap.msp = PINHEAP_NAME(create_mspace)(cap, locked);
  FZ_ASSERT(s->heap.msp != NULL, "create_mspace(%zu, %d) returned NULL, errno %d", cap, locked,
            errno);
  s->heap.kind = SHADOW_HEAP_MSPACE;
  s->heap.name = "mspace";
  s->used = true;
  check_heap(s);
}

static void op_create_fixed(uint8_t opbyte, in_t *in)
{
  slot_t *s = slot_for_create(opbyte);
  region_t *r = NULL;
  uint8_t sel = in_u8(in);
  size_t off = ((size_t)in_u8(in) << 4 | in_u8(in)) % 4096, cap;
  int locked = (sel >> 7) & 1;
  void *msp;

  if (s->used)
    slot_destroy(s);
  for (int i = 0; i < FZ_REGIONS; i++)
    if (fz.region[i].used_by < 0)
      r = &fz.region[i];
  if (r == NULL) {
    detail("no free region");
    return;
  }
  switch (sel % 8) {
  case 0: cap = 0; break;
  case 1: cap = (size_t)in_u8(in) * 8; break;            /* too small, mostly */
  case 2: cap = 1024 + in_u32(in) % 16384; break;
  case 3: cap = in_u32(in) % (FZ_REGION - off + 1); break;
  default: cap = FZ_REGION - off - (in_u8(in) % 64); break;
  }
  detail("slot %d base=region+%zu capacity=%zu locked=%d", (int)(s - fz.slot), off, cap, locked);
  memset(r->data, FZ_CANARY, FZ_REGION);
  memset(r->data + off, FZ_JUNK, cap);
  s->region = r;
  s->base = r->data + off;
  s->cap = cap;
  errno = 0;
  msp = PINHEAP_NAME(create_mspace_with_base)(s->base, cap, locked);
  if (msp == NULL) {
    int err = errno;
    FZ_ASSERT(err == EINVAL, "create_mspace_with_base(%p, %zu) returned NULL with errno %d; "
              "expected EINVAL", (void *)s->base, cap, err);
    /* Its own state (bins included) takes some KiB: a small region may be
     * refused, one of a MiB may not. */
    FZ_ASSERT(cap < ((size_t)1 << 20), "create_mspace_with_base refused a region of %zu bytes",
              cap);
    for (size_t i = 0; i < cap; i++)
      FZ_ASSERT(s->base[i] == FZ_JUNK, "create_mspace_with_base refused the region but wrote "
                "to it at offset %zu", i);
    verify_guards(s);
    s->region = NULL;
    return;
  }
  FZ_ASSERT((unsigned char *)msp >= s->base && (unsigned char *)msp < s->base + cap,
            "the fixed mspace handle %p is not inside its region [%p, +%zu)", msp,
            (void *)s->base, cap);
  r->used_by = (int)(s - fz.slot);
  s->heap.msp = msp;
  s->heap.kind = SHADOW_HEAP_FIXED;
  s->heap.name = "fixed";
  s->heap.lo = (uintptr_t)s->base;
  s->heap.hi = (uintptr_t)s->base + cap;
  s->used = true;
  check_heap(s);
}

static void slot_destroy(slot_t *s)
{
  struct mallinfo2 mi;
  size_t released;

  check_heap(s);
  for (size_t i = 0; i < s->live.count; i++)
    verify_block(s, &s->live.blocks[i], "before destroy_mspace");
  mi = PINHEAP_NAME(mspace_mallinfo)(s->heap.msp);
  released = PINHEAP_NAME(destroy_mspace)(s->heap.msp);
  if (s->heap.kind == SHADOW_HEAP_FIXED) {
    FZ_ASSERT(released == 0, "destroy_mspace of a fixed heap reported %zu bytes released: the "
              "caller's region must never be released", released);
    verify_guards(s);
    /* still the caller's, still mapped */
    s->base[0] ^= 1;
    s->base[s->cap - 1] ^= 1;
    s->region->used_by = -1;
  } else {
    FZ_ASSERT(released > 0 && released == mi.arena + mi.hblkhd,
              "destroy_mspace released %zu bytes, but mspace_mallinfo counted %zu bytes of "
              "segments (arena) and %zu of mapped chunks", released, mi.arena, mi.hblkhd);
  }
  while (s->live.count > 0)
    forget(s, s->live.count - 1);
  s->used = false;
  s->region = NULL;
  s->base = NULL;
  s->cap = 0;
  memset(&s->heap, 0, sizeof(s->heap));
}

static void op_destroy(uint8_t opbyte)
{
  slot_t *s = slot_of(opbyte);

  if (s == &fz.slot[0]) {
    for (int i = 1; i < FZ_SLOTS && s == &fz.slot[0]; i++)
      if (fz.slot[i].used)
        s = &fz.slot[i];
    if (s == &fz.slot[0]) {
      detail("no mspace");
      return;
    }
  }
  detail("slot %d (%s, %zu live blocks)", (int)(s - fz.slot), s->heap.name, s->live.count);
  slot_destroy(s);
}

/* ---- the driver --------------------------------------------------------- */

static void step_run(in_t *in)
{
  uint8_t opbyte = in_u8(in);
  slot_t *s = slot_of(opbyte);

  fz.op = (fuzz_op_t)((opbyte & 0x1f) % OP_COUNT);
  fz.detail[0] = '\0';
  if (fz.trace)
    fprintf(stderr, "fuzz_ops: step %zu: %s on slot %d ...\n", fz.step, op_names[fz.op],
            (int)(s - fz.slot));
  switch (fz.op) {
  case OP_MALLOC:          op_malloc(s, in_size(in)); break;
  case OP_CALLOC:          op_calloc(s, in); break;
  case OP_REALLOC:         op_realloc(s, in, false); break;
  case OP_REALLOC_NEAR:    op_realloc(s, in, true); break;
  case OP_REALLOC_NULL:    op_realloc_null(s, in); break;
  case OP_REALLOCARRAY:    op_reallocarray(s, in); break;
  case OP_MEMALIGN:        op_aligned(s, in, API_MEMALIGN); break;
  case OP_POSIX_MEMALIGN:  op_aligned(s, in, API_POSIX); break;
  case OP_ALIGNED_ALLOC:   op_aligned(s, in, API_ALIGNED); break;
  case OP_VALLOC:          op_aligned(s, in, API_VALLOC); break;
  case OP_PVALLOC:         op_aligned(s, in, API_PVALLOC); break;
  case OP_FREE:
  case OP_FREE2:           op_free(s, in); break;
  case OP_FREE_ALL:        op_free_all(s); break;
  case OP_USABLE:          op_usable(s, in); break;
  case OP_VERIFY:
    if (s->live.count > 0) {
      const shadow_block_t *b = &s->live.blocks[pick(s, in)];
      detail("%s ptr=%p", s->heap.name, (void *)b->ptr);
      verify_block(s, b, "verify");
    }
    break;
  case OP_TRIM:            op_trim(s, in); break;
  case OP_MALLOPT:         op_mallopt(in); break;
  case OP_MALLINFO:        detail("%s", s->heap.name); check_mallinfo(s); break;
  case OP_CREATE:
  case OP_CREATE_FIXED:
  case OP_DESTROY:
    /* each checks the heap it makes or verifies the one it ends */
    if (fz.op == OP_CREATE)
      op_create(opbyte, in);
    else if (fz.op == OP_CREATE_FIXED)
      op_create_fixed(opbyte, in);
    else
      op_destroy(opbyte);
    if (fz.trace)
      fprintf(stderr, "fuzz_ops: step %zu: %s %s\n", fz.step, op_names[fz.op], fz.detail);
    return;
  case OP_COUNT:
    break;
  }
  if (fz.trace)
    fprintf(stderr, "fuzz_ops: step %zu: %s %s\n", fz.step, op_names[fz.op], fz.detail);
  if (fz.step % fz.check_every == 0)
    check_heap(s);
  if (s->live.count > 0) {
    /* one sampled block per step, cycling through the heap */
    const shadow_block_t *b = &s->live.blocks[(fz.step * 7919u) % s->live.count];
    verify_block(s, b, "sampled after the step");
  }
}

static void input_finish(void)
{
  fz.op = OP_FREE_ALL;
  for (int i = FZ_SLOTS - 1; i >= 1; i--)
    if (fz.slot[i].used) {
      op_free_all(&fz.slot[i]);
      check_heap(&fz.slot[i]);
      slot_destroy(&fz.slot[i]);
    }
  op_free_all(&fz.slot[0]);
  check_heap(&fz.slot[0]);
  /* The defaults of heap.h: inputs must not inherit each other's settings. */
  PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, 128 * 1024);
  PINHEAP_NAME(mallopt)(M_TOP_PAD, 0);
  PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, 128 * 1024);
  PINHEAP_NAME(mallopt)(M_MMAP_MAX, 65536);
  FZ_ASSERT(fz.live_total == 0, "the model still counts %zu live bytes", fz.live_total);
}

static size_t env_size(const char *name, size_t dflt)
{
  const char *s = getenv(name);
  char *end;
  unsigned long long v;

  if (s == NULL || *s == '\0')
    return dflt;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || s[0] == '-') {
    fprintf(stderr, "fuzz_ops: %s='%s' is not a whole number\n", name, s);
    exit(2);
  }
  return (size_t)v;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  struct sysinfo si;
  FILE *f;
  int mode = 0;

  (void)argc;
  (void)argv;
  fz.page = (size_t)sysconf(_SC_PAGESIZE);
  fz.check_every = env_size("PINHEAP_FUZZ_CHECK_EVERY", 1);
  if (fz.check_every == 0)
    fz.check_every = 1;
  fz.trace = env_size("PINHEAP_FUZZ_TRACE", 0) != 0;
  fz.absurd = env_size("PINHEAP_FUZZ_ABSURD", 1) != 0;
  /* What glibc refuses: above PTRDIFF_MAX always; above RAM+swap as well
   * unless the kernel always overcommits (vm.overcommit_memory=1).  Twice
   * that, for a margin. */
  fz.absurd_over = PTRDIFF_MAX;
  f = fopen("/proc/sys/vm/overcommit_memory", "r");
  if (f != NULL) {
    if (fscanf(f, "%d", &mode) != 1)
      mode = 0;
    fclose(f);
  }
  if (mode != 1 && sysinfo(&si) == 0) {
    size_t total = ((size_t)si.totalram + (size_t)si.totalswap) * si.mem_unit;
    if (total < PTRDIFF_MAX / 2)
      fz.absurd_over = 2 * total;
  }
  for (int i = 0; i < FZ_SLOTS; i++)
    if (shadow_set_init(&fz.slot[i].live, FZ_MAX_LIVE) != 0) {
      fprintf(stderr, "fuzz_ops: no memory for the model\n");
      exit(2);
    }
  fz.slot[0].used = true;
  fz.slot[0].heap.kind = SHADOW_HEAP_GLOBAL;
  fz.slot[0].heap.name = "global";
  for (int i = 0; i < FZ_REGIONS; i++) {
    region_t *r = &fz.region[i];
    r->map_len = FZ_REGION + 2 * fz.page;
    r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r->map == MAP_FAILED || mprotect(r->map, fz.page, PROT_NONE) != 0 ||
        mprotect(r->map + r->map_len - fz.page, fz.page, PROT_NONE) != 0) {
      fprintf(stderr, "fuzz_ops: cannot map the fixed regions\n");
      exit(2);
    }
    r->data = r->map + fz.page;
    r->used_by = -1;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  in_t in = { data, size };

  fz.next_id = 1;
  for (fz.step = 1; in.n > 0; fz.step++)
    step_run(&in);
  input_finish();
  return 0;
}
