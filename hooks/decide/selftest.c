/*
 * selftest.c -- pinheap_open(): the start-up self-test and the support
 * level, the final leave-pinned check, and the honest account of why a
 * level is missing.  Main entry point: PINHEAP_NAME(open).
 *
 * Each kind of release is made for real, through the functions this process
 * calls (install_resolved(): pinheap's where installation put them there,
 * by interposition or by patched relocations, else what the process
 * resolves), and counted by a listener: FREE and CHUNK when a 4 MiB
 * malloc/realloc/free and 1 MiB memalign and posix_memalign reach pinheap's
 * allocator and fire the listener, MUNMAP when munmap of a fresh page does.
 * When one does not, the text says why, from what installation found
 * (install_text()): loaded late, patching switched off, a memory checker.
 * With the memory events off (PINHEAP_EVENTS=0) nothing is tested: the
 * level is 0 and the text names the variable.
 */
#include "hooks/decide/dispatch.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hooks/decide/decision.h"
#include "allocator/heap/chunk.h"
#include "config/params.h"
#include "pinheap.h"
#include "allocator/base/startup.h"     /* PH_COLD_BSS */

extern int __libc_mallopt(int, int);

/* The range watched for.  Releases on other threads call the listener
 * while pinheap_open() changes the range: every field is atomic. */
typedef struct selftest_watch_s {
  const char *want;     /* the range a release must cover */
  size_t want_len;
  int hits;
} selftest_watch_t;

/* Everything below is written by pinheap_open() under selftest_lock.  The
 * text is composed in the buffer not published and then published, so a
 * reader of the previous text never sees it half rewritten by the next
 * pinheap_open() (only by the one after that).
 *
 * Fork: the lock is held for milliseconds, across the release listeners
 * (the application's too, which may fork), so it is not taken before fork
 * (fork would wait for the self-test, and a listener forking inside it
 * would wait for itself).  A child forked while another thread ran the
 * self-test frees it instead (selftest_fork_child): nothing half done is
 * visible, the run published nothing, and the child's own
 * pinheap_open() runs it again.  The watch is static, not on the stack, so
 * that run finds the listener the lost one left registered (EEXIST) and
 * takes it away. */
static ph_lock_t selftest_lock;
PH_COLD_BSS static selftest_watch_t selftest_watch;
static int selftest_done;
static int selftest_level;
static int selftest_fallback;     /* glibc told never to give memory back */
PH_COLD_BSS static char selftest_texts[2][1536];
static int selftest_shown;        /* index of the published text */
static char *selftest_text;       /* the one being composed (under the lock) */

static void selftest_listener(void *addr, size_t len, int from_alloc, void *ctx)
{
  selftest_watch_t *w = ctx;
  const char *want = __atomic_load_n(&w->want, __ATOMIC_RELAXED);
  size_t want_len = __atomic_load_n(&w->want_len, __ATOMIC_RELAXED);
  (void)from_alloc;
  if (want != NULL && (char *)addr <= want && (char *)addr + len >= want + want_len)
    __atomic_fetch_add(&w->hits, 1, __ATOMIC_RELAXED);
}

static void watch_set(selftest_watch_t *w, const void *ptr, size_t len)
{
  __atomic_store_n(&w->want, NULL, __ATOMIC_RELAXED);
  __atomic_store_n(&w->want_len, len, __ATOMIC_RELAXED);
  __atomic_store_n(&w->hits, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&w->want, (const char *)ptr, __ATOMIC_SEQ_CST);
}

static int watch_hits(selftest_watch_t *w)
{
  return __atomic_load_n(&w->hits, __ATOMIC_SEQ_CST);
}

PH_STARTUP static void text_add(const char *s)
{
  ph_str_add(selftest_text, sizeof(selftest_texts[0]), s);
}

static const char *object_of(void *addr)
{
  Dl_info info;
  if (addr != NULL && dladdr(addr, &info) != 0 && info.dli_fname != NULL && info.dli_fname[0])
    return info.dli_fname;
  return "the main program";
}

