/*
 * os.c -- the OS layer: the only code in pinheap that calls mmap, munmap,
 * madvise or mremap, and the one place every release is reported; also the
 * one reader of /proc/self/maps (os_maps_walk: hooks/events.c, hooks/files.c,
 * shm.c).
 *
 * Memory comes from anonymous private mappings only (brk belongs to glibc);
 * the shared heap's region is mapped by shm.c, and os_release_shared()
 * gives back the pages of its free space.
 * No mapping carries MAP_NORESERVE: memory is charged to the commit limit
 * when it is made writable, so a request the kernel would not back (4 TiB
 * on a 24 GiB machine, or past the limit under strict overcommit) is
 * refused now, with NULL, as glibc refuses it -- not granted and paid for
 * later by the OOM killer.  Address space that is not memory (the reserve
 * after a segment, the owner maps) is mapped inaccessible or read-only,
 * which no overcommit mode charges, and opened (made writable, charged)
 * as it is used.
 * The kernel is entered with raw syscalls, so that pinheap's own munmap
 * interposers (hooks/) never see -- and never report twice -- a release
 * that os_release() has already reported; releases go through the kernel
 * table the hooks layer may set (os_set_kernel), which passes them through
 * another code patcher's hook on libc when there is one.  Main entry points:
 * os_map_aligned(), os_release().  The contract is written in os.h.
 * Besides the release listener, a map listener (hooks/events.c's
 * VM_MAPPED) hears of every mapping handed to the allocator, after it is
 * made; the metadata reservations, never released, are not reported.
 */
#include "allocator/os/os.h"
#include "allocator/base/startup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Linux 5.14; refused before (the pages then come by faults) */
#define OS_MADV_POPULATE_WRITE 23

/* The kernel, by raw system call: pinheap's own interposers (hooks/) never
 * see these.  Under ThreadSanitizer, mmap and munmap go through TSan's own
 * handlers (its __interceptor_ names, which no interposer of the program
 * stands in front of), so that TSan forgets what it knew of an unmapped
 * range when the address is mapped again. */
#define os_sys(name) os_raw_##name
#if defined(__SANITIZE_THREAD__)
extern void *__interceptor_mmap(void *addr, size_t len, int prot, int flags, int fd, long off);
extern int __interceptor_munmap(void *addr, size_t len);
#define os_raw_mmap __interceptor_mmap
#define os_raw_munmap __interceptor_munmap
#else
static void *os_raw_mmap(void *addr, size_t len, int prot, int flags, int fd, long off)
{
  return (void *)ph_syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}
static int os_raw_munmap(void *addr, size_t len) { return (int)ph_syscall(SYS_munmap, addr, len); }
#endif
static int os_raw_madvise(void *addr, size_t len, int advice)
{
  return (int)ph_syscall(SYS_madvise, addr, len, advice);
}
static void *os_raw_mremap(void *addr, size_t oldlen, size_t newlen, int flags, void *to)
{
  return (void *)ph_syscall(SYS_mremap, addr, oldlen, newlen, flags, to);
}

/* The kernel as the hooks layer wants it entered for releases (NULL: the
 * raw calls above). */
static const os_kernel_t *_Atomic os_kernel;

PH_HOT static int os_kernel_munmap(void *addr, size_t len)
{
#if !defined(__SANITIZE_THREAD__)
  const os_kernel_t *k = atomic_load_explicit(&os_kernel, memory_order_acquire);
  if (k != NULL)
    return k->munmap(addr, len);
#endif
  return os_raw_munmap(addr, len);
}

PH_HOT static int os_kernel_madvise(void *addr, size_t len, int advice)
{
  const os_kernel_t *k = atomic_load_explicit(&os_kernel, memory_order_acquire);
  return k != NULL ? k->madvise(addr, len, advice) : os_raw_madvise(addr, len, advice);
}

PH_HOT static void *os_kernel_mremap(void *addr, size_t oldlen, size_t newlen, int flags, void *to)
{
  const os_kernel_t *k = atomic_load_explicit(&os_kernel, memory_order_acquire);
  return k != NULL ? k->mremap(addr, oldlen, newlen, flags, to)
                   : os_raw_mremap(addr, oldlen, newlen, flags, to);
}

PH_HOT void os_set_kernel(const os_kernel_t *k)
{
  atomic_store_explicit(&os_kernel, k, memory_order_release);
}

static size_t os_page;  /* set once by os_page_size(); read and set whole */

