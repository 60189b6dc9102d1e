/*
 * test_config.c -- the configuration table seen from a whole process: the
 * default malloc alignment (PINHEAP_MALLOC_ALIGN) through the process's
 * malloc family, pinheap enabled and disabled, and the events switch
 * (PINHEAP_EVENTS=0) through the public API.
 *
 * This executable holds libpinheap.a whole with its symbols exported (see
 * config_tests.cmake), so its malloc, realloc, ... are pinheap's entry
 * points and go through the dispatch table.  Each ctest runs one suite
 * under its own environment, and says what it expects in variables of its
 * own (TEST_CONFIG_*), which the tests require: a suite run without them
 * fails, it does not pass.
 *
 *   align       TEST_CONFIG_ALIGN=<n>  TEST_CONFIG_ENABLED=0|1
 *   events_off  TEST_CONFIG_EVENTS_VAR=<the variable that turned them off>
 *
 * Skips (with the reason) where interposition did not take.  Main entry:
 * the Criterion tests below.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinheap.h"
/* params.h brings rename.h: keep malloc, free, ... the process's own (as
 * replace.c does), so that these tests call the unprefixed entry points. */
#define PINHEAP_NO_CLASSIC_RENAME 1
#include "config/params.h"

/* replace.c's own definitions (hidden in the archive, linkable here);
 * rename.h shifts the name. */
typedef struct test_replace_self_s {
  void *self_malloc;
  void *self_free;
  void *self_munmap;
} test_replace_self_t;
extern const test_replace_self_t replace_self;

static void interposed_or_skip(void)
{
  void *m = dlsym(RTLD_DEFAULT, "malloc");
  if (m != replace_self.self_malloc)
    cr_skip_test("interposition did not take: this process resolves malloc to %p, not "
                 "pinheap's %p (a sanitizer runtime in front?)",
                 m, replace_self.self_malloc);
}

/* A TEST_CONFIG_* variable the ctest must set. */
static const char *want_env(const char *name)
{
  const char *v = getenv(name);
  cr_assert(v != NULL && v[0] != '\0', "%s is not set: run this suite from its ctest", name);
  return v;
}

/* ======================================================================= */
/*  the default alignment                                                   */
/* ======================================================================= */

static size_t align_want;

static void align_setup(void)
{
  interposed_or_skip();
  align_want = (size_t)strtoul(want_env("TEST_CONFIG_ALIGN"), NULL, 10);
  cr_assert(align_want >= 16 && (align_want & (align_want - 1)) == 0);
  /* the parameter was read, and pinheap serves malloc or stands aside as asked */
  cr_assert_eq((size_t)params_get()->v[PARAM_MALLOC_ALIGN].value, align_want,
               "PINHEAP_MALLOC_ALIGN parsed to %d", params_get()->v[PARAM_MALLOC_ALIGN].value);
  int enabled = atoi(want_env("TEST_CONFIG_ENABLED"));
  cr_assert_eq(PINHEAP_NAME(enabled)(), enabled, "%s", PINHEAP_NAME(decision_text)());
}

#define ASSERT_ALIGNED(p, a, what, n)                                                 \
  cr_assert(((uintptr_t)(p) & ((a) - 1)) == 0, "%s(%zu) = %p: not aligned to %zu", (what), \
            (size_t)(n), (void *)(p), (size_t)(a))

