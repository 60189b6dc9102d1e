/*
 * scenarios.c -- one list of release scenarios, run against one observer:
 * pinheap's VM_UNMAPPED events (SBS_PINHEAP: the core library one level
 * deep, as libopen-pal is), UCX's libucm VM_UNMAPPED events (SBS_UCX), or
 * none (the start-up baseline).  tools/sidebyside/run.py runs the three and
 * prints which releases each heard and the start-up each added.
 *
 * Each scenario watches the range it is about to release and says "heard"
 * when the observer was told of any part of it before the call returned;
 * otherwise "kept" when the range is still mapped with every page resident
 * (the allocator or libc kept it: nothing was released), else "missed";
 * "skip" (with the reason) when the scenario cannot run here.  Usage: sbs_X [--startup] [scenario...]; no scenario: all.
 * --startup sets the observer up and exits (for the start-up timing).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#if defined(SBS_UCX)
#include <ucm/api/ucm.h>
#define SBS_NAME "ucx"
#elif defined(SBS_PINHEAP)
#include "pinheap.h"
#define SBS_NAME "pinheap"
#else
#define SBS_NAME "none"
#endif

/* Not static: munmap and friends are declared leaf, so the compiler may
 * assume a call does not reach this file's handlers. */
volatile uintptr_t sbs_lo, sbs_hi;
volatile int sbs_heard;
int sbs_kept;               /* the allocator kept the range: nothing to hear */

static void sbs_seen(void *addr, size_t len)
{
  uintptr_t a = (uintptr_t)addr;
  if (a < sbs_hi && sbs_lo < a + len)
    sbs_heard++;
}

static void watch(const void *p, size_t len)
{
  sbs_heard = 0;
  sbs_lo = (uintptr_t)p;
  sbs_hi = (uintptr_t)p + len;
}

/* Stops watching (the count stays): a scenario's clean-up is not heard. */
static void unwatch(void)
{
  sbs_lo = sbs_hi = 0;
}

#if defined(SBS_UCX)
static void sbs_ucx_cb(ucm_event_type_t type, ucm_event_t *ev, void *arg)
{
  (void)type;
  (void)arg;
  sbs_seen(ev->vm_unmapped.address, ev->vm_unmapped.size);
}

static const char *observer_start(void)
{
  ucs_status_t st = ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, 0, sbs_ucx_cb, NULL);
  return st == UCS_OK ? NULL : ucs_status_string(st);
}
#elif defined(SBS_PINHEAP)
#define STR2(x) #x
#define STR(x) STR2(x)
static int sbs_pinheap_cb(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)arg;
  sbs_seen(ev->vm_unmapped.address, ev->vm_unmapped.size);
  return PINHEAP_EVENT_PASS;
}

static const char *observer_start(void)
{
  /* the program does not link the core library: its API by dlsym */
  int (*set)(int, int, pinheap_event_cb *, void *) =
      (int (*)(int, int, pinheap_event_cb *, void *))dlsym(
          RTLD_DEFAULT, STR(PINHEAP_NAME(set_event_handler)));
  if (set == NULL)
    return "pinheap's set_event_handler not found";
  return set(PINHEAP_EVENT_VM_UNMAPPED, 0, sbs_pinheap_cb, NULL) == 0 ? NULL
                                                                     : "set_event_handler failed";
}
#else
static const char *observer_start(void)
{
  return NULL;
}
#endif

/* After a release that an allocator or libc may decline (free, trim,
 * realloc, a thread's exit, dlclose): 1 when the watched range is still
 * mapped and every page of it resident -- it was kept, not released. */
static int watched_kept(void)
{
  static unsigned char vec[1 << 16];
  uintptr_t lo = sbs_lo & ~(uintptr_t)4095;
  size_t pages = (sbs_hi - lo + 4095) / 4096;
  for (size_t done = 0; done < pages; done += sizeof(vec)) {
    size_t n = pages - done < sizeof(vec) ? pages - done : sizeof(vec);
    if (mincore((void *)(lo + done * 4096), n * 4096, vec) != 0)
      return 0;             /* part of it is unmapped */
    for (size_t i = 0; i < n; i++)
      if (!(vec[i] & 1))
        return 0;           /* a page lost its backing */
  }
  return 1;
}

/* ---- the scenarios: each returns NULL (ran) or why it was skipped ------- */

