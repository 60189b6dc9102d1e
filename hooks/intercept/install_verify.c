/*
 * install_verify.c -- step (c) of the installation: every installed
 * symbol called the way the process calls it.  A memory call is made with
 * the probe's arguments, which no program uses: a first handler
 * recognises them and stops the call, so nothing is mapped or unmapped and
 * the event is seen to fire; malloc and free must be pinheap's own
 * functions, or else malloc must return pinheap's memory and free take it
 * back.  Main entry points: install_verify_calls() and
 * install_verify_family(), from install_run() (install.c).
 */
#include "hooks/intercept/install_impl.h"

#include "hooks/events/events.h"
#include "hooks/intercept/reloc.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "allocator/heap/chunk.h"
#include "pinheap.h"
#include "allocator/base/startup.h"

/* The probe's arguments: no program passes these (an unaligned address
 * below the first page, a length and an sbrk increment no heap can take).
 * If a call does reach libc with them, the kernel refuses it. */
#define INSTALL_PROBE_ADDR ((void *)(uintptr_t)0x1357)
#define INSTALL_PROBE_LEN ((size_t)0x2468)
#define INSTALL_PROBE_INCR ((intptr_t)0x135700000000)

/* ======================================================================= */
/*  the probe: calls that must fire their event                             */
/* ======================================================================= */

PH_HOT_DATA static int install_probe_hits;         /* PINHEAP_EVENT_* bits seen */

/* Stops the probe's calls (recognised by their arguments) and lets every
 * other call, from any thread, pass. */
PH_STARTUP static int install_probe_handler(int type, pinheap_event_t *ev, void *arg)
{
  int mine = 0;
  (void)arg;
  switch (type) {
  case PINHEAP_EVENT_MMAP:
    mine = ev->mmap.address == INSTALL_PROBE_ADDR && ev->mmap.size == INSTALL_PROBE_LEN;
    if (mine)
      ev->mmap.result = MAP_FAILED;
    break;
  case PINHEAP_EVENT_MUNMAP:
    mine = ev->munmap.address == INSTALL_PROBE_ADDR && ev->munmap.size == INSTALL_PROBE_LEN;
    if (mine)
      ev->munmap.result = -1;
    break;
  case PINHEAP_EVENT_MREMAP:
    mine = ev->mremap.address == INSTALL_PROBE_ADDR && ev->mremap.old_size == INSTALL_PROBE_LEN;
    if (mine)
      ev->mremap.result = MAP_FAILED;
    break;
  case PINHEAP_EVENT_MADVISE:
    mine = ev->madvise.address == INSTALL_PROBE_ADDR && ev->madvise.size == INSTALL_PROBE_LEN;
    if (mine)
      ev->madvise.result = -1;
    break;
  case PINHEAP_EVENT_SHMAT:
    mine = ev->shmat.shmaddr == INSTALL_PROBE_ADDR && ev->shmat.shmid == -1;
    if (mine)
      ev->shmat.result = (void *)-1;
    break;
  case PINHEAP_EVENT_SHMDT:
    mine = ev->shmdt.shmaddr == INSTALL_PROBE_ADDR;
    if (mine)
      ev->shmdt.result = -1;
    break;
  case PINHEAP_EVENT_BRK:
    mine = ev->brk.address == INSTALL_PROBE_ADDR;
    if (mine)
      ev->brk.result = -1;
    break;
  case PINHEAP_EVENT_SBRK:
    mine = ev->sbrk.increment == INSTALL_PROBE_INCR;
    if (mine)
      ev->sbrk.result = (void *)-1;
    break;
  default:
    break;
  }
  if (!mine)
    return PINHEAP_EVENT_PASS;
  __atomic_fetch_or(&install_probe_hits, type, __ATOMIC_RELAXED);
  return PINHEAP_EVENT_STOP;
}

/* Calls fn, the function the process calls for the memory call `event`,
 * with the probe's arguments.  @return 1 if its event fired. */
