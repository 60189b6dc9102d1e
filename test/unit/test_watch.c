/*
 * test_watch.c -- watches (hooks/watch/watch.c) end to end, in a process
 * whose memory calls are pinheap's interposers (test_events' set-up): a
 * token stays valid until a release meets its range -- munmap, madvise,
 * mremap that moves, shmdt, free of a mapped block, malloc_trim -- and is
 * invalid before the release goes on; watches beside stay valid; a million
 * watches; a release inside the lock's reach (a signal handler) or inside
 * an event handler; fork.  The threaded test is test_watch_threads.c.
 *
 * Main entry points: watch_ok() and the Test()s.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pinheap.h"

#include "interposed.h"   /* interposed_or_skip(), page, map_pages() */

TestSuite(watch, .init = interposed_or_skip, .timeout = 120);

/* A watch that must succeed. */
static const pinheap_watch_t *watch_ok(const void *addr, size_t len)
{
  const pinheap_watch_t *t = NULL;
  int rc = PINHEAP_NAME(watch)(addr, len, &t);
  cr_assert(rc == 0, "watch(%p, %zu) returned %d", addr, len, rc);
  cr_assert(t != NULL);
  cr_assert(PINHEAP_NAME(watch_valid)(t), "a fresh watch of %p is not valid", addr);
  return t;
}

Test(watch, bad_input)
{
  const pinheap_watch_t *t = NULL;
  char c;
  cr_assert(PINHEAP_NAME(watch)(&c, 1, NULL) == EINVAL);
  cr_assert(PINHEAP_NAME(watch)(&c, 0, &t) == EINVAL);
  cr_assert(PINHEAP_NAME(watch)((void *)(UINTPTR_MAX - 4), 8, &t) == EINVAL);
  cr_assert(t == NULL, "the token was set on an error");
  PINHEAP_NAME(unwatch)(NULL);
}

/* watch_count(): the live watches, invalid ones included, until unwatch. */
Test(watch, count_follows_watch_and_unwatch)
{
  size_t base = PINHEAP_NAME(watch_count)();
  char *p = map_pages(3);
  const pinheap_watch_t *t[3];
  for (int i = 0; i < 3; i++)
    t[i] = watch_ok(p + (size_t)i * page, page);
  cr_assert_eq(PINHEAP_NAME(watch_count)(), base + 3);
  PINHEAP_NAME(unwatch)(t[1]);
  cr_assert_eq(PINHEAP_NAME(watch_count)(), base + 2);
  cr_assert_eq(munmap(p, 3 * page), 0);        /* invalid, still live */
  cr_assert(!PINHEAP_NAME(watch_valid)(t[0]) && !PINHEAP_NAME(watch_valid)(t[2]));
  cr_assert_eq(PINHEAP_NAME(watch_count)(), base + 2);
  PINHEAP_NAME(unwatch)(t[0]);
  PINHEAP_NAME(unwatch)(t[2]);
  cr_assert_eq(PINHEAP_NAME(watch_count)(), base);
}

Test(watch, valid_until_munmap_and_only_the_touched_ones)
{
  char *p = map_pages(8);
  const pinheap_watch_t *hit = watch_ok(p + 2 * page + 100, 10);          /* inside page 2 */
  const pinheap_watch_t *across = watch_ok(p + page / 2, 3 * page);      /* pages 0..3 */
  const pinheap_watch_t *before = watch_ok(p, page);                     /* page 0 */
  const pinheap_watch_t *after = watch_ok(p + 3 * page, page);           /* page 3 */
  const pinheap_watch_t *big = watch_ok(p + 4 * page, 4 * page);         /* pages 4..7 */
  const pinheap_watch_t *twice = watch_ok(p + 2 * page + 100, 10);       /* same as hit */

  cr_assert(munmap(p + 2 * page, page) == 0);
  cr_assert(!PINHEAP_NAME(watch_valid)(hit), "munmap of its page left the token valid");
  cr_assert(!PINHEAP_NAME(watch_valid)(twice), "a second watch of the range stayed valid");
  cr_assert(!PINHEAP_NAME(watch_valid)(across), "a partial overlap left the token valid");
  cr_assert(PINHEAP_NAME(watch_valid)(before), "the page before went invalid");
  cr_assert(PINHEAP_NAME(watch_valid)(after), "the page after went invalid");
  cr_assert(PINHEAP_NAME(watch_valid)(big), "pages 4..7 went invalid");
  /* the last byte of big's range only */
  cr_assert(munmap(p + 7 * page, page) == 0);
  cr_assert(!PINHEAP_NAME(watch_valid)(big), "munmap of its last page left the token valid");
  cr_assert(PINHEAP_NAME(watch_valid)(before) && PINHEAP_NAME(watch_valid)(after));
  PINHEAP_NAME(unwatch)(hit);
  PINHEAP_NAME(unwatch)(twice);
  PINHEAP_NAME(unwatch)(across);
  PINHEAP_NAME(unwatch)(big);
  /* unwatched: gone from the index, later releases do not reach them */
  const pinheap_watch_t *again = watch_ok(p + 5 * page, page);
  cr_assert(munmap(p + 6 * page, page) == 0);
  cr_assert(PINHEAP_NAME(watch_valid)(again), "a release beside went to the wrong watch");
  PINHEAP_NAME(unwatch)(again);
  PINHEAP_NAME(unwatch)(before);
  PINHEAP_NAME(unwatch)(after);
}

