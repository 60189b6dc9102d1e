/*
 * huge.c -- huge chunks, mapped on their own, and the cache of freed
 * mappings that are reused for the next huge request.  Main entry points:
 * huge_alloc(), huge_free() and huge_realloc() (resized with mremap, in
 * place or moved, never copied).
 */
#include "allocator/heap/chunk.h"

#include <string.h>

atomic_size_t huge_total;         /* live huge chunks, all heaps */

static ph_lock_t huge_cache_lock;

void huge_cache_fork_lock(void) { ph_lock(&huge_cache_lock); }
void huge_cache_fork_unlock(void) { ph_unlock(&huge_cache_lock); }

/* The mapping cache.  Blocks above the mmap threshold are mapped on their
 * own; a program that keeps allocating them would map, fault in and unmap
 * each one.  Freed mappings wait here and are reused for a later huge
 * request: the smallest resident one that holds it (one more than
 * PH_HUGE_SPLIT_RATIO times bigger is split: its tail stays here as an
 * entry of its own, as it was; an entry that is not one freed block as it
 * was is split to the byte); else the biggest resident one of at least a
 * quarter of it, grown (os_grow_move: where it is, the missing part mapped
 * right after or right before it, else moved by mremap, its pages kept);
 * else the smallest decommitted
 * one that holds it (address space only); else a fresh mapping.  Whatever
 * part of the block has no page yet is then filled with resident pages
 * moved into it, not faulted in: what the arenas give up for it
 * (huge_relieve) and the cache's other resident entries (huge_cache_fill),
 * each range only if a quarter of its pages are there (PH_HUGE_FILL_DENSE).
 * A freed block made of the cache's resident pages (h->recycled) goes back
 * to it whatever its size (a fresh one of up to PH_HUGE_RAISE_MAX is
 * unmapped, as glibc does, until a bigger one was cached:
 * huge_cache_churn).  Freed neighbours in the address space join
 * into one entry (huge_cache_merge).  A heap's new segment is taken
 * from the smallest resident one that holds it too (huge_cache_take_resident),
 * its tail left here.  The cache keeps address space,
 * and memory only within a budget: the live huge mappings and the cache's
 * resident entries together stay under the peak of the live ones alone
 * (so the cache does not raise the peak; at least PH_HUGE_CACHE_RESIDENT,
 * at most PH_HUGE_CACHE_RESIDENT_MAX).  Past the budget the oldest entries,
 * and every entry unused for PH_TRIM_DECAY_MS, give their pages back with
 * MADV_DONTNEED (os_decommit(), which tells the release listeners first)
 * and keep their address space for PH_HUGE_CACHE_KEEP_MS more.  A reused
 * decommitted entry reads as zero, like a fresh mapping.  Everything goes
 * back on malloc_trim.  Only with the default thresholds: M_MMAP_THRESHOLD
 * and friends set by mallopt mean "unmap on free", as in glibc.
 * Decommits and releases are made with the lock dropped (a listener may call
 * the allocator): an entry being decommitted is marked busy meanwhile and
 * is neither taken nor evicted. */
/* How far a freed huge chunk raises the mmap threshold (glibc: 32 MiB);
 * freed mappings up to that size are unmapped at once (below it they are
 * rare: the threshold rises), bigger ones go to the cache.  Blocks above it
 * stay mappings of their own, reused through the cache, which serves a
 * request from a bigger mapping or grows a smaller one keeping its pages; in
 * the heap, a block of that size is served only from a free chunk that
 * holds it, and a heap's segments are rarely adjacent (mmap places them
 * top-down), so blocks of 16 to 32 MiB left idle segments that were mapped,
 * faulted in and unmapped again.  16 MiB against 32 (scale 0.2, 1 thread,
 * with PH_HUGE_SPLIT_RATIO 4): largechurn peak RSS 292 MB against 338 and
 * 94k page faults against 113k.  Lower is better still (5 MiB: largechurn
 * 287 MB, 88k faults; regcache 162 MB, 48k faults, hit rate 0.971; large
 * 16 MB against 34), but tests that free a block of up to 15 MiB expect
 * its release at once: test/fixture/ucx_mix.c (4-15 MiB), test/unit/test_log.c
 * (8 MiB) and hooks/selftest.c's FREE probe (4 MiB).  Once a block above it
 * has been cached, though, the program churns large blocks, and the freed
 * fresh mappings below it are cached too (huge_cache_churn): the next huge
 * block or a heap's new segment (the threshold rose) takes their pages
 * instead of faulting fresh ones while they are unmapped.  largechurn at 1
 * thread (scale 0.5 / 1 / 2): 78k / 85k / 104k page faults -> 72k / 75k /
 * 102k (tcmalloc 78k at scale 1), peak RSS 276 / 292 / 366 MiB -> 277 /
 * 290 / 388 (tcmalloc 303 / 305 / 364); large 33 / 43 / 49 MiB -> 29 / 39
 * / 49; regcache unchanged (tools/bench/results/2026-11-28-large3). */
#define PH_HUGE_RAISE_MAX ((size_t)16 << 20)
/* A cached mapping taken for a request is split (its tail stays cached as
 * an entry of its own) only when it is more than PH_HUGE_SPLIT_RATIO times
 * the request; a smaller one is handed out whole.  Programs that reuse a
 * few buffer sizes then get the same mapping back for the same size (same
 * address: a registration cache hits, nothing is released); splitting as
 * soon as the mapping was 1.125x the request, as before, cut mappings into
 * pieces that the next request of the old size had to grow again with
 * mremap, often moved (a release, an invalidation, a miss).  Measured
 * (scale 0.2, 1 thread, threshold raised up to 16 MiB): regcache 161 MB
 * peak RSS and 47k page faults at 4, 176 MB and 52k at 3, 197 MB and 57k
 * at 2; largechurn (random sizes) about the same at 2-4 (291 MB), 342 MB
 * from 5 up (too big a mapping handed out whole). */
