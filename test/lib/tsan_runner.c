/*
 * tsan_runner.c -- runs Criterion test programs under ThreadSanitizer, for
 * the TSan pass of test/run.sh.  Owns: the test loop (main), one forked
 * child per test, and the few Criterion entry points that the Test() and
 * cr_assert() macros call.
 *
 * Why: Criterion 2.4.1 (Debian 12) starts every run by mapping its
 * "inheritable arena" at a random fixed address between 0x2000_0000_0000
 * and 0x6000_0000_0000, which TSan's shadow layout keeps reserved; the run
 * aborts ("Could not initialize inheritable arena") or crashes in
 * libcriterion before any test starts.  A test program of the TSan build
 * therefore links this file instead of libcriterion: the same test sources,
 * compiled against the same Criterion headers, run here one test per
 * forked child (the parent never starts a thread, so every child forks a
 * single-threaded process).  A test fails when it fails an assertion, dies
 * of a signal or exit status it did not declare (.signal, .exit_code),
 * outlives its .timeout, or when TSan reports (TSan's exit status 66).
 *
 * Usage: <test> [--filter GLOB] [--list] [--jobs N | -jN] [--short-filename]
 * (--jobs and --short-filename are accepted for the ctest command line and
 * ignored: tests run one at a time).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* vasprintf, strsignal */
#endif
#include <criterion/criterion.h>
#include <criterion/event.h>
#include <criterion/logging.h>
#include <criterion/options.h>

#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The registration sections written by Test() and TestSuite(). */
extern struct criterion_test *__start_cr_tst[] __attribute__((weak));
extern struct criterion_test *__stop_cr_tst[] __attribute__((weak));
extern struct criterion_suite *__start_cr_sts[] __attribute__((weak));
extern struct criterion_suite *__stop_cr_sts[] __attribute__((weak));

struct criterion_options criterion_options;

static const struct criterion_test *current_test;
static const struct criterion_suite *current_suite;

/* ---- the entry points the Criterion macros call ---------------------------- */

char *cr_translate_assert_msg(int msg_index, ...)
{
  va_list ap;
  const char *arg;
  char *out = NULL;

  va_start(ap, msg_index);
  arg = va_arg(ap, const char *);
  va_end(ap);
  if (msg_index == CRITERION_ASSERT_MSG_EXPR_FALSE && arg && *arg)
    cr_asprintf(&out, "The expression %s is false.", arg);
  else
    cr_asprintf(&out, "Assertion failed (message %d).", msg_index);
  return out;
}

int cr_asprintf(char **strp, const char *fmt, ...)
{
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vasprintf(strp, fmt, ap);
  va_end(ap);
  if (n < 0)
    *strp = NULL;
  return n;
}

void cr_asprintf_free(char *buf)
{
  free(buf);
}

void cri_asserts_passed_incr(void)
{
}

void criterion_send_assert(struct criterion_assert_stats *stats)
{
  if (stats->passed)
    return;
  fprintf(stderr, "[----] %s:%u: Assertion Failed\n[----]   %s\n", stats->file,
      stats->line, stats->message ? stats->message : "(no message)");
}

void criterion_abort_test(void)
{
  fflush(NULL);
  exit(1);
}

