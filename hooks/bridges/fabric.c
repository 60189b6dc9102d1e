/*
 * fabric.c -- pinheap's memory events as libfabric's memory monitor: at the
 * program's request, pinheap imports a monitor of its own into libfabric's
 * MR cache ("mr_cache", fi_import_fid), so that every release pinheap sees
 * (its allocator's and every intercepted call) that touches a registered
 * region is told to libfabric's caches (notify) before the memory goes.
 * Main entry points: PINHEAP_NAME(fabric_monitor_import)() (the program's
 * call) and fabric_feed_attach() (after installation, after each dlopen the
 * relocation patcher wraps, and from the self-test: hands over what had to
 * wait, see below; it imports nothing by itself).
 *
 * libfabric is found at run time (no build dependency): the loaded object
 * that defines fi_open (read from the symbol tables, so one opened
 * RTLD_LOCAL counts too), opened again with RTLD_NOLOAD (that reference
 * keeps it loaded while it holds the monitor: libfabric cannot give an
 * imported monitor back), or the program itself (libfabric linked
 * statically).  Used: fi_version and fi_open; the rest is the monitor's
 * ABI, declared below.
 *
 * Why only on request.  libfabric takes one imported monitor per process and
 * only before its first MR cache exists; a second import fails with EBUSY
 * (util_mem_monitor.c: "imported monitor already exists", and "cannot
 * replace active monitor" once a cache runs on its own monitor).  Open MPI
 * imports its own at MPI_Init (common_ofi.c), and it hears pinheap's
 * releases through ompi.c: an import of pinheap's made first would make
 * Open MPI's fail.  So the runtime that embeds pinheap decides, and calls
 * the import before it opens its first fi_domain.
 *
 * What libfabric's caches hold.  libfabric calls the monitor's subscribe
 * for each region it caches and unsubscribe when it drops one; pinheap
 * keeps their count and the hull of their ranges, and tells libfabric only
 * releases that meet the hull (none while nothing is cached): most releases
 * cost two loads, and libfabric's locks are taken only when they matter.
 * It also keeps notify from running before libfabric is initialised: in
 * 1.17 fi_open does not initialise libfabric, whose import monitor's list
 * of caches is set up by the first fi_getinfo (a notify before that
 * crashes), and no cache subscribes before.  FI_MR_CACHE_MONITOR set in
 * the environment overrides an imported monitor at that initialisation:
 * then pinheap does not import.
 *
 * The lock.  libfabric's notify takes its monitor lock (mm_lock, a plain
 * pthread mutex: 1.17's code, and its later import_mem_monitor.c), and
 * libfabric holds that lock while it calls malloc (ofi_mr_cache_search
 * inserting a tree node: ofi_rbmap_insert) and the monitor's subscribe,
 * unsubscribe and valid.  A malloc may release memory (pinheap's
 * consolidates freed chunks, and trims an over-sized mapping to align a
 * segment; glibc's unmaps the slack of a new arena's heap): a notify from
 * that thread would wait for itself.  So the first subscribe
 * (which libfabric makes under that lock) finds the lock: the pthread
 * mutexes in libfabric's writable data owned by the calling thread.  From
 * then on, a release on a thread that holds one of them is not told at once
 * but kept (the hull of such ranges); the monitor's valid() says "no" for
 * a cached region that meets it, so libfabric never hands out a stale
 * registration, and the next release on a thread that holds no such lock,
 * or the next attach, tells libfabric (a late notify only drops regions
 * again that were registered meanwhile in that range: harmless).  A release
 * made inside pinheap's own notify is kept the same way.  Never allocates
 * on these paths, takes no lock of pinheap's while libfabric runs.
 */
#include "hooks/decide/dispatch.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "allocator/heap/chunk.h"     /* ph_lock */
#include "config/params.h"
#include "pinheap.h"
#include "hooks/intercept/reloc.h"
#include "allocator/base/startup.h"

