/*
 * rec.h -- a recording memory-event handler for the tests of the events API
 * (test_events.c, test_files.c).  rec_start(events) registers rec_handler
 * (priority 0) for those events and empties the log, rec_stop() unsets it;
 * rec_log[0, rec_n()) holds each event's type, a copy of its
 * pinheap_event_t and the handler's arg.  A VM_UNMAPPED event whose address
 * is inside [rec_watch_lo, rec_watch_hi) also records its first byte, read
 * inside the handler: what the range held when the event came (-1 when not
 * watched).  The handler never allocates.
 */
#ifndef PINHEAP_TEST_REC_H
#define PINHEAP_TEST_REC_H

#include <criterion/criterion.h>

#include <stdatomic.h>

#include "pinheap.h"

#define REC_MAX 4096

typedef struct rec_s {
  int type;
  pinheap_event_t ev;
  void *arg;
  int first_byte;
} rec_t;

static rec_t rec_log[REC_MAX];
static atomic_int rec_count;
static const char *rec_watch_lo, *rec_watch_hi;

static int rec_handler(int type, pinheap_event_t *ev, void *arg)
{
  int i = atomic_fetch_add(&rec_count, 1);
  if (i < REC_MAX) {
    const char *a = ev->vm_unmapped.address;
    rec_log[i].type = type;
    rec_log[i].ev = *ev;
    rec_log[i].arg = arg;
    rec_log[i].first_byte = -1;
    if (type == PINHEAP_EVENT_VM_UNMAPPED && a >= rec_watch_lo && a < rec_watch_hi)
      rec_log[i].first_byte = *(volatile const unsigned char *)a;
  }
  return PINHEAP_EVENT_PASS;
}

static __attribute__((unused)) int rec_n(void)
{
  int n = atomic_load(&rec_count);
  cr_assert(n <= REC_MAX, "more than %d events", REC_MAX);
  return n;
}

static __attribute__((unused)) void rec_start(int events)
{
  atomic_store(&rec_count, 0);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(events, 0, rec_handler, NULL), 0);
}

static __attribute__((unused)) void rec_stop(void)
{
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_ALL, rec_handler, NULL), 0);
}

#endif /* PINHEAP_TEST_REC_H */
