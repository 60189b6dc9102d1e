/*
 * reloc.c -- the relocation patcher: GOT slots of every loaded object
 * redirected to replacements, and the dlopen/dlclose wrappers that keep
 * later objects patched.  Main entry point: reloc_install().  The contract,
 * the bounds and the known limits are in reloc.h.
 *
 * State (all static, under reloc_mutex):
 *   names[]    every symbol of every installed table, with its
 *              replacement, found through a small open-addressing hash
 *              (names_bucket[]) keyed by the FNV-1a hash of the name;
 *   objects[]  the objects a pass has met, keyed by (load bias, program
 *              header address), with the generation they were patched in;
 *   slots[]    every slot written: where, what it held before, for which
 *              name and which object -- what uninstall puts back and what
 *              the counters are computed from.
 * The generation goes up when a table is added: every object is walked
 * again (patching is idempotent slot by slot: a slot that already holds
 * the replacement is not written, nor recorded twice).
 */
#include "reloc.h"

#include "pinheap.h"
#include "startup.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

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

#define RELOC_BUCKETS 256      /* > 2 * RELOC_MAX_NAMES, a power of two */
#define RELOC_NO_NAME 0xffffu

typedef struct reloc_name_s {
  uint32_t hash;
  const char *name;
  void *replacement;
  reloc_entry_t *entry;       /* where the counters and original go */
  int want_original;          /* slots met, all lazy stubs, original unknown */
  int self_ok;                /* its table asked for pinheap's own object too */
} reloc_name_t;

typedef struct reloc_table_s {
  reloc_entry_t *table;
  size_t n;
} reloc_table_t;

typedef struct reloc_object_s {
  uintptr_t base;             /* dlpi_addr */
  const void *phdr;           /* dlpi_phdr: with base, the identity */
  uintptr_t relro_lo, relro_hi; /* page range ld.so made read-only (lo == hi: none) */
  unsigned gen;               /* generation patched in (0: never) */
  unsigned long seen;         /* last pass that met it */
  int live;
} reloc_object_t;

typedef struct reloc_slot_s {
  void **slot;
  void *orig;
  uint16_t name_idx;
  uint16_t obj_idx;
} reloc_slot_t;

typedef enum { RELOC_PASS_PATCH, RELOC_PASS_SWEEP } reloc_pass_mode_t;

/* reloc_loaded_at_startup()'s account of the loaded objects. */
typedef struct reloc_startup_obj_s {
  const char *name;           /* dlpi_name ("" for the main program) */
  const char *strtab;
  const ElfW(Dyn) *dyn;
  int initial;                /* in the start-up closure */
  int holds;                  /* holds the address asked about */
} reloc_startup_obj_t;

typedef struct reloc_startup_s {
  size_t n;                   /* (first: with obj[0 .. n) on the same pages) */
  uintptr_t addr;
  reloc_startup_obj_t obj[RELOC_MAX_OBJECTS];
} reloc_startup_t;

PH_HOT_DATA static pthread_mutex_t reloc_mutex = PTHREAD_MUTEX_INITIALIZER;
/* (GCC lays out a file's .bss in the reverse order of the definitions:
 * the first entries of reloc_buckets, reloc_tables and reloc_names, which
 * every process writes, then share a page.) */
static reloc_name_t reloc_names[RELOC_MAX_NAMES];
PH_HOT_DATA static size_t reloc_nnames;
static reloc_table_t reloc_tables[RELOC_MAX_TABLES];
PH_HOT_DATA static size_t reloc_ntables;
static uint16_t reloc_buckets[RELOC_BUCKETS];   /* name index + 1; 0 = empty */
/* A filter on the installed names' first two bytes (reloc_maybe): a
 * relocation's name that fails it is not hashed.  Most of the thousands of
 * names the objects of an MPI job import fail it (opal_, MPI_, pthread_,
 * str...); without it, hashing them was some 130 us of a rank's start-up. */
#define RELOC_FILTER_BITS 1024u
PH_HOT_DATA static uint64_t reloc_filter[RELOC_FILTER_BITS / 64];
PH_COLD_BSS static reloc_object_t reloc_objects[RELOC_MAX_OBJECTS];
PH_HOT_DATA static size_t reloc_nobjects;                    /* high-water mark */
PH_COLD_BSS static reloc_slot_t reloc_slots[RELOC_MAX_SLOTS];   /* worst case */
PH_HOT_DATA static size_t reloc_nslots;
PH_HOT_DATA static unsigned reloc_gen = 1;
PH_HOT_DATA static unsigned long long reloc_last_subs;
PH_HOT_DATA static int reloc_subs_known;
PH_HOT_DATA static reloc_stats_t reloc_stats;
PH_HOT_DATA static int reloc_overflowed;                     /* in the current call */
PH_HOT_DATA static int reloc_want_originals;                 /* some name has want_original */
PH_HOT_DATA static unsigned reloc_self_names;                /* names with self_ok */
/* Scratch, under reloc_mutex, of one function at a time, each of which
 * fills in what it reads: reloc_counts_update()'s objects met per name,
 * reloc_loaded_at_startup()'s loaded objects (too big for a stack).  One
 * table for both, so that their first entries, all that a small program
 * writes of either, share a page. */
static union {
  uint64_t obj_bits[RELOC_MAX_NAMES][RELOC_MAX_OBJECTS / 64];
  reloc_startup_t st;
} reloc_scratch;

static void *reloc_dlopen(const char *file, int mode);
static void *reloc_dlmopen(Lmid_t lmid, const char *file, int mode);
static int reloc_dlclose(void *handle);

/* The patcher's own table: loads and unloads must be seen. */
static reloc_entry_t reloc_own_table[] = {
  { .name = "dlopen", .replacement = (void *)reloc_dlopen },
  { .name = "dlmopen", .replacement = (void *)reloc_dlmopen },
  { .name = "dlclose", .replacement = (void *)reloc_dlclose },
};
#define RELOC_OWN_N (sizeof(reloc_own_table) / sizeof(reloc_own_table[0]))

/* ---- names ----------------------------------------------------------------- */