#define PH_HUGE_SPLIT_RATIO 4
/* The part of a new huge block that has no page yet (the block is fresh,
 * a decommitted entry, or a resident one grown) is filled with the pages
 * of the cache's other resident entries, moved there with mremap
 * (huge_cache_fill), and with what the arenas give up for it
 * (huge_relieve), instead of being faulted in while resident pages sit
 * idle beside it.  A fault costs about 1.4 us per 4 KiB page here
 * (kernel time of largechurn against its faults), a move some 30 us
 * whatever its length.  At most PH_HUGE_FILL_PIECES moves per block, each
 * of at least PH_HUGE_FILL_MIN bytes; each is a release of the old range,
 * announced first (os_move_into).  A block so made is several kernel
 * mappings: mremap cannot resize it, but moves it whole (os_move_to).
 * Measured (largechurn, scale 1, page faults; tcmalloc 77.8k / about 100k):
 * 1 thread 110.8k -> 88.2k, 2 threads 131-154k -> 103-108k, peak RSS the
 * same; regcache hit rate and peak RSS unchanged. */
#define PH_HUGE_FILL_MIN ((size_t)1 << 20)
#define PH_HUGE_FILL_PIECES 8
/* A range is moved only if at least 1/PH_HUGE_FILL_DENSE of the pages of
 * its first PH_HUGE_FILL_SAMPLE bytes are resident (one mincore).  A move
 * costs a TLB flush for each 2 MiB of the range that holds pages, and
 * while another thread of the process runs each of those flushes is an
 * interrupt to its CPU, waited for (about 20 us here, in a VM); a fault
 * costs some 1.4 us a page.  Moving a sparse range saves only the faults
 * of the pages it holds and the new block touches: few, when the range
 * is sparse, and then the flushes cost more.  Measured (SCHED_FIFO, so
 * that both threads run, medians of 7-9, against tcmalloc in the same
 * loop; results/2026-11-27-large2): `large` (a page in 16 written) at 2
 * threads moved 1-MiB-and-up ranges with a page in 16 resident: 2600 TLB
 * interrupts a run against 1000 without the moves, 1.30-1.37x tcmalloc's
 * time; with this rule 0.93x (before the moves 0.95-0.98x); largechurn
 * (every page written: dense ranges, still moved) 1.12x / 1.13-1.18x at 1
 * / 2 threads, as with every move (1.36x / 1.38-1.41x without).  `large`
 * at 1 thread loses what the sparse moves gave it (0.63x -> 0.75-0.79x,
 * 0.74x before): its 64 KiB stride lands on the pages such a range holds
 * (blocks start at the same offset in a 64 KiB granule); at a 60 KiB
 * stride the moves saved nothing there either (31.1k faults against 32.3k
 * without, time 0.0776 against 0.0689 s). */
#define PH_HUGE_FILL_DENSE 4
#define PH_HUGE_FILL_SAMPLE ((size_t)4 << 20)

/* Whether moving [src, src+len) into a block pays (see above). */
static bool huge_fill_pays(const char *src, size_t len)
{
  size_t n = len < PH_HUGE_FILL_SAMPLE ? len : PH_HUGE_FILL_SAMPLE;
  return os_resident_at_least(src, n, n / PH_HUGE_FILL_DENSE);
}
#define PH_HUGE_CACHE_SLOTS 32
#define PH_HUGE_CACHE_MAX_ENTRY ((size_t)256 << 20)
#define PH_HUGE_CACHE_MAX_BYTES ((size_t)1 << 30)      /* address space */
#define PH_HUGE_CACHE_RESIDENT ((size_t)32 << 20)     /* of which resident, */
#define PH_HUGE_CACHE_RESIDENT_MAX ((size_t)512 << 20)  /* or up to the peak */
/* PH_HUGE_CACHE_RESIDENT_MAX was 256 MiB: largechurn's huge blocks peak at
 * about 300 MB live, and when most were freed together the cache gave 60
 * MB back at once (decommitted, announced) only to fault it in again for
 * the next ones: 94.7k page faults against 88.2k at 1 thread, 118-128k
 * against 104-108k at 2.  The budget still keeps the cache under the
 * peak of the live huge blocks, and the decay still empties it. */
#define PH_HUGE_CACHE_KEEP_MS (10u * PH_TRIM_DECAY_MS)

typedef struct huge_cached_s {
  char *base;
  size_t len;
  uint64_t since;          /* freed, or decommitted if !resident */
  uint64_t seq;            /* order of freeing: the oldest goes first */
  bool resident;
  bool whole;              /* one freed block's mapping as it was: not joined
                              to others (huge_cache_merge), not a tail */
  bool busy;               /* being decommitted, lock dropped */
} huge_cached_t;

static huge_cached_t huge_cache[PH_HUGE_CACHE_SLOTS];
static size_t huge_cache_bytes;          /* written under huge_cache_lock; read
                                            without it (relaxed) to skip the lock */
static size_t huge_cache_resident;       /* under huge_cache_lock */
static uint64_t huge_cache_seq;          /* under huge_cache_lock */
/* Bytes of live huge mappings, all heaps, and their high-water mark. */
static _Atomic int64_t huge_live;
static _Atomic int64_t huge_live_peak;
static bool huge_cache_churn;            /* a block above PH_HUGE_RAISE_MAX was cached:
                                            fresh ones below it are cached from now on */
