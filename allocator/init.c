/*
 * init.c -- set-up: the process-wide tunables (mparams), the default heap
 * (arena 0), the heap cookie and the free key, a heap's initialization, and
 * the front end's once-per-process start (front_init).  Main entry point:
 * heap_default().
 */
#include "front.h"

#include "pinheap.h"
#include "params.h"
#include "startup.h"      /* environ */

#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>

static mstate_t gm;                      /* arena 0: the first heap behind malloc() */
static mstate_t *gm_ready;               /* arena 0 once set up: &gm, or the shared
                                            heap's arena 0 in its region */
/* Fork: no handler.  Held only while the first heap is made, in the
 * process's first allocation: before any second thread can exist (making
 * one allocates: its TLS), and pinheap's fork handlers are registered
 * after it. */
static ph_lock_t gm_init_lock;

static atomic_size_t cookie_counter;

static atomic_int front_state;           /* 0 not started, 1 starting, 2 ready */

mparams_t mparams = {
  .mmap_threshold = PH_DEFAULT_MMAP_THRESHOLD,
  .trim_threshold = PH_DEFAULT_TRIM_THRESHOLD,
  .top_pad = 0,
  .mmap_max = PH_DEFAULT_MMAP_MAX,
  .mmap_threshold_set = false,
};

uint64_t chunk_free_key;

/* Sets chunk_free_key once, before any heap exists: random, odd (never 0,
 * never a pointer). */
static void chunk_free_key_init(void)
{
  if (__atomic_load_n(&chunk_free_key, __ATOMIC_RELAXED) != 0)
    return;
  uint64_t key = 0x5f3759df9e3779b9ULL;
  const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
  if (r != NULL)
    memcpy(&key, r + 8, sizeof(key));
  uint64_t zero = 0;
  __atomic_compare_exchange_n(&chunk_free_key, &zero, key | 1, false, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
}

static size_t cookie_make(const void *salt)
{
  uint64_t c = 0;
  const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);

  if (r != NULL)
    memcpy(&c, r, sizeof(c));
  c ^= (uintptr_t)salt * 0xff51afd7ed558ccdULL;
  c ^= atomic_fetch_add_explicit(&cookie_counter, 1, memory_order_relaxed) * 0xc4ceb9fe1a85ec53ULL;
  return (size_t)(c & PH_SIZE_MASK);   /* never disturbs bits outside size */
}

PH_HOT void ms_init(mstate_t *ms, const mem_source_t *src, unsigned flags, unsigned kind)
{
  chunk_free_key_init();
  memset(ms, 0, offsetof(mstate_t, bins));   /* the bins wait (bin_live) */
  ms->source = src;
  ms->kind = kind;
  ms->cookie = cookie_make(ms);
  ms->seg_grow = PH_DEFAULT_SEGMENT;
  bin_at(ms, PH_DV_BIN)->fd = bin_at(ms, PH_DV_BIN)->bk = bin_at(ms, PH_DV_BIN);
  if (src->in_owner_map)            /* the caller's regions may vanish unannounced */
    ms_register(ms);
  /* last: heap_default() tests PH_MS_INIT without the lock */
  __atomic_store_n(&ms->flags, flags | PH_MS_INIT, __ATOMIC_RELEASE);
}

PH_HOT mstate_t *heap_default(void)
{
  mstate_t *h = __atomic_load_n(&gm_ready, __ATOMIC_ACQUIRE);

  if (ph_likely(h != NULL))
    return h;
  ph_lock(&gm_init_lock);
  h = gm_ready;
  if (h == NULL) {
    /* The shared heap, when its size is given, must come first: its free
     * key is the region's, and no other heap may hold waiting chunks. */
    chunk_free_key_init();
    /* Without a variable of the shared heap shm_start() would find the
     * mode off, silently: it is not called, and its 12 kB of text stay out
     * of the process's resident pages (PH_HOT, internal.h). */
    h = shm_params_any_set(environ) ? shm_start() : NULL;
    if (h == NULL) {
      ms_init(&gm, &mem_source_os, PH_MS_LOCKED, PH_KIND_ARENA_TAG(0));    /* arena 0 */
      h = &gm;
    }
    __atomic_store_n(&gm_ready, h, __ATOMIC_RELEASE);
  }
  ph_unlock(&gm_init_lock);
  return h;
}

/* Fork in the shared heap's mode: with every lock held, the parent takes
 * the snapshot of the region the child gets (shm.c); the child leaves the
 * region for it (a private copy), then every lock is released as usual. */
static void front_prefork(void)
{
  malloc_prefork_lock();
  shm_fork_prepare();
}

static void front_postfork_parent(void)
{
  shm_fork_parent();
  malloc_postfork_unlock();
}

static void front_postfork_child(void)
{
  shm_fork_child();
  slab_fork_child();                   /* other threads' pages lose their owner */
  malloc_postfork_unlock();
}

/* Once per process, outside any heap lock.  pthread_atfork may allocate:
 * while this runs (state 1) allocations go to arena 0 without a cache. */
PH_HOT bool front_init(void)
{
  int expected = 0;

  if (ph_likely(atomic_load_explicit(&front_state, memory_order_acquire) == 2))
    return true;
  if (!atomic_compare_exchange_strong(&front_state, &expected, 1))
    return false;                       /* starting on another thread, or re-entered */
  arena_init();
  tcache_init();
  pthread_atfork(front_prefork, front_postfork_parent, front_postfork_child);
  atomic_store_explicit(&front_state, 2, memory_order_release);
  return true;
}
