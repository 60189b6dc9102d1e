/*
 * audit.c -- the kernel-backed audit of watched ranges (PINHEAP_AUDIT=1).
 * Main entry points: audit_watched() and audit_unwatched() (from watch.c),
 * audit_reader() (static, the helper thread) and the public
 * pinheap_watch_unannounced().
 *
 * Every watched range's pages are also registered with one userfaultfd
 * (user-mode only) in write-protect mode, with no page ever write-protected:
 * the kernel then delivers no page fault for them, only its release events
 * (UNMAP, REMOVE for madvise DONTNEED/REMOVE and process_madvise, REMAP for
 * mremap).  A helper thread reads them.  A release pinheap announced has
 * already made the tokens it meets invalid (its VM_UNMAPPED handler runs
 * before the system call), so the reader only compares; a valid token met by
 * an event is a release pinheap never saw (a raw system call): the reader
 * invalidates it, counts it and writes one line per watch.
 *
 * Why the reader never deadlocks a releasing thread.  The kernel keeps a
 * thread that releases registered memory waiting until the reader has READ
 * the event (not until it has handled it).  The reader reads first, into a
 * queue on its stack, and only then handles; it allocates nothing, writes
 * through the logger only (no malloc, no lock, no stdio), blocks every
 * signal, never takes audit_lock, and takes watch_lock only by trying it
 * (watch_audit_claim): a thread holding watch_lock may be the very one the
 * kernel keeps waiting (a signal handler's raw release inside watch()), so
 * an event whose lock is busy stays queued and is tried again 1 ms later
 * while the reader goes on reading.  A full queue merges its last entries
 * (conservative: tokens of the merged hull go invalid, never a miss).
 *
 * Registration.  audit_lock (never taken by the reader) serializes the
 * ioctls with unwatch's decision: unwatch unregisters a watch's pages only
 * when no live watch meets them any more, so a page shared by two watches
 * stays registered until the last goes.  A registration the kernel refuses
 * (not anonymous or shmem memory, a hole, a mapping registered elsewhere)
 * leaves that watch unaudited (counted).
 *
 * Fork: the child inherits no registration (no UFFD_FEATURE_EVENT_FORK), and
 * no reader; its audit starts again, with a new descriptor and thread, at
 * its next watch, and covers the watches made from then on.  Exec: the
 * descriptor is close-on-exec.
 */
#include "hooks/watch/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/params.h"
#include "pinheap.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define AUDIT_QUEUE 512                   /* events read but not yet handled */
#define AUDIT_REPORT 16                   /* watch ranges named per event */

typedef struct audit_ev_s {
  uintptr_t a, b;
  const char *how;                        /* "munmap", "madvise", "mremap" */
} audit_ev_t;

static int audit_want = -1;               /* PINHEAP_AUDIT, read once */
static ph_lock_t audit_lock;              /* the ioctls and unwatch's decision */
static int audit_fd = -1;                 /* under audit_lock; -1: not started */
static int audit_failed;                  /* under audit_lock: could not start */
static atomic_size_t audit_unannounced;
static atomic_size_t audit_unaudited;
static atomic_int audit_atfork_done;
/* The reader's rounds: audit_round is stored before a round's first read,
 * audit_done once every event of that round is handled.  A thread whose
 * release an event reports waited in the kernel until that event was read,
 * so any call it makes afterwards sees audit_round at least that round's. */
static atomic_ulong audit_round, audit_done;

int audit_wanted(void)
{
  int w = __atomic_load_n(&audit_want, __ATOMIC_RELAXED);
  if (ph_likely(w >= 0))
    return w;
  w = params_get()->v[PARAM_AUDIT].value != 0;
  __atomic_store_n(&audit_want, w, __ATOMIC_RELAXED);
  return w;
}

/* ---- the reader ---------------------------------------------------------- */

static void audit_report(const audit_ev_t *e, uintptr_t s, uintptr_t t)
{
  char hs[24], ht[24];
  ph_warn("unannounced release of [", ph_fmt_hex(hs, s), ", ", ph_fmt_hex(ht, t), ") (",
          e->how, ") of a watched range: a raw system call?", (const char *)NULL);
}

/* Handles e.  @return 0, or -1 when watch_lock was busy (keep it). */
static int audit_handle(const audit_ev_t *e)
{
  uintptr_t starts[AUDIT_REPORT], ends[AUDIT_REPORT];
  long n = watch_audit_claim(e->a, e->b, starts, ends, AUDIT_REPORT);
  if (n < 0)
    return -1;
  if (n == 0)
    return 0;
  atomic_fetch_add_explicit(&audit_unannounced, (size_t)n, memory_order_relaxed);
  for (long i = 0; i < n && i < AUDIT_REPORT; i++)
    audit_report(e, starts[i], ends[i]);
  if (n > AUDIT_REPORT) {
    char num[24];
    ph_warn("unannounced release: ", ph_fmt_dec(num, (uint64_t)(n - AUDIT_REPORT)),
            " more watched ranges (not named)", (const char *)NULL);
  }
  return 0;
}

