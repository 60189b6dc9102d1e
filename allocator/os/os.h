/*
 * os.h -- the OS layer's contract (os.c) and the owner and kind maps
 * (owner.c), with the owner map's inline look-up.
 */
#ifndef PINHEAP_OS_H
#define PINHEAP_OS_H

#include "allocator/base/base.h"

/* ======================================================================= */
/*  os.c -- the ONLY caller of mmap/munmap/madvise/mremap                   */
/* ======================================================================= */
/*
 * Contract: sizes are > 0 and multiples of os_page_size(); addresses are
 * page aligned.  Mapping functions return NULL on ENOMEM; any other kernel
 * error is a bug and ends the process.  Writable memory is charged to the
 * commit limit when it is mapped or opened (no MAP_NORESERVE), so what the
 * kernel would not back is refused there, as glibc's malloc is refused;
 * inaccessible and read-only reservations cost no commit in any overcommit
 * mode (vm.overcommit_memory 0, 1 or 2).  Every release of address space or
 * of physical backing first calls the release listener with exactly the
 * range released, then the kernel.  None of these functions changes errno
 * and none takes a lock: callers drop their heap locks before a release.
 */
typedef void os_release_fn(void *addr, size_t len, void *ctx);

PH_HIDDEN size_t os_page_size(void);
/** Writable zeroed memory for pinheap's own bookkeeping (thread caches),
 *  charged like any memory: never released and not counted in the
 *  statistics.  NULL if the OS refuses. */
PH_HIDDEN void  *os_reserve_meta(size_t size);
/** A large table of pinheap's own metadata that any address may be looked
 *  up in (the owner map's leaves, the kind map): read-only and reading as
 *  zeros, no memory and no commit charge until os_open() opens a part of
 *  it for writing (that part is then charged; opening can fail under strict
 *  overcommit).  Never released, not counted in the statistics.  NULL if
 *  the OS refuses (then the caller does without). */
PH_HIDDEN void  *os_reserve_readonly(size_t size);
/** Fresh zeroed private anonymous memory of size bytes, aligned to align
 *  (a power of two multiple of the page size).
 *  hint, if not NULL, is where the caller would like the mapping (used to
 *  extend a heap segment in place); the result may be elsewhere. */
PH_HIDDEN void  *os_map_aligned(void *hint, size_t size, size_t align);
/** As os_map_aligned for size bytes, followed by reserve bytes of address
 *  space mapped inaccessible (no memory, no commit charge even under strict
 *  overcommit) until os_open() opens them. */
PH_HIDDEN void  *os_map_reserved(void *hint, size_t size, size_t reserve, size_t align);
/** Makes [addr, addr+len) of a reserve (os_map_reserved) or of a read-only
 *  table (os_reserve_readonly) readable and writable, charging it to the
 *  commit limit.  @return 0, or -1 if the OS refuses (ENOMEM: more than the
 *  machine can back, the commit limit or RLIMIT_DATA). */
PH_HIDDEN int    os_open(void *addr, size_t len);
/** Unmaps [addr, addr+len): listener first, then munmap. */
PH_HIDDEN void   os_release(void *addr, size_t len);
/** Drops the physical backing of [addr, addr+len) (MADV_DONTNEED; the range
 *  stays mapped and reads back as zeros): listener first. */
PH_HIDDEN void   os_decommit(void *addr, size_t len);
/** The shared heap (shm.c): drops the pages of [addr, addr+len), free space
 *  of the region (a MAP_SHARED tmpfs object), from the object itself
 *  (MADV_REMOVE; MADV_DONTNEED would leave them there): listener first.
 *  The range stays mapped, reads back as zeros, and is filled again on use,
 *  in every process that maps the region.  A kernel that refuses it is
 *  named once; the pages then stay.  remove false: only the listener hears
 *  it (another process gives those pages back once all have heard). */
PH_HIDDEN void   os_release_shared(void *addr, size_t len, bool remove);
/** Resizes the mapping at addr in place (never moves).  Shrinking releases
 *  the tail, listener first.  @return 0 on success, -1 if it cannot. */
PH_HIDDEN int    os_remap(void *addr, size_t oldlen, size_t newlen);
/** A moving mremap's destination: len bytes of address space aligned to
 *  align, charged but untouched (usually one mmap; trims are reported).
 *  @return it or NULL (the kernel would not back it). */
