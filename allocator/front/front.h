/*
 * front.h -- the fast paths of malloc and free: per-thread caches.
 *
 * Each thread keeps, per chunk size up to PH_TC_MAX_CHUNK, a short LIFO
 * list of in-use chunks of its arena.  malloc pops, free pushes: no lock,
 * no atomic read-modify-write.  A miss or a full list tail-calls a named
 * slow path in tcache.c that swaps in the spare list or moves a whole
 * bundle (types.h) from or to the arena under its lock, or hands chunks of
 * another arena over through its lock-free remote stack.  The thread's
 * cache pointer starts at an empty sentinel (all lists empty, all limits
 * 0, a kind no granule has, every slab page an empty sentinel), so the
 * fast paths need no "initialized?" test.
 *
 * Blocks of up to PH_SLAB_MAX bytes come from slab pages instead (slab.c):
 * malloc pops the free list of the thread's current page of the request's
 * size, free pushes on the list of the block's page when the kind map
 * says "slab" and the page is this thread's (full or not); anything else
 * is slab.c's slow path.  Included by the allocator's files and by hooks/dispatch.c (the
 * enabled free).
 */
#ifndef PINHEAP_FRONT_H
#define PINHEAP_FRONT_H

#include "allocator/shm/shm.h"

/* ======================================================================= */
/*  init.c -- the default heap, front_init, the fork handlers              */
/* ======================================================================= */

/** The heap behind the malloc family (made on first use). */
PH_HIDDEN mstate_t *heap_default(void);
/** Once per process, outside any heap lock: arena 0, the arena cap, the
 *  thread-exit key, the fork handlers.  @return false while it is running
 *  on another thread or re-entered (then allocate without a cache). */
PH_HIDDEN bool front_init(void);

/* ======================================================================= */
/*  tcache.c -- thread caches (the slow paths of front.h)                   */
/* ======================================================================= */

extern PH_HIDDEN __thread tcache_t *tcache_tls __attribute__((tls_model("initial-exec")));
PH_HIDDEN void *front_malloc_slow(size_t n);
/** Bin b of tc is full: sets its list aside, then pushes mem. */
PH_HIDDEN void front_free_full(tcache_t *tc, tc_bin_t *b, void *mem);
/** o: the owner map entry of mem (0 if none). */
PH_HIDDEN void front_free_slow(void *mem, uintptr_t o, const char *fn);
/** malloc of n bytes (a slab class) while its arena keeps no page for the
 *  class (slab.c: slab_next_page): a chunk.  errno is set back to saved
 *  unless it fails. */
PH_HIDDEN void *tcache_sparse_malloc(tcache_t *tc, size_t n, int saved);
/** A cached chunk's header is not what its list says: ends the process. */
PH_HIDDEN void front_malloc_corrupt(void *mem) __attribute__((noreturn, cold));
/** The calling thread's arena. */
PH_HIDDEN mstate_t *front_arena(void);
/** The calling thread's cache, made on first use; NULL while the front
 *  end starts or the thread exits. */
PH_HIDDEN tcache_t *tcache_get(void);
/** front_init: the key whose destructor empties an exiting thread's cache. */
PH_HIDDEN void tcache_init(void);
/** Fork: hold / release the lock of the pool of thread caches. */
PH_HIDDEN void tc_pool_fork_lock(void);
PH_HIDDEN void tc_pool_fork_unlock(void);
/** Gives the calling thread's cached chunks back (statistics see them as
 *  free); fn, the API call asking, is named if a page is found damaged. */
PH_HIDDEN void tcache_flush_mine(const char *fn);
/** Checks the calling thread's cache: every chunk waiting there is an
 *  in-use, waiting chunk of the right size with a sound header.
 *  @return the number of problems (each written to stderr). */
PH_HIDDEN int tcache_check_mine(void);

/* ======================================================================= */
/*  slab.c, slab_free.c -- slab pages: headerless small blocks, a free list  */
/*  per page                                                                */
/* ======================================================================= */

/* The empty page every slab_cur[] slot of a cache without a page points at:
 * its free list is always empty (it ends at the page itself). */
extern PH_HIDDEN slab_page_t slab_none;
/* The class of a request of n bytes, 1 .. PH_SLAB_MAX: slab_class_of[(n -
 * 1) >> 4]; the block size of class c: slab_class_size[c]. */
extern PH_HIDDEN const uint8_t slab_class_of[PH_SLAB_MAX >> 4];
extern PH_HIDDEN const uint16_t slab_class_size[PH_SLAB_NCLASS];
/** front_malloc's slab path missed (or n is 0): refills the current page of
 *  n's class, or takes another; the chunk path when slabs are off.  A
 *  current page whose list is not empty failed the link test: named. */