static int leave_pinned_requested(void)
{
  const params_t *p = params_get();
  return p->v[PARAM_LEAVE_PINNED].value == PARAM_TRI_YES ||
         p->v[PARAM_LEAVE_PINNED_PIPELINE].value == PARAM_TRI_YES;
}

/* Does a release covering want..want+len fire while fn runs? */
#define WATCH(w, ptr, len, call) (watch_set((w), (ptr), (len)), (call), watch_hits(w) > 0)

/* mallopt and the dynamic threshold change it on other threads. */
static size_t at_least_threshold(size_t n)
{
  size_t t = __atomic_load_n(&mparams.mmap_threshold, __ATOMIC_RELAXED);
  return n < t ? t : n;
}

static int selftest_allocator(selftest_watch_t *w, char *why, size_t whylen)
{
  void *(*p_malloc)(size_t) = (void *(*)(size_t))install_resolved("malloc");
  void (*p_free)(void *) = (void (*)(void *))install_resolved("free");
  void *(*p_realloc)(void *, size_t) = (void *(*)(void *, size_t))install_resolved("realloc");
  void *(*p_memalign)(size_t, size_t) = (void *(*)(size_t, size_t))install_resolved("memalign");
  int (*p_posix_memalign)(void **, size_t, size_t) =
      (int (*)(void **, size_t, size_t))install_resolved("posix_memalign");
  size_t big = (size_t)4 << 20, mid = (size_t)1 << 20;
  void *p, *q;

  if (!install_malloc_served()) {
    snprintf(why, whylen,
             "pinheap is enabled but this process's malloc is %s's, not pinheap's in %s: %s",
             object_of((void *)p_malloc), object_of(replace_self.self_malloc),
             PINHEAP_NAME(install_text)());
    return 0;
  }
  /* Sizes at or above the mmap threshold, so each free really releases.
   * Freeing a mapped block raises the (dynamic) threshold, so it is read
   * again before every allocation. */
#define AT_LEAST_THRESHOLD(n) at_least_threshold(n)
  big = AT_LEAST_THRESHOLD(big);

  p = p_malloc(big);
  if (p == NULL || owner_map_get(p) == 0)
    goto fail_malloc;
  q = p_realloc(p, big + 32);
  if (q == NULL || owner_map_get(q) == 0)
    goto fail_malloc;
  if (!WATCH(w, q, big + 32, p_free(q)))
    goto fail_free;
  mid = AT_LEAST_THRESHOLD(mid);
  p = p_memalign(64, mid);
  if (p == NULL || owner_map_get(p) == 0)
    goto fail_malloc;
  if (!WATCH(w, p, mid, p_free(p)))
    goto fail_free;
  p = NULL;
  mid = AT_LEAST_THRESHOLD(mid);
  if (p_posix_memalign(&p, 64, mid) != 0 || owner_map_get(p) == 0)
    goto fail_malloc;
  if (!WATCH(w, p, mid, p_free(p)))
    goto fail_free;
  return 1;

fail_malloc:
  snprintf(why, whylen, "the malloc this process calls did not return pinheap's memory. ");
  return 0;
fail_free:
  snprintf(why, whylen, "free() of a released block did not reach the release listeners. ");
  return 0;
}

/* pinheap disabled, glibc's malloc in use, its release functions code
 * patched: glibc's free of a block above its mmap threshold and its
 * malloc_trim must fire the listener, for real. */
