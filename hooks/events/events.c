/*
 * events.c -- the memory events: the handler table behind
 * pinheap_set_event_handler() and the chain each event runs through.  The
 * entry points (events_munmap, ...) that stand for libc's calls, and run
 * the chain, are in events_calls.c.  Main entry points: events_chain_run()
 * and pinheap_set_event_handler().
 *
 * Three sources feed it: the interposers of replace.c (or GOT slots a
 * patcher points here) for application calls -- with files.c's, which
 * derive VM_UNMAPPED for pages a file call takes out of its mappings, and
 * route syscall()'s memory numbers here -- the allocator's OS layer
 * (its release and map slots, connected by events_init) and the release
 * listeners of release.c, which are VM_UNMAPPED handlers themselves.
 *
 * The table.  Each handler lives in a slot (callback, arg, event mask);
 * the chain order -- ascending priority, ties in registration order -- is
 * one array of links (slot, mask, slot sequence) published under a
 * sequence lock.  A dispatch copies the links of its event type (retrying
 * if a registration changed the array meanwhile), then calls each link's
 * slot.  No lock is held while a handler runs, so a handler may allocate,
 * map, unmap or (un)register.
 *
 * Removal waits for calls in flight.  A slot's sequence number is odd
 * while its callback, arg or mask change for a new registration or its
 * removal (under events_lock), and every such change bumps it: a link
 * names the exact registration it was taken from.  A partial unset only
 * narrows the slot's mask, keeping the sequence, so that dispatches under
 * way for the events the handler keeps still reach it.  A dispatch counts
 * itself into the slot's in-flight count, checks the sequence is still the
 * link's, reads callback and arg, checks again, checks the slot's mask
 * still has its event, calls, and counts itself out.  Unset changes the slot (bumping the
 * sequence) and then waits until the count holds only this thread's own
 * calls (a handler unsetting itself, or one running further up its own
 * stack).  Every count and sequence access is sequentially consistent, so
 * either the dispatch sees the new sequence or unset sees its count.  The
 * slot is not handed to a new handler until the wait is over.
 *
 * A thread that never comes back from a handler (cancelled inside it, or
 * pthread_exit) is counted out of its slots by a thread-specific key's
 * destructor at its exit, so an unset does not wait for it forever; a
 * handler that longjmps out of the chain is not supported.
 *
 * Nesting.  A handler's own mmap/munmap/malloc cause events too, delivered
 * to every handler up to EVENTS_REENTRY_DEPTH chains deep on a thread.
 * Deeper, a handler already running on this thread's stack is not entered
 * again (that is how a handler that unmaps on every release would recurse
 * forever), but every other one still is: a registration cache hears the
 * release however deep the handler that made it sits.  Each level deeper
 * can only add a handler not yet on the stack, so this ends; as a guard
 * for the stack, nothing is delivered beyond EVENTS_MAX_DEPTH.  What is
 * not delivered is counted (events_dropped_count) and warned of once.
 *
 * With no handler for an event the entry point costs one load (the mask of
 * all registered events) before the system call.
 */
#include "hooks/events/events.h"

#include "allocator/heap/chunk.h"     /* ph_lock */
#include "hooks/decide/dispatch.h"  /* copies_serving */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config/params.h"
#include "hooks/intercept/peers.h"
#include "pinheap.h"
#include "allocator/base/startup.h"

#define EVENTS_MAX_HANDLERS 128
#define EVENTS_REENTRY_DEPTH 4   /* a handler re-entered on its own thread this deep */
#define EVENTS_MAX_DEPTH 12      /* chains nested on one thread at most */
#define EVENTS_KNOWN PINHEAP_EVENT_ALL

typedef struct events_slot_s {
  _Atomic(pinheap_event_cb *) cb;
  void *_Atomic arg;
  atomic_int mask;          /* the events it handles (0: empty slot) */
  atomic_ulong seq;         /* odd while cb/arg/mask change; bumped by each change */
  atomic_long inflight;     /* dispatches inside this slot (checking or calling) */
  atomic_int draining;      /* unset is waiting on it: not reused yet */
  int priority;             /* under events_lock */
  unsigned long serial;     /* registration order, under events_lock */
} __attribute__((aligned(64))) events_slot_t;

