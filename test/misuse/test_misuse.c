/*
 * test_misuse.c -- misuse ends the process, clearly: double free, freeing
 * pointers pinheap never returned (stack, static, glibc's, interior,
 * misaligned), corrupted chunk headers, realloc and malloc_usable_size of
 * bad pointers, mspace_free/mspace_realloc of another heap's pointer.
 * Each case runs in a forked child whose stderr goes to a pipe; the parent
 * requires death by SIGABRT and, on stderr, exactly the one line
 *   pinheap: <func>(): <what> 0x<pointer>
 * naming the pointer that was passed.  Main entry point: misuse_assert().
 */
#include "test_util.h"

/* ---- actions run in the child ---------------------------------------------- */

static void act_free(void *p)
{
  PINHEAP_NAME(free)(p);
}

static void act_realloc(void *p)
{
  void *q = PINHEAP_NAME(realloc)(p, 200);
  (void)q;
}

static void act_usable_size(void *p)
{
  volatile size_t n = PINHEAP_NAME(malloc_usable_size)(p);
  (void)n;
}

typedef struct corrupt_s {
  void *ptr;
  uint64_t header;     /* written over the 8 bytes before ptr */
  misuse_fn_t *then;   /* the call that must notice */
} corrupt_t;

static void act_corrupt_then(void *arg)
{
  corrupt_t *c = arg;
  memcpy((char *)c->ptr - 8, &c->header, 8);
  c->then(c->ptr);
}

typedef struct mspace_op_s {
  pinheap_mspace msp;
  void *ptr;
} mspace_op_t;

static void act_mspace_free(void *arg)
{
  mspace_op_t *op = arg;
  PINHEAP_NAME(mspace_free)(op->msp, op->ptr);
}

static void act_mspace_realloc(void *arg)
{
  mspace_op_t *op = arg;
  void *q = PINHEAP_NAME(mspace_realloc)(op->msp, op->ptr, 300);
  (void)q;
}

/* ---- the harness itself ------------------------------------------------------ */

Test(misuse, harness_sees_valid_use_as_valid)
{
  void *p = PINHEAP_NAME(malloc)(100);
  misuse_result_t r;

  cr_assert_not_null(p, "malloc(100) returned NULL");
  misuse_run(act_free, p, &r);
  cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
            "a valid free(%p) did not exit normally (status 0x%x); stderr: \"%s\"", p, r.status, r.out);
  cr_assert_eq(r.len, 0, "a valid free wrote to stderr: \"%s\"", r.out);
  PINHEAP_NAME(free)(p);
  heap_assert_sound("valid free in a child");
}

/* ---- double free ------------------------------------------------------------- */

Test(misuse, double_free_isolated_chunk)
{
  void *a = PINHEAP_NAME(malloc)(100), *p = PINHEAP_NAME(malloc)(100), *b = PINHEAP_NAME(malloc)(100);
  cr_assert(a && p && b, "setup failed");
  PINHEAP_NAME(free)(p);
  misuse_assert(act_free, p, "free", "double free", p);
}

Test(misuse, double_free_merged_with_previous)
{
  void *a = PINHEAP_NAME(malloc)(100), *p = PINHEAP_NAME(malloc)(100), *b = PINHEAP_NAME(malloc)(100);
  cr_assert(a && p && b, "setup failed");
  PINHEAP_NAME(free)(a);
  PINHEAP_NAME(free)(p);  /* coalesces with a */
  misuse_assert(act_free, p, "free", "double free", p);
}

Test(misuse, double_free_merged_into_top)
{
  void *a = PINHEAP_NAME(malloc)(100), *p = PINHEAP_NAME(malloc)(100);
  cr_assert(a && p, "setup failed");
  PINHEAP_NAME(free)(p);  /* the last chunk: goes back into the top */
  misuse_assert(act_free, p, "free", "double free", p);
}

Test(misuse, double_free_large_heap_chunk)
{
  void *a = PINHEAP_NAME(malloc)(100), *p = PINHEAP_NAME(malloc)(20000), *b = PINHEAP_NAME(malloc)(100);
  cr_assert(a && p && b, "setup failed");
  PINHEAP_NAME(free)(p);
  misuse_assert(act_free, p, "free", "double free", p);
}

