/*
 * install.c -- puts pinheap's entry points where the process's calls go,
 * and records how, per memory call and per malloc-family function:
 * interposition, relocation patching, or nothing.  Main entry point:
 * install_run(), from the constructor right after the decision (before
 * main for a core library loaded at start-up, inside dlopen for one loaded
 * later), never from inside an allocation call.
 *
 * The order, each step checked by a call:
 *  (a) interposition: the process resolves the name (dlsym(RTLD_DEFAULT))
 *      to replace.c's own definition -- the core library or the preload
 *      shim comes before libc in symbol lookup;
 *  (b) otherwise relocation patching (hooks/reloc.c): the JUMP_SLOT and
 *      GLOB_DAT slots of every loaded object, libc's and pinheap's own
 *      object's included, are pointed at pinheap, and so are the
 *      definitions in libc's dynamic symbol table, so that an object loaded
 *      later is bound to pinheap by ld.so itself, before its constructors
 *      run (a constructor freeing what libc allocated for it must reach
 *      the same allocator); the dlopen wrapper patches such objects too;
 *  (b') code patching (hooks/patch.c, x86-64): libc's own mmap, munmap,
 *      ... start with a jump to pinheap's entry point, so glibc's internal
 *      calls (free of a large block, malloc_trim, an arena shrinking) fire
 *      the events too.  Before main no thread exists; a late load patches
 *      only entries that are safe against running threads (patch.h).  An
 *      entry someone else patched (UCX's libucm, Open MPI's patcher,
 *      another pinheap) is left alone and reported.  Once code is patched,
 *      an object that could be dlclose'd (loaded by dlopen) is pinned
 *      (RTLD_NODELETE): libc's entries must never jump into unmapped code;
 *  (c) every installed symbol is called the way the process calls it (the
 *      resolved function, or a patched slot's value).  A memory call must
 *      fire its event: the call is made with arguments no program uses,
 *      which a first handler recognises and stops, so nothing is mapped or
 *      unmapped.  malloc must return pinheap's memory and free take it.
 *
 * What is patched.  The memory calls (mmap ... sbrk), always, so that
 * release events reach the handlers however pinheap was loaded; with them
 * the calls that release through a file (fallocate, ftruncate, truncate)
 * and syscall(), which have no call event (replace_symbols gives them
 * PINHEAP_EVENT_VM_UNMAPPED): interposed or slot-patched, never code
 * patched (glibc calls none of them to give memory back), and verified by
 * where the process's calls go -- syscall() by a call of its munmap number,
 * which fires MUNMAP.  The
 * malloc family only when the decision enabled pinheap and pinheap's object
 * was loaded at start-up (linked directly or as a dependency of one):
 * replacing malloc in a library loaded later by dlopen would send blocks
 * freed through pointers captured before (a free stored in a table) to the
 * wrong allocator, so that takes PINHEAP_LATE_MALLOC=1.  Nothing at all is
 * patched with PINHEAP_PATCH=0 or under a memory checker (valgrind, a
 * sanitizer), whose own malloc must stay in charge.  PINHEAP_CODE_PATCH=0
 * leaves libc's code alone (step b') and keeps the rest.  PINHEAP_EVENTS=0
 * leaves the memory calls alone (no patching of them, steps b and b', and
 * no probe, step c); the malloc family is installed as usual.
 */
#include "dispatch.h"
#include "events.h"
#include "patch.h"
#include "peers.h"
#include "reloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <time.h>

#include "chunk.h"
#include "params.h"
#include "pinheap.h"
#include "startup.h"

#define INSTALL_MAX 48

/* The probe's arguments: no program passes these (an unaligned address
 * below the first page, a length and an sbrk increment no heap can take).
 * If a call does reach libc with them, the kernel refuses it. */
#define INSTALL_PROBE_ADDR ((void *)(uintptr_t)0x1357)
#define INSTALL_PROBE_LEN ((size_t)0x2468)
#define INSTALL_PROBE_INCR ((intptr_t)0x135700000000)

typedef struct install_sym_s {
  int method;                  /* PINHEAP_INSTALL_* */
  int verified;
  unsigned objects, slots;
  int code;                    /* PINHEAP_CODE_* */
} install_sym_t;

