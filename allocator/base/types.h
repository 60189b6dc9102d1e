/*
 * types.h -- every type and constant of the allocator, with the glossary.
 * The inline arithmetic on them is in chunk.h, the cross-file prototypes in
 * base.h (which includes this header).
 *
 * Glossary
 *   chunk    A 16-byte aligned block with a boundary tag.  `head` holds the
 *            chunk's size, its flags and a check byte; `prev_foot` holds the
 *            size of the previous chunk when that chunk is free.  The user's
 *            payload starts 16 bytes into the chunk and may run into the next
 *            chunk's prev_foot, so an in-use chunk costs 8 bytes of overhead.
 *   bin      A list of free chunks.  Small bins (sizes < 8192) hold one exact
 *            size each; large bins hold a size range, sorted ascending, so the
 *            first fit is the best fit.  A bit map says which bins are non-empty.
 *   dv       The designated victim: the rest of the last chunk split to serve
 *            a request, kept apart in bin 0 so that the next requests carve
 *            it without moving it from bin to bin.
 *   top      The free chunk at the end of the newest segment; it is carved
 *            from when no bin fits and is never in a bin.
 *   fence    A zero-sized in-use chunk header closing every segment.
 *   segment  A contiguous stretch of heap: a 64 KiB aligned mapping from the
 *            OS (or the caller's region for create_mspace_with_base).  Its
 *            seg_t header sits at its base.
 *   huge     A chunk at or above the mmap threshold, mapped on its own, with
 *            a huge_t header at the base of the mapping.
 *   mstate   One heap: bins, top, segments, huge chunks, a lock.  The malloc
 *            family uses the static default heap; every mspace is an mstate.
 *   owner map  Maps each 64 KiB granule of address space to the segment or
 *            huge chunk of pinheap that holds it (0 = not pinheap's).  It makes
 *            "is this pointer ours, and whose" exact and cheap (two loads).
 *   check byte  The top byte of `head`: a hash of the chunk's address, its
 *            size and flags, and the heap's secret cookie.  A header that was
 *            overwritten, or a pointer that is not a chunk, fails it.
 *   slab page  A granule of an arena (an in-use chunk of it) cut into
 *            headerless blocks of one size class, up to PH_SLAB_MAX bytes,
 *            owned by one thread (slab.c).  Its kind map byte is
 *            PH_KIND_SLAB; its header follows the blocks.
 */
#ifndef PINHEAP_TYPES_H
#define PINHEAP_TYPES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- sizes -------------------------------------------------------------- */
#define PH_ALIGN          16u
#define PH_ALIGN_MASK     (PH_ALIGN - 1)
#define PH_CHUNK_HDR      16u                   /* prev_foot + head */
#define PH_CHUNK_OVERHEAD 8u                    /* in-use cost: the head */
#define PH_MIN_CHUNK      32u
#define PH_FENCE_SIZE     16u
#define PH_GRANULE_SHIFT  16
#define PH_GRANULE        ((size_t)1 << PH_GRANULE_SHIFT)   /* 64 KiB */
#define PH_SMALL_LIMIT    8192u                 /* sizes below: exact small bins */
#define PH_NSMALL         512u
/* Large bins are sorted lists; a free is a sorted insert, so a bin must
 * stay short.  Sizes up to 2 MiB, where a heap's free chunks crowd, get 32
 * bins per power of two (a bin spans 1/32 of it); sizes above, 4. */
#define PH_FINE_LIMIT_SHIFT 21u                 /* 2 MiB */
#define PH_NFINE          (PH_NSMALL + ((PH_FINE_LIMIT_SHIFT - 13u) << 5))
#define PH_NBINS          (PH_NFINE + ((48u - PH_FINE_LIMIT_SHIFT) << 2))   /* up to 2^47 */
#define PH_BINMAP_WORDS   ((PH_NBINS + 63) / 64)
_Static_assert(PH_BINMAP_WORDS <= 64, "mstate_t.binmap_words has a bit per word of binmap");
/* The largest request: user space is 47 bits, so nothing larger can ever
 * be mapped, and every chunk size below it has a bin (bin_index). */
