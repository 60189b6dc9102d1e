/*
 * test_hooks.c -- the replacement layer's registry, dispatch, decision text
 * and self-test, in a process whose malloc stays glibc's (or ASan's).
 *
 * Linked with the objects of hooks/release.c, dispatch.c and selftest.c
 * but not replace.c (see hooks_tests.cmake), so it runs in the sanitizer
 * pass too.  This file plays replace.c's part where the tests need it: it
 * defines munmap (exported, so dlsym finds it) as an interposer that
 * reports to the listeners, and replace_self, whose malloc and free are
 * not this process's (the self-test's FREE/CHUNK part then reports the
 * transitive-link trap; its MUNMAP part works).
 *
 * Main entry points: the Criterion tests below; hook_munmap_count() and the
 * listeners they register.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pinheap.h"
#include "pinheap_config.h"

/* ---- the hidden parts of the hooks objects this test reaches ------------ */
void PINHEAP_NAME(release_dispatch)(void *addr, size_t len, int from_alloc);
void *PINHEAP_NAME(dispatch_libc_reallocarray)(void *p, size_t m, size_t n);
extern void __libc_free(void *);

typedef struct test_replace_self_s {
  void *self_malloc;
  void *self_free;
  void *self_munmap;
} test_replace_self_t;

/* ---- munmap, as replace.c's interposer ---------------------------------- */
static atomic_long hook_munmaps;

__attribute__((visibility("default"))) int munmap(void *addr, size_t len)
{
  atomic_fetch_add(&hook_munmaps, 1);
  PINHEAP_NAME(release_dispatch)(addr, len, 0);
  return (int)syscall(SYS_munmap, addr, len);
}

__attribute__((visibility("hidden"))) const test_replace_self_t PINHEAP_NAME(replace_self) = {
  .self_malloc = NULL,   /* this process's malloc is not pinheap's */
  .self_free = NULL,
  .self_munmap = (void *)munmap,
};

static size_t page_size(void)
{
  return (size_t)sysconf(_SC_PAGESIZE);
}