/* ---- libfabric's ABI: <rdma/fabric.h> and <rdma/fi_ext.h> of 1.13 to 1.17
 * (struct fid, fi_ops, fid_mem_monitor, fi_ops_mem_monitor,
 * fi_ops_mem_notify); its FI_E* codes are the errno values. ------------- */
#define FABRIC_VERSION(major, minor) (((uint32_t)(major) << 16) | (uint32_t)(minor))
/* fi_version() below this: no monitor import (1.13 has it, with deadlock
 * bugs that Open MPI avoids by asking for 1.14 too). */
#define FABRIC_VERSION_MIN FABRIC_VERSION(1, 14)
#define FABRIC_CLASS_MEM_MONITOR 23          /* enum fi_class */

typedef struct fabric_fid_s fabric_fid_t;
typedef struct fabric_fid_ops_s {
  size_t size;
  int (*close)(fabric_fid_t *fid);
  int (*bind)(fabric_fid_t *fid, fabric_fid_t *bfid, uint64_t flags);
  /* control, ops_open, tostr, ops_set follow: not used */
} fabric_fid_ops_t;
struct fabric_fid_s {
  size_t fclass;
  void *context;
  fabric_fid_ops_t *ops;
};
typedef struct fabric_monitor_s fabric_monitor_t;
typedef struct fabric_export_ops_s {   /* struct fi_ops_mem_monitor: ours */
  size_t size;
  int (*start)(fabric_monitor_t *m);
  void (*stop)(fabric_monitor_t *m);
  int (*subscribe)(fabric_monitor_t *m, const void *addr, size_t len);
  void (*unsubscribe)(fabric_monitor_t *m, const void *addr, size_t len);
  bool (*valid)(fabric_monitor_t *m, const void *addr, size_t len);
} fabric_export_ops_t;
typedef struct fabric_import_ops_s {   /* struct fi_ops_mem_notify: libfabric's */
  size_t size;
  void (*notify)(fabric_monitor_t *m, const void *addr, size_t len);
} fabric_import_ops_t;
struct fabric_monitor_s {              /* struct fid_mem_monitor */
  fabric_fid_t fid;
  fabric_export_ops_t *export_ops;
  fabric_import_ops_t *import_ops;     /* filled by libfabric at the import */
};
typedef uint32_t fabric_version_fn(void);
typedef int fabric_open_fn(uint32_t version, const char *name, void *attr, size_t attr_len,
                           uint64_t flags, fabric_fid_t **fid, void *context);

/* ---- state ---------------------------------------------------------------- */
static ph_lock_t fabric_lock;            /* the import; never taken on event paths */
static int fabric_imported;              /* 1 once libfabric holds the monitor */
static fabric_monitor_t fabric_monitor;
static char fabric_path[256];
static uint32_t fabric_version;

/* libfabric's writable segments, read once at the import (the lock search
 * runs under libfabric's lock: no dl_iterate_phdr there) */
#define FABRIC_RW_MAX 4
#define FABRIC_SCAN_MAX ((size_t)4 << 20)
typedef struct fabric_range_s {
  uintptr_t lo, hi;
} fabric_range_t;
static fabric_range_t fabric_rw[FABRIC_RW_MAX];
static unsigned fabric_nrw;

/* The regions libfabric's caches hold: count and hull.  Written under
 * fabric_sub_lock (libfabric serialises them under its lock too), read
 * atomically by the event path. */
static ph_lock_t fabric_sub_lock;
static size_t fabric_subs;
static uintptr_t fabric_sub_lo = UINTPTR_MAX, fabric_sub_hi;

/* libfabric's monitor lock: pthread mutexes its thread owned at a subscribe */
#define FABRIC_LOCKS_MAX 4
static pthread_mutex_t *fabric_locks[FABRIC_LOCKS_MAX];
static unsigned fabric_nlocks;           /* published with release order */

