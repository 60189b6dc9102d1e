/*
 * test_fork.c -- fork safety: the allocator's locks are held across fork()
 * by its pthread_atfork handlers (malloc_prefork_lock /
 * malloc_postfork_unlock), so a child forked while other threads are deep
 * inside malloc and free can allocate at once.
 *
 * Torture: worker threads allocate, verify and free (thread caches, arena
 * locks, remote frees, huge blocks, trims) while the main thread forks many
 * hundred times; every child mallocs, frees, checks its heap and exits.
 * A child that hangs (a lock left held) is killed after a deadline and
 * fails the test; nothing here can hang the suite.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pinheap.h"

#define WORKERS 3
#define SLOTS 256

static atomic_int stop;
static atomic_long worker_ops;
static atomic_int worker_failed;

/* A block holds its size and a pattern derived from its address. */
static void fill(unsigned char *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(((uintptr_t)p >> 4) + i);
}

static int intact(const unsigned char *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(((uintptr_t)p >> 4) + i))
      return 0;
  return 1;
}

static void *worker(void *arg)
{
  unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
  unsigned char *slot[SLOTS] = { 0 };
  size_t len[SLOTS] = { 0 };

  while (!atomic_load(&stop)) {
    unsigned i = (unsigned)rand_r(&seed) % SLOTS;
    if (slot[i] != NULL) {
      if (!intact(slot[i], len[i]))
        atomic_store(&worker_failed, 1);
      PINHEAP_NAME(free)(slot[i]);
      slot[i] = NULL;
    } else {
      unsigned r = (unsigned)rand_r(&seed);
      size_t n = r % 64 == 0 ? 200000 + r % 300000 : r % 3000;   /* some huge blocks */
      slot[i] = PINHEAP_NAME(malloc)(n);
      if (slot[i] == NULL) {
        atomic_store(&worker_failed, 1);
        continue;
      }
      len[i] = n < 256 ? n : 256;
      fill(slot[i], len[i]);
    }
    if (rand_r(&seed) % 4096 == 0)
      PINHEAP_NAME(malloc_trim)(0);
    atomic_fetch_add(&worker_ops, 1);
  }
  for (unsigned i = 0; i < SLOTS; i++)
    PINHEAP_NAME(free)(slot[i]);
  return NULL;
}

/* The child: allocate at once, on every path, then check and leave. */
static int child_body(void)
{
  void *small[64], *big;
  for (int i = 0; i < 64; i++) {
    small[i] = PINHEAP_NAME(malloc)((size_t)i * 24);
    if (small[i] == NULL)
      return 10;
    memset(small[i], 0x5a, (size_t)i * 24);
  }
  big = PINHEAP_NAME(malloc)(1 << 20);
  if (big == NULL)
    return 11;
  memset(big, 1, 4096);
  for (int i = 0; i < 64; i++)
    PINHEAP_NAME(free)(small[i]);
  PINHEAP_NAME(free)(big);
  void *msp = PINHEAP_NAME(create_mspace)(0, 1);
  if (msp == NULL || PINHEAP_NAME(mspace_malloc)(msp, 100) == NULL)
    return 12;
  PINHEAP_NAME(destroy_mspace)(msp);
  if (PINHEAP_NAME(malloc_check)() != 0)
    return 13;
  return 0;
}

/* Waits for pid at most ms milliseconds; kills it if it is still there.
 * @return its exit status, or -1 if it had to be killed. */
static int wait_bounded(pid_t pid, int ms)
{
  int status;
  for (int waited = 0; waited < ms; waited++) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    struct timespec t = { 0, 1000000 };
    nanosleep(&t, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

TestSuite(fork, .timeout = 300);

Test(fork, torture_children_allocate_while_threads_churn)
{
  pthread_t t[WORKERS];
  int forks = getenv("PINHEAP_TEST_FORKS") ? atoi(getenv("PINHEAP_TEST_FORKS")) : 600;
  int hung = 0, bad = 0;

  cr_assert(forks > 0, "PINHEAP_TEST_FORKS must be a positive number");
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(16));          /* the allocator is set up */
  for (int i = 0; i < WORKERS; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)), 0);
  while (atomic_load(&worker_ops) < 10000)
    sched_yield();
  for (int k = 0; k < forks; k++) {
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork failed: %s", strerror(errno));
    if (pid == 0)
      _exit(child_body());
    int rc = wait_bounded(pid, 10000);
    if (rc == -1)
      hung++;
    else if (rc != 0)
      bad++;
    if (hung + bad > 0)
      break;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < WORKERS; i++)
    pthread_join(t[i], NULL);
  cr_assert_eq(hung, 0, "%d child(ren) hung: a lock was held across fork", hung);
  cr_assert_eq(bad, 0, "%d child(ren) failed to allocate or check the heap", bad);
  cr_assert_eq(atomic_load(&worker_failed), 0, "a worker saw a block change or malloc fail");
  cr_assert_gt(atomic_load(&worker_ops), 10000, "the workers did not run during the forks");
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0, "the parent's heap is unsound after the forks");
}

Test(fork, handlers_are_exported_and_pair_up)
{
  /* A runtime that forks behind glibc's back (a raw fork system call runs
   * no pthread_atfork handler) calls the pair around it itself. */
  void *p = PINHEAP_NAME(malloc)(100);
  PINHEAP_NAME(malloc_prefork_lock)();
  pid_t pid = (pid_t)syscall(SYS_fork);
  if (pid == 0) {
    PINHEAP_NAME(malloc_postfork_unlock)();
    void *q = PINHEAP_NAME(malloc)(100);
    _exit(q == NULL ? 1 : 0);
  }
  PINHEAP_NAME(malloc_postfork_unlock)();
  cr_assert_eq(wait_bounded(pid, 10000), 0, "the child could not allocate after postfork_unlock");
  PINHEAP_NAME(free)(p);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}
