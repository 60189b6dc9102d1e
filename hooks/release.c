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
 *
 * Unregistering waits for calls in flight.  Each slot has a sequence
 * number (odd while its fn/ctx pair is being changed, under release_lock)
 * and an in-flight count.  A dispatch that finds a listener in a slot
 * counts itself in, reads sequence, fn, ctx, sequence again (a consistent
 * pair, or nothing), calls, and counts itself out: no lock, one atomic
 * add and one subtract per listener actually called.  Unregister empties
 * the slot and then waits until the count holds only this thread's own
 * calls (a listener unregistering itself or one that is running further
 * up its own stack): every count is sequentially consistent, so either
 * the dispatch sees the emptied slot or unregister sees its count.  The
 * registry lock is not held while waiting, and the emptied slot is not
 * handed to a new listener until the wait is over (its calls would keep
 * the count up).
 */
#include "dispatch.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "chunk.h"
#include "pinheap.h"

#define RELEASE_MAX_LISTENERS 64
#define RELEASE_MAX_DEPTH 4

typedef struct release_slot_s {
  _Atomic(pinheap_release_fn *) fn;
  void *_Atomic ctx;
  atomic_ulong seq;         /* odd while fn/ctx change */
  atomic_long inflight;     /* dispatches inside this slot (reading or calling) */
  atomic_int draining;      /* unregister is waiting on it: not reused yet */
} __attribute__((aligned(64))) release_slot_t;   /* one cache line each */

static release_slot_t release_slots[RELEASE_MAX_LISTENERS];
static ph_lock_t release_lock;             /* serializes (un)registration */
static __thread int release_depth __attribute__((tls_model("initial-exec")));
/* The slot this thread is calling at each nesting depth (-1: none), so
 * that unregister does not wait for its own thread's calls. */
static __thread signed char release_active[RELEASE_MAX_DEPTH]
    __attribute__((tls_model("initial-exec")));
static atomic_size_t release_dropped;      /* nested too deep: not delivered */

/* Calls slot i's listener if one is there, counted in its in-flight count. */
static void slot_call(unsigned i, void *addr, size_t len, int from_alloc)
{
  release_slot_t *s = &release_slots[i];
  pinheap_release_fn *fn;
  void *ctx;
  unsigned long seq;

  atomic_fetch_add(&s->inflight, 1);
  seq = atomic_load(&s->seq);
  fn = atomic_load(&s->fn);
  ctx = atomic_load(&s->ctx);
  if (fn != NULL && (seq & 1) == 0 && atomic_load(&s->seq) == seq) {
    release_active[release_depth - 1] = (signed char)i;
    fn(addr, len, from_alloc, ctx);
    release_active[release_depth - 1] = -1;
  }
  atomic_fetch_sub_explicit(&s->inflight, 1, memory_order_release);
}

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
  release_active[release_depth - 1] = -1;
  for (unsigned i = 0; i < RELEASE_MAX_LISTENERS; i++) {
    /* An empty slot costs one plain load; a listener registered meanwhile
     * may miss this release (its registration has not returned yet). */
    if (atomic_load_explicit(&release_slots[i].fn, memory_order_relaxed) != NULL)
      slot_call(i, addr, len, from_alloc);
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

/* How many of slot i's in-flight calls are this thread's own (up its stack). */
static long slot_own_calls(int i)
{
  long own = 0;
  for (int d = 0; d < release_depth && d < RELEASE_MAX_DEPTH; d++)
    own += release_active[d] == i;
  return own;
}

/* Waits until slot i has no call in flight but this thread's own. */
static void slot_wait_quiet(int i)
{
  long own = slot_own_calls(i);
  while (atomic_load(&release_slots[i].inflight) > own)
    sched_yield();
}

/* The registry's lock is held across fork, so that a child forked while
 * another thread (un)registers can register at once. */
static void release_prefork(void)
{
  ph_lock(&release_lock);
}

static void release_postfork_parent(void)
{
  ph_unlock(&release_lock);
}

/* In the child only the forking thread exists: calls that other threads
 * had in flight will never end, so they no longer count. */
static void release_postfork_child(void)
{
  for (int i = 0; i < RELEASE_MAX_LISTENERS; i++) {
    atomic_store(&release_slots[i].inflight, slot_own_calls(i));
    atomic_store(&release_slots[i].draining, 0);
  }
  ph_unlock(&release_lock);
}

/* Changes slot i's pair; release_lock held. */
static void slot_set(int i, pinheap_release_fn *fn, void *ctx)
{
  release_slot_t *s = &release_slots[i];
  atomic_fetch_add(&s->seq, 1);            /* odd: readers skip the slot */
  atomic_store(&s->fn, fn);
  atomic_store(&s->ctx, ctx);
  atomic_fetch_add(&s->seq, 1);            /* even again */
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
    pthread_atfork(release_prefork, release_postfork_parent, release_postfork_child);
  ph_lock(&release_lock);
  for (int i = 0; i < RELEASE_MAX_LISTENERS; i++) {
    pinheap_release_fn *f = atomic_load_explicit(&release_slots[i].fn, memory_order_relaxed);
    if (f == fn && atomic_load_explicit(&release_slots[i].ctx, memory_order_relaxed) == ctx) {
      ph_unlock(&release_lock);
      return EEXIST;
    }
    if (f == NULL && free_slot < 0 && !atomic_load(&release_slots[i].draining))
      free_slot = i;
  }
  if (free_slot >= 0) {
    slot_set(free_slot, fn, ctx);
    rc = 0;
  }
  ph_unlock(&release_lock);
  return rc;
}

int PINHEAP_NAME(unregister_release)(pinheap_release_fn *fn, void *ctx)
{
  int slot = -1;

  ph_lock(&release_lock);
  for (int i = 0; i < RELEASE_MAX_LISTENERS; i++) {
    if (atomic_load_explicit(&release_slots[i].fn, memory_order_relaxed) == fn &&
        atomic_load_explicit(&release_slots[i].ctx, memory_order_relaxed) == ctx) {
      slot_set(i, NULL, NULL);
      atomic_store(&release_slots[i].draining, 1);
      slot = i;
      break;
    }
  }
  ph_unlock(&release_lock);
  if (slot < 0)
    return ENOENT;
  /* Outside the lock: a listener running elsewhere may (un)register. */
  slot_wait_quiet(slot);
  atomic_store(&release_slots[slot].draining, 0);
  return 0;
}