/* Releases not told yet (a thread held libfabric's lock): their hull, and
 * a count of the releases added to it (a hand-over clears only what it
 * told: valid() says no until libfabric was told). */
static ph_lock_t fabric_pend_lock;
static int fabric_pending;
static uintptr_t fabric_pend_lo = UINTPTR_MAX, fabric_pend_hi;
static unsigned long fabric_pend_gen;

static size_t fabric_told, fabric_kept;  /* counts, for the info tool */

static __thread int fabric_in_notify __attribute__((tls_model("initial-exec")));

/* ---- the lock ------------------------------------------------------------- */
static int fabric_tid(void)
{
  return (int)ph_syscall(SYS_gettid);
}

/* Records the pthread mutexes in libfabric's writable data that this
 * thread owns (glibc's layout: __lock, __count, __owner first).  Called
 * under libfabric's lock until one is found. */
__attribute__((no_sanitize_address)) static void fabric_locks_learn(void)
{
  int tid = fabric_tid();
  unsigned n = fabric_nlocks;
  size_t scanned = 0;
  for (unsigned r = 0; r < fabric_nrw && n < FABRIC_LOCKS_MAX; r++) {
    uintptr_t p = (fabric_rw[r].lo + 7) & ~(uintptr_t)7;
    for (; p + sizeof(pthread_mutex_t) <= fabric_rw[r].hi && n < FABRIC_LOCKS_MAX &&
           scanned < FABRIC_SCAN_MAX;
         p += 8, scanned += 8) {
      int w[3];
      memcpy(w, (const void *)p, sizeof(w));   /* __lock, __count, __owner */
      if (w[2] == tid && (w[0] == 1 || w[0] == 2) && w[1] == 0)
        fabric_locks[n++] = (pthread_mutex_t *)p;
    }
  }
  __atomic_store_n(&fabric_nlocks, n, __ATOMIC_RELEASE);
  static int said;
  if (n == 0 && !said) {
    said = 1;
    ph_log(PH_LOG_INFO, "libfabric's monitor lock not found at a subscribe (no pthread mutex "
           "of this thread in its %u writable segment(s)): looked for again at the next",
           fabric_nrw);
  }
}

/* 1 when this thread holds libfabric's monitor lock (as far as known), or
 * is inside pinheap's own notify. */
static int fabric_lock_held(void)
{
  unsigned n = __atomic_load_n(&fabric_nlocks, __ATOMIC_ACQUIRE);
  if (fabric_in_notify)
    return 1;
  if (n == 0)
    return 0;
  int tid = fabric_tid();
  for (unsigned i = 0; i < n; i++)
    if (__atomic_load_n(&fabric_locks[i]->__data.__owner, __ATOMIC_RELAXED) == tid)
      return 1;
  return 0;
}

/* ---- telling libfabric ---------------------------------------------------- */
static void fabric_tell(uintptr_t lo, uintptr_t hi)
{
  fabric_import_ops_t *ops = __atomic_load_n(&fabric_monitor.import_ops, __ATOMIC_ACQUIRE);
  if (ops == NULL || ops->notify == NULL)
    return;
  fabric_in_notify++;
  ops->notify(&fabric_monitor, (const void *)lo, hi - lo);
  fabric_in_notify--;
  __atomic_fetch_add(&fabric_told, 1, __ATOMIC_RELAXED);
}

static void fabric_keep(uintptr_t lo, uintptr_t hi)
{
  ph_lock(&fabric_pend_lock);
  if (lo < fabric_pend_lo)
    __atomic_store_n(&fabric_pend_lo, lo, __ATOMIC_RELAXED);
  if (hi > fabric_pend_hi)
    __atomic_store_n(&fabric_pend_hi, hi, __ATOMIC_RELAXED);
  fabric_pend_gen++;
  __atomic_store_n(&fabric_pending, 1, __ATOMIC_RELEASE);
  ph_unlock(&fabric_pend_lock);
  __atomic_fetch_add(&fabric_kept, 1, __ATOMIC_RELAXED);
}