static uint64_t huge_cache_due;          /* no decay work before this (ms); as
                                            huge_cache_bytes */

PH_INLINE void huge_cache_bytes_add(size_t delta)
{
  __atomic_store_n(&huge_cache_bytes, huge_cache_bytes + delta, __ATOMIC_RELAXED);
}

/* Empties slot i (locked). */
static void huge_cache_drop(unsigned i)
{
  huge_cache_bytes_add(-huge_cache[i].len);
  if (huge_cache[i].resident)
    huge_cache_resident -= huge_cache[i].len;
  huge_cache[i].base = NULL;
}

/* Recomputes when the decay has work next (locked). */
static void huge_cache_due_set(void)
{
  uint64_t due = UINT64_MAX;

  for (unsigned i = 0; i < PH_HUGE_CACHE_SLOTS; i++) {
    const huge_cached_t *e = &huge_cache[i];
    if (e->base == NULL || e->busy)
      continue;
    uint64_t t = e->since + (e->resident ? PH_TRIM_DECAY_MS : PH_HUGE_CACHE_KEEP_MS);
    if (t < due)
      due = t;
  }
  __atomic_store_n(&huge_cache_due, due, __ATOMIC_RELAXED);
}

/* Gives back the pages of the busy slots in idx[0..n) with the lock dropped,
 * then marks them decommitted.  Called locked; returns locked. */
static void huge_cache_decommit(const unsigned *idx, unsigned n)
{
  if (n == 0)
    return;
  ph_unlock(&huge_cache_lock);
  for (unsigned k = 0; k < n; k++)
    os_decommit(huge_cache[idx[k]].base, huge_cache[idx[k]].len);
  ph_lock(&huge_cache_lock);
  uint64_t now = now_ms();
  for (unsigned k = 0; k < n; k++) {
    huge_cached_t *e = &huge_cache[idx[k]];
    e->busy = false;
    e->resident = false;
    e->since = now;
  }
  huge_cache_due_set();
}

/* How many bytes of freed mappings may stay resident: what keeps the live
 * huge mappings and the cache together under the peak of the live ones
 * alone, so that the cache does not raise the peak (clamped to
 * [PH_HUGE_CACHE_RESIDENT, PH_HUGE_CACHE_RESIDENT_MAX]). */
static size_t huge_cache_budget(void)
{
  int64_t live = atomic_load_explicit(&huge_live, memory_order_relaxed);
  int64_t room = atomic_load_explicit(&huge_live_peak, memory_order_relaxed) -
                 (live > 0 ? live : 0);

  if (room < (int64_t)PH_HUGE_CACHE_RESIDENT)
    return PH_HUGE_CACHE_RESIDENT;
  return (size_t)room < PH_HUGE_CACHE_RESIDENT_MAX ? (size_t)room : PH_HUGE_CACHE_RESIDENT_MAX;
}

/* Counts a huge mapping of len bytes in (delta > 0) or out. */
static void huge_live_add(int64_t delta)
{
  int64_t now = atomic_fetch_add_explicit(&huge_live, delta, memory_order_relaxed) + delta;
  int64_t peak = atomic_load_explicit(&huge_live_peak, memory_order_relaxed);

  while (now > peak &&
         !atomic_compare_exchange_weak_explicit(&huge_live_peak, &peak, now,
                                                memory_order_relaxed, memory_order_relaxed))
    ;
}

/* Marks busy, for decommit, the oldest resident entries until at most
 * PH_HUGE_CACHE_RESIDENT bytes stay resident (locked).  @return how many,
 * their slots in idx. */
static unsigned huge_cache_over_budget(unsigned *idx)
{
  unsigned n = 0;
  size_t budget = huge_cache_budget();

  while (huge_cache_resident > budget) {
    unsigned oldest = PH_HUGE_CACHE_SLOTS;
    for (unsigned i = 0; i < PH_HUGE_CACHE_SLOTS; i++) {
      const huge_cached_t *e = &huge_cache[i];
      if (e->base != NULL && e->resident && !e->busy &&
          (oldest == PH_HUGE_CACHE_SLOTS || e->seq < huge_cache[oldest].seq))
        oldest = i;
    }
    if (oldest == PH_HUGE_CACHE_SLOTS)
      break;
    huge_cache[oldest].busy = true;
    huge_cache_resident -= huge_cache[oldest].len;   /* counted as given back */
    idx[n++] = oldest;
  }
  return n;
}

/* The decay: decommits the entries unused for PH_TRIM_DECAY_MS and
 * releases the decommitted ones unused for PH_HUGE_CACHE_KEEP_MS (all
 * entries not busy, released, if all).
 * @return whether anything was released or decommitted. */
bool huge_cache_decay(bool all)
{
  huge_cached_t out[PH_HUGE_CACHE_SLOTS];
  unsigned idx[PH_HUGE_CACHE_SLOTS];
  unsigned n = 0, nd = 0;
  uint64_t now;

  if (__atomic_load_n(&huge_cache_bytes, __ATOMIC_RELAXED) == 0)
    return false;
  now = now_ms();
  if (!all && now < __atomic_load_n(&huge_cache_due, __ATOMIC_RELAXED))
    return false;
  ph_lock(&huge_cache_lock);
  for (unsigned i = 0; i < PH_HUGE_CACHE_SLOTS; i++) {
    huge_cached_t *e = &huge_cache[i];
    if (e->base == NULL || e->busy)
      continue;
    if (all || (!e->resident && now - e->since >= PH_HUGE_CACHE_KEEP_MS)) {
      out[n++] = *e;
      huge_cache_drop(i);
    } else if (e->resident && now - e->since >= PH_TRIM_DECAY_MS) {
      e->busy = true;
      huge_cache_resident -= e->len;
      idx[nd++] = i;
    }
  }
  huge_cache_due_set();
  huge_cache_decommit(idx, nd);
  ph_unlock(&huge_cache_lock);
  for (unsigned i = 0; i < n; i++)
    os_release(out[i].base, out[i].len);
  return n + nd != 0;
}

