/*
 * reloc_impl.h -- the relocation patcher's inside, shared by its three
 * files and nothing else: reloc.c (the tables of names, objects and slots,
 * the pass, the entry points of reloc.h), reloc_elf.c (one object's ELF
 * view, and the definitions in a defining object's symbol table) and
 * reloc_loads.c (the dlopen/dlclose wrappers, and which objects were
 * loaded at start-up).  The contract is reloc.h's.
 */
#ifndef PINHEAP_RELOC_IMPL_H
#define PINHEAP_RELOC_IMPL_H

#include "hooks/intercept/reloc.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>

#if defined(__x86_64__)
#define RELOC_SUPPORTED 1
#define RELOC_TYPE_JUMP_SLOT R_X86_64_JUMP_SLOT
#define RELOC_TYPE_GLOB_DAT  R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define RELOC_SUPPORTED 1
#define RELOC_TYPE_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define RELOC_TYPE_GLOB_DAT  R_AARCH64_GLOB_DAT
#else
#define RELOC_SUPPORTED 0
#endif

#if UINTPTR_MAX > 0xffffffffu
#define RELOC_R_SYM(i)  ELF64_R_SYM(i)
#define RELOC_R_TYPE(i) ELF64_R_TYPE(i)
#else
#define RELOC_R_SYM(i)  ELF32_R_SYM(i)
#define RELOC_R_TYPE(i) ELF32_R_TYPE(i)
#endif

#define RELOC_NO_NAME 0xffffu

typedef enum { RELOC_PASS_PATCH, RELOC_PASS_SWEEP } reloc_pass_mode_t;

/* reloc_loaded_at_startup()'s account of the loaded objects. */
typedef struct reloc_startup_obj_s {
  const char *name;           /* dlpi_name ("" for the main program) */
  const char *strtab;
  const ElfW(Dyn) *dyn;
  uintptr_t addr;             /* dlpi_addr, dlpi_phdr, dlpi_phnum: its view */
  const ElfW(Phdr) *phdr;
  ElfW(Half) phnum;
  int initial;                /* in the start-up closure (2: its DT_NEEDED entries marked) */
  int holds;                  /* holds the address asked about */
} reloc_startup_obj_t;

typedef struct reloc_startup_s {
  size_t n;                   /* (first: with obj[0 .. n) on the same pages) */
  uintptr_t addr;
  int full;                   /* the whole closure, not only up to addr's object */
  reloc_startup_obj_t obj[RELOC_MAX_OBJECTS];
} reloc_startup_t;

typedef struct reloc_view_s {
  uintptr_t base;
  const ElfW(Sym) *symtab;
  const char *strtab;
  const ElfW(Rela) *rela[2];
  size_t rela_count[2];
  uintptr_t lo, hi;           /* the object's mapped extent */
  uintptr_t link_hi;          /* its extent at link time (hi - base) */
  uintptr_t relro_lo, relro_hi;
  const uint32_t *gnu_hash;   /* DT_GNU_HASH, or NULL */
  const uint32_t *sysv_hash;  /* DT_HASH, or NULL */
  const ElfW(Versym) *versym; /* DT_VERSYM, or NULL */
  int has_dynamic;
} reloc_view_t;

/* Calls fn(view, slot, name index, arg) for each JUMP_SLOT/GLOB_DAT slot
 * of the object whose symbol is an installed name (names = 1) or is sym
 * (names = 0); stops when fn returns nonzero and returns that. */
typedef int reloc_slot_fn_t(const reloc_view_t *v, void **slot, unsigned idx, void *arg);

/* ---- reloc.c --------------------------------------------------------------- */
/** Serializes every pass and every change of the tables (held across fork). */
extern PH_HIDDEN pthread_mutex_t reloc_mutex;
extern PH_HIDDEN size_t reloc_ntables;
extern PH_HIDDEN reloc_stats_t reloc_stats;
/** Warns that a bound was exceeded, and counts it. */
PH_HIDDEN void reloc_overflow(const char *bound, size_t value);
PH_HIDDEN int reloc_view_each(const reloc_view_t *v, const char *sym, reloc_slot_fn_t *fn, void *arg);
PH_HIDDEN int reloc_relro_set(uintptr_t lo, uintptr_t hi, int prot);
PH_HIDDEN int reloc_is_self(const struct dl_phdr_info *info);
PH_HIDDEN int reloc_is_vdso(const struct dl_phdr_info *info);
PH_HIDDEN void reloc_pass_run(reloc_pass_mode_t mode);
PH_HIDDEN void reloc_originals_finish(void);

