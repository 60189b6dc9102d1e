/*
 * events_calls.c -- the entry points of the memory calls: events_mmap,
 * events_munmap, events_mremap, events_madvise, events_shmat, events_shmdt,
 * events_brk and events_sbrk, one per libc call with exactly its
 * signature, each of which runs the event chain (events.c) and ends in the
 * raw system call; and events_symbols, the table of libc symbol -> entry
 * point.  Main entry points: the events_* of events.h.
 * A handler wanted, the chain is entered through a named slow path
 * (events_*_slow); with none, the fast path is one load and the call.
 */
#include "hooks/events/events.h"

#include "allocator/heap/chunk.h"     /* ph_lock */
#include "hooks/decide/dispatch.h"  /* copies_serving */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config/params.h"
#include "hooks/intercept/peers.h"
#include "pinheap.h"
#include "allocator/base/startup.h"
#include "hooks/intercept/symbols.h"

size_t events_page_len(const void *addr, size_t len)
{
  size_t page = os_page_size();
  if (((uintptr_t)addr & (page - 1)) != 0 || len > SIZE_MAX - page)
    return 0;
  return (len + page - 1) & ~(page - 1);
}

static uintptr_t events_page_up(uintptr_t a)
{
  size_t page = os_page_size();
  return (a + page - 1) & ~(uintptr_t)(page - 1);
}

/* ---- mmap ---------------------------------------------------------------- */

PH_HOT static PH_NOINLINE void *events_mmap_slow(void *addr, size_t length, int prot, int flags, int fd,
                                          off_t offset)
{
  pinheap_event_t ev;
  ev.mmap.result = MAP_FAILED;
  ev.mmap.address = addr;
  ev.mmap.size = length;
  ev.mmap.prot = prot;
  ev.mmap.flags = flags;
  ev.mmap.fd = fd;
  ev.mmap.offset = offset;
  if (events_chain_run(PINHEAP_EVENT_MMAP, &ev) == PINHEAP_EVENT_STOP)
    return ev.mmap.result;
  /* MAP_FIXED replaces whatever was mapped there (MAP_FIXED_NOREPLACE
   * fails instead, and its flag bits do not include MAP_FIXED). */
  if (ev.mmap.flags & MAP_FIXED)
    events_vm_unmapped(ev.mmap.address, events_page_len(ev.mmap.address, ev.mmap.size),
                       PINHEAP_EVENT_SOURCE_APP);
  ev.mmap.result = peers_mmap(ev.mmap.address, ev.mmap.size, ev.mmap.prot, ev.mmap.flags,
                              ev.mmap.fd, ev.mmap.offset);
  if (ev.mmap.result != MAP_FAILED) {
    int saved = errno;
    events_vm_mapped(ev.mmap.result, events_page_len(ev.mmap.result, ev.mmap.size),
                     PINHEAP_EVENT_SOURCE_APP);
    errno = saved;
  }
  return ev.mmap.result;
}