/* Sizes around the small classes, pages, the mmap threshold and above. */
static const size_t sizes[] = {
  0, 1, 7, 8, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256,
  257, 500, 1000, 1024, 2000, 4000, 4095, 4096, 4097, 8191, 8192, 10000, 65535, 65536, 100000,
  131072, 200000, 262144, 1 << 20, (1 << 20) + 1, 4 << 20, (4 << 20) + 100, 40 << 20,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

Test(align, malloc_of_every_size_is_aligned, .init = align_setup)
{
  void *keep[NSIZES * 4];
  size_t k = 0;

  /* several rounds, the blocks kept, so that later ones are not the first
   * of their class */
  for (int round = 0; round < 4; round++)
    for (size_t i = 0; i < NSIZES; i++) {
      void *p = malloc(sizes[i]);
      cr_assert_not_null(p, "malloc(%zu)", sizes[i]);
      ASSERT_ALIGNED(p, align_want, "malloc", sizes[i]);
      memset(p, 0x5a, sizes[i]);
      keep[k++] = p;
    }
  for (size_t i = 0; i < k; i++)
    free(keep[i]);
}

Test(align, calloc_is_aligned_and_zeroes_reused_memory, .init = align_setup)
{
  for (size_t i = 0; i < NSIZES; i++) {
    size_t n = sizes[i];
    if (n > (1 << 20))
      continue;
    /* dirty a block of the same size, free it, calloc one */
    unsigned char *d = malloc(n);
    cr_assert_not_null(d);
    memset(d, 0xa5, n);
    free(d);
    unsigned char *p = calloc(1, n);
    cr_assert_not_null(p, "calloc(1, %zu)", n);
    ASSERT_ALIGNED(p, align_want, "calloc", n);
    for (size_t j = 0; j < n; j++)
      cr_assert_eq(p[j], 0, "calloc(1, %zu): byte %zu is %#x", n, j, p[j]);
    free(p);
  }
  unsigned char *q = calloc(100, 24);
  cr_assert_not_null(q);
  ASSERT_ALIGNED(q, align_want, "calloc", 2400);
  free(q);
  volatile size_t huge = SIZE_MAX / 2;    /* the product overflows */
  errno = 0;
  cr_assert_null(calloc(huge, 3));
  cr_assert_eq(errno, ENOMEM);
}

static void pattern_fill(unsigned char *p, size_t from, size_t to)
{
  for (size_t i = from; i < to; i++)
    p[i] = (unsigned char)(i * 7 + 3);
}

static void pattern_check(const unsigned char *p, size_t n, size_t step_size)
{
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(p[i], (unsigned char)(i * 7 + 3), "after realloc to %zu: byte %zu changed",
                 step_size, i);
}

/* Grows a block through every size, then shrinks it back: every block is
 * aligned and keeps its contents. */
static void realloc_walk(int use_array)
{
  size_t have = 1;
  unsigned char *p = malloc(1);
  cr_assert_not_null(p);
  pattern_fill(p, 0, 1);
  for (int dir = 0; dir < 2; dir++) {
    for (size_t k = 0; k < NSIZES; k++) {
      size_t n = sizes[dir == 0 ? k : NSIZES - 1 - k];
      if (n == 0)
        continue;
      unsigned char *q = use_array ? reallocarray(p, n, 1) : realloc(p, n);
      cr_assert_not_null(q, "realloc(%zu)", n);
      ASSERT_ALIGNED(q, align_want, use_array ? "reallocarray" : "realloc", n);
      pattern_check(q, have < n ? have : n, n);
      pattern_fill(q, have < n ? have : n, n);
      p = q;
      have = n;
    }
  }
  free(p);
}

Test(align, realloc_growth_and_shrink_keep_alignment_and_contents, .init = align_setup)
{
  realloc_walk(0);
}

Test(align, reallocarray_keeps_alignment_and_checks_the_product, .init = align_setup)
{
  realloc_walk(1);
  void *p = malloc(10);
  cr_assert_not_null(p);
  volatile size_t huge = SIZE_MAX / 2;    /* the product overflows */
  errno = 0;
  cr_assert_null(reallocarray(p, huge, 3));
  cr_assert_eq(errno, ENOMEM);
  free(p);                       /* untouched by the refused call */
}

/* Many blocks in between, so that a grown block cannot stay in place. */
Test(align, realloc_that_moves_the_block_keeps_alignment, .init = align_setup)
{
  enum { N = 64 };
  unsigned char *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = malloc(40);
    cr_assert_not_null(b[i]);
    pattern_fill(b[i], 0, 40);
  }
  for (int i = 0; i < N; i += 2) {
    b[i] = realloc(b[i], 40 + (size_t)i * 40);
    cr_assert_not_null(b[i]);
    ASSERT_ALIGNED(b[i], align_want, "realloc", 40 + (size_t)i * 40);
    pattern_check(b[i], 40, 40 + (size_t)i * 40);
  }
  for (int i = 0; i < N; i++)
    free(b[i]);
  void *z = realloc(NULL, 24);
  cr_assert_not_null(z);
  ASSERT_ALIGNED(z, align_want, "realloc(NULL)", 24);
  free(z);
}