/* A link of the chain: written under events_lock inside an odd
 * events_order_seq, read by dispatches with atomic loads. */
typedef struct events_link_s {
  int slot;
  int mask;
  unsigned long seq;
} events_link_t;

/* The chain and the slots, of which start-up writes the first few entries
 * (pinheap's own handlers): in one page-aligned table, order first, so
 * that those heads share one page whatever the layout around them (test
 * data_layout; apart, they fell on two pages or one by chance). */
PH_COLD_BSS static struct {
  events_link_t order[EVENTS_MAX_HANDLERS];
  events_slot_t slots[EVENTS_MAX_HANDLERS];
} events_table __attribute__((aligned(4096)));
#define events_slots events_table.slots
#define events_order events_table.order
/* Slots [0, events_slots_used) have been taken at some time (under
 * events_lock); the others are untouched, so that a process with a few
 * handlers keeps one page of events_slots resident, not all of them. */
PH_HOT_DATA static int events_slots_used;
PH_HOT_DATA static atomic_int events_order_n;
PH_HOT_DATA static atomic_ulong events_order_seq;     /* odd while events_order changes */
PH_HOT_DATA atomic_int events_mask;                   /* union of every slot's mask */
PH_HOT_DATA static unsigned long events_serial;       /* under events_lock */
PH_HOT_DATA static ph_lock_t events_lock;             /* serializes set/unset */

static __thread int events_depth __attribute__((tls_model("initial-exec")));
/* The slot this thread is calling at each depth (-1: none), so that unset
 * does not wait for its own thread's calls. */
static __thread signed char events_active[EVENTS_MAX_DEPTH]
    __attribute__((tls_model("initial-exec")));
PH_HOT_DATA static atomic_size_t events_dropped_count;
/* A thread that ends inside a handler (cancelled, pthread_exit) never
 * counts itself out of its slots: a key's destructor does it at its exit.
 * Armed once per thread, at its first dispatch. */
static pthread_key_t events_exit_key;
PH_HOT_DATA static atomic_int events_exit_key_made;      /* 0 no, 1 making, 2 made, -1 failed */
static __thread char events_exit_armed __attribute__((tls_model("initial-exec")));

/* ======================================================================= */
/*  dispatch                                                                */
/* ======================================================================= */

/* Calls one link's handler if its slot still holds that registration. */
static int events_slot_call(const events_link_t *l, int type, pinheap_event_t *ev)
{
  events_slot_t *s = &events_slots[l->slot];
  int rc = PINHEAP_EVENT_PASS;

  atomic_fetch_add(&s->inflight, 1);
  if (atomic_load(&s->seq) == l->seq) {
    pinheap_event_cb *cb = atomic_load(&s->cb);
    void *arg = atomic_load(&s->arg);
    /* the registration still has this event (a partial unset takes events
     * away without a new sequence: the slot's others keep firing) */
    if (cb != NULL && atomic_load(&s->seq) == l->seq && (atomic_load(&s->mask) & type)) {
      events_active[events_depth - 1] = (signed char)l->slot;
      rc = cb(type, ev, arg);
      events_active[events_depth - 1] = -1;
    }
  }
  atomic_fetch_sub_explicit(&s->inflight, 1, memory_order_release);
  return rc;
}

/* Copies the links for event type into out; returns how many. */
static int events_order_copy(int type, events_link_t *out)
{
  for (;;) {
    unsigned long seq = atomic_load(&events_order_seq);
    int n = 0;
    if (seq & 1) {
      sched_yield();
      continue;
    }
    int total = atomic_load_explicit(&events_order_n, memory_order_relaxed);
    for (int i = 0; i < total && i < EVENTS_MAX_HANDLERS; i++) {
      events_link_t *l = &events_order[i];
      int mask = __atomic_load_n(&l->mask, __ATOMIC_RELAXED);
      if (mask & type) {
        out[n].slot = __atomic_load_n(&l->slot, __ATOMIC_RELAXED);
        out[n].mask = mask;
        out[n].seq = __atomic_load_n(&l->seq, __ATOMIC_RELAXED);
        n++;
      }
    }
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&events_order_seq, memory_order_relaxed) == seq)
      return n;
  }
}