/* Maps and unmaps one page through the interposer above. */
static void page_cycle(void)
{
  void *p = mmap(NULL, page_size(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(p != MAP_FAILED);
  munmap(p, page_size());
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the registry ------------------------------------------------------- */

typedef struct range_watch_s {
  atomic_uintptr_t lo;
  atomic_size_t len;
  atomic_int hits;
  atomic_int from_alloc;
  atomic_int calls;
} range_watch_t;

static void range_listener(void *addr, size_t len, int from_alloc, void *ctx)
{
  range_watch_t *w = ctx;
  uintptr_t lo = atomic_load(&w->lo);
  atomic_fetch_add(&w->calls, 1);
  if (lo != 0 && (uintptr_t)addr <= lo && (uintptr_t)addr + len >= lo + atomic_load(&w->len)) {
    atomic_fetch_add(&w->hits, 1);
    atomic_store(&w->from_alloc, from_alloc);
  }
}

static void range_watch(range_watch_t *w, void *lo, size_t len)
{
  atomic_store(&w->len, len);
  atomic_store(&w->hits, 0);
  atomic_store(&w->from_alloc, -1);
  atomic_store(&w->lo, (uintptr_t)lo);
}

Test(hooks, registry_answers)
{
  static range_watch_t w[64];
  range_watch_t extra;

  cr_assert_eq(PINHEAP_NAME(register_release)(NULL, NULL), EINVAL);
  cr_assert_eq(PINHEAP_NAME(unregister_release)(range_listener, &extra), ENOENT);
  for (int i = 0; i < 64; i++)
    cr_assert_eq(PINHEAP_NAME(register_release)(range_listener, &w[i]), 0, "slot %d", i);
  cr_assert_eq(PINHEAP_NAME(register_release)(range_listener, &w[5]), EEXIST);
  cr_assert_eq(PINHEAP_NAME(register_release)(range_listener, &extra), ENOSPC);
  page_cycle();
  for (int i = 0; i < 64; i++)
    cr_assert_eq(atomic_load(&w[i].calls), 1, "listener %d called %d times", i,
                 atomic_load(&w[i].calls));
  for (int i = 0; i < 64; i++)
    cr_assert_eq(PINHEAP_NAME(unregister_release)(range_listener, &w[i]), 0, "slot %d", i);
  cr_assert_eq(PINHEAP_NAME(unregister_release)(range_listener, &w[5]), ENOENT);
  page_cycle();
  for (int i = 0; i < 64; i++)
    cr_assert_eq(atomic_load(&w[i].calls), 1, "listener %d called after unregister", i);
  /* a freed slot is reused */
  cr_assert_eq(PINHEAP_NAME(register_release)(range_listener, &extra), 0);
  cr_assert_eq(PINHEAP_NAME(unregister_release)(range_listener, &extra), 0);
}

Test(hooks, both_sources_reach_the_listener)
{
  range_watch_t w;
  size_t page = page_size();

  memset(&w, 0, sizeof(w));
  cr_assert_eq(PINHEAP_NAME(register_release)(range_listener, &w), 0);

  /* an intercepted munmap: from_alloc 0, the exact range */
  char *m = mmap(NULL, 4 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(m != MAP_FAILED);
  range_watch(&w, m + page, 2 * page);
  munmap(m + page, 2 * page);
  cr_assert_eq(atomic_load(&w.hits), 1);
  cr_assert_eq(atomic_load(&w.from_alloc), 0);
  munmap(m, page);
  munmap(m + 3 * page, page);

  /* the allocator's own release (a huge block freed): from_alloc 1; the
   * size is above any threshold and the huge-block cache */
  size_t big = (size_t)256 << 20;
  char *h = PINHEAP_NAME(malloc)(big);
  cr_assert_not_null(h);
  h[0] = 1;
  range_watch(&w, h, big);
  PINHEAP_NAME(free)(h);
  cr_assert_eq(atomic_load(&w.hits), 1, "free of a %zu-byte block was not reported", big);
  cr_assert_eq(atomic_load(&w.from_alloc), 1);
  cr_assert_eq(PINHEAP_NAME(unregister_release)(range_listener, &w), 0);
}

/* ---- unregister waits for calls in flight (issue 8, item 1.7) ----------- */

#define CTX_LIVE 0x1157e
#define CTX_DEAD 0xdead

typedef struct live_ctx_s {
  atomic_int magic;
  atomic_int calls;
} live_ctx_t;

static atomic_int race_stop;
static atomic_long race_bad;       /* calls that saw a dead or freed context */
static atomic_long race_calls;

static void live_listener(void *addr, size_t len, int from_alloc, void *ctx)
{
  live_ctx_t *c = ctx;
  (void)addr, (void)len, (void)from_alloc;
  if (atomic_load(&c->magic) != CTX_LIVE) {
    atomic_fetch_add(&race_bad, 1);
    return;
  }
  atomic_fetch_add(&c->calls, 1);
  atomic_fetch_add(&race_calls, 1);
  /* stay a while, as a registration cache's lookup would */
  for (volatile int i = 0; i < 2000; i++)
    ;
  if (atomic_load(&c->magic) != CTX_LIVE)
    atomic_fetch_add(&race_bad, 1);
}

static void *race_releaser(void *arg)
{
  size_t page = page_size();
  long n = 0;
  (void)arg;
  while (!atomic_load(&race_stop)) {
    if (++n % 64 == 0) {
      /* the OS layer's path too */
      char *h = PINHEAP_NAME(malloc)((size_t)8 << 20);
      if (h != NULL) {
        h[0] = 1;
        PINHEAP_NAME(free)(h);
      }
    } else {
      void *p = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED)
        munmap(p, page);
    }
  }
  return NULL;
}

Test(hooks, unregister_waits_for_calls_in_flight, .timeout = 120)
{
  enum { RELEASERS = 2 };
  pthread_t t[RELEASERS];
  long rounds = 0, rounds_called = 0;
  double end = now() + 2.0;

  for (int i = 0; i < RELEASERS; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, race_releaser, NULL), 0);
  while (now() < end || rounds_called < 200) {
    live_ctx_t *c = malloc(sizeof(*c));
    cr_assert_not_null(c);
    atomic_store(&c->magic, CTX_LIVE);
    atomic_store(&c->calls, 0);
    cr_assert_eq(PINHEAP_NAME(register_release)(live_listener, c), 0);
    for (int spin = 0; spin < 1000 && atomic_load(&c->calls) == 0; spin++)
      sched_yield();
    cr_assert_eq(PINHEAP_NAME(unregister_release)(live_listener, c), 0);
    /* From here on no call may touch c: poison it, then free it (ASan
     * reports any later read as a use after free). */
    rounds_called += atomic_load(&c->calls) > 0;
    atomic_store(&c->magic, CTX_DEAD);
    free(c);
    rounds++;
    if (now() > end + 60)
      break;
  }
  atomic_store(&race_stop, 1);
  for (int i = 0; i < RELEASERS; i++)
    pthread_join(t[i], NULL);
  cr_assert_eq(atomic_load(&race_bad), 0,
               "%ld listener calls saw their context after unregister returned "
               "(%ld rounds, %ld calls)", atomic_load(&race_bad), rounds,
               atomic_load(&race_calls));
  cr_assert(rounds_called >= 200, "only %ld of %ld rounds saw a call: the race was not run",
            rounds_called, rounds);
}

/* A listener that unregisters itself from inside its call: no deadlock,
 * never called again. */
static atomic_int self_calls;

static void self_unregistering(void *addr, size_t len, int from_alloc, void *ctx)
{
  (void)addr, (void)len, (void)from_alloc;
  atomic_fetch_add(&self_calls, 1);
  cr_assert_eq(PINHEAP_NAME(unregister_release)(self_unregistering, ctx), 0);
}

Test(hooks, listener_unregisters_itself, .timeout = 30)
{
  int ctx;
  cr_assert_eq(PINHEAP_NAME(register_release)(self_unregistering, &ctx), 0);
  page_cycle();
  page_cycle();
  cr_assert_eq(atomic_load(&self_calls), 1);
  cr_assert_eq(PINHEAP_NAME(unregister_release)(self_unregistering, &ctx), ENOENT);
}

/* The outer listener releases memory from inside its call; the nested
 * release reaches the inner listener, which unregisters the outer one --
 * still running further up the same stack. */
static atomic_int outer_calls, inner_calls;

static void inner_listener(void *addr, size_t len, int from_alloc, void *ctx);

static void outer_listener(void *addr, size_t len, int from_alloc, void *ctx)
{
  (void)addr, (void)len, (void)from_alloc, (void)ctx;
  if (atomic_fetch_add(&outer_calls, 1) == 0)
    page_cycle();    /* a nested release */
}

static void inner_listener(void *addr, size_t len, int from_alloc, void *ctx)
{
  (void)addr, (void)len, (void)from_alloc, (void)ctx;
  /* the nested call (the outer one's munmap) unregisters the outer listener */
  if (atomic_fetch_add(&inner_calls, 1) == 0)
    cr_assert_eq(PINHEAP_NAME(unregister_release)(outer_listener, NULL), 0);
}

Test(hooks, listener_unregisters_one_running_up_its_stack, .timeout = 30)
{
  cr_assert_eq(PINHEAP_NAME(register_release)(outer_listener, NULL), 0);
  cr_assert_eq(PINHEAP_NAME(register_release)(inner_listener, NULL), 0);
  /* outer #1 -> nested release: outer #2, inner #1 (unregisters outer,
   * whose call #1 is still running below it); back at depth 1: inner #2 */
  page_cycle();
  page_cycle();                      /* inner #3 only */
  cr_assert_eq(atomic_load(&outer_calls), 2);
  cr_assert_eq(atomic_load(&inner_calls), 3);
  cr_assert_eq(PINHEAP_NAME(unregister_release)(outer_listener, NULL), ENOENT);
  cr_assert_eq(PINHEAP_NAME(unregister_release)(inner_listener, NULL), 0);
}

/* A child forked while another thread is inside a listener call can
 * unregister that listener: the call that will never end there is not
 * waited for. */
static atomic_int blocker_in, blocker_go;

static void blocking_listener(void *addr, size_t len, int from_alloc, void *ctx)
{
  (void)addr, (void)len, (void)from_alloc, (void)ctx;
  atomic_store(&blocker_in, 1);
  while (!atomic_load(&blocker_go))
    sched_yield();
}

static void *blocked_releaser(void *arg)
{
  (void)arg;
  page_cycle();
  return NULL;
}

/* Starts a thread running fn, waits until it says (*in) that it is held
 * inside pinheap, and forks: the child exits with child()'s value, killed
 * by SIGALRM if it waits 10 s; then lets the thread go (*go) and joins
 * it.  @return the child's wait status. */
static int fork_while_held(void *(*fn)(void *), atomic_int *in, atomic_int *go, int (*child)(void))
{
  pthread_t t;
  int status;

  cr_assert_eq(pthread_create(&t, NULL, fn, NULL), 0);
  while (!atomic_load(in))
    sched_yield();
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    alarm(10);
    _exit(child());
  }
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  atomic_store(go, 1);
  pthread_join(t, NULL);
  return status;
}

static int unregister_child(void)
{
  return PINHEAP_NAME(unregister_release)(blocking_listener, NULL) == 0 ? 0 : 3;
}

Test(hooks, fork_child_does_not_wait_for_the_parents_calls, .timeout = 30)
{
  cr_assert_eq(PINHEAP_NAME(register_release)(blocking_listener, NULL), 0);
  int status = fork_while_held(blocked_releaser, &blocker_in, &blocker_go, unregister_child);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "the child could not unregister (status 0x%x; SIGALRM = it waited forever)", status);
  cr_assert_eq(PINHEAP_NAME(unregister_release)(blocking_listener, NULL), 0);
}