Test(misuse, double_free_mapped_chunk)
{
  void *p = PINHEAP_NAME(malloc)(4 * MiB);
  cr_assert_not_null(p, "malloc(4 MiB) returned NULL");
  PINHEAP_NAME(free)(p);  /* unmapped: pinheap must not read it */
  misuse_assert_either(act_free, p, "free", "double free", "invalid pointer", p);
}

/* A chunk stays "freed" wherever it waits -- its thread's list and spare,
 * a bundle handed back to its arena, the deferred lists, a bin -- until it
 * is handed out again: a second free is named wherever it is. */
Test(misuse, double_free_after_the_list_went_back_to_the_arena)
{
  enum { N = 4096 };
  static void *blk[N];
  for (int i = 0; i < N; i++) {
    blk[i] = PINHEAP_NAME(malloc)(48);
    cr_assert_not_null(blk[i], "malloc(48) returned NULL");
  }
  void *p = blk[0];
  /* p first, then enough of its size to fill the list, the spare and more:
   * p's list goes back to the arena as a bundle */
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(free)(blk[i]);
  misuse_assert(act_free, p, "free", "double free", p);
}

Test(misuse, double_free_of_a_small_chunk_coalesced_into_a_bin)
{
  void *a = PINHEAP_NAME(malloc)(48), *p = PINHEAP_NAME(malloc)(48), *b = PINHEAP_NAME(malloc)(48);
  void *c = PINHEAP_NAME(malloc)(48);
  cr_assert(a && p && b && c, "setup failed");
  PINHEAP_NAME(free)(a);
  PINHEAP_NAME(free)(p);
  PINHEAP_NAME(malloc_trim)(0);   /* the cache goes back and is coalesced: a+p in a bin */
  misuse_assert(act_free, p, "free", "double free", p);
  misuse_assert(act_free, a, "free", "double free", a);
}

/* The free fast path validates a pointer before it touches a list: bytes
 * before an interior pointer that look like a small in-use header are not
 * taken for one (a later malloc would hand out memory inside a live block),
 * and a zero size ends in the abort line, not in a division by zero. */
static void act_craft_then_free(void *arg)
{
  corrupt_t *c = arg;
  memcpy((char *)c->ptr - 8, &c->header, 8);
  PINHEAP_NAME(free)(c->ptr);
  /* accepted: the next malloc of that size returns memory inside the block */
  void *q = PINHEAP_NAME(malloc)(40);
  fprintf(stderr, "free(%p) was accepted; malloc(40) then returned %p\n", c->ptr, q);
}

Test(misuse, free_interior_pointer_behind_a_crafted_header)
{
  char *blk = PINHEAP_NAME(malloc)(256), *after = PINHEAP_NAME(malloc)(64);
  cr_assert(blk && after, "setup failed");
  /* 48 bytes, in use, previous in use: what a real header of that size says */
  corrupt_t c = { blk + 32, 48 | 2 | 1, NULL };
  misuse_assert(act_craft_then_free, &c, "free", "invalid pointer", blk + 32);
  corrupt_t z = { blk + 64, 2 | 1, NULL };      /* size 0, in use */
  misuse_assert(act_craft_then_free, &z, "free", "invalid pointer", blk + 64);
  corrupt_t big = { blk + 96, 2032 | 2 | 1, NULL };
  misuse_assert(act_craft_then_free, &big, "free", "invalid pointer", blk + 96);
}

/* ---- pointers pinheap never returned ------------------------------------------ */

Test(misuse, free_stack_pointer)
{
  _Alignas(64) char buf[256];
  memset(buf, 0, sizeof(buf));
  void *h = PINHEAP_NAME(malloc)(10);  /* the heap exists */
  cr_assert_not_null(h, "malloc(10) returned NULL");
  misuse_assert(act_free, buf + 64, "free", "invalid pointer", buf + 64);
}

Test(misuse, free_static_pointer)
{
  static _Alignas(64) char sbuf[256];
  void *h = PINHEAP_NAME(malloc)(10);
  cr_assert_not_null(h, "malloc(10) returned NULL");
  misuse_assert(act_free, sbuf + 32, "free", "invalid pointer", sbuf + 32);
}

Test(misuse, free_glibc_pointer)
{
  void *g = malloc(100);  /* glibc's */
  cr_assert_not_null(g, "glibc malloc failed");
  void *h = PINHEAP_NAME(malloc)(10);
  cr_assert_not_null(h, "malloc(10) returned NULL");
  misuse_assert(act_free, g, "free", "invalid pointer", g);
  void *big = malloc(1 << 20);  /* a glibc mmapped chunk */
  cr_assert_not_null(big, "glibc malloc failed");
  misuse_assert(act_free, big, "free", "invalid pointer", big);
  free(g);
  free(big);
}