#define PH_MAX_REQUEST    (((size_t)1 << 47) - 4 * PH_GRANULE)

/* ---- head layout -------------------------------------------------------- */
#define PH_PINUSE    ((size_t)1)   /* the previous chunk is in use */
#define PH_CINUSE    ((size_t)2)   /* this chunk is in use */
#define PH_MMAPPED   ((size_t)4)   /* a huge chunk, mapped on its own */
#define PH_DECOMMITTED ((size_t)8) /* free chunk: its whole interior pages were
                                      given back by malloc_trim (and not touched since) */
#define PH_FLAGS     ((size_t)0xf)
#define PH_SIZE_MASK ((size_t)0x0000fffffffffff0ULL)
#define PH_CHECK_SHIFT 56
#define PH_CHECK_MASK ((size_t)0xff << PH_CHECK_SHIFT)
/* What a chunk's header becomes when the chunk merges into the free chunk
 * before it: no header (its check byte is not one), and a free of the old
 * pointer is named a double free rather than an invalid pointer. */
#define PH_HEAD_MERGED ((size_t)0x004d455247454421ULL)
/* ---- defaults (mallopt) ------------------------------------------------- */
#define PH_DEFAULT_MMAP_THRESHOLD  ((size_t)128 * 1024)
#define PH_MAX_MMAP_THRESHOLD      ((size_t)32 * 1024 * 1024)
#define PH_DEFAULT_TRIM_THRESHOLD  ((size_t)128 * 1024)
#define PH_DEFAULT_MMAP_MAX        65536
#define PH_DEFAULT_SEGMENT         ((size_t)1024 * 1024)
#define PH_MAX_SEGMENT_GROW        ((size_t)16 * 1024 * 1024)
/* Address space reserved after each new segment of an arena (seg_t.spare). */
#define PH_SEG_SPARE               ((size_t)3 * 1024 * 1024)
/* With the default (dynamic) thresholds, the top's tail is given back only
 * once it has stayed unused this long: memory follows the program without
 * a map/unmap per free.  A threshold set with mallopt trims at once, as
 * glibc does. */
#define PH_TRIM_DECAY_MS           100u

/* Deferred coalescing: small chunks coming back from the thread caches wait
 * in per-size lists of their heap ("fast" lists, as glibc's fastbins) and
 * are handed out again as they are; they are coalesced only when the heap
 * would otherwise grow, when the lists hold too much, and before trim and
 * statistics. */
#define PH_FAST_MAX_CHUNK 2032u
#define PH_FAST_NBINS ((PH_FAST_MAX_CHUNK >> 4) + 1)
/* The deferred chunks of one size move between a heap and the thread
 * caches in bundles, whole: a bundle is a list of chunks linked through
 * the first word of their payloads, and its first chunk's third word holds
 * the next bundle and, in its top 16 bits, the bundle's length.  (The
 * third word exists in the smallest chunk, as it runs into the next
 * chunk's prev_foot.)  Every chunk of a bundle is waiting (below).  So a
 * thread cache refills and gives back in O(1), without walking the chunks;
 * each chunk's header is checked when malloc hands it out (front.h). */
#define PH_BUNDLE_SHIFT 48
#define PH_BUNDLE_LINK_MASK (((uintptr_t)1 << PH_BUNDLE_SHIFT) - 1)
/* Slab pages (slab.c): blocks of one size class carved from one granule,
 * headerless.  Classes go in 16-byte steps up to 128 bytes, then four per
 * doubling (160, 192, 224, 256, 320, ... 1024): at most a quarter of a
 * block unused, and 20 classes below 1 KiB instead of 64, so that a
 * thread's partly used pages, one per class it uses, stay few.  Requests
 * map to classes through slab_class_of[(n - 1) >> 4]. */
#define PH_SLAB_MAX    1024u
#define PH_SLAB_NCLASS 20u
#define PH_SLAB_NSLOT  (PH_SLAB_MAX >> 4)   /* request sizes by (n - 1) >> 4 */
/* In arena 0, once it has slab pages, a class takes no page of its own
 * until the arena has served this many mallocs of it (slab.c:
 * slab_next_page; tcache.c: tcache_sparse_malloc): a class met a few times
 * costs no page of memory (the page header's and its first carve's) and no
 * 64 KiB of the arena for a block or two; its blocks are chunks, which pack
 * mixed sizes.  (4: the start-up row's program 2 pages more, 16: the same
 * as 8.) */
