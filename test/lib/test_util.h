/*
 * test_util.h -- helpers shared by the API, alignment, misuse, mspace and
 * slab Criterion tests (test_api.c, test_align.c, test_misuse.c,
 * test_mspace.c, test_slab.c).
 *
 * Owns what the shadow model (shadow.h: the PRNG, byte patterns, block
 * sets) does not: the heap-check assertions, stderr capture through a pipe
 * (stderr_capture_begin / stderr_capture_end), misuse run in a forked child
 * that must die by SIGABRT after one exact line (misuse_assert), a counting
 * release listener
 * on the OS layer's slot (listener_install), guarded regions for
 * fixed-region mspaces (region_map / region_unmap), and /proc/self/maps
 * counting.  Main entry point: region_map().
 *
 * Tests call the allocator through PINHEAP_NAME(malloc), ...: any prefix builds.
 * The OS layer's hidden functions (os_stats_get, os_set_release_listener)
 * are reached through allocator/api/api.h, included without the shift of the public
 * classic names so that plain malloc/free in a test are glibc's.
 */
#ifndef PINHEAP_TEST_UTIL_H
#define PINHEAP_TEST_UTIL_H

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinheap.h"
#include "shadow.h"   /* the PRNG, byte patterns, block sets: one copy */
/* allocator/api/api.h brings os_stats_t and the OS layer's prototypes, shifted to
 * pinheap_os_*.  The classic public names stay unshifted (in tests, malloc
 * is glibc's), as in hooks/replace.c.  It comes after every system header:
 * rename.h's internal names are macros from here on. */
#define PINHEAP_NO_CLASSIC_RENAME 1
#include "allocator/api/api.h"

#define TU_UNUSED __attribute__((unused))

#define KiB SHADOW_KIB
#define MiB SHADOW_MIB

/* ---- sizes the optimizer must not reason about --------------------------- */

/** Hides a constant from the compiler (no folding of impossible sizes). */
static inline size_t size_opaque(size_t v)
{
  volatile size_t x = v;
  return x;
}

static inline int ptr_is_aligned(const void *p, size_t align)
{
  return ((uintptr_t)p & (align - 1)) == 0;
}

/** Smallest power of two >= v (v >= 1). */
static inline size_t size_next_pow2(size_t v)
{
  size_t a = 1;
  while (a < v)
    a <<= 1;
  return a;
}

static inline size_t page_size_get(void)
{
  return (size_t)sysconf(_SC_PAGESIZE);
}

/* ---- heap checks ---------------------------------------------------------- */

#define heap_assert_sound(what)                                                  \
  do {                                                                           \
    int heap_problems_ = PINHEAP_NAME(malloc_check)();                           \
    cr_assert_eq(heap_problems_, 0,                                              \
                 PINHEAP_PREFIX_STRING "malloc_check() found %d problem(s) after %s " \
                 "(details on stderr)", heap_problems_, (what));                 \
  } while (0)

#define mspace_assert_sound(msp, what)                                           \
  do {                                                                           \
    int msp_problems_ = PINHEAP_NAME(mspace_check)(msp);                         \
    cr_assert_eq(msp_problems_, 0,                                               \
                 PINHEAP_PREFIX_STRING "mspace_check(%p) found %d problem(s) after %s " \
                 "(details on stderr)", (void *)(msp), msp_problems_, (what));   \
  } while (0)

/* ---- OS layer statistics and the release listener -------------------------- */

static inline os_stats_t os_stats_read(void)
{
  os_stats_t st;
  os_stats_get(&st);
  return st;
}

typedef struct listener_count_s {
  atomic_size_t calls;  /* releases reported */
  atomic_size_t bytes;  /* bytes reported */
} listener_count_t;

static listener_count_t listener_counts TU_UNUSED;

static void listener_count_release(void *addr, size_t len, void *ctx)
{
  listener_count_t *c = ctx;
  (void)addr;
  atomic_fetch_add(&c->calls, 1);
  atomic_fetch_add(&c->bytes, len);
}

/** Puts the counting listener in the OS layer's slot and zeroes the counts. */
static inline TU_UNUSED void listener_install(void)
{
  atomic_store(&listener_counts.calls, 0);
  atomic_store(&listener_counts.bytes, 0);
  os_set_release_listener(listener_count_release, &listener_counts);
}

static inline TU_UNUSED size_t listener_calls_get(void)
{
  return atomic_load(&listener_counts.calls);
}

static inline TU_UNUSED size_t listener_bytes_get(void)
{
  return atomic_load(&listener_counts.bytes);
}

/* ---- stderr capture -------------------------------------------------------- */