PH_HIDDEN void *slab_malloc_slow(size_t n);
/** A free list link of pg at block b leads out of the page: ends the
 *  process, naming fn (the API call that found it). */
PH_HIDDEN PH_COLD void *slab_corrupt(slab_page_t *pg, void *b, const char *fn);
/** A free brought pg's count (pg->over) to 0: a page of tc that is not its
 *  class's current one has no block in use left, and goes back to the
 *  arena; or a full page has room enough again (its mark), and goes back to
 *  the pages with room. */
PH_HIDDEN void slab_page_idle(tcache_t *tc, slab_page_t *pg);
/** Frees mem, a pointer into a slab page (the kind map says so): another
 *  thread's page, or misuse, which it names. */
PH_HIDDEN void slab_free_slow(void *mem, const char *fn);
/** Pushes the blocks of another thread's page this thread gathered. */
PH_HIDDEN void slab_remote_flush(tcache_t *tc);
/** The block size of mem, a pointer into a slab page (named if it is no
 *  block or a free one). */
PH_HIDDEN size_t slab_usable(const void *mem, const char *fn);
/** realloc of mem, a pointer into a slab page, to n (> 0) bytes. */
PH_HIDDEN void *slab_realloc(void *mem, size_t n, const char *fn);
/** A thread's cache is going away: its pages go back or to their arena's
 *  orphans. */
PH_HIDDEN void slab_thread_exit(tcache_t *tc);
/** Takes in the other threads' frees on the pages of tc and gives its
 *  empty pages back (statistics, trim: fn, named if a page is damaged). */
PH_HIDDEN void slab_flush_mine(tcache_t *tc, const char *fn);
/** Checks the pages of tc (their free lists).  @return the problems. */
PH_HIDDEN int slab_check_mine(tcache_t *tc);
/** Checks every slab page header of ms (locked).  @return the problems. */
PH_HIDDEN int slab_check_arena(mstate_t *ms);
/** The free bytes inside ms's slab pages (locked): every cached or orphan
 *  page's exact count, the calling thread's pages' own, other threads'
 *  pages count as in use. */
PH_HIDDEN size_t slab_info(mstate_t *ms);
/** Gives ms's cached empty pages back to it (an orphan goes back when the
 *  frees into it leave none of its blocks in use). */
PH_HIDDEN void slab_trim(mstate_t *ms);
/** Fork, in the child: other threads' pages lose their owner. */
PH_HIDDEN void slab_fork_child(void);
/** A new cache: every class without a page. */
PH_HIDDEN void slab_tcache_init(tcache_t *tc);

/* Between slab.c and slab_free.c only (slab.h holds their inline helpers). */
/** pg (no block in use, in no list but the arena's) becomes a free chunk
 *  of ms again.  Locked; a range to release after unlocking: *rel; fn is
 *  named if pg is found damaged. */
PH_HIDDEN void slab_page_release_locked(mstate_t *ms, slab_page_t *pg, release_t *rel,
                                        const char *fn);
/** Releases what a give-back left to release (*rel, idle[0 .. nidle)), the
 *  lock dropped. */
PH_HIDDEN void slab_release(release_t *rel, release_t *idle, unsigned nidle);
/** pg, empty and in none of its owner's lists, goes into ms's cache (one
 *  page over PH_SLAB_CACHE goes back as a free chunk, if may_release).
 *  Locked.  @return how many idle segments it put in idle[] to release. */
PH_HIDDEN unsigned slab_cache_put_locked(mstate_t *ms, slab_page_t *pg, bool may_release,
                                         release_t *rel, release_t idle[4], const char *fn);
/** pg, empty and in none of its owner's lists, goes back to its arena. */
PH_HIDDEN void slab_page_give(slab_page_t *pg, const char *fn);
/** Takes v, a remote stack's word taken from pg, into pg's local list.
 *  @return how many blocks. */
PH_HIDDEN uint32_t slab_collect_stack(slab_page_t *pg, void *v, const char *fn);
/** Takes the remote stack of pg into its local list (the owner's).
 *  @return how many blocks. */
PH_HIDDEN uint32_t slab_collect(slab_page_t *pg, const char *fn);

/* A word other threads may write, read once for one compare on a fast
 * path, where any value it may hold is handled: a plain load, which the
 * compiler folds into the compare (GCC keeps a relaxed atomic load an
 * instruction of its own); atomic under ThreadSanitizer, which would
 * report the plain one. */
