/*
 * install.c -- puts pinheap's entry points where the process's calls go,
 * and records how, per memory call and per malloc-family function:
 * interposition, relocation patching, or nothing.  Main entry point:
 * install_run(), from the constructor right after the decision (before
 * main for a core library loaded at start-up, inside dlopen for one loaded
 * later), never from inside an allocation call.
 *
 * The order, each step checked by a call:
 *  (a) interposition: the process resolves the name (dlsym(RTLD_DEFAULT)'s
 *      answer, read from the start-up objects' symbol tables where they are
 *      sure of it: reloc_startup_resolve) to replace.c's own definition --
 *      the core library or the preload shim comes before libc in symbol
 *      lookup;
 *  (b) otherwise relocation patching (hooks/intercept/reloc.c): the JUMP_SLOT and
 *      GLOB_DAT slots of every loaded object, libc's and pinheap's own
 *      object's included, are pointed at pinheap, and so are the
 *      definitions in libc's dynamic symbol table, so that an object loaded
 *      later is bound to pinheap by ld.so itself, before its constructors
 *      run (a constructor freeing what libc allocated for it must reach
 *      the same allocator); the dlopen wrapper patches such objects too;
 *  (b') code patching (hooks/intercept/patch.c, x86-64): libc's own mmap, munmap,
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
 *      unmapped.  malloc and free must be pinheap's own functions, else
 *      malloc must return pinheap's memory and free take it (a block made
 *      at start-up would set the heap up for a program that may never
 *      allocate: pinheap_open's self-test makes real blocks).
 * install_run() runs each step as a phase of its own (install_setup,
 * install_interpose, install_sites_find, install_relocate,
 * install_code_patch, then install_verify.c's install_verify_calls and
 * install_verify_family, then the account).
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
#include "hooks/intercept/install_impl.h"

#include "hooks/decide/dispatch.h"
#include "hooks/events/events.h"
#include "hooks/intercept/patch.h"
#include "hooks/intercept/peers.h"
#include "hooks/intercept/reloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <time.h>

#include "allocator/heap/chunk.h"
#include "config/params.h"
#include "pinheap.h"
#include "allocator/base/startup.h"

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
/* written only for (b), from its head; within one page (2 kB-aligned, as
 * long as it fits 2 kB): a page fault fewer at start-up */
PH_COLD_BSS static reloc_entry_t install_table[INSTALL_MAX] __attribute__((aligned(2048)));
/* The run as the account tells it (install_account_keep), for the text
 * composed on demand (install_text_own).  In .lbss, so that .bss, whose
 * layout decides which small statics share a page, stays as it was; at
 * the start of a page, which GCC makes install_table's (a file's
 * variables go in the reverse order of their definitions, and the table
 * follows at the next 2 kB): no page of its own. */
PH_COLD_BSS static install_run_t install_said __attribute__((aligned(4096)));
PH_HOT_DATA static unsigned install_n;
PH_HOT_DATA static unsigned install_k;             /* install_table's entries in use */
PH_HOT_DATA static int install_is_late = -1;       /* -1: unknown */
/* Code patching, per memory symbol (same index as replace_symbols);
 * install_code_alias[i]: the index of the site patched for the same libc
 * function (mmap64 is mmap), or i. */
static patch_site_t install_code[INSTALL_MAX];
static unsigned char install_code_alias[INSTALL_MAX];
/* install_code[i].text: written only when site i is not patched */
PH_COLD_BSS static char install_code_text[INSTALL_MAX][PATCH_TEXT_MAX];
static char install_text_buf[1024];
/* The run as the account tells it (install_account_keep); the text from
 * it, composed on demand (install_text_own). */

PH_HOT_DATA static int install_text_state;         /* 0 none, 1 being composed, 2 ready */
PH_HOT_DATA static int install_interrupted;        /* a fork cut the run short (the child) */

static int install_probe_trim_noop(size_t pad);

