/*
 * release.c -- the release listeners of pinheap_register_release(): a
 * thin layer over the memory events.  Each listener is a VM_UNMAPPED
 * handler of priority 0 (events.c), so listeners and event handlers are
 * one mechanism: one chain, one nesting limit, one wait for calls in
 * flight.  Main entry points: PINHEAP_NAME(register_release),
 * release_dispatch().
 *
 * A listener's fn/ctx pair lives in a record of a fixed table (64, the
 * documented limit); the record is the handler's arg.  Unregistering marks
 * the record, unsets the handler -- which waits for calls in flight on
 * other threads, but not for this thread's own -- and only then frees the
 * record for reuse.
 */
#include "hooks/decide/dispatch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "allocator/heap/chunk.h"     /* ph_lock */
#include "hooks/events/events.h"
#include "config/params.h"
#include "pinheap.h"
#include "allocator/base/startup.h"     /* PH_COLD_BSS */

#define RELEASE_MAX_LISTENERS 64

typedef struct release_rec_s {
  pinheap_release_fn *fn;   /* set before the handler is, cleared after it is unset */
  void *ctx;
  int state;                /* REC_*; under release_lock */
} release_rec_t;

/* JOINING: its handler is being set (release_lock is not held meanwhile:
 * the events table's lock never nests inside it); LEAVING: being unset. */
enum { REC_FREE = 0, REC_JOINING, REC_LIVE, REC_LEAVING };

PH_COLD_BSS static release_rec_t release_recs[RELEASE_MAX_LISTENERS];
static ph_lock_t release_lock;      /* guards the records; never held across a wait */

/* The VM_UNMAPPED handler every listener is. */
static int release_adapter(int type, pinheap_event_t *ev, void *arg)
{
  const release_rec_t *r = arg;
  (void)type;
  r->fn(ev->vm_unmapped.address, ev->vm_unmapped.size,
        ev->vm_unmapped.source == PINHEAP_EVENT_SOURCE_ALLOCATOR, r->ctx);
  return PINHEAP_EVENT_PASS;
}

void release_dispatch(void *addr, size_t len, int from_alloc)
{
  events_vm_unmapped(addr, len,
                     from_alloc ? PINHEAP_EVENT_SOURCE_ALLOCATOR : PINHEAP_EVENT_SOURCE_APP);
}

PH_HOT void release_init(void)
{
  if (copies_serving() == NULL)   /* stood down: the OS layer reports to the serving copy */
    events_init();
}

/* The records' lock is held across fork, so that a child forked while
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
  int slot = -1, rc;

  if (fn == NULL)
    return EINVAL;
  const copies_api_t *serving = copies_serving();  /* another copy serves (copies.c) */
  if (ph_unlikely(serving != NULL))
    return serving->register_release(fn, ctx);
  if (!params_events_on(PINHEAP_PREFIX_STRING "register_release"))
    return ENOTSUP;                         /* PINHEAP_EVENTS=0 */
  dispatch_decide();
  if (atomic_exchange(&atfork_done, 1) == 0)  /* here, not in the first malloc */
    ph_atfork(release_prefork, release_postfork, release_postfork);
  ph_lock(&release_lock);
  for (int i = 0; i < RELEASE_MAX_LISTENERS; i++) {
    release_rec_t *r = &release_recs[i];
    if ((r->state == REC_LIVE || r->state == REC_JOINING) && r->fn == fn && r->ctx == ctx) {
      ph_unlock(&release_lock);
      return EEXIST;
    }
    if (r->state == REC_FREE && slot < 0)
      slot = i;
  }
  if (slot < 0) {
    ph_unlock(&release_lock);
    return ENOSPC;
  }
  release_rec_t *r = &release_recs[slot];
  r->fn = fn;
  r->ctx = ctx;
  r->state = REC_JOINING;
  ph_unlock(&release_lock);
  rc = PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, 0, release_adapter, r);
  ph_lock(&release_lock);
  r->state = rc == 0 ? REC_LIVE : REC_FREE;
  ph_unlock(&release_lock);
  return rc;
}
COPIES_SELF_ALIAS(register_release);

int PINHEAP_NAME(unregister_release)(pinheap_release_fn *fn, void *ctx)
{
  release_rec_t *r = NULL;

  const copies_api_t *serving = copies_serving();  /* another copy serves (copies.c) */
  if (ph_unlikely(serving != NULL))
    return serving->unregister_release(fn, ctx);
  ph_lock(&release_lock);
  for (int i = 0; i < RELEASE_MAX_LISTENERS; i++) {
    if (release_recs[i].state == REC_LIVE && release_recs[i].fn == fn &&
        release_recs[i].ctx == ctx) {
      r = &release_recs[i];
      r->state = REC_LEAVING;               /* not matched, not reused */
      break;
    }
  }
  ph_unlock(&release_lock);
  if (r == NULL)
    return ENOENT;
  /* Outside the lock: waits for calls in flight, which may (un)register. */
  PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, release_adapter, r);
  ph_lock(&release_lock);
  r->state = REC_FREE;
  ph_unlock(&release_lock);
  return 0;
}
COPIES_SELF_ALIAS(unregister_release);
