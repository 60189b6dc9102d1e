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
#include <sys/syscall.h>
#include <unistd.h>


#define RELOC_BUCKETS 256      /* > 2 * RELOC_MAX_NAMES, a power of two */

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


PH_HOT_DATA pthread_mutex_t reloc_mutex = PTHREAD_MUTEX_INITIALIZER;
/* (GCC lays out a file's .bss in the reverse order of the definitions:
 * the first entries of reloc_buckets, reloc_tables and reloc_names, which
 * every process writes, then share a page.) */
static reloc_name_t reloc_names[RELOC_MAX_NAMES];
PH_HOT_DATA static size_t reloc_nnames;
static reloc_table_t reloc_tables[RELOC_MAX_TABLES];
PH_HOT_DATA size_t reloc_ntables;
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
PH_HOT_DATA reloc_stats_t reloc_stats;
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
    if (reloc_names[v - 1].hash == h && reloc_streq(reloc_names[v - 1].name, name))
      return v - 1;
  }
}

/* (not in the start-up text: a bound exceeded) */
void reloc_overflow(const char *bound, size_t value)
{
  char buf[24];
  reloc_stats.overflows++;
  reloc_overflowed = 1;
  ph_warn("relocation patcher: bound ", bound, " = ", ph_fmt_dec(buf, value),
          " exceeded; some slots stay unpatched (raise it in hooks/intercept/reloc.h)", NULL);
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

/* ---- the slots of one object that name an installed symbol ---------------- */

PH_STARTUP int reloc_view_each(const reloc_view_t *v, const char *sym, reloc_slot_fn_t *fn, void *arg)
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

/* (the raw system call: no lazy binding of libc's mprotect at start-up) */
PH_STARTUP int reloc_relro_set(uintptr_t lo, uintptr_t hi, int prot)
{
  if (ph_syscall(SYS_mprotect, lo, hi - lo, prot) == 0)
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

PH_STARTUP int reloc_is_self(const struct dl_phdr_info *info)
{
  return reloc_in_segment(info, (uintptr_t)(void *)&reloc_install);
}

PH_STARTUP int reloc_is_vdso(const struct dl_phdr_info *info)
{
  /* the vDSO's address is fixed at exec: asked of getauxval once, not per
   * object of every walk (40 walks' worth at start-up); 1: none */
  PH_HOT_DATA static uintptr_t vdso;
  uintptr_t v = __atomic_load_n(&vdso, __ATOMIC_RELAXED);
  if (v == 0) {
    v = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    v = v != 0 ? v : 1;
    __atomic_store_n(&vdso, v, __ATOMIC_RELAXED);
  }
  return v != 1 && info->dlpi_addr <= v && reloc_in_segment(info, v);
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
  /* only the words that objects below the high-water mark use (one for
   * a small program, where the whole rows were 2,200 instructions) */
  size_t words = (reloc_nobjects + 63) / 64;
  for (size_t i = 0; i < reloc_nnames; i++)
    for (size_t w = 0; w < words; w++)
      reloc_scratch.obj_bits[i][w] = 0;
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
    n += ph_popcount(any[i]);
  reloc_stats.objects_patched = n;
  reloc_stats.slots = (unsigned)reloc_nslots;
}

/* One pass over the loaded objects; then objects no longer reported are
 * forgotten.  Caller holds reloc_mutex. */
PH_STARTUP void reloc_pass_run(reloc_pass_mode_t mode)
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
PH_STARTUP void reloc_originals_finish(void)
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

/* ---- public (internal) entry points ------------------------------------------ */

/* The mutex is held across fork, so that a child forked during another
 * thread's pass finds it free. */
static void reloc_prefork(void) { pthread_mutex_lock(&reloc_mutex); }
static void reloc_postfork(void) { pthread_mutex_unlock(&reloc_mutex); }

void reloc_fork_child(void)
{
  reloc_loads_fork_child();
  reloc_defs_fork_child();
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
    ph_atfork(reloc_prefork, reloc_postfork, reloc_postfork);
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

/* Start-up reads both (the install's look-up, its report): in the
 * start-up text, not a page of their own at the far end of .text. */
PH_STARTUP void reloc_stats_get(reloc_stats_t *out_p)
{
  pthread_mutex_lock(&reloc_mutex);
  *out_p = reloc_stats;
  pthread_mutex_unlock(&reloc_mutex);
}

PH_STARTUP void *reloc_patched_slot(const char *sym)
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

PH_STARTUP int reloc_loaded_at_startup(const void *addr)
{
  return reloc_startup_resolve(addr, NULL, NULL, 0);
}

PH_STARTUP int reloc_startup_resolve(const void *addr, const char *const *names, void **out, size_t n)
{
  pthread_mutex_lock(&reloc_mutex);
  /* under reloc_mutex: the scratch table */
  int rc = reloc_startup_resolve_in(&reloc_scratch.st, addr, names, out, n);
  pthread_mutex_unlock(&reloc_mutex);
  return rc;
}