#if defined(__SANITIZE_THREAD__)
#define front_peek(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#else
#define front_peek(p) (*(p))
#endif
/* The calling thread's thread pointer (x86_64: %fs:0, one load), unique
 * among live threads: a slab page's owner_tp, the free fast path's owner
 * test, which thus loads no thread cache (in a shared library, its address
 * is a load of the GOT first).  Where the compiler has no builtin for it,
 * the address of a variable of the thread's. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_thread_pointer)
#define FRONT_HAS_TP 1
#endif
#endif
PH_INLINE uintptr_t front_thread_pointer(void)
{
#ifdef FRONT_HAS_TP
  return (uintptr_t)__builtin_thread_pointer();
#else
  return (uintptr_t)&tcache_tls;
#endif
}

/* No instruction: the compiler forgets where the value of the variable x
 * came from, so it cannot compute what follows from x's sources instead
 * (front_malloc and front_free_fast say where it matters). */
#define front_opaque(x) __asm__("" : "+r"(x))

/* The header of the slab page whose granule's number (address >> 16) is g:
 * the granule's start, plus its lowest header offset, plus 0 to 7 cache
 * lines by g (types.h: PH_SLAB_COLOR_MUL).  From g and not from the
 * address, as the free fast path has g already (the kind map's index): a
 * multiply, a mask, a shift and a lea. */
PH_INLINE slab_page_t *slab_page_of_granule(uintptr_t g)
{
  return (slab_page_t *)((g << PH_GRANULE_SHIFT) + PH_SLAB_HDR_LOW +
                         ((g * PH_SLAB_COLOR_MUL) & PH_SLAB_COLOR_MASK));
}
/* The header of the slab page mem lies in. */
PH_INLINE slab_page_t *slab_page_at(const void *mem)
{
  return slab_page_of_granule((uintptr_t)mem >> PH_GRANULE_SHIFT);
}
/* Is mem inside a slab page (by the kind map)?  The page, or NULL. */
PH_INLINE slab_page_t *slab_page_of(const void *mem)
{
  uintptr_t g = (uintptr_t)mem >> PH_GRANULE_SHIFT;
  if (g >= __atomic_load_n(&owner_kind_limit, __ATOMIC_RELAXED) ||
      __atomic_load_n(&owner_kind[g], __ATOMIC_ACQUIRE) != PH_KIND_SLAB)
    return NULL;
  return slab_page_at(mem);
}


/* Pops p, the head of b, a list of chunks of `size` bytes.  Every chunk of
 * such a list is in use and `size` bytes: a header that says otherwise was
 * overwritten while the chunk was free (the low 32 bits are compared: size
 * and flags, but for PINUSE).  Handed out, it stops waiting. */
PH_INLINE void *tc_bin_pop(tc_bin_t *b, void *p, size_t size)
{
  if (ph_unlikely(((uint32_t)chunk_head(mem_chunk(p)) & ~(uint32_t)PH_PINUSE) !=
                  (uint32_t)size + PH_CINUSE))
    front_malloc_corrupt(p);
  b->head = *(void **)p;
  b->count--;
  chunk_mem_unwait(p);
  return p;
}

/* Pops b, the head of the free list of the slab page pg: the next link
 * must stay inside the page (a link overwritten while the block was free
 * is caught here).  Handed out, the block stops being free.  The list of
 * a page with no free block ends at once, at the header: b is pg, whose
 * first word is the secret, so its "link" is 0, outside every page, and
 * the test that finds a damaged link finds the empty list too (the miss
 * tells one from the other: slab_malloc_slow). */
PH_INLINE bool slab_pop_try(slab_page_t *pg, void *b)
{
  uintptr_t next = *(uintptr_t *)b ^ pg->secret;
  if (ph_unlikely(((next ^ (uintptr_t)pg) >> PH_GRANULE_SHIFT) != 0))
    return false;
  pg->free = (void *)next;
  pg->over++;
  ((uint64_t *)b)[1] = 0;
  return true;
}
_Static_assert(offsetof(slab_page_t, secret) == 0, "an empty list's link is the secret ^ itself");

/* slab_pop_try on a list known not to be empty: a failure is damage. */
PH_INLINE void *slab_pop(slab_page_t *pg, void *b)
{
  if (ph_unlikely(!slab_pop_try(pg, b)))
    return slab_corrupt(pg, b, "malloc");
  return b;
}

PH_INLINE void *front_malloc(size_t n)
{
  tcache_t *tc = tcache_tls;
  if (ph_likely(n - 1 < tc->slab_max)) {          /* 1 .. PH_SLAB_MAX: a slab block */
    slab_page_t *pg = tc->slab_cur[(n - 1) >> 4];
    void *b = pg->free;
    if (ph_likely(slab_pop_try(pg, b))) {
      front_opaque(b);              /* (GCC then loads b into the return register:
                                       no move before the ret) */
      return b;
    }
    return slab_malloc_slow(n);                   /* empty, or a damaged link */
  }
  if (ph_likely(n <= PH_TC_MAX_REQUEST)) {
    size_t i = (n + PH_CHUNK_OVERHEAD + PH_ALIGN_MASK) >> 4;
    i = i < 2 ? 2 : i;                                    /* 32-byte minimum chunk */
    size_t size = i << 4;                 /* the chunk size, and bin i's offset */
    tc_bin_t *b = (tc_bin_t *)((char *)tc->bins + size);
    void *p = b->head;
    if (ph_likely(p != NULL))
      return tc_bin_pop(b, p, size);
  }
  return front_malloc_slow(n);
}