PH_HOT void *events_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
  if (ph_likely(!events_wanted(PINHEAP_EVENT_MMAP | PINHEAP_EVENT_VM_MAPPED |
                               PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_mmap(addr, length, prot, flags, fd, offset);
  if (peers_returning(addr))
    return (void *)ph_syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
  return events_mmap_slow(addr, length, prot, flags, fd, offset);
}

/* ---- munmap -------------------------------------------------------------- */

PH_HOT static PH_NOINLINE int events_munmap_slow(void *addr, size_t length)
{
  pinheap_event_t ev;
  ev.munmap.result = -1;
  ev.munmap.address = addr;
  ev.munmap.size = length;
  if (events_chain_run(PINHEAP_EVENT_MUNMAP, &ev) == PINHEAP_EVENT_STOP)
    return ev.munmap.result;
  events_vm_unmapped(ev.munmap.address, events_page_len(ev.munmap.address, ev.munmap.size),
                     PINHEAP_EVENT_SOURCE_APP);
  return peers_munmap(ev.munmap.address, ev.munmap.size);
}

PH_HOT int events_munmap(void *addr, size_t length)
{
  if (ph_likely(!events_wanted(PINHEAP_EVENT_MUNMAP | PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_munmap(addr, length);
  if (peers_returning(addr))
    return (int)ph_syscall(SYS_munmap, addr, length);
  return events_munmap_slow(addr, length);
}

/* ---- mremap -------------------------------------------------------------- */

PH_HOT static PH_NOINLINE void *events_mremap_slow(void *old, size_t old_size, size_t new_size,
                                            int flags, void *new_address)
{
  pinheap_event_t ev;
  ev.mremap.result = MAP_FAILED;
  ev.mremap.address = old;
  ev.mremap.old_size = old_size;
  ev.mremap.new_size = new_size;
  ev.mremap.flags = flags;
  ev.mremap.new_address = new_address;
  if (events_chain_run(PINHEAP_EVENT_MREMAP, &ev) == PINHEAP_EVENT_STOP)
    return ev.mremap.result;
  old = ev.mremap.address;
  flags = ev.mremap.flags;
  new_address = (flags & MREMAP_FIXED) ? ev.mremap.new_address : NULL;
  size_t old_len = events_page_len(old, ev.mremap.old_size);
  size_t new_len = events_page_len(old, ev.mremap.new_size);
  bool may_move = (flags & (MREMAP_MAYMOVE | MREMAP_FIXED)) != 0;

  /* The destination of MREMAP_FIXED loses whatever was mapped there. */
  if (flags & MREMAP_FIXED)
    events_vm_unmapped(new_address, events_page_len(new_address, ev.mremap.new_size),
                       PINHEAP_EVENT_SOURCE_APP);
  /* The old range may move away: all of it.  In place: a shrink's tail. */
  if (may_move)
    events_vm_unmapped(old, old_len, PINHEAP_EVENT_SOURCE_APP);
  else if (new_len < old_len)
    events_vm_unmapped((char *)old + new_len, old_len - new_len, PINHEAP_EVENT_SOURCE_APP);
  ev.mremap.result = peers_mremap(old, ev.mremap.old_size, ev.mremap.new_size, flags,
                                  new_address);
  if (ev.mremap.result != MAP_FAILED) {
    int saved = errno;
    if (may_move)      /* reported gone above: all of the new range is new */
      events_vm_mapped(ev.mremap.result, new_len, PINHEAP_EVENT_SOURCE_APP);
    else if (new_len > old_len)
      events_vm_mapped((char *)old + old_len, new_len - old_len, PINHEAP_EVENT_SOURCE_APP);
    errno = saved;
  }
  return ev.mremap.result;
}

PH_HOT void *events_mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...)
{
  void *new_address = NULL;

  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_address = va_arg(ap, void *);
    va_end(ap);
  }
  if (ph_likely(!events_wanted(PINHEAP_EVENT_MREMAP | PINHEAP_EVENT_VM_MAPPED |
                               PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_mremap(old_address, old_size, new_size, flags, new_address);
  if (peers_returning(old_address))
    return (void *)ph_syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address);
  return events_mremap_slow(old_address, old_size, new_size, flags, new_address);
}

/* ---- madvise ------------------------------------------------------------- */

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102   /* Linux 6.13; glibc 2.36's headers predate it */
#endif

/* The advice values after which a range reads back as zeros or as the
 * file (or faults, for a guard): its pages are gone. */
bool events_advice_releases(int advice)
{
  switch (advice) {
  case MADV_DONTNEED:
  case MADV_FREE:
  case MADV_REMOVE:
  case MADV_GUARD_INSTALL:       /* zaps the range as DONTNEED does */
#ifdef MADV_DONTNEED_LOCKED
  case MADV_DONTNEED_LOCKED:
#endif
    return true;
  default:
    return false;
  }
}

PH_HOT static PH_NOINLINE int events_madvise_slow(void *addr, size_t length, int advice)
{
  pinheap_event_t ev;
  ev.madvise.result = -1;
  ev.madvise.address = addr;
  ev.madvise.size = length;
  ev.madvise.advice = advice;
  if (events_chain_run(PINHEAP_EVENT_MADVISE, &ev) == PINHEAP_EVENT_STOP)
    return ev.madvise.result;
  if (events_advice_releases(ev.madvise.advice))
    events_vm_unmapped(ev.madvise.address, events_page_len(ev.madvise.address, ev.madvise.size),
                       PINHEAP_EVENT_SOURCE_APP);
  return peers_madvise(ev.madvise.address, ev.madvise.size, ev.madvise.advice);
}

PH_HOT int events_madvise(void *addr, size_t length, int advice)
{
  if (ph_likely(!events_wanted(PINHEAP_EVENT_MADVISE | PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_madvise(addr, length, advice);
  if (peers_returning(addr))
    return (int)ph_syscall(SYS_madvise, addr, length, advice);
  return events_madvise_slow(addr, length, advice);
}

/* ---- shmat, shmdt -------------------------------------------------------- */

/* The size of System V segment shmid, page-rounded; 0 if unknown. */
static size_t events_shm_size(int shmid)
{
  struct shmid_ds ds;
  int saved = errno;

  if (ph_syscall(SYS_shmctl, shmid, IPC_STAT, &ds) != 0) {
    errno = saved;
    return 0;
  }
  return (size_t)events_page_up(ds.shm_segsz);
}

/* What shmdt(addr) detaches, found as the kernel finds it (ipc/shm.c):
 * the first System V mapping at or above addr whose offset in the segment
 * is its distance from addr (the segment's start, or, its head unmapped,
 * the first fragment left), then every later mapping of the same segment
 * with that property, up to addr + the segment's size -- the fragments an
 * mprotect or munmap split it into.  The ranges are gathered first and
 * reported after the walk (handlers run with no file open). */
#define EVENTS_SHM_RANGES 32
typedef struct events_shmdt_walk_s {
  uintptr_t addr;
  uint64_t limit;                          /* addr + size, or UINT64_MAX */
  bool found;
  unsigned dev_major, dev_minor;
  uint64_t inode;
  int n;
  uintptr_t lo[EVENTS_SHM_RANGES], hi[EVENTS_SHM_RANGES];
} events_shmdt_walk_t;

static bool events_map_is_sysv(const os_map_t *m)
{
  return m->path_len >= 5 && memcmp(m->path, "/SYSV", 5) == 0;
}

static int events_shmdt_line(const os_map_t *m, void *ctx)
{
  events_shmdt_walk_t *w = ctx;

  if (m->lo < w->addr || !events_map_is_sysv(m) || m->lo - w->addr != m->offset)
    return 0;
  if (!w->found) {
    w->found = true;
    w->dev_major = m->dev_major;
    w->dev_minor = m->dev_minor;
    w->inode = m->inode;                   /* a segment's inode is its id */
    size_t size = events_shm_size((int)m->inode);
    w->limit = size != 0 ? (uint64_t)w->addr + size : UINT64_MAX;
  } else if (m->dev_major != w->dev_major || m->dev_minor != w->dev_minor ||
             m->inode != w->inode) {
    return 0;
  }
  if (m->hi > w->limit)
    return 1;
  if (w->n > 0 && w->hi[w->n - 1] == m->lo) {
    w->hi[w->n - 1] = m->hi;               /* adjacent fragments: one range */
  } else if (w->n == EVENTS_SHM_RANGES) {
    w->hi[w->n - 1] = m->hi;               /* out of room: one range over the gap (a
                                              superset, never a miss) */
  } else {
    w->lo[w->n] = m->lo;
    w->hi[w->n] = m->hi;
    w->n++;
  }
  return 0;
}

void events_shmdt_ranges(const void *addr, void (*fn)(void *start, size_t len))
{
  events_shmdt_walk_t w;

  w.addr = (uintptr_t)addr;
  w.found = false;
  w.n = 0;
  if (((uintptr_t)addr & (os_page_size() - 1)) != 0 ||
      os_maps_walk(events_shmdt_line, &w) != 0)
    return;
  for (int i = 0; i < w.n; i++)
    fn((void *)w.lo[i], w.hi[i] - w.lo[i]);
}

static void events_shmdt_release(void *start, size_t len)
{
  events_vm_unmapped(start, len, PINHEAP_EVENT_SOURCE_APP);
}

PH_HOT static PH_NOINLINE void *events_shmat_slow(int shmid, const void *shmaddr, int shmflg)
{
  pinheap_event_t ev;
  ev.shmat.result = (void *)-1;
  ev.shmat.shmid = shmid;
  ev.shmat.shmaddr = shmaddr;
  ev.shmat.shmflg = shmflg;
  if (events_chain_run(PINHEAP_EVENT_SHMAT, &ev) == PINHEAP_EVENT_STOP)
    return ev.shmat.result;
  size_t len = events_shm_size(ev.shmat.shmid);
  if ((ev.shmat.shmflg & SHM_REMAP) && ev.shmat.shmaddr != NULL) {
    uintptr_t at = (uintptr_t)ev.shmat.shmaddr;
    if (ev.shmat.shmflg & SHM_RND)
      at &= ~(uintptr_t)(SHMLBA - 1);
    events_vm_unmapped((void *)at, events_page_len((void *)at, len), PINHEAP_EVENT_SOURCE_APP);
  }
  ev.shmat.result = peers_shmat(ev.shmat.shmid, ev.shmat.shmaddr, ev.shmat.shmflg);
  if (ev.shmat.result != (void *)-1) {
    int saved = errno;
    events_vm_mapped(ev.shmat.result, len, PINHEAP_EVENT_SOURCE_APP);
    errno = saved;
  }
  return ev.shmat.result;
}

PH_HOT void *events_shmat(int shmid, const void *shmaddr, int shmflg)
{
  if (ph_likely(!events_wanted(PINHEAP_EVENT_SHMAT | PINHEAP_EVENT_VM_MAPPED |
                               PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_shmat(shmid, shmaddr, shmflg);
  if (peers_returning(shmaddr))
    return (void *)ph_syscall(SYS_shmat, shmid, shmaddr, shmflg);
  return events_shmat_slow(shmid, shmaddr, shmflg);
}

PH_HOT static PH_NOINLINE int events_shmdt_slow(const void *shmaddr)
{
  pinheap_event_t ev;
  ev.shmdt.result = -1;
  ev.shmdt.shmaddr = shmaddr;
  if (events_chain_run(PINHEAP_EVENT_SHMDT, &ev) == PINHEAP_EVENT_STOP)
    return ev.shmdt.result;
  if (events_wanted(PINHEAP_EVENT_VM_UNMAPPED))  /* the maps read costs: only if wanted */
    events_shmdt_ranges(ev.shmdt.shmaddr, events_shmdt_release);
  return peers_shmdt(ev.shmdt.shmaddr);
}

PH_HOT int events_shmdt(const void *shmaddr)
{
  if (ph_likely(!events_wanted(PINHEAP_EVENT_SHMDT | PINHEAP_EVENT_VM_UNMAPPED)))
    return peers_shmdt(shmaddr);
  if (peers_returning(shmaddr))
    return (int)ph_syscall(SYS_shmdt, shmaddr);
  return events_shmdt_slow(shmaddr);
}

/* ---- brk, sbrk ----------------------------------------------------------- */

/* glibc's record of the current break (exported since GLIBC_2.2.5; its own
 * sbrk reads it).  glibc 2.36 exports __sbrk but no __brk, and its sbrk
 * calls its internal __brk directly, so neither could carry our event: both
 * calls are made here with the raw brk system call, and __curbrk is kept
 * in step as glibc's brk keeps it. */
extern void *__curbrk;

static uintptr_t events_curbrk(void)
{
  void *cur = __atomic_load_n(&__curbrk, __ATOMIC_RELAXED);
  if (cur == NULL) {
    cur = (void *)ph_syscall(SYS_brk, 0);
    __atomic_store_n(&__curbrk, cur, __ATOMIC_RELAXED);
  }
  return (uintptr_t)cur;
}

/* Where the heap starts (start_brk, field 47 of /proc/self/stat): the
 * kernel refuses a break below it, and moves nothing.  Read once; 0 if it
 * cannot be read (then no shrink is reported below the first page). */
static uintptr_t events_start_brk(void)
{
  static uintptr_t start;                   /* 1: unreadable */
  uintptr_t v = __atomic_load_n(&start, __ATOMIC_RELAXED);
  if (v != 0)
    return v == 1 ? 0 : v;
  char buf[1024];
  int saved = errno;
  long fd = ph_syscall(SYS_openat, AT_FDCWD, "/proc/self/stat", O_RDONLY | O_CLOEXEC);
  long n = fd >= 0 ? ph_syscall(SYS_read, (int)fd, buf, sizeof(buf) - 1) : -1;
  if (fd >= 0)
    ph_syscall(SYS_close, (int)fd);
  errno = saved;
  v = 1;
  if (n > 0) {
    buf[n] = '\0';
    uintptr_t x = (uintptr_t)ph_stat_number(ph_stat_field(buf, 47));
    if (x != 0)
      v = x;
  }
  __atomic_store_n(&start, v, __ATOMIC_RELAXED);
  return v == 1 ? 0 : v;
}

/* Moves the break to addr: VM_UNMAPPED before a shrink, VM_MAPPED after a
 * growth (the whole pages between the old and new break).  A break below
 * the heap's start (brk(0), glibc's way of asking) moves nothing and is
 * reported as nothing.  As the system call: the break after it (the old
 * one if the kernel refused). */
static uintptr_t events_brk_set(void *addr, bool report)
{
  uintptr_t old = events_curbrk(), want = (uintptr_t)addr;
  uintptr_t old_top = events_page_up(old), want_top = events_page_up(want);

  if (want_top < old_top && report && want >= events_start_brk() && want != 0)
    events_vm_unmapped((void *)want_top, old_top - want_top, PINHEAP_EVENT_SOURCE_APP);
  uintptr_t now = report ? peers_brk(addr) : (uintptr_t)ph_syscall(SYS_brk, addr);
  __atomic_store_n(&__curbrk, (void *)now, __ATOMIC_RELAXED);
  uintptr_t now_top = events_page_up(now);
  if (now >= want && now_top > old_top && report)
    events_vm_mapped((void *)old_top, now_top - old_top, PINHEAP_EVENT_SOURCE_APP);
  return now;
}

/* As glibc's brk: 0, or -1 with ENOMEM. */
static int events_brk_move(void *addr, bool report)
{
  if (events_brk_set(addr, report) < (uintptr_t)addr) {
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

PH_HOT int events_brk(void *addr)
{
  if (ph_unlikely(peers_returning(addr)))
    return events_brk_move(addr, false);   /* reported by the call it came from */
  if (events_wanted(PINHEAP_EVENT_BRK)) {
    pinheap_event_t ev;
    ev.brk.result = -1;
    ev.brk.address = addr;
    if (events_chain_run(PINHEAP_EVENT_BRK, &ev) == PINHEAP_EVENT_STOP)
      return ev.brk.result;
    addr = ev.brk.address;
  }
  return events_brk_move(addr, true);
}

uintptr_t events_brk_syscall(void *addr)
{
  /* brk(0) asks where the break is: nothing moves */
  if (addr == NULL || ph_unlikely(peers_returning(addr)))
    return events_brk_set(addr, false);
  if (events_wanted(PINHEAP_EVENT_BRK)) {
    pinheap_event_t ev;
    ev.brk.result = -1;
    ev.brk.address = addr;
    if (events_chain_run(PINHEAP_EVENT_BRK, &ev) == PINHEAP_EVENT_STOP)
      return ev.brk.result == 0 ? (uintptr_t)ev.brk.address : events_curbrk();
    addr = ev.brk.address;
  }
  return events_brk_set(addr, true);
}

PH_HOT void *events_sbrk(intptr_t increment)
{
  if (events_wanted(PINHEAP_EVENT_SBRK)) {
    pinheap_event_t ev;
    ev.sbrk.result = (void *)-1;
    ev.sbrk.increment = increment;
    if (events_chain_run(PINHEAP_EVENT_SBRK, &ev) == PINHEAP_EVENT_STOP)
      return ev.sbrk.result;
    increment = ev.sbrk.increment;
  }
  uintptr_t old = events_curbrk();
  if (increment == 0)
    return (void *)old;
  if ((increment > 0 && (uintptr_t)increment > UINTPTR_MAX - old) ||
      (increment < 0 && (uintptr_t)-increment > old)) {
    errno = ENOMEM;
    return (void *)-1;
  }
  if (events_brk_move((void *)(old + (uintptr_t)increment), true) != 0)
    return (void *)-1;
  return (void *)old;
}

/* The memory calls of symbols.h. */
#define EVENTS_SYMBOL(name, ret, params, event, entry) { event, #name, (void *)entry },
const events_symbol_t events_symbols[] = { PH_INTERCEPTED_CALLS(EVENTS_SYMBOL) };
#undef EVENTS_SYMBOL
const unsigned events_symbols_count = sizeof(events_symbols) / sizeof(events_symbols[0]);
