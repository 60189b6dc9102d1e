/*
 * test_lock.c -- the heap lock (ph_lock_t: chunk.h, slow paths in arena.c):
 * mutual exclusion with the holder preempted inside, a waiter that sleeps
 * instead of burning its CPU, a wake-up that reaches another process (the
 * shared heap's locks live in its region), and fork while the allocator's
 * locks are contended.
 *
 * Criterion's assertions may only run on the test's main thread: worker
 * threads count what they saw and the main thread asserts after joining.
 */
#include "test_util.h"

#include <sched.h>
#include <time.h>

#include "allocator/heap/chunk.h"      /* ph_lock, ph_unlock */

TestSuite(lock, .timeout = 120);

static double now_s(clockid_t clock)
{
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- mutual exclusion ------------------------------------------------------- */

enum { COUNT_THREADS = 8, COUNT_ROUNDS = 20000 };

static ph_lock_t count_lock;
static unsigned long counter;            /* plain: only the lock protects it */
static int inside;                       /* plain: 1 while a thread holds the lock */
static atomic_int overlaps;

static void *count_up(void *arg)
{
  (void)arg;
  for (int r = 0; r < COUNT_ROUNDS; r++) {
    ph_lock(&count_lock);
    if (inside != 0)
      atomic_fetch_add(&overlaps, 1);
    inside = 1;
    unsigned long c = counter;
    if (r % 64 == 0)
      sched_yield();                     /* preempted while holding it */
    counter = c + 1;
    inside = 0;
    ph_unlock(&count_lock);
  }
  return NULL;
}

Test(lock, counts_exactly_with_the_holder_preempted)
{
  pthread_t t[COUNT_THREADS];
  for (int i = 0; i < COUNT_THREADS; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, count_up, NULL), 0);
  for (int i = 0; i < COUNT_THREADS; i++)
    pthread_join(t[i], NULL);
  cr_assert_eq(atomic_load(&overlaps), 0, "%d times a thread took the lock while another held it",
               atomic_load(&overlaps));
  cr_assert_eq(counter, (unsigned long)COUNT_THREADS * COUNT_ROUNDS,
               "counter %lu after %d threads added %d each under the lock", counter,
               COUNT_THREADS, COUNT_ROUNDS);
  cr_assert_eq(atomic_load(&count_lock.held), 0, "the lock word is %d once every thread is done",
               atomic_load(&count_lock.held));
}

/* ---- a waiter sleeps -------------------------------------------------------------- */

enum { HOLD_MS = 500, WAIT_CPU_MS_MAX = 50 };

static ph_lock_t sleep_lock;
static atomic_int waiter_started;
static double waiter_cpu_s;

static void *wait_for_lock(void *arg)
{
  (void)arg;
  double cpu0 = now_s(CLOCK_THREAD_CPUTIME_ID);
  atomic_store(&waiter_started, 1);
  ph_lock(&sleep_lock);
  waiter_cpu_s = now_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  ph_unlock(&sleep_lock);
  return NULL;
}

Test(lock, a_waiter_sleeps_while_the_holder_works)
{
  pthread_t t;
  ph_lock(&sleep_lock);
  cr_assert_eq(pthread_create(&t, NULL, wait_for_lock, NULL), 0);
  while (atomic_load(&waiter_started) == 0)
    sched_yield();
  usleep(HOLD_MS * 1000);
  ph_unlock(&sleep_lock);
  pthread_join(t, NULL);
  cr_assert_lt(waiter_cpu_s * 1000, WAIT_CPU_MS_MAX,
               "a thread waiting %d ms for the lock used %.0f ms of CPU (expected under %d: "
               "it should sleep, not spin)", HOLD_MS, waiter_cpu_s * 1000, WAIT_CPU_MS_MAX);
  cr_assert_eq(atomic_load(&sleep_lock.held), 0);
}

/* ---- a wake-up reaches another process ----------------------------------------- */

Test(lock, a_sleeper_in_another_process_is_woken)
{
  ph_lock_t *l = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(l, MAP_FAILED);
  atomic_int *got = (atomic_int *)(l + 1);
  ph_lock(l);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    alarm(20);                           /* never woken: killed, and the test fails */
    ph_lock(l);
    atomic_store(got, 1);
    ph_unlock(l);
    _exit(0);
  }
  usleep(HOLD_MS * 1000);                /* the child spins, then sleeps */
  ph_unlock(l);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "the child waiting for a lock in shared memory %s %d (the parent's unlock must "
            "wake a sleeper of another process)",
            WIFSIGNALED(status) ? "died of signal" : "exited with",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  cr_assert_eq(atomic_load(got), 1);
  munmap(l, 4096);
}

/* ---- fork while the allocator's locks are contended -------------------------------- */

enum { FORK_THREADS = 4, FORKS = 20 };

static atomic_int fork_stop;

static void *churn_heap(void *arg)
{
  unsigned seed = (unsigned)(uintptr_t)arg;
  void *keep[32] = { NULL };
  while (atomic_load(&fork_stop) == 0) {
    seed = seed * 1103515245u + 12345u;
    unsigned k = (seed >> 8) % 32;
    PINHEAP_NAME(free)(keep[k]);
    /* past the slab sizes and the thread caches' sizes: the arena's lock */
    size_t n = (seed >> 4) % 4 == 0 ? 64 : 3000 + (seed >> 12) % 60000;
    keep[k] = PINHEAP_NAME(malloc)(n);
    if (keep[k] != NULL)
      memset(keep[k], 0x33, 64);
  }
  for (int k = 0; k < 32; k++)
    PINHEAP_NAME(free)(keep[k]);
  return NULL;
}

Test(lock, fork_while_threads_contend_for_the_heap)
{
  pthread_t t[FORK_THREADS];
  cr_assert_eq(PINHEAP_NAME(mallopt)(M_ARENA_MAX, 1), 1);     /* every thread on one lock */
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(1));
  for (int i = 0; i < FORK_THREADS; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, churn_heap, (void *)(uintptr_t)(i + 1)), 0);
  for (int f = 0; f < FORKS; f++) {
    usleep(5000);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
      alarm(20);                         /* a lock left held: killed, and the test fails */
      for (int i = 0; i < 100; i++) {
        void *p = PINHEAP_NAME(malloc)(64 + (size_t)i * 700);
        if (p == NULL)
          _exit(2);
        memset(p, 0x44, 64);
        PINHEAP_NAME(free)(p);
      }
      _exit(PINHEAP_NAME(malloc_check)() == 0 ? 0 : 3);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "fork %d: the child %s %d (2: out of memory, 3: the heap check failed; "
              "signal 14: a lock stayed held)", f,
              WIFSIGNALED(status) ? "died of signal" : "exited with",
              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
  atomic_store(&fork_stop, 1);
  for (int i = 0; i < FORK_THREADS; i++)
    pthread_join(t[i], NULL);
  cr_assert_eq(PINHEAP_NAME(malloc_check)(), 0);
}