PH_HIDDEN void  *os_move_reserve(size_t len, size_t align);
/** Moves the mapping [addr, addr+oldlen) over the reservation to (of
 *  os_move_reserve), resized to newlen: its pages keep their frames,
 *  nothing is copied; the listener hears exactly the old range first.
 *  @return 0, or -1 (nothing moved, the reservation kept). */
PH_HIDDEN int    os_move_to(void *addr, size_t oldlen, size_t newlen, void *to);
/** Moves the pages of [addr, addr+len) over [to, to+len), an untouched part
 *  of another of pinheap's mappings that holds no block (listener told of
 *  the old range first; nothing faulted or copied).  @return 0 or -1
 *  (nothing moved). */
PH_HIDDEN int    os_move_into(void *addr, size_t len, void *to);
/** Whether at least want bytes of the pages of [addr, addr+len) (page
 *  aligned) are resident (mincore; stops counting once it knows).  True if
 *  the kernel will not say. */
PH_HIDDEN bool   os_resident_at_least(const void *addr, size_t len, size_t want);
/** Grows the mapping at addr, contents not kept, to newlen bytes aligned
 *  to align, keeping its pages: where they are, the missing newlen - oldlen
 *  bytes (a multiple of align) mapped right after it, else right before it
 *  (the base then moves down by them: the result is addr - (newlen -
 *  oldlen)); else moved into a fresh reservation (listener told of the old
 *  range first).  Works on a range of several kernel mappings.  @return
 *  the new base or NULL (unchanged). */
PH_HIDDEN void *os_grow_move(void *addr, size_t oldlen, size_t newlen, size_t align);
/** Gives back a reservation no mapping was moved over (reported). */
PH_HIDDEN void   os_move_cancel(void *to, size_t len);
/** The shared heap's region (shm_start.c, shm_fork.c): mmap, munmap and
 *  a moving mremap (MREMAP_MAYMOVE | MREMAP_FIXED, same size) with raw
 *  system calls, and madvise(MADV_POPULATE_WRITE) (refused before Linux
 *  5.14: the pages then come by faults).  NEVER reported to the release or
 *  map listener: see os.c, "the shared heap's region", for why each use
 *  holds no block handed out.  os_region_map returns MAP_FAILED on error
 *  (errno set); os_region_move whether the mapping landed at to. */
PH_HIDDEN void  *os_region_map(void *addr, size_t len, int prot, int flags, int fd);
PH_HIDDEN void   os_region_unmap(void *addr, size_t len);
PH_HIDDEN bool   os_region_move(void *from, size_t len, void *to);
PH_HIDDEN void   os_region_populate(void *addr, size_t len);
/** The one release listener slot (NULL to clear).  The hooks layer fans it
 *  out to every registered listener. */
PH_HIDDEN void   os_set_release_listener(os_release_fn *fn, void *ctx);
/** The one map listener slot (NULL to clear): told of every new mapping
 *  (os_map_aligned, os_map_reserved -- reserve included -- and the part
 *  os_remap adds) after it is made, never of the metadata reservations.
 *  The allocator maps outside its heap locks, so the listener may
 *  allocate. */
PH_HIDDEN void   os_set_map_listener(os_release_fn *fn, void *ctx);

/** How the OS layer enters the kernel for its releases.  The default is
 *  the raw system call; the hooks layer routes them through libc's entry
 *  point where another code patcher hooked it (hooks/peers.c), so that its
 *  hook hears pinheap's releases too.  Each has the system call's
 *  signature and result. */
typedef struct os_kernel_s {
  int (*munmap)(void *addr, size_t len);
  int (*madvise)(void *addr, size_t len, int advice);
  void *(*mremap)(void *addr, size_t oldlen, size_t newlen, int flags, void *new_addr);
} os_kernel_t;
/** Sets the kernel table (NULL: the raw system calls).  k must stay valid.
 *  Under ThreadSanitizer munmap keeps going through TSan's handler. */
PH_HIDDEN void   os_set_kernel(const os_kernel_t *k);