/* The thread ends with calls in flight up its stack (it was cancelled, or
 * called pthread_exit, inside a handler): they will never return, so they
 * no longer count, and unset stops waiting for them. */
static void events_thread_gone(void *unused)
{
  (void)unused;
  for (int d = 0; d < events_depth && d < EVENTS_MAX_DEPTH; d++) {
    if (events_active[d] >= 0)
      atomic_fetch_sub(&events_slots[events_active[d]].inflight, 1);
    events_active[d] = -1;
  }
  events_depth = 0;
}

/* Arms events_thread_gone for this thread (once; the key made once). */
PH_STARTUP static PH_NOINLINE void events_exit_arm(void)
{
  int made = atomic_load(&events_exit_key_made);
  while (made != 2) {
    if (made == -1)
      return;                       /* no key to be had: unprotected, as before */
    int none = 0;
    if (made == 0 && atomic_compare_exchange_strong(&events_exit_key_made, &none, 1)) {
      made = pthread_key_create(&events_exit_key, events_thread_gone) == 0 ? 2 : -1;
      atomic_store(&events_exit_key_made, made);
      break;
    }
    sched_yield();
    made = atomic_load(&events_exit_key_made);
  }
  if (made == 2 && pthread_setspecific(events_exit_key, &events_exit_armed) == 0)
    events_exit_armed = 1;
}

/* Deep in nested chains (EVENTS_REENTRY_DEPTH and beyond): drops the links
 * whose handler is already running on this thread, or all of them beyond
 * EVENTS_MAX_DEPTH.  @return how many links are left. */
static PH_NOINLINE int events_deep_links(events_link_t *links, int n)
{
  int kept = 0;

  for (int i = 0; i < n; i++) {
    bool active = events_depth >= EVENTS_MAX_DEPTH;
    for (int d = 0; d < events_depth && !active; d++)
      active = events_active[d] == links[i].slot;
    if (!active)
      links[kept++] = links[i];
  }
  if (kept < n &&
      atomic_fetch_add_explicit(&events_dropped_count, (size_t)(n - kept), memory_order_relaxed) == 0)
    ph_warn("a memory event handler keeps causing events from inside itself: nested deeper "
            "than 4, an event does not enter a handler already running on its thread (nor any "
            "beyond 12)", NULL);
  return kept;
}

/* Runs the handlers of one event type in chain order.  Call events stop at
 * the first PINHEAP_EVENT_STOP; derived events go to every handler.
 * @return PINHEAP_EVENT_STOP if the call must not be made. */
PH_HOT PH_NOINLINE int events_chain_run(int type, pinheap_event_t *ev)
{
  events_link_t links[EVENTS_MAX_HANDLERS];
  int rc = PINHEAP_EVENT_PASS;

  /* a call event with only derived-event handlers: one load */
  if (!(atomic_load_explicit(&events_mask, memory_order_relaxed) & type))
    return rc;
  int n = events_order_copy(type, links);
  if (n == 0)
    return rc;                              /* nothing to drop */
  if (ph_unlikely(events_depth >= EVENTS_REENTRY_DEPTH)) {
    n = events_deep_links(links, n);
    if (n == 0)
      return rc;
  }
  if (ph_unlikely(!events_exit_armed))
    events_exit_arm();
  events_depth++;
  events_active[events_depth - 1] = -1;
  for (int i = 0; i < n; i++) {
    if (events_slot_call(&links[i], type, ev) == PINHEAP_EVENT_STOP &&
        (type & PINHEAP_EVENT_CALLS)) {
      rc = PINHEAP_EVENT_STOP;
      break;
    }
  }
  events_depth--;
  return rc;
}

void events_vm_unmapped(void *addr, size_t len, int source)
{
  if (len == 0 || !events_wanted(PINHEAP_EVENT_VM_UNMAPPED))
    return;
  pinheap_event_t ev;
  ev.vm_unmapped.address = addr;
  ev.vm_unmapped.size = len;
  ev.vm_unmapped.source = source;
  events_chain_run(PINHEAP_EVENT_VM_UNMAPPED, &ev);
}

void events_vm_mapped(void *addr, size_t len, int source)
{
  if (len == 0 || !events_wanted(PINHEAP_EVENT_VM_MAPPED))
    return;
  pinheap_event_t ev;
  ev.vm_mapped.address = addr;
  ev.vm_mapped.size = len;
  ev.vm_mapped.source = source;
  events_chain_run(PINHEAP_EVENT_VM_MAPPED, &ev);
}