/* Pushes mem, an in-use chunk just freed (validated by the caller), onto
 * bin b (room checked by the caller): it waits from now on. */
PH_INLINE void tc_bin_push(tc_bin_t *b, void *mem)
{
  chunk_mem_wait(mem);
  *(void **)mem = b->head;
  b->head = mem;
  b->count++;
}

/* Pushes mem onto this thread's cache if the kind map says it lies in a
 * segment of this thread's arena and its header is a small in-use chunk's
 * with the arena's check byte; false when it must take the slow path (any
 * other memory, NULL, misaligned, a header that is not one -- an interior
 * pointer --, a double free).  So a cache holds only valid chunks of its
 * own arena, and gives them back whole, without looking at each. */
PH_INLINE bool front_free_fast(void *mem)
{
  /* (m opaque: the caller's slow path computes mem >> 16 for the owner map
   * on its own, from mem, and does not keep this g alive to share it) */
  uintptr_t m = (uintptr_t)mem;
  front_opaque(m);
  uintptr_t g = m >> PH_GRANULE_SHIFT;
  if (ph_unlikely(g >= front_peek(&owner_kind_limit)))
    return false;
  if (ph_likely(front_peek(&owner_kind[g]) == PH_KIND_SLAB)) {
    /* A slab page's block: pushed on the page's free list if this thread
     * owns the page; the block must be one (a multiple of the block size
     * from the first, below the last: one multiply, one compare) and not
     * free already.  When the count reaches its mark, the page goes empty
     * or, full, gets room again: slab.c files it. */
    front_opaque(g);                     /* (g << 16 stays a shift of the dead g,
                                            not m & ~0xffff on a copy of m) */
    slab_page_t *pg = slab_page_of_granule(g);
    if (ph_unlikely(front_peek(&pg->owner_tp) != front_thread_pointer()))
      return false;                                  /* another thread's: slow */
    uint64_t u = (uintptr_t)mem & (PH_GRANULE - 1);
    if (ph_unlikely(u * pg->mulc >= pg->lim))
      return false;                                  /* interior: the slow path names it */
    uint64_t key = chunk_free_key;
    if (ph_unlikely(((uint64_t *)mem)[1] == key))
      return false;                                  /* a double free: named there */
    *(uintptr_t *)mem = (uintptr_t)pg->free ^ pg->secret;
    __atomic_store_n(&((uint64_t *)mem)[1], key, __ATOMIC_RELAXED);   /* (not merged into a vector store) */
    pg->free = mem;
    if (ph_unlikely(--pg->over == 0))
      slab_page_idle(tcache_tls, pg);                /* (owner_tp: the owner is this cache) */
    return true;
  }
  tcache_t *tc = tcache_tls;
  /* (the byte loaded again, from the map's address loaded again: the
   * compare above stays one instruction with its operand in memory) */
  unsigned kind = __atomic_load_n(&__atomic_load_n(&owner_kind, __ATOMIC_RELAXED)[g],
                                  __ATOMIC_RELAXED);
  if (ph_unlikely(kind != tc->kind))
    return false;
  /* Misaligned, or at the very start of a granule (its header would lie in
   * the granule before, which may not be pinheap's): the slow path. */
  uintptr_t in_granule = (uintptr_t)mem & (PH_GRANULE - 1);
  if (ph_unlikely((in_granule & PH_ALIGN_MASK) != 0 || in_granule == 0))
    return false;
  const chunk_t *c = mem_chunk(mem);
  size_t head = chunk_head(c);
  if (ph_unlikely((head & PH_TC_HEAD_MASK) != PH_CINUSE))
    return false;
  if (ph_unlikely(!head_check_matches(tc->cookie, c, head)))
    return false;
  /* bin (head >> 4) & 0x7f: bins are 16 bytes, so the offset is head & 0x7f0 */
  tc_bin_t *b = (tc_bin_t *)((char *)tc->bins + (head & 0x7f0));
  if (ph_unlikely(chunk_mem_waiting(mem)))          /* a double free: the slow path names it */
    return false;
  if (ph_unlikely(b->count >= b->limit)) {
    front_free_full(tc, b, mem);
    return true;
  }
  tc_bin_push(b, mem);
  return true;
}

#endif /* PINHEAP_FRONT_H */
