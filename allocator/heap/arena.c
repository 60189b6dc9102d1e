/*
 * arena.c -- the arenas of the malloc family and every heap of the process:
 * the arena table and the choice of a thread's arena (one an exited thread
 * left, else a new one up to M_ARENA_MAX, else the least used; created on
 * first use), the registry of heaps (ms_all) and the arenas' fork lock.
 * Main entry point: arena_pick().
 *
 * Arenas are heaps (mstate_t) like mspaces; arena 0 is the default heap
 * (init.c: heap_default), the others are created on demand.
 */
#include "allocator/heap/chunk.h"
#include "allocator/base/startup.h"     /* PH_STARTUP: once per process, thread or arena */

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config/params.h"
#include "pinheap.h"

#define PH_ARENA_SLOTS 256               /* hard cap of M_ARENA_MAX */

static mstate_t *ms_all;                 /* every heap, newest first */
static ph_lock_t ms_all_lock;

PH_STARTUP void ms_register(mstate_t *ms)
{
  ph_lock(&ms_all_lock);
  ms->all_next = ms_all;
  __atomic_store_n(&ms_all, ms, __ATOMIC_RELEASE);
  ph_unlock(&ms_all_lock);
}

void ms_unregister(mstate_t *ms)
{
  ph_lock(&ms_all_lock);
  mstate_t **pp = &ms_all;
  while (*pp != NULL && *pp != ms)
    pp = &(*pp)->all_next;
  if (*pp == ms)
    *pp = ms->all_next;
  ph_unlock(&ms_all_lock);
}

bool ms_any(void)
{
  return __atomic_load_n(&ms_all, __ATOMIC_ACQUIRE) != NULL;
}

void ms_lock_all(void)
{
  huge_cache_fork_lock();
  ph_lock(&ms_all_lock);
  for (mstate_t *ms = ms_all; ms != NULL; ms = ms->all_next)
    ph_lock(&ms->lock);
  owner_fork_lock();                      /* last: taken inside heap locks elsewhere */
}

void ms_unlock_all(void)
{
  owner_fork_unlock();
  for (mstate_t *ms = ms_all; ms != NULL; ms = ms->all_next)
    ph_unlock(&ms->lock);
  ph_unlock(&ms_all_lock);
  huge_cache_fork_unlock();
}

static mstate_t *arenas[PH_ARENA_SLOTS];
static unsigned arena_max;               /* 0 until front_init(); read and set
                                            whole (relaxed atomics) */
static atomic_uint arena_next;
static ph_lock_t arenas_lock;
/* The threads attached to each arena (those with a cache of it that have
 * not exited), so that a new thread takes the arena an exited one left
 * (with its pages, adopted) rather than another.  Counted by arena_pick,
 * uncounted by arena_key's destructor at thread exit. */
static atomic_uint arena_threads[PH_ARENA_SLOTS];
static pthread_key_t arena_key;          /* value: 1 + the thread's arena index */
static bool arena_key_ok;

/* The arena table's lock, first of the allocator's locks at fork
 * (malloc_prefork_lock, init.c). */
void arena_fork_lock(void) { ph_lock(&arenas_lock); }
void arena_fork_unlock(void) { ph_unlock(&arenas_lock); }

/* CPUs this process may run on: the affinity mask, by a raw system call
 * (sysconf would bring in much of stdio's code for one number). */
PH_STARTUP static long cpu_count(void)
{
  unsigned long mask[16];
  long n = ph_syscall(SYS_sched_getaffinity, 0, sizeof(mask), mask);
  long cpus = 0;
  for (long i = 0; n > 0 && i < n / (long)sizeof(mask[0]); i++)
    cpus += ph_popcount(mask[i]);
  return cpus;
}

/* A thread exits (or takes another arena): its arena loses it. */
PH_STARTUP static void arena_leave(void *value)
{
  uintptr_t i = (uintptr_t)value - 1;
  if (i < PH_ARENA_SLOTS)
    atomic_fetch_sub_explicit(&arena_threads[i], 1, memory_order_relaxed);
}

/* The fork child has the forking thread only. */
static void arena_fork_child(void)
{
  for (unsigned i = 0; i < PH_ARENA_SLOTS; i++)
    atomic_store_explicit(&arena_threads[i], 0, memory_order_relaxed);
  uintptr_t mine = arena_key_ok ? (uintptr_t)pthread_getspecific(arena_key) : 0;
  if (mine - 1 < PH_ARENA_SLOTS)
    atomic_store_explicit(&arena_threads[mine - 1], 1, memory_order_relaxed);
}

