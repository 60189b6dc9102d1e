/*
 * watch_cost.c -- what watches cost (issue 29's targets), in a process
 * whose munmap is pinheap's interposer (the executable links the archive):
 *
 *   watch_cost check N          N validity checks through watch_check_once()
 *                               (noinline, for callgrind and objdump)
 *   watch_cost release W N [P]  W watches that no release meets (4 KiB each,
 *                               side by side over a reserved, never touched
 *                               region of P pages, P = W by default: give
 *                               every configuration the same P, so that the
 *                               kernel's layout of mappings is the same), then N map+munmap pairs of a fresh
 *                               page (untouched: the cheapest release,
 *                               so the handler's share is largest), timed; W = -1: no watch was ever made
 *                               (the handler is not registered), W = 0: one
 *                               made and dropped (the handler runs, finds
 *                               none).  Prints "ns_per_release <x>".
 *   watch_cost scatter W N [P]  the same, but the N releases fall between
 *                               the watches: a reserved region of 2P pages,
 *                               W watches on its even
 *                               pages, and each release an odd page picked
 *                               at random (munmap, then mapped again with
 *                               MAP_FIXED_NOREPLACE, which releases
 *                               nothing): the index's path differs each
 *                               time, out of cache.
 *   watch_cost sparse W N [P]   the watches at random places: a reserved
 *                               region of 64P pages, one watch of a page
 *                               at a random page of each of the first W
 *                               blocks of 64 pages, each release a random
 *                               other page of a random one of those blocks
 *                               (refilled as in scatter).
 *   watch_cost audited N [raw]  N times: a page mapped and touched, watched
 *                               (with PINHEAP_AUDIT=1 its page registered
 *                               with userfaultfd), unmapped -- through
 *                               pinheap (announced), or with raw: by the
 *                               syscall instruction (what the audit
 *                               catches) -- and unwatched; only the munmap
 *                               timed (wall clock: the releaser waits for
 *                               the audit's reader).  Prints
 *                               "ns_per_munmap <x>" (run it with the audit
 *                               off and on: the difference is the cost per
 *                               audited release).
 *
 * tools/events_bench/watch_bench.py runs it (interleaved runs, medians).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pinheap.h"

__attribute__((noinline)) int watch_check_once(const pinheap_watch_t *t);
__attribute__((noinline)) int watch_check_once(const pinheap_watch_t *t)
{
  return PINHEAP_NAME(watch_valid)(t);
}

static double now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);   /* user + system: steadier on a shared machine */
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int fail(const char *what, int err)
{
  fprintf(stderr, "watch_cost: %s: %s\n", what, strerror(err));
  return 1;
}

/* w >= 0: one watch made and dropped, so that the handler is set. */
static int arm(long w)
{
  static char c;
  const pinheap_watch_t *t;
  if (w < 0)
    return 0;
  int rc = PINHEAP_NAME(watch)(&c, 1, &t);
  if (rc != 0)
    return fail("watch", rc);
  PINHEAP_NAME(unwatch)(t);
  return 0;
}

/* arm(w), then a reserved region of `pages` pages, never touched, with
 * w > 0 watches of a page each, every stride pages.  NULL on failure. */
static char *region(long w, long pages, long stride, size_t pg)
{
  const pinheap_watch_t *t;
  if (arm(w) != 0)
    return NULL;
  char *r = mmap(NULL, (size_t)pages * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (r == MAP_FAILED) {
    fail("mmap of the region", errno);
    return NULL;
  }
  for (long i = 0; i < w; i++) {
    int rc = PINHEAP_NAME(watch)(r + i * stride * (long)pg, pg, &t);
    if (rc != 0) {
      fail("watch", rc);
      return NULL;
    }
  }
  return r;
}

static int check(long n)
{
  static char c;
  const pinheap_watch_t *t;
  if (PINHEAP_NAME(watch)(&c, 1, &t) != 0)
    return 1;
  long valid = 0;
  for (long i = 0; i < n; i++)
    valid += watch_check_once(t);
  printf("checks %ld valid %ld\n", n, valid);
  return valid == n ? 0 : 1;
}

static int release(long w, long n, long pages)
{
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);

  if (region(w, pages, 1, pg) == NULL)
    return 1;
  /* warm up, then time map+munmap pairs (mmap fires no VM_UNMAPPED) */
  double t0 = 0;
  for (long i = -n / 10; i < n; i++) {
    if (i == 0)
      t0 = now_ns();
    void *p = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return fail("mmap", errno);
    munmap(p, pg);
  }
  printf("ns_per_release %.1f\n", (now_ns() - t0) / (double)n);
  return 0;
}

