/*
 * front.c -- the malloc family: per-thread caches over several arenas,
 * fork safety, and the process-wide entry points (mallopt, mallinfo2,
 * malloc_stats, malloc_trim).  Main entry points: malloc() and free(); their
 * fast paths are inline in front.h, the slow paths are here.
 *
 * Arenas are heaps (mstate_t) like mspaces; arena 0 is the static heap of
 * malloc.c, the others are created on demand, up to M_ARENA_MAX, and each
 * thread is given one, round robin, when it first allocates.  A thread's
 * cache holds chunks of its own arena only (the kind map's byte names the
 * arena).  Each size has a list and a spare: a full list becomes the spare
 * and the spare before it goes back to the arena as one bundle (heap.h);
 * an empty list takes the spare, or a bundle.  List limits grow with use
 * within a per-thread budget (tcache_grow).  Chunks of another arena are
 * gathered by size and handed back as bundles through that arena's
 * lock-free remote stack, which the owner takes in whole the next time it
 * takes its lock.  A thread that exits returns everything it cached.
 */
#include "front.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "params.h"
#include "pinheap.h"

#define PH_ARENA_SLOTS 256               /* hard cap of M_ARENA_MAX */
/* Thread cache list limits, in bundles (see tcache_grow). */
#define PH_TC_BASE_BUNDLES 2u
#define PH_TC_GROW_MAX 16u
#define PH_TC_GROW_BUDGET ((size_t)256 * 1024)
#define PH_TC_SCAVENGE 1024u

/* Sentinels: every list empty, every limit 0, a kind no granule has. */
static tcache_t tcache_empty = { .kind = PH_KIND_NOTHING };  /* before the first allocation */
static tcache_t tcache_dead = { .kind = PH_KIND_NOTHING };   /* after exit: no cache again */
__thread tcache_t *tcache_tls __attribute__((tls_model("initial-exec"))) = &tcache_empty;

static mstate_t *arenas[PH_ARENA_SLOTS];
static unsigned arena_max;               /* 0 until front_init(); read and set
                                            whole (relaxed atomics) */
static atomic_uint arena_next;
static ph_lock_t arenas_lock;

static pthread_key_t tcache_exit_key;
static atomic_int front_state;           /* 0 not started, 1 starting, 2 ready */

/* ======================================================================= */
/*  set-up                                                                  */
/* ======================================================================= */

static ph_lock_t tc_pool_lock;            /* the pool of thread caches, below */

/* Every lock of the allocator, always in this order. */
void malloc_prefork_lock(void)
{
  ph_lock(&arenas_lock);
  ph_lock(&tc_pool_lock);
  ms_lock_all();
}

/* In the parent and in the child: the child's copies are held by the
 * forking thread, the only thread the child has, so releasing them is
 * the same as making them new. */
void malloc_postfork_unlock(void)
{
  ms_unlock_all();
  ph_unlock(&tc_pool_lock);
  ph_unlock(&arenas_lock);
}

static void tcache_exit(void *arg);

/* CPUs this process may run on: the affinity mask, by a raw system call
 * (sysconf would bring in much of stdio's code for one number). */
static long cpu_count(void)
{
  unsigned long mask[16];
  long n = syscall(SYS_sched_getaffinity, 0, sizeof(mask), mask);
  long cpus = 0;
  for (long i = 0; n > 0 && i < n / (long)sizeof(mask[0]); i++)
    cpus += __builtin_popcountl(mask[i]);
  return cpus;
}

/* Once per process, outside any heap lock.  pthread_atfork may allocate:
 * while this runs (state 1) allocations go to arena 0 without a cache. */