Test(watch, madvise_dontneed_and_not_willneed)
{
  char *p = map_pages(2);
  const pinheap_watch_t *t = watch_ok(p, 2 * page);
  cr_assert(madvise(p, page, MADV_WILLNEED) == 0);
  cr_assert(PINHEAP_NAME(watch_valid)(t), "MADV_WILLNEED releases nothing");
  cr_assert(madvise(p + page, page, MADV_DONTNEED) == 0);
  cr_assert(!PINHEAP_NAME(watch_valid)(t), "MADV_DONTNEED left the token valid");
  PINHEAP_NAME(unwatch)(t);
  munmap(p, 2 * page);
}

Test(watch, mremap_that_moves)
{
  char *p = map_pages(2);
  char *dest = map_pages(4);       /* a target, so that the move is certain */
  const pinheap_watch_t *t = watch_ok(p, 2 * page);
  const pinheap_watch_t *d = watch_ok(dest + 3 * page, page);   /* beyond the target */
  void *q = mremap(p, 2 * page, 2 * page, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
  cr_assert(q == dest);
  cr_assert(!PINHEAP_NAME(watch_valid)(t), "mremap moved the range and the token stayed valid");
  cr_assert(PINHEAP_NAME(watch_valid)(d), "a page past the move's target went invalid");
  PINHEAP_NAME(unwatch)(t);
  PINHEAP_NAME(unwatch)(d);
  munmap(dest, 4 * page);
}

Test(watch, shmdt)
{
  int id = shmget(IPC_PRIVATE, 4 * page, IPC_CREAT | 0600);
  if (id < 0)
    cr_skip_test("shmget: %s", strerror(errno));
  char *p = shmat(id, NULL, 0);
  shmctl(id, IPC_RMID, NULL);
  cr_assert(p != (void *)-1);
  const pinheap_watch_t *t = watch_ok(p + page, 10);
  cr_assert(shmdt(p) == 0);
  cr_assert(!PINHEAP_NAME(watch_valid)(t), "shmdt left the token valid");
  PINHEAP_NAME(unwatch)(t);
}

Test(watch, free_of_a_mapped_block)
{
  cr_assert(PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, 128 * 1024) == 1);
  size_t n = 1 << 20;
  char *b = PINHEAP_NAME(malloc)(n);
  cr_assert(b != NULL);
  memset(b, 2, n);
  const pinheap_watch_t *t = watch_ok(b + n / 2, 64);
  PINHEAP_NAME(free)(b);
  cr_assert(!PINHEAP_NAME(watch_valid)(t), "free of a 1 MiB mapped block left the token valid");
  PINHEAP_NAME(unwatch)(t);
}

