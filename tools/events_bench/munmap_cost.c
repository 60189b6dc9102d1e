/*
 * munmap_cost.c -- what an event costs: ns per munmap of a fresh page
 * through pinheap's entry point (interposed: the executable links the
 * archive) with no handler, with one VM_UNMAPPED handler, and with one
 * MUNMAP call handler, against the bare system call.  Each page is mapped
 * with the raw system call outside the timed part's accounting of munmap:
 * the loop times map+unmap pairs and subtracts the raw pair, the four
 * configurations interleaved in every round, medians of 9 rounds.
 * Prints one JSON line.  usage: munmap_cost [iterations]
 *                               munmap_cost --only raw|none|vm_unmapped|munmap N
 */
#define _GNU_SOURCE
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

enum { CFG_RAW, CFG_NONE, CFG_VM, CFG_CALL, CFG_N };
static const char *const cfg_name[CFG_N] = { "raw", "none", "vm_unmapped", "munmap" };

static void cfg_set(int cfg, int on)
{
  int type = cfg == CFG_VM ? PINHEAP_EVENT_VM_UNMAPPED : cfg == CFG_CALL ? PINHEAP_EVENT_MUNMAP : 0;
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
      fprintf(stderr, "munmap_cost: unknown configuration '%s' (expected raw, none, vm_unmapped "
              "or munmap)\n", argv[2]);
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
  if (only >= 0) {
    cfg_set(only, 1);
    pairs(n, only);
    cfg_set(only, 0);
    long want = only == CFG_VM || only == CFG_CALL ? n : 0;
    if (calls != want) {
      fprintf(stderr, "munmap_cost: the handler ran %ld times, expected %ld\n", calls, want);
      return 1;
    }
    return 0;
  }

  /* every round times all four, in a rotating order: drift hits them alike */
  double t[CFG_N][ROUNDS], d[CFG_N][ROUNDS];
  pairs(n / 10 + 1, CFG_NONE);                /* warm up */
  for (int r = 0; r < ROUNDS; r++)
    for (int k = 0; k < CFG_N; k++) {
      int c = (k + r) % CFG_N;
      t[c][r] = pairs_ns(n, c);
    }
  if (calls != 2L * ROUNDS * n) {
    fprintf(stderr, "munmap_cost: the handler ran %ld times, expected %ld\n", calls, 2L * ROUNDS * n);
    return 1;
  }
  for (int c = 0; c < CFG_N; c++) {
    for (int r = 0; r < ROUNDS; r++)
      d[c][r] = t[c][r] - t[CFG_RAW][r];
    qsort(t[c], ROUNDS, sizeof(double), cmp);
    qsort(d[c], ROUNDS, sizeof(double), cmp);
  }
  printf("{\"iterations\": %ld, \"rounds\": %d, \"raw_pair_ns\": %.1f", n, ROUNDS, t[CFG_RAW][ROUNDS / 2]);
  for (int c = CFG_NONE; c < CFG_N; c++)
    printf(", \"%s_pair_ns\": %.1f, \"%s_added_ns\": %.1f", cfg_name[c], t[c][ROUNDS / 2], cfg_name[c],
           d[c][ROUNDS / 2]);
  printf("}\n");
  return 0;
}
