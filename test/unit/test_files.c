/*
 * test_files.c -- pages that leave through a file, and syscall()
 * (hooks/files.c), end to end, in a process whose fallocate, ftruncate,
 * truncate and syscall are pinheap's interposers (this executable holds
 * libpinheap.a whole and exports its symbols, as test_events does).
 *
 * Each call is made for real on a file mapped in this process (a memfd,
 * or a file on the build directory's file system where a fallocate mode
 * needs one): VM_UNMAPPED must name exactly the pages of every mapping the
 * call takes out, and come before them (the handler reads them while they
 * still hold the file's bytes).  syscall() with a memory number must fire
 * what the libc call fires; with any other number it is glibc's.
 * Skips (with the reason) when interposition did not take.
 *
 * Main entry point: rec.h's rec_handler() and the rec_* queries.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pinheap.h"

static size_t page;

static void interposed_or_skip(void)
{
  page = (size_t)sysconf(_SC_PAGESIZE);
  pinheap_install_info_t ii;
  for (unsigned i = 0; PINHEAP_NAME(install_info)(i, &ii) == 0; i++) {
    if (strcmp(ii.symbol, "syscall") != 0 && strcmp(ii.symbol, "fallocate") != 0 &&
        strcmp(ii.symbol, "ftruncate") != 0 && strcmp(ii.symbol, "truncate") != 0)
      continue;
    if (ii.method != PINHEAP_INSTALL_INTERPOSE)
      cr_skip_test("interposition did not take for %s (method %d): %s", ii.symbol, ii.method,
                   PINHEAP_NAME(install_text)());
  }
}

/* ---- the recording handler (never allocates): rec.h --------------------- */
#include "rec.h"

/* The VM_UNMAPPED record of source APP for exactly [addr, addr+len), or NULL. */
static const rec_t *rec_unmapped(const void *addr, size_t len)
{
  for (int i = 0; i < rec_n(); i++) {
    const rec_t *r = &rec_log[i];
    if (r->type == PINHEAP_EVENT_VM_UNMAPPED && r->ev.vm_unmapped.address == addr &&
        r->ev.vm_unmapped.size == len && r->ev.vm_unmapped.source == PINHEAP_EVENT_SOURCE_APP)
      return r;
  }
  return NULL;
}

/* VM_UNMAPPED events of source APP that meet [addr, addr+len). */
static int rec_unmapped_in(const void *addr, size_t len)
{
  int hits = 0;
  for (int i = 0; i < rec_n(); i++) {
    const rec_t *r = &rec_log[i];
    const char *a = r->ev.vm_unmapped.address;
    if (r->type == PINHEAP_EVENT_VM_UNMAPPED && r->ev.vm_unmapped.source == PINHEAP_EVENT_SOURCE_APP &&
        a < (const char *)addr + len && a + r->ev.vm_unmapped.size > (const char *)addr)
      hits++;
  }
  return hits;
}

static int rec_calls(int type)
{
  int hits = 0;
  for (int i = 0; i < rec_n(); i++)
    hits += rec_log[i].type == type;
  return hits;
}

/* Expects exactly [addr, addr+len) reported, while it still held byte. */
static void expect_unmapped(const char *what, const void *addr, size_t len, int byte)
{
  const rec_t *r = rec_unmapped(addr, len);
  cr_assert(r != NULL, "%s: no VM_UNMAPPED for [%p, +%#zx) (%d events)", what, addr, len, rec_n());
  if (byte >= 0)
    cr_assert_eq(r->first_byte, byte, "%s: the handler read %d, not the file's %d: the pages "
                 "were gone before the event", what, r->first_byte, byte);
}

/* ---- files --------------------------------------------------------------- */

/* A memfd of n pages, each byte 0x5a. */
static int memfd_pages(size_t n)
{
  int fd = memfd_create("test_files", MFD_CLOEXEC);
  cr_assert(fd >= 0, "memfd_create: %s", strerror(errno));
  cr_assert_eq(ftruncate(fd, (off_t)(n * page)), 0);
  char *m = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  cr_assert(m != MAP_FAILED);
  memset(m, 0x5a, n * page);
  munmap(m, n * page);
  return fd;
}

