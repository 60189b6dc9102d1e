/*
 * audit.h -- the kernel-backed audit of watched ranges (PINHEAP_AUDIT=1):
 * hooks/watch/audit.c registers each watched range with userfaultfd and a
 * helper thread reads the kernel's release events; watch.c calls it.
 */
#ifndef PINHEAP_WATCH_AUDIT_H
#define PINHEAP_WATCH_AUDIT_H

#include "allocator/heap/chunk.h"

/* watch.c, for the reader: invalidates every watch meeting [a, b) whose
 * token was still valid (the release was not announced) and stores up to
 * max of their ranges in starts/ends.  Never waits: @return -1 when
 * watch_lock is held (try again later), else how many it invalidated. */
PH_HIDDEN long watch_audit_claim(uintptr_t a, uintptr_t b, uintptr_t *starts, uintptr_t *ends,
                                 size_t max);
/* watch.c, for unwatch: 1 when a live watch meets [a, b).  Takes watch_lock. */
PH_HIDDEN int watch_audit_shared(uintptr_t a, uintptr_t b);

/* 1 when PINHEAP_AUDIT asks for the audit (read once). */
PH_HIDDEN int audit_wanted(void);
/* Before a watch: waits until the reader has handled every event read so
 * far (the releases that returned before this call). */
PH_HIDDEN void audit_settle(void);
/* A new watch of [a, b): registers its pages (starts the audit, once). */
PH_HIDDEN void audit_watched(uintptr_t a, uintptr_t b);
/* An unwatch of [a, b): unregisters its pages unless another watch meets them. */
PH_HIDDEN void audit_unwatched(uintptr_t a, uintptr_t b);

#endif