/* Written by install_run() under install_lock before install_state is
 * published (release); read-only after.
 *
 * Fork: the lock is held for the whole installation (milliseconds, while
 * other threads run when the object is loaded late), across calls into
 * the events (handlers, the probe's calls) and relocation patching, whose
 * locks have fork handlers of their own, registered in any order: taken
 * before fork it could deadlock with them, and fork would wait.  A child
 * forked while another thread installed frees it (install_fork_child) and
 * keeps what was done before the fork, said in the text: the installation
 * is not run again there (slots and entries already patched would be seen
 * as libc's own). */
PH_HOT_DATA static ph_lock_t install_lock;
PH_HOT_DATA static int install_state;              /* 0 not run, 1 running, 2 done */
static __thread int install_inside __attribute__((tls_model("initial-exec")));  /* 1: this thread runs it */
PH_HOT_DATA static int install_patched;            /* steps (a) and (b) are done */
static install_sym_t install_syms[INSTALL_MAX];
PH_COLD_BSS static reloc_entry_t install_table[INSTALL_MAX];  /* written only for (b) */
PH_HOT_DATA static unsigned install_n;
PH_HOT_DATA static int install_is_late = -1;       /* -1: unknown */
/* Code patching, per memory symbol (same index as replace_symbols);
 * install_code_alias[i]: the index of the site patched for the same libc
 * function (mmap64 is mmap), or i. */
static patch_site_t install_code[INSTALL_MAX];
static unsigned char install_code_alias[INSTALL_MAX];
/* install_code[i].text: written only when site i is not patched */
PH_COLD_BSS static char install_code_text[INSTALL_MAX][PATCH_TEXT_MAX];
static char install_text_buf[1024];

static int install_probe_trim_noop(size_t pad);

/* ======================================================================= */
/*  memory checkers                                                         */
/* ======================================================================= */

/* Defined by the sanitizer runtimes (exported to the global scope). */
extern void __asan_init(void) __attribute__((weak));
extern void __tsan_init(void) __attribute__((weak));
extern void __msan_init(void) __attribute__((weak));
extern void __hwasan_init(void) __attribute__((weak));

PH_STARTUP const char *install_tool(void)
{
  if (__asan_init != NULL || __hwasan_init != NULL)
    return "AddressSanitizer";
  if (__tsan_init != NULL)
    return "ThreadSanitizer";
  if (__msan_init != NULL)
    return "MemorySanitizer";
  /* valgrind runs the program with its preload objects. */
  const char *pre = startup_env("LD_PRELOAD");
  if (pre != NULL && startup_contains(pre, "vgpreload"))
    return "valgrind";
  return NULL;
}

/* Patching is allowed: PINHEAP_PATCH is not 0, and no memory checker runs
 * the process (unless PINHEAP_MODE=on says to go ahead anyway). */