PH_STARTUP static uint32_t reloc_hash(const char *s)
{
  uint32_t h = 2166136261u;
  for (; *s != '\0'; s++)
    h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

PH_STARTUP static unsigned reloc_filter_bit(const char *s)
{
  unsigned c0 = (unsigned char)s[0], c1 = c0 != 0 ? (unsigned char)s[1] : 0;
  return (c0 * 31u + c1 * 7u) & (RELOC_FILTER_BITS - 1);
}

/* May name be an installed one?  (No: it is not.) */
PH_STARTUP static int reloc_maybe(const char *name)
{
  unsigned b = reloc_filter_bit(name);
  return (reloc_filter[b / 64] >> (b % 64)) & 1;
}

/* Index of name in reloc_names[], or RELOC_NO_NAME. */
PH_STARTUP static unsigned reloc_name_find(const char *name, uint32_t h)
{
  for (unsigned i = h & (RELOC_BUCKETS - 1);; i = (i + 1) & (RELOC_BUCKETS - 1)) {
    unsigned v = reloc_buckets[i];
    if (v == 0)
      return RELOC_NO_NAME;
    if (reloc_names[v - 1].hash == h && strcmp(reloc_names[v - 1].name, name) == 0)
      return v - 1;
  }
}

PH_STARTUP static void reloc_overflow(const char *bound, size_t value)
{
  char buf[24];
  reloc_stats.overflows++;
  reloc_overflowed = 1;
  ph_warn("relocation patcher: bound ", bound, " = ", ph_fmt_dec(buf, value),
          " exceeded; some slots stay unpatched (raise it in hooks/reloc.h)", NULL);
}

/* Adds a table's names (a name already present keeps its first owner). */
PH_STARTUP static void reloc_names_add(reloc_entry_t *table, size_t n, int self_ok)
{
  for (size_t i = 0; i < n; i++) {
    uint32_t h = reloc_hash(table[i].name);
    table[i].slots = 0;
    table[i].objects = 0;
    if (reloc_name_find(table[i].name, h) != RELOC_NO_NAME) {
      ph_warn("relocation patcher: symbol '", table[i].name,
              "' is already in an installed table; the first one keeps it", NULL);
      continue;
    }
    if (reloc_nnames == RELOC_MAX_NAMES) {
      reloc_overflow("RELOC_MAX_NAMES", RELOC_MAX_NAMES);
      return;
    }
    reloc_name_t *nm = &reloc_names[reloc_nnames];
    nm->hash = h;
    nm->name = table[i].name;
    nm->replacement = table[i].replacement;
    nm->entry = &table[i];
    nm->want_original = 0;
    nm->self_ok = self_ok;
    if (self_ok)
      reloc_self_names++;
    unsigned fb = reloc_filter_bit(table[i].name);
    reloc_filter[fb / 64] |= (uint64_t)1 << (fb % 64);
    unsigned b = h & (RELOC_BUCKETS - 1);
    while (reloc_buckets[b] != 0)
      b = (b + 1) & (RELOC_BUCKETS - 1);
    reloc_buckets[b] = (uint16_t)(reloc_nnames + 1);
    reloc_nnames++;
  }
}

/* ---- one object's ELF view -------------------------------------------------- */

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

PH_STARTUP static uintptr_t reloc_page_size(void)
{
  PH_HOT_DATA static uintptr_t pg;
  if (pg == 0) {
    unsigned long v = getauxval(AT_PAGESZ);
    pg = v != 0 ? v : 4096;
  }
  return pg;
}

/* A d_ptr of the dynamic section: ld.so has usually added the load bias
 * already (not for every object, e.g. the vDSO); a value below the bias
 * has not been. */
PH_STARTUP static uintptr_t reloc_dyn_ptr(uintptr_t base, ElfW(Addr) p)
{
  return p < base ? base + p : p;
}

PH_STARTUP static int reloc_in_segment(const struct dl_phdr_info *info, uintptr_t addr)
{
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (addr >= lo && addr - lo < ph->p_memsz)
      return 1;
  }
  return 0;
}

PH_STARTUP static void reloc_view_make(const struct dl_phdr_info *info, reloc_view_t *v)
{
  const ElfW(Dyn) *dyn = NULL;
  uintptr_t pg = reloc_page_size();

  memset(v, 0, sizeof(*v));
  v->base = info->dlpi_addr;
  v->lo = UINTPTR_MAX;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD) {
      uintptr_t lo = v->base + ph->p_vaddr, hi = lo + ph->p_memsz;
      if (lo < v->lo)
        v->lo = lo;
      if (hi > v->hi)
        v->hi = hi;
    } else if (ph->p_type == PT_DYNAMIC) {
      dyn = (const ElfW(Dyn) *)(v->base + ph->p_vaddr);
    } else if (ph->p_type == PT_GNU_RELRO) {
      /* ld.so protects whole pages only: both ends rounded down. */
      uintptr_t a = v->base + ph->p_vaddr;
      v->relro_lo = a & ~(pg - 1);
      v->relro_hi = (a + ph->p_memsz) & ~(pg - 1);
    }
  }
  if (v->lo == UINTPTR_MAX)
    v->lo = 0;
  v->link_hi = v->hi - v->base;
  if (dyn == NULL)
    return;

  size_t relasz = 0, relaent = sizeof(ElfW(Rela)), pltrelsz = 0;
  uintptr_t rela = 0, jmprel = 0;
  long pltrel = DT_RELA;
  for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
    case DT_SYMTAB: v->symtab = (const ElfW(Sym) *)reloc_dyn_ptr(v->base, d->d_un.d_ptr); break;
    case DT_STRTAB: v->strtab = (const char *)reloc_dyn_ptr(v->base, d->d_un.d_ptr); break;
    case DT_RELA: rela = reloc_dyn_ptr(v->base, d->d_un.d_ptr); break;
    case DT_RELASZ: relasz = d->d_un.d_val; break;
    case DT_RELAENT: relaent = d->d_un.d_val; break;
    case DT_JMPREL: jmprel = reloc_dyn_ptr(v->base, d->d_un.d_ptr); break;
    case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
    case DT_PLTREL: pltrel = (long)d->d_un.d_val; break;
    case DT_GNU_HASH: v->gnu_hash = (const uint32_t *)reloc_dyn_ptr(v->base, d->d_un.d_ptr); break;
    case DT_HASH: v->sysv_hash = (const uint32_t *)reloc_dyn_ptr(v->base, d->d_un.d_ptr); break;
    case DT_VERSYM: v->versym = (const ElfW(Versym) *)reloc_dyn_ptr(v->base, d->d_un.d_ptr); break;
    default: break;
    }
  }
  if (v->symtab == NULL || v->strtab == NULL || relaent != sizeof(ElfW(Rela)))
    return;
  v->has_dynamic = 1;
  if (rela != 0) {
    v->rela[0] = (const ElfW(Rela) *)rela;
    v->rela_count[0] = relasz / sizeof(ElfW(Rela));
  }
  /* x86_64 and aarch64 use RELA for the PLT too; a REL PLT is not ours. */
  if (jmprel != 0 && pltrel == DT_RELA) {
    v->rela[1] = (const ElfW(Rela) *)jmprel;
    v->rela_count[1] = pltrelsz / sizeof(ElfW(Rela));
  }
}

/* Calls fn(view, slot, name index, arg) for each JUMP_SLOT/GLOB_DAT slot
 * of the object whose symbol is an installed name (names = 1) or is sym
 * (names = 0); stops when fn returns nonzero and returns that. */
typedef int reloc_slot_fn_t(const reloc_view_t *v, void **slot, unsigned idx, void *arg);

PH_STARTUP static int reloc_view_each(const reloc_view_t *v, const char *sym, reloc_slot_fn_t *fn, void *arg)
{
#if RELOC_SUPPORTED
  for (int t = 0; t < 2; t++) {
    const ElfW(Rela) *r = v->rela[t];
    for (size_t i = 0; i < v->rela_count[t]; i++) {
      unsigned long type = RELOC_R_TYPE(r[i].r_info);
      if (type != RELOC_TYPE_JUMP_SLOT && type != RELOC_TYPE_GLOB_DAT)
        continue;
      size_t si = RELOC_R_SYM(r[i].r_info);
      if (si == 0)
        continue;
      const char *name = v->strtab + v->symtab[si].st_name;
      unsigned idx = 0;
      if (sym == NULL) {
        if (!reloc_maybe(name))
          continue;
        idx = reloc_name_find(name, reloc_hash(name));
        if (idx == RELOC_NO_NAME)
          continue;
      } else if (strcmp(name, sym) != 0) {
        continue;
      }
      int rc = fn(v, (void **)(v->base + r[i].r_offset), idx, arg);
      if (rc != 0)
        return rc;
    }
  }
#else
  (void)v; (void)sym; (void)fn; (void)arg;
#endif
  return 0;
}