/* ---- the allocator's OS layer ------------------------------------------ */

PH_HOT static void events_from_os_release(void *addr, size_t len, void *ctx)
{
  (void)ctx;
  events_vm_unmapped(addr, len, PINHEAP_EVENT_SOURCE_ALLOCATOR);
}

PH_HOT static void events_from_os_map(void *addr, size_t len, void *ctx)
{
  (void)ctx;
  events_vm_mapped(addr, len, PINHEAP_EVENT_SOURCE_ALLOCATOR);
}

PH_STARTUP void events_init(void)
{
  os_set_release_listener(events_from_os_release, NULL);
  os_set_map_listener(events_from_os_map, NULL);
}

/* ======================================================================= */
/*  the handler table                                                       */
/* ======================================================================= */

/* How many of slot i's in-flight calls are this thread's own (up its stack). */
static long events_own_calls(int i)
{
  long own = 0;
  for (int d = 0; d < events_depth && d < EVENTS_MAX_DEPTH; d++)
    own += events_active[d] == i;
  return own;
}

/* Waits until slot i has no call in flight but this thread's own. */
static void events_wait_quiet(int i)
{
  long own = events_own_calls(i);
  while (atomic_load(&events_slots[i].inflight) > own)
    sched_yield();
}

/* The table's lock is held across fork, so that a child forked while
 * another thread (un)sets a handler can set one at once. */
static void events_prefork(void)
{
  ph_lock(&events_lock);
}

static void events_postfork_parent(void)
{
  ph_unlock(&events_lock);
}

/* In the child only the forking thread exists: calls that other threads
 * had in flight will never end, so they no longer count. */
static void events_postfork_child(void)
{
  for (int i = 0; i < events_slots_used; i++) {
    atomic_store(&events_slots[i].inflight, events_own_calls(i));
    atomic_store(&events_slots[i].draining, 0);
  }
  ph_unlock(&events_lock);
}

/* Changes slot i (events_lock held, inside an odd events_order_seq). */
PH_STARTUP static void events_slot_set(int i, pinheap_event_cb *cb, void *arg, int mask)
{
  events_slot_t *s = &events_slots[i];
  atomic_fetch_add(&s->seq, 1);            /* odd: dispatches skip the slot */
  atomic_store(&s->cb, cb);
  atomic_store(&s->arg, arg);
  atomic_store(&s->mask, mask);
  atomic_fetch_add(&s->seq, 1);            /* even again, and a new number */
}

/* Rebuilds the chain (priority, then registration order) and the mask of
 * wanted events; events_lock held, inside an odd events_order_seq. */
PH_STARTUP static void events_order_rebuild(void)
{
  int n = 0, all = 0;

  for (int i = 0; i < events_slots_used; i++) {
    events_slot_t *s = &events_slots[i];
    int mask = atomic_load_explicit(&s->mask, memory_order_relaxed);
    if (mask == 0)
      continue;
    /* insertion by (priority, serial) */
    int at = n;
    while (at > 0) {
      events_slot_t *p = &events_slots[events_order[at - 1].slot];
      if (p->priority < s->priority || (p->priority == s->priority && p->serial < s->serial))
        break;
      events_link_t prev = events_order[at - 1];
      __atomic_store_n(&events_order[at].slot, prev.slot, __ATOMIC_RELAXED);
      __atomic_store_n(&events_order[at].mask, prev.mask, __ATOMIC_RELAXED);
      __atomic_store_n(&events_order[at].seq, prev.seq, __ATOMIC_RELAXED);
      at--;
    }
    __atomic_store_n(&events_order[at].slot, i, __ATOMIC_RELAXED);
    __atomic_store_n(&events_order[at].mask, mask, __ATOMIC_RELAXED);
    __atomic_store_n(&events_order[at].seq, atomic_load(&s->seq), __ATOMIC_RELAXED);
    n++;
    all |= mask;
  }
  atomic_store_explicit(&events_order_n, n, memory_order_relaxed);
  atomic_store(&events_mask, all);
}