/* Tells libfabric the kept releases, then forgets them unless more came
 * meanwhile (told again next time: harmless); the caller holds no
 * libfabric lock. */
static void fabric_drain(void)
{
  ph_lock(&fabric_pend_lock);
  uintptr_t lo = fabric_pend_lo, hi = fabric_pend_hi;
  unsigned long gen = fabric_pend_gen;
  ph_unlock(&fabric_pend_lock);
  if (lo < hi)
    fabric_tell(lo, hi);
  ph_lock(&fabric_pend_lock);
  if (fabric_pend_gen == gen) {
    fabric_pend_lo = UINTPTR_MAX;
    fabric_pend_hi = 0;
    __atomic_store_n(&fabric_pending, 0, __ATOMIC_RELEASE);
  }
  ph_unlock(&fabric_pend_lock);
}

/* 1 when [lo, hi) meets a region libfabric's caches hold (their hull). */
static int fabric_subscribed(uintptr_t lo, uintptr_t hi)
{
  if (__atomic_load_n(&fabric_subs, __ATOMIC_ACQUIRE) == 0)
    return 0;
  return lo < __atomic_load_n(&fabric_sub_hi, __ATOMIC_RELAXED) &&
         __atomic_load_n(&fabric_sub_lo, __ATOMIC_RELAXED) < hi;
}

/* VM_UNMAPPED, before the range goes. */
static int fabric_handler(int type, pinheap_event_t *ev, void *arg)
{
  uintptr_t lo = (uintptr_t)ev->vm_unmapped.address;
  uintptr_t hi = lo + ev->vm_unmapped.size;
  (void)type, (void)arg;
  int pending = __atomic_load_n(&fabric_pending, __ATOMIC_ACQUIRE);
  int meets = fabric_subscribed(lo, hi);
  if (!pending && !meets)
    return PINHEAP_EVENT_PASS;
  if (fabric_lock_held()) {
    if (meets)
      fabric_keep(lo, hi);
    return PINHEAP_EVENT_PASS;
  }
  if (pending)
    fabric_drain();
  if (meets)
    fabric_tell(lo, hi);
  return PINHEAP_EVENT_PASS;
}

/* ---- the monitor libfabric calls (its lock held for subscribe,
 * unsubscribe and valid; its state lock for start and stop) ---------------- */
/* Nothing to start or stop: pinheap's events run whether libfabric caches or not. */
static int fabric_mon_start(fabric_monitor_t *m) { return (void)m, 0; }
static void fabric_mon_stop(fabric_monitor_t *m) { (void)m; }

static int fabric_mon_subscribe(fabric_monitor_t *m, const void *addr, size_t len)
{
  uintptr_t lo = (uintptr_t)addr;
  (void)m;
  ph_lock(&fabric_sub_lock);
  if (__atomic_load_n(&fabric_nlocks, __ATOMIC_RELAXED) == 0)
    fabric_locks_learn();
  if (lo < fabric_sub_lo)
    __atomic_store_n(&fabric_sub_lo, lo, __ATOMIC_RELAXED);
  if (lo + len > fabric_sub_hi)
    __atomic_store_n(&fabric_sub_hi, lo + len, __ATOMIC_RELAXED);
  __atomic_store_n(&fabric_subs, fabric_subs + 1, __ATOMIC_RELEASE);
  ph_unlock(&fabric_sub_lock);
  return 0;
}

static void fabric_mon_unsubscribe(fabric_monitor_t *m, const void *addr, size_t len)
{
  (void)m, (void)addr, (void)len;
  ph_lock(&fabric_sub_lock);
  if (fabric_subs > 0 && --fabric_subs == 0) {
    __atomic_store_n(&fabric_sub_lo, UINTPTR_MAX, __ATOMIC_RELAXED);
    __atomic_store_n(&fabric_sub_hi, 0, __ATOMIC_RELAXED);
  }
  __atomic_store_n(&fabric_subs, fabric_subs, __ATOMIC_RELEASE);
  ph_unlock(&fabric_sub_lock);
}

