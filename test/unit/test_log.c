/*
 * test_log.c -- tests of the logger (allocator/base/error.c): ph_log and the
 * printf subset it formats, the one write(2) per message, the level and
 * its parameter, and the old entry points (ph_warn, ph_fatal) on top of it.
 *
 * Lines are caught through ph_log_set_fd (the test hook) on a
 * SOCK_SEQPACKET socket pair: each write(2) is one packet, so one read
 * returning the whole line and a second read finding nothing show that the
 * line was written at once.  Built twice (log_tests.cmake): test_log, and
 * test_log_noalloc with TEST_LOG_COUNT_MALLOC, whose malloc family counts
 * every call, to show the logger never allocates -- also from a release
 * listener while pinheap frees memory.  Main entry: the Criterion tests.
 */
#define PINHEAP_NO_CLASSIC_RENAME 1  /* malloc and free here are the process's */

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "allocator/api/api.h"

#include "pinheap.h"
#include "config/params.h"

/* ---- counting the malloc family (test_log_noalloc only) ------------------ */

#ifdef TEST_LOG_COUNT_MALLOC
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static atomic_long alloc_calls;

void *malloc(size_t n)
{
  atomic_fetch_add(&alloc_calls, 1);
  return __libc_malloc(n);
}
void *calloc(size_t k, size_t n)
{
  atomic_fetch_add(&alloc_calls, 1);
  return __libc_calloc(k, n);
}
void *realloc(void *p, size_t n)
{
  atomic_fetch_add(&alloc_calls, 1);
  return __libc_realloc(p, n);
}
void *memalign(size_t a, size_t n)
{
  atomic_fetch_add(&alloc_calls, 1);
  return __libc_memalign(a, n);
}
int posix_memalign(void **pp, size_t a, size_t n)
{
  atomic_fetch_add(&alloc_calls, 1);
  *pp = __libc_memalign(a, n);
  return *pp == NULL ? ENOMEM : 0;
}
void *aligned_alloc(size_t a, size_t n)
{
  atomic_fetch_add(&alloc_calls, 1);
  return __libc_memalign(a, n);
}
void free(void *p)
{
  if (p != NULL)
    atomic_fetch_add(&alloc_calls, 1);
  __libc_free(p);
}
#define ALLOC_CALLS() atomic_load(&alloc_calls)
#endif

/* ---- formatting into a buffer -------------------------------------------- */

/* ph_log_format without a level name, NUL-terminated for comparison. */
static const char *fmt(char *buf, size_t size, const char *f, ...)
{
  va_list ap;
  size_t n;

  va_start(ap, f);
  n = ph_log_format(buf, size - 1, PH_LOG_WARN, 0, f, ap);
  va_end(ap);
  cr_assert(n <= size - 1);
  buf[n] = '\0';
  return buf;
}

/* ph_log through a va_list, so that the compiler's format check does not
 * object to the deliberately unknown conversions. */
static void log_unchecked(int level, const char *f, ...)
{
  va_list ap;

  va_start(ap, f);
  ph_log_v(level, f, ap);
  va_end(ap);
}

#define FMT_EQ(want, ...)                                                    \
  do {                                                                       \
    char b_[PH_LOG_LINE_MAX + 1];                                            \
    cr_assert_str_eq(fmt(b_, sizeof(b_), __VA_ARGS__), "pinheap: " want "\n"); \
  } while (0)

/* Same, and the same text as the C library's printf. */
#define FMT_LIKE_PRINTF(f, ...)                                              \
  do {                                                                       \
    char b_[PH_LOG_LINE_MAX + 1];                                            \
    char w_[PH_LOG_LINE_MAX + 1];                                            \
    snprintf(w_, sizeof(w_), "pinheap: " f "\n", __VA_ARGS__);               \
    cr_assert_str_eq(fmt(b_, sizeof(b_), f, __VA_ARGS__), w_, "format \"%s\"", f); \
  } while (0)

