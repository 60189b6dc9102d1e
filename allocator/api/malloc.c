/*
 * malloc.c -- the malloc family's entry points: malloc, free, calloc,
 * realloc, reallocarray, memalign, posix_memalign, aligned_alloc, valloc,
 * pvalloc, malloc_usable_size, mallopt.  Main entry points: malloc() and
 * free(); their fast paths are inline in front.h (hooks/dispatch.c inlines
 * them too), the slow paths are in tcache.c.
 */
#include "allocator/api/api.h"

#include <errno.h>
#include <malloc.h>
#include <string.h>

#include "pinheap.h"

/* PINHEAP_DEBUG >= 2: the whole malloc family checked after each call. */
#define FRONT_CHECKED(fn, call)            \
  do {                                     \
    __typeof__(call) r_ = (call);          \
    PH_DEBUG_CHECK(NULL, fn);              \
    return r_;                             \
  } while (0)

PH_HOT_ENTRY void *malloc(size_t size)
{
#if PINHEAP_DEBUG >= 2
  FRONT_CHECKED("malloc", front_malloc(size));
#else
  return front_malloc(size);
#endif
}

PH_HOT void free(void *ptr)
{
  if (ph_likely(front_free_fast(ptr))) {
    PH_DEBUG_CHECK(NULL, "free");
    return;
  }
  if (ptr == NULL)
    return;
  front_free_slow(ptr, owner_map_get(ptr), "free");
  PH_DEBUG_CHECK(NULL, "free");
}

static void *calloc_impl(size_t nmemb, size_t size)
{
  size_t total;
  if (__builtin_mul_overflow(nmemb, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (total <= PH_TC_MAX_REQUEST) {
    void *p = front_malloc(total);
    if (p != NULL)
      memset(p, 0, total);
    return p;
  }
  return ms_calloc(front_arena(), nmemb, size);
}

PH_HOT void *calloc(size_t nmemb, size_t size)
{
  FRONT_CHECKED("calloc", calloc_impl(nmemb, size));
}

/* realloc under the name fn (for the misuse report). */
static void *realloc_named(void *ptr, size_t size, const char *fn)
{
  if (ptr == NULL)
    return front_malloc(size);
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  if (slab_page_of(ptr) != NULL)
    return slab_realloc(ptr, size, fn);
  return ms_realloc(NULL, ptr, size, fn);
}

static void *realloc_impl(void *ptr, size_t size)
{
  return realloc_named(ptr, size, "realloc");
}

void *realloc(void *ptr, size_t size)
{
  FRONT_CHECKED("realloc", realloc_impl(ptr, size));
}

static void *reallocarray_realloc(void *ptr, size_t size)
{
  return realloc_named(ptr, size, "reallocarray");
}

void *reallocarray(void *ptr, size_t nmemb, size_t size)
{
  FRONT_CHECKED("reallocarray", ph_reallocarray(ptr, nmemb, size, reallocarray_realloc));
}

void *memalign(size_t alignment, size_t size)
{
  FRONT_CHECKED("memalign", ms_memalign(front_arena(), alignment, size));
}

static int posix_memalign_impl(void **memptr, size_t alignment, size_t size)
{
  if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0)
    return EINVAL;
  int saved = errno;
  void *p = ms_memalign(front_arena(), alignment, size);
  if (p == NULL) {
    errno = saved;
    return ENOMEM;
  }
  *memptr = p;
  return 0;
}

int posix_memalign(void **memptr, size_t alignment, size_t size)
{
  FRONT_CHECKED("posix_memalign", posix_memalign_impl(memptr, alignment, size));
}

static void *aligned_alloc_impl(size_t alignment, size_t size)
{
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  return ms_memalign(front_arena(), alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size)
{
  FRONT_CHECKED("aligned_alloc", aligned_alloc_impl(alignment, size));
}

void *valloc(size_t size)
{
  FRONT_CHECKED("valloc", ms_memalign(front_arena(), os_page_size(), size));
}

static void *pvalloc_impl(size_t size)
{
  size_t page = os_page_size();
  if (size > PH_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  return ms_memalign(front_arena(), page, size == 0 ? page : align_up(size, page));
}

void *pvalloc(size_t size)
{
  FRONT_CHECKED("pvalloc", pvalloc_impl(size));
}

size_t malloc_usable_size(void *ptr)
{
  if (ptr != NULL && slab_page_of(ptr) != NULL)
    return slab_usable(ptr, "malloc_usable_size");
  return mem_usable(ptr, "malloc_usable_size", false);
}

/* A mallopt parameter glibc accepts (returning 1) and pinheap has no use
 * for: accepted as glibc does, and said at level info. */
static int mallopt_ignored(const char *name, int value, const char *why)
{
  ph_log(PH_LOG_INFO, "mallopt(%s, %d): accepted with no effect: %s", name, value, why);
  return 1;
}

int mallopt(int param, int value)
{
  heap_default();
  switch (param) {
  case M_TRIM_THRESHOLD:
    mparams_set(trim_threshold, value < 0 ? SIZE_MAX : (size_t)value);
    mparams_set(mmap_threshold_set, true);
    return 1;
  case M_TOP_PAD:
    if (value < 0)
      return 0;
    mparams_set(top_pad, (size_t)value);
    mparams_set(mmap_threshold_set, true);
    return 1;
  case M_MMAP_THRESHOLD:
    if (value < 0 || (size_t)value > PH_MAX_MMAP_THRESHOLD)
      return 0;
    mparams_set(mmap_threshold, (size_t)value);
    mparams_set(mmap_threshold_set, true);
    return 1;
  case M_MMAP_MAX:
    if (value < 0)
      return 0;
    mparams_set(mmap_max, value);
    mparams_set(mmap_threshold_set, true);
    return 1;
  case M_ARENA_MAX:
    return arena_max_set(value);
  case M_MXFAST:                       /* glibc's range; pinheap has no fastbins */
    if (value < 0 || (size_t)value > 80 * sizeof(size_t) / 4)
      return 0;
    return mallopt_ignored("M_MXFAST", value, "it has no fastbins");
  case M_CHECK_ACTION:                 /* glibc ignores it too */
    return mallopt_ignored("M_CHECK_ACTION", value, "it names every misuse and aborts");
  case M_PERTURB:
    return mallopt_ignored("M_PERTURB", value, "it does not fill blocks");
  case M_ARENA_TEST:
    return mallopt_ignored("M_ARENA_TEST", value, "M_ARENA_MAX alone bounds its arenas");
  default:
    return 0;
  }
}

int PINHEAP_NAME(owns)(const void *ptr)
{
  return owner_map_get(ptr) != 0;
}
