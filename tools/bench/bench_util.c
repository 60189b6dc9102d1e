/*
 * bench_util.c -- helpers shared by the benchmark workloads: failure
 * reporting, checked allocation, block marks, the thread runner
 * (bench_threads_run(), the main entry point of this file) and the RSS
 * reading.  See bench.h.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *bench_workload_name = "?";

void bench_workload_set(const char *name)
{
  bench_workload_name = name;
}

void bench_fail(const char *fmt, ...)
{
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  fprintf(stderr, "pinheap-bench: %s: %s\n", bench_workload_name, line);
  fflush(stderr);
  _exit(BENCH_EXIT_VERIFY);
}

void *bench_malloc(size_t size, const char *what)
{
  void *p = malloc(size);
  if (p == NULL)
    bench_fail("%s: malloc(%zu) returned NULL (errno %d: %s)", what, size, errno, strerror(errno));
  return p;
}

void *bench_realloc(void *ptr, size_t size, const char *what)
{
  void *p = realloc(ptr, size);
  if (p == NULL)
    bench_fail("%s: realloc(%p, %zu) returned NULL (errno %d: %s)", what, ptr, size, errno,
               strerror(errno));
  return p;
}

uint64_t bench_scaled(uint64_t base, double scale)
{
  double v = (double)base * scale + 0.5;
  if (v < 1.0)
    return 1;
  if (v > 1e18)
    return (uint64_t)1e18;
  return (uint64_t)v;
}

uint64_t bench_share(uint64_t total, int id, int nthreads)
{
  uint64_t n = (uint64_t)nthreads;
  uint64_t share = total / n;
  if ((uint64_t)id < total % n)
    share++;
  return share;
}

/* ---- marks --------------------------------------------------------------- */

void bench_mark(void *p, size_t size, uint64_t tag, const char *what)
{
  if (((uintptr_t)p & 15) != 0)
    bench_fail("%s: malloc(%zu) returned %p, which is not 16-byte aligned", what, size, p);
  memcpy(p, &tag, sizeof(tag));
  uint64_t tail = ~tag;
  memcpy((char *)p + size - sizeof(tail), &tail, sizeof(tail));
}

void bench_mark_check(const void *p, size_t size, uint64_t tag, const char *what)
{
  uint64_t head, tail;
  memcpy(&head, p, sizeof(head));
  memcpy(&tail, (const char *)p + size - sizeof(tail), sizeof(tail));
  if (head != tag)
    bench_fail("%s: block %p (%zu bytes): first word is 0x%016llx, expected 0x%016llx "
               "(block overwritten or handed out twice)",
               what, p, size, (unsigned long long)head, (unsigned long long)tag);
  if (tail != ~tag)
    bench_fail("%s: block %p (%zu bytes): last word is 0x%016llx, expected 0x%016llx "
               "(block overwritten or handed out twice)",
               what, p, size, (unsigned long long)tail, (unsigned long long)~tag);
}

/* ---- threads ----------------------------------------------------------- */

/* A worker's record and its function; one cache line apart from the next
 * worker's so the runner itself adds no false sharing. */
typedef struct thread_slot {
  _Alignas(64) bench_thread_t thread;
  bench_thread_fn_t *fn;
} thread_slot_t;

static thread_slot_t thread_slots[BENCH_THREADS_MAX];
static int threads_own_stacks;

#define BENCH_OWN_STACK_SIZE ((size_t)1 << 20)

void bench_threads_own_stacks(int on)
{
  threads_own_stacks = on;
}

static void *thread_slot_main(void *arg)
{
  thread_slot_t *slot = arg;
  slot->fn(&slot->thread);
  return NULL;
}

void bench_threads_run(const bench_args_t *args, bench_thread_fn_t *fn, void *shared,
                       bench_result_t *result_p)
{
  pthread_t tids[BENCH_THREADS_MAX];
  int n = args->threads;
  uint64_t name_hash = 1469598103934665603ULL;   /* FNV-1a: same seeds every run */
  for (const char *c = args->workload; *c; c++)
    name_hash = (name_hash ^ (unsigned char)*c) * 1099511628211ULL;

  for (int i = 0; i < n; i++) {
    thread_slot_t *slot = &thread_slots[i];
    memset(slot, 0, sizeof(*slot));
    slot->fn = fn;
    slot->thread.id = i;
    slot->thread.nthreads = n;
    slot->thread.args = args;
    slot->thread.shared = shared;
    slot->thread.rng = rng_seed((uint64_t)i, name_hash);
  }
  void *stacks[BENCH_THREADS_MAX];
  for (int i = 0; i < n; i++) {
    pthread_attr_t attr, *attr_p = NULL;
    if (threads_own_stacks) {
      /* Our own stacks: glibc leaves them alone when a thread exits (it
       * madvises its own with every signal blocked, which a seccomp trap
       * cannot survive); munmap'd here after the join. */
      stacks[i] = mmap(NULL, BENCH_OWN_STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
      if (stacks[i] == MAP_FAILED)
        bench_fail("mmap of a %zu-byte stack for thread %d failed: %s", BENCH_OWN_STACK_SIZE, i,
                   strerror(errno));
      pthread_attr_init(&attr);
      int rc = pthread_attr_setstack(&attr, stacks[i], BENCH_OWN_STACK_SIZE);
      if (rc != 0)
        bench_fail("pthread_attr_setstack(%p, %zu) failed: %s", stacks[i], BENCH_OWN_STACK_SIZE,
                   strerror(rc));
      attr_p = &attr;
    }
    int rc = pthread_create(&tids[i], attr_p, thread_slot_main, &thread_slots[i]);
    if (rc != 0)
      bench_fail("pthread_create for thread %d of %d failed: %s", i, n, strerror(rc));
    if (attr_p != NULL)
      pthread_attr_destroy(attr_p);
  }
  for (int i = 0; i < n; i++) {
    int rc = pthread_join(tids[i], NULL);
    if (rc != 0)
      bench_fail("pthread_join for thread %d failed: %s", i, strerror(rc));
    if (threads_own_stacks)
      munmap(stacks[i], BENCH_OWN_STACK_SIZE);
  }
  result_p->ops = 0;
  result_p->check = 0;
  for (int i = 0; i < n; i++) {
    result_p->ops += thread_slots[i].thread.ops;
    result_p->check += thread_slots[i].thread.check;
  }
}

/* ---- memory figures ------------------------------------------------------ */

uint64_t bench_rss_peak_kb(void)
{
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  size_t len = 0;
  ssize_t n;
  while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
    len += (size_t)n;
  close(fd);
  buf[len] = '\0';
  const char *line = strstr(buf, "\nVmHWM:");
  unsigned long long kb = 0;
  if (line == NULL || sscanf(line + 7, " %llu", &kb) != 1)
    return 0;
  return kb;
}

uint64_t bench_rss_now_kb(void)
{
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  unsigned long long size_pages = 0, resident_pages = 0;
  if (sscanf(buf, "%llu %llu", &size_pages, &resident_pages) != 2)
    return 0;
  return resident_pages * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}