/* ======================================================================= */
/*  memory checkers                                                         */
/* ======================================================================= */

/* Defined by the sanitizer runtimes (exported to the global scope). */
extern void __asan_init(void) __attribute__((weak));
extern void __tsan_init(void) __attribute__((weak));
extern void __msan_init(void) __attribute__((weak));
extern void __hwasan_init(void) __attribute__((weak));

PH_STARTUP static const char *install_tool_find(void)
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

/* The tool is the process's from its exec on: found once (the decision,
 * the installation and the self-test ask; each finding scans the
 * environment, hundreds of variables under mpirun).  Racing first callers
 * find the same answer. */
PH_STARTUP const char *install_tool(void)
{
  PH_HOT_DATA static int known;
  PH_HOT_DATA static const char *tool;

  if (__atomic_load_n(&known, __ATOMIC_ACQUIRE))
    return __atomic_load_n(&tool, __ATOMIC_RELAXED);
  const char *t = install_tool_find();
  __atomic_store_n(&tool, t, __ATOMIC_RELAXED);
  __atomic_store_n(&known, 1, __ATOMIC_RELEASE);
  return t;
}

/* Patching is allowed: PINHEAP_PATCH is not 0, and no memory checker runs
 * the process (unless PINHEAP_MODE=on says to go ahead anyway). */
PH_STARTUP static int install_may_patch(const char *tool)
{
  const params_t *p = params_get();
  return p->v[PARAM_PATCH].value != 0 && (tool == NULL || p->v[PARAM_MODE].value == PARAM_MODE_ON);
}

/* ======================================================================= */
/*  installation                                                            */
/* ======================================================================= */

/* What the process calls for replace_symbols[i] (i < install_n): read
 * from what the installation did, without a look-up by name. */
PH_STARTUP void *install_resolved_at(unsigned i)
{
  const char *name = replace_symbols[i].name;
  if (!__atomic_load_n(&install_patched, __ATOMIC_ACQUIRE))
    return dlsym(RTLD_DEFAULT, name);
  /* interposed, as step (a)'s dlsym(RTLD_DEFAULT) found: no object
   * loaded since comes before pinheap's in the lookup scope, so that
   * answer stands (and saves a look-up per name in (c) and the self-test) */
  if (install_syms[i].method == PINHEAP_INSTALL_INTERPOSE)
    return replace_symbols[i].self;
  if (install_syms[i].method == PINHEAP_INSTALL_RELOC) {
    /* a patched slot's value; with none patched (the live count of its
     * entry: no loaded object calls it), what the next object that does
     * will get */
    unsigned j = install_syms[i].entry;
    void *v = j < install_k && __atomic_load_n(&install_table[j].slots, __ATOMIC_RELAXED) == 0
                  ? NULL
                  : reloc_patched_slot(name);
    return v != NULL ? v : replace_symbols[i].entry;
  }
  /* libc's definition rewritten: dlsym would find it, read without
   * dlsym (the code-patched memory calls that no slot names) */
  void *def = reloc_def_value(name);
  return def != NULL ? def : dlsym(RTLD_DEFAULT, name);
}

