/*
 * test_events.c -- the memory-events API (hooks/events.c), end to end, in a
 * process whose mmap, munmap, mremap, madvise, shmat, shmdt, brk and sbrk
 * are pinheap's interposers (this executable holds libpinheap.a whole and
 * exports its symbols, as a runtime's core library would).
 *
 * Each call is made for real and its events checked: the call event with
 * the right arguments, the derived VM_MAPPED/VM_UNMAPPED with the
 * page-rounded range; handler order, a handler changing an argument or
 * stopping the call; every release path; set/unset under fire from other
 * threads; handlers that allocate and unmap; bad input; malloc_init.
 * Skips (with the reason) when interposition did not take.
 *
 * Main entry point: rec_handler() and the rec_* queries.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "pinheap.h"

#include "interposed.h"   /* interposed_or_skip(), page, map_pages() */
extern void *__sbrk(intptr_t increment);   /* glibc's own, to check __curbrk */

/* ---- the recording handler (never allocates): rec.h --------------------- */
#include "rec.h"

/* How many VM_MAPPED / VM_UNMAPPED events reported exactly [addr, addr+len)
 * with this source. */
static int rec_vm(int type, const void *addr, size_t len, int source)
{
  int hits = 0;
  for (int i = 0; i < rec_n(); i++) {
    const rec_t *r = &rec_log[i];
    if (r->type == type && r->ev.vm_mapped.address == addr && r->ev.vm_mapped.size == len &&
        r->ev.vm_mapped.source == source)
      hits++;
  }
  return hits;
}

/* Whether any VM_UNMAPPED event covers [addr, addr+len). */
static int rec_unmapped_covers(const void *addr, size_t len, int source)
{
  for (int i = 0; i < rec_n(); i++) {
    const rec_t *r = &rec_log[i];
    const char *a = r->ev.vm_unmapped.address;
    if (r->type == PINHEAP_EVENT_VM_UNMAPPED && r->ev.vm_unmapped.source == source &&
        a <= (const char *)addr && a + r->ev.vm_unmapped.size >= (const char *)addr + len)
      return 1;
  }
  return 0;
}

/* The first record of this call type, or NULL. */
static const rec_t *rec_call(int type)
{
  for (int i = 0; i < rec_n(); i++)
    if (rec_log[i].type == type)
      return &rec_log[i];
  return NULL;
}

static int is_mapped(const void *p)
{
  unsigned char v;
  return mincore((void *)((uintptr_t)p & ~(uintptr_t)(page - 1)), page, &v) == 0;
}

static int shm_make(size_t size)
{
  int id = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
  if (id < 0)
    cr_skip_test("System V shared memory is not available here: shmget: %s", strerror(errno));
  return id;
}

/* ======================================================================= */
/*  every call event, with its arguments and result                         */
/* ======================================================================= */

Test(events, mmap_munmap_mapped_unmapped, .init = interposed_or_skip)
{
  rec_start(PINHEAP_EVENT_ALL);
  char *p = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  cr_assert(p != MAP_FAILED);
  const rec_t *r = rec_call(PINHEAP_EVENT_MMAP);
  cr_assert_not_null(r, "no MMAP event");
  cr_assert_null(r->ev.mmap.address);
  cr_assert_eq(r->ev.mmap.size, 3 * page);
  cr_assert_eq(r->ev.mmap.prot, PROT_READ | PROT_WRITE);
  cr_assert_eq(r->ev.mmap.flags, MAP_PRIVATE | MAP_ANONYMOUS);
  cr_assert_eq(r->ev.mmap.fd, -1);
  cr_assert_eq(r->ev.mmap.offset, 0);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_MAPPED, p, 3 * page, PINHEAP_EVENT_SOURCE_APP), 1);

  atomic_store(&rec_count, 0);
  cr_assert_eq(munmap(p, 3 * page), 0);
  r = rec_call(PINHEAP_EVENT_MUNMAP);
  cr_assert_not_null(r, "no MUNMAP event");
  cr_assert_eq(r->ev.munmap.address, p);
  cr_assert_eq(r->ev.munmap.size, 3 * page);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p, 3 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  /* the call event comes before the derived one */
  cr_assert_eq(rec_log[0].type, PINHEAP_EVENT_MUNMAP);
  rec_stop();
}

