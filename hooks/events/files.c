/*
 * files.c -- pages that leave the process through a file, and syscall().
 * Main entry points: files_fallocate, files_ftruncate, files_truncate and
 * files_syscall (events.h), which replace.c's fallocate, ftruncate,
 * truncate and syscall call.
 *
 * A page of a file mapping (MAP_SHARED, or MAP_PRIVATE not yet copied on
 * write) is the file's page-cache page: the kernel takes it out of every
 * mapping of the file when the file loses that range.  fallocate's
 * PUNCH_HOLE and ZERO_RANGE drop the whole pages inside the range (a
 * partial page is zeroed in place, its frame kept); COLLAPSE_RANGE and
 * INSERT_RANGE shift the file's contents, so every page from the range's
 * start on goes; ftruncate and truncate to a smaller size drop every page
 * past the new end.  Measured on 6.18 (frames read from /proc/self/pagemap
 * before and after): ext4 zaps mapped pages for all four fallocate modes;
 * shmem (memfd, /dev/shm) supports only PUNCH_HOLE and refuses the others
 * with EOPNOTSUPP.  A mode is reported by what it does, not by where it
 * succeeds: an event before a call that fails is spurious, never missed.
 *
 * Which mappings.  The file is fstat'ed (stat'ed for truncate); every line
 * of /proc/self/maps with its device and inode whose file range meets the
 * released range gets VM_UNMAPPED (source APP) for that part, page-rounded,
 * before the call.  Where no mapping shows the file's device but some show
 * its inode (overlayfs and btrfs report st_dev other than the device
 * /proc/self/maps names), those are reported: a spurious event is harmless,
 * a missed one leaves a stale registration.
 *
 * Cost.  Nothing is read unless a VM_UNMAPPED handler is registered: the
 * call is then one load and the system call.  With one, a releasing call
 * costs an fstat and a read of /proc/self/maps (no allocation: 4 KiB of
 * stack); a call that cannot release (fallocate that only allocates,
 * ftruncate that grows) costs the fstat only.
 *
 * syscall().  The memory numbers (files_syscall_is_memory: mmap, munmap,
 * mremap, madvise, brk, shmat, shmdt and the three above) go to the same
 * entry points as the libc calls, so syscall(SYS_munmap, ...) fires what
 * munmap fires; every other number is the system call, with glibc's
 * convention (-1 and errno for -4095..-1).  pinheap's own system calls use
 * ph_syscall (allocator/base/raw_syscall.h), never this.
 */
#include "hooks/events/events.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>

#include "pinheap.h"

#define FILES_TO_END UINT64_MAX

/* fallocate modes whose range drops pages where they succeed; the newer
 * WRITE_ZEROES (Linux 6.17) zeroes the range as ZERO_RANGE does. */
#ifndef FALLOC_FL_WRITE_ZEROES
#define FALLOC_FL_WRITE_ZEROES 0x80
#endif
#define FILES_DROP_INSIDE (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_WRITE_ZEROES)
#define FILES_DROP_TO_END (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE)

typedef struct files_walk_s {
  unsigned dev_major, dev_minor;
  uint64_t inode;
  uint64_t from, to;          /* the released file range, whole pages */
  bool other_dev;             /* this pass: the inode on another device */
  unsigned same, other;       /* mappings met on the file's device, on others */
} files_walk_t;

/* One mapping: VM_UNMAPPED for the part of it backed by [from, to). */
static int files_walk_one(const os_map_t *m, void *ctx)
{
  files_walk_t *w = ctx;
  if (m->inode != w->inode || m->hi <= m->lo)
    return 0;
  bool same = m->dev_major == w->dev_major && m->dev_minor == w->dev_minor;
  w->same += same;
  w->other += !same;
  if (same == w->other_dev)
    return 0;
  uint64_t len = m->hi - m->lo;
  uint64_t end = m->offset > UINT64_MAX - len ? UINT64_MAX : m->offset + len;
  uint64_t lo = m->offset > w->from ? m->offset : w->from;
  uint64_t hi = end < w->to ? end : w->to;
  if (lo < hi)
    events_vm_unmapped((void *)(m->lo + (uintptr_t)(lo - m->offset)), (size_t)(hi - lo),
                       PINHEAP_EVENT_SOURCE_APP);
  return 0;
}

/* Reports the pages of every mapping of the file st describes that are
 * backed by its range [from, to) (page-aligned). */