/* ---- the pass ------------------------------------------------------------- */

typedef struct reloc_pass_s {
  reloc_pass_mode_t mode;
  unsigned long pass_no;
  int trust;                  /* 0: an unload happened since the last pass */
  unsigned long long subs;
  int subs_set;
  size_t obj_idx;             /* object being patched */
  int self;                   /* it is pinheap's own object */
  size_t first_new;           /* its first new record */
  int unrelocated;
  int need_relro;
  int deferred;               /* a slot waits for its original */
} reloc_pass_t;

PH_STARTUP static int reloc_find_object(uintptr_t base, const void *phdr)
{
  for (size_t i = 0; i < reloc_nobjects; i++)
    if (reloc_objects[i].live && reloc_objects[i].base == base && reloc_objects[i].phdr == phdr)
      return (int)i;
  return -1;
}

static void reloc_drop_records(size_t obj_idx, int only_stale)
{
  size_t w = 0;
  for (size_t r = 0; r < reloc_nslots; r++) {
    reloc_slot_t *s = &reloc_slots[r];
    int drop = 0;
    if (s->obj_idx == obj_idx) {
      if (!only_stale)
        drop = 1;
      else if (__atomic_load_n(s->slot, __ATOMIC_RELAXED) != reloc_names[s->name_idx].replacement)
        drop = 1;      /* rewritten by someone else, or a new object at the old address */
    }
    if (!drop)
      reloc_slots[w++] = *s;
  }
  reloc_nslots = w;
}

PH_STARTUP static int reloc_recorded(size_t obj_idx, void **slot)
{
  for (size_t r = 0; r < reloc_nslots; r++)
    if (reloc_slots[r].obj_idx == obj_idx && reloc_slots[r].slot == slot)
      return 1;
  return 0;
}

/* First step over an object's slots: records what must be written. */
PH_STARTUP static int reloc_collect_slot(const reloc_view_t *v, void **slot, unsigned idx, void *arg)
{
  reloc_pass_t *p = arg;
  void *val = __atomic_load_n(slot, __ATOMIC_RELAXED);
  void *repl = reloc_names[idx].replacement;

  if (val == NULL)
    return 0;                  /* weak undefined: nothing to redirect */
  if (p->self && !reloc_names[idx].self_ok)
    return 0;                  /* pinheap's own calls keep the original */
  if (v->base != 0 && (uintptr_t)val < v->link_hi) {
    p->unrelocated = 1;        /* still a link-time value: ld.so is not done */
    return 1;
  }
  if (val == repl)
    return 0;                  /* ours already, or bound to it by interposition */
  if (reloc_objects[p->obj_idx].gen != 0 && reloc_recorded(p->obj_idx, slot))
    return 0;
  /* The original for callers: not a lazy-binding stub of this object
   * (calling it would resolve and overwrite this slot).  If every value
   * seen so far is a stub, the slot is left for a pass made after the
   * original is found with dlsym (reloc_originals_finish), so that no
   * call ever reaches the replacement before its original is known. */
  reloc_entry_t *e = reloc_names[idx].entry;
  if (__atomic_load_n(&e->original, __ATOMIC_ACQUIRE) == NULL) {
    if ((uintptr_t)val >= v->lo && (uintptr_t)val < v->hi) {
      reloc_names[idx].want_original = 1;
      reloc_want_originals = 1;
      p->deferred = 1;
      return 0;
    }
    __atomic_store_n(&e->original, val, __ATOMIC_RELEASE);
  }
  if (reloc_nslots == RELOC_MAX_SLOTS) {
    reloc_overflow("RELOC_MAX_SLOTS", RELOC_MAX_SLOTS);
    return 1;
  }
  reloc_slot_t *s = &reloc_slots[reloc_nslots++];
  s->slot = slot;
  s->orig = val;
  s->name_idx = (uint16_t)idx;
  s->obj_idx = (uint16_t)p->obj_idx;
  if ((uintptr_t)slot >= v->relro_lo && (uintptr_t)slot < v->relro_hi)
    p->need_relro = 1;
  return 0;
}

PH_STARTUP static int reloc_relro_set(uintptr_t lo, uintptr_t hi, int prot)
{
  if (mprotect((void *)lo, hi - lo, prot) == 0)
    return 0;
  reloc_stats.mprotect_failures++;
  char a[24], b[24], e[24];
  ph_warn("relocation patcher: mprotect(", ph_fmt_hex(a, lo), ", ", ph_fmt_dec(b, hi - lo),
          prot & PROT_WRITE ? ", read|write)" : ", read)", " failed with errno ",
          ph_fmt_dec(e, (uint64_t)errno), prot & PROT_WRITE ? "; the object stays unpatched" : "", NULL);
  return -1;
}

PH_STARTUP static void reloc_patch_object(const reloc_view_t *v, reloc_pass_t *p)
{
  p->first_new = reloc_nslots;
  p->unrelocated = 0;
  p->need_relro = 0;
  p->deferred = 0;
  reloc_view_each(v, NULL, reloc_collect_slot, p);
  if (p->unrelocated) {
    reloc_nslots = p->first_new;
    reloc_stats.skipped_unrelocated++;
    return;                    /* gen stays: the next pass tries again */
  }
  if (p->need_relro && reloc_relro_set(v->relro_lo, v->relro_hi, PROT_READ | PROT_WRITE) != 0) {
    reloc_nslots = p->first_new;
    return;
  }
  for (size_t r = p->first_new; r < reloc_nslots; r++)
    __atomic_store_n(reloc_slots[r].slot, reloc_names[reloc_slots[r].name_idx].replacement,
                     __ATOMIC_RELEASE);
  if (p->need_relro)
    reloc_relro_set(v->relro_lo, v->relro_hi, PROT_READ);
  if (!reloc_overflowed && !p->deferred)
    reloc_objects[p->obj_idx].gen = reloc_gen;
}

PH_STARTUP static int reloc_is_self(const struct dl_phdr_info *info)
{
  return reloc_in_segment(info, (uintptr_t)(void *)&reloc_install);
}

PH_STARTUP static int reloc_is_vdso(const struct dl_phdr_info *info)
{
  unsigned long vdso = getauxval(AT_SYSINFO_EHDR);
  return vdso != 0 && reloc_in_segment(info, vdso);
}