Test(events, mremap_events, .init = interposed_or_skip)
{
  char *p = map_pages(2);
  rec_start(PINHEAP_EVENT_ALL);
  char *q = mremap(p, 2 * page, 64 * page, MREMAP_MAYMOVE);
  cr_assert(q != MAP_FAILED);
  const rec_t *r = rec_call(PINHEAP_EVENT_MREMAP);
  cr_assert_not_null(r, "no MREMAP event");
  cr_assert_eq(r->ev.mremap.address, p);
  cr_assert_eq(r->ev.mremap.old_size, 2 * page);
  cr_assert_eq(r->ev.mremap.new_size, 64 * page);
  cr_assert_eq(r->ev.mremap.flags, MREMAP_MAYMOVE);
  /* it may move: the whole old range goes, the whole new one comes */
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p, 2 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_MAPPED, q, 64 * page, PINHEAP_EVENT_SOURCE_APP), 1);

  /* shrinking in place: the tail */
  atomic_store(&rec_count, 0);
  cr_assert_eq(mremap(q, 64 * page, 10 * page, 0), q);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, q + 10 * page, 54 * page,
                      PINHEAP_EVENT_SOURCE_APP), 1);
  rec_stop();
  munmap(q, 10 * page);
}

/* The destination of MREMAP_FIXED loses its mapping: it must be reported.
 * Checked through the release listeners, whose API predates the events. */
static char *fixed_dst;
static atomic_int fixed_dst_seen;

static void fixed_listener(void *addr, size_t len, int from_alloc, void *ctx)
{
  (void)ctx;
  if (!from_alloc && (char *)addr <= fixed_dst && (char *)addr + len >= fixed_dst + 4 * page)
    atomic_fetch_add(&fixed_dst_seen, 1);
}

Test(events, mremap_fixed_destination_is_released, .init = interposed_or_skip)
{
  char *src = map_pages(4);
  fixed_dst = map_pages(4);
  cr_assert_eq(PINHEAP_NAME(register_release)(fixed_listener, NULL), 0);
  char *q = mremap(src, 4 * page, 4 * page, MREMAP_MAYMOVE | MREMAP_FIXED, fixed_dst);
  cr_assert_eq(q, fixed_dst);
  cr_assert_eq(atomic_load(&fixed_dst_seen), 1,
               "the destination range of mremap(MREMAP_FIXED) was not reported released");
  cr_assert_eq(PINHEAP_NAME(unregister_release)(fixed_listener, NULL), 0);
  munmap(q, 4 * page);
}

Test(events, mremap_fixed_events, .init = interposed_or_skip)
{
  char *src = map_pages(2), *dst = map_pages(3);
  rec_start(PINHEAP_EVENT_ALL);
  char *q = mremap(src, 2 * page, 3 * page, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
  cr_assert_eq(q, dst);
  const rec_t *r = rec_call(PINHEAP_EVENT_MREMAP);
  cr_assert_not_null(r);
  cr_assert_eq(r->ev.mremap.new_address, dst);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, dst, 3 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, src, 2 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_MAPPED, dst, 3 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  rec_stop();
  munmap(q, 3 * page);
}

Test(events, madvise_events, .init = interposed_or_skip)
{
  char *p = map_pages(4);
  char *s = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(s != MAP_FAILED);
  rec_start(PINHEAP_EVENT_ALL);
  cr_assert_eq(madvise(p, page, MADV_DONTNEED), 0);
  const rec_t *r = rec_call(PINHEAP_EVENT_MADVISE);
  cr_assert_not_null(r);
  cr_assert_eq(r->ev.madvise.address, p);
  cr_assert_eq(r->ev.madvise.size, page);
  cr_assert_eq(r->ev.madvise.advice, MADV_DONTNEED);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p, page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert_eq(madvise(p + page, page, MADV_FREE), 0);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p + page, page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert_eq(madvise(s, 2 * page, MADV_REMOVE), 0);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, s, 2 * page, PINHEAP_EVENT_SOURCE_APP), 1);
#ifdef MADV_DONTNEED_LOCKED
  madvise(p + 2 * page, page, MADV_DONTNEED_LOCKED);   /* EINVAL on kernels before 5.18 */
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p + 2 * page, page, PINHEAP_EVENT_SOURCE_APP), 1);
#endif
  /* advice that keeps the pages: no VM_UNMAPPED */
  int before = rec_n();
  cr_assert_eq(madvise(p + 3 * page, page, MADV_WILLNEED), 0);
  for (int i = before; i < rec_n(); i++)
    cr_assert_neq(rec_log[i].type, PINHEAP_EVENT_VM_UNMAPPED, "MADV_WILLNEED reported a release");
  rec_stop();
  munmap(p, 4 * page);
  munmap(s, 2 * page);
}

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102   /* Linux 6.13 */
#endif

/* MADV_GUARD_INSTALL zaps the pages as DONTNEED does (then faults on
 * access): a release. */
