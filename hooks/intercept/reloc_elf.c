/*
 * reloc_elf.c -- the relocation patcher's reading of ELF: one loaded
 * object's view (its extent, RELRO range, dynamic section, relocation and
 * hash tables), and the definitions in a defining object's dynamic symbol
 * table, rewritten to the replacements so that objects loaded later bind
 * to them (RELOC_PATCH_DEFINITIONS), and found by name without dlsym
 * (reloc_defs_named).  Main entry points: reloc_view_make() and
 * reloc_defs_patch().  The patcher's tables are reloc.c's; the contract is
 * in reloc.h.
 */
#include "hooks/intercept/reloc_impl.h"

#include "pinheap.h"
#include "allocator/base/startup.h"

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

/* ---- one object's ELF view -------------------------------------------------- */

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
PH_STARTUP uintptr_t reloc_dyn_ptr(uintptr_t base, ElfW(Addr) p)
{
  return p < base ? base + p : p;
}

PH_STARTUP int reloc_in_segment(const struct dl_phdr_info *info, uintptr_t addr)
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

PH_STARTUP void reloc_view_make(const struct dl_phdr_info *info, reloc_view_t *v)
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

  size_t relasz = 0, relaent = sizeof(ElfW(Rela)), pltrelsz = 0, relacount = 0;
  uintptr_t rela = 0, jmprel = 0;
  long pltrel = DT_RELA;
  for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
    case DT_SYMTAB: v->symtab = (const ElfW(Sym) *)reloc_dyn_ptr(v->base, d->d_un.d_ptr); break;
    case DT_STRTAB: v->strtab = (const char *)reloc_dyn_ptr(v->base, d->d_un.d_ptr); break;
    case DT_RELA: rela = reloc_dyn_ptr(v->base, d->d_un.d_ptr); break;
    case DT_RELASZ: relasz = d->d_un.d_val; break;
    case DT_RELAENT: relaent = d->d_un.d_val; break;
    case DT_RELACOUNT: relacount = d->d_un.d_val; break;
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
    /* DT_RELACOUNT: that many relative relocations come first (ld.so
     * relies on it too); none of them names a symbol, so they are skipped
     * (most of a shared library's relocations: 465 of 527 in the fixture
     * core library) */
    size_t count = relasz / sizeof(ElfW(Rela));
    if (relacount > count)
      relacount = 0;
    v->rela[0] = (const ElfW(Rela) *)rela + relacount;
    v->rela_count[0] = count - relacount;
  }
  /* x86_64 and aarch64 use RELA for the PLT too; a REL PLT is not ours. */
  if (jmprel != 0 && pltrel == DT_RELA) {
    v->rela[1] = (const ElfW(Rela) *)jmprel;
    v->rela_count[1] = pltrelsz / sizeof(ElfW(Rela));
  }
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
  const char *name;
  uintptr_t base;             /* the defining object's load bias */
} reloc_def_t;

PH_COLD_BSS static reloc_def_t reloc_defs[RELOC_MAX_NAMES];
PH_HOT_DATA static size_t reloc_ndefs;
/* Definitions already found where the process resolves their names (by
 * reloc_startup_resolve, in objects loaded at start-up, never unloaded),
 * for the next reloc_defs_patch to take instead of walking the objects:
 * reloc_defs[reloc_ndefs .. reloc_ndefs + reloc_nhints), the entries
 * that patch fills next (no page of their own).  reloc_mutex held. */
PH_HOT_DATA static size_t reloc_nhints;

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

PH_STARTUP uint32_t reloc_gnu_hash(const char *name)
{
  uint32_t hash = 5381;
  for (const unsigned char *c = (const unsigned char *)name; *c != '\0'; c++)
    hash = hash * 33 + *c;
  return hash;
}

/* (hash: reloc_gnu_hash(name), computed once for the objects of a walk;
 * all: every entry of that name dlsym might take too, not only the
 * definitions with a value -- an undefined one with a value (a non-PIE
 * program's canonical PLT entry), an absolute or a TLS one) */