/* Among the usable entries (not busy) that are resident, or decommitted
 * when !resident, of at least min bytes: the smallest of at least len
 * bytes, and in *big_p (when given) the biggest; PH_HUGE_CACHE_SLOTS for
 * none.  huge_cache_lock held. */
PH_INLINE unsigned huge_cache_find(bool resident, size_t len, size_t min, unsigned *big_p)
{
  unsigned fit = PH_HUGE_CACHE_SLOTS, big = PH_HUGE_CACHE_SLOTS;
  for (unsigned i = 0; i < PH_HUGE_CACHE_SLOTS; i++) {
    const huge_cached_t *e = &huge_cache[i];
    if (e->base == NULL || e->busy || e->resident != resident || e->len < min)
      continue;
    if (e->len >= len && (fit == PH_HUGE_CACHE_SLOTS || e->len < huge_cache[fit].len))
      fit = i;
    if (big == PH_HUGE_CACHE_SLOTS || e->len > huge_cache[big].len)
      big = i;
  }
  if (big_p != NULL)
    *big_p = big;
  return fit;
}

/* Takes entry i out of the cache: its mapping, *len_p its length.
 * huge_cache_lock held. */
PH_INLINE char *huge_cache_remove(unsigned i, size_t *len_p)
{
  char *p = huge_cache[i].base;
  *len_p = huge_cache[i].len;
  huge_cache_drop(i);
  huge_cache_due_set();
  return p;
}

/* A cached mapping for a request of *len_p bytes, or NULL; *len_p becomes
 * its length, *resident_p whether its pages are still there.  In order of
 * preference: the smallest resident one that holds it; the biggest
 * resident one of at least a quarter of it (to be grown, its pages kept);
 * the smallest decommitted one that holds it (address space only). */
static char *huge_cache_take(size_t *len_p, bool *resident_p, bool *whole_p)
{
  size_t len = *len_p;
  char *p = NULL;

  if (__atomic_load_n(&huge_cache_bytes, __ATOMIC_RELAXED) == 0)
    return NULL;
  ph_lock(&huge_cache_lock);
  /* a resident one that holds it, else the biggest resident one of at
   * least a quarter, else a decommitted one that holds it */
  unsigned grow, best = huge_cache_find(true, len, len / 4, &grow);
  if (best == PH_HUGE_CACHE_SLOTS)
    best = grow;
  if (best == PH_HUGE_CACHE_SLOTS)
    best = huge_cache_find(false, len, len, NULL);
  if (best != PH_HUGE_CACHE_SLOTS) {
    *resident_p = huge_cache[best].resident;
    *whole_p = huge_cache[best].whole;
    p = huge_cache_remove(best, len_p);
  }
  ph_unlock(&huge_cache_lock);
  return p;
}

/* Joins [*base_p, *base_p + *len_p), about to be cached, with the entries
 * next to it in the address space that are in the same state (resident or
 * decommitted, not busy), up to PH_HUGE_CACHE_MAX_ENTRY: those entries
 * leave their slots and the range grows over them.  Freed huge blocks are
 * mostly neighbours (mmap places mappings next to each other), and a
 * request that none of them holds alone would otherwise grow one of them
 * by moving it (mremap: a TLB flush for each 2 MiB of pages, an interrupt
 * to every other CPU the process runs on) or map fresh pages beside idle
 * ones.  The joined range spans several kernel mappings, as a block filled
 * by huge_cache_fill does: handed out, split, decommitted and released
 * just the same.  huge_cache_lock held. */
static bool huge_cache_merge(char **base_p, size_t *len_p, bool resident)
{
  bool joined, any = false;

  do {
    joined = false;
    for (unsigned i = 0; i < PH_HUGE_CACHE_SLOTS; i++) {
      const huge_cached_t *e = &huge_cache[i];
      if (e->base == NULL || e->busy || e->resident != resident ||
          e->len + *len_p > PH_HUGE_CACHE_MAX_ENTRY)
        continue;
      if (e->base + e->len == *base_p)
        *base_p = e->base;
      else if (*base_p + *len_p != e->base)
        continue;
      *len_p += e->len;
      huge_cache_drop(i);
      joined = any = true;
    }
  } while (joined);
  return any;
}

/* Keeps a freed mapping (resident or not), evicting the oldest entries to make
 * room (decommitted ones first; they are released by the caller: *evict_p,
 * up to PH_HUGE_CACHE_SLOTS) and decommitting the oldest resident ones
 * beyond the budget.  A freed fresh mapping (!tail) up to PH_HUGE_RAISE_MAX
 * is not for the cache until one above it has been (huge_cache_churn); the
 * tail of a split one is, and so is a freed block that came from the cache
 * (tail true).  @return false if not kept. */
