/*
 * mspace.c -- the mspace API: heaps of the caller's, created over fresh
 * mappings (create_mspace) or over the caller's region
 * (create_mspace_with_base), destroyed whole, and the mspace_* calls.
 * Main entry points: create_mspace() and destroy_mspace() (a heap's
 * making and unmaking are state.c's: ms_create(), ms_destroy()).
 */
#include "allocator/api/api.h"

#include <errno.h>
#include <malloc.h>

#include "pinheap.h"

/* ---- which handles are live mspaces ---------------------------------------
 * An mspace made by create_mspace lives in its first segment, which the
 * owner map names while the mspace lives and forgets when it is destroyed
 * (its memory is unmapped then: reading it would fault).  One made over
 * the caller's region is in no owner map (that memory may vanish
 * unannounced), so the live ones are kept in a table of pinheap's own
 * metadata, pages of MS_REGION_SLOTS handles chained and never given back;
 * a destroyed one's slot is reused.  So destroy_mspace twice, or an
 * mspace_* call after it, is named instead of faulting. */
#define MS_REGION_SLOTS ((4096 - sizeof(void *)) / sizeof(void *))
typedef struct ms_regions_s {
  struct ms_regions_s *_Atomic next;
  mstate_t *_Atomic slot[MS_REGION_SLOTS];
} ms_regions_t;

static ms_regions_t *_Atomic ms_regions;   /* lock-free: fork needs no handler */

static mstate_t *_Atomic *ms_region_find(const mstate_t *ms)
{
  for (ms_regions_t *r = atomic_load_explicit(&ms_regions, memory_order_acquire); r != NULL;
       r = atomic_load_explicit(&r->next, memory_order_acquire)) {
    for (size_t i = 0; i < MS_REGION_SLOTS; i++) {
      if (atomic_load_explicit(&r->slot[i], memory_order_acquire) == ms)
        return &r->slot[i];
    }
  }
  return NULL;
}

/* Records ms in a free slot (a new page when none is left).  @return false
 * if no metadata page could be had. */
