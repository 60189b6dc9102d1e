/*
 * tcache.c -- per-thread caches, the slow paths of the inline fast paths
 * of front.h: getting a thread's cache, refilling a list, giving a list
 * back to the arena as a bundle, growing and scavenging list limits, chunks
 * of other arenas handed back through their remote stacks, and the exit of
 * a thread (everything it cached goes back).  Main entry points:
 * front_malloc_slow() and front_free_slow().
 *
 * A thread's cache holds chunks of its own arena only (the kind map's byte
 * names the arena).  Each size has a list and a spare: a full list becomes
 * the spare and the spare before it goes back to the arena as one bundle
 * (types.h); an empty list takes the spare, or a bundle.  List limits grow
 * with use within a per-thread budget (tcache_grow).  Chunks of another
 * arena are gathered by size and handed back as bundles through that
 * arena's lock-free remote stack, which the owner takes in whole the next
 * time it takes its lock.
 */
#include "allocator/front/front.h"
#include "allocator/base/startup.h"     /* PH_STARTUP: once per process, thread or arena */

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* Thread cache list limits, in bundles (see tcache_grow). */
#define PH_TC_BASE_BUNDLES 2u
#define PH_TC_GROW_MAX 16u
#define PH_TC_GROW_BUDGET ((size_t)256 * 1024)
#define PH_TC_SCAVENGE 1024u

static pthread_key_t tcache_exit_key;

static ph_lock_t tc_pool_lock;            /* the pool of thread caches, below */

void tc_pool_fork_lock(void) { ph_lock(&tc_pool_lock); }
void tc_pool_fork_unlock(void) { ph_unlock(&tc_pool_lock); }

/* The sentinel, a thread's cache while it has none: every list empty,
 * every limit 0, a kind no granule has, so every fast path falls to its
 * slow path.  One for both states, told apart by tcache_gone: before the
 * first allocation (a cache is made) and while one is being made or after
 * the thread's exit (no cache again).  Initialised, it is in .data, and a
 * read fault maps its file pages around it: one copy costs every process
 * two pages fewer than two. */
static tcache_t tcache_none = {
  .kind = PH_KIND_NOTHING, .slab_max = PH_SLAB_MAX,
  .slab_cur = { [0 ... PH_SLAB_NSLOT - 1] = &slab_none } };
__thread tcache_t *tcache_tls __attribute__((tls_model("initial-exec"))) = &tcache_none;
static __thread bool tcache_gone __attribute__((tls_model("initial-exec")));

/* Thread caches live outside the heaps (they are the allocator's own
 * bookkeeping, not the program's memory): carved from mappings of their
 * own and recycled when threads exit.  Each cache has slots of whole
 * pages, with `kind` on a page boundary: a thread that caches no chunk of
 * 1 to 2 KiB (the lists before `kind`) writes the pages from `kind` on
 * only, one page (types.h: tcache_t).  A cache fresh from a mapping is
 * zeros already; one an exited thread left is zeroed again. */
static tcache_t *tc_pool_free;            /* linked through ->arena */
static char *tc_pool_cur, *tc_pool_end;

/* Bytes of a slot before its cache: `kind` falls on a page boundary. */
PH_INLINE size_t tc_pool_lead(size_t page)
{
  return (page - offsetof(tcache_t, kind) % page) % page;
}

PH_STARTUP static tcache_t *tc_pool_get(bool *fresh)
{
  tcache_t *tc;
  size_t page = os_page_size();
  size_t lead = tc_pool_lead(page);
  size_t size = align_up(lead + sizeof(tcache_t), page);

  ph_lock(&tc_pool_lock);
  tc = tc_pool_free;
  *fresh = tc == NULL;
  if (tc != NULL) {
    tc_pool_free = (tcache_t *)tc->arena;
  } else {
    if (tc_pool_cur == NULL || tc_pool_cur + size > tc_pool_end) {
      size_t len = 16 * size;
      tc_pool_cur = os_reserve_meta(len);   /* metadata: never released */
      tc_pool_end = tc_pool_cur == NULL ? NULL : tc_pool_cur + len;
    }
    if (tc_pool_cur != NULL) {
      tc = (tcache_t *)(tc_pool_cur + lead);
      tc_pool_cur += size;
    }
  }
  ph_unlock(&tc_pool_lock);
  return tc;
}

