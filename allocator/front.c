/*
 * front.c -- the malloc family: per-thread caches over several arenas,
 * fork safety, and the process-wide entry points (mallopt, mallinfo2,
 * malloc_stats, malloc_trim).  Main entry points: malloc() and free(); their
 * fast paths are inline in front.h, the slow paths are here.
 *
 * Arenas are heaps (mstate_t) like mspaces; arena 0 is the static heap of
 * malloc.c, the others are created on demand, up to M_ARENA_MAX, and each
 * thread is given one, round robin, when it first allocates.  A thread's
 * cache refills from and flushes to its own arena in batches; chunks of
 * another arena go back through that arena's lock-free remote list, which
 * the owner drains the next time it takes its lock.  A thread that exits
 * returns everything it cached.
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

static tcache_t tcache_empty;            /* before a thread's first allocation */
static tcache_t tcache_dead;             /* after its exit: no cache again */
__thread tcache_t *tcache_tls __attribute__((tls_model("initial-exec"))) = &tcache_empty;
uint64_t tcache_key;

static mstate_t *arenas[PH_ARENA_SLOTS];
static unsigned arena_max;               /* 0 until front_init() */
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
  arenas[0] = heap_default();
  if (arena_max == 0) {                  /* not set by mallopt(M_ARENA_MAX) */
    long cpus = cpu_count();
    int param = params_get()->v[PARAM_ARENA_MAX].value;
    arena_max = param > 0 ? (unsigned)param : (unsigned)(cpus > 0 ? 4 * cpus : 8);
    if (arena_max > PH_ARENA_SLOTS)
      arena_max = PH_ARENA_SLOTS;
  }
  const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
  uint64_t key = 0x5f3759df9e3779b9ULL;
  if (r != NULL)
    memcpy(&key, r + 8, sizeof(key));
  tcache_key = key | 1;                 /* never 0, never a pointer */
  pthread_key_create(&tcache_exit_key, tcache_exit);
  pthread_atfork(malloc_prefork_lock, malloc_postfork_unlock, malloc_postfork_unlock);
  atomic_store_explicit(&front_state, 2, memory_order_release);
  return true;
}

