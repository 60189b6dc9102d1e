/*
 * test_commit.c -- out-of-memory semantics and commit charge (issue 8,
 * item 1.5).  Main entry point: the Criterion runner (suite "commit").
 *
 * What it proves:
 *   * A request glibc refuses (4 TiB on a machine with less memory) is
 *     refused the same way on every entry point and both paths (huge blocks,
 *     and the heap after mallopt(M_MMAP_MAX, 0)): NULL with errno ENOMEM,
 *     realloc keeps the old block, posix_memalign returns ENOMEM and leaves
 *     its out-pointer; mspaces likewise; ordinary use works afterwards.
 *     Checked in the heuristic overcommit mode (0) and under strict
 *     overcommit (2).
 *   * pinheap's metadata reservations (the 2 GiB kind map, the owner map's
 *     leaves) cost no commit: a process's first use of malloc grows its
 *     writable private data (VmData, what strict overcommit charges) by
 *     a few MiB, not by gigabytes; under strict overcommit the system's
 *     Committed_AS grows likewise.
 *   * When the OS refuses to commit the owner map's pages (RLIMIT_DATA set
 *     just above what the process uses, stepped up page by page), malloc
 *     returns NULL with ENOMEM and the heap stays sound and usable.
 *
 * Every check runs in a child forked for it: a fresh process whose first
 * pinheap call is the one measured, and the only process that runs while
 * vm.overcommit_memory is switched.  The parent switches the sysctl, lets
 * the child go, waits for it (the child ends itself by alarm() if it hangs)
 * and restores the old value before it asserts anything.  Switching needs
 * root and a writable /proc/sys; otherwise the test prints a skip with the
 * reason.  Strict overcommit is machine-wide, so ctest runs this executable
 * alone (RUN_SERIAL, test/api/commit_tests.cmake) and Criterion runs its tests
 * one at a time (--jobs 1).
 */
#include "test_util.h"

#define GiB ((size_t)1 << 30)
#define TiB ((size_t)1 << 40)

#define COMMIT_PROC "/proc/sys/vm/overcommit_memory"
#define COMMIT_CHILD_SECONDS 60       /* a hung child ends itself */

/* ======================================================================= */
/*  Reading /proc without allocating                                        */
/* ======================================================================= */

/** The "key:   value kB" line of a /proc file, in bytes; -1 if absent. */
static long long proc_kib_field(const char *path, const char *key)
{
  char buf[8192];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  size_t klen = strlen(key);
  for (char *line = buf; line != NULL && *line != '\0';) {
    if (strncmp(line, key, klen) == 0 && line[klen] == ':')
      return strtoll(line + klen + 1, NULL, 10) * 1024;
    line = strchr(line, '\n');
    if (line != NULL)
      line++;
  }
  return -1;
}

static long long vmdata_bytes(void) { return proc_kib_field("/proc/self/status", "VmData"); }
static long long meminfo_bytes(const char *key) { return proc_kib_field("/proc/meminfo", key); }

/** The current vm.overcommit_memory, or -1 (errno set). */
static int commit_mode_read(void)
{
  char c = 0;
  int fd = open(COMMIT_PROC, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, &c, 1);
  close(fd);
  if (n != 1 || c < '0' || c > '2') {
    errno = EINVAL;
    return -1;
  }
  return c - '0';
}

