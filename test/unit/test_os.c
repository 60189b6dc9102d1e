/*
 * test_os.c -- the OS layer (allocator/os/os.c) as its contract in os.h
 * states it, for the calls no other test reaches directly: the shared
 * heap's region mappings (os_region_*) are made and counted, and never
 * heard by the release or the map listener; the region's free pages
 * (os_release_shared) are heard first; pages moved into another mapping
 * (os_move_into) keep their contents and are heard as a release of their
 * old range, first, and a range so made of several mappings is still moved
 * whole, grown (os_move_to).  The source check that no other
 * allocator file maps or unmaps is test/layers_check.py's.
 */
#include "test_util.h"

TestSuite(os, .timeout = 60);

static _Atomic size_t os_t_mapped;

static void count_mapped(void *addr, size_t len, void *ctx)
{
  (void)addr; (void)ctx;
  atomic_fetch_add(&os_t_mapped, len);
}

static size_t region_calls(void)
{
  os_stats_t st;
  os_stats_get(&st);
  return st.region_calls;
}

Test(os, region_calls_are_made_counted_and_not_reported)
{
  size_t page = os_page_size(), len = 16 * page;
  size_t calls0 = region_calls();

  listener_install();
  os_set_map_listener(count_mapped, NULL);
  /* a reservation, a mapping over it, pages made, a move, the unmap */
  char *r = os_region_map(NULL, 2 * len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1);
  cr_assert_neq(r, MAP_FAILED, "os_region_map (reserve): errno %d", errno);
  char *p = os_region_map(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  cr_assert_neq(p, MAP_FAILED, "os_region_map: errno %d", errno);
  os_region_populate(p, len);
  memset(p, 0x5a, len);
  cr_assert(os_region_move(p, len, r + len), "os_region_move did not land at its target");
  cr_assert_eq((unsigned char)r[len + len - 1], 0x5a, "the moved pages kept their contents");
  cr_assert_eq(os_region_map(r, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1), r);
  os_region_unmap(r, 2 * len);
  os_set_map_listener(NULL, NULL);
  os_set_release_listener(NULL, NULL);

  cr_expect_eq(listener_calls_get(), 0, "the release listener heard %zu region calls",
               listener_calls_get());
  cr_expect_eq(atomic_load(&os_t_mapped), 0, "the map listener heard %zu bytes",
               atomic_load(&os_t_mapped));
  /* populate is not counted: it neither maps nor releases */
  cr_expect_eq(region_calls() - calls0, 5, "region calls counted: %zu, expected 5",
               region_calls() - calls0);
}

Test(os, release_shared_is_heard_first)
{
  size_t page = os_page_size(), len = 4 * page;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(p, MAP_FAILED);
  memset(p, 1, len);
  listener_install();
  os_release_shared(p + page, 2 * page, true);
  os_set_release_listener(NULL, NULL);
  cr_expect_eq(listener_calls_get(), 1);
  cr_expect_eq(listener_bytes_get(), 2 * page);
  cr_expect_eq(p[page], 0, "MADV_REMOVE dropped the pages of a shared mapping");
  cr_expect_eq(p[0], 1);
  munmap(p, len);
}

/* Can this kernel move a range of several mappings whole (Linux 6.17 and
 * later)?  Probed with plain system calls. */
static bool kernel_moves_several_mappings(void)
{
  size_t page = os_page_size();
  char *x = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *y = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *z = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(x != MAP_FAILED && y != MAP_FAILED && z != MAP_FAILED);
  x[0] = y[0] = 1;
  cr_assert(mremap(y, page, page, MREMAP_MAYMOVE | MREMAP_FIXED, x + page) != MAP_FAILED);
  bool ok = mremap(x, 4 * page, 4 * page, MREMAP_MAYMOVE | MREMAP_FIXED, z) != MAP_FAILED;
  munmap(ok ? z : x, 4 * page);
  if (!ok)
    munmap(z, 4 * page);
  return ok;
}

Test(os, move_into_is_heard_first_and_keeps_the_pages)
{
  size_t page = os_page_size(), len = 4 * page, big = 16 * page;
  char *a = os_map_aligned(NULL, len, page);
  char *b = os_map_aligned(NULL, big, page);
  cr_assert(a != NULL && b != NULL, "os_map_aligned failed");
  memset(a, 0x5a, len);
  os_stats_t st0, st1;
  os_stats_get(&st0);
  listener_install();
  cr_assert_eq(os_move_into(a, len, b + 2 * page), 0, "os_move_into refused: errno %d", errno);
  cr_expect_eq(listener_calls_get(), 1, "heard %zu releases, expected the old range's",
               listener_calls_get());
  cr_expect_eq(listener_bytes_get(), len);
  os_stats_get(&st1);
  cr_expect_eq(st0.mapped - st1.mapped, len, "mapped bytes went down by %zu, expected %zu",
               st0.mapped - st1.mapped, len);
  cr_expect_eq((unsigned char)b[2 * page], 0x5a, "the moved pages lost their contents");
  cr_expect_eq((unsigned char)b[2 * page + len - 1], 0x5a);
  cr_expect_eq(b[0], 0, "the rest of the destination is not zero");
  cr_expect_eq(b[2 * page + len], 0);

  /* b is three kernel mappings now: mremap cannot resize it, but os_move_to
   * moves it whole into a bigger reservation (Linux 6.17 and later). */
  char *to = os_move_reserve(2 * big, page);
  cr_assert(to != NULL, "os_move_reserve failed");
  if (!kernel_moves_several_mappings()) {
    printf("SKIP: this kernel cannot move a range of several mappings (before Linux 6.17)\n");
    cr_expect_eq(os_move_to(b, big, 2 * big, to), -1);
    os_move_cancel(to, 2 * big);
    os_release(b, big);
  } else {
    cr_assert_eq(os_move_to(b, big, 2 * big, to), 0,
                 "os_move_to could not grow a range of three mappings (moved whole)");
    cr_expect_eq((unsigned char)to[2 * page], 0x5a, "the grown range lost its moved pages");
    cr_expect_eq(to[big + page], 0, "the grown part is not zero");
    memset(to, 1, 2 * big);
    os_release(to, 2 * big);
  }
  os_set_release_listener(NULL, NULL);
}