PH_STARTUP static int install_probe_call(int event, void *fn)
{
  int saved = errno;
  __atomic_and_fetch(&install_probe_hits, ~event, __ATOMIC_RELAXED);
  switch (event) {
  case PINHEAP_EVENT_MMAP:
    /* flags 0 (neither shared nor private): refused if it reached libc */
    ((void *(*)(void *, size_t, int, int, int, off_t))fn)(INSTALL_PROBE_ADDR, INSTALL_PROBE_LEN,
                                                           PROT_NONE, 0, -1, 0);
    break;
  case PINHEAP_EVENT_MUNMAP:
    ((int (*)(void *, size_t))fn)(INSTALL_PROBE_ADDR, INSTALL_PROBE_LEN);
    break;
  case PINHEAP_EVENT_MREMAP:
    ((void *(*)(void *, size_t, size_t, int, ...))fn)(INSTALL_PROBE_ADDR, INSTALL_PROBE_LEN,
                                                       INSTALL_PROBE_LEN, 0);
    break;
  case PINHEAP_EVENT_MADVISE:
    ((int (*)(void *, size_t, int))fn)(INSTALL_PROBE_ADDR, INSTALL_PROBE_LEN, MADV_NORMAL);
    break;
  case PINHEAP_EVENT_SHMAT:
    ((void *(*)(int, const void *, int))fn)(-1, INSTALL_PROBE_ADDR, 0);
    break;
  case PINHEAP_EVENT_SHMDT:
    ((int (*)(const void *))fn)(INSTALL_PROBE_ADDR);
    break;
  case PINHEAP_EVENT_BRK:
    ((int (*)(void *))fn)(INSTALL_PROBE_ADDR);
    break;
  case PINHEAP_EVENT_SBRK:
    ((void *(*)(intptr_t))fn)(INSTALL_PROBE_INCR);
    break;
  default:
    break;
  }
  errno = saved;
  return (__atomic_load_n(&install_probe_hits, __ATOMIC_RELAXED) & event) != 0;
}

/* The memory call replace_symbols[i] has a call event (mmap ... sbrk); the
 * others with an event (fallocate, ftruncate, truncate, syscall) derive
 * VM_UNMAPPED only. */
PH_STARTUP int install_is_call(unsigned i)
{
  return (replace_symbols[i].event & PINHEAP_EVENT_CALLS) != 0;
}

/* replace_symbols[i] is syscall() (when this build intercepts it). */
PH_STARTUP static int install_is_syscall(unsigned i)
{
#if PH_RAW_SYSCALL
  return i == INSTALL_IX_syscall;
#else
  (void)i;
  return 0;
#endif
}

/* A call that derives VM_UNMAPPED only reaches pinheap.  syscall() is
 * called with the probe's munmap (its MUNMAP event must fire); fallocate,
 * ftruncate and truncate have no call event to stop them and would release
 * nothing without a mapped file, so they are verified by where the
 * process's calls go: the resolved function, or a patched slot's value, is
 * pinheap's. */
PH_STARTUP static int install_verify_derived(unsigned i, int probing)
{
  const replace_symbol_t *s = &replace_symbols[i];
  void *fn = install_resolved_at(i);
  if (fn == NULL)
    return 0;
  if (install_is_syscall(i)) {
    int saved = errno;
    if (!probing)
      return 0;
    __atomic_and_fetch(&install_probe_hits, ~PINHEAP_EVENT_MUNMAP, __ATOMIC_RELAXED);
    ((long (*)(long, ...))fn)((long)SYS_munmap, INSTALL_PROBE_ADDR, INSTALL_PROBE_LEN);
    errno = saved;
    return (__atomic_load_n(&install_probe_hits, __ATOMIC_RELAXED) & PINHEAP_EVENT_MUNMAP) != 0;
  }
  return fn == s->self || fn == s->entry;
}

/* Malloc and free reach pinheap.  When the process's malloc is pinheap's
 * own function (interposed, or the patched slots' value), that settles it,
 * as for the rest of the family: the call would run pinheap's code, and
 * making a block only to prove it would set the heap up at start-up (its
 * first segment, the owner map, a thread cache: about 15 pages touched and
 * 30k instructions) for a program that may never allocate.  The self-test
 * (pinheap_open) still makes real blocks through these functions.
 * Otherwise malloc's block must be pinheap's and free take it back (the
 * same block comes back from the thread cache, or at least pinheap counts
 * it free). */
