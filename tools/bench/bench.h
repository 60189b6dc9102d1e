/*
 * bench.h -- the pieces every benchmark workload shares.
 *
 * The benchmark program pinheap-bench (main entry point: main() in
 * bench_main.c) runs one workload, named on its command line, with a scale
 * and a thread count.  Each workload lives in its own wl_<name>.c and
 * exports one function, <name>_run(), listed in bench_main.c's table.
 *
 * Workloads call the plain malloc/free/realloc of the C library, so that
 * LD_PRELOAD decides which allocator serves them, and they verify what they
 * get: every block carries marks that are checked before it is freed, and
 * every workload ends with a count or checksum test.  A broken allocator
 * therefore makes the benchmark fail loudly (exit status 2, one line on
 * stderr naming the workload, thread, block and the bad value) instead of
 * producing a fast number.
 *
 * Glossary
 *   scale    multiplier of a workload's amount of work; 1 is the full-size
 *            run (about a second on glibc, one thread, on the reference VM).
 *   ops      allocator calls made (malloc + free + realloc), summed over
 *            threads; the work is split between threads, so ops does not
 *            grow with the thread count.
 *   mark     the tag a workload writes at both ends of a block, checked
 *            before the block is freed (catches overlapping blocks and
 *            blocks that the allocator scribbled on).
 */
#ifndef PINHEAP_BENCH_H
#define PINHEAP_BENCH_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_NORETURN __attribute__((noreturn))
#define BENCH_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define BENCH_INLINE static inline __attribute__((always_inline))

/* Exit statuses of pinheap-bench. */
#define BENCH_EXIT_VERIFY 2   /* a workload found wrong memory contents */
#define BENCH_EXIT_USAGE 64   /* bad command line (EX_USAGE) */

/** What the command line asked for. */
typedef struct bench_args {
  const char *workload;   /* name from the workload table */
  double scale;           /* > 0 */
  int threads;            /* 1 .. BENCH_THREADS_MAX */
} bench_args_t;

#define BENCH_THREADS_MAX 256

/** What a workload reports back; main() adds time and memory figures. */
typedef struct bench_result {
  uint64_t ops;           /* allocator calls, all threads */
  uint64_t check;         /* workload-defined checksum of verified data */
  char extra[1024];       /* JSON members a workload adds to its line ("" = none),
                           * printed as "extra":{...} */
} bench_result_t;

/** One worker thread of bench_threads_run(). */
typedef struct bench_thread {
  int id;                 /* 0 .. nthreads-1 */
  int nthreads;
  const bench_args_t *args;
  void *shared;           /* the workload's shared state */
  uint64_t rng;           /* private random state, seeded from id */
  uint64_t ops;           /* allocator calls made by this thread */
  uint64_t check;         /* this thread's checksum */
} bench_thread_t;

typedef void bench_thread_fn_t(bench_thread_t *thread);

/** A workload: runs to completion or ends the process through bench_fail(). */
typedef void bench_workload_fn_t(const bench_args_t *args, bench_result_t *result_p);

/* ---- bench_util.c ---------------------------------------------------------- */

/** Writes "pinheap-bench: <workload>: <message>" to stderr and exits with
 *  BENCH_EXIT_VERIFY.  Never returns. */
BENCH_NORETURN BENCH_PRINTF(1, 2) void bench_fail(const char *fmt, ...);
/** Names the running workload in bench_fail() messages. */
void bench_workload_set(const char *name);

/** malloc(size) that ends the process with a clear message on NULL. */
void *bench_malloc(size_t size, const char *what);
/** realloc(ptr, size) that ends the process with a clear message on NULL. */
void *bench_realloc(void *ptr, size_t size, const char *what);

/** base * scale, rounded, at least 1. */
uint64_t bench_scaled(uint64_t base, double scale);
/** share of total for thread id of nthreads (the shares add up to total). */
uint64_t bench_share(uint64_t total, int id, int nthreads);

/** Runs fn in args->threads threads (each gets its own bench_thread_t,
 *  with shared attached), waits for all, and sums their ops and check. */
