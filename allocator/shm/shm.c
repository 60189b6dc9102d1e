/*
 * shm.c -- the shared-memory heap: one region that every process of a job
 * maps at the same address, so that malloc in one process returns memory
 * that another can read, write and free in place.  This file owns this
 * process's view of the region (the state shm_region.h declares), its
 * slices, its arenas, the tmpfs blocks behind them, the fallback to the
 * private heap and the public shm_* queries; the start-up is shm_start.c's
 * (main entry point: shm_start(), called once by heap_default() inside the
 * very first malloc), the releases every process hears shm_rel.c's, fork
 * and exit shm_fork.c's.  This comment is the overview of all four.
 *
 * THIS CODE RUNS INSIDE THE VERY FIRST malloc: it never allocates.  Files
 * are opened, read and mapped with plain system calls into fixed buffers.
 *
 * Start-up.  The object is "/pinheap-<uid>-<job id>" (in /dev/shm).  Every
 * process tries to create it exclusively (mode 0600); the one that succeeds
 * sizes it, chooses the address (a hole in /proc/self/maps, high but well
 * below the mmap area, aligned to a root slot of the owner map: 4 GiB, and
 * reserving whole slots), maps it with MAP_FIXED_NOREPLACE, writes the
 * header and publishes "ready" with a release store.  The others open it,
 * check with fstat that it is their user's with mode 0600, wait for ready
 * (bounded: a creator that is too slow is named; one that died leaves a
 * stale object), and map it at the agreed address, or name the mapping in
 * the way.  A stale object (its creator died before ready, or every process
 * recorded in it is gone) is marked dead by one compare-and-swap -- so one
 * process only replaces it -- unlinked (if the name still names that very
 * object) and created anew.
 *
 * Region layout: the header (shm_region.h; the records of the processes), the
 * owner index (a uint16_t per 64 KiB granule: the index + 1 of the process
 * whose slice holds it), the owner map's leaves for the region's root slots
 * (owner.c: owner_map_adopt), then the slices, taken in order by a
 * compare-and-swap on the header's cursor, on demand.  An arena of the
 * shared heap lives at the start of its first slice (as an mspace does), so
 * its state -- bins, remote stack, cookie, lock -- is reachable from every
 * process; a block freed by another process goes to its owner through the
 * lock-free remote stack (small blocks, defer.c) or under the owner heap's
 * lock (a spin lock in the region).  Pages given back from the region are
 * first heard by every process attached (a ring of releases in the header:
 * see "releases every process hears"; shm_poll).
 */
#include "allocator/shm/shm_region.h"

/* This process's view (set once by shm_start, read-only after). */
shm_hdr_t *shm_hdr;
int shm_me = -1;
shm_conf_t shm_conf;
char shm_obj[SHM_NAME_MAX];          /* "/pinheap-<uid>-<job>" */
char shm_path[SHM_NAME_MAX + 16];    /* "/dev/shm" + shm_obj */
bool shm_left;                       /* the child of a fork: a private copy */
atomic_bool shm_full;                /* the region filled up, fallback on */
atomic_flag shm_full_said = ATOMIC_FLAG_INIT;
mstate_t *_Atomic shm_fb_heap;
int shm_fd = -1;                     /* the object, kept open (fork's snapshot,
                                               reservations) */
uint64_t shm_fd_dev, shm_fd_ino;     /* what it must still be */
void *shm_snap;                      /* fork: the parent's snapshot, or NULL */
size_t shm_snap_len;
uint32_t shm_adopted;                /* bit k: arenas[k] of this process's
                                               record is its own, or was tried */
/* Fork: held while the fallback heap is made (ms_create: a mapping, the
 * owner map), outside every heap lock; not in malloc_prefork_lock's order,
 * which would then have to come first.  shm_fb_heap is published last: a
 * child forked meanwhile frees the lock (shm_fork_child) and makes its
 * own when it needs one (the half-made one's mapping is lost). */
ph_lock_t shm_fb_lock;

/* ---- tmpfs blocks: reserved, not hoped for ----------------------------------
 *
 * The object is sparse: a page of it takes a block of the tmpfs behind
 * /dev/shm when it is first touched, and a tmpfs with no block left answers
 * the touch with SIGBUS -- in a program that malloc gave the memory to, on
 * a /dev/shm that every job of the node draws on.  So blocks are reserved
 * (fallocate: the tmpfs allocates them now, or says ENOSPC) before a byte
 * of them is handed out: the header's when the object is made, a slice's
 * when it is taken (shm_slice_take), and the pages a give-back removed
 * (shm_remove) again before a chunk over them is handed out (shm_back,
 * through ms_carve_backed).  A bit per page in the header says which pages
 * are reserved, and each heap counts its pages that are not (unbacked), so
 * that a heap with none, the usual case, looks at no bit.  The tmpfs
 * refusing is the region filling up: NULL with ENOMEM, or the fallback
 * (shm_no_room).  Reserved pages never touched stay holes for SEEK_DATA
 * (the tmpfs marks a page up to date on its first touch), so fork's
 * snapshot still copies only what was written.
 */

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 1
#endif

