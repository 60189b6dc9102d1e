/*
 * test_huge_realloc.c -- realloc of huge blocks resizes their mapping with
 * mremap (huge.c: huge_realloc): a block that cannot grow in place moves,
 * its data intact and its pages keeping their frames (the page tables
 * move, nothing is copied), and the release listener hears exactly one
 * range, the old block's; a shrink in place is heard as its released tail;
 * a growth in place, into free address space, is heard as nothing.  The
 * block's alignment and errno are kept; a growth the kernel will not back
 * returns NULL with ENOMEM and leaves the block as it was, unannounced.
 * Before, a block that could not grow in place was copied 128 KiB at a
 * time, each copied piece of the old one announced: 64 -> 256 MiB was 512
 * listener calls.
 *
 * A huge block's mapping, seen through the public API: it starts on the
 * 64 KiB granule below the payload (the headers are smaller than one) and
 * ends at payload + malloc_usable_size.
 *
 * Main entry points: the Test() cases; hear.h records the listener calls.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hear.h"
#include "pinheap.h"

#define MIB ((size_t)1 << 20)
#define GRANULE ((uintptr_t)64 << 10)
#define PAGE 4096

/* The mapping behind a huge block's payload p. */
static uintptr_t block_base(const void *p) { return (uintptr_t)p & ~(GRANULE - 1); }
static uintptr_t block_end(void *p) { return (uintptr_t)p + PINHEAP_NAME(malloc_usable_size)(p); }

static unsigned char pattern(size_t off) { return (unsigned char)(off / PAGE * 13 + 7); }

static void write_pages(unsigned char *p, size_t len)
{
  for (size_t off = 0; off < len; off += PAGE)
    p[off] = pattern(off);
}

static void check_pages(const unsigned char *p, size_t len)
{
  for (size_t off = 0; off < len; off += PAGE)
    cr_assert(p[off] == pattern(off), "byte at offset %zu is %u after the realloc, was %u", off,
              p[off], pattern(off));
}

/* A written block of len bytes with the address space after its mapping
 * taken (a guard of one granule, unless something is there already), so
 * that it cannot grow in place.  *guard_p: the guard, or NULL. */