void bench_threads_run(const bench_args_t *args, bench_thread_fn_t *fn, void *shared,
                       bench_result_t *result_p);
/** From now on bench_threads_run() gives its threads stacks of its own
 *  (1 MiB each, mmap'd and munmap'd by the runner): the regcache workload's
 *  seccomp observer needs it, see bench_util.c. */
void bench_threads_own_stacks(int on);

/** Writes tag into the first and last 8 bytes of [p, p+size) (size >= 16)
 *  and checks that p is 16-byte aligned. */
void bench_mark(void *p, size_t size, uint64_t tag, const char *what);
/** Checks the marks written by bench_mark(); bench_fail() if wrong. */
void bench_mark_check(const void *p, size_t size, uint64_t tag, const char *what);

/** Peak resident set size of this process image, in KiB: VmHWM from
 *  /proc/self/status, read without allocating; 0 if unknown.  (getrusage's
 *  ru_maxrss is not used for this: Linux carries the parent's peak over
 *  fork and exec, so a small workload started by a big runner would report
 *  the runner's size.) */
uint64_t bench_rss_peak_kb(void);
/** Resident set size now, in KiB, read from /proc/self/statm without
 *  allocating; 0 if unknown. */
uint64_t bench_rss_now_kb(void);

/* ---- release_spy.c: what the regcache workload learns of releases ------------ */

/** A range that left the process or lost its physical pages. */
typedef struct bench_release {
  uintptr_t address;
  size_t length;
} bench_release_t;

/** Starts observing releases (once per process; later calls return the
 *  same): pinheap's release listener when a pinheap shim is loaded, else a
 *  seccomp trap on munmap/mremap/brk/madvise/mmap MAP_FIXED.  @return the
 *  observer's name, "pinheap_listener" or "seccomp". */
const char *release_spy_start(void);
/** Moves up to max pending releases into out; *overflowed_p is set when
 *  some were lost since the last drain (the ring was full).  @return count. */
size_t release_spy_drain(bench_release_t *out, size_t max, int *overflowed_p);
/** Releases noted since the start, and their bytes. */
void release_spy_totals(uint64_t *events_p, uint64_t *bytes_p);

/* ---- random numbers (xorshift64*, one state per thread) --------------------- */

BENCH_INLINE uint64_t rng_next(uint64_t *state_p)
{
  uint64_t x = *state_p;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state_p = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/** Uniform in [lo, hi] (inclusive; hi >= lo). */
BENCH_INLINE uint64_t rng_range(uint64_t *state_p, uint64_t lo, uint64_t hi)
{
  return lo + rng_next(state_p) % (hi - lo + 1);
}

BENCH_INLINE uint64_t rng_seed(uint64_t a, uint64_t b)
{
  uint64_t s = (a + 1) * 0x9E3779B97F4A7C15ULL ^ (b + 7) * 0xBF58476D1CE4E5B9ULL;
  return s ? s : 0x1234567ULL;
}

/* ---- the workloads (one file each) --------------------------------------- */

bench_workload_fn_t churn_run;            /* wl_churn.c */
bench_workload_fn_t prodcons_run;         /* wl_prodcons.c */
bench_workload_fn_t falseshare_active_run;  /* wl_falseshare.c */
bench_workload_fn_t falseshare_passive_run; /* wl_falseshare.c */
bench_workload_fn_t smallobj_run;         /* wl_smallobj.c */
bench_workload_fn_t realloc_run;          /* wl_realloc.c */
bench_workload_fn_t large_run;            /* wl_large.c */
bench_workload_fn_t fixed_run;            /* wl_fixed.c */
bench_workload_fn_t frag_run;             /* wl_frag.c */
bench_workload_fn_t tree_run;             /* wl_tree.c */
bench_workload_fn_t largechurn_run;       /* wl_largechurn.c */
bench_workload_fn_t larson_run;           /* wl_larson.c */
bench_workload_fn_t live_run;             /* wl_live.c */
bench_workload_fn_t regcache_run;         /* wl_regcache.c */

#endif /* PINHEAP_BENCH_H */