PH_STARTUP void arena_init(mstate_t *arena0)
{
  __atomic_store_n(&arenas[0], arena0, __ATOMIC_RELEASE);
  if (__atomic_load_n(&arena_max, __ATOMIC_RELAXED) == 0) {  /* not set by mallopt(M_ARENA_MAX) */
    long cpus = cpu_count();
    int param = params_get()->v[PARAM_ARENA_MAX].value;
    unsigned max = param > 0 ? (unsigned)param : (unsigned)(cpus > 0 ? 4 * cpus : 8);
    unsigned zero = 0;
    __atomic_compare_exchange_n(&arena_max, &zero, max > PH_ARENA_SLOTS ? PH_ARENA_SLOTS : max,
                                false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  }
  /* without the key (none left), threads are never uncounted: new ones
   * spread over the arenas as if every thread still ran */
  arena_key_ok = pthread_key_create(&arena_key, arena_leave) == 0;
  ph_atfork(NULL, NULL, arena_fork_child);
}

int arena_max_set(int value)
{
  if (value <= 0 || value > PH_ARENA_SLOTS)
    return 0;
  /* new threads spread over arenas [0, value); existing ones stay */
  __atomic_store_n(&arena_max, (unsigned)value, __ATOMIC_RELAXED);
  return 1;
}

/* The arena of index i, created if it does not exist yet (NULL if it
 * cannot be). */
PH_STARTUP static mstate_t *arena_at(unsigned i)
{
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
    unsigned kind = i < PH_KIND_TAGS ? PH_KIND_ARENA_TAG(i) : PH_KIND_ARENA;
    /* the shared heap's arenas live in its region (NULL once it is full) */
    const mem_source_ops_t *shared = source_shared_ops();
    ms = shared->on() ? shared->heap_create(kind) : ms_create(0, PH_MS_LOCKED, kind);
    if (ms != NULL)
      __atomic_store_n(&arenas[i], ms, __ATOMIC_RELEASE);
  }
  ph_unlock(&arenas_lock);
  return ms;
}

/* Among the first arena_max arenas: one that no thread uses (an exited
 * thread's: its pages and free memory are adopted, not left idle), else a
 * new one (the lowest index not made yet), else the one with the fewest
 * threads.  The scan starts at a rotating index, so that equals take
 * turns.  A thread that cannot be counted (no key) is attached all the
 * same: the counts only steer.
 *
 * An arena no thread uses, new or left, is claimed by raising its count
 * from 0 to 1 in one compare-and-swap, and a slot so claimed counts as
 * used while its arena is being made: two threads that start together
 * each get one of their own.  (Counted after the choice, as before, both
 * saw the same slot free and shared it -- realloc at 2 threads: one arena
 * of 6.6 MB instead of two of 2.5, peak RSS 7.6-9 MB against 5.2 in most
 * runs.) */
PH_STARTUP mstate_t *arena_pick(void)
{
  unsigned max = __atomic_load_n(&arena_max, __ATOMIC_RELAXED);
  unsigned start = atomic_fetch_add_explicit(&arena_next, 1, memory_order_relaxed) % max;
  unsigned i;

  for (;;) {
    unsigned best = PH_ARENA_SLOTS, best_n = UINT32_MAX, fresh = PH_ARENA_SLOTS;
    for (unsigned k = 0; k < max; k++) {
      unsigned j = (start + k) % max;
      unsigned n = atomic_load_explicit(&arena_threads[j], memory_order_relaxed);
      if (__atomic_load_n(&arenas[j], __ATOMIC_ACQUIRE) == NULL && n == 0) {
        if (j < fresh)
          fresh = j;
        continue;
      }
      if (n < best_n) {
        best = j;
        best_n = n;
      }
    }
    i = best_n != 0 && fresh < PH_ARENA_SLOTS ? fresh : best;
    if (i >= PH_ARENA_SLOTS) {
      i = 0;                             /* (max is at least 1: arena 0) */
      atomic_fetch_add_explicit(&arena_threads[0], 1, memory_order_relaxed);
      break;
    }
    if (i != fresh && best_n != 0) {     /* shared: the count only steers */
      atomic_fetch_add_explicit(&arena_threads[i], 1, memory_order_relaxed);
      break;
    }
    unsigned zero = 0;                   /* unused: claimed, or taken meanwhile */
    if (atomic_compare_exchange_strong_explicit(&arena_threads[i], &zero, 1,
                                                memory_order_relaxed, memory_order_relaxed))
      break;
  }
  mstate_t *ms = arena_at(i);
  if (ms == NULL) {                      /* cannot make one: arena 0 */
    atomic_fetch_sub_explicit(&arena_threads[i], 1, memory_order_relaxed);
    i = 0;
    ms = __atomic_load_n(&arenas[0], __ATOMIC_ACQUIRE);
    atomic_fetch_add_explicit(&arena_threads[0], 1, memory_order_relaxed);
  }
  if (arena_key_ok) {
    void *old = pthread_getspecific(arena_key);     /* a cache that could not be made */
    if (old != NULL)
      arena_leave(old);
    pthread_setspecific(arena_key, (void *)(uintptr_t)(i + 1));  /* no allocation: a low key */
  }
  return ms;
}

void arena_for_each(void (*fn)(mstate_t *ms, void *arg), void *arg)
{
  mstate_t *h0 = heap_main_get();         /* arena 0, even before front_init() */
  if (h0 != NULL)
    fn(h0, arg);
  for (unsigned i = 1; i < PH_ARENA_SLOTS; i++) {
    mstate_t *ms = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
    if (ms != NULL)
      fn(ms, arg);
  }
}
