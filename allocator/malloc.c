/*
 * malloc.c -- the heap: chunks, bins, top, segments, huge chunks, and the
 * mspace API.  The malloc family, thread caches and arenas sit on top of
 * it in front.c.
 *
 * Written in the dlmalloc/ptmalloc lineage (see heap.h for the glossary).
 * One lock per heap.  Every call that gives memory back to the OS works out
 * what to release while locked and calls the OS layer after unlocking, so a
 * release listener may itself call malloc.  Main entry points: ms_malloc()
 * and ms_free_owned().
 */
#include "heap.h"

#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#include "pinheap.h"

mparams_t mparams = {
  .mmap_threshold = PH_DEFAULT_MMAP_THRESHOLD,
  .trim_threshold = PH_DEFAULT_TRIM_THRESHOLD,
  .top_pad = 0,
  .mmap_max = PH_DEFAULT_MMAP_MAX,
  .mmap_threshold_set = false,
};

static mstate_t gm;                      /* arena 0: the first heap behind malloc() */
static ph_lock_t gm_init_lock;
static mstate_t *ms_all;                 /* every heap, newest first */
static ph_lock_t ms_all_lock;
static atomic_size_t huge_total;         /* live huge chunks, all heaps */
static atomic_size_t cookie_counter;

/* A range to give back to the OS once the heap lock is dropped. */
typedef struct release_s {
  void *addr;
  size_t len;
} release_t;

/* ======================================================================= */
/*  locks                                                                   */
/* ======================================================================= */

void ph_lock_slow(ph_lock_t *l)
{
  for (unsigned spins = 0;; spins++) {
    int expected = 0;
    if (atomic_load_explicit(&l->held, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_weak_explicit(&l->held, &expected, 1, memory_order_acquire,
                                              memory_order_relaxed))
      return;
    if (spins < 64)
      __builtin_ia32_pause();
    else
      sched_yield();
  }
}


/* ======================================================================= */
/*  heap set-up                                                             */
/* ======================================================================= */

uint64_t chunk_free_key;

/* Sets chunk_free_key once, before any heap exists: random, odd (never 0,
 * never a pointer). */
static void chunk_free_key_init(void)
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

static size_t cookie_make(const void *salt)
{
  uint64_t c = 0;
  const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);

  if (r != NULL)
    memcpy(&c, r, sizeof(c));
  c ^= (uintptr_t)salt * 0xff51afd7ed558ccdULL;
  c ^= atomic_fetch_add_explicit(&cookie_counter, 1, memory_order_relaxed) * 0xc4ceb9fe1a85ec53ULL;
  return (size_t)(c & PH_SIZE_MASK);   /* never disturbs bits outside size */
}

static void ms_init(mstate_t *ms, unsigned flags, unsigned kind)
{
  chunk_free_key_init();
  memset(ms, 0, offsetof(mstate_t, bins));   /* the bins wait (bin_live) */
  ms->kind = kind;
  ms->cookie = cookie_make(ms);
  ms->seg_grow = PH_DEFAULT_SEGMENT;
  bin_at(ms, PH_DV_BIN)->fd = bin_at(ms, PH_DV_BIN)->bk = bin_at(ms, PH_DV_BIN);
  if (!(flags & PH_MS_FIXED)) {     /* the caller's regions may vanish unannounced */
    ph_lock(&ms_all_lock);
    ms->all_next = ms_all;
    __atomic_store_n(&ms_all, ms, __ATOMIC_RELEASE);
    ph_unlock(&ms_all_lock);
  }
  /* last: heap_default() tests PH_MS_INIT without the lock */
  __atomic_store_n(&ms->flags, flags | PH_MS_INIT, __ATOMIC_RELEASE);
}

static void ms_unregister(mstate_t *ms)
{
  ph_lock(&ms_all_lock);
  mstate_t **pp = &ms_all;
  while (*pp != NULL && *pp != ms)
    pp = &(*pp)->all_next;
  if (*pp == ms)
    *pp = ms->all_next;
  ph_unlock(&ms_all_lock);
}

static ph_lock_t huge_cache_lock;

void ms_lock_all(void)
{
  ph_lock(&huge_cache_lock);
  ph_lock(&ms_all_lock);
  for (mstate_t *ms = ms_all; ms != NULL; ms = ms->all_next)
    ph_lock(&ms->lock);
  owner_fork_lock();                      /* last: taken inside heap locks elsewhere */
}

void ms_unlock_all(void)
{
  owner_fork_unlock();
  for (mstate_t *ms = ms_all; ms != NULL; ms = ms->all_next)
    ph_unlock(&ms->lock);
  ph_unlock(&ms_all_lock);
  ph_unlock(&huge_cache_lock);
}

/* The owner map entry of a segment of ms. */
PH_INLINE uintptr_t seg_owner_value(const mstate_t *ms, const seg_t *seg)
{
  return (uintptr_t)seg | ((ms->flags & PH_MS_USER) ? PH_OWNER_USER_TAG : 0);
}

PH_INLINE char *seg_fence(const seg_t *seg) { return seg->base + seg->size - PH_FENCE_SIZE; }
PH_INLINE chunk_t *seg_first(const seg_t *seg) { return chunk_at(seg->base, seg->chunk_off); }

static void fence_write(mstate_t *ms, seg_t *seg)
{
  head_set(ms, (chunk_t *)seg_fence(seg), PH_CINUSE);   /* size 0, previous free */
}

/* Lays a segment out at base: header, optional room, one free chunk, fence.
 * The free chunk becomes the top. */
static void seg_format(mstate_t *ms, char *base, size_t size, size_t chunk_off, size_t flags)
{
  seg_t *seg = (seg_t *)base;
  chunk_t *first = chunk_at(base, chunk_off);

  seg->base = base;
  seg->size = size;
  seg->chunk_off = chunk_off;
  seg->flags = flags;
  seg->spare = 0;
  seg->ms = ms;
  seg->next = ms->segs;
  ms->segs = seg;
  ms->footprint += size;
  if (ms->footprint > ms->max_footprint)
    ms->max_footprint = ms->footprint;
  first->prev_foot = 0;
  head_set(ms, first, (size - chunk_off - PH_FENCE_SIZE) | PH_PINUSE);
  fence_write(ms, seg);
  ((chunk_t *)seg_fence(seg))->prev_foot = chunk_size(first);
}

mstate_t *heap_default(void)
{
  if (ph_likely(__atomic_load_n(&gm.flags, __ATOMIC_ACQUIRE) & PH_MS_INIT))
    return &gm;
  ph_lock(&gm_init_lock);
  if (!(gm.flags & PH_MS_INIT))
    ms_init(&gm, PH_MS_LOCKED, PH_KIND_ARENA_TAG(0));    /* arena 0 */
  ph_unlock(&gm_init_lock);
  return &gm;
}

/* ======================================================================= */
/*  bins                                                                    */
/* ======================================================================= */

/* Two levels: binmap has a bit per non-empty bin, binmap_words a bit per
 * non-zero word of binmap, so the search for the next non-empty bin costs
 * the same however many empty bins it skips. */
PH_INLINE void binmap_mark(mstate_t *ms, unsigned i)
{
  ms->binmap[i >> 6] |= (uint64_t)1 << (i & 63);
  ms->binmap_words |= (uint64_t)1 << (i >> 6);
}

PH_INLINE void binmap_clear(mstate_t *ms, unsigned i)
{
  ms->binmap[i >> 6] &= ~((uint64_t)1 << (i & 63));
  if (ms->binmap[i >> 6] == 0)
    ms->binmap_words &= ~((uint64_t)1 << (i >> 6));
}

