/*
 * consumer_cost.c -- what feeding one consumer adds to a release: N
 * munmaps of a fresh page (mapped with the raw system call) through
 * pinheap's interposed munmap, the release heard by one consumer:
 *   none      nobody listens
 *   listener  one pinheap release listener
 *   opal      Open MPI's memory hooks (libopen-pal opened, its hooks
 *             initialised and on, one opal_mem_hooks callback): pinheap's
 *             feed, opal's dispatch and pinheap's own callback, which sees
 *             its own release come back and drops it
 *   patcher   test/fixture/fakepatcher.c rewrote libc's munmap after
 *             pinheap started: pinheap's call goes through its hook
 * Counted with callgrind at two N (tools/events_bench/consumer_cost.sh):
 * the difference over the difference of N is the instructions per
 * map+munmap pair.  Built by test/consumers/consumers_tests.cmake (it links the
 * fixture core library and the fixture patcher).
 * usage: consumer_cost none|listener|opal|patcher N
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pinheap.h"

static long heard;

static void on_release(void *a, size_t l, int from_alloc, void *ctx)
{
  (void)a, (void)l, (void)from_alloc, (void)ctx;
  heard++;
}

static void on_opal(void *a, size_t l, void *cbdata, bool from_alloc)
{
  (void)a, (void)l, (void)cbdata, (void)from_alloc;
  heard++;
}

static void on_patcher(void *a, size_t l)
{
  (void)a, (void)l;
  heard++;
}

/* Open MPI's hooks as its memory framework leaves them, with no MPI_Init. */
static int opal_on(void)
{
  void *h = dlopen("libopen-pal.so.40", RTLD_NOW | RTLD_GLOBAL);
  int (*init)(void) = h != NULL ? (int (*)(void))dlsym(h, "opal_mem_hooks_init") : NULL;
  void (*support)(int) = h != NULL ? (void (*)(int))dlsym(h, "opal_mem_hooks_set_support") : NULL;
  int (*reg)(void (*)(void *, size_t, void *, bool), void *) =
      h != NULL ? (int (*)(void (*)(void *, size_t, void *, bool), void *))dlsym(
                      h, "opal_mem_hooks_register_release")
                : NULL;
  if (init == NULL || support == NULL || reg == NULL)
    return -1;
  init();
  support(3);                       /* FREE | MUNMAP, as Open MPI's patcher sets it */
  PINHEAP_NAME(open)();             /* pinheap attaches to it (as after a dlopen) */
  return reg(on_opal, NULL);
}

int main(int argc, char **argv)
{
  if (argc != 3 || atol(argv[2]) <= 0) {
    fprintf(stderr, "usage: %s none|listener|opal|patcher N\n", argv[0]);
    return 2;
  }
  const char *what = argv[1];
  long n = atol(argv[2]);
  PINHEAP_NAME(open)();
  if (strcmp(what, "listener") == 0) {
    PINHEAP_NAME(register_release)(on_release, NULL);
  } else if (strcmp(what, "opal") == 0) {
    if (opal_on() != 0) {
      fprintf(stderr, "consumer_cost: Open MPI's libopen-pal.so.40 not usable\n");
      return 1;
    }
  } else if (strcmp(what, "patcher") == 0) {
    int (*install)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fakepatcher_install");
    void (*listen)(void (*)(void *, size_t)) =
        (void (*)(void (*)(void *, size_t)))dlsym(RTLD_DEFAULT, "fakepatcher_listen");
    if (install == NULL || listen == NULL || install() != 0)
      return 1;
    listen(on_patcher);
  } else if (strcmp(what, "none") != 0) {
    fprintf(stderr, "consumer_cost: '%s': expected none, listener, opal or patcher\n", what);
    return 2;
  }
  for (long i = 0; i < n; i++) {
    void *p = (void *)syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
    munmap(p, 4096);
  }
  printf("%s: %ld of %ld releases heard\n", what, heard, n);
  return strcmp(what, "none") != 0 && heard < n;
}