/* A file of n pages of 0x5a on the file system of the working directory
 * (the build tree: a disk file system, where fallocate's COLLAPSE_RANGE
 * and ZERO_RANGE work; tmpfs refuses them). */
static int disk_file_pages(size_t n, char *path, size_t size)
{
  snprintf(path, size, "test_files.XXXXXX");
  int fd = mkstemp(path);
  cr_assert(fd >= 0, "mkstemp: %s", strerror(errno));
  char *buf = calloc(1, page);
  memset(buf, 0x5a, page);
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(write(fd, buf, page), (ssize_t)page);
  free(buf);
  return fd;
}

static char *map_file(int fd, size_t off_pages, size_t n, int flags)
{
  char *m = mmap(NULL, n * page, PROT_READ | PROT_WRITE, flags, fd, (off_t)(off_pages * page));
  cr_assert(m != MAP_FAILED, "mmap: %s", strerror(errno));
  for (size_t i = 0; i < n; i++)
    (void)*(volatile char *)(m + i * page);        /* fault each page in */
  return m;
}

/* Records VM_UNMAPPED, reading the first byte of what is released inside
 * [lo, lo + pages) when the event comes. */
static void rec_watching(const char *lo, size_t pages, int events)
{
  rec_watch_lo = lo;
  rec_watch_hi = lo + pages * page;
  rec_start(events);
}

/* Unmaps the three mappings a test made of fd ([a, a + na pages), ...), and
 * closes it. */
static void unmap_three(int fd, char *a, size_t na, char *b, size_t nb, char *c, size_t nc)
{
  munmap(a, na * page);
  munmap(b, nb * page);
  munmap(c, nc * page);
  close(fd);
}

/* Unmaps [map, map + pages), closes fd and removes path (if not NULL). */
static void file_done(int fd, const char *path, char *map, size_t pages)
{
  munmap(map, pages * page);
  close(fd);
  if (path != NULL)
    unlink(path);
}

Test(files, punch_hole_reaches_every_mapping, .init = interposed_or_skip)
{
  int fd = memfd_pages(16);
  char *a = map_file(fd, 0, 16, MAP_SHARED);        /* file [0, 16) */
  char *b = map_file(fd, 4, 8, MAP_SHARED);         /* file [4, 12) */
  char *c = map_file(fd, 12, 4, MAP_SHARED);        /* file [12, 16): untouched */
  rec_watching(a, 16, PINHEAP_EVENT_VM_UNMAPPED);
  /* [5 pages + 100, 10 pages): the whole pages [6, 10), and the tail of
   * page 5 (zeroed in place, its frame kept) */
  cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(5 * page + 100),
                         (off_t)(5 * page - 100)), 0);
  rec_stop();
  expect_unmapped("punch hole, first mapping", a + 6 * page, 4 * page, 0x5a);
  cr_assert(rec_unmapped(b + 2 * page, 4 * page) != NULL, "punch hole, second mapping");
  cr_assert_eq(rec_unmapped_in(c, 4 * page), 0, "a mapping outside the hole was reported");
  cr_assert_eq(rec_unmapped_in(a, 6 * page) + rec_unmapped_in(a + 10 * page, 6 * page), 0,
               "pages outside the hole's whole pages were reported");
  cr_assert_eq(a[6 * page], 0, "the hole was not punched");
  unmap_three(fd, a, 16, b, 8, c, 4);
}

