/*
 * test_patch.c -- code patching of libc's entry points (hooks/patch.c,
 * hooks/install.c step b'), one scenario per run (argv[1]), each line
 * "PASS ...", "FAIL ..." or "SKIP ..."; exit 1 on any FAIL, 77 when the
 * scenario cannot run here (not x86-64).  Driven by test/unit/patch_tests.cmake:
 *   events    every memory call, through glibc's own function and through
 *             the program's PLT, fires its event; libc's entries jump
 *   glibc     pinheap disabled: glibc's free of a block above its mmap
 *             threshold and its malloc_trim fire VM_UNMAPPED; the
 *             self-test reports FREE|CHUNK|MUNMAP
 *   nopatch   PINHEAP_CODE_PATCH=0: libc's code untouched, and glibc's own
 *             free of a large block is not seen (what the patching buys)
 *   stress    threads call munmap and madvise through libc while the main
 *             thread tries to patch and unpatch them many times: a late
 *             patch (PATCH_THREADS) is refused and writes nothing
 *   cycles    patch and undo cycles with the calling threads parked in
 *             between; each phase's calls, through glibc's address and the
 *             program's symbols, checked for result and destination
 *   foreign   an entry someone else patched is left alone and described;
 *             pinheap's own jump is not patched twice
 *   taken     libc's shmdt rewritten by the fixture's constructor before
 *             pinheap's: installation leaves it and says whose jump it is
 * The program links libpinheap.a with its symbols exported (they
 * interpose), and libpatch_fix.so.
 */
#define PINHEAP_NO_CLASSIC_RENAME 1  /* malloc and free here are the process's */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "allocator/api/api.h"
#include "allocator/heap/chunk.h"
#include "hooks/intercept/patch.h"
#include "pinheap.h"

int patchfix_a(void);
int patchfix_b(void);
int patchfix_foreign(void);
int patchfix_shmdt(const void *addr);
int patchfix_mimic_foreign(void *fn, void *to);
extern int patchfix_shmdt_calls;

static int failures;

#define CHECK(cond, ...)                                                                          \
  do {                                                                                            \
    if (cond) {                                                                                   \
      printf("PASS ");                                                                            \
    } else {                                                                                      \
      printf("FAIL ");                                                                            \
      failures++;                                                                                 \
    }                                                                                             \
    printf(__VA_ARGS__);                                                                          \
    printf("\n");                                                                                 \
    fflush(stdout);                                                                               \
  } while (0)

static void *libc_fn(const char *name)
{
  void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
  void *fn = libc != NULL ? dlsym(libc, name) : NULL;
  if (libc != NULL)
    dlclose(libc);
  return fn;
}

static const pinheap_install_info_t *info_of(const char *name)
{
  static pinheap_install_info_t ii;
  for (unsigned i = 0; PINHEAP_NAME(install_info)(i, &ii) == 0; i++)
    if (strcmp(ii.symbol, name) == 0)
      return &ii;
  return NULL;
}

/* ---- events ------------------------------------------------------------- */

static int seen[32];      /* per call-event bit */

static int count_handler(int type, pinheap_event_t *ev, void *arg)
{
  (void)ev, (void)arg;
  for (int b = 0; b < 32; b++)
    if (type == (1 << b))
      __atomic_fetch_add(&seen[b], 1, __ATOMIC_RELAXED);
  return PINHEAP_EVENT_PASS;
}

static int seen_of(int type)
{
  for (int b = 0; b < 32; b++)
    if (type == (1 << b))
      return __atomic_load_n(&seen[b], __ATOMIC_RELAXED);
  return -1;
}

static const char *const mem_names[] = { "mmap", "munmap", "mremap", "madvise",
                                         "shmat", "shmdt", "brk", "sbrk" };
static const int mem_events[] = { PINHEAP_EVENT_MMAP, PINHEAP_EVENT_MUNMAP, PINHEAP_EVENT_MREMAP,
                                  PINHEAP_EVENT_MADVISE, PINHEAP_EVENT_SHMAT, PINHEAP_EVENT_SHMDT,
                                  PINHEAP_EVENT_BRK, PINHEAP_EVENT_SBRK };

/* Calls memory call k through fn (glibc's own or the PLT's), for real.
 * @return 1 if it worked, 0 if it failed, -1 to skip (shm refused). */