static bool huge_cache_put(char *base, size_t len, bool resident, bool tail, bool whole,
                           huge_cached_t *evict_p, unsigned *nevict_p)
{
  unsigned idx[PH_HUGE_CACHE_SLOTS];

  *nevict_p = 0;
  if (mparams_get(mmap_threshold_set) || len > PH_HUGE_CACHE_MAX_ENTRY ||
      (!tail && len <= PH_HUGE_RAISE_MAX && !__atomic_load_n(&huge_cache_churn, __ATOMIC_RELAXED)))
    return false;
  if (len > PH_HUGE_RAISE_MAX && !__atomic_load_n(&huge_cache_churn, __ATOMIC_RELAXED))
    __atomic_store_n(&huge_cache_churn, true, __ATOMIC_RELAXED);
  ph_lock(&huge_cache_lock);
  if (huge_cache_merge(&base, &len, resident))
    whole = false;
  for (;;) {
    unsigned free_slot = PH_HUGE_CACHE_SLOTS, victim = PH_HUGE_CACHE_SLOTS;
    for (unsigned i = 0; i < PH_HUGE_CACHE_SLOTS; i++) {
      const huge_cached_t *e = &huge_cache[i], *v = &huge_cache[victim];
      if (e->base == NULL)
        free_slot = i;
      else if (!e->busy &&
               (victim == PH_HUGE_CACHE_SLOTS || (!e->resident && v->resident) ||
                (e->resident == v->resident && e->seq < v->seq)))
        victim = i;
    }
    if (free_slot != PH_HUGE_CACHE_SLOTS && huge_cache_bytes + len <= PH_HUGE_CACHE_MAX_BYTES) {
      huge_cached_t *e = &huge_cache[free_slot];
      e->base = base;
      e->len = len;
      e->since = now_ms();
      e->seq = ++huge_cache_seq;
      e->resident = resident;
      e->whole = whole;
      e->busy = false;
      huge_cache_bytes_add(len);
      if (resident)
        huge_cache_resident += len;
      break;
    }
    if (victim == PH_HUGE_CACHE_SLOTS) {     /* all busy: no room now */
      ph_unlock(&huge_cache_lock);
      return false;
    }
    evict_p[(*nevict_p)++] = huge_cache[victim];      /* make room */
    huge_cache_drop(victim);
  }
  huge_cache_due_set();
  huge_cache_decommit(idx, huge_cache_over_budget(idx));
  ph_unlock(&huge_cache_lock);
  return true;
}

/* Keeps [base, base+len), the tail of a cached mapping just taken, as an
 * entry of its own (still resident if it was); releases it if it does not
 * fit. */
static void huge_cache_put_tail(char *base, size_t len, bool resident)
{
  huge_cached_t evict[PH_HUGE_CACHE_SLOTS];
  unsigned nevict;

  if (!huge_cache_put(base, len, resident, true, false, evict, &nevict))
    os_release(base, len);
  for (unsigned i = 0; i < nevict; i++)
    os_release(evict[i].base, evict[i].len);
}

/* Fills [to+off, to+len), the untouched grown part of a mapping about to
 * be handed out, with the pages of other resident cached mappings, moved
 * there (os_move_into: one mremap and one release each, nothing faulted):
 * first the smallest that fills the rest whole (its tail stays cached),
 * else the biggest, at most PH_HUGE_FILL_PIECES of them.  What is not
 * filled is faulted in on use as before.  @return whether anything was
 * moved. */
static bool huge_cache_fill(char *to, size_t off, size_t len)
{
  bool moved = false;

  for (unsigned n = 0; off < len && n < PH_HUGE_FILL_PIECES; n++) {
    size_t need = len - off, slen;
    unsigned big;
    ph_lock(&huge_cache_lock);
    unsigned pick = huge_cache_find(true, need, PH_HUGE_FILL_MIN, &big);
    if (pick == PH_HUGE_CACHE_SLOTS)
      pick = big;
    if (pick == PH_HUGE_CACHE_SLOTS) {
      ph_unlock(&huge_cache_lock);
      break;
    }
    /* sparse: left as it was (its age too), busy while mincore looks */
    char *src = huge_cache[pick].base;
    size_t mv = huge_cache[pick].len < need ? huge_cache[pick].len : need;
    huge_cache[pick].busy = true;
    ph_unlock(&huge_cache_lock);
    bool pays = huge_fill_pays(src, mv);
    ph_lock(&huge_cache_lock);
    huge_cache[pick].busy = false;
    if (!pays) {
      huge_cache_due_set();
      ph_unlock(&huge_cache_lock);
      break;
    }
    huge_cache_remove(pick, &slen);
    ph_unlock(&huge_cache_lock);
    if (os_move_into(src, mv, to + off) != 0) {
      huge_cache_put_tail(src, slen, true);     /* as it was */
      break;
    }
    if (slen > mv)
      huge_cache_put_tail(src + mv, slen - mv, true);
    off += mv;
    moved = true;
  }
  return moved;
}

/* A heap's new segment from the cache: the smallest resident mapping that
 * holds len bytes, of which exactly len are taken (the tail stays cached,
 * resident, as an entry of its own).  A heap that grows while freed huge
 * blocks wait here would otherwise map and fault in fresh pages while
 * resident ones sit idle, and the cache would later give those back.
 * Measured (scale 0.2, 1 thread), with against without: largechurn 81.3k
 * page faults against 93.6k (scale 1: 105k against 161.7k), regcache hit
 * rate 0.978 against 0.967 and peak RSS 153 MB against 165; but `large`
 * 28.6 MB against 21.9 (still 0.42x glibc's).  Only resident entries: a decommitted one would
 * be faulted in all the same, and keeps its address space for a huge
 * block. */
PH_HOT char *huge_cache_take_resident(size_t len)
{
  char *p = NULL;
  size_t got = 0;

  if (__atomic_load_n(&huge_cache_bytes, __ATOMIC_RELAXED) == 0)
    return NULL;
  ph_lock(&huge_cache_lock);
  unsigned fit = huge_cache_find(true, len, len, NULL);
  if (fit != PH_HUGE_CACHE_SLOTS)
    p = huge_cache_remove(fit, &got);
  ph_unlock(&huge_cache_lock);
  if (p != NULL && got > len)
    huge_cache_put_tail(p + len, got - len, true);
  return p;
}