/* ---- the decision text and the self-test -------------------------------- */

#define TEXT_THREADS 8
static pthread_barrier_t text_barrier;
static const char *text_seen[TEXT_THREADS];

static void *text_reader(void *arg)
{
  pthread_barrier_wait(&text_barrier);
  text_seen[(intptr_t)arg] = PINHEAP_NAME(decision_text)();
  return NULL;
}

Test(hooks, decision_text_from_many_threads_at_once)
{
  pthread_t t[TEXT_THREADS];
  const char *want = "enabled: enabled by " PINHEAP_ENV_MODE "=on";   /* hooks_tests.cmake */

  pthread_barrier_init(&text_barrier, NULL, TEXT_THREADS);
  for (intptr_t i = 0; i < TEXT_THREADS; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, text_reader, (void *)i), 0);
  for (int i = 0; i < TEXT_THREADS; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < TEXT_THREADS; i++) {
    cr_assert_eq(text_seen[i], text_seen[0], "two copies of the decision text");
    cr_assert_str_eq(text_seen[i], want);
  }
}

static void *open_runner(void *arg)
{
  (void)arg;
  for (int i = 0; i < 20; i++)
    PINHEAP_NAME(open)();
  return NULL;
}

Test(hooks, open_from_threads_while_memory_is_released, .timeout = 120)
{
  pthread_t opener[2], releaser;

  /* named with this build's prefix */
  cr_assert_str_eq(PINHEAP_NAME(support_text)(), "not measured: call " PINHEAP_PREFIX_STRING "open() first");
  cr_assert_eq(PINHEAP_NAME(support_level)(), 0);
  atomic_store(&race_stop, 0);
  cr_assert_eq(pthread_create(&releaser, NULL, race_releaser, NULL), 0);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(pthread_create(&opener[i], NULL, open_runner, NULL), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(opener[i], NULL);
  atomic_store(&race_stop, 1);
  pthread_join(releaser, NULL);

  /* munmap is this file's interposer: MUNMAP works; malloc is not
   * pinheap's: FREE and CHUNK are missing, and the text says why. */
  cr_assert_eq(PINHEAP_NAME(support_level)(), PINHEAP_SUPPORT_MUNMAP, "level %d: %s",
               PINHEAP_NAME(support_level)(), PINHEAP_NAME(support_text)());
  cr_assert(strstr(PINHEAP_NAME(support_text)(), "malloc is") != NULL &&
            strstr(PINHEAP_NAME(support_text)(), "not pinheap's") != NULL, "%s",
            PINHEAP_NAME(support_text)());
  cr_assert(strstr(PINHEAP_NAME(support_text)(), "FREE and CHUNK support missing") != NULL);
  cr_assert_eq(PINHEAP_NAME(enabled)(), 0);
  /* the self-test's listener (its context was on open's stack) is gone */
  long before = atomic_load(&hook_munmaps);
  page_cycle();
  cr_assert_eq(atomic_load(&hook_munmaps), before + 1);
}

/* ---- fork while another thread is inside pinheap_open() (issue 24) ------ */

/* The opener thread's own listener holds it inside the self-test (its
 * munmap of a test page: one page, on that thread, while armed) until the
 * main thread has forked; only in the parent process, so that the child's
 * self-test passes through. */
static __thread int stuck_is_opener;
static pid_t stuck_parent;
static atomic_int stuck_armed, stuck_in, stuck_go;

static void stuck_listener(void *addr, size_t len, int from_alloc, void *ctx)
{
  (void)addr, (void)from_alloc, (void)ctx;
  if (getpid() != stuck_parent || !stuck_is_opener || len != page_size() ||
      !atomic_exchange(&stuck_armed, 0))
    return;
  atomic_store(&stuck_in, 1);
  while (!atomic_load(&stuck_go))
    sched_yield();
}

static void *stuck_open(void *arg)
{
  (void)arg;
  stuck_is_opener = 1;
  PINHEAP_NAME(open)();              /* the feeds are looked for once, unarmed */
  atomic_store(&stuck_armed, 1);
  PINHEAP_NAME(open)();
  return NULL;
}

/* A child left waiting on the self-test's lock is killed by its alarm. */
static int open_child(void)
{
  PINHEAP_NAME(open)();
  return PINHEAP_NAME(support_level)() == PINHEAP_SUPPORT_MUNMAP ? 0 : 4;
}

Test(hooks, fork_child_opens_while_another_thread_is_inside_open, .timeout = 30)
{
  stuck_parent = getpid();
  cr_assert_eq(PINHEAP_NAME(register_release)(stuck_listener, NULL), 0);
  int status = fork_while_held(stuck_open, &stuck_in, &stuck_go, open_child);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "the child's pinheap_open() failed (status 0x%x; SIGALRM = it waited forever "
            "for the lock the parent's other thread held)", status);
  cr_assert_eq(PINHEAP_NAME(support_level)(), PINHEAP_SUPPORT_MUNMAP, "%s",
               PINHEAP_NAME(support_text)());
  cr_assert_eq(PINHEAP_NAME(unregister_release)(stuck_listener, NULL), 0);
}