PH_STARTUP static int reloc_pass_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  reloc_pass_t *p = arg;
  (void)size;

  if (!p->subs_set) {
    p->subs = info->dlpi_subs;
    p->subs_set = 1;
    p->trust = reloc_subs_known && info->dlpi_subs == reloc_last_subs;
  }
  reloc_stats.objects_seen++;
  p->self = reloc_is_self(info);
  if (p->self && reloc_self_names == 0) {
    reloc_stats.skipped_self = 1;
    return 0;
  }
  if (reloc_is_vdso(info)) {
    reloc_stats.skipped_vdso = 1;
    return 0;
  }
  int oi = reloc_find_object(info->dlpi_addr, info->dlpi_phdr);
  if (oi >= 0) {
    reloc_objects[oi].seen = p->pass_no;
    if (!p->trust) {
      /* Maybe not the object recorded at this address: keep only the
       * records whose slot still holds the replacement, walk it again. */
      reloc_drop_records((size_t)oi, 1);
      reloc_objects[oi].gen = 0;
    }
  }
  if (p->mode == RELOC_PASS_SWEEP)
    return 0;
  if (oi >= 0 && reloc_objects[oi].gen == reloc_gen)
    return 0;

  reloc_view_t v;
  reloc_view_make(info, &v);
  if (!v.has_dynamic)
    return 0;
  if (oi < 0) {
    size_t i = 0;
    while (i < reloc_nobjects && reloc_objects[i].live)
      i++;
    if (i == RELOC_MAX_OBJECTS) {
      reloc_overflow("RELOC_MAX_OBJECTS", RELOC_MAX_OBJECTS);
      return 0;
    }
    if (i == reloc_nobjects)
      reloc_nobjects++;
    reloc_object_t *o = &reloc_objects[i];
    o->base = info->dlpi_addr;
    o->phdr = info->dlpi_phdr;
    o->gen = 0;
    o->seen = p->pass_no;
    o->live = 1;
    oi = (int)i;
  }
  reloc_objects[oi].relro_lo = v.relro_lo;
  reloc_objects[oi].relro_hi = v.relro_hi;
  p->obj_idx = (size_t)oi;
  reloc_patch_object(&v, p);
  return 0;
}

/* Recomputes every entry's counters and the totals from the records. */
PH_STARTUP static void reloc_counts_update(void)
{
  memset(reloc_scratch.obj_bits, 0, sizeof(reloc_scratch.obj_bits[0]) * reloc_nnames);
  for (size_t i = 0; i < reloc_nnames; i++) {
    reloc_names[i].entry->slots = 0;
    reloc_names[i].entry->objects = 0;
  }
  uint64_t any[RELOC_MAX_OBJECTS / 64] = { 0 };
  for (size_t r = 0; r < reloc_nslots; r++) {
    const reloc_slot_t *s = &reloc_slots[r];
    reloc_entry_t *e = reloc_names[s->name_idx].entry;
    uint64_t bit = 1ull << (s->obj_idx % 64);
    e->slots++;
    if (!(reloc_scratch.obj_bits[s->name_idx][s->obj_idx / 64] & bit)) {
      reloc_scratch.obj_bits[s->name_idx][s->obj_idx / 64] |= bit;
      e->objects++;
    }
    any[s->obj_idx / 64] |= bit;
  }
  unsigned n = 0;
  for (size_t i = 0; i < RELOC_MAX_OBJECTS / 64; i++)
    n += (unsigned)__builtin_popcountll(any[i]);
  reloc_stats.objects_patched = n;
  reloc_stats.slots = (unsigned)reloc_nslots;
}

/* One pass over the loaded objects; then objects no longer reported are
 * forgotten.  Caller holds reloc_mutex. */
PH_STARTUP static void reloc_pass_run(reloc_pass_mode_t mode)
{
  reloc_pass_t p;
  memset(&p, 0, sizeof(p));
  p.mode = mode;
  p.pass_no = ++reloc_stats.passes;
  reloc_stats.objects_seen = 0;
  dl_iterate_phdr(reloc_pass_cb, &p);
  if (p.subs_set) {
    reloc_last_subs = p.subs;
    reloc_subs_known = 1;
  }
  for (size_t i = 0; i < reloc_nobjects; i++) {
    if (reloc_objects[i].live && reloc_objects[i].seen != p.pass_no) {
      reloc_drop_records(i, 0);
      reloc_objects[i].live = 0;
    }
  }
  while (reloc_nobjects > 0 && !reloc_objects[reloc_nobjects - 1].live)
    reloc_nobjects--;
  reloc_counts_update();
}

/* Names whose slots were all lazy-binding stubs: the original from the
 * dynamic linker, then one more pass to patch the slots left waiting.
 * Called without reloc_mutex (dlsym takes ld.so's lock, which a dlopen in
 * progress holds while its constructors install). */
PH_STARTUP static void reloc_originals_finish(void)
{
  reloc_entry_t *want[RELOC_MAX_NAMES];
  size_t nwant = 0;

  pthread_mutex_lock(&reloc_mutex);
  if (reloc_want_originals) {
    for (size_t i = 0; i < reloc_nnames; i++) {
      if (reloc_names[i].want_original)
        want[nwant++] = reloc_names[i].entry;
      reloc_names[i].want_original = 0;
    }
    reloc_want_originals = 0;
  }
  pthread_mutex_unlock(&reloc_mutex);
  if (nwant == 0)
    return;
  for (size_t i = 0; i < nwant; i++) {
    reloc_entry_t *e = want[i];
    void *f = dlsym(RTLD_NEXT, e->name);
    if (f == NULL || f == e->replacement || f == e->definition)
      f = dlsym(RTLD_DEFAULT, e->name);
    if (f == NULL || f == e->replacement || f == e->definition) {
      ph_warn("relocation patcher: no original found for '", e->name,
              "' (only lazy-binding stubs, and dlsym does not know it); its slots stay unpatched", NULL);
      continue;
    }
    void *expected = NULL;
    __atomic_compare_exchange_n(&e->original, &expected, f, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  pthread_mutex_lock(&reloc_mutex);
  if (reloc_ntables > 0)
    reloc_pass_run(RELOC_PASS_PATCH);
  reloc_want_originals = 0;     /* what is still unknown stays unpatched */
  for (size_t i = 0; i < reloc_nnames; i++)
    reloc_names[i].want_original = 0;
  pthread_mutex_unlock(&reloc_mutex);
}

/* ---- the wrappers of loads and unloads -------------------------------------- */

static void reloc_after_load(void)
{
  pthread_mutex_lock(&reloc_mutex);
  int active = reloc_ntables > 0;
  if (active)
    reloc_pass_run(RELOC_PASS_PATCH);
  pthread_mutex_unlock(&reloc_mutex);
  if (active)
    reloc_originals_finish();
}

/* feeds.c, in the archive's replacement layer (absent from builds of the
 * core sources alone): an object just loaded may be UCX's libucm or Open
 * MPI's libopen-pal. */
extern void feeds_attach(void) __attribute__((weak));

static void *reloc_dlopen(const char *file, int mode)
{
  void *h = dlopen(file, mode);
  if (h != NULL) {
    reloc_after_load();
    if (feeds_attach != NULL)
      feeds_attach();
  }
  return h;
}

static void *reloc_dlmopen(Lmid_t lmid, const char *file, int mode)
{
  void *h = dlmopen(lmid, file, mode);
  if (h != NULL)
    reloc_after_load();
  return h;
}

/* What dlclose unloads, ld.so unmaps with its own munmap, which no
 * relocation reaches: the PT_LOAD ranges of every object are noted before
 * the call, and those of the objects gone after it are reported as
 * VM_UNMAPPED (after the fact: the earliest point pinheap can know).  The
 * note is a static table under a lock taken with trylock (a dlclose from a
 * constructor inside another thread's dlopen must not wait for this one);
 * on contention, or nested on this thread, a smaller one on the stack. */
typedef struct reloc_range_s {
  uintptr_t base, lo, hi;
} reloc_range_t;

typedef struct reloc_note_s {
  reloc_range_t *r;
  size_t n, cap;
  unsigned long long subs;
  int overflow;
} reloc_note_t;

/* Fork: only ever tried (trylock), so nothing waits on it; a child forked
 * while another thread held it makes it new (reloc_fork_child), or it
 * would note with the small table for ever. */
PH_HOT_DATA static pthread_mutex_t reloc_note_lock = PTHREAD_MUTEX_INITIALIZER;
/* events.c; weak: the patcher's test fixture builds reloc.c without it */
extern void events_vm_unmapped(void *addr, size_t len, int source) __attribute__((weak));
PH_COLD_BSS static reloc_range_t reloc_note_big[1024];

static int reloc_note_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  reloc_note_t *nt = data;
  (void)size;
  nt->subs = info->dlpi_subs;
  if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0')
    return 0;                   /* the program itself, the vDSO: never unloaded */
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || ph->p_memsz == 0)
      continue;
    if (nt->n == nt->cap) {
      nt->overflow = 1;
      return 1;
    }
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    nt->r[nt->n].base = info->dlpi_addr;
    nt->r[nt->n].lo = lo & ~(page - 1);
    nt->r[nt->n].hi = (lo + ph->p_memsz + page - 1) & ~(page - 1);
    nt->n++;
  }
  return 0;
}