Test(misuse, free_misaligned_interior_pointer)
{
  char *p = PINHEAP_NAME(malloc)(256), *b = PINHEAP_NAME(malloc)(100);
  cr_assert(p && b, "setup failed");
  misuse_assert(act_free, p + 8, "free", "invalid pointer", p + 8);
  misuse_assert(act_free, p + 1, "free", "invalid pointer", p + 1);
}

Test(misuse, free_aligned_interior_pointer)
{
  char *z = PINHEAP_NAME(calloc)(1, 256), *b = PINHEAP_NAME(malloc)(100);
  char *f = PINHEAP_NAME(malloc)(256), *c = PINHEAP_NAME(malloc)(100);
  cr_assert(z && b && f && c, "setup failed");
  memset(f, 0xA5, 256);
  misuse_assert(act_free, z + 16, "free", "invalid pointer", z + 16);
  misuse_assert(act_free, z + 128, "free", "invalid pointer", z + 128);
  misuse_assert(act_free, f + 32, "free", "invalid pointer", f + 32);
}

Test(misuse, free_interior_of_mapped_chunk)
{
  char *p = PINHEAP_NAME(malloc)(2 * MiB);
  cr_assert_not_null(p, "malloc(2 MiB) returned NULL");
  memset(p, 0, 2 * MiB);
  misuse_assert(act_free, p + 4096, "free", "invalid pointer", p + 4096);
  misuse_assert(act_free, p + 8, "free", "invalid pointer", p + 8);
}

/* ---- corrupted chunk headers --------------------------------------------------- */

static void corrupt_assert(size_t size, uint64_t header, misuse_fn_t *then, const char *func)
{
  void *a = PINHEAP_NAME(malloc)(100), *p = PINHEAP_NAME(malloc)(size), *b = PINHEAP_NAME(malloc)(100);
  cr_assert(a && p && b, "setup failed");
  memset(p, 0x11, size);
  corrupt_t c = { p, header, then };
  misuse_assert(act_corrupt_then, &c, func, "corrupted chunk header", p);
}

Test(misuse, corrupted_header_on_free)
{
  static const uint64_t garbage[] = { 0xdeadbeefdeadbeefULL, 0x4141414141414141ULL, 0, 0x8,
                                      0xfffffffffffffff0ULL };
  /* (1100 bytes: a chunk; blocks up to 512 bytes come from slab pages and
   * have no header -- test_slab.c damages their free lists instead) */
  for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
    corrupt_assert(1100, garbage[i], act_free, "free");
    corrupt_assert(20000, garbage[i], act_free, "free");
  }
}

Test(misuse, corrupted_header_of_mapped_chunk)
{
  corrupt_assert(2 * MiB, 0xdeadbeefdeadbeefULL, act_free, "free");
  corrupt_assert(2 * MiB, 0x4141414141414141ULL, act_free, "free");
  corrupt_assert(2 * MiB, 0, act_free, "free");
}

Test(misuse, corrupted_header_on_realloc_and_usable_size)
{
  corrupt_assert(1100, 0xdeadbeefdeadbeefULL, act_realloc, "realloc");
  corrupt_assert(1100, 0, act_realloc, "realloc");
  corrupt_assert(1100, 0xdeadbeefdeadbeefULL, act_usable_size, "malloc_usable_size");
}

/* ---- realloc and malloc_usable_size of bad pointers ----------------------------- */

Test(misuse, realloc_invalid_pointer)
{
  _Alignas(64) char buf[256];
  static _Alignas(64) char sbuf[256];
  char *p = PINHEAP_NAME(malloc)(256), *b = PINHEAP_NAME(malloc)(100);
  cr_assert(p && b, "setup failed");
  memset(buf, 0, sizeof(buf));
  misuse_assert(act_realloc, buf + 64, "realloc", "invalid pointer", buf + 64);
  misuse_assert(act_realloc, sbuf, "realloc", "invalid pointer", sbuf);
  misuse_assert(act_realloc, p + 8, "realloc", "invalid pointer", p + 8);
  void *g = malloc(100);
  cr_assert_not_null(g, "glibc malloc failed");
  misuse_assert(act_realloc, g, "realloc", "invalid pointer", g);
  free(g);
}

