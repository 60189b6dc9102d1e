/*
 * watch.c -- watches: validity tokens over the memory events.  Owns the
 * watch records, their index and the VM_UNMAPPED handler that invalidates
 * them.  Main entry points: pinheap_watch(), pinheap_unwatch() and
 * watch_on_unmapped() (static, the handler); the check itself,
 * pinheap_watch_valid(), is inline in pinheap.h (and out of line here, for
 * bindings).
 *
 * A token is a pointer to a record whose first word is the public state
 * (nonzero valid, 0 invalid).  Records come from chunks of pinheap's own
 * metadata (os_reserve_meta: never released, never through malloc, no
 * event), so a stale token's load never faults; a record is reused only
 * after unwatch.
 *
 * The index.  A watch of length L belongs to class c = floor(log2 L).  A
 * release [a, b) can only meet a watch of class c whose start lies in
 * [a - M_c + 1, b), M_c the longest watch of the class (kept per class,
 * reset when the class empties; at most 2^(c+1) - 1).  First a filter (a
 * bit per 4 KiB granule covered by a watch shorter than 4 MiB, 64 to a
 * hashed word, 2 MiB at most: in cache) may tell that no such watch meets
 * the release: their classes are skipped.  Per other non-empty class (a
 * bit mask), the window is found one of two ways:
 *  - a hash of (class, group), a group being 2^(c+3) bytes (a watch starts
 *    in exactly one; a release no longer than a few of the class's watches
 *    falls in one or two): when the window covers at most WATCH_PROBES
 *    groups, their buckets.  A bucket is 128 bytes (two lines) holding up
 *    to 15 entries of 8 bytes each: the record's number, a fingerprint of
 *    its (class, group) and its start and end inside the group rounded
 *    outwards to 1/512 of the class.  The scan decides from the bucket alone
 *    that an entry misses the release, and reads a record only when its
 *    rounded range meets it (exactly, for page-aligned watches of a page);
 *    so a release that meets nothing reads one or two buckets whose
 *    addresses it knows at once, whatever the number of watches;
 *  - otherwise a treap (randomized search tree, intrusive in the records)
 *    ordered by (start, record): one descent, O(log n), then the records
 *    in the window in order.
 * For watches that do not overlap each other the window holds the ones the
 * release touches plus at most two, so a release costs O(classes + touched)
 * or O(classes log n + touched).  No allocation anywhere in a release.
 *
 * One lock (watch_lock) serializes watch, unwatch and the handler's scan.
 * Why it never deadlocks: nothing is called while it is held (no malloc, no
 * system call, no handler; chunks are mapped before it is taken), so a
 * thread that holds it waits for nothing, and no release can start on that
 * thread meanwhile -- except from a signal handler, which finds the
 * thread-local watch_holding set and invalidates every token instead of
 * taking the lock (conservative, never a miss).  The handler runs inside
 * any release on any thread, nested in other handlers or not: it takes only
 * this lock.  With no watch live it takes nothing (one load).
 *
 * Fork: no prepare handler (one would take this lock before handlers
 * registered earlier take theirs, and a thread holding one of those while
 * releasing memory would then wait for it: a deadlock).  The child handler
 * instead frees a lock another thread held and rebuilds the index from the
 * records, whose magic word is the truth: a watch half made at fork is
 * either kept or freed, both harmless (its caller does not exist in the
 * child).
 */
#define PINHEAP_WATCH_OUT_OF_LINE   /* pinheap.h declares watch_valid, defined here */
#include "allocator/heap/chunk.h"     /* ph_lock, os_reserve_meta, the logger */

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "pinheap.h"
#include "hooks/watch/audit.h"

#define WATCH_CHUNK (1u << 20)            /* records are mapped 1 MiB at a time */
#define WATCH_MAX_CHUNKS 4096             /* 4 GiB of records: ~89 million watches */
#define WATCH_CLASSES 64
#define WATCH_MAGIC_LIVE 0x5741u          /* "WA": a watched record */
#define WATCH_PRIORITY INT_MIN            /* first of the VM_UNMAPPED chain */
#define WATCH_HASH_MIN_BITS 8             /* the first table: 256 buckets (32 KiB) */
#define WATCH_HASH_CLASSES 48             /* classes hashed by group (the rest: treap only) */
#define WATCH_PROBES 4                    /* groups a release probes, per class, at most */
#define WATCH_SLOTS 15                    /* entries in a bucket */
#define WATCH_LOAD 8                      /* watches per bucket before the table doubles */
#define WATCH_FINE 9                      /* an entry's unit: 2^(c - 9) bytes (1/512 of 2^c) */
#define WATCH_GRAIN 12                    /* the filter's granule: 4 KiB */
#define WATCH_FILTER_CLASSES 22           /* watches shorter than 4 MiB are in the filter */
#define WATCH_FILTERED (((uint64_t)1 << WATCH_FILTER_CLASSES) - 1)
#define WATCH_FILTER_MIN_BITS 10          /* its words: 2^10 (8 KiB) ... */
#define WATCH_FILTER_MAX_BITS 18          /* ... to 2^18 (2 MiB: stays in cache) */
#define WATCH_FILTER_SPAN 4               /* a release longer than 4 words' blocks skips it */

