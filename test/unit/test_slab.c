/*
 * test_slab.c -- the slab pages of small blocks (allocator/front/slab.c): blocks
 * of up to 1024 bytes are headerless and packed by size class, misuse of them is
 * still named (interior pointers, the page header, double frees -- local,
 * on a full page, from another thread --, a damaged free list link), frees
 * from other threads and pages of exited threads come back, realloc keeps
 * the class in place, trim gives empty pages back, and a forked child may
 * free another thread's blocks.  Main entry point: the Test() cases.
 */
#include "test_util.h"

#include "allocator/heap/chunk.h"      /* the kind map, the free key */

#define SLAB_MAX 1024u

static void act_free(void *p) { PINHEAP_NAME(free)(p); }
static void act_realloc(void *p) { (void)PINHEAP_NAME(realloc)(p, 200); }
static void act_usable(void *p) { volatile size_t n = PINHEAP_NAME(malloc_usable_size)(p); (void)n; }
static void act_free_twice(void *p)
{
  PINHEAP_NAME(free)(p);
  PINHEAP_NAME(free)(p);
}

static size_t in_use(void) { return PINHEAP_NAME(mallinfo2)().uordblks; }

/* An arena with slab pages gives a class a page of its own only once it has
 * served PH_SLAB_SPARSE mallocs of it (the first ones are chunks: test
 * test_sparse): n's class is brought there. */
static void slab_class_warm(size_t n)
{
  for (unsigned k = 0; k < PH_SLAB_SPARSE; k++) {
    void *volatile p = PINHEAP_NAME(malloc)(n);
    PINHEAP_NAME(free)(p);
  }
}

/* ---- layout ---------------------------------------------------------------- */

/* 32-byte requests take 32 bytes each (a chunk would take 48), packed. */
Test(slab, small_blocks_are_headerless_and_packed)
{
  enum { N = 4096 };
  static char *p[N];
  slab_class_warm(32);
  size_t base = in_use();
  unsigned adjacent = 0;
  for (int i = 0; i < N; i++) {
    p[i] = PINHEAP_NAME(malloc)(32);
    cr_assert_not_null(p[i]);
    cr_assert_eq((uintptr_t)p[i] % 16, 0, "malloc(32) = %p is not 16-aligned", (void *)p[i]);
    cr_assert_eq(PINHEAP_NAME(malloc_usable_size)(p[i]), 32, "usable size of malloc(32) = %zu",
                 PINHEAP_NAME(malloc_usable_size)(p[i]));
    memset(p[i], i & 0xff, 32);
    if (i > 0 && p[i] == p[i - 1] + 32)
      adjacent++;
  }
  size_t grown = in_use() - base;
  cr_assert_leq(grown, (size_t)N * 32, "%d x malloc(32) took %zu bytes in use, expected %zu", N, grown,
                (size_t)N * 32);
  cr_assert_geq(adjacent, N * 9 / 10, "only %u of %d blocks follow the one before", adjacent, N);
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < 32; k++)
      cr_assert_eq((unsigned char)p[i][k], (unsigned)(i & 0xff), "block %d overwritten", i);
    PINHEAP_NAME(free)(p[i]);
  }
  cr_assert_eq(in_use(), base, "in use %zu after freeing every block, expected %zu", in_use(), base);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* The block size a request of n bytes gets: 16-byte steps to 128, then
 * four classes per doubling (160, 192, 224, 256, 320, ...). */
static size_t slab_class_bytes(size_t n)
{
  if (n <= 128)
    return (n + 15) & ~(size_t)15;
  size_t pow = 128;
  while (pow * 2 < n)
    pow *= 2;
  size_t step = pow / 4;
  return (n + step - 1) / step * step;
}

/* Every request size up to the limit gets a block of its class (malloc(0)
 * is a chunk's: the fast path tests 1 .. 1024 in one compare). */