/* After the unload: strike from the note every range still loaded. */
static int reloc_unnote_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  reloc_note_t *nt = data;
  (void)size;
  nt->subs = info->dlpi_subs;
  for (size_t k = 0; k < nt->n; k++)
    if (nt->r[k].base == info->dlpi_addr)
      nt->r[k].hi = nt->r[k].lo;   /* still there */
  return 0;
}

static int reloc_dlclose(void *handle)
{
  static __thread int depth __attribute__((tls_model("initial-exec")));
  reloc_range_t small[64];
  reloc_note_t nt = { small, 64, 0, 0, 0 };
  int locked = depth == 0 && pthread_mutex_trylock(&reloc_note_lock) == 0;
  if (locked) {
    nt.r = reloc_note_big;
    nt.cap = sizeof(reloc_note_big) / sizeof(reloc_note_big[0]);
  }
  dl_iterate_phdr(reloc_note_cb, &nt);
  unsigned long long subs = nt.subs;
  depth++;
  int rc = dlclose(handle);
  depth--;
  pthread_mutex_lock(&reloc_mutex);
  if (reloc_ntables > 0)
    reloc_pass_run(RELOC_PASS_SWEEP);
  pthread_mutex_unlock(&reloc_mutex);
  dl_iterate_phdr(reloc_unnote_cb, &nt);
  if (nt.subs != subs && events_vm_unmapped != NULL) {     /* something was unloaded */
    for (size_t k = 0; k < nt.n; k++)
      if (nt.r[k].hi > nt.r[k].lo)
        events_vm_unmapped((void *)nt.r[k].lo, nt.r[k].hi - nt.r[k].lo, PINHEAP_EVENT_SOURCE_APP);
  }
  if (locked)
    pthread_mutex_unlock(&reloc_note_lock);
  return rc;
}

/* ---- definitions: the defining object's symbol table ---------------------- */

/* A rewritten definition: the symbol table entry, its old value, and the
 * PT_LOAD segment holding it (writes are batched per segment). */
typedef struct reloc_def_s {
  ElfW(Sym) *sym;
  ElfW(Addr) old_value;
  ElfW(Addr) new_value;
  uintptr_t seg_lo;           /* the segment's first page */
  int prot;                   /* the segment's protection */
} reloc_def_t;

PH_COLD_BSS static reloc_def_t reloc_defs[RELOC_MAX_NAMES];
PH_HOT_DATA static size_t reloc_ndefs;

/* The definitions wanted: what the process resolves each name to. */
typedef struct reloc_def_find_s {
  size_t n, left;             /* (before the arrays: with their first entries) */
  const char *name[RELOC_MAX_NAMES];
  uintptr_t addr[RELOC_MAX_NAMES];
  uintptr_t replacement[RELOC_MAX_NAMES];
  reloc_entry_t *entry[RELOC_MAX_NAMES];
  unsigned char self[RELOC_MAX_NAMES];  /* defined by pinheap's own object */
  reloc_def_t def[RELOC_MAX_NAMES];   /* def[i].sym NULL: not found */
} reloc_def_find_t;

/* Calls fn(v, sym, arg) for each symbol of v named name that v defines,
 * found through the object's hash table (GNU, else SysV); a walk of
 * .dynsym only for an object with neither.  Stops when fn returns nonzero
 * and returns that symbol. */
typedef int reloc_sym_fn_t(const reloc_view_t *v, const ElfW(Sym) *sym, void *arg);

PH_STARTUP static ElfW(Sym) *reloc_sym_each(const reloc_view_t *v, const char *name,
                                            reloc_sym_fn_t *fn, void *arg)
{
  ElfW(Sym) *syms = (ElfW(Sym) *)v->symtab;
#define RELOC_SYM_IS(i)                                                     \
  (syms[i].st_shndx != SHN_UNDEF && syms[i].st_value != 0 &&                \
   strcmp(v->strtab + syms[i].st_name, name) == 0 && fn(v, &syms[i], arg))
  if (v->gnu_hash != NULL) {
    const uint32_t *h = v->gnu_hash;
    uint32_t nbuckets = h[0], symoffset = h[1], bloom_words = h[2];
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(h + 4) + bloom_words);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t hash = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c != '\0'; c++)
      hash = hash * 33 + *c;
    if (nbuckets == 0)
      return NULL;
    uint32_t i = buckets[hash % nbuckets];
    if (i < symoffset)
      return NULL;
    for (;; i++) {
      uint32_t ch = chain[i - symoffset];
      if ((ch | 1) == (hash | 1) && RELOC_SYM_IS(i))
        return &syms[i];
      if (ch & 1)
        return NULL;
    }
  }
  if (v->sysv_hash != NULL) {
    uint32_t nbucket = v->sysv_hash[0], nchain = v->sysv_hash[1], hash = 0;
    const uint32_t *bucket = v->sysv_hash + 2, *chain = bucket + nbucket;
    for (const unsigned char *c = (const unsigned char *)name; *c != '\0'; c++) {
      hash = (hash << 4) + *c;
      uint32_t g = hash & 0xf0000000u;
      hash = (hash ^ (g >> 24)) & ~g;
    }
    if (nbucket == 0)
      return NULL;
    for (uint32_t i = bucket[hash % nbucket], k = 0; i != STN_UNDEF && i < nchain && k < nchain;
         i = chain[i], k++)
      if (RELOC_SYM_IS(i))
        return &syms[i];
    return NULL;
  }
  /* .dynstr follows .dynsym in every layout ld produces: the count */
  if ((uintptr_t)v->strtab <= (uintptr_t)v->symtab)
    return NULL;
  size_t nsyms = ((uintptr_t)v->strtab - (uintptr_t)v->symtab) / sizeof(ElfW(Sym));
  for (size_t i = 1; i < nsyms && i < (1u << 20); i++)
    if (RELOC_SYM_IS(i))
      return &syms[i];
  return NULL;
#undef RELOC_SYM_IS
}

/* Versioned names (memcpy@GLIBC_2.2.5 beside memcpy@@GLIBC_2.14) share a
 * name: the value tells them apart. */
PH_STARTUP static int reloc_sym_at(const reloc_view_t *v, const ElfW(Sym) *sym, void *arg)
{
  return v->base + sym->st_value == *(const uintptr_t *)arg;
}

/* The symbol of v named name whose value is addr. */
static ElfW(Sym) *reloc_sym_lookup(const reloc_view_t *v, const char *name, uintptr_t addr)
{
  return reloc_sym_each(v, name, reloc_sym_at, &addr);
}

