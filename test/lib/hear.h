/*
 * hear.h -- a recorder on the OS layer's release listener slot, for tests
 * that check which ranges the allocator announced before releasing them
 * (test_huge.c, test_relieve.c): hear_listener() records each call (up to
 * HEAR_MAX), hear_covered() and hear_touched() ask about a range.  Install
 * with PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL) and reset
 * hear_count to 0.
 */
#ifndef PINHEAP_TEST_HEAR_H
#define PINHEAP_TEST_HEAR_H

#include <criterion/criterion.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pinheap.h"

/* The OS layer's listener slot (hidden in the archive, linkable here). */
typedef void os_release_fn(void *addr, size_t len, void *ctx);
void PINHEAP_NAME(os_set_release_listener)(os_release_fn *fn, void *ctx);

#define HEAR_MAX 1024

static uintptr_t hear_addr[HEAR_MAX];
static size_t hear_len[HEAR_MAX];
static atomic_size_t hear_count;

static __attribute__((unused)) void hear_listener(void *addr, size_t len, void *ctx)
{
  (void)ctx;
  size_t i = atomic_fetch_add(&hear_count, 1);
  if (i < HEAR_MAX) {
    hear_addr[i] = (uintptr_t)addr;
    hear_len[i] = len;
  }
}

/* Did one listener call cover [lo, hi)? */
static __attribute__((unused)) bool hear_covered(uintptr_t lo, uintptr_t hi)
{
  size_t n = atomic_load(&hear_count);
  cr_assert(n <= HEAR_MAX, "more than %d listener calls", HEAR_MAX);
  for (size_t i = 0; i < n; i++)
    if (hear_addr[i] <= lo && hear_addr[i] + hear_len[i] >= hi)
      return true;
  return false;
}

/* Did any listener call touch [lo, hi)? */
static __attribute__((unused)) bool hear_touched(uintptr_t lo, uintptr_t hi)
{
  size_t n = atomic_load(&hear_count);
  for (size_t i = 0; i < n; i++)
    if (hear_addr[i] < hi && hear_addr[i] + hear_len[i] > lo)
      return true;
  return false;
}

#endif