typedef struct watch_rec_s {
  pinheap_watch_t tok;                    /* first: the token's word */
  uintptr_t start, end;                   /* the range [start, end) */
  struct watch_rec_s *left, *right;       /* treap children; left links the free list */
  uint32_t prio;                          /* treap priority (a max-heap) */
  uint32_t num;                           /* its number: chunk * WATCH_PER_CHUNK + index */
  uint16_t magic;                         /* WATCH_MAGIC_LIVE while watched, else 0 */
  uint8_t cls;                            /* floor(log2(end - start)) */
} watch_rec_t;

#define WATCH_PER_CHUNK (WATCH_CHUNK / sizeof(watch_rec_t))

/* A bucket of the hash: two cache lines, 128-byte aligned.  An entry
 * (nonzero; the first n are used) packs, low bits first: the record's
 * number + 1 (27 bits: WATCH_MAX_CHUNKS * WATCH_PER_CHUNK < 2^27), a
 * fingerprint of its (class, group) (14 bits), its start's offset in the
 * group in units of 2^u bytes, rounded down (12 bits), and its length in
 * those units from there to its end rounded up (11 bits); u = c - WATCH_FINE
 * (0 for the classes below).  spill counts the entries whose home bucket is
 * this one or one before it and that sit past it (linear probing): a
 * lookup goes on to the next bucket while it is nonzero. */
typedef struct watch_bucket_s {
  uint32_t spill;
  uint32_t n;
  uint64_t slot[WATCH_SLOTS];
} __attribute__((aligned(128))) watch_bucket_t;

#define WATCH_NUM_BITS 27
#define WATCH_FP_BITS 14
#define WATCH_OFF_BITS 12                 /* WATCH_FINE + 3: a group is 2^(c+3) bytes */
#define WATCH_FP_SHIFT WATCH_NUM_BITS
#define WATCH_OFF_SHIFT (WATCH_FP_SHIFT + WATCH_FP_BITS)
#define WATCH_LEN_SHIFT (WATCH_OFF_SHIFT + WATCH_OFF_BITS)   /* 53: 11 bits left */
_Static_assert((uint64_t)WATCH_MAX_CHUNKS * WATCH_PER_CHUNK < ((uint64_t)1 << WATCH_NUM_BITS) - 1,
               "record numbers fit an entry");

static ph_lock_t watch_lock;
static watch_rec_t *watch_root[WATCH_CLASSES];          /* under watch_lock */
static uintptr_t watch_longest[WATCH_CLASSES];          /* longest watch per class, under watch_lock */
static uint64_t watch_classes;                          /* non-empty classes, under watch_lock */
static watch_rec_t *watch_free;                         /* under watch_lock */
static watch_bucket_t *watch_hash;                      /* buckets, under watch_lock */
static _Atomic unsigned watch_hash_bits;                /* log2 of their number (0: none yet) */
static uint64_t *watch_filter;                          /* the granule filter, under watch_lock */
static unsigned watch_filter_bits;                      /* log2 of its words, under watch_lock */
static size_t watch_filter_stale;                       /* unwatches since it was filled */
static watch_rec_t *watch_chunks[WATCH_MAX_CHUNKS];     /* under watch_lock */
static _Atomic unsigned watch_nchunks;                  /* chunks mapped (read without lock) */
static size_t watch_bump;                               /* next fresh record of the last chunk */
static watch_rec_t *watch_spare;                        /* a chunk mapped by a racing watch() */
static uint32_t watch_rand = 2463534242u;               /* xorshift32, under watch_lock */
static atomic_size_t watch_live;                        /* watched records */
static atomic_int watch_registered;                     /* the handler is set */
static atomic_int watch_atfork_done;
static __thread volatile int watch_holding __attribute__((tls_model("initial-exec")));

