/*
 * state.c -- a heap's state: the process-wide tunables (mparams), the free
 * key and the cookies every heap's checks use, a heap's set-up (ms_init),
 * a heap over fresh mappings made and unmade whole (ms_create,
 * ms_destroy), and the private heap's arena 0 (heap_main_private; the
 * default heap itself is chosen by init.c's heap_default, which publishes
 * it in heap_main).  Main entry points: ms_init(), ms_create().
 */
#include "allocator/heap/chunk.h"
#include "allocator/base/startup.h"     /* PH_STARTUP: once per process, thread or arena */

#include <errno.h>
#include <string.h>
#include <sys/auxv.h>

static mstate_t gm;                      /* arena 0 of the private heap */
/* arena 0 once set up: &gm, or the shared heap's arena 0 in its region */
mstate_t *heap_main;

static atomic_size_t cookie_counter;

/* ms_create: an arena's first mapping is a multiple of this long. */
#define PH_ARENA_MAP_ALIGN ((size_t)2 << 20)


mparams_t mparams = {
  .mmap_threshold = PH_DEFAULT_MMAP_THRESHOLD,
  .trim_threshold = PH_DEFAULT_TRIM_THRESHOLD,
  .top_pad = 0,
  .mmap_max = PH_DEFAULT_MMAP_MAX,
  .mmap_threshold_set = false,
};

uint64_t chunk_free_key;

/* Sets chunk_free_key once, before any heap exists: random, odd (never 0,
 * never a pointer). */
PH_STARTUP void chunk_free_key_init(void)
{
  if (__atomic_load_n(&chunk_free_key, __ATOMIC_RELAXED) != 0)
    return;
  uint64_t key = 0x5f3759df9e3779b9ULL;
  const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
  if (r != NULL)
    memcpy(&key, r + 8, sizeof(key));
  uint64_t zero = 0;
  __atomic_compare_exchange_n(&chunk_free_key, &zero, key | 1, false, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
}

PH_STARTUP static size_t cookie_make(const void *salt)
{
  uint64_t c = 0;
  const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);

  if (r != NULL)
    memcpy(&c, r, sizeof(c));
  c ^= (uintptr_t)salt * 0xff51afd7ed558ccdULL;
  c ^= atomic_fetch_add_explicit(&cookie_counter, 1, memory_order_relaxed) * 0xc4ceb9fe1a85ec53ULL;
  return (size_t)(c & PH_SIZE_MASK);   /* never disturbs bits outside size */
}

PH_STARTUP void ms_init(mstate_t *ms, const mem_source_t *src, unsigned flags, unsigned kind)
{
  chunk_free_key_init();
  memset(ms, 0, offsetof(mstate_t, bins));   /* the bins wait (bin_live) */
  ms->source = src;
  ms->kind = kind;
  ms->cookie = cookie_make(ms);
  ms->seg_grow = PH_DEFAULT_SEGMENT;
  bin_at(ms, PH_DV_BIN)->fd = bin_at(ms, PH_DV_BIN)->bk = bin_at(ms, PH_DV_BIN);
  if (src->in_owner_map)            /* the caller's regions may vanish unannounced */
    ms_register(ms);
  /* last: heap_default() tests PH_MS_INIT without the lock */
  __atomic_store_n(&ms->flags, flags | PH_MS_INIT, __ATOMIC_RELEASE);
}

/* The private heap's arena 0, set up (heap_default, once). */
PH_STARTUP mstate_t *heap_main_private(void)
{
  ms_init(&gm, &mem_source_os, PH_MS_LOCKED, PH_KIND_ARENA_TAG(0));
  return &gm;
}

/* Room for a thread cache (tcache_t) between an arena's mstate_t and its
 * first chunk (at chunk_off), laid out as the pool lays caches out (`kind`
 * on a page boundary: tcache.c), on the page of the first chunk's header,
 * which the arena's first slab page makes resident anyway: the cache of
 * the thread that made the arena (tcache.c: tcache_make) then costs no page
 * of its own but for its chunk lists.  NULL if it does not fit (large
 * pages). */
PH_STARTUP static void *cache_slot_in(char *base, size_t chunk_off)
{
  uintptr_t kind_at = align_down((uintptr_t)base + chunk_off, os_page_size());
  uintptr_t tc = kind_at - offsetof(tcache_t, kind);

  if (kind_at < (uintptr_t)base + offsetof(tcache_t, kind) ||
      tc < (uintptr_t)base + PH_MS_OFF + sizeof(mstate_t) ||
      tc % 64 != 0 || tc + sizeof(tcache_t) > (uintptr_t)base + chunk_off)
    return NULL;
  return (void *)tc;
}