#define PH_SLAB_SPARSE 8u
#define PH_SLAB_HDR    176u      /* the page header: it starts a cache line */
/* Blocks start the granule (a block's offset in its granule is its offset
 * from the first block); the header follows them, at the end of the
 * page's chunk, which ends 16 bytes before the next granule, where the
 * next chunk's header lies. */
#define PH_SLAB_AREA   (PH_GRANULE - PH_CHUNK_HDR - PH_SLAB_HDR)
#define PH_SLAB_HDR_OFF PH_SLAB_AREA   /* the last header offset in a granule */
/* Headers at one offset of every granule would all fall into the same few
 * sets of the L1 cache, which holds 8 lines per set: with more pages in
 * use than that (a thread using many size classes), their headers would
 * evict each other on every malloc and free.  So the header of granule g
 * (address >> 16) lies (g * 29) mod 8 cache lines above PH_SLAB_HDR_LOW:
 * 8 offsets in every 8 granules in a row, up to PH_SLAB_HDR_OFF, and the
 * blocks end where it starts.  The multiply is one instruction that keeps
 * g (imul, GCC and clang; of 13, GCC made three lea and shifts), where
 * (g & 7) << 6 is a copy, a shift and a mask, and an offset that goes down
 * one line per granule needs a subtraction more: free's fast path finds
 * the header from g in 4 instructions (front.h: slab_page_of_granule)
 * instead of 7. */
#define PH_SLAB_COLOR_MASK ((uintptr_t)7 << 6)
#define PH_SLAB_HDR_LOW (PH_SLAB_HDR_OFF - PH_SLAB_COLOR_MASK)
#define PH_SLAB_COLOR_MUL ((uintptr_t)29 << 6)

typedef struct chunk_s {
  size_t prev_foot;          /* size of the previous chunk, if it is free */
  size_t head;               /* size | flags | check byte << 56 */
  struct chunk_s *fd;        /* free chunks only: bin links */
  struct chunk_s *bk;
} chunk_t;

struct mstate_s;

/* A memory source: where a heap's memory comes from, and what the heap may
 * do with it.  Every heap points at its source (mstate_t.source); the code
 * asks the source, never which kind of heap it is.  The OS source maps
 * segments and huge chunks (os.c), a caller's region is one fixed segment
 * laid over memory pinheap does not own, the shared region's slices are
 * the shared heap's (shm.c).  A new source is one more descriptor and one
 * more row of operations (source.c).
 *
 * The descriptor holds flags, which the hot paths test as they are, and
 * the index of its row of operations (mem_source_ops_t), never function
 * pointers: the shared heap's descriptor lives in its region, at one
 * address in every process of the job, where code addresses differ from
 * process to process. */
enum mem_source_id_e {
  MEM_SOURCE_SHARED = 0,     /* the shared region: 0, so that a descriptor
                                written with only its flags named, as
                                shm.c's header set-up does, is the region's */
  MEM_SOURCE_OS = 1,
  MEM_SOURCE_REGION = 2,
  MEM_SOURCE_COUNT
};
typedef struct mem_source_s {
  bool grows;                /* the heap maps new segments and extends them */
  bool maps_huge;            /* large requests get mappings of their own */
  bool releases;             /* memory goes back to it: trims, idle segments,
                                destroy_mspace */
  bool in_owner_map;         /* its segments are in the owner map (a pointer
                                finds its heap there) and live as long as
                                their heap (the heap is in the registry);
                                else the heap's one segment is its range */
  bool shared;               /* the shared heap's region (shm.c): segments are
                                slices of it, and the heap, its segments and
                                this descriptor live in it, at one address in
                                every process; large requests are served in
                                the region (private huge chunks only after
                                the region filled up, with the fallback on) */
  uint8_t ops;               /* its row of mem_source_ops[] (MEM_SOURCE_*) */
} mem_source_t;

