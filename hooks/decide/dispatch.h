/*
 * dispatch.h -- the replacement layer's internal interface: the dispatch
 * table the unprefixed entry points jump through, the once-only decision,
 * glibc's functions for the "leave glibc untouched" mode, and the release
 * listener chain.
 */
#ifndef PINHEAP_DISPATCH_H
#define PINHEAP_DISPATCH_H

#include "allocator/api/api.h"
#include "pinheap.h"
#include "hooks/intercept/symbols.h"

#include <malloc.h>
#include <stddef.h>

/* What every unprefixed entry point calls: one indirect jump.  Before the
 * decision the table holds the "first call" functions, which decide and
 * then call through the table again. */
typedef struct dispatch_table_s {
#define DISPATCH_FIELD(name, ret, params, event, entry) ret (*fn_##name) params;
  PH_INTERCEPTED_FAMILY(DISPATCH_FIELD)   /* fn_malloc, fn_free, ... (symbols.h) */
#undef DISPATCH_FIELD
} dispatch_table_t;

extern PH_HIDDEN dispatch_table_t dispatch_table;

/* The decision's outcome. */
enum {
  DISPATCH_UNDECIDED = 0,
  DISPATCH_ENABLED = 1,   /* pinheap's allocator serves the malloc family */
  DISPATCH_DISABLED = 2   /* every call goes to glibc */
};
extern PH_HIDDEN int dispatch_state;

/* 1 in the preload shim (tools/preload.c defines it), else 0: preloading
 * means the user wants pinheap, so the decision defaults to enabled. */
extern PH_HIDDEN int dispatch_preloaded;

/** Takes the leave-pinned decision once (thread-safe, never allocates) and
 *  installs the matching table.  Cheap after the first call. */
PH_HIDDEN void dispatch_decide(void);

/** reallocarray on glibc's allocator, for calls made before the decision:
 *  NULL with ENOMEM when nmemb * size overflows, as glibc's. */
PH_HIDDEN void *dispatch_libc_reallocarray(void *p, size_t nmemb, size_t size);

/** Sets, now, the functions the enabled table forwards foreign pointers
 *  to that have no __libc_ export, before installation rewrites what their
 *  names resolve to: usable_size is what malloc_usable_size resolves to in
 *  the process (the allocator that made those blocks), or NULL to look
 *  glibc's up. */
PH_HIDDEN void dispatch_libc_prepare(void *usable_size);

/* ---- release.c ------------------------------------------------------------ */
/** Calls every registered listener, in registration order, for a range
 *  about to be released.  Nested releases from inside a listener are
 *  delivered up to a small depth, never forever. */
PH_HIDDEN void release_dispatch(void *addr, size_t len, int from_alloc);
/** Connects the allocator's OS-layer release slot to the listener chain. */
PH_HIDDEN void release_init(void);

/* ---- replace.c ------------------------------------------------------------ */
/* pinheap's own definitions of malloc, free and munmap, taken through
 * hidden aliases: what the process resolves those names to is compared
 * with them to see whether interposition took. */
typedef struct replace_self_s {
  void *self_malloc;
  void *self_free;
  void *self_munmap;
} replace_self_t;
extern PH_HIDDEN const replace_self_t replace_self;

/* Every symbol replace.c defines, in the order of pinheap_install_info():
 * the memory calls, then the malloc family. */
typedef struct replace_symbol_s {
  const char *name;         /* "munmap" */
  int event;                /* PINHEAP_EVENT_* call event; 0: malloc family;
                             * PINHEAP_EVENT_VM_UNMAPPED: no call event, the
                             * call derives releases only (hooks/events/files.c) */
  void *self;               /* replace.c's exported definition */
  void *entry;              /* what a patched slot points at */
} replace_symbol_t;
/* Weak: builds without replace.c (the sanitizer passes' hooks test) have
 * no such table, and nothing to install. */
extern PH_HIDDEN const replace_symbol_t replace_symbols[] __attribute__((weak));
extern PH_HIDDEN const unsigned replace_symbols_count __attribute__((weak));

/* ---- install.c ------------------------------------------------------------ */
/** Puts pinheap's entry points where the process's calls go (interposition
 *  checked, else relocation patching), verified by calls; once, after the
 *  decision; never from inside an allocation call. */
PH_HIDDEN void install_run(void);
/** The function the process calls for symbol name: pinheap's when it was
 *  installed for it, else whatever the process resolves (libc's). */