Test(misuse, usable_size_of_invalid_pointer)
{
  _Alignas(64) char buf[256];
  char *p = PINHEAP_NAME(malloc)(256);
  cr_assert_not_null(p, "malloc failed");
  memset(buf, 0, sizeof(buf));
  misuse_assert(act_usable_size, buf + 64, "malloc_usable_size", "invalid pointer", buf + 64);
  misuse_assert(act_usable_size, p + 8, "malloc_usable_size", "invalid pointer", p + 8);
}

/* ---- mspaces -------------------------------------------------------------------- */

Test(misuse, mspace_free_of_another_mspace_pointer)
{
  pinheap_mspace a = PINHEAP_NAME(create_mspace)(0, 0);
  pinheap_mspace b = PINHEAP_NAME(create_mspace)(0, 0);
  cr_assert(a && b, "create_mspace failed");
  void *pa = PINHEAP_NAME(mspace_malloc)(a, 100);
  void *pb = PINHEAP_NAME(mspace_malloc)(b, 100);
  void *pm = PINHEAP_NAME(malloc)(100);
  cr_assert(pa && pb && pm, "setup failed");

  mspace_op_t op = { b, pa };
  misuse_assert(act_mspace_free, &op, "mspace_free", "invalid pointer", pa);
  op = (mspace_op_t){ b, pm };
  misuse_assert(act_mspace_free, &op, "mspace_free", "invalid pointer", pm);
  _Alignas(64) char buf[128];
  op = (mspace_op_t){ b, buf + 64 };
  misuse_assert(act_mspace_free, &op, "mspace_free", "invalid pointer", buf + 64);
  op = (mspace_op_t){ a, pb };
  misuse_assert(act_mspace_realloc, &op, "mspace_realloc", "invalid pointer", pb);

  /* The failed calls ran in children: both heaps are untouched here. */
  mspace_assert_sound(a, "misuse in children");
  mspace_assert_sound(b, "misuse in children");
  PINHEAP_NAME(destroy_mspace)(a);
  PINHEAP_NAME(destroy_mspace)(b);
}

/* ---- a destroyed mspace is named, never read ----------------------------------- */

static void act_destroy_mspace(void *arg) { PINHEAP_NAME(destroy_mspace)(arg); }
static void act_mspace_malloc(void *arg)
{
  void *p = PINHEAP_NAME(mspace_malloc)(arg, 100);
  PINHEAP_NAME(mspace_free)(arg, p);
}

#define NOT_LIVE "not a live mspace (destroyed, or never made by create_mspace)"

Test(misuse, mspace_used_after_destroy)
{
  /* its memory is unmapped by destroy_mspace: a read of it would fault */
  pinheap_mspace m = PINHEAP_NAME(create_mspace)(0, 1);
  cr_assert_not_null(m, "create_mspace failed");
  cr_assert_not_null(PINHEAP_NAME(mspace_malloc)(m, 100));
  cr_assert_gt(PINHEAP_NAME(destroy_mspace)(m), 0, "destroy_mspace gave nothing back");
  misuse_assert(act_destroy_mspace, m, "destroy_mspace", NOT_LIVE, m);
  misuse_assert(act_mspace_malloc, m, "mspace_malloc", NOT_LIVE, m);

  /* an mspace over the caller's region: the region stays, the mspace goes */
  size_t len = 1 << 20;
  char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(base, MAP_FAILED);
  pinheap_mspace r = PINHEAP_NAME(create_mspace_with_base)(base, len, 0);
  cr_assert_not_null(r, "create_mspace_with_base failed");
  cr_assert_not_null(PINHEAP_NAME(mspace_malloc)(r, 100));
  PINHEAP_NAME(destroy_mspace)(r);
  misuse_assert(act_destroy_mspace, r, "destroy_mspace", NOT_LIVE, r);
  misuse_assert(act_mspace_malloc, r, "mspace_malloc", NOT_LIVE, r);
  /* made again over the same region: live again, and its slot reused */
  pinheap_mspace r2 = PINHEAP_NAME(create_mspace_with_base)(base, len, 0);
  cr_assert_eq(r2, r);
  cr_assert_not_null(PINHEAP_NAME(mspace_malloc)(r2, 100));
  PINHEAP_NAME(destroy_mspace)(r2);
  munmap(base, len);

  /* never an mspace: the middle of a malloc'd block */
  char *p = PINHEAP_NAME(malloc)(4096);
  cr_assert_not_null(p);
  misuse_assert(act_mspace_malloc, p + 1024, "mspace_malloc", NOT_LIVE, p + 1024);
  PINHEAP_NAME(free)(p);
}