/* What a post of pages to give back did (mem_source_ops_t.post). */
enum source_post_e {
  SOURCE_POST_NOW,    /* no other process attached: the caller gives the pages back now */
  SOURCE_POST_LATER,  /* posted: they go once every process has heard (ms_release_settle) */
  SOURCE_POST_FULL    /* the ring is full: nothing posted, the pages stay for now */
};

/* What a memory source does beyond the flags of its descriptor: one row per
 * source, per process (source.c: mem_source_ops[]), indexed by
 * mem_source_t.ops.  The heap calls these where it used to call the shared
 * heap by name, only where a call was made already and only where the
 * descriptor's flags say the source has the operation: today only the
 * shared region's row has any (shm.c's functions); the OS's and a region's
 * rows are empty.  Some are the process's rather than a heap's (on,
 * heap_create, due, poll, fallback_*): the heap asks the shared row for
 * them (heap/heap.h: source_shared_ops). */
typedef struct mem_source_ops_s {
  /* Is the source live in this process?  (A forked child's copy of the
   * region is private memory: its pages are decommitted, not removed.) */
  bool (*on)(void);
  /* A new arena of this process over the source, kind its kind map byte;
   * NULL when the source is full. */
  struct mstate_s *(*heap_create)(unsigned kind);
  /* At least len bytes (a multiple of PH_GRANULE) for a new segment of a
   * heap of this process, reserved; NULL when the source is full.
   * Lock-free. */
  void *(*take)(size_t len);
  /* Reserves again the pages of [p, p + len) of ms that a give-back
   * removed (chunk.h: ms_carve_backed).  Locked.  @return false when there
   * is no room (then NULL, or the fallback). */
  bool (*back)(struct mstate_s *ms, const void *p, size_t len);
  /* The pages [addr, addr + len) of the borrowed free chunk of ms are to
   * go back: posts them for every other process to hear first.  Lock-free,
   * ms unlocked.  @return enum source_post_e. */
  int (*post)(struct mstate_s *ms, void *chunk, void *addr, size_t len);
  /* The whole pages [addr, addr + len) of ms's free chunk leave the
   * source now (the release listener first). */
  void (*remove)(struct mstate_s *ms, void *addr, size_t len);
  /* Is there a release of another process to hear, or one of this
   * process's to settle?  A few relaxed loads. */
  bool (*due)(void);
  /* Hears the other processes' releases and settles this process's; no
   * heap lock held.  @return how many of its own still wait. */
  int (*poll)(void);
  /* Is mem in a part of the source another process holds? */
  bool (*foreign)(const void *mem);
  /* Has the source filled up with the fallback on?  Then requests go to
   * the fallback's private heap (created on first use by fallback_heap,
   * NULL if it cannot be). */
  bool (*fallback_active)(void);
  struct mstate_s *(*fallback_heap)(void);
} mem_source_ops_t;

/* At the base of every segment.  sizeof is a multiple of 16. */
typedef struct seg_s {
  struct seg_s *next;
  struct mstate_s *ms;
  char *base;                /* == (char *)this */
  size_t size;               /* bytes from base to the end of the fence */
  size_t chunk_off;          /* offset of the first chunk from base */
  size_t flags;              /* PH_SEG_* */
  uint64_t idle_since;       /* wholly free since (ms, monotonic); 0: in use */
  size_t spare;              /* bytes mapped after base + size, not yet part of
                                the segment: it grows into them in place */
} seg_t;
#define PH_SEG_HOLDS_MS 2u   /* the mstate lives in this segment (an mspace) */

/* At the base of every huge mapping.  sizeof is 48: the chunk follows. */
typedef struct huge_s {
  struct huge_s *next;
  struct huge_s *prev;
  size_t map_size;
  struct mstate_s *ms;
  size_t chunk_off;          /* offset of the chunk from the base */
  size_t recycled;           /* 1: reused from the mapping cache with its
                                pages (not zero); a decommitted one is 0 */
} huge_t;

typedef struct bin_s {
  chunk_t *fd;
  chunk_t *bk;
} bin_t;

typedef struct ph_lock_s {
  atomic_int held;
} ph_lock_t;