static int call_one(int k, void *fn)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void *p;
  switch (k) {
  case 0:
    p = ((void *(*)(void *, size_t, int, int, int, off_t))fn)(NULL, page, PROT_READ | PROT_WRITE,
                                                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return 0;
    syscall(SYS_munmap, p, page);
    return 1;
  case 1:
    p = (void *)syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
    return ((int (*)(void *, size_t))fn)(p, page) == 0;
  case 2: {
    p = (void *)syscall(SYS_mmap, NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
    void *q = ((void *(*)(void *, size_t, size_t, int, ...))fn)(p, 2 * page, page, 0);
    syscall(SYS_munmap, p, 2 * page);
    return q == p;
  }
  case 3: {
    p = (void *)syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
    int r = ((int (*)(void *, size_t, int))fn)(p, page, MADV_DONTNEED);
    syscall(SYS_munmap, p, page);
    return r == 0;
  }
  case 4:
  case 5: {
    int id = shmget(IPC_PRIVATE, page, IPC_CREAT | 0600);
    if (id < 0)
      return -1;
    void *at = k == 4 ? ((void *(*)(int, const void *, int))fn)(id, NULL, 0) : shmat(id, NULL, 0);
    int ok = at != (void *)-1;
    if (ok)
      ok = (k == 5 ? ((int (*)(const void *))fn)(at) : shmdt(at)) == 0;
    shmctl(id, IPC_RMID, NULL);
    return ok;
  }
  case 6: {
    void *cur = sbrk(0);
    return ((int (*)(void *))fn)(cur) == 0 && sbrk(0) == cur;
  }
  case 7: {
    void *cur = (void *)syscall(SYS_brk, 0);
    return ((void *(*)(intptr_t))fn)(0) == cur;
  }
  default:
    return 0;
  }
}

static void *plt_of(int k)
{
  /* the program's own calls: taking the address gives the PLT/GOT value */
  void *const plt[] = { (void *)mmap, (void *)munmap, (void *)mremap, (void *)madvise,
                        (void *)shmat, (void *)shmdt, (void *)brk, (void *)sbrk };
  return plt[k];
}

static void scenario_events(void)
{
  CHECK(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_CALLS, 0, count_handler, NULL) == 0,
        "a call-event handler is set");
  for (int k = 0; k < 8; k++) {
    const pinheap_install_info_t *ii = info_of(mem_names[k]);
    void *fn = libc_fn(mem_names[k]);
    CHECK(ii != NULL && ii->code == PINHEAP_CODE_PATCHED && ii->verified,
          "%s: libc's code patched and verified at installation (code %d: %s)", mem_names[k],
          ii != NULL ? ii->code : -1, ii != NULL && ii->code_text ? ii->code_text : "");
    CHECK(fn != NULL && *(unsigned char *)fn == 0xe9, "%s: glibc's entry starts with a jmp",
          mem_names[k]);
    if (fn == NULL)
      continue;
    for (int via = 0; via < 2; via++) {
      void *f = via == 0 ? fn : plt_of(k);
      int before = seen_of(mem_events[k]);
      int r = call_one(k, f);
      if (r < 0) {
        printf("SKIP %s: shmget refused here\n", mem_names[k]);
        break;
      }
      CHECK(r == 1 && seen_of(mem_events[k]) > before,
            "%s through %s: works (%d) and fires its event (%d -> %d)", mem_names[k],
            via == 0 ? "glibc's own function" : "the program's PLT", r, before,
            seen_of(mem_events[k]));
    }
  }
  PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_CALLS, count_handler, NULL);
}

/* ---- glibc's malloc, pinheap disabled ------------------------------------ */

static const char *watch_lo;
static size_t watch_len;
static int watch_hits;

static void release_listener(void *addr, size_t len, int from_alloc, void *ctx)
{
  (void)from_alloc, (void)ctx;
  const char *lo = __atomic_load_n(&watch_lo, __ATOMIC_RELAXED);
  if (lo != NULL && (char *)addr <= lo && (char *)addr + len >= lo + watch_len)
    __atomic_fetch_add(&watch_hits, 1, __ATOMIC_RELAXED);
}

static void watch(const void *lo, size_t len)
{
  watch_len = len;
  watch_hits = 0;
  __atomic_store_n(&watch_lo, (const char *)lo, __ATOMIC_SEQ_CST);
}

