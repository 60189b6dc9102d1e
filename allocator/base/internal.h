/*
 * internal.h -- attribute macros and the archive's cross-file prototypes
 * (and shared variables), grouped by the file that owns them, one banner
 * section per file.  Every .c file of the archive includes this header
 * first, directly or through chunk.h (it includes rename.h, which shifts
 * every global name, and types.h, the types and constants).
 */
#ifndef PINHEAP_INTERNAL_H
#define PINHEAP_INTERNAL_H

#include "rename.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ---- attributes, defined once ------------------------------------------- */
#define ph_likely(x)     __builtin_expect(!!(x), 1)
#define ph_unlikely(x)   __builtin_expect(!!(x), 0)
#define PH_INLINE        static inline __attribute__((always_inline))
#define PH_NOINLINE      __attribute__((noinline))
#define PH_COLD          __attribute__((cold, noinline))
/* PH_HOT: the functions a small program runs (malloc, free and their
 * slow paths, the thread cache, the arena, the OS layer, the event entry
 * points), gathered in .text.hot (GNU ld and gold place it next to
 * .text.startup, allocator/base/startup.h's once-only code, before the rest of
 * .text).  The kernel maps a library's text 64 KiB at a time around each
 * page a process executes (fault-around): spread among the 140 kB of text,
 * these ~58 kB made all of it resident; gathered, the code a small program
 * never runs (mspaces, statistics, the shared heap, realloc, checks'
 * reports) fills windows of its own that stay out of its resident set (a
 * malloc/free loop under the preload shim: 51 text pages resident -> 16;
 * test/packaging/text_layout.sh).  The set was measured with callgrind on the
 * benchmark's fixed, falseshare, prodcons and larson workloads at 1 and 2
 * threads.  The mark moves code; it changes no behaviour. */
#define PH_HOT           __attribute__((section(".text.hot.pinheap")))
#define PH_NORETURN      __attribute__((noreturn))
#define PH_EXPORT        __attribute__((visibility("default")))
#define PH_HIDDEN        __attribute__((visibility("hidden")))

#ifndef PINHEAP_DEBUG
#define PINHEAP_DEBUG 1
#endif
/* PINHEAP_DEBUG (CMake cache variable of the same name):
 *   1  the default: every check that catches misuse (headers, check bytes,
 *      double frees, foreign and interior pointers) -- these are never off;
 *   2  also the full heap checker (check.c) after every public call, which
 *      ends the process naming the call after which the heap went wrong:
 *      O(heap) per call, for tests and for hunting a corruption. */
#if PINHEAP_DEBUG != 1 && PINHEAP_DEBUG != 2
#error "PINHEAP_DEBUG must be 1 or 2"
#endif

#include "types.h"

#include "raw_syscall.h"   /* ph_syscall: pinheap's own system calls */

/* Field n (numbered from 1, as proc(5) does; n >= 3) of a /proc/<pid>/stat
 * line read into the NUL-terminated buf: counted from the last ')', which
 * ends field 2 (the command's name may hold spaces and parentheses).
 * @return its first character, or NULL if the line has no such field. */
PH_INLINE const char *ph_stat_field(const char *buf, int n)
{
  const char *p = NULL;
  for (const char *q = buf; *q != '\0'; q++)
    if (*q == ')')
      p = q + 1;
  for (int field = 2; p != NULL && field < n; p++) {
    if (*p == '\0')
      return NULL;
    field += *p == ' ';
  }
  return p;
}

/* The decimal number at p (NULL: 0). */
PH_INLINE uint64_t ph_stat_number(const char *p)
{
  uint64_t v = 0;
  for (; p != NULL && *p >= '0' && *p <= '9'; p++)
    v = v * 10 + (uint64_t)(*p - '0');
  return v;
}

/* The clock clk (CLOCK_MONOTONIC, or CLOCK_MONOTONIC_COARSE: cheaper, a
 * tick's resolution) in nanoseconds.  The one clock of the tree (segment.c's
 * now_ms, shm.c's waits, hooks/install.c's timing); the vDSO's, nothing
 * allocated: safe inside the first malloc. */