/* ---- definitions by name (no dlsym) --------------------------------------- */

/* dlsym's answer for a name with no version, read from one object's table:
 * the one definition, of the base or a default version.  Anything else
 * (a second definition, an IFUNC, whose value is its resolver's) is left
 * to dlsym. */
typedef struct reloc_named_s {
  const ElfW(Sym) *found;
  int count, plain;
} reloc_named_t;

PH_STARTUP static int reloc_named_note(const reloc_view_t *v, const ElfW(Sym) *sym, void *arg)
{
  reloc_named_t *nm = arg;
  nm->count++;
  nm->found = sym;
  nm->plain = ELF64_ST_TYPE(sym->st_info) != STT_GNU_IFUNC &&
              (v->versym == NULL || !(v->versym[sym - v->symtab] & 0x8000));
  return 0;                    /* every one is counted */
}

typedef struct reloc_named_find_s {
  const char *object;          /* file name prefix, or NULL: every object */
  const char *const *names;
  void **out;
  size_t n;
  int objects, unsure;
} reloc_named_find_t;

PH_STARTUP static int reloc_named_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  reloc_named_find_t *f = arg;
  reloc_view_t v;
  (void)size;
  if (f->object != NULL) {
    const char *name = info->dlpi_name != NULL ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base != NULL ? base + 1 : name;
    if (strncmp(base, f->object, strlen(f->object)) != 0)
      return 0;
  } else if (reloc_is_vdso(info)) {
    return 0;
  }
  f->objects++;
  reloc_view_make(info, &v);
  if (!v.has_dynamic) {
    f->unsure |= f->object != NULL;
    return f->object != NULL;
  }
  for (size_t i = 0; i < f->n; i++) {
    reloc_named_t nm = { NULL, 0, 0 };
    if (f->out[i] != NULL)
      continue;
    reloc_sym_each(&v, f->names[i], reloc_named_note, &nm);
    if (nm.count == 1 && nm.plain)
      f->out[i] = (void *)(v.base + nm.found->st_value);
    else if (nm.count > 0)
      f->unsure = 1;
  }
  return f->object != NULL;    /* the first object of that name only */
}

PH_STARTUP int reloc_defs_named(const char *object, const char *const *names, void **out, size_t n)
{
  reloc_named_find_t f = { object, names, out, n, 0, 0 };
  for (size_t i = 0; i < n; i++)
    out[i] = NULL;
  dl_iterate_phdr(reloc_named_cb, &f);
  if (f.unsure || (object != NULL && f.objects == 0))
    return -1;
  for (size_t i = 0; i < n; i++)
    if (object != NULL && out[i] == NULL)
      return -1;             /* dlsym would look in its dependencies too */
  return 0;
}

/* One walk of the loaded objects finds every wanted definition. */
PH_STARTUP static int reloc_def_find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  reloc_def_find_t *f = arg;
  reloc_view_t v;
  int viewed = 0;
  (void)size;
  if (reloc_is_vdso(info))
    return 0;
  for (size_t i = 0; i < f->n; i++) {
    if (f->def[i].sym != NULL || !reloc_in_segment(info, f->addr[i]))
      continue;
    f->left--;
    if (reloc_is_self(info)) {
      f->self[i] = 1;           /* pinheap's own definitions stay as they are */
      continue;
    }
    if (!viewed) {
      reloc_view_make(info, &v);
      viewed = 1;
    }
    if (!v.has_dynamic)
      continue;
    ElfW(Sym) *sym = reloc_sym_lookup(&v, f->name[i], f->addr[i]);
    if (sym == NULL || ELF64_ST_TYPE(sym->st_info) != STT_FUNC)
      continue;
    for (ElfW(Half) k = 0; k < info->dlpi_phnum; k++) {
      const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
      uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
      if (ph->p_type == PT_LOAD && (uintptr_t)sym >= lo && (uintptr_t)sym - lo < ph->p_memsz) {
        reloc_def_t *d = &f->def[i];
        d->sym = sym;
        d->old_value = sym->st_value;
        d->seg_lo = lo & ~(reloc_page_size() - 1);
        d->prot = ((ph->p_flags & PF_R) ? PROT_READ : 0) | ((ph->p_flags & PF_W) ? PROT_WRITE : 0) |
                  ((ph->p_flags & PF_X) ? PROT_EXEC : 0);
        /* relative to the object's base, modulo 2^64 as ld.so adds */
        d->new_value = (ElfW(Addr))(f->replacement[i] - (f->addr[i] - sym->st_value));
        break;
      }
    }
  }
  return f->left == 0;
}

/* Writes new (or, restoring, old) values into defs[0..n), one lifting of
 * the protection per run of entries in one segment: the pages between
 * two entries of a segment belong to it, so one mprotect covers them.
 * Entries of a segment that refused write access get sym NULL (patching)
 * or stay as they were (restoring).  reloc_mutex held. */
PH_STARTUP static void reloc_defs_write(reloc_def_t *defs, size_t n, int restore)
{
  uintptr_t pg = reloc_page_size();
  for (size_t i = 0; i < n;) {
    size_t j = i;
    uintptr_t lo = (uintptr_t)defs[i].sym, hi = (uintptr_t)(defs[i].sym + 1);
    while (j < n && defs[j].seg_lo == defs[i].seg_lo) {
      if ((uintptr_t)defs[j].sym < lo)
        lo = (uintptr_t)defs[j].sym;
      if ((uintptr_t)(defs[j].sym + 1) > hi)
        hi = (uintptr_t)(defs[j].sym + 1);
      j++;
    }
    lo &= ~(pg - 1);
    hi = (hi + pg - 1) & ~(pg - 1);
    int prot = defs[i].prot;
    if ((prot & PROT_WRITE) || reloc_relro_set(lo, hi, prot | PROT_WRITE) == 0) {
      for (size_t k = i; k < j; k++) {
        __atomic_store_n(&defs[k].sym->st_value, restore ? defs[k].old_value : defs[k].new_value,
                         __ATOMIC_RELEASE);
      }
      if (!(prot & PROT_WRITE))
        reloc_relro_set(lo, hi, prot);
    } else if (!restore) {
      for (size_t k = i; k < j; k++)
        defs[k].sym = NULL;     /* not written: not to be restored */
    }
    i = j;
  }
}

/* Points the definitions the process resolves table's names to at their
 * replacements: later symbol lookups (objects loaded later, whose
 * constructors run before any wrapper could patch their slots; lazy
 * binding; dlsym) find the replacements.  The lookups run without
 * reloc_mutex (dlsym and dl_iterate_phdr take ld.so's lock); the writes,
 * batched per segment, under it. */
/* Fork: held across dlsym and dl_iterate_phdr (ld.so's lock) with
 * reloc_mutex inside it, so not taken before fork (reloc_prefork would
 * then have to run after it, and handlers run in whatever order they were
 * registered in); it guards only the scratch table, emptied at each use:
 * a child forked while another thread held it makes it new
 * (reloc_fork_child). */
PH_HOT_DATA static pthread_mutex_t reloc_defs_lock = PTHREAD_MUTEX_INITIALIZER;