PH_HIDDEN void *install_resolved(const char *name);
/** install_resolved() of replace_symbols[i].name, i below the installed count. */
PH_HIDDEN void *install_resolved_at(unsigned i);
/** 1 when pinheap's allocator serves the process's malloc and free. */
PH_HIDDEN int install_malloc_served(void);
/** Makes malloc_trim a no-op (glibc's trim gives memory back unseen) while
 *  the leave-pinned fallback is in force; patches it where needed. */
PH_HIDDEN void install_block_trim(void);
/** The memory checker this process runs under (valgrind, a sanitizer), or
 *  NULL.  Never allocates. */
PH_HIDDEN const char *install_tool(void);
/** 1 when every call of the program to a memory call (mmap ... sbrk)
 *  reaches pinheap: installed and verified, or patched where no object
 *  calls it yet. */
PH_HIDDEN int install_calls_seen(void);
/** 1 when every function glibc's malloc releases memory with (mmap,
 *  munmap, mremap, madvise, brk, sbrk) starts with pinheap's jump (code
 *  patching) and was verified: glibc's own frees and trims fire events. */
PH_HIDDEN int install_glibc_releases_patched(void);
/** 1 when pinheap is enabled and its allocator serves malloc and free (its
 *  releases are events; glibc's malloc, whose are not, is out of use). */
PH_HIDDEN int install_malloc_served_enabled(void);

/* ---- copies.c ------------------------------------------------------------- */
/** The public API of a copy of pinheap, as another copy calls it: a copy
 *  that stood down forwards its own there.  Part of the record copies
 *  find each other by (copies.c: its layout is versioned). */
typedef struct copies_api_s {
  int (*set_event_handler)(int events, int priority, pinheap_event_cb *cb, void *arg);
  int (*unset_event_handler)(int events, pinheap_event_cb *cb, void *arg);
  int (*register_release)(pinheap_release_fn *fn, void *ctx);
  int (*unregister_release)(pinheap_release_fn *fn, void *ctx);
  int (*open)(void);
  int (*support_level)(void);
  const char *(*support_text)(void);
  int (*enabled)(void);
  int (*check_leave_pinned)(void);
  const char *(*decision_text)(void);
  const char *(*install_text)(void);
  const char *(*consumers_text)(void);
  int (*fabric_monitor_import)(void);
} copies_api_t;

/* The API functions of hooks/ as this copy defines them: a hidden alias
 * after each definition (COPIES_SELF_ALIAS(open) after pinheap_open), for
 * copies.c's record.  Its entries then bind at link time (a relative
 * relocation each) instead of a symbol lookup per name at load, 13 lookups
 * of ld.so's in the start-up of every process that loads pinheap. */
#define COPIES_SELF(n) PINHEAP_CAT(PINHEAP_NAME(n), _self)
#define COPIES_STR_(x) #x
#define COPIES_STR(x) COPIES_STR_(x)
#define COPIES_SELF_ALIAS(n)                                                 \
  extern __typeof__(PINHEAP_NAME(n)) COPIES_SELF(n)                          \
      __attribute__((alias(COPIES_STR(PINHEAP_NAME(n))), visibility("hidden")))

/** NULL while this copy serves (alone, or the first copy in the process);
 *  the serving copy's API once this one stood down.  The first call finds
 *  the other copies (never allocates); a copy that cannot stand down in
 *  favour of the first one ends the process there, saying why. */
PH_HIDDEN const copies_api_t *copies_serving(void);
/** For dispatch_decide(): the serving copy's malloc family when this copy
 *  stood down (its decision is not taken), else NULL. */
PH_HIDDEN const dispatch_table_t *copies_table(void);
/** For install_run(): 1 when this copy stood down (nothing is installed;
 *  the serving copy's object is pinned), else 0.  May allocate (dlopen). */
PH_HIDDEN int copies_stand_by(void);
/** One sentence on the copies (this copy's warning line, capitalised,
 *  ending in ". "), or NULL when alone. */
PH_HIDDEN const char *copies_note(void);
/** A text of the public API with what the copies did: base when alone;
 *  base and the sentence when serving; this copy's own account when it
 *  stood down (base unused). */
PH_HIDDEN const char *copies_text(int kind, const char *base);
enum { COPIES_TEXT_DECISION, COPIES_TEXT_INSTALL };