Test(watch, malloc_trim_of_the_range)
{
  enum { N = 64 };
  const size_t sz = 48 * 1024;
  void *blocks[N];
  const pinheap_watch_t *tok[N];

  cr_assert(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0) == 1);
  cr_assert(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, 64 * 1024 * 1024) == 1);  /* no auto trim */
  for (int i = 0; i < N; i++) {
    blocks[i] = PINHEAP_NAME(malloc)(sz);
    cr_assert(blocks[i] != NULL);
    memset(blocks[i], 3, sz);
  }
  for (int i = 0; i < N; i++)
    tok[i] = watch_ok(blocks[i], sz);
  for (int i = 0; i < N; i += 2)
    PINHEAP_NAME(free)(blocks[i]);       /* holes with whole free pages inside */
  cr_assert(PINHEAP_NAME(malloc_trim)(0) == 1, "malloc_trim gave nothing back");
  int freed_invalid = 0;
  for (int i = 0; i < N; i++) {
    if (i % 2)
      cr_assert(PINHEAP_NAME(watch_valid)(tok[i]), "a live block's token went invalid");
    else
      freed_invalid += !PINHEAP_NAME(watch_valid)(tok[i]);
  }
  cr_assert(freed_invalid >= N / 2 - 1,
            "malloc_trim gave back the holes' pages, but only %d of %d tokens went invalid",
            freed_invalid, N / 2);
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(unwatch)(tok[i]);
}

/* ---- invalid BEFORE the release --------------------------------------- */
static const pinheap_watch_t *before_tok;
static const char *before_addr;
static atomic_int before_seen, before_invalid, before_readable;

static int before_handler(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)arg;
  const char *a = ev->vm_unmapped.address;
  if (a <= before_addr && before_addr < a + ev->vm_unmapped.size) {
    atomic_fetch_add(&before_seen, 1);
    atomic_fetch_add(&before_invalid, !PINHEAP_NAME(watch_valid)(before_tok));
    atomic_fetch_add(&before_readable, *(volatile const char *)before_addr == 0x5a);
  }
  return PINHEAP_EVENT_PASS;
}

Test(watch, invalid_before_the_release_reaches_a_later_handler)
{
  char *p = map_pages(1);
  before_addr = p;
  before_tok = watch_ok(p, page);
  /* priority 0 (a release listener's) and INT_MIN + 1: both after watch's */
  cr_assert(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, INT_MIN + 1,
                                            before_handler, NULL) == 0);
  cr_assert(munmap(p, page) == 0);
  cr_assert(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, before_handler,
                                              NULL) == 0);
  cr_assert(atomic_load(&before_seen) == 1, "the handler heard the munmap %d times",
            atomic_load(&before_seen));
  cr_assert(atomic_load(&before_readable) == 1, "the page was gone before the handler ran");
  cr_assert(atomic_load(&before_invalid) == 1,
            "a later handler, before the release, found the token still valid");
  PINHEAP_NAME(unwatch)(before_tok);
}

/* ---- watch and unwatch from inside a release ------------------------- */
static atomic_int inner_calls;

static int inner_handler(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)ev;
  (void)arg;
  const pinheap_watch_t *t;
  static char c;
  if (PINHEAP_NAME(watch)(&c, 1, &t) == 0) {
    PINHEAP_NAME(unwatch)(t);
    atomic_fetch_add(&inner_calls, 1);
  }
  return PINHEAP_EVENT_PASS;
}

Test(watch, watch_and_unwatch_inside_a_release_handler)
{
  char *p = map_pages(1);
  const pinheap_watch_t *t = watch_ok(p, page);
  cr_assert(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, 0, inner_handler,
                                            NULL) == 0);
  cr_assert(munmap(p, page) == 0);
  PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, inner_handler, NULL);
  cr_assert(atomic_load(&inner_calls) >= 1);
  cr_assert(!PINHEAP_NAME(watch_valid)(t));
  PINHEAP_NAME(unwatch)(t);
}

/* ---- a release on the thread that holds the lock (a signal handler) ---- */
static char *sig_page;
static atomic_long sig_releases;

static void sig_release(int sig)
{
  (void)sig;
  int saved = errno;
  char *q = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (q != MAP_FAILED) {
    munmap(q, page);
    atomic_fetch_add(&sig_releases, 1);
  }
  errno = saved;
}