static bool front_init(void)
{
  int expected = 0;

  if (ph_likely(atomic_load_explicit(&front_state, memory_order_acquire) == 2))
    return true;
  if (!atomic_compare_exchange_strong(&front_state, &expected, 1))
    return false;                       /* starting on another thread, or re-entered */
  __atomic_store_n(&arenas[0], heap_default(), __ATOMIC_RELEASE);
  if (__atomic_load_n(&arena_max, __ATOMIC_RELAXED) == 0) {  /* not set by mallopt(M_ARENA_MAX) */
    long cpus = cpu_count();
    int param = params_get()->v[PARAM_ARENA_MAX].value;
    unsigned max = param > 0 ? (unsigned)param : (unsigned)(cpus > 0 ? 4 * cpus : 8);
    unsigned zero = 0;
    __atomic_compare_exchange_n(&arena_max, &zero, max > PH_ARENA_SLOTS ? PH_ARENA_SLOTS : max,
                                false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  }
  pthread_key_create(&tcache_exit_key, tcache_exit);
  pthread_atfork(malloc_prefork_lock, malloc_postfork_unlock, malloc_postfork_unlock);
  atomic_store_explicit(&front_state, 2, memory_order_release);
  return true;
}

/* Round robin over up to arena_max arenas, created on first use. */
static mstate_t *arena_pick(void)
{
  unsigned i = atomic_fetch_add_explicit(&arena_next, 1, memory_order_relaxed) %
               __atomic_load_n(&arena_max, __ATOMIC_RELAXED);
  mstate_t *ms = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);

  if (ms != NULL)
    return ms;
  /* Created under the lock, so there is never a loser to undo.  The caller
   * (tcache_get) has marked this thread as cacheless meanwhile: should a
   * release listener allocate from inside ms_create, it gets arena 0 and
   * never comes back here. */
  ph_lock(&arenas_lock);
  ms = arenas[i];
  if (ms == NULL) {
    ms = ms_create(0, PH_MS_LOCKED, i < PH_KIND_TAGS ? PH_KIND_ARENA_TAG(i) : PH_KIND_ARENA);
    if (ms != NULL)
      __atomic_store_n(&arenas[i], ms, __ATOMIC_RELEASE);
  }
  ph_unlock(&arenas_lock);
  return ms != NULL ? ms : arenas[0];
}

/* Thread caches live outside the heaps (they are the allocator's own
 * bookkeeping, not the program's memory): carved from mappings of their
 * own and recycled when threads exit. */
static tcache_t *tc_pool_free;            /* linked through ->arena */
static char *tc_pool_cur, *tc_pool_end;