Test(events, madvise_guard_install_is_a_release, .init = interposed_or_skip)
{
  char *p = map_pages(4);
  rec_start(PINHEAP_EVENT_ALL);
  if (madvise(p + page, 2 * page, MADV_GUARD_INSTALL) != 0) {
    rec_stop();
    munmap(p, 4 * page);
    cr_skip_test("madvise(MADV_GUARD_INSTALL) refused (errno %d): a kernel before 6.13", errno);
  }
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p + page, 2 * page, PINHEAP_EVENT_SOURCE_APP), 1,
               "the guard install's range was not reported released");
  rec_stop();
  munmap(p, 4 * page);
}

Test(events, shmat_shmdt_events, .init = interposed_or_skip)
{
  int id = shm_make(3 * page - 100);   /* rounded up to 3 pages */
  rec_start(PINHEAP_EVENT_ALL);
  char *a = shmat(id, NULL, 0);
  shmctl(id, IPC_RMID, NULL);
  cr_assert(a != (void *)-1, "shmat: %s", strerror(errno));
  const rec_t *r = rec_call(PINHEAP_EVENT_SHMAT);
  cr_assert_not_null(r);
  cr_assert_eq(r->ev.shmat.shmid, id);
  cr_assert_null(r->ev.shmat.shmaddr);
  cr_assert_eq(r->ev.shmat.shmflg, 0);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_MAPPED, a, 3 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  atomic_store(&rec_count, 0);
  cr_assert_eq(shmdt(a), 0);
  r = rec_call(PINHEAP_EVENT_SHMDT);
  cr_assert_not_null(r);
  cr_assert_eq(r->ev.shmdt.shmaddr, a);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, a, 3 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  rec_stop();
}

/* How many of the n pages from addr some VM_UNMAPPED event covered. */
static size_t rec_unmapped_pages(const char *addr, size_t n)
{
  size_t heard = 0;
  for (size_t k = 0; k < n; k++)
    heard += (size_t)rec_unmapped_covers(addr + k * page, page, PINHEAP_EVENT_SOURCE_APP);
  return heard;
}

/* shmdt of a segment split into several mappings (pages in the middle
 * mprotect'ed: three of them) detaches every one of them, as the kernel
 * does; and a segment whose head was unmapped first detaches the rest.
 * Both with the segment still there (its size known: IPC_STAT) and
 * removed (IPC_RMID right after shmat, as runtimes do: size unknown). */
static void shmdt_split(bool rmid, bool head_gone)
{
  int id = shm_make(16 * page);
  char *a = shmat(id, NULL, 0);
  if (rmid)
    shmctl(id, IPC_RMID, NULL);
  cr_assert(a != (void *)-1, "shmat: %s", strerror(errno));
  char *other = shmat(id, NULL, 0);      /* another attachment: stays */
  cr_assert(other != (void *)-1, "shmat: %s", strerror(errno));
  memset(a, 1, 16 * page);
  cr_assert_eq(mprotect(a + 6 * page, 4 * page, PROT_READ), 0);
  if (head_gone)
    cr_assert_eq(munmap(a, 4 * page), 0);
  rec_start(PINHEAP_EVENT_VM_UNMAPPED);
  cr_assert_eq(shmdt(a), 0, "shmdt: %s", strerror(errno));
  rec_stop();
  size_t from = head_gone ? 4 : 0;
  cr_assert_eq(rec_unmapped_pages(a + from * page, 16 - from), 16 - from,
               "shmdt of a split segment (%s, %s): %zu of its %zu mapped pages reported "
               "released", rmid ? "removed" : "not removed",
               head_gone ? "head unmapped first" : "whole",
               rec_unmapped_pages(a + from * page, 16 - from), 16 - from);
  cr_assert_eq(rec_unmapped_pages(other, 16), 0, "the other attachment was reported released");
  cr_assert_eq(other[5 * page], 1);      /* and it is still there */
  cr_assert_eq(shmdt(other), 0);
  if (!rmid)
    shmctl(id, IPC_RMID, NULL);
}

Test(events, shmdt_split_segment, .init = interposed_or_skip) { shmdt_split(false, false); }
Test(events, shmdt_split_segment_removed, .init = interposed_or_skip) { shmdt_split(true, false); }
Test(events, shmdt_split_segment_head_gone, .init = interposed_or_skip) { shmdt_split(false, true); }
Test(events, shmdt_split_removed_head_gone, .init = interposed_or_skip) { shmdt_split(true, true); }

Test(events, shmat_remap_releases_target, .init = interposed_or_skip)
{
  int id = shm_make(2 * page);
  char *p = map_pages(2);
  rec_start(PINHEAP_EVENT_VM_UNMAPPED | PINHEAP_EVENT_VM_MAPPED);
  char *a = shmat(id, p, SHM_REMAP);
  shmctl(id, IPC_RMID, NULL);
  cr_assert_eq(a, p, "shmat(SHM_REMAP): %s", strerror(errno));
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p, 2 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_MAPPED, p, 2 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  rec_stop();
  shmdt(a);
}

