/*
 * test_audit.c -- the kernel-backed audit of watches (hooks/watch/audit.c,
 * PINHEAP_AUDIT=1 in this test's environment), in a process whose memory
 * calls are pinheap's interposers: watched ranges released by an inline
 * `syscall` instruction (pinheap never sees it: munmap, madvise DONTNEED,
 * mremap that moves, process_madvise DONTNEED) end with the token invalid,
 * the unannounced count one higher and one warning line; a release through
 * libc (announced) adds nothing; a thread releasing thousands of times
 * beside the reader never hangs; fork and exec with the audit on.  Where
 * userfaultfd is refused, every test is skipped with the reason.
 *
 * Main entry points: audit_or_skip(), raw() and the Test()s.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pinheap.h"

#include "interposed.h"   /* interposed_or_skip(), page, map_pages() */

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

/* A system call by the instruction itself: libc's syscall() and the release
 * wrappers are pinheap's interposers (announced), this is not. */
static long raw(long n, long a, long b, long c, long d, long e)
{
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                   : "rcx", "r11", "memory");
  return ret;
#else
  (void)n, (void)a, (void)b, (void)c, (void)d, (void)e;
  cr_skip_test("the raw system call helper is written for x86-64 only");
  return -ENOSYS;
#endif
}

static void audit_or_skip(void)
{
  interposed_or_skip();
  const char *a = getenv("PINHEAP_AUDIT");
  cr_assert(a != NULL && strcmp(a, "1") == 0, "this test runs with PINHEAP_AUDIT=1");
  long fd = raw(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY, 0, 0, 0, 0);
  if (fd < 0) {
    /* on stderr too: ctest shows the test skipped (SKIP_REGULAR_EXPRESSION) */
    fprintf(stderr, "test_audit: SKIP: userfaultfd is not permitted here (%s)\n",
            strerror((int)-fd));
    cr_skip_test("userfaultfd is not permitted here (%s): the audit cannot run",
                 strerror((int)-fd));
  }
  close((int)fd);
}

TestSuite(audit, .init = audit_or_skip, .timeout = 60);

/* ---- stderr to a file, to count the warning lines ------------------------ */

static int err_saved = -1;
static FILE *err_file;

static void err_capture(void)
{
  fflush(stderr);
  err_file = tmpfile();
  cr_assert(err_file != NULL);
  err_saved = dup(2);
  dup2(fileno(err_file), 2);
}

/* The lines written since err_capture that contain what. */
static int err_count(const char *what)
{
  char line[512];
  int n = 0;
  rewind(err_file);
  while (fgets(line, sizeof line, err_file) != NULL)
    if (strstr(line, what) != NULL)
      n++;
  return n;
}

static void err_restore(void)
{
  dup2(err_saved, 2);
  close(err_saved);
  fclose(err_file);
}

/* The count once it passed want, or what it is after 2 s. */
static size_t unannounced_reaching(size_t want)
{
  for (int i = 0; i < 2000 && PINHEAP_NAME(watch_unannounced)() < want; i++)
    usleep(1000);
  return PINHEAP_NAME(watch_unannounced)();
}

/* A raw munmap of the page at p, whose watch t must end invalid and counted
 * once (why names the failure). */
static void raw_unmap_caught(char *p, const pinheap_watch_t *t, const char *why)
{
  size_t before = PINHEAP_NAME(watch_unannounced)();
  err_capture();
  cr_assert_eq(raw(SYS_munmap, (long)p, (long)page, 0, 0, 0), 0);
  size_t after = unannounced_reaching(before + 1);
  err_restore();
  cr_assert(!PINHEAP_NAME(watch_valid)(t), "%s", why);
  cr_assert_eq(after, before + 1, "%s", why);
  PINHEAP_NAME(unwatch)(t);
}

static const pinheap_watch_t *watch_ok(const void *addr, size_t len)
{
  const pinheap_watch_t *t = NULL;
  int rc = PINHEAP_NAME(watch)(addr, len, &t);
  cr_assert(rc == 0, "watch(%p, %zu) returned %d", addr, len, rc);
  cr_assert(PINHEAP_NAME(watch_valid)(t));
  return t;
}

/* A watch of a page inside p's pages, released by release(p); the token
 * must end invalid, counted once, with one line naming the release. */