Test(log_format, integers_with_widths_and_flags)
{
  FMT_LIKE_PRINTF("%d|%d|%d", 0, -42, 1234567);
  FMT_LIKE_PRINTF("%d|%d", INT_MAX, INT_MIN);
  FMT_LIKE_PRINTF("[%5d][%-5d][%05d]", 42, 42, 42);
  FMT_LIKE_PRINTF("[%5d][%-5d][%05d]", -42, -42, -42);
  FMT_LIKE_PRINTF("[%2d][%-2d][%02d]", 12345, 12345, 12345);
  FMT_LIKE_PRINTF("[%u][%8u][%-8u][%08u]", 0u, 7u, 7u, UINT_MAX);
  FMT_LIKE_PRINTF("[%x][%8x][%-8x][%08x]", 0u, 0xbeefu, 0xbeefu, 0xdeadbeefu);
  FMT_LIKE_PRINTF("[%zu][%12zu][%-12zu][%012zu]", (size_t)0, (size_t)4096, SIZE_MAX, (size_t)77);
  FMT_LIKE_PRINTF("[%zx][%zd][%zd]", (size_t)0xabc, (ssize_t)-5, (ssize_t)SSIZE_MAX);
  FMT_LIKE_PRINTF("[%ld][%lu][%lx]", LONG_MIN, ULONG_MAX, 0x123456789abcUL);
  FMT_LIKE_PRINTF("[%lld][%llu][%llx]", LLONG_MIN, ULLONG_MAX, 0xffULL);
  FMT_LIKE_PRINTF("[%*d][%-*d][%*d]", 6, -3, 6, -3, -6, 9);
  FMT_LIKE_PRINTF("[%-05d]", 3);                 /* '-' beats '0' */
}

Test(log_format, strings_pointers_and_percent)
{
  FMT_LIKE_PRINTF("[%s][%8s][%-8s]", "abc", "abc", "abc");
  FMT_LIKE_PRINTF("[%.2s][%.0s][%.10s][%6.2s][%-6.2s]", "abc", "abc", "abc", "abc", "abc");
  FMT_LIKE_PRINTF("[%.*s][%*.*s]", 3, "abcdef", 5, 1, "xyz");
  FMT_LIKE_PRINTF("[%c][%3c][%-3c]", 'a', 'b', 'c');
  FMT_LIKE_PRINTF("%s", "");
  FMT_LIKE_PRINTF("[%p][%p][%20p][%-20p]", (void *)0x1000, (void *)UINTPTR_MAX,
                  (void *)0xabc, (void *)0xabc);
  FMT_EQ("[0x0]", "[%p]", (void *)NULL);           /* glibc says "(nil)"; we want the number */
  FMT_EQ("[0x00000abc]", "[%010p]", (void *)0xabc); /* '0' pads after the 0x */
  FMT_EQ("100% sure, %%", "100%% sure, %%%%");
  FMT_EQ("plain text", "plain text");
}

Test(log_format, null_string_prints_null)
{
  FMT_EQ("[(null)][  (null)][(nu]", "[%s][%8s][%.3s]", (const char *)NULL, (const char *)NULL,
         (const char *)NULL);
}

Test(log_format, unknown_conversions_are_literal_and_read_no_argument)
{
  /* Each unknown conversion is copied as written; the arguments that
   * follow still go to the known conversions, in order. */
  FMT_EQ("%q 1 %y 2 %n 3", "%q %d %y %d %n %d", 1, 2, 3);
  FMT_EQ("%5q|%-08k|%.3w x", "%5q|%-08k|%.3w %s", "x");
  FMT_EQ("%hd 7", "%hd %d", 7);                    /* 'h' is not in the subset */
  FMT_EQ("%f %e %g 9", "%f %e %g %u", 9u);
  FMT_EQ("end %", "end %");                        /* a lone '%' at the end */
  FMT_EQ("end %-5", "end %-5");
  FMT_EQ("end %l", "end %l");
}

Test(log_format, own_trailing_newline_is_not_doubled)
{
  FMT_EQ("one line", "one line\n");
  FMT_EQ("two\nlines", "two\nlines\n");
}

/* ---- truncation ---------------------------------------------------------- */