PH_STARTUP PH_NOINLINE static ElfW(Sym) *reloc_sym_each_h(const reloc_view_t *v, const char *name,
                                                         uint32_t hash, int all,
                                                         reloc_sym_fn_t *fn, void *arg)
{
  ElfW(Sym) *syms = (ElfW(Sym) *)v->symtab;
#define RELOC_SYM_IS(i)                                                              \
  ((all ? syms[i].st_value != 0 || syms[i].st_shndx == SHN_ABS ||                    \
              ELF64_ST_TYPE(syms[i].st_info) == STT_TLS                              \
        : syms[i].st_shndx != SHN_UNDEF && syms[i].st_value != 0) &&                 \
   reloc_streq(v->strtab + syms[i].st_name, name) && fn(v, &syms[i], arg))
  if (v->gnu_hash != NULL) {
    const uint32_t *h = v->gnu_hash;
    uint32_t nbuckets = h[0], symoffset = h[1], bloom_words = h[2];
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(h + 4) + bloom_words);
    const uint32_t *chain = buckets + nbuckets;
    /* the Bloom filter first, as ld.so does: most objects a walk meets
     * define none of the names */
    if (nbuckets == 0 || bloom_words == 0 || !reloc_bloom_may(v, hash))
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
    uint32_t nbucket = v->sysv_hash[0], nchain = v->sysv_hash[1], sh = 0;
    const uint32_t *bucket = v->sysv_hash + 2, *chain = bucket + nbucket;
    for (const unsigned char *c = (const unsigned char *)name; *c != '\0'; c++) {
      sh = (sh << 4) + *c;
      uint32_t g = sh & 0xf0000000u;
      sh = (sh ^ (g >> 24)) & ~g;
    }
    if (nbucket == 0)
      return NULL;
    for (uint32_t i = bucket[sh % nbucket], k = 0; i != STN_UNDEF && i < nchain && k < nchain;
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

PH_STARTUP static ElfW(Sym) *reloc_sym_each(const reloc_view_t *v, const char *name,
                                            reloc_sym_fn_t *fn, void *arg)
{
  return reloc_sym_each_h(v, name, v->gnu_hash != NULL ? reloc_gnu_hash(name) : 0, 0, fn, arg);
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
  unsigned type = ELF64_ST_TYPE(sym->st_info), bind = ELF64_ST_BIND(sym->st_info);
  /* a function or an object defined here, bound globally, of the base or
   * default version: dlsym returns base + value (not an IFUNC, whose value
   * is its resolver's; not TLS; not what ld.so skips or treats apart) */
  nm->plain = sym->st_shndx != SHN_UNDEF && sym->st_shndx != SHN_ABS && sym->st_value != 0 &&
              (type == STT_FUNC || type == STT_OBJECT || type == STT_NOTYPE) &&
              (bind == STB_GLOBAL || bind == STB_WEAK) &&
              (v->versym == NULL || !(v->versym[sym - v->symtab] & 0x8000));
  return 0;                    /* every one is counted */
}

typedef struct reloc_named_find_s {
  const char *object;          /* file name prefix, or NULL: every object */
  const char *const *names;
  void **out;
  size_t n;
  int objects, unsure;
  uint32_t hash[RELOC_MAX_NAMES];   /* reloc_gnu_hash(names[i]), once per walk */
} reloc_named_find_t;

PH_STARTUP int reloc_sym_default(const reloc_view_t *v, const char *name, uint32_t hash, void **out,
                                 const ElfW(Sym) **sym_p)
{
  reloc_named_t nm = { NULL, 0, 0 };
  reloc_sym_each_h(v, name, hash, 1, reloc_named_note, &nm);
  if (nm.count == 0)
    return 0;
  if (nm.count != 1 || !nm.plain)
    return -1;
  *out = (void *)(v->base + nm.found->st_value);
  if (sym_p != NULL)
    *sym_p = nm.found;
  return 1;
}

PH_STARTUP static int reloc_named_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  reloc_named_find_t *f = arg;
  reloc_view_t v;
  (void)size;
  if (f->object != NULL) {
    if (!reloc_file_begins(info->dlpi_name != NULL ? info->dlpi_name : "", f->object))
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
    uint32_t h = i < RELOC_MAX_NAMES ? f->hash[i] : reloc_gnu_hash(f->names[i]);
    if (f->out[i] == NULL && reloc_bloom_may(&v, h) &&
        reloc_sym_default(&v, f->names[i], h, &f->out[i], NULL) < 0)
      f->unsure = 1;
  }
  return f->object != NULL;    /* the first object of that name only */
}

PH_STARTUP int reloc_defs_named(const char *object, const char *const *names, void **out, size_t n)
{
  reloc_named_find_t f = { object, names, out, n, 0, 0, { 0 } };
  for (size_t i = 0; i < n; i++) {
    out[i] = NULL;
    if (i < RELOC_MAX_NAMES)
      f.hash[i] = reloc_gnu_hash(names[i]);
  }
  dl_iterate_phdr(reloc_named_cb, &f);
  if (f.unsure || (object != NULL && f.objects == 0))
    return -1;
  for (size_t i = 0; i < n; i++)
    if (object != NULL && out[i] == NULL)
      return -1;             /* dlsym would look in its dependencies too */
  return 0;
}

/* d's segment fields for sym, which lies in one of info's PT_LOAD
 * segments: 0, or -1 when it lies in none. */
PH_STARTUP static int reloc_def_segment(const struct dl_phdr_info *info, const ElfW(Sym) *sym,
                                        reloc_def_t *d)
{
  for (ElfW(Half) k = 0; k < info->dlpi_phnum; k++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (uintptr_t)sym >= lo && (uintptr_t)sym - lo < ph->p_memsz) {
      d->seg_lo = lo & ~(reloc_page_size() - 1);
      d->prot = ((ph->p_flags & PF_R) ? PROT_READ : 0) | ((ph->p_flags & PF_W) ? PROT_WRITE : 0) |
                ((ph->p_flags & PF_X) ? PROT_EXEC : 0);
      return 0;
    }
  }
  return -1;
}