Test(watch, a_release_from_a_signal_handler_inside_watch_does_not_deadlock)
{
  sig_page = map_pages(1);
  const pinheap_watch_t *keep = watch_ok(sig_page, page);
  struct sigaction sa = { .sa_handler = sig_release };
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  cr_assert(sigaction(SIGPROF, &sa, NULL) == 0);
  struct itimerval it = { { 0, 50 }, { 0, 50 } };
  cr_assert(setitimer(ITIMER_PROF, &it, NULL) == 0);
  alarm(100);                      /* a deadlock ends the test here */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long rounds = 0;
  do {
    for (int i = 0; i < 1000; i++) {
      const pinheap_watch_t *t;
      cr_assert(PINHEAP_NAME(watch)(sig_page + (i % 64), 8, &t) == 0);
      PINHEAP_NAME(unwatch)(t);
    }
    rounds++;
    clock_gettime(CLOCK_MONOTONIC, &t1);
  } while (t1.tv_sec - t0.tv_sec < 2);
  struct itimerval off = { { 0, 0 }, { 0, 0 } };
  setitimer(ITIMER_PROF, &off, NULL);
  alarm(0);
  cr_assert(atomic_load(&sig_releases) > 0, "no signal arrived in %ld rounds", rounds);
  /* the page watched throughout was never released: the fallback (every
   * token invalid) may have hit it, nothing else may */
  PINHEAP_NAME(unwatch)(keep);
  cr_log_info("%ld signal releases during %ld000 watch/unwatch pairs",
              (long)atomic_load(&sig_releases), rounds);
}

/* ---- a million watches ----------------------------------------------- */
static long rss_kib(void)
{
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (f != NULL) {
    if (fscanf(f, "%ld %ld", &size, &res) != 2)
      res = 0;
    fclose(f);
  }
  return res * (long)(page / 1024);
}

Test(watch, a_million_watches)
{
  enum { N = 1000000, STEP = 64 };
  size_t span = (size_t)N * STEP;          /* 64 MB, watched 64 bytes at a time */
  char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  cr_assert(p != MAP_FAILED);
  const pinheap_watch_t **tok = mmap(NULL, N * sizeof *tok, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(tok != MAP_FAILED);
  memset(tok, 0, N * sizeof *tok);
  long rss0 = rss_kib();
  struct timespec t0, t1, t2;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < N; i++)
    cr_assert(PINHEAP_NAME(watch)(p + i * STEP, STEP, &tok[i]) == 0, "watch %ld failed", i);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long grown = rss_kib() - rss0;
  cr_assert(grown < 128 * 1024, "a million watches took %ld KiB", grown);
  /* release one page in the middle: exactly its watches go */
  size_t mid = (span / 2) & ~(page - 1);
  cr_assert(munmap(p + mid, page) == 0);
  clock_gettime(CLOCK_MONOTONIC, &t2);
  long lo = (long)(mid / STEP), hi = (long)((mid + page) / STEP);
  for (long i = 0; i < N; i++) {
    int want = !(i >= lo && i < hi);
    if (PINHEAP_NAME(watch_valid)(tok[i]) != want)
      cr_assert_fail("watch %ld of [%ld, %ld): valid %d, expected %d", i, lo, hi, !want, want);
  }
  for (long i = 0; i < N; i++)
    PINHEAP_NAME(unwatch)(tok[i]);
  cr_log_info("1e6 watches: %.0f ns per watch, %ld KiB, one release %.1f us",
              ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / N, grown,
              ((t2.tv_sec - t1.tv_sec) * 1e9 + (t2.tv_nsec - t1.tv_nsec)) / 1e3);
  munmap(p, span);
  munmap(tok, N * sizeof *tok);
}

/* ---- the index's corners (hooks/watch/README.md, "The index") ---------- */
/* 40 watches of one page share one (class, group): their entries fill a
 * bucket (15) and spill into the next ones; a release of the page must
 * find all of them, and unwatch must find each one's entry. */
Test(watch, watches_spilled_past_their_bucket_are_found)
{
  enum { N = 40 };
  char *p = map_pages(3);
  const pinheap_watch_t *t[N];
  for (int i = 0; i < N; i++)
    t[i] = watch_ok(p + page + (size_t)i * 8, page - (size_t)i * 8);
  const pinheap_watch_t *beside = watch_ok(p + 2 * page, page);
  cr_assert_eq(munmap(p + page, page), 0);
  for (int i = 0; i < N; i++)
    cr_assert(!PINHEAP_NAME(watch_valid)(t[i]), "watch %d of the released page is valid", i);
  cr_assert(PINHEAP_NAME(watch_valid)(beside), "the watch of the next page went invalid");
  for (int i = N - 1; i >= 0; i -= 2)      /* out of order: entries move inside buckets */
    PINHEAP_NAME(unwatch)(t[i]);
  for (int i = 0; i < N; i += 2)
    PINHEAP_NAME(unwatch)(t[i]);
  PINHEAP_NAME(unwatch)(beside);
  munmap(p, 3 * page);
}