/* First non-empty bin at or above i, or PH_NBINS. */
static unsigned binmap_next(const mstate_t *ms, unsigned i)
{
  unsigned w = i >> 6;
  if (w >= PH_BINMAP_WORDS)
    return PH_NBINS;
  uint64_t bits = ms->binmap[w] & (~(uint64_t)0 << (i & 63));
  if (bits != 0)
    return (w << 6) + (unsigned)__builtin_ctzll(bits);
  uint64_t words = ms->binmap_words & (~(uint64_t)1 << w);    /* the words above w */
  if (words == 0)
    return PH_NBINS;
  w = (unsigned)__builtin_ctzll(words);
  return (w << 6) + (unsigned)__builtin_ctzll(ms->binmap[w]);
}

static void bin_insert(mstate_t *ms, chunk_t *c, size_t size)
{
  unsigned i = bin_index(size);
  chunk_t *b = bin_at(ms, i);
  chunk_t *after = b;            /* insert before after->fd */

  if (!bin_live(ms, i))          /* empty: its header may never have been set */
    b->fd = b->bk = b;
  if (i >= PH_NSMALL) {          /* keep large bins sorted, ascending */
    chunk_t *x = b->fd;
    while (x != b && chunk_size(x) < size)
      x = x->fd;
    after = x->bk;
  }
  c->fd = after->fd;
  c->bk = after;
  after->fd->bk = c;
  after->fd = c;
  binmap_mark(ms, i);
}

/* Ends the process if the binned chunk c's neighbours do not point back. */
PH_INLINE void bin_links_check(const chunk_t *c)
{
  if (ph_unlikely(c->fd->bk != c || c->bk->fd != c))
    ph_fatal("free", "corrupted free list at chunk", c);
}

/* Takes c out of its bin -- the designated victim's included (its bin has
 * no bit in the bin map). */
PH_INLINE void bin_unlink(mstate_t *ms, chunk_t *c, size_t size)
{
  chunk_t *fd = c->fd, *bk = c->bk;

  bin_links_check(c);
  fd->bk = bk;
  bk->fd = fd;
  if (fd == bk) {                /* only the bin header is left */
    unsigned i = bin_index(size);
    if (fd == bin_at(ms, i))
      binmap_clear(ms, i);
  }
}

/* The designated victim (dlmalloc's "dv"): what is left of the chunk that
 * served the last split.  Requests carved from it one after the other (a
 * thread cache refilling) would otherwise move the rest from bin to bin
 * each time.  It waits alone in bin PH_DV_BIN, outside the bin map, and
 * ms_alloc_chunk weighs it against the best binned fit, so the chunk chosen
 * is the same as if it were binned.  Anything that walks the bins or
 * unlinks a free chunk treats it like any binned chunk. */
PH_INLINE chunk_t *dv_get(mstate_t *ms)
{
  chunk_t *b = bin_at(ms, PH_DV_BIN);
  return b->fd != b ? b->fd : NULL;
}

/* Makes the free chunk c the designated victim; the previous one, if any,
 * goes to its bin. */
static void dv_replace(mstate_t *ms, chunk_t *c)
{
  chunk_t *b = bin_at(ms, PH_DV_BIN), *old = b->fd;

  if (old != b) {
    bin_links_check(old);
    bin_insert(ms, old, chunk_size(old));
  }
  c->fd = c->bk = b;
  b->fd = b->bk = c;
}

/* Marks c (size bytes, previous in use) in use and sets the next chunk's
 * PINUSE. */
PH_INLINE void chunk_set_inuse(mstate_t *ms, chunk_t *c, size_t size)
{
  head_set(ms, c, size | PH_CINUSE | PH_PINUSE);
  head_set_pinuse(ms, chunk_at(c, size), true);
}

/* Marks c (size bytes, previous in use) free: head, footer, next's PINUSE. */
PH_INLINE void chunk_set_free(mstate_t *ms, chunk_t *c, size_t size)
{
  chunk_t *next = chunk_at(c, size);
  head_set(ms, c, size | PH_PINUSE);
  next->prev_foot = size;
  head_set_pinuse(ms, next, false);
}

/* Carves nb bytes, in use, from the front of the free chunk c (csize >=
 * nb), already out of its bin; the rest, if it makes a chunk, becomes the
 * designated victim.  The chunk after c keeps its head: the chunk before
 * it stays free. */
PH_INLINE chunk_t *chunk_carve(mstate_t *ms, chunk_t *c, size_t csize, size_t nb)
{
  if (csize - nb < PH_MIN_CHUNK) {
    chunk_set_inuse(ms, c, csize);
    return c;
  }
  chunk_t *rem = chunk_at(c, nb);
  head_set(ms, c, nb | PH_CINUSE | PH_PINUSE);
  head_set(ms, rem, (csize - nb) | PH_PINUSE);
  chunk_at(rem, csize - nb)->prev_foot = csize - nb;
  dv_replace(ms, rem);
  return c;
}

/* Takes nb bytes from the designated victim dv (dsize >= nb).  The rest
 * stays the victim, in place. */
static chunk_t *dv_take(mstate_t *ms, chunk_t *dv, size_t dsize, size_t nb)
{
  chunk_t *b = bin_at(ms, PH_DV_BIN);

  bin_links_check(dv);
  b->fd = b->bk = b;
  return chunk_carve(ms, dv, dsize, nb);
}

/* Puts the designated victim into its bin (before a walk of the bins that
 * must see every free chunk in its place). */
static void dv_flush(mstate_t *ms)
{
  chunk_t *dv = dv_get(ms);

  if (dv != NULL) {
    bin_unlink(ms, dv, chunk_size(dv));
    bin_insert(ms, dv, chunk_size(dv));
  }
}

/* ======================================================================= */
/*  growing and shrinking the heap                                          */
/* ======================================================================= */

/* Address space mapped after a new segment of an arena and kept in reserve
 * (seg->spare): the segment grows into it in place, without a system call,
 * so that a block growing at the top stays where it is and the heap stays
 * one contiguous range, as glibc's heaps do.  Never touched until used, so
 * it costs no memory. */
PH_INLINE size_t seg_spare_for(const mstate_t *ms)
{
  return (ms->flags & PH_MS_USER) ? 0 : PH_SEG_SPARE;
}

/* Joins the add bytes after tseg's end (mapped, untouched) to the top.
 * Locked.  @return false if the owner map could not take them. */
static bool seg_extend(mstate_t *ms, seg_t *tseg, size_t add)
{
  char *end = tseg->base + tseg->size;

  if (os_open(end, add) != 0 || !owner_map_set(end, add, seg_owner_value(ms, tseg), ms->kind))
    return false;
  tseg->size += add;
  ms->footprint += add;
  if (ms->footprint > ms->max_footprint)
    ms->max_footprint = ms->footprint;
  size_t tsize = chunk_size(ms->top) + add;    /* the old fence and fresh pages */
  head_set(ms, ms->top, tsize | PH_PINUSE | (ms->top->head & PH_DECOMMITTED));
  fence_write(ms, tseg);
  ((chunk_t *)seg_fence(tseg))->prev_foot = tsize;
  return true;
}

/* Grows the top of ms in place from its segment's reserve so that it holds
 * at least want bytes.  Locked; never drops the lock.  @return whether it
 * did. */
static bool ms_grow_in_place(mstate_t *ms, size_t want)
{
  seg_t *tseg = ms->top_seg;

  if (tseg == NULL || tseg->spare == 0 || ms->top == NULL || (tseg->flags & PH_SEG_EXTERN))
    return false;
  size_t tsize = chunk_size(ms->top);
  if (want <= tsize)
    return true;
  size_t add = align_up(want - tsize, PH_GRANULE);
  if (add > tseg->spare || !seg_extend(ms, tseg, add))
    return false;
  tseg->spare -= add;
  return true;
}

/* Adds at least need bytes of top.  Called and returns locked; the lock is
 * dropped around the mmap (a misaligned mapping is trimmed, and trims call
 * the release listener). */