Test(align, smaller_explicit_alignments_get_the_default, .init = align_setup)
{
  for (size_t i = 0; i < NSIZES; i++) {
    size_t n = sizes[i];
    if (n > (1 << 20))
      continue;
    void *p = memalign(8, n);
    cr_assert_not_null(p);
    ASSERT_ALIGNED(p, align_want, "memalign(8)", n);
    free(p);
    p = NULL;
    cr_assert_eq(posix_memalign(&p, sizeof(void *), n), 0);
    ASSERT_ALIGNED(p, align_want, "posix_memalign(8)", n);
    free(p);
    p = aligned_alloc(16, n == 0 ? 16 : n);
    cr_assert_not_null(p);
    ASSERT_ALIGNED(p, align_want, "aligned_alloc(16)", n);
    free(p);
  }
  /* a larger one is kept */
  void *big = memalign(2 * align_want, 100);
  cr_assert_not_null(big);
  ASSERT_ALIGNED(big, 2 * align_want, "memalign(2 * default)", 100);
  free(big);
  /* misuse is still refused */
  void *p = (void *)1;
  cr_assert_eq(posix_memalign(&p, 3, 10), EINVAL);
  cr_assert_eq(posix_memalign(&p, 4, 10), EINVAL);
  cr_assert_eq(p, (void *)1, "posix_memalign wrote the result of a refused call");
  /* pages stay pages */
  void *v = valloc(10);
  cr_assert_not_null(v);
  ASSERT_ALIGNED(v, (size_t)sysconf(_SC_PAGESIZE), "valloc", 10);
  free(v);
}

Test(align, usable_size_and_free_of_aligned_blocks, .init = align_setup)
{
  for (size_t i = 0; i < NSIZES; i++) {
    size_t n = sizes[i];
    unsigned char *p = malloc(n);
    cr_assert_not_null(p);
    cr_assert_geq(malloc_usable_size(p), n, "malloc_usable_size(malloc(%zu))", n);
    memset(p, 1, malloc_usable_size(p));
    free(p);
  }
}

/* ======================================================================= */
/*  the events switch off                                                   */
/* ======================================================================= */

static void events_off_setup(void)
{
  interposed_or_skip();
  const char *var = want_env("TEST_CONFIG_EVENTS_VAR");
  const param_value_t *pv = &params_get()->v[PARAM_EVENTS];
  cr_assert_eq(pv->value, 0, "the events are not off (%s)", var);
  cr_assert(pv->from != NULL && strcmp(pv->from, var) == 0, "turned off by %s, expected %s",
            pv->from ? pv->from : "nothing", var);
}

static int count_cb(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)ev;
  (void)arg;
  return PINHEAP_EVENT_PASS;
}

static void release_cb(void *addr, size_t len, int from_alloc, void *ctx)
{
  (void)addr;
  (void)len;
  (void)from_alloc;
  (void)ctx;
}

/* fd 2 into a memory file while fn runs. */
static void stderr_capture(void (*fn)(void *), void *arg, char *out, size_t cap)
{
  fflush(stderr);
  int mem = memfd_create("stderr", 0), saved = dup(2);
  cr_assert(mem >= 0 && saved >= 0);
  dup2(mem, 2);
  fn(arg);
  dup2(saved, 2);
  close(saved);
  ssize_t n = pread(mem, out, cap - 1, 0);
  close(mem);
  out[n > 0 ? n : 0] = '\0';
}

static void refuse_both(void *arg)
{
  int *rc = arg;
  rc[0] = PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, 0, count_cb, NULL);
  rc[1] = PINHEAP_NAME(register_release)(release_cb, NULL);
  rc[2] = PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP, 5, count_cb, NULL);
  rc[3] = PINHEAP_NAME(register_release)(release_cb, NULL);
}