PH_STARTUP mstate_t *ms_create(size_t capacity, unsigned flags, unsigned kind)
{
  size_t len;
  char *p;

  if (capacity == 0)
    capacity = PH_DEFAULT_SEGMENT;
  if (capacity > PH_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  /* An arena's first chunk starts where its second granule's header lies,
   * not right after its mstate_t (15.5 kB): its first slab page (slab.c:
   * slab_top_take) is then that chunk, with no lead chunk cut before it,
   * whose header made one more page resident in every arena.  The rest of
   * the first granule is address space only.  An mspace keeps its chunks
   * right after its state (no slab pages). */
  size_t chunk_off = PH_MS_CHUNK_OFF;
  if (!(flags & PH_MS_USER) && chunk_off < PH_GRANULE - PH_CHUNK_HDR)
    chunk_off = PH_GRANULE - PH_CHUNK_HDR;
  len = align_up(capacity + chunk_off + PH_FENCE_SIZE + PH_MIN_CHUNK, PH_GRANULE);
  /* An arena's reserve (as seg_spare_for()) is stretched so that the whole
   * mapping is a multiple of 2 MiB: Linux (6.7 on) puts an anonymous
   * mapping of such a length on a 2 MiB boundary, a granule boundary, and
   * os_map_reserved takes it as it comes.  With 1 MiB + 64 KiB + 3 MiB,
   * the mapping came unaligned and was mapped again larger and trimmed, in
   * code (os_map_over_aligned) that only a new arena runs: every program
   * that starts a thread had two more 64 KiB windows of the shim's text
   * resident (44 pages instead of 16; pinheap-bench fixed at 1 thread,
   * whose workload runs on a thread of its own).  Elsewhere nothing
   * changes: the trim still happens.  A reserve is address space only. */
  size_t spare = (flags & PH_MS_USER) ? 0 : align_up(len + PH_SEG_SPARE, PH_ARENA_MAP_ALIGN) - len;
  p = os_map_reserved(NULL, len, spare, PH_GRANULE);
  if (p == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  mstate_t *ms = (mstate_t *)(p + PH_MS_OFF);
  if (!owner_map_set(p, len, (uintptr_t)p | ((flags & PH_MS_USER) ? PH_OWNER_USER_TAG : 0), kind)) {
    os_release(p, len + spare);
    errno = ENOMEM;
    return NULL;
  }
  ms_init(ms, &mem_source_os, flags, kind);
  ms->seg_grow = align_up(capacity, PH_GRANULE);
  seg_format(ms, p, len, chunk_off, PH_SEG_HOLDS_MS);
  if (chunk_off != PH_MS_CHUNK_OFF)
    atomic_store_explicit(&ms->cache_slot, cache_slot_in(p, chunk_off), memory_order_relaxed);
  ((seg_t *)p)->spare = spare;
  ms->top_seg = (seg_t *)p;
  ms->top = seg_first(ms->top_seg);
  return ms;
}

size_t ms_destroy(mstate_t *ms)
{
  size_t total = 0;
  seg_t *home = NULL;

  ms_unregister(ms);
  ms_lock(ms);
  huge_t *h = ms->huge;
  seg_t *s = ms->segs;
  ms->huge = NULL;
  ms->segs = NULL;
  for (huge_t *x = h; x != NULL; x = x->next)
    owner_map_set(x, x->map_size, 0, PH_KIND_NONE);
  for (seg_t *x = s; x != NULL; x = x->next)
    owner_map_set(x->base, x->size, 0, PH_KIND_NONE);
  ms_unlock(ms);
  while (h != NULL) {
    huge_t *nx = h->next;
    size_t len = h->map_size;
    total += len;
    atomic_fetch_sub_explicit(&huge_total, 1, memory_order_relaxed);
    os_release(h, len);
    h = nx;
  }
  while (s != NULL) {
    seg_t *nx = s->next;
    if (s->flags & PH_SEG_HOLDS_MS) {
      home = s;
    } else {
      total += s->size + s->spare;
      os_release(s->base, s->size + s->spare);
    }
    s = nx;
  }
  if (home != NULL) {
    size_t len = home->size + home->spare;
    total += len;
    os_release(home->base, len);
  }
  return total;
}