/* watch_lock, with this thread marked as holding it from before the lock
 * is tried until after it is let go, so that a signal handler's release on
 * this thread never waits for it. */
static inline void watch_enter(void)
{
  watch_holding = 1;
  atomic_signal_fence(memory_order_seq_cst);
  ph_lock(&watch_lock);
}

static inline void watch_leave(void)
{
  ph_unlock(&watch_lock);
  atomic_signal_fence(memory_order_seq_cst);
  watch_holding = 0;
}

/* ======================================================================= */
/*  the treap                                                               */
/* ======================================================================= */

static inline bool watch_before(const watch_rec_t *x, const watch_rec_t *y)
{
  return x->start < y->start || (x->start == y->start && (uintptr_t)x < (uintptr_t)y);
}

/* Splits t into the records before k (*l) and the others (*r). */
static void watch_split(watch_rec_t *t, const watch_rec_t *k, watch_rec_t **l, watch_rec_t **r)
{
  while (t != NULL) {
    if (watch_before(t, k)) {
      *l = t;
      l = &t->right;
      t = t->right;
    } else {
      *r = t;
      r = &t->left;
      t = t->left;
    }
  }
  *l = NULL;
  *r = NULL;
}

/* Joins a and b, every record of a before every record of b. */
static watch_rec_t *watch_merge(watch_rec_t *a, watch_rec_t *b)
{
  watch_rec_t *root = NULL, **at = &root;

  while (a != NULL && b != NULL) {
    if (a->prio > b->prio) {
      *at = a;
      at = &a->right;
      a = a->right;
    } else {
      *at = b;
      at = &b->left;
      b = b->left;
    }
  }
  *at = a != NULL ? a : b;
  return root;
}

/* ---- the hash: (class, group of the start) -> entries -------------------- */
/* A watch of class c starts in group start >> (c + 3), a group being four
 * times the longest watch of its class: a release [a, b) can only meet the
 * watches of the groups from (a - M_c + 1) >> (c+3) to (b-1) >> (c+3), one
 * or two for a release no longer than a watch.  Non-overlapping watches put
 * at most 8 entries in a group. */

