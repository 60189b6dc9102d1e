/*
 * test_huge.c -- the huge-mapping cache's policy (huge.c): a freed huge
 * block keeps its address space for reuse but not its memory.  After the
 * decay its pages are no longer resident (mincore) while the range stays
 * mapped, and the release listener heard the range before; the resident
 * part of the cache is bounded without waiting for the decay; a new block
 * of similar size reuses the address space; a smaller one takes a cached
 * mapping whole unless it is more than 4 times smaller (then it splits it,
 * and the tail stays cached), so that the same size gets the same address
 * back; a block above 16 MiB is cached, not unmapped; a bigger one grows a
 * resident cached mapping, keeping its pages (where it is, upwards or
 * downwards, else moved with mremap, the old range announced); freed
 * neighbours join and hold a bigger block where they are; a heap's new segment is taken from a resident
 * cached mapping, nothing of it released; the part of a new block that has
 * no page yet is filled with the pages of other resident cached mappings,
 * moved there (each old range announced first) when a quarter of their
 * pages are resident (sparse ones stay cached in place), and such a block,
 * several kernel mappings, still reads as zero from calloc and is resized
 * by realloc with its contents.
 *
 * Main entry points: the Test() cases; hear_*() record the listener calls.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hear.h"
#include "pinheap.h"

#define MIB ((size_t)1 << 20)

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Resident pages of [p, p+len) (whole pages inside it); -1 if some page
 * of it is not mapped at all. */
static long resident_pages(const void *p, size_t len)
{
  size_t page = page_size();
  uintptr_t lo = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
  uintptr_t hi = ((uintptr_t)p + len) & ~(uintptr_t)(page - 1);
  size_t n = (hi - lo) / page;
  static unsigned char vec[(256 * MIB) / 4096];
  cr_assert(n <= sizeof(vec), "range too long for the test's mincore vector");
  if (mincore((void *)lo, hi - lo, vec) != 0) {
    cr_assert(errno == ENOMEM, "mincore failed: %s", strerror(errno));
    return -1;
  }
  long r = 0;
  for (size_t i = 0; i < n; i++)
    r += vec[i] & 1;
  return r;
}

static void touch_all(unsigned char *p, size_t len)
{
  for (size_t off = 0; off < len; off += 4096)
    p[off] = (unsigned char)(off >> 12 | 1);
  p[len - 1] = 1;
}

/* Whether the huge blocks p and q of len bytes each have mappings next to
 * each other (a mapping holds its block and a 64 KiB header granule). */
static bool neighbours(const unsigned char *p, const unsigned char *q, size_t len)
{
  ptrdiff_t d = p - q, span = (ptrdiff_t)(len + 64 * 1024);
  return d == span || d == -span;
}

/* Two live blocks whose mappings are neighbours, lo right below hi, and
 * the blocks passed over to find them (live until pair_done). */
#define SPARE_MAX 8
typedef struct pair_s {
  unsigned char *hi, *lo;
  unsigned char *spare[SPARE_MAX];
  int nspare;
} pair_t;

/* With the listener hearing, blocks of len bytes allocated until one lands
 * right below the one before (mmap places mappings top-down, but the first
 * ones may fill holes the test runner left higher up). */
static void neighbour_pair(size_t len, pair_t *pr)
{
  unsigned char *prev = PINHEAP_NAME(malloc)(len);

  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  pr->nspare = 0;
  cr_assert(prev != NULL);
  for (;;) {
    unsigned char *p = PINHEAP_NAME(malloc)(len);
    cr_assert(p != NULL);
    if (neighbours(p, prev, len) && p < prev) {
      pr->hi = prev;
      pr->lo = p;
      return;
    }
    cr_assert(pr->nspare < SPARE_MAX,
              "the test's set-up: no two of %d blocks of %zu bytes are neighbours", SPARE_MAX + 2,
              len);
    pr->spare[pr->nspare++] = prev;
    prev = p;
  }
}

