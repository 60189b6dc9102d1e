/*
 * compat_main.c -- the program of the compat link test (test/packaging/compat_link.sh).
 * Main entry point: main().
 *
 * Built twice with legacy link lines: once as a plain libc program with
 * -lopenmpi_malloc only, once with -DCOMPAT_USE_PINHEAP and
 * -lopenmpi_malloc -lpinheap, calling the prefixed API.  Exits 0 when every
 * check holds, else prints what failed and exits 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef COMPAT_USE_PINHEAP
#include "pinheap.h"
#endif

static int failures;

static void check(int ok, const char *what)
{
  if (!ok) {
    fprintf(stderr, "compat_main: FAIL: %s\n", what);
    failures++;
  }
}

int main(void)
{
  char *p = malloc(64);
  check(p != NULL, "libc malloc(64) returned NULL");
  if (p) {
    memset(p, 'x', 64);
    check(p[63] == 'x', "libc malloc memory not writable");
  }
  free(p);

#ifdef COMPAT_USE_PINHEAP
#ifndef EXPECT_PREFIX
#error "EXPECT_PREFIX must name the configured prefix"
#endif
  check(strcmp(PINHEAP_PREFIX_STRING, EXPECT_PREFIX) == 0,
        "pinheap_config.h records another prefix than the build was configured with");
  unsigned char *q = PINHEAP_NAME(malloc)(1000);
  check(q != NULL, "prefixed malloc(1000) returned NULL");
  if (q) {
    check(((uintptr_t)q & 15) == 0, "prefixed malloc result not 16-byte aligned");
    check(PINHEAP_NAME(malloc_usable_size)(q) >= 1000, "malloc_usable_size < 1000");
    for (int i = 0; i < 1000; i++)
      q[i] = (unsigned char)i;
    unsigned char *r = PINHEAP_NAME(realloc)(q, 5000);
    check(r != NULL, "prefixed realloc(p, 5000) returned NULL");
    if (r) {
      int same = 1;
      for (int i = 0; i < 1000; i++)
        same &= r[i] == (unsigned char)i;
      check(same, "prefixed realloc lost the old contents");
      q = r;
    }
    PINHEAP_NAME(free)(q);
  }
  check(PINHEAP_NAME(malloc_check)() == 0, "heap check reported problems");
#endif

  if (failures) {
    fprintf(stderr, "compat_main: %d failure(s)\n", failures);
    return 1;
  }
  puts("compat_main: OK");
  return 0;
}