/** Sets vm.overcommit_memory.  @return 0, or an errno value. */
static int commit_mode_write(int mode)
{
  char c = (char)('0' + mode);
  int fd = open(COMMIT_PROC, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return errno;
  int rc = write(fd, &c, 1) == 1 ? 0 : errno;
  close(fd);
  return rc;
}

/* ======================================================================= */
/*  Children and their verdicts                                             */
/* ======================================================================= */

/* A child writes its failure (or nothing) into this pipe. */
static int verdict_fd = -1;

/** In the child: on failure, sends the message to the parent and ends the
 *  child at once (a 4 TiB block granted by mistake must not be touched). */
#define child_check(cond, ...)                                                    \
  do {                                                                            \
    if (!(cond)) {                                                                \
      char msg_[512];                                                             \
      int len_ = snprintf(msg_, sizeof msg_, "%s:%d: ", __FILE__, __LINE__);      \
      snprintf(msg_ + len_, sizeof msg_ - (size_t)len_, __VA_ARGS__);             \
      if (write(verdict_fd, msg_, strlen(msg_)) < 0) { /* the exit code says it */ } \
      _exit(1);                                                                   \
    }                                                                             \
  } while (0)

typedef void child_fn(void *arg);

/*
 * Runs fn(arg) in a fresh child with vm.overcommit_memory = mode (mode < 0:
 * as the machine has it) and asserts that it found nothing wrong.  Skips
 * the test if the mode cannot be set here.  The old mode is restored
 * before any assertion.
 */
static void child_run_in_mode(int mode, child_fn *fn, void *arg)
{
  int old = commit_mode_read();
  if (old < 0 && mode >= 0)
    cr_skip_test("cannot read %s (%s): the overcommit mode is unknown", COMMIT_PROC, strerror(errno));
  bool switch_mode = mode >= 0 && old != mode;
  if (switch_mode) {
    int err = commit_mode_write(old);   /* writing the current value proves we may */
    if (err != 0)
      cr_skip_test("cannot write %s (%s): switching to overcommit mode %d needs root and a "
                   "writable /proc/sys", COMMIT_PROC, strerror(err), mode);
  }

  int go[2], verdict[2];
  cr_assert_eq(pipe(go), 0, "pipe: %s", strerror(errno));
  cr_assert_eq(pipe(verdict), 0, "pipe: %s", strerror(errno));
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    char c;
    close(go[1]);
    close(verdict[0]);
    verdict_fd = verdict[1];
    alarm(COMMIT_CHILD_SECONDS);
    if (read(go[0], &c, 1) != 1)
      _exit(3);                         /* the parent gave up: do nothing */
    fn(arg);
    _exit(0);
  }
  close(go[0]);
  close(verdict[1]);

  int set_err = switch_mode ? commit_mode_write(mode) : 0;
  if (set_err == 0 && write(go[1], "g", 1) != 1)
    set_err = errno;
  close(go[1]);                         /* on any failure the child reads EOF and leaves */
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  int restore_err = switch_mode ? commit_mode_write(old) : 0;

  char msg[512] = "";
  ssize_t n = read(verdict[0], msg, sizeof msg - 1);
  msg[n > 0 ? n : 0] = '\0';
  close(verdict[0]);

  cr_assert_eq(restore_err, 0, "could not restore %s to %d (%s): restore it by hand", COMMIT_PROC,
               old, strerror(restore_err));
  cr_assert_eq(commit_mode_read(), old, "%s is not back at %d", COMMIT_PROC, old);
  if (set_err != 0)
    cr_skip_test("cannot switch %s to %d: %s", COMMIT_PROC, mode, strerror(set_err));
  char mode_name[32];
  snprintf(mode_name, sizeof mode_name, mode < 0 ? "as configured (%d)" : "%d", mode < 0 ? old : mode);
  cr_assert(WIFEXITED(status), "the child (overcommit mode %s) died by signal %d%s", mode_name,
            WIFSIGNALED(status) ? WTERMSIG(status) : 0,
            WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? " (hung)" : "");
  cr_assert_eq(WEXITSTATUS(status), 0, "overcommit mode %s: %s", mode_name,
               msg[0] != '\0' ? msg : "the child failed without a message");
}

/* ======================================================================= */
/*  Requests glibc refuses                                                  */
/* ======================================================================= */

/** A size far above what this machine can commit: 4 TiB, or more on a
 *  machine whose memory and swap reach 2 TiB. */
static size_t size_refused(void)
{
  long long ram = meminfo_bytes("MemTotal"), swap = meminfo_bytes("SwapTotal");
  size_t total = (size_t)(ram > 0 ? ram : 0) + (size_t)(swap > 0 ? swap : 0);
  size_t big = 4 * TiB;
  while (big < 2 * total && big < 64 * TiB)
    big *= 2;
  return size_opaque(big);
}

/** Ordinary use after a refusal: small, medium and huge blocks. */
static void heap_use_check(const char *when)
{
  static const size_t sizes[] = {1, 24, 100, 1000, 5000, 70000, 300 * 1024, 3 * 1024 * 1024};
  void *blocks[64];
  for (size_t i = 0; i < 64; i++) {
    size_t size = sizes[i % (sizeof sizes / sizeof sizes[0])];
    blocks[i] = PINHEAP_NAME(malloc)(size);
    child_check(blocks[i] != NULL, "%s: malloc(%zu) failed (errno %d)", when, size, errno);
    if (blocks[i] != NULL)
      memset(blocks[i], (int)i, size);
  }
  for (size_t i = 0; i < 64; i++)
    PINHEAP_NAME(free)(blocks[i]);
  child_check(PINHEAP_NAME(malloc_check)() == 0, "%s: malloc_check found problems", when);
}