Test(events, mmap_fixed_over_mapping, .init = interposed_or_skip)
{
  char *p = map_pages(4);
  rec_start(PINHEAP_EVENT_VM_UNMAPPED | PINHEAP_EVENT_VM_MAPPED);
  char *q = mmap(p + page, 2 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  cr_assert_eq(q, p + page);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p + page, 2 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_MAPPED, p + page, 2 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert_eq(q[0], 0, "MAP_FIXED did not replace the mapping");
  rec_stop();
  munmap(p, 4 * page);
}

/* brk below the heap's start (brk(0): glibc's way of asking) moves nothing
 * and releases nothing.  Before: VM_UNMAPPED for [0, the break), which a
 * registration cache takes as the loss of everything below the break. */
Test(events, brk_below_the_heap_releases_nothing, .init = interposed_or_skip)
{
  char *cur = sbrk(0);
  rec_start(PINHEAP_EVENT_VM_UNMAPPED);
  brk(NULL);
  brk((char *)cur - ((uintptr_t)cur & 0xfffffff));   /* far below: refused */
  int n = rec_n();
  rec_stop();
  cr_assert_eq(n, 0, "brk below the heap's start reported %d release(s)", n);
  cr_assert_eq(sbrk(0), cur, "the break moved");
}

Test(events, sbrk_brk_events, .init = interposed_or_skip)
{
  char *old = sbrk(0);
  cr_assert(old != (void *)-1);
  cr_assert_eq(__sbrk(0), old, "glibc's break and pinheap's disagree");
  uintptr_t up_old = ((uintptr_t)old + page - 1) & ~(uintptr_t)(page - 1);
  uintptr_t up_new = ((uintptr_t)old + 3 * page + page - 1) & ~(uintptr_t)(page - 1);

  rec_start(PINHEAP_EVENT_ALL);
  char *r0 = sbrk((intptr_t)(3 * page));
  if (r0 == (void *)-1) {
    rec_stop();
    cr_skip_test("the break cannot grow here: %s", strerror(errno));
  }
  cr_assert_eq(r0, old);
  cr_assert_eq(sbrk(0), old + 3 * page);
  cr_assert_eq(__sbrk(0), old + 3 * page, "glibc's __curbrk was not kept in step");
  const rec_t *r = rec_call(PINHEAP_EVENT_SBRK);
  cr_assert_not_null(r);
  cr_assert_eq(r->ev.sbrk.increment, (intptr_t)(3 * page));
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_MAPPED, (void *)up_old, up_new - up_old,
                      PINHEAP_EVENT_SOURCE_APP), 1);
  memset(old, 1, 3 * page);

  /* brk back down: the freed top is reported before it goes */
  atomic_store(&rec_count, 0);
  cr_assert_eq(brk(old), 0);
  r = rec_call(PINHEAP_EVENT_BRK);
  cr_assert_not_null(r);
  cr_assert_eq(r->ev.brk.address, old);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, (void *)up_old, up_new - up_old,
                      PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert_eq(sbrk(0), old);
  cr_assert_eq(__sbrk(0), old);

  /* and sbrk shrink */
  cr_assert_eq(sbrk((intptr_t)(2 * page)), old);
  atomic_store(&rec_count, 0);
  cr_assert_eq(sbrk(-(intptr_t)(2 * page)), old + 2 * page);
  uintptr_t up_mid = ((uintptr_t)old + 2 * page + page - 1) & ~(uintptr_t)(page - 1);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, (void *)up_old, up_mid - up_old,
                      PINHEAP_EVENT_SOURCE_APP), 1);
  rec_stop();
}

/* ======================================================================= */
/*  the allocator's own mappings and releases                               */
/* ======================================================================= */