Test(files, private_mapping_not_yet_copied, .init = interposed_or_skip)
{
  int fd = memfd_pages(8);
  char *p = mmap(NULL, 8 * page, PROT_READ, MAP_PRIVATE, fd, 0);
  cr_assert(p != MAP_FAILED);
  cr_assert_eq(p[2 * page], 0x5a);
  rec_start(PINHEAP_EVENT_VM_UNMAPPED);
  cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(2 * page),
                         (off_t)(2 * page)), 0);
  rec_stop();
  cr_assert(rec_unmapped(p + 2 * page, 2 * page) != NULL, "private mapping of the file");
  munmap(p, 8 * page);
  close(fd);
}

Test(files, collapse_range_releases_to_the_end, .init = interposed_or_skip)
{
  char path[64];
  int fd = disk_file_pages(16, path, sizeof(path));
  char *a = map_file(fd, 0, 16, MAP_SHARED);
  char *b = map_file(fd, 0, 2, MAP_SHARED);         /* before the range: stays */
  rec_watching(a, 16, PINHEAP_EVENT_VM_UNMAPPED);
  int rc = fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, (off_t)(4 * page), (off_t)(4 * page));
  int err = errno;
  rec_stop();
  /* the event comes whether or not this file system collapses */
  expect_unmapped("collapse range", a + 4 * page, 12 * page, 0x5a);
  cr_assert_eq(rec_unmapped_in(b, 2 * page), 0);
  if (rc != 0)
    cr_log_warn("COLLAPSE_RANGE refused here (%s): the event was checked only", strerror(err));
  munmap(a, 16 * page);
  file_done(fd, path, b, 2);
}

Test(files, zero_range_releases_whole_pages, .init = interposed_or_skip)
{
  char path[64];
  int fd = disk_file_pages(8, path, sizeof(path));
  char *a = map_file(fd, 0, 8, MAP_SHARED);
  rec_watching(a, 8, PINHEAP_EVENT_VM_UNMAPPED);
  fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)(2 * page), (off_t)(3 * page));
  rec_stop();
  expect_unmapped("zero range", a + 2 * page, 3 * page, 0x5a);
  file_done(fd, path, a, 8);
}

Test(files, allocating_fallocate_releases_nothing, .init = interposed_or_skip)
{
  int fd = memfd_pages(8);
  char *a = map_file(fd, 0, 8, MAP_SHARED);
  rec_start(PINHEAP_EVENT_VM_UNMAPPED);
  cr_assert_eq(fallocate(fd, 0, 0, (off_t)(16 * page)), 0);
  cr_assert_eq(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)(32 * page)), 0);
  rec_stop();
  cr_assert_eq(rec_unmapped_in(a, 8 * page), 0);
  munmap(a, 8 * page);
  close(fd);
}

Test(files, ftruncate_shrinking, .init = interposed_or_skip)
{
  int fd = memfd_pages(16);
  char *a = map_file(fd, 0, 16, MAP_SHARED);        /* partly beyond the new end */
  char *b = map_file(fd, 12, 4, MAP_SHARED);        /* wholly beyond */
  char *c = map_file(fd, 0, 4, MAP_SHARED);         /* inside: stays */
  rec_watching(a, 16, PINHEAP_EVENT_VM_UNMAPPED);
  /* to 10 pages and a bit: page 10 keeps its frame (its tail is zeroed) */
  cr_assert_eq(ftruncate(fd, (off_t)(10 * page + 100)), 0);
  rec_stop();
  expect_unmapped("ftruncate, partly beyond", a + 11 * page, 5 * page, 0x5a);
  cr_assert(rec_unmapped(b, 4 * page) != NULL, "ftruncate, wholly beyond");
  cr_assert_eq(rec_unmapped_in(c, 4 * page), 0);
  cr_assert_eq(rec_unmapped_in(a, 11 * page), 0);
  unmap_three(fd, a, 16, b, 4, c, 4);
}

Test(files, ftruncate_growing_releases_nothing, .init = interposed_or_skip)
{
  int fd = memfd_pages(4);
  char *a = map_file(fd, 0, 4, MAP_SHARED);
  rec_start(PINHEAP_EVENT_VM_UNMAPPED);
  cr_assert_eq(ftruncate(fd, (off_t)(8 * page)), 0);
  cr_assert_eq(ftruncate(fd, (off_t)(8 * page)), 0);
  rec_stop();
  cr_assert_eq(rec_unmapped_in(a, 4 * page), 0);
  munmap(a, 4 * page);
  close(fd);
}