/* A cached region libfabric is about to hand out: not if a release kept
 * for later meets it. */
static bool fabric_mon_valid(fabric_monitor_t *m, const void *addr, size_t len)
{
  uintptr_t lo = (uintptr_t)addr;
  (void)m;
  if (!__atomic_load_n(&fabric_pending, __ATOMIC_ACQUIRE))
    return true;
  ph_lock(&fabric_pend_lock);
  bool ok = !(lo < fabric_pend_hi && fabric_pend_lo < lo + len);
  ph_unlock(&fabric_pend_lock);
  return ok;
}

static fabric_export_ops_t fabric_export_ops = {
  sizeof(fabric_export_ops_t), fabric_mon_start, fabric_mon_stop, fabric_mon_subscribe,
  fabric_mon_unsubscribe, fabric_mon_valid,
};

/* ---- finding libfabric ---------------------------------------------------- */
/* The writable PT_LOAD segments of the object that holds data (fi_open). */
static int fabric_rw_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  uintptr_t at = (uintptr_t)data;
  int holds = 0;
  (void)size;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    holds |= ph->p_type == PT_LOAD && at >= lo && at - lo < ph->p_memsz;
  }
  if (!holds)
    return 0;
  for (unsigned i = 0; i < info->dlpi_phnum && fabric_nrw < FABRIC_RW_MAX; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
      continue;
    fabric_rw[fabric_nrw].lo = info->dlpi_addr + ph->p_vaddr;
    fabric_rw[fabric_nrw].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    fabric_nrw++;
  }
  return 1;
}

/* fi_version and fi_open of the libfabric in the process, wherever it was
 * loaded (a component's dependency opened RTLD_LOCAL is out of dlsym's
 * default scope), and in *h_p a reference that keeps it loaded
 * (RTLD_DEFAULT when it is part of the program); ENOENT when there is none. */