/* The home bucket of (cls, group) and the entries' fingerprint. */
static inline size_t watch_home(unsigned cls, uintptr_t group, uint64_t *fp_p)
{
  unsigned bits = atomic_load_explicit(&watch_hash_bits, memory_order_relaxed);
  uint64_t h = ((uint64_t)group + (uint64_t)cls * 0x9E3779B97F4A7C15ull) * 0xD6E8FEB86659FD93ull;
  h ^= h >> 29;
  *fp_p = (h & (((uint64_t)1 << WATCH_FP_BITS) - 1)) << WATCH_FP_SHIFT;
  return (size_t)((h * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

static inline unsigned watch_unit(unsigned cls)
{
  return cls > WATCH_FINE ? cls - WATCH_FINE : 0;
}

static inline watch_rec_t *watch_rec_of(uint64_t e)
{
  uint32_t num = (uint32_t)(e & (((uint64_t)1 << WATCH_NUM_BITS) - 1)) - 1;
  return &__atomic_load_n(&watch_chunks[num / WATCH_PER_CHUNK], __ATOMIC_RELAXED)
              [num % WATCH_PER_CHUNK];
}

/* n's entry, and its home bucket in *home_p. */
static uint64_t watch_entry(const watch_rec_t *n, size_t *home_p)
{
  unsigned c = n->cls, u = watch_unit(c);
  uintptr_t base = n->start >> (c + 3) << (c + 3);
  uint64_t fp;
  *home_p = watch_home(c, n->start >> (c + 3), &fp);
  uint64_t off = (n->start - base) >> u;
  uint64_t len = ((n->end - base + ((uintptr_t)1 << u) - 1) >> u) - off;
  return ((uint64_t)n->num + 1) | fp | off << WATCH_OFF_SHIFT | len << WATCH_LEN_SHIFT;
}

static inline size_t watch_next_bucket(size_t i)
{
  return (i + 1) & (((size_t)1 << atomic_load_explicit(&watch_hash_bits, memory_order_relaxed)) - 1);
}

/* ---- the filter: which 4 KiB granules a short watch covers -------------- */
/* A bit per granule, 64 granules (a block) to a word, a word per block
 * hashed (no key: the blocks hashed to one word share its bits).  A watch
 * of a class below WATCH_FILTER_CLASSES sets the bits of the granules it
 * covers; a release whose granules' bits are all clear meets none of those
 * watches, and skips their classes without reading the index.  The filter
 * is small enough to stay in cache (2 MiB at most): a release meeting no
 * watch then costs no miss to memory, which on a loaded machine is most
 * of what a hash lookup costs.  Bits are never cleared by unwatch (a stale
 * bit only sends a release to the index); the filter is filled again from
 * the records once the unwatches since the last fill outnumber the live
 * watches. */

static inline uint64_t *watch_filter_word(uint64_t *f, unsigned fbits, uintptr_t block)
{
  return &f[(size_t)(((uint64_t)block * 0x9E3779B97F4A7C15ull) >> (64 - fbits))];
}

/* The bits of granules first .. last that fall in first's block. */
static inline uint64_t watch_filter_mask(uintptr_t first, uintptr_t last)
{
  unsigned hi = (last >> 6) > (first >> 6) ? 63 : (unsigned)(last & 63);
  return (~0ull >> (63 - hi)) & (~0ull << (first & 63));
}

static void watch_filter_add(uint64_t *f, unsigned fbits, const watch_rec_t *r)
{
  if (r->cls >= WATCH_FILTER_CLASSES)
    return;
  uintptr_t g = r->start >> WATCH_GRAIN, last = (r->end - 1) >> WATCH_GRAIN;
  for (;;) {
    *watch_filter_word(f, fbits, g >> 6) |= watch_filter_mask(g, last);
    if ((g >> 6) == (last >> 6))
      return;
    g = ((g >> 6) + 1) << 6;
  }
}

/* 0 if no watch of a filtered class can meet [a, b).  watch_lock held. */
static inline int watch_filter_may(uintptr_t a, uintptr_t b)
{
  uintptr_t g = a >> WATCH_GRAIN, last = (b - 1) >> WATCH_GRAIN;
  if ((last >> 6) - (g >> 6) >= WATCH_FILTER_SPAN)
    return 1;
  for (;;) {
    if (*watch_filter_word(watch_filter, watch_filter_bits, g >> 6) & watch_filter_mask(g, last))
      return 1;
    if ((g >> 6) == (last >> 6))
      return 0;
    g = ((g >> 6) + 1) << 6;
  }
}

/* Into the bucket of its group (or the first after it with room). */
static void watch_hash_add(watch_bucket_t *t, const watch_rec_t *n)
{
  size_t i;
  uint64_t e = watch_entry(n, &i);
  while (t[i].n == WATCH_SLOTS) {
    t[i].spill++;
    i = watch_next_bucket(i);
  }
  t[i].slot[t[i].n++] = e;
}

static void watch_hash_del(const watch_rec_t *n)
{
  size_t home, i;
  uint64_t e = watch_entry(n, &home);
  for (i = home;; i = watch_next_bucket(i)) {
    watch_bucket_t *bk = &watch_hash[i];
    for (uint32_t k = 0; k < bk->n; k++) {
      if (bk->slot[k] == e) {
        bk->slot[k] = bk->slot[--bk->n];
        bk->slot[bk->n] = 0;
        for (size_t j = home; j != i; j = watch_next_bucket(j))
          watch_hash[j].spill--;
        return;
      }
    }
    if (bk->spill == 0)
      ph_fatal("unwatch", "a watch record missing from its hash bucket:", n);
  }
}

/* Into the treap of its class and, below WATCH_HASH_CLASSES, the hash.
 * watch_lock held, the table made (watch_hash_grow). */
static void watch_treap_insert(watch_rec_t *n);
static void watch_treap_erase(watch_rec_t *n);

static void watch_insert(watch_rec_t *n)
{
  watch_treap_insert(n);
  if (n->cls < WATCH_HASH_CLASSES)
    watch_hash_add(watch_hash, n);
  watch_filter_add(watch_filter, watch_filter_bits, n);
}

/* Each live record into table t (of the current watch_hash_bits) if not
 * NULL and filter f (fbits), in the order of the chunks (memory order, not
 * a miss per record as a walk of the old table's entries would be).
 * watch_lock held. */
static void watch_reindex(watch_bucket_t *t, uint64_t *f, unsigned fbits)
{
  unsigned n = atomic_load_explicit(&watch_nchunks, memory_order_relaxed);
  for (unsigned i = 0; i < n; i++) {
    size_t used = i + 1 == n ? watch_bump : WATCH_PER_CHUNK;
    for (size_t j = 0; j < used; j++) {
      const watch_rec_t *r = &watch_chunks[i][j];
      if (r->magic != WATCH_MAGIC_LIVE)
        continue;
      if (t != NULL && r->cls < WATCH_HASH_CLASSES)
        watch_hash_add(t, r);
      watch_filter_add(f, fbits, r);
    }
  }
  watch_filter_stale = 0;
}

static void watch_erase(watch_rec_t *n)
{
  watch_treap_erase(n);
  if (n->cls < WATCH_HASH_CLASSES)
    watch_hash_del(n);
}

/* Makes a table of at least need / WATCH_LOAD buckets (at most 8 entries
 * of 15 per bucket on average before the next doubling) and a filter of
 * need / 4 words (at most 2^WATCH_FILTER_MAX_BITS), mapped with no lock
 * held; the records go in under the lock (O(n) at each doubling: releases
 * wait that long).  Tables and filters outgrown stay mapped (pinheap's
 * metadata is never released): together they take at most as much as the
 * last.  @return 0 or ENOMEM. */
static PH_NOINLINE int watch_hash_grow(size_t need)
{
  unsigned bits = WATCH_HASH_MIN_BITS, fbits = WATCH_FILTER_MIN_BITS;
  while (((size_t)WATCH_LOAD << bits) < need)
    bits++;
  while (fbits < WATCH_FILTER_MAX_BITS && ((size_t)4 << fbits) < need)
    fbits++;
  watch_bucket_t *t = os_reserve_meta(sizeof(watch_bucket_t) << bits);
  if (t == NULL)
    return ENOMEM;
  uint64_t *f = os_reserve_meta(sizeof(uint64_t) << fbits);
  if (f == NULL)
    return ENOMEM;                /* t stays mapped, unused: metadata is never released */
  watch_enter();
  unsigned old_bits = atomic_load_explicit(&watch_hash_bits, memory_order_relaxed);
  if (bits > old_bits) {
    atomic_store_explicit(&watch_hash_bits, bits, memory_order_relaxed);
    watch_reindex(t, f, fbits);   /* fbits >= watch_filter_bits: need only grew */
    watch_filter = f;
    watch_filter_bits = fbits;
    watch_hash = t;
  }
  watch_leave();
  return 0;
}

/* ---- the treap: (start, record) order, per class ------------------------- */

static void watch_treap_insert(watch_rec_t *n)
{
  watch_rec_t **at = &watch_root[n->cls];

  while (*at != NULL && (*at)->prio >= n->prio)
    at = watch_before(n, *at) ? &(*at)->left : &(*at)->right;
  watch_split(*at, n, &n->left, &n->right);
  *at = n;
  watch_classes |= (uint64_t)1 << n->cls;
  if (n->end - n->start > watch_longest[n->cls])
    watch_longest[n->cls] = n->end - n->start;
}

static void watch_treap_erase(watch_rec_t *n)
{
  watch_rec_t **at = &watch_root[n->cls];

  while (*at != n) {
    if (*at == NULL)
      ph_fatal("unwatch", "a watch record missing from its index:", n);
    at = watch_before(n, *at) ? &(*at)->left : &(*at)->right;
  }
  *at = watch_merge(n->left, n->right);
  if (watch_root[n->cls] == NULL) {
    watch_classes &= ~((uint64_t)1 << n->cls);
    watch_longest[n->cls] = 0;
  }
}

static inline void watch_invalidate(watch_rec_t *r)
{
  __atomic_store_n(&r->tok.state, 0UL, __ATOMIC_RELEASE);
}

/* What a scan does with each record meeting the release: the handler
 * invalidates it; the audit (hooks/watch/audit.c) also notes the ones that
 * were still valid. */
typedef struct watch_visit_s {
  uintptr_t *starts, *ends;               /* the audit's: ranges it invalidated */
  size_t max, n;                          /* room in them, records invalidated (or met) */
  int count_only;                         /* count the records met, change nothing */
} watch_visit_t;

static inline void watch_meet(watch_rec_t *r, watch_visit_t *v)
{
  if (v == NULL) {
    watch_invalidate(r);
    return;
  }
  if (v->count_only) {
    v->n++;
    return;
  }
  if (__atomic_load_n(&r->tok.state, __ATOMIC_RELAXED) == 0)
    return;                               /* announced: the handler ran first */
  watch_invalidate(r);
  if (v->n < v->max) {
    v->starts[v->n] = r->start;
    v->ends[v->n] = r->end;
  }
  v->n++;
}

/* Visits the records of t whose start is in [lo, b) and whose end is past
 * a.  Recursion only into left subtrees inside the window: its depth is
 * the treap's (O(log n) expected). */
static void watch_scan(watch_rec_t *t, uintptr_t lo, uintptr_t a, uintptr_t b, watch_visit_t *v)
{
  while (t != NULL) {
    if (t->start < lo) {
      t = t->right;
    } else if (t->start >= b) {
      t = t->left;
    } else {
      if (t->end > a)
        watch_meet(t, v);
      watch_scan(t->left, lo, a, b, v);
      t = t->right;
    }
  }
}

/* The records of group g of class c that meet [a, b): the entries of its
 * home bucket and of the buckets its entries spilled to.  A record is read
 * only when its entry's rounded range meets the release. */
static inline __attribute__((always_inline)) void watch_probe(unsigned c, uintptr_t g, uintptr_t a,
                                                              uintptr_t b, watch_visit_t *v)
{
  unsigned u = watch_unit(c);
  uintptr_t base = g << (c + 3);
  uint64_t fp;
  size_t i = watch_home(c, g, &fp);
  /* an entry (off, len) meets when off << u < b - base and
   * (off + len) << u > a - base (b > base: the group is in the window) */
  uint64_t off_max = (b - base - 1) >> u;
  uint64_t end_min = a > base ? (a - base) >> u : 0;
  for (;;) {
    const watch_bucket_t *bk = &watch_hash[i];
    for (uint32_t k = 0; k < bk->n; k++) {
      uint64_t e = bk->slot[k];
      uint64_t off = (e >> WATCH_OFF_SHIFT) & (((uint64_t)1 << WATCH_OFF_BITS) - 1);
      if ((e & (((uint64_t)1 << WATCH_FP_BITS) - 1) << WATCH_FP_SHIFT) == fp && off <= off_max &&
          off + (e >> WATCH_LEN_SHIFT) > end_min) {
        watch_rec_t *r = watch_rec_of(e);   /* maybe: another group's, or rounded */
        if (r->start < b && r->end > a)
          watch_meet(r, v);
      }
    }
    if (bk->spill == 0)
      return;
    i = watch_next_bucket(i);
  }
}

/* Every record meeting [a, b), through the index.  watch_lock held. */
static inline __attribute__((always_inline)) void watch_each(uintptr_t a, uintptr_t b,
                                                             watch_visit_t *v)
{
  uint64_t m = watch_classes;
  if ((m & WATCH_FILTERED) != 0 && !watch_filter_may(a, b))
    m &= ~WATCH_FILTERED;
  for (; m != 0; m &= m - 1) {
    int c = __builtin_ctzll(m);
    uintptr_t reach = watch_longest[c] - 1;   /* a meeting watch starts at a - reach or later */
    uintptr_t lo = a > reach ? a - reach : 0;
    if (c < WATCH_HASH_CLASSES && ((b - 1) >> (c + 3)) - (lo >> (c + 3)) < WATCH_PROBES) {
      for (uintptr_t g = lo >> (c + 3); g <= (b - 1) >> (c + 3); g++)
        watch_probe((unsigned)c, g, a, b, v);
    } else {
      watch_scan(watch_root[c], lo, a, b, v);
    }
  }
}

/* ======================================================================= */
/*  records                                                                 */
/* ======================================================================= */

/* A record from the free list or the last chunk; NULL when both are out.
 * watch_lock held. */
static watch_rec_t *watch_rec_take(void)
{
  watch_rec_t *r = watch_free;
  if (r != NULL) {
    watch_free = r->left;
    return r;
  }
  unsigned n = atomic_load_explicit(&watch_nchunks, memory_order_relaxed);
  if (n == 0 || watch_bump == WATCH_PER_CHUNK) {
    if (watch_spare == NULL || n == WATCH_MAX_CHUNKS)
      return NULL;
    __atomic_store_n(&watch_chunks[n], watch_spare, __ATOMIC_RELAXED);  /* read by the signal path */
    watch_spare = NULL;
    atomic_store_explicit(&watch_nchunks, n + 1, memory_order_release);
    watch_bump = 0;
    n++;
  }
  r = &watch_chunks[n - 1][watch_bump];
  r->num = (uint32_t)((n - 1) * WATCH_PER_CHUNK + watch_bump++);
  return r;
}

/* Every record of every chunk: the index and the free list made again from
 * the magic words (the fork child, after another thread held the lock). */
static void watch_rebuild(void)
{
  unsigned n = atomic_load_explicit(&watch_nchunks, memory_order_relaxed);
  size_t live = 0;

  for (int c = 0; c < WATCH_CLASSES; c++) {
    watch_root[c] = NULL;
    watch_longest[c] = 0;
  }
  watch_classes = 0;
  unsigned bits = atomic_load_explicit(&watch_hash_bits, memory_order_relaxed);
  if (watch_hash != NULL)
    memset(watch_hash, 0, sizeof(watch_bucket_t) << bits);
  if (watch_filter != NULL)
    memset(watch_filter, 0, sizeof(uint64_t) << watch_filter_bits);
  watch_filter_stale = 0;
  watch_free = NULL;
  for (unsigned i = 0; i < n; i++) {
    size_t used = i + 1 == n ? watch_bump : WATCH_PER_CHUNK;
    for (size_t j = 0; j < used; j++) {
      watch_rec_t *r = &watch_chunks[i][j];
      r->left = r->right = NULL;
      r->num = (uint32_t)(i * WATCH_PER_CHUNK + j);
      if (r->magic == WATCH_MAGIC_LIVE && r->end > r->start && r->cls < WATCH_CLASSES &&
          watch_hash != NULL) {
        watch_insert(r);
        live++;
      } else {
        r->magic = 0;
        r->left = watch_free;
        watch_free = r;
      }
    }
  }
  atomic_store(&watch_live, live);
}

/* A release from a signal handler that interrupted this thread inside the
 * lock: the index may be half changed, so every token goes invalid. */
static PH_NOINLINE void watch_invalidate_all(void)
{
  unsigned n = atomic_load_explicit(&watch_nchunks, memory_order_acquire);

  for (unsigned i = 0; i < n; i++) {
    watch_rec_t *c = __atomic_load_n(&watch_chunks[i], __ATOMIC_RELAXED);
    for (size_t j = 0; c != NULL && j < WATCH_PER_CHUNK; j++)
      watch_invalidate(&c[j]);
  }
}

/* ======================================================================= */
/*  the handler, fork                                                       */
/* ======================================================================= */

static int watch_on_unmapped(int type, pinheap_event_t *ev, void *arg)
{
  (void)type;
  (void)arg;
  if (atomic_load_explicit(&watch_live, memory_order_relaxed) == 0)
    return PINHEAP_EVENT_PASS;
  uintptr_t a = (uintptr_t)ev->vm_unmapped.address;
  size_t len = ev->vm_unmapped.size;
  uintptr_t b = len > UINTPTR_MAX - a ? UINTPTR_MAX : a + len;
  if (ph_unlikely(watch_holding)) {
    watch_invalidate_all();
    return PINHEAP_EVENT_PASS;
  }
  watch_enter();
  watch_each(a, b, NULL);
  watch_leave();
  return PINHEAP_EVENT_PASS;
}

static void watch_fork_child(void)
{
  if (!ph_lock_held(&watch_lock))
    return;
  /* another thread held it (the forking one never forks inside it) */
  ph_lock_reset(&watch_lock);
  watch_holding = 0;
  watch_rebuild();
}

/* The handler at the head of the VM_UNMAPPED chain, and the fork handler;
 * once.  @return 0 or set_event_handler's error. */
static PH_NOINLINE int watch_register(void)
{
  if (atomic_exchange(&watch_atfork_done, 1) == 0)
    ph_atfork(NULL, NULL, watch_fork_child);
  int rc = PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, WATCH_PRIORITY,
                                           watch_on_unmapped, NULL);
  if (rc == EEXIST)
    rc = 0;                       /* another thread's first watch set it */
  if (rc == 0)
    atomic_store(&watch_registered, 1);
  return rc;
}

/* ---- for the audit (hooks/watch/audit.c) -------------------------------- */

long watch_audit_claim(uintptr_t a, uintptr_t b, uintptr_t *starts, uintptr_t *ends, size_t max)
{
  int expected = 0;
  watch_visit_t v = { starts, ends, max, 0, 0 };

  if (atomic_load_explicit(&watch_live, memory_order_relaxed) == 0)
    return 0;
  /* the reader never waits for the lock: a thread holding it may be the
   * one the kernel keeps waiting for the reader (a signal handler's raw
   * release inside watch()) */
  if (!atomic_compare_exchange_strong_explicit(&watch_lock.held, &expected, 1,
                                               memory_order_acquire, memory_order_relaxed))
    return -1;
  watch_each(a, b, &v);
  ph_unlock(&watch_lock);
  return (long)v.n;
}

int watch_audit_shared(uintptr_t a, uintptr_t b)
{
  watch_visit_t v = { NULL, NULL, 0, 0, 1 };

  watch_enter();
  watch_each(a, b, &v);
  watch_leave();
  return v.n != 0;
}

/* ======================================================================= */
/*  the API                                                                 */
/* ======================================================================= */

int PINHEAP_NAME(watch)(const void *addr, size_t len, const pinheap_watch_t **token_p)
{
  uintptr_t start = (uintptr_t)addr;
  watch_rec_t *r;

  if (token_p == NULL || len == 0 || len > UINTPTR_MAX - start)
    return EINVAL;
  if (ph_unlikely(audit_wanted()))
    audit_settle();
  if (ph_unlikely(!atomic_load(&watch_registered))) {
    int rc = watch_register();
    if (rc != 0)
      return rc;
  }
  size_t need = atomic_load_explicit(&watch_live, memory_order_relaxed) + 1;
  unsigned bits = atomic_load_explicit(&watch_hash_bits, memory_order_relaxed);
  if (ph_unlikely(bits == 0 || need > ((size_t)WATCH_LOAD << bits))) {
    if (watch_hash_grow(need) != 0)
      return ENOMEM;
  }
  for (;;) {
    watch_enter();
    r = watch_rec_take();
    if (r != NULL)
      break;
    watch_leave();
    /* out of records: map a chunk with no lock held (no event either) */
    watch_rec_t *chunk = os_reserve_meta(WATCH_CHUNK);
    if (chunk == NULL)
      return ENOMEM;
    watch_enter();
    if (watch_spare == NULL && atomic_load(&watch_nchunks) < WATCH_MAX_CHUNKS)
      watch_spare = chunk;
    else
      chunk = NULL;               /* a racing watch() mapped one: this one is lost */
    watch_leave();
    if (chunk == NULL && atomic_load(&watch_nchunks) >= WATCH_MAX_CHUNKS)
      return ENOMEM;
  }
  r->start = start;
  r->end = start + len;
  r->cls = (uint8_t)(63 - __builtin_clzll((unsigned long long)len));
  watch_rand ^= watch_rand << 13;
  watch_rand ^= watch_rand >> 17;
  watch_rand ^= watch_rand << 5;
  r->prio = watch_rand;
  __atomic_store_n(&r->tok.state, 1UL, __ATOMIC_RELAXED);  /* published by the unlock */
  r->magic = WATCH_MAGIC_LIVE;
  watch_insert(r);
  atomic_fetch_add_explicit(&watch_live, 1, memory_order_relaxed);
  watch_leave();
  *token_p = &r->tok;
  if (ph_unlikely(audit_wanted()))
    audit_watched(start, start + len);
  return 0;
}

void PINHEAP_NAME(unwatch)(const pinheap_watch_t *token)
{
  if (token == NULL)
    return;
  watch_rec_t *r = (watch_rec_t *)(uintptr_t)token;   /* tok is the first member */
  watch_enter();
  if (r->magic != WATCH_MAGIC_LIVE) {
    watch_leave();
    ph_fatal("unwatch", "not a live watch token (unwatched twice?):", token);
  }
  watch_erase(r);
  watch_invalidate(r);
  r->magic = 0;
  r->left = watch_free;
  r->right = NULL;
  watch_free = r;
  size_t live = atomic_fetch_sub_explicit(&watch_live, 1, memory_order_relaxed) - 1;
  if (r->cls < WATCH_FILTER_CLASSES && ++watch_filter_stale > live + 1024) {
    /* its bits were left set: refill (O(n) after more than n unwatches) */
    memset(watch_filter, 0, sizeof(uint64_t) << watch_filter_bits);
    watch_reindex(NULL, watch_filter, watch_filter_bits);
  }
  uintptr_t start = r->start, end = r->end;
  watch_leave();
  if (ph_unlikely(audit_wanted()))
    audit_unwatched(start, end);
}

size_t PINHEAP_NAME(watch_count)(void)
{
  return atomic_load_explicit(&watch_live, memory_order_relaxed);
}

int PINHEAP_NAME(watch_valid)(const pinheap_watch_t *token)
{
  return __atomic_load_n(&token->state, __ATOMIC_ACQUIRE) != 0;
}