typedef struct stderr_capture_s {
  int saved_fd;     /* the original fd 2 */
  int pipe_fd[2];   /* [0] read end, [1] write end (now fd 2) */
} stderr_capture_t;

/** Points fd 2 at a non-blocking pipe (a writer can never hang on it). */
static inline TU_UNUSED void stderr_capture_begin(stderr_capture_t *cap_p)
{
  cr_assert_eq(pipe2(cap_p->pipe_fd, O_NONBLOCK | O_CLOEXEC), 0,
               "pipe2() failed: %s", strerror(errno));
  (void)fcntl(cap_p->pipe_fd[1], F_SETPIPE_SZ, 1 << 20);
  cap_p->saved_fd = dup(STDERR_FILENO);
  cr_assert(cap_p->saved_fd >= 0, "dup(2) failed: %s", strerror(errno));
  cr_assert_eq(dup2(cap_p->pipe_fd[1], STDERR_FILENO), STDERR_FILENO,
               "dup2() failed: %s", strerror(errno));
}

/** Restores fd 2 and reads what was written meanwhile into buf (NUL
 *  terminated).  @return the number of bytes read. */
static inline TU_UNUSED size_t stderr_capture_end(stderr_capture_t *cap_p, char *buf, size_t cap)
{
  size_t len = 0;

  dup2(cap_p->saved_fd, STDERR_FILENO);
  close(cap_p->saved_fd);
  close(cap_p->pipe_fd[1]);
  while (len + 1 < cap) {
    ssize_t n = read(cap_p->pipe_fd[0], buf + len, cap - 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  buf[len] = '\0';
  close(cap_p->pipe_fd[0]);
  return len;
}

/* ---- /proc/self/maps ------------------------------------------------------- */

/** @return the number of mappings of this process (lines of /proc/self/maps). */
static inline TU_UNUSED int maps_count_lines(void)
{
  char buf[4096];
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  int lines = 0;
  ssize_t n;

  cr_assert(fd >= 0, "open(/proc/self/maps) failed: %s", strerror(errno));
  while ((n = read(fd, buf, sizeof(buf))) > 0)
    for (ssize_t i = 0; i < n; i++)
      lines += buf[i] == '\n';
  close(fd);
  return lines;
}

/* ---- guarded regions ------------------------------------------------------- */

/*
 * A region for create_mspace_with_base: rw_len bytes of read-write memory
 * between two PROT_NONE guard pages, so that any access beyond the
 * read-write pages faults.  The whole read-write part is filled with
 * REGION_CANARY; a test places [base, base+capacity) inside it and checks
 * that the slack on either side still holds the canary.
 */
#define REGION_CANARY 0xC3

typedef struct region_s {
  uint8_t *map;   /* start of the mapping (a guard page) */
  size_t map_len;
  uint8_t *rw;    /* first read-write byte */
  size_t rw_len;  /* read-write bytes (a multiple of the page size) */
} region_t;

static inline TU_UNUSED void region_map(size_t rw_len, region_t *region_p)
{
  size_t page = page_size_get();

  rw_len = (rw_len + page - 1) & ~(page - 1);
  region_p->map_len = rw_len + 2 * page;
  region_p->map = mmap(NULL, region_p->map_len, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(region_p->map, MAP_FAILED, "mmap(%zu) failed: %s",
                region_p->map_len, strerror(errno));
  region_p->rw = region_p->map + page;
  region_p->rw_len = rw_len;
  cr_assert_eq(mprotect(region_p->rw, rw_len, PROT_READ | PROT_WRITE), 0,
               "mprotect failed: %s", strerror(errno));
  memset(region_p->rw, REGION_CANARY, rw_len);
}

static inline TU_UNUSED void region_unmap(region_t *region)
{
  munmap(region->map, region->map_len);
}

/** Asserts that [rw, base) and [base+capacity, rw+rw_len) still hold the canary. */
static inline TU_UNUSED void region_assert_canaries(const region_t *region, const void *base,
                                                    size_t capacity, const char *when)
{
  const uint8_t *b = base;
  size_t head = (size_t)(b - region->rw);
  size_t tail_off = head + capacity;
  size_t bad = shadow_bytes_find_not(region->rw, head, REGION_CANARY);

  cr_assert_eq(bad, SIZE_MAX,
               "%s: byte %zu before the region base %p was overwritten (0x%02x, canary 0x%02x)",
               when, head - bad, base, region->rw[bad], REGION_CANARY);
  bad = shadow_bytes_find_not(region->rw + tail_off, region->rw_len - tail_off, REGION_CANARY);
  cr_assert_eq(bad, SIZE_MAX,
               "%s: byte %zu after the region end %p was overwritten (0x%02x, canary 0x%02x)",
               when, bad, (const void *)(b + capacity), region->rw[tail_off + bad], REGION_CANARY);
}

/* ---- misuse in a child: one line on stderr, then SIGABRT ------------------- */

typedef void misuse_fn_t(void *arg);

typedef struct misuse_result_s {
  int status;          /* from waitpid */
  char out[4096];      /* everything the child wrote to stderr */
  size_t len;
} misuse_result_t;

/** Runs act(arg) in a child with stderr on a pipe; collects its output and
 *  exit status.  The child has 10 s before SIGALRM ends it (a hang). */
static TU_UNUSED void misuse_run(misuse_fn_t *act, void *arg, misuse_result_t *result_p)
{
  int fds[2];

  cr_assert_eq(pipe(fds), 0, "pipe() failed: %s", strerror(errno));
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_neq(pid, -1, "fork() failed: %s", strerror(errno));
  if (pid == 0) {
    struct rlimit no_core = { 0, 0 };
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGABRT, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    alarm(10);
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    act(arg);
    _exit(0);
  }
  close(fds[1]);
  result_p->len = 0;
  for (;;) {
    ssize_t n = read(fds[0], result_p->out + result_p->len, sizeof(result_p->out) - 1 - result_p->len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    result_p->len += (size_t)n;
    if (result_p->len == sizeof(result_p->out) - 1)
      break;
  }
  result_p->out[result_p->len] = '\0';
  close(fds[0]);
  while (waitpid(pid, &result_p->status, 0) < 0)
    cr_assert_eq(errno, EINTR, "waitpid failed: %s", strerror(errno));
}

/*
 * Asserts that act(arg) dies by SIGABRT after writing exactly
 * "pinheap: <func>(): <what> 0x<ptr>\n", with <what> being what or, if not
 * NULL, what_alt.
 */
static TU_UNUSED void misuse_assert_either(misuse_fn_t *act, void *arg, const char *func, const char *what,
                                 const char *what_alt, const void *ptr)
{
  misuse_result_t r;
  char expect[256], expect_alt[256];

  misuse_run(act, arg, &r);
  snprintf(expect, sizeof(expect), "pinheap: %s(): %s 0x%" PRIxPTR "\n", func, what, (uintptr_t)ptr);
  snprintf(expect_alt, sizeof(expect_alt), "pinheap: %s(): %s 0x%" PRIxPTR "\n", func,
           what_alt ? what_alt : what, (uintptr_t)ptr);
  if (WIFEXITED(r.status))
    cr_assert_fail("%s() of %p: expected \"%s\" and SIGABRT, but the process went on and exited "
                   "with status %d; stderr: \"%s\"", func, ptr, what, WEXITSTATUS(r.status), r.out);
  cr_assert(WIFSIGNALED(r.status), "%s() of %p: child neither exited nor was killed (status 0x%x)", func,
            ptr, r.status);
  cr_assert_eq(WTERMSIG(r.status), SIGABRT,
               "%s() of %p: killed by signal %d (%s), expected SIGABRT; stderr: \"%s\"", func, ptr,
               WTERMSIG(r.status), strsignal(WTERMSIG(r.status)), r.out);
  cr_assert(strcmp(r.out, expect) == 0 || strcmp(r.out, expect_alt) == 0,
            "%s() of %p: stderr was\n  \"%s\"\nexpected exactly one line\n  \"%s\"%s%s", func, ptr, r.out,
            expect, what_alt ? "\nor\n  " : "", what_alt ? expect_alt : "");
}

static TU_UNUSED void misuse_assert(misuse_fn_t *act, void *arg, const char *func, const char *what, const void *ptr)
{
  misuse_assert_either(act, arg, func, what, NULL, ptr);
}

/*
 * As misuse_assert; but in a PINHEAP_DEBUG=2 build the heap checker, which
 * runs after every call, finds the damage first and names it itself: then
 * asserts that report ("the heap checker (PINHEAP_DEBUG=2) found") and
 * SIGABRT.  damage names what act did, for the message.
 */
static TU_UNUSED void misuse_assert_or_checker(misuse_fn_t *act, void *arg, const char *func,
                                               const char *what, const void *ptr,
                                               const char *damage)
{
#if PINHEAP_DEBUG_LEVEL >= 2
  misuse_result_t r;
  (void)func, (void)what, (void)ptr;
  misuse_run(act, arg, &r);
  cr_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT &&
                strstr(r.out, "the heap checker (PINHEAP_DEBUG=2) found") != NULL,
            "level 2 did not catch %s (status 0x%x); stderr: \"%s\"", damage, r.status, r.out);
#else
  (void)damage;
  misuse_assert(act, arg, func, what, ptr);
#endif
}

#endif /* PINHEAP_TEST_UTIL_H */