Test(events, allocator_huge_block_and_trim, .init = interposed_or_skip)
{
  size_t big = (size_t)64 << 20;
  rec_start(PINHEAP_EVENT_VM_MAPPED | PINHEAP_EVENT_VM_UNMAPPED);
  char *p = PINHEAP_NAME(malloc)(big);
  cr_assert_not_null(p);
  int mapped = 0;
  for (int i = 0; i < rec_n(); i++) {
    const rec_t *r = &rec_log[i];
    if (r->type == PINHEAP_EVENT_VM_MAPPED && r->ev.vm_mapped.source == PINHEAP_EVENT_SOURCE_ALLOCATOR &&
        (char *)r->ev.vm_mapped.address <= p &&
        (char *)r->ev.vm_mapped.address + r->ev.vm_mapped.size >= p + big)
      mapped++;
  }
  cr_assert_eq(mapped, 1, "the huge block's mapping was not reported as VM_MAPPED");
  atomic_store(&rec_count, 0);
  PINHEAP_NAME(free)(p);
  PINHEAP_NAME(malloc_trim)(0);  /* the huge cache, if it kept the block */
  cr_assert(rec_unmapped_covers(p, big, PINHEAP_EVENT_SOURCE_ALLOCATOR),
            "the huge block's release was not reported");

  /* trim: a heap top made free and trimmed */
  void *blocks[64];
  for (int i = 0; i < 64; i++)
    blocks[i] = PINHEAP_NAME(malloc)(60000);
  for (int i = 63; i >= 0; i--)
    PINHEAP_NAME(free)(blocks[i]);
  atomic_store(&rec_count, 0);
  int released = PINHEAP_NAME(malloc_trim)(0);
  int seen = 0;
  for (int i = 0; i < rec_n(); i++)
    seen += rec_log[i].type == PINHEAP_EVENT_VM_UNMAPPED &&
            rec_log[i].ev.vm_unmapped.source == PINHEAP_EVENT_SOURCE_ALLOCATOR;
  cr_assert(released == 0 || seen > 0, "malloc_trim gave memory back without an event");
  rec_stop();
}

/* ======================================================================= */
/*  page rounding                                                           */
/* ======================================================================= */

Test(events, ranges_are_page_rounded, .init = interposed_or_skip)
{
  char *p = map_pages(4);
  rec_start(PINHEAP_EVENT_VM_UNMAPPED);
  cr_assert_eq(madvise(p, 10, MADV_DONTNEED), 0);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p, page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert_eq(munmap(p, page + 1), 0);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p, 2 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert(!is_mapped(p + page), "the kernel did not round as expected");
  rec_stop();
  munmap(p + 2 * page, 2 * page);
}

/* ======================================================================= */
/*  order, changed arguments, STOP                                          */
/* ======================================================================= */

static int order_log[8];
static atomic_int order_n;

static int order_handler(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)ev;
  int i = atomic_fetch_add(&order_n, 1);
  if (i < 8)
    order_log[i] = (int)(intptr_t)arg;
  return PINHEAP_EVENT_PASS;
}

Test(events, priority_order, .init = interposed_or_skip)
{
  /* ids: priority 5 -> 1; -3 -> 2; 0 -> 3, 4 (registration order) */
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP, 5, order_handler, (void *)1), 0);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP, -3, order_handler, (void *)2), 0);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP, 0, order_handler, (void *)3), 0);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP, 0, order_handler, (void *)4), 0);
  char *p = map_pages(1);
  atomic_store(&order_n, 0);
  munmap(p, page);
  cr_assert_eq(atomic_load(&order_n), 4);
  cr_assert_eq(order_log[0], 2);
  cr_assert_eq(order_log[1], 3);
  cr_assert_eq(order_log[2], 4);
  cr_assert_eq(order_log[3], 1);
  for (intptr_t i = 1; i <= 4; i++)
    cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_MUNMAP, order_handler, (void *)i), 0);
  p = map_pages(1);
  atomic_store(&order_n, 0);
  munmap(p, page);
  cr_assert_eq(atomic_load(&order_n), 0, "an unset handler ran");
}

static int widen_handler(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)arg;
  ev->munmap.size = 2 * page;
  return PINHEAP_EVENT_PASS;
}

static int stop_handler(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  atomic_fetch_add((atomic_int *)arg, 1);
  ev->munmap.result = 0;
  return PINHEAP_EVENT_STOP;
}

Test(events, handler_changes_argument, .init = interposed_or_skip)
{
  char *p = map_pages(3);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP, -10, widen_handler, NULL), 0);
  rec_start(PINHEAP_EVENT_MUNMAP | PINHEAP_EVENT_VM_UNMAPPED);
  cr_assert_eq(munmap(p, page), 0);
  /* later handlers and the call see the change */
  cr_assert_eq(rec_call(PINHEAP_EVENT_MUNMAP)->ev.munmap.size, 2 * page);
  cr_assert_eq(rec_vm(PINHEAP_EVENT_VM_UNMAPPED, p, 2 * page, PINHEAP_EVENT_SOURCE_APP), 1);
  cr_assert(!is_mapped(p) && !is_mapped(p + page), "the changed length was not used");
  cr_assert(is_mapped(p + 2 * page));
  rec_stop();
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_MUNMAP, widen_handler, NULL), 0);
  munmap(p + 2 * page, page);
}