static int fabric_find(fabric_version_fn **version_p, fabric_open_fn **open_p, void **h_p)
{
  static const char *const first[1] = { "fi_open" };
  void *def = NULL;
  Dl_info at;
  /* Read from the objects' symbol tables: without libfabric that costs no
   * failed dlsym (an error text allocated). */
  if (reloc_defs_named(NULL, first, &def, 1) == 0 && def == NULL)
    return ENOENT;
  if (def == NULL)
    def = dlsym(RTLD_DEFAULT, "fi_open");
  if (def == NULL || dladdr(def, &at) == 0 || at.dli_fname == NULL)
    return ENOENT;
  void *h = dlopen(at.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  fabric_version_fn *version =
      (fabric_version_fn *)dlsym(h != NULL ? h : RTLD_DEFAULT, "fi_version");
  fabric_open_fn *open =
      version != NULL ? (fabric_open_fn *)dlsym(h != NULL ? h : RTLD_DEFAULT, "fi_open") : NULL;
  if (open == NULL) {
    if (h != NULL)
      dlclose(h);
    return ENOENT;
  }
  snprintf(fabric_path, sizeof(fabric_path), "%s",
           h != NULL ? at.dli_fname : "linked into the program");
  fabric_nrw = 0;
  dl_iterate_phdr(fabric_rw_cb, (void *)open);
  *version_p = version;
  *open_p = open;
  *h_p = h != NULL ? h : RTLD_DEFAULT;
  return 0;
}

/* ---- the import ----------------------------------------------------------- */
/* Every release of this process reaches pinheap's events: the program's
 * calls, and glibc's own releases (pinheap serves malloc, or libc's entry
 * points jump to pinheap).  Else libfabric's own monitor sees more. */
static int fabric_sees_all(void)
{
  return install_calls_seen() &&
         (install_malloc_served_enabled() || install_glibc_releases_patched());
}

/* libfabric's "mr_cache" object takes the monitor; -FI_E* or 0. */
static int fabric_bind(fabric_open_fn *open)
{
  fabric_fid_t *cache = NULL;
  int rc = open(FABRIC_VERSION(1, 13), "mr_cache", NULL, 0, 0, &cache, NULL);
  if (rc != 0 || cache == NULL)
    return rc != 0 ? rc : -EINVAL;
  rc = cache->ops->bind(cache, &fabric_monitor.fid, 0);
  cache->ops->close(cache);            /* the import outlives it (fi_import does the same) */
  return rc;
}

static int fabric_refused(int rc)
{
  int err = rc < 0 ? -rc : rc;
  if (err == EBUSY)
    ph_log(PH_LOG_INFO, "libfabric (%s) refused pinheap's memory monitor (EBUSY): another "
           "monitor was imported first, or an MR cache runs already on libfabric's own; "
           "import before the first fi_domain", fabric_path);
  else
    ph_log(PH_LOG_INFO, "libfabric (%s) refused pinheap's memory monitor: error %d, "
           "expected 0", fabric_path, err);
  return err == ENOSYS ? ENOTSUP : err;
}

/* The import, libfabric found: 0 or an errno value. */
static int fabric_import_found(fabric_version_fn *version, fabric_open_fn *open)
{
  uint32_t v = version();
  if (v < FABRIC_VERSION_MIN) {
    ph_log(PH_LOG_INFO, "libfabric %u.%u (%s): pinheap's memory monitor needs 1.14 or later",
           v >> 16, v & 0xffff, fabric_path);
    return ENOTSUP;
  }
  const char *chosen = startup_env("FI_MR_CACHE_MONITOR");
  if (chosen != NULL) {
    ph_log(PH_LOG_INFO, "FI_MR_CACHE_MONITOR=%s chooses libfabric's monitor: pinheap's is not "
           "imported (libfabric would set it aside at its initialisation)", chosen);
    return ENOTSUP;
  }
  if (!fabric_sees_all()) {
    ph_log(PH_LOG_INFO, "libfabric keeps its own memory monitor: pinheap does not see every "
           "release of this process (see pinheap-info)");
    return ENOTSUP;
  }
  fabric_monitor.fid.fclass = FABRIC_CLASS_MEM_MONITOR;
  fabric_monitor.export_ops = &fabric_export_ops;
  /* the handler first: once libfabric holds the monitor no release is missed */
  int rc = PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, 0, fabric_handler, NULL);
  if (rc != 0 && rc != EEXIST)
    return rc;
  rc = fabric_bind(open);
  if (rc != 0 || fabric_monitor.import_ops == NULL) {
    PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, fabric_handler, NULL);
    return fabric_refused(rc != 0 ? rc : -EPROTO);
  }
  fabric_version = v;
  __atomic_store_n(&fabric_imported, 1, __ATOMIC_RELEASE);
  return 0;
}

static int fabric_import_locked(void)
{
  fabric_version_fn *version;
  fabric_open_fn *open;
  void *h;
  if (fabric_find(&version, &open, &h) != 0)
    return ENOENT;
  int rc = fabric_import_found(version, open);
  if (rc != 0 && h != RTLD_DEFAULT)
    dlclose(h);                 /* libfabric does not hold the monitor: let it go */
  return rc;
}

int PINHEAP_NAME(fabric_monitor_import)(void)
{
  const copies_api_t *serving = copies_serving();  /* another copy serves (copies.c) */
  if (ph_unlikely(serving != NULL))
    return serving->fabric_monitor_import();
  if (params_get()->v[PARAM_EVENTS].value == 0)
    return ENOTSUP;             /* PINHEAP_EVENTS=0: no releases to tell */
  if (__atomic_load_n(&fabric_imported, __ATOMIC_ACQUIRE))
    return 0;
  ph_lock(&fabric_lock);
  int rc = fabric_imported ? 0 : fabric_import_locked();
  ph_unlock(&fabric_lock);
  return rc;
}
COPIES_SELF_ALIAS(fabric_monitor_import);