static _Atomic(os_release_fn *) os_listener;
static void *_Atomic os_listener_ctx;
static _Atomic(os_release_fn *) os_map_listener;   /* new mappings (VM_MAPPED) */
static void *_Atomic os_map_listener_ctx;

static _Atomic size_t os_mapped, os_peak_mapped, os_map_calls,
    os_release_calls, os_decommit_calls, os_released_bytes;

PH_HOT size_t os_page_size(void)
{
  size_t page = __atomic_load_n(&os_page, __ATOMIC_RELAXED);
  if (ph_unlikely(page == 0)) {
    unsigned long p = getauxval(AT_PAGESZ);   /* no sysconf: small and early-safe */
    page = p > 0 ? (size_t)p : 4096;
    __atomic_store_n(&os_page, page, __ATOMIC_RELAXED);
  }
  return page;
}

PH_HOT static void os_count_mapped(size_t size)
{
  size_t now = atomic_fetch_add_explicit(&os_mapped, size, memory_order_relaxed) + size;
  size_t peak = atomic_load_explicit(&os_peak_mapped, memory_order_relaxed);

  while (now > peak &&
         !atomic_compare_exchange_weak_explicit(&os_peak_mapped, &peak, now,
                                                memory_order_relaxed, memory_order_relaxed))
    ;
  atomic_fetch_add_explicit(&os_map_calls, 1, memory_order_relaxed);
}

/* Reports [addr, addr+len) to the listener before it leaves the process. */
PH_WARM static void os_notify(void *addr, size_t len)
{
  os_release_fn *fn = atomic_load_explicit(&os_listener, memory_order_acquire);

  if (fn != NULL)
    fn(addr, len, atomic_load_explicit(&os_listener_ctx, memory_order_relaxed));
}

/* Reports a new mapping [addr, addr+len): one load when no listener is set. */
static void os_notify_mapped(void *addr, size_t len)
{
  os_release_fn *fn = atomic_load_explicit(&os_map_listener, memory_order_acquire);

  if (fn != NULL)
    fn(addr, len, atomic_load_explicit(&os_map_listener_ctx, memory_order_relaxed));
}