Test(events_off, handlers_and_listeners_are_refused_with_one_line, .init = events_off_setup)
{
  int rc[4];
  char err[2048], want[512];

  stderr_capture(refuse_both, rc, err, sizeof(err));
  cr_assert_eq(rc[0], ENOTSUP);
  cr_assert_eq(rc[1], ENOTSUP);
  cr_assert_eq(rc[2], ENOTSUP);
  cr_assert_eq(rc[3], ENOTSUP);
  snprintf(want, sizeof(want), "pinheap: warning: %sset_event_handler refused: the memory "
           "events are off (%s=\"%s\"), so pinheap intercepts no memory call and reports no "
           "release\n", PINHEAP_PREFIX_STRING, getenv("TEST_CONFIG_EVENTS_VAR"),
           getenv(getenv("TEST_CONFIG_EVENTS_VAR")));
  cr_assert_str_eq(err, want);
  /* misuse is still misuse */
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(0, 0, count_cb, NULL), EINVAL);
  cr_assert_eq(PINHEAP_NAME(register_release)(NULL, NULL), EINVAL);
}

Test(events_off, support_level_is_zero_and_says_why, .init = events_off_setup)
{
  char want[256];

  cr_assert_eq(PINHEAP_NAME(open)(), 0);
  cr_assert_eq(PINHEAP_NAME(support_level)(), 0);
  snprintf(want, sizeof(want), "%s=0: the memory events are off",
           getenv("TEST_CONFIG_EVENTS_VAR"));
  cr_assert(strstr(PINHEAP_NAME(support_text)(), want) != NULL, "support text: %s",
            PINHEAP_NAME(support_text)());
}

static void leave_pinned_check(void *arg)
{
  *(int *)arg = PINHEAP_NAME(check_leave_pinned)();
}

Test(events_off, check_leave_pinned_warns_that_nothing_is_seen, .init = events_off_setup)
{
  char err[2048], want[256];
  int rc = 0;

  cr_assert_eq(params_get()->v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES,
               "the ctest sets the leave-pinned parameter to 1");
  stderr_capture(leave_pinned_check, &rc, err, sizeof(err));
  cr_assert_eq(rc, 1);
  snprintf(want, sizeof(want), "pinheap: warning: mpi_leave_pinned is 1 but the memory events are "
           "off (%s=0): pinheap sees no release", getenv("TEST_CONFIG_EVENTS_VAR"));
  cr_assert(strncmp(err, want, strlen(want)) == 0, "got: %s", err);
  cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "not one line: %s", err);
}

Test(events_off, no_memory_call_is_patched_and_malloc_is_still_served, .init = events_off_setup)
{
  pinheap_install_info_t ii;
  unsigned memory_calls = 0;

  for (unsigned i = 0; PINHEAP_NAME(install_info)(i, &ii) == 0; i++) {
    if (ii.event == 0)
      continue;
    memory_calls++;
    cr_assert(ii.method != PINHEAP_INSTALL_RELOC && ii.method != PINHEAP_INSTALL_CODE,
              "%s was patched (method %d)", ii.symbol, ii.method);
    cr_assert_eq(ii.code, PINHEAP_CODE_NONE, "%s: libc's code was patched", ii.symbol);
    cr_assert_eq(ii.slots, 0, "%s: %u slots patched", ii.symbol, ii.slots);
  }
  cr_assert_gt(memory_calls, 0, "install_info lists no memory call");
  char want[128];
  snprintf(want, sizeof(want), "%s=0: the memory calls", getenv("TEST_CONFIG_EVENTS_VAR"));
  cr_assert(strstr(PINHEAP_NAME(install_text)(), want) != NULL, "%s",
            PINHEAP_NAME(install_text)());
  /* malloc replacement does not depend on the events */
  cr_assert_eq(PINHEAP_NAME(enabled)(), 1, "%s", PINHEAP_NAME(decision_text)());
  void *p = malloc(100);
  cr_assert_not_null(p);
  free(p);
}