static void tc_pool_put(tcache_t *tc)
{
  ph_lock(&tc_pool_lock);
  tc->arena = (mstate_t *)tc_pool_free;
  tc_pool_free = tc;
  ph_unlock(&tc_pool_lock);
}

/* The first push or refill of list i of tc (a cache's lists start with
 * limit 0, so that making a cache writes none of them): two bundles. */
static void tc_bin_limit_init(tcache_t *tc, size_t i)
{
  if (tc->bins[i].limit == 0)
    tc->bins[i].limit = PH_TC_BASE_BUNDLES * bundle_cap(i << 4);
}

/* The calling thread's first cache (tcache_get): once per thread, compiled
 * for size (PH_STARTUP), in the window of text every process has
 * resident. */
PH_STARTUP static tcache_t *tcache_make(void)
{
  if (tcache_gone || !front_init())
    return NULL;
  tcache_gone = true;                    /* no cache while this one is being made */
  mstate_t *arena = arena_pick();
  bool fresh = true;
  tcache_t *tc = atomic_exchange_explicit(&arena->cache_slot, NULL, memory_order_acq_rel);
  if (tc == NULL)                        /* the arena's room taken: the pool */
    tc = tc_pool_get(&fresh);
  if (tc == NULL) {
    tcache_gone = false;
    return NULL;
  }
  if (!fresh)
    memset(tc, 0, sizeof(*tc));
  tc->arena = arena;
  tc->tp = front_thread_pointer();
  tc->cookie = arena->cookie;
  tc->kind = arena->kind >= PH_KIND_ARENA_TAG(0) ? arena->kind : PH_KIND_NOTHING;
  slab_tcache_init(tc);
  tc->slab_on = !arena->source->shared && !(arena->flags & PH_MS_USER);
  tc->slab_max = tc->slab_on ? PH_SLAB_MAX : 0;
  tcache_tls = tc;
  tcache_gone = false;
  pthread_setspecific(tcache_exit_key, tc);   /* no allocation: a low key */
  return tc;
}

/* The calling thread's cache, created on first use; NULL while the front
 * end is starting or the thread is exiting. */
PH_HOT tcache_t *tcache_get(void)
{
  tcache_t *tc = tcache_tls;

  if (ph_likely(tc != &tcache_none))
    return tc;
  return tcache_make();
}

mstate_t *front_arena(void)
{
  tcache_t *tc = tcache_get();
  return tc != NULL ? tc->arena : heap_default();
}

/* Hands the chunks of another heap gathered by this thread back to it. */
PH_HOT static void tcache_remote_flush(tcache_t *tc)
{
  for (unsigned w = 0; w < 2; w++) {
    while (tc->rem_used[w] != 0) {
      unsigned i = w * 64 + (unsigned)__builtin_ctzll(tc->rem_used[w]);
      tc->rem_used[w] &= tc->rem_used[w] - 1;
      ms_remote_push(tc->rem_ms, tc->rem[i].head, tc->rem[i].count);
      tc->rem[i].head = NULL;
      tc->rem[i].count = 0;
    }
  }
  tc->rem_ms = NULL;
}

/* A chunk of heap ms (size i << 4), not of this thread's arena: gathered
 * with others of its heap and size, then handed over as one bundle with
 * one compare-and-swap; the heap takes the bundle in whole. */
static void tcache_remote(tcache_t *tc, mstate_t *ms, void *mem, size_t i)
{
  if (tc->rem_ms != ms) {
    tcache_remote_flush(tc);
    tc->rem_ms = ms;
  }
  tc_bin_t *b = &tc->rem[i];
  tc_bin_push(b, mem);
  tc->rem_used[i >> 6] |= (uint64_t)1 << (i & 63);
  if (b->count >= bundle_cap(i << 4)) {
    ms_remote_push(ms, b->head, b->count);
    b->head = NULL;
    b->count = 0;
    tc->rem_used[i >> 6] &= ~((uint64_t)1 << (i & 63));
  }
}

/* Gives list l (chunks of size i << 4) back to the arena as one bundle.
 * The arena may release memory, and a release listener may free or malloc
 * on this thread: the list is detached first, so the cache is consistent
 * whenever anything outside it runs. */