/* Fork: fabric_sub_lock and fabric_pend_lock are held for a few loads and
 * stores, fabric_lock across the import (calls into libfabric and the
 * events).  None is taken before fork: the import would make fork wait on
 * libfabric, and the other two are taken under libfabric's monitor lock and
 * on the event path, below locks whose prefork handlers run in no fixed
 * order.  A child forked while another thread held one frees it; a hull
 * that thread may have left half widened becomes the whole address space,
 * which only makes libfabric drop more of its cache: the kept releases are
 * told at the child's next attach point, and every release meets the
 * subscribed hull.  fabric_imported is published last: imported again. */
void fabric_fork_child(void)
{
  if (ph_lock_held(&fabric_sub_lock)) {
    __atomic_store_n(&fabric_sub_lo, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fabric_sub_hi, UINTPTR_MAX, __ATOMIC_RELAXED);
    __atomic_store_n(&fabric_subs, fabric_subs > 0 ? fabric_subs : 1, __ATOMIC_RELEASE);
    ph_lock_reset(&fabric_sub_lock);
  }
  if (ph_lock_held(&fabric_pend_lock)) {
    fabric_pend_lo = 0;
    fabric_pend_hi = UINTPTR_MAX;
    fabric_pend_gen++;
    __atomic_store_n(&fabric_pending, 1, __ATOMIC_RELEASE);
    ph_lock_reset(&fabric_pend_lock);
  }
  ph_lock_reset(&fabric_lock);
}

/* ---- attach points, the info tool, the tests ----------------------------- */
/* Only this runs in every process (at its attach points): the import and
 * the monitor stay out of .text.startup, whose first 64 KiB window every
 * process has resident (startup.h). */
PH_STARTUP void fabric_feed_attach(void)
{
  if (__atomic_load_n(&fabric_pending, __ATOMIC_ACQUIRE) && !fabric_lock_held())
    fabric_drain();
}

int fabric_feed_describe(char *buf, size_t size)
{
  if (!__atomic_load_n(&fabric_imported, __ATOMIC_ACQUIRE))
    return snprintf(buf, size, "%s", "");  /* libfabric does not hold pinheap's monitor */
  size_t kept = __atomic_load_n(&fabric_kept, __ATOMIC_RELAXED);
  char later[160] = "";
  if (kept > 0)
    snprintf(later, sizeof(later), ", %zu of them late: the releasing thread held "
             "libfabric's monitor lock", kept);
  return snprintf(buf, size,
                  "libfabric %u.%u (%s) uses pinheap's memory monitor for its MR caches: every "
                  "release pinheap sees that meets a region they hold (%zu now) is told to them "
                  "before the memory goes; %zu told so far%s.",
                  fabric_version >> 16, fabric_version & 0xffff, fabric_path,
                  __atomic_load_n(&fabric_subs, __ATOMIC_ACQUIRE),
                  __atomic_load_n(&fabric_told, __ATOMIC_RELAXED), later);
}

void *fabric_monitor_fid(void)
{
  return __atomic_load_n(&fabric_imported, __ATOMIC_ACQUIRE) ? &fabric_monitor : NULL;
}

void fabric_monitor_scan_also(const void *addr, size_t len)
{
  ph_lock(&fabric_sub_lock);
  if (fabric_nrw < FABRIC_RW_MAX) {
    fabric_rw[fabric_nrw].lo = (uintptr_t)addr;
    fabric_rw[fabric_nrw].hi = (uintptr_t)addr + len;
    fabric_nrw++;
  }
  ph_unlock(&fabric_sub_lock);
}