static void caught(const char *how, void (*release)(char *p))
{
  char *p = map_pages(4);
  size_t unaudited = PINHEAP_NAME(watch_unaudited)();
  const pinheap_watch_t *t = watch_ok(p + page + 8, 64);
  const pinheap_watch_t *beside = watch_ok(p + 3 * page, 64);
  cr_assert_eq(PINHEAP_NAME(watch_unaudited)(), unaudited, "the watch was not registered");
  size_t before = PINHEAP_NAME(watch_unannounced)();
  err_capture();
  release(p);
  size_t after = unannounced_reaching(before + 1);
  usleep(20000);                                  /* a second report would come now */
  int lines = err_count("unannounced release of [");
  int named = err_count(how);
  err_restore();
  cr_assert(!PINHEAP_NAME(watch_valid)(t), "%s by a raw system call: the token is still valid",
            how);
  cr_assert(PINHEAP_NAME(watch_valid)(beside), "%s: the watch beside went invalid", how);
  cr_assert_eq(after, before + 1, "%s: unannounced %zu -> %zu", how, before, after);
  cr_assert_eq(PINHEAP_NAME(watch_unannounced)(), before + 1, "%s: counted twice", how);
  cr_assert_eq(lines, 1, "%s: %d warning lines, not 1", how, lines);
  cr_assert_eq(named, 1, "%s: the line does not say %s", how, how);
  PINHEAP_NAME(unwatch)(t);
  PINHEAP_NAME(unwatch)(beside);
  munmap(p, 4 * page);
}

static void raw_munmap(char *p)
{
  cr_assert_eq(raw(SYS_munmap, (long)(p + page), (long)page, 0, 0, 0), 0);
}

static void raw_madvise(char *p)
{
  cr_assert_eq(raw(SYS_madvise, (long)(p + page), (long)page, MADV_DONTNEED, 0, 0), 0);
}

static void raw_mremap(char *p)
{
  char *to = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(to != MAP_FAILED);
  long r = raw(SYS_mremap, (long)(p + page), (long)page, (long)page,
               MREMAP_MAYMOVE | MREMAP_FIXED, (long)to);
  cr_assert_eq(r, (long)to, "mremap: %ld", r);
  munmap(to, page);
}

static void raw_process_madvise(char *p)
{
  long pidfd = raw(SYS_pidfd_open, getpid(), 0, 0, 0, 0);
  if (pidfd < 0)
    cr_skip_test("pidfd_open: %s", strerror((int)-pidfd));
  struct iovec iov = { p + page, page };
  long r = raw(SYS_process_madvise, pidfd, (long)&iov, 1, MADV_DONTNEED, 0);
  close((int)pidfd);
  if (r == -EINVAL)
    cr_skip_test("process_madvise refuses MADV_DONTNEED on this kernel (before 6.13?)");
  cr_assert_eq(r, (long)page, "process_madvise: %ld", r);
}

Test(audit, raw_munmap_is_caught) { caught("(munmap)", raw_munmap); }
Test(audit, raw_madvise_dontneed_is_caught) { caught("(madvise)", raw_madvise); }
Test(audit, raw_mremap_moving_is_caught) { caught("(mremap)", raw_mremap); }
Test(audit, raw_process_madvise_is_caught) { caught("(madvise)", raw_process_madvise); }

/* Through libc (pinheap's interposers): announced, so the handler made the
 * token invalid first and the reader only compares: nothing counted. */
Test(audit, announced_releases_are_not_counted)
{
  char *p = map_pages(4);
  const pinheap_watch_t *t[3] = { watch_ok(p, 64), watch_ok(p + page, 64),
                                  watch_ok(p + 2 * page, 64) };
  size_t before = PINHEAP_NAME(watch_unannounced)();
  err_capture();
  cr_assert_eq(madvise(p, page, MADV_DONTNEED), 0);
  cr_assert_eq(munmap(p + page, page), 0);
  char *to = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(mremap(p + 2 * page, page, page, MREMAP_MAYMOVE | MREMAP_FIXED, to) == to);
  usleep(50000);
  int lines = err_count("unannounced");
  err_restore();
  for (int i = 0; i < 3; i++)
    cr_assert(!PINHEAP_NAME(watch_valid)(t[i]), "release %d not seen", i);
  cr_assert_eq(PINHEAP_NAME(watch_unannounced)(), before, "an announced release was counted");
  cr_assert_eq(lines, 0, "an announced release was reported");
  for (int i = 0; i < 3; i++)
    PINHEAP_NAME(unwatch)(t[i]);
  munmap(p, 4 * page);
  munmap(to, page);
}