PH_STARTUP static void events_order_begin(void)
{
  atomic_fetch_add(&events_order_seq, 1);
  atomic_thread_fence(memory_order_release);
}

PH_STARTUP static void events_order_end(void)
{
  atomic_fetch_add(&events_order_seq, 1);
}

/* The slot holding cb/arg, or -1; events_lock held. */
PH_STARTUP static int events_slot_find(pinheap_event_cb *cb, void *arg)
{
  for (int i = 0; i < events_slots_used; i++) {
    events_slot_t *s = &events_slots[i];
    if (atomic_load_explicit(&s->mask, memory_order_relaxed) != 0 &&
        atomic_load_explicit(&s->cb, memory_order_relaxed) == cb &&
        atomic_load_explicit(&s->arg, memory_order_relaxed) == arg)
      return i;
  }
  return -1;
}

PH_HOT int PINHEAP_NAME(set_event_handler)(int events, int priority, pinheap_event_cb *cb, void *arg)
{
  PH_HOT_DATA static atomic_int atfork_done;
  int slot = -1;

  if (events == 0 || (events & ~EVENTS_KNOWN) != 0 || cb == NULL)
    return EINVAL;
  const copies_api_t *serving = copies_serving();  /* another copy serves (copies.c) */
  if (ph_unlikely(serving != NULL))
    return serving->set_event_handler(events, priority, cb, arg);
  if (!params_events_on(PINHEAP_PREFIX_STRING "set_event_handler"))
    return ENOTSUP;                         /* PINHEAP_EVENTS=0 */
  events_init();                            /* connects the OS layer */
  if (atomic_exchange(&atfork_done, 1) == 0)
    ph_atfork(events_prefork, events_postfork_parent, events_postfork_child);
  ph_lock(&events_lock);
  if (events_slot_find(cb, arg) >= 0) {
    ph_unlock(&events_lock);
    return EEXIST;
  }
  for (int i = 0; i < events_slots_used; i++) {
    if (atomic_load_explicit(&events_slots[i].mask, memory_order_relaxed) == 0 &&
        !atomic_load(&events_slots[i].draining)) {
      slot = i;
      break;
    }
  }
  if (slot < 0 && events_slots_used < EVENTS_MAX_HANDLERS)
    slot = events_slots_used++;             /* a slot never taken before */
  if (slot < 0) {
    ph_unlock(&events_lock);
    return ENOSPC;
  }
  events_slots[slot].priority = priority;
  events_slots[slot].serial = ++events_serial;
  events_order_begin();
  events_slot_set(slot, cb, arg, events);
  events_order_rebuild();
  events_order_end();
  ph_unlock(&events_lock);
  return 0;
}
COPIES_SELF_ALIAS(set_event_handler);

PH_HOT int PINHEAP_NAME(unset_event_handler)(int events, pinheap_event_cb *cb, void *arg)
{
  int slot, mask;

  if (events == 0 || (events & ~EVENTS_KNOWN) != 0 || cb == NULL)
    return EINVAL;
  const copies_api_t *serving = copies_serving();  /* another copy serves (copies.c) */
  if (ph_unlikely(serving != NULL))
    return serving->unset_event_handler(events, cb, arg);
  ph_lock(&events_lock);
  slot = events_slot_find(cb, arg);
  if (slot < 0 || (atomic_load_explicit(&events_slots[slot].mask, memory_order_relaxed) &
                   events) == 0) {
    ph_unlock(&events_lock);
    return ENOENT;
  }
  mask = atomic_load_explicit(&events_slots[slot].mask, memory_order_relaxed) & ~events;
  events_order_begin();
  if (mask == 0) {
    events_slot_set(slot, NULL, NULL, 0);
    atomic_store(&events_slots[slot].draining, 1);
  } else {
    /* the same registration with fewer events: no new sequence, so that
     * dispatches under way for the events it keeps still call it */
    atomic_store(&events_slots[slot].mask, mask);
  }
  events_order_rebuild();
  events_order_end();
  ph_unlock(&events_lock);
  /* Outside the lock: a handler running elsewhere may set or unset. */
  events_wait_quiet(slot);
  if (mask == 0)
    atomic_store(&events_slots[slot].draining, 0);
  return 0;
}
COPIES_SELF_ALIAS(unset_event_handler);
