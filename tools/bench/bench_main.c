/*
 * bench_main.c -- pinheap-bench, the benchmark workload program.  Main
 * entry point: main().
 *
 *   pinheap-bench WORKLOAD SCALE THREADS [--expect-malloc SUBSTRING] [--glibc-fallback]
 *   pinheap-bench all SCALE THREADS [--expect-malloc SUBSTRING]
 *   pinheap-bench list
 *
 * Runs the workload and prints one JSON line on stdout:
 *   {"workload":"churn","threads":2,"scale":1,"seconds":0.81,"ops":8000000,
 *    "peak_rss_kb":5123,"ru_maxrss_kb":5123,"rss_end_kb":3012,"check":"0x...",
 *    "malloc_lib":"/lib/x86_64-linux-gnu/libjemalloc.so.2","pinheap_enabled":null}
 *
 * seconds is the wall time of the workload alone (not process start-up);
 * peak_rss_kb is the peak resident size of the process (VmHWM; see
 * bench_rss_peak_kb() for why not ru_maxrss, which is printed too as
 * ru_maxrss_kb); rss_end_kb is the resident size after the workload freed
 * everything.  malloc_lib names the object that
 * defines the malloc this process calls (dladdr), so a preload that silently
 * did not take is visible; --expect-malloc makes it an error up front, and
 * so is a pinheap shim that took but forwards to glibc (pinheap_enabled 0).
 * pinheap_enabled is pinheap_enabled() when a pinheap shim is loaded.
 *
 * "all" runs every workload in turn in one process (one line each; the
 * peak RSS is then cumulative): it is meant for smoke tests.
 */
#define _GNU_SOURCE
#include "bench.h"
#include "pinheap_config.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct workload_desc {
  const char *name;
  bench_workload_fn_t *run;
  const char *summary;
} workload_desc_t;

static const workload_desc_t workload_table[] = {
  {"churn", churn_run, "server churn: random free/alloc of 16-1024 B slots, slot arrays change threads"},
  {"prodcons", prodcons_run, "producer/consumer: THREADS pairs, every block freed by the other thread"},
  {"falseshare_active", falseshare_active_run, "active false sharing: threads allocate small objects and write them hard"},
  {"falseshare_passive", falseshare_passive_run, "passive false sharing: objects handed out by main, freed, reallocated, written"},
  {"smallobj", smallobj_run, "many small objects: binary trees and linked lists built, checked, freed"},
  {"realloc", realloc_run, "realloc growth: strings appended piecewise, vectors doubled"},
  {"large", large_run, "large blocks of 256 KiB - 64 MiB, touched every 64 KiB"},
  {"fixed", fixed_run, "fixed-size (32 B) malloc/free loop, one pair and batches of 16"},
  {"frag", frag_run, "fragmentation: small blocks thinned out, then medium blocks; reports peak RSS"},
  {"tree", tree_run, "binary trees of 32 B nodes built, checked, torn down; depth 16 at scale 1"},
  {"largechurn", largechurn_run, "8 live blocks of 256 KiB - 64 MiB replaced at random, every page written"},
  {"larson", larson_run, "Larson server: slots replaced, blocks handed to other threads, short-lived threads"},
  {"live", live_run, "live heap of small objects: SCALE x 64 MiB of 16-128 B built, churned, freed"},
  /* Last: it installs its release observer (seccomp on peers) for the rest of the process. */
  {"regcache", regcache_run, "registration cache: message buffers 4 KiB-64 MiB malloc'd, registered, written, freed"},
};
#define WORKLOAD_COUNT (sizeof(workload_table) / sizeof(workload_table[0]))

static void usage_print(FILE *out)
{
  fprintf(out,
          "usage: pinheap-bench WORKLOAD SCALE THREADS [--expect-malloc SUBSTRING] [--glibc-fallback]\n"
          "       pinheap-bench all SCALE THREADS [--expect-malloc SUBSTRING]\n"
          "       pinheap-bench list\n"
          "  WORKLOAD  one of the names printed by 'pinheap-bench list'\n"
          "  SCALE     amount of work, a number > 0 and <= 1000 (1 = full size, 0.01 = smoke test)\n"
          "  THREADS   worker threads, an integer 1..%d (prodcons: producer/consumer pairs)\n"
          "  --expect-malloc SUBSTRING  fail unless the file defining malloc contains SUBSTRING\n"
          "                             (and, for a pinheap shim, unless pinheap is enabled)\n"
          "  --glibc-fallback           glibc only: mallopt(M_TRIM_THRESHOLD, -1) and\n"
          "                             mallopt(M_MMAP_MAX, 0) first (the old leave-pinned fallback)\n"
          "Prints one JSON line per workload run.\n",
          BENCH_THREADS_MAX);
}