/* Unmap, map again (the same place, most times), watch again: a watch made
 * after a release returned is never taken for its victim (watch() waits
 * until the reader has handled the events already read). */
static volatile int spin_stop;

static void *spinner(void *arg)
{
  (void)arg;
  while (!spin_stop)
    ;
  return NULL;
}

Test(audit, a_range_watched_again_after_its_release_is_not_counted)
{
  size_t before = PINHEAP_NAME(watch_unannounced)();
  pthread_t sp[2];                     /* busy CPUs: the reader falls behind */
  for (int i = 0; i < 2; i++)
    cr_assert_eq(pthread_create(&sp[i], NULL, spinner, NULL), 0);
  err_capture();
  for (int i = 0; i < 20000; i++) {
    char *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    p[0] = 1;
    const pinheap_watch_t *t = NULL;
    cr_assert_eq(PINHEAP_NAME(watch)(p, 64, &t), 0);
    cr_assert_eq(munmap(p, page), 0);
    PINHEAP_NAME(unwatch)(t);
  }
  spin_stop = 1;
  for (int i = 0; i < 2; i++)
    pthread_join(sp[i], NULL);
  usleep(50000);
  int lines = err_count("unannounced");
  err_restore();
  cr_assert_eq(PINHEAP_NAME(watch_unannounced)(), before,
               "announced releases counted (a later watch of the same range taken for their victim)");
  cr_assert_eq(lines, 0);
}

/* Two watches sharing a page: unwatching one keeps the page audited. */
Test(audit, a_shared_page_stays_audited_after_one_unwatch)
{
  char *p = map_pages(2);
  const pinheap_watch_t *a = watch_ok(p, 64);
  const pinheap_watch_t *b = watch_ok(p + 128, 64);
  PINHEAP_NAME(unwatch)(a);
  raw_unmap_caught(p, b, "the page of the remaining watch was unregistered");
  munmap(p + page, page);
}

/* Many releases, raw and announced, on threads beside the reader: none
 * hangs, and every raw one is caught (0 misses). */
#define AUDIT_ROUNDS 2000

static void *releaser(void *arg)
{
  long raw_ones = 0;
  (void)arg;
  for (int i = 0; i < AUDIT_ROUNDS; i++) {
    char *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return (void *)-1L;
    p[0] = 1;
    const pinheap_watch_t *t = NULL;
    if (PINHEAP_NAME(watch)(p, 16, &t) != 0)
      return (void *)-1L;
    if (i & 1) {
      raw(SYS_munmap, (long)p, (long)page, 0, 0, 0);
      raw_ones++;
    } else {
      munmap(p, page);
    }
    if (PINHEAP_NAME(watch_valid)(t) && !(i & 1))
      return (void *)-2L;                          /* announced: invalid at once */
    PINHEAP_NAME(unwatch)(t);
  }
  return (void *)raw_ones;
}

Test(audit, releasing_threads_never_hang_and_none_is_missed)
{
  size_t before = PINHEAP_NAME(watch_unannounced)();
  pthread_t th[2];
  long raw_ones = 0;
  err_capture();
  for (int i = 0; i < 2; i++)
    cr_assert_eq(pthread_create(&th[i], NULL, releaser, NULL), 0);
  for (int i = 0; i < 2; i++) {
    void *r;
    pthread_join(th[i], &r);
    cr_assert((long)r >= 0, "releaser failed: %ld", (long)r);
    raw_ones += (long)r;
  }
  err_restore();
  /* a raw release whose event the reader handles after the unwatch is not
   * counted (its watch is gone): so the count is at most raw_ones, and here
   * the unwatch waits for nothing -- see the 0-miss test below */
  size_t got = PINHEAP_NAME(watch_unannounced)() - before;
  cr_assert(got <= (size_t)raw_ones, "more unannounced releases (%zu) than raw ones (%ld)", got,
            raw_ones);
}

/* A raw release from a signal handler that interrupted watch() or unwatch()
 * inside watch_lock: the kernel keeps that thread waiting until the reader
 * has read the event, so a reader that waited for watch_lock would never
 * read it (a deadlock: the test's timeout). */
enum { SIG_POOL = 300 };
static char *sig_pool;
static const pinheap_watch_t *sig_tok[SIG_POOL];
static volatile int sig_next;

static void sig_release(int sig)
{
  (void)sig;
  int k = sig_next;
  if (k < SIG_POOL) {
    raw(SYS_munmap, (long)(sig_pool + (size_t)k * page), (long)page, 0, 0, 0);
    sig_next = k + 1;
  }
}