Test(files, truncate_path, .init = interposed_or_skip)
{
  char path[] = "/tmp/test_files.XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  cr_assert_eq(ftruncate(fd, (off_t)(8 * page)), 0);
  char *a = map_file(fd, 0, 8, MAP_SHARED);
  memset(a, 0x5a, 8 * page);
  rec_watching(a, 8, PINHEAP_EVENT_VM_UNMAPPED);
  cr_assert_eq(truncate(path, (off_t)(3 * page)), 0);
  rec_stop();
  expect_unmapped("truncate(path)", a + 3 * page, 5 * page, 0x5a);
  file_done(fd, path, a, 8);
}

Test(files, file_not_mapped, .init = interposed_or_skip)
{
  int fd = memfd_pages(8);
  rec_start(PINHEAP_EVENT_VM_UNMAPPED);
  cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)(4 * page)), 0);
  cr_assert_eq(ftruncate(fd, (off_t)page), 0);
  rec_stop();
  cr_assert_eq(rec_n(), 0, "%d events for a file mapped nowhere", rec_n());
  close(fd);
}

Test(files, errors_as_libc, .init = interposed_or_skip)
{
  rec_start(PINHEAP_EVENT_VM_UNMAPPED);
  errno = 0;
  cr_assert_eq(ftruncate(-1, 0), -1);
  cr_assert_eq(errno, EBADF);
  errno = 0;
  cr_assert_eq(fallocate(-1, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), -1);
  cr_assert_eq(errno, EBADF);
  errno = 0;
  cr_assert_eq(truncate("/nonexistent/test_files", 0), -1);
  cr_assert_eq(errno, ENOENT);
  rec_stop();
  cr_assert_eq(rec_n(), 0);
}

/* ---- syscall() ------------------------------------------------------------- */