/* glibc's free of a 40 MiB block and its malloc_trim: @return hits of each */
static void glibc_releases(int *free_hits, int *trim_hits)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE), big = (size_t)40 << 20, piece = (size_t)64 << 10;
  void *blocks[16];

  PINHEAP_NAME(register_release)(release_listener, NULL);
  void *p = malloc(big);
  watch(p, big);
  free(p);
  *free_hits = watch_hits;
  for (int i = 0; i < 16; i++)
    blocks[i] = malloc(piece);
  for (int i = 2; i < 15; i += 2) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
  char *inside = (char *)(((uintptr_t)blocks[7] + piece + page - 1) & ~(uintptr_t)(page - 1)) + page;
  watch(inside, page);
  malloc_trim(0);
  *trim_hits = watch_hits;
  watch(NULL, 0);
  for (int i = 0; i < 16; i++)
    free(blocks[i]);
  PINHEAP_NAME(unregister_release)(release_listener, NULL);
}

static void scenario_glibc(void)
{
  int f, t;
  CHECK(!PINHEAP_NAME(enabled)(), "pinheap is disabled: glibc's malloc serves");
  glibc_releases(&f, &t);
  CHECK(f > 0, "glibc's free of a 40 MiB block fires VM_UNMAPPED (%d)", f);
  CHECK(t > 0, "glibc's malloc_trim fires VM_UNMAPPED for the pages it gives back (%d)", t);
  PINHEAP_NAME(open)();
  int level = PINHEAP_NAME(support_level)();
  CHECK(level == (PINHEAP_SUPPORT_FREE | PINHEAP_SUPPORT_CHUNK | PINHEAP_SUPPORT_MUNMAP),
        "support level FREE|CHUNK|MUNMAP with pinheap disabled (%d): %s", level,
        PINHEAP_NAME(support_text)());
  CHECK(strstr(PINHEAP_NAME(support_text)(), "code-patched") != NULL &&
            strstr(PINHEAP_NAME(support_text)(), "Fallback") == NULL,
        "the support text says how, and no mallopt fallback is in force");
}

static void scenario_nopatch(void)
{
  int f, t, none = 1;
  for (int k = 0; k < 8; k++) {
    const pinheap_install_info_t *ii = info_of(mem_names[k]);
    none &= ii != NULL && ii->code == PINHEAP_CODE_NONE;
    unsigned char *fn = libc_fn(mem_names[k]);
    none &= fn != NULL && fn[0] != 0xe9;
  }
  CHECK(none, "PINHEAP_CODE_PATCH=0: no libc function patched, none starts with a jmp");
  CHECK(strstr(PINHEAP_NAME(install_text)(), "PINHEAP_CODE_PATCH=0") != NULL,
        "the installation text says so: %s", PINHEAP_NAME(install_text)());
  if (!PINHEAP_NAME(enabled)()) {
    glibc_releases(&f, &t);
    CHECK(f == 0 && t == 0, "without it glibc's own free and malloc_trim are unseen (%d, %d)", f, t);
    PINHEAP_NAME(open)();
    CHECK(!(PINHEAP_NAME(support_level)() & PINHEAP_SUPPORT_FREE),
          "and the support level has no FREE: %s", PINHEAP_NAME(support_text)());
  }
}

/* ---- stress: patch and unpatch while threads call ------------------------ */

static int stress_stop;
static long stress_calls, stress_bad, stress_diverted;
static int (*libc_munmap)(void *, size_t);
static int (*libc_madvise)(void *, size_t, int);

static __thread long my_calls;   /* this thread's calls that reached my_munmap/my_madvise */

static int my_munmap(void *addr, size_t len)
{
  my_calls++;
  __atomic_fetch_add(&stress_diverted, 1, __ATOMIC_RELAXED);
  return (int)syscall(SYS_munmap, addr, len);
}

static int my_madvise(void *addr, size_t len, int advice)
{
  my_calls++;
  __atomic_fetch_add(&stress_diverted, 1, __ATOMIC_RELAXED);
  return (int)syscall(SYS_madvise, addr, len, advice);
}

/* The first wrong results, each with what was called, what it should have
 * answered and what it did, and the entry's first bytes read just after
 * (they may have changed again since). */