/* Reserves [off, off + len) of the object fd (the raw call: the archive's
 * exported fallocate announces releases).  @return 0 or the errno. */
int shm_reserve(int fd, uint64_t off, uint64_t len)
{
  for (;;) {
    if (ph_syscall(SYS_fallocate, fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
      return 0;
    if (errno != EINTR)
      return errno;
  }
}

/* The object's descriptor, checked to be the object still: a program that
 * closed it (and maybe reused the number) gets it opened again by name.
 * @return it, or -1. */
int shm_fd_get(void)
{
  struct stat st;
  int fd = __atomic_load_n(&shm_fd, __ATOMIC_ACQUIRE);

  if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == shm_fd_dev &&
      (uint64_t)st.st_ino == shm_fd_ino)
    return fd;
  int nfd = open(shm_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (nfd < 0)
    return -1;
  if (fstat(nfd, &st) != 0 || (uint64_t)st.st_dev != shm_fd_dev || (uint64_t)st.st_ino != shm_fd_ino) {
    close(nfd);                                  /* the name is another object now */
    return -1;
  }
  if (!__atomic_compare_exchange_n(&shm_fd, &fd, nfd, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    close(nfd);                                  /* another thread opened it first */
    return fd;
  }
  return nfd;
}

static uint64_t *shm_bits(const shm_hdr_t *h) { return (uint64_t *)((char *)h + h->backed_off); }

/* Sets (or clears) the bits of the pages [pg, end).  @return how many changed. */
static size_t shm_bits_change(shm_hdr_t *h, uint64_t pg, uint64_t end, bool set)
{
  uint64_t *w = shm_bits(h);
  size_t changed = 0;

  while (pg < end) {
    uint64_t lo = pg % 64, n = end - pg < 64 - lo ? end - pg : 64 - lo;
    uint64_t mask = (n == 64 ? ~0ULL : ((1ULL << n) - 1)) << lo;
    uint64_t old = set ? __atomic_fetch_or(&w[pg / 64], mask, __ATOMIC_RELAXED)
                       : __atomic_fetch_and(&w[pg / 64], ~mask, __ATOMIC_RELAXED);
    changed += (size_t)ph_popcount((set ? ~old : old) & mask);
    pg += n;
  }
  return changed;
}

/* The first page of [pg, end) whose bit is set (or clear), or end. */
static uint64_t shm_bits_find(const shm_hdr_t *h, uint64_t pg, uint64_t end, bool set)
{
  const uint64_t *w = shm_bits(h);

  while (pg < end) {
    uint64_t v = __atomic_load_n(&w[pg / 64], __ATOMIC_RELAXED);
    v = (set ? v : ~v) & (~0ULL << (pg % 64));
    if (v != 0) {
      uint64_t f = (pg & ~(uint64_t)63) + (uint64_t)__builtin_ctzll(v);
      return f < end ? f : end;
    }
    pg = (pg & ~(uint64_t)63) + 64;
  }
  return end;
}

/* Marks [off, off + len) of the region reserved (whole pages). */
void shm_backed_set(shm_hdr_t *h, uint64_t off, uint64_t len)
{
  size_t page = os_page_size();
  shm_bits_change(h, off / page, align_up(off + len, page) / page, true);
}

/* The tmpfs had no room for len bytes more (errno err): the fallback
 * starts, if it is on, or malloc returns NULL meanwhile; said once. */
static void shm_no_room(uint64_t len, int err)
{
  if (shm_conf.fallback)
    atomic_store_explicit(&shm_full, true, memory_order_relaxed);
  if (atomic_flag_test_and_set(&shm_full_said))
    return;
  shm_say_begin();
  shm_say("/dev/shm is full: no room to reserve ");
  shm_say_dec(len);
  shm_say(" bytes more of the region (errno ");
  shm_say_dec((uint64_t)err);
  if (shm_conf.fallback)
    shm_say_end(PH_LOG_WARN, "); this process allocates from its private heap from now on "
            "(PINHEAP_SHM_FALLBACK); those blocks cannot be used by other processes");
  else
    shm_say_end(PH_LOG_WARN, "); malloc returns NULL (ENOMEM) while it stays full "
            "(PINHEAP_SHM_FALLBACK=1 would go on on the private heap)");
}

/* Reserves [off, off + len) of the region in the tmpfs, through the
 * object's descriptor.  @return 0 or the errno (said: shm_no_room). */
static int shm_fill(uint64_t off, uint64_t len)
{
  int fd = shm_fd_get();
  int err = fd >= 0 ? shm_reserve(fd, off, len) : EBADF;
  if (err != 0)
    shm_no_room(len, err);
  return err;
}

/* Reserves [off, off + len) of the region and marks it.  @return 0 or the
 * errno (said). */
static int shm_take_blocks(uint64_t off, uint64_t len)
{
  int err = shm_fill(off, len);
  if (err == 0)
    shm_backed_set(shm_hdr, off, len);
  return err;
}

bool shm_back(mstate_t *ms, const void *p, size_t len)
{
  shm_hdr_t *h = shm_hdr;
  if (!shm_on())
    return true;                               /* a forked child: a private copy */
  size_t page = os_page_size();
  uint64_t off = (uintptr_t)p - (uintptr_t)h;
  uint64_t pg = off / page, end = align_up(off + len, page) / page;
  while ((pg = shm_bits_find(h, pg, end, false)) < end) {
    uint64_t run = shm_bits_find(h, pg, end, true);
    if (shm_fill(pg * page, (run - pg) * page) != 0)
      return false;
    __atomic_fetch_sub(&ms->unbacked, shm_bits_change(h, pg, run, true), __ATOMIC_RELAXED);
    pg = run;
  }
  return true;
}

void shm_remove(mstate_t *ms, void *addr, size_t len)
{
  shm_hdr_t *h = shm_hdr;
  if (shm_on()) {
    size_t page = os_page_size();
    uint64_t off = (uintptr_t)addr - (uintptr_t)h;
    __atomic_fetch_add(&ms->unbacked, shm_bits_change(h, off / page, (off + len) / page, false),
                       __ATOMIC_RELAXED);
  }
  os_release_shared(addr, len, true);
}

/* ---- slices and arenas --------------------------------------------------- */

PH_HOT bool shm_on(void) { return shm_me >= 0 && !shm_left; }

bool shm_fallback_active(void) { return atomic_load_explicit(&shm_full, memory_order_relaxed); }

void *shm_slice_take(size_t len)
{
  shm_hdr_t *h = shm_hdr;
  if (shm_left)                                /* a forked child: private memory */
    return os_map_aligned(NULL, len, PH_GRANULE);
  uint64_t off = atomic_load_explicit(&h->cursor, memory_order_relaxed);

  do {
    if (off + len > h->size || off + len < off) {
      if (shm_conf.fallback) {
        atomic_store_explicit(&shm_full, true, memory_order_relaxed);
        if (!atomic_flag_test_and_set(&shm_full_said)) {
          shm_say_begin();
          shm_say("the region (");
          shm_say_dec(h->size);
          shm_say_end(PH_LOG_WARN, " bytes) is full: this process allocates from its private heap "
                  "from now on (PINHEAP_SHM_FALLBACK); those blocks cannot be used by other "
                  "processes");
        }
      }
      return NULL;
    }
  } while (!atomic_compare_exchange_weak_explicit(&h->cursor, &off, off + len, memory_order_relaxed,
                                                  memory_order_relaxed));
  if (shm_take_blocks(off, len) != 0) {
    /* the slice goes back unless a later one was taken (then its address
     * range stays unused) */
    uint64_t end = off + len;
    atomic_compare_exchange_strong_explicit(&h->cursor, &end, off, memory_order_relaxed,
                                            memory_order_relaxed);
    return NULL;
  }
  uint16_t *owners = shm_owners();
  for (uint64_t g = off >> PH_GRANULE_SHIFT; g < (off + len) >> PH_GRANULE_SHIFT; g++)
    __atomic_store_n(&owners[g], (uint16_t)(shm_me + 1), __ATOMIC_RELEASE);
  return (char *)h + off;
}

#define SHM_MS_OFF align_up(sizeof(seg_t), PH_ALIGN)
#define SHM_MS_CHUNK_OFF \
  (align_up(SHM_MS_OFF + sizeof(mstate_t) + PH_CHUNK_HDR, PH_ALIGN) - PH_CHUNK_HDR)

/* A heap of this process's record that its previous holder left (see
 * shm_register), taken as this process's arena of the given kind: unless
 * its lock is held -- its holder ended inside an operation, and the heap
 * may be half changed: it is left alone, its memory lost to the job.
 * Its blocks that other processes still hold stay theirs to use and free;
 * the blocks the previous holder's thread caches held are lost.  @return
 * the heap, or NULL. */
static mstate_t *shm_adopt(unsigned kind)
{
  shm_rec_t *r = &shm_hdr->recs[shm_me];

  for (uint32_t k = 0; k < SHM_REC_ARENAS; k++) {
    mstate_t *ms = (mstate_t *)(uintptr_t)atomic_load_explicit(&r->arenas[k], memory_order_acquire);
    if (ms == NULL || (shm_adopted & (1u << k)))
      continue;
    shm_adopted |= 1u << k;                     /* tried: once */
    int free_word = 0;
    if (!atomic_compare_exchange_strong(&ms->lock.held, &free_word, 1)) {
      shm_say_begin();
      shm_say("a heap of a process of the job that ended while using it (at ");
      shm_say_hex((uintptr_t)ms);
      shm_say_end(PH_LOG_WARN, ") is left as it is: its memory stays taken");
      continue;
    }
    /* its private huge chunks (the fallback's) went with its process */
    ms->huge = NULL;
    ms->huge_count = 0;
    ms->huge_bytes = 0;
    ms->kind = kind;                            /* this process's arena tag */
    for (seg_t *sg = ms->segs; sg != NULL; sg = sg->next)
      owner_map_set(sg->base, sg->size, seg_owner_value(ms, sg), kind);
    ph_unlock(&ms->lock);
    ms_register(ms);
    return ms;
  }
  return NULL;
}

mstate_t *shm_heap_create(unsigned kind)
{
  mstate_t *adopted = shm_adopt(kind);
  if (adopted != NULL)
    return adopted;
  size_t len = align_up(PH_DEFAULT_SEGMENT + SHM_MS_CHUNK_OFF + PH_FENCE_SIZE + PH_MIN_CHUNK,
                        PH_GRANULE);
  char *p = shm_slice_take(len);

  if (p == NULL)
    return NULL;
  mstate_t *ms = (mstate_t *)(p + SHM_MS_OFF);
  if (!owner_map_set(p, len, (uintptr_t)p, kind))
    return NULL;                               /* the slice stays taken */
  ms_init(ms, &shm_hdr->source, PH_MS_LOCKED, kind);
  seg_format(ms, p, len, SHM_MS_CHUNK_OFF, PH_SEG_HOLDS_MS);
  ms->top_seg = (seg_t *)p;
  ms->top = seg_first(ms->top_seg);
  shm_rec_t *r = &shm_hdr->recs[shm_me];
  for (uint32_t k = 0; k < SHM_REC_ARENAS; k++) {     /* for whoever takes the record over */
    if (atomic_load_explicit(&r->arenas[k], memory_order_relaxed) == 0) {
      atomic_store_explicit(&r->arenas[k], (uint64_t)(uintptr_t)ms, memory_order_release);
      shm_adopted |= 1u << k;
      break;
    }
  }
  return ms;
}

mstate_t *shm_fallback_heap(void)
{
  mstate_t *ms = atomic_load_explicit(&shm_fb_heap, memory_order_acquire);

  if (ms == NULL) {
    ph_lock(&shm_fb_lock);
    ms = atomic_load_explicit(&shm_fb_heap, memory_order_acquire);
    if (ms == NULL) {
      ms = ms_create(0, PH_MS_LOCKED, PH_KIND_ARENA);
      atomic_store_explicit(&shm_fb_heap, ms, memory_order_release);
    }
    ph_unlock(&shm_fb_lock);
  }
  return ms;
}

/* ---- the public queries -------------------------------------------------- */

int shm_contains(const void *ptr)
{
  shm_hdr_t *h = shm_hdr;
  return h != NULL && (uintptr_t)ptr - (uintptr_t)h < h->size;
}

int shm_owner(const void *ptr)
{
  shm_hdr_t *h = shm_hdr;
  uintptr_t off = (uintptr_t)ptr - (uintptr_t)h;

  if (h == NULL || off >= h->size || off < h->data_off)
    return -1;
  return (int)__atomic_load_n(&shm_owners()[off >> PH_GRANULE_SHIFT], __ATOMIC_ACQUIRE) - 1;
}

bool shm_foreign(const void *mem)
{
  int o = shm_owner(mem);
  return o >= 0 && o != shm_me;
}

void *shm_base(void) { return shm_hdr; }

/* (a process that mapped the region but runs on its private heap -- it was
 * full when it joined -- is no member: no size, index or name) */
size_t shm_size(void) { return shm_hdr != NULL && shm_me >= 0 ? (size_t)shm_hdr->size : 0; }

int shm_index(void) { return shm_hdr != NULL ? shm_me : -1; }

const char *shm_name(void) { return shm_hdr != NULL && shm_me >= 0 ? shm_obj : NULL; }

int shm_poll(void) { return shm_rel_poll(); }