PH_STARTUP static int install_may_patch(const char *tool)
{
  const params_t *p = params_get();
  return p->v[PARAM_PATCH].value != 0 && (tool == NULL || p->v[PARAM_MODE].value == PARAM_MODE_ON);
}

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
PH_STARTUP static int install_is_call(unsigned i)
{
  return (replace_symbols[i].event & PINHEAP_EVENT_CALLS) != 0;
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
  void *fn = install_resolved(s->name);
  if (fn == NULL)
    return 0;
  if (strcmp(s->name, "syscall") == 0) {
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

/* ======================================================================= */
/*  installation                                                            */
/* ======================================================================= */

PH_STARTUP void *install_resolved(const char *name)
{
  for (unsigned i = 0; replace_symbols != NULL && i < replace_symbols_count; i++) {
    if (strcmp(replace_symbols[i].name, name) != 0)
      continue;
    if (!__atomic_load_n(&install_patched, __ATOMIC_ACQUIRE))
      break;
    /* interposed, as step (a)'s dlsym(RTLD_DEFAULT) found: no object
     * loaded since comes before pinheap's in the lookup scope, so that
     * answer stands (and saves a look-up per name in (c) and the self-test) */
    if (install_syms[i].method == PINHEAP_INSTALL_INTERPOSE)
      return replace_symbols[i].self;
    if (install_syms[i].method == PINHEAP_INSTALL_RELOC) {
      /* a patched slot's value; with none patched yet (no loaded object
       * calls it), what the next object that does will get */
      void *v = reloc_patched_slot(name);
      return v != NULL ? v : replace_symbols[i].entry;
    }
    break;
  }
  return dlsym(RTLD_DEFAULT, name);
}

/* Malloc and free reach pinheap: malloc's block is pinheap's, free takes
 * it back (the same block comes back from the thread cache, or at least
 * pinheap counts it free). */
PH_STARTUP static int install_verify_malloc(void)
{
  void *(*p_malloc)(size_t) = (void *(*)(size_t))install_resolved("malloc");
  void (*p_free)(void *) = (void (*)(void *))install_resolved("free");
  const replace_symbol_t *m = &replace_symbols[0];
  void *own_free = NULL;

  for (unsigned i = 0; i < replace_symbols_count; i++)
    if (strcmp(replace_symbols[i].name, "free") == 0)
      m = &replace_symbols[i];
  own_free = m->self;
  if (p_malloc == NULL || p_free != own_free)
    return 0;                  /* a block of ours must never reach glibc's free */
  void *p = p_malloc(48);
  int ok = p != NULL && owner_map_get(p) != 0;
  if (p != NULL)
    p_free(p);
  return ok;
}

/* Code jumps into this object now (libc's patched entries, the slots of
 * other objects that relocation patching rewrote, the dlopen and dlclose
 * wrappers): it must never be unmapped.  If it can be (it was dlopen'ed),
 * it is made no-delete, as RTLD_NODELETE would have. */
PH_STARTUP static void install_pin_self(void)
{
  Dl_info info;
  if (dladdr((void *)&install_run, &info) == 0 || info.dli_fname == NULL)
    return;
  void *h = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_NODELETE | RTLD_LAZY);
  if (h != NULL)
    dlclose(h);             /* the reference just taken; NODELETE stays */
  else
    ph_warn("pinheap patched other objects' calls but could not pin its own object (", info.dli_fname,
            "): a dlclose of it would leave them calling unmapped code", NULL);
}

/* The account is built without stdio (start-up calls no formatter of
 * libc's, whose pages the process would then carry), with the message
 * builder (internal.h): text_add appends s, cut to fit as snprintf would;
 * text_dec appends a number. */
PH_STARTUP PH_NOINLINE static void text_add(const char *s)
{
  ph_str_add(install_text_buf, sizeof(install_text_buf), s);
}

PH_STARTUP PH_NOINLINE static void text_dec(uint64_t v)
{
  ph_str_dec(install_text_buf, sizeof(install_text_buf), v);
}

/* "s" when n is not 1 (a plural's ending). */
PH_STARTUP static const char *text_s(unsigned n)
{
  return n == 1 ? "" : "s";
}

PH_STARTUP void install_run(void)
{
  int expected = 0;
  uint64_t t0;

  if (ph_likely(__atomic_load_n(&install_state, __ATOMIC_ACQUIRE) == 2))
    return;
  if (ph_unlikely(copies_stand_by()))
    return;                    /* another copy of pinheap installs and serves (copies.c) */
  t0 = ph_clock_ns(CLOCK_MONOTONIC);
  dispatch_decide();
  ph_lock(&install_lock);
  if (!__atomic_compare_exchange_n(&install_state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    ph_unlock(&install_lock);    /* done, or this thread is inside it */
    return;
  }
  install_inside = 1;
  const params_t *params = params_get();
  const char *tool = install_tool();
  int patch = install_may_patch(tool);
  int enabled = __atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) == DISPATCH_ENABLED;
  unsigned n = replace_symbols != NULL ? replace_symbols_count : 0;
  if (n > INSTALL_MAX)
    n = INSTALL_MAX;
  install_n = n;
  install_text_buf[0] = '\0';
  int at_start = reloc_loaded_at_startup((void *)&install_run);
  install_is_late = at_start == 0;
  int want_malloc = enabled && (!install_is_late || params->v[PARAM_LATE_MALLOC].value != 0);
  int events = params->v[PARAM_EVENTS].value != 0;   /* 0: the memory calls are left alone */

  /* (a) interposition */
  int interposed = 0;
  void *resolved[INSTALL_MAX];
  for (unsigned i = 0; i < n; i++) {
    install_syms[i].method = PINHEAP_INSTALL_NONE;
    resolved[i] = dlsym(RTLD_DEFAULT, replace_symbols[i].name);
    if (resolved[i] == replace_symbols[i].self) {
      install_syms[i].method = PINHEAP_INSTALL_INTERPOSE;
      interposed++;
    }
  }

  /* libc's definitions, looked up before (b) rewrites libc's symbol table */
  int code = events && patch && params->v[PARAM_CODE_PATCH].value != 0;
  for (unsigned i = 0; i < n; i++) {
    install_syms[i].code = PINHEAP_CODE_NONE;
    install_code[i].text = install_code_text[i];
    if (install_code[i].text[0] != '\0')   /* (written only when needed: the */
      install_code[i].text[0] = '\0';      /* texts' pages stay untouched) */
    if (!code || !install_is_call(i))
      continue;                /* libc's fallocate, ftruncate, syscall: see the top */
    install_code[i].name = replace_symbols[i].name;
    install_code[i].target = replace_symbols[i].entry;
  }
  if (code && patch_find(install_code, n) != 0)
    code = 0;                  /* not x86-64 */
  if (events)                 /* other patchers' hooks on libc hear pinheap's calls */
    peers_find(install_code, code ? n : 0);

  /* (b) relocation patching where interposition did not take */
  unsigned k = 0;
  int rc = 0;
  if (patch && n > 0) {
    for (unsigned i = 0; i < n; i++) {
      if (install_syms[i].method != PINHEAP_INSTALL_NONE)
        continue;
      if (replace_symbols[i].event == 0 && !want_malloc)
        continue;
      if (replace_symbols[i].event != 0 && !events)
        continue;
      install_table[k].name = replace_symbols[i].name;
      install_table[k].replacement = replace_symbols[i].entry;
      /* dlsym finds the exported interposer, which forwards to the entry:
       * a patcher that rewrites what dlsym finds (Open MPI's) leaves the
       * entry the slots call, and pinheap's view of the calls, whole */
      if (replace_symbols[i].event != 0)
        install_table[k].definition = replace_symbols[i].self;
      /* what the process resolves it to: the original (saves the patcher a lookup) */
      if (install_table[k].original == NULL)
        install_table[k].original = resolved[i];
      k++;
    }
    if (want_malloc) {
      void *usable = NULL;      /* what malloc_usable_size resolves to, unless pinheap's */
      for (unsigned i = 0; i < n; i++)
        if (strcmp(replace_symbols[i].name, "malloc_usable_size") == 0 &&
            resolved[i] != replace_symbols[i].self && resolved[i] != replace_symbols[i].entry)
          usable = resolved[i];
      dispatch_libc_prepare(usable);
    }
    if (k > 0)
      rc = reloc_install_flags(install_table, k, RELOC_PATCH_SELF | RELOC_PATCH_DEFINITIONS);
    else
      reloc_install_wrappers();   /* dlopen/dlclose seen: libucm arriving, unloads */
    for (unsigned j = 0, i = 0; j < k; j++) {
      while (strcmp(replace_symbols[i].name, install_table[j].name) != 0)
        i++;
      install_syms[i].method = PINHEAP_INSTALL_RELOC;
      install_syms[i].objects = install_table[j].objects;
      install_syms[i].slots = install_table[j].slots;
    }
  }
  /* (b') code patching of libc's own entry points */
  int code_done = 0, code_foreign = 0, code_failed = 0, code_threads = 0;
  if (code) {
    code_threads = patch_threads_running();
    patch_apply(install_code, n, code_threads ? PATCH_THREADS : 0);
    for (unsigned i = 0; i < n; i++) {   /* the first site of each function speaks for it */
      install_code_alias[i] = (unsigned char)i;
      for (unsigned j = 0; install_code[i].entry != NULL && j < i; j++)
        if (install_code[j].entry == install_code[i].entry) {
          install_code_alias[i] = (unsigned char)j;
          break;
        }
    }
    for (unsigned i = 0; i < n; i++) {
      if (!install_is_call(i))
        continue;
      const patch_site_t *ps = &install_code[install_code_alias[i]];
      if (install_code[i].entry == NULL)
        ps = &install_code[i];
      install_syms[i].code = ps->state;
      if (ps->state == PATCH_DONE) {
        /* the method names how the process's own calls arrive: code
         * patching is it only where nothing else is (no slot calls it) */
        if (install_syms[i].method == PINHEAP_INSTALL_NONE ||
            (install_syms[i].method == PINHEAP_INSTALL_RELOC && install_syms[i].slots == 0))
          install_syms[i].method = PINHEAP_INSTALL_CODE;
        code_done += install_code_alias[i] == i;
      } else if (ps->state == PATCH_FOREIGN) {
        code_foreign++;
      } else if (ps->state == PATCH_FAILED) {
        code_failed++;
      }
    }
  }
  /* a late load (dlopen'ed) that wrote other objects' slots or libc's
   * code: both now call into this object */
  if ((patch || code_done > 0) && at_start != 1)
    install_pin_self();
  if (events)
    peers_snapshot(install_code, code ? n : 0);   /* libc's entries as pinheap left them */
  __atomic_store_n(&install_patched, 1, __ATOMIC_RELEASE);  /* install_resolved reads slots */

  /* (c) verification by calls */
  int missed = 0, uncalled = 0;
  int probing = events && PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_CALLS, INT_MIN,
                                                           install_probe_handler, NULL) == 0;
  for (unsigned i = 0; i < n; i++) {
    const replace_symbol_t *s = &replace_symbols[i];
    install_sym_t *st = &install_syms[i];
    if (s->event == 0 || st->method == PINHEAP_INSTALL_NONE || !events)
      continue;
    if (!install_is_call(i)) {
      if (st->method == PINHEAP_INSTALL_RELOC && st->slots == 0) {
        uncalled++;
        continue;
      }
      st->verified = install_verify_derived(i, probing);
      missed += !st->verified;
      continue;
    }
    /* code patched: glibc's own function must fire the event */
    int code_ok = st->code != PINHEAP_CODE_PATCHED ||
                  (probing && install_probe_call(s->event, install_code[install_code_alias[i]].entry));
    if (st->method == PINHEAP_INSTALL_CODE) {
      void *fn = install_resolved(s->name);   /* and what the process resolves */
      st->verified = code_ok && fn != NULL && install_probe_call(s->event, fn);
      missed += !st->verified;
      continue;
    }
    if (!code_ok) {
      st->verified = 0;
      missed++;
      continue;
    }
    if (st->method == PINHEAP_INSTALL_RELOC && st->slots == 0) {
      uncalled++;              /* no object calls it (yet): nothing to call through */
      continue;
    }
    void *fn = install_resolved(s->name);
    st->verified = probing && fn != NULL && install_probe_call(s->event, fn);
    missed += !st->verified;
  }
  if (probing)
    PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_CALLS, install_probe_handler, NULL);
  int malloc_ok = 0;
  for (unsigned i = 0; i < n; i++) {
    if (replace_symbols[i].event != 0 || install_syms[i].method == PINHEAP_INSTALL_NONE)
      continue;
    if (strcmp(replace_symbols[i].name, "malloc") == 0 && enabled) {
      malloc_ok = install_verify_malloc();      /* a block, from pinheap */
      install_syms[i].verified = malloc_ok;
    } else if (strcmp(replace_symbols[i].name, "malloc") == 0) {
      /* disabled: pinheap's entry forwards to glibc, by design */
      malloc_ok = install_resolved("malloc") == replace_symbols[i].self;
      install_syms[i].verified = malloc_ok;
    } else {
      install_syms[i].verified = install_resolved(replace_symbols[i].name) == replace_symbols[i].self;
    }
  }
  for (unsigned i = 0; i < n; i++)
    if (strcmp(replace_symbols[i].name, "free") == 0)
      install_syms[i].verified &= malloc_ok;

  /* the account */
  if (n == 0) {
    text_add("this build has no entry points to install (no replace.c). ");
  } else if (interposed == (int)n) {
    text_add("pinheap's symbols come first in symbol lookup: every call is interposed. ");
  } else {
    if (interposed > 0)
      text_add("some of pinheap's symbols interpose; ");
    if (at_start == 1)
      text_add("pinheap's object was loaded at start-up behind libc in symbol lookup (a "
               "dependency of a dependency, as libopen-pal is of libmpi). ");
    else if (at_start == 0)
      text_add("pinheap's object was loaded after start-up (dlopen). ");
    if (tool != NULL && !patch) {
      text_add("Running under ");
      text_add(tool);
      text_add(": nothing is patched and malloc is left to it. ");
    } else if (!patch) {
      text_add("PINHEAP_PATCH=0: nothing is patched, so calls reach pinheap only where its "
               "symbols interpose. ");
    } else if (k > 0) {
      reloc_stats_t rs;
      reloc_stats_get(&rs);
      text_add("Calls were redirected by relocation patching: ");
      text_dec(rs.slots);
      text_add(" slot");
      text_add(text_s(rs.slots));
      text_add(" in ");
      text_dec(rs.objects_patched);
      text_add(" object");
      text_add(text_s(rs.objects_patched));
      text_add(", and ");
      text_dec(rs.definitions);
      text_add(" definition");
      text_add(text_s(rs.definitions));
      text_add(" in the symbol table of the object that defined them");
      text_add(rc == 0 ? ". " : " (a bound was exceeded: see the warning). ");
    }
  }
  if (code_done > 0) {
    text_dec((uint64_t)code_done);
    text_add(" of libc's memory functions start with a jump to pinheap (code patching), so "
             "glibc's own calls of them are seen");
    text_add(code_threads ? " (patched while other threads ran: only entries safe against "
                            "them). "
                          : ". ");
  }
  /* left alone: the names, then the first one's account (pinheap-info
   * shows each) */
  for (int kind = PINHEAP_CODE_FOREIGN; kind <= PINHEAP_CODE_FAILED; kind++) {
    if ((kind == PINHEAP_CODE_FOREIGN ? code_foreign : code_failed) == 0)
      continue;
    const char *first = NULL;
    text_add(kind == PINHEAP_CODE_FOREIGN ? "libc's code left alone, already patched by someone "
                                            "else:"
                                          : "libc's code not patched:");
    for (unsigned i = 0; i < n; i++)
      if (replace_symbols[i].event != 0 && install_syms[i].code == kind &&
          (install_code[i].entry == NULL || install_code_alias[i] == i)) {
        text_add(" ");
        text_add(replace_symbols[i].name);
        if (first == NULL)
          first = install_code[i].text;
      }
    for (unsigned i = 0; first == NULL && i < n; i++)
      if (install_syms[i].code == kind)
        first = install_code[i].text;
    text_add(" (");
    text_add(first != NULL ? first : "");
    text_add("). ");
  }
  if (!events) {
    text_add(params->v[PARAM_EVENTS].from != NULL ? params->v[PARAM_EVENTS].from
                                                  : "PINHEAP_EVENTS");
    text_add("=0: the memory calls (mmap, munmap, ...) are not patched and fire no event; only "
             "the malloc family is installed. ");
  }
  if (!code && patch && events && params->v[PARAM_CODE_PATCH].value == 0)
    text_add("PINHEAP_CODE_PATCH=0: libc's code is left alone, so glibc's internal calls are "
             "not seen. ");
  if (enabled && !want_malloc && install_is_late)
    text_add("malloc stays glibc's: replacing it in a library loaded this late would hand "
             "blocks freed through pointers captured before to the wrong allocator "
             "(PINHEAP_LATE_MALLOC=1 replaces it anyway). ");
  if (!want_malloc && shm_params_any_set(environ)) {
    /* the shared heap's size alone does not replace malloc */
    const char *why = !enabled ? "the leave-pinned decision left malloc to glibc"
                               : "pinheap was loaded after start-up (PINHEAP_LATE_MALLOC=1 "
                                 "replaces it anyway)";
    text_add("The shared-memory heap is configured, but malloc is not pinheap's here (");
    text_add(why);
    text_add("): only pinheap_malloc and its kin allocate in the region. ");
    if (dispatch_state != DISPATCH_UNDECIDED)
      ph_warn("the shared-memory heap is configured (PINHEAP_SHM_*), but malloc is not "
              "pinheap's in this process (", why, "): only pinheap_malloc and its kin "
              "allocate in the region; see pinheap-info", NULL);
  }
  if (missed > 0)
    text_add("Some installed calls did not reach pinheap when called: see pinheap-info. ");
  if (uncalled > 0)
    text_add("Memory calls that no loaded object makes yet are patched as objects that make "
             "them are loaded. ");
  text_add("Installation took ");
  text_dec((ph_clock_ns(CLOCK_MONOTONIC) - t0) / 1000u);
  text_add(" us. ");
  __atomic_store_n(&install_state, 2, __ATOMIC_RELEASE);
  install_inside = 0;
  ph_unlock(&install_lock);
  feeds_attach();              /* UCX's libucm, Open MPI's hooks, if loaded: fed from now on */
}