#define STRESS_WRONG_MAX 8
typedef struct stress_wrong_s {
  const char *call, *expected;
  long got;
  int err;
  long calls;                       /* calls made by all threads before it */
  unsigned char entry[8];
} stress_wrong_t;
static stress_wrong_t stress_wrong[STRESS_WRONG_MAX];
static int stress_wrong_n;

static int stress_note(int bad, const char *call, const char *expected, long got, int err,
                       const void *entry)
{
  if (!bad)
    return 0;
  int i = __atomic_fetch_add(&stress_wrong_n, 1, __ATOMIC_RELAXED);
  if (i < STRESS_WRONG_MAX) {
    stress_wrong_t *w = &stress_wrong[i];
    w->call = call;
    w->expected = expected;
    w->got = got;
    w->err = err;
    w->calls = __atomic_load_n(&stress_calls, __ATOMIC_RELAXED);
    memcpy(w->entry, entry, sizeof(w->entry));
  }
  return 1;
}

static void stress_wrong_print(void)
{
  int n = stress_wrong_n < STRESS_WRONG_MAX ? stress_wrong_n : STRESS_WRONG_MAX;
  for (int i = 0; i < n; i++) {
    const stress_wrong_t *w = &stress_wrong[i];
    const unsigned char *e = w->entry;
    printf("  wrong %d: %s: expected %s, got %ld (errno %d), after %ld calls; the entry then "
           "began %02x %02x %02x %02x %02x %02x %02x %02x\n", i + 1, w->call, w->expected, w->got,
           w->err, w->calls, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]);
  }
  if (stress_wrong_n > n)
    printf("  (%d more wrong results not shown)\n", stress_wrong_n - n);
}

static void *stress_thread(void *arg)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *keep = (char *)syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
  (void)arg;
  while (!__atomic_load_n(&stress_stop, __ATOMIC_RELAXED)) {
    void *p = (void *)syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
    long bad = 0, rc;
    errno = 0;
    rc = libc_munmap(p, page);
    bad += stress_note(rc != 0, "munmap(p, page) of a fresh mapping", "0", rc, errno,
                       (void *)libc_munmap);
    keep[0] = 1;
    errno = 0;
    rc = libc_madvise(keep, page, MADV_DONTNEED);
    bad += stress_note(rc != 0, "madvise(keep, page, MADV_DONTNEED)", "0", rc, errno,
                       (void *)libc_madvise);
    bad += stress_note(keep[0] != 0, "keep[0] after madvise(MADV_DONTNEED)",
                       "0 (the page zeroed)", keep[0], 0, (void *)libc_madvise);
    errno = 0;
    rc = libc_munmap((char *)keep + 1, page);
    int err = errno;
    bad += stress_note(rc != -1 || err != EINVAL, "munmap(keep + 1, page) (misaligned)",
                       "-1 with errno EINVAL (22)", rc, err, (void *)libc_munmap);
    __atomic_fetch_add(&stress_bad, bad, __ATOMIC_RELAXED);
    __atomic_fetch_add(&stress_calls, 3, __ATOMIC_RELAXED);
  }
  syscall(SYS_munmap, keep, page);
  return NULL;
}

/* munmap, madvise and mmap of libc as sites going to my_munmap and
 * my_madvise (mmap's is never called). */
static void stress_sites(patch_site_t *sites, char (*texts)[PATCH_TEXT_MAX])
{
  memset(sites, 0, 3 * sizeof(*sites));
  for (int k = 0; k < 3; k++) {
    texts[k][0] = '\0';
    sites[k].text = texts[k];
  }
  sites[0].name = "munmap";
  sites[0].target = (void *)my_munmap;
  sites[1].name = "madvise";
  sites[1].target = (void *)my_madvise;
  sites[2].name = "mmap";
  sites[2].target = (void *)my_munmap;
  libc_munmap = (int (*)(void *, size_t))libc_fn("munmap");
  libc_madvise = (int (*)(void *, size_t, int))libc_fn("madvise");
  CHECK(patch_find(sites, 3) == 0 && sites[0].entry == (void *)libc_munmap &&
            sites[1].entry == (void *)libc_madvise,
        "patch_find finds glibc's munmap and madvise");
}

/* Whether the first 8 bytes of each of the n entries are still before[]. */
static int stress_same(const patch_site_t *sites, int n, uint64_t *before)
{
  int same = 1;
  for (int k = 0; k < n; k++)
    same &= __atomic_load_n((uint64_t *)sites[k].entry, __ATOMIC_RELAXED) == before[k];
  return same;
}