/* Memory pressure: a huge block about to be faulted in (a fresh mapping, or
 * a cached one grown) first makes the arenas give up what sits idle at
 * their ends, at once instead of after the decay: their wholly free
 * segments and the free tail of their top (past PH_RELIEVE_PAD, glibc's
 * default trim threshold).  The decay (PH_TRIM_DECAY_MS, segment.c) keeps
 * those pages for a program that frees and allocates heap blocks in turn;
 * but beside a new huge block they raise the peak, and a run shorter than
 * the decay never gives them back: its peak was the huge blocks' peak plus
 * every arena's high-water mark.  Only when it can matter: for a block of
 * at least PH_RELIEVE_MIN (a mapping of its own whatever the dynamic
 * threshold), and only when the estimate of what is resident (live huge
 * mappings with this one, the cache's resident entries, the arenas'
 * footprints) is above the highest one relieved at so far -- below it, the
 * arenas' idle pages do not raise the peak, and giving them back would only
 * cost page faults later (`large`, which touches a page in 16, pays 27 %
 * more of them as it is).  Free chunks inside a segment stay resident:
 * decommitting them too cut little more (largechurn, 1 thread: 268 MB
 * against 276) and made the registration cache drop registered buffers
 * (regcache hit rate 0.962 against 0.978).  Measured (scale 0.2, medians of
 * 5, against without): peak RSS of regcache 128 MB against 150 at 1
 * thread, 202 against 217 at 2; largechurn 277 against 286 and 327 against
 * 354; large 23 against 28 and 33 against 35; hit rate and the other
 * workloads unchanged; time unchanged but for large, 1 thread (16 ms
 * against 13, still half of the best peer's).  What the arenas give up is
 * moved into the new block as far as it has no page yet (one mremap a
 * range, the range announced as released first) when a quarter of its
 * pages are resident (huge_fill_pays): the peak is lowered just as much,
 * and those pages are not faulted in again at once; the rest (and the
 * reserve after a segment) is released. */
#define PH_RELIEVE_MIN PH_HUGE_RAISE_MAX
#define PH_RELIEVE_PAD PH_DEFAULT_TRIM_THRESHOLD

static _Atomic size_t huge_relieve_peak;   /* the highest estimate relieved at */

/* Adds the footprint of the arena ms to *(size_t *)arg; an arena_for_each
 * callback. */
static void huge_arena_footprint(mstate_t *ms, void *arg)
{
  if (!ms->source->releases || ms->source->shared)
    return;
  ms_lock(ms);
  *(size_t *)arg += ms->footprint;
  ms_unlock(ms);
}

/* The relief under way: the arenas' footprints added up, and the block's
 * part that has no page yet, [to, to + room), which what they give up may
 * fill (see huge_relieve). */
typedef struct huge_relief_s {
  size_t footprint;
  char *to;
  size_t room;
} huge_relief_t;

/* One range an arena gave up: len writable bytes at addr, then spare bytes
 * of reserve.  Its pages are moved into the block while it has room
 * (os_move_into: no fault there), the rest released. */
static void huge_relieve_keep(huge_relief_t *r, char *addr, size_t len, size_t spare)
{
  size_t mv = len < r->room ? len : r->room;

  if (mv < PH_HUGE_FILL_MIN || !huge_fill_pays(addr, mv) || os_move_into(addr, mv, r->to) != 0)
    mv = 0;
  r->to += mv;
  r->room -= mv;
  if (mv < len + spare)
    os_release(addr + mv, len + spare - mv);
}

/* One arena's part of the relief (see above), then adds its footprint to
 * the relief's; an arena_for_each callback. */
static void huge_relieve_arena(mstate_t *ms, void *arg)
{
  huge_relief_t *r = arg;
  release_t out[8];
  size_t spare[8];
  unsigned n;

  if (!ms->source->releases || ms->source->shared)
    return;
  ms_lock(ms);
  do {
    n = ms_take_idle(ms, PH_RELIEVE_PAD, out, spare, 8);
    if (n == 0)
      break;
    ms_unlock(ms);
    for (unsigned i = 0; i < n; i++)
      huge_relieve_keep(r, out[i].addr, out[i].len, spare[i]);
    ms_lock(ms);
  } while (n == 8);
  r->footprint += ms->footprint;
  ms_unlock(ms);
}

/* A huge block of len bytes is about to be faulted in: relieves the
 * arenas if the estimate of what is resident -- the live huge mappings
 * with this one, the cache's resident entries, the arenas' footprints --
 * is above the highest one relieved at so far (below it, what the arenas
 * hold does not raise the peak).  What they give up fills [to, to+fresh),
 * the block's part without pages, as far as it goes (moved there); the
 * rest is released.  @return the bytes so filled, from to on. */
static size_t huge_relieve(size_t len, char *to, size_t fresh)
{
  size_t fp = 0, res;
  int64_t live = atomic_load_explicit(&huge_live, memory_order_relaxed);

  arena_for_each(huge_arena_footprint, &fp);
  ph_lock(&huge_cache_lock);
  res = huge_cache_resident;
  ph_unlock(&huge_cache_lock);
  size_t base = (live > 0 ? (size_t)live : 0) + len + res;
  size_t peak = atomic_load_explicit(&huge_relieve_peak, memory_order_relaxed);
  if (base + fp <= peak)
    return 0;
  huge_relief_t r = { 0, to, fresh };
  arena_for_each(huge_relieve_arena, &r);
  while (base + r.footprint > peak &&
         !atomic_compare_exchange_weak_explicit(&huge_relieve_peak, &peak, base + r.footprint,
                                                memory_order_relaxed, memory_order_relaxed))
    ;
  return fresh - r.room;
}

