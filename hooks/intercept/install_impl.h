/*
 * install_impl.h -- the installation's inside, shared by install.c (the
 * steps and the account) and install_verify.c (the probe and step (c),
 * the verification by calls), and nothing else.  The installation's
 * entry points are in dispatch.h.
 */
#ifndef PINHEAP_INSTALL_IMPL_H
#define PINHEAP_INSTALL_IMPL_H

#include "hooks/decide/dispatch.h"
#include "config/params.h"
#include "hooks/intercept/patch.h"
#include "hooks/intercept/symbols.h"

#include <stdint.h>

#define INSTALL_MAX 48
_Static_assert(0 PH_INTERCEPTED(PH_INTERCEPTED_ONE) <= INSTALL_MAX,
               "INSTALL_MAX holds every symbol of hooks/intercept/symbols.h");

typedef struct install_sym_s {
  int method;                  /* PINHEAP_INSTALL_* */
  int verified;
  unsigned objects, slots;
  short code;                  /* PINHEAP_CODE_* */
  unsigned char entry;         /* RELOC: its entry of the relocation patcher's table */
} install_sym_t;                 /* (20 bytes: the table stays within one page) */

/* The index of each symbol in replace_symbols (replace.c builds it from
 * the same list, in the same order): INSTALL_IX_malloc, ... */
enum {
#define INSTALL_IX(name, ...) INSTALL_IX_##name,
  PH_INTERCEPTED(INSTALL_IX)
#undef INSTALL_IX
  INSTALL_IX_COUNT
};

/* One run of install_run(): what it may do, and what each step did (its
 * phases fill it in, in order). */
typedef struct install_run_s {
  uint64_t t0;                 /* when it began (CLOCK_MONOTONIC) */
  const params_t *params;
  const char *tool;            /* the memory checker running the process, or NULL */
  int patch;                   /* patching is allowed */
  int enabled;                 /* the decision enabled pinheap */
  unsigned n;                  /* entries of replace_symbols installed */
  int at_start;                /* reloc_loaded_at_startup() of pinheap's object */
  int want_malloc;             /* the malloc family is installed */
  int events;                  /* the memory calls are installed (PINHEAP_EVENTS) */
  int code;                    /* libc's code is patched (b') */
  int interposed;              /* (a): symbols that interpose */
  unsigned k;                  /* (b): entries given to the relocation patcher */
  int rc;                      /* (b): what it returned */
  int code_done, code_foreign, code_failed, code_threads;   /* (b') */
  int missed, uncalled;        /* (c) */
  int shm;                     /* the shared heap is configured, malloc not pinheap's */
  unsigned rs_slots, rs_objects, rs_definitions;   /* (b): the patcher's counts, then */
  uint64_t us;                 /* how long it took */
  install_sym_t *syms;         /* per symbol, as replace_symbols: its record, */
  patch_site_t *sites;         /* its code patching site, and the index of */
  const unsigned char *alias;  /* the site patched for the same function */
  void **resolved;             /* (a): what the process resolves each name to
                                *       (install_run's array, INSTALL_MAX) */
} install_run_t;

/* ---- install_verify.c ---------------------------------------------------- */
/** The memory call replace_symbols[i] has a call event (mmap ... sbrk). */
PH_HIDDEN int install_is_call(unsigned i);
/** (c) for the memory calls: each installed one called the way the process
 *  calls it fires its event (r->missed, r->uncalled counted). */
PH_HIDDEN void install_verify_calls(install_run_t *r);
/** (c) for the malloc family: malloc's block is pinheap's, free takes it,
 *  the others resolve to pinheap. */
PH_HIDDEN void install_verify_family(install_run_t *r);

#endif /* PINHEAP_INSTALL_IMPL_H */
