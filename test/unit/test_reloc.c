/*
 * test_reloc.c -- the relocation patcher (hooks/reloc.c), end to end in
 * one process.  Main entry point: main(), which runs the checks in order
 * and prints "PASS <check>" or "FAIL <check>: <what was seen>" for each;
 * the exit status is 1 if any failed.
 *
 * The patcher lives in librelocfix_pin.so (the stand-in for pinheap's
 * object, test/fixture/relocfix.h); librelocfix_a.so is linked at
 * start-up with -z relro -z now; librelocfix_b.so is dlopen'ed after
 * install (RTLD_LOCAL, lazy binding).  The table redirects munmap,
 * malloc and getppid to counting wrappers defined here, plus a name that
 * no object imports.  Not run under ASan (its malloc interceptors and a
 * wrapper that forwards to __libc_malloc cannot share one process; the
 * ctest label noasan) nor TSan (not in the tsan label).
 *
 * Usage: test_reloc [--bench]  (--bench: only the install timing)
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fixture/relocfix.h"

#ifndef RELOCFIX_B_PATH
#error "RELOCFIX_B_PATH (the full path of librelocfix_b.so) must be defined"
#endif

extern void *__libc_malloc(size_t n);

static atomic_long n_munmap, n_malloc, n_getppid;
static int failures, checks;

static int wrap_munmap(void *p, size_t n);
static void *wrap_malloc(size_t n);
static int wrap_getppid(void);

static relocfix_entry_t table[] = {
  { .name = "munmap", .replacement = (void *)wrap_munmap },
  { .name = "malloc", .replacement = (void *)wrap_malloc },
  { .name = "getppid", .replacement = (void *)wrap_getppid },
  { .name = "relocfix_nobody_imports_this", .replacement = (void *)wrap_munmap },
};
#define TABLE_N (sizeof(table) / sizeof(table[0]))
enum { T_MUNMAP, T_MALLOC, T_GETPPID, T_NOBODY };

static int wrap_munmap(void *p, size_t n)
{
  atomic_fetch_add(&n_munmap, 1);
  int (*orig)(void *, size_t) = (int (*)(void *, size_t))__atomic_load_n(&table[T_MUNMAP].original, __ATOMIC_ACQUIRE);
  if (orig == NULL) {
    static const char msg[] = "test_reloc: FATAL: munmap wrapper reached with no original\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    abort();
  }
  return orig(p, n);
}

static void *wrap_malloc(size_t n)
{
  atomic_fetch_add(&n_malloc, 1);
  return __libc_malloc(n);
}

static int wrap_getppid(void)
{
  atomic_fetch_add(&n_getppid, 1);
  int (*orig)(void) = (int (*)(void))__atomic_load_n(&table[T_GETPPID].original, __ATOMIC_ACQUIRE);
  if (orig == NULL) {
    static const char msg[] = "test_reloc: FATAL: getppid wrapper reached with no original\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    abort();
  }
  return orig();
}

static void check(int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#include <stdarg.h>
static void check(int ok, const char *name, const char *fmt, ...)
{
  checks++;
  if (ok) {
    printf("PASS %s\n", name);
  } else {
    va_list ap;
    failures++;
    printf("FAIL %s: ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
  }
  fflush(stdout);
}

/* A munmap that fails with EINVAL (unaligned address): harmless, and the
 * real one's answer is recognisable. */
static void *const BAD = (void *)(uintptr_t)1;
static int is_einval(int rc) { return rc == -1 && errno == EINVAL; }

/* The counters' change across one call. */
#define DELTA(counter, expr) ({ long b_ = atomic_load(&(counter)); expr; atomic_load(&(counter)) - b_; })

/* ---- /proc/self/maps and RELRO -------------------------------------------- */