Test(slab, every_class_has_its_block_size)
{
  for (size_t n = 1; n <= SLAB_MAX; n++) {
    slab_class_warm(n);
    void *p = PINHEAP_NAME(malloc)(n);
    cr_assert_not_null(p);
    size_t want = slab_class_bytes(n);
    cr_assert_eq(PINHEAP_NAME(malloc_usable_size)(p), want, "malloc(%zu): usable %zu, expected %zu", n,
                 PINHEAP_NAME(malloc_usable_size)(p), want);
    memset(p, 0x77, want);
    PINHEAP_NAME(free)(p);
  }
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

Test(slab, calloc_zeroes_reused_blocks)
{
  void *p[64];
  for (int i = 0; i < 64; i++) {
    p[i] = PINHEAP_NAME(malloc)(200);
    memset(p[i], 0xee, 200);
  }
  for (int i = 0; i < 64; i++)
    PINHEAP_NAME(free)(p[i]);
  for (int i = 0; i < 64; i++) {
    unsigned char *q = PINHEAP_NAME(calloc)(1, 200);
    cr_assert_not_null(q);
    for (int k = 0; k < 200; k++)
      cr_assert_eq(q[k], 0, "calloc(1, 200) byte %d is 0x%x", k, q[k]);
    p[i] = q;
  }
  for (int i = 0; i < 64; i++)
    PINHEAP_NAME(free)(p[i]);
}

/* ---- misuse ------------------------------------------------------------------ */

Test(slab, interior_pointers_are_named)
{
  char *p = PINHEAP_NAME(malloc)(48);
  char *q = PINHEAP_NAME(malloc)(48);
  cr_assert(p && q);
  misuse_assert(act_free, p + 16, "free", "invalid pointer", p + 16);
  misuse_assert(act_free, p + 8, "free", "invalid pointer", p + 8);
  misuse_assert(act_realloc, p + 32, "realloc", "invalid pointer", p + 32);
  misuse_assert(act_usable, p + 16, "malloc_usable_size", "invalid pointer", p + 16);
}

/* The page header sits after the blocks, at the end of the granule; a
 * multiple of the block size past the last block is no block either. */
Test(slab, the_page_header_is_no_block)
{
  char *p = PINHEAP_NAME(malloc)(16);
  cr_assert_not_null(p);
  char *granule = (char *)((uintptr_t)p & ~(uintptr_t)0xffff);
  /* the header: 176 bytes before the next chunk, moved down a cache line
   * per granule in a cycle of 8 */
  size_t off = 0x10000 - 16 - 176 - (((uintptr_t)granule >> 16) & 7) * 64;
  char *hdr = granule + off;
  misuse_assert(act_free, hdr, "free", "invalid pointer", hdr);
  char *q = PINHEAP_NAME(malloc)(48);
  cr_assert_not_null(q);
  char *qg = (char *)((uintptr_t)q & ~(uintptr_t)0xffff);
  size_t qoff = 0x10000 - 16 - 176 - (((uintptr_t)qg >> 16) & 7) * 64;
  char *past = qg + qoff / 48 * 48;            /* just past the last block */
  misuse_assert(act_free, past, "free", "invalid pointer", past);
}

Test(slab, double_free_is_named)
{
  void *p = PINHEAP_NAME(malloc)(64);
  cr_assert_not_null(p);
  misuse_assert(act_free_twice, p, "free", "double free", p);
  misuse_assert(act_usable, (PINHEAP_NAME(free)(p), p), "malloc_usable_size", "double free", p);
}

/* Every offset of a page but a block's start is refused, whatever the
 * class and the header's place: the page's multiply-and-compare test
 * (slab_page_t: mulc, lim) against the plain arithmetic. */
Test(slab, only_block_starts_pass_the_block_test)
{
  for (size_t bsize = 16; bsize <= SLAB_MAX; bsize = slab_class_bytes(bsize + 1)) {
    enum { K = 9 };                     /* a block of several pages: several headers' places */
    void *p[K];
    slab_class_warm(bsize);
    for (int k = 0; k < K; k++) {
      p[k] = PINHEAP_NAME(malloc)(bsize);
      cr_assert_not_null(p[k]);
      const slab_page_t *pg = slab_page_at(p[k]);
      uintptr_t granule = (uintptr_t)p[k] & ~(uintptr_t)0xffff;
      size_t hdr = 0x10000 - 16 - 176 - 7 * 64 + ((granule >> 16) * 29 % 8) * 64;
      size_t span = hdr / bsize * bsize;
      cr_assert_eq((uintptr_t)pg, granule + hdr, "page header of %p at %p, expected %#zx into it",
                   p[k], (void *)pg, hdr);
      for (uint64_t u = 0; u < 0x10000; u++) {
        bool block = u % bsize == 0 && u < span;
        if ((u * pg->mulc < pg->lim) != block)
          cr_assert_fail("class %zu, header at %#zx: offset %#llx taken for %s", bsize, hdr,
                   (unsigned long long)u, block ? "no block" : "a block");
      }
      while (slab_page_at(PINHEAP_NAME(malloc)(bsize)) == pg)   /* on to the next page */
        ;
    }
  }
}

/* Blocks freed by their thread into its full pages are handed out again
 * before any new page is taken: many (the page goes back to the pages
 * with room) or a few per page (below its mark: malloc looks at the
 * oldest full pages).  The checker agrees with the counts all along, and
 * with the current page of each of the class's sizes: the blocks are
 * asked for with `size` and `size2` in turn (one class). */
static bool in_set(void *const *set, int n, const void *q)
{
  for (int i = 0; i < n; i++)
    if (set[i] == q)
      return true;
  return false;
}

static void full_pages_refill(size_t size, size_t size2, int every)
{
  enum { N = 4096 };                    /* 512 bytes: 127 per page, 32 full pages */
  static void *p[N], *freed[N], *again[N];
  int nfreed = 0;
  for (int i = 0; i < N; i++) {
    p[i] = PINHEAP_NAME(malloc)(size);
    cr_assert_not_null(p[i]);
  }
  for (int i = 0; i < N - 256; i += every) {  /* (not the last pages: the current one) */
    PINHEAP_NAME(free)(p[i]);
    freed[nfreed++] = p[i];
    p[i] = NULL;
  }
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
  const slab_page_t *cur = slab_page_at(p[N - 1]);   /* the current page has room left */
  for (int i = 0; i < nfreed; i++) {
    again[i] = PINHEAP_NAME(malloc)(i & 1 ? size2 : size);
    cr_assert(slab_page_at(again[i]) == cur || in_set(freed, nfreed, again[i]),
              "block %d of %d allocated again, %p, is none of those freed (one in %d) and not "
              "on the current page", i, nfreed, again[i], every);
    if (i % 61 == 0)
      cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0, "after block %d of %d allocated again", i,
                   nfreed);
  }
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
  for (int i = 0; i < nfreed; i++)
    PINHEAP_NAME(free)(again[i]);
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(free)(p[i]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

Test(slab, many_frees_into_full_pages_come_back) { full_pages_refill(512, 500, 2); }
Test(slab, few_frees_into_full_pages_come_back) { full_pages_refill(512, 500, 25); }  /* 5 a page */
/* 897 .. 1024 bytes: a class of 8 sizes (slots of slab_cur), 63 blocks a page */
Test(slab, frees_into_full_pages_of_a_wide_class_come_back) { full_pages_refill(1024, 900, 3); }

/* Double frees into a full page are named as into any other. */
Test(slab, double_free_on_a_full_page_is_named)
{
  enum { N = 8192 };
  static void *p[N];
  for (int i = 0; i < N; i++)
    p[i] = PINHEAP_NAME(malloc)(512);   /* 127 per page: many full pages */
  misuse_assert(act_free_twice, p[5], "free", "double free", p[5]);
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(free)(p[i]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

static void *alloc_one(void *arg)
{
  *(void **)arg = PINHEAP_NAME(malloc)(96);
  return NULL;
}

/* A block of another thread's page is freed through the page's remote
 * stack; freeing it again is still a double free. */
Test(slab, double_free_of_another_threads_block_is_named)
{
  void *theirs = NULL;
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, alloc_one, &theirs), 0);
  pthread_join(t, NULL);
  cr_assert_not_null(theirs);
  misuse_assert(act_free_twice, theirs, "free", "double free", theirs);
  PINHEAP_NAME(free)(theirs);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

static void act_corrupt_link_then_malloc(void *arg)
{
  void **pq = arg;
  PINHEAP_NAME(free)(pq[0]);
  PINHEAP_NAME(free)(pq[1]);                   /* the list: pq[1] -> pq[0] */
  memset(pq[1], 0x41, 8);                      /* its link, written after free */
  void *a = PINHEAP_NAME(malloc)(80);          /* pops pq[1]: its link leads out */
  fprintf(stderr, "malloc returned %p\n", a);
}

static void act_secret_link_then_malloc(void *arg)
{
  void **pq = arg;
  PINHEAP_NAME(free)(pq[0]);
  PINHEAP_NAME(free)(pq[1]);                   /* the list: pq[1] -> pq[0] */
  *(uintptr_t *)pq[1] = slab_page_at(pq[1])->secret;   /* decodes to 0 */
  void *a = PINHEAP_NAME(malloc)(80);
  fprintf(stderr, "malloc returned %p\n", a);
}

Test(slab, a_damaged_free_list_link_is_named)
{
  static void *pq[2];
  pq[0] = PINHEAP_NAME(malloc)(80);
  pq[1] = PINHEAP_NAME(malloc)(80);
  cr_assert(pq[0] && pq[1]);
  misuse_assert(act_corrupt_link_then_malloc, pq, "malloc", "corrupted free list at block", pq[1]);
}

/* The empty list of a page ends at once, at its header, whose first word
 * (the secret) decodes to the link 0; malloc's one test finds both that
 * and a damaged link (front.h: slab_pop_try), and the slow path tells them
 * apart.  A link overwritten with the secret itself decodes to 0 as well:
 * still named, not taken for the end of the list -- also when the current
 * page has no block left to carve and a page with room waits, which an
 * empty current page gives way to at once (slab.c: slab_malloc_slow).
 * The first page gets room (a tenth of its blocks freed) to be that page;
 * the second, current one is used up but for the last two blocks, freed
 * by the misuse. */
Test(slab, a_link_that_decodes_as_an_empty_list_is_named)
{
  enum { N = 4096 };
  static void *p[N];
  static void *pq[2];
  slab_class_warm(80);
  int n = 0;
  p[n++] = PINHEAP_NAME(malloc)(80);
  cr_assert_not_null(p[0]);
  while (n < N && slab_page_at(p[n - 1]) == slab_page_at(p[0]))
    p[n++] = PINHEAP_NAME(malloc)(80);
  cr_assert_lt(n, N);
  const slab_page_t *cur = slab_page_at(p[n - 1]);
  for (uint32_t k = 1; k < cur->span / 80; k++) {  /* the rest of the current page */
    cr_assert_lt(n, N);
    p[n++] = PINHEAP_NAME(malloc)(80);
    cr_assert_eq(slab_page_at(p[n - 1]), cur);
  }
  for (int i = 0; slab_page_at(p[i]) != cur; i += 10)   /* the first page: room again */
    PINHEAP_NAME(free)(p[i]);
  pq[0] = p[n - 1];
  pq[1] = p[n - 2];
  misuse_assert(act_secret_link_then_malloc, pq, "malloc", "corrupted free list at block", pq[1]);
}

/* Eight granules in a row have their page headers at eight different
 * cache lines, from the lowest offset to the last one (types.h:
 * PH_SLAB_COLOR_MUL). */
Test(slab, headers_of_8_granules_in_a_row_take_8_lines)
{
  for (uintptr_t g0 = 0x10; g0 < 0x7fff0000; g0 = g0 * 3 + 5) {
    unsigned lines = 0;
    for (uintptr_t g = g0; g < g0 + 8; g++) {
      uintptr_t off = (uintptr_t)slab_page_of_granule(g) - (g << 16);
      cr_assert(off % 64 == 0 && off >= 0x10000 - 16 - 176 - 7 * 64 && off <= 0x10000 - 16 - 176,
                "granule %#lx: header at %#lx into it", (unsigned long)g, (unsigned long)off);
      lines |= 1u << ((off >> 6) & 7);
    }
    cr_assert_eq(lines, 0xffu, "granules %#lx..+7: header lines %#x", (unsigned long)g0, lines);
  }
}

/* A page given back to the arena clears the free keys of its blocks and
 * checks their links on the way (slab.c: page_keys_clear, a sweep of the
 * page in address order): a link written after free is named then too,
 * even if no malloc pops that block first.  Every block of one page is
 * freed, the first one's link damaged meanwhile; the page waits empty in
 * the arena's cache, and malloc_trim gives it back: the report names
 * malloc_trim, the call that found the damage. */
enum { KEYS_MAX = 512 };
static void *keys_blk[KEYS_MAX];
static int keys_n;

static void act_damage_then_trim(void *arg)
{
  (void)arg;
  PINHEAP_NAME(free)(keys_blk[0]);
  memset(keys_blk[0], 0x41, 8);                /* its link, written after free */
  for (int i = 1; i < keys_n; i++)
    PINHEAP_NAME(free)(keys_blk[i]);
  PINHEAP_NAME(malloc_trim)(0);
  fprintf(stderr, "malloc_trim returned\n");
}

Test(slab, a_damaged_link_in_a_page_given_back_is_named)
{
  /* the blocks of a 400-byte class page, up to the first of the next page */
  uintptr_t first = 0;
  for (keys_n = 0; keys_n < KEYS_MAX; keys_n++) {
    void *b = PINHEAP_NAME(malloc)(400);
    cr_assert_not_null(b);
    uintptr_t g = (uintptr_t)b >> PH_GRANULE_SHIFT;
    if (keys_n == 0)
      first = g;
    else if (g != first)
      break;                                   /* b stays in use: its page is current */
    keys_blk[keys_n] = b;
  }
  cr_assert(keys_n > 1 && keys_n < KEYS_MAX, "%d blocks of 400 bytes in one page (scenario)", keys_n);
  misuse_assert_or_checker(act_damage_then_trim, NULL, "malloc_trim", "corrupted free list at block",
                           keys_blk[0], "the damaged link");
}

static void act_check_after_write(void *arg)
{
  void **pq = arg;
  PINHEAP_NAME(free)(pq[0]);
  memset(pq[0], 0, 16);                        /* the link and the key */
  _exit(PINHEAP_NAME(malloc_check)() > 0 ? 7 : 0);
}

/* (The page keeps a block in use: an empty page goes back to the arena
 * without its free list being walked.) */
Test(slab, the_checker_sees_a_write_after_free)
{
  static void *pq[2];
  pq[0] = PINHEAP_NAME(malloc)(80);
  pq[1] = PINHEAP_NAME(malloc)(80);
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDERR_FILENO);
    act_check_after_write(pq);
  }
  int status;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 7,
            "malloc_check() did not see a freed block's words overwritten (status 0x%x)", status);
}

