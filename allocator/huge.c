/*
 * huge.c -- huge chunks, mapped on their own, and the cache of freed
 * mappings that are reused for the next huge request.  Main entry points:
 * huge_alloc() and huge_free().
 */
#include "chunk.h"

#include <string.h>

atomic_size_t huge_total;         /* live huge chunks, all heaps */

static ph_lock_t huge_cache_lock;

void huge_cache_fork_lock(void) { ph_lock(&huge_cache_lock); }
void huge_cache_fork_unlock(void) { ph_unlock(&huge_cache_lock); }

/* The mapping cache.  Blocks above the dynamic threshold's ceiling are
 * mapped on their own every time; a program that keeps allocating them
 * would map, fault in and unmap each one.  Freed mappings of that kind wait
 * here (still mapped: nothing is released, so no listener is told) and are
 * reused for a request they fit; one unused for PH_TRIM_DECAY_MS goes back
 * to the OS, as does everything on malloc_trim.  Only with the default
 * thresholds: M_MMAP_THRESHOLD and friends set by mallopt mean "unmap on
 * free", as in glibc. */
#define PH_HUGE_CACHE_SLOTS 8
#define PH_HUGE_CACHE_MAX_ENTRY ((size_t)128 << 20)
#define PH_HUGE_CACHE_MAX_BYTES ((size_t)256 << 20)

typedef struct huge_cached_s {
  char *base;
  size_t len;
  uint64_t since;
} huge_cached_t;

static huge_cached_t huge_cache[PH_HUGE_CACHE_SLOTS];
static size_t huge_cache_bytes;          /* written under huge_cache_lock; read
                                            without it (relaxed) to skip the lock */

PH_INLINE void huge_cache_bytes_add(size_t delta)
{
  __atomic_store_n(&huge_cache_bytes, huge_cache_bytes + delta, __ATOMIC_RELAXED);
}

/* Gives back the entries older than the decay (all of them if all).
 * @return whether anything was released. */
bool huge_cache_decay(bool all)
{
  huge_cached_t out[PH_HUGE_CACHE_SLOTS];
  unsigned n = 0;
  uint64_t now = now_ms();

  ph_lock(&huge_cache_lock);
  for (unsigned i = 0; i < PH_HUGE_CACHE_SLOTS; i++) {
    if (huge_cache[i].base != NULL && (all || now - huge_cache[i].since >= PH_TRIM_DECAY_MS)) {
      out[n++] = huge_cache[i];
      huge_cache_bytes_add(-huge_cache[i].len);
      huge_cache[i].base = NULL;
    }
  }
  ph_unlock(&huge_cache_lock);
  for (unsigned i = 0; i < n; i++)
    os_release(out[i].base, out[i].len);
  return n != 0;
}

/* A cached mapping of at least len bytes (and not much more), or NULL;
 * *len_p becomes its length. */
static char *huge_cache_take(size_t *len_p)
{
  size_t len = *len_p;
  char *p = NULL;
  unsigned best = PH_HUGE_CACHE_SLOTS;

  if (__atomic_load_n(&huge_cache_bytes, __ATOMIC_RELAXED) == 0)
    return NULL;
  ph_lock(&huge_cache_lock);
  for (unsigned i = 0; i < PH_HUGE_CACHE_SLOTS; i++)
    if (huge_cache[i].base != NULL && huge_cache[i].len >= len &&
        huge_cache[i].len - len <= len / 2 &&
        (best == PH_HUGE_CACHE_SLOTS || huge_cache[i].len < huge_cache[best].len))
      best = i;
  if (best != PH_HUGE_CACHE_SLOTS) {
    p = huge_cache[best].base;
    *len_p = huge_cache[best].len;
    huge_cache_bytes_add(-huge_cache[best].len);
    huge_cache[best].base = NULL;
  }
  ph_unlock(&huge_cache_lock);
  return p;
}