static size_t format_into(char *buf, size_t size, int level, const char *f, ...)
{
  va_list ap;
  size_t n;

  va_start(ap, f);
  n = ph_log_format(buf, size, level, 1, f, ap);
  va_end(ap);
  return n;
}

Test(log_format, level_name_in_each_line)
{
  static const char *const want[] = { "fatal", "error", "warning", "info", "debug" };
  char buf[128];

  for (int level = 0; level < PH_LOG_LEVEL_COUNT; level++) {
    char expect[64];
    size_t n = format_into(buf, sizeof(buf), level, "x=%d", level);
    snprintf(expect, sizeof(expect), "pinheap: %s: x=%d\n", want[level], level);
    cr_assert_eq(n, strlen(expect));
    cr_assert(memcmp(buf, expect, n) == 0, "level %d: '%.*s'", level, (int)n, buf);
  }
}

Test(log_format, long_message_is_cut_with_dots_never_overflowing)
{
  static char big[4 * PH_LOG_LINE_MAX];
  unsigned char area[PH_LOG_LINE_MAX + 64];

  memset(big, 'y', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  /* every buffer size from the smallest that holds a line up to a full
   * line: the line fills it exactly, ends in "...\n", and the canary
   * after it is untouched */
  for (size_t size = 5; size <= PH_LOG_LINE_MAX; size++) {
    memset(area, 0xa5, sizeof(area));
    size_t n = format_into((char *)area, size, PH_LOG_ERROR, "%s and %d more", big, 5);
    cr_assert_eq(n, size, "size %zu: line of %zu bytes", size, n);
    cr_assert(memcmp(area + n - 4, "...\n", 4) == 0, "size %zu: no '...\\n' at the end", size);
    cr_assert_null(memchr(area, '\n', n - 1), "size %zu: more than one line", size);
    for (size_t i = size; i < sizeof(area); i++)
      cr_assert_eq(area[i], 0xa5, "size %zu: byte %zu past the buffer was written", size, i);
  }
  /* a buffer too small for any line gets nothing */
  memset(area, 0xa5, sizeof(area));
  cr_assert_eq(format_into((char *)area, 4, PH_LOG_ERROR, "%s", big), 0);
  cr_assert_eq(area[0], 0xa5);
  /* a long field width is cut the same way */
  memset(area, 0xa5, sizeof(area));
  size_t n = format_into((char *)area, 100, PH_LOG_ERROR, "[%9999d]", 1);
  cr_assert_eq(n, 100);
  cr_assert(memcmp(area + 96, "...\n", 4) == 0);
  cr_assert_eq(area[100], 0xa5);
  /* a message that fits exactly is not cut */
  char fit[PH_LOG_LINE_MAX];
  size_t head = strlen("pinheap: error: ");
  memset(fit, 'z', sizeof(fit));
  fit[PH_LOG_LINE_MAX - head - 1] = '\0';          /* + "\n" = exactly the line */
  n = format_into((char *)area, PH_LOG_LINE_MAX, PH_LOG_ERROR, "%s", fit);
  cr_assert_eq(n, PH_LOG_LINE_MAX);
  cr_assert_eq(area[n - 1], '\n');
  cr_assert_eq(area[n - 2], 'z', "a line that fits was cut");
}

Test(log_format, long_message_is_cut_between_words)
{
  static char words[3 * PH_LOG_LINE_MAX];
  char area[PH_LOG_LINE_MAX];

  for (size_t i = 0; i + 1 < sizeof(words); i++)
    words[i] = "pinned "[i % 7];
  size_t n = format_into(area, sizeof(area), PH_LOG_WARN, "%s", words);
  cr_assert_leq(n, sizeof(area));
  cr_assert_geq(n, sizeof(area) - 64, "cut %zu bytes early", sizeof(area) - n);
  cr_assert(memcmp(area + n - 4, "...\n", 4) == 0, "no '...\\n' at the end");
  cr_assert(memcmp(area + n - 10, "pinned", 6) == 0, "cut inside a word: '%.*s'", 20,
            area + n - 20);
}

/* ---- the line on its way out -------------------------------------------- */

typedef struct catch_s {
  int sv[2];
  int old_fd;
} catch_t;

static void catch_begin(catch_t *c)
{
  cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, c->sv), 0, "socketpair: %s",
               strerror(errno));
  c->old_fd = ph_log_set_fd(c->sv[0]);
}