Test(misuse, mspace_double_free)
{
  pinheap_mspace m = PINHEAP_NAME(create_mspace)(0, 1);
  cr_assert_not_null(m, "create_mspace failed");
  void *a = PINHEAP_NAME(mspace_malloc)(m, 100), *p = PINHEAP_NAME(mspace_malloc)(m, 100);
  void *b = PINHEAP_NAME(mspace_malloc)(m, 100);
  cr_assert(a && p && b, "setup failed");
  PINHEAP_NAME(mspace_free)(m, p);
  mspace_op_t op = { m, p };
  misuse_assert(act_mspace_free, &op, "mspace_free", "double free", p);
}

Test(misuse, fixed_mspace_free_of_other_region_pointer)
{
  region_t ra, rb;
  region_map(256 * KiB, &ra);
  region_map(256 * KiB, &rb);
  pinheap_mspace a = PINHEAP_NAME(create_mspace_with_base)(ra.rw, ra.rw_len, 0);
  pinheap_mspace b = PINHEAP_NAME(create_mspace_with_base)(rb.rw, rb.rw_len, 0);
  cr_assert(a && b, "create_mspace_with_base failed (errno %d)", errno);
  void *pa = PINHEAP_NAME(mspace_malloc)(a, 100);
  cr_assert_not_null(pa, "mspace_malloc failed");
  mspace_op_t op = { b, pa };
  misuse_assert(act_mspace_free, &op, "mspace_free", "invalid pointer", pa);
  op = (mspace_op_t){ a, (char *)pa + 8 };
  misuse_assert(act_mspace_free, &op, "mspace_free", "invalid pointer", (char *)pa + 8);
  PINHEAP_NAME(destroy_mspace)(a);
  PINHEAP_NAME(destroy_mspace)(b);
  region_unmap(&ra);
  region_unmap(&rb);
}

/* The first chunk of a fresh heap sits right after its segment header, so
 * the granule start below it is the segment's base: freeing it must be
 * named, and must not read the 16 bytes before it, which lie in memory that
 * is not pinheap's. */
Test(misuse, free_of_a_segment_base)
{
  char *p = PINHEAP_NAME(malloc)(1100);         /* a chunk, not a slab block */
  cr_assert_not_null(p);
  char *base = (char *)((uintptr_t)p & ~(uintptr_t)0xffff);
  cr_assert(PINHEAP_NAME(owns)(base), "the granule of the first block is pinheap's");
  misuse_assert(act_free, base, "free", "invalid pointer", base);
}

/* ---- writes after free, caught before the chunk is handed out again -------- */

/* Chunks of 1072 bytes (slab blocks, up to 512 bytes, have no header), few
 * enough that the arena's deferred lists keep them (under 1 MiB). */
#define WAF_CHUNKS 512
#define WAF_SIZE 1064

/* Frees many chunks of one size, so that the thread cache gives the first
 * ones back to its arena as a bundle, then damages the header of the first
 * (its size looks valid: 1072 becomes 1088) and allocates that size until the
 * bundle comes back out.  The check of a bundle leaving the arena must
 * name the damaged chunk; handing it out would overlap its neighbour. */
static void act_write_after_free(void *arg)
{
  void **p = arg;
  for (int i = 0; i < WAF_CHUNKS; i++)
    PINHEAP_NAME(free)(p[i]);
  uint64_t head;
  memcpy(&head, (char *)p[0] - 8, 8);
  head += 16;                                  /* the size field: 1072 -> 1088 */
  memcpy((char *)p[0] - 8, &head, 8);
  for (int i = 0; i < 2 * WAF_CHUNKS; i++)
    if (PINHEAP_NAME(malloc)(WAF_SIZE) == p[0])
      _exit(3);                                /* handed out: not caught */
}