/* Round robin over up to arena_max arenas, created on first use. */
static mstate_t *arena_pick(void)
{
  unsigned i = atomic_fetch_add_explicit(&arena_next, 1, memory_order_relaxed) % arena_max;
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
    ms = ms_create(0, PH_MS_LOCKED);
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

static uint32_t tc_limit(size_t i)
{
  size_t size = i << 4;
  size_t n = 4096 / size;
  return (uint32_t)(n < 4 ? 4 : n > 64 ? 64 : n);
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
    tc->bins[i].limit = tc_limit(i);
  tc->arena = arena;
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

/* Returns the chunks of list to their heaps: this thread's arena under its
 * lock, every other heap through its remote list. */
/* The heap of a cached chunk; consecutive chunks mostly share a granule. */
typedef struct owner_memo_s {
  uintptr_t granule;
  mstate_t *ms;
} owner_memo_t;

static mstate_t *chunk_heap(const void *mem, owner_memo_t *memo)
{
  uintptr_t g = (uintptr_t)mem >> PH_GRANULE_SHIFT;
  if (g != memo->granule) {
    memo->granule = g;
    memo->ms = owner_seg(owner_map_get(mem))->ms;
  }
  return memo->ms;
}

static void tcache_return(tcache_t *tc, void *list, size_t size)
{
  void *mine = NULL, *mine_last = NULL, *odd = NULL;
  size_t mine_n = 0;
  owner_memo_t memo = { 0, NULL };

  while (list != NULL) {
    void *next = *(void **)list;
    mstate_t *ms = chunk_heap(list, &memo);
    if (!head_ok(ms, mem_chunk(list)))
      ph_fatal("free", "corrupted chunk header", list);
    if (ms == tc->arena && chunk_size(mem_chunk(list)) != size) {
      /* a refill may hand out a chunk 16 bytes larger than its bin */
      *(void **)list = odd;
      odd = list;
    } else if (ms == tc->arena) {
      *(void **)list = mine;
      mine = list;
      if (mine_last == NULL)
        mine_last = list;
      mine_n++;
    } else {
      /* gather the run of following chunks of the same heap */
      void *last = list;
      while (next != NULL && chunk_heap(next, &memo) == ms) {
        last = next;
        next = *(void **)next;
      }
      ms_remote_push(ms, list, last);
    }
    list = next;
  }
  if (mine != NULL)                      /* one size: spliced whole */
    ms_defer_run(tc->arena, mine, mine_last, mine_n, size);
  if (odd != NULL)
    ms_free_list(tc->arena, odd, "free");
}

/* Keeps the first keep chunks of bin i, returns the rest. */
static void tcache_flush(tcache_t *tc, size_t i, uint32_t keep)
{
  tc_bin_t *b = &tc->bins[i];
  void **link = &b->head;

  for (uint32_t k = 0; k < keep && *link != NULL; k++)
    link = (void **)*link;
  void *rest = *link;
  *link = NULL;
  b->count = keep < b->count ? keep : b->count;
  tcache_return(tc, rest, i << 4);
}

static void tcache_exit(void *arg)
{
  tcache_t *tc = arg;

  tcache_tls = &tcache_dead;
  for (size_t i = 2; i < PH_TC_NBINS; i++)
    tcache_flush(tc, i, 0);
  tc_pool_put(tc);
}

void *front_malloc_slow(size_t n)
{
  tcache_t *tc = tcache_get();

  if (tc == NULL || n > PH_TC_MAX_REQUEST)
    return ms_malloc(tc != NULL ? tc->arena : heap_default(), n);
  size_t nb = request_to_size(n);
  tc_bin_t *b = &tc->bins[nb >> 4];
  if (b->head == NULL) {
    void *list;
    unsigned got = ms_alloc_batch(tc->arena, nb, b->limit / 2 + 1, &list);
    if (got == 0) {
      errno = ENOMEM;
      return NULL;
    }
    b->head = list;
    b->count += got;
  }
  void *p = b->head;
  b->head = *(void **)p;
  b->count--;
  ((uint64_t *)p)[1] = 0;
  return p;
}

/* Is mem already in bin b?  (Its second word held the cache key.) */
static bool tcache_holds(const tc_bin_t *b, const void *mem)
{
  for (void *x = b->head; x != NULL; x = *(void **)x)
    if (x == mem)
      return true;
  return false;
}

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
  size_t head = mem_chunk(mem)->head;
  tcache_t *tc = tcache_get();
  if (tc != NULL && (head & PH_TC_HEAD_MASK) == PH_CINUSE) {
    tc_bin_t *b = &tc->bins[(head >> 4) & 0x7f];
    if (((uint64_t *)mem)[1] == tcache_key && tcache_holds(b, mem))
      ph_fatal(fn, "double free", mem);
    if (b->count >= b->limit)
      tcache_flush(tc, (head >> 4) & 0x7f, b->limit / 2);
    if (b->count < b->limit) {
      tc_bin_push(b, mem);
      errno = saved;
      return;
    }
  }
  ms_free_owned(o, mem, fn);    /* validates the header, names any misuse */
  errno = saved;
}

/* ======================================================================= */
/*  the malloc family                                                       */
/* ======================================================================= */

void *malloc(size_t size)
{
  return front_malloc(size);
}

void free(void *ptr)
{
  if (ph_likely(owner_kind_get(ptr) == PH_KIND_ARENA) && front_free_fast(ptr))
    return;
  if (ptr == NULL)
    return;
  front_free_slow(ptr, owner_map_get(ptr), "free");
}

void *calloc(size_t nmemb, size_t size)
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

void *realloc(void *ptr, size_t size)
{
  if (ptr == NULL)
    return front_malloc(size);
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return ms_realloc(NULL, ptr, size, "realloc");
}

void *reallocarray(void *ptr, size_t nmemb, size_t size)
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

void *memalign(size_t alignment, size_t size)
{
  return ms_memalign(front_arena(), alignment, size);
}

int posix_memalign(void **memptr, size_t alignment, size_t size)
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

void *aligned_alloc(size_t alignment, size_t size)
{
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  return ms_memalign(front_arena(), alignment, size);
}

void *valloc(size_t size)
{
  return ms_memalign(front_arena(), os_page_size(), size);
}

void *pvalloc(size_t size)
{
  size_t page = os_page_size();
  if (size > PH_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  return ms_memalign(front_arena(), page, size == 0 ? page : align_up(size, page));
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
    mparams.trim_threshold = value < 0 ? SIZE_MAX : (size_t)value;
    mparams.mmap_threshold_set = true;
    return 1;
  case M_TOP_PAD:
    if (value < 0)
      return 0;
    mparams.top_pad = (size_t)value;
    mparams.mmap_threshold_set = true;
    return 1;
  case M_MMAP_THRESHOLD:
    if (value < 0 || (size_t)value > PH_MAX_MMAP_THRESHOLD)
      return 0;
    mparams.mmap_threshold = (size_t)value;
    mparams.mmap_threshold_set = true;
    return 1;
  case M_MMAP_MAX:
    if (value < 0)
      return 0;
    mparams.mmap_max = value;
    mparams.mmap_threshold_set = true;
    return 1;
  case M_ARENA_MAX:
    if (value <= 0 || value > PH_ARENA_SLOTS)
      return 0;
    /* new threads spread over arenas [0, value); existing ones stay */
    arena_max = (unsigned)value;
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
    for (size_t i = 2; i < PH_TC_NBINS; i++)
      tcache_flush(tc, i, 0);
}

static void info_add(mstate_t *ms, void *arg)
{
  struct mallinfo2 *sum = arg, one = ms_info(ms);
  if (ms->flags & PH_MS_USER)
    return;                               /* mspaces report on their own */
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
  ms_for_each(info_add, &sum);
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
  if (ms->flags & PH_MS_USER)
    return;
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

  ms_for_each(stats_arena, &n);
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
  if (!(ms->flags & PH_MS_USER) && ms_trim(ms, pad_and_result[0]))
    ((size_t *)arg)[1] = 1;
}

int malloc_trim(size_t pad)
{
  size_t arg[2] = { pad, 0 };

  heap_default();
  tcache_flush_mine();
  ms_for_each(trim_one, arg);
  return (int)arg[1];
}

static void check_one(mstate_t *ms, void *arg)
{
  if (ms->flags & PH_MS_USER)
    return;
  ms_lock(ms);
  *(int *)arg += mstate_check(ms);
  ms_unlock(ms);
}

int malloc_check(void)
{
  int problems = 0;
  heap_default();
  tcache_flush_mine();
  ms_for_each(check_one, &problems);
  return problems;
}

int PINHEAP_NAME(owns)(const void *ptr)
{
  return owner_map_get(ptr) != 0;
}