/* The next packet (one write(2)) into buf, NUL-terminated; "" if none. */
static const char *catch_next(catch_t *c, char *buf, size_t size)
{
  ssize_t n = recv(c->sv[1], buf, size - 1, MSG_DONTWAIT);

  if (n < 0) {
    cr_assert(errno == EAGAIN || errno == EWOULDBLOCK, "recv: %s", strerror(errno));
    n = 0;
  }
  buf[n] = '\0';
  return buf;
}

static void catch_end(catch_t *c)
{
  char buf[16];

  cr_assert_str_eq(catch_next(c, buf, sizeof(buf)), "", "a line was left unread");
  ph_log_set_fd(c->old_fd);
  close(c->sv[0]);
  close(c->sv[1]);
}

Test(log_write, one_write_per_message)
{
  static char big[3 * PH_LOG_LINE_MAX];
  char buf[4 * PH_LOG_LINE_MAX];
  catch_t c;

  memset(big, 'q', sizeof(big) - 1);
  catch_begin(&c);
  ph_log(PH_LOG_ERROR, "a %s of %d pieces at %p, %zu bytes", "message", 5, (void *)0x10,
         (size_t)64);
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)),
                   "pinheap: error: a message of 5 pieces at 0x10, 64 bytes\n");
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "", "the line came in more than one write");
  /* a cut line is one write too */
  ph_log(PH_LOG_WARN, "%s", big);
  catch_next(&c, buf, sizeof(buf));
  cr_assert_eq(strlen(buf), PH_LOG_LINE_MAX);
  cr_assert(strncmp(buf, "pinheap: warning: qqq", 21) == 0);
  cr_assert_str_eq(buf + PH_LOG_LINE_MAX - 4, "...\n");
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "");
  /* the old entry point, pieces joined into one line */
  ph_warn("piece one, ", "piece two, ", "100%d literally", (const char *)NULL);
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)),
                   "pinheap: warning: piece one, piece two, 100%d literally\n");
  catch_end(&c);
}

Test(log_write, errno_is_preserved_even_when_the_write_fails)
{
  catch_t c;
  char buf[256];

  catch_begin(&c);
  errno = 4711;
  ph_log(PH_LOG_ERROR, "errno %d", 1);
  cr_assert_eq(errno, 4711);
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "pinheap: error: errno 1\n");
  catch_end(&c);

  int old = ph_log_set_fd(-1);                     /* write fails with EBADF */
  errno = 4712;
  ph_log(PH_LOG_ERROR, "into nothing");
  cr_assert_eq(errno, 4712);
  errno = 4713;
  ph_warn("into nothing", (const char *)NULL);
  cr_assert_eq(errno, 4713);
  ph_log_set_fd(old);
}

/* The write is interrupted by a signal (no SA_RESTART) while the pipe is
 * full; the handler makes room.  Without the EINTR retry the line is lost. */
static int eintr_rd = -1;
static volatile sig_atomic_t eintr_signals;

static void eintr_handler(int sig)
{
  char sink[4096];
  (void)sig;
  eintr_signals++;
  while (read(eintr_rd, sink, sizeof(sink)) > 0)
    ;
}

