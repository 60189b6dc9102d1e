/*
 * preload.c -- libpinheap-preload.so: the whole archive as a shared object,
 * so that any unmodified program runs on pinheap with
 *     LD_PRELOAD=/path/to/libpinheap-preload.so program ...
 * Preloading means the user wants pinheap: this object flips the
 * decision's default to enabled.  PINHEAP_MODE=off (and the safety switches
 * of hooks/decide/decision.h) still win.
 */
#include "allocator/api/api.h"

/* Overrides the weak default (0) of hooks/decide/dispatch.c. */
PH_HIDDEN int dispatch_preloaded = 1;