static int selftest_glibc(selftest_watch_t *w, char *why, size_t whylen)
{
  void *(*p_malloc)(size_t) = (void *(*)(size_t))install_resolved("malloc");
  void (*p_free)(void *) = (void (*)(void *))install_resolved("free");
  int (*p_trim)(size_t) = (int (*)(size_t))install_resolved("malloc_trim");
  size_t page = os_page_size();
  /* above glibc's largest dynamic mmap threshold (32 MiB): always mapped,
   * and freeing it does not move the threshold */
  size_t big = (size_t)40 << 20, piece = (size_t)64 << 10;
  enum { PIECES = 16 };
  void *blocks[PIECES];

  if (p_malloc == NULL || p_free == NULL || p_trim == NULL) {
    snprintf(why, whylen, "glibc's malloc, free or malloc_trim not found. ");
    return 0;
  }
  void *p = p_malloc(big);
  if (p == NULL || !WATCH(w, p, big, p_free(p))) {
    snprintf(why, whylen, "glibc's free of a %zu MiB block did not reach the release listeners "
             "although libc's munmap is code-patched. ", big >> 20);
    return 0;
  }
  /* pieces of the heap below every mmap threshold; every other one freed,
   * so each freed piece lies between two in use: free cannot give it back,
   * only malloc_trim can (it advises away the pages inside free chunks) */
  for (int i = 0; i < PIECES; i++)
    blocks[i] = p_malloc(piece);
  int ok = 1;
  for (int i = 0; i < PIECES; i++)
    ok &= blocks[i] != NULL;
  char *inside = NULL;
  for (int i = 2; ok && i < PIECES - 1; i += 2) {
    p_free(blocks[i]);
    blocks[i] = NULL;
  }
  if (ok)
    inside = (char *)(((uintptr_t)blocks[PIECES / 2 - 1] + piece + page - 1) & ~(uintptr_t)(page - 1)) + page;
  ok = ok && WATCH(w, inside, page, p_trim(0));
  for (int i = 0; i < PIECES; i++)
    p_free(blocks[i]);
  if (!ok) {
    snprintf(why, whylen, "glibc's malloc_trim after freeing heap blocks did not reach the release "
             "listeners although libc's madvise is code-patched. ");
    return 0;
  }
  return 1;
}

/* ---- what the process decided, said at level info ------------------------
 * With PINHEAP_LOG_LEVEL=info (or debug), every process says after its
 * start-up, in three lines, what it decided, how its memory calls were
 * installed and, after running the self-test now, which releases it sees:
 * so `PINHEAP_LOG_LEVEL=info mpirun ...` shows every rank's.  The rank is
 * the launcher's (Open MPI, PMIx, MPICH/PMI, Slurm) when there is one. */
static const char *const selftest_rank_vars[] = {
  "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID",
};

PH_STARTUP void selftest_say(void)
{
  char who[64] = "";

  if (ph_log_level() < PH_LOG_INFO)
    return;
  for (size_t i = 0; i < sizeof(selftest_rank_vars) / sizeof(selftest_rank_vars[0]); i++) {
    const char *r = startup_env(selftest_rank_vars[i]);
    if (r != NULL && r[0] != '\0') {
      snprintf(who, sizeof(who), "rank %.16s, ", r);
      break;
    }
  }
  int pid = (int)getpid();
  ph_log(PH_LOG_INFO, "%spid %d: decision: %s", who, pid, PINHEAP_NAME(decision_text)());
  ph_log(PH_LOG_INFO, "%spid %d: installation: %s", who, pid, PINHEAP_NAME(install_text)());
  PINHEAP_NAME(open)();
  int level = PINHEAP_NAME(support_level)();
  char flags[32] = "";
  snprintf(flags, sizeof(flags), "%s%s%s%s", (level & PINHEAP_SUPPORT_FREE) ? "|FREE" : "",
           (level & PINHEAP_SUPPORT_CHUNK) ? "|CHUNK" : "",
           (level & PINHEAP_SUPPORT_MUNMAP) ? "|MUNMAP" : "", level == 0 ? "|none" : "");
  ph_log(PH_LOG_INFO, "%spid %d: support level: %s (%d): %s", who, pid, flags + 1, level,
         PINHEAP_NAME(support_text)());
}

