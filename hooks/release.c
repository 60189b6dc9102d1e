/*
 * release.c -- the release listeners: the registry behind
 * pinheap_register_release(), and the chain every release runs through
 * before memory leaves the process.  Main entry point: release_dispatch().
 *
 * Two sources feed it: the allocator's OS layer (its one listener slot is
 * connected here; from_alloc = 1) and the munmap/mremap/madvise/shmdt
 * interposers of replace.c (from_alloc = 0).  Listeners are called without
 * any lock held, so a listener may allocate, free, or (un)register; a
 * release caused from inside a listener is delivered too, up to a small
 * nesting depth, so a listener that frees memory cannot recurse forever.
 */
#include "dispatch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "heap.h"
#include "pinheap.h"

#define RELEASE_MAX_LISTENERS 64
#define RELEASE_MAX_DEPTH 4

typedef struct release_slot_s {
  _Atomic(pinheap_release_fn *) fn;
  void *_Atomic ctx;
} release_slot_t;

static release_slot_t release_slots[RELEASE_MAX_LISTENERS];
static ph_lock_t release_lock;             /* serializes (un)registration */
static __thread int release_depth __attribute__((tls_model("initial-exec")));
static atomic_size_t release_dropped;      /* nested too deep: not delivered */

void release_dispatch(void *addr, size_t len, int from_alloc)
{
  if (len == 0)
    return;
  if (ph_unlikely(release_depth >= RELEASE_MAX_DEPTH)) {
    if (atomic_fetch_add_explicit(&release_dropped, 1, memory_order_relaxed) == 0)
      ph_warn("a release listener keeps releasing memory from inside itself; "
              "releases nested deeper than 4 are not reported", NULL);
    return;
  }
  release_depth++;
  for (unsigned i = 0; i < RELEASE_MAX_LISTENERS; i++) {
    pinheap_release_fn *fn, *again;
    void *ctx;
    /* A slot can be emptied and refilled meanwhile: read fn, ctx, fn again
     * (ctx is stored before fn), so the pair called was registered. */
    fn = atomic_load_explicit(&release_slots[i].fn, memory_order_acquire);
    do {
      if (fn == NULL)
        break;
      ctx = atomic_load_explicit(&release_slots[i].ctx, memory_order_acquire);
      again = atomic_load_explicit(&release_slots[i].fn, memory_order_acquire);
      if (again == fn) {
        fn(addr, len, from_alloc, ctx);
        break;
      }
      fn = again;
    } while (1);
  }
  release_depth--;
}

static void release_from_os(void *addr, size_t len, void *ctx)
{
  (void)ctx;
  release_dispatch(addr, len, 1);
}

void release_init(void)
{
  os_set_release_listener(release_from_os, NULL);
}

/* The registry's lock is held across fork, so that a child forked while
 * another thread (un)registers can register at once. */
static void release_prefork(void)
{
  ph_lock(&release_lock);
}

static void release_postfork(void)
{
  ph_unlock(&release_lock);
}

int PINHEAP_NAME(register_release)(pinheap_release_fn *fn, void *ctx)
{
  static atomic_int atfork_done;
  int rc = ENOSPC;
  int free_slot = -1;

  if (fn == NULL)
    return EINVAL;
  dispatch_decide();                        /* connects the OS slot */
  if (atomic_exchange(&atfork_done, 1) == 0)  /* here, not in the first malloc */
    pthread_atfork(release_prefork, release_postfork, release_postfork);
  ph_lock(&release_lock);
  for (int i = 0; i < RELEASE_MAX_LISTENERS; i++) {
    pinheap_release_fn *f = atomic_load_explicit(&release_slots[i].fn, memory_order_relaxed);
    if (f == fn && atomic_load_explicit(&release_slots[i].ctx, memory_order_relaxed) == ctx) {
      ph_unlock(&release_lock);
      return EEXIST;
    }
    if (f == NULL && free_slot < 0)
      free_slot = i;
  }
  if (free_slot >= 0) {
    atomic_store_explicit(&release_slots[free_slot].ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&release_slots[free_slot].fn, fn, memory_order_release);
    rc = 0;
  }
  ph_unlock(&release_lock);
  return rc;
}

int PINHEAP_NAME(unregister_release)(pinheap_release_fn *fn, void *ctx)
{
  int rc = ENOENT;

  ph_lock(&release_lock);
  for (int i = 0; i < RELEASE_MAX_LISTENERS; i++) {
    if (atomic_load_explicit(&release_slots[i].fn, memory_order_relaxed) == fn &&
        atomic_load_explicit(&release_slots[i].ctx, memory_order_relaxed) == ctx) {
      atomic_store_explicit(&release_slots[i].fn, NULL, memory_order_release);
      rc = 0;
      break;
    }
  }
  ph_unlock(&release_lock);
  return rc;
}