BENCH_NORETURN BENCH_PRINTF(1, 2) static void usage_fail(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fputs("pinheap-bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs("\n", stderr);
  va_end(ap);
  usage_print(stderr);
  exit(BENCH_EXIT_USAGE);
}

static const workload_desc_t *workload_find(const char *name)
{
  for (size_t i = 0; i < WORKLOAD_COUNT; i++)
    if (strcmp(workload_table[i].name, name) == 0)
      return &workload_table[i];
  return NULL;
}

static double scale_parse(const char *s)
{
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || errno != 0 || !isfinite(v))
    usage_fail("SCALE '%s' is not a number; expected a number > 0 and <= 1000, e.g. 1 or 0.05", s);
  if (v <= 0 || v > 1000)
    usage_fail("SCALE %s is out of range; expected a number > 0 and <= 1000", s);
  return v;
}

static int threads_parse(const char *s)
{
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0)
    usage_fail("THREADS '%s' is not an integer; expected 1..%d", s, BENCH_THREADS_MAX);
  if (v < 1 || v > BENCH_THREADS_MAX)
    usage_fail("THREADS %s is out of range; expected 1..%d", s, BENCH_THREADS_MAX);
  return (int)v;
}

/* ---- which malloc is this? ------------------------------------------------ */

typedef struct malloc_origin {
  char lib[4096];         /* file defining the malloc this process calls */
  int pinheap_enabled;    /* -1: no pinheap_enabled() in the process */
  int glibc_fallback;     /* --glibc-fallback took: mallopt(M_TRIM_THRESHOLD, -1), M_MMAP_MAX 0 */
} malloc_origin_t;

static void malloc_origin_get(malloc_origin_t *origin_p)
{
  Dl_info info;
  void *fn = dlsym(RTLD_DEFAULT, "malloc");
  snprintf(origin_p->lib, sizeof(origin_p->lib), "?");
  if (fn != NULL && dladdr(fn, &info) != 0 && info.dli_fname != NULL)
    snprintf(origin_p->lib, sizeof(origin_p->lib), "%s", info.dli_fname);
  origin_p->pinheap_enabled = -1;
  void *enabled_fn = dlsym(RTLD_DEFAULT, PINHEAP_PREFIX_STRING "enabled");
  if (enabled_fn != NULL) {
    int (*enabled)(void);
    memcpy(&enabled, &enabled_fn, sizeof(enabled));
    origin_p->pinheap_enabled = enabled();
  }
}

/* ---- output -------------------------------------------------------------- */