static void *audit_reader(void *arg)
{
  int fd = (int)(intptr_t)arg;
  audit_ev_t q[AUDIT_QUEUE];
  size_t nq = 0;
  struct uffd_msg msg[16];

  for (;;) {
    struct pollfd p = { fd, POLLIN, 0 };
    if ((poll(&p, 1, nq != 0 ? 1 : -1) < 0 && errno != EINTR) ||
        (p.revents & (POLLERR | POLLHUP | POLLNVAL)))
      break;
    /* read everything first: each read lets a releasing thread go on */
    unsigned long round = atomic_fetch_add_explicit(&audit_round, 1, memory_order_seq_cst) + 1;
    for (;;) {
      ssize_t got = read(fd, msg, sizeof msg);
      if (got <= 0)
        break;
      for (size_t i = 0; i < (size_t)got / sizeof msg[0]; i++) {
        audit_ev_t e;
        switch (msg[i].event) {
        case UFFD_EVENT_UNMAP:
          e = (audit_ev_t){ msg[i].arg.remove.start, msg[i].arg.remove.end, "munmap" };
          break;
        case UFFD_EVENT_REMOVE:
          e = (audit_ev_t){ msg[i].arg.remove.start, msg[i].arg.remove.end, "madvise" };
          break;
        case UFFD_EVENT_REMAP:
          e = (audit_ev_t){ msg[i].arg.remap.from, msg[i].arg.remap.from + msg[i].arg.remap.len,
                            "mremap" };
          break;
        default:
          continue;                       /* no fault is ever delivered (nothing is protected) */
        }
        if (nq == AUDIT_QUEUE) {          /* full: merge into the last (never a miss) */
          audit_ev_t *l = &q[nq - 1];
          l->a = e.a < l->a ? e.a : l->a;
          l->b = e.b > l->b ? e.b : l->b;
          if (l->how != e.how)
            l->how = "munmap, madvise or mremap";
        } else {
          q[nq++] = e;
        }
      }
    }
    /* then handle, in order, as long as watch_lock is free */
    size_t done = 0;
    while (done < nq && audit_handle(&q[done]) == 0)
      done++;
    for (size_t i = done; i < nq; i++)
      q[i - done] = q[i];
    nq -= done;
    if (nq == 0)
      atomic_store_explicit(&audit_done, round, memory_order_release);
  }
  atomic_store(&audit_done, ULONG_MAX);   /* no reader: watch() waits for none */
  return NULL;
}

/* ---- registration --------------------------------------------------------- */

void audit_settle(void)
{
  /* A watch made before the reader handled a release already over would
   * be taken for that release's victim (a program that unmaps, maps again
   * at the same place and watches again): wait for the rounds begun so far.
   * No lock is held here, and the reader waits for nothing of ours. */
  unsigned long r = atomic_load_explicit(&audit_round, memory_order_seq_cst);
  while (atomic_load_explicit(&audit_done, memory_order_acquire) < r) {
    if (__atomic_load_n(&audit_fd, __ATOMIC_RELAXED) < 0)
      return;
    struct timespec ts = { 0, 20000 };
    nanosleep(&ts, NULL);
  }
}

static void audit_fork_child(void)
{
  /* the parent's descriptor is its context (registering with it would act
   * on the parent's memory) and its reader is not here: start again */
  ph_lock_reset(&audit_lock);
  if (audit_fd >= 0)
    close(audit_fd);
  audit_fd = -1;
  audit_failed = 0;
  atomic_store(&audit_round, 0);
  atomic_store(&audit_done, 0);
}

/* The descriptor and the reader.  audit_lock held.  @return 0 or an errno. */
static int audit_start(void)
{
  int fd = (int)ph_syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
  if (fd < 0)
    return errno;
  struct uffdio_api api = { .api = UFFD_API,
                            .features = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |
                                        UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_PAGEFAULT_FLAG_WP };
  if (ioctl(fd, UFFDIO_API, &api) != 0) {
    int e = errno;
    close(fd);
    return e;
  }
  if (atomic_exchange(&audit_atfork_done, 1) == 0)
    ph_atfork(NULL, NULL, audit_fork_child);
  /* the reader runs no signal handler (one could release memory or wait) */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = pthread_create(&t, &at, audit_reader, (void *)(intptr_t)fd);
  pthread_attr_destroy(&at);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    close(fd);
    return rc;
  }
  audit_fd = fd;
  return 0;
}

static inline void audit_pages(uintptr_t *a, uintptr_t *b)
{
  uintptr_t pg = os_page_size();
  *a &= ~(pg - 1);
  *b = *b > UINTPTR_MAX - (pg - 1) ? UINTPTR_MAX & ~(pg - 1) : (*b + pg - 1) & ~(pg - 1);
}

void audit_watched(uintptr_t a, uintptr_t b)
{
  audit_pages(&a, &b);
  ph_lock(&audit_lock);
  if (audit_fd < 0 && !audit_failed) {
    int e = audit_start();
    if (e != 0) {
      audit_failed = 1;
      char num[24];
      ph_warn("PINHEAP_AUDIT=1 but userfaultfd is refused (errno ", ph_fmt_dec(num, (uint64_t)e),
              "): watches are not audited", (const char *)NULL);
    }
  }
  struct uffdio_register r = { .range = { a, b - a }, .mode = UFFDIO_REGISTER_MODE_WP };
  if (audit_fd < 0 || ioctl(audit_fd, UFFDIO_REGISTER, &r) != 0)
    atomic_fetch_add_explicit(&audit_unaudited, 1, memory_order_relaxed);
  ph_unlock(&audit_lock);
}

void audit_unwatched(uintptr_t a, uintptr_t b)
{
  audit_pages(&a, &b);
  ph_lock(&audit_lock);
  if (audit_fd >= 0 && !watch_audit_shared(a, b)) {
    struct uffdio_range r = { a, b - a };
    (void)ioctl(audit_fd, UFFDIO_UNREGISTER, &r);   /* gone already, or never registered: fine */
  }
  ph_unlock(&audit_lock);
}

size_t PINHEAP_NAME(watch_unannounced)(void)
{
  return atomic_load_explicit(&audit_unannounced, memory_order_relaxed);
}

size_t PINHEAP_NAME(watch_unaudited)(void)
{
  return atomic_load_explicit(&audit_unaudited, memory_order_relaxed);
}