/* Puts h (its map_size set) on ms's list of huge chunks; ms is locked. */
static void huge_link(mstate_t *ms, huge_t *h)
{
  h->prev = NULL;
  h->next = ms->huge;
  if (ms->huge != NULL)
    ms->huge->prev = h;
  ms->huge = h;
  ms->huge_count++;
  ms->huge_bytes += h->map_size;
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
  if (ms->source->shared && !ms_source_ops(ms)->fallback_active()) {
    if (a > PH_ALIGN)
      return NULL;
    ms_lock(ms);
    chunk_t *c = ms_alloc_chunk(ms, nb);
    ms_unlock(ms);
    if (c != NULL)
      return chunk_mem(c);
    if (!ms_source_ops(ms)->fallback_active())
      return NULL;
  }
  /* A huge chunk has no next chunk to lend its prev_foot: usable bytes
   * are its size - 16, so it needs 8 bytes more than a heap chunk. */
  len = align_up(off + nb + PH_CHUNK_OVERHEAD, PH_GRANULE);
  huge_cache_decay(false);
  bool recycled = false, whole = false;
  size_t got = len, fresh = len;      /* [at, at + fresh): no page yet */
  size_t at = 0;
  p = a <= PH_GRANULE ? huge_cache_take(&got, &recycled, &whole) : NULL;
  if (p != NULL && got < len) {
    /* resident but too small: grown, its pages kept -- where they are when
     * the address space after or before it is free, else moved */
    char *q = os_grow_move(p, got, len, PH_GRANULE);
    if (q == NULL)
      os_release(p, got);
    else {
      fresh = len - got;
      at = q + fresh == p ? 0 : got;    /* grown downwards: the new part first */
    }
    p = q;
  } else if (p != NULL) {
    /* much bigger than asked: the tail stays in the cache on its own, as
     * it was (resident or not); if the cache has no room, it goes back */
    if (!whole || got / PH_HUGE_SPLIT_RATIO > len)
      huge_cache_put_tail(p + len, got - len, recycled);
    else
      len = got;
    fresh = recycled ? 0 : len;
  }
  if (p == NULL) {
    recycled = false;
    fresh = len;
    at = 0;
    p = os_map_aligned(NULL, len, a > PH_GRANULE ? a : PH_GRANULE);
  }
  if (p == NULL)
    return NULL;
  /* Pages to be faulted in: the arenas may give up what they hold idle
   * first (huge_relieve), and the block takes what resident pages the cache
   * holds, moved into it -- its pages then are not all zeros. */
  if (fresh != 0) {
    size_t moved = 0;
    if (len >= PH_RELIEVE_MIN && !mparams_get(mmap_threshold_set))
      moved = huge_relieve(len, p + at, fresh);
    if (huge_cache_fill(p, at + moved, at + fresh) || moved != 0)
      recycled = true;
  }

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
  huge_link(ms, h);
  ms_unlock(ms);
  atomic_fetch_add_explicit(&huge_total, 1, memory_order_relaxed);
  huge_live_add((int64_t)len);
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
  bool recycled = h->recycled != 0;   /* the cache's pages: back to it, any size */
  huge_unlink(ms, h);
  owner_map_set(h, len, 0, PH_KIND_NONE);
  /* glibc's dynamic threshold: a freed huge chunk raises it, so programs
   * that keep allocating blocks of that size reuse the heap instead -- up
   * to PH_HUGE_RAISE_MAX only: bigger blocks stay mappings of their own,
   * which the cache reuses (see PH_HUGE_RAISE_MAX). */
  if (!mparams_get(mmap_threshold_set) && len > mparams_get(mmap_threshold) &&
      len <= PH_HUGE_RAISE_MAX) {
    mparams_set(mmap_threshold, len);
    mparams_set(trim_threshold, 2 * len);
  }
  ms_unlock(ms);
  atomic_fetch_sub_explicit(&huge_total, 1, memory_order_relaxed);
  huge_live_add(-(int64_t)len);
  huge_cached_t evict[PH_HUGE_CACHE_SLOTS];
  unsigned nevict;
  if (!huge_cache_put((char *)h, len, true, recycled, true, evict, &nevict))
    os_release(h, len);
  for (unsigned i = 0; i < nevict; i++)
    os_release(evict[i].base, evict[i].len);
  huge_cache_decay(false);
}

/* realloc of a huge chunk.  A mapping of its own is resized, never copied:
 * shrunk in place (its tail released, the only event); grown in place when
 * the address space after it is free (no release at all); else moved with
 * mremap into a fresh aligned reservation, which moves the page tables
 * (the pages keep their frames, nothing is copied) and releases exactly the
 * old range, one event.  Before, a block the kernel could not grow in place
 * was copied into a new one 128 KiB at a time, each copied piece of the old
 * one decommitted and announced: 64 -> 256 MiB was 512 events of 128 KiB
 * and 42 ms, against glibc's one mremap, one event and 0.3 ms.
 * The move keeps the block's alignment (its mapping's base aligned as
 * huge_alloc aligned it: see huge_align_of), its owner-map and kind-map
 * entries (set for the new range before the move, cleared for the old one
 * before it leaves the process: owner.c's rule), and the statistics (the
 * heap's huge bytes, the live huge bytes the cache's budget follows, the OS
 * layer's counters).  The shared heap's private fallback blocks keep the
 * copy (huge_move_copy), as does a block shrunk below half the mmap
 * threshold, which goes into the heap. */

