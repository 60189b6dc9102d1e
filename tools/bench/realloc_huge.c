/*
 * realloc_huge.c -- times one realloc of a huge block, 64 -> 256 MiB by
 * default, every page of the old block written first, and checks the data
 * after.  One realloc per process (a fresh address space each time); run it
 * under LD_PRELOAD to pick the allocator, and realloc_huge.py to compare
 * pinheap (preload shim, PINHEAP_MODE=on) with glibc over interleaved runs.
 * Main entry point: main().
 *
 * Prints one line:  realloc_huge from=MiB to=MiB us=<microseconds>
 *                   moved=0|1 releases=<n|-> released_mib=<n|->
 * releases and released_mib count the release listener's calls during the
 * realloc when a pinheap shim is loaded (its <prefix>register_release,
 * found with dlsym), "-" otherwise.  Exit status 1 if the data is damaged
 * or an allocation fails, 64 on a bad command line.
 *
 * Usage: pinheap-realloc-huge [FROM_MIB [TO_MIB]]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pinheap_config.h"     /* PINHEAP_PREFIX_STRING */

#define MIB ((size_t)1 << 20)
#define PAGE 4096

typedef void release_fn(void *addr, size_t len, int from_alloc, void *ctx);
typedef int register_fn(release_fn *fn, void *ctx);

static atomic_size_t releases, released_bytes;

static void count_release(void *addr, size_t len, int from_alloc, void *ctx)
{
  (void)addr;
  (void)ctx;
  if (from_alloc) {
    atomic_fetch_add(&releases, 1);
    atomic_fetch_add(&released_bytes, len);
  }
}

/* Registers count_release with a loaded pinheap.  @return whether one is. */
static int listen_if_pinheap(void)
{
  register_fn *reg = (register_fn *)dlsym(RTLD_DEFAULT, PINHEAP_PREFIX_STRING "register_release");
  return reg != NULL && reg(count_release, NULL) == 0;
}

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static size_t parse_mib(const char *s)
{
  char *end;
  unsigned long v = strtoul(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v == 0 || v > 65536) {
    fprintf(stderr, "realloc_huge: '%s' is not a size in MiB (1-65536)\n", s);
    exit(64);
  }
  return (size_t)v * MIB;
}

int main(int argc, char **argv)
{
  size_t from = argc > 1 ? parse_mib(argv[1]) : 64 * MIB;
  size_t to = argc > 2 ? parse_mib(argv[2]) : 256 * MIB;
  if (argc > 3) {
    fprintf(stderr, "usage: %s [FROM_MIB [TO_MIB]]\n", argv[0]);
    return 64;
  }
  int listening = listen_if_pinheap();
  unsigned char *p = malloc(from);
  if (p == NULL) {
    fprintf(stderr, "realloc_huge: malloc(%zu MiB) failed\n", from / MIB);
    return 1;
  }
  for (size_t off = 0; off < from; off += PAGE)
    p[off] = (unsigned char)(off / PAGE * 7 + 1);
  atomic_store(&releases, 0);
  atomic_store(&released_bytes, 0);

  double t0 = now_us();
  unsigned char *q = realloc(p, to);
  double t1 = now_us();

  size_t nrel = atomic_load(&releases), nbytes = atomic_load(&released_bytes);
  if (q == NULL) {
    fprintf(stderr, "realloc_huge: realloc(%zu -> %zu MiB) failed\n", from / MIB, to / MIB);
    return 1;
  }
  size_t keep = from < to ? from : to;
  for (size_t off = 0; off < keep; off += PAGE)
    if (q[off] != (unsigned char)(off / PAGE * 7 + 1)) {
      fprintf(stderr, "realloc_huge: byte at offset %zu changed by the realloc\n", off);
      return 1;
    }
  if (listening)
    printf("realloc_huge from=%zu to=%zu us=%.1f moved=%d releases=%zu released_mib=%.2f\n",
           from / MIB, to / MIB, t1 - t0, q != p, nrel, (double)nbytes / (double)MIB);
  else
    printf("realloc_huge from=%zu to=%zu us=%.1f moved=%d releases=- released_mib=-\n",
           from / MIB, to / MIB, t1 - t0, q != p);
  free(q);
  return 0;
}