static bool ms_grow(mstate_t *ms, size_t nb)
{
  size_t need, len, spare = seg_spare_for(ms);
  char *hint = NULL, *p;

  if (ms->flags & PH_MS_FIXED)
    return false;
  need = nb + PH_MIN_CHUNK + PH_FENCE_SIZE + sizeof(seg_t) + mparams_get(top_pad);
  if (need < nb)
    return false;
  /* Segments grow with the heap (an eighth of it), within bounds. */
  size_t grow = ms->footprint / 8;
  grow = grow > PH_MAX_SEGMENT_GROW ? PH_MAX_SEGMENT_GROW : grow;
  grow = grow < ms->seg_grow ? ms->seg_grow : grow;
  len = align_up(need > grow ? need : grow, PH_GRANULE);

  seg_t *tseg = ms->top_seg;
  if (tseg != NULL)
    hint = tseg->base + tseg->size + tseg->spare;

  ms_unlock(ms);
  p = os_map_reserved(hint, len, spare, PH_GRANULE);
  ms_lock(ms);
  if (p == NULL)
    return false;

  tseg = ms->top_seg;
  if (tseg != NULL && p == tseg->base + tseg->size + tseg->spare &&
      !(tseg->flags & PH_SEG_EXTERN) &&
      ms->top != NULL) {  /* no top: malloc_trim has borrowed it; start a new segment */
    /* Adjacent: the old fence, the old reserve and the new range join the top. */
    if (!seg_extend(ms, tseg, tseg->spare + len))
      goto fail;
    tseg->spare = spare;
  } else {
    if (!owner_map_set(p, len, seg_owner_value(ms, (seg_t *)p), ms->kind))
      goto fail;
    chunk_t *old_top = ms->top;
    seg_format(ms, p, len, sizeof(seg_t), 0);
    ms->top_seg = (seg_t *)p;
    ms->top_seg->spare = spare;
    ms->top = seg_first(ms->top_seg);
    if (old_top != NULL) {         /* the old top becomes an ordinary free chunk */
      size_t osize = chunk_size(old_top);
      chunk_set_free(ms, old_top, osize);
      bin_insert(ms, old_top, osize);
    }
  }
  return true;

fail:
  ms_unlock(ms);
  os_release(p, len + spare);
  ms_lock(ms);
  return false;
}

/* After a free merged into the top: give the top's tail back when it has
 * grown past the trim threshold.  Locked; fills *rel for after unlock. */
static void ms_trim_top(mstate_t *ms, size_t pad, release_t *rel)
{
  seg_t *seg = ms->top_seg;
  size_t tsize = chunk_size(ms->top);
  size_t keep = PH_MIN_CHUNK + pad;
  size_t len;

  if ((ms->flags & PH_MS_FIXED) || seg == NULL || tsize <= keep)
    return;
  len = align_down(tsize - keep, PH_GRANULE);
  if (len == 0)
    return;
  char *end = seg->base + seg->size;
  owner_map_set(end - len, len, 0, PH_KIND_NONE);
  seg->size -= len;
  ms->footprint -= len;
  head_set(ms, ms->top, (tsize - len) | PH_PINUSE | (ms->top->head & PH_DECOMMITTED));
  fence_write(ms, seg);
  ((chunk_t *)seg_fence(seg))->prev_foot = tsize - len;
  rel->addr = end - len;
  rel->len = len + seg->spare;               /* the reserve goes with the tail */
  seg->spare = 0;
}

static uint64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + 1u;
}

/* The top has grown past the trim threshold (a free merged into it).  With
 * a threshold set by mallopt, trim now; otherwise give back only what has
 * stayed unused for PH_TRIM_DECAY_MS: the part of the top below its lowest
 * point since it crossed the threshold. */
static void ms_trim_decay(mstate_t *ms, release_t *rel)
{
  size_t tsize = chunk_size(ms->top);

  if (mparams_get(mmap_threshold_set)) {
    ms_trim_top(ms, mparams_get(top_pad), rel);
    return;
  }
  uint64_t now = now_ms();
  if (ms->trim_since == 0 || tsize < ms->trim_low) {
    if (ms->trim_since == 0)
      ms->trim_since = now;
    ms->trim_low = tsize < ms->trim_low || ms->trim_low == 0 ? tsize : ms->trim_low;
  }
  if (now - ms->trim_since < PH_TRIM_DECAY_MS)
    return;
  /* [top + (tsize - trim_low), end) was never reused: release it, keeping
   * the threshold's worth as a cushion. */
  size_t keep = tsize - ms->trim_low + mparams_get(trim_threshold) / 2;
  ms->trim_since = 0;
  ms->trim_low = 0;
  if (tsize > keep + PH_GRANULE)
    ms_trim_top(ms, keep, rel);
}

/* ======================================================================= */
/*  huge chunks: mapped on their own                                        */
/* ======================================================================= */

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
static bool huge_cache_decay(bool all)
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