typedef struct mstate_s {
  ph_lock_t lock;
  unsigned flags;            /* PH_MS_* */
  const mem_source_t *source;  /* where its memory comes from */
  unsigned kind;             /* the kind map byte of its segments (PH_KIND_*) */
  size_t cookie;             /* secret mixed into every check byte */
  chunk_t *top;
  seg_t *top_seg;
  seg_t *segs;               /* every segment, newest first */
  huge_t *huge;              /* every live huge chunk */
  size_t huge_count;
  size_t huge_bytes;         /* mapped bytes of huge chunks */
  size_t footprint;          /* bytes of all segments */
  size_t seg_grow;           /* least size of the next segment */
  unsigned idle_segs;        /* segments with idle_since set */
  uint64_t idle_scan_at;     /* when they were last looked at */
  uint64_t trim_since;       /* decay: when the top last rose above the trim
                                threshold (ms, monotonic), 0 if it is below */
  size_t trim_low;           /* the top's smallest size since then */
  void *fast[PH_FAST_NBINS]; /* freed small chunks kept in use, not coalesced:
                                by chunk size >> 4, a stack of bundles (below) */
  size_t fast_bytes;
  size_t unbacked;           /* shared heap: its pages given back and not
                                reserved in the tmpfs again (shm.c) */
  void *_Atomic remote;      /* bundles of in-use chunks freed by other threads
                                (a stack, as fast[]); drained under the lock */
  struct mstate_s *all_next; /* every heap of the process (fork, statistics) */
  void *_Atomic cache_slot;  /* an arena's room, in its first granule, for the
                                cache of the first thread it serves (state.c:
                                ms_create); NULL once taken, or none */
  struct slab_page_s *slab_all;    /* every slab page of this arena (slab.c) */
  struct slab_page_s *slab_cache;  /* empty slab pages kept for reuse */
  unsigned slab_cached;
  struct slab_page_s *slab_orphans[PH_SLAB_NCLASS];  /* pages of exited threads,
                                by size class, to be adopted */
  uint8_t slab_sparse[PH_SLAB_NCLASS];  /* per class, mallocs served by chunks
                                while the class had no page (slab.c:
                                slab_next_page): up to PH_SLAB_SPARSE */
  uint64_t binmap[PH_BINMAP_WORDS];
  uint64_t binmap_words;     /* bit w: binmap[w] != 0, so a search skips
                                runs of empty bins in one step */
  bin_t bins[PH_NBINS];      /* last: a bin's header is written when it first
                                holds a chunk (bin_live), so the pages of
                                bins never used stay untouched */
} mstate_t;
#define PH_MS_LOCKED  1u     /* take the lock on every call */
#define PH_MS_INIT    4u
#define PH_MS_USER    8u     /* an mspace of the caller's (not an arena) */

/* Process-wide tunables (mallopt). */
typedef struct mparams_s {
  size_t mmap_threshold;
  size_t trim_threshold;
  size_t top_pad;
  int mmap_max;
  bool mmap_threshold_set;   /* set by mallopt: stops the dynamic threshold */
} mparams_t;
/* ---- the owner map (allocator/os/owner.c) ---------------------------------- */
/*
 * Two levels over the 47-bit user address space: a static root of 2^15
 * leaf pointers (bits 32..46; each with its slot's open bits in its low
 * bits), leaves of 2^16 granule entries (bits 16..31) mapped on first use
 * and never freed.  An entry is a seg_t * (heap
 * segment), or an mstate_t * | 1 (huge chunk owned by that heap), or 0.
 */
#define PH_OWNER_ROOT_BITS 15
#define PH_OWNER_LEAF_BITS 16
/* A root entry: its leaf's address (page aligned) | the open bits of the
 * slot's units (allocator/os/owner.c), in its low bits. */
#define PH_OWNER_OPEN_MASK ((uintptr_t)0x1ff)
#define PH_OWNER_HUGE_TAG  ((uintptr_t)1)  /* mstate_t * | 1: a huge chunk */
#define PH_OWNER_USER_TAG  ((uintptr_t)2)  /* seg_t * | 2: a segment of a caller's mspace */
#define PH_OWNER_TAGS      ((uintptr_t)3)  /* seg_t * alone: a segment of an arena */
/* The kind map: one byte per granule, the fast paths' ownership test (one
 * bounds check and one load).  It mirrors the owner map's entries, coarsely:
 * PH_KIND_NONE, or what kind of pinheap memory.  A flat reservation of
 * 2 GiB of address space (a byte per 64 KiB of 47-bit space); pages are
 * touched only where pinheap has memory.  If the OS refuses it, the limit
 * stays 0 and every pointer takes the owner map instead. */