static tcache_t *tc_pool_get(void)
{
  tcache_t *tc;
  size_t size = align_up(sizeof(tcache_t), 64);

  ph_lock(&tc_pool_lock);
  tc = tc_pool_free;
  if (tc != NULL) {
    tc_pool_free = (tcache_t *)tc->arena;
  } else {
    if (tc_pool_cur == NULL || tc_pool_cur + size > tc_pool_end) {
      size_t len = align_up(16 * size, os_page_size());
      tc_pool_cur = os_reserve_meta(len);   /* metadata: never released */
      tc_pool_end = tc_pool_cur == NULL ? NULL : tc_pool_cur + len;
    }
    if (tc_pool_cur != NULL) {
      tc = (tcache_t *)tc_pool_cur;
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


/* The calling thread's cache, created on first use; NULL while the front
 * end is starting or the thread is exiting. */
static tcache_t *tcache_get(void)
{
  tcache_t *tc = tcache_tls;

  if (ph_likely(tc != &tcache_empty))
    return tc == &tcache_dead ? NULL : tc;
  if (!front_init())
    return NULL;
  tcache_tls = &tcache_dead;             /* no cache while this one is being made */
  mstate_t *arena = arena_pick();
  tc = tc_pool_get();
  if (tc == NULL) {
    tcache_tls = &tcache_empty;
    return NULL;
  }
  memset(tc, 0, sizeof(*tc));
  for (size_t i = 2; i < PH_TC_NBINS; i++)
    tc->bins[i].limit = PH_TC_BASE_BUNDLES * bundle_cap(i << 4);
  tc->arena = arena;
  tc->cookie = arena->cookie;
  tc->kind = arena->kind >= PH_KIND_ARENA_TAG(0) ? arena->kind : PH_KIND_NOTHING;
  tcache_tls = tc;
  pthread_setspecific(tcache_exit_key, tc);   /* no allocation: a low key */
  return tc;
}

mstate_t *front_arena(void)
{
  tcache_t *tc = tcache_get();
  return tc != NULL ? tc->arena : heap_default();
}

/* ======================================================================= */
/*  refill and flush                                                        */
/* ======================================================================= */

/* Hands the chunks of another heap gathered by this thread back to it. */
static void tcache_remote_flush(tcache_t *tc)
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

  l->head = NULL;
  l->count = 0;
  if (head != NULL)
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

static void tcache_grow(tcache_t *tc, size_t i)
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
static void tcache_flush_all(tcache_t *tc)
{
  for (size_t i = 2; i < PH_TC_NBINS; i++)
    tcache_give_back(tc, i);
  tcache_remote_flush(tc);
}

static void tcache_exit(void *arg)
{
  tcache_t *tc = arg;

  tcache_tls = &tcache_dead;
  tcache_flush_all(tc);
  tc_pool_put(tc);
}

/* The list becomes the spare and mem starts a new list; the old spare
 * goes back to the arena -- last, once the cache is consistent, since a
 * release listener may run then and free or malloc on this thread. */
void front_free_full(tcache_t *tc, tc_bin_t *b, void *mem)
{
  size_t i = (size_t)(b - tc->bins);
  tc_bin_t *s = &tc->spare[i];
  void *old = s->head;
  unsigned old_count = s->count;

  if (ph_unlikely(i < 2))                /* no chunk is under 32 bytes */
    ph_fatal("free", "invalid pointer", mem);
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
void *front_malloc_slow(size_t n)
{
  tcache_t *tc = tcache_tls;             /* a sentinel has no spares */
  size_t nb = request_to_size(n);
  tc_bin_t *b, *s;

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
    void *list;
    unsigned got = ms_alloc_batch(tc->arena, nb, b->limit, &list);
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

/* A chunk of an arena's segment that the fast path did not take: another
 * arena's, this thread's with a full list, a first free on this thread, or
 * misuse.  Only a small in-use chunk whose header passes its heap's check
 * is cached; everything else goes to the heap, which names any misuse. */
void front_free_slow(void *mem, uintptr_t o, const char *fn)
{
  int saved = errno;

  if (o == 0)
    ph_fatal(fn, "invalid pointer", mem);
  if ((o & PH_OWNER_TAGS) || ((uintptr_t)mem & PH_ALIGN_MASK) ||
      (char *)mem_chunk(mem) < (char *)seg_first_chunk(owner_seg(o))) {
    ms_free_owned(o, mem, fn);      /* huge, an mspace's, misaligned or no chunk */
    errno = saved;
    return;
  }
  mstate_t *ms = owner_seg(o)->ms;
  size_t head = mem_chunk(mem)->head;
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

/* ======================================================================= */
/*  walks and checks                                                        */
/* ======================================================================= */

void arena_for_each(void (*fn)(mstate_t *ms, void *arg), void *arg)
{
  fn(heap_default(), arg);                /* arena 0, even before front_init() */
  for (unsigned i = 1; i < PH_ARENA_SLOTS; i++) {
    mstate_t *ms = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
    if (ms != NULL)
      fn(ms, arg);
  }
}

/* Checks one list of the calling thread's cache: n chunks of size `size`
 * of heap ms (or of any heap if ms is NULL). */
static int tcache_check_list(const tc_bin_t *l, size_t size, const mstate_t *ms, const char *what)
{
  int problems = 0;
  uint32_t n = 0;
  char hex[24];

  for (void *m = l->head; m != NULL && n <= l->count; m = *(void **)m, n++) {
    uintptr_t o = owner_map_get(m);
    const mstate_t *owner = (o == 0 || (o & PH_OWNER_TAGS)) ? NULL : owner_seg(o)->ms;
    const chunk_t *c = mem_chunk(m);
    if (owner == NULL || (ms != NULL && owner != ms) || !head_ok(owner, c) || !chunk_mem_waiting(m) ||
        (c->head & (PH_SIZE_MASK | PH_CINUSE | PH_MMAPPED)) != (size | PH_CINUSE)) {
      ph_write_str(2, "pinheap: heap check: thread cache ");
      ph_write_str(2, what);
      ph_write_str(2, " holds a chunk that is not a waiting chunk of its size at ");
      ph_write_str(2, ph_fmt_hex(hex, (uintptr_t)c));
      ph_write_str(2, "\n");
      return problems + 1;
    }
  }
  if (n != l->count) {
    ph_write_str(2, "pinheap: heap check: thread cache ");
    ph_write_str(2, what);
    ph_write_str(2, " list length disagrees with its count\n");
    problems++;
  }
  return problems;
}

int tcache_check_mine(void)
{
  tcache_t *tc = tcache_tls;
  int problems = 0;

  if (tc == &tcache_empty || tc == &tcache_dead)
    return 0;
  for (size_t i = 0; i < PH_TC_NBINS; i++) {
    problems += tcache_check_list(&tc->bins[i], i << 4, tc->arena, "list");
    problems += tcache_check_list(&tc->spare[i], i << 4, tc->arena, "spare");
    problems += tcache_check_list(&tc->rem[i], i << 4, tc->rem_ms, "remote list");
  }
  return problems;
}

/* ======================================================================= */
/*  the malloc family                                                       */
/* ======================================================================= */

/* PINHEAP_DEBUG >= 2: the whole malloc family checked after each call. */
#define FRONT_CHECKED(fn, call)            \
  do {                                     \
    __typeof__(call) r_ = (call);          \
    PH_DEBUG_CHECK(NULL, fn);              \
    return r_;                             \
  } while (0)

void *malloc(size_t size)
{
#if PINHEAP_DEBUG >= 2
  FRONT_CHECKED("malloc", front_malloc(size));
#else
  return front_malloc(size);
#endif
}

void free(void *ptr)
{
  if (ph_likely(front_free_fast(ptr))) {
    PH_DEBUG_CHECK(NULL, "free");
    return;
  }
  if (ptr == NULL)
    return;
  front_free_slow(ptr, owner_map_get(ptr), "free");
  PH_DEBUG_CHECK(NULL, "free");
}

static void *calloc_impl(size_t nmemb, size_t size)
{
  size_t total;
  if (__builtin_mul_overflow(nmemb, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (total <= PH_TC_MAX_REQUEST) {
    void *p = front_malloc(total);
    if (p != NULL)
      memset(p, 0, total);
    return p;
  }
  return ms_calloc(front_arena(), nmemb, size);
}

void *calloc(size_t nmemb, size_t size)
{
  FRONT_CHECKED("calloc", calloc_impl(nmemb, size));
}

static void *realloc_impl(void *ptr, size_t size)
{
  if (ptr == NULL)
    return front_malloc(size);
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return ms_realloc(NULL, ptr, size, "realloc");
}

void *realloc(void *ptr, size_t size)
{
  FRONT_CHECKED("realloc", realloc_impl(ptr, size));
}

static void *reallocarray_impl(void *ptr, size_t nmemb, size_t size)
{
  size_t total;
  if (__builtin_mul_overflow(nmemb, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (ptr != NULL && total == 0) {
    free(ptr);
    return NULL;
  }
  return ptr == NULL ? front_malloc(total) : ms_realloc(NULL, ptr, total, "reallocarray");
}

void *reallocarray(void *ptr, size_t nmemb, size_t size)
{
  FRONT_CHECKED("reallocarray", reallocarray_impl(ptr, nmemb, size));
}

void *memalign(size_t alignment, size_t size)
{
  FRONT_CHECKED("memalign", ms_memalign(front_arena(), alignment, size));
}

static int posix_memalign_impl(void **memptr, size_t alignment, size_t size)
{
  if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0)
    return EINVAL;
  int saved = errno;
  void *p = ms_memalign(front_arena(), alignment, size);
  if (p == NULL) {
    errno = saved;
    return ENOMEM;
  }
  *memptr = p;
  return 0;
}

int posix_memalign(void **memptr, size_t alignment, size_t size)
{
  FRONT_CHECKED("posix_memalign", posix_memalign_impl(memptr, alignment, size));
}

static void *aligned_alloc_impl(size_t alignment, size_t size)
{
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  return ms_memalign(front_arena(), alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size)
{
  FRONT_CHECKED("aligned_alloc", aligned_alloc_impl(alignment, size));
}

void *valloc(size_t size)
{
  FRONT_CHECKED("valloc", ms_memalign(front_arena(), os_page_size(), size));
}

static void *pvalloc_impl(size_t size)
{
  size_t page = os_page_size();
  if (size > PH_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  return ms_memalign(front_arena(), page, size == 0 ? page : align_up(size, page));
}

void *pvalloc(size_t size)
{
  FRONT_CHECKED("pvalloc", pvalloc_impl(size));
}

size_t malloc_usable_size(void *ptr)
{
  return mem_usable(ptr, "malloc_usable_size", false);
}

int mallopt(int param, int value)
{
  heap_default();
  switch (param) {
  case M_TRIM_THRESHOLD:
    mparams_set(trim_threshold, value < 0 ? SIZE_MAX : (size_t)value);
    mparams_set(mmap_threshold_set, true);
    return 1;
  case M_TOP_PAD:
    if (value < 0)
      return 0;
    mparams_set(top_pad, (size_t)value);
    mparams_set(mmap_threshold_set, true);
    return 1;
  case M_MMAP_THRESHOLD:
    if (value < 0 || (size_t)value > PH_MAX_MMAP_THRESHOLD)
      return 0;
    mparams_set(mmap_threshold, (size_t)value);
    mparams_set(mmap_threshold_set, true);
    return 1;
  case M_MMAP_MAX:
    if (value < 0)
      return 0;
    mparams_set(mmap_max, value);
    mparams_set(mmap_threshold_set, true);
    return 1;
  case M_ARENA_MAX:
    if (value <= 0 || value > PH_ARENA_SLOTS)
      return 0;
    /* new threads spread over arenas [0, value); existing ones stay */
    __atomic_store_n(&arena_max, (unsigned)value, __ATOMIC_RELAXED);
    return 1;
  default:
    return 0;
  }
}

/* The statistics and checks see this thread's cached chunks as free: its
 * cache is returned first.  (Other threads' caches count as in use.) */
static void tcache_flush_mine(void)
{
  tcache_t *tc = tcache_tls;
  if (tc != &tcache_empty && tc != &tcache_dead)
    tcache_flush_all(tc);
}

static void info_add(mstate_t *ms, void *arg)
{
  struct mallinfo2 *sum = arg, one = ms_info(ms);
  sum->arena += one.arena;
  sum->ordblks += one.ordblks;
  sum->hblks += one.hblks;
  sum->hblkhd += one.hblkhd;
  sum->uordblks += one.uordblks;
  sum->fordblks += one.fordblks;
  sum->keepcost += one.keepcost;
}

struct mallinfo2 mallinfo2(void)
{
  struct mallinfo2 sum;
  memset(&sum, 0, sizeof(sum));
  heap_default();
  tcache_flush_mine();
  arena_for_each(info_add, &sum);
  return sum;
}

static void stats_line(const char *label, size_t v)
{
  char num[24];
  ph_write_str(2, label);
  ph_write_str(2, ph_fmt_dec(num, v));
  ph_write_str(2, "\n");
}

static void stats_arena(mstate_t *ms, void *arg)
{
  unsigned *n = arg;
  char num[24];
  struct mallinfo2 mi = ms_info(ms);
  ph_write_str(2, "Arena ");
  ph_write_str(2, ph_fmt_dec(num, (*n)++));
  ph_write_str(2, ":\n");
  stats_line("system bytes     = ", mi.arena);
  stats_line("in use bytes     = ", mi.uordblks);
  stats_line("free bytes       = ", mi.fordblks);
  stats_line("free chunks      = ", mi.ordblks);
}

void malloc_stats(void)
{
  struct mallinfo2 mi = mallinfo2();
  os_stats_t os;
  unsigned n = 0;

  arena_for_each(stats_arena, &n);
  os_stats_get(&os);
  ph_write_str(2, "Total (incl. mmap):\n");
  stats_line("system bytes     = ", mi.arena + mi.hblkhd);
  stats_line("in use bytes     = ", mi.uordblks + mi.hblkhd);
  stats_line("mmap regions     = ", mi.hblks);
  stats_line("mmap bytes       = ", mi.hblkhd);
  stats_line("os mapped bytes  = ", os.mapped);
  stats_line("os peak mapped   = ", os.peak_mapped);
  stats_line("os released bytes= ", os.released_bytes);
}

static void trim_one(mstate_t *ms, void *arg)
{
  const size_t *pad_and_result = arg;
  if (ms_trim(ms, pad_and_result[0]))
    ((size_t *)arg)[1] = 1;
}

int malloc_trim(size_t pad)
{
  size_t arg[2] = { pad, 0 };

  heap_default();
  tcache_flush_mine();
  arena_for_each(trim_one, arg);
  return (int)arg[1];
}

static void check_one(mstate_t *ms, void *arg)
{
  ms_lock(ms);
  *(int *)arg += mstate_check(ms);
  ms_unlock(ms);
}

int malloc_check(void)
{
  int problems = 0;
  heap_default();
  tcache_flush_mine();
  arena_for_each(check_one, &problems);
  return problems + tcache_check_mine();
}

int PINHEAP_NAME(owns)(const void *ptr)
{
  return owner_map_get(ptr) != 0;
}
