/*
 * test_arenas.c -- threads that run together spread over arenas, capped by
 * M_ARENA_MAX or the PINHEAP_ARENA_MAX parameter; a thread that starts
 * after another exited takes the arena it left; a thread's cache returns
 * its blocks when the thread exits.  Arenas are counted in malloc_stats'
 * report.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinheap.h"

enum { THREADS = 6 };

static void *alloc_some(void *arg)
{
  void *p[64];
  (void)arg;
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < 64; i++) {
      p[i] = PINHEAP_NAME(malloc)(16 + (size_t)i * 16);
      memset(p[i], i, 16);
    }
    for (int i = 0; i < 64; i++)
      PINHEAP_NAME(free)(p[i]);
  }
  return NULL;
}

/* The threads of run_threads all live until each has allocated: they run
 * together, as they would in a program, however the scheduler starts them. */
static pthread_barrier_t all_allocated;

static void *alloc_some_together(void *arg)
{
  alloc_some(arg);
  pthread_barrier_wait(&all_allocated);
  return NULL;
}

static void run_threads(void)
{
  pthread_t t[THREADS];
  cr_assert_eq(pthread_barrier_init(&all_allocated, NULL, THREADS), 0);
  for (int i = 0; i < THREADS; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, alloc_some_together, NULL), 0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&all_allocated);
}

/* malloc_stats' report (written to stderr) into buf; false if no pipe. */
static bool stats_read(char *buf, size_t size)
{
  int fds[2], saved = dup(2);
  ssize_t n, have = 0;

  if (pipe(fds) != 0)
    return false;
  dup2(fds[1], 2);
  PINHEAP_NAME(malloc_stats)();
  dup2(saved, 2);
  close(fds[1]);
  while ((n = read(fds[0], buf + have, size - 1 - (size_t)have)) > 0)
    have += n;
  close(fds[0]);
  close(saved);
  buf[have] = '\0';
  return true;
}

/* How many "Arena N:" sections malloc_stats writes. */
static int arenas_reported(void)
{
  static char buf[65536];
  int count = 0;

  cr_assert(stats_read(buf, sizeof(buf)), "pipe failed (errno %d)", errno);
  for (char *s = buf; (s = strstr(s, "Arena ")) != NULL; s++)
    count++;
  return count;
}

TestSuite(arenas, .timeout = 60);

Test(arenas, threads_spread_over_several_by_default)
{
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(1));
  run_threads();
  int n = arenas_reported();
  cr_assert_gt(n, 1, "%d threads used only %d arena(s) by default", THREADS, n);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* Threads that make their first allocation at the same moment each get an
 * arena of their own while there are free ones: a slot is claimed before
 * its arena is made.  (Chosen first and counted after, two of them could
 * both see the same slot free and share it.)  Each round runs in a fresh
 * child, where only arena 0 exists, the widest window: every thread's
 * first malloc makes an arena.  Each thread keeps one 100 KB block (under
 * the mmap threshold) until all have one; then the arenas holding such a
 * block are counted in malloc_stats' report. */
enum { TOGETHER = 4, TOGETHER_ROUNDS = 24, KEPT = 100 * 1024 };
static pthread_barrier_t start_together, all_kept;

static void *alloc_at_once(void *arg)
{
  (void)arg;
  pthread_barrier_wait(&start_together);
  void *p = PINHEAP_NAME(malloc)(KEPT);
  if (p != NULL)
    memset(p, 1, KEPT);
  pthread_barrier_wait(&all_kept);       /* the report is read meanwhile */
  pthread_barrier_wait(&all_kept);
  PINHEAP_NAME(free)(p);
  return NULL;
}

/* Arenas whose in-use bytes hold a KEPT block, in malloc_stats' report. */
static int arenas_holding_kept(void)
{
  static char buf[65536];
  int count = 0;

  if (!stats_read(buf, sizeof(buf)))
    return -1;
  for (char *a = buf; (a = strstr(a, "Arena ")) != NULL; a++) {
    char *u = strstr(a, "in use bytes");
    unsigned long used = 0;
    if (u != NULL && sscanf(u, "in use bytes = %lu", &used) == 1 && used >= KEPT)
      count++;
  }
  return count;
}

