/*
 * patch.h -- code patching of libc's entry points: the first bytes of
 * glibc's mmap, munmap, ... become a jump to pinheap's entry point
 * (hooks/events/events.h), so that glibc's own internal calls (free of a large
 * block, malloc_trim, arena shrinking) fire the events too.  x86-64 only;
 * elsewhere every call answers ENOSYS.  Owned by hooks/intercept/patch.c.
 *
 * A site is one function: patch_find() fills in where libc defines it,
 * patch_apply() writes the jump (one aligned atomic 8-byte store of a
 * 5-byte `jmp rel32`, to the entry point itself or to a trampoline slot
 * mapped within +-2 GiB of libc), patch_undo() puts the original bytes
 * back.  An entry that already starts with a jump (UCX's libucm, Open
 * MPI's patcher, another pinheap) is left alone and described.  Nothing
 * is written while other threads run (PATCH_THREADS): no write of a jump is
 * safe against a thread fetching the entry meanwhile (patch.c, "Threads").
 * Nothing allocates; one mutex serialises apply and undo.
 */
#ifndef PINHEAP_PATCH_H
#define PINHEAP_PATCH_H

#include "allocator/api/api.h"

#include <stddef.h>

/** A site's state (PINHEAP_CODE_* of pinheap.h has the same values). */
enum {
  PATCH_NONE = 0,       /* not tried */
  PATCH_DONE = 1,       /* the entry jumps to the target */
  PATCH_FOREIGN = 2,    /* the entry already jumped elsewhere: left alone */
  PATCH_FAILED = 3      /* not patched: see the site's text */
};

/** patch_apply and patch_undo flag: other threads may be running (a late
 *  load).  Then nothing is written: patch_apply fails each site that is
 *  not someone else's jump (PATCH_FAILED, with a text saying why) and
 *  patch_undo leaves every jump.  Without it the caller promises that no
 *  other thread runs (before main, or all of them parked). */
#define PATCH_THREADS 1u

typedef struct patch_site_s {
  const char *name;          /* [in]  libc symbol, e.g. "munmap" */
  void *target;              /* [in]  where calls must go (events_munmap) */
  void *known;               /* [in]  libc's function if the caller knows it (what
                                the process resolves the name to, when that is in
                                libc's code), else NULL: patch_find looks it up */
  void *entry;               /* [out] libc's function (patch_find) */
  int state;                 /* [out] PATCH_* */
  int said;                  /* [in/out] 0 for a new site (zeroed with it); set
                                when text was written: start-up never reads an
                                unwritten text, so its page stays untouched */
  unsigned char orig[8];     /* [out] the first 8 bytes before patching */
  void *via;                 /* [out] the trampoline slot used, or NULL (direct) */
  char *text;                /* [in]  PATCH_TEXT_MAX bytes, the caller's: [out] what
                                was seen when not patched ("" or never written
                                otherwise).  Apart from the site, so that a table
                                of sites is a few cache lines and pages, not 10 kB
                                of which only the first bytes of each entry are
                                touched. */
} patch_site_t;

/** The size of a site's text buffer. */
#define PATCH_TEXT_MAX 320

/** Finds libc's definition of each site's name (sites without a name are skipped) (the default version, in
 *  libc.so.6, not what the process resolves): sets entry, or leaves it
 *  NULL with state PATCH_FAILED and a text.  Call it before relocation
 *  patching rewrites libc's symbol table.  Idempotent per site.
 *  @return 0; ENOSYS off x86-64. */
PH_HIDDEN int patch_find(patch_site_t *sites, size_t n);

/** Patches every found site (PATCH_NONE or undone) whose entry looks like
 *  glibc's own code, with one lifting of protection for all of them when
 *  they share a segment.  A site whose entry an earlier site of the same
 *  call has (mmap64 is mmap) shares its outcome.  flags: PATCH_THREADS or 0.
 *  @return how many sites are patched after the call; -ENOSYS off x86-64. */
PH_HIDDEN int patch_apply(patch_site_t *sites, size_t n, unsigned flags);

/** Puts the original bytes back in every PATCH_DONE site whose entry still
 *  holds pinheap's jump; state becomes PATCH_NONE.  Trampolines stay
 *  mapped (a thread may still be inside one).  With PATCH_THREADS nothing
 *  is undone.
 *  @return how many were undone; -ENOSYS off x86-64. */
PH_HIDDEN int patch_undo(patch_site_t *sites, size_t n, unsigned flags);
/** In a fork child (hooks/events/forks.c): frees the patcher's lock. */
PH_HIDDEN void patch_fork_child(void);

/** Whether other threads than the caller may exist: glibc's
 *  __libc_single_threaded, then /proc/self/status. */
PH_HIDDEN int patch_threads_running(void);

/** Where the jump that code c starts with goes (after an optional endbr64:
 *  jmp rel32/rel8, jmp *(%rip), movabs + jmp *%reg or push + ret, push +
 *  ret; int3 gives c itself), or NULL when it does not start with one;
 *  *kind_p names the form.  x86-64 builds only. */
PH_HIDDEN const void *patch_jump_target(const unsigned char *c, const char **kind_p);

/** Describes what code at entry jumps to, into buf ("" when it does not
 *  start with a jump).  For the tests and the info tool. */
PH_HIDDEN const char *patch_describe(const void *entry, char *buf, size_t len);

#endif /* PINHEAP_PATCH_H */
