/*
 * init.c -- the malloc family's start: the default heap (arena 0: the
 * shared heap's when its size is given, else the private one), the front
 * end's once-per-process start (front_init), the fork handlers with every
 * lock of the allocator, and the exit.  Main entry point: heap_default().
 */
#include "allocator/front/front.h"

#include "pinheap.h"
#include "config/params.h"
#include "allocator/base/startup.h"      /* environ */

#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>

/* Fork: no handler.  Held only while the first heap is made, in the
 * process's first allocation: before any second thread can exist (making
 * one allocates: its TLS), and pinheap's fork handlers are registered
 * after it. */
static ph_lock_t gm_init_lock;

static atomic_int front_state;           /* 0 not started, 1 starting, 2 ready */

PH_HOT mstate_t *heap_default(void)
{
  mstate_t *h = heap_main_get();

  if (ph_likely(h != NULL))
    return h;
  ph_lock(&gm_init_lock);
  h = heap_main;
  if (h == NULL) {
    /* The shared heap, when its size is given, must come first: its free
     * key is the region's, and no other heap may hold waiting chunks. */
    chunk_free_key_init();
    /* Without a variable of the shared heap shm_start() would find the
     * mode off, silently: it is not called, and its 12 kB of text stay out
     * of the process's resident pages (PH_HOT, base.h). */
    h = shm_params_any_set(environ) ? shm_start() : NULL;
    if (h == NULL)
      h = heap_main_private();                                /* arena 0 */
    __atomic_store_n(&heap_main, h, __ATOMIC_RELEASE);
  }
  ph_unlock(&gm_init_lock);
  return h;
}

/* Every lock of the allocator, always in this order. */
void malloc_prefork_lock(void)
{
  arena_fork_lock();
  tc_pool_fork_lock();
  ms_lock_all();
}

/* In the parent and in the child: the child's copies are held by the
 * forking thread, the only thread the child has, so releasing them is
 * the same as making them new. */
void malloc_postfork_unlock(void)
{
  ms_unlock_all();
  tc_pool_fork_unlock();
  arena_fork_unlock();
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

/* At exit, in the shared heap's mode: blocks of other processes this
 * thread freed go back to them now (a thread cache gathers them into
 * bundles; the main thread's cache is not emptied at exit otherwise), then
 * the process leaves the region (the last one unlinks it).  Out of the
 * mode, nothing: shm_leave() would do nothing either (it tests what
 * shm_on() tests), and lies outside the hot text -- calling it made one
 * more 64 KiB window of the shim resident at every process's exit. */
PH_HOT __attribute__((destructor)) static void front_exit(void)
{
  if (!shm_on())
    return;
  tcache_flush_mine("exit");
  shm_leave();
}

/* Once per process, outside any heap lock.  pthread_atfork may allocate:
 * while this runs (state 1) allocations go to arena 0 without a cache. */
PH_STARTUP bool front_init(void)
{
  int expected = 0;

  if (ph_likely(atomic_load_explicit(&front_state, memory_order_acquire) == 2))
    return true;
  if (!atomic_compare_exchange_strong(&front_state, &expected, 1))
    return false;                       /* starting on another thread, or re-entered */
  arena_init(heap_default());
  tcache_init();
  ph_atfork(front_prefork, front_postfork_parent, front_postfork_child);
  atomic_store_explicit(&front_state, 2, memory_order_release);
  return true;
}