/* ---- reallocarray before the decision (issue 8, item 1.8) --------------- */

Test(hooks, undecided_reallocarray_checks_the_product)
{
  errno = 0;
  cr_assert_null(PINHEAP_NAME(dispatch_libc_reallocarray)(NULL, SIZE_MAX / 2 + 1, 2),
                 "(SIZE_MAX/2+1) * 2 overflows to 0: must be refused, not realloc(NULL, 0)");
  cr_assert_eq(errno, ENOMEM);
  errno = 0;
  cr_assert_null(PINHEAP_NAME(dispatch_libc_reallocarray)(NULL, (size_t)1 << 33, (size_t)1 << 33));
  cr_assert_eq(errno, ENOMEM);
  char *p = PINHEAP_NAME(dispatch_libc_reallocarray)(NULL, 16, 8);
  cr_assert_not_null(p);
  memset(p, 7, 128);
  p = PINHEAP_NAME(dispatch_libc_reallocarray)(p, 64, 8);
  cr_assert_not_null(p);
  cr_assert_eq(p[127], 7);
  __libc_free(p);
}

/* ---- the handler table under threads (also run under TSan) -------------- */
/* The events of test_events.c's partial-unset and cancel cases, fired here
 * through the derived-event entry point itself (this process's munmap is
 * not pinheap's), so that the TSan pass runs them too. */