Test(events, handler_stops_the_call, .init = interposed_or_skip)
{
  atomic_int stops = 0;
  char *p = map_pages(1);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP, -1, stop_handler, &stops), 0);
  rec_start(PINHEAP_EVENT_ALL);         /* priority 0: after the stopper */
  cr_assert_eq(munmap(p, page), 0);
  cr_assert_eq(atomic_load(&stops), 1);
  cr_assert_eq(rec_n(), 0, "a handler after STOP ran, or VM_UNMAPPED fired for a call not made");
  cr_assert(is_mapped(p), "the call was made although a handler stopped it");
  cr_assert_eq(p[0], 0x5a);
  rec_stop();
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_MUNMAP, stop_handler, &stops), 0);
  cr_assert_eq(munmap(p, page), 0);
  cr_assert(!is_mapped(p));
}

/* ======================================================================= */
/*  handlers that allocate, free and unmap                                  */
/* ======================================================================= */

static atomic_int busy_calls;

static int busy_handler(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)ev;
  (void)arg;
  atomic_fetch_add(&busy_calls, 1);
  void *m = malloc(100);
  free(m);
  void *big = PINHEAP_NAME(malloc)((size_t)8 << 20);   /* the OS layer: nested events */
  PINHEAP_NAME(free)(big);
  char *x = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (x != MAP_FAILED)
    munmap(x, page);                    /* an event from inside the handler, each time */
  return PINHEAP_EVENT_PASS;
}

/* A handler that unmaps a page of its own on every release it hears (as a
 * cache dropping a registration may), nesting on its thread, and a
 * listener after it (a registration cache): the listener must hear every
 * one of those releases, however deep.  Before: the fifth level was
 * dropped for every handler. */
#define NEST_MAX 64
static char *nest_made[NEST_MAX];
static atomic_int nest_n;
static char *nest_heard[4 * NEST_MAX];
static atomic_int nest_heard_n;

static int nest_unmapper(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)ev;
  (void)arg;
  int i = atomic_fetch_add(&nest_n, 1);
  if (i >= NEST_MAX)
    return PINHEAP_EVENT_PASS;
  char *x = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (x == MAP_FAILED)
    return PINHEAP_EVENT_PASS;
  nest_made[i] = x;
  munmap(x, page);                      /* one level deeper */
  return PINHEAP_EVENT_PASS;
}

static int nest_listener(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)arg;
  int i = atomic_fetch_add(&nest_heard_n, 1);
  if (i < 4 * NEST_MAX)
    nest_heard[i] = ev->vm_unmapped.address;
  return PINHEAP_EVENT_PASS;
}

Test(events, nested_releases_reach_every_listener, .init = interposed_or_skip, .timeout = 60)
{
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, -10, nest_unmapper,
                                               NULL), 0);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, 0, nest_listener,
                                               NULL), 0);
  char *p = map_pages(1);
  munmap(p, page);
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_ALL, nest_listener, NULL), 0);
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_ALL, nest_unmapper, NULL), 0);
  int made = atomic_load(&nest_n), heard = atomic_load(&nest_heard_n);
  cr_assert(made >= 4 && made < NEST_MAX,
            "the unmapper nested %d times (4 re-entries expected, and bounded)", made);
  for (int i = 0; i < made; i++) {
    int found = 0;
    for (int j = 0; j < heard && j < 4 * NEST_MAX; j++)
      found |= nest_heard[j] == nest_made[i];
    cr_assert(found, "the release made at nesting level %d was not heard by the listener "
              "(%d made, %d heard)", i + 1, made, heard);
  }
}

Test(events, handler_that_allocates_and_unmaps, .init = interposed_or_skip, .timeout = 60)
{
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP | PINHEAP_EVENT_VM_UNMAPPED |
                                               PINHEAP_EVENT_VM_MAPPED, 0, busy_handler, NULL), 0);
  char *p = map_pages(1);
  munmap(p, page);
  int calls = atomic_load(&busy_calls);
  cr_assert(calls > 1, "the nested events were not delivered (%d calls)", calls);
  cr_assert(calls < 100000, "nesting was not bounded (%d calls)", calls);
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_ALL, busy_handler, NULL), 0);
  atomic_store(&busy_calls, 0);
  p = map_pages(1);
  munmap(p, page);
  cr_assert_eq(atomic_load(&busy_calls), 0);
}

/* ======================================================================= */
/*  set/unset under fire                                                    */
/* ======================================================================= */

typedef struct live_s {
  atomic_int gone;       /* set once unset returned */
  atomic_int late;       /* calls seen after that */
  atomic_int calls;
} live_t;

static int live_handler(int type, pinheap_event_t *ev, void *arg)
{
  live_t *l = arg;
  (void)type;
  (void)ev;
  atomic_fetch_add(&l->calls, 1);
  if (atomic_load(&l->gone))
    atomic_fetch_add(&l->late, 1);
  return PINHEAP_EVENT_PASS;
}