PH_STARTUP static void reloc_defs_patch(reloc_entry_t *table, size_t n)
{
  PH_COLD_BSS static reloc_def_find_t f;  /* reloc_defs_lock held: too big for a stack */

  pthread_mutex_lock(&reloc_defs_lock);
  f.n = 0;
  for (size_t j = 0; j < n; j++) {
    reloc_entry_t *e = &table[j];
    void *addr = __atomic_load_n(&e->original, __ATOMIC_ACQUIRE);
    if (addr == NULL)
      addr = dlsym(RTLD_DEFAULT, e->name);
    if (addr == NULL || addr == e->replacement || addr == e->definition)
      continue;
    if (f.n == RELOC_MAX_NAMES) {
      pthread_mutex_lock(&reloc_mutex);
      reloc_overflow("RELOC_MAX_NAMES (definitions)", RELOC_MAX_NAMES);
      pthread_mutex_unlock(&reloc_mutex);
      break;
    }
    f.entry[f.n] = e;
    f.name[f.n] = e->name;
    f.replacement[f.n] = (uintptr_t)(e->definition != NULL ? e->definition : e->replacement);
    f.self[f.n] = 0;
    f.addr[f.n] = (uintptr_t)addr;
    f.def[f.n].sym = NULL;
    f.n++;
  }
  f.left = f.n;
  if (f.n > 0)
    dl_iterate_phdr(reloc_def_find_cb, &f);
  /* Slots met later may hold only lazy-binding stubs, and dlsym will then
   * find the replacement: the original is known from here on (unless it is
   * pinheap's own, which is no original). */
  for (size_t i = 0; i < f.n; i++) {
    void *expected = NULL;
    if (!f.self[i])
      __atomic_compare_exchange_n(&f.entry[i]->original, &expected, (void *)f.addr[i], 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }

  pthread_mutex_lock(&reloc_mutex);
  reloc_def_t *found = f.def;
  size_t keep = 0;
  for (size_t i = 0; i < f.n; i++) {
    if (found[i].sym == NULL)
      continue;
    int seen = 0;
    for (size_t k = 0; k < reloc_ndefs && !seen; k++)
      seen = reloc_defs[k].sym == found[i].sym;
    for (size_t k = 0; k < keep && !seen; k++)
      seen = found[k].sym == found[i].sym;
    if (seen)
      continue;
    if (reloc_ndefs + keep == RELOC_MAX_NAMES) {
      reloc_overflow("RELOC_MAX_NAMES (definitions)", RELOC_MAX_NAMES);
      break;
    }
    found[keep++] = found[i];
  }
  /* group by segment: a stable insertion sort, n is small */
  for (size_t i = 1; i < keep; i++)
    for (size_t k = i; k > 0 && found[k - 1].seg_lo > found[k].seg_lo; k--) {
      reloc_def_t t = found[k];
      found[k] = found[k - 1];
      found[k - 1] = t;
    }
  reloc_defs_write(found, keep, 0);
  for (size_t i = 0; i < keep; i++) {
    if (found[i].sym != NULL) {
      reloc_defs[reloc_ndefs++] = found[i];
      reloc_stats.definitions++;
    }
  }
  pthread_mutex_unlock(&reloc_mutex);
  pthread_mutex_unlock(&reloc_defs_lock);
}

/* Puts every rewritten definition back; reloc_mutex held. */
static void reloc_defs_restore(void)
{
  reloc_defs_write(reloc_defs, reloc_ndefs, 1);
  reloc_ndefs = 0;
  reloc_stats.definitions = 0;
}

/* ---- public (internal) entry points ------------------------------------------ */

/* The mutex is held across fork, so that a child forked during another
 * thread's pass finds it free. */
static void reloc_prefork(void) { pthread_mutex_lock(&reloc_mutex); }
static void reloc_postfork(void) { pthread_mutex_unlock(&reloc_mutex); }

void reloc_fork_child(void)
{
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  reloc_note_lock = fresh;
  reloc_defs_lock = fresh;
}

PH_STARTUP int reloc_install(reloc_entry_t *table, size_t n)
{
  return reloc_install_flags(table, n, 0);
}

PH_STARTUP int reloc_install_wrappers(void)
{
#if !RELOC_SUPPORTED
  return ENOSYS;
#else
  pthread_mutex_lock(&reloc_mutex);
  int first = reloc_ntables == 0;
  if (first) {
    reloc_tables[reloc_ntables++] = (reloc_table_t){ reloc_own_table, RELOC_OWN_N };
    reloc_names_add(reloc_own_table, RELOC_OWN_N, 0);
    reloc_pass_run(RELOC_PASS_PATCH);
  }
  pthread_mutex_unlock(&reloc_mutex);
  if (first)
    reloc_originals_finish();
  return 0;
#endif
}

PH_STARTUP int reloc_install_flags(reloc_entry_t *table, size_t n, unsigned flags)
{
  PH_HOT_DATA static int atfork_done;
  if (table == NULL || n == 0)
    return EINVAL;
  for (size_t i = 0; i < n; i++)
    if (table[i].name == NULL || table[i].name[0] == '\0' || table[i].replacement == NULL)
      return EINVAL;
  if ((flags & ~(unsigned)(RELOC_PATCH_SELF | RELOC_PATCH_DEFINITIONS)) != 0)
    return EINVAL;
#if !RELOC_SUPPORTED
  return ENOSYS;
#else
  if (__atomic_exchange_n(&atfork_done, 1, __ATOMIC_ACQ_REL) == 0)
    pthread_atfork(reloc_prefork, reloc_postfork, reloc_postfork);
  pthread_mutex_lock(&reloc_mutex);
  reloc_overflowed = 0;
  if (reloc_ntables == 0) {
    reloc_tables[reloc_ntables++] = (reloc_table_t){ reloc_own_table, RELOC_OWN_N };
    reloc_names_add(reloc_own_table, RELOC_OWN_N, 0);
  }
  size_t i = 0;
  while (i < reloc_ntables && !(reloc_tables[i].table == table && reloc_tables[i].n == n))
    i++;
  if (i == reloc_ntables) {
    if (reloc_ntables == RELOC_MAX_TABLES) {
      reloc_overflow("RELOC_MAX_TABLES", RELOC_MAX_TABLES);
    } else {
      reloc_tables[reloc_ntables++] = (reloc_table_t){ table, n };
      reloc_names_add(table, n, (flags & RELOC_PATCH_SELF) != 0);
      reloc_gen++;
    }
  }
  reloc_pass_run(RELOC_PASS_PATCH);
  int rc = reloc_overflowed ? ENOSPC : 0;
  pthread_mutex_unlock(&reloc_mutex);
  reloc_originals_finish();
  if (flags & RELOC_PATCH_DEFINITIONS)
    reloc_defs_patch(table, n);
  return rc;
#endif
}

int reloc_uninstall(void)
{
  pthread_mutex_lock(&reloc_mutex);
  reloc_overflowed = 0;
  if (reloc_ntables > 0)
    reloc_pass_run(RELOC_PASS_SWEEP);   /* forget unloaded objects first */
  for (size_t oi = 0; oi < reloc_nobjects; oi++) {
    const reloc_object_t *o = &reloc_objects[oi];
    if (!o->live)
      continue;
    int need_relro = 0;
    for (size_t r = 0; r < reloc_nslots; r++) {
      uintptr_t a = (uintptr_t)reloc_slots[r].slot;
      if (reloc_slots[r].obj_idx == oi && a >= o->relro_lo && a < o->relro_hi)
        need_relro = 1;
    }
    if (need_relro && reloc_relro_set(o->relro_lo, o->relro_hi, PROT_READ | PROT_WRITE) != 0)
      continue;
    for (size_t r = 0; r < reloc_nslots; r++) {
      reloc_slot_t *s = &reloc_slots[r];
      void *repl = reloc_names[s->name_idx].replacement;
      if (s->obj_idx == oi)
        __atomic_compare_exchange_n(s->slot, &repl, s->orig, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    }
    if (need_relro)
      reloc_relro_set(o->relro_lo, o->relro_hi, PROT_READ);
  }
  reloc_nslots = 0;
  reloc_defs_restore();
  for (size_t oi = 0; oi < reloc_nobjects; oi++)
    reloc_objects[oi].live = 0;
  reloc_nobjects = 0;
  reloc_counts_update();
  reloc_ntables = 0;
  reloc_nnames = 0;
  reloc_self_names = 0;
  memset(reloc_buckets, 0, sizeof(reloc_buckets));
  memset(reloc_filter, 0, sizeof(reloc_filter));
  reloc_gen++;
  int rc = reloc_overflowed ? ENOSPC : 0;
  pthread_mutex_unlock(&reloc_mutex);
  return rc;
}

int reloc_query(const char *sym, unsigned *objects_p, unsigned *slots_p)
{
  int rc = ENOENT;
  if (sym == NULL)
    return EINVAL;
  pthread_mutex_lock(&reloc_mutex);
  unsigned idx = reloc_name_find(sym, reloc_hash(sym));
  if (idx != RELOC_NO_NAME) {
    if (objects_p != NULL)
      *objects_p = reloc_names[idx].entry->objects;
    if (slots_p != NULL)
      *slots_p = reloc_names[idx].entry->slots;
    rc = 0;
  }
  pthread_mutex_unlock(&reloc_mutex);
  return rc;
}

typedef struct reloc_lookup_s {
  const char *object_substr;
  const char *sym;
  void **slot;
  int done;
} reloc_lookup_t;

static int reloc_lookup_found(const reloc_view_t *v, void **slot, unsigned idx, void *arg)
{
  (void)v; (void)idx;
  ((reloc_lookup_t *)arg)->slot = slot;
  return 1;
}

static int reloc_lookup_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  reloc_lookup_t *l = arg;
  (void)size;
  if (l->object_substr == NULL) {
    l->done = 1;               /* the main program is reported first */
  } else if (info->dlpi_name == NULL || strstr(info->dlpi_name, l->object_substr) == NULL) {
    return 0;
  }
  if (reloc_is_vdso(info))
    return l->done;
  reloc_view_t v;
  reloc_view_make(info, &v);
  if (v.has_dynamic)
    reloc_view_each(&v, l->sym, reloc_lookup_found, l);
  return l->slot != NULL || l->done;
}

void **reloc_lookup_slot_addr(const char *object_substr, const char *sym)
{
  reloc_lookup_t l = { object_substr, sym, NULL, 0 };
  if (sym == NULL)
    return NULL;
  dl_iterate_phdr(reloc_lookup_cb, &l);
  return l.slot;
}

void *reloc_lookup_slot(const char *object_substr, const char *sym)
{
  void **slot = reloc_lookup_slot_addr(object_substr, sym);
  return slot != NULL ? __atomic_load_n(slot, __ATOMIC_ACQUIRE) : NULL;
}

void reloc_stats_get(reloc_stats_t *out_p)
{
  pthread_mutex_lock(&reloc_mutex);
  *out_p = reloc_stats;
  pthread_mutex_unlock(&reloc_mutex);
}

void *reloc_patched_slot(const char *sym)
{
  void *val = NULL;
  if (sym == NULL)
    return NULL;
  pthread_mutex_lock(&reloc_mutex);
  unsigned idx = reloc_name_find(sym, reloc_hash(sym));
  for (size_t r = 0; idx != RELOC_NO_NAME && r < reloc_nslots; r++) {
    if (reloc_slots[r].name_idx == idx) {
      val = __atomic_load_n(reloc_slots[r].slot, __ATOMIC_ACQUIRE);
      break;
    }
  }
  pthread_mutex_unlock(&reloc_mutex);
  return val;
}

/* ---- loaded at start-up? ----------------------------------------------------- */

PH_STARTUP static int reloc_startup_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  reloc_startup_t *st = arg;
  (void)size;
  if (st->n == RELOC_MAX_OBJECTS)
    return 1;
  reloc_startup_obj_t *o = &st->obj[st->n];
  memset(o, 0, sizeof(*o));
  o->name = info->dlpi_name != NULL ? info->dlpi_name : "";
  o->holds = reloc_in_segment(info, st->addr);
  /* The main program comes first, with an empty name. */
  o->initial = st->n == 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      o->dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  for (const ElfW(Dyn) *d = o->dyn; d != NULL && d->d_tag != DT_NULL; d++)
    if (d->d_tag == DT_STRTAB)
      o->strtab = (const char *)reloc_dyn_ptr(info->dlpi_addr, d->d_un.d_ptr);
  st->n++;
  return 0;
}