/* ---- threads ---------------------------------------------------------------- */

typedef struct handoff_s {
  void *blk[2000];
  int n;
} handoff_t;

static void *produce(void *arg)
{
  handoff_t *h = arg;
  for (int i = 0; i < h->n; i++) {
    h->blk[i] = PINHEAP_NAME(malloc)(16 + (size_t)(i % 8) * 16);
    memset(h->blk[i], 0x3c, 16);
  }
  return NULL;
}

/* Blocks a live thread keeps allocating are freed here: its pages take
 * them back, so its footprint stays flat. */
static pthread_mutex_t pc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pc_cv = PTHREAD_COND_INITIALIZER;
static int pc_round, pc_done;
static handoff_t pc_h = { .n = 2000 };

static void *producer_loop(void *arg)
{
  (void)arg;
  for (int r = 0; r < 40; r++) {
    produce(&pc_h);
    pthread_mutex_lock(&pc_mu);
    pc_round = r + 1;
    pthread_cond_broadcast(&pc_cv);
    while (pc_done != r + 1)
      pthread_cond_wait(&pc_cv, &pc_mu);
    pthread_mutex_unlock(&pc_mu);
  }
  return NULL;
}

Test(slab, frees_from_another_thread_come_back)
{
  pthread_t t;
  size_t arena_after_first = 0;
  cr_assert_eq(pthread_create(&t, NULL, producer_loop, NULL), 0);
  for (int r = 0; r < 40; r++) {
    pthread_mutex_lock(&pc_mu);
    while (pc_round != r + 1)
      pthread_cond_wait(&pc_cv, &pc_mu);
    pthread_mutex_unlock(&pc_mu);
    for (int i = 0; i < pc_h.n; i++) {
      cr_assert_eq(((unsigned char *)pc_h.blk[i])[0], 0x3c);
      PINHEAP_NAME(free)(pc_h.blk[i]);
    }
    size_t arena = 0;
    struct mallinfo2 mi = PINHEAP_NAME(mallinfo2)();
    arena = mi.arena;
    if (r == 1)
      arena_after_first = arena;
    if (r > 1)
      cr_assert_leq(arena, arena_after_first + 1024 * 1024,
                    "round %d: the arenas grew from %zu to %zu bytes: remote frees not reused", r,
                    arena_after_first, arena);
    pthread_mutex_lock(&pc_mu);
    pc_done = r + 1;
    pthread_cond_broadcast(&pc_cv);
    pthread_mutex_unlock(&pc_mu);
  }
  pthread_join(t, NULL);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* The blocks of this thread's page in rs_blk[rs_from .. rs_to) are freed by
 * another thread, in that order: it gathers them (a thread that never
 * allocated is given a cache at that first free) and its exit pushes them
 * on the page's remote stack as one batch, the last freed on top. */
#define RS_N 64
#define RS_SIZE 640
static void *rs_blk[RS_N];
static int rs_from, rs_to;
static bool rs_cache = true;

static void *free_range(void *arg)
{
  (void)arg;
  if (rs_cache)
    PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(40));
  for (int i = rs_from; i < rs_to; i++)
    PINHEAP_NAME(free)(rs_blk[i]);
  return NULL;
}