/* Keeps a freed mapping, evicting the oldest entries to make room (they
 * are released by the caller: *evict_p, up to PH_HUGE_CACHE_SLOTS). */
static bool huge_cache_put(char *base, size_t len, huge_cached_t *evict_p, unsigned *nevict_p)
{
  *nevict_p = 0;
  if (mparams_get(mmap_threshold_set) || len <= PH_MAX_MMAP_THRESHOLD || len > PH_HUGE_CACHE_MAX_ENTRY)
    return false;
  ph_lock(&huge_cache_lock);
  for (;;) {
    unsigned free_slot = PH_HUGE_CACHE_SLOTS, oldest = PH_HUGE_CACHE_SLOTS;
    for (unsigned i = 0; i < PH_HUGE_CACHE_SLOTS; i++) {
      if (huge_cache[i].base == NULL)
        free_slot = i;
      else if (oldest == PH_HUGE_CACHE_SLOTS || huge_cache[i].since < huge_cache[oldest].since)
        oldest = i;
    }
    if (free_slot != PH_HUGE_CACHE_SLOTS && huge_cache_bytes + len <= PH_HUGE_CACHE_MAX_BYTES) {
      huge_cache[free_slot].base = base;
      huge_cache[free_slot].len = len;
      huge_cache[free_slot].since = now_ms();
      huge_cache_bytes_add(len);
      break;
    }
    evict_p[(*nevict_p)++] = huge_cache[oldest];      /* make room */
    huge_cache_bytes_add(-huge_cache[oldest].len);
    huge_cache[oldest].base = NULL;
  }
  ph_unlock(&huge_cache_lock);
  return true;
}

void *huge_alloc(mstate_t *ms, size_t nb, size_t align)
{
  size_t a = align > PH_ALIGN ? align : PH_ALIGN;
  size_t off = align_up(sizeof(huge_t) + PH_CHUNK_HDR, a) - PH_CHUNK_HDR;
  size_t len;
  char *p;

  if (nb > PH_MAX_REQUEST - off - a)
    return NULL;
  /* The shared heap serves large requests in its region; a private mapping
   * only once the region is full and the fallback is on -- this very
   * request included, when it is the one that finds the region full. */
  if (ms->source->shared && !shm_fallback_active()) {
    if (a > PH_ALIGN)
      return NULL;
    ms_lock(ms);
    chunk_t *c = ms_alloc_chunk(ms, nb);
    ms_unlock(ms);
    if (c != NULL)
      return chunk_mem(c);
    if (!shm_fallback_active())
      return NULL;
  }
  /* A huge chunk has no next chunk to lend its prev_foot: usable bytes
   * are its size - 16, so it needs 8 bytes more than a heap chunk. */
  len = align_up(off + nb + PH_CHUNK_OVERHEAD, PH_GRANULE);
  huge_cache_decay(false);
  bool recycled = false;
  p = a <= PH_GRANULE ? huge_cache_take(&len) : NULL;
  if (p != NULL)
    recycled = true;
  else
    p = os_map_aligned(NULL, len, a > PH_GRANULE ? a : PH_GRANULE);
  if (p == NULL)
    return NULL;

  huge_t *h = (huge_t *)p;
  chunk_t *c = chunk_at(p, off);
  h->recycled = recycled;
  h->map_size = len;
  h->ms = ms;
  h->chunk_off = off;
  c->prev_foot = off;
  head_set(ms, c, (len - off) | PH_CINUSE | PH_PINUSE | PH_MMAPPED);

  ms_lock(ms);
  if (!owner_map_set(p, len, (uintptr_t)ms | PH_OWNER_HUGE_TAG, PH_KIND_HUGE)) {
    ms_unlock(ms);
    os_release(p, len);
    return NULL;
  }
  h->prev = NULL;
  h->next = ms->huge;
  if (ms->huge != NULL)
    ms->huge->prev = h;
  ms->huge = h;
  ms->huge_count++;
  ms->huge_bytes += len;
  ms_unlock(ms);
  atomic_fetch_add_explicit(&huge_total, 1, memory_order_relaxed);
  return chunk_mem(c);
}