/* Late patching is refused: while threads call glibc's munmap and madvise,
 * every patch_apply and patch_undo with PATCH_THREADS writes nothing.
 * Before it was refused this wrote and undid the jumps (20000 cycles a
 * run) and 1 run in 300 under load saw a wrong result. */
static void scenario_stress(int rounds)
{
  patch_site_t sites[3];
  char texts[3][PATCH_TEXT_MAX];
  pthread_t th[3];
  uint64_t before[3];
  int refused = 1, same = 1;

  stress_sites(sites, texts);
  for (int k = 0; k < 3; k++)
    before[k] = *(uint64_t *)sites[k].entry;
  for (int i = 0; i < 3; i++)
    pthread_create(&th[i], NULL, stress_thread, NULL);
  while (__atomic_load_n(&stress_calls, __ATOMIC_RELAXED) < 100)
    sched_yield();
  CHECK(patch_threads_running(), "other threads are seen running");
  /* (as many calls as the cycles of old made meanwhile: 15 per round) */
  for (int r = 0; r < rounds || __atomic_load_n(&stress_calls, __ATOMIC_RELAXED) < 15L * rounds;
       r++) {
    refused &= patch_apply(sites, 3, PATCH_THREADS) == 0;
    for (volatile int spin = 0; spin < 2000; spin++)
      ;
    for (int k = 0; k < 3; k++)
      refused &= sites[k].state == PATCH_FAILED && strstr(sites[k].text, "other threads") != NULL;
    refused &= patch_undo(sites, 3, PATCH_THREADS) == 0;
    same &= stress_same(sites, 3, before);
  }
  __atomic_store_n(&stress_stop, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < 3; i++)
    pthread_join(th[i], NULL);
  CHECK(refused, "%d rounds of patch and undo while threads run: each refused every site: %s",
        rounds, sites[0].text);
  CHECK(same, "and libc's code was never written: mmap, munmap and madvise kept their first bytes");
  CHECK(stress_bad == 0, "%ld calls from 3 threads, every result right (%ld wrong)", stress_calls,
        stress_bad);
  stress_wrong_print();
  CHECK(stress_diverted == 0, "none of them was diverted (%ld)", stress_diverted);
  CHECK(libc_munmap(NULL, 0) == -1, "glibc's munmap still works after it all");
}

/* ---- cycles: patch and undo with the callers parked ---------------------- */

/* Worker threads call munmap and madvise through glibc's address and
 * through the program's own symbols (pinheap's interposers), checking every
 * result and whether a call through glibc's address went to the patch's
 * target; between two phases they are parked at a barrier
 * and the main thread patches or undoes the entries (no other thread runs
 * code then, the promise flags 0 makes).  While they call, the main thread
 * tries the opposite with PATCH_THREADS and must be refused. */
#define CYC_THREADS 3
#define CYC_ITER 16
static pthread_barrier_t cyc_start, cyc_end;
static int cyc_patched, cyc_stop;

typedef struct cyc_call_s {
  const char *what;
  int via_libc;
} cyc_call_t;

static long cyc_sym_diverted;   /* calls through the program's symbols that reached it */

/* One call's check of where it went: through glibc's address it reaches
 * the patch's target exactly when patched.  Through the program's symbol
 * it goes to pinheap's interposer first, and where that goes on is
 * pinheap's business: counted, not checked. */
static int cyc_went(const char *call, long calls_before, const void *entry, int via_libc)
{
  long got = my_calls - calls_before;
  if (!via_libc) {
    __atomic_fetch_add(&cyc_sym_diverted, got, __ATOMIC_RELAXED);
    return 0;
  }
  return stress_note(got != cyc_patched, call,
                     cyc_patched ? "1 call to the patch's target" : "no call to the patch's target",
                     got, 0, entry);
}