void install_fork_child(void)
{
  if (install_inside || __atomic_load_n(&install_state, __ATOMIC_RELAXED) != 1)
    return;                    /* not running, or this thread runs it and goes on */
  text_add("A fork() on another thread interrupted the installation: this process, the "
           "child, has what was installed before it, and the rest stays libc's. ");
  __atomic_store_n(&install_state, 2, __ATOMIC_RELEASE);
  ph_lock_reset(&install_lock);
}

PH_HOT int install_malloc_served(void)
{
  install_run();
  if (__atomic_load_n(&install_state, __ATOMIC_ACQUIRE) != 2)
    return 0;
  for (unsigned i = 0; i < install_n; i++) {
    if (strcmp(replace_symbols[i].name, "malloc") == 0)
      return install_syms[i].method != PINHEAP_INSTALL_NONE && install_syms[i].verified;
  }
  return 0;
}

int install_calls_seen(void)
{
  install_run();
  if (__atomic_load_n(&install_state, __ATOMIC_ACQUIRE) != 2)
    return 0;
  for (unsigned i = 0; i < install_n; i++) {
    const install_sym_t *st = &install_syms[i];
    if (replace_symbols[i].event == 0)
      continue;
    if (st->method == PINHEAP_INSTALL_NONE)
      return 0;
    if (!st->verified && !(st->method == PINHEAP_INSTALL_RELOC && st->slots == 0))
      return 0;
  }
  return 1;
}