static void *huge_alloc(mstate_t *ms, size_t nb, size_t align)
{
  size_t a = align > PH_ALIGN ? align : PH_ALIGN;
  size_t off = align_up(sizeof(huge_t) + PH_CHUNK_HDR, a) - PH_CHUNK_HDR;
  size_t len;
  char *p;

  if (nb > PH_MAX_REQUEST - off - a)
    return NULL;
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

static huge_t *huge_check(mstate_t *ms, chunk_t *c, const char *fn)
{
  if (!head_ok(ms, c) || !(c->head & PH_MMAPPED) || !chunk_cinuse(c))
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

static void huge_free(mstate_t *ms, void *mem, const char *fn)
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

/* ======================================================================= */
/*  allocation                                                              */
/* ======================================================================= */

/* Takes a chunk of nb bytes (a chunk size) from the bins or the top,
 * growing the heap if needed.  Locked.  NULL when out of memory. */
static void ms_drain_remote(mstate_t *ms);
static bool ms_fast_consolidate(mstate_t *ms);

static chunk_t *ms_alloc_chunk(mstate_t *ms, size_t nb)
{
  unsigned i = bin_index(nb);
  chunk_t *b = bin_at(ms, i);
  chunk_t *c = NULL, *dv;

  if (atomic_load_explicit(&ms->remote, memory_order_relaxed) != NULL)
    ms_drain_remote(ms);

  if (!bin_live(ms, i)) {
    /* empty: a larger bin's, below */
  } else if (i < PH_NSMALL) {               /* exact fit */
    c = b->fd;
    bin_unlink(ms, c, nb);
    chunk_set_inuse(ms, c, nb);
    return c;
  } else {
    for (chunk_t *x = b->fd; x != b; x = x->fd) {   /* sorted: first fit is best */
      if (chunk_size(x) >= nb) {
        c = x;
        break;
      }
    }
  }
  if (c == NULL) {
    i = binmap_next(ms, i + 1);
    if (i < PH_NBINS)                       /* smallest chunk of a larger bin */
      c = bin_at(ms, i)->fd;
  }
  /* c is the best binned fit; the designated victim wins if it fits as
   * well or better. */
  dv = dv_get(ms);
  if (dv != NULL) {
    size_t ds = chunk_size(dv);
    if (ds >= nb && (c == NULL || ds <= chunk_size(c)))
      return dv_take(ms, dv, ds, nb);
  }
  if (c != NULL) {
    size_t cs = chunk_size(c);
    bin_unlink(ms, c, cs);
    return chunk_carve(ms, c, cs, nb);
  }
  for (;;) {
    c = ms->top;
    if (c != NULL) {
      size_t ts = chunk_size(c);
      if (ts >= nb + PH_MIN_CHUNK) {
        chunk_t *rest = chunk_at(c, nb);
        head_set(ms, rest, (ts - nb) | PH_PINUSE | (c->head & PH_DECOMMITTED));
        head_set(ms, c, nb | PH_CINUSE | PH_PINUSE);
        ms->top = rest;
        if (ts - nb < ms->trim_low)                /* decay: the top was reused */
          ms->trim_low = ts - nb;
        return c;
      }
    }
    /* Before the heap grows, the deferred chunks are coalesced: they may
     * make room (then start over with the bins). */
    if (ms->fast_bytes != 0 && ms_fast_consolidate(ms))
      return ms_alloc_chunk(ms, nb);
    if (!ms_grow(ms, nb))
      return NULL;
    /* the lock was dropped: a bin may fit now, but the top surely does */
  }
}

void *ms_malloc(mstate_t *ms, size_t n)
{
  size_t nb;
  chunk_t *c;

  if (ph_unlikely(n > PH_MAX_REQUEST)) {
    errno = ENOMEM;
    return NULL;
  }
  nb = request_to_size(n);
  if (ph_unlikely(nb >= mparams_get(mmap_threshold)) && !(ms->flags & PH_MS_FIXED) &&
      atomic_load_explicit(&huge_total, memory_order_relaxed) < (size_t)mparams_get(mmap_max)) {
    void *p = huge_alloc(ms, nb, PH_ALIGN);
    if (p != NULL)
      return p;
  }
  ms_lock(ms);
  c = ms_alloc_chunk(ms, nb);
  ms_unlock(ms);
  if (ph_unlikely(c == NULL)) {
    errno = ENOMEM;
    return NULL;
  }
  return chunk_mem(c);
}

/* ======================================================================= */
/*  freeing                                                                 */
/* ======================================================================= */

/* Takes the segment *pp (wholly free, its chunk out of any bin) out of the
 * heap; the caller releases *rel after unlocking. */
static void seg_take_out(mstate_t *ms, seg_t **pp, release_t *rel)
{
  seg_t *seg = *pp;
  *pp = seg->next;
  ms->footprint -= seg->size;
  owner_map_set(seg->base, seg->size, 0, PH_KIND_NONE);
  rel->addr = seg->base;
  rel->len = seg->size + seg->spare;
}

/* Frees the in-use chunk c (validated) of seg: coalesces, bins or merges
 * into the top.  Locked.  A range to release after unlocking goes to *rel. */
static void ms_free_chunk(mstate_t *ms, seg_t *seg, chunk_t *c, size_t size, release_t *rel,
                          const char *fn)
{
  chunk_t *next = chunk_at(c, size);

  if (!chunk_pinuse(c)) {
    size_t psize = c->prev_foot;
    chunk_t *prev = chunk_at(c, -psize);
    if (psize < PH_MIN_CHUNK || (char *)prev < (char *)seg_first(seg) || !head_ok(ms, prev) ||
        chunk_size(prev) != psize || chunk_cinuse(prev))
      ph_fatal(fn, "corrupted chunk header", chunk_mem(c));
    bin_unlink(ms, prev, psize);
    c->head = PH_HEAD_MERGED;          /* no header now: a second free is named */
    c = prev;
    size += psize;
  }
  if (next == ms->top) {
    size += chunk_size(next);
    ms->top = c;
    head_set(ms, c, size | PH_PINUSE);
    if (size >= mparams_get(trim_threshold))
      ms_trim_decay(ms, rel);
    return;
  }
  if (!chunk_cinuse(next)) {
    size_t nsize = chunk_size(next);
    bin_unlink(ms, next, nsize);
    next->head = PH_HEAD_MERGED;
    size += nsize;
    /* The chunk after next already has PINUSE clear: only the footer moves. */
    head_set(ms, c, size | PH_PINUSE);
    chunk_at(c, size)->prev_foot = size;
  } else {
    chunk_set_free(ms, c, size);
  }
  /* A whole segment (not the top's, not the one holding the heap) free and
   * at least the trim threshold: give it back -- at once with a threshold
   * set by mallopt (glibc's way), else once it has stayed unused for
   * PH_TRIM_DECAY_MS (ms_idle_collect), so a program that frees and
   * allocates big blocks in turn does not map and fault them in each time. */
  if (c == seg_first(seg) && (char *)chunk_at(c, size) == seg_fence(seg) && seg != ms->top_seg &&
      !(seg->flags & (PH_SEG_EXTERN | PH_SEG_HOLDS_MS)) && seg->size >= mparams_get(trim_threshold) &&
      !mparams_get(mmap_threshold_set)) {
    bin_insert(ms, c, size);
    if (seg->idle_since == 0)
      ms->idle_segs++;
    seg->idle_since = now_ms();
    return;
  }
  if (c == seg_first(seg) && (char *)chunk_at(c, size) == seg_fence(seg) && seg != ms->top_seg &&
      !(seg->flags & (PH_SEG_EXTERN | PH_SEG_HOLDS_MS)) && seg->size >= mparams_get(trim_threshold)) {
    seg_t **pp = &ms->segs;
    while (*pp != seg)
      pp = &(*pp)->next;
    seg_take_out(ms, pp, rel);
    return;
  }
  bin_insert(ms, c, size);
}

/* Is c a chunk boundary of seg?  Walks from the segment start; used only to
 * name the error once a header failed its check. */
static bool seg_has_chunk(mstate_t *ms, seg_t *seg, const chunk_t *c)
{
  const char *fence = seg_fence(seg);
  for (chunk_t *x = seg_first(seg); (char *)x < fence; x = chunk_next(x)) {
    if (x == c)
      return true;
    if (!head_ok(ms, x) || chunk_size(x) < PH_MIN_CHUNK)
      return false;
  }
  return false;
}

/* Validates the in-use chunk behind mem in seg; ms is locked.  waiting:
 * the chunk comes from a deferred list (it must be waiting) rather than
 * from the program (where a waiting chunk means it was freed before). */
static chunk_t *chunk_check_inuse(mstate_t *ms, seg_t *seg, void *mem, const char *fn, bool waiting)
{
  chunk_t *c = mem_chunk(mem);

  if ((char *)c < (char *)seg_first(seg) || (char *)c >= seg_fence(seg))
    ph_fatal(fn, "invalid pointer", mem);
  if (!head_ok(ms, c)) {
    if (c->head == PH_HEAD_MERGED)
      ph_fatal(fn, "double free", mem);
    ph_fatal(fn, seg_has_chunk(ms, seg, c) ? "corrupted chunk header" : "invalid pointer", mem);
  }
  if (!chunk_cinuse(c))
    ph_fatal(fn, "double free", mem);
  if (chunk_size(c) <= PH_FAST_MAX_CHUNK && chunk_mem_waiting(mem) != waiting)
    ph_fatal(fn, waiting ? "write after free" : "double free", mem);
  size_t size = chunk_size(c);
  chunk_t *next = chunk_at(c, size);
  if ((c->head & PH_MMAPPED) || size < PH_MIN_CHUNK || (char *)next > seg_fence(seg) ||
      !head_ok(ms, next))
    ph_fatal(fn, "corrupted chunk header", mem);
  if (!chunk_pinuse(next))     /* a stale header inside a free chunk it merged into */
    ph_fatal(fn, "double free", mem);
  return c;
}

/* Finds who owns mem.  want: the heap it must belong to (NULL = any heap
 * in the owner map).  Returns the heap; *seg_p is the segment, or NULL for
 * a huge chunk.  Ends the process on a pointer pinheap did not return. */
static mstate_t *mem_owner(mstate_t *want, const void *mem, const char *fn, seg_t **seg_p)
{
  if (ph_unlikely(((uintptr_t)mem & PH_ALIGN_MASK) != 0))
    ph_fatal(fn, "invalid pointer", mem);
  if (want != NULL && (want->flags & PH_MS_FIXED)) {
    seg_t *seg = want->segs;
    if ((const char *)mem < seg->base || (const char *)mem >= seg->base + seg->size)
      ph_fatal(fn, "invalid pointer", mem);
    *seg_p = seg;
    return want;
  }
  uintptr_t o = owner_map_get(mem);
  mstate_t *ms;
  if (ph_unlikely(o == 0))
    ph_fatal(fn, "invalid pointer", mem);
  if (o & PH_OWNER_HUGE_TAG) {
    ms = (mstate_t *)(o & ~PH_OWNER_HUGE_TAG);
    *seg_p = NULL;
  } else {
    *seg_p = owner_seg(o);
    ms = (*seg_p)->ms;
  }
  if (want != NULL && ms != want)
    ph_fatal(fn, "invalid pointer", mem);
  return ms;
}

/* Takes wholly free segments that have stayed unused for the decay (all of
 * them if force) out of the heap, up to max, into out[].  Locked; the
 * caller releases them after unlocking.  @return how many. */
static unsigned ms_idle_collect(mstate_t *ms, release_t *out, unsigned max, bool force)
{
  uint64_t now = now_ms();
  unsigned n = 0;

  if (ms->idle_segs == 0 || (!force && now - ms->idle_scan_at < PH_TRIM_DECAY_MS / 2))
    return 0;
  ms->idle_scan_at = now;
  for (seg_t **pp = &ms->segs; *pp != NULL && n < max;) {
    seg_t *seg = *pp;
    if (seg->idle_since != 0) {
      chunk_t *c = seg_first(seg);
      bool whole = seg != ms->top_seg && !chunk_cinuse(c) && (char *)chunk_next(c) == seg_fence(seg);
      if (!whole) {                         /* in use again */
        seg->idle_since = 0;
        ms->idle_segs--;
      } else if (force || now - seg->idle_since >= PH_TRIM_DECAY_MS) {
        bin_unlink(ms, c, chunk_size(c));
        ms->idle_segs--;
        seg_take_out(ms, pp, &out[n++]);
        continue;
      }
    }
    pp = &seg->next;
  }
  return n;
}

static void ms_free_resolved(mstate_t *ms, seg_t *seg, void *mem, const char *fn)
{
  release_t rel = { NULL, 0 }, idle[4];
  unsigned nidle = 0;

  if (seg == NULL) {
    huge_free(ms, mem, fn);
    return;
  }
  ms_lock(ms);
  chunk_t *c = chunk_check_inuse(ms, seg, mem, fn, false);
  ms_free_chunk(ms, seg, c, chunk_size(c), &rel, fn);
  if (ms->idle_segs != 0)
    nidle = ms_idle_collect(ms, idle, 4, false);
  ms_unlock(ms);
  if (rel.len != 0)
    os_release(rel.addr, rel.len);
  for (unsigned i = 0; i < nidle; i++)
    os_release(idle[i].addr, idle[i].len);
}

static void ms_free_mem(mstate_t *want, void *mem, const char *fn)
{
  seg_t *seg;

  if (mem == NULL)
    return;
  mstate_t *ms = mem_owner(want, mem, fn, &seg);
  ms_free_resolved(ms, seg, mem, fn);
}

void ms_free_owned(uintptr_t o, void *mem, const char *fn)
{
  if (ph_unlikely(((uintptr_t)mem & PH_ALIGN_MASK) != 0))
    ph_fatal(fn, "invalid pointer", mem);
  if (o & PH_OWNER_HUGE_TAG) {
    huge_free((mstate_t *)(o & ~PH_OWNER_TAGS), mem, fn);
  } else {
    seg_t *seg = owner_seg(o);
    ms_free_resolved(seg->ms, seg, mem, fn);
  }
}

/* Frees one waiting chunk of a deferred list, ms locked; a release drops
 * the lock briefly. */
static void ms_free_locked(mstate_t *ms, void *mem, const char *fn)
{
  release_t rel = { NULL, 0 };
  uintptr_t o = owner_map_get(mem);
  seg_t *seg = owner_seg(o);

  if (seg == NULL || (o & PH_OWNER_HUGE_TAG) || seg->ms != ms)
    ph_fatal(fn, "invalid pointer", mem);
  chunk_t *c = chunk_check_inuse(ms, seg, mem, fn, true);
  chunk_mem_unwait(mem);                 /* it stops waiting: coalesced */
  ms_free_chunk(ms, seg, c, chunk_size(c), &rel, fn);
  if (rel.len != 0) {
    ms_unlock(ms);
    os_release(rel.addr, rel.len);
    ms_lock(ms);
  }
}

/* ---- deferred bundles --------------------------------------------------- */

PH_INLINE uintptr_t *bundle_word(void *mem) { return &((uintptr_t *)mem)[2]; }
PH_INLINE unsigned bundle_len(void *mem) { return (unsigned)(*bundle_word(mem) >> PH_BUNDLE_SHIFT); }
PH_INLINE void *bundle_next(void *mem) { return (void *)(*bundle_word(mem) & PH_BUNDLE_LINK_MASK); }

/* Pushes the n chunks of list (size i << 4) as one bundle.  Locked. */
static void fast_push_bundle(mstate_t *ms, unsigned i, void *list, unsigned n)
{
  *bundle_word(list) = (uintptr_t)ms->fast[i] | ((uintptr_t)n << PH_BUNDLE_SHIFT);
  ms->fast[i] = list;
  ms->fast_bytes += (size_t)n * ((size_t)i << 4);
}

/* Adds one chunk to the top bundle of its size, or starts a bundle.  Locked. */
static void fast_push_one(mstate_t *ms, unsigned i, void *mem)
{
  void *top = ms->fast[i];

  if (top != NULL && bundle_len(top) < bundle_cap((size_t)i << 4)) {
    *(void **)mem = top;
    *bundle_word(mem) = *bundle_word(top) + ((uintptr_t)1 << PH_BUNDLE_SHIFT);
    ms->fast[i] = mem;
    ms->fast_bytes += (size_t)i << 4;
    return;
  }
  *(void **)mem = NULL;
  fast_push_bundle(ms, i, mem, 1);
}

/* Takes the first chunk of the top bundle of size i << 4.  Locked. */
static void *fast_pop_one(mstate_t *ms, unsigned i)
{
  void *mem = ms->fast[i];
  void *next = *(void **)mem;

  if (next != NULL) {
    *bundle_word(next) = *bundle_word(mem) - ((uintptr_t)1 << PH_BUNDLE_SHIFT);
    ms->fast[i] = next;
  } else {
    ms->fast[i] = bundle_next(mem);
  }
  ms->fast_bytes -= (size_t)i << 4;
  return mem;
}

/* Coalesces every deferred chunk into the heap.  Locked.  @return whether
 * there was any. */
static bool ms_fast_consolidate(mstate_t *ms)
{
  bool any = false;

  /* A release inside drops the lock (a fork may come then): each chunk is
   * taken off its list and accounted for before it is freed. */
  for (unsigned i = 0; i < PH_FAST_NBINS; i++) {
    while (ms->fast[i] != NULL) {          /* one at a time: consistent at every unlock */
      ms_free_locked(ms, fast_pop_one(ms, i), "free");
      any = true;
    }
  }
  return any;
}

/* The deferred chunks may not hold more than a quarter of the heap (and
 * 1 MiB at least).  Past that they are all coalesced: coalescing only some
 * sizes leaves the others pinning holes apart (the frag workload's peak
 * RSS rose by a tenth). */
static void ms_fast_bound(mstate_t *ms)
{
  if (ms->fast_bytes > ((size_t)1 << 20) && ms->fast_bytes > ms->footprint / 4)
    ms_fast_consolidate(ms);
}

/* Takes the bundles other threads handed over through ms->remote into the
 * deferred lists, whole: only each bundle's first chunk is looked at (the
 * others are checked when their bundle leaves again, or when coalesced).
 * Locked. */
static void ms_drain_remote(mstate_t *ms)
{
  void *mem = atomic_exchange_explicit(&ms->remote, NULL, memory_order_acquire);

  while (mem != NULL) {
    void *next = bundle_next(mem);
    unsigned n = bundle_len(mem);
    chunk_t *c = mem_chunk(mem);
    size_t size = chunk_size(c);
    if (ph_unlikely(!head_ok(ms, c) || size < PH_MIN_CHUNK || size > PH_FAST_MAX_CHUNK ||
                    (c->head & (PH_CINUSE | PH_MMAPPED)) != PH_CINUSE || !chunk_mem_waiting(mem)))
      ph_fatal("free", "corrupted chunk header", mem);
    fast_push_bundle(ms, (unsigned)(size >> 4), mem, n);
    mem = next;
  }
  ms_fast_bound(ms);
}

void ms_remote_push(mstate_t *ms, void *list, unsigned n)
{
  void *old = atomic_load_explicit(&ms->remote, memory_order_relaxed);
  do {
    *bundle_word(list) = (uintptr_t)old | ((uintptr_t)n << PH_BUNDLE_SHIFT);
  } while (!atomic_compare_exchange_weak_explicit(&ms->remote, &old, list, memory_order_release,
                                                  memory_order_relaxed));
}

/* Takes the first k chunks (all, if fewer) of the top bundle of size nb.
 * A whole bundle is taken without looking at its chunks (each one's header
 * is checked as malloc hands it out, front.h); a bundle cut in two is
 * walked to the cut, and the chunks walked are checked.  Locked.
 * @return how many. */
static unsigned bundle_take(mstate_t *ms, size_t nb, unsigned k, void **list_p)
{
  unsigned i = (unsigned)(nb >> 4);
  void *head = ms->fast[i];
  uintptr_t word = *bundle_word(head);
  unsigned len = (unsigned)(word >> PH_BUNDLE_SHIFT);

  if (len <= k) {
    ms->fast[i] = (void *)(word & PH_BUNDLE_LINK_MASK);
    ms->fast_bytes -= (size_t)len * nb;
    *list_p = head;
    return len;
  }
  void *m = head, *last = NULL;
  for (unsigned left = k; left > 0; left--, last = m, m = *(void **)m) {
    chunk_t *c = mem_chunk(m);
    if (ph_unlikely(((uintptr_t)m & PH_ALIGN_MASK) != 0 || !head_ok(ms, c) ||
                    (c->head & (PH_SIZE_MASK | PH_CINUSE | PH_MMAPPED)) != (nb | PH_CINUSE) ||
                    !chunk_mem_waiting(m) ||
                    *(void **)m == NULL))
      ph_fatal("malloc", "corrupted chunk header", m);
  }
  *(void **)last = NULL;                       /* the rest stays, a bundle of its own */
  *bundle_word(m) = word - ((uintptr_t)k << PH_BUNDLE_SHIFT);
  ms->fast[i] = m;
  ms->fast_bytes -= (size_t)k * nb;
  *list_p = head;
  return k;
}

unsigned ms_alloc_batch(mstate_t *ms, size_t nb, unsigned k, void **list_p)
{
  void *head = NULL;
  unsigned n = 0;

  ms_lock(ms);
  if (atomic_load_explicit(&ms->remote, memory_order_relaxed) != NULL)
    ms_drain_remote(ms);
  if (ms->fast[nb >> 4] != NULL) {             /* deferred chunks, as they are */
    n = bundle_take(ms, nb, k, list_p);
    ms_unlock(ms);
    return n;
  }
  if (k > bundle_cap(nb))                      /* new chunks: a bundle's worth */
    k = bundle_cap(nb);
  /* Carve from the top in one go when no bin has that size. */
  chunk_t *t = ms->top;
  if (t != NULL && !bin_live(ms, bin_index(nb))) {
    size_t ts = chunk_size(t), dec = t->head & PH_DECOMMITTED;
    while (n < k && ts >= nb + PH_MIN_CHUNK) {
      head_set(ms, t, nb | PH_CINUSE | PH_PINUSE);
      void *m = chunk_mem(t);
      chunk_mem_wait(m);             /* on its way to a thread cache */
      *(void **)m = head;
      head = m;
      n++;
      t = chunk_at(t, nb);
      ts -= nb;
    }
    head_set(ms, t, ts | PH_PINUSE | dec);
    ms->top = t;
    if (ts < ms->trim_low)
      ms->trim_low = ts;
  }
  while (n < k) {
    chunk_t *c = ms_alloc_chunk(ms, nb);
    if (c == NULL)
      break;
    void *m = chunk_mem(c);
    chunk_mem_wait(m);               /* on its way to a thread cache */
    if (chunk_size(c) != nb) {       /* 16 bytes over (no room for a remainder): */
      if (chunk_size(c) <= PH_FAST_MAX_CHUNK)
        fast_push_one(ms, (unsigned)(chunk_size(c) >> 4), m);  /* the list of its size */
      else
        ms_free_locked(ms, m, "malloc");
      break;                         /* (retrying could take it back at once) */
    }
    *(void **)m = head;
    head = m;
    n++;
  }
  ms_unlock(ms);
  *list_p = head;
  return n;
}

void ms_defer_bundle(mstate_t *ms, void *list, unsigned n, size_t size)
{
  ms_lock(ms);
  fast_push_bundle(ms, (unsigned)(size >> 4), list, n);
  ms_fast_bound(ms);
  ms_unlock(ms);
}

/* ======================================================================= */
/*  realloc, memalign, calloc                                               */
/* ======================================================================= */

/* Copies n bytes of the huge chunk src (about to be freed) to dst piece by
 * piece, giving back each copied piece of src at once (announced, as every
 * decommit), so that a moving realloc of a huge chunk does not hold both
 * copies in memory, as glibc's mremap does not.  The page holding src's
 * headers stays: the free that follows checks them. */
#define PH_MOVE_PIECE ((size_t)128 * 1024)
static void huge_move_copy(void *dst, const void *src, size_t n)
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

void *ms_realloc(mstate_t *want, void *mem, size_t n, const char *fn)
{
  seg_t *seg;
  release_t rel = { NULL, 0 };
  size_t nb, old_usable;
  void *fresh;

  if (mem == NULL)
    return ms_malloc(want != NULL ? want : heap_default(), n);
  if (n == 0) {
    ms_free_mem(want, mem, fn);
    return NULL;
  }
  mstate_t *ms = mem_owner(want, mem, fn, &seg);
  if (n > PH_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  nb = request_to_size(n);

  if (seg == NULL) {                        /* huge: resize the mapping in place */
    ms_lock(ms);
    chunk_t *c = mem_chunk(mem);
    huge_t *h = huge_check(ms, c, fn);
    size_t off = c->prev_foot, oldlen = h->map_size;
    size_t newlen = align_up(off + nb + PH_CHUNK_OVERHEAD, PH_GRANULE);
    old_usable = chunk_size(c) - PH_CHUNK_HDR;
    if (newlen == oldlen) {
      ms_unlock(ms);
      return mem;
    }
    if (newlen < oldlen && nb >= mparams_get(mmap_threshold) / 2) {
      owner_map_set((char *)h + newlen, oldlen - newlen, 0, PH_KIND_NONE);
      h->map_size = newlen;
      ms->huge_bytes -= oldlen - newlen;
      head_set(ms, c, (newlen - off) | PH_CINUSE | PH_PINUSE | PH_MMAPPED);
      ms_unlock(ms);
      os_remap(h, oldlen, newlen);         /* reports the released tail first */
      return mem;
    }
    ms_unlock(ms);
    if (newlen > oldlen && os_remap(h, oldlen, newlen) == 0) {
      ms_lock(ms);
      if (!owner_map_set((char *)h + oldlen, newlen - oldlen, (uintptr_t)ms | PH_OWNER_HUGE_TAG,
                         PH_KIND_HUGE)) {
        ms_unlock(ms);
        os_remap(h, newlen, oldlen);
      } else {
        h->map_size = newlen;
        ms->huge_bytes += newlen - oldlen;
        head_set(ms, c, (newlen - off) | PH_CINUSE | PH_PINUSE | PH_MMAPPED);
        ms_unlock(ms);
        return mem;
      }
    }
  } else {
    ms_lock(ms);
    chunk_t *c = chunk_check_inuse(ms, seg, mem, fn, false);
    size_t size = chunk_size(c);
    size_t pin = c->head & PH_PINUSE;      /* the previous chunk may be free */
    old_usable = size - PH_CHUNK_OVERHEAD;
    chunk_t *next = chunk_at(c, size);
    if (nb <= size) {                       /* shrink in place */
      if (size - nb >= PH_MIN_CHUNK) {
        chunk_t *rem = chunk_at(c, nb);
        head_set(ms, c, nb | PH_CINUSE | pin);
        head_set(ms, rem, (size - nb) | PH_CINUSE | PH_PINUSE);
        ms_free_chunk(ms, seg, rem, size - nb, &rel, fn);
      }
      ms_unlock(ms);
      if (rel.len != 0)
        os_release(rel.addr, rel.len);
      return mem;
    }
    if (next == ms->top && seg == ms->top_seg && nb < mparams_get(mmap_threshold) &&
        size + chunk_size(next) < nb + PH_MIN_CHUNK)
      ms_grow_in_place(ms, nb + PH_MIN_CHUNK - size);   /* from the reserve */
    if (next == ms->top && size + chunk_size(next) >= nb + PH_MIN_CHUNK &&
        nb < mparams_get(mmap_threshold)) {     /* grow into the top */
      size_t tsize = size + chunk_size(next) - nb;
      size_t dec = next->head & PH_DECOMMITTED;
      chunk_t *rest = chunk_at(c, nb);
      head_set(ms, c, nb | PH_CINUSE | pin);
      head_set(ms, rest, tsize | PH_PINUSE | dec);
      ms->top = rest;
      ms_unlock(ms);
      return mem;
    }
    if (next != ms->top && !chunk_cinuse(next) && size + chunk_size(next) >= nb) {
      size_t nsize = chunk_size(next);       /* grow into the free neighbour */
      bin_unlink(ms, next, nsize);
      size += nsize;
      if (size - nb >= PH_MIN_CHUNK) {
        chunk_t *rem = chunk_at(c, nb);
        head_set(ms, c, nb | PH_CINUSE | pin);
        chunk_set_free(ms, rem, size - nb);
        bin_insert(ms, rem, size - nb);
      } else {
        head_set(ms, c, size | PH_CINUSE | pin);
        head_set_pinuse(ms, chunk_at(c, size), true);
      }
      ms_unlock(ms);
      return mem;
    }
    ms_unlock(ms);
  }
  /* Move. */
  fresh = ms_malloc(ms, n);
  if (fresh == NULL)
    return NULL;                            /* errno is ENOMEM; mem untouched */
  if (seg == NULL)
    huge_move_copy(fresh, mem, old_usable < n ? old_usable : n);
  else
    memcpy(fresh, mem, old_usable < n ? old_usable : n);
  ms_free_mem(ms, mem, fn);
  return fresh;
}

void *ms_memalign(mstate_t *ms, size_t align, size_t n)
{
  release_t rel = { NULL, 0 };
  size_t nb;

  if (align <= PH_ALIGN)
    return ms_malloc(ms, n);
  if ((align & (align - 1)) != 0) {         /* glibc rounds up to a power of two */
    if (align > ((size_t)1 << 62)) {
      errno = EINVAL;
      return NULL;
    }
    align = (size_t)1 << (64 - __builtin_clzll(align));
  }
  if (n > PH_MAX_REQUEST || align > PH_MAX_REQUEST - n) {
    errno = ENOMEM;
    return NULL;
  }
  nb = request_to_size(n);
  if (nb >= mparams_get(mmap_threshold) && !(ms->flags & PH_MS_FIXED) &&
      atomic_load_explicit(&huge_total, memory_order_relaxed) < (size_t)mparams_get(mmap_max)) {
    void *p = huge_alloc(ms, nb, align);
    if (p != NULL)
      return p;
  }
  ms_lock(ms);
  chunk_t *c = ms_alloc_chunk(ms, nb + align + PH_MIN_CHUNK);
  if (c == NULL) {
    ms_unlock(ms);
    errno = ENOMEM;
    return NULL;
  }
  seg_t *seg = NULL;
  if (ms->flags & PH_MS_FIXED) {
    seg = ms->segs;
  } else {
    seg = owner_seg(owner_map_get(chunk_mem(c)));
  }
  size_t size = chunk_size(c);
  uintptr_t m = (uintptr_t)chunk_mem(c);
  if ((m & (align - 1)) != 0) {
    uintptr_t am = align_up(m, align);
    if (am - m < PH_MIN_CHUNK)
      am += align;
    chunk_t *ac = mem_chunk((void *)am);
    size_t lead = (uintptr_t)ac - (uintptr_t)c;
    head_set(ms, ac, (size - lead) | PH_CINUSE);          /* previous: the lead, freed next */
    head_set(ms, c, lead | PH_CINUSE | (c->head & PH_PINUSE));
    ms_free_chunk(ms, seg, c, lead, &rel, "memalign");
    c = ac;
    size -= lead;
  }
  if (size - nb >= PH_MIN_CHUNK) {
    chunk_t *rem = chunk_at(c, nb);
    head_set(ms, c, nb | PH_CINUSE | (c->head & PH_PINUSE));
    head_set(ms, rem, (size - nb) | PH_CINUSE | PH_PINUSE);
    ms_free_chunk(ms, seg, rem, size - nb, &rel, "memalign");
  }
  ms_unlock(ms);
  if (rel.len != 0)
    os_release(rel.addr, rel.len);
  return chunk_mem(c);
}

void *ms_calloc(mstate_t *ms, size_t n, size_t elem)
{
  size_t total;
  void *p;

  if (__builtin_mul_overflow(n, elem, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  p = ms_malloc(ms, total);
  if (p != NULL) {
    chunk_t *c = mem_chunk(p);
    /* fresh mappings are zero; heap chunks and recycled mappings are not */
    if (!(c->head & PH_MMAPPED) || ((huge_t *)((char *)c - c->prev_foot))->recycled)
      memset(p, 0, total);
  }
  return p;
}

/* ======================================================================= */
/*  trim, statistics                                                        */
/* ======================================================================= */

/* Gives back the top's tail and the whole pages inside free chunks.  The
 * free chunks (the top included) are borrowed -- marked in use, out of
 * their bins -- while their pages are decommitted with the lock dropped,
 * then freed again; a chunk that then ends the top segment becomes the top
 * once more.  @return 1 if anything was released. */
int ms_trim(mstate_t *ms, size_t pad)
{
  release_t rel = { NULL, 0 };
  chunk_t *borrowed = NULL, *top_borrowed = NULL;
  seg_t *top_seg = NULL;                    /* where the borrowed top lives */
  size_t page = os_page_size();
  size_t keep = align_up(PH_MIN_CHUNK + pad, PH_ALIGN);
  int released = 0;

  if (ms->flags & PH_MS_FIXED)
    return 0;
  if (huge_cache_decay(true))
    released = 1;
  ms_lock(ms);
  ms_drain_remote(ms);
  ms_fast_consolidate(ms);
  for (;;) {                                /* idle segments go back whole */
    release_t idle[8];
    unsigned n = ms_idle_collect(ms, idle, 8, true);
    if (n == 0)
      break;
    ms_unlock(ms);
    for (unsigned i = 0; i < n; i++)
      os_release(idle[i].addr, idle[i].len);
    released = 1;
    ms_lock(ms);
  }
  if (ms->top != NULL)
    ms_trim_top(ms, pad, &rel);
  if (ms->top != NULL) {
    chunk_t *t = ms->top;
    size_t ts = chunk_size(t);
    if (!(t->head & PH_DECOMMITTED) &&
        align_down((uintptr_t)t + ts, page) > align_up((uintptr_t)t + keep + sizeof(chunk_t), page)) {
      chunk_set_inuse(ms, t, ts);           /* the fence now follows an in-use chunk */
      ms->top = NULL;                       /* a grow meanwhile makes a new top */
      top_seg = ms->top_seg;
      t->fd = borrowed;
      borrowed = top_borrowed = t;
    }
  }
  dv_flush(ms);
  for (unsigned i = bin_index(align_up(os_page_size() + PH_MIN_CHUNK, PH_ALIGN)); i < PH_NBINS; i++) {
    chunk_t *bin = bin_at(ms, i);
    if (!bin_live(ms, i))
      continue;
    for (chunk_t *c = bin->fd, *nx; c != bin; c = nx) {
      size_t cs = chunk_size(c);
      nx = c->fd;
      if (!(c->head & PH_DECOMMITTED) &&
          align_down((uintptr_t)c + cs, page) > align_up((uintptr_t)c + sizeof(chunk_t), page)) {
        bin_unlink(ms, c, cs);
        chunk_set_inuse(ms, c, cs);
        c->fd = borrowed;
        borrowed = c;
      }
    }
  }
  ms_unlock(ms);

  if (rel.len != 0) {
    os_release(rel.addr, rel.len);
    released = 1;
  }
  for (chunk_t *c = borrowed; c != NULL; c = c->fd) {
    uintptr_t lo = align_up((uintptr_t)c + (c == top_borrowed ? keep : 0) + sizeof(chunk_t), page);
    uintptr_t hi = align_down((uintptr_t)c + chunk_size(c), page);
    if (hi > lo) {
      os_decommit((void *)lo, hi - lo);
      released = 1;
    }
  }

  ms_lock(ms);
  while (borrowed != NULL) {
    chunk_t *c = borrowed;
    size_t cs = chunk_size(c);
    chunk_t *next = chunk_at(c, cs);
    release_t r2 = { NULL, 0 };
    borrowed = c->fd;
    if (c == top_borrowed && ms->top == NULL && ms->top_seg == top_seg && chunk_pinuse(c)) {
      /* untouched meanwhile: the top again, known decommitted */
      head_set(ms, c, cs | PH_PINUSE | PH_DECOMMITTED);
      head_set_pinuse(ms, next, false);
      ms->top = c;
      continue;
    }
    if (c != top_borrowed && chunk_pinuse(c) && next != ms->top && chunk_cinuse(next)) {
      /* no free neighbour appeared: back in its bin, known decommitted */
      chunk_set_free(ms, c, cs);
      head_set(ms, c, cs | PH_PINUSE | PH_DECOMMITTED);
      bin_insert(ms, c, cs);
      continue;
    }
    ms_free_chunk(ms, owner_seg(owner_map_get(chunk_mem(c))), c, cs, &r2, "malloc_trim");
    if (r2.len != 0) {
      ms_unlock(ms);
      os_release(r2.addr, r2.len);
      ms_lock(ms);
    }
  }
  /* Nobody grew meanwhile: the free end of the same segment is the top
   * again.  (Had someone grown, the freed chunk stays binned in its old
   * segment, as an old top does.) */
  if (top_borrowed != NULL && ms->top == NULL && ms->top_seg == top_seg) {
    chunk_t *fence = (chunk_t *)seg_fence(ms->top_seg);
    chunk_t *last = chunk_at(fence, -fence->prev_foot);
    size_t ls = fence->prev_foot;
    if (chunk_pinuse(fence))
      ph_fatal("malloc_trim", "lost the top chunk of heap", ms);
    bin_unlink(ms, last, ls);
    head_set(ms, last, ls | PH_PINUSE);
    ms->top = last;
  }
  ms_unlock(ms);
  return released;
}

struct mallinfo2 ms_info(mstate_t *ms)
{
  struct mallinfo2 mi;
  size_t free_bytes = 0, free_count = 0, overhead = 0;

  memset(&mi, 0, sizeof(mi));
  ms_lock(ms);
  ms_drain_remote(ms);                      /* chunks freed by other threads, */
  ms_fast_consolidate(ms);                  /* and deferred ones, count as free */
  for (unsigned i = 0; i < PH_NBINS; i++) {
    chunk_t *b = bin_at(ms, i);
    for (chunk_t *c = b->fd; bin_live(ms, i) && c != b; c = c->fd) {
      free_bytes += chunk_size(c);
      free_count++;
    }
  }
  if (ms->top != NULL) {
    free_bytes += chunk_size(ms->top);
    free_count++;
    mi.keepcost = chunk_size(ms->top);
  }
  for (seg_t *s = ms->segs; s != NULL; s = s->next)
    overhead += s->chunk_off + PH_FENCE_SIZE;
  mi.arena = ms->footprint;
  mi.ordblks = free_count;
  mi.hblks = ms->huge_count;
  mi.hblkhd = ms->huge_bytes;
  mi.usmblks = 0;
  mi.fordblks = free_bytes;
  mi.uordblks = ms->footprint - free_bytes - overhead;
  ms_unlock(ms);
  return mi;
}

/* ======================================================================= */
/*  mspaces                                                                 */
/* ======================================================================= */

#define PH_MS_OFF align_up(sizeof(seg_t), PH_ALIGN)
#define PH_MS_CHUNK_OFF (align_up(PH_MS_OFF + sizeof(mstate_t) + PH_CHUNK_HDR, PH_ALIGN) - PH_CHUNK_HDR)

mstate_t *ms_create(size_t capacity, unsigned flags, unsigned kind)
{
  size_t len;
  char *p;

  if (capacity == 0)
    capacity = PH_DEFAULT_SEGMENT;
  if (capacity > PH_MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  len = align_up(capacity + PH_MS_CHUNK_OFF + PH_FENCE_SIZE + PH_MIN_CHUNK, PH_GRANULE);
  size_t spare = (flags & PH_MS_USER) ? 0 : PH_SEG_SPARE;   /* as seg_spare_for() */
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
  ms_init(ms, flags, kind);
  ms->seg_grow = align_up(capacity, PH_GRANULE);
  seg_format(ms, p, len, PH_MS_CHUNK_OFF, PH_SEG_HOLDS_MS);
  ((seg_t *)p)->spare = spare;
  ms->top_seg = (seg_t *)p;
  ms->top = seg_first(ms->top_seg);
  return ms;
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
  ms_init(ms, (locked ? PH_MS_LOCKED : 0) | PH_MS_FIXED, PH_KIND_NONE);
  seg_format(ms, (char *)b, end - b, PH_MS_CHUNK_OFF, PH_SEG_EXTERN | PH_SEG_HOLDS_MS);
  ms->top_seg = (seg_t *)b;
  ms->top = seg_first(ms->top_seg);
  return ms;
}

/* Validates an mspace handle before use. */
static mstate_t *mspace_state(pinheap_mspace msp, const char *fn)
{
  mstate_t *ms = msp;
  if (ms == NULL || ((uintptr_t)ms & PH_ALIGN_MASK) != 0 || !(ms->flags & PH_MS_INIT) ||
      ms->segs == NULL || ms->segs->ms != ms)
    ph_fatal(fn, "invalid mspace", msp);
  return ms;
}

size_t destroy_mspace(pinheap_mspace msp)
{
  mstate_t *ms = mspace_state(msp, "destroy_mspace");

  if (ms->flags & PH_MS_FIXED) {
    ms->flags = 0;
    return 0;
  }
  if (!(ms->flags & PH_MS_USER))
    ph_fatal("destroy_mspace", "not an mspace (an arena of malloc)", msp);
  return ms_destroy(ms);
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

/* Usable bytes behind mem.  lenient: a pointer outside the owner map may be
 * a fixed-region heap's; its header is read as it is, as dlmalloc does. */
size_t mem_usable(const void *mem, const char *fn, bool lenient)
{
  const chunk_t *c;
  seg_t *seg;

  if (mem == NULL)
    return 0;
  c = mem_chunk(mem);
  if (lenient && owner_map_get(mem) == 0) {
    if (((uintptr_t)mem & PH_ALIGN_MASK) != 0 || !chunk_cinuse(c))
      return 0;
    return chunk_size(c) - PH_CHUNK_OVERHEAD;
  }
  mstate_t *ms = mem_owner(NULL, mem, fn, &seg);
  size_t usable;
  ms_lock(ms);
  if (seg == NULL) {
    huge_check(ms, mem_chunk(mem), fn);
    usable = chunk_size(c) - PH_CHUNK_HDR;
  } else {
    chunk_check_inuse(ms, seg, (void *)mem, fn, false);
    usable = chunk_size(c) - PH_CHUNK_OVERHEAD;
  }
  ms_unlock(ms);
  return usable;
}

size_t mspace_usable_size(const void *mem)
{
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