#define PH_KIND_NONE  0u
#define PH_KIND_ARENA 1u     /* a segment of an arena without a tag of its own */
#define PH_KIND_HUGE  2u
#define PH_KIND_USER  3u     /* a segment of a caller's mspace */
#define PH_KIND_SHM   4u     /* the shared heap's region, but for this process's
                                own arenas' slices (shm.c) */
#define PH_KIND_SLAB  5u     /* a slab page (slab.c) inside an arena's segment:
                                its owner map entry stays the segment's */
/* A segment of arena i < PH_KIND_TAGS: the thread caches of that arena's
 * threads take its chunks on their fast path (one compare). */
#define PH_KIND_TAGS 126u
#define PH_KIND_ARENA_TAG(i) (0x80u | (unsigned)(i))
#define PH_KIND_NOTHING 0xfeu  /* the sentinel caches' tag: matches no granule */
#define PH_TC_MAX_CHUNK 2032u                             /* largest cached chunk */
#define PH_TC_MAX_REQUEST (PH_TC_MAX_CHUNK - PH_CHUNK_OVERHEAD)
#define PH_TC_NBINS ((PH_TC_MAX_CHUNK >> 4) + 1)         /* index: chunk size >> 4 */
/* A header the free fast path takes must match CINUSE under this mask: in
 * use, not mapped, size below 2048, nothing in the unused bits; PINUSE and
 * the check byte (checked next) may be anything. */
#define PH_TC_HEAD_MASK (~((size_t)0x7f0 | PH_PINUSE | PH_CHECK_MASK))

typedef struct tc_bin_s {
  void *head;          /* payloads, linked through their first word */
  uint32_t count;
  uint32_t limit;      /* 0 in the sentinels: every push goes slow; 0 in a
                          cache until its first push or refill sets it
                          (tcache.c: tc_bin_limit_init) */
} tc_bin_t;
_Static_assert(sizeof(tc_bin_t) == 16, "front_free_fast indexes bins by head & 0x7f0");

/* The chunk lists (bins, spare: 4 KiB) come first and everything from
 * `kind` on after them, so that a thread that never caches a chunk of 1 to
 * 2 KiB writes only that tail: the pool lays every cache out with `kind`
 * on a page boundary (tcache.c: tc_pool_get), and a fresh cache is not
 * zeroed (its pages are).  With the lists between `kind` and the slab
 * fields, every cache made 2-3 pages resident. */
typedef struct tcache_s {
  tc_bin_t bins[PH_TC_NBINS];
  tc_bin_t spare[PH_TC_NBINS];  /* per size, a full list set aside: given
                                   back as a bundle when the next one fills */
  unsigned kind;       /* the kind map byte of the arena's segments; the
                          sentinels' and untagged arenas' PH_KIND_NOTHING */
  size_t cookie;       /* the arena's cookie: the free fast path checks the
                          check byte of every header it takes */
  mstate_t *arena;     /* the heap this thread allocates from */
  mstate_t *rem_ms;    /* the heap of the chunks in rem[] */
  uint64_t rem_used[2];  /* which lists of rem[] hold chunks */
  tc_bin_t rem[PH_TC_NBINS];  /* chunks of another heap freed here, by size,
                                 on their way back to it as bundles */
  size_t grown;        /* bytes the lists' limits were raised by, in all */
  unsigned trips;      /* refills and bundles given back, in all */
  uintptr_t tp;        /* the thread pointer of the thread it serves (its
                          pages' owner_tp); 0 in the sentinels */
  bool slab_on;        /* small blocks come from slab pages (not the shared heap) */
  size_t slab_max;     /* requests of 1 .. slab_max bytes go to the slab path:
                          PH_SLAB_MAX with slabs and in the sentinels (whose
                          slow path makes the cache), 0 without slabs, so
                          that the shared heap's small blocks take the
                          thread cache's lists at once */
  /* Slab pages (slab.c): the current page of each request size
   * (slab_cur[(n - 1) >> 4]: every slot of a class points at the class's
   * current page, so malloc needs no class lookup; a sentinel page that is
   * always empty when none); by size class, the pages with room and the
   * full ones (oldest first). */
  struct slab_page_s *slab_cur[PH_SLAB_NSLOT];
  struct slab_page_s *slab_avail[PH_SLAB_NCLASS];
  struct slab_page_s *slab_full[PH_SLAB_NCLASS];
  struct slab_page_s *slab_full_tail[PH_SLAB_NCLASS];
  /* Blocks of other threads' pages freed here, gathered by page (linked as
   * on the page's remote stack) and pushed there together: a batch per
   * size class (slab.c), its first block (NULL: none; its page is the
   * batch's), the offset in the page of its last, and its count. */
  void *rb_head[PH_SLAB_NCLASS];
  uint16_t rb_tail[PH_SLAB_NCLASS];
  uint8_t rb_count[PH_SLAB_NCLASS];
} tcache_t;

