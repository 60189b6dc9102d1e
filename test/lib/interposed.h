/*
 * interposed.h -- for tests whose memory calls must be pinheap's
 * interposers (the executable holds libpinheap.a and exports its symbols):
 * interposed_or_skip(), a Criterion suite's .init, sets `page` and skips
 * the test, saying why, when this process's munmap is not pinheap's (a
 * sanitizer runtime in front); map_pages(n) maps n pages filled with 0x5a.
 * Include it once, after criterion.h and
 * pinheap.h.
 */
#ifndef PINHEAP_TEST_INTERPOSED_H
#define PINHEAP_TEST_INTERPOSED_H

#include <dlfcn.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* pinheap's own munmap, to see that interposition took (hidden in the
 * archive, linkable here). */
typedef struct test_replace_self_s {
  void *self_malloc;
  void *self_free;
  void *self_munmap;
} test_replace_self_t;
extern const test_replace_self_t PINHEAP_NAME(replace_self);

static size_t page;

static void interposed_or_skip(void)
{
  page = (size_t)sysconf(_SC_PAGESIZE);
  void *m = dlsym(RTLD_DEFAULT, "munmap");
  if (m != PINHEAP_NAME(replace_self).self_munmap)
    cr_skip_test("interposition did not take: this process resolves munmap to %p, not "
                 "pinheap's %p (a sanitizer runtime in front?)",
                 m, PINHEAP_NAME(replace_self).self_munmap);
}

static inline char *map_pages(size_t n)
{
  char *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(p != MAP_FAILED);
  memset(p, 0x5a, n * page);
  return p;
}

#endif /* PINHEAP_TEST_INTERPOSED_H */