/* Does the loaded object called path answer to the name `want` (a DT_NEEDED
 * entry or an LD_PRELOAD word): the same path, or the same file name when
 * want has no slash (ld.so records the directory it found it in). */
PH_STARTUP static int reloc_name_is(const char *path, const char *want, size_t want_len)
{
  if (want_len == 0 || path[0] == '\0')
    return 0;
  if (memchr(want, '/', want_len) == NULL) {
    const char *slash = strrchr(path, '/');
    path = slash != NULL ? slash + 1 : path;
  }
  return strlen(path) == want_len && memcmp(path, want, want_len) == 0;
}

PH_STARTUP static int reloc_mark(reloc_startup_t *st, const char *want, size_t want_len)
{
  int changed = 0;
  for (size_t i = 0; i < st->n; i++) {
    if (!st->obj[i].initial && reloc_name_is(st->obj[i].name, want, want_len)) {
      st->obj[i].initial = 1;
      changed = 1;
    }
  }
  return changed;
}

PH_STARTUP int reloc_loaded_at_startup(const void *addr)
{
  reloc_startup_t *st = &reloc_scratch.st;   /* under reloc_mutex */
  int rc = -1;

  pthread_mutex_lock(&reloc_mutex);
  st->n = 0;
  st->addr = (uintptr_t)addr;
  dl_iterate_phdr(reloc_startup_cb, st);
  /* Preloaded objects are loaded at start-up too (LD_PRELOAD: words
   * separated by spaces or colons). */
  const char *pre = startup_env("LD_PRELOAD");
  while (pre != NULL && *pre != '\0') {
    size_t len = startup_span(pre, " :", 0);
    reloc_mark(st, pre, len);
    pre += len;
    pre += startup_span(pre, " :", 1);
  }
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t i = 0; i < st->n; i++) {
      const reloc_startup_obj_t *o = &st->obj[i];
      if (!o->initial || o->dyn == NULL || o->strtab == NULL)
        continue;
      for (const ElfW(Dyn) *d = o->dyn; d->d_tag != DT_NULL; d++) {
        if (d->d_tag != DT_NEEDED)
          continue;
        const char *want = o->strtab + d->d_un.d_val;
        changed |= reloc_mark(st, want, strlen(want));
      }
    }
  }
  for (size_t i = 0; i < st->n; i++)
    if (st->obj[i].holds)
      rc = st->obj[i].initial;
  pthread_mutex_unlock(&reloc_mutex);
  return rc;
}