#define check_refused(call, what)                                                     \
  do {                                                                                \
    errno = 0;                                                                        \
    void *r_ = (call);                                                                \
    int e_ = errno;                                                                   \
    child_check(r_ == NULL, "%s: %s returned %p, expected NULL", path, what, r_);     \
    child_check(e_ == ENOMEM, "%s: %s set errno %d (%s), expected ENOMEM", path, what, \
                e_, strerror(e_));                                                    \
  } while (0)

/* arg: non-NULL to take the heap path (mallopt(M_MMAP_MAX, 0)). */
static void refused_child(void *arg)
{
  const char *path = arg != NULL ? "heap path" : "huge path";
  size_t big = size_refused();

  if (arg != NULL)
    child_check(PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0) == 1, "mallopt(M_MMAP_MAX, 0) failed");
  void *warm = PINHEAP_NAME(malloc)(64);     /* the heap exists before the refusals */
  child_check(warm != NULL, "malloc(64) failed");

  check_refused(PINHEAP_NAME(malloc)(big), "malloc(big)");
  check_refused(PINHEAP_NAME(calloc)(1, big), "calloc(1, big)");
  check_refused(PINHEAP_NAME(calloc)(big / 4096, 4096), "calloc(big / 4096, 4096)");
  check_refused(PINHEAP_NAME(memalign)(4096, big), "memalign(4096, big)");
  check_refused(PINHEAP_NAME(aligned_alloc)(65536, big), "aligned_alloc(65536, big)");
  check_refused(PINHEAP_NAME(memalign)((size_t)4 << 20, big), "memalign(4 MiB, big)");
  check_refused(PINHEAP_NAME(valloc)(big), "valloc(big)");
  check_refused(PINHEAP_NAME(reallocarray)(NULL, big / 8, 8), "reallocarray(NULL, big / 8, 8)");

  /* realloc keeps the old block, small or huge */
  static const size_t olds[] = {100, 5000, 4 * 1024 * 1024};
  for (size_t i = 0; i < 3; i++) {
    unsigned char *old = PINHEAP_NAME(malloc)(olds[i]);
    child_check(old != NULL, "%s: malloc(%zu) failed", path, olds[i]);
    if (old == NULL)
      continue;
    memset(old, 0x5a, olds[i]);
    check_refused(PINHEAP_NAME(realloc)(old, big), "realloc(old, big)");
    size_t bad = 0;
    for (size_t j = 0; j < olds[i]; j++)
      bad += old[j] != 0x5a;
    child_check(bad == 0, "%s: realloc(old of %zu, big) failed but changed %zu bytes of it", path,
                olds[i], bad);
    PINHEAP_NAME(free)(old);
  }

  void *out = (void *)(uintptr_t)0x1234;
  errno = 0;
  int rc = PINHEAP_NAME(posix_memalign)(&out, 64, big);
  child_check(rc == ENOMEM, "%s: posix_memalign(64, big) returned %d, expected ENOMEM", path, rc);
  child_check(out == (void *)(uintptr_t)0x1234, "%s: posix_memalign failed but set *memptr to %p",
              path, out);

  pinheap_mspace ms = PINHEAP_NAME(create_mspace)(0, 1);
  child_check(ms != NULL, "%s: create_mspace(0, 1) failed", path);
  if (ms != NULL) {
    check_refused(PINHEAP_NAME(mspace_malloc)(ms, big), "mspace_malloc(big)");
    check_refused(PINHEAP_NAME(mspace_calloc)(ms, big / 4096, 4096), "mspace_calloc(big / 4096, 4096)");
    check_refused(PINHEAP_NAME(mspace_memalign)(ms, 4096, big), "mspace_memalign(4096, big)");
    void *m = PINHEAP_NAME(mspace_malloc)(ms, 1000);
    child_check(m != NULL, "%s: mspace_malloc(1000) failed", path);
    if (m != NULL) {
      memset(m, 0x33, 1000);
      check_refused(PINHEAP_NAME(mspace_realloc)(ms, m, big), "mspace_realloc(m, big)");
      child_check(((unsigned char *)m)[999] == 0x33, "%s: mspace_realloc failed but changed the block", path);
      PINHEAP_NAME(mspace_free)(ms, m);
    }
    child_check(PINHEAP_NAME(mspace_check)(ms) == 0, "%s: mspace_check found problems", path);
    PINHEAP_NAME(destroy_mspace)(ms);
  }
  /* An mspace whose capacity itself cannot be had. */
  errno = 0;
  pinheap_mspace no = PINHEAP_NAME(create_mspace)(big, 1);
  child_check(no == NULL, "%s: create_mspace(big) returned %p, expected NULL", path, no);

  PINHEAP_NAME(free)(warm);
  heap_use_check(path);
}