static void *os_sys_mmap_prot(void *hint, size_t size, int prot)
{
  long r = (long)os_sys(mmap)(hint, size, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
  return r == -1 ? NULL : (void *)r;
}

PH_HOT static void os_sys_munmap(void *addr, size_t len)
{
  if (os_kernel_munmap(addr, len) != 0)
    ph_fatal("munmap", "the kernel refused to unmap a pinheap range at", addr);
}

/* The two metadata reservations: not counted in the statistics, never
 * released.  An error other than ENOMEM/EAGAIN is a bug, as in
 * os_map_aligned(). */
static void *os_reserve_prot(size_t size, int prot)
{
  int saved = errno;
  void *p = os_sys_mmap_prot(NULL, size, prot);

  if (p == NULL && errno != ENOMEM && errno != EAGAIN)
    ph_fatal("mmap", "unexpected error reserving metadata, size", (void *)size);
  errno = saved;
  return p;
}

PH_HOT void *os_reserve_meta(size_t size)
{
  return os_reserve_prot(size, PROT_READ | PROT_WRITE);
}

PH_HOT void *os_reserve_readonly(size_t size)
{
  return os_reserve_prot(size, PROT_READ);
}

/* Maps size + align bytes and cuts them to the size bytes on an align
 * boundary.  The cut ends were never handed out, but they are releases
 * like any other and are reported.  @return the aligned part, or NULL. */
PH_STARTUP static void *os_map_over_aligned(size_t size, size_t align, int prot)
{
  char *p = os_sys_mmap_prot(NULL, size + align, prot);

  if (p == NULL)
    return NULL;
  uintptr_t aligned = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
  size_t head = aligned - (uintptr_t)p, tail = align - head;
  if (head != 0) {
    os_notify(p, head);
    os_sys_munmap(p, head);
  }
  if (tail != 0) {
    os_notify((void *)(aligned + size), tail);
    os_sys_munmap((void *)(aligned + size), tail);
  }
  return (void *)aligned;
}

/* As os_map_aligned, with prot for the whole mapping. */
PH_HOT static void *os_map_aligned_prot(void *hint, size_t size, size_t align, int prot)
{
  int saved = errno;
  void *p = os_sys_mmap_prot(hint, size, prot);

  if (p == NULL) {
    errno = saved;
    return NULL;
  }
  if (((uintptr_t)p & (align - 1)) != 0) {
    /* Over-map and trim both ends.  The trimmed pieces were never handed
     * out, but they are releases like any other and are reported. */
    os_notify(p, size);
    os_sys_munmap(p, size);
    p = os_map_over_aligned(size, align, prot);
    if (p == NULL) {
      errno = saved;
      return NULL;
    }
  }
  errno = saved;
  os_count_mapped(size);
  os_notify_mapped(p, size);
  return p;
}

void *os_map_aligned(void *hint, size_t size, size_t align)
{
  return os_map_aligned_prot(hint, size, align, PROT_READ | PROT_WRITE);
}

PH_HOT void *os_map_reserved(void *hint, size_t size, size_t reserve, size_t align)
{
  char *p = os_map_aligned_prot(hint, size + reserve, align, PROT_NONE);

  if (p != NULL && os_open(p, size) != 0) {
    os_release(p, size + reserve);
    return NULL;
  }
  return p;
}

PH_HOT int os_open(void *addr, size_t len)
{
  int saved = errno;
  long r = ph_syscall(SYS_mprotect, addr, len, PROT_READ | PROT_WRITE);

  if (r != 0 && errno != ENOMEM && errno != EAGAIN)
    ph_fatal("mprotect", "unexpected error opening reserved memory at", addr);
  errno = saved;
  return r == 0 ? 0 : -1;
}

PH_HOT void os_release(void *addr, size_t len)
{
  int saved = errno;

  os_notify(addr, len);
  os_sys_munmap(addr, len);
  atomic_fetch_sub_explicit(&os_mapped, len, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_release_calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_released_bytes, len, memory_order_relaxed);
  errno = saved;
}

void os_decommit(void *addr, size_t len)
{
  int saved = errno;

  os_notify(addr, len);
  if (os_kernel_madvise(addr, len, MADV_DONTNEED) != 0)
    ph_warn("madvise(MADV_DONTNEED) failed on a pinheap range; memory stays committed", NULL);
  atomic_fetch_add_explicit(&os_decommit_calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_released_bytes, len, memory_order_relaxed);
  errno = saved;
}

static atomic_flag os_remove_said = ATOMIC_FLAG_INIT;

void os_release_shared(void *addr, size_t len, bool remove)
{
  int saved = errno;

  os_notify(addr, len);
  if (!remove)                  /* another process gives them back: heard only */
    return;
  /* MADV_DONTNEED would only drop this process's page table entries: the
   * pages stay in the object.  MADV_REMOVE punches them out of it. */
  if (os_kernel_madvise(addr, len, MADV_REMOVE) != 0) {
    if (!atomic_flag_test_and_set(&os_remove_said)) {
      char num[24];
      ph_warn("madvise(MADV_REMOVE) failed on the shared heap's region (errno ",
              ph_fmt_dec(num, (uint64_t)errno),
              "); its free pages stay in the shared object from now on", NULL);
    }
  } else {
    atomic_fetch_add_explicit(&os_decommit_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&os_released_bytes, len, memory_order_relaxed);
  }
  errno = saved;
}

int os_remap(void *addr, size_t oldlen, size_t newlen)
{
  int saved = errno;
  long r;

  if (newlen == oldlen)
    return 0;
  if (newlen < oldlen)
    os_notify((char *)addr + newlen, oldlen - newlen);
  r = (long)os_kernel_mremap(addr, oldlen, newlen, 0 /* never move */, NULL);
  if (r == -1) {
    errno = saved;
    if (newlen < oldlen)  /* shrinking in place cannot fail on a valid range */
      ph_fatal("mremap", "the kernel refused to shrink a pinheap range at", addr);
    return -1;
  }
  if (newlen > oldlen) {
    os_count_mapped(newlen - oldlen);
    os_notify_mapped((char *)addr + oldlen, newlen - oldlen);
  } else {
    atomic_fetch_sub_explicit(&os_mapped, oldlen - newlen, memory_order_relaxed);
    atomic_fetch_add_explicit(&os_release_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&os_released_bytes, oldlen - newlen, memory_order_relaxed);
  }
  errno = saved;
  return 0;
}

/* A moving mremap's destination: len bytes of address space aligned to
 * align, which os_move_to() moves a mapping over.  Mapped writable, so that
 * the commit charge is taken here: a move the kernel would not back fails
 * now, before the listener is told of a release that would not happen (no
 * page of it is touched: it costs no memory).  First exactly len bytes,
 * which the kernel places aligned whenever the mapping it puts them below
 * starts on a granule (pinheap's own do): then nothing is cut and the move
 * is heard as one release, the old range.  Else len + align bytes, cut to
 * the aligned part; the unaligned try and the cut ends were never handed
 * out, but they are releases like any other and are reported (as
 * os_map_aligned reports its trims).  @return the reservation, or NULL
 * (errno untouched). */
void *os_move_reserve(size_t len, size_t align)
{
  int saved = errno;
  char *r = os_sys_mmap_prot(NULL, len, PROT_READ | PROT_WRITE);

  if (r != NULL && ((uintptr_t)r & (align - 1)) != 0) {
    os_notify(r, len);
    os_sys_munmap(r, len);
    r = os_map_over_aligned(len, align, PROT_READ | PROT_WRITE);
  }
  errno = saved;
  return r;
}

/* Gives back a reservation of os_move_reserve() that no mapping was moved
 * over (reported, as every release). */
void os_move_cancel(void *to, size_t len)
{
  int saved = errno;

  os_notify(to, len);
  os_sys_munmap(to, len);
  errno = saved;
}

/* Moves the mapping [addr, addr+oldlen) over the reservation [to,
 * to+newlen) (os_move_reserve), resized to newlen bytes: mremap moves the
 * page tables, so the pages keep their frames and nothing is copied.  The
 * old range leaves the process: the release listener hears exactly it,
 * first; the map listener hears of the new range after.  @return 0, or -1
 * if the kernel refused (the old mapping stays as it was; the reservation
 * stays too, for the caller to cancel once nothing points at it). */
int os_move_to(void *addr, size_t oldlen, size_t newlen, void *to)
{
  int saved = errno;

  os_notify(addr, oldlen);
  long m = (long)os_kernel_mremap(addr, oldlen, newlen, MREMAP_MAYMOVE | MREMAP_FIXED, to);
  /* A range made of several mappings (huge_cache_fill moved pages into it)
   * cannot be resized by mremap (EFAULT); since Linux 6.17 it can still be
   * moved whole at its size, and the reservation's rest stays as it was:
   * untouched, zero pages -- the same result for a grown free mapping, and
   * the same count (the old range leaves, newlen bytes stay). */
  if (m == -1 && newlen > oldlen)
    m = (long)os_kernel_mremap(addr, oldlen, oldlen, MREMAP_MAYMOVE | MREMAP_FIXED, to);
  if (m == -1) {
    errno = saved;
    return -1;
  }
  if (newlen >= oldlen)
    os_count_mapped(newlen - oldlen);
  else
    atomic_fetch_sub_explicit(&os_mapped, oldlen - newlen, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_release_calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_released_bytes, oldlen, memory_order_relaxed);
  os_notify_mapped(to, newlen);
  errno = saved;
  return 0;
}

/* Moves the pages of [addr, addr+len) over [to, to+len), a part of one of
 * pinheap's mappings that holds no block and was never touched (the grown
 * part of a freed huge mapping about to be handed out): mremap moves the
 * page tables, nothing is copied or faulted.  The old range leaves the
 * process: the release listener hears exactly it, first.  Not told to the
 * map listener: the destination was mapped and heard of before.  @return
 * 0, or -1 if the kernel refused (nothing moved). */
int os_move_into(void *addr, size_t len, void *to)
{
  int saved = errno;

  os_notify(addr, len);
  long m = (long)os_kernel_mremap(addr, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
  if (m == -1) {
    errno = saved;
    return -1;
  }
  atomic_fetch_sub_explicit(&os_mapped, len, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_release_calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_released_bytes, len, memory_order_relaxed);
  errno = saved;
  return 0;
}

/* mincore, up to OS_MINCORE_PIECE pages a call (one byte a page on the
 * stack): a read of the page tables, no flush, no fault; stops once the
 * answer is known. */
#define OS_MINCORE_PIECE 1024u
bool os_resident_at_least(const void *addr, size_t len, size_t want)
{
  unsigned char vec[OS_MINCORE_PIECE];
  size_t page = os_page_size(), have = 0;
  int saved = errno;

  for (size_t off = 0; off + page <= len && have < want && have + (len - off) >= want;) {
    size_t pages = (len - off) / page;
    if (pages > OS_MINCORE_PIECE)
      pages = OS_MINCORE_PIECE;
    if (ph_syscall(SYS_mincore, (const char *)addr + off, pages * page, vec) != 0) {
      errno = saved;
      return true;                         /* not known: taken as resident */
    }
    for (size_t i = 0; i < pages; i++)
      have += (vec[i] & 1) * page;
    off += pages * page;
  }
  errno = saved;
  return have >= want;
}

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000   /* Linux 4.17 */
#endif

/* Maps [at, at+len) writable if that address space is free (one mmap with
 * MAP_FIXED_NOREPLACE; a kernel that takes the flag for a hint and maps
 * elsewhere has that mapping given back, reported).  @return whether it
 * is mapped there. */
static bool os_map_exactly(char *at, size_t len)
{
  long r = (long)os_sys(mmap)(at, len, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0L);
  if (r == -1)
    return false;
  if ((char *)r != at) {
    os_notify((void *)r, len);
    os_sys_munmap((void *)r, len);
    return false;
  }
  return true;
}

/* Grows the mapping [addr, addr+oldlen), whose contents do not matter (a
 * freed huge mapping), to newlen bytes keeping its resident pages where
 * they are: the missing part is mapped right after it, else right before
 * it (mmap places mappings top-down, so the address space below the
 * lowest ones is free), with the base moved down by newlen - oldlen (a
 * multiple of align: the base stays aligned).  Nothing moves, nothing is
 * flushed: the new part is fresh, untouched address space.  Works on a
 * range made of several kernel mappings, which mremap cannot resize.
 * @return the new base (addr, or below it), or NULL (nothing changed). */
static void *os_grow_beside(void *addr, size_t oldlen, size_t newlen, size_t align)
{
  int saved = errno;
  size_t more = newlen - oldlen;
  char *p = addr, *r = NULL;

  if ((more & (align - 1)) == 0 && (uintptr_t)p > more) {
    if (os_map_exactly(p + oldlen, more))
      r = p;
    else if (os_map_exactly(p - more, more))
      r = p - more;
  }
  if (r != NULL) {
    os_count_mapped(more);
    os_notify_mapped(r == p ? p + oldlen : r, more);
  }
  errno = saved;
  return r;
}

/* Grows the mapping [addr, addr+oldlen), whose contents do not matter (a
 * freed huge mapping), to newlen bytes aligned to align, keeping its
 * resident pages: where they are if the address space beside it is free
 * (os_grow_beside), else moved (os_move_to) into a fresh aligned
 * reservation. */
void *os_grow_move(void *addr, size_t oldlen, size_t newlen, size_t align)
{
  char *to = os_grow_beside(addr, oldlen, newlen, align);
  if (to != NULL)
    return to;
  to = os_move_reserve(newlen, align);
  if (to == NULL)
    return NULL;
  if (os_move_to(addr, oldlen, newlen, to) != 0) {
    os_move_cancel(to, newlen);
    return NULL;
  }
  return to;
}

/* ---- the shared heap's region: mapped here, never reported ---------------
 * The region's own mappings (shm_start.c, shm_fork.c) go through these
 * four, so that os.c stays the one place the allocator maps and unmaps.
 * None is heard by the release or the map listener, by design: each maps
 * or unmaps memory that holds no block handed out -- the address range
 * reserved and the object mapped over it at start-up (no block yet), the
 * header mapped while joining, a region given up by a failed start-up,
 * fork's private snapshot -- or moves the child's copy over the region
 * inside fork, with every heap lock held, before fork returns in the child
 * (no code of the child has run to register anything, and a listener may
 * not be called with the heap locks held).  The pages of the region's free
 * space go through os_release_shared(), reported.  Counted apart
 * (os_stats_t.region_calls). */
static _Atomic size_t os_region_calls;

static void os_region_count(void)
{
  atomic_fetch_add_explicit(&os_region_calls, 1, memory_order_relaxed);
}

void *os_region_map(void *addr, size_t len, int prot, int flags, int fd)
{
  os_region_count();
  long r = ph_syscall(SYS_mmap, addr, len, prot, flags, fd, 0L);
  return r == -1 ? MAP_FAILED : (void *)r;
}

void os_region_unmap(void *addr, size_t len)
{
  os_region_count();
  ph_syscall(SYS_munmap, addr, len);
}

bool os_region_move(void *from, size_t len, void *to)
{
  os_region_count();
  return ph_syscall(SYS_mremap, from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to) ==
         (long)(uintptr_t)to;
}

void os_region_populate(void *addr, size_t len)
{
  ph_syscall(SYS_madvise, addr, len, OS_MADV_POPULATE_WRITE);
}

PH_HOT void os_set_release_listener(os_release_fn *fn, void *ctx)
{
  atomic_store_explicit(&os_listener_ctx, ctx, memory_order_relaxed);
  atomic_store_explicit(&os_listener, fn, memory_order_release);
}

PH_HOT void os_set_map_listener(os_release_fn *fn, void *ctx)
{
  atomic_store_explicit(&os_map_listener_ctx, ctx, memory_order_relaxed);
  atomic_store_explicit(&os_map_listener, fn, memory_order_release);
}

void os_stats_get(os_stats_t *out_p)
{
  out_p->mapped = atomic_load_explicit(&os_mapped, memory_order_relaxed);
  out_p->peak_mapped = atomic_load_explicit(&os_peak_mapped, memory_order_relaxed);
  out_p->map_calls = atomic_load_explicit(&os_map_calls, memory_order_relaxed);
  out_p->release_calls = atomic_load_explicit(&os_release_calls, memory_order_relaxed);
  out_p->decommit_calls = atomic_load_explicit(&os_decommit_calls, memory_order_relaxed);
  out_p->released_bytes = atomic_load_explicit(&os_released_bytes, memory_order_relaxed);
  out_p->region_calls = atomic_load_explicit(&os_region_calls, memory_order_relaxed);
}

/* ---- /proc/self/maps, read without allocating ----------------------------- */

/* The number in [*c, end) in base (16 or 10), up to the first character
 * that is not a digit of it; *c left there. */
static uint64_t os_maps_num(const char **c, const char *end, unsigned base)
{
  uint64_t v = 0;
  for (; *c < end; (*c)++) {
    unsigned ch = (unsigned char)**c, d;
    if (ch >= '0' && ch <= '9')
      d = ch - '0';
    else if (base == 16 && (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
      d = (ch | 0x20) - 'a' + 10;
    else
      break;
    v = v * base + d;
  }
  return v;
}

/* Parses "lo-hi perms offset major:minor inode [path]" from [c, end): the
 * fields come first, so a line cut after them (a long path) still parses. */
static void os_maps_parse(const char *c, const char *end, os_map_t *m)
{
  m->line = c;
  m->line_len = (size_t)(end - c);
  m->lo = (uintptr_t)os_maps_num(&c, end, 16);
  c += c < end;                                   /* '-' */
  m->hi = (uintptr_t)os_maps_num(&c, end, 16);
  while (c < end && *c == ' ')
    c++;
  while (c < end && *c != ' ')                    /* perms */
    c++;
  c += c < end;
  m->offset = os_maps_num(&c, end, 16);
  c += c < end;
  m->dev_major = (unsigned)os_maps_num(&c, end, 16);
  c += c < end;                                   /* ':' */
  m->dev_minor = (unsigned)os_maps_num(&c, end, 16);
  c += c < end;
  m->inode = os_maps_num(&c, end, 10);
  while (c < end && *c == ' ')
    c++;
  m->path = c;                                    /* (cut, in a line cut short) */
  m->path_len = (size_t)(end - c);
}

int os_maps_walk(int (*fn)(const os_map_t *m, void *ctx), void *ctx)
{
  char buf[4096];
  size_t have = 0;
  int saved = errno, stop = 0;
  bool skipping = false;         /* inside a line longer than buf, parsed already */
  int fd = (int)ph_syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);

  if (fd < 0) {
    errno = saved;
    return -1;
  }
  while (!stop) {
    ssize_t n = ph_syscall(SYS_read, fd, buf + have, sizeof(buf) - have);
    if (n <= 0)
      break;
    have += (size_t)n;
    size_t start = 0;
    for (size_t i = 0; i < have && !stop; i++) {
      if (buf[i] != '\n')
        continue;
      if (!skipping) {
        os_map_t m;
        os_maps_parse(buf + start, buf + i, &m);
        stop = fn(&m, ctx);
      }
      skipping = false;
      start = i + 1;
    }
    if (start == 0 && have == sizeof(buf)) {
      /* one line fills the buffer: its fields are at its start */
      if (!skipping) {
        os_map_t m;
        os_maps_parse(buf, buf + have, &m);
        stop = fn(&m, ctx);
      }
      skipping = true;
      start = have;
    }
    memmove(buf, buf + start, have - start);
    have -= start;
  }
  ph_syscall(SYS_close, fd);
  errno = saved;
  return 0;
}