PH_INLINE uint64_t ph_clock_ns(clockid_t clk)
{
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* reallocarray on top of a realloc: NULL with errno ENOMEM when
 * nmemb * size overflows, as glibc's; else realloc_fn(p, nmemb * size).
 * The one reallocarray of the tree (allocator/api/malloc.c, hooks/dispatch.c). */
PH_INLINE void *ph_reallocarray(void *p, size_t nmemb, size_t size,
                                void *(*realloc_fn)(void *, size_t))
{
  size_t total;
  if (__builtin_mul_overflow(nmemb, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc_fn(p, total);
}

/* ======================================================================= */
/*  error.c -- the only output path; never allocates                        */
/* ======================================================================= */

/* The logger: ph_log(level, fmt, ...) writes "pinheap: <level>: <text>\n"
 * when level <= the PINHEAP_LOG_LEVEL parameter (warn until the parameters
 * are parsed: the logger never calls into them; fatal lines are always
 * written), as ONE write(2) of a line
 * formatted on the stack: no allocation, no stdio, no locale, no locks,
 * errno preserved.  Safe inside malloc, inside event handlers and before
 * the decision.  fmt is a printf subset: %s %d %u %x %p %c %% with the
 * length modifiers z, l, ll, the flags '-' and '0', a width (or '*') and a
 * precision for %s (or '.*'); %s of NULL prints "(null)"; an unknown
 * conversion is copied literally and reads no argument.  A line longer
 * than PH_LOG_LINE_MAX bytes is cut -- after the last whole word if one
 * ends in its last 64 bytes -- and ends in "...\n". */
typedef enum ph_log_level_e {
  PH_LOG_FATAL,
  PH_LOG_ERROR,
  PH_LOG_WARN,
  PH_LOG_INFO,
  PH_LOG_DEBUG,
  PH_LOG_LEVEL_COUNT
} ph_log_level_t;

#define PH_LOG_LINE_MAX 1024

PH_HIDDEN void ph_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** ph_log without the level name ("pinheap: <text>\n"): only for the
 *  misuse report's documented form -- ph_fatal's line and the heap
 *  checker's lines before it, which README and the misuse tests pin. */
PH_HIDDEN void ph_log_plain(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** ph_log with a va_list, for wrappers. */
PH_HIDDEN void ph_log_v(int level, const char *fmt, va_list ap);
/** The level in force: the parameter once the process's parameters are
 *  parsed (params_get() sets it), PH_LOG_WARN before. */
PH_HIDDEN int ph_log_level(void);
/** Sets the level (params_get(); tests).  Out-of-range values are
 *  clamped to fatal .. debug. */
PH_HIDDEN void ph_log_set_level(int level);
/** "fatal", "error", "warn", "info", "debug" (the parameter's spellings). */
PH_HIDDEN const char *ph_log_level_name(int level);
/** Formats one line ("pinheap: " [+ "<level>: " if with_name] + text +
 *  "\n") into buf[0 .. size), cut with "...\n" if it does not fit; never
 *  writes past buf + size and does not NUL-terminate.  @return its length
 *  (0 if size < 5). */
PH_HIDDEN size_t ph_log_format(char *buf, size_t size, int level, int with_name, const char *fmt,
                               va_list ap);
/** For tests only: where lines go (stderr by default).  @return the old fd. */
PH_HIDDEN int ph_log_set_fd(int fd);

/** Ends the process: writes "pinheap: <func>(): <what> <ptr>\n" (the
 *  misuse report's documented form, through the logger's line writer),
 *  then abort().  ptr may be NULL (then not printed). */
PH_HIDDEN PH_COLD PH_NORETURN void ph_fatal(const char *func, const char *what, const void *ptr);
/** ph_log(PH_LOG_WARN, ...) of the pieces (a NULL-terminated list of
 *  strings, joined, never read as a format): "pinheap: warning: ...\n". */
PH_HIDDEN PH_COLD void ph_warn(const char *first, ...);
/** Writes a NUL-terminated string to fd, retrying short writes and EINTR
 *  (raw output: malloc_stats; messages go through ph_log). */
PH_HIDDEN void ph_write_str(int fd, const char *s);
/** Formats v as "0x..." / decimal into buf (at least 24 bytes); returns buf. */
PH_HIDDEN char *ph_fmt_hex(char *buf, uintptr_t v);
PH_HIDDEN char *ph_fmt_dec(char *buf, uint64_t v);

/* The one message builder, for text made in pieces (no allocation, no
 * stdio): ph_str_add appends s (NULL: "(null)", as ph_log's %s) to the
 * NUL-terminated text in dst[0 .. cap), cut to fit, as snprintf would;
 * ph_str_dec and ph_str_hex append a number as ph_fmt_dec and ph_fmt_hex
 * spell it.  A line goes out with ph_log(level, "%s", dst). */
PH_INLINE void ph_str_add(char *dst, size_t cap, const char *s)
{
  if (s == NULL)
    s = "(null)";
  size_t have = strlen(dst), len = strlen(s);
  if (len > cap - 1 - have)
    len = cap - 1 - have;
  memcpy(dst + have, s, len);
  dst[have + len] = '\0';
}
PH_INLINE void ph_str_dec(char *dst, size_t cap, uint64_t v)
{
  char num[24];
  ph_str_add(dst, cap, ph_fmt_dec(num, v));
}
PH_INLINE void ph_str_hex(char *dst, size_t cap, uintptr_t v)
{
  char num[24];
  ph_str_add(dst, cap, ph_fmt_hex(num, v));
}

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
 * root of 2^15 leaf pointers (bits 32..46), leaves of 2^16 granule entries
 * (bits 16..31) mapped on first use and never freed (types.h: PH_OWNER_*).
 * The kind map: a byte per granule (types.h: PH_KIND_*).  Both are read
 * inline (chunk.h: owner_map_get; front.h reads the kind map).
 */
extern PH_HIDDEN _Atomic(uintptr_t *) owner_map_root[(size_t)1 << PH_OWNER_ROOT_BITS];
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

/* ======================================================================= */
/*  source.c -- the memory sources (types.h: mem_source_t)                  */
/* ======================================================================= */

/* Fresh mappings of the OS (os.c): arenas, the default heap, create_mspace. */
extern PH_HIDDEN const mem_source_t mem_source_os;
/* The caller's region (create_mspace_with_base): never grown, never given
 * back, not in the owner map. */
extern PH_HIDDEN const mem_source_t mem_source_region;
/* The sources' operations, a row per source (types.h: mem_source_ops_t),
 * indexed by mem_source_t.ops. */
extern PH_HIDDEN mem_source_ops_t mem_source_ops[MEM_SOURCE_COUNT];
/** Puts a source's row of operations (the shared heap's, at its start,
 *  before any heap of it exists). */
PH_HIDDEN void source_ops_set(unsigned id, const mem_source_ops_t *ops);

/* The operations of ms's source. */
PH_INLINE const mem_source_ops_t *ms_source_ops(const mstate_t *ms)
{
  return &mem_source_ops[ms->source->ops];
}
/* The shared region's operations, for what is the process's rather than a
 * heap's: releases to hear, new arenas. */
PH_INLINE const mem_source_ops_t *source_shared_ops(void)
{
  return &mem_source_ops[MEM_SOURCE_SHARED];
}
/* Where a chunk of the shared heap posted for release keeps the entry's
 * token (post): the first word past its header and bin links.  A later
 * post of a chunk at the same place overwrites it, so a mark on the chunk
 * is the entry's only while the token is there. */
PH_INLINE uint64_t *source_token_at(void *chunk) { return (uint64_t *)((chunk_t *)chunk + 1); }

/* ======================================================================= */
/*  shm.c -- the shared-memory heap: one region, one address, every process  */
/* ======================================================================= */
/*
 * Every process of a job maps one shared object at the same address; each
 * takes slices of it (an atomic cursor in its header) for its arenas, whose
 * heap state lives in the region too, so a pointer, a segment's seg_t and
 * an arena's remote stack mean the same in every process.  The owner map's
 * leaves for the region live in the region (shared); the kind map stays
 * private (PH_KIND_SHM but for this process's own slices).
 */
/** heap_default(), once, under its lock: starts the shared heap when its
 *  size is given.  @return this process's arena 0 in the region, or NULL
 *  (the mode is off, or it failed and the fallback is on: the private heap
 *  then).  Never allocates.  A failure without the fallback ends the
 *  process with one message naming the cause. */
PH_HIDDEN mstate_t *shm_start(void);
/** Is the shared heap on in this process? */
PH_HIDDEN bool shm_on(void);
/** Is mem in a part of the region another process holds?  Its heap is
 *  that process's: its lock is never taken here (heap.c, foreign_hand_back). */
PH_HIDDEN bool shm_foreign(const void *mem);
/** A new arena of this process in the region (kind: its kind map byte), or
 *  NULL when the region is full. */
PH_HIDDEN mstate_t *shm_heap_create(unsigned kind);
/** A slice of at least len bytes (a multiple of PH_GRANULE) for a heap of
 *  this process, or NULL when the region is full (then the fallback, if on,
 *  starts: see shm_fallback_active).  Lock-free. */
PH_HIDDEN void *shm_slice_take(size_t len);
/** Reserves in the tmpfs the pages of [p, p + len) in ms's part of the
 *  region that a give-back removed (see ms_carve_backed).  Locked.
 *  @return false when the tmpfs has no room (then NULL, or the fallback). */
PH_HIDDEN bool shm_back(mstate_t *ms, const void *p, size_t len);
/** The whole pages [addr, addr + len) of ms's free chunk leave the object
 *  (os_release_shared: the listener first), no longer reserved. */
PH_HIDDEN void shm_remove(mstate_t *ms, void *addr, size_t len);
/** Has the region filled up with the fallback on?  Then large requests get
 *  private huge chunks and small ones a private heap's chunks. */
PH_HIDDEN bool shm_fallback_active(void);
/** The private heap of the fallback (created on first use), or NULL. */
PH_HIDDEN mstate_t *shm_fallback_heap(void);
/** Fork, in the child: the child gets a private copy of the region at the
 *  same address (its blocks stay valid; the others' heap is untouched). */
PH_HIDDEN void shm_fork_child(void);
/** Fork, in the parent with every allocator lock held: the snapshot of the
 *  region the child gets (shm_fork_child); and after the fork, its end. */
PH_HIDDEN void shm_fork_prepare(void);
PH_HIDDEN void shm_fork_parent(void);
/** At exit (init.c's destructor, after this thread's cache gave other
 *  processes their blocks back): the process leaves the region; the last
 *  one unlinks it. */
PH_HIDDEN void shm_leave(void);
/* Releases every process hears (shm.c: "releases every process hears"). */
enum shm_post_e {   /* the source's post's results (types.h: enum source_post_e) */
  SHM_POST_NOW = SOURCE_POST_NOW,
  SHM_POST_LATER = SOURCE_POST_LATER,
  SHM_POST_FULL = SOURCE_POST_FULL
};
/** Where a chunk posted to the ring keeps its entry's token (source.c's
 *  section: source_token_at, the heap's name for it). */
PH_INLINE uint64_t *shm_rel_token_at(void *chunk) { return source_token_at(chunk); }
/** The pages [addr, addr+len) of the borrowed free chunk of this process's
 *  shared heap ms are to go back: posts them for every other process to
 *  hear first (and writes the entry's token in the chunk).  Lock-free; call
 *  it with ms unlocked.  @return enum shm_post_e. */
PH_HIDDEN int shm_rel_post(mstate_t *ms, void *chunk, void *addr, size_t len);
/** Is there a release to hear or one of this process's to settle?  A few
 *  relaxed loads. */
PH_HIDDEN bool shm_rel_due(void);
/** Calls this process's release listeners for every release other processes
 *  posted since the last time, then gives back the pages of its own that
 *  every live process has heard.  No heap lock may be held.  @return how
 *  many of its own still wait. */
PH_HIDDEN int shm_rel_poll(void);

/* ======================================================================= */
/*  lock.c -- the heap lock's slow paths                                    */
/* ======================================================================= */

/** The heap lock's slow paths: ph_lock() found it held (spins, then
 *  sleeps on a futex); ph_unlock() found a sleeper (wakes one). */
PH_HIDDEN void ph_lock_slow(ph_lock_t *l);
PH_HIDDEN void ph_lock_wake(ph_lock_t *l);

/* ======================================================================= */
/*  state.c -- tunables, keys, a heap's set-up, heaps made and unmade       */
/* ======================================================================= */

/* Process-wide tunables (mallopt).  Read without a lock everywhere and
 * written by mallopt and by the dynamic threshold: each field is read and
 * written whole, relaxed (chunk.h: mparams_get, mparams_set). */
extern PH_HIDDEN mparams_t mparams;
/* The key a waiting chunk holds in its second payload word (chunk.h:
 * chunk_mem_waiting). */
extern PH_HIDDEN uint64_t chunk_free_key;
/* The default heap once made (heap_default, init.c; NULL before): read
 * with heap_main_get() (chunk.h). */
extern PH_HIDDEN mstate_t *heap_main;
/** Sets chunk_free_key once, before any heap exists: random, odd. */
PH_HIDDEN void chunk_free_key_init(void);
/** Sets up the heap ms (zeroed up to its bins, a fresh cookie) over the
 *  memory source src with flags PH_MS_* and the kind map byte kind, and
 *  registers it (arena.c) if its source is in the owner map. */
PH_HIDDEN void ms_init(mstate_t *ms, const mem_source_t *src, unsigned flags, unsigned kind);
/** The private heap's arena 0 (a static heap), set up. */
PH_HIDDEN mstate_t *heap_main_private(void);
/** A new OS-backed heap: flags PH_MS_LOCKED and PH_MS_USER (a caller's
 *  mspace, kind PH_KIND_USER) or 0 (an arena, kind PH_KIND_ARENA or
 *  PH_KIND_ARENA_TAG(i)).  NULL with errno ENOMEM. */
PH_HIDDEN mstate_t *ms_create(size_t capacity, unsigned flags, unsigned kind);
/** Unmaps an OS-backed heap whole.  @return bytes released. */
PH_HIDDEN size_t ms_destroy(mstate_t *ms);

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
/*  arena.c -- arenas, the heap registry, the arenas' fork lock             */
/* ======================================================================= */

/** Adds ms to / removes ms from the registry of every heap (fork). */
PH_HIDDEN void ms_register(mstate_t *ms);
PH_HIDDEN void ms_unregister(mstate_t *ms);
/** Is any heap registered yet? */
PH_HIDDEN bool ms_any(void);
/** Fork: take every heap lock (registry order) / release them all. */
PH_HIDDEN void ms_lock_all(void);
PH_HIDDEN void ms_unlock_all(void);
/** front_init: arena 0 (the default heap, given) and the arena cap
 *  (M_ARENA_MAX, the parameter, or four per CPU). */
PH_HIDDEN void arena_init(mstate_t *arena0);
/** Fork: the arena table's lock (malloc_prefork_lock's first). */
PH_HIDDEN void arena_fork_lock(void);
PH_HIDDEN void arena_fork_unlock(void);
/** mallopt(M_ARENA_MAX, value).  @return 1, or 0 if value is out of range. */
PH_HIDDEN int arena_max_set(int value);
/** The arena of a thread that allocates for the first time. */
PH_HIDDEN mstate_t *arena_pick(void);
/** Calls fn on every arena of the malloc family (never on an mspace).
 *  Arenas are never destroyed, so the walk needs no lock; fn may take the
 *  arena's lock. */
PH_HIDDEN void arena_for_each(void (*fn)(mstate_t *ms, void *arg), void *arg);

/* ======================================================================= */
/*  bins.c -- the bins of free chunks and the designated victim             */
/* ======================================================================= */

/** First non-empty bin at or above i, or PH_NBINS. */
PH_HIDDEN unsigned binmap_next(const mstate_t *ms, unsigned i);
/** Bins the free chunk c of size bytes (large bins stay sorted). */
PH_HIDDEN void bin_insert(mstate_t *ms, chunk_t *c, size_t size);
/** Makes the free chunk c the designated victim; the old one is binned. */
PH_HIDDEN void dv_replace(mstate_t *ms, chunk_t *c);
/** Takes nb bytes from the designated victim dv (dsize >= nb). */
PH_HIDDEN chunk_t *dv_take(mstate_t *ms, chunk_t *dv, size_t dsize, size_t nb);
/** Puts the designated victim into its bin (before a walk of the bins). */
PH_HIDDEN void dv_flush(mstate_t *ms);

/* ======================================================================= */
/*  segment.c -- segments: grow, extend in place, trim the top, decay, idle */
/* ======================================================================= */

/** Milliseconds of CLOCK_MONOTONIC_COARSE, plus one (never 0). */
PH_HIDDEN uint64_t now_ms(void);
/** Lays a segment out at base: header, room, one free chunk, fence. */
PH_HIDDEN void seg_format(mstate_t *ms, char *base, size_t size, size_t chunk_off, size_t flags);
/** Grows the top in place from its segment's reserve to hold want bytes.
 *  Locked; never drops the lock. */
PH_HIDDEN bool ms_grow_in_place(mstate_t *ms, size_t want);
/** Adds at least nb bytes of top.  Locked; the lock is dropped around the
 *  mmap. */
PH_HIDDEN bool ms_grow(mstate_t *ms, size_t nb);
/** Gives the top's tail beyond pad back (after unlocking: *rel).  The
 *  shared heap gives its pages back in place, the lock dropped meanwhile
 *  (*rel stays empty; so for the two below). */
PH_HIDDEN void ms_trim_top(mstate_t *ms, size_t pad, release_t *rel);
/** The top grew past the trim threshold: trim now or after the decay. */
PH_HIDDEN void ms_trim_decay(mstate_t *ms, release_t *rel);
/** Takes the wholly free segment *pp out of the heap (release *rel). */
PH_HIDDEN void seg_take_out(mstate_t *ms, seg_t **pp, release_t *rel);
/** Takes idle segments out (all if force), up to max, into out[]. */
PH_HIDDEN unsigned ms_idle_collect(mstate_t *ms, release_t *out, unsigned max, bool force);
PH_HIDDEN bool ms_give_back_idle(mstate_t *ms, size_t pad, release_t *rel);
/** The shared heap: the pages [addr, addr+len) of the free chunk of ms that
 *  this process posted (token: the entry's) go now, if the chunk stayed free
 *  and untouched.  Takes the lock.  @return 1 gone, 0 dropped, -1 not yet. */
PH_HIDDEN int ms_release_settle(mstate_t *ms, void *chunk, void *addr, size_t len, uint64_t token);

/* ======================================================================= */
/*  huge.c -- huge chunks and the mapping cache                             */
/* ======================================================================= */

/* Live huge chunks of all heaps (against M_MMAP_MAX). */
extern PH_HIDDEN atomic_size_t huge_total;
/** Fork: hold / release the mapping cache's lock. */
PH_HIDDEN void huge_cache_fork_lock(void);
PH_HIDDEN void huge_cache_fork_unlock(void);
/** The cache's decay: decommits entries unused for PH_TRIM_DECAY_MS and
 *  releases decommitted ones kept for long (every entry released if all).
 *  @return whether anything was released or decommitted. */
PH_HIDDEN bool huge_cache_decay(bool all);
/** (os.c) Grows the mapping at addr, contents not kept, to newlen bytes
 *  aligned to align, keeping its pages: in place, else moved (listener told
 *  of the old range first).  @return the new address or NULL (unchanged). */
PH_HIDDEN void *os_grow_move(void *addr, size_t oldlen, size_t newlen, size_t align);
/** A resident cached mapping of exactly len bytes (a multiple of
 *  PH_GRANULE) for a heap's new segment, its pages kept and its contents
 *  not cleared (the tail of a bigger one stays cached), or NULL. */
PH_HIDDEN char *huge_cache_take_resident(size_t len);
/** A huge chunk of nb bytes aligned to align for ms, or NULL. */
PH_HIDDEN void *huge_alloc(mstate_t *ms, size_t nb, size_t align);
/** Validates the huge chunk c of ms (locked); returns its mapping header. */
PH_HIDDEN huge_t *huge_check(mstate_t *ms, chunk_t *c, const char *fn);
/** Frees the huge chunk behind mem, of ms. */
PH_HIDDEN void huge_free(mstate_t *ms, void *mem, const char *fn);
/** realloc of the huge chunk mem of ms to chunk size nb: resized with
 *  mremap, in place or moved (pages kept, nothing copied).  @return mem or
 *  its new address; NULL (errno untouched) when it is to move by copy: into
 *  the heap (shrunk below half the threshold), the shared heap, or a move
 *  the OS refused.  *old_usable_p: its usable bytes before. */
PH_HIDDEN void *huge_realloc(mstate_t *ms, void *mem, size_t nb, const char *fn,
                             size_t *old_usable_p);
/** Copies n bytes of the huge chunk src to dst, decommitting src behind. */
PH_HIDDEN void huge_move_copy(void *dst, const void *src, size_t n);

/* ======================================================================= */
/*  heap.c -- the heap core: alloc, free, realloc, memalign, calloc         */
/* ======================================================================= */

/** Takes a chunk of nb bytes from the bins or the top, growing the heap
 *  if needed.  Locked.  NULL when out of memory. */
PH_HIDDEN chunk_t *ms_alloc_chunk(mstate_t *ms, size_t nb);
PH_HIDDEN void *ms_malloc(mstate_t *ms, size_t n);
PH_HIDDEN void *ms_calloc(mstate_t *ms, size_t n, size_t elem);
PH_HIDDEN void *ms_memalign(mstate_t *ms, size_t align, size_t n);
/** want: the heap mem must belong to, or NULL for any heap.  mem is a
 *  chunk's, never a slab block's (the malloc family's realloc takes those,
 *  and a NULL mem, itself); a NULL mem needs a heap (want). */
PH_HIDDEN void *ms_realloc(mstate_t *want, void *mem, size_t n, const char *fn);
/** Frees the in-use chunk c (validated) of seg: coalesces, bins or merges
 *  into the top.  Locked.  A range to release after unlocking: *rel. */
PH_HIDDEN void ms_free_chunk(mstate_t *ms, seg_t *seg, chunk_t *c, size_t size, release_t *rel,
                             const char *fn);
/** Frees mem (NULL: nothing), a chunk of the heap want (NULL: any heap). */
PH_HIDDEN void ms_free_mem(mstate_t *want, void *mem, const char *fn);
/** Frees mem, a chunk (not a slab block) whose owner map entry o
 *  (non-zero) was already read. */
PH_HIDDEN void ms_free_owned(uintptr_t o, void *mem, const char *fn);
/** A chunk of nb bytes whose payload is aligned to align (> 16), ms
 *  locked (dropped around a grow).  A range to release after unlocking:
 *  *rel.  NULL when out of memory. */
PH_HIDDEN chunk_t *ms_alloc_aligned_locked(mstate_t *ms, size_t nb, size_t align, release_t *rel);
/** Frees one waiting chunk of a deferred list, ms locked. */
PH_HIDDEN void ms_free_locked(mstate_t *ms, void *mem, const char *fn);
/** Usable bytes of mem, a chunk (not a slab block); lenient: accept
 *  pointers outside the owner map. */
PH_HIDDEN size_t mem_usable(const void *mem, const char *fn, bool lenient);

/* ======================================================================= */
/*  defer.c -- deferred bundles, the remote stack, consolidation            */
/* ======================================================================= */

/** Takes the bundles of ms->remote into the deferred lists.  Locked. */
PH_HIDDEN void ms_drain_remote(mstate_t *ms);
/** Coalesces every deferred chunk into the heap.  Locked.  @return
 *  whether there was any. */
PH_HIDDEN bool ms_fast_consolidate(mstate_t *ms);
/** A list of up to k (>= 1) chunks of size nb (nb <= PH_FAST_MAX_CHUNK),
 *  linked through their payload: deferred ones (every header checked), or
 *  new ones.  @return how many (0: out of memory). */
PH_HIDDEN unsigned ms_alloc_batch(mstate_t *ms, size_t nb, unsigned k, void **list_p);
/** Takes back n in-use chunks of ms, all of size `size` (a list linked
 *  through their payload, from a thread cache of ms), as one bundle. */
PH_HIDDEN void ms_defer_bundle(mstate_t *ms, void *list, unsigned n, size_t size);
/** Hands n in-use chunks of ms, all of one size (a list linked through
 *  their payload), to ms as a bundle, without its lock. */
PH_HIDDEN void ms_remote_push(mstate_t *ms, void *list, unsigned n);

/* ======================================================================= */
/*  tcache.c -- thread caches (the slow paths of front.h)                   */
/* ======================================================================= */

extern PH_HIDDEN __thread tcache_t *tcache_tls __attribute__((tls_model("initial-exec")));
PH_HIDDEN void *front_malloc_slow(size_t n);
/** Bin b of tc is full: sets its list aside, then pushes mem. */
PH_HIDDEN void front_free_full(tcache_t *tc, tc_bin_t *b, void *mem);
/** o: the owner map entry of mem (0 if none). */
PH_HIDDEN void front_free_slow(void *mem, uintptr_t o, const char *fn);
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
 *  n's class, or takes another; the chunk path when slabs are off. */
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

/* The header of the slab page mem lies in. */
PH_INLINE slab_page_t *slab_page_at(const void *mem)
{
  uintptr_t m = (uintptr_t)mem;
  return (slab_page_t *)((m & ~(PH_GRANULE - 1)) + PH_SLAB_HDR_OFF -
                         ((m >> (PH_GRANULE_SHIFT - 6)) & PH_SLAB_COLOR_MASK));
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

/* ======================================================================= */
/*  stats.c -- trim and statistics                                          */
/* ======================================================================= */

/** Gives back the top's tail, idle segments and the pages inside free
 *  chunks.  @return 1 if anything was released. */
PH_HIDDEN int ms_trim(mstate_t *ms, size_t pad);
PH_HIDDEN struct mallinfo2 ms_info(mstate_t *ms);

/* ======================================================================= */
/*  check.c -- the heap checker                                             */
/* ======================================================================= */

/** Validates every invariant of ms; ms must be locked by the caller.
 *  @return the number of problems (each written to stderr). */
PH_HIDDEN int mstate_check(mstate_t *ms);
/** Locks ms, checks it, adds the problems to the int *problems_p (an
 *  arena_for_each callback). */
PH_HIDDEN void mstate_check_add(mstate_t *ms, void *problems_p);
/** PINHEAP_DEBUG >= 2: the full checker after a public call fn, on the
 *  mspace ms, or on every arena and this thread's cache if ms is NULL.
 *  Ends the process naming fn if anything is wrong. */
PH_HIDDEN void heap_debug_check(mstate_t *ms, const char *fn);

#endif /* PINHEAP_INTERNAL_H */
