/*
 * main.c -- the consumer program of the install/consumer test
 * (test/packaging/install_consumer.sh).  Main entry point: main().
 *
 * Linked only against libconsumer_core.so (which holds libpinheap.a, linked
 * whole) and pinheap's headers, never against the archive itself.  It calls
 * the prefixed malloc and mspace API and checks the results; it exits 0
 * when every check holds, else prints each failed check and exits 1.
 * EXPECT_PREFIX is the prefix the package (CMake or pkg-config) reported.
 */
#define _GNU_SOURCE 1 /* dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pinheap.h"

#ifndef EXPECT_PREFIX
#error "EXPECT_PREFIX must be the prefix the package reports"
#endif

const char *consumer_core_name(void);

static int failures;

static void check(int ok, const char *what)
{
  if (!ok) {
    fprintf(stderr, "consumer: FAIL: %s\n", what);
    failures++;
  }
}

static int is_aligned(const void *p, uintptr_t align)
{
  return ((uintptr_t)p & (align - 1)) == 0;
}

/* The prefixed API must come from the core library, not from this program. */
static void check_origin(void)
{
  Dl_info info;
  void *fn = (void *)&PINHEAP_NAME(malloc);
  check(strcmp(consumer_core_name(), "consumer_core") == 0, "core library not callable");
  if (!dladdr(fn, &info) || !info.dli_fname) {
    check(0, "dladdr cannot place the prefixed malloc in any loaded object");
    return;
  }
  check(strstr(info.dli_fname, "libconsumer_core") != NULL,
        "the prefixed malloc does not live in libconsumer_core.so");
  printf("consumer: %smalloc is in %s\n", PINHEAP_PREFIX_STRING, info.dli_fname);
}

static void check_malloc_family(void)
{
  unsigned char *p = PINHEAP_NAME(malloc)(100);
  check(p != NULL, "malloc(100) returned NULL");
  if (!p)
    return;
  check(is_aligned(p, 16), "malloc(100) not 16-byte aligned");
  check(PINHEAP_NAME(malloc_usable_size)(p) >= 100, "malloc_usable_size(p) < 100");
  for (int i = 0; i < 100; i++)
    p[i] = (unsigned char)(i * 7);
  unsigned char *q = PINHEAP_NAME(realloc)(p, 300000);
  check(q != NULL, "realloc(p, 300000) returned NULL");
  if (q) {
    int same = 1;
    for (int i = 0; i < 100; i++)
      same &= q[i] == (unsigned char)(i * 7);
    check(same, "realloc did not keep the contents");
    p = q;
  }
  PINHEAP_NAME(free)(p);

  unsigned char *z = PINHEAP_NAME(calloc)(10, 100);
  check(z != NULL, "calloc(10, 100) returned NULL");
  if (z) {
    int zero = 1;
    for (int i = 0; i < 1000; i++)
      zero &= z[i] == 0;
    check(zero, "calloc memory not zeroed");
    PINHEAP_NAME(free)(z);
  }

  void *a = NULL;
  check(PINHEAP_NAME(posix_memalign)(&a, 4096, 100) == 0 && a != NULL,
        "posix_memalign(4096, 100) failed");
  check(is_aligned(a, 4096), "posix_memalign(4096) result not 4096-aligned");
  PINHEAP_NAME(free)(a);
  PINHEAP_NAME(free)(NULL);
  check(PINHEAP_NAME(malloc_check)() == 0, "malloc_check() reported problems");
}

static void check_mspaces(void)
{
  pinheap_mspace msp = PINHEAP_NAME(create_mspace)(0, 1);
  check(msp != NULL, "create_mspace(0, 1) returned NULL");
  if (msp) {
    void *m = PINHEAP_NAME(mspace_malloc)(msp, 1000);
    check(m != NULL && is_aligned(m, 16), "mspace_malloc(1000) failed or misaligned");
    if (m)
      memset(m, 0xab, 1000);
    check(PINHEAP_NAME(mspace_check)(msp) == 0, "mspace_check reported problems");
    PINHEAP_NAME(mspace_free)(msp, m);
    check(PINHEAP_NAME(destroy_mspace)(msp) > 0, "destroy_mspace released no bytes");
  }

  /* A fixed region: allocations stay inside it; when full, NULL + ENOMEM. */
  static _Alignas(4096) unsigned char region[256 * 1024];
  pinheap_mspace fixed = PINHEAP_NAME(create_mspace_with_base)(region, sizeof region, 0);
  check(fixed != NULL, "create_mspace_with_base(256 KiB) returned NULL");
  if (!fixed)
    return;
  int count = 0, outside = 0;
  for (;;) {
    errno = 0;
    unsigned char *m = PINHEAP_NAME(mspace_malloc)(fixed, 1000);
    if (!m)
      break;
    if (m < region || m + 1000 > region + sizeof region)
      outside++;
    count++;
    if (count > 1000) /* 256 KiB cannot hold 1000 blocks of 1000 bytes */
      break;
  }
  check(outside == 0, "mspace_with_base returned memory outside its region");
  /* All blocks fit in the region, and at least half of it is usable. */
  check((size_t)count * 1000 <= sizeof region && (size_t)count * 1000 >= sizeof region / 2,
        "fixed region held an implausible number of 1000-byte blocks");
  check(errno == ENOMEM, "a full fixed region did not fail with ENOMEM");
  check(PINHEAP_NAME(mspace_check)(fixed) == 0, "mspace_check on the full fixed region failed");
  printf("consumer: fixed 256 KiB region held %d blocks of 1000 bytes\n", count);
}

int main(void)
{
  check(strcmp(PINHEAP_PREFIX_STRING, EXPECT_PREFIX) == 0,
        "pinheap_config.h and the package disagree on the prefix");
  check_origin();
  check_malloc_family();
  check_mspaces();
  if (failures) {
    fprintf(stderr, "consumer: %d failure(s)\n", failures);
    return 1;
  }
  printf("consumer: OK (prefix %s, version %s)\n", PINHEAP_PREFIX_STRING, PINHEAP_VERSION_STRING);
  return 0;
}