static const char *sc_free_large(void)
{
  size_t len = 64u << 20;
  char *p = malloc(len);
  if (p == NULL)
    return "malloc(64 MiB) failed";
  memset(p, 1, len);
  watch(p + 4096, len - 8192);
  free(p);
  sbs_kept = watched_kept();
  return NULL;
}

static const char *sc_malloc_trim(void)
{
  enum { N = 256 };
  static char *b[N];
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < N; i++) {
    b[i] = malloc(60000);     /* below glibc's mmap threshold */
    if (b[i] == NULL)
      return "malloc failed";
    memset(b[i], 1, 60000);
  }
  for (int i = 0; i < N; i++) {
    lo = (uintptr_t)b[i] < lo ? (uintptr_t)b[i] : lo;
    hi = (uintptr_t)b[i] + 60000 > hi ? (uintptr_t)b[i] + 60000 : hi;
  }
  for (int i = 0; i < N; i++)
    free(b[i]);
  watch((void *)lo, hi - lo);
  malloc_trim(0);
  sbs_kept = watched_kept();
  return NULL;
}

static const char *sc_realloc_shrink(void)
{
  size_t len = 32u << 20;
  char *p = malloc(len);
  if (p == NULL)
    return "malloc(32 MiB) failed";
  memset(p, 1, len);
  watch(p + (2u << 20), len - (2u << 20));
  char *q = realloc(p, 1u << 20);
  sbs_kept = watched_kept();
  unwatch();
  free(q != NULL ? q : p);
  return NULL;
}

static const char *sc_munmap(void)
{
  size_t len = 1u << 20;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return "mmap failed";
  memset(p, 1, len);
  watch(p, len);
  munmap(p, len);
  return NULL;
}

static const char *sc_mremap_move(void)
{
  size_t len = 1u << 20;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return "mmap failed";
  memset(p, 1, len);
  /* a guard after it, so that growing must move */
  char *g = mmap(p + len, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  watch(p, len);
  char *q = mremap(p, len, 4 * len, MREMAP_MAYMOVE);
  if (g != MAP_FAILED)
    munmap(g, 4096);
  munmap(q != MAP_FAILED ? q : p, q != MAP_FAILED ? 4 * len : len);
  return NULL;
}

static const char *sc_mremap_fixed_target(void)
{
  size_t len = 1u << 20;
  char *src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (src == MAP_FAILED || dst == MAP_FAILED)
    return "mmap failed";
  memset(src, 1, len);
  memset(dst, 2, len);
  watch(dst, len);            /* the target's old pages go */
  char *q = mremap(src, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
  unwatch();
  munmap(q != MAP_FAILED ? q : dst, len);
  if (q == MAP_FAILED)
    munmap(src, len);
  return NULL;
}

static const char *sc_madvise_dontneed(void)
{
  size_t len = 1u << 20;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return "mmap failed";
  memset(p, 1, len);
  watch(p, len);
  madvise(p, len, MADV_DONTNEED);
  unwatch();
  munmap(p, len);
  return NULL;
}

static const char *sc_mmap_fixed_over(void)
{
  size_t len = 1u << 20;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return "mmap failed";
  memset(p, 1, len);
  watch(p, len);
  mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  unwatch();
  munmap(p, len);
  return NULL;
}

static const char *sc_shmdt(void)
{
  size_t len = 1u << 20;
  int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
  if (id < 0)
    return "shmget refused here";
  char *p = shmat(id, NULL, 0);
  shmctl(id, IPC_RMID, NULL);
  if (p == (void *)-1)
    return "shmat failed";
  memset(p, 1, len);
  watch(p, len);
  shmdt(p);
  return NULL;
}

static const char *sc_brk_shrink(void)
{
  intptr_t len = 1 << 20;
  char *old = sbrk(0);
  if (sbrk(len) == (void *)-1)
    return "sbrk refused";
  memset(old, 1, (size_t)len);
  watch(old, (size_t)len);
  sbrk(-len);
  return NULL;
}

static void *sc_stack_thread(void *arg)
{
  pthread_attr_t a;
  void *base;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &a) == 0) {
    pthread_attr_getstack(&a, &base, &size);
    pthread_attr_destroy(&a);
    *(void **)arg = base;
    ((size_t *)arg)[1] = size;
  }
  return NULL;
}

