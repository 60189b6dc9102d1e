/*
 * defer.c -- deferred coalescing: the per-size stacks of bundles of small
 * chunks that came back from the thread caches (ms->fast), the lock-free
 * remote stack other threads hand bundles over through, and their
 * consolidation into the heap.  Main entry points: ms_alloc_batch() (a
 * thread cache refills) and ms_defer_bundle() (it gives a bundle back).
 */
#include "allocator/heap/chunk.h"

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
bool ms_fast_consolidate(mstate_t *ms)
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
 * A chunk larger than the deferred sizes comes alone, from another process
 * of the shared heap (heap.c, foreign_hand_back), and is freed at once (the
 * lock may drop for a release, as in ms_fast_consolidate).  A bundle that
 * fails its check ends the process -- unless the heap is shared: then it
 * came from another process, which must not end this one, and the rest of
 * the stack is dropped (its blocks stay allocated) with a warning.
 * Locked. */
void ms_drain_remote(mstate_t *ms)
{
  void *mem = atomic_exchange_explicit(&ms->remote, NULL, memory_order_acquire);

  while (mem != NULL) {
    void *next = bundle_next(mem);
    unsigned n = bundle_len(mem);
    chunk_t *c = mem_chunk(mem);
    size_t size = chunk_size(c);
    bool big = size > PH_FAST_MAX_CHUNK;
    if (ph_unlikely(!head_ok(ms, c) || size < PH_MIN_CHUNK || (big && n != 1) ||
                    (chunk_head(c) & (PH_CINUSE | PH_MMAPPED)) != PH_CINUSE || !chunk_mem_waiting(mem))) {
      if (!ms->source->shared)
        ph_fatal("free", "corrupted chunk header", mem);
      ph_warn("a block handed back from another process of the shared heap has a corrupted "
              "header: the blocks handed back with it stay allocated", NULL);
      break;
    }
    if (big)
      ms_free_locked(ms, mem, "free");
    else
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
    if (ph_unlikely(((uintptr_t)m & PH_ALIGN_MASK) != 0 || !chunk_is_waiting(ms, c, nb) ||
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

PH_WARM unsigned ms_alloc_batch(mstate_t *ms, size_t nb, unsigned k, void **list_p)
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
    size_t ts = chunk_size(t), dec = top_rest_decommitted(ms, t);
    size_t fit = ts >= nb + PH_MIN_CHUNK ? (ts - PH_MIN_CHUNK) / nb : 0;
    if (fit > k)
      fit = k;
    if (fit != 0 && !ms_carve_backed(ms, t, ts, fit * nb))
      k = 0;                         /* no room in the tmpfs: none at all */
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
  mstate_t *fb;
  if (ph_unlikely(n == 0) && (fb = ms_fallback(ms)) != NULL) {
    /* The shared region is full and the fallback is on: one chunk of the
     * private heap (one: a thread cache's lists hold its own arena's chunks
     * only, and this one is handed out at once; its free finds its heap). */
    return ms_alloc_batch(fb, nb, 1, list_p);
  }
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