/* Permissions ("r--p", ...) of the mapping holding addr, into perms[5]. */
static int maps_perms(const void *addr, char perms[5])
{
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  int found = 0;
  if (f == NULL)
    return 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    unsigned long lo, hi;
    char p[5];
    if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3 && (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
      memcpy(perms, p, 5);
      found = 1;
      break;
    }
  }
  fclose(f);
  return found;
}

typedef struct relro_find_s {
  const char *substr;
  uintptr_t lo, hi;
} relro_find_t;

static int relro_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  relro_find_t *r = arg;
  (void)size;
  if (info->dlpi_name == NULL || strstr(info->dlpi_name, r->substr) == NULL)
    return 0;
  uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_GNU_RELRO) {
      r->lo = (info->dlpi_addr + ph->p_vaddr) & ~(pg - 1);
      r->hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(pg - 1);
    }
  }
  return 1;
}

/* 1 if slot lies in the read-only-after-relocation pages of the object. */
static int in_relro(const char *substr, const void *slot)
{
  relro_find_t r = { substr, 0, 0 };
  dl_iterate_phdr(relro_cb, &r);
  return (uintptr_t)slot >= r.lo && (uintptr_t)slot < r.hi;
}

static void check_relro_readonly(const char *name, const char *obj, const char *sym)
{
  void **slot = relocfix_pin_lookup_slot_addr(obj, sym);
  char perms[5] = "?";
  if (slot == NULL) {
    check(0, name, "no %s slot found in %s", sym, obj);
    return;
  }
  if (!in_relro(obj, slot)) {
    check(0, name, "%s's %s slot %p is not in its RELRO pages (fixture not built -z relro -z now?)", obj, sym,
          (void *)slot);
    return;
  }
  int found = maps_perms(slot, perms);
  check(found && strcmp(perms, "r--p") == 0, name, "page of %s's %s slot %p has permissions '%s', expected 'r--p'",
        obj, sym, (void *)slot, found ? perms : "(not in /proc/self/maps)");
}

/* ---- fixture B ------------------------------------------------------------------ */

typedef struct fix_b_s {
  void *h;
  relocfix_b_munmap_fn *munmap_;
  relocfix_b_malloc_fn *malloc_;
  relocfix_b_getppid_fn *getppid_;
} fix_b_t;

static int fix_b_open(fix_b_t *b)
{
  b->h = dlopen(RELOCFIX_B_PATH, RTLD_LAZY | RTLD_LOCAL);
  if (b->h == NULL) {
    printf("test_reloc: dlopen(%s) failed: %s\n", RELOCFIX_B_PATH, dlerror());
    return 0;
  }
  b->munmap_ = (relocfix_b_munmap_fn *)dlsym(b->h, "relocfix_b_munmap");
  b->malloc_ = (relocfix_b_malloc_fn *)dlsym(b->h, "relocfix_b_malloc");
  b->getppid_ = (relocfix_b_getppid_fn *)dlsym(b->h, "relocfix_b_getppid");
  return b->munmap_ != NULL && b->malloc_ != NULL && b->getppid_ != NULL;
}

static void check_fix_b_counted(const char *when, fix_b_t *b)
{
  char name[128];
  long d;
  int rc = 0;

  d = DELTA(n_munmap, rc = b->munmap_(BAD, 4096));
  snprintf(name, sizeof(name), "%s: B's munmap (lazy PLT) reaches the wrapper", when);
  check(d == 1 && is_einval(rc), name, "counted %ld call(s), rc %d", d, rc);
  void *p = NULL;
  d = DELTA(n_malloc, p = b->malloc_(24));
  snprintf(name, sizeof(name), "%s: B's malloc reaches the wrapper", when);
  check(d == 1 && p != NULL, name, "counted %ld call(s), p %p", d, p);
  free(p);
  d = DELTA(n_getppid, rc = b->getppid_());
  snprintf(name, sizeof(name), "%s: B's getppid (imported by B alone) reaches the wrapper and the original", when);
  check(d == 1 && rc == (int)syscall(SYS_getppid), name, "counted %ld call(s), returned %d, expected %ld", d, rc,
        (long)syscall(SYS_getppid));
}