PH_STARTUP void *install_resolved(const char *name)
{
  unsigned n = replace_symbols != NULL ? __atomic_load_n(&install_n, __ATOMIC_RELAXED) : 0, i = 0;
  /* replace_symbols' own names are found by address, without a strcmp
   * per entry before them */
  while (i < n && replace_symbols[i].name != name)
    i++;
  for (unsigned k = 0; i == n && k < n; k++)
    if (strcmp(replace_symbols[k].name, name) == 0)
      i = k;
  return i < n ? install_resolved_at(i) : dlsym(RTLD_DEFAULT, name);
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

/* The account is composed when first asked for (install_text_own), from
 * what install_run kept of its run (install_said): a process that never
 * asks composes nothing.  It is built without stdio (no formatter of
 * libc's, whose pages the process would then carry), with the message
 * builder (allocator/base/base.h): text_add appends s, cut to fit as
 * snprintf would; text_dec appends a number. */
PH_NOINLINE static void text_add(const char *s)
{
  ph_str_add(install_text_buf, sizeof(install_text_buf), s);
}

PH_NOINLINE static void text_dec(uint64_t v)
{
  ph_str_dec(install_text_buf, sizeof(install_text_buf), v);
}

/* "s" when n is not 1 (a plural's ending). */
static const char *text_s(unsigned n)
{
  return n == 1 ? "" : "s";
}

/* ---- install_run's phases, in the order it runs them -------------------- */

/* What this run may do: the switches, the decision, how late pinheap's
 * object was loaded. */
PH_STARTUP static void install_setup(install_run_t *r)
{
  r->params = params_get();
  r->tool = install_tool();
  r->patch = install_may_patch(r->tool);
  r->enabled = __atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) == DISPATCH_ENABLED;
  unsigned n = replace_symbols != NULL ? replace_symbols_count : 0;
  if (n > INSTALL_MAX)
    n = INSTALL_MAX;
  r->n = n;
  install_n = n;
  /* with it, step (a)'s answers from the symbol tables (no dlsym) */
  const char *names[INSTALL_MAX];
  for (unsigned i = 0; i < n; i++)
    names[i] = replace_symbols[i].name;
  r->at_start = reloc_startup_resolve((void *)&install_run, names, r->resolved, n);
  install_is_late = r->at_start == 0;
  r->want_malloc = r->enabled &&
                   (!install_is_late || r->params->v[PARAM_LATE_MALLOC].value != 0);
  r->events = r->params->v[PARAM_EVENTS].value != 0;   /* 0: the memory calls are left alone */
  r->syms = install_syms;
  r->sites = install_code;
  r->alias = install_code_alias;
}

/* (a) interposition */
PH_STARTUP static void install_interpose(install_run_t *r)
{
  for (unsigned i = 0; i < r->n; i++) {
    install_syms[i].method = PINHEAP_INSTALL_NONE;
    if (r->resolved[i] == NULL)   /* not read from the tables by install_setup */
      r->resolved[i] = dlsym(RTLD_DEFAULT, replace_symbols[i].name);
    if (r->resolved[i] == replace_symbols[i].self) {
      install_syms[i].method = PINHEAP_INSTALL_INTERPOSE;
      r->interposed++;
    }
  }
}

/* libc's definitions, looked up before (b) rewrites libc's symbol table */
PH_STARTUP static void install_sites_find(install_run_t *r)
{
  unsigned n = r->n;
  int code = r->events && r->patch && r->params->v[PARAM_CODE_PATCH].value != 0;
  for (unsigned i = 0; i < n; i++) {
    install_syms[i].code = PINHEAP_CODE_NONE;
    /* (empty: zero-initialised, and this runs once per process; not even
     * read here, so that the texts' pages stay untouched unless a site
     * is left unpatched and says why) */
    install_code[i].text = install_code_text[i];
    if (!code || !install_is_call(i))
      continue;                /* libc's fallocate, ftruncate, syscall: see the top */
    install_code[i].name = replace_symbols[i].name;
    install_code[i].target = replace_symbols[i].entry;
    install_code[i].known = r->resolved[i];   /* used if in libc's code */
  }
  if (code && patch_find(install_code, n) != 0)
    code = 0;                  /* not x86-64 */
  if (r->events)              /* other patchers' hooks on libc hear pinheap's calls */
    peers_find(install_code, code ? n : 0);
  r->code = code;
}