static long cyc_round(int (*un)(void *, size_t), int (*adv)(void *, size_t, int), char *keep,
                      size_t page, int via_libc)
{
  long bad = 0, rc, c;
  void *p = (void *)syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
  const char *tag = via_libc ? "through glibc's address" : "through the program's symbol";
  char what[4][96];
  snprintf(what[0], sizeof(what[0]), "munmap(p, page) %s", tag);
  snprintf(what[1], sizeof(what[1]), "madvise(keep, page, MADV_DONTNEED) %s", tag);
  snprintf(what[2], sizeof(what[2]), "keep[0] after madvise %s", tag);
  snprintf(what[3], sizeof(what[3]), "munmap(keep + 1, page) %s", tag);
  c = my_calls;
  errno = 0;
  rc = un(p, page);
  bad += stress_note(rc != 0, what[0], "0", rc, errno, (void *)libc_munmap);
  bad += cyc_went(what[0], c, (void *)libc_munmap, via_libc);
  keep[0] = 1;
  c = my_calls;
  errno = 0;
  rc = adv(keep, page, MADV_DONTNEED);
  bad += stress_note(rc != 0, what[1], "0", rc, errno, (void *)libc_madvise);
  bad += cyc_went(what[1], c, (void *)libc_madvise, via_libc);
  bad += stress_note(keep[0] != 0, what[2], "0 (the page zeroed)", keep[0], 0,
                     (void *)libc_madvise);
  c = my_calls;
  errno = 0;
  rc = un(keep + 1, page);
  int err = errno;
  bad += stress_note(rc != -1 || err != EINVAL, what[3], "-1 with errno EINVAL (22)", rc, err,
                     (void *)libc_munmap);
  bad += cyc_went(what[3], c, (void *)libc_munmap, via_libc);
  return bad;
}

static void *cyc_thread(void *arg)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *keep = (char *)syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
  (void)arg;
  for (;;) {
    pthread_barrier_wait(&cyc_start);
    if (__atomic_load_n(&cyc_stop, __ATOMIC_RELAXED))
      break;
    long bad = 0;
    for (int i = 0; i < CYC_ITER; i++) {
      bad += cyc_round(libc_munmap, libc_madvise, keep, page, 1);
      bad += cyc_round(munmap, madvise, keep, page, 0);
    }
    __atomic_fetch_add(&stress_bad, bad, __ATOMIC_RELAXED);
    __atomic_fetch_add(&stress_calls, 6 * CYC_ITER, __ATOMIC_RELAXED);
    pthread_barrier_wait(&cyc_end);
  }
  syscall(SYS_munmap, keep, page);
  return NULL;
}

/* While the workers call: the opposite of the current state with
 * PATCH_THREADS must write nothing.  1 when refused. */
static int cyc_try_late(patch_site_t *sites, uint64_t *now)
{
  int ok = cyc_patched ? patch_undo(sites, 2, PATCH_THREADS) == 0 &&
                             sites[0].state == PATCH_DONE && sites[1].state == PATCH_DONE
                       : patch_apply(sites, 2, PATCH_THREADS) == 0 &&
                             sites[0].state == PATCH_FAILED && sites[1].state == PATCH_FAILED;
  return ok && stress_same(sites, 2, now);
}

static void scenario_cycles(int cycles)
{
  patch_site_t sites[3];
  char texts[3][PATCH_TEXT_MAX];
  pthread_t th[CYC_THREADS];
  uint64_t orig[2], now[2];
  int written = 1, refused = 1, jumps = 1;

  stress_sites(sites, texts);
  for (int k = 0; k < 2; k++)
    orig[k] = *(uint64_t *)sites[k].entry;
  pthread_barrier_init(&cyc_start, NULL, CYC_THREADS + 1);
  pthread_barrier_init(&cyc_end, NULL, CYC_THREADS + 1);
  for (int i = 0; i < CYC_THREADS; i++)
    pthread_create(&th[i], NULL, cyc_thread, NULL);
  for (int phase = 0; phase < 2 * cycles; phase++) {
    /* the workers are parked at cyc_start: no other thread runs code */
    int patch = phase % 2 == 0;
    written &= patch ? patch_apply(sites, 2, 0) == 2 : patch_undo(sites, 2, 0) == 2;
    for (int k = 0; k < 2; k++) {
      now[k] = *(uint64_t *)sites[k].entry;
      jumps &= patch ? ((unsigned char *)sites[k].entry)[0] == 0xe9 : now[k] == orig[k];
    }
    cyc_patched = patch;
    pthread_barrier_wait(&cyc_start);
    refused &= cyc_try_late(sites, now);
    pthread_barrier_wait(&cyc_end);
  }
  __atomic_store_n(&cyc_stop, 1, __ATOMIC_RELAXED);
  pthread_barrier_wait(&cyc_start);
  for (int i = 0; i < CYC_THREADS; i++)
    pthread_join(th[i], NULL);
  CHECK(written && jumps, "%d cycles of patch and undo with the callers parked: each wrote the "
        "jumps, each put glibc's bytes back", cycles);
  CHECK(refused, "while they called, patching or undoing with PATCH_THREADS wrote nothing");
  CHECK(stress_bad == 0, "%ld calls from %d threads, through glibc's address and the program's "
        "symbols, every result and every destination right (%ld wrong)", stress_calls,
        CYC_THREADS, stress_bad);
  stress_wrong_print();
  CHECK(stress_diverted - cyc_sym_diverted == (long)cycles * CYC_THREADS * CYC_ITER * 3,
        "the patched phases' calls through glibc's address all reached the target, the others "
        "none (%ld calls; through the program's symbols %ld more)",
        stress_diverted - cyc_sym_diverted, cyc_sym_diverted);
  CHECK(stress_same(sites, 2, orig), "glibc's munmap and madvise are back to their own code");
}