/* ---- threads ------------------------------------------------------------------- */

static atomic_int stop_threads;
static atomic_long thread_calls, thread_bad;

static void *munmap_loop(void *arg)
{
  (void)arg;
  while (!atomic_load(&stop_threads)) {
    int rc = relocfix_a_munmap(BAD, 4096);
    if (!is_einval(rc))
      atomic_fetch_add(&thread_bad, 1);
    rc = relocfix_a_munmap_by_address(BAD, 4096);
    if (!is_einval(rc))
      atomic_fetch_add(&thread_bad, 1);
    atomic_fetch_add(&thread_calls, 2);
  }
  return NULL;
}

/* ---- timing -------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void bench(void)
{
  double t[100];
  relocfix_stats_t st;
  for (int i = 0; i < 100; i++) {
    relocfix_pin_uninstall();
    double t0 = now_us();
    relocfix_pin_install(table, TABLE_N);
    t[i] = now_us() - t0;
  }
  relocfix_pin_stats(&st);
  relocfix_pin_uninstall();
  qsort(t, 100, sizeof(t[0]), cmp_double);
  printf("test_reloc: bench: reloc_install over %u objects (%u patched, %u slots): "
         "median %.1f us, min %.1f us, max %.1f us (100 runs; target < 100 us)\n",
         st.objects_seen, st.objects_patched, st.slots, t[50], t[0], t[99]);
}

/* ---- the checks ---------------------------------------------------------------- */

/* ---- definitions ----------------------------------------------------------- */

static atomic_long n_realpath, n_defined;
static char *wrap_realpath(const char *path, char *resolved);
static int wrap_defined(void);

static relocfix_entry_t deftable[] = {
  { .name = "realpath", .replacement = (void *)wrap_realpath },   /* libc: GNU hash, two versions */
  { .name = "relocfix_a_defined", .replacement = (void *)wrap_defined },  /* A: SysV hash */
};
#define DEFTABLE_N (sizeof(deftable) / sizeof(deftable[0]))

static char *wrap_realpath(const char *path, char *resolved)
{
  atomic_fetch_add(&n_realpath, 1);
  char *(*orig)(const char *, char *) = (char *(*)(const char *, char *))deftable[0].original;
  return orig(path, resolved);
}

static int wrap_defined(void)
{
  atomic_fetch_add(&n_defined, 1);
  return 2;
}

/* reloc_startup_resolve (what the installation's step (a) asks instead
 * of dlsym, one name after another): each answer it gives is dlsym's;
 * the names that the objects loaded at start-up define -- libc's (GNU
 * hash), A's (SysV hash only), the patcher's own object's -- are answered
 * from the tables; a name only B defines (dlopen'ed RTLD_LOCAL: not in the
 * global scope, though dl_iterate_phdr reports it) and one nobody defines
 * are left to dlsym (NULL), and so is realpath (two versions in libc). */
static void check_startup_resolve(const char *when)
{
  static const char *const names[] = { "munmap", "malloc", "relocfix_a_defined", "relocfix_pin_install",
                                       "realpath", "relocfix_b_getppid", "relocfix_nobody_defines_this" };
  enum { N = sizeof(names) / sizeof(names[0]), FROM_TABLES = 4, ONLY_B = 5 };
  void *out[N];
  char what[160];
  int rc = relocfix_pin_startup_resolve(names, out, N);
  snprintf(what, sizeof(what), "start-up resolve (%s): the patcher's object was loaded at start-up", when);
  check(rc == 1, what, "returned %d", rc);
  for (int i = 0; i < N; i++) {
    void *d = dlsym(RTLD_DEFAULT, names[i]);
    snprintf(what, sizeof(what), "start-up resolve (%s): %s is %s", when, names[i],
             i < FROM_TABLES ? "read from the tables, as dlsym finds it"
             : i == ONLY_B   ? "left to dlsym (B is not in the global scope)"
                             : "dlsym's or left to it");
    int ok = out[i] == NULL || out[i] == d;
    if (i < FROM_TABLES)
      ok = ok && out[i] != NULL;
    if (i == ONLY_B)
      ok = ok && out[i] == NULL && d == NULL;
    check(ok, what, "read %p, dlsym %p", out[i], d);
  }
}