int install_glibc_releases_patched(void)
{
  static const char *const releasers[] = { "mmap", "munmap", "mremap", "madvise", "brk", "sbrk" };
  pinheap_install_info_t ii = { 0 };
  unsigned found = 0;
  for (unsigned i = 0; PINHEAP_NAME(install_info)(i, &ii) == 0; i++)
    for (unsigned k = 0; k < sizeof(releasers) / sizeof(releasers[0]); k++)
      if (strcmp(ii.symbol, releasers[k]) == 0) {
        if (ii.code != PINHEAP_CODE_PATCHED || !ii.verified)
          return 0;
        found++;
      }
  return found == sizeof(releasers) / sizeof(releasers[0]);
}

int install_malloc_served_enabled(void)
{
  return __atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) == DISPATCH_ENABLED &&
         install_malloc_served();
}

/* glibc's malloc_trim gives memory back with madvise inside libc, unseen:
 * while the fallback is in force it does nothing. */
static int install_probe_trim_noop(size_t pad)
{
  (void)pad;
  return 0;
}

void install_block_trim(void)
{
  static reloc_entry_t trim_table[1] = {
    { .name = "malloc_trim", .replacement = (void *)install_probe_trim_noop } };
  install_run();
  if (__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) == DISPATCH_DISABLED)
    __atomic_store_n(&dispatch_table.fn_malloc_trim, install_probe_trim_noop, __ATOMIC_RELEASE);
  if (install_may_patch(install_tool()) &&
      dlsym(RTLD_DEFAULT, "malloc_trim") != (void *)install_probe_trim_noop) {
    unsigned i = 0;
    while (i < install_n && strcmp(replace_symbols[i].name, "malloc_trim") != 0)
      i++;
    /* interposed: the dispatch table above covers it */
    if (i == install_n || install_syms[i].method == PINHEAP_INSTALL_NONE)
      reloc_install_flags(trim_table, 1, RELOC_PATCH_SELF);
  }
}

/* ======================================================================= */
/*  the public account                                                      */
/* ======================================================================= */

int PINHEAP_NAME(install_info)(unsigned i, pinheap_install_info_t *out_p)
{
  if (out_p == NULL)
    return EINVAL;
  install_run();
  if (i >= install_n)
    return ENOENT;
  out_p->symbol = replace_symbols[i].name;
  out_p->event = replace_symbols[i].event;
  out_p->method = install_syms[i].method;
  out_p->verified = install_syms[i].verified;
  out_p->objects = install_syms[i].objects;
  out_p->slots = install_syms[i].slots;
  out_p->code = install_syms[i].code;
  out_p->code_text = install_code[i].entry != NULL ? install_code[install_code_alias[i]].text
                                                   : install_code[i].text;
  return 0;
}

static const char *install_text_own(void)
{
  install_run();
  if (__atomic_load_n(&install_state, __ATOMIC_ACQUIRE) != 2)
    return "not installed yet: asked from inside the installation itself";
  return install_text_buf;
}

/* What the copies of pinheap in the process did, said too (copies.c). */
const char *PINHEAP_NAME(install_text)(void)
{
  return copies_text(COPIES_TEXT_INSTALL, install_text_own());
}
