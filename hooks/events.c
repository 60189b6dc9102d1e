/*
 * events.c -- the memory events: the handler table behind
 * pinheap_set_event_handler(), the chain each event runs through, and the
 * entry points (events_munmap, ...) that stand for libc's calls.  Main
 * entry points: events_chain_run() (static) and the events_* of events.h.
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
#include "events.h"

#include "chunk.h"     /* ph_lock */
#include "dispatch.h"  /* copies_serving */

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

#include "params.h"
#include "peers.h"
#include "pinheap.h"
#include "startup.h"

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
PH_HOT static PH_NOINLINE int events_chain_run(int type, pinheap_event_t *ev)
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
/*  the entry points                                                        */
/* ======================================================================= */

size_t events_page_len(const void *addr, size_t len)
{
  size_t page = os_page_size();
  if (((uintptr_t)addr & (page - 1)) != 0 || len > SIZE_MAX - page)
    return 0;
  return (len + page - 1) & ~(page - 1);
}

static uintptr_t events_page_up(uintptr_t a)
{
  size_t page = os_page_size();
  return (a + page - 1) & ~(uintptr_t)(page - 1);
}

/* ---- mmap ---------------------------------------------------------------- */

PH_HOT static PH_NOINLINE void *events_mmap_slow(void *addr, size_t length, int prot, int flags, int fd,
                                          off_t offset)
{
  pinheap_event_t ev;
  ev.mmap.result = MAP_FAILED;
  ev.mmap.address = addr;
  ev.mmap.size = length;
  ev.mmap.prot = prot;
  ev.mmap.flags = flags;
  ev.mmap.fd = fd;
  ev.mmap.offset = offset;
  if (events_chain_run(PINHEAP_EVENT_MMAP, &ev) == PINHEAP_EVENT_STOP)
    return ev.mmap.result;
  /* MAP_FIXED replaces whatever was mapped there (MAP_FIXED_NOREPLACE
   * fails instead, and its flag bits do not include MAP_FIXED). */
  if (ev.mmap.flags & MAP_FIXED)
    events_vm_unmapped(ev.mmap.address, events_page_len(ev.mmap.address, ev.mmap.size),
                       PINHEAP_EVENT_SOURCE_APP);
  ev.mmap.result = peers_mmap(ev.mmap.address, ev.mmap.size, ev.mmap.prot, ev.mmap.flags,
                              ev.mmap.fd, ev.mmap.offset);
  if (ev.mmap.result != MAP_FAILED) {
    int saved = errno;
    events_vm_mapped(ev.mmap.result, events_page_len(ev.mmap.result, ev.mmap.size),
                     PINHEAP_EVENT_SOURCE_APP);
    errno = saved;
  }
  return ev.mmap.result;
}

