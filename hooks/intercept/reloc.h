/*
 * reloc.h -- the relocation patcher: makes every loaded object's calls to
 * a set of symbols go to replacements, by rewriting the objects' GOT
 * slots.  Main entry point: reloc_install().
 *
 * What it does.  For each object dl_iterate_phdr() reports, the dynamic
 * section is walked (DT_SYMTAB, DT_STRTAB, DT_RELA/DT_RELASZ,
 * DT_JMPREL/DT_PLTRELSZ, DT_PLTREL) and every JUMP_SLOT (calls through the
 * PLT) and GLOB_DAT (addresses taken, and -fno-plt calls) relocation whose
 * symbol is named in an installed table has its slot overwritten with the
 * replacement: one aligned atomic pointer store per slot.  libc.so.6 is
 * included (its malloc/free/calloc/realloc go through such slots).  Two
 * objects are never touched: the one that holds this file's code (pinheap's
 * own object: its calls keep reaching the originals) and the vDSO.
 *
 * RELRO.  Slots inside the range the dynamic linker made read-only after
 * relocation (PT_GNU_RELRO, rounded down at both ends to pages, as ld.so
 * rounds it) are written by lifting that whole range to PROT_READ|WRITE
 * with one mprotect and putting it back to PROT_READ -- the protection
 * ld.so gave it -- right after, so a GOT spanning several pages is
 * handled.  Slots outside it (the .got.plt of a lazily bound object) are
 * in a writable segment already.
 *
 * Later loads.  The patcher itself installs dlopen, dlmopen and dlclose
 * (every object's slots for them point to its own wrappers): after a
 * dlopen the new objects get every installed table; after a dlclose the
 * bookkeeping forgets objects that are gone, so an object later mapped at
 * the same address is patched again.  A load the wrappers did not see
 * (libc's own NSS or iconv modules, a dlopen from pinheap's object) is
 * patched by the next pass, whatever starts it.  An unload they did not see
 * (a dlclose from pinheap's own object, or from an object loaded after
 * reloc_uninstall) is caught by the next pass all the same, through
 * dl_iterate_phdr's unload counter (dlpi_subs): then every record is
 * checked against the object list and its slot before it is trusted.
 *
 * Never allocates: fixed-size static storage (the RELOC_MAX_* bounds
 * below).  A bound that is exceeded is reported with a warning naming it
 * and makes reloc_install() return ENOSPC; what fit is patched.  Every
 * pass runs under one mutex; dlopen itself is called outside it.
 *
 * Known limits (documented, not handled):
 *  - dlopen called through the wrapper sees pinheap's object as its caller:
 *    a name without '/' is searched with that object's DT_RUNPATH/RPATH,
 *    not the calling object's (LD_LIBRARY_PATH, the cache and the default
 *    directories are unchanged);
 *  - only JUMP_SLOT and GLOB_DAT are rewritten: a function's address
 *    stored in data by an R_X86_64_64 relocation (a table of function
 *    pointers) keeps the original, as does a pointer captured before
 *    install;
 *  - an object another thread is loading at the very moment of a pass
 *    (mapped, not yet relocated or not yet RELRO-protected) can be seen
 *    half-done: objects whose slots still hold link-time values are left
 *    for the next pass, but the RELRO protection step of ld.so can still
 *    race: patch before threads exist, as the issue asks;
 *  - a lazily bound slot that is being resolved by ld.so on another thread
 *    while it is patched may get the original back;
 */
#ifndef PINHEAP_RELOC_H
#define PINHEAP_RELOC_H

#include "allocator/api/api.h"
#include "allocator/base/startup.h"

#include <stddef.h>

/** Installed tables at once (reloc_install calls with distinct tables). */
#define RELOC_MAX_TABLES   8
/** Symbol names over every installed table, plus the 3 of the patcher. */
#define RELOC_MAX_NAMES    64
/** Objects known at once (patched or skipped). */
#define RELOC_MAX_OBJECTS  512
/** Patched slots recorded at once (each one is restored by uninstall). */
#define RELOC_MAX_SLOTS    4096

/** One symbol to redirect.  name and replacement are read by the patcher;
 *  the other fields are its output, updated after every pass. */