Test(log_write, interrupted_write_is_retried)
{
  int p[2];
  char filler[4096];
  char buf[256];
  struct sigaction sa;

  cr_assert_eq(pipe(p), 0);
  eintr_rd = p[0];
  fcntl(p[1], F_SETFL, O_NONBLOCK);
  memset(filler, 'f', sizeof(filler));
  while (write(p[1], filler, sizeof(filler)) > 0)
    ;
  while (write(p[1], filler, 1) > 0)
    ;
  fcntl(p[1], F_SETFL, 0);                         /* the logger's write blocks */
  fcntl(p[0], F_SETFL, O_NONBLOCK);                /* the handler's reads do not */
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = eintr_handler;
  sa.sa_flags = 0;                                 /* no SA_RESTART: write gets EINTR */
  sigemptyset(&sa.sa_mask);
  cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
  int old = ph_log_set_fd(p[1]);
  alarm(1);
  errno = 0;
  ph_log(PH_LOG_ERROR, "after the interruption");
  cr_assert_eq(errno, 0, "errno changed to %d", errno);
  ph_log_set_fd(old);
  cr_assert_eq(eintr_signals, 1, "the write was not interrupted (the test proves nothing)");
  ssize_t n = read(p[0], buf, sizeof(buf) - 1);
  cr_assert(n > 0, "the line was lost: the interrupted write was not retried");
  buf[n] = '\0';
  cr_assert_str_eq(buf, "pinheap: error: after the interruption\n");
}

/* ---- the level ------------------------------------------------------------ */

Test(log_level, filtering_follows_the_level)
{
  catch_t c;
  char buf[256];

  cr_assert_eq(ph_log_level(), PH_LOG_WARN, "the default is warn");
  catch_begin(&c);
  ph_log(PH_LOG_DEBUG, "hidden debug");
  ph_log(PH_LOG_INFO, "hidden info");
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "", "debug/info shown at warn");
  ph_log(PH_LOG_WARN, "w");
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "pinheap: warning: w\n");
  ph_log(PH_LOG_ERROR, "e");
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "pinheap: error: e\n");

  ph_log_set_level(PH_LOG_DEBUG);
  ph_log(PH_LOG_DEBUG, "shown debug %d", 1);
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "pinheap: debug: shown debug 1\n");
  ph_log(PH_LOG_INFO, "shown info");
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "pinheap: info: shown info\n");

  ph_log_set_level(PH_LOG_FATAL);
  ph_log(PH_LOG_ERROR, "hidden error");
  ph_warn("hidden warning", (const char *)NULL);
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "", "error/warning shown at fatal");
  ph_log(PH_LOG_FATAL, "always");
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "pinheap: fatal: always\n");

  ph_log_set_level(99);                            /* clamped */
  cr_assert_eq(ph_log_level(), PH_LOG_DEBUG);
  ph_log_set_level(-5);
  cr_assert_eq(ph_log_level(), PH_LOG_FATAL);
  log_unchecked(-1, "a level below fatal is written, as fatal would be");
  cr_assert(strstr(catch_next(&c, buf, sizeof(buf)), "as fatal would be") != NULL);
  catch_end(&c);
}

/* The process's parameter: debug shown once params_get() has run; the
 * table's own warnings, written while it is parsed, come out at warn. */
Test(log_level, the_parameter_sets_the_level)
{
  catch_t c;
  char buf[512];

  setenv("PINHEAP_LOG_LEVEL", " DeBuG ", 1);
  catch_begin(&c);
  ph_log(PH_LOG_DEBUG, "before the parameters");
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "", "debug shown before the parameters");
  params_get();
  cr_assert_eq(ph_log_level(), PH_LOG_DEBUG);
  ph_log(PH_LOG_DEBUG, "after");
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)), "pinheap: debug: after\n");
  catch_end(&c);
}

Test(log_level, parsing_warnings_come_out_even_at_fatal)
{
  catch_t c;
  char buf[512];

  setenv("PINHEAP_LOG_LEVEL", "fatal", 1);
  setenv("PINHEAP_PATCH", "perhaps", 1);
  catch_begin(&c);
  params_get();
  cr_assert(strstr(catch_next(&c, buf, sizeof(buf)), "PINHEAP_PATCH=\"perhaps\"") != NULL,
            "'%s'", buf);
  cr_assert_eq(ph_log_level(), PH_LOG_FATAL);
  ph_log(PH_LOG_ERROR, "hidden now");
  catch_end(&c);
}