void PINHEAP_NAME(events_vm_unmapped)(void *addr, size_t len, int source);

#define TABLE_HANDLERS 100
static int table_ids[TABLE_HANDLERS];
static atomic_int table_heard[TABLE_HANDLERS];
static atomic_int table_stop;
static atomic_uintptr_t table_target;

static int table_handler(int type, pinheap_event_t *ev, void *arg)
{
  if (type == PINHEAP_EVENT_VM_UNMAPPED &&
      (uintptr_t)ev->vm_unmapped.address == atomic_load(&table_target))
    atomic_fetch_add(&table_heard[(int *)arg - table_ids], 1);
  return PINHEAP_EVENT_PASS;
}

/* Takes VM_MAPPED from handler i once event 8 i + 1 is under way (spread
 * over the dispatches, each of which calls all the handlers). */
static void *table_unsetter(void *arg)
{
  (void)arg;
  for (int i = 0; i < TABLE_HANDLERS && !atomic_load(&table_stop); i++) {
    while (atomic_load(&table_target) < (uintptr_t)(8 * i + 1) * 4096 && !atomic_load(&table_stop))
      sched_yield();
    PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_VM_MAPPED, table_handler, &table_ids[i]);
  }
  return NULL;
}

/* Every handler keeps hearing VM_UNMAPPED while another thread takes
 * VM_MAPPED away from each in turn. */