/* The granule filter keeps the bits of unwatched watches until it is
 * filled again (after more unwatches than live watches): the live watches
 * must be in it after the fill, and a watch made after it too. */
Test(watch, the_filter_filled_again_keeps_the_live_watches)
{
  enum { N = 3000 };
  char *p = map_pages(N + 1);
  const pinheap_watch_t **t = calloc(N, sizeof *t);
  cr_assert(t != NULL);
  for (int i = 0; i < N; i++)
    t[i] = watch_ok(p + (size_t)i * page, page);
  for (int i = 0; i < N; i++)               /* 2500 unwatched: a fill at the 2013th */
    if (i % 6 != 0)
      PINHEAP_NAME(unwatch)(t[i]);
  const pinheap_watch_t *late = watch_ok(p + 7 * page, page);   /* a page unwatched before */
  for (int i = 0; i < N; i++) {
    if (i % 6 != 0 && i != 7)
      continue;
    cr_assert_eq(munmap(p + (size_t)i * page, page), 0);
    const pinheap_watch_t *w = i == 7 ? late : t[i];
    cr_assert(!PINHEAP_NAME(watch_valid)(w), "the watch of page %d survived its release", i);
    PINHEAP_NAME(unwatch)(w);
  }
  cr_assert_eq(PINHEAP_NAME(watch_count)(), 0);
  free(t);
  munmap(p, (size_t)(N + 1) * page);
}

/* Entries keep a watch's ends rounded outwards to 1/512 of its class: an
 * unaligned watch of 3 pages less 12 bytes (units of 16 bytes) and a watch
 * of 8 MiB (beyond the filter's classes) are each met by a release of
 * their last page only, and a watch starting a byte after the first ends
 * stays valid. */
Test(watch, rounded_entries_and_unfiltered_classes_meet_their_releases)
{
  size_t big = (size_t)8 << 20;
  char *p = map_pages(6);
  char *q = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(q != MAP_FAILED);
  const pinheap_watch_t *odd = watch_ok(p + 5, 3 * page - 12);     /* ends at p + 3 pages - 7 */
  const pinheap_watch_t *after = watch_ok(p + 3 * page + 1, 100);
  const pinheap_watch_t *large = watch_ok(q, big);
  cr_assert_eq(munmap(p + 2 * page, page), 0);
  cr_assert(!PINHEAP_NAME(watch_valid)(odd), "the unaligned watch survived its last page's release");
  cr_assert(PINHEAP_NAME(watch_valid)(after), "a watch after the released page went invalid");
  cr_assert_eq(munmap(q + big - page, page), 0);
  cr_assert(!PINHEAP_NAME(watch_valid)(large), "the 8 MiB watch survived its last page's release");
  PINHEAP_NAME(unwatch)(odd);
  PINHEAP_NAME(unwatch)(after);
  PINHEAP_NAME(unwatch)(large);
  munmap(p, 6 * page);
  munmap(q, big - page);
}

/* ---- fork ------------------------------------------------------------- */
Test(watch, fork_child_keeps_its_watches)
{
  char *p = map_pages(2);
  const pinheap_watch_t *a = watch_ok(p, page);
  const pinheap_watch_t *b = watch_ok(p + page, page);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    int bad = 0;
    bad |= !PINHEAP_NAME(watch_valid)(a) << 0;
    bad |= !PINHEAP_NAME(watch_valid)(b) << 1;
    munmap(p, page);
    bad |= PINHEAP_NAME(watch_valid)(a) << 2;          /* the child's release */
    bad |= !PINHEAP_NAME(watch_valid)(b) << 3;
    const pinheap_watch_t *c;
    bad |= (PINHEAP_NAME(watch)(p + page, 1, &c) != 0) << 4;
    munmap(p + page, page);
    bad |= PINHEAP_NAME(watch_valid)(c) << 5;
    _exit(bad);
  }
  int st;
  cr_assert(waitpid(pid, &st, 0) == pid);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's checks failed: status 0x%x", st);
  cr_assert(PINHEAP_NAME(watch_valid)(a), "the child's release reached the parent's token");
  PINHEAP_NAME(unwatch)(a);
  PINHEAP_NAME(unwatch)(b);
}

Test(watch, unwatch_twice_ends_the_process, .signal = SIGABRT)
{
  char c;
  const pinheap_watch_t *t = watch_ok(&c, 1);
  PINHEAP_NAME(unwatch)(t);
  PINHEAP_NAME(unwatch)(t);
}