void criterion_skip_test(const char *format, ...)
{
  va_list ap;

  fprintf(stderr, "[SKIP] %s::%s: ", current_test->category, current_test->name);
  va_start(ap, format);
  vfprintf(stderr, format ? format : "", ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(NULL);
  exit(0);
}

void cr_log(enum criterion_severity severity, const char *msg, ...)
{
  static const char *const tag[] = { "[INFO]", "[WARN]", "[ERR ]" };
  va_list ap;

  fprintf(stderr, "%s ", (unsigned)severity < 3 ? tag[severity] : "[LOG ]");
  va_start(ap, msg);
  vfprintf(stderr, msg, ap);
  va_end(ap);
  fputc('\n', stderr);
}

void criterion_internal_test_setup(void)
{
  if (current_suite && current_suite->data && current_suite->data->init)
    current_suite->data->init();
  if (current_test->data->init)
    current_test->data->init();
}

void criterion_internal_test_main(void (*fn)(void))
{
  fn();
}

void criterion_internal_test_teardown(void)
{
  if (current_test->data->fini)
    current_test->data->fini();
  if (current_suite && current_suite->data && current_suite->data->fini)
    current_suite->data->fini();
}

/* ---- the loop ---------------------------------------------------------------- */

static const struct criterion_suite *suite_find(const char *name)
{
  for (struct criterion_suite **s = __start_cr_sts; s && s < __stop_cr_sts; s++)
    if (*s && strcmp((*s)->name, name) == 0)
      return *s;
  return NULL;
}

/* A test's setting, or its suite's when the test leaves it unset. */
static double test_timeout(const struct criterion_test *t, const struct criterion_suite *s)
{
  if (t->data->timeout > 0)
    return t->data->timeout;
  return s && s->data ? s->data->timeout : 0;
}

static int test_expected_signal(const struct criterion_test *t, const struct criterion_suite *s)
{
  if (t->data->signal)
    return t->data->signal;
  return s && s->data ? s->data->signal : 0;
}

static int test_expected_exit(const struct criterion_test *t, const struct criterion_suite *s)
{
  if (t->data->exit_code)
    return t->data->exit_code;
  return s && s->data ? s->data->exit_code : 0;
}

/* Runs one test in a child; returns 1 when it passed. */
static int test_run(const struct criterion_test *t, const struct criterion_suite *s)
{
  double timeout = test_timeout(t, s);
  int want_signal = test_expected_signal(t, s), want_exit = test_expected_exit(t, s);
  int status;
  pid_t pid;

  fflush(NULL);
  pid = fork();
  if (pid < 0) {
    perror("tsan_runner: fork");
    return 0;
  }
  if (pid == 0) {
    current_test = t;
    current_suite = s;
    if (timeout > 0)
      alarm((unsigned)timeout + 1);
    t->test();   /* setup, body, teardown */
    fflush(NULL);
    exit(0);     /* exit, not _exit: TSan sets the status (66) at exit */
  }
  while (waitpid(pid, &status, 0) < 0)
    ;
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == want_signal)
      return 1;
    fprintf(stderr, "[FAIL] %s::%s: %s (signal %d)%s\n", t->category, t->name,
        strsignal(sig), sig, sig == SIGALRM ? ": timed out" : "");
    return 0;
  }
  if (want_signal) {
    fprintf(stderr, "[FAIL] %s::%s: exited with %d, expected signal %d\n",
        t->category, t->name, WEXITSTATUS(status), want_signal);
    return 0;
  }
  if (WEXITSTATUS(status) == want_exit)
    return 1;
  fprintf(stderr, "[FAIL] %s::%s: exit status %d, expected %d%s\n", t->category, t->name,
      WEXITSTATUS(status), want_exit,
      WEXITSTATUS(status) == 66 ? " (ThreadSanitizer reported, see above)" : "");
  return 0;
}

static void usage_exit(const char *prog, const char *bad)
{
  fprintf(stderr, "%s: unknown argument '%s'; expected --filter GLOB, --list, "
      "--jobs N, -jN or --short-filename\n", prog, bad);
  exit(2);
}

int main(int argc, char **argv)
{
  const char *filter = NULL;
  int list = 0, passed = 0, failed = 0, skipped = 0;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
      filter = argv[++i];
    else if (strncmp(argv[i], "--filter=", 9) == 0)
      filter = argv[i] + 9;
    else if (strcmp(argv[i], "--list") == 0 || strcmp(argv[i], "-l") == 0)
      list = 1;
    else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
      i++;
    else if (strncmp(argv[i], "-j", 2) == 0 || strncmp(argv[i], "--jobs=", 7) == 0
         || strcmp(argv[i], "--short-filename") == 0 || strcmp(argv[i], "-S") == 0)
      ;
    else
      usage_exit(argv[0], argv[i]);
  }

  for (struct criterion_test **p = __start_cr_tst; p && p < __stop_cr_tst; p++) {
    const struct criterion_test *t = *p;
    const struct criterion_suite *s;
    char id[512];

    if (!t)
      continue;
    snprintf(id, sizeof id, "%s/%s", t->category, t->name);
    if (filter && fnmatch(filter, id, 0) != 0)
      continue;
    if (list) {
      printf("%s\n", id);
      continue;
    }
    s = suite_find(t->category);
    if (t->data->disabled || (s && s->data && s->data->disabled)) {
      fprintf(stderr, "[SKIP] %s::%s: disabled\n", t->category, t->name);
      skipped++;
      continue;
    }
    fprintf(stderr, "[RUN ] %s::%s\n", t->category, t->name);
    if (test_run(t, s))
      passed++;
    else
      failed++;
  }
  if (list)
    return 0;
  fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Disabled: %d\n",
      passed + failed, passed, failed, skipped);
  if (passed + failed == 0) {
    fprintf(stderr, "tsan_runner: no test ran (filter '%s')\n", filter ? filter : "");
    return 1;
  }
  return failed ? 1 : 0;
}