static atomic_int churn_stop;
static atomic_int churn_late;

static void *churn_unmapper(void *arg)
{
  (void)arg;
  while (!atomic_load(&churn_stop)) {
    char *x = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (x != MAP_FAILED)
      munmap(x, page);
  }
  return NULL;
}

static void *churn_setter(void *arg)
{
  (void)arg;
  for (int round = 0; round < 300; round++) {
    live_t l;
    atomic_init(&l.gone, 0);
    atomic_init(&l.late, 0);
    atomic_init(&l.calls, 0);
    int events = (round & 1) ? PINHEAP_EVENT_MUNMAP | PINHEAP_EVENT_VM_UNMAPPED
                             : PINHEAP_EVENT_ALL;
    if (PINHEAP_NAME(set_event_handler)(events, round % 7 - 3, live_handler, &l) != 0)
      return (void *)1;
    sched_yield();
    if (PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_ALL, live_handler, &l) != 0)
      return (void *)2;
    atomic_store(&l.gone, 1);
    for (int i = 0; i < 50; i++)
      sched_yield();
    atomic_fetch_add(&churn_late, atomic_load(&l.late));
    /* l goes out of scope: a late call would touch a dead frame */
  }
  return NULL;
}

Test(events, set_unset_while_events_fire, .init = interposed_or_skip, .timeout = 120)
{
  pthread_t un[2], set[4];
  for (int i = 0; i < 2; i++)
    cr_assert_eq(pthread_create(&un[i], NULL, churn_unmapper, NULL), 0);
  for (int i = 0; i < 4; i++)
    cr_assert_eq(pthread_create(&set[i], NULL, churn_setter, NULL), 0);
  for (int i = 0; i < 4; i++) {
    void *rc;
    pthread_join(set[i], &rc);
    cr_assert_null(rc, "set/unset failed in a setter thread (%p)", rc);
  }
  atomic_store(&churn_stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(un[i], NULL);
  cr_assert_eq(atomic_load(&churn_late), 0, "a handler ran after unset returned");
}

/* ======================================================================= */
/*  bad input, malloc_init                                                  */
/* ======================================================================= */

static int noop_handler(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)ev;
  (void)arg;
  return PINHEAP_EVENT_PASS;
}

Test(events, bad_input)
{
  static int ids[200];
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(0, 0, noop_handler, NULL), EINVAL);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(0x40000000, 0, noop_handler, NULL), EINVAL);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP | 0x100, 0, noop_handler, NULL),
               EINVAL);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP, 0, NULL, NULL), EINVAL);
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(0, noop_handler, NULL), EINVAL);
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_MUNMAP, NULL, NULL), EINVAL);
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_MUNMAP, noop_handler, NULL), ENOENT);

  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MUNMAP, 0, noop_handler, NULL), 0);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_MMAP, 0, noop_handler, NULL), EEXIST);
  /* removing an event it does not have */
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_MMAP, noop_handler, NULL), ENOENT);
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_MUNMAP, noop_handler, NULL), 0);

  /* a full table */
  int n = 0;
  while (n < 200 && PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_SBRK, 0, noop_handler, &ids[n]) == 0)
    n++;
  cr_assert(n >= 64 && n < 200, "%d handlers fit", n);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_SBRK, 0, noop_handler, &ids[n]), ENOSPC);
  for (int i = 0; i < n; i++)
    cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_SBRK, noop_handler, &ids[i]), 0);
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_SBRK, 0, noop_handler, &ids[0]), 0);
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_ALL, noop_handler, &ids[0]), 0);
}

static void *init_thread(void *arg)
{
  (void)arg;
  return (void *)(intptr_t)PINHEAP_NAME(malloc_init)();
}

Test(events, malloc_init_is_idempotent)
{
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, init_thread, NULL), 0);
  for (int i = 0; i < 4; i++) {
    void *rc;
    pthread_join(t[i], &rc);
    cr_assert_null(rc, "malloc_init returned %d", (int)(intptr_t)rc);
  }
  cr_assert_eq(PINHEAP_NAME(malloc_init)(), 0);
  cr_assert_eq(PINHEAP_NAME(malloc_init)(), 0);
  void *p = PINHEAP_NAME(malloc)(100);
  cr_assert_not_null(p);
  cr_assert(PINHEAP_NAME(owns)(p));
  PINHEAP_NAME(free)(p);
}

/* ======================================================================= */
/*  a partial unset, a handler cancelled                                    */
/* ======================================================================= */

enum { PARTIAL_HANDLERS = 100, PARTIAL_UNMAPS = 3000 };
static int partial_ids[PARTIAL_HANDLERS];
static atomic_int partial_heard[PARTIAL_HANDLERS];
static atomic_int partial_stop;
static void *_Atomic partial_target;   /* the page the test unmaps now */