/* RELOC_PATCH_DEFINITIONS: symbol lookups made after install (dlsym, an
 * object loaded later) find the replacement; the other version of a
 * versioned name keeps its value; uninstall puts the values back. */
static void check_definitions(void)
{
  void *rp = dlsym(RTLD_DEFAULT, "realpath");
  void *rp_old = dlvsym(RTLD_DEFAULT, "realpath", "GLIBC_2.2.5");
  void *def = dlsym(RTLD_DEFAULT, "relocfix_a_defined");
  relocfix_stats_t st;
  /* A's definition noted by the start-up resolve (a hint), realpath's not
   * (two versions): install takes the first, finds the second by a walk */
  const char *const hinted[] = { "relocfix_a_defined", "realpath" };
  void *found[2];
  relocfix_pin_startup_resolve(hinted, found, 2);

  int rc = relocfix_pin_install_flags(deftable, DEFTABLE_N, RELOCFIX_PATCH_DEFINITIONS);
  relocfix_pin_stats(&st);
  check(rc == 0 && st.definitions == 2, "definitions: install rewrites 2 symbol table entries",
        "rc %d, definitions %u", rc, st.definitions);
  check(deftable[0].original == rp && deftable[1].original == def, "definitions: the originals are what dlsym found",
        "realpath %p (dlsym %p), relocfix_a_defined %p (dlsym %p)", deftable[0].original, rp, deftable[1].original,
        def);
  check(dlsym(RTLD_DEFAULT, "realpath") == (void *)wrap_realpath, "definitions: dlsym(realpath) finds the replacement",
        "dlsym %p, wrapper %p, before %p", dlsym(RTLD_DEFAULT, "realpath"), (void *)wrap_realpath, rp);
  check(rp_old == NULL || rp_old == rp || dlvsym(RTLD_DEFAULT, "realpath", "GLIBC_2.2.5") == rp_old,
        "definitions: realpath@GLIBC_2.2.5 keeps its own value", "before %p, now %p", rp_old,
        dlvsym(RTLD_DEFAULT, "realpath", "GLIBC_2.2.5"));
  int (*defined)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "relocfix_a_defined");
  long d = DELTA(n_defined, rc = defined != NULL ? defined() : -1);
  check(defined == wrap_defined && rc == 2 && d == 1,
        "definitions: A's relocfix_a_defined (SysV hash) resolves to the replacement",
        "dlsym %p, wrapper %p, result %d, counted %ld", (void *)defined, (void *)wrap_defined, rc, d);
  char buf[4096];
  char *(*rpf)(const char *, char *) = (char *(*)(const char *, char *))dlsym(RTLD_DEFAULT, "realpath");
  d = DELTA(n_realpath, rpf("/", buf));
  check(d == 1 && strcmp(buf, "/") == 0, "definitions: a call through the new definition reaches the original",
        "counted %ld, result '%s'", d, buf);
  rc = relocfix_pin_install_flags(deftable, DEFTABLE_N, RELOCFIX_PATCH_DEFINITIONS);
  relocfix_pin_stats(&st);
  check(rc == 0 && st.definitions == 2, "definitions: installing again rewrites nothing twice",
        "rc %d, definitions %u", rc, st.definitions);

  rc = relocfix_pin_uninstall();
  relocfix_pin_stats(&st);
  check(rc == 0 && st.definitions == 0 && dlsym(RTLD_DEFAULT, "realpath") == rp &&
            dlsym(RTLD_DEFAULT, "relocfix_a_defined") == def,
        "definitions: uninstall puts the values back", "rc %d, definitions %u, realpath %p (was %p), defined %p (was %p)",
        rc, st.definitions, dlsym(RTLD_DEFAULT, "realpath"), rp, dlsym(RTLD_DEFAULT, "relocfix_a_defined"), def);
  check(relocfix_a_defined() == 1, "definitions: A's own call is untouched", "got %d", relocfix_a_defined());
}

