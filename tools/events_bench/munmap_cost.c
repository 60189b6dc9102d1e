/*
 * munmap_cost.c -- what an event costs: ns per munmap of a fresh page
 * through pinheap's entry point (interposed: the executable links the
 * archive) with no handler, with one VM_UNMAPPED handler, and with one
 * MUNMAP call handler, against the bare system call.  Each page is mapped
 * with the raw system call outside the timed part's accounting of munmap:
 * the loop times map+unmap pairs and subtracts the raw pair, the four
 * configurations interleaved in every round, medians of 9 rounds.
 * A fifth, "patched": glibc's own munmap (its address in libc, which code
 * patching made jump to pinheap -- the path glibc's internal calls take)
 * with one VM_UNMAPPED handler; left out (null) when libc's munmap is not
 * patched.  Prints one JSON line.
 * usage: munmap_cost [iterations]
 *        munmap_cost --only raw|none|vm_unmapped|munmap|patched N
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pinheap.h"

static long calls;

static int on_unmapped(int type, pinheap_event_t *ev, void *arg)
{
  (void)type; (void)ev; (void)arg;
  calls++;
  return PINHEAP_EVENT_PASS;
}

static double now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *raw_map(size_t pg)
{
  return (void *)syscall(SYS_mmap, NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
}

enum { CFG_RAW, CFG_NONE, CFG_VM, CFG_CALL, CFG_PATCHED, CFG_N };
static const char *const cfg_name[CFG_N] = { "raw", "none", "vm_unmapped", "munmap", "patched" };
static int (*libc_munmap)(void *, size_t);   /* glibc's own, NULL unless code-patched */

static void libc_munmap_find(void)
{
  void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
  unsigned char *fn = libc != NULL ? dlsym(libc, "munmap") : NULL;
  if (fn != NULL && fn[0] == 0xe9)           /* jmp rel32: code-patched */
    libc_munmap = (int (*)(void *, size_t))fn;
}

static void cfg_set(int cfg, int on)
{
  int type = cfg == CFG_VM || cfg == CFG_PATCHED ? PINHEAP_EVENT_VM_UNMAPPED
             : cfg == CFG_CALL                    ? PINHEAP_EVENT_MUNMAP : 0;
  if (type == 0)
    return;
  if (on)
    PINHEAP_NAME(set_event_handler)(type, 0, on_unmapped, NULL);
  else
    PINHEAP_NAME(unset_event_handler)(type, on_unmapped, NULL);
}

/* n (raw map + unmap) pairs: CFG_RAW unmaps by system call, the others
 * through munmap() (pinheap's entry point) with cfg's handler set. */
static void pairs(long n, int cfg)
{
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  for (long i = 0; i < n; i++) {
    void *p = raw_map(pg);
    if (cfg == CFG_RAW)
      syscall(SYS_munmap, p, pg);
    else if (cfg == CFG_PATCHED)
      libc_munmap(p, pg);
    else
      munmap(p, pg);
  }
}

static double pairs_ns(long n, int cfg)
{
  cfg_set(cfg, 1);
  double t0 = now_ns();
  pairs(n, cfg);
  double t = (now_ns() - t0) / (double)n;
  cfg_set(cfg, 0);
  return t;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#define ROUNDS 9

int main(int argc, char **argv)
{
  long n = 20000;
  int only = -1;

  /* --only CFG N: one configuration alone, for instruction counts
   * (callgrind: the difference of two N gives instructions per call) */
  if (argc == 4 && strcmp(argv[1], "--only") == 0) {
    for (int c = 0; c < CFG_N; c++)
      if (strcmp(argv[2], cfg_name[c]) == 0)
        only = c;
    if (only < 0) {
      fprintf(stderr, "munmap_cost: unknown configuration '%s' (expected raw, none, vm_unmapped, "
              "munmap or patched)\n", argv[2]);
      return 2;
    }
    argv += 2;
    argc -= 2;
  }
  if (argc > 1) {
    char *end;
    n = strtol(argv[1], &end, 10);
    if (*end != '\0' || n <= 0) {
      fprintf(stderr, "munmap_cost: iterations must be a positive number, got '%s'\n", argv[1]);
      return 2;
    }
  }
  libc_munmap_find();
  if (only == CFG_PATCHED && libc_munmap == NULL) {
    fprintf(stderr, "munmap_cost: glibc's munmap is not code-patched (PINHEAP_CODE_PATCH=0, "
            "valgrind without PINHEAP_MODE=on, or not x86-64)\n");
    return 1;
  }
  if (only >= 0) {
    cfg_set(only, 1);
    pairs(n, only);
    cfg_set(only, 0);
    long want = only == CFG_VM || only == CFG_CALL || only == CFG_PATCHED ? n : 0;
    if (calls != want) {
      fprintf(stderr, "munmap_cost: the handler ran %ld times, expected %ld\n", calls, want);
      return 1;
    }
    return 0;
  }

  /* every round times all four, in a rotating order: drift hits them alike */
  int ncfg = libc_munmap != NULL ? CFG_N : CFG_PATCHED;
  double t[CFG_N][ROUNDS], d[CFG_N][ROUNDS];
  pairs(n / 10 + 1, CFG_NONE);                /* warm up */
  for (int r = 0; r < ROUNDS; r++)
    for (int k = 0; k < ncfg; k++) {
      int c = (k + r) % ncfg;
      t[c][r] = pairs_ns(n, c);
    }
  long want = (ncfg == CFG_N ? 3L : 2L) * ROUNDS * n;
  if (calls != want) {
    fprintf(stderr, "munmap_cost: the handler ran %ld times, expected %ld\n", calls, want);
    return 1;
  }
  for (int c = 0; c < ncfg; c++) {
    for (int r = 0; r < ROUNDS; r++)
      d[c][r] = t[c][r] - t[CFG_RAW][r];
    qsort(t[c], ROUNDS, sizeof(double), cmp);
    qsort(d[c], ROUNDS, sizeof(double), cmp);
  }
  printf("{\"iterations\": %ld, \"rounds\": %d, \"raw_pair_ns\": %.1f", n, ROUNDS, t[CFG_RAW][ROUNDS / 2]);
  for (int c = CFG_NONE; c < ncfg; c++)
    printf(", \"%s_pair_ns\": %.1f, \"%s_added_ns\": %.1f", cfg_name[c], t[c][ROUNDS / 2], cfg_name[c],
           d[c][ROUNDS / 2]);
  if (ncfg < CFG_N)
    printf(", \"patched_pair_ns\": null, \"patched_added_ns\": null");
  printf("}\n");
  return 0;
}