static int together_round(void)
{
  pthread_t t[TOGETHER];
  if (PINHEAP_NAME(mallopt)(M_ARENA_MAX, 2 * TOGETHER) != 1)
    return -2;
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(1));   /* this thread: arena 0 */
  pthread_barrier_init(&start_together, NULL, TOGETHER);
  pthread_barrier_init(&all_kept, NULL, TOGETHER + 1);
  for (int i = 0; i < TOGETHER; i++)
    pthread_create(&t[i], NULL, alloc_at_once, NULL);
  pthread_barrier_wait(&all_kept);
  int held = arenas_holding_kept();
  pthread_barrier_wait(&all_kept);
  for (int i = 0; i < TOGETHER; i++)
    pthread_join(t[i], NULL);
  return held;
}

Test(arenas, threads_starting_together_get_arenas_of_their_own)
{
  int shared = 0, held = 0;
  for (int r = 0; r < TOGETHER_ROUNDS; r++) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1, "fork failed (errno %d)", errno);
    if (pid == 0)
      _exit(together_round() + 100);    /* (negative: a set-up failure) */
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "round %d: the child died (status 0x%x)", r, status);
    held = WEXITSTATUS(status) - 100;
    cr_assert_geq(held, 0, "round %d: set-up failed in the child (%d)", r, held);
    shared += held != TOGETHER;
    if (held != TOGETHER)
      cr_log_warn("round %d: %d threads starting together held their blocks in %d arenas", r,
                  TOGETHER, held);
  }
  cr_assert_eq(shared, 0, "in %d of %d rounds, %d threads that started together shared arenas "
               "(last: %d arenas) though %d were free", shared, TOGETHER_ROUNDS, TOGETHER, held,
               2 * TOGETHER - 1);
}

/* Threads one after another: each takes the arena its predecessor left
 * (and the pages and free memory it left there) instead of a new one. */
Test(arenas, a_thread_takes_the_arena_an_exited_one_left)
{
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_ARENA_MAX, 8), 1);
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(1));   /* this thread: arena 0 */
  for (int i = 0; i < 6; i++) {
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, alloc_some, NULL), 0);
    pthread_join(t, NULL);
  }
  int n = arenas_reported();
  cr_assert_eq(n, 2, "6 threads one after another made %d arenas, expected 2 (arena 0 of the "
               "main thread, and one taken over by each next thread)", n);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

Test(arenas, mallopt_arena_max_caps_them)
{
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_ARENA_MAX, 0), 0, "M_ARENA_MAX 0 must be refused");
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_ARENA_MAX, 100000), 0, "M_ARENA_MAX 100000 must be refused");
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_ARENA_MAX, 1), 1);
  run_threads();
  cr_assert_eq(arenas_reported(), 1, "M_ARENA_MAX=1 but more than one arena exists");
}

Test(arenas, parameter_caps_them)
{
  setenv("PINHEAP_ARENA_MAX", "2", 1);      /* read once, at the first allocation */
  run_threads();
  int n = arenas_reported();
  cr_assert_eq(n, 2, "PINHEAP_ARENA_MAX=2 but %d arena(s) exist", n);
}

Test(arenas, exiting_threads_return_their_cached_blocks)
{
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_ARENA_MAX, 1), 1);      /* one heap to look at */
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(1));
  struct mallinfo2 before = PINHEAP_NAME(mallinfo2)();
  run_threads();
  struct mallinfo2 after = PINHEAP_NAME(mallinfo2)();
  /* every block of the threads was freed and their caches were returned:
   * nothing they allocated is still counted in use */
  cr_assert_leq(after.uordblks, before.uordblks + 64,
                "in-use bytes %zu -> %zu: exited threads kept cached blocks",
                before.uordblks, after.uordblks);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}

/* Arenas past the kind map's tags (126) have no fast path of their own:
 * their threads' chunks go through the slow path, and must still come back
 * to the right heap.  Each thread frees the blocks its predecessor (in
 * another arena) kept, so chunks of one untagged arena are freed by a
 * thread of another.  The threads start one after another and stay alive
 * until all have run, so each takes a new arena. */
typedef struct handoff_s {
  void *blocks[64];
  struct handoff_s *prev;
} handoff_t;

static sem_t handoff_done;
static pthread_barrier_t handoff_exit;

static void free_kept(handoff_t *h)
{
  for (int k = 0; k < 64; k++) {
    unsigned char *b = h->blocks[k];
    cr_assert(b[0] == 0x5a && b[23] == 0x5a, "kept block %d damaged", k);
    PINHEAP_NAME(free)(b);
  }
}