static void remote_free_range(int from, int to)
{
  pthread_t t;
  rs_from = from;
  rs_to = to;
  cr_assert_eq(pthread_create(&t, NULL, free_range, NULL), 0);
  pthread_join(t, NULL);
}

/* Allocates RS_N blocks; the last three, of one page, are freed by another
 * thread.  @return the index of the first of them. */
static int remote_stack_setup(void)
{
  for (int i = 0; i < RS_N; i++) {
    rs_blk[i] = PINHEAP_NAME(malloc)(RS_SIZE);
    cr_assert_not_null(rs_blk[i]);
  }
  int k = RS_N - 3;
  uintptr_t page = (uintptr_t)rs_blk[RS_N - 1] & ~(uintptr_t)0xffff;
  while (((uintptr_t)rs_blk[k] & ~(uintptr_t)0xffff) != page)   /* (a page began there) */
    k++;
  cr_assert_leq(k, RS_N - 2, "the last blocks of %d-byte requests lie in three pages", RS_SIZE);
  remote_free_range(k, RS_N);
  return k;
}

/* Mallocs of RS_SIZE until one of rs_blk[k ..] comes back (those before
 * are kept in got[]).  @return its index. */
static int malloc_until_remote(int k, void **got, int *ngot)
{
  for (int n = 0; n < 20000; n++) {
    void *p = PINHEAP_NAME(malloc)(RS_SIZE);
    cr_assert_not_null(p);
    for (int i = k; i < RS_N; i++)
      if (p == rs_blk[i])
        return i;
    got[(*ngot)++] = p;
  }
  cr_assert_fail("20000 mallocs of %d bytes did not hand out a block freed by another thread",
                 RS_SIZE);
  return -1;
}