/* In mode 1 ("always overcommit") glibc grants these requests too. */
static void skip_if_always_overcommit(void)
{
  if (commit_mode_read() == 1)
    cr_skip_test("vm.overcommit_memory is 1 (always overcommit): glibc's malloc grants 4 TiB "
                 "there too, so there is no refusal to match");
}

Test(commit, refused_huge_path_heuristic)
{
  child_run_in_mode(0, refused_child, NULL);
}

Test(commit, refused_heap_path_heuristic)
{
  child_run_in_mode(0, refused_child, (void *)1);
}

Test(commit, refused_huge_path_strict)
{
  child_run_in_mode(2, refused_child, NULL);
}

Test(commit, refused_heap_path_strict)
{
  child_run_in_mode(2, refused_child, (void *)1);
}

Test(commit, refused_huge_path_as_configured)
{
  skip_if_always_overcommit();
  child_run_in_mode(-1, refused_child, NULL);
}

/* ======================================================================= */
/*  Metadata costs no commit                                                */
/* ======================================================================= */

/* Below this, a first use of malloc is "small"; the kind map alone is 2 GiB. */
#define COMMIT_FIRST_USE_MAX ((long long)64 << 20)
/* Committed_AS is machine-wide: other processes move it a little. */
#define COMMIT_SYSTEM_MAX ((long long)768 << 20)

/** A little of everything, the way a program starts: small blocks of many
 *  sizes on this thread and another, a realloc, an mspace. */
static void first_use(void)
{
  void *p[200];
  for (size_t i = 0; i < 200; i++)
    p[i] = PINHEAP_NAME(malloc)(16 + i * 97);
  void *r = PINHEAP_NAME(realloc)(p[3], 20000);
  if (r != NULL)
    p[3] = r;
  pinheap_mspace ms = PINHEAP_NAME(create_mspace)(0, 1);
  void *m = ms != NULL ? PINHEAP_NAME(mspace_malloc)(ms, 5000) : NULL;
  child_check(ms != NULL && m != NULL, "create_mspace/mspace_malloc failed");
  for (size_t i = 0; i < 200; i++) {
    child_check(p[i] != NULL, "malloc(%zu) failed", 16 + i * 97);
    PINHEAP_NAME(free)(p[i]);
  }
  if (ms != NULL)
    PINHEAP_NAME(destroy_mspace)(ms);
}

static void first_use_vmdata_child(void *arg)
{
  (void)arg;
  long long before = vmdata_bytes();
  first_use();
  long long after = vmdata_bytes();
  child_check(before > 0 && after > 0, "cannot read VmData from /proc/self/status");
  child_check(after - before < COMMIT_FIRST_USE_MAX,
              "a first use of malloc grew writable data (VmData) by %lld MiB (from %lld to %lld MiB); "
              "expected under %lld MiB: a metadata reservation is writable (charged under strict "
              "overcommit)", (after - before) >> 20, before >> 20, after >> 20, COMMIT_FIRST_USE_MAX >> 20);
}