typedef struct reloc_entry_s {
  const char *name;        /* [in]  dynamic symbol name, e.g. "munmap" */
  void *replacement;       /* [in]  where the calls must go */
  void *original;          /* [in/out] the function calls forward to: the
                            *       caller may set it (e.g. from its own
                            *       dlsym(RTLD_DEFAULT)), saving the
                            *       patcher that lookup; else the first
                            *       value seen that is neither the
                            *       replacement nor a lazy-binding stub
                            *       (else dlsym(RTLD_NEXT), then
                            *       RTLD_DEFAULT, before such slots are written);
                            *       NULL until known; kept
                            *       across uninstall */
  unsigned slots;          /* [out] slots currently patched */
  unsigned objects;        /* [out] objects with at least one of them */
  void *definition;        /* [in]  what RELOC_PATCH_DEFINITIONS points the
                            *       definition at (NULL: the replacement):
                            *       a function that forwards to it, so that
                            *       a patcher rewriting whatever dlsym finds
                            *       (Open MPI's) leaves the slots' target
                            *       alone */
} reloc_entry_t;

/** What the patcher did, for the info tool and tests. */
typedef struct reloc_stats_s {
  unsigned long passes;     /* patch/sweep passes run */
  unsigned objects_seen;    /* objects reported by the last pass */
  unsigned objects_patched; /* objects holding at least one patched slot */
  unsigned slots;           /* patched slots over every table */
  unsigned skipped_self;    /* 1 if pinheap's own object was seen and skipped */
  unsigned skipped_vdso;    /* 1 if the vDSO was seen and skipped */
  unsigned skipped_unrelocated; /* objects left for later: not relocated yet */
  unsigned long overflows;  /* times a RELOC_MAX_* bound was exceeded */
  unsigned long mprotect_failures; /* RELRO lifts or restores that failed */
  unsigned definitions;     /* symbol table entries rewritten (RELOC_PATCH_DEFINITIONS) */
} reloc_stats_t;

/** 1 when the strings a and b are equal (strcmp(a, b) == 0); inline,
 *  without libc's string functions (start-up binds none it can spare). */
PH_STARTUP static inline int reloc_streq(const char *a, const char *b)
{
  while (*a != '\0' && *a == *b)
    a++, b++;
  return *a == *b;
}

/** The last component of path (after its last '/'), as strrchr would
 *  find it; inline, without libc's string functions. */
PH_STARTUP static inline const char *reloc_file_of(const char *path)
{
  const char *base = path;
  for (const char *c = path; *c != '\0'; c++)
    if (*c == '/')
      base = c + 1;
  return base;
}

/** 1 when s begins with prefix (strncmp(s, prefix, strlen(prefix)) == 0). */
PH_STARTUP static inline int reloc_begins(const char *s, const char *prefix)
{
  while (*prefix != '\0' && *s == *prefix)
    s++, prefix++;
  return *prefix == '\0';
}

/** 1 when the last component of path (a dlpi_name; NULL: no) begins
 *  with prefix, as strncmp(basename, prefix, strlen(prefix)) == 0. */
PH_STARTUP static inline int reloc_file_begins(const char *path, const char *prefix)
{
  return path != NULL && reloc_begins(reloc_file_of(path), prefix);
}

/** Adds a table and patches every loaded object with every installed
 *  table.  Installing the same table again (same pointer and n) only
 *  patches objects not yet patched: idempotent.  A name already owned by
 *  an earlier table keeps its first owner (the later entry stays at 0
 *  slots, with a warning).  A name no object imports gives 0 slots, not an
 *  error.
 *  @param [in,out] table  entries; must stay valid until reloc_uninstall()
 *  @param [in]     n      number of entries (> 0)
 *  @return 0; EINVAL for a NULL table, n == 0, or an entry without name or
 *          replacement (nothing done); ENOSPC when a RELOC_MAX_* bound was
 *          exceeded (warned; what fit is patched); ENOSYS on an
 *          architecture the patcher does not know (not x86_64/aarch64). */
PH_HIDDEN int reloc_install(reloc_entry_t *table, size_t n);

/** reloc_install_flags: patch pinheap's own object too (all its slots for
 *  the table's names; the patcher's dlopen/dlclose slots stay its own).
 *  For a core library whose other code must call what the process calls. */
#define RELOC_PATCH_SELF 1u
/** reloc_install_flags: also rewrite the definition each name resolves to
 *  (its st_value in the defining object's dynamic symbol table, libc's),
 *  so that every later symbol lookup -- an object dlopen maps, relocated
 *  and initialised before any wrapper sees it; lazy binding; dlsym --
 *  finds the replacement.  Restored by reloc_uninstall(). */
#define RELOC_PATCH_DEFINITIONS 2u