static void json_string_print(const char *s)
{
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static double clock_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void workload_run(const workload_desc_t *w, const bench_args_t *args,
                         const malloc_origin_t *origin)
{
  bench_result_t result;
  memset(&result, 0, sizeof(result));
  bench_workload_set(w->name);
  double t0 = clock_now();
  w->run(args, &result);
  double seconds = clock_now() - t0;

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  uint64_t rss_end = bench_rss_now_kb();
  uint64_t rss_peak = bench_rss_peak_kb();

  printf("{\"workload\":\"%s\",\"threads\":%d,\"scale\":%g,\"seconds\":%.6f,\"ops\":%llu,"
         "\"peak_rss_kb\":%llu,\"ru_maxrss_kb\":%ld,\"rss_end_kb\":%llu,\"check\":\"0x%016llx\","
         "\"malloc_lib\":",
         w->name, args->threads, args->scale, seconds, (unsigned long long)result.ops,
         (unsigned long long)(rss_peak ? rss_peak : (uint64_t)ru.ru_maxrss), ru.ru_maxrss,
         (unsigned long long)rss_end, (unsigned long long)result.check);
  json_string_print(origin->lib);
  if (origin->pinheap_enabled < 0)
    printf(",\"pinheap_enabled\":null");
  else
    printf(",\"pinheap_enabled\":%d", origin->pinheap_enabled);
  printf(",\"glibc_fallback\":%s", origin->glibc_fallback ? "true" : "false");
  if (result.extra[0] != '\0')
    printf(",\"extra\":{%s}", result.extra);
  printf("}\n");
  fflush(stdout);
}

int main(int argc, char **argv)
{
  const char *positional[3];
  int npositional = 0;
  const char *expect = NULL;
  int glibc_fallback = 0;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage_print(stdout);
      return 0;
    } else if (strcmp(argv[i], "--glibc-fallback") == 0) {
      glibc_fallback = 1;
    } else if (strcmp(argv[i], "--expect-malloc") == 0) {
      if (i + 1 >= argc)
        usage_fail("--expect-malloc needs a SUBSTRING argument");
      expect = argv[++i];
    } else if (argv[i][0] == '-' && argv[i][1] == '-') {
      usage_fail("unknown option '%s'", argv[i]);
    } else if (npositional < 3) {
      positional[npositional++] = argv[i];
    } else {
      usage_fail("unexpected extra argument '%s'", argv[i]);
    }
  }

  if (npositional == 1 && strcmp(positional[0], "list") == 0) {
    for (size_t i = 0; i < WORKLOAD_COUNT; i++)
      printf("%-20s %s\n", workload_table[i].name, workload_table[i].summary);
    return 0;
  }
  if (npositional == 0)
    usage_fail("missing WORKLOAD, SCALE and THREADS");
  const workload_desc_t *w = NULL;
  if (strcmp(positional[0], "all") != 0) {
    w = workload_find(positional[0]);
    if (w == NULL)
      usage_fail("unknown workload '%s'; expected 'all' or one of the names 'pinheap-bench list' "
                 "prints", positional[0]);
  }
  if (npositional < 3)
    usage_fail("missing %s after WORKLOAD '%s'", npositional == 1 ? "SCALE and THREADS" : "THREADS",
               positional[0]);

  bench_args_t args;
  args.scale = scale_parse(positional[1]);
  args.threads = threads_parse(positional[2]);

  malloc_origin_t origin;
  malloc_origin_get(&origin);
  if (expect != NULL && strstr(origin.lib, expect) == NULL) {
    fprintf(stderr,
            "pinheap-bench: malloc resolves to '%s', expected a file matching '%s' "
            "(did LD_PRELOAD fail to load the allocator?)\n",
            origin.lib, expect);
    return BENCH_EXIT_VERIFY;
  }
  if (expect != NULL && origin.pinheap_enabled == 0) {
    /* The shim took, but its decision sends every call on to glibc: the
     * numbers would be glibc's under pinheap's name. */
    fprintf(stderr,
            "pinheap-bench: malloc resolves to '%s' as expected, but %senabled() is 0: pinheap "
            "forwards every call to glibc (see the shim's decision: %sdecision_text())\n",
            origin.lib, PINHEAP_PREFIX_STRING, PINHEAP_PREFIX_STRING);
    return BENCH_EXIT_VERIFY;
  }

  origin.glibc_fallback = 0;
  if (glibc_fallback) {
    /* The old leave-pinned fallback: glibc never trims its heap and never
     * maps a block of its own, so no memory ever goes back to the OS. */
    if (strstr(origin.lib, "libc.so") == NULL) {
      fprintf(stderr, "pinheap-bench: --glibc-fallback needs glibc's malloc, but malloc "
                      "resolves to '%s'\n", origin.lib);
      return BENCH_EXIT_USAGE;
    }
    if (mallopt(M_TRIM_THRESHOLD, -1) != 1 || mallopt(M_MMAP_MAX, 0) != 1) {
      fprintf(stderr, "pinheap-bench: --glibc-fallback: mallopt(M_TRIM_THRESHOLD, -1) or "
                      "mallopt(M_MMAP_MAX, 0) failed\n");
      return BENCH_EXIT_VERIFY;
    }
    origin.glibc_fallback = 1;
  }

  for (size_t i = 0; i < WORKLOAD_COUNT; i++) {
    const workload_desc_t *cur = w ? w : &workload_table[i];
    args.workload = cur->name;
    workload_run(cur, &args, &origin);
    if (w)
      break;
  }
  return 0;
}