static void tc_list_give_back(tcache_t *tc, tc_bin_t *l, size_t i)
{
  void *head = l->head;
  unsigned n = l->count;

  if (head == NULL)                      /* (an unused list stays unwritten) */
    return;
  l->head = NULL;
  l->count = 0;
  ms_defer_bundle(tc->arena, head, n, i << 4);
}

/* Gives the lists of size i << 4 back to the arena, as bundles. */
static void tcache_give_back(tcache_t *tc, size_t i)
{
  tc_list_give_back(tc, &tc->bins[i], i);
  tc_list_give_back(tc, &tc->spare[i], i);
}

/* A list's limit starts at two bundles; each trip to the arena (a refill
 * or a bundle given back) raises it by one, up to PH_TC_GROW_MAX, while
 * the raises of all lists stay within PH_TC_GROW_BUDGET bytes.  Every
 * PH_TC_SCAVENGE trips, the lists that made none since lose one raise (and
 * a spare longer than the new limit goes back).  So the sizes a thread
 * uses most go to the arena least, and a thread's cache stays bounded.
 * A spare's `limit` field counts its list's trips. */
static void tcache_scavenge(tcache_t *tc)
{
  for (size_t j = 2; j < PH_TC_NBINS; j++) {
    unsigned step = bundle_cap(j << 4);
    tc_bin_t *b = &tc->bins[j], *s = &tc->spare[j];
    if (s->limit == 0 && b->limit > PH_TC_BASE_BUNDLES * step) {
      b->limit -= step;
      tc->grown -= (size_t)step * (j << 4);
      if (s->count > b->limit)
        tc_list_give_back(tc, s, j);
    }
    s->limit = 0;
  }
}

PH_WARM static void tcache_grow(tcache_t *tc, size_t i)
{
  tc_bin_t *b = &tc->bins[i];
  unsigned step = bundle_cap(i << 4);
  size_t add = (size_t)step * (i << 4);

  tc->spare[i].limit++;
  if (++tc->trips % PH_TC_SCAVENGE == 0)
    tcache_scavenge(tc);
  if (b->limit < PH_TC_GROW_MAX * step && tc->grown + add <= PH_TC_GROW_BUDGET) {
    b->limit += step;
    tc->grown += add;
  }
}

/* Gives everything this thread holds back to the heaps. */
PH_HOT static void tcache_flush_all(tcache_t *tc)
{
  for (size_t i = 2; i < PH_TC_NBINS; i++)
    tcache_give_back(tc, i);
  tcache_remote_flush(tc);
}

PH_STARTUP static void tcache_exit(void *arg)
{
  tcache_t *tc = arg;

  tcache_tls = &tcache_none;
  tcache_gone = true;
  slab_thread_exit(tc);
  tcache_flush_all(tc);
  tc_pool_put(tc);
}

PH_STARTUP void tcache_init(void)
{
  pthread_key_create(&tcache_exit_key, tcache_exit);
}

/* The list becomes the spare and mem starts a new list; the old spare
 * goes back to the arena -- last, once the cache is consistent, since a
 * release listener may run then and free or malloc on this thread. */
PH_WARM void front_free_full(tcache_t *tc, tc_bin_t *b, void *mem)
{
  size_t i = (size_t)(b - tc->bins);
  tc_bin_t *s = &tc->spare[i];
  void *old = s->head;
  unsigned old_count = s->count;

  if (ph_unlikely(i < 2))                /* no chunk is under 32 bytes */
    ph_fatal("free", "invalid pointer", mem);
  if (ph_unlikely(b->limit == 0)) {      /* the list's first push */
    tc_bin_limit_init(tc, i);
    tc_bin_push(b, mem);
    return;
  }
  s->head = b->head;
  s->count = b->count;
  b->head = NULL;
  b->count = 0;
  tc_bin_push(b, mem);
  if (old != NULL) {
    int saved = errno;
    ms_defer_bundle(tc->arena, old, old_count, i << 4);
    tcache_grow(tc, i);
    errno = saved;
  }
}

void front_malloc_corrupt(void *mem)
{
  ph_fatal("malloc", "corrupted chunk header", mem);
}