static void *alloc_and_keep(void *arg)
{
  handoff_t *h = arg;
  alloc_some(NULL);
  for (int i = 0; i < 64; i++) {
    h->blocks[i] = PINHEAP_NAME(malloc)(24 + (size_t)i * 24);
    memset(h->blocks[i], 0x5a, 24);
  }
  if (h->prev != NULL)
    free_kept(h->prev);
  sem_post(&handoff_done);
  pthread_barrier_wait(&handoff_exit);
  return NULL;
}

Test(arenas, many_arenas_beyond_the_tagged_ones)
{
  enum { MANY = 140 };
  static handoff_t h[MANY];
  static pthread_t t[MANY];
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_ARENA_MAX, MANY + 1), 1);
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(1));
  cr_assert_eq(sem_init(&handoff_done, 0, 0), 0);
  cr_assert_eq(pthread_barrier_init(&handoff_exit, NULL, MANY + 1), 0);
  for (int i = 0; i < MANY; i++) {           /* one after another: arena i + 1 each */
    h[i].prev = i > 0 ? &h[i - 1] : NULL;
    cr_assert_eq(pthread_create(&t[i], NULL, alloc_and_keep, &h[i]), 0);
    while (sem_wait(&handoff_done) != 0)
      ;
  }
  pthread_barrier_wait(&handoff_exit);
  for (int i = 0; i < MANY; i++)
    pthread_join(t[i], NULL);
  int n = arenas_reported();
  cr_assert_eq(n, MANY + 1, "%d threads in turn made %d arenas, expected %d", MANY, n, MANY + 1);
  free_kept(&h[MANY - 1]);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
  struct mallinfo2 mi = PINHEAP_NAME(mallinfo2)();
  cr_assert_lt(mi.uordblks, (size_t)64 * 24, "in-use bytes %zu after every block was freed",
               mi.uordblks);
}

/* A thread's cache grows with use but stays within its budget: after a
 * thread freed many blocks of many sizes, and before it exits, what it
 * still holds (counted in use by the statistics) is bounded. */
enum { BOUND_SIZES = 26, BOUND_EACH = 1000 };

typedef struct bound_s {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stage;                                   /* 1: blocks freed; 2: may exit */
} bound_t;

static void *free_many_then_wait(void *arg)
{
  bound_t *s = arg;
  static void *p[BOUND_EACH];
  for (int round = 0; round < 3; round++)
    for (int k = 0; k < BOUND_SIZES; k++) {
      for (int i = 0; i < BOUND_EACH; i++)
        p[i] = PINHEAP_NAME(malloc)(24 + (size_t)k * 80);
      for (int i = 0; i < BOUND_EACH; i++)
        PINHEAP_NAME(free)(p[i]);
    }
  pthread_mutex_lock(&s->mu);
  s->stage = 1;
  pthread_cond_broadcast(&s->cv);
  while (s->stage != 2)
    pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

Test(arenas, a_threads_cache_stays_bounded)
{
  bound_t s = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
  pthread_t t;
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(1));
  size_t before = PINHEAP_NAME(mallinfo2)().uordblks;
  cr_assert_eq(pthread_create(&t, NULL, free_many_then_wait, &s), 0);
  pthread_mutex_lock(&s.mu);
  while (s.stage != 1)
    pthread_cond_wait(&s.cv, &s.mu);
  pthread_mutex_unlock(&s.mu);
  size_t held = PINHEAP_NAME(mallinfo2)().uordblks - before;
  pthread_mutex_lock(&s.mu);
  s.stage = 2;
  pthread_cond_broadcast(&s.cv);
  pthread_mutex_unlock(&s.mu);
  pthread_join(t, NULL);
  /* two base lists of ~4 KiB per size used, plus twice the 256 KiB budget
   * of raises (a list and its spare); the thread freed ~50 MiB in all.
   * Sizes up to 512 bytes come from slab pages: a live thread keeps its
   * current page of each (64 KiB), which other threads count in use. */
  size_t slab_sizes = 0;
  for (int k = 0; k < BOUND_SIZES; k++)
    slab_sizes += 24 + (size_t)k * 80 <= 512;
  cr_assert_leq(held, (size_t)BOUND_SIZES * 2 * 4096 + 2 * 256 * 1024 + 64 * 1024 +
                          slab_sizes * 64 * 1024,
                "a live thread that freed everything still holds %zu bytes in its cache", held);
  cr_assert_gt(held, 0, "the thread's cache held nothing: the test measures nothing");
}