/* ---- foreign patches ----------------------------------------------------- */

static int fortytwo(void)
{
  return 42;
}

static void scenario_foreign(void)
{
  patch_site_t a, a2, b;
  char a_text[PATCH_TEXT_MAX] = "", a2_text[PATCH_TEXT_MAX] = "", b_text[PATCH_TEXT_MAX] = "";
  memset(&a, 0, sizeof(a));
  memset(&a2, 0, sizeof(a2));
  memset(&b, 0, sizeof(b));
  a.text = a_text;
  a2.text = a2_text;
  b.text = b_text;
  a.name = a2.name = "patchfix_a";
  b.name = "patchfix_b";
  a.target = a2.target = b.target = (void *)fortytwo;
  a.entry = a2.entry = (void *)patchfix_a;
  b.entry = (void *)patchfix_b;

  CHECK(patchfix_a() == 7 && patch_apply(&a, 1, 0) == 1 && a.state == PATCH_DONE &&
            patchfix_a() == 42,
        "a function laid out as glibc's is patched: it now returns 42%s",
        a.via != NULL ? " (through a trampoline page near it)" : "");
  CHECK(patch_apply(&a2, 1, 0) == 0 && a2.state == PATCH_FOREIGN && patchfix_a() == 42,
        "patched again by another site (as another pinheap would): left alone, %s", a2.text);
  CHECK(patch_undo(&a, 1, 0) == 1 && patchfix_a() == 7, "undone: it returns 7 again");

  unsigned char before[16];
  CHECK(patchfix_mimic_foreign((void *)patchfix_b, (void *)patchfix_foreign) == 0 &&
            patchfix_b() == 99,
        "the fixture rewrites patchfix_b as UCX or Open MPI would (movabs + jmp *%%r11)");
  memcpy(before, (void *)patchfix_b, sizeof(before));
  CHECK(patch_apply(&b, 1, 0) == 0 && b.state == PATCH_FOREIGN &&
            memcmp(before, (void *)patchfix_b, sizeof(before)) == 0 && patchfix_b() == 99,
        "an entry patched by someone else is left alone, byte for byte");
  CHECK(strstr(b.text, "movabs") != NULL && strstr(b.text, "libpatch_fix") != NULL,
        "and the text says what it jumps to: %s", b.text);
}

/* ---- texts left untouched ----------------------------------------------- */

/* A site's text is written only to say why it was not patched: start-up
 * neither reads nor writes the text of a site that was patched, so the
 * pages of a table of texts stay untouched (3 page faults fewer at
 * start-up).  The text lies in a PROT_NONE page here: a read of it is a
 * crash. */