/* Validates a huge chunk; ms is locked.  Returns its mapping header. */
/* Is mem the payload of one of ms's huge chunks?  Walks the list; used
 * only to name the error once a header failed its check. */
static bool huge_has_mem(const mstate_t *ms, const void *mem)
{
  for (const huge_t *h = ms->huge; h != NULL; h = h->next)
    if (chunk_mem(chunk_at(h, h->chunk_off)) == mem)
      return true;
  return false;
}

huge_t *huge_check(mstate_t *ms, chunk_t *c, const char *fn)
{
  if (!head_ok(ms, c) || !(chunk_head(c) & PH_MMAPPED) || !chunk_cinuse(c))
    ph_fatal(fn, huge_has_mem(ms, chunk_mem(c)) ? "corrupted chunk header" : "invalid pointer",
             chunk_mem(c));
  size_t off = c->prev_foot;
  huge_t *h = (huge_t *)((char *)c - off);
  if (off < sizeof(huge_t) || ((uintptr_t)h & (PH_GRANULE - 1)) != 0 || h->ms != ms ||
      h->chunk_off != off || h->map_size != off + chunk_size(c))
    ph_fatal(fn, "corrupted chunk header", chunk_mem(c));
  return h;
}

static void huge_unlink(mstate_t *ms, huge_t *h)
{
  if (h->prev != NULL)
    h->prev->next = h->next;
  else
    ms->huge = h->next;
  if (h->next != NULL)
    h->next->prev = h->prev;
  ms->huge_count--;
  ms->huge_bytes -= h->map_size;
}

void huge_free(mstate_t *ms, void *mem, const char *fn)
{
  ms_lock(ms);
  huge_t *h = huge_check(ms, mem_chunk(mem), fn);
  size_t len = h->map_size;
  huge_unlink(ms, h);
  owner_map_set(h, len, 0, PH_KIND_NONE);
  /* glibc's dynamic threshold: a freed huge chunk raises it, so programs
   * that keep allocating blocks of that size reuse the heap instead. */
  if (!mparams_get(mmap_threshold_set) && len > mparams_get(mmap_threshold) &&
      len <= PH_MAX_MMAP_THRESHOLD) {
    mparams_set(mmap_threshold, len);
    mparams_set(trim_threshold, 2 * len);
  }
  ms_unlock(ms);
  atomic_fetch_sub_explicit(&huge_total, 1, memory_order_relaxed);
  huge_cached_t evict[PH_HUGE_CACHE_SLOTS];
  unsigned nevict;
  if (!huge_cache_put((char *)h, len, evict, &nevict))
    os_release(h, len);
  for (unsigned i = 0; i < nevict; i++)
    os_release(evict[i].base, evict[i].len);
}

/* Copies n bytes of the huge chunk src (about to be freed) to dst piece by
 * piece, giving back each copied piece of src at once (announced, as every
 * decommit), so that a moving realloc of a huge chunk does not hold both
 * copies in memory, as glibc's mremap does not.  The page holding src's
 * headers stays: the free that follows checks them. */
#define PH_MOVE_PIECE ((size_t)128 * 1024)
void huge_move_copy(void *dst, const void *src, size_t n)
{
  size_t page = os_page_size();
  uintptr_t done = align_up((uintptr_t)src, page);     /* decommitted up to here */

  for (size_t off = 0; off < n;) {
    size_t piece = n - off < PH_MOVE_PIECE ? n - off : PH_MOVE_PIECE;
    memcpy((char *)dst + off, (const char *)src + off, piece);
    off += piece;
    uintptr_t hi = align_down((uintptr_t)src + off, page);
    if (hi > done && (off < n ? hi - done >= PH_MOVE_PIECE : true)) {
      os_decommit((void *)done, hi - done);
      done = hi;
    }
  }
}