/* The bin's list is empty: the spare, or a bundle from the arena. */
PH_HOT void *front_malloc_slow(size_t n)
{
  tcache_t *tc = tcache_tls;             /* a sentinel has no spares */
  size_t nb = request_to_size(n);
  tc_bin_t *b, *s;

  const mem_source_ops_t *shared = source_shared_ops();
  if (ph_unlikely(shared->due())) {     /* the shared heap: other processes' */
    int saved = errno;                  /* releases heard, this one's settled */
    shared->poll();
    errno = saved;
  }

  if (n <= PH_TC_MAX_REQUEST && (s = &tc->spare[nb >> 4])->head != NULL) {
    b = &tc->bins[nb >> 4];
    b->head = s->head;
    b->count = s->count;
    s->head = NULL;
    s->count = 0;
  } else {
    tc = tcache_get();
    if (tc == NULL || n > PH_TC_MAX_REQUEST)
      return ms_malloc(tc != NULL ? tc->arena : heap_default(), n);
    b = &tc->bins[nb >> 4];
    /* A size's first malloc on a thread of arena 0 (limit 0): one chunk,
     * not a bundle.  A size met once took two chunks (a list of
     * bundle_cap(), two for sizes above 1 KiB), the second one never used:
     * the start-up row's 32 sizes of 1-2 KiB took about 100 kB for 49 kB of
     * blocks (its arena pages 33 -> 20).  Arena 0 only, as slab.c's classes
     * met rarely: in a thread's arena, realloc at 1 thread (its workload on
     * a thread) peaked 100 kB higher with it. */
    bool one = b->limit == 0 && tc->arena == heap_main_get();
    tc_bin_limit_init(tc, nb >> 4);
    void *list;
    unsigned got = ms_alloc_batch(tc->arena, nb, one ? 1 : b->limit, &list);
    if (got == 0)                        /* no whole list: one chunk, of whatever size */
      return ms_malloc(tc->arena, n);
    /* The arena may have released memory, and a release listener run on
     * this thread may have refilled the list meanwhile: keep both. */
    if (ph_unlikely(b->head != NULL)) {
      void *last = list;
      while (*(void **)last != NULL)
        last = *(void **)last;
      *(void **)last = b->head;
    }
    b->head = list;
    b->count += got;
    void *p = tc_bin_pop(b, b->head, nb);
    tcache_grow(tc, nb >> 4);            /* may give a spare back: after the pop */
    return p;
  }
  return tc_bin_pop(b, b->head, nb);
}

/* A block of a slab class that arena 0, tc's arena, has met rarely: fewer
 * than PH_SLAB_SPARSE mallocs of it while it had no page (slab.c:
 * slab_next_page, which counts every one, so that a class used in a
 * malloc/free loop leaves this slow path after PH_SLAB_SPARSE rounds).  A
 * chunk, as the sizes above the slab classes get, so that a class met a few
 * times takes no page of its own: one 4 KiB page of memory (the page
 * header's and the first carve's) and a 64 KiB granule of the arena per
 * class, for a block or two; chunks of mixed sizes share pages, as glibc's
 * do.  The start-up row's 64 blocks of 64 sizes took 20 such pages and, 20
 * granules being more than a segment, a second segment.
 *
 * Arena 0 only: it is where a process's start-up, its libraries' set-up and
 * a small program's scattered blocks land.  In a thread's arena, the realloc
 * workload (on a thread) peaked 1 MiB higher (3.7 -> 4.8 MB; likely, not
 * traced: blocks that started as chunks stay chunks through every realloc
 * and grow in place at the top of the heap, where a slab block moves
 * through the classes and then into a thread cache's chunks).  And
 * an arena's first page is taken at once: the arena's first chunk is laid
 * out for it (state.c: ms_create).  A chunk this thread freed (free put it
 * on its list) goes first, else one from the arena by ms_malloc (in the hot
 * text: ms_alloc_batch, in plain .text, made falseshare_passive, whose
 * main thread hands each worker one block, 64 kB of text larger).  Free, realloc, malloc_usable_size
 * and the checks take it as any chunk (free tells it from a slab block by
 * the kind map).  Once per block of a class met rarely: compiled for size
 * (PH_STARTUP), in the window of text every process has resident. */
