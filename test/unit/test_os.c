/*
 * test_os.c -- the OS layer (allocator/os/os.c) as its contract in os.h
 * states it, for the calls no other test reaches directly: the shared
 * heap's region mappings (os_region_*) are made and counted, and never
 * heard by the release or the map listener; the region's free pages
 * (os_release_shared) are heard first.  The source check that no other
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