/* ---- ucx.c ---------------------------------------------------------------- */
/** Finds UCX's libucm in the process and feeds it pinheap's VM_MAPPED and
 *  VM_UNMAPPED events (as its external events when pinheap sees them all)
 *  and takes UCX's; once; a no-op while libucm is absent (feeds_attach()
 *  calls it only when libucm may be there).  Allocates (dlopen). */
PH_HIDDEN void ucx_feed_attach(void);
/** One sentence on the feed, into buf; snprintf's return value (0, buf
 *  empty, while libucm is absent). */
PH_HIDDEN int ucx_feed_describe(char *buf, size_t size);

/* ---- ompi.c --------------------------------------------------------------- */
/** Finds Open MPI's libopen-pal in the process and joins its memory hooks
 *  and pinheap's events both ways; once, then cheap; a no-op while
 *  libopen-pal is absent (feeds_attach() calls it only when it may be
 *  there).  Allocates (dlopen). */
PH_HIDDEN void ompi_feed_attach(void);
/** One sentence on the feed, into buf; snprintf's return value (0, buf
 *  empty, while libopen-pal is absent). */
PH_HIDDEN int ompi_feed_describe(char *buf, size_t size);

/* ---- fabric.c ------------------------------------------------------------- */
/** Hands libfabric the releases kept while their thread held libfabric's
 *  monitor lock, if any; imports nothing (the program's call,
 *  PINHEAP_NAME(fabric_monitor_import), does).  One load when libfabric is
 *  absent or nothing waits; never allocates. */
PH_HIDDEN void fabric_feed_attach(void);
/** One sentence on the monitor, into buf; snprintf's return value (0, buf
 *  empty, while libfabric does not hold pinheap's monitor). */
PH_HIDDEN int fabric_feed_describe(char *buf, size_t size);
/** For the tests: the struct fid_mem_monitor libfabric holds (NULL before
 *  the import), and one more range for the search of libfabric's monitor
 *  lock at the next subscribe. */
PH_HIDDEN void *fabric_monitor_fid(void);
PH_HIDDEN void fabric_monitor_scan_also(const void *addr, size_t len);

/* ---- feeds.c -------------------------------------------------------------- */
/** Attaches every consumer found in the process (UCX, Open MPI, libfabric
 *  holding pinheap's monitor): after installation, after each dlopen the
 *  relocation patcher wraps, and from the self-test. */
PH_HIDDEN void feeds_attach(void);
#define FEEDS_PATH_MAX 256
/** Which loaded objects have a file name starting with prefixes[i] (bit
 *  i), the path of the first such object copied into paths[i] when paths
 *  is not NULL.  Never allocates. */
PH_HIDDEN int feeds_objects(const char *const *prefixes, int n, char (*paths)[FEEDS_PATH_MAX]);
/** A new reference (dlopen RTLD_NOLOAD) to the loaded object whose file
 *  name starts with prefix, its path in path; RTLD_DEFAULT when none is
 *  loaded (the consumer may be linked into the program, and path says
 *  so); NULL when it cannot be opened. */
PH_HIDDEN void *feeds_open(const char *prefix, char path[FEEDS_PATH_MAX]);

/* ---- forks.c -------------------------------------------------------------- */
/** Registers the hooks' fork handler once (pthread_atfork); from the
 *  constructor, before installation, and from pinheap_open().  May
 *  allocate: never from inside an allocation call. */
PH_HIDDEN void forks_init(void);
/** The fork child's part of each file whose lock has no prefork handler
 *  (the order and the reasons: hooks/README.md, "Fork"): each frees its
 *  lock if a thread the child lacks held it, after making what it guards
 *  usable.  Called by forks.c only (patch_fork_child, peers_fork_child and
 *  reloc_fork_child are declared in their files' headers). */
PH_HIDDEN void dispatch_fork_child(void);
PH_HIDDEN void install_fork_child(void);
PH_HIDDEN void selftest_fork_child(void);
/** At level info (PINHEAP_LOG_LEVEL=info or debug): three lines -- the
 *  decision, the installation, the support level after the self-test,
 *  run now -- naming the rank and pid.  From the constructor, after the
 *  installation (selftest.c). */
PH_HIDDEN void selftest_say(void);
PH_HIDDEN void ucx_fork_child(void);
PH_HIDDEN void ompi_fork_child(void);
PH_HIDDEN void fabric_fork_child(void);
PH_HIDDEN void copies_fork_child(void);

#endif /* PINHEAP_DISPATCH_H */
