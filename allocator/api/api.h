/*
 * api.h -- the top layer's cross-file names: statistics and trimming
 * (stats.c), the heap checker (check.c).  Including it brings every layer
 * below (hooks/ and tools/ include it for the allocator's insides).
 */
#ifndef PINHEAP_API_H
#define PINHEAP_API_H

#include "allocator/front/front.h"

/* ======================================================================= */
/*  stats.c -- trim and statistics                                          */
/* ======================================================================= */

/** Gives back the top's tail, idle segments and the pages inside free
 *  chunks.  @return 1 if anything was released. */
PH_HIDDEN int ms_trim(mstate_t *ms, size_t pad);
PH_HIDDEN struct mallinfo2 ms_info(mstate_t *ms);

/* ======================================================================= */
/*  check.c -- the heap checker                                             */
/* ======================================================================= */

/** Validates every invariant of ms; ms must be locked by the caller.
 *  @return the number of problems (each written to stderr). */
PH_HIDDEN int mstate_check(mstate_t *ms);
/** Locks ms, checks it, adds the problems to the int *problems_p (an
 *  arena_for_each callback). */
PH_HIDDEN void mstate_check_add(mstate_t *ms, void *problems_p);
/** PINHEAP_DEBUG >= 2: the full checker after a public call fn, on the
 *  mspace ms, or on every arena and this thread's cache if ms is NULL.
 *  Ends the process naming fn if anything is wrong. */
PH_HIDDEN void heap_debug_check(mstate_t *ms, const char *fn);

#endif