PH_HOT void *events_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
  if (ph_likely(!events_wanted(PINHEAP_EVENT_MMAP | PINHEAP_EVENT_VM_MAPPED |
                               PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_mmap(addr, length, prot, flags, fd, offset);
  if (peers_returning(addr))
    return (void *)ph_syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
  return events_mmap_slow(addr, length, prot, flags, fd, offset);
}

/* ---- munmap -------------------------------------------------------------- */

PH_HOT static PH_NOINLINE int events_munmap_slow(void *addr, size_t length)
{
  pinheap_event_t ev;
  ev.munmap.result = -1;
  ev.munmap.address = addr;
  ev.munmap.size = length;
  if (events_chain_run(PINHEAP_EVENT_MUNMAP, &ev) == PINHEAP_EVENT_STOP)
    return ev.munmap.result;
  events_vm_unmapped(ev.munmap.address, events_page_len(ev.munmap.address, ev.munmap.size),
                     PINHEAP_EVENT_SOURCE_APP);
  return peers_munmap(ev.munmap.address, ev.munmap.size);
}

PH_HOT int events_munmap(void *addr, size_t length)
{
  if (ph_likely(!events_wanted(PINHEAP_EVENT_MUNMAP | PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_munmap(addr, length);
  if (peers_returning(addr))
    return (int)ph_syscall(SYS_munmap, addr, length);
  return events_munmap_slow(addr, length);
}

/* ---- mremap -------------------------------------------------------------- */

PH_HOT static PH_NOINLINE void *events_mremap_slow(void *old, size_t old_size, size_t new_size,
                                            int flags, void *new_address)
{
  pinheap_event_t ev;
  ev.mremap.result = MAP_FAILED;
  ev.mremap.address = old;
  ev.mremap.old_size = old_size;
  ev.mremap.new_size = new_size;
  ev.mremap.flags = flags;
  ev.mremap.new_address = new_address;
  if (events_chain_run(PINHEAP_EVENT_MREMAP, &ev) == PINHEAP_EVENT_STOP)
    return ev.mremap.result;
  old = ev.mremap.address;
  flags = ev.mremap.flags;
  new_address = (flags & MREMAP_FIXED) ? ev.mremap.new_address : NULL;
  size_t old_len = events_page_len(old, ev.mremap.old_size);
  size_t new_len = events_page_len(old, ev.mremap.new_size);
  bool may_move = (flags & (MREMAP_MAYMOVE | MREMAP_FIXED)) != 0;

  /* The destination of MREMAP_FIXED loses whatever was mapped there. */
  if (flags & MREMAP_FIXED)
    events_vm_unmapped(new_address, events_page_len(new_address, ev.mremap.new_size),
                       PINHEAP_EVENT_SOURCE_APP);
  /* The old range may move away: all of it.  In place: a shrink's tail. */
  if (may_move)
    events_vm_unmapped(old, old_len, PINHEAP_EVENT_SOURCE_APP);
  else if (new_len < old_len)
    events_vm_unmapped((char *)old + new_len, old_len - new_len, PINHEAP_EVENT_SOURCE_APP);
  ev.mremap.result = peers_mremap(old, ev.mremap.old_size, ev.mremap.new_size, flags,
                                  new_address);
  if (ev.mremap.result != MAP_FAILED) {
    int saved = errno;
    if (may_move)      /* reported gone above: all of the new range is new */
      events_vm_mapped(ev.mremap.result, new_len, PINHEAP_EVENT_SOURCE_APP);
    else if (new_len > old_len)
      events_vm_mapped((char *)old + old_len, new_len - old_len, PINHEAP_EVENT_SOURCE_APP);
    errno = saved;
  }
  return ev.mremap.result;
}

PH_HOT void *events_mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...)
{
  void *new_address = NULL;

  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_address = va_arg(ap, void *);
    va_end(ap);
  }
  if (ph_likely(!events_wanted(PINHEAP_EVENT_MREMAP | PINHEAP_EVENT_VM_MAPPED |
                               PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_mremap(old_address, old_size, new_size, flags, new_address);
  if (peers_returning(old_address))
    return (void *)ph_syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address);
  return events_mremap_slow(old_address, old_size, new_size, flags, new_address);
}

/* ---- madvise ------------------------------------------------------------- */

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102   /* Linux 6.13; glibc 2.36's headers predate it */
#endif

/* The advice values after which a range reads back as zeros or as the
 * file (or faults, for a guard): its pages are gone. */
bool events_advice_releases(int advice)
{
  switch (advice) {
  case MADV_DONTNEED:
  case MADV_FREE:
  case MADV_REMOVE:
  case MADV_GUARD_INSTALL:       /* zaps the range as DONTNEED does */
#ifdef MADV_DONTNEED_LOCKED
  case MADV_DONTNEED_LOCKED:
#endif
    return true;
  default:
    return false;
  }
}

PH_HOT static PH_NOINLINE int events_madvise_slow(void *addr, size_t length, int advice)
{
  pinheap_event_t ev;
  ev.madvise.result = -1;
  ev.madvise.address = addr;
  ev.madvise.size = length;
  ev.madvise.advice = advice;
  if (events_chain_run(PINHEAP_EVENT_MADVISE, &ev) == PINHEAP_EVENT_STOP)
    return ev.madvise.result;
  if (events_advice_releases(ev.madvise.advice))
    events_vm_unmapped(ev.madvise.address, events_page_len(ev.madvise.address, ev.madvise.size),
                       PINHEAP_EVENT_SOURCE_APP);
  return peers_madvise(ev.madvise.address, ev.madvise.size, ev.madvise.advice);
}

PH_HOT int events_madvise(void *addr, size_t length, int advice)
{
  if (ph_likely(!events_wanted(PINHEAP_EVENT_MADVISE | PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_madvise(addr, length, advice);
  if (peers_returning(addr))
    return (int)ph_syscall(SYS_madvise, addr, length, advice);
  return events_madvise_slow(addr, length, advice);
}

/* ---- shmat, shmdt -------------------------------------------------------- */

/* The size of System V segment shmid, page-rounded; 0 if unknown. */
static size_t events_shm_size(int shmid)
{
  struct shmid_ds ds;
  int saved = errno;

  if (ph_syscall(SYS_shmctl, shmid, IPC_STAT, &ds) != 0) {
    errno = saved;
    return 0;
  }
  return (size_t)events_page_up(ds.shm_segsz);
}

/* What shmdt(addr) detaches, found as the kernel finds it (ipc/shm.c):
 * the first System V mapping at or above addr whose offset in the segment
 * is its distance from addr (the segment's start, or, its head unmapped,
 * the first fragment left), then every later mapping of the same segment
 * with that property, up to addr + the segment's size -- the fragments an
 * mprotect or munmap split it into.  The ranges are gathered first and
 * reported after the walk (handlers run with no file open). */
#define EVENTS_SHM_RANGES 32
typedef struct events_shmdt_walk_s {
  uintptr_t addr;
  uint64_t limit;                          /* addr + size, or UINT64_MAX */
  bool found;
  unsigned dev_major, dev_minor;
  uint64_t inode;
  int n;
  uintptr_t lo[EVENTS_SHM_RANGES], hi[EVENTS_SHM_RANGES];
} events_shmdt_walk_t;

static bool events_map_is_sysv(const os_map_t *m)
{
  return m->path_len >= 5 && memcmp(m->path, "/SYSV", 5) == 0;
}

static int events_shmdt_line(const os_map_t *m, void *ctx)
{
  events_shmdt_walk_t *w = ctx;

  if (m->lo < w->addr || !events_map_is_sysv(m) || m->lo - w->addr != m->offset)
    return 0;
  if (!w->found) {
    w->found = true;
    w->dev_major = m->dev_major;
    w->dev_minor = m->dev_minor;
    w->inode = m->inode;                   /* a segment's inode is its id */
    size_t size = events_shm_size((int)m->inode);
    w->limit = size != 0 ? (uint64_t)w->addr + size : UINT64_MAX;
  } else if (m->dev_major != w->dev_major || m->dev_minor != w->dev_minor ||
             m->inode != w->inode) {
    return 0;
  }
  if (m->hi > w->limit)
    return 1;
  if (w->n > 0 && w->hi[w->n - 1] == m->lo) {
    w->hi[w->n - 1] = m->hi;               /* adjacent fragments: one range */
  } else if (w->n == EVENTS_SHM_RANGES) {
    w->hi[w->n - 1] = m->hi;               /* out of room: one range over the gap (a
                                              superset, never a miss) */
  } else {
    w->lo[w->n] = m->lo;
    w->hi[w->n] = m->hi;
    w->n++;
  }
  return 0;
}

void events_shmdt_ranges(const void *addr, void (*fn)(void *start, size_t len))
{
  events_shmdt_walk_t w;

  w.addr = (uintptr_t)addr;
  w.found = false;
  w.n = 0;
  if (((uintptr_t)addr & (os_page_size() - 1)) != 0 ||
      os_maps_walk(events_shmdt_line, &w) != 0)
    return;
  for (int i = 0; i < w.n; i++)
    fn((void *)w.lo[i], w.hi[i] - w.lo[i]);
}

static void events_shmdt_release(void *start, size_t len)
{
  events_vm_unmapped(start, len, PINHEAP_EVENT_SOURCE_APP);
}

PH_HOT static PH_NOINLINE void *events_shmat_slow(int shmid, const void *shmaddr, int shmflg)
{
  pinheap_event_t ev;
  ev.shmat.result = (void *)-1;
  ev.shmat.shmid = shmid;
  ev.shmat.shmaddr = shmaddr;
  ev.shmat.shmflg = shmflg;
  if (events_chain_run(PINHEAP_EVENT_SHMAT, &ev) == PINHEAP_EVENT_STOP)
    return ev.shmat.result;
  size_t len = events_shm_size(ev.shmat.shmid);
  if ((ev.shmat.shmflg & SHM_REMAP) && ev.shmat.shmaddr != NULL) {
    uintptr_t at = (uintptr_t)ev.shmat.shmaddr;
    if (ev.shmat.shmflg & SHM_RND)
      at &= ~(uintptr_t)(SHMLBA - 1);
    events_vm_unmapped((void *)at, events_page_len((void *)at, len), PINHEAP_EVENT_SOURCE_APP);
  }
  ev.shmat.result = peers_shmat(ev.shmat.shmid, ev.shmat.shmaddr, ev.shmat.shmflg);
  if (ev.shmat.result != (void *)-1) {
    int saved = errno;
    events_vm_mapped(ev.shmat.result, len, PINHEAP_EVENT_SOURCE_APP);
    errno = saved;
  }
  return ev.shmat.result;
}

PH_HOT void *events_shmat(int shmid, const void *shmaddr, int shmflg)
{
  if (ph_likely(!events_wanted(PINHEAP_EVENT_SHMAT | PINHEAP_EVENT_VM_MAPPED |
                               PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_shmat(shmid, shmaddr, shmflg);
  if (peers_returning(shmaddr))
    return (void *)ph_syscall(SYS_shmat, shmid, shmaddr, shmflg);
  return events_shmat_slow(shmid, shmaddr, shmflg);
}

PH_HOT static PH_NOINLINE int events_shmdt_slow(const void *shmaddr)
{
  pinheap_event_t ev;
  ev.shmdt.result = -1;
  ev.shmdt.shmaddr = shmaddr;
  if (events_chain_run(PINHEAP_EVENT_SHMDT, &ev) == PINHEAP_EVENT_STOP)
    return ev.shmdt.result;
  if (events_wanted(PINHEAP_EVENT_VM_UNMAPPED))  /* the maps read costs: only if wanted */
    events_shmdt_ranges(ev.shmdt.shmaddr, events_shmdt_release);
  return peers_shmdt(ev.shmdt.shmaddr);
}

PH_HOT int events_shmdt(const void *shmaddr)
{
  if (ph_likely(!events_wanted(PINHEAP_EVENT_SHMDT | PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_shmdt(shmaddr);
  if (peers_returning(shmaddr))
    return (int)ph_syscall(SYS_shmdt, shmaddr);
  return events_shmdt_slow(shmaddr);
}

/* ---- brk, sbrk ----------------------------------------------------------- */

/* glibc's record of the current break (exported since GLIBC_2.2.5; its own
 * sbrk reads it).  glibc 2.36 exports __sbrk but no __brk, and its sbrk
 * calls its internal __brk directly, so neither could carry our event: both
 * calls are made here with the raw brk system call, and __curbrk is kept
 * in step as glibc's brk keeps it. */
extern void *__curbrk;

static uintptr_t events_curbrk(void)
{
  void *cur = __atomic_load_n(&__curbrk, __ATOMIC_RELAXED);
  if (cur == NULL) {
    cur = (void *)ph_syscall(SYS_brk, 0);
    __atomic_store_n(&__curbrk, cur, __ATOMIC_RELAXED);
  }
  return (uintptr_t)cur;
}

/* Where the heap starts (start_brk, field 47 of /proc/self/stat): the
 * kernel refuses a break below it, and moves nothing.  Read once; 0 if it
 * cannot be read (then no shrink is reported below the first page). */
static uintptr_t events_start_brk(void)
{
  static uintptr_t start;                   /* 1: unreadable */
  uintptr_t v = __atomic_load_n(&start, __ATOMIC_RELAXED);
  if (v != 0)
    return v == 1 ? 0 : v;
  char buf[1024];
  int saved = errno;
  long fd = ph_syscall(SYS_openat, AT_FDCWD, "/proc/self/stat", O_RDONLY | O_CLOEXEC);
  long n = fd >= 0 ? ph_syscall(SYS_read, (int)fd, buf, sizeof(buf) - 1) : -1;
  if (fd >= 0)
    ph_syscall(SYS_close, (int)fd);
  errno = saved;
  v = 1;
  if (n > 0) {
    buf[n] = '\0';
    uintptr_t x = (uintptr_t)ph_stat_number(ph_stat_field(buf, 47));
    if (x != 0)
      v = x;
  }
  __atomic_store_n(&start, v, __ATOMIC_RELAXED);
  return v == 1 ? 0 : v;
}

/* Moves the break to addr: VM_UNMAPPED before a shrink, VM_MAPPED after a
 * growth (the whole pages between the old and new break).  A break below
 * the heap's start (brk(0), glibc's way of asking) moves nothing and is
 * reported as nothing.  As the system call: the break after it (the old
 * one if the kernel refused). */
static uintptr_t events_brk_set(void *addr, bool report)
{
  uintptr_t old = events_curbrk(), want = (uintptr_t)addr;
  uintptr_t old_top = events_page_up(old), want_top = events_page_up(want);

  if (want_top < old_top && report && want >= events_start_brk() && want != 0)
    events_vm_unmapped((void *)want_top, old_top - want_top, PINHEAP_EVENT_SOURCE_APP);
  uintptr_t now = report ? peers_brk(addr) : (uintptr_t)ph_syscall(SYS_brk, addr);
  __atomic_store_n(&__curbrk, (void *)now, __ATOMIC_RELAXED);
  uintptr_t now_top = events_page_up(now);
  if (now >= want && now_top > old_top && report)
    events_vm_mapped((void *)old_top, now_top - old_top, PINHEAP_EVENT_SOURCE_APP);
  return now;
}

/* As glibc's brk: 0, or -1 with ENOMEM. */
static int events_brk_move(void *addr, bool report)
{
  if (events_brk_set(addr, report) < (uintptr_t)addr) {
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

PH_HOT int events_brk(void *addr)
{
  if (ph_unlikely(peers_returning(addr)))
    return events_brk_move(addr, false);   /* reported by the call it came from */
  if (events_wanted(PINHEAP_EVENT_BRK)) {
    pinheap_event_t ev;
    ev.brk.result = -1;
    ev.brk.address = addr;
    if (events_chain_run(PINHEAP_EVENT_BRK, &ev) == PINHEAP_EVENT_STOP)
      return ev.brk.result;
    addr = ev.brk.address;
  }
  return events_brk_move(addr, true);
}

uintptr_t events_brk_syscall(void *addr)
{
  /* brk(0) asks where the break is: nothing moves */
  if (addr == NULL || ph_unlikely(peers_returning(addr)))
    return events_brk_set(addr, false);
  if (events_wanted(PINHEAP_EVENT_BRK)) {
    pinheap_event_t ev;
    ev.brk.result = -1;
    ev.brk.address = addr;
    if (events_chain_run(PINHEAP_EVENT_BRK, &ev) == PINHEAP_EVENT_STOP)
      return ev.brk.result == 0 ? (uintptr_t)ev.brk.address : events_curbrk();
    addr = ev.brk.address;
  }
  return events_brk_set(addr, true);
}

PH_HOT void *events_sbrk(intptr_t increment)
{
  if (events_wanted(PINHEAP_EVENT_SBRK)) {
    pinheap_event_t ev;
    ev.sbrk.result = (void *)-1;
    ev.sbrk.increment = increment;
    if (events_chain_run(PINHEAP_EVENT_SBRK, &ev) == PINHEAP_EVENT_STOP)
      return ev.sbrk.result;
    increment = ev.sbrk.increment;
  }
  uintptr_t old = events_curbrk();
  if (increment == 0)
    return (void *)old;
  if ((increment > 0 && (uintptr_t)increment > UINTPTR_MAX - old) ||
      (increment < 0 && (uintptr_t)-increment > old)) {
    errno = ENOMEM;
    return (void *)-1;
  }
  if (events_brk_move((void *)(old + (uintptr_t)increment), true) != 0)
    return (void *)-1;
  return (void *)old;
}

const events_symbol_t events_symbols[] = {
  { PINHEAP_EVENT_MMAP, "mmap", (void *)events_mmap },
  { PINHEAP_EVENT_MMAP, "mmap64", (void *)events_mmap },
  { PINHEAP_EVENT_MUNMAP, "munmap", (void *)events_munmap },
  { PINHEAP_EVENT_MREMAP, "mremap", (void *)events_mremap },
  { PINHEAP_EVENT_MADVISE, "madvise", (void *)events_madvise },
  { PINHEAP_EVENT_SHMAT, "shmat", (void *)events_shmat },
  { PINHEAP_EVENT_SHMDT, "shmdt", (void *)events_shmdt },
  { PINHEAP_EVENT_SBRK, "sbrk", (void *)events_sbrk },
  { PINHEAP_EVENT_BRK, "brk", (void *)events_brk },
};
const unsigned events_symbols_count = sizeof(events_symbols) / sizeof(events_symbols[0]);

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
    pthread_atfork(events_prefork, events_postfork_parent, events_postfork_child);
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