Test(misuse, write_after_free_of_a_deferred_chunk)
{
  static void *p[WAF_CHUNKS];
  for (int i = 0; i < WAF_CHUNKS; i++) {
    p[i] = PINHEAP_NAME(malloc)(WAF_SIZE);
    cr_assert_not_null(p[i], "malloc failed");
  }
  cr_assert_eq(PINHEAP_NAME(malloc_usable_size)(p[0]), WAF_SIZE, "the test needs 1072-byte chunks");
  /* (at PINHEAP_DEBUG=2 the checker after the first malloc finds it before
   * the chunk is reached) */
  misuse_assert_or_checker(act_write_after_free, p, "malloc", "corrupted chunk header", p[0],
                           "the write after free");
}

/* The same damage, found by the heap checker while the chunk waits. */
Test(misuse, heap_check_sees_a_damaged_deferred_chunk)
{
  static void *p[WAF_CHUNKS];
  for (int i = 0; i < WAF_CHUNKS; i++)
    p[i] = PINHEAP_NAME(malloc)(WAF_SIZE);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0, "heap unsound before the test");
  for (int i = 0; i < WAF_CHUNKS; i++)
    PINHEAP_NAME(free)(p[i]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0, "heap unsound after the frees");
  uint64_t head, saved;
  memcpy(&head, (char *)p[0] - 8, 8);
  saved = head;
  head += 16;
  memcpy((char *)p[0] - 8, &head, 8);
  int problems = PINHEAP_NAME(malloc_check)();
  memcpy((char *)p[0] - 8, &saved, 8);
  cr_assert_geq(problems, 1, "a damaged deferred chunk went unnoticed by the checker");
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0, "heap unsound after repair");
}

/* A chunk of another thread's arena, freed twice here: the second free
 * finds it on the way back to its arena. */
static void *remote_alloc(void *arg)
{
  *(void **)arg = PINHEAP_NAME(malloc)(100);
  return NULL;
}

static void act_remote_double_free(void *p)
{
  PINHEAP_NAME(free)(p);
  PINHEAP_NAME(free)(p);
}

Test(misuse, double_free_of_another_arenas_chunk)
{
  PINHEAP_NAME(mallopt)(M_ARENA_MAX, 8);
  void *mine = PINHEAP_NAME(malloc)(100);             /* this thread: the first arena */
  void *theirs = NULL;
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, remote_alloc, &theirs), 0, "pthread_create failed");
  pthread_join(t, NULL);
  cr_assert(mine != NULL && theirs != NULL, "setup failed");
  misuse_assert(act_remote_double_free, theirs, "free", "double free", theirs);
}

/* ---- PINHEAP_DEBUG=2: the full checker after every call -------------------- */

/* A write after free that no fast path looks at (the footer of a free,
 * binned chunk): at level 2 the very next call ends the process, naming
 * the call and, above it, what the checker found; at level 1 it is seen
 * by the next malloc_check() only. */
static void act_footer_then_malloc(void *arg)
{
  char *after = arg;
  size_t bad = 12345;
  memcpy(after - 16, &bad, sizeof(bad));   /* the freed chunk's footer */
  void *p = PINHEAP_NAME(malloc)(10);
  fprintf(stderr, "malloc(10) returned %p\n", p);
}

Test(misuse, debug_level_2_checks_after_every_call)
{
#if PINHEAP_DEBUG_LEVEL < 2
  cr_skip_test("built with PINHEAP_DEBUG=%d: the checker runs after every call only at level 2 "
               "(test/run.sh's debug2 pass builds that)", PINHEAP_DEBUG_LEVEL);
#else
  char *a = PINHEAP_NAME(malloc)(3000), *b = PINHEAP_NAME(malloc)(3000), *c = PINHEAP_NAME(malloc)(100);
  cr_assert(a && b && c, "setup failed");
  PINHEAP_NAME(free)(a);                   /* too big for a thread cache: binned */
  misuse_result_t r;
  misuse_run(act_footer_then_malloc, b, &r);
  cr_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT,
            "a damaged footer went unnoticed by the next malloc at PINHEAP_DEBUG=2 (status 0x%x); "
            "stderr: \"%s\"", r.status, r.out);
  cr_assert(strstr(r.out, "pinheap: heap check: free chunk footer wrong at ") != NULL,
            "the checker did not name the damage; stderr: \"%s\"", r.out);
  cr_assert(strstr(r.out, "pinheap: malloc(): the heap checker (PINHEAP_DEBUG=2) found the problems "
                          "above after this call") != NULL,
            "the abort line does not name malloc; stderr: \"%s\"", r.out);
#endif
}