static int partial_handler(int type, pinheap_event_t *ev, void *arg)
{
  if (type == PINHEAP_EVENT_VM_UNMAPPED && ev->vm_unmapped.address == atomic_load(&partial_target))
    atomic_fetch_add(&partial_heard[(int *)arg - partial_ids], 1);
  return PINHEAP_EVENT_PASS;
}

/* Takes VM_MAPPED away from each handler in turn: the handlers stay
 * registered for VM_UNMAPPED all along. */
static void *partial_unsetter(void *arg)
{
  (void)arg;
  for (int i = 0; i < PARTIAL_HANDLERS && !atomic_load(&partial_stop); i++) {
    PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_VM_MAPPED, partial_handler, &partial_ids[i]);
    for (int k = 0; k < 20; k++)
      sched_yield();
  }
  return NULL;
}

/* The case: 100 handlers for VM_UNMAPPED|VM_MAPPED, another thread
 * unsetting only VM_MAPPED on each in turn; every handler must hear every
 * munmap (it missed 19-80 of 3000 per round when the mask change made
 * dispatches in flight skip the slot for every event). */
Test(events, partial_unset_keeps_the_other_events, .init = interposed_or_skip, .timeout = 120)
{
  for (int round = 0; round < 5; round++) {
    for (int i = 0; i < PARTIAL_HANDLERS; i++) {
      atomic_store(&partial_heard[i], 0);
      cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED |
                                                   PINHEAP_EVENT_VM_MAPPED, 0, partial_handler,
                                                   &partial_ids[i]), 0);
    }
    atomic_store(&partial_stop, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, partial_unsetter, NULL), 0);
    for (int n = 0; n < PARTIAL_UNMAPS; n++) {
      char *p = map_pages(1);
      atomic_store(&partial_target, p);
      munmap(p, page);
    }
    atomic_store(&partial_stop, 1);
    pthread_join(t, NULL);
    for (int i = 0; i < PARTIAL_HANDLERS; i++) {
      cr_expect_eq(atomic_load(&partial_heard[i]), PARTIAL_UNMAPS,
                   "round %d: handler %d heard %d of %d munmaps", round, i,
                   atomic_load(&partial_heard[i]), PARTIAL_UNMAPS);
      cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_ALL, partial_handler,
                                                     &partial_ids[i]), 0);
    }
  }
}

static atomic_int cancel_entered;
static void *_Atomic cancel_page;

/* Waits at a cancellation point inside the handler, for the victim's
 * munmap only (the thread's own exit releases its stack: that must pass),
 * until cancelled. */
static int cancel_handler(int type, pinheap_event_t *ev, void *arg)
{
  (void)type, (void)arg;
  if (ev->vm_unmapped.address != atomic_load(&cancel_page))
    return PINHEAP_EVENT_PASS;
  atomic_store(&cancel_entered, 1);
  for (;;)
    pause();
  return PINHEAP_EVENT_PASS;
}

static void *cancel_victim(void *arg)
{
  (void)arg;
  char *p = map_pages(1);
  atomic_store(&cancel_page, p);
  munmap(p, page);
  return NULL;
}

static void *cancel_unsetter(void *arg)
{
  (void)arg;
  return (void *)(intptr_t)PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_VM_UNMAPPED,
                                                             cancel_handler, NULL);
}

/* A thread cancelled inside a handler leaves it: unset must not wait for
 * it forever (an MPI_Finalize would hang). */
Test(events, thread_cancelled_inside_a_handler, .init = interposed_or_skip, .timeout = 60)
{
  pthread_t victim, unsetter;
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, 0, cancel_handler, NULL),
               0);
  cr_assert_eq(pthread_create(&victim, NULL, cancel_victim, NULL), 0);
  while (!atomic_load(&cancel_entered))
    sched_yield();
  cr_assert_eq(pthread_cancel(victim), 0);
  void *res;
  cr_assert_eq(pthread_join(victim, &res), 0);
  cr_assert_eq(res, PTHREAD_CANCELED);
  cr_assert_eq(pthread_create(&unsetter, NULL, cancel_unsetter, NULL), 0);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 10;
  int rc = pthread_timedjoin_np(unsetter, &res, &until);
  cr_assert_eq(rc, 0, "unset_event_handler still waits 10 s after the cancelled handler's "
               "thread ended");
  cr_assert_eq((int)(intptr_t)res, 0);
  /* the slot is usable again, and events flow */
  cr_assert_eq(PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, 0, noop_handler, NULL), 0);
  munmap(map_pages(1), page);
  cr_assert_eq(PINHEAP_NAME(unset_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, noop_handler, NULL), 0);
}