static void scenario_quiet(void)
{
  long pg = sysconf(_SC_PAGESIZE);
  char *none = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  patch_site_t a, b;
  char b_text[PATCH_TEXT_MAX] = "an earlier try's account";

  CHECK(none != MAP_FAILED, "a PROT_NONE page for the text (errno %d)", errno);
  if (none == MAP_FAILED)
    return;
  memset(&a, 0, sizeof(a));
  a.name = "patchfix_a";
  a.target = (void *)fortytwo;
  a.entry = (void *)patchfix_a;
  a.text = none;
  CHECK(patchfix_a() == 7 && patch_apply(&a, 1, 0) == 1 && a.state == PATCH_DONE && !a.said &&
            patchfix_a() == 42,
        "a site patched at the first try: its text, in a PROT_NONE page, was neither read "
        "nor written");
  CHECK(patch_undo(&a, 1, 0) == 1 && patchfix_a() == 7, "undone: it returns 7 again");

  /* a text said before (a refused try) is emptied when the site is patched */
  memset(&b, 0, sizeof(b));
  b.name = "patchfix_a";
  b.target = (void *)fortytwo;
  b.entry = (void *)patchfix_a;
  b.text = b_text;
  b.said = 1;
  CHECK(patch_apply(&b, 1, 0) == 1 && b.state == PATCH_DONE && !b.said && b_text[0] == '\0' &&
            patchfix_a() == 42,
        "a site whose earlier try said why it failed: patched now, and its text emptied");
  CHECK(patch_undo(&b, 1, 0) == 1 && patchfix_a() == 7, "undone again");
  munmap(none, (size_t)pg);
}

/* ---- no heap made by the start-up ----------------------------------------- */

/* The installation verifies malloc by identity when the process's malloc and
 * free are pinheap's own (here: interposed): start-up makes no block, so
 * the heap has no segment until the program allocates (13 page faults fewer
 * for a program that never does).  Asked first thing in main, before this
 * test's own output allocates. */
static void scenario_lazy(void)
{
  mstate_t *h = heap_main_get();
  size_t before = h != NULL ? ms_info(h).arena : 0;
  const pinheap_install_info_t *ii = info_of("malloc");
  CHECK(ii != NULL && ii->verified && PINHEAP_NAME(enabled)() == 1,
        "malloc is installed and verified, pinheap enabled");
  CHECK(before == 0, "no heap segment before the program's first malloc (%zu bytes)", before);
  void *p = malloc(48);
  CHECK(p != NULL && PINHEAP_NAME(owns)(p), "the first malloc is pinheap's");
  free(p);
}

static void scenario_taken(void)
{
  const pinheap_install_info_t *ii = info_of("shmdt");
  CHECK(ii != NULL && ii->code == PINHEAP_CODE_FOREIGN && ii->code_text != NULL &&
            strstr(ii->code_text, "libpatch_fix") != NULL,
        "libc's shmdt, rewritten before pinheap started, is left alone and named: %s",
        ii != NULL && ii->code_text ? ii->code_text : "(none)");
  ii = info_of("munmap");
  CHECK(ii != NULL && ii->code == PINHEAP_CODE_PATCHED, "the others are patched all the same");
  CHECK(strstr(PINHEAP_NAME(install_text)(), "already patched by someone else") != NULL,
        "the installation text says so: %s", PINHEAP_NAME(install_text)());
  int before = patchfix_shmdt_calls;
  int (*libc_shmdt)(const void *) = (int (*)(const void *))libc_fn("shmdt");
  CHECK(libc_shmdt != NULL && libc_shmdt((void *)0x1000) == -1 && patchfix_shmdt_calls > before,
        "glibc's shmdt still goes to the other patcher");
}

int main(int argc, char **argv)
{
  const char *s = argc > 1 ? argv[1] : "";
#if !defined(__x86_64__)
  printf("SKIP %s: code patching is implemented for x86-64 only\n", s);
  return 77;
#endif
  if (strcmp(s, "events") == 0)
    scenario_events();
  else if (strcmp(s, "glibc") == 0)
    scenario_glibc();
  else if (strcmp(s, "nopatch") == 0)
    scenario_nopatch();
  else if (strcmp(s, "stress") == 0)
    scenario_stress(argc > 2 ? atoi(argv[2]) : 20000);
  else if (strcmp(s, "cycles") == 0)
    scenario_cycles(argc > 2 ? atoi(argv[2]) : 2000);
  else if (strcmp(s, "foreign") == 0)
    scenario_foreign();
  else if (strcmp(s, "taken") == 0)
    scenario_taken();
  else if (strcmp(s, "quiet") == 0)
    scenario_quiet();
  else if (strcmp(s, "lazy") == 0)
    scenario_lazy();
  else {
    fprintf(stderr, "usage: test_patch events|glibc|nopatch|stress [rounds]|cycles [cycles]|foreign|taken|quiet|lazy\n");
    return 2;
  }
  printf("%s: %d failure%s\n", s, failures, failures == 1 ? "" : "s");
  return failures != 0;
}