/* The owner takes a page's remote stack as it is, without walking it (a
 * walk is a cache miss per block, each written last on another core): the
 * block freed last, on top, is handed out first, and the blocks below keep
 * their links until they are handed out.  Their counts are right: the
 * heap checker agrees and everything comes back.  A block taken in that
 * way is still free: freeing it again is a double free. */
Test(slab, a_remote_stack_is_taken_whole)
{
  static void *got[20000];
  int ngot = 0;
  size_t before = in_use();
  int k = remote_stack_setup();
  uintptr_t below = *(uintptr_t *)rs_blk[k];   /* the bottom block's link */
  int first = malloc_until_remote(k, got, &ngot);
  cr_assert_eq(first, RS_N - 1, "the first block handed out again was the %d-th freed of %d, "
               "expected the last (the stack's top): the stack was walked", first - k + 1, RS_N - k);
  cr_assert_eq(*(uintptr_t *)rs_blk[k], below,
               "the link of a block below the stack's top was rewritten when the stack was taken");
  misuse_assert(act_free, rs_blk[k], "free", "double free", rs_blk[k]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
  for (int i = 0; i < ngot; i++)
    PINHEAP_NAME(free)(got[i]);
  for (int i = 0; i < k; i++)
    PINHEAP_NAME(free)(rs_blk[i]);
  PINHEAP_NAME(free)(rs_blk[first]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
  cr_assert_leq(in_use(), before + 64, "in use %zu -> %zu after every block was freed", before,
                in_use());
}

/* A thread that only frees (a consumer: it never allocated) is given a
 * cache at its first free of another thread's block, and gathers its
 * frees in batches as any thread with a cache does: its exit pushes the
 * three blocks as one batch, taken whole, the last freed on top.  Pushed
 * alone, as before, each block of such a thread cost a compare-and-swap on
 * the page's remote line (tools/bench/paths.py, remote_nocache: 1.0 atomic
 * per block against 0.034), the path projected to stop scaling first. */
Test(slab, a_thread_that_only_frees_gathers_its_frees_in_batches)
{
  static void *got[20000];
  int ngot = 0;
  rs_cache = false;
  int k = remote_stack_setup();
  int first = malloc_until_remote(k, got, &ngot);
  cr_assert_eq(first, RS_N - 1, "the first block handed out again was the %d-th freed of %d, "
               "expected the last (the top of one batch): the blocks were pushed alone",
               first - k + 1, RS_N - k);
  for (int i = 0; i < ngot; i++)
    PINHEAP_NAME(free)(got[i]);
  for (int i = 0; i < k; i++)
    PINHEAP_NAME(free)(rs_blk[i]);
  PINHEAP_NAME(free)(rs_blk[first]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

static void act_malloc_through_remote(void *arg)
{
  static void *got[20000];
  int ngot = 0, k = *(int *)arg;
  malloc_until_remote(k, got, &ngot);
  (void)malloc_until_remote(k, got, &ngot);   /* the damaged one: named before */
  fprintf(stderr, "the damaged block was handed out\n");
}

/* A block's link overwritten while it waits on a remote stack is named
 * when the list it became part of reaches it (at level 2, the heap checker
 * finds it in that list first). */
Test(slab, a_damaged_link_on_a_remote_stack_is_named)
{
  static int k;
  k = RS_N - 2;
  for (int i = 0; i < RS_N; i++)
    rs_blk[i] = PINHEAP_NAME(malloc)(RS_SIZE);
  if (((uintptr_t)rs_blk[k] ^ (uintptr_t)rs_blk[k + 1]) >> 16)
    k = RS_N - 4;                                /* (a page began at RS_N - 1) */
  remote_free_range(k, k + 2);
  memset(rs_blk[k], 0x41, 8);                    /* the bottom block's link */
  misuse_assert_or_checker(act_malloc_through_remote, &k, "malloc", "corrupted free list at block",
                           rs_blk[k], "a link overwritten on a remote stack");
}

/* Another thread frees blocks of two classes of this thread's pages in
 * turn.  Its remote frees are gathered by class and pushed together: none
 * comes back here while that thread keeps them and lives (a single batch
 * pushed each block alone as the class changed, one compare-and-swap per
 * block), every one once it has exited. */
#define BT_N 6
static void *bt_blk[2][BT_N];
static pthread_mutex_t bt_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bt_cv = PTHREAD_COND_INITIALIZER;
static int bt_stage;

static void bt_wait(int stage)
{
  pthread_mutex_lock(&bt_mu);
  while (bt_stage < stage)
    pthread_cond_wait(&bt_cv, &bt_mu);
  pthread_mutex_unlock(&bt_mu);
}

static void bt_set(int stage)
{
  pthread_mutex_lock(&bt_mu);
  bt_stage = stage;
  pthread_cond_broadcast(&bt_cv);
  pthread_mutex_unlock(&bt_mu);
}

static void *free_in_turn(void *arg)
{
  (void)arg;
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(40));   /* a cache of its own */
  for (int i = 0; i < BT_N; i++) {
    PINHEAP_NAME(free)(bt_blk[0][i]);
    PINHEAP_NAME(free)(bt_blk[1][i]);
  }
  bt_set(1);
  bt_wait(2);                                     /* lives on, keeping its batches */
  return NULL;
}

/* How many of bt_blk[c] the next n mallocs of their size hand out (all
 * kept in got[], *ngot counting). */
static int bt_back(int c, size_t size, int n, void **got, int *ngot)
{
  int back = 0;
  for (int k = 0; k < n; k++) {
    void *p = PINHEAP_NAME(malloc)(size);
    cr_assert_not_null(p);
    for (int i = 0; i < BT_N; i++)
      back += p == bt_blk[c][i];
    got[(*ngot)++] = p;
  }
  return back;
}

Test(slab, remote_frees_are_pushed_by_class)
{
  static void *got[1000];
  int ngot = 0;
  const size_t size[2] = { 640, 768 };
  slab_class_warm(size[0]);
  slab_class_warm(size[1]);
  for (int c = 0; c < 2; c++)
    for (int i = 0; i < BT_N; i++)
      bt_blk[c][i] = PINHEAP_NAME(malloc)(size[c]);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, free_in_turn, NULL), 0);
  bt_wait(1);
  /* 200 mallocs of a class: its page's list runs dry, the remote stack is
   * taken (before fresh blocks are carved), and a page turns over */
  int early = bt_back(0, size[0], 200, got, &ngot) + bt_back(1, size[1], 200, got, &ngot);
  bt_set(2);
  pthread_join(t, NULL);
  cr_assert_eq(early, 0, "%d of the %d blocks another thread freed in turn, two classes, came back "
               "while it kept its batches: pushed one by one", early, 2 * BT_N);
  int late = bt_back(0, size[0], 200, got, &ngot) + bt_back(1, size[1], 200, got, &ngot);
  cr_assert_eq(late, 2 * BT_N, "%d of the %d blocks freed by a thread that exited came back", late,
               2 * BT_N);
  for (int i = 0; i < ngot; i++)
    PINHEAP_NAME(free)(got[i]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* A thread exits keeping blocks: its pages are orphans, freed into from
 * here, and nothing stays counted in use. */
Test(slab, pages_of_exited_threads_are_freed_into_and_adopted)
{
  static handoff_t h[4];
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(1));
  PINHEAP_NAME(malloc_trim)(0);
  size_t base = in_use();
  for (int k = 0; k < 4; k++) {
    pthread_t t;
    h[k].n = 2000;
    cr_assert_eq(pthread_create(&t, NULL, produce, &h[k]), 0);
    pthread_join(t, NULL);
  }
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < h[k].n; i++)
      PINHEAP_NAME(free)(h[k].blk[i]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
  size_t after = in_use();
  cr_assert_leq(after, base + 64, "in use %zu -> %zu after the exited threads' blocks were freed", base,
                after);
  /* a new thread adopts the orphans' pages rather than taking new ones */
  pthread_t t;
  static handoff_t again = { .n = 2000 };
  cr_assert_eq(pthread_create(&t, NULL, produce, &again), 0);
  pthread_join(t, NULL);
  for (int i = 0; i < again.n; i++)
    PINHEAP_NAME(free)(again.blk[i]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* The free fast path knows a page's owner by its thread pointer
 * (slab_page_t: owner_tp).  A thread that exits keeping blocks leaves its
 * pages orphans, and a thread made after it often has the same thread
 * pointer (glibc reuses the stack and its TLS): that thread's frees of the
 * orphans' blocks are another thread's, not the owner's, and nothing stays
 * counted in use.  (Skipped where no thread pointer comes back.) */
static handoff_t tp_h;
static pthread_t tp_self[2];

static void *tp_produce(void *arg)
{
  tp_self[0] = pthread_self();
  return produce(arg);
}

static void *tp_free_all(void *arg)
{
  handoff_t *h = arg;
  tp_self[1] = pthread_self();
  for (int i = 0; i < h->n; i++)
    PINHEAP_NAME(free)(h->blk[i]);
  return NULL;
}

Test(slab, a_new_thread_with_an_exited_owners_thread_pointer_frees_as_another)
{
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(1));
  PINHEAP_NAME(malloc_trim)(0);
  size_t base = in_use();
  int reused = 0;
  for (int k = 0; k < 8; k++) {
    pthread_t t;
    tp_h.n = 2000;
    cr_assert_eq(pthread_create(&t, NULL, tp_produce, &tp_h), 0);
    pthread_join(t, NULL);
    cr_assert_eq(pthread_create(&t, NULL, tp_free_all, &tp_h), 0);
    pthread_join(t, NULL);
    reused += pthread_equal(tp_self[0], tp_self[1]) != 0;
    cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
  }
  size_t after = in_use();
  cr_assert_leq(after, base + 64, "in use %zu -> %zu after the exited threads' blocks were freed", base,
                after);
  if (reused == 0)
    cr_skip_test("no thread had the thread pointer of the one before");
}

/* A thread fills pages and exits; every block is freed here.  Each page,
 * an orphan, goes back to its arena's cache as its last block is freed,
 * and the next thread on that arena (the exited one's: no thread left on
 * it) takes one of them for a page of another class.  (They stayed
 * orphans of their class, empty, until malloc_trim or a thread needing a
 * page of that class adopted them: larson's pages piled up.) */
enum { OF_N = 12000, OF_G = 16 };
static void *of_blk[OF_N];

static void *fill_pages(void *arg)
{
  (void)arg;
  for (int i = 0; i < OF_N; i++)
    of_blk[i] = PINHEAP_NAME(malloc)(48);
  return NULL;
}

static void *alloc_1000(void *arg)
{
  *(void **)arg = PINHEAP_NAME(malloc)(1000);
  return NULL;
}

Test(slab, an_orphan_freed_empty_goes_back_to_the_arena)
{
  static uintptr_t granule[OF_G];
  int ng = 0;
  pthread_t t;
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(1));  /* this thread keeps its arena */
  cr_assert_eq(pthread_create(&t, NULL, fill_pages, NULL), 0);
  pthread_join(t, NULL);
  for (int i = 0; i < OF_N; i++) {
    cr_assert_not_null(of_blk[i]);
    uintptr_t g = (uintptr_t)of_blk[i] & ~(uintptr_t)(PH_GRANULE - 1);
    int k = 0;
    while (k < ng && granule[k] != g)
      k++;
    if (k == ng && ng < OF_G)
      granule[ng++] = g;
  }
  cr_assert_geq(ng, 8, "%d x malloc(48) took %d pages, expected 8 or more (scenario)", OF_N, ng);
  for (int i = 0; i < OF_N; i++)
    PINHEAP_NAME(free)(of_blk[i]);
  void *big = NULL;
  cr_assert_eq(pthread_create(&t, NULL, alloc_1000, &big), 0);
  pthread_join(t, NULL);
  cr_assert_not_null(big);
  uintptr_t g = (uintptr_t)big & ~(uintptr_t)(PH_GRANULE - 1);
  int k = 0;
  while (k < ng && granule[k] != g)
    k++;
  cr_assert_lt(k, ng, "a new thread's malloc(1000) = %p lies in none of the %d pages of the exited "
               "thread, all freed here: orphans freed empty did not go back to the arena", big, ng);
  PINHEAP_NAME(free)(big);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

static void *alloc_two(void *arg)
{
  void **pq = arg;
  pq[0] = PINHEAP_NAME(malloc)(96);
  pq[1] = PINHEAP_NAME(malloc)(500);            /* another page */
  return NULL;
}

static void act_free_orphans_block_twice(void *arg)
{
  void **pq = arg;
  PINHEAP_NAME(free)(pq[0]);
  PINHEAP_NAME(free)(pq[1]);                   /* pq[0]'s page: freed empty, cached */
  PINHEAP_NAME(free)(pq[0]);
}

/* A block of an exited thread's page, freed into it (the page given back
 * empty), then freed again: still a double free. */
Test(slab, double_free_into_an_orphan_given_back_is_named)
{
  static void *pq[2];
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, alloc_two, pq), 0);
  pthread_join(t, NULL);
  cr_assert(pq[0] && pq[1]);
  misuse_assert(act_free_orphans_block_twice, pq, "free", "double free", pq[0]);
  PINHEAP_NAME(free)(pq[0]);
  PINHEAP_NAME(free)(pq[1]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* ---- realloc, trim, fork ------------------------------------------------------ */

Test(slab, realloc_stays_in_its_class_and_moves_out_of_it)
{
  unsigned char *p = PINHEAP_NAME(malloc)(100);
  for (int i = 0; i < 100; i++)
    p[i] = (unsigned char)i;
  cr_assert_eq(PINHEAP_NAME(realloc)(p, 112), p, "realloc(100 -> 112) moved a 112-byte block");
  cr_assert_eq(PINHEAP_NAME(realloc)(p, 60), p, "realloc(112 -> 60) moved a 112-byte block");
  unsigned char *q = PINHEAP_NAME(realloc)(p, 400);
  cr_assert_not_null(q);
  for (int i = 0; i < 60; i++)
    cr_assert_eq(q[i], (unsigned char)i, "realloc to 400 lost byte %d", i);
  unsigned char *r = PINHEAP_NAME(realloc)(q, 5000);   /* to a chunk */
  cr_assert_not_null(r);
  for (int i = 0; i < 60; i++)
    cr_assert_eq(r[i], (unsigned char)i, "realloc to 5000 lost byte %d", i);
  unsigned char *s = PINHEAP_NAME(realloc)(r, 20);     /* a chunk shrinks in place */
  cr_assert_not_null(s);
  for (int i = 0; i < 20; i++)
    cr_assert_eq(s[i], (unsigned char)i, "realloc to 20 lost byte %d", i);
  PINHEAP_NAME(free)(s);
  unsigned char *t = PINHEAP_NAME(malloc)(300);
  memset(t, 9, 300);
  unsigned char *u = PINHEAP_NAME(realloc)(t, 40);      /* a slab block moves to a smaller class */
  cr_assert_not_null(u);
  for (int i = 0; i < 40; i++)
    cr_assert_eq(u[i], 9);
  PINHEAP_NAME(free)(u);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

Test(slab, trim_gives_empty_pages_back)
{
  enum { N = 100000 };
  static void *p[N];
  for (int i = 0; i < N; i++)
    p[i] = PINHEAP_NAME(malloc)(64);
  size_t arena = PINHEAP_NAME(mallinfo2)().arena;
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(free)(p[i]);
  PINHEAP_NAME(malloc_trim)(0);
  struct mallinfo2 mi = PINHEAP_NAME(mallinfo2)();
  cr_assert_lt(mi.uordblks, (size_t)64 * 1024, "in use %zu after freeing and trimming", mi.uordblks);
  cr_assert_lt(mi.arena, arena / 2, "arena %zu -> %zu bytes: empty pages not given back", arena,
               mi.arena);
}

/* A page given back to the arena as a free chunk, between chunks still in
 * use, is taken again where it lies for the next page of any class: the
 * next pages must not all come from fresh memory while such chunks wait
 * (they did, the arena's aligned allocation asking for twice a page: churn
 * at 2 threads grew its footprint with its length).  Pages of class 1024
 * (A) and 768 (B) are filled in turn, A's blocks are freed (the arena keeps
 * a few empty pages, gives the others back: some merge with free
 * neighbours), then class 640 (C) fills more pages than A had: at least a
 * third of A's granules must serve C. */
Test(slab, pages_given_back_between_others_are_taken_again)
{
  enum { NP = 24, PER = 100, G = 16 };
  static void *a[NP * PER], *b[NP * PER], *c[NP * 2 * PER];
  static uintptr_t ga[NP * PER];
  unsigned na = 0, nb = 0, ngr = 0;
  for (int k = 0; k < NP; k++) {          /* ~1.5 pages of each class a round */
    for (int i = 0; i < PER; i++)
      cr_assert_not_null(a[na++] = PINHEAP_NAME(malloc)(1024));
    for (int i = 0; i < PER; i++)
      cr_assert_not_null(b[nb++] = PINHEAP_NAME(malloc)(768));
  }
  for (unsigned i = 0; i < na; i++) {     /* the granules of A's pages, once each */
    uintptr_t g = (uintptr_t)a[i] >> G;
    unsigned j = 0;
    while (j < ngr && ga[j] != g)
      j++;
    if (j == ngr)
      ga[ngr++] = g;
  }
  for (unsigned i = 0; i < na; i++)
    PINHEAP_NAME(free)(a[i]);
  unsigned nc = 0, reused = 0;
  for (unsigned i = 0; i < NP * 2 * PER; i++)
    cr_assert_not_null(c[nc++] = PINHEAP_NAME(malloc)(640));
  for (unsigned j = 0; j < ngr; j++) {
    for (unsigned i = 0; i < nc; i++) {
      if ((uintptr_t)c[i] >> G == ga[j]) {
        reused++;
        break;
      }
    }
  }
  cr_assert_geq(reused * 3, ngr, "only %u of the %u granules of pages given back served the next "
                "pages (expected a third or more)", reused, ngr);
  for (unsigned i = 0; i < nb; i++)
    PINHEAP_NAME(free)(b[i]);
  for (unsigned i = 0; i < nc; i++)
    PINHEAP_NAME(free)(c[i]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* A page that served one class, then another, and went back to the arena
 * must leave no free key behind (the second word of a free block): a
 * chunk carved there later whose payload's second word held one was taken
 * for a freed one -- "double free" from malloc_usable_size of a memalign
 * block, found by fuzz_ops.  Class 48 fills pages and empties them (the
 * arena keeps some, keys and all), class 64 takes them and empties them,
 * and the pages the arena does not keep go back as chunks: no word of
 * theirs where a block's second word was may hold the key. */
Test(slab, a_page_given_back_leaves_no_free_key)
{
  enum { N = 12000, G = 64 };
  static void *p[N];
  static uintptr_t granule[G];
  int ng = 0;
  slab_class_warm(48);
  slab_class_warm(64);
  for (int round = 0; round < 2; round++) {
    size_t size = round == 0 ? 48 : 64;
    for (int i = 0; i < N; i++) {
      cr_assert_not_null(p[i] = PINHEAP_NAME(malloc)(size));
      uintptr_t g = (uintptr_t)p[i] & ~(uintptr_t)(PH_GRANULE - 1);
      int k = 0;
      while (k < ng && granule[k] != g)
        k++;
      if (k == ng && ng < G)
        granule[ng++] = g;
    }
    /* the second round frees its first pages (the cached ones, taken
     * first) last: they are the ones that go back, the others cached */
    for (int i = 0; i < N; i++)
      PINHEAP_NAME(free)(p[round == 0 ? i : N - 1 - i]);
  }
  int back = 0;
  size_t stale = 0;
  for (int k = 0; k < ng; k++) {
    if (owner_kind[granule[k] >> PH_GRANULE_SHIFT] == PH_KIND_SLAB)
      continue;                                  /* still a page (the arena's cache) */
    back++;
    const uint64_t *w = (const uint64_t *)granule[k];
    for (size_t i = 1; i < PH_SLAB_AREA / 8; i += 2)
      stale += w[i] == chunk_free_key;
  }
  cr_assert_gt(back, 0, "no page went back to the arena (scenario)");
  cr_assert_eq(stale, 0, "%zu free keys left in %d pages given back to the arena", stale, back);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

static pthread_mutex_t fk_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fk_cv = PTHREAD_COND_INITIALIZER;
static int fk_stage;
static void *fk_blk[500];

static void *fork_holder(void *arg)
{
  (void)arg;
  for (int i = 0; i < 500; i++)
    fk_blk[i] = PINHEAP_NAME(malloc)(48);
  pthread_mutex_lock(&fk_mu);
  fk_stage = 1;
  pthread_cond_broadcast(&fk_cv);
  while (fk_stage != 2)
    pthread_cond_wait(&fk_cv, &fk_mu);
  pthread_mutex_unlock(&fk_mu);
  for (int i = 0; i < 500; i++)
    PINHEAP_NAME(free)(fk_blk[i]);
  return NULL;
}

/* In the child, the thread that owns the pages does not exist: its blocks
 * are freed here and the heap stays sound. */
Test(slab, a_forked_child_frees_another_threads_blocks)
{
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, fork_holder, NULL), 0);
  pthread_mutex_lock(&fk_mu);
  while (fk_stage != 1)
    pthread_cond_wait(&fk_cv, &fk_mu);
  pthread_mutex_unlock(&fk_mu);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    for (int i = 0; i < 500; i++)
      PINHEAP_NAME(free)(fk_blk[i]);
    for (int i = 0; i < 500; i++)
      fk_blk[i] = PINHEAP_NAME(malloc)(48);
    for (int i = 0; i < 500; i++)
      PINHEAP_NAME(free)(fk_blk[i]);
    PINHEAP_NAME(malloc_trim)(0);
    _exit(PINHEAP_NAME(malloc_check)() == 0 ? 0 : 5);
  }
  int status;
  waitpid(pid, &status, 0);
  pthread_mutex_lock(&fk_mu);
  fk_stage = 2;
  pthread_cond_broadcast(&fk_cv);
  pthread_mutex_unlock(&fk_mu);
  pthread_join(t, NULL);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "the child freeing another thread's blocks ended with status 0x%x", status);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}