int PINHEAP_NAME(open)(void)
{
  selftest_watch_t *w = &selftest_watch;
  char why[768];
  int level = 0;
  size_t page = os_page_size();

  const copies_api_t *serving = copies_serving();  /* another copy serves: its self-test */
  if (ph_unlikely(serving != NULL))
    return serving->open();
  dispatch_decide();
  forks_init();                /* done by the constructor already, unless it has not run */
  feeds_attach();              /* UCX's libucm, Open MPI may have come with a component since */
  ph_lock(&selftest_lock);
  selftest_text = selftest_texts[!__atomic_load_n(&selftest_shown, __ATOMIC_RELAXED)];
  selftest_text[0] = '\0';
  const param_value_t *events = &params_get()->v[PARAM_EVENTS];
  if (events->value == 0) {
    /* nothing to measure, and no fallback: pinheap was told to stay out of
     * the memory calls (a registration cache must rely on other hooks) */
    snprintf(why, sizeof(why), "%s=0: the memory events are off, so pinheap intercepts no memory "
             "call and reports no release: no support (FREE, CHUNK and MUNMAP missing). ",
             events->from);
    text_add(why);
    goto publish;
  }
  PINHEAP_NAME(register_release)(selftest_listener, w);

  /* MUNMAP: the process's munmap must reach pinheap and report. */
  void *p_munmap = install_resolved("munmap");
  pinheap_install_info_t ii = { 0 };
  int installed = 0;
  for (unsigned i = 0; PINHEAP_NAME(install_info)(i, &ii) == 0; i++)
    if (strcmp(ii.symbol, "munmap") == 0)
      installed = ii.method != PINHEAP_INSTALL_NONE;
  /* a build without the installer's table: interposition only */
  if (ii.symbol == NULL)
    installed = p_munmap == replace_self.self_munmap;
  if (!installed) {
    snprintf(why, sizeof(why), "munmap is not intercepted: this process calls %s's. %s",
             object_of(p_munmap), PINHEAP_NAME(install_text)());
    text_add(why);
  } else {
    long r = ph_syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
    if (r != -1 && WATCH(w, (void *)r, page, ((int (*)(void *, size_t))p_munmap)((void *)r, page)))
      level |= PINHEAP_SUPPORT_MUNMAP;
    else
      text_add("munmap of a test page did not reach the release listeners. ");
  }

  /* FREE and CHUNK: pinheap's allocator must serve this process. */
  const char *tool = install_tool();
  if (__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) != DISPATCH_ENABLED && tool != NULL) {
    text_add("pinheap stands aside: ");
    text_add(tool);
    text_add("'s malloc is in use, and its releases are not seen: FREE and CHUNK support "
             "missing. ");
  } else if (__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) != DISPATCH_ENABLED &&
             install_glibc_releases_patched()) {
    if (selftest_glibc(w, why, sizeof(why))) {
      level |= PINHEAP_SUPPORT_FREE | PINHEAP_SUPPORT_CHUNK;
      text_add("pinheap is disabled, so glibc's malloc is in use; libc's memory functions are "
               "code-patched, so glibc's own frees and trims are seen (tested: free of a block "
               "above its mmap threshold, malloc_trim). ");
    } else {
      text_add(why);
      text_add("FREE and CHUNK support missing. ");
    }
  } else if (__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) != DISPATCH_ENABLED) {
    text_add("pinheap is disabled, so glibc's malloc is in use; glibc's frees and trims call the "
             "kernel directly and are invisible (libc's code is not patched: see the "
             "installation text): FREE and CHUNK support missing. ");
  } else if (selftest_allocator(w, why, sizeof(why))) {
    level |= PINHEAP_SUPPORT_FREE | PINHEAP_SUPPORT_CHUNK;
  } else {
    text_add(why);
    text_add("FREE and CHUNK support missing. ");
  }
  PINHEAP_NAME(unregister_release)(selftest_listener, w);

  /* The old fallback: with leave-pinned asked for and glibc in charge,
   * tell glibc never to give memory back on its own (not a memory
   * checker's malloc: glibc's settings do not govern it). */
  if (!(level & PINHEAP_SUPPORT_FREE) && leave_pinned_requested() && !selftest_fallback &&
      tool == NULL) {
    __libc_mallopt(M_TRIM_THRESHOLD, -1);
    __libc_mallopt(M_MMAP_MAX, 0);
    install_block_trim();
    selftest_fallback = 1;
  }
  if (selftest_fallback)
    text_add("Fallback in force: glibc told never to return memory (M_TRIM_THRESHOLD=-1, "
             "M_MMAP_MAX=0, malloc_trim a no-op). ");
  if (selftest_text[0] == '\0' ||
      level == (PINHEAP_SUPPORT_FREE | PINHEAP_SUPPORT_CHUNK | PINHEAP_SUPPORT_MUNMAP)) {
    /* how each call was installed is install_text's to say (the info tool
     * and the info-level start-up lines show it once, beside this) */
    text_add("every release is visible. ");
  }
  if (ucx_feed_describe(why, sizeof(why) - 1) > 0) {
    text_add(why);
    text_add(" ");
  }
