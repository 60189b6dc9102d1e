/*
 * test_watch_threads.c -- watches (hooks/watch/watch.c) under threads, in a
 * process whose malloc and memory calls stay glibc's (pinheap_core only),
 * so that it also runs in the ThreadSanitizer pass: the releases are
 * pinheap's own (destroy_mspace unmaps its segments through the OS layer,
 * which fires VM_UNMAPPED).  Threads watch and unwatch memory that is never
 * released -- those tokens must stay valid -- while others watch blocks of
 * their own mspaces and destroy them -- those must go invalid; and fork
 * while another thread is inside watch/unwatch.
 *
 * Main entry points: the Test()s.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinheap.h"

TestSuite(watch_threads, .timeout = 300);

enum { STILL = 4096 };
static char still[STILL];          /* never released */
static atomic_int stop;
static atomic_long wrong_valid, wrong_invalid, rounds;

static void *watcher(void *arg)
{
  unsigned seed = (unsigned)(uintptr_t)arg;
  const pinheap_watch_t *held[16] = { 0 };
  while (!atomic_load(&stop)) {
    seed = seed * 1103515245u + 12345u;
    int k = (int)(seed >> 16) % 16;
    if (held[k] != NULL) {
      if (!PINHEAP_NAME(watch_valid)(held[k]))
        atomic_fetch_add(&wrong_invalid, 1);
      PINHEAP_NAME(unwatch)(held[k]);
      held[k] = NULL;
    } else {
      size_t off = (seed >> 4) % (STILL - 64);
      if (PINHEAP_NAME(watch)(still + off, 1 + (seed & 63), &held[k]) != 0)
        atomic_fetch_add(&wrong_invalid, 1);
    }
    atomic_fetch_add_explicit(&rounds, 1, memory_order_relaxed);
  }
  for (int k = 0; k < 16; k++)
    PINHEAP_NAME(unwatch)(held[k]);
  return NULL;
}

static void *releaser(void *arg)
{
  (void)arg;
  while (!atomic_load(&stop)) {
    pinheap_mspace ms = PINHEAP_NAME(create_mspace)(0, 0);
    if (ms == NULL)
      continue;
    char *b = PINHEAP_NAME(mspace_malloc)(ms, 4096);
    const pinheap_watch_t *t, *wide;
    /* a page (the release spans many of its granules: the treap) and half
     * a MiB (a few: the hash) */
    if (b == NULL || PINHEAP_NAME(watch)(b, 4096, &t) != 0 ||
        PINHEAP_NAME(watch)(b, 512 * 1024, &wide) != 0) {
      atomic_fetch_add(&wrong_valid, 1);
      PINHEAP_NAME(destroy_mspace)(ms);
      continue;
    }
    if (!PINHEAP_NAME(watch_valid)(t) || !PINHEAP_NAME(watch_valid)(wide))
      atomic_fetch_add(&wrong_invalid, 1);
    PINHEAP_NAME(destroy_mspace)(ms);
    if (PINHEAP_NAME(watch_valid)(t) || PINHEAP_NAME(watch_valid)(wide))
      atomic_fetch_add(&wrong_valid, 1);
    PINHEAP_NAME(unwatch)(t);
    PINHEAP_NAME(unwatch)(wide);
  }
  return NULL;
}

Test(watch_threads, watch_and_unwatch_while_others_release)
{
  pthread_t th[4];
  cr_assert(pthread_create(&th[0], NULL, watcher, (void *)1) == 0);
  cr_assert(pthread_create(&th[1], NULL, watcher, (void *)2) == 0);
  cr_assert(pthread_create(&th[2], NULL, releaser, NULL) == 0);
  cr_assert(pthread_create(&th[3], NULL, releaser, NULL) == 0);
  usleep(1500 * 1000);
  atomic_store(&stop, 1);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  cr_assert(atomic_load(&rounds) > 1000, "only %ld watch rounds", atomic_load(&rounds));
  cr_assert(atomic_load(&wrong_invalid) == 0,
            "%ld tokens of memory never released were invalid", atomic_load(&wrong_invalid));
  cr_assert(atomic_load(&wrong_valid) == 0,
            "%ld tokens of destroyed mspaces stayed valid", atomic_load(&wrong_valid));
}

/* The child of a fork made while another thread is inside watch/unwatch
 * (holding the index's lock, often) must watch, release and check. */
Test(watch_threads, fork_while_another_thread_is_inside_watch)
{
  pthread_t th;
  cr_assert(pthread_create(&th, NULL, watcher, (void *)3) == 0);
  const pinheap_watch_t *mine;
  cr_assert(PINHEAP_NAME(watch)(still, 64, &mine) == 0);
  for (int i = 0; i < 40; i++) {
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
      alarm(10);
      int bad = !PINHEAP_NAME(watch_valid)(mine);
      pinheap_mspace ms = PINHEAP_NAME(create_mspace)(0, 0);
      char *b = ms != NULL ? PINHEAP_NAME(mspace_malloc)(ms, 64) : NULL;
      const pinheap_watch_t *t;
      if (b == NULL || PINHEAP_NAME(watch)(b, 64, &t) != 0)
        _exit(2);
      PINHEAP_NAME(destroy_mspace)(ms);
      bad |= PINHEAP_NAME(watch_valid)(t) << 1;
      bad |= !PINHEAP_NAME(watch_valid)(mine) << 2;
      PINHEAP_NAME(unwatch)(t);
      PINHEAP_NAME(unwatch)(mine);
      _exit(bad);
    }
    int st;
    cr_assert(waitpid(pid, &st, 0) == pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "fork %d: the child failed (status 0x%x)", i, st);
    usleep(1000);
  }
  atomic_store(&stop, 1);
  pthread_join(th, NULL);
  cr_assert(PINHEAP_NAME(watch_valid)(mine));
  PINHEAP_NAME(unwatch)(mine);
}