PH_STARTUP void *tcache_sparse_malloc(tcache_t *tc, size_t n, int saved)
{
  size_t nb = request_to_size(n);
  tc_bin_t *b = &tc->bins[nb >> 4];
  void *p = b->head != NULL ? tc_bin_pop(b, b->head, nb) : ms_malloc(tc->arena, n);
  if (p != NULL)
    errno = saved;
  return p;
}

/* A chunk of an arena's segment that the fast path did not take: another
 * arena's, this thread's with a full list, a first free on this thread, or
 * misuse.  Only a small in-use chunk whose header passes its heap's check
 * is cached; everything else goes to the heap, which names any misuse. */
PH_HOT void front_free_slow(void *mem, uintptr_t o, const char *fn)
{
  if (slab_page_of(mem) != NULL) {
    slab_free_slow(mem, fn);             /* (keeps errno itself) */
    return;
  }
  int saved = errno;
  if (o == 0)
    ph_fatal(fn, "invalid pointer", mem);
  if ((o & PH_OWNER_TAGS) || ((uintptr_t)mem & PH_ALIGN_MASK) ||
      (char *)mem_chunk(mem) < (char *)seg_first(owner_seg(o))) {
    ms_free_owned(o, mem, fn);      /* huge, an mspace's, misaligned or no chunk */
    errno = saved;
    return;
  }
  mstate_t *ms = owner_seg(o)->ms;
  size_t head = chunk_head(mem_chunk(mem));
  tcache_t *tc = tcache_get();
  if (tc != NULL && (head & PH_TC_HEAD_MASK) == PH_CINUSE && (head & 0x7e0) != 0 &&
      head_ok(ms, mem_chunk(mem))) {
    size_t i = (head >> 4) & 0x7f;
    if (chunk_mem_waiting(mem))
      ph_fatal(fn, "double free", mem);
    tc_bin_t *b = &tc->bins[i];
    if (ms != tc->arena) {
      tcache_remote(tc, ms, mem, i);
    } else {
      if (b->count >= b->limit)
        front_free_full(tc, b, mem);
      else
        tc_bin_push(b, mem);
    }
    errno = saved;
    return;
  }
  ms_free_owned(o, mem, fn);    /* validates the header, names any misuse */
  errno = saved;
}

/* Checks one list of the calling thread's cache: n chunks of size `size`
 * of heap ms (or of any heap if ms is NULL). */
static int tcache_check_list(const tc_bin_t *l, size_t size, const mstate_t *ms, const char *what)
{
  int problems = 0;
  uint32_t n = 0;

  for (void *m = l->head; m != NULL && n <= l->count; m = *(void **)m, n++) {
    uintptr_t o = owner_map_get(m);
    const mstate_t *owner = (o == 0 || (o & PH_OWNER_TAGS)) ? NULL : owner_seg(o)->ms;
    const chunk_t *c = mem_chunk(m);
    if (owner == NULL || (ms != NULL && owner != ms) || !chunk_is_waiting(owner, c, size)) {
      ph_log_plain(PH_LOG_ERROR,
                   "heap check: thread cache %s holds a chunk that is not a waiting chunk of "
                   "its size at %p", what, (const void *)c);
      return problems + 1;
    }
  }
  if (n != l->count) {
    ph_log_plain(PH_LOG_ERROR, "heap check: thread cache %s list length disagrees with its count",
                 what);
    problems++;
  }
  return problems;
}

int tcache_check_mine(void)
{
  tcache_t *tc = tcache_tls;
  int problems = 0;

  if (tc == &tcache_none)
    return 0;
  for (size_t i = 0; i < PH_TC_NBINS; i++) {
    problems += tcache_check_list(&tc->bins[i], i << 4, tc->arena, "list");
    problems += tcache_check_list(&tc->spare[i], i << 4, tc->arena, "spare");
    problems += tcache_check_list(&tc->rem[i], i << 4, tc->rem_ms, "remote list");
  }
  return problems + slab_check_mine(tc);
}

/* The statistics and checks see this thread's cached chunks as free: its
 * cache is returned first.  (Other threads' caches count as in use.) */
void tcache_flush_mine(const char *fn)
{
  tcache_t *tc = tcache_tls;
  if (tc != &tcache_none) {
    slab_flush_mine(tc, fn);
    tcache_flush_all(tc);
  }
}