static void files_release(const struct stat *st, uint64_t from, uint64_t to)
{
  files_walk_t w = { major(st->st_dev), minor(st->st_dev), (uint64_t)st->st_ino, from, to,
                     false, 0, 0 };
  if (from >= to || w.inode == 0)
    return;
  os_maps_walk(files_walk_one, &w);
  if (w.same == 0 && w.other > 0) {
    w.other_dev = true;
    os_maps_walk(files_walk_one, &w);
  }
}

static uint64_t files_page_up(uint64_t v)
{
  uint64_t page = os_page_size();
  return v > UINT64_MAX - (page - 1) ? FILES_TO_END : (v + page - 1) & ~(page - 1);
}

static uint64_t files_page_down(uint64_t v)
{
  return v & ~(uint64_t)(os_page_size() - 1);
}

/* ---- fallocate ----------------------------------------------------------- */

static PH_NOINLINE void files_fallocate_report(int fd, int mode, off_t offset, off_t len)
{
  struct stat st;
  int saved = errno;

  if (offset < 0 || len <= 0 || fstat(fd, &st) != 0) {
    errno = saved;             /* the kernel refuses the call the same way */
    return;
  }
  uint64_t start = (uint64_t)offset;
  uint64_t end = (uint64_t)len > UINT64_MAX - start ? FILES_TO_END : start + (uint64_t)len;
  if (mode & FILES_DROP_TO_END)
    files_release(&st, files_page_down(start), FILES_TO_END);
  else
    files_release(&st, files_page_up(start), files_page_down(end));
  errno = saved;
}

PH_HOT int files_fallocate(int fd, int mode, off_t offset, off_t len)
{
  if (ph_unlikely((mode & (FILES_DROP_INSIDE | FILES_DROP_TO_END)) != 0 &&
                  events_wanted(PINHEAP_EVENT_VM_UNMAPPED)))
    files_fallocate_report(fd, mode, offset, len);
  return (int)ph_syscall(SYS_fallocate, fd, mode, offset, len);
}

/* ---- ftruncate, truncate ------------------------------------------------- */

/* The file st describes shrinks to length: every page past it goes. */
static void files_shrink_report(const struct stat *st, off_t length)
{
  if (length < 0 || length >= st->st_size)
    return;                    /* refused, or nothing is cut */
  files_release(st, files_page_up((uint64_t)length), FILES_TO_END);
}

static PH_NOINLINE void files_ftruncate_report(int fd, off_t length)
{
  struct stat st;
  int saved = errno;
  if (fstat(fd, &st) == 0)
    files_shrink_report(&st, length);
  errno = saved;
}

PH_HOT int files_ftruncate(int fd, off_t length)
{
  if (ph_unlikely(events_wanted(PINHEAP_EVENT_VM_UNMAPPED)))
    files_ftruncate_report(fd, length);
  return (int)ph_syscall(SYS_ftruncate, fd, length);
}

static PH_NOINLINE void files_truncate_report(const char *path, off_t length)
{
  struct stat st;
  int saved = errno;
  if (path != NULL && stat(path, &st) == 0)
    files_shrink_report(&st, length);
  errno = saved;
}

PH_HOT int files_truncate(const char *path, off_t length)
{
  if (ph_unlikely(events_wanted(PINHEAP_EVENT_VM_UNMAPPED)))
    files_truncate_report(path, length);
  return (int)ph_syscall(SYS_truncate, path, length);
}

/* ---- syscall() ----------------------------------------------------------- */
#if PH_RAW_SYSCALL

PH_HOT long files_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
  switch (nr) {
  case SYS_mmap:
    return (long)events_mmap((void *)a, (size_t)b, (int)c, (int)d, (int)e, (off_t)f);
  case SYS_munmap:
    return events_munmap((void *)a, (size_t)b);
  case SYS_mremap:
    return (long)events_mremap((void *)a, (size_t)b, (size_t)c, (int)d, (void *)e);
  case SYS_madvise:
    return events_madvise((void *)a, (size_t)b, (int)c);
  case SYS_brk:
    return (long)events_brk_syscall((void *)a);
  case SYS_shmat:
    return (long)events_shmat((int)a, (const void *)b, (int)c);
  case SYS_shmdt:
    return events_shmdt((const void *)a);
  case SYS_fallocate:
    return files_fallocate((int)a, (int)b, (off_t)c, (off_t)d);
  case SYS_ftruncate:
    return files_ftruncate((int)a, (off_t)b);
  case SYS_truncate:
    return files_truncate((const char *)a, (off_t)b);
  default:
    return ph_syscall(nr, a, b, c, d, e, f);
  }
}
#endif /* PH_RAW_SYSCALL */