/* (b) relocation patching where interposition did not take */
PH_STARTUP static void install_relocate(install_run_t *r)
{
  unsigned n = r->n, k = 0;
  if (!r->patch || n == 0)
    return;
  for (unsigned i = 0; i < n; i++) {
    if (install_syms[i].method != PINHEAP_INSTALL_NONE)
      continue;
    if (replace_symbols[i].event == 0 && !r->want_malloc)
      continue;
    if (replace_symbols[i].event != 0 && !r->events)
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
      install_table[k].original = r->resolved[i];
    k++;
  }
  if (r->want_malloc) {
    void *usable = NULL;      /* what malloc_usable_size resolves to, unless pinheap's */
    for (unsigned i = 0; i < n; i++)
      if (i == INSTALL_IX_malloc_usable_size && r->resolved[i] != replace_symbols[i].self &&
          r->resolved[i] != replace_symbols[i].entry)
        usable = r->resolved[i];
    dispatch_libc_prepare(usable);
  }
  if (k > 0)
    r->rc = reloc_install_flags(install_table, k, RELOC_PATCH_SELF | RELOC_PATCH_DEFINITIONS);
  else
    reloc_install_wrappers();   /* dlopen/dlclose seen: libucm arriving, unloads */
  for (unsigned j = 0, i = 0; j < k; j++) {
    while (replace_symbols[i].name != install_table[j].name)   /* (its own names) */
      i++;
    install_syms[i].method = PINHEAP_INSTALL_RELOC;
    install_syms[i].entry = (unsigned char)j;
    install_syms[i].objects = install_table[j].objects;
    install_syms[i].slots = install_table[j].slots;
  }
  r->k = k;
  install_k = k;
}

/* (b') code patching of libc's own entry points */
PH_STARTUP static void install_code_patch(install_run_t *r)
{
  unsigned n = r->n;
  if (!r->code)
    return;
  r->code_threads = patch_threads_running();
  patch_apply(install_code, n, r->code_threads ? PATCH_THREADS : 0);
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
    install_syms[i].code = (short)ps->state;
    if (ps->state == PATCH_DONE) {
      /* the method names how the process's own calls arrive: code
       * patching is it only where nothing else is (no slot calls it) */
      if (install_syms[i].method == PINHEAP_INSTALL_NONE ||
          (install_syms[i].method == PINHEAP_INSTALL_RELOC && install_syms[i].slots == 0))
        install_syms[i].method = PINHEAP_INSTALL_CODE;
      r->code_done += install_code_alias[i] == i;
    } else if (ps->state == PATCH_FOREIGN) {
      r->code_foreign++;
    } else if (ps->state == PATCH_FAILED) {
      r->code_failed++;
    }
  }
}

/* The account, first part: how the process's calls reach pinheap. */
static void install_account_how(const install_run_t *r)
{
  if (r->n == 0) {
    text_add("this build has no entry points to install (no replace.c). ");
  } else if (r->interposed == (int)r->n) {
    text_add("pinheap's symbols come first in symbol lookup: every call is interposed. ");
  } else {
    if (r->interposed > 0)
      text_add("some of pinheap's symbols interpose; ");
    if (r->at_start == 1)
      text_add("pinheap's object was loaded at start-up behind libc in symbol lookup (a "
               "dependency of a dependency, as libopen-pal is of libmpi). ");
    else if (r->at_start == 0)
      text_add("pinheap's object was loaded after start-up (dlopen). ");
    if (r->tool != NULL && !r->patch) {
      text_add("Running under ");
      text_add(r->tool);
      text_add(": nothing is patched and malloc is left to it. ");
    } else if (!r->patch) {
      text_add("PINHEAP_PATCH=0: nothing is patched, so calls reach pinheap only where its "
               "symbols interpose. ");
    } else if (r->k > 0) {
      text_add("Calls were redirected by relocation patching: ");
      text_dec(r->rs_slots);
      text_add(" slot");
      text_add(text_s(r->rs_slots));
      text_add(" in ");
      text_dec(r->rs_objects);
      text_add(" object");
      text_add(text_s(r->rs_objects));
      text_add(", and ");
      text_dec(r->rs_definitions);
      text_add(" definition");
      text_add(text_s(r->rs_definitions));
      text_add(" in the symbol table of the object that defined them");
      text_add(r->rc == 0 ? ". " : " (a bound was exceeded: see the warning). ");
    }
  }
  if (r->code_done > 0) {
    text_dec((uint64_t)r->code_done);
    text_add(" of libc's memory functions start with a jump to pinheap (code patching), so "
             "glibc's own calls of them are seen");
    text_add(r->code_threads ? " (patched while other threads ran: only entries safe against "
                               "them). "
                             : ". ");
  }
}

