/*
 * reloc_loads.c -- the relocation patcher and the objects that come and
 * go: the wrappers of dlopen, dlmopen and dlclose (the patcher's own
 * table, installed first: a load patches the new objects, an unload
 * reports what ld.so unmapped as VM_UNMAPPED), and which objects were
 * loaded at start-up (the program, its DT_NEEDED closure, LD_PRELOAD).
 * Main entry points: reloc_dlopen() and reloc_startup_scan() (for
 * reloc_loaded_at_startup()).  The contract is in reloc.h.
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

void *reloc_dlopen(const char *file, int mode)
{
  void *h = dlopen(file, mode);
  if (h != NULL) {
    reloc_after_load();
    if (feeds_attach != NULL)
      feeds_attach();
  }
  return h;
}

void *reloc_dlmopen(Lmid_t lmid, const char *file, int mode)
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

int reloc_dlclose(void *handle)
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

/* In a forked child: the note's lock made new (see reloc_note_lock). */
void reloc_loads_fork_child(void)
{
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  reloc_note_lock = fresh;
}

/* ---- loaded at start-up? ----------------------------------------------------- */

/* strlen(s), without libc's (start-up binds no more of libc than it must) */
PH_STARTUP static size_t reloc_len(const char *s)
{
  size_t n = 0;
  while (s[n] != '\0')
    n++;
  return n;
}

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
  o->addr = info->dlpi_addr;
  o->phdr = info->dlpi_phdr;
  o->phnum = info->dlpi_phnum;
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

/* Does the loaded object o answer to the name `want` (a DT_NEEDED entry
 * or an LD_PRELOAD word): the same path, or the same file name when want
 * has no slash (ld.so records the directory it found it in).  Compared
 * from the ends: the file names differ there first. */
PH_STARTUP static int reloc_name_is(const reloc_startup_obj_t *o, const char *want, size_t want_len,
                                    int want_slash)
{
  const char *path = o->name;
  if (want_len == 0 || path[0] == '\0')
    return 0;
  size_t len = reloc_len(path);
  if (len < want_len || (len > want_len && (!want_slash ? path[len - want_len - 1] != '/' : 1)))
    return 0;
  for (size_t i = 0; i < want_len; i++)
    if (path[len - want_len + i] != want[i])
      return 0;
  return 1;
}

PH_STARTUP static int reloc_mark(reloc_startup_t *st, const char *want, size_t want_len)
{
  int changed = 0, slash = 0;
  for (size_t i = 0; i < want_len && !slash; i++)
    slash = want[i] == '/';
  for (size_t i = 0; i < st->n; i++) {
    if (!st->obj[i].initial && reloc_name_is(&st->obj[i], want, want_len, slash)) {
      st->obj[i].initial = 1;
      changed = 1;
    }
  }
  return changed;
}

PH_STARTUP int reloc_startup_scan(reloc_startup_t *st, const void *addr)
{
  int rc = -1;

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
  /* the object holding addr, if any: the closure stops once it is marked */
  size_t holder = st->n;
  for (size_t i = 0; i < st->n && holder == st->n; i++)
    if (st->obj[i].holds)
      holder = i;
  /* each object's DT_NEEDED entries once (load order is breadth first:
   * what they mark mostly comes later in the list, met in the same
   * round) */
  for (int changed = 1; changed && (st->full || !(holder < st->n && st->obj[holder].initial));) {
    changed = 0;
    for (size_t i = 0; i < st->n; i++) {
      reloc_startup_obj_t *o = &st->obj[i];
      if (o->initial != 1 || o->dyn == NULL || o->strtab == NULL)
        continue;
      o->initial = 2;
      for (const ElfW(Dyn) *d = o->dyn; d->d_tag != DT_NULL; d++) {
        if (d->d_tag != DT_NEEDED)
          continue;
        const char *want = o->strtab + d->d_un.d_val;
        changed |= reloc_mark(st, want, reloc_len(want));
      }
    }
  }
  if (holder < st->n)
    rc = st->obj[holder].initial != 0;
  return rc;
}

/* dlsym(RTLD_DEFAULT, name)'s answers read from the symbol tables of the
 * objects loaded at start-up, without dlsym (some 1000 instructions each,
 * 32 of them at every start-up): those objects are the head of the global
 * lookup scope, in the order dl_iterate_phdr reports them (ld.so loads the
 * closure breadth-first, as it builds the scope, and moves its own entry
 * to its place in it), so the first of them that defines name is the
 * answer, when its table says it surely (reloc_sym_default).  out[i] NULL:
 * not sure, or defined by none of them (an object dlopen'ed RTLD_GLOBAL
 * since may define it): the caller asks dlsym.  Only when the object
 * holding addr was loaded at start-up (else every out[i] is NULL).
 * Returns what reloc_startup_scan() does. */
PH_STARTUP int reloc_startup_resolve_in(reloc_startup_t *st, const void *addr,
                                       const char *const *names, void **out, size_t n)
{
  size_t left = n;
  for (size_t i = 0; i < n; i++)
    out[i] = NULL;
  st->full = n > 0;
  int rc = reloc_startup_scan(st, addr);
  st->full = 0;
  if (rc != 1 || st->n == RELOC_MAX_OBJECTS)
    return rc;                /* a late load, or too many objects to be sure */
  if (n > RELOC_MAX_NAMES)
    return rc;
  unsigned char done[RELOC_MAX_NAMES] = { 0 };
  uint32_t hash[RELOC_MAX_NAMES];
  for (size_t i = 0; i < n; i++)
    hash[i] = reloc_gnu_hash(names[i]);
  for (size_t k = 0; k < st->n && left > 0; k++) {
    const reloc_startup_obj_t *o = &st->obj[k];
    if (!o->initial)
      continue;
    struct dl_phdr_info info;
    reloc_view_t v;
    memset(&info, 0, sizeof(info));
    info.dlpi_addr = o->addr;
    info.dlpi_phdr = o->phdr;
    info.dlpi_phnum = o->phnum;
    reloc_view_make(&info, &v);
    if (!v.has_dynamic)
      continue;
    const char *hn[RELOC_MAX_NAMES];
    void *ha[RELOC_MAX_NAMES];
    const ElfW(Sym) *hs[RELOC_MAX_NAMES];
    size_t nh = 0;
    for (size_t i = 0; i < n; i++) {
      if (done[i] || !reloc_bloom_may(&v, hash[i]))
        continue;              /* (v surely does not define it) */
      int r = reloc_sym_default(&v, names[i], hash[i], &out[i], &hs[nh]);
      if (r == 0)
        continue;
      if (r < 0) {
        out[i] = NULL;         /* not sure: dlsym decides */
      } else {
        hn[nh] = names[i];
        ha[nh++] = out[i];
      }
      done[i] = 1;
      left--;
    }
    reloc_defs_hint(&info, hn, ha, hs, nh);   /* the definitions to rewrite, if asked */
  }
  return rc;
}