/* The header of a slab page, after its blocks (slab.c).  The
 * fields marked "owner" are read and written only by the owning thread;
 * owner, owner_tp and remote are read by every thread (relaxed atomics,
 * but for the free fast path's plain compare: front.h, front_peek); the
 * rest is set when the page is laid out, under its arena's lock, and stays
 * while the page is one. */
typedef struct slab_page_s {
  /* line 1: read by every thread that frees into the page, written rarely */
  uintptr_t secret;          /* mixed into every link */
  uint64_t mulc;             /* floor(2^64 / bsize) + 1: for an offset u from */
  uint64_t lim;              /* the first block, u * mulc (mod 2^64) < lim iff
                                u is the start of one of the page's blocks */
  uint32_t span;             /* bytes from the first block (the granule's
                                start) past the last */
  uint32_t bsize;            /* block size */
  struct tcache_s *owner;    /* the owning thread's cache; NULL: none */
  struct mstate_s *ms;
  uintptr_t owner_tp;        /* owner->tp (0: no owner): its frees take the
                                fast path, which compares this with the
                                thread pointer, and loads no cache */
  uint16_t cls;              /* size class: bsize / 16 - 1 */
  uint8_t pad_[6];
  /* line 2: the owner's */
  void *free;                /* free blocks, links stored ^ secret; the page
                                header itself ends the list */
  uint32_t over;             /* blocks in use (out of the local list and not
                                uncarved: handed out, or on the remote stack;
                                +1 while the page is its class's current one)
                                over `mark`: a free that brings it to 0 calls
                                slab_page_idle() */
  uint32_t mark;             /* 0, but for a full page: the count at which it
                                has room enough to go back to "avail" */
  uint8_t state;             /* SLAB_* (the arena lock's without owner) */
  uint8_t pad2_[7];
  char *bump;                /* the lowest carved block (carved down from first + span) */
  struct slab_page_s *next;  /* the owner's list, or the arena's cache or orphans */
  struct slab_page_s *prev;
  struct slab_page_s *all_next;   /* the arena's list of pages (its lock) */
  struct slab_page_s *all_prev;
  /* line 3: other threads' frees, a stack pushed with compare-and-swap;
   * not a pointer but a word: its count, a walk bit and its top block's
   * offset in the page (slab.c: remote_word), or SLAB_ORPHAN_TAG */
  void *remote;
  uint64_t magic;            /* secret ^ address: the checker's test */
} slab_page_t;
_Static_assert(sizeof(slab_page_t) <= PH_SLAB_HDR, "the slab page header fits");
_Static_assert(offsetof(slab_page_t, free) == 64 && offsetof(slab_page_t, remote) == 128 &&
                   PH_SLAB_HDR_OFF % 64 == 0,
               "the slab page header's three parts are cache lines of their own");

/* A range to give back to the OS once the heap lock is dropped. */
typedef struct release_s {
  void *addr;
  size_t len;
} release_t;

#endif /* PINHEAP_TYPES_H */
