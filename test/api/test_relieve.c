/*
 * test_relieve.c -- memory pressure (huge.c, huge_relieve): a huge block
 * about to be faulted in makes the arenas give back the free tail of their
 * top at once, announced to the release listener first, instead of keeping
 * it until the decay; a smaller block, or a threshold set by mallopt,
 * leaves the arenas alone; the heap stays usable after.
 *
 * Main entry points: the Test() cases; hear_*() record the listener calls.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hear.h"
#include "pinheap.h"

#define MIB ((size_t)1 << 20)
#define BLOCKS 64
#define BLOCK_SIZE ((size_t)100 * 1024)   /* below the default 128 KiB threshold */

/* Is any page of [lo, hi) still mapped and resident? */
static bool any_resident(uintptr_t lo, uintptr_t hi)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  static unsigned char vec[(8 * MIB) / 4096];
  lo = (lo + page - 1) & ~(uintptr_t)(page - 1);
  hi &= ~(uintptr_t)(page - 1);
  cr_assert((hi - lo) / page <= sizeof(vec), "range too long for the test's mincore vector");
  if (mincore((void *)lo, hi - lo, vec) != 0) {
    cr_assert(errno == ENOMEM, "mincore failed: %s", strerror(errno));
    return false;                         /* (partly) unmapped: released */
  }
  for (size_t i = 0; i < (hi - lo) / page; i++)
    if (vec[i] & 1)
      return true;
  return false;
}

static uintptr_t block[BLOCKS];

/* BLOCKS heap blocks, every page written, then all freed (the listener
 * hears from here on): the heap now holds their pages free, at the end of
 * its top and in segments gone wholly free, well within the decay. */
static void heap_blocks_freed(void)
{
  for (int i = 0; i < BLOCKS; i++) {
    unsigned char *b = PINHEAP_NAME(malloc)(BLOCK_SIZE);
    cr_assert(b != NULL);
    memset(b, 0x5a, BLOCK_SIZE);
    block[i] = (uintptr_t)b;
  }
  for (int i = BLOCKS - 1; i >= 0; i--)
    PINHEAP_NAME(free)((void *)block[i]);
  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  atomic_store(&hear_count, 0);
}

/* How many of the freed blocks did the listener hear of (each wholly
 * within one call)?  Fails if one of those still has a page resident. */
static int blocks_heard(void)
{
  int n = 0;
  for (int i = 0; i < BLOCKS; i++) {
    if (!hear_covered(block[i], block[i] + BLOCK_SIZE))
      continue;
    cr_assert(!any_resident(block[i], block[i] + BLOCK_SIZE),
              "the freed block %p was announced as released, but a page of it is resident",
              (void *)block[i]);
    n++;
  }
  return n;
}

Test(relieve, huge_block_gives_back_the_heap_top_first)
{
  heap_blocks_freed();
  cr_assert(any_resident(block[BLOCKS - 1], block[BLOCKS - 1] + BLOCK_SIZE),
            "the last freed heap block lost its pages before the huge block");

  unsigned char *h = PINHEAP_NAME(malloc)(40 * MIB);
  cr_assert(h != NULL);
  int heard = blocks_heard();
  cr_assert(heard >= BLOCKS / 2,
            "a 40 MiB block was mapped, and the listener heard of only %d of the %d freed %zu KiB "
            "heap blocks: the heap kept them until the decay", heard, BLOCKS, BLOCK_SIZE / 1024);

  /* The heap still works: the same blocks again, written and checked. */
  unsigned char *b[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) {
    b[i] = PINHEAP_NAME(malloc)(BLOCK_SIZE);
    cr_assert(b[i] != NULL);
    memset(b[i], i, BLOCK_SIZE);
  }
  for (int i = 0; i < BLOCKS; i++) {
    cr_assert(b[i][0] == (unsigned char)i && b[i][BLOCK_SIZE - 1] == (unsigned char)i);
    PINHEAP_NAME(free)(b[i]);
  }
  PINHEAP_NAME(free)(h);
  cr_assert(PINHEAP_NAME(malloc_check)() == 0, "the heap checker found problems");
}

Test(relieve, small_huge_block_leaves_the_heap_alone)
{
  heap_blocks_freed();
  unsigned char *h = PINHEAP_NAME(malloc)(2 * MIB);   /* a mapping, but below 16 MiB */
  cr_assert(h != NULL);
  int heard = blocks_heard();
  cr_assert(heard == 0, "a 2 MiB block made the heap give back %d of its freed blocks", heard);
  PINHEAP_NAME(free)(h);
}

Test(relieve, mallopt_threshold_leaves_the_heap_alone)
{
  cr_assert(PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, 256 * 1024) == 1);
  cr_assert(PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, 64 * MIB) == 1);
  heap_blocks_freed();
  unsigned char *h = PINHEAP_NAME(malloc)(40 * MIB);
  cr_assert(h != NULL);
  int heard = blocks_heard();
  cr_assert(heard == 0,
            "with the thresholds set by mallopt, a 40 MiB block made the heap give back %d of "
            "its freed blocks", heard);
  PINHEAP_NAME(free)(h);
}