/* Frees the blocks neighbour_pair passed over; the listener stops. */
static void pair_done(pair_t *pr)
{
  while (pr->nspare > 0)
    PINHEAP_NAME(free)(pr->spare[--pr->nspare]);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* With the listener hearing, a block of len bytes allocated, every page
 * written, then freed: what the listener hears from here on is what the
 * cache does with it.  Returns the block's address (a cached mapping now). */
static unsigned char *freed_touched_block(size_t len)
{
  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  unsigned char *p = PINHEAP_NAME(malloc)(len);
  cr_assert(p != NULL, "a %zu-byte block failed", len);
  touch_all(p, len);
  atomic_store(&hear_count, 0);
  PINHEAP_NAME(free)(p);
  return p;
}

static void sleep_ms(long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

Test(huge, freed_block_decays_to_address_space_then_is_reused)
{
  size_t len = 32 * MIB;
  long pages = (long)(len / page_size());

  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  unsigned char *p = PINHEAP_NAME(malloc)(len);
  cr_assert(p != NULL);
  touch_all(p, len);
  cr_assert(resident_pages(p, len) >= pages - 1, "a written 32 MiB block is not resident");
  atomic_store(&hear_count, 0);     /* mapping it may have trimmed an unaligned try */
  PINHEAP_NAME(free)(p);
  /* Within the resident budget: the freed mapping stays as it is. */
  cr_assert(resident_pages(p, len) >= pages - 1,
            "a freed 32 MiB block lost its pages before the decay (%ld of %ld resident)",
            resident_pages(p, len), pages);
  cr_assert(!hear_touched((uintptr_t)p, (uintptr_t)p + len),
            "the listener heard of a freed block the cache keeps resident");

  sleep_ms(250);                                   /* past the decay (100 ms) */
  unsigned char *other = PINHEAP_NAME(malloc)(48 * MIB);   /* runs the decay */
  cr_assert(other != NULL);
  long r = resident_pages(p, len);
  cr_assert(r != -1, "the decayed block's address space was unmapped, not kept");
  cr_assert(r == 0, "%ld pages of the freed 32 MiB block still resident after the decay", r);
  cr_assert(hear_covered((uintptr_t)p, (uintptr_t)p + len),
            "pages were given back but the listener did not hear [%p, +32 MiB)", (void *)p);

  /* A block of about the same size reuses the address space, and it reads
   * as zero. */
  unsigned char *q = PINHEAP_NAME(malloc)(len - 100 * 1024);
  cr_assert(q == p, "a 32 MiB block got %p, not the cached address space at %p", (void *)q,
            (void *)p);
  for (size_t off = 0; off < len - 100 * 1024; off += 4096)
    cr_assert(q[off] == 0, "reused decommitted memory is not zero at offset %zu", off);
  unsigned char *z = PINHEAP_NAME(calloc)(1, len - 200 * 1024);
  cr_assert(z != NULL);
  for (size_t off = 0; off < len - 200 * 1024; off += 4096)
    cr_assert(z[off] == 0, "calloc from the cache is not zero at offset %zu", off);
  PINHEAP_NAME(free)(z);
  PINHEAP_NAME(free)(q);
  PINHEAP_NAME(free)(other);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* The cache keeps freed pages resident only while the live huge blocks
 * and the cache together stay under the peak of the live blocks alone,
 * and 512 MiB at most (32 MiB always allowed): past that, the oldest
 * entries are decommitted at once, announced, without waiting for the
 * decay.  Here: the 512 MiB cap.  The blocks are all allocated before any
 * is freed, so that none is made of another's pages. */
Test(huge, resident_cache_is_capped_without_waiting)
{
  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  unsigned char *a = PINHEAP_NAME(malloc)(40 * MIB);
  unsigned char *b = PINHEAP_NAME(malloc)(240 * MIB);
  unsigned char *c = PINHEAP_NAME(malloc)(250 * MIB);   /* peak 530 */
  cr_assert(a != NULL && b != NULL && c != NULL);
  touch_all(a, 40 * MIB);
  touch_all(b, 1 * MIB);
  touch_all(c, 1 * MIB);
  PINHEAP_NAME(free)(a);                     /* cached 40 MiB: kept */
  PINHEAP_NAME(free)(b);                     /* cached 280 MiB: kept */
  cr_assert(resident_pages(a, 40 * MIB) > 0, "the cached 40 MiB lost its pages too early");
  atomic_store(&hear_count, 0);
  PINHEAP_NAME(free)(c);                     /* cached 530 MiB > 512: a goes */
  long r = resident_pages(a, 40 * MIB);
  cr_assert(r == 0, "the oldest cached block keeps %ld pages resident over 512 MiB", r);
  cr_assert(hear_covered((uintptr_t)a, (uintptr_t)a + 40 * MIB),
            "the oldest cached block was decommitted but the listener did not hear it");
  cr_assert(resident_pages(b, 1 * MIB) > 0, "the second oldest lost its pages under 512 MiB");
  cr_assert(!hear_touched((uintptr_t)b, (uintptr_t)b + 240 * MIB),
            "the listener heard of the second oldest, which stays resident");
  cr_assert(resident_pages(c, 1 * MIB) > 0, "the most recently freed block lost its pages");
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* The peak bound.  Ten freed 20 MiB blocks wait resident, kept apart by
 * live 20 MiB blocks (neighbours would join into one entry); a 400 MiB
 * block takes the pages of eight of them (PH_HUGE_FILL_PIECES), two stay:
 * the live blocks and the cache (620 + 40) are above the live peak (620).
 * The next free (a 20 MiB block, live until now) finds no room: the two
 * older entries are decommitted at once, announced; the block just freed
 * keeps its pages. */
Test(huge, resident_cache_is_bounded_by_the_peak_without_waiting)
{
  enum { N = 10 };
  unsigned char *x[N], *gap[N];

  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  unsigned char *z = PINHEAP_NAME(malloc)(20 * MIB);        /* live until the end */
  cr_assert(z != NULL);
  touch_all(z, 20 * MIB);
  for (int i = 0; i < N; i++) {
    gap[i] = PINHEAP_NAME(malloc)(20 * MIB);
    x[i] = PINHEAP_NAME(malloc)(20 * MIB);
    cr_assert(x[i] != NULL && gap[i] != NULL);
    touch_all(x[i], 20 * MIB);
  }
  for (int i = 0; i < N; i++) {
    cr_assert(!neighbours(x[i], z, 20 * MIB),
              "the test's set-up: block %d lies next to the last one, they would join", i);
    for (int j = 0; j < N; j++)
      cr_assert(!neighbours(x[i], x[j], 20 * MIB),
                "the test's set-up: blocks %d and %d are neighbours, they would join", i, j);
  }
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(free)(x[i]);                /* peak 420, live 220: all kept */
  atomic_store(&hear_count, 0);
  unsigned char *big = PINHEAP_NAME(malloc)(400 * MIB);
  cr_assert(big != NULL);
  touch_all(big, 1 * MIB);
  int left = 0, stay[N];
  for (int i = 0; i < N; i++) {
    bool moved = hear_covered((uintptr_t)x[i], (uintptr_t)x[i] + 20 * MIB);
    if (!moved) {
      cr_assert(resident_pages(x[i], 20 * MIB) >= (long)(20 * MIB / page_size()) - 2,
                "cached block %d was neither moved (announced) nor kept resident", i);
      stay[left++] = i;
    }
  }
  cr_assert(left == N - 8, "%d of %d cached 20 MiB blocks were left, expected %d (8 moved)",
            left, N, N - 8);
  atomic_store(&hear_count, 0);
  PINHEAP_NAME(free)(z);            /* live 600, peak 620: room 20, 32 allowed */
  for (int k = 0; k < left; k++) {
    unsigned char *p = x[stay[k]];
    long r = resident_pages(p, 20 * MIB);
    cr_assert(r == 0, "a cached block keeps %ld pages resident beyond the live peak", r);
    cr_assert(hear_covered((uintptr_t)p, (uintptr_t)p + 20 * MIB),
              "a cached block was decommitted but the listener did not hear it");
  }
  cr_assert(resident_pages(z, 20 * MIB) > 0, "the most recently freed block lost its pages");
  PINHEAP_NAME(free)(big);
  for (int i = 0; i < N; i++)
    PINHEAP_NAME(free)(gap[i]);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* A much smaller request (more than 4 times) takes the head of a bigger
 * cached mapping; the tail stays cached as it was (resident, nothing
 * announced) and serves the next request. */
Test(huge, smaller_request_splits_a_cached_mapping)
{
  size_t big = 100 * MIB, small = 20 * MIB;

  unsigned char *p = freed_touched_block(big);
  unsigned char *q = PINHEAP_NAME(malloc)(small);
  cr_assert(q == p, "a 20 MiB block got %p, not the cached 100 MiB mapping at %p", (void *)q,
            (void *)p);
  uintptr_t tail = (uintptr_t)p + 40 * MIB;        /* well past the new block's end */
  long r = resident_pages((void *)tail, 50 * MIB);
  cr_assert(r >= (long)(50 * MIB / page_size()) - 1,
            "the tail of the split mapping has %ld pages resident, expected all", r);
  cr_assert(!hear_touched((uintptr_t)p, (uintptr_t)p + big),
            "the listener heard of a range the cache still holds");
  unsigned char *t = PINHEAP_NAME(malloc)(50 * MIB);
  cr_assert(t != NULL);
  cr_assert((uintptr_t)t > (uintptr_t)q + small && (uintptr_t)t < (uintptr_t)p + big,
            "a 50 MiB block got %p, not the cached tail of [%p, +100 MiB)", (void *)t, (void *)p);
  touch_all(q, small);
  touch_all(t, 50 * MIB);
  PINHEAP_NAME(free)(q);
  PINHEAP_NAME(free)(t);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* A request up to 4 times smaller than a cached mapping takes it whole:
 * when the bigger size comes back, it gets the same mapping, its pages and
 * its address (a registration cache still holds it), with nothing
 * released.  Splitting it would leave the head too small for the bigger
 * size: grown with mremap, moved (the tail is in the way), announced. */
Test(huge, same_size_gets_the_same_mapping_back_after_a_smaller_one)
{
  size_t big = 40 * MIB, small = 30 * MIB;

  unsigned char *p = freed_touched_block(big);
  unsigned char *q = PINHEAP_NAME(malloc)(small);
  cr_assert(q == p, "a 30 MiB block got %p, not the cached 40 MiB mapping at %p", (void *)q,
            (void *)p);
  touch_all(q, small);
  PINHEAP_NAME(free)(q);
  unsigned char *r = PINHEAP_NAME(malloc)(big);
  cr_assert(r == p, "a 40 MiB block got %p, not its own cached mapping at %p back", (void *)r,
            (void *)p);
  long res = resident_pages(r, big);
  cr_assert(res >= (long)(big / page_size()) - 2,
            "the reused 40 MiB mapping has %ld pages resident, expected all", res);
  cr_assert(!hear_touched((uintptr_t)p, (uintptr_t)p + big),
            "the listener heard of [%p, +40 MiB), which the cache kept", (void *)p);
  PINHEAP_NAME(free)(r);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* A freed block above 16 MiB stays a cached mapping (glibc would unmap it
 * and raise its mmap threshold up to 32 MiB, putting the next ones in the
 * heap): the next block of that size gets it back, pages and all, and
 * nothing is released. */
Test(huge, block_above_16_mib_is_cached_not_unmapped)
{
  size_t len = 20 * MIB;

  unsigned char *p = freed_touched_block(len);
  cr_assert(!hear_touched((uintptr_t)p, (uintptr_t)p + len),
            "a freed 20 MiB block was released, not cached");
  long r = resident_pages(p, len);
  cr_assert(r >= (long)(len / page_size()) - 2,
            "a freed 20 MiB block kept %ld pages resident, expected all", r);
  unsigned char *q = PINHEAP_NAME(malloc)(len);
  cr_assert(q == p, "a 20 MiB block got %p, not the cached mapping at %p", (void *)q, (void *)p);
  PINHEAP_NAME(free)(q);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* A fresh block of up to 16 MiB is unmapped when freed, as glibc does,
 * until the program has freed a block above 16 MiB (it churns large
 * blocks): from then on it is cached like the bigger ones, resident and
 * unannounced, for the next huge block or a heap's new segment to take. */
Test(huge, smaller_fresh_block_is_cached_once_a_big_one_was)
{
  size_t len = 8 * MIB;

  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  unsigned char *first = PINHEAP_NAME(malloc)(len);
  unsigned char *p = PINHEAP_NAME(malloc)(len);
  unsigned char *big = PINHEAP_NAME(malloc)(20 * MIB);
  cr_assert(first != NULL && p != NULL && big != NULL);
  touch_all(first, len);
  touch_all(p, len);
  atomic_store(&hear_count, 0);
  PINHEAP_NAME(free)(first);
  cr_assert(hear_covered((uintptr_t)first, (uintptr_t)first + len),
            "a fresh 8 MiB block freed before any big one was not released at once");
  PINHEAP_NAME(free)(big);                   /* cached: the program churns large blocks */
  atomic_store(&hear_count, 0);
  PINHEAP_NAME(free)(p);
  cr_assert(!hear_touched((uintptr_t)p, (uintptr_t)p + len),
            "a fresh 8 MiB block freed after a 20 MiB one was cached was released");
  long r = resident_pages(p, len);
  cr_assert(r >= (long)(len / page_size()) - 2,
            "the cached 8 MiB block kept %ld pages resident, expected all", r);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

Test(huge, bigger_request_grows_a_resident_mapping_keeping_its_pages)
{
  size_t small = 40 * MIB, big = 60 * MIB;

  unsigned char *p = freed_touched_block(small);
  unsigned char *q = PINHEAP_NAME(malloc)(big);
  cr_assert(q != NULL);
  long r = resident_pages(q, big);
  cr_assert(r >= (long)(small / page_size()) - 2,
            "a 60 MiB block made from a resident 40 MiB cached one has %ld pages resident, "
            "expected the old ones (%zu)", r, small / page_size());
  if (p >= q && p + small <= q + big) {     /* grown where it is, up or down */
    cr_assert(!hear_touched((uintptr_t)p, (uintptr_t)p + small),
              "the mapping grew in place (%p in %p) but the listener heard of its pages",
              (void *)p, (void *)q);
  } else {              /* moved: the old range left the process, announced */
    cr_assert(resident_pages(p, small) == -1 || hear_covered((uintptr_t)p, (uintptr_t)p + small),
              "the mapping moved from %p to %p unheard", (void *)p, (void *)q);
    cr_assert(hear_covered((uintptr_t)p, (uintptr_t)p + small),
              "the mapping moved from %p to %p but the listener did not hear the old range",
              (void *)p, (void *)q);
  }
  touch_all(q, big);
  PINHEAP_NAME(free)(q);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* A resident cached mapping with a live block right after it (mmap places
 * mappings top-down, so the next one lands just below) grows downwards for
 * a bigger request: the missing part is mapped before it, its pages stay
 * where they are and nothing is released or moved (no TLB flush).  Before,
 * it was moved whole to a bigger reservation, the old range announced. */
Test(huge, bigger_request_grows_a_resident_mapping_downwards_in_place)
{
  size_t small = 40 * MIB, big = 60 * MIB;
  pair_t pr;

  neighbour_pair(small, &pr);
  unsigned char *p = pr.lo;
  touch_all(p, small);
  PINHEAP_NAME(free)(p);                    /* cached, resident, a live block after it */
  atomic_store(&hear_count, 0);
  unsigned char *q = PINHEAP_NAME(malloc)(big);
  cr_assert(q != NULL);
  cr_assert(q == p - (big - small),
            "a 60 MiB block from the cached 40 MiB one at %p is at %p, not grown downwards to %p",
            (void *)p, (void *)q, (void *)(p - (big - small)));
  cr_assert(!hear_touched((uintptr_t)p, (uintptr_t)p + small),
            "growing downwards released or moved the cached pages");
  long r = resident_pages(p, small);
  cr_assert(r >= (long)(small / page_size()) - 2,
            "the cached pages grown over are not resident (%ld)", r);
  touch_all(q, big);
  PINHEAP_NAME(free)(q);
  PINHEAP_NAME(free)(pr.hi);
  pair_done(&pr);
}

/* Freed neighbours join: two cached 20 MiB mappings next to each other
 * hold a 36 MiB request together, which takes them where they are --
 * nothing released, moved or faulted.  Before, one was grown for it by
 * moving it to a fresh reservation (the old range announced) and the
 * other's pages moved in. */
Test(huge, freed_neighbours_join_for_a_bigger_request)
{
  size_t small = 20 * MIB, big = 36 * MIB;
  pair_t pr;

  neighbour_pair(small, &pr);
  touch_all(pr.hi, small);
  touch_all(pr.lo, small);
  PINHEAP_NAME(free)(pr.hi);
  PINHEAP_NAME(free)(pr.lo);
  atomic_store(&hear_count, 0);
  unsigned char *lo = pr.lo;
  unsigned char *q = PINHEAP_NAME(malloc)(big);
  cr_assert(q != NULL);
  cr_assert(q == lo, "a 36 MiB block got %p, not the two joined neighbours at %p", (void *)q,
            (void *)lo);
  cr_assert(atomic_load(&hear_count) == 0, "the listener heard %zu releases",
            atomic_load(&hear_count));
  long r = resident_pages(q, big);
  cr_assert(r >= (long)((big - 64 * 1024) / page_size()) - 2,   /* not a's header granule */
            "the joined block has %ld pages resident, expected all (%zu)", r, big / page_size());
  PINHEAP_NAME(free)(q);
  pair_done(&pr);
}

/* A heap that needs a new segment while a freed huge block waits resident
 * in the cache takes the segment from it (its pages are there already):
 * some heap block lands inside the cached mapping, and no part of that
 * mapping was released or decommitted on the way (the listener heard
 * nothing of it).  Before, the segment was a fresh mapping elsewhere. */
Test(huge, new_heap_segment_comes_from_a_resident_cached_mapping)
{
  size_t big = 40 * MIB, blk = 64 * 1024;
  enum { NBLK = 2048 };                         /* 128 MiB of heap at most */
  static unsigned char *blocks[NBLK];
  unsigned n = 0;
  bool inside = false;

  unsigned char *p = freed_touched_block(big);
  long r = resident_pages(p, big);
  cr_assert(r >= (long)(big / page_size()) - 2,
            "a freed 40 MiB block kept %ld pages resident, expected all (cached)", r);
  while (n < NBLK && !inside) {
    unsigned char *b = PINHEAP_NAME(malloc)(blk);
    cr_assert(b != NULL, "a %zu-byte block failed after %u others", blk, n);
    blocks[n++] = b;
    inside = (uintptr_t)b >= (uintptr_t)p && (uintptr_t)b < (uintptr_t)p + big;
  }
  cr_assert(inside, "%u heap blocks of %zu bytes: none in the resident cached mapping "
            "[%p, +40 MiB); the heap grew with fresh mappings", n, blk, (void *)p);
  cr_assert(!hear_touched((uintptr_t)p, (uintptr_t)p + big),
            "the listener heard of part of [%p, +40 MiB) before the heap reused it", (void *)p);
  memset(blocks[n - 1], 0xa5, blk);
  while (n > 0)
    PINHEAP_NAME(free)(blocks[--n]);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* Two blocks of len bytes allocated together, written one page in `every`
 * (1: every page), then freed (cached, resident): their addresses in *a_p
 * and *b_p.  A third block between them stays live (two_freed_gap, for the
 * test to free), so that the two cached mappings are not neighbours, which
 * the cache would join into one entry. */
static unsigned char *two_freed_gap;

static void two_freed_blocks(size_t len, size_t every, unsigned char **a_p, unsigned char **b_p)
{
  unsigned char *a = PINHEAP_NAME(malloc)(len);
  two_freed_gap = PINHEAP_NAME(malloc)(len);   /* live: keeps a and b apart */
  unsigned char *b = PINHEAP_NAME(malloc)(len);
  cr_assert(a != NULL && b != NULL && two_freed_gap != NULL, "three %zu-byte blocks failed",
            len);
  cr_assert(!neighbours(a, b, len), "the test's set-up: the two blocks are neighbours");
  if (every == 1) {
    touch_all(a, len);
    touch_all(b, len);
  } else {
    for (size_t off = 0; off < len; off += every * page_size()) {
      a[off] = 1;
      b[off] = 1;
    }
  }
  PINHEAP_NAME(free)(a);
  PINHEAP_NAME(free)(b);
  *a_p = a;
  *b_p = b;
}

/* A request no cached mapping holds, with resident ones too small to grow
 * for it (under a quarter of it): the new block is a fresh mapping, and
 * their pages are moved into it rather than faulted in beside them -- each
 * old range announced first.  Its pages are not zero any more: calloc
 * still returns zeros. */
Test(huge, new_block_takes_the_pages_of_resident_cached_mappings)
{
  size_t small = 20 * MIB, big = 100 * MIB;

  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  unsigned char *a, *b;
  two_freed_blocks(small, 1, &a, &b);
  atomic_store(&hear_count, 0);
  unsigned char *q = PINHEAP_NAME(calloc)(1, big);
  cr_assert(q != NULL);
  cr_assert(hear_covered((uintptr_t)a, (uintptr_t)a + small) &&
                hear_covered((uintptr_t)b, (uintptr_t)b + small),
            "the cached blocks at %p and %p were not both moved (announced) into the new one",
            (void *)a, (void *)b);
  long r = resident_pages(q, big);
  cr_assert(r >= (long)(2 * small / page_size()) - 2,
            "a 100 MiB block made of two resident 20 MiB ones has %ld pages resident, "
            "expected theirs (%zu)", r, 2 * small / page_size());
  for (size_t off = 0; off < big; off += 4096)
    cr_assert(q[off] == 0, "calloc of a block made of cached pages is not zero at offset %zu",
              off);
  PINHEAP_NAME(free)(q);
  PINHEAP_NAME(free)(two_freed_gap);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* The same with cached mappings that hold few resident pages (one in 16
 * written, as a program that touches its buffers sparsely leaves them):
 * they stay in the cache where they are, pages and all, not moved into the
 * new block -- a move costs a TLB flush for every 2 MiB (an interrupt to
 * each CPU another thread runs on) and would save only the few faults of
 * the pages it holds. */
Test(huge, new_block_leaves_sparse_cached_mappings_in_place)
{
  size_t small = 20 * MIB, big = 100 * MIB, page = page_size();

  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  unsigned char *a, *b;
  two_freed_blocks(small, 16, &a, &b);
  long ra = resident_pages(a, small), rb = resident_pages(b, small);
  cr_assert(ra > 0 && rb > 0, "the freed sparse blocks hold no pages (%ld, %ld): nothing to move",
            ra, rb);
  atomic_store(&hear_count, 0);
  unsigned char *q = PINHEAP_NAME(calloc)(1, big);
  cr_assert(q != NULL);
  cr_assert(!hear_covered((uintptr_t)a, (uintptr_t)a + small) &&
                !hear_covered((uintptr_t)b, (uintptr_t)b + small),
            "a cached block with one page in 16 resident (%p or %p) was moved (announced) "
            "into a new one", (void *)a, (void *)b);
  cr_assert(resident_pages(a, small) == ra && resident_pages(b, small) == rb,
            "the sparse cached blocks lost their pages: %ld and %ld resident, were %ld and %ld",
            resident_pages(a, small), resident_pages(b, small), ra, rb);
  long r = resident_pages(q, big);
  cr_assert(r >= 0 && r < (long)(small / page / 16),
            "a fresh 100 MiB block has %ld pages resident, expected about none", r);
  for (size_t off = 0; off < big; off += 4096)
    cr_assert(q[off] == 0, "calloc of a fresh huge block is not zero at offset %zu", off);
  PINHEAP_NAME(free)(q);
  PINHEAP_NAME(free)(two_freed_gap);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* A sparse cached mapping that a new block looked at and left keeps its
 * age: the decay still gives its pages back on time (were it put back as
 * newly freed at each look, a program that keeps allocating huge blocks
 * would keep it resident for ever). */
Test(huge, sparse_cached_mapping_left_in_place_keeps_its_age)
{
  size_t small = 20 * MIB, big = 100 * MIB, page = page_size();

  PINHEAP_NAME(os_set_release_listener)(hear_listener, NULL);
  unsigned char *a = PINHEAP_NAME(malloc)(small);
  cr_assert(a != NULL);
  for (size_t off = 0; off < small; off += 16 * page)
    a[off] = 1;
  PINHEAP_NAME(free)(a);
  sleep_ms(60);
  unsigned char *q = PINHEAP_NAME(malloc)(big);      /* looks at a, leaves it */
  cr_assert(q != NULL);
  cr_assert(resident_pages(a, small) > 0, "the sparse cached block lost its pages too early");
  atomic_store(&hear_count, 0);
  sleep_ms(60);                      /* a freed 120 ms ago: past the decay (100 ms) */
  unsigned char *q2 = PINHEAP_NAME(malloc)(big);     /* runs the decay first */
  cr_assert(q2 != NULL);
  long r = resident_pages(a, small);
  cr_assert(r == 0, "%ld pages of a sparse cached block freed 120 ms ago still resident: "
            "its age was reset when a new block looked at it", r);
  cr_assert(hear_covered((uintptr_t)a, (uintptr_t)a + small),
            "the decayed block's pages were given back but the listener did not hear them");
  PINHEAP_NAME(free)(q2);
  PINHEAP_NAME(free)(q);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
}

/* A block made of moved pages is several kernel mappings, which mremap
 * cannot resize: realloc still grows and shrinks it, contents kept (moved
 * whole, or copied where the kernel cannot move such a range). */
Test(huge, realloc_keeps_a_block_made_of_moved_pages)
{
  size_t small = 20 * MIB, big = 100 * MIB;

  unsigned char *a, *b;
  two_freed_blocks(small, 1, &a, &b);
  unsigned char *q = PINHEAP_NAME(malloc)(big);
  cr_assert(q != NULL);
  for (size_t off = 0; off < big; off += 4096)
    q[off] = (unsigned char)(off >> 12 | 1);
  unsigned char *g = PINHEAP_NAME(realloc)(q, 2 * big);
  cr_assert(g != NULL, "realloc of a block made of moved pages to 200 MiB failed");
  for (size_t off = 0; off < big; off += 4096)
    cr_assert(g[off] == (unsigned char)(off >> 12 | 1),
              "realloc to 200 MiB lost the contents at offset %zu", off);
  touch_all(g + big, big);
  unsigned char *s = PINHEAP_NAME(realloc)(g, big / 2);
  cr_assert(s != NULL, "realloc of a block made of moved pages to 50 MiB failed");
  for (size_t off = 0; off < big / 2; off += 4096)
    cr_assert(s[off] == (unsigned char)(off >> 12 | 1),
              "realloc to 50 MiB lost the contents at offset %zu", off);
  PINHEAP_NAME(free)(s);
  PINHEAP_NAME(free)(two_freed_gap);
}