PH_STARTUP static int install_verify_malloc(void)
{
  void *(*p_malloc)(size_t) = (void *(*)(size_t))install_resolved_at(INSTALL_IX_malloc);
  void (*p_free)(void *) = (void (*)(void *))install_resolved_at(INSTALL_IX_free);
  const replace_symbol_t *m = &replace_symbols[INSTALL_IX_malloc];
  const replace_symbol_t *f = &replace_symbols[INSTALL_IX_free];

  if (p_malloc == NULL || p_free != f->self)
    return 0;                  /* a block of ours must never reach glibc's free */
  if ((void *)p_malloc == m->self || (void *)p_malloc == m->entry)
    return 1;
  void *p = p_malloc(48);
  int ok = p != NULL && owner_map_get(p) != 0;
  if (p != NULL)
    p_free(p);
  return ok;
}

/* This copy's own handler registration, by its hidden aliases (dispatch.h):
 * the probe goes to this copy's events, and the calls bind at link time
 * (no lazy PLT fix-up each at start-up). */
extern __typeof__(PINHEAP_NAME(set_event_handler)) COPIES_SELF(set_event_handler) PH_HIDDEN;
extern __typeof__(PINHEAP_NAME(unset_event_handler)) COPIES_SELF(unset_event_handler) PH_HIDDEN;

/* (c) for the memory calls */
PH_STARTUP void install_verify_calls(install_run_t *r)
{
  install_sym_t *syms = r->syms;
  int probing = r->events && COPIES_SELF(set_event_handler)(PINHEAP_EVENT_CALLS, INT_MIN,
                                                          install_probe_handler, NULL) == 0;
  for (unsigned i = 0; i < r->n; i++) {
    const replace_symbol_t *s = &replace_symbols[i];
    install_sym_t *st = &syms[i];
    if (s->event == 0 || st->method == PINHEAP_INSTALL_NONE || !r->events)
      continue;
    if (!install_is_call(i)) {
      if (st->method == PINHEAP_INSTALL_RELOC && st->slots == 0) {
        r->uncalled++;
        continue;
      }
      st->verified = install_verify_derived(i, probing);
      r->missed += !st->verified;
      continue;
    }
    /* code patched: glibc's own function must fire the event */
    int code_ok = st->code != PINHEAP_CODE_PATCHED ||
                  (probing && install_probe_call(s->event, r->sites[r->alias[i]].entry));
    if (st->method == PINHEAP_INSTALL_CODE) {
      void *fn = install_resolved_at(i);   /* and what the process resolves */
      st->verified = code_ok && fn != NULL && install_probe_call(s->event, fn);
      r->missed += !st->verified;
      continue;
    }
    if (!code_ok) {
      st->verified = 0;
      r->missed++;
      continue;
    }
    if (st->method == PINHEAP_INSTALL_RELOC && st->slots == 0) {
      r->uncalled++;              /* no object calls it (yet): nothing to call through */
      continue;
    }
    void *fn = install_resolved_at(i);
    st->verified = probing && fn != NULL && install_probe_call(s->event, fn);
    r->missed += !st->verified;
  }
  if (probing)
    COPIES_SELF(unset_event_handler)(PINHEAP_EVENT_CALLS, install_probe_handler, NULL);
}

/* (c) for the malloc family */
PH_STARTUP void install_verify_family(install_run_t *r)
{
  install_sym_t *syms = r->syms;
  int malloc_ok = 0;
  /* (the family's indices are fixed by symbols.h: a build's table holds
   * every one of them, or none) */
  if (r->n < INSTALL_IX_COUNT)
    return;
  for (unsigned i = 0; i < r->n; i++) {
    if (replace_symbols[i].event != 0 || syms[i].method == PINHEAP_INSTALL_NONE)
      continue;
    if (i == INSTALL_IX_malloc && r->enabled) {
      malloc_ok = install_verify_malloc();      /* a block, from pinheap */
      syms[i].verified = malloc_ok;
    } else if (i == INSTALL_IX_malloc) {
      /* disabled: pinheap's entry forwards to glibc, by design */
      malloc_ok = install_resolved_at(i) == replace_symbols[i].self;
      syms[i].verified = malloc_ok;
    } else {
      syms[i].verified = install_resolved_at(i) == replace_symbols[i].self;
    }
  }
  syms[INSTALL_IX_free].verified &= malloc_ok;
}