/** reloc_install with flags (RELOC_PATCH_SELF or 0); EINVAL for others. */
PH_HIDDEN int reloc_install_flags(reloc_entry_t *table, size_t n, unsigned flags);
/** Installs only the patcher's own wrappers of dlopen, dlmopen and dlclose
 *  (what a table installs first): loads are seen (UCX's libucm arriving)
 *  and so are unloads (the segments dlclose unmaps, reported as
 *  VM_UNMAPPED) when every call is interposed and no table is needed.
 *  @return 0 or ENOSYS. */
PH_HIDDEN int reloc_install_wrappers(void);

/** The value of one slot patched for sym (what a patched caller calls),
 *  or NULL when no slot is patched for it. */
PH_HIDDEN void *reloc_patched_slot(const char *sym);

/** What dlsym(RTLD_DEFAULT, sym) returns when the definition it finds was
 *  rewritten (RELOC_PATCH_DEFINITIONS: the first definer's own symbol
 *  table entry, read as it is now), or NULL when none was. */
PH_HIDDEN void *reloc_def_value(const char *sym);

/** Whether the object holding addr was loaded at start-up: it is the main
 *  program, preloaded, or in the DT_NEEDED closure of those (direct or
 *  transitive dependency).  0 when it came later (dlopen), -1 when no
 *  loaded object holds addr. */
PH_HIDDEN int reloc_loaded_at_startup(const void *addr);

/** reloc_loaded_at_startup(addr), and with it what dlsym(RTLD_DEFAULT,
 *  names[i]) returns, read from the symbol tables of the objects loaded at
 *  start-up, for i < n (n <= RELOC_MAX_NAMES): out[i], or NULL where that
 *  is not sure from the tables (the caller asks dlsym), and every out[i]
 *  NULL unless addr's object was loaded at start-up (objects dlopen'ed
 *  RTLD_GLOBAL since come after them in the scope: only a name none of
 *  them defines is theirs, and dlsym is asked for it). */
PH_HIDDEN int reloc_startup_resolve(const void *addr, const char *const *names, void **out, size_t n);

/** Puts every patched slot back to the value it held before (for a core
 *  library about to be dlclose'd), including the patcher's own dlopen,
 *  dlmopen and dlclose slots, and forgets every table.  Objects loaded
 *  after install through the wrappers were patched and are restored too;
 *  objects loaded after uninstall are not patched at all.  A slot that no
 *  longer holds the replacement (someone else rewrote it) is left alone.
 *  Function pointers taken while patched keep pointing at the
 *  replacements, which must therefore stay mapped.
 *  @return 0, or ENOSPC if a bound was exceeded on the way. */
PH_HIDDEN int reloc_uninstall(void);

/** How many objects and slots are patched for sym.
 *  @return 0 with *objects_p and *slots_p set, or ENOENT if no installed
 *          table names sym (outputs untouched). */
PH_HIDDEN int reloc_query(const char *sym, unsigned *objects_p, unsigned *slots_p);

/** The current value of the first JUMP_SLOT or GLOB_DAT slot for sym in
 *  the first loaded object whose name contains object_substr (NULL: the
 *  main program): what that object would call.  NULL if no such object
 *  or no such slot.  Reads only; pinheap's own object is searched too. */
PH_HIDDEN void *reloc_lookup_slot(const char *object_substr, const char *sym);

/** The same search, returning the slot's address (NULL if none). */
PH_HIDDEN void **reloc_lookup_slot_addr(const char *object_substr, const char *sym);

/** Definitions read from the loaded objects' dynamic symbol tables, for
 *  names without a version, with no call of dlopen or dlsym (whose failed
 *  look-up allocates an error text, and whose handle for libc costs
 *  dlopen's set-up): start-up touches fewer pages.  object is the file
 *  name prefix of the one object to read ("libc.so"), or NULL for every
 *  loaded object (the vDSO aside).  out[i] gets the address, or NULL when
 *  the object(s) do not define names[i].
 *  @return 0 when every answer is the one dlsym would give: with object,
 *          each name is defined there once, of a default version, and is
 *          no IFUNC (dlsym(dlopen(object)) returns the same); with NULL, a
 *          NULL out[i] means no loaded object defines names[i] (so
 *          dlsym(RTLD_DEFAULT) finds nothing either).  -1 otherwise: ask
 *          dlsym (out[] is then only a hint). */
PH_HIDDEN int reloc_defs_named(const char *object, const char *const *names, void **out, size_t n);

/** Copies the counters. */
PH_HIDDEN void reloc_stats_get(reloc_stats_t *out_p);

/** In a fork child (hooks/events/forks.c): makes the note and definition locks
 *  new (reloc_mutex has its own handlers). */
PH_HIDDEN void reloc_fork_child(void);

#endif /* PINHEAP_RELOC_H */