Test(audit, a_raw_release_from_a_signal_inside_watch_does_not_deadlock)
{
  sig_pool = mmap(NULL, SIG_POOL * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                  -1, 0);
  cr_assert(sig_pool != MAP_FAILED);
  memset(sig_pool, 1, SIG_POOL * page);
  for (int i = 0; i < SIG_POOL; i++)
    sig_tok[i] = watch_ok(sig_pool + (size_t)i * page, 32);
  char *keep = map_pages(1);
  size_t before = PINHEAP_NAME(watch_unannounced)();
  err_capture();
  struct sigaction sa = { .sa_handler = sig_release };
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = { { 0, 100 }, { 0, 100 } };
  setitimer(ITIMER_REAL, &it, NULL);
  while (sig_next < SIG_POOL) {
    const pinheap_watch_t *t = NULL;
    if (PINHEAP_NAME(watch)(keep, 64, &t) == 0)
      PINHEAP_NAME(unwatch)(t);
  }
  struct itimerval off = { { 0, 0 }, { 0, 0 } };
  setitimer(ITIMER_REAL, &off, NULL);
  unannounced_reaching(before + SIG_POOL);
  err_restore();
  int valid = 0;
  for (int i = 0; i < SIG_POOL; i++) {
    valid += PINHEAP_NAME(watch_valid)(sig_tok[i]);
    PINHEAP_NAME(unwatch)(sig_tok[i]);
  }
  cr_assert_eq(valid, 0, "%d raw releases from a signal handler missed", valid);
  munmap(keep, page);
}

Test(audit, every_raw_release_is_caught)
{
  enum { N = 500 };
  static const pinheap_watch_t *t[N];
  char *p = mmap(NULL, N * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(p != MAP_FAILED);
  memset(p, 1, N * page);
  for (int i = 0; i < N; i++)
    t[i] = watch_ok(p + (size_t)i * page, 32);
  size_t before = PINHEAP_NAME(watch_unannounced)();
  err_capture();
  for (int i = 0; i < N; i++)
    raw(i % 2 ? SYS_munmap : SYS_madvise, (long)(p + (size_t)i * page), (long)page,
        i % 2 ? 0 : MADV_DONTNEED, 0, 0);
  size_t after = unannounced_reaching(before + N);
  err_restore();
  int missed = 0;
  for (int i = 0; i < N; i++)
    missed += PINHEAP_NAME(watch_valid)(t[i]);
  cr_assert_eq(missed, 0, "%d of %d raw releases missed", missed, N);
  cr_assert_eq(after, before + N);
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(unwatch)(t[i]);
  munmap(p, N * page);
}

/* Fork: the child's audit starts again at its first watch (the parent's
 * registrations are not inherited); exec: the descriptor is close-on-exec.
 * Neither hangs, and the parent's audit goes on. */
Test(audit, fork_and_exec_with_the_audit_on)
{
  char *p = map_pages(3);
  const pinheap_watch_t *t = watch_ok(p, 64);     /* the reader runs */
  pid_t c = fork();
  cr_assert(c >= 0);
  if (c == 0) {
    alarm(20);
    char *q = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    q[0] = 1;
    size_t before = PINHEAP_NAME(watch_unannounced)();
    const pinheap_watch_t *u = NULL;
    if (PINHEAP_NAME(watch)(q, 64, &u) != 0)
      _exit(3);
    raw(SYS_munmap, (long)q, (long)page, 0, 0, 0);
    raw(SYS_munmap, (long)(p + page), (long)page, 0, 0, 0);   /* not audited in the child */
    for (int i = 0; i < 2000 && PINHEAP_NAME(watch_unannounced)() == before; i++)
      usleep(1000);
    _exit(PINHEAP_NAME(watch_valid)(u) ? 4 : PINHEAP_NAME(watch_unannounced)() == before + 1 ? 0 : 5);
  }
  int st = 0;
  cr_assert_eq(waitpid(c, &st, 0), c);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked child: status %#x", st);
  c = fork();
  cr_assert(c >= 0);
  if (c == 0) {
    execl("/bin/true", "true", (char *)NULL);
    _exit(127);
  }
  cr_assert_eq(waitpid(c, &st, 0), c);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the exec'd child: status %#x", st);
  raw_unmap_caught(p, t, "the parent's audit stopped after fork and exec");
  munmap(p + page, 2 * page);
}