int main(int argc, char **argv)
{
  long d;
  int rc = 0;
  unsigned objs = 0, slots = 0;
  relocfix_stats_t st;

  if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
    bench();
    return 0;
  }

  /* Before: nothing is redirected. */
  void *a_munmap_before = relocfix_pin_lookup_slot("librelocfix_a", "munmap");
  void *libc_malloc_before = relocfix_pin_lookup_slot("libc.so.6", "malloc");
  d = DELTA(n_munmap, rc = relocfix_a_munmap(BAD, 4096));
  check(d == 0 && is_einval(rc) && a_munmap_before == dlsym(RTLD_DEFAULT, "munmap"),
        "before install: A's munmap slot holds the real munmap, not counted",
        "counted %ld, rc %d, slot %p, dlsym %p", d, rc, a_munmap_before, dlsym(RTLD_DEFAULT, "munmap"));
  check_relro_readonly("before install: A's GOT page is read-only (RELRO)", "librelocfix_a", "munmap");

  rc = relocfix_pin_install(table, TABLE_N);
  check(rc == 0, "install returns 0", "returned %d", rc);
  check(table[T_MUNMAP].original == dlsym(RTLD_DEFAULT, "munmap"), "install: munmap's original is libc's munmap",
        "original %p, dlsym %p", table[T_MUNMAP].original, dlsym(RTLD_DEFAULT, "munmap"));
  rc = relocfix_pin_query("munmap", &objs, &slots);
  /* the executable (JUMP_SLOT) and A (GLOB_DAT) at least */
  check(rc == 0 && objs >= 2 && slots >= 2, "query: munmap patched in >= 2 objects, >= 2 slots",
        "rc %d, %u objects, %u slots", rc, objs, slots);
  check(table[T_MUNMAP].objects == objs && table[T_MUNMAP].slots == slots, "table entry counters match the query",
        "entry %u/%u, query %u/%u", table[T_MUNMAP].objects, table[T_MUNMAP].slots, objs, slots);

  d = DELTA(n_munmap, rc = relocfix_a_munmap(BAD, 4096));
  check(d == 1 && is_einval(rc), "A's munmap call (its PLT entry uses the GLOB_DAT slot) is counted, result the original's",
        "counted %ld, rc %d", d, rc);
  d = DELTA(n_munmap, rc = relocfix_a_munmap_by_address(BAD, 4096));
  check(d == 1 && is_einval(rc), "A's munmap through its address (GLOB_DAT) is counted", "counted %ld, rc %d", d, rc);
  void *p = NULL;
  d = DELTA(n_malloc, p = relocfix_a_malloc(40));
  check(d == 1 && p != NULL, "A's malloc (JUMP_SLOT in RELRO) is counted", "counted %ld", d);
  free(p);
  d = DELTA(n_munmap, rc = munmap(BAD, 4096));
  check(d == 1 && is_einval(rc), "the executable's own munmap is counted", "counted %ld, rc %d", d, rc);
  d = DELTA(n_malloc, p = malloc(40));
  check(d == 1 && p != NULL, "the executable's own malloc is counted", "counted %ld", d);
  free(p);
  char *s = NULL;
  d = DELTA(n_malloc, s = strdup("reloc"));
  check(d >= 1 && s != NULL, "libc's internal malloc (strdup) is counted", "counted %ld", d);
  free(s);
  void *libc_slot = relocfix_pin_lookup_slot("libc.so.6", "malloc");
  check(libc_slot == (void *)wrap_malloc && libc_malloc_before != (void *)wrap_malloc,
        "libc.so.6's own GOT slot for malloc holds the wrapper", "before %p, now %p, wrapper %p", libc_malloc_before,
        libc_slot, (void *)wrap_malloc);

  d = DELTA(n_munmap, rc = relocfix_pin_munmap(BAD, 4096));
  void *pin_slot = relocfix_pin_lookup_slot("librelocfix_pin", "munmap");
  relocfix_pin_stats(&st);
  check(d == 0 && is_einval(rc) && pin_slot != NULL && pin_slot != (void *)wrap_munmap && st.skipped_self == 1,
        "pinheap's own object is skipped: its munmap is not redirected",
        "counted %ld, rc %d, its slot %p (wrapper %p), skipped_self %u", d, rc, pin_slot, (void *)wrap_munmap,
        st.skipped_self);
  if (getauxval(AT_SYSINFO_EHDR) != 0)
    check(st.skipped_vdso == 1, "the vDSO is seen and skipped", "skipped_vdso %u", st.skipped_vdso);
  else
    printf("SKIP the vDSO is seen and skipped: this process has no vDSO (AT_SYSINFO_EHDR is 0)\n");
  rc = relocfix_pin_query("relocfix_nobody_imports_this", &objs, &slots);
  check(rc == 0 && objs == 0 && slots == 0, "a symbol no object imports: 0 objects, 0 slots, not an error",
        "rc %d, %u objects, %u slots", rc, objs, slots);
  check(relocfix_pin_query("not_in_any_table", &objs, &slots) == ENOENT, "query of an unknown name gives ENOENT",
        "got %d", relocfix_pin_query("not_in_any_table", &objs, &slots));
  check_relro_readonly("after install: A's GOT page is read-only again", "librelocfix_a", "munmap");
  check_relro_readonly("after install: A's .got.plt page is read-only again", "librelocfix_a", "malloc");
  check(relocfix_pin_lookup_slot("librelocfix_a", "munmap") == (void *)wrap_munmap,
        "reloc_lookup_slot: A would call the wrapper", "slot %p", relocfix_pin_lookup_slot("librelocfix_a", "munmap"));

  relocfix_pin_stats(&st);
  unsigned slots_total = st.slots;
  rc = relocfix_pin_install(table, TABLE_N);
  relocfix_pin_stats(&st);
  check(rc == 0 && st.slots == slots_total, "installing the same table again changes nothing",
        "rc %d, slots %u then %u", rc, slots_total, st.slots);

  /* Loads after install. */
  fix_b_t b = { 0 };
  if (!fix_b_open(&b)) {
    check(0, "dlopen of fixture B", "could not open %s", RELOCFIX_B_PATH);
  } else {
    check_fix_b_counted("dlopen after install", &b);
    check_startup_resolve("B loaded");
    relocfix_pin_query("getppid", &objs, &slots);
    check(objs == 1 && table[T_GETPPID].original == dlsym(RTLD_DEFAULT, "getppid"),
          "getppid: patched in B alone, original found by dlsym", "%u objects, original %p, dlsym %p", objs,
          table[T_GETPPID].original, dlsym(RTLD_DEFAULT, "getppid"));
    relocfix_pin_stats(&st);
    unsigned patched_with_b = st.objects_patched;
    dlclose(b.h);
    void *still = dlopen(RELOCFIX_B_PATH, RTLD_LAZY | RTLD_NOLOAD);
    relocfix_pin_stats(&st);
    if (still != NULL) {
      dlclose(still);
      check(0, "dlclose unloads B and the patcher forgets it", "B is still loaded after dlclose");
    } else {
      check(st.objects_patched == patched_with_b - 1, "dlclose unloads B and the patcher forgets it",
            "objects patched %u with B, %u after dlclose", patched_with_b, st.objects_patched);
    }
    if (!fix_b_open(&b))
      check(0, "dlopen of fixture B again", "could not open %s", RELOCFIX_B_PATH);
    else
      check_fix_b_counted("dlopen, dlclose, dlopen again", &b);
  }

  /* Uninstall. */
  rc = relocfix_pin_uninstall();
  check(rc == 0, "uninstall returns 0", "returned %d", rc);
  d = DELTA(n_munmap, rc = relocfix_a_munmap(BAD, 4096));
  d += DELTA(n_munmap, rc = relocfix_a_munmap_by_address(BAD, 4096));
  d += DELTA(n_munmap, rc = munmap(BAD, 4096));
  check(d == 0 && is_einval(rc), "after uninstall: munmap calls (A by PLT and address, executable) are not counted",
        "counted %ld", d);
  d = DELTA(n_malloc, s = strdup("x"));
  free(s);
  check(d == 0 && relocfix_pin_lookup_slot("libc.so.6", "malloc") == libc_malloc_before,
        "after uninstall: libc's malloc slot holds its old value", "counted %ld, slot %p, before %p", d,
        relocfix_pin_lookup_slot("libc.so.6", "malloc"), libc_malloc_before);
  check(relocfix_pin_lookup_slot("librelocfix_a", "munmap") == a_munmap_before,
        "after uninstall: A's munmap slot holds the real munmap again", "slot %p, before %p",
        relocfix_pin_lookup_slot("librelocfix_a", "munmap"), a_munmap_before);
  if (b.h != NULL && b.munmap_ != NULL) {
    d = DELTA(n_munmap, rc = b.munmap_(BAD, 4096));
    check(d == 0 && is_einval(rc), "after uninstall: B (loaded through the wrapper) is restored too",
          "counted %ld, rc %d", d, rc);
  }
  check_relro_readonly("after uninstall: A's GOT page is read-only again", "librelocfix_a", "munmap");
  rc = relocfix_pin_query("munmap", &objs, &slots);
  check(rc == ENOENT, "after uninstall: no table is installed", "query returned %d", rc);

  /* Threads calling through the slots while they are rewritten. */
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, munmap_loop, NULL);
  long counted_before = atomic_load(&n_munmap);
  int install_errors = 0;
  for (int i = 0; i < 200; i++) {
    install_errors += relocfix_pin_install(table, TABLE_N) != 0;
    sched_yield();
    install_errors += relocfix_pin_uninstall() != 0;
  }
  atomic_store(&stop_threads, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  long calls = atomic_load(&thread_calls), counted = atomic_load(&n_munmap) - counted_before;
  check(install_errors == 0 && atomic_load(&thread_bad) == 0 && counted <= calls,
        "2 threads call munmap during 200 install/uninstall cycles: every call reaches the original or the wrapper",
        "%d install/uninstall errors, %ld bad results of %ld calls, %ld counted", install_errors,
        atomic_load(&thread_bad), calls, counted);
  printf("test_reloc: threads: %ld calls, %ld through the wrapper\n", calls, counted);
  d = DELTA(n_munmap, rc = relocfix_a_munmap(BAD, 4096));
  check(d == 0 && is_einval(rc), "after the cycles (uninstalled): A's munmap not counted", "counted %ld", d);
  check_relro_readonly("after the cycles: A's GOT page is read-only", "librelocfix_a", "munmap");

  relocfix_pin_stats(&st);
  check(st.overflows == 0 && st.mprotect_failures == 0, "no bound exceeded, no mprotect failure",
        "overflows %lu, mprotect failures %lu", st.overflows, st.mprotect_failures);

  check_startup_resolve("B unloaded");
  check_definitions();
  relocfix_pin_stats(&st);
  check(st.overflows == 0 && st.mprotect_failures == 0, "definitions: no bound exceeded, no mprotect failure",
        "overflows %lu, mprotect failures %lu", st.overflows, st.mprotect_failures);

  bench();
  printf("test_reloc: %d check(s), %d failed\n", checks, failures);
  return failures != 0;
}