Test(log_level, a_bad_level_warns_and_stays_at_warn)
{
  catch_t c;
  char buf[512];

  setenv("PINHEAP_LOG_LEVEL", "loud", 1);
  catch_begin(&c);
  params_get();
  cr_assert_str_eq(catch_next(&c, buf, sizeof(buf)),
                   "pinheap: warning: PINHEAP_LOG_LEVEL=\"loud\" is not a valid value (expected "
                   "fatal, error, warn, info, debug or 0 to 4); ignored, treated as not set\n");
  cr_assert_eq(ph_log_level(), PH_LOG_WARN);
  catch_end(&c);
}

/* ---- ph_fatal ------------------------------------------------------------- */

Test(log_fatal, keeps_its_form_and_aborts)
{
  int p[2];
  pid_t pid;
  int status;
  char buf[256];

  cr_assert_eq(pipe(p), 0);
  pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    ph_log_set_fd(p[1]);
    ph_fatal("free", "invalid pointer", (void *)0x1230);
  }
  close(p[1]);
  ssize_t n = read(p[0], buf, sizeof(buf) - 1);
  cr_assert(n > 0);
  buf[n] = '\0';
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status 0x%x", status);
  cr_assert_str_eq(buf, "pinheap: free(): invalid pointer 0x1230\n");
}

/* ---- inside a release listener, while pinheap frees ---------------------- */

static atomic_int listener_calls;
static long listener_alloc_delta = -1;

static void logging_listener(void *addr, size_t len, void *ctx)
{
  (void)ctx;
#ifdef TEST_LOG_COUNT_MALLOC
  long before = ALLOC_CALLS();
#endif
  ph_log(PH_LOG_ERROR, "released %p, %zu bytes", addr, len);
#ifdef TEST_LOG_COUNT_MALLOC
  listener_alloc_delta = ALLOC_CALLS() - before;
#else
  listener_alloc_delta = 0;
#endif
  atomic_fetch_add(&listener_calls, 1);
}

Test(log_listener, logs_from_a_release_listener_while_memory_is_freed, .timeout = 60)
{
  catch_t c;
  char buf[512];
  size_t big = (size_t)8 << 20;
  void *p = PINHEAP_NAME(malloc)(big);

  cr_assert_not_null(p);
  memset(p, 1, 4096);
  catch_begin(&c);
  os_set_release_listener(logging_listener, NULL);
  PINHEAP_NAME(free)(p);                           /* a deadlock here ends in the timeout */
  os_set_release_listener(NULL, NULL);
  cr_assert_geq(atomic_load(&listener_calls), 1, "the listener heard no release");
  cr_assert_eq(listener_alloc_delta, 0, "the logger allocated inside the listener");
  for (int i = 0; i < atomic_load(&listener_calls); i++)
    cr_assert(strncmp(catch_next(&c, buf, sizeof(buf)), "pinheap: error: released 0x", 27) == 0,
              "'%s'", buf);
  catch_end(&c);
}

#ifdef TEST_LOG_COUNT_MALLOC
Test(log_noalloc, formatting_and_writing_never_allocate)
{
  catch_t c;
  char buf[4 * PH_LOG_LINE_MAX];
  static char big[3 * PH_LOG_LINE_MAX];

  memset(big, 'b', sizeof(big) - 1);
  long probe = ALLOC_CALLS();
  free(malloc(16));
  cr_assert_eq(ALLOC_CALLS() - probe, 2, "the counting malloc family is not in use");
  catch_begin(&c);
  long before = ALLOC_CALLS();
  ph_log(PH_LOG_ERROR, "%s %d %u %x %p %zu %-8s|%08d", "s", -1, 2u, 3u, (void *)4, (size_t)5, "l",
         6);
  ph_log(PH_LOG_ERROR, "%s", big);
  ph_warn("a", "b", (const char *)NULL);
  log_unchecked(PH_LOG_ERROR, "%q %k");
  long after = ALLOC_CALLS();
  cr_assert_eq(after, before, "%ld calls of the malloc family while logging", after - before);
  for (int i = 0; i < 4; i++)
    cr_assert_neq(catch_next(&c, buf, sizeof(buf))[0], '\0');
  catch_end(&c);
}
#endif