Test(hooks, partial_unset_keeps_the_other_events, .timeout = 120)
{
  const int events = 1000;
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < TABLE_HANDLERS; i++) {
      atomic_store(&table_heard[i], 0);
      cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED |
                                                   PINHEAP_EVENT_VM_MAPPED, 0, table_handler,
                                                   &table_ids[i]), 0);
    }
    atomic_store(&table_stop, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, table_unsetter, NULL), 0);
    for (int n = 1; n <= events; n++) {
      atomic_store(&table_target, (uintptr_t)n * 4096);
      PINHEAP_NAME(events_vm_unmapped)((void *)((uintptr_t)n * 4096), 4096,
                                       PINHEAP_EVENT_SOURCE_APP);
    }
    atomic_store(&table_stop, 1);
    pthread_join(t, NULL);
    for (int i = 0; i < TABLE_HANDLERS; i++) {
      cr_assert_eq(atomic_load(&table_heard[i]), events, "round %d: handler %d heard %d of %d",
                   round, i, atomic_load(&table_heard[i]), events);
      cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_ALL, table_handler,
                                                     &table_ids[i]), 0);
    }
  }
}

static atomic_int stuck_entered;

/* Waits at a cancellation point until cancelled. */
static int stuck_handler(int type, pinheap_event_t *ev, void *arg)
{
  (void)type, (void)arg;
  if (ev->vm_unmapped.address != (void *)0x10000)
    return PINHEAP_EVENT_PASS;
  atomic_store(&stuck_entered, 1);
  for (;;)
    pause();
  return PINHEAP_EVENT_PASS;
}

static void *stuck_victim(void *arg)
{
  (void)arg;
  PINHEAP_NAME(events_vm_unmapped)((void *)0x10000, 4096, PINHEAP_EVENT_SOURCE_APP);
  return NULL;
}

static void *stuck_unsetter(void *arg)
{
  (void)arg;
  return (void *)(intptr_t)PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_VM_UNMAPPED,
                                                             stuck_handler, NULL);
}

/* A thread cancelled inside a handler: unset does not wait for it. */
Test(hooks, thread_cancelled_inside_a_handler, .timeout = 60)
{
  pthread_t victim, unsetter;
  void *res;
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, 0, stuck_handler, NULL),
               0);
  cr_assert_eq(pthread_create(&victim, NULL, stuck_victim, NULL), 0);
  while (!atomic_load(&stuck_entered))
    sched_yield();
  cr_assert_eq(pthread_cancel(victim), 0);
  cr_assert_eq(pthread_join(victim, &res), 0);
  cr_assert_eq(res, PTHREAD_CANCELED);
  cr_assert_eq(pthread_create(&unsetter, NULL, stuck_unsetter, NULL), 0);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  cr_assert_eq(pthread_timedjoin_np(unsetter, &res, &until), 0,
               "unset_event_handler still waits 10 s after the cancelled handler's thread ended");
  cr_assert_eq((int)(intptr_t)res, 0);
}