static unsigned char *block_that_must_move(size_t len, void **guard_p)
{
  unsigned char *p = PINHEAP_NAME(malloc)(len);
  cr_assert(p != NULL, "malloc(%zu MiB) failed", len / MIB);
  write_pages(p, len);
  void *end = (void *)block_end(p);
  void *g = mmap(end, GRANULE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  cr_assert(g == MAP_FAILED || g == end, "MAP_FIXED_NOREPLACE placed the guard at %p, not %p", g,
            end);
  *guard_p = g == MAP_FAILED ? NULL : g;
  return p;
}

static void guard_drop(void *guard)
{
  if (guard != NULL)
    munmap(guard, GRANULE);
}

/* realloc(p, n) with the release listener recording (hear.h) for just
 * that call, errno set to errno_before first.  *err_p: errno after;
 * *heard_p: the listener calls. */
static void *realloc_heard(void *p, size_t n, int errno_before, int *err_p, size_t *heard_p)
{
  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  atomic_store(&hear_count, 0);
  errno = errno_before;
  void *q = PINHEAP_NAME(realloc)(p, n);
  *err_p = errno;
  *heard_p = atomic_load(&hear_count);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
  return q;
}

Test(huge_realloc, moved_growth_is_heard_as_one_release_of_the_old_block)
{
  void *guard;
  unsigned char *p = block_that_must_move(64 * MIB, &guard);
  uintptr_t lo = block_base(p), hi = block_end(p);

  int err;
  size_t heard;
  unsigned char *q = realloc_heard(p, 256 * MIB, 4242, &err, &heard);
  guard_drop(guard);

  cr_assert(q != NULL, "realloc 64 -> 256 MiB failed");
  cr_assert(err == 4242, "a realloc that succeeded changed errno to %d", err);
  cr_assert(q != p, "the block grew in place with its next granule taken");
  check_pages(q, 64 * MIB);
  cr_assert(PINHEAP_NAME(malloc_usable_size)(q) >= 256 * MIB, "the moved block has %zu bytes",
            PINHEAP_NAME(malloc_usable_size)(q));
  /* One call, the old block's range.  Only if the kernel placed the new
   * mapping's first reservation off a granule (it places it below a
   * mapping of pinheap's, which starts on one) are the reservation's
   * unused parts released too, and heard: up to 3 more calls, none of
   * them touching the old block. */
  cr_assert(heard >= 1 && heard <= 4,
            "a moving realloc 64 -> 256 MiB made %zu listener calls, expected 1", heard);
  size_t of_block = 0;
  for (size_t i = 0; i < heard; i++) {
    if (hear_addr[i] + hear_len[i] <= lo || hear_addr[i] >= hi)
      continue;
    of_block++;
    cr_assert(hear_addr[i] == lo && hear_len[i] == hi - lo,
              "the listener heard [%#lx, +%zu), the old block is [%#lx, +%zu)",
              (unsigned long)hear_addr[i], hear_len[i], (unsigned long)lo, (size_t)(hi - lo));
  }
  cr_assert(of_block == 1, "%zu listener calls touched the old block, expected 1", of_block);
  if (heard > 1)
    cr_log_info("the new mapping's reservation was cut to alignment: %zu more calls", heard - 1);
  cr_assert(block_base(q) == (uintptr_t)q - ((uintptr_t)p - lo),
            "the payload sits %zu bytes into its new mapping, %zu into the old",
            (size_t)((uintptr_t)q - block_base(q)), (size_t)((uintptr_t)p - lo));
  memset(q + 64 * MIB, 0x5a, 192 * MIB);          /* the grown part is usable */
  PINHEAP_NAME(free)(q);
}

Test(huge_realloc, moved_block_keeps_its_alignment)
{
  void *guard;
  unsigned char *p = PINHEAP_NAME(memalign)(4 * MIB, 40 * MIB);
  cr_assert(p != NULL && ((uintptr_t)p & (4 * MIB - 1)) == 0, "memalign(4 MiB) gave %p",
            (void *)p);
  write_pages(p, 40 * MIB);
  void *end = (void *)block_end(p);
  guard = mmap(end, GRANULE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  guard = guard == end ? guard : NULL;
  unsigned char *q = PINHEAP_NAME(realloc)(p, 100 * MIB);
  guard_drop(guard);
  cr_assert(q != NULL, "realloc 40 -> 100 MiB of a 4 MiB-aligned block failed");
  cr_assert(((uintptr_t)q & (4 * MIB - 1)) == 0, "the 4 MiB-aligned block moved to %p",
            (void *)q);
  check_pages(q, 40 * MIB);
  PINHEAP_NAME(free)(q);
}

Test(huge_realloc, shrink_in_place_is_heard_as_its_tail)
{
  unsigned char *p = PINHEAP_NAME(malloc)(256 * MIB);
  cr_assert(p != NULL);
  write_pages(p, 64 * MIB);
  uintptr_t old_end = block_end(p);

  int err;
  size_t heard;
  unsigned char *q = realloc_heard(p, 64 * MIB, 4242, &err, &heard);
  cr_assert(err == 4242, "a shrink in place changed errno to %d", err);

  cr_assert(q == p, "a shrinking realloc 256 -> 64 MiB moved the block to %p", (void *)q);
  check_pages(q, 64 * MIB);
  uintptr_t new_end = block_end(q);
  cr_assert(heard == 1, "a shrink in place made %zu listener calls, expected 1", heard);
  cr_assert(hear_addr[0] == new_end && hear_addr[0] + hear_len[0] == old_end,
            "the listener heard [%#lx, %#lx), the released tail is [%#lx, %#lx)",
            (unsigned long)hear_addr[0], (unsigned long)(hear_addr[0] + hear_len[0]),
            (unsigned long)new_end, (unsigned long)old_end);
  PINHEAP_NAME(free)(q);
}

Test(huge_realloc, growth_into_free_address_space_is_heard_as_nothing)
{
  /* Hold address space, so that the block is mapped just below it, then
   * let it go: the block then has free space after it. */
  size_t hold = 512 * MIB;
  void *held = mmap(NULL, hold, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(held != MAP_FAILED);
  unsigned char *p = PINHEAP_NAME(malloc)(64 * MIB);
  cr_assert(p != NULL);
  write_pages(p, 64 * MIB);
  munmap(held, hold);
  void *end = (void *)block_end(p);
  size_t need = 192 * MIB + GRANULE;
  void *probe = mmap(end, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (probe != end) {
    if (probe != MAP_FAILED)
      munmap(probe, need);
    cr_skip_test("the address space after the block at %p is not free", (void *)p);
  }
  munmap(probe, need);

  int err;
  size_t heard;
  unsigned char *q = realloc_heard(p, 256 * MIB, 4242, &err, &heard);
  cr_assert(err == 4242, "a growth in place changed errno to %d", err);

  cr_assert(q == p, "realloc 64 -> 256 MiB moved to %p with free space after %p", (void *)q,
            (void *)p);
  cr_assert(heard == 0, "a growth in place made %zu listener calls (first [%#lx, +%zu))", heard,
            (unsigned long)hear_addr[0], hear_len[0]);
  check_pages(q, 64 * MIB);
  memset(q + 64 * MIB, 0x5a, 192 * MIB);
  PINHEAP_NAME(free)(q);
}

Test(huge_realloc, growth_the_kernel_will_not_back_fails_and_keeps_the_block)
{
  void *guard;
  unsigned char *p = block_that_must_move(32 * MIB, &guard);
  uintptr_t lo = block_base(p), hi = block_end(p);

  int err;
  size_t calls;
  void *q = realloc_heard(p, (size_t)1 << 46, 0, &err, &calls);      /* 64 TiB */
  bool heard = calls != 0 && hear_touched(lo, hi);
  guard_drop(guard);

  cr_assert(q == NULL, "realloc to 64 TiB succeeded");
  cr_assert(err == ENOMEM, "realloc to 64 TiB failed with errno %d, not ENOMEM", err);
  cr_assert(!heard, "a realloc that failed announced the block's range as released");
  check_pages(p, 32 * MIB);
  PINHEAP_NAME(free)(p);
}

/* The page frame behind the page at p (/proc/self/pagemap), 0 if it cannot
 * be read (not root: the kernel shows frames as 0) or is not present. */
static uint64_t frame_of(const void *p)
{
  uint64_t entry = 0;
  int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0)
    return 0;
  off_t at = (off_t)((uintptr_t)p / PAGE * sizeof(entry));
  ssize_t n = pread(fd, &entry, sizeof(entry), at);
  close(fd);
  if (n != (ssize_t)sizeof(entry) || !(entry >> 63))
    return 0;
  return entry & (((uint64_t)1 << 55) - 1);
}

Test(huge_realloc, moved_pages_keep_their_frames)
{
  void *guard;
  unsigned char *p = block_that_must_move(64 * MIB, &guard);
  uintptr_t first = ((uintptr_t)p + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
  uintptr_t last = ((uintptr_t)p + 64 * MIB - 1) & ~(uintptr_t)(PAGE - 1);
  uint64_t before = frame_of((void *)first), before_last = frame_of((void *)last);
  if (before == 0) {
    guard_drop(guard);
    PINHEAP_NAME(free)(p);
    printf("SKIP: page frames read as 0 in /proc/self/pagemap (not root)\n");
    fflush(stdout);
    cr_skip_test("page frames read as 0 in /proc/self/pagemap (not root)");
  }
  unsigned char *q = PINHEAP_NAME(realloc)(p, 256 * MIB);
  guard_drop(guard);
  cr_assert(q != NULL && q != p, "the block did not move (%p -> %p)", (void *)p, (void *)q);
  uintptr_t shift = (uintptr_t)q - (uintptr_t)p;
  uint64_t after = frame_of((void *)(first + shift)), after_last = frame_of((void *)(last + shift));
  cr_assert(after == before,
            "the block's first page had frame %#lx before the move and %#lx after: copied, not "
            "moved", (unsigned long)before, (unsigned long)after);
  cr_assert(after_last == before_last, "its last page had frame %#lx before and %#lx after",
            (unsigned long)before_last, (unsigned long)after_last);
  check_pages(q, 64 * MIB);
  PINHEAP_NAME(free)(q);
}
