/*
 * pair.c -- pinheap-bench-pair, the fast-path probe for callgrind.  Main
 * entry point: main().
 *
 *   pinheap-bench-pair N [--expect-malloc SUBSTRING]
 *
 * Does N malloc(32)+free pairs and nothing else.  The runner runs it under
 * `valgrind --tool=callgrind` with N and 2N and divides the difference of
 * the instruction totals by N, so start-up, the warm-up of the first pair
 * and exit cost cancel out and what is left is the cost of one pair on the
 * fast path, call and dispatch included.  Prints one JSON line naming the
 * file that defines malloc (as pinheap-bench does), so a failed LD_PRELOAD
 * shows, and, when a pinheap shim is loaded, pinheap_enabled(): under
 * valgrind pinheap leaves malloc to glibc unless PINHEAP_MODE=on (the
 * runner sets it), and a count of glibc's pairs under pinheap's name is
 * refused (exit 2) when --expect-malloc is given.  Everything except the
 * loop is the same for every N.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinheap_config.h"   /* PINHEAP_PREFIX_STRING, PINHEAP_ENV_MODE */

int main(int argc, char **argv)
{
  const char *expect = NULL;
  const char *count_arg = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--expect-malloc") == 0 && i + 1 < argc)
      expect = argv[++i];
    else if (count_arg == NULL && argv[i][0] != '-')
      count_arg = argv[i];
    else {
      fprintf(stderr, "pinheap-bench-pair: unexpected argument '%s'\n"
                      "usage: pinheap-bench-pair N [--expect-malloc SUBSTRING]\n", argv[i]);
      return 64;
    }
  }
  char *end = NULL;
  errno = 0;
  long long n = count_arg ? strtoll(count_arg, &end, 10) : -1;
  if (count_arg == NULL || end == count_arg || *end != '\0' || errno != 0 || n < 1 ||
      n > 1000000000LL) {
    fprintf(stderr, "pinheap-bench-pair: N '%s' is not valid; expected an integer 1..1000000000\n"
                    "usage: pinheap-bench-pair N [--expect-malloc SUBSTRING]\n",
            count_arg ? count_arg : "(missing)");
    return 64;
  }

  Dl_info info;
  const char *lib = "?";
  void *fn = dlsym(RTLD_DEFAULT, "malloc");
  if (fn != NULL && dladdr(fn, &info) != 0 && info.dli_fname != NULL)
    lib = info.dli_fname;
  if (expect != NULL && strstr(lib, expect) == NULL) {
    fprintf(stderr, "pinheap-bench-pair: malloc resolves to '%s', expected a file matching '%s' "
                    "(did LD_PRELOAD fail to load the allocator?)\n", lib, expect);
    return 2;
  }

  int enabled = -1;               /* -1: no pinheap in the process */
  void *enabled_sym = dlsym(RTLD_DEFAULT, PINHEAP_PREFIX_STRING "enabled");
  if (enabled_sym != NULL) {
    int (*enabled_fn)(void);
    memcpy(&enabled_fn, &enabled_sym, sizeof(enabled_fn));
    enabled = enabled_fn();
    if (expect != NULL && enabled == 0) {
      fprintf(stderr, "pinheap-bench-pair: the pinheap shim '%s' is loaded but %senabled() is 0: "
                      "its malloc forwards to glibc (under valgrind set %s=on)\n", lib,
              PINHEAP_PREFIX_STRING, PINHEAP_ENV_MODE);
      return 2;
    }
  }

  void *volatile sink;
  for (long long i = 0; i < n; i++) {
    void *p = malloc(32);
    if (p == NULL) {
      fprintf(stderr, "pinheap-bench-pair: malloc(32) returned NULL at pair %lld\n", i);
      return 2;
    }
    sink = p;
    free(p);
  }
  (void)sink;
  if (enabled < 0)
    printf("{\"pairs\":%lld,\"malloc_lib\":\"%s\",\"pinheap_enabled\":null}\n", n, lib);
  else
    printf("{\"pairs\":%lld,\"malloc_lib\":\"%s\",\"pinheap_enabled\":%d}\n", n, lib, enabled);
  return 0;
}