/* The alignment a huge chunk's mapping base was given (huge_alloc): the
 * payload sits off + PH_CHUNK_HDR bytes into it, a multiple of the
 * alignment asked (exactly it when that is bigger than the headers), and
 * the base is on a granule at least.  Keeping the base's alignment keeps
 * the payload's. */
static size_t huge_align_of(size_t off)
{
  size_t pay = off + PH_CHUNK_HDR;
  size_t low = pay & (~pay + 1);

  return low > PH_GRANULE ? low : PH_GRANULE;
}

/* Shrinks the huge chunk c (mapping h of oldlen bytes) of ms in place to
 * newlen mapped bytes; ms is locked, and unlocked on return. */
static void huge_shrink_in_place(mstate_t *ms, huge_t *h, chunk_t *c, size_t oldlen,
                                 size_t newlen)
{
  owner_map_set((char *)h + newlen, oldlen - newlen, 0, PH_KIND_NONE);
  h->map_size = newlen;
  ms->huge_bytes -= oldlen - newlen;
  head_set(ms, c, (newlen - h->chunk_off) | PH_CINUSE | PH_PINUSE | PH_MMAPPED);
  ms_unlock(ms);
  os_remap(h, oldlen, newlen);           /* reports the released tail first */
  huge_live_add(-(int64_t)(oldlen - newlen));
}

/* Grows the huge chunk c (mapping h of oldlen bytes) of ms in place to
 * newlen mapped bytes, if the address space after it is free.  Unlocked.
 * @return whether it grew. */
static bool huge_grow_in_place(mstate_t *ms, huge_t *h, chunk_t *c, size_t oldlen,
                               size_t newlen)
{
  if (os_remap(h, oldlen, newlen) != 0)
    return false;
  ms_lock(ms);
  if (!owner_map_set((char *)h + oldlen, newlen - oldlen, (uintptr_t)ms | PH_OWNER_HUGE_TAG,
                     PH_KIND_HUGE)) {
    ms_unlock(ms);
    os_remap(h, newlen, oldlen);
    return false;
  }
  h->map_size = newlen;
  ms->huge_bytes += newlen - oldlen;
  head_set(ms, c, (newlen - h->chunk_off) | PH_CINUSE | PH_PINUSE | PH_MMAPPED);
  ms_unlock(ms);
  huge_live_add((int64_t)(newlen - oldlen));
  return true;
}

/* Moves the huge chunk c (mapping h of oldlen bytes) of ms to a fresh
 * mapping of newlen bytes with mremap (see above).  Unlocked.  While it
 * moves, h is off ms's list (nothing walks a header that is leaving).
 * @return the new payload, or NULL with nothing changed. */
static void *huge_move(mstate_t *ms, huge_t *h, size_t oldlen, size_t newlen)
{
  size_t off = h->chunk_off;
  char *to = os_move_reserve(newlen, huge_align_of(off));
  uintptr_t owner = (uintptr_t)ms | PH_OWNER_HUGE_TAG;

  if (to == NULL)
    return NULL;
  ms_lock(ms);
  if (!owner_map_set(to, newlen, owner, PH_KIND_HUGE)) {
    ms_unlock(ms);
    os_move_cancel(to, newlen);
    return NULL;
  }
  huge_unlink(ms, h);
  owner_map_set(h, oldlen, 0, PH_KIND_NONE);
  ms_unlock(ms);
  bool moved = os_move_to(h, oldlen, newlen, to) == 0;
  huge_t *nh = moved ? (huge_t *)to : h;
  ms_lock(ms);
  if (moved) {
    nh->map_size = newlen;
    head_set(ms, chunk_at(nh, off), (newlen - off) | PH_CINUSE | PH_PINUSE | PH_MMAPPED);
  } else {
    owner_map_set(to, newlen, 0, PH_KIND_NONE);
    owner_map_set(h, oldlen, owner, PH_KIND_HUGE);   /* its units are open: cannot fail */
  }
  huge_link(ms, nh);
  ms_unlock(ms);
  if (!moved) {
    os_move_cancel(to, newlen);
    return NULL;
  }
  huge_live_add((int64_t)newlen - (int64_t)oldlen);
  return chunk_mem(chunk_at(nh, off));
}

void *huge_realloc(mstate_t *ms, void *mem, size_t nb, const char *fn, size_t *old_usable_p)
{
  ms_lock(ms);
  chunk_t *c = mem_chunk(mem);
  huge_t *h = huge_check(ms, c, fn);
  size_t off = h->chunk_off, oldlen = h->map_size;
  size_t newlen = align_up(off + nb + PH_CHUNK_OVERHEAD, PH_GRANULE);

  *old_usable_p = chunk_size(c) - PH_CHUNK_HDR;
  if (newlen == oldlen) {
    ms_unlock(ms);
    return mem;
  }
  if (newlen < oldlen) {
    if (nb < mparams_get(mmap_threshold) / 2) {     /* into the heap, by copy */
      ms_unlock(ms);
      return NULL;
    }
    huge_shrink_in_place(ms, h, c, oldlen, newlen);
    return mem;
  }
  ms_unlock(ms);
  if (huge_grow_in_place(ms, h, c, oldlen, newlen))
    return mem;
  if (ms->source->shared)
    return NULL;
  return huge_move(ms, h, oldlen, newlen);
}

/* Copies n bytes of the huge chunk src (about to be freed) to dst piece by
 * piece, giving back each copied piece of src at once (announced, as every
 * decommit), so that a realloc that copies a huge chunk does not hold both
 * copies in memory.  Only where huge_realloc() cannot move the mapping: the
 * shared heap's private fallback blocks, or a move the OS refused.  The
 * page holding src's headers stays: the free that follows checks them. */
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