static bool ms_region_add(mstate_t *ms)
{
  for (;;) {
    mstate_t *_Atomic *slot = ms_region_find(NULL);
    mstate_t *none = NULL;
    if (slot != NULL) {
      if (atomic_compare_exchange_strong(slot, &none, ms))
        return true;
      continue;                               /* taken meanwhile: look again */
    }
    ms_regions_t *r = os_reserve_meta(sizeof(ms_regions_t));
    if (r == NULL)
      return false;
    atomic_store_explicit(&r->slot[0], ms, memory_order_relaxed);
    ms_regions_t *head = atomic_load_explicit(&ms_regions, memory_order_relaxed);
    do {
      atomic_store_explicit(&r->next, head, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(&ms_regions, &head, r, memory_order_release,
                                                    memory_order_relaxed));
    return true;
  }
}

static void ms_region_drop(mstate_t *ms)
{
  mstate_t *_Atomic *slot = ms_region_find(ms);
  mstate_t *want = ms;
  if (slot != NULL)
    atomic_compare_exchange_strong(slot, &want, NULL);
}

pinheap_mspace create_mspace(size_t capacity, int locked)
{
  return ms_create(capacity, (locked ? PH_MS_LOCKED : 0) | PH_MS_USER, PH_KIND_USER);
}

pinheap_mspace create_mspace_with_base(void *base, size_t capacity, int locked)
{
  uintptr_t b = align_up((uintptr_t)base, PH_ALIGN);
  uintptr_t end;

  if (base == NULL || __builtin_add_overflow((uintptr_t)base, capacity, &end)) {
    errno = EINVAL;
    return NULL;
  }
  end = align_down(end, PH_ALIGN);
  if (end < b || end - b < PH_MS_CHUNK_OFF + PH_MIN_CHUNK + PH_FENCE_SIZE) {
    errno = EINVAL;
    return NULL;
  }
  mstate_t *ms = (mstate_t *)(b + PH_MS_OFF);
  ms_init(ms, &mem_source_region, locked ? PH_MS_LOCKED : 0, PH_KIND_NONE);
  seg_format(ms, (char *)b, end - b, PH_MS_CHUNK_OFF, PH_SEG_HOLDS_MS);
  ms->top_seg = (seg_t *)b;
  ms->top = seg_first(ms->top_seg);
  if (!ms_region_add(ms)) {
    ms->flags = 0;
    errno = ENOMEM;
    return NULL;
  }
  return ms;
}

/* Validates an mspace handle before use: a live mspace (of either kind)
 * or an arena, found without reading the handle's memory first. */
static mstate_t *mspace_state(pinheap_mspace msp, const char *fn)
{
  mstate_t *ms = msp;

  if (ms == NULL || ((uintptr_t)ms & PH_ALIGN_MASK) != 0)
    ph_fatal(fn, "invalid mspace", msp);
  /* An mspace lives in its first segment, just after the header: that
   * segment never changes (ms->segs does as the heap grows, under its
   * lock, which this check does not take). */
  const seg_t *home = (const seg_t *)((uintptr_t)msp - PH_MS_OFF);
  if (owner_seg(owner_map_get(home)) != home && ms_region_find(ms) == NULL)
    ph_fatal(fn, "not a live mspace (destroyed, or never made by create_mspace)", msp);
  if (!(__atomic_load_n(&ms->flags, __ATOMIC_ACQUIRE) & PH_MS_INIT) ||
      home->base != (const char *)home || home->ms != ms)
    ph_fatal(fn, "invalid mspace", msp);
  return ms;
}

size_t destroy_mspace(pinheap_mspace msp)
{
  mstate_t *ms = mspace_state(msp, "destroy_mspace");

  if (!ms->source->releases) {          /* the caller's region stays the caller's */
    ms_region_drop(ms);
    ms->flags = 0;
    return 0;
  }
  if (!(ms->flags & PH_MS_USER))
    ph_fatal("destroy_mspace", "not an mspace (an arena of malloc)", msp);
  return ms_destroy(ms);
}

/* PINHEAP_DEBUG >= 2: the mspace is checked after each call. */
#define MSPACE_CHECKED(ms, fn, call)       \
  do {                                     \
    __typeof__(call) r_ = (call);          \
    PH_DEBUG_CHECK(ms, fn);                \
    return r_;                             \
  } while (0)

void *mspace_malloc(pinheap_mspace msp, size_t bytes)
{
  mstate_t *ms = mspace_state(msp, "mspace_malloc");
  MSPACE_CHECKED(ms, "mspace_malloc", ms_malloc(ms, bytes));
}

void mspace_free(pinheap_mspace msp, void *mem)
{
  mstate_t *ms = mspace_state(msp, "mspace_free");
  if (mem != NULL)
    ms_free_mem(ms, mem, "mspace_free");
  PH_DEBUG_CHECK(ms, "mspace_free");
}

void *mspace_calloc(pinheap_mspace msp, size_t n, size_t elem_size)
{
  mstate_t *ms = mspace_state(msp, "mspace_calloc");
  MSPACE_CHECKED(ms, "mspace_calloc", ms_calloc(ms, n, elem_size));
}

void *mspace_realloc(pinheap_mspace msp, void *mem, size_t newsize)
{
  mstate_t *ms = mspace_state(msp, "mspace_realloc");
  MSPACE_CHECKED(ms, "mspace_realloc", ms_realloc(ms, mem, newsize, "mspace_realloc"));
}

void *mspace_memalign(pinheap_mspace msp, size_t alignment, size_t bytes)
{
  mstate_t *ms = mspace_state(msp, "mspace_memalign");
  MSPACE_CHECKED(ms, "mspace_memalign", ms_memalign(ms, alignment, bytes));
}

size_t mspace_usable_size(const void *mem)
{
  if (mem != NULL && slab_page_of(mem) != NULL)
    return slab_usable(mem, "mspace_usable_size");
  return mem_usable(mem, "mspace_usable_size", true);
}

int mspace_trim(pinheap_mspace msp, size_t pad)
{
  mstate_t *ms = mspace_state(msp, "mspace_trim");
  MSPACE_CHECKED(ms, "mspace_trim", ms_trim(ms, pad));
}

struct mallinfo2 mspace_mallinfo(pinheap_mspace msp)
{
  return ms_info(mspace_state(msp, "mspace_mallinfo"));
}

int mspace_check(pinheap_mspace msp)
{
  mstate_t *ms = mspace_state(msp, "mspace_check");
  ms_lock(ms);
  int problems = mstate_check(ms);
  ms_unlock(ms);
  return problems;
}