/* One walk of the loaded objects finds every wanted definition (outside
 * the start-up text: at start-up reloc_startup_resolve found them). */
static int reloc_def_find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  reloc_def_find_t *f = arg;
  reloc_view_t v;
  int viewed = 0, self = -1;
  uintptr_t span_lo = UINTPTR_MAX, span_hi = 0;
  (void)size;
  if (reloc_is_vdso(info))
    return 0;
  /* the object's span first: one walk of its program headers, then the
   * segment test only for the names whose definition lies inside it */
  for (ElfW(Half) k = 0; k < info->dlpi_phnum; k++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (a < span_lo)
      span_lo = a;
    if (a + ph->p_memsz > span_hi)
      span_hi = a + ph->p_memsz;
  }
  for (size_t i = 0; i < f->n; i++) {
    if (f->def[i].sym != NULL || f->addr[i] < span_lo || f->addr[i] >= span_hi ||
        !reloc_in_segment(info, f->addr[i]))
      continue;
    f->left--;
    if (self < 0)
      self = reloc_is_self(info);
    if (self) {
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
    reloc_def_t *d = &f->def[i];
    if (reloc_def_segment(info, sym, d) == 0) {
      d->sym = sym;
      d->old_value = sym->st_value;
      /* relative to the object's base, modulo 2^64 as ld.so adds */
      d->new_value = (ElfW(Addr))(f->replacement[i] - (f->addr[i] - sym->st_value));
      d->name = f->name[i];
      d->base = f->addr[i] - sym->st_value;
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

/* A set of symbol addresses: twice the names it can hold, a power of two. */
#define RELOC_DEFS_SEEN (4 * RELOC_MAX_NAMES)

/* 1 when sym is in set already; else adds it and returns 0. */
PH_STARTUP static int reloc_defs_seen(const ElfW(Sym) **set, const ElfW(Sym) *sym)
{
  unsigned i = (unsigned)(((uintptr_t)sym / sizeof(ElfW(Sym))) * 2654435761u) & (RELOC_DEFS_SEEN - 1);
  for (; set[i] != NULL; i = (i + 1) & (RELOC_DEFS_SEEN - 1))
    if (set[i] == sym)
      return 1;
  set[i] = sym;
  return 0;
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
PH_COLD_BSS static reloc_def_find_t reloc_find;  /* reloc_defs_lock held: too big for a stack */

/* The PT_LOAD segment of info holding addr, [lo, hi), remembered: the
 * next address asked about is mostly in the same one (a defining
 * object's functions in its text, their symbols in its .dynsym). */
typedef struct reloc_seg_memo_s {
  uintptr_t lo, hi;
  int prot;
} reloc_seg_memo_t;

/* 1 when addr lies in one of info's PT_LOAD segments (m: it, after). */
PH_STARTUP static int reloc_seg_memo(const struct dl_phdr_info *info, uintptr_t addr,
                                     reloc_seg_memo_t *m)
{
  if (addr >= m->lo && addr < m->hi)
    return 1;
  for (ElfW(Half) k = 0; k < info->dlpi_phnum; k++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && addr >= lo && addr - lo < ph->p_memsz) {
      m->lo = lo;
      m->hi = lo + ph->p_memsz;
      m->prot = ((ph->p_flags & PF_R) ? PROT_READ : 0) | ((ph->p_flags & PF_W) ? PROT_WRITE : 0) |
                ((ph->p_flags & PF_X) ? PROT_EXEC : 0);
      return 1;
    }
  }
  return 0;
}

PH_STARTUP void reloc_defs_hint(const struct dl_phdr_info *info, const char *const *names,
                                void *const *addrs, const ElfW(Sym) *const *syms, size_t n)
{
  reloc_seg_memo_t code = { 0, 0, 0 }, tab = { 0, 0, 0 };
  if (n == 0 || reloc_is_self(info))
    return;                    /* pinheap's own definitions stay as they are */
  for (size_t i = 0; i < n && reloc_ndefs + reloc_nhints < RELOC_MAX_NAMES; i++) {
    reloc_def_t *h = &reloc_defs[reloc_ndefs + reloc_nhints];
    uintptr_t addr = (uintptr_t)addrs[i];
    /* what reloc_def_find_cb would find: a function, in this object (the
     * first holding addr: objects do not overlap), its symbol in one of
     * the object's segments (reloc_def_segment's fields) */
    if (ELF64_ST_TYPE(syms[i]->st_info) != STT_FUNC || !reloc_seg_memo(info, addr, &code) ||
        !reloc_seg_memo(info, (uintptr_t)syms[i], &tab))
      continue;
    h->seg_lo = tab.lo & ~(reloc_page_size() - 1);
    h->prot = tab.prot;
    h->name = names[i];
    h->sym = (ElfW(Sym) *)syms[i];
    h->old_value = syms[i]->st_value;
    h->base = addr - syms[i]->st_value;
    reloc_nhints++;
  }
}

/* The hints taken into the entries they answer (each serves once), then
 * forgotten; the table names them in the order they were given, mostly.
 * reloc_mutex held. */
PH_STARTUP static void reloc_defs_hints_take(void)
{
  size_t nh = reloc_nhints, from = 0;
  reloc_def_t *hints = &reloc_defs[reloc_ndefs];
  for (size_t i = 0; i < reloc_find.n && nh > 0; i++) {
    for (size_t j = 0; j < nh; j++) {
      reloc_def_t *h = &hints[(from + j) % nh];
      if (h->name == NULL || h->base + h->old_value != reloc_find.addr[i] ||
          (h->name != reloc_find.name[i] && !reloc_streq(h->name, reloc_find.name[i])))
        continue;
      reloc_def_t *d = &reloc_find.def[i];
      *d = *h;
      d->new_value = (ElfW(Addr))(reloc_find.replacement[i] - d->base);
      d->name = reloc_find.name[i];
      h->name = NULL;
      reloc_find.left--;
      from = (from + j + 1) % nh;
      break;
    }
  }
  reloc_nhints = 0;
}

PH_STARTUP void reloc_defs_patch(reloc_entry_t *table, size_t n)
{
  pthread_mutex_lock(&reloc_defs_lock);
  reloc_find.n = 0;
  for (size_t j = 0; j < n; j++) {
    reloc_entry_t *e = &table[j];
    void *addr = __atomic_load_n(&e->original, __ATOMIC_ACQUIRE);
    if (addr == NULL)
      addr = dlsym(RTLD_DEFAULT, e->name);
    if (addr == NULL || addr == e->replacement || addr == e->definition)
      continue;
    if (reloc_find.n == RELOC_MAX_NAMES) {
      pthread_mutex_lock(&reloc_mutex);
      reloc_overflow("RELOC_MAX_NAMES (definitions)", RELOC_MAX_NAMES);
      pthread_mutex_unlock(&reloc_mutex);
      break;
    }
    reloc_find.entry[reloc_find.n] = e;
    reloc_find.name[reloc_find.n] = e->name;
    reloc_find.replacement[reloc_find.n] = (uintptr_t)(e->definition != NULL ? e->definition : e->replacement);
    reloc_find.self[reloc_find.n] = 0;
    reloc_find.addr[reloc_find.n] = (uintptr_t)addr;
    reloc_find.def[reloc_find.n].sym = NULL;
    reloc_find.n++;
  }
  reloc_find.left = reloc_find.n;
  pthread_mutex_lock(&reloc_mutex);
  reloc_defs_hints_take();
  pthread_mutex_unlock(&reloc_mutex);
  if (reloc_find.left > 0)
    dl_iterate_phdr(reloc_def_find_cb, &reloc_find);
  /* Slots met later may hold only lazy-binding stubs, and dlsym will then
   * find the replacement: the original is known from here on (unless it is
   * pinheap's own, which is no original). */
  for (size_t i = 0; i < reloc_find.n; i++) {
    void *expected = NULL;
    if (!reloc_find.self[i])
      __atomic_compare_exchange_n(&reloc_find.entry[i]->original, &expected, (void *)reloc_find.addr[i], 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }

  pthread_mutex_lock(&reloc_mutex);
  reloc_def_t *found = reloc_find.def;
  size_t keep = 0;
  /* each symbol once: the ones rewritten before and the ones kept so far
   * in a small set of symbol addresses (one probe each, where a scan of
   * both lists per name was 4,500 instructions for libc's 32) */
  const ElfW(Sym) *seen_set[RELOC_DEFS_SEEN] = { NULL };
  for (size_t k = 0; k < reloc_ndefs; k++)
    reloc_defs_seen(seen_set, reloc_defs[k].sym);
  for (size_t i = 0; i < reloc_find.n; i++) {
    if (found[i].sym == NULL || reloc_defs_seen(seen_set, found[i].sym))
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

PH_STARTUP void *reloc_def_value(const char *name)
{
  void *v = NULL;
  size_t k = 0;
  pthread_mutex_lock(&reloc_mutex);
  /* the installation asks with its table's own names: by address first */
  while (k < reloc_ndefs && reloc_defs[k].name != name)
    k++;
  for (size_t j = 0; k == reloc_ndefs && j < reloc_ndefs; j++)
    if (strcmp(reloc_defs[j].name, name) == 0)
      k = j;
  if (k < reloc_ndefs)
    v = (void *)(reloc_defs[k].base + __atomic_load_n(&reloc_defs[k].sym->st_value, __ATOMIC_ACQUIRE));
  pthread_mutex_unlock(&reloc_mutex);
  return v;
}

void reloc_defs_restore(void)
{
  reloc_defs_write(reloc_defs, reloc_ndefs, 1);
  reloc_ndefs = 0;
  reloc_nhints = 0;
  reloc_stats.definitions = 0;
}

/* In a forked child: the lock made new (see reloc_defs_lock). */
void reloc_defs_fork_child(void)
{
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  reloc_defs_lock = fresh;
}