static unsigned long xorshift(unsigned long *x)
{
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* The release timed by scatter and sparse: page p of a reserved region
 * unmapped, then mapped again (MAP_FIXED_NOREPLACE releases nothing). */
static int hole(char *p, size_t pg)
{
  munmap(p, pg);
  if (mmap(p, pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
           -1, 0) != p)
    return fail("mmap of the hole", errno);
  return 0;
}

static int scatter(long w, long n, long pages)
{
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  pages *= 2;

  char *r = region(w, pages, 2, pg);
  if (r == NULL)
    return 1;
  unsigned long x = 88172645463325252UL;
  double t0 = 0;
  for (long i = -n / 10; i < n; i++) {
    if (i == 0)
      t0 = now_ns();
    char *p = r + (2 * (long)(xorshift(&x) % (unsigned long)(pages / 2)) + 1) * pg;
    if (hole(p, pg) != 0)
      return 1;
  }
  printf("ns_per_release %.1f\n", (now_ns() - t0) / (double)n);
  return 0;
}

static int sparse(long w, long n, long pages)
{
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  const pinheap_watch_t *t;

  if (arm(w) != 0)
    return 1;
  char *r = mmap(NULL, (size_t)pages * 64 * pg, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  unsigned char *at = malloc((size_t)pages);
  if (r == MAP_FAILED || at == NULL)
    return fail("mmap of the region", errno);
  unsigned long x = 88172645463325252UL;
  for (long i = 0; i < pages; i++) {
    at[i] = (unsigned char)(xorshift(&x) % 64);
    if (i < w && PINHEAP_NAME(watch)(r + (64 * i + at[i]) * (long)pg, pg, &t) != 0)
      return fail("watch", EINVAL);
  }
  long blocks = w > 0 ? w : pages;
  double t0 = 0;
  for (long i = -n / 10; i < n; i++) {
    if (i == 0)
      t0 = now_ns();
    long b = (long)(xorshift(&x) % (unsigned long)blocks);
    long k = (long)(xorshift(&x) % 63);
    char *p = r + (64 * b + (k >= at[b] ? k + 1 : k)) * (long)pg;   /* not the watched page */
    if (hole(p, pg) != 0)
      return 1;
  }
  printf("ns_per_release %.1f\n", (now_ns() - t0) / (double)n);
  return 0;
}

static long raw_munmap(void *p, size_t len)
{
#if defined(__x86_64__)
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"((long)SYS_munmap), "D"(p), "S"(len)
                   : "rcx", "r11", "memory");
  return ret;
#else
  return syscall(SYS_munmap, p, len);   /* pinheap's: announced */
#endif
}

static int audited(long n, int raw)
{
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  double spent = 0;
  struct timespec a, b;

  for (long i = -n / 10; i < n; i++) {
    char *p = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return fail("mmap", errno);
    p[0] = 1;
    const pinheap_watch_t *t;
    int rc = PINHEAP_NAME(watch)(p, 64, &t);
    if (rc != 0)
      return fail("watch", rc);
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (raw)
      raw_munmap(p, pg);
    else
      munmap(p, pg);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (i >= 0)
      spent += (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    PINHEAP_NAME(unwatch)(t);
  }
  printf("ns_per_munmap %.1f unannounced %zu\n", spent / (double)n,
         PINHEAP_NAME(watch_unannounced)());
  return 0;
}

int main(int argc, char **argv)
{
  if (argc >= 3 && argc <= 4 && strcmp(argv[1], "audited") == 0)
    return audited(atol(argv[2]), argc == 4 && strcmp(argv[3], "raw") == 0);
  if (argc == 3 && strcmp(argv[1], "check") == 0)
    return check(atol(argv[2]));
  long w = argc >= 4 ? atol(argv[2]) : 0;
  long pages = argc == 5 ? atol(argv[4]) : w > 0 ? w : 1;
  if (argc >= 4 && argc <= 5 && pages >= (w > 0 ? w : 1)) {
    if (strcmp(argv[1], "release") == 0)
      return release(w, atol(argv[3]), pages);
    if (strcmp(argv[1], "scatter") == 0)
      return scatter(w, atol(argv[3]), pages);
    if (strcmp(argv[1], "sparse") == 0)
      return sparse(w, atol(argv[3]), pages);
  }
  fprintf(stderr, "usage: watch_cost check N | watch_cost release|scatter|sparse W N [P >= W, 1] | "
                  "watch_cost audited N [raw]\n");
  return 2;
}