/* ---- reloc_elf.c ----------------------------------------------------------- */
PH_HIDDEN uintptr_t reloc_dyn_ptr(uintptr_t base, ElfW(Addr) p);
PH_HIDDEN int reloc_in_segment(const struct dl_phdr_info *info, uintptr_t addr);
PH_HIDDEN void reloc_view_make(const struct dl_phdr_info *info, reloc_view_t *v);
/** The GNU hash of name (DT_GNU_HASH's). */
PH_HIDDEN uint32_t reloc_gnu_hash(const char *name);
/** What dlsym gives for name (no version) if v comes first in the lookup
 *  (hash: reloc_gnu_hash(name)):
 *  1 with *out set (its one plain definition), 0 when v does not define
 *  it, -1 when dlsym's answer is not sure from the table (two definitions,
 *  an IFUNC, a hidden version); *sym_p (unless NULL): its symbol. */
/** 0 when v's GNU Bloom filter says v defines no symbol of GNU hash
 *  hash (as ld.so tests it first); 1 when it may (or v has no GNU hash
 *  table).  Inline: the test of a name against most objects ends here. */
PH_STARTUP static inline int reloc_bloom_may(const reloc_view_t *v, uint32_t hash)
{
  const uint32_t *h = v->gnu_hash;
  if (h == NULL || h[2] == 0)
    return 1;
  const unsigned bits = sizeof(ElfW(Addr)) * 8;
  ElfW(Addr) word = ((const ElfW(Addr) *)(h + 4))[(hash / bits) & (h[2] - 1)];
  ElfW(Addr) mask = ((ElfW(Addr))1 << (hash % bits)) | ((ElfW(Addr))1 << ((hash >> h[3]) % bits));
  return (word & mask) == mask;
}
PH_HIDDEN int reloc_sym_default(const reloc_view_t *v, const char *name, uint32_t hash, void **out,
                                const ElfW(Sym) **sym_p);
PH_HIDDEN void reloc_defs_patch(reloc_entry_t *table, size_t n);
/** Notes that names[i] resolves to addrs[i], syms[i]'s value in info's
 *  object (loaded at start-up, so never unloaded), i < n: the next
 *  reloc_defs_patch() of that name takes it instead of walking the
 *  objects to find it again.  reloc_mutex held. */
PH_HIDDEN void reloc_defs_hint(const struct dl_phdr_info *info, const char *const *names,
                               void *const *addrs, const ElfW(Sym) *const *syms, size_t n);
/** Puts every rewritten definition back; reloc_mutex held. */
PH_HIDDEN void reloc_defs_restore(void);
/** In a forked child: the definitions' lock made new. */
PH_HIDDEN void reloc_defs_fork_child(void);

/* ---- reloc_loads.c --------------------------------------------------------- */
PH_HIDDEN void *reloc_dlopen(const char *file, int mode);
PH_HIDDEN void *reloc_dlmopen(Lmid_t lmid, const char *file, int mode);
PH_HIDDEN int reloc_dlclose(void *handle);
/** In a forked child: the unload note's lock made new. */
PH_HIDDEN void reloc_loads_fork_child(void);
/** reloc_loaded_at_startup() with the scratch table st; reloc_mutex held. */
PH_HIDDEN int reloc_startup_scan(reloc_startup_t *st, const void *addr);
/** reloc_startup_resolve() with the scratch table st; reloc_mutex held. */
PH_HIDDEN int reloc_startup_resolve_in(reloc_startup_t *st, const void *addr,
                                       const char *const *names, void **out, size_t n);

#endif /* PINHEAP_RELOC_IMPL_H */