static const char *sc_thread_stack(void)
{
  /* a stack bigger than glibc's stack cache (40 MiB): glibc unmaps it
   * itself when the next thread starts or this one is joined */
  uintptr_t out[2] = { 0, 0 };
  pthread_attr_t a;
  pthread_t t;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 64u << 20);
  if (pthread_create(&t, &a, sc_stack_thread, out) != 0)
    return "pthread_create failed";
  pthread_join(t, NULL);
  pthread_attr_destroy(&a);
  if (out[0] == 0)
    return "pthread_getattr_np failed";
  watch((void *)out[0], (size_t)out[1]);
  /* another thread: glibc frees cached stacks past the limit now */
  pthread_attr_init(&a);
  if (pthread_create(&t, &a, sc_stack_thread, (uintptr_t[2]){ 0, 0 }) == 0)
    pthread_join(t, NULL);
  pthread_attr_destroy(&a);
  sbs_kept = watched_kept();
  return NULL;
}

static int sc_plugin_range(struct dl_phdr_info *info, size_t size, void *data)
{
  uintptr_t *r = data;
  (void)size;
  if (info->dlpi_name == NULL || strstr(info->dlpi_name, "libsbsplugin.so") == NULL)
    return 0;
  r[0] = UINTPTR_MAX;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    r[0] = lo < r[0] ? lo : r[0];
    r[1] = hi > r[1] ? hi : r[1];
  }
  return 1;
}

static const char *sc_dlclose(void)
{
  uintptr_t r[2] = { 0, 0 };
  void *h = dlopen(SBS_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    return "dlopen of the plug-in failed";
  dl_iterate_phdr(sc_plugin_range, r);
  if (r[1] == 0)
    return "plug-in not found among the loaded objects";
  watch((void *)r[0], r[1] - r[0]);
  dlclose(h);
  sbs_kept = watched_kept();
  return NULL;
}

static const struct {
  const char *name;
  const char *(*run)(void);
  const char *what;
} scenarios[] = {
  { "free_large", sc_free_large, "free of a 64 MiB block" },
  { "malloc_trim", sc_malloc_trim, "malloc_trim after freeing 15 MiB of 60 KB blocks" },
  { "realloc_shrink", sc_realloc_shrink, "realloc of 32 MiB down to 1 MiB" },
  { "munmap", sc_munmap, "munmap" },
  { "mremap_move", sc_mremap_move, "mremap that moves" },
  { "mremap_fixed", sc_mremap_fixed_target, "mremap MREMAP_FIXED over a mapped target" },
  { "madvise", sc_madvise_dontneed, "madvise(MADV_DONTNEED)" },
  { "mmap_fixed", sc_mmap_fixed_over, "mmap(MAP_FIXED) over a mapping" },
  { "shmdt", sc_shmdt, "shmdt" },
  { "brk_shrink", sc_brk_shrink, "sbrk shrink" },
  { "thread_stack", sc_thread_stack, "a 64 MiB thread stack glibc unmaps" },
  { "dlclose", sc_dlclose, "dlclose of a plug-in" },
};

int main(int argc, char **argv)
{
  int startup = argc > 1 && strcmp(argv[1], "--startup") == 0;
  const char *why = observer_start();
  if (why != NULL) {
    printf("observer %s: %s\n", SBS_NAME, why);
    return 2;
  }
  if (startup)
    return 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  size_t n = sizeof(scenarios) / sizeof(scenarios[0]);
  for (int k = 1; k < argc; k++) {
    int known = 0;
    for (size_t i = 0; i < n; i++)
      known |= strcmp(argv[k], scenarios[i].name) == 0;
    if (!known) {
      fprintf(stderr, "sbs: unknown scenario '%s' (expected --startup or one of:", argv[k]);
      for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %s", scenarios[i].name);
      fprintf(stderr, ")\n");
      return 64;
    }
  }
  for (size_t i = 0; i < n; i++) {
    int wanted = argc == 1;
    for (int k = 1; k < argc && !wanted; k++)
      wanted = strcmp(argv[k], scenarios[i].name) == 0;
    if (!wanted)
      continue;
    sbs_kept = 0;
    const char *skip = scenarios[i].run();
    int heard = sbs_heard;
    unwatch();
    if (skip != NULL)
      printf("%s %s skip %s\n", SBS_NAME, scenarios[i].name, skip);
    else
      printf("%s %s %s\n", SBS_NAME, scenarios[i].name,
             heard > 0 ? "heard" : sbs_kept ? "kept" : "missed");
  }
  return 0;
}