Test(files, syscall_munmap_madvise_mremap, .init = interposed_or_skip)
{
  char *a = mmap(NULL, 32 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(a != MAP_FAILED);
  memset(a, 0x5a, 32 * page);
  rec_watching(a, 32, PINHEAP_EVENT_ALL);
  cr_assert_eq(syscall(SYS_munmap, a + 4 * page, 2 * page), 0);
  cr_assert_eq(syscall(SYS_madvise, a + 8 * page, 2 * page, MADV_DONTNEED), 0);
  cr_assert_eq(syscall(SYS_mremap, a + 16 * page, 16 * page, 8 * page, 0), (long)(a + 16 * page));
  rec_stop();
  cr_assert_eq(rec_calls(PINHEAP_EVENT_MUNMAP), 1);
  cr_assert_eq(rec_calls(PINHEAP_EVENT_MADVISE), 1);
  cr_assert_eq(rec_calls(PINHEAP_EVENT_MREMAP), 1);
  expect_unmapped("syscall munmap", a + 4 * page, 2 * page, 0x5a);
  expect_unmapped("syscall madvise", a + 8 * page, 2 * page, 0x5a);
  expect_unmapped("syscall mremap shrink", a + 24 * page, 8 * page, 0x5a);
  munmap(a, 24 * page);
}

Test(files, syscall_mmap_fixed, .init = interposed_or_skip)
{
  char *a = mmap(NULL, 8 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(a != MAP_FAILED);
  memset(a, 0x5a, 8 * page);
  rec_watching(a, 8, PINHEAP_EVENT_ALL);
  long r = syscall(SYS_mmap, a + 2 * page, 2 * page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0L);
  rec_stop();
  cr_assert_eq(r, (long)(a + 2 * page));
  cr_assert_eq(rec_calls(PINHEAP_EVENT_MMAP), 1);
  cr_assert_eq(rec_calls(PINHEAP_EVENT_VM_MAPPED), 1);
  expect_unmapped("syscall mmap fixed", a + 2 * page, 2 * page, 0x5a);
  munmap(a, 8 * page);
}

Test(files, syscall_brk, .init = interposed_or_skip)
{
  long cur = syscall(SYS_brk, 0L);
  cr_assert(cur > 0);
  uintptr_t top = ((uintptr_t)cur + page - 1) & ~(uintptr_t)(page - 1);
  rec_start(PINHEAP_EVENT_ALL);
  long grown = syscall(SYS_brk, (long)(top + 4 * page));
  cr_assert_eq(grown, (long)(top + 4 * page), "the break after growing: %#lx", grown);
  long back = syscall(SYS_brk, (long)top);
  rec_stop();
  cr_assert_eq(back, (long)top);
  cr_assert_eq(rec_calls(PINHEAP_EVENT_BRK), 2);
  cr_assert(rec_unmapped((void *)top, 4 * page) != NULL, "syscall brk shrink");
  cr_assert_eq(syscall(SYS_brk, 0L), (long)top, "brk(0) asks, moves nothing");
  cr_assert_eq(sbrk(0), (void *)top, "glibc's idea of the break is kept in step");
}

Test(files, syscall_file_numbers, .init = interposed_or_skip)
{
  int fd = memfd_pages(8);
  char *a = map_file(fd, 0, 8, MAP_SHARED);
  rec_watching(a, 8, PINHEAP_EVENT_VM_UNMAPPED);
  cr_assert_eq(syscall(SYS_fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0L,
                       (long)page), 0);
  cr_assert_eq(syscall(SYS_ftruncate, fd, (long)(6 * page)), 0);
  rec_stop();
  expect_unmapped("syscall fallocate", a, page, 0x5a);
  expect_unmapped("syscall ftruncate", a + 6 * page, 2 * page, 0x5a);
  munmap(a, 8 * page);
  close(fd);
}

Test(files, syscall_other_numbers_untouched, .init = interposed_or_skip)
{
  int fd = memfd_pages(1);
  rec_start(PINHEAP_EVENT_ALL);
  cr_assert_eq(syscall(SYS_getpid), (long)getpid());
  errno = 0;
  cr_assert_eq(syscall(SYS_close, -1), -1);
  cr_assert_eq(errno, EBADF);
  errno = 0;
  cr_assert_eq(syscall(SYS_munmap, (void *)(uintptr_t)1, page), -1, "an unaligned munmap");
  cr_assert_eq(errno, EINVAL);
  /* six arguments through: pread64's offset is the fourth */
  char byte = 0;
  cr_assert_eq(syscall(SYS_pread64, fd, &byte, 1L, 100L), 1);
  cr_assert_eq(byte, 0x5a);
  close(fd);
  rec_stop();
  cr_assert_eq(rec_calls(PINHEAP_EVENT_MUNMAP), 1, "only the munmap number is an event");
}

Test(files, install_info_is_honest, .init = interposed_or_skip)
{
  static const char *const names[] = { "fallocate", "fallocate64", "ftruncate", "ftruncate64",
                                       "truncate", "truncate64", "syscall" };
  unsigned found = 0;
  pinheap_install_info_t ii;
  for (unsigned i = 0; PINHEAP_NAME(install_info)(i, &ii) == 0; i++)
    for (unsigned k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
      if (strcmp(ii.symbol, names[k]) != 0)
        continue;
      found++;
      cr_assert_eq(ii.event, PINHEAP_EVENT_VM_UNMAPPED, "%s: event %#x", ii.symbol, ii.event);
      cr_assert_eq(ii.verified, 1, "%s not verified", ii.symbol);
      cr_assert_eq(ii.code, PINHEAP_CODE_NONE, "%s: libc's code touched", ii.symbol);
    }
  cr_assert_eq(found, sizeof(names) / sizeof(names[0]));
}