/* Why malloc is not pinheap's although the shared heap is configured. */
static const char *install_shm_why(const install_run_t *r)
{
  return !r->enabled ? "the leave-pinned decision left malloc to glibc"
                     : "pinheap was loaded after start-up (PINHEAP_LATE_MALLOC=1 replaces it anyway)";
}

/* The account, second part: what was left alone, and why -- what seldom
 * happens, out of the start-up text (noinline: a process that has none of
 * it does not map its page). */
PH_NOINLINE static void install_account_left_rare(const install_run_t *r, int shm)
{
  unsigned n = r->n;
  const params_t *params = r->params;
  /* left alone: the names, then the first one's account (pinheap-info
   * shows each) */
  for (int kind = PINHEAP_CODE_FOREIGN; kind <= PINHEAP_CODE_FAILED; kind++) {
    if ((kind == PINHEAP_CODE_FOREIGN ? r->code_foreign : r->code_failed) == 0)
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
  if (!r->events) {
    text_add(params->v[PARAM_EVENTS].from != NULL ? params->v[PARAM_EVENTS].from
                                                  : "PINHEAP_EVENTS");
    text_add("=0: the memory calls (mmap, munmap, ...) are not patched and fire no event; only "
             "the malloc family is installed. ");
  }
  if (!r->code && r->patch && r->events && params->v[PARAM_CODE_PATCH].value == 0)
    text_add("PINHEAP_CODE_PATCH=0: libc's code is left alone, so glibc's internal calls are "
             "not seen. ");
  if (r->enabled && !r->want_malloc && install_is_late)
    text_add("malloc stays glibc's: replacing it in a library loaded this late would hand "
             "blocks freed through pointers captured before to the wrong allocator "
             "(PINHEAP_LATE_MALLOC=1 replaces it anyway). ");
  if (shm) {
    /* the shared heap's size alone does not replace malloc */
    const char *why = install_shm_why(r);
    text_add("The shared-memory heap is configured, but malloc is not pinheap's here (");
    text_add(why);
    text_add("): only " PINHEAP_PREFIX_STRING "malloc and its kin allocate in the region. ");
  }
}

/* The warning of the shared heap left unused, said when the installation
 * ends (not in the start-up text: seldom). */
PH_NOINLINE static void install_shm_warn(const install_run_t *r)
{
  if (dispatch_state != DISPATCH_UNDECIDED)
    ph_warn("the shared-memory heap is configured (PINHEAP_SHM_*), but malloc is not "
            "pinheap's in this process (", install_shm_why(r), "): only " PINHEAP_PREFIX_STRING
            "malloc and its kin allocate in the region; see pinheap-info", NULL);
}

/* The account, second part: what was left alone, and why. */
static void install_account_left(const install_run_t *r)
{
  int shm = r->shm;
  if (r->code_foreign > 0 || r->code_failed > 0 || !r->events || shm ||
      (!r->code && r->patch && r->params->v[PARAM_CODE_PATCH].value == 0) ||
      (r->enabled && !r->want_malloc && install_is_late))
    install_account_left_rare(r, shm);
  if (r->missed > 0)
    text_add("Some installed calls did not reach pinheap when called: see pinheap-info. ");
  if (r->uncalled > 0)
    text_add("Memory calls that no loaded object makes yet are patched as objects that make "
             "them are loaded. ");
  text_add("Installation took ");
  text_dec(r->us);
  text_add(" us. ");
}

/* What the account will say, kept at the end of the run: the patcher's
 * counts and the time as they are now; the warning said now. */
PH_STARTUP static void install_account_keep(install_run_t *r)
{
  reloc_stats_t rs;
  r->shm = !r->want_malloc && shm_params_any_set(environ);
  if (r->shm)
    install_shm_warn(r);
  if (r->k > 0) {
    reloc_stats_get(&rs);
    r->rs_slots = rs.slots;
    r->rs_objects = rs.objects_patched;
    r->rs_definitions = rs.definitions;
  }
  r->resolved = NULL;          /* (install_run's array: gone with it) */
  r->us = (ph_clock_ns(CLOCK_MONOTONIC) - r->t0) / 1000u;
  install_said = *r;
}

/* The steps (a), (b), (b'), (c) of the top, each a phase above (the
 * verification's in install_verify.c), then the account. */
PH_STARTUP void install_run(void)
{
  int expected = 0;
  install_run_t r;
  void *resolved[INSTALL_MAX];
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
  memset(&r, 0, sizeof(r));
  r.t0 = t0;
  r.resolved = resolved;
  install_setup(&r);
  install_interpose(&r);
  install_sites_find(&r);
  install_relocate(&r);
  install_code_patch(&r);
  /* a late load (dlopen'ed) that wrote other objects' slots or libc's
   * code: both now call into this object */
  if ((r.patch || r.code_done > 0) && r.at_start != 1)
    install_pin_self();
  if (r.events)
    peers_snapshot(install_code, r.code ? r.n : 0);   /* libc's entries as pinheap left them */
  __atomic_store_n(&install_patched, 1, __ATOMIC_RELEASE);  /* install_resolved reads slots */
  install_verify_calls(&r);
  install_verify_family(&r);
  install_account_keep(&r);
  __atomic_store_n(&install_state, 2, __ATOMIC_RELEASE);
  install_inside = 0;
  ph_unlock(&install_lock);
  feeds_attach();              /* UCX's libucm, Open MPI's hooks, if loaded: fed from now on */
}

void install_fork_child(void)
{
  /* a text being composed by another thread: composed again here */
  if (__atomic_load_n(&install_text_state, __ATOMIC_RELAXED) == 1)
    __atomic_store_n(&install_text_state, 0, __ATOMIC_RELAXED);
  if (install_inside || __atomic_load_n(&install_state, __ATOMIC_RELAXED) != 1)
    return;                    /* not running, or this thread runs it and goes on */
  install_interrupted = 1;     /* what was kept of the run is not this one's */
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

/* The account, composed by the first caller (install_text_state: 0 none,
 * 1 being composed, 2 ready and read-only); the others wait for it. */
static const char *install_text_own(void)
{
  int expected = 0;
  install_run();
  if (__atomic_load_n(&install_state, __ATOMIC_ACQUIRE) != 2)
    return "not installed yet: asked from inside the installation itself";
  if (ph_likely(__atomic_load_n(&install_text_state, __ATOMIC_ACQUIRE) == 2))
    return install_text_buf;
  if (__atomic_compare_exchange_n(&install_text_state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    install_text_buf[0] = '\0';
    if (install_interrupted) {
      text_add("A fork() on another thread interrupted the installation: this process, the "
               "child, has what was installed before it, and the rest stays libc's. ");
    } else {
      install_account_how(&install_said);
      install_account_left(&install_said);
    }
    __atomic_store_n(&install_text_state, 2, __ATOMIC_RELEASE);
    return install_text_buf;
  }
  while (__atomic_load_n(&install_text_state, __ATOMIC_ACQUIRE) != 2)
    sched_yield();
  return install_text_buf;
}

/* What the copies of pinheap in the process did, said too (copies.c). */
const char *PINHEAP_NAME(install_text)(void)
{
  return copies_text(COPIES_TEXT_INSTALL, install_text_own());
}
COPIES_SELF_ALIAS(install_text);