static void first_use_committed_child(void *arg)
{
  (void)arg;
  long long before = meminfo_bytes("Committed_AS");
  long long vd_before = vmdata_bytes();
  first_use();
  long long after = meminfo_bytes("Committed_AS");
  long long vd_after = vmdata_bytes();
  child_check(before > 0 && after > 0, "cannot read Committed_AS from /proc/meminfo");
  child_check(after - before < COMMIT_SYSTEM_MAX,
              "under strict overcommit, a first use of malloc raised Committed_AS by %lld MiB "
              "(expected under %lld MiB; the kind map alone would be 2048)", (after - before) >> 20,
              COMMIT_SYSTEM_MAX >> 20);
  child_check(vd_after - vd_before < COMMIT_FIRST_USE_MAX, "VmData grew by %lld MiB",
              (vd_after - vd_before) >> 20);
  /* The refusals of strict mode at a size this machine could map in mode 0. */
  long long limit = meminfo_bytes("CommitLimit");
  if (limit > 0 && after > 0 && limit > after) {
    size_t over = (size_t)(limit - after) + GiB;
    errno = 0;
    void *p = PINHEAP_NAME(malloc)(size_opaque(over));
    child_check(p == NULL && errno == ENOMEM, "malloc(%zu MiB) above the commit limit returned %p "
                "(errno %d)", over >> 20, p, errno);
    PINHEAP_NAME(free)(p);
  }
  heap_use_check("after the first use");
}

Test(commit, first_use_writable_data_is_small)
{
  child_run_in_mode(-1, first_use_vmdata_child, NULL);
}

Test(commit, first_use_commit_is_small_strict)
{
  child_run_in_mode(2, first_use_committed_child, NULL);
}

/* ======================================================================= */
/*  The OS refuses the owner map's pages                                    */
/* ======================================================================= */
/*
 * Fresh children, each with RLIMIT_DATA a little higher above what it uses:
 * the first malloc meets the limit at every step of its way (segment,
 * owner map leaf, kind map, thread cache) in turn.  Each refusal must be
 * NULL with ENOMEM and leave a sound heap that works once the limit is
 * lifted.
 */
static size_t rlimit_step_extra;

static void rlimit_child(void *arg)
{
  int *outcome = arg;
  struct rlimit old;
  child_check(getrlimit(RLIMIT_DATA, &old) == 0, "getrlimit: %s", strerror(errno));
  long long vd = vmdata_bytes();
  child_check(vd > 0, "cannot read VmData");
  struct rlimit tight = old;
  tight.rlim_cur = (rlim_t)vd + rlimit_step_extra;
  if (old.rlim_max != RLIM_INFINITY && tight.rlim_cur > old.rlim_max)
    tight.rlim_cur = old.rlim_max;
  child_check(setrlimit(RLIMIT_DATA, &tight) == 0, "setrlimit: %s", strerror(errno));

  errno = 0;
  void *p = PINHEAP_NAME(malloc)(100);
  int e = errno;
  void *q = p != NULL ? PINHEAP_NAME(malloc)(200000) : NULL;
  int eq = errno;
  child_check(p != NULL || e == ENOMEM, "malloc(100) under RLIMIT_DATA failed with errno %d", e);
  child_check(p == NULL || q != NULL || eq == ENOMEM,
              "malloc(200000) under RLIMIT_DATA failed with errno %d", eq);
  child_check(setrlimit(RLIMIT_DATA, &old) == 0, "setrlimit back: %s", strerror(errno));
  child_check(PINHEAP_NAME(malloc_check)() == 0, "the heap is unsound after a refusal");
  PINHEAP_NAME(free)(q);
  PINHEAP_NAME(free)(p);
  heap_use_check("after RLIMIT_DATA was lifted");
  /* outcome: 0 refused, 1 granted (written before the child exits) */
  if (outcome != NULL && write(outcome[1], p != NULL ? "1" : "0", 1) < 0)
    child_check(0, "cannot report the outcome");
}

Test(commit, owner_map_refused_cleanly)
{
  int outcome[2];
  cr_assert_eq(pipe(outcome), 0);
  unsigned refused = 0, granted = 0;
  for (size_t extra = 0; extra <= 32 * MiB && granted < 4; extra += 16 * KiB) {
    rlimit_step_extra = extra;
    child_run_in_mode(-1, rlimit_child, outcome);
    char c = 0;
    cr_assert_eq(read(outcome[0], &c, 1), 1, "the child did not report");
    if (c == '1')
      granted++;
    else
      refused++;
  }
  close(outcome[0]);
  close(outcome[1]);
  cr_assert_gt(refused, 0, "RLIMIT_DATA never refused a first malloc: the test proves nothing");
  cr_assert_gt(granted, 0, "no first malloc succeeded within 32 MiB above VmData");
}