publish:
  if (copies_note() != NULL && !startup_contains(selftest_text, copies_note()))
    text_add(copies_note());       /* copies of pinheap in the process (copies.c) */
  __atomic_store_n(&selftest_level, level, __ATOMIC_RELAXED);
  __atomic_store_n(&selftest_shown, (int)(selftest_text - selftest_texts[0]) / (int)sizeof(selftest_texts[0]),
                   __ATOMIC_RELEASE);
  __atomic_store_n(&selftest_done, 1, __ATOMIC_RELEASE);
  ph_unlock(&selftest_lock);
  return 0;
}
COPIES_SELF_ALIAS(open);

/* Whoever held the lock is gone, or is the forking thread, which goes on
 * and unlocks a free lock (harmless).  The interrupted run published
 * nothing: the text, level and done flag are the last complete run's. */
void selftest_fork_child(void)
{
  ph_lock_reset(&selftest_lock);
}

int PINHEAP_NAME(support_level)(void)
{
  const copies_api_t *serving = copies_serving();  /* another copy serves (copies.c) */
  if (ph_unlikely(serving != NULL))
    return serving->support_level();
  return __atomic_load_n(&selftest_done, __ATOMIC_ACQUIRE)
             ? __atomic_load_n(&selftest_level, __ATOMIC_RELAXED) : 0;
}
COPIES_SELF_ALIAS(support_level);

const char *PINHEAP_NAME(support_text)(void)
{
  const copies_api_t *serving = copies_serving();  /* another copy serves (copies.c) */
  if (ph_unlikely(serving != NULL))
    return serving->support_text();
  if (!__atomic_load_n(&selftest_done, __ATOMIC_ACQUIRE))
    return "not measured: call " PINHEAP_PREFIX_STRING "open() first";
  return selftest_texts[__atomic_load_n(&selftest_shown, __ATOMIC_ACQUIRE)];
}
COPIES_SELF_ALIAS(support_text);

PH_HOT int PINHEAP_NAME(enabled)(void)
{
  const copies_api_t *serving = copies_serving();  /* another copy serves (copies.c) */
  if (ph_unlikely(serving != NULL))
    return serving->enabled();
  dispatch_decide();
  if (__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) != DISPATCH_ENABLED)
    return 0;
  return install_malloc_served();
}
COPIES_SELF_ALIAS(enabled);

int PINHEAP_NAME(check_leave_pinned)(void)
{
  int level;

  const copies_api_t *serving = copies_serving();  /* another copy serves (copies.c) */
  if (ph_unlikely(serving != NULL))
    return serving->check_leave_pinned();
  if (!leave_pinned_requested())
    return 0;
  if (!__atomic_load_n(&selftest_done, __ATOMIC_ACQUIRE))
    PINHEAP_NAME(open)();
  level = PINHEAP_NAME(support_level)();
  if ((level & PINHEAP_SUPPORT_FREE) && (level & PINHEAP_SUPPORT_MUNMAP))
    return 0;
  const param_value_t *events = &params_get()->v[PARAM_EVENTS];
  if (events->value == 0) {
    ph_warn("mpi_leave_pinned is 1 but the memory events are off (", events->from,
            "=0): pinheap sees no release of registered memory, so a registration cache "
            "relying on it will go stale; unset it or rely on other hooks", NULL);
    return 1;
  }
  ph_warn("mpi_leave_pinned is 1 but pinheap cannot see every release of registered memory "
          "(support level:", (level & PINHEAP_SUPPORT_FREE) ? " FREE" : "",
          (level & PINHEAP_SUPPORT_CHUNK) ? " CHUNK" : "",
          (level & PINHEAP_SUPPORT_MUNMAP) ? " MUNMAP" : "", level == 0 ? " none" : "",
          "); a registration cache may go stale: ", PINHEAP_NAME(support_text)(), NULL);
  return 1;
}
COPIES_SELF_ALIAS(check_leave_pinned);