/** One line of /proc/self/maps. */
typedef struct os_map_s {
  uintptr_t lo, hi;         /* [lo, hi) */
  uint64_t offset;          /* the file offset of lo */
  unsigned dev_major, dev_minor;
  uint64_t inode;           /* 0: not a file */
  const char *path;         /* path_len bytes, not NUL-terminated (cut in a */
  size_t path_len;          /* line longer than 4 KiB) */
  const char *line;         /* the whole line, line_len bytes, the same way */
  size_t line_len;
} os_map_t;
/** Calls fn for each line of /proc/self/maps, read in 4 KiB on the stack
 *  with raw system calls (nothing allocated: safe inside the first malloc),
 *  until fn returns nonzero.  fn may map and unmap (the kernel resumes the
 *  read at the address after the last line given).  errno kept.  The one
 *  reader of the file.  @return -1 if the file cannot be opened, else 0. */
PH_HIDDEN int    os_maps_walk(int (*fn)(const os_map_t *m, void *ctx), void *ctx);

typedef struct os_stats_s {
  size_t mapped;          /* bytes currently mapped by pinheap */
  size_t peak_mapped;     /* high-water mark of mapped */
  size_t map_calls;       /* mmap + successful mremap growth */
  size_t release_calls;   /* munmap + mremap shrink */
  size_t decommit_calls;  /* madvise */
  size_t released_bytes;  /* total bytes given back (unmap + decommit) */
  size_t region_calls;    /* the shared region's own mappings (os_region_*) */
} os_stats_t;
PH_HIDDEN void os_stats_get(os_stats_t *out_p);

/* ======================================================================= */
/*  owner.c -- the owner map and the kind map                               */
/* ======================================================================= */
/*
 * The owner map: two levels over the 47-bit user address space, a static
 * root of 2^15 leaf pointers (bits 32..46; the low bits of an entry are
 * owner.c's open bits), leaves of 2^16 granule entries
 * (bits 16..31) mapped on first use and never freed (types.h: PH_OWNER_*).
 * The kind map: a byte per granule (types.h: PH_KIND_*).  Both are read
 * inline (chunk.h: owner_map_get; front.h reads the kind map).
 */
extern PH_HIDDEN _Atomic uintptr_t owner_map_root[(size_t)1 << PH_OWNER_ROOT_BITS];
extern PH_HIDDEN uint8_t *owner_kind;
extern PH_HIDDEN uintptr_t owner_kind_limit;
/** Fork: hold / release the owner map's creation lock. */
PH_HIDDEN void owner_fork_lock(void);
PH_HIDDEN void owner_fork_unlock(void);
/** Sets the entry of every granule of [base, base+len) (both granule
 *  aligned) to value, and its kind map byte to kind.  @return false if a
 *  leaf could not be mapped. */
PH_HIDDEN bool owner_map_set(const void *base, size_t len, uintptr_t value, unsigned kind);
/** The shared heap: makes leaves (each (1 << PH_OWNER_LEAF_BITS) entries,
 *  writable, zeroed, in the region) the owner map's leaves of every root slot
 *  of [base, base+span) (whole slots, none with a leaf yet), and sets the
 *  kind map byte of [base, base+len) to kind.  @return false if a slot
 *  already has a leaf or the kind map could not be opened. */
PH_HIDDEN bool owner_map_adopt(const void *base, size_t span, uintptr_t *leaves, size_t len,
                               unsigned kind);

/* The leaf of root slot i (NULL: none yet): the entry without its open
 * bits. */
PH_INLINE uintptr_t *owner_root_leaf(size_t i)
{
  return (uintptr_t *)(atomic_load_explicit(&owner_map_root[i], memory_order_acquire) &
                       ~PH_OWNER_OPEN_MASK);
}

/* The owner map's look-up, inline: every free makes it. */
PH_INLINE uintptr_t owner_map_get(const void *p)
{
  uintptr_t a = (uintptr_t)p;
  uintptr_t *leaf;

  if (ph_unlikely(a >> (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS + PH_OWNER_ROOT_BITS)))
    return 0;
  leaf = owner_root_leaf(a >> (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS));
  if (ph_unlikely(leaf == NULL))
    return 0;
  return __atomic_load_n(&leaf[(a >> PH_GRANULE_SHIFT) & (((uintptr_t)1 << PH_OWNER_LEAF_BITS) - 1)],
                         __ATOMIC_RELAXED);
}
PH_INLINE seg_t *owner_seg(uintptr_t o) { return (seg_t *)(o & ~PH_OWNER_TAGS); }

#endif
