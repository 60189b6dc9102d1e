/*
 * shm.c -- the shared-memory heap: one region that every process of a job
 * maps at the same address, so that malloc in one process returns memory
 * that another can read, write and free in place.  Owns the region's
 * start-up (create or join, checks, the address, the header), its slices,
 * its arenas, the fallback to the private heap, the last process's unlink
 * and the public shm_* queries.  Main entry point: shm_start(), called once
 * by heap_default() inside the very first malloc.
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
 * Region layout: the header (below; the records of the processes), the
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
#include "chunk.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "params.h"
#include "pinheap.h"

extern char **environ;

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define SHM_MAGIC    0x316d68737061656eULL   /* "neapshm1" */
#define SHM_VERSION  4u
#define SHM_MAX_PROCS PARAM_RANKS_MAX
#define SHM_SLOT     ((uintptr_t)1 << (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS))  /* 4 GiB */
#define SHM_LEAF_BYTES (sizeof(uintptr_t) << PH_OWNER_LEAF_BITS)
/* Where the region goes: the highest hole below SHM_TOP (the mmap area
 * grows down from near 0x7fff..., randomized over about a TiB: 16 TiB of
 * room) and above SHM_FLOOR. */
#define SHM_TOP      ((uintptr_t)0x700000000000ULL)
#define SHM_FLOOR    ((uintptr_t)0x100000000000ULL)
#define SHM_NAME_MAX 96

enum { SHM_INIT = 0, SHM_READY = 1, SHM_DEAD = 2 };

#define SHM_REC_ARENAS 16
typedef struct shm_rec_s {
  _Atomic int pid;           /* 0: left (or never joined) */
  int joined;                /* 1 once the process took its index */
  _Atomic uint64_t heard;    /* its listeners heard every release posted before */
  /* The heaps of this index (mstate_t * in the region; 0: none), which a
   * process taking the index over after its holder ended adopts. */
  _Atomic uint64_t arenas[SHM_REC_ARENAS];
} shm_rec_t;

/* A release posted to the ring (below: "releases every process hears"). */
#define SHM_RING 64u         /* a power of two */
typedef struct shm_rel_s {
  _Atomic uint64_t turn;     /* s: free for entry s; s + 1: holds entry s */
  _Atomic uint64_t addr;     /* the pages [addr, addr + len) */
  _Atomic uint64_t len;
  _Atomic uint64_t heap;     /* the poster's heap (mstate_t *) and its free chunk */
  _Atomic uint64_t chunk;
  _Atomic uint64_t token;    /* also in the chunk (shm_rel_token_at) while it stays free */
  _Atomic int poster;        /* the poster's index */
} shm_rel_t;

typedef struct shm_hdr_s {
  uint64_t magic;
  uint32_t version;
  _Atomic uint32_t state;    /* SHM_INIT -> SHM_READY (release) -> SHM_DEAD */
  _Atomic int creator_pid;   /* written first, before the object is sized for others */
  uint32_t max_procs;        /* the participant count, or SHM_MAX_PROCS */
  uint64_t size;
  uint64_t base;
  uint64_t span;             /* whole root slots reserved from base */
  _Atomic uint32_t refcount; /* processes attached; the last one unlinks */
  _Atomic uint32_t nprocs;   /* indexes handed out */
  _Atomic uint64_t cursor;   /* offset of the first byte no slice holds */
  uint64_t owners_off;       /* uint16_t per granule */
  uint64_t leaves_off;       /* the owner map's leaves, one per root slot */
  uint64_t backed_off;       /* a bit per page: reserved in the tmpfs (below) */
  uint64_t data_off;         /* the first slice */
  uint64_t free_key;         /* chunk_free_key of every process */
  mem_source_t source;       /* what every heap of the region points at */
  _Atomic uint64_t rel_head; /* the next entry's number */
  shm_rel_t rel[SHM_RING];
  shm_rec_t recs[SHM_MAX_PROCS];
} shm_hdr_t;

/* This process's view (set once by shm_start, read-only after). */
static shm_hdr_t *shm_hdr;
static int shm_me = -1;
static shm_conf_t shm_conf;
static char shm_obj[SHM_NAME_MAX];          /* "/pinheap-<uid>-<job>" */
static char shm_path[SHM_NAME_MAX + 16];    /* "/dev/shm" + shm_obj */
static bool shm_left;                       /* the child of a fork: a private copy */
static atomic_bool shm_full;                /* the region filled up, fallback on */
static atomic_flag shm_full_said = ATOMIC_FLAG_INIT;
static mstate_t *_Atomic shm_fb_heap;
static int shm_fd = -1;                     /* the object, kept open (fork's snapshot,
                                               reservations) */
static uint64_t shm_fd_dev, shm_fd_ino;     /* what it must still be */
static void *shm_snap;                      /* fork: the parent's snapshot, or NULL */
static size_t shm_snap_len;
static uint32_t shm_adopted;                /* bit k: arenas[k] of this process's
                                               record is its own, or was tried */
/* Fork: held while the fallback heap is made (ms_create: a mapping, the
 * owner map), outside every heap lock; not in malloc_prefork_lock's order,
 * which would then have to come first.  shm_fb_heap is published last: a
 * child forked meanwhile frees the lock (shm_fork_child) and makes its
 * own when it needs one (the half-made one's mapping is lost). */
static ph_lock_t shm_fb_lock;

/* ---- messages (no allocation) ---------------------------------------------
 * A start-up message is said in pieces, across functions (the failing step
 * says what went wrong, shm_fail() says what happens next), into one
 * buffer that goes to the logger as one line.  Start-up runs once, in the
 * first malloc; the one later message ("is full") is said once. */

static char shm_msg[PH_LOG_LINE_MAX];

/* the logger cuts a message that fills shm_msg with "..." */
static void say(const char *s) { ph_str_add(shm_msg, sizeof(shm_msg), s); }
/* Ends the message said since say_begin(): one line at level. */
static void say_end(int level, const char *last)
{
  say(last);
  ph_log(level, "%s", shm_msg);
  shm_msg[0] = '\0';
}
static void say_dec(uint64_t v) { ph_str_dec(shm_msg, sizeof(shm_msg), v); }
static void say_hex(uintptr_t v) { ph_str_hex(shm_msg, sizeof(shm_msg), v); }
static void say_oct(unsigned v)
{
  char b[8];
  int n = 0;
  char t[8];
  do {
    t[n++] = (char)('0' + (v & 7));
    v >>= 3;
  } while (v != 0 && n < 7);
  int i = 0;
  b[i++] = '0';
  while (n > 0)
    b[i++] = t[--n];
  b[i] = '\0';
  say(b);
}
static void say_begin(void)
{
  shm_msg[0] = '\0';
  say("shared heap ");
  say(shm_obj);
  say(": ");
}

/* Ends the start-up: with the fallback, the private heap (said); without,
 * the process ends (exit status 1).  The message has been written up to
 * its last sentence. */
static mstate_t *shm_fail(void)
{
  if (shm_conf.fallback) {
    say_end(PH_LOG_WARN, "; this process runs on its private heap instead (PINHEAP_SHM_FALLBACK)");
    return NULL;
  }
  say_end(PH_LOG_FATAL, "; the process ends (PINHEAP_SHM_FALLBACK=1 would run it on its private heap)");
  _exit(1);
}

/* ---- small system helpers ------------------------------------------------ */

static void *shm_sys_mmap(void *addr, size_t len, int prot, int flags, int fd)
{
  long r = ph_syscall(SYS_mmap, addr, len, prot, flags, fd, 0L);
  return r == -1 ? MAP_FAILED : (void *)r;
}

static void shm_sys_munmap(void *addr, size_t len) { ph_syscall(SYS_munmap, addr, len); }

static uint64_t shm_now_ms(void) { return ph_clock_ns(CLOCK_MONOTONIC) / 1000000u; }

static void shm_nap(void)
{
  struct timespec ts = { 0, 1000000 };     /* 1 ms */
  nanosleep(&ts, NULL);
}

/* Has the process pid ended?  One that its parent has not reaped yet (a
 * zombie) still answers kill(pid, 0): the state in /proc/<pid>/stat tells;
 * so does one that is exiting (a SIGKILL being carried out: its descriptors
 * may be closed already, so its peers see it go before it is a zombie) --
 * PF_EXITING in the flags (field 9). */
#define SHM_PF_EXITING 0x4u
static bool pid_gone(int pid)
{
  int saved = errno;
  bool gone = pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;

  if (!gone && pid > 0) {
    char path[48] = "/proc/", buf[256];
    ph_str_dec(path, sizeof(path), (uint64_t)pid);
    ph_str_add(path, sizeof(path), "/stat");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t n = read(fd, buf, sizeof(buf) - 1);
      close(fd);
      buf[n > 0 ? n : 0] = '\0';
      const char *state = ph_stat_field(buf, 3);
      gone = state != NULL && (*state == 'Z' || *state == 'X');
      gone = gone || (ph_stat_number(ph_stat_field(buf, 9)) & SHM_PF_EXITING) != 0;
    }
  }
  errno = saved;
  return gone;
}

/* ---- /proc/self/maps (os_maps_walk) -------------------------------------- */

typedef struct maps_overlap_s {
  uintptr_t lo, hi;
  uintptr_t s, e;
  char *line;
  size_t cap;
  bool found;
} maps_overlap_t;

static int maps_overlap_line(const os_map_t *m, void *ctx)
{
  maps_overlap_t *w = ctx;
  if (m->lo >= w->hi || m->hi <= w->lo)
    return 0;
  w->s = m->lo;
  w->e = m->hi;
  if (w->line != NULL && w->cap > 0) {
    size_t n = m->line_len < w->cap - 1 ? m->line_len : w->cap - 1;
    memcpy(w->line, m->line, n);
    w->line[n] = '\0';
  }
  w->found = true;
  return 1;
}

/* The first mapping of this process overlapping [lo, hi): its range in
 * *s_p, *e_p and its line in line (cap bytes).  @return whether there is one
 * (false too if the maps cannot be read). */
static bool maps_overlap(uintptr_t lo, uintptr_t hi, uintptr_t *s_p, uintptr_t *e_p, char *line,
                         size_t cap)
{
  maps_overlap_t w = { lo, hi, 0, 0, line, cap, false };

  if (os_maps_walk(maps_overlap_line, &w) != 0 || !w.found)
    return false;
  *s_p = w.s;
  *e_p = w.e;
  return true;
}

/* The highest span-sized, slot-aligned hole below SHM_TOP, or 0. */
static uintptr_t shm_pick_address(size_t span)
{
  uintptr_t a = (SHM_TOP - span) & ~(SHM_SLOT - 1), s, e;

  while (a >= SHM_FLOOR && a + span > a) {
    if (!maps_overlap(a, a + span, &s, &e, NULL, 0))
      return a;
    if (s < span + SHM_FLOOR)
      break;
    a = (s - span) & ~(SHM_SLOT - 1);
  }
  return 0;
}

/* ---- the region's layout ------------------------------------------------- */

static size_t shm_span(size_t size) { return align_up(size, SHM_SLOT); }

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
static int shm_reserve(int fd, uint64_t off, uint64_t len)
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
static int shm_fd_get(void)
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
    changed += (size_t)__builtin_popcountll((set ? ~old : old) & mask);
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
static void shm_backed_set(shm_hdr_t *h, uint64_t off, uint64_t len)
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
  say_begin();
  say("/dev/shm is full: no room to reserve ");
  say_dec(len);
  say(" bytes more of the region (errno ");
  say_dec((uint64_t)err);
  if (shm_conf.fallback)
    say_end(PH_LOG_WARN, "); this process allocates from its private heap from now on "
            "(PINHEAP_SHM_FALLBACK); those blocks cannot be used by other processes");
  else
    say_end(PH_LOG_WARN, "); malloc returns NULL (ENOMEM) while it stays full "
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

/* Where the header's parts go in a region of size bytes (span reserved). */
typedef struct shm_layout_s {
  uint64_t owners_off, leaves_off, backed_off, data_off;
} shm_layout_t;

static shm_layout_t shm_layout(size_t size, size_t span)
{
  size_t page = os_page_size();
  shm_layout_t l;
  l.owners_off = align_up(sizeof(shm_hdr_t), page);
  size_t owners = (size >> PH_GRANULE_SHIFT) * sizeof(uint16_t);
  l.leaves_off = align_up(l.owners_off + owners, page);
  l.backed_off = align_up(l.leaves_off + (span / SHM_SLOT) * SHM_LEAF_BYTES, page);
  size_t backed = align_up(size / page, 64) / 8;     /* whole words */
  l.data_off = align_up(l.backed_off + backed, PH_GRANULE);
  return l;
}

static uint16_t *shm_owners(void) { return (uint16_t *)((char *)shm_hdr + shm_hdr->owners_off); }

/* ---- start-up ------------------------------------------------------------ */

/* Maps the whole region at base (span reserved, size of it backed by fd),
 * checked to land exactly there.  @return false, with the message begun
 * (the mapping in the way named) if something is in the way. */
static bool shm_map_at(int fd, uintptr_t base, size_t size, size_t span)
{
  void *want = (void *)base;
  void *p = shm_sys_mmap(want, span, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1);
  if (p != want) {
    if (p != MAP_FAILED)                     /* a kernel without MAP_FIXED_NOREPLACE */
      shm_sys_munmap(p, span);
    char line[256];
    uintptr_t s, e;
    say_begin();
    say("cannot map the region at ");
    say_hex(base);
    say(" (");
    say_dec(span);
    say(" bytes of address space, as every process of the job must)");
    if (maps_overlap(base, base + span, &s, &e, line, sizeof(line))) {
      say(": this mapping is in the way: ");
      say(line);
    }
    return false;
  }
  if (shm_sys_mmap(want, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd) != want) {
    shm_sys_munmap(want, span);
    say_begin();
    say("mapping the shared object failed (errno ");
    say_dec((uint64_t)errno);
    say(")");
    return false;
  }
  return true;
}

/* The creator: size, place and publish the region.  @return false with
 * the message begun. */
static bool shm_create(int fd)
{
  struct statfs sf;
  size_t size = shm_conf.size, span = shm_span(size);

  /* The creator's pid goes in first, while the object is still shorter
   * than a header (a joiner waits for the size): a creator killed between
   * sizing and writing the header would otherwise leave a sized object
   * with no creator to check, and every joiner waiting out its timeout.
   * (The raw ftruncate: the archive's exported one announces releases.) */
  int me = (int)getpid();
  /* Test hook: a creator that stalls before it sizes the object (2). */
  for (char **e = environ; e != NULL && *e != NULL; e++) {
    if (strcmp(*e, "PINHEAP_SHM_TEST_STALL=2") == 0) {
      for (;;)
        pause();
    }
  }
  if (fchmod(fd, 0600) != 0 ||
      pwrite(fd, &me, sizeof(me), (off_t)offsetof(shm_hdr_t, creator_pid)) != (ssize_t)sizeof(me) ||
      ph_syscall(SYS_ftruncate, fd, (off_t)size) != 0) {
    say_begin();
    say("cannot size the new object to ");
    say_dec(size);
    say(" bytes (errno ");
    say_dec((uint64_t)errno);
    say(")");
    return false;
  }
  /* A page the file system cannot back would be a SIGBUS later: refuse now. */
  if (fstatfs(fd, &sf) == 0 && (uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize < size) {
    say_begin();
    say("/dev/shm has ");
    say_dec((uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize);
    say(" bytes free, fewer than the ");
    say_dec(size);
    say(" asked for (");
    say(shm_conf.size_from);
    say(")");
    return false;
  }
  shm_layout_t l = shm_layout(size, span);
  if (l.data_off + 4 * PH_DEFAULT_SEGMENT > size) {
    say_begin();
    say("the region of ");
    say_dec(size);
    say(" bytes is too small for its header and a first arena");
    return false;
  }
  /* The header's tmpfs blocks, before it is written ("reserved, not hoped
   * for", below). */
  int err = shm_reserve(fd, 0, l.data_off);
  if (err != 0) {
    say_begin();
    say("cannot reserve the header's ");
    say_dec(l.data_off);
    say(" bytes in /dev/shm (errno ");
    say_dec((uint64_t)err);
    say(err == ENOSPC ? ": no space left)" : ")");
    return false;
  }
  uintptr_t base = shm_pick_address(span);
  if (base == 0) {
    say_begin();
    say("no hole of ");
    say_dec(span);
    say(" bytes of address space found below ");
    say_hex(SHM_TOP);
    return false;
  }
  if (!shm_map_at(fd, base, size, span))
    return false;
  shm_hdr_t *h = (shm_hdr_t *)base;
  shm_hdr = h;
  atomic_store_explicit(&h->creator_pid, (int)getpid(), memory_order_relaxed);
  h->magic = SHM_MAGIC;
  h->version = SHM_VERSION;
  h->size = size;
  h->base = base;
  h->span = span;
  h->max_procs = shm_conf.ranks != 0 ? shm_conf.ranks : SHM_MAX_PROCS;
  h->owners_off = l.owners_off;
  h->leaves_off = l.leaves_off;
  h->backed_off = l.backed_off;
  h->data_off = l.data_off;
  shm_backed_set(h, 0, l.data_off);
  atomic_store_explicit(&h->cursor, h->data_off, memory_order_relaxed);
  atomic_store_explicit(&h->refcount, 1, memory_order_relaxed);
  h->free_key = chunk_free_key;
  h->source = (mem_source_t){ .grows = true, .maps_huge = true, .releases = true,
                              .in_owner_map = true, .shared = true };
  /* The creator is process 0, recorded before "ready": a process that
   * joins always finds a live process in the records. */
  atomic_store_explicit(&h->recs[0].pid, (int)getpid(), memory_order_relaxed);
  h->recs[0].joined = 1;
  for (uint32_t i = 0; i < SHM_RING; i++)
    atomic_store_explicit(&h->rel[i].turn, i, memory_order_relaxed);
  atomic_store_explicit(&h->nprocs, 1, memory_order_relaxed);
  shm_me = 0;
  /* Test hook: a creator that stalls before "ready" (test/multiproc/test_shm.c, 1). */
  for (char **e = environ; e != NULL && *e != NULL; e++) {
    if (strcmp(*e, "PINHEAP_SHM_TEST_STALL=1") == 0) {
      for (;;)
        pause();
    }
  }
  atomic_store_explicit(&h->state, SHM_READY, memory_order_release);
  return true;
}

/* Marks the object behind fd (header h) dead and unlinks its name, if this
 * process wins the compare-and-swap from seen and the name still names
 * that object.  Losers and winners alike then start over. */
static void shm_replace(int fd, shm_hdr_t *h, uint32_t seen)
{
  struct stat by_fd, by_name;

  if (!atomic_compare_exchange_strong(&h->state, &seen, SHM_DEAD))
    return;
  if (fstat(fd, &by_fd) == 0 && stat(shm_path, &by_name) == 0 && by_fd.st_ino == by_name.st_ino &&
      by_fd.st_dev == by_name.st_dev)
    unlink(shm_path);
}

/* Do all the processes recorded in h seem gone? */
static bool shm_all_gone(const shm_hdr_t *h)
{
  uint32_t n = atomic_load_explicit(&((shm_hdr_t *)h)->nprocs, memory_order_acquire);
  n = n > h->max_procs ? h->max_procs : n;
  for (uint32_t i = 0; i < n; i++) {
    int pid = atomic_load_explicit(&((shm_hdr_t *)h)->recs[i].pid, memory_order_relaxed);
    if (pid != 0 && pid != (int)getpid() && !pid_gone(pid))   /* our own pid: before an exec */
      return false;
  }
  return true;
}

enum { JOIN_OK, JOIN_RETRY, JOIN_FAIL };

/* A process that did not create the object: check, wait, map.  @return
 * JOIN_OK (shm_hdr set, referenced), JOIN_RETRY (the object went away or
 * was stale: start over) or JOIN_FAIL (message begun). */
static int shm_join(int fd, uint64_t deadline)
{
  struct stat st;
  size_t hsize = align_up(sizeof(shm_hdr_t), os_page_size());

  if (fstat(fd, &st) != 0) {
    say_begin();
    say("fstat failed");
    return JOIN_FAIL;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 07777) != 0600 || !S_ISREG(st.st_mode)) {
    say_begin();
    say("refused: it belongs to uid ");
    say_dec(st.st_uid);
    say(" with mode ");
    say_oct((unsigned)(st.st_mode & 07777));
    say(", expected uid ");
    say_dec(geteuid());
    say(" with mode 0600 (another user must not plant or read the heap; remove ");
    say(shm_path);
    say(" if it is not in use)");
    return JOIN_FAIL;
  }
  uint64_t unsized_since = shm_now_ms();
  while ((size_t)st.st_size < hsize) {        /* the creator has not sized it yet */
    /* Its creator holds its lock until it is ready: unsized and unlocked
     * for a while, it ended (killed between create and size).  This process
     * keeps the lock while it unlinks it (if the name is still that very
     * object), so that one joiner only replaces it. */
    if (shm_now_ms() - unsized_since >= 50 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
      struct stat by_name;
      if (fstat(fd, &st) == 0 && (size_t)st.st_size < hsize && stat(shm_path, &by_name) == 0 &&
          by_name.st_ino == st.st_ino && by_name.st_dev == st.st_dev) {
        unlink(shm_path);
        flock(fd, LOCK_UN);
        return JOIN_RETRY;
      }
      flock(fd, LOCK_UN);
    }
    if (shm_now_ms() > deadline) {
      say_begin();
      say("the object was never sized by its creator within ");
      say_dec(shm_conf.timeout_ms);
      say(" ms (PINHEAP_SHM_TIMEOUT); remove ");
      say(shm_path);
      say(" if no process of the job is starting");
      return JOIN_FAIL;
    }
    shm_nap();
    if (fstat(fd, &st) != 0)
      return JOIN_RETRY;
  }
  shm_hdr_t *h = shm_sys_mmap(NULL, hsize, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
  if (h == MAP_FAILED) {
    say_begin();
    say("cannot map its header");
    return JOIN_FAIL;
  }
  int rc = JOIN_FAIL;
  for (;;) {
    uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
    int creator = atomic_load_explicit(&h->creator_pid, memory_order_relaxed);
    if (state == SHM_DEAD) {
      rc = JOIN_RETRY;
      goto out;
    }
    if (state == SHM_READY)
      break;
    if (pid_gone(creator)) {                  /* died before ready: stale */
      shm_replace(fd, h, SHM_INIT);
      rc = JOIN_RETRY;
      goto out;
    }
    if (shm_now_ms() > deadline) {
      say_begin();
      say("its creator (pid ");
      say_dec((uint64_t)(creator > 0 ? creator : 0));
      say(") did not make it ready within ");
      say_dec(shm_conf.timeout_ms);
      say(" ms (PINHEAP_SHM_TIMEOUT)");
      goto out;
    }
    shm_nap();
  }
  if (h->magic != SHM_MAGIC || h->version != SHM_VERSION || h->size > (uint64_t)st.st_size ||
      h->base % SHM_SLOT != 0 || h->span != shm_span(h->size)) {
    say_begin();
    say("its header is not a pinheap shared heap of this version");
    goto out;
  }
  /* Take a reference, unless the last process is leaving (0): then the
   * object is on its way out; stale if every recorded process is gone. */
  uint32_t refs = atomic_load_explicit(&h->refcount, memory_order_acquire);
  do {
    if (refs == 0 || shm_all_gone(h)) {
      if (shm_all_gone(h))
        shm_replace(fd, h, SHM_READY);
      else
        shm_nap();
      rc = JOIN_RETRY;
      goto out;
    }
  } while (!atomic_compare_exchange_weak(&h->refcount, &refs, refs + 1));
  if (!shm_map_at(fd, (uintptr_t)h->base, (size_t)h->size, (size_t)h->span)) {
    atomic_fetch_sub(&h->refcount, 1);
    goto out;
  }
  shm_hdr = (shm_hdr_t *)(uintptr_t)h->base;
  rc = JOIN_OK;
out:
  shm_sys_munmap(h, hsize);
  return rc;
}

/* Takes this process's index and its record.  @return false (message
 * begun) when more processes joined than the participant count. */
static bool shm_register(void)
{
  shm_hdr_t *h = shm_hdr;
  int me = (int)getpid();
  int64_t i = -1;

  /* A record whose process ended -- it left, or was killed (its pid gone),
   * or it is this process before it called exec -- is taken over, with its
   * heaps (shm_adopt): processes that come and go reuse the slices of
   * those before them instead of using the region up.  A killed process
   * never gave its reference back: the taker does, once. */
  uint32_t n = atomic_load_explicit(&h->nprocs, memory_order_acquire);
  n = n > h->max_procs ? h->max_procs : n;
  for (uint32_t j = 0; j < n && i < 0; j++) {
    if (!__atomic_load_n(&h->recs[j].joined, __ATOMIC_ACQUIRE))
      continue;                               /* being set up */
    int pid = atomic_load_explicit(&h->recs[j].pid, memory_order_relaxed);
    if (pid != 0 && pid != me && !pid_gone(pid))
      continue;
    if (!atomic_compare_exchange_strong(&h->recs[j].pid, &pid, me))
      continue;                               /* another process took it */
    if (pid != 0)
      atomic_fetch_sub(&h->refcount, 1);      /* the ended one's; ours is held */
    i = j;
  }
  if (i < 0) {
    i = atomic_fetch_add(&h->nprocs, 1);
    if (i >= h->max_procs) {
      atomic_fetch_sub(&h->refcount, 1);
      say_begin();
      say("more than ");
      say_dec(h->max_procs);
      say(" processes joined it (the participant count, ");
      say(shm_conf.ranks_from);
      say(")");
      return false;
    }
    for (uint32_t k = 0; k < SHM_REC_ARENAS; k++)
      atomic_store_explicit(&h->recs[i].arenas[k], 0, memory_order_relaxed);
    atomic_store_explicit(&h->recs[i].pid, me, memory_order_release);
    __atomic_store_n(&h->recs[i].joined, 1, __ATOMIC_RELEASE);
  }
  /* Releases posted before now concern no block this process can have seen. */
  atomic_store_explicit(&h->recs[i].heard, atomic_load(&h->rel_head), memory_order_release);
  shm_me = (int)i;
  /* Another record with our pid is this process before it called exec (a
   * shell's exec, a launcher that execs the program): that image never
   * left, so its reference goes now -- else the object outlives the job.
   * (Its heaps are adopted by whoever takes that record over.) */
  for (uint32_t j = 0; j < n; j++) {
    int pid = me;
    if ((int64_t)j != i && atomic_compare_exchange_strong(&h->recs[j].pid, &pid, 0))
      atomic_fetch_sub(&h->refcount, 1);     /* ours is held: never the last */
  }
  return true;
}

/* The start-up failed after the region was mapped (nothing was handed
 * out): leave it -- record, reference (the last one unlinks), mapping. */
static void shm_abandon(bool referenced)
{
  shm_hdr_t *h = shm_hdr;

  if (h == NULL)
    return;
  if (shm_me >= 0)
    atomic_store_explicit(&h->recs[shm_me].pid, 0, memory_order_relaxed);
  if (referenced && atomic_fetch_sub(&h->refcount, 1) == 1) {
    atomic_store(&h->state, SHM_DEAD);
    unlink(shm_path);
  }
  shm_sys_munmap(h, (size_t)h->span);
  shm_hdr = NULL;
  shm_me = -1;
}

/* Keeps the object's descriptor (close-on-exec) for fork's snapshot, which
 * reads where the object has data (SEEK_DATA), with what it is, so that a
 * descriptor the program closed and reused is noticed. */
static void shm_keep_fd(int fd)
{
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return;
  }
  shm_fd = fd;
  shm_fd_dev = (uint64_t)st.st_dev;
  shm_fd_ino = (uint64_t)st.st_ino;
}

mstate_t *shm_start(void)
{
  shm_conf_eval(environ, &shm_conf);
  if (!shm_conf.on)
    return NULL;
  shm_obj[0] = '\0';
  ph_str_add(shm_obj, sizeof(shm_obj), "/pinheap-");
  ph_str_dec(shm_obj, sizeof(shm_obj), (uint64_t)geteuid());
  ph_str_add(shm_obj, sizeof(shm_obj), "-");
  ph_str_add(shm_obj, sizeof(shm_obj), shm_conf.job);
  shm_path[0] = '\0';
  ph_str_add(shm_path, sizeof(shm_path), "/dev/shm");
  ph_str_add(shm_path, sizeof(shm_path), shm_obj);

  uint64_t deadline = shm_now_ms() + shm_conf.timeout_ms;
  bool created = false;
  for (;;) {
    int fd = open(shm_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      /* Held while the object is set up: a joiner that finds it unsized
       * and unlocked knows its creator ended (shm_join).  Should a joiner
       * have taken this object for stale meanwhile (this process stopped
       * between open and flock), it is no longer the name's: start over. */
      struct stat by_fd, by_name;
      if (flock(fd, LOCK_EX) != 0 || fstat(fd, &by_fd) != 0 || stat(shm_path, &by_name) != 0 ||
          by_fd.st_ino != by_name.st_ino || by_fd.st_dev != by_name.st_dev) {
        close(fd);
        continue;
      }
      created = true;
      if (!shm_create(fd)) {
        shm_abandon(false);
        unlink(shm_path);
        close(fd);
        return shm_fail();
      }
      flock(fd, LOCK_UN);
      shm_keep_fd(fd);
      break;
    }
    if (errno != EEXIST) {
      say_begin();
      say("cannot create ");
      say(shm_path);
      say(" (errno ");
      say_dec((uint64_t)errno);
      say(")");
      return shm_fail();
    }
    fd = open(shm_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT && shm_now_ms() <= deadline)
        continue;                            /* unlinked meanwhile: try to create it */
      say_begin();
      say("cannot open ");
      say(shm_path);
      say(" (errno ");
      say_dec((uint64_t)errno);
      say(errno == ELOOP ? ": a symbolic link)" : ")");
      return shm_fail();
    }
    int rc = shm_join(fd, deadline);
    if (rc == JOIN_OK) {
      shm_keep_fd(fd);
      break;
    }
    close(fd);
    if (rc == JOIN_FAIL)
      return shm_fail();
    if (shm_now_ms() > deadline) {
      say_begin();
      say("the object kept going away or being replaced for ");
      say_dec(shm_conf.timeout_ms);
      say(" ms");
      return shm_fail();
    }
  }

  /* The free key is the region's, before any heap holds a waiting chunk. */
  if (!created) {
    if (chunk_free_key != shm_hdr->free_key && ms_any()) {
      shm_abandon(true);
      say_begin();
      say("it must start before any other heap of pinheap (an mspace was created before the "
          "first malloc)");
      return shm_fail();
    }
    __atomic_store_n(&chunk_free_key, shm_hdr->free_key, __ATOMIC_RELAXED);
    if (!shm_register()) {                     /* (it gave its reference back) */
      shm_abandon(false);
      return shm_fail();
    }
  }
  shm_hdr_t *h = shm_hdr;
  if (!owner_map_adopt(h, (size_t)h->span, (uintptr_t *)((char *)h + h->leaves_off),
                       (size_t)h->size, PH_KIND_SHM)) {
    shm_abandon(true);                         /* (the maps were left as they were) */
    say_begin();
    say("the owner map already describes part of its address range");
    return shm_fail();
  }
  mstate_t *ms = shm_heap_create(PH_KIND_ARENA_TAG(0));
  if (ms == NULL) {
    /* Not a member after all: its record and its reference go at once (it
     * must not hold back the others' releases, nor keep the object alive;
     * the last reference unlinks), and it answers as one that is not on the
     * shared heap.  The mapping stays: the owner map's leaves for the
     * range are in it, adopted. */
    atomic_store_explicit(&h->recs[shm_me].pid, 0, memory_order_release);
    if (atomic_fetch_sub(&h->refcount, 1) == 1) {
      uint32_t ready = SHM_READY;
      if (atomic_compare_exchange_strong(&h->state, &ready, SHM_DEAD))
        unlink(shm_path);
    }
    shm_me = -1;
    shm_left = true;
    say_begin();
    say("the region is full: no room for this process's first arena");
    return shm_fail();
  }
  return ms;
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
          say_begin();
          say("the region (");
          say_dec(h->size);
          say_end(PH_LOG_WARN, " bytes) is full: this process allocates from its private heap "
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
      say_begin();
      say("a heap of a process of the job that ended while using it (at ");
      say_hex((uintptr_t)ms);
      say_end(PH_LOG_WARN, ") is left as it is: its memory stays taken");
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

/* ---- releases every process hears ---------------------------------------
 *
 * Pages of the region that a process gives back must not leave the shared
 * object while another process may hold a registration on them (it was
 * sent a pointer into the block and registered it for RDMA): after
 * MADV_REMOVE its mapping faults in new pages and the registration is
 * stale.  So, while another process is attached, the giver posts the range
 * to a ring in the header (shm_rel_post, from segment.c's shared_release)
 * and puts the chunk back free, marked decommitted (no trim posts it again),
 * the entry's token in it (shm_rel_token_at).  Every process, in shm_rel_poll() (the
 * public shm_poll, and segment.c after a give-back), calls its release
 * listeners for each entry it has not heard yet -- the poster's own are
 * skipped: it hears its ranges as they go -- and publishes in its record the
 * number of the next entry to hear.  Once every live process has heard an
 * entry, the poster, in its own poll, gives the pages back if the chunk
 * stayed free and untouched (segment.c: ms_release_settle), and frees the
 * slot; a block reused meanwhile is not removed (the others heard of a
 * release that did not happen: harmless).
 *
 * The ring: entry s lives in slot s % SHM_RING, whose turn goes from s (free
 * for s) to s + 1 (holds s) to s + SHM_RING (free for the next lap).  A
 * poster claims s by a compare-and-swap on rel_head while the slot's turn is
 * s, fills it and publishes it with a release store of s + 1.  A full ring
 * posts nothing (the pages stay resident, the chunk unmarked, until a later
 * give-back finds room).  A process that is gone (its pid) blocks no entry,
 * and its own entries are freed by the next poster that finds the ring
 * full.  A live process that never polls delays the removals, never more;
 * so does a process killed between claiming an entry and publishing it (a
 * few stores): the entries after it are heard no more, and nothing goes.
 * Alone (no other process attached, or a participant count of 1), the pages
 * go at once, as they always did.
 */

static atomic_flag shm_polling = ATOMIC_FLAG_INIT;   /* one thread polls at a time */
static atomic_uint shm_pending;                       /* own entries not settled */

static uint64_t shm_token(uint64_t s, uintptr_t chunk)
{
  uint64_t x = ((s + 1) * 0x9e3779b97f4a7c15ULL) ^ chunk ^ shm_hdr->free_key;
  return x ^ (x >> 31);
}

/* The number of records handed out. */
static uint32_t shm_recs(const shm_hdr_t *h)
{
  uint32_t n = atomic_load_explicit(&((shm_hdr_t *)h)->nprocs, memory_order_acquire);
  return n > h->max_procs ? h->max_procs : n;
}

/* Does slot i hold an entry?  @return its number in *s_p. */
static bool shm_rel_held(shm_hdr_t *h, uint32_t i, uint64_t *s_p)
{
  uint64_t t = atomic_load_explicit(&h->rel[i].turn, memory_order_acquire);
  *s_p = t - 1;
  return t % SHM_RING == (i + 1) % SHM_RING;
}

/* Frees the slot of entry s, unless someone did first. */
static void shm_rel_retire(shm_rel_t *e, uint64_t s)
{
  uint64_t t = s + 1;
  atomic_compare_exchange_strong_explicit(&e->turn, &t, s + SHM_RING, memory_order_release,
                                          memory_order_relaxed);
}

/* Frees the slots of the entries whose poster is gone. */
static void shm_rel_sweep(shm_hdr_t *h)
{
  uint64_t s;

  for (uint32_t i = 0; i < SHM_RING; i++) {
    if (!shm_rel_held(h, i, &s))
      continue;
    int p = atomic_load_explicit(&h->rel[i].poster, memory_order_relaxed);
    if (p == shm_me || p < 0 || (uint32_t)p >= shm_recs(h))
      continue;
    int pid = atomic_load_explicit(&h->recs[p].pid, memory_order_acquire);
    if (pid == 0 || pid_gone(pid))
      shm_rel_retire(&h->rel[i], s);
  }
}

int shm_rel_post(mstate_t *ms, void *chunk, void *addr, size_t len)
{
  shm_hdr_t *h = shm_hdr;

  if (h->max_procs == 1 || atomic_load_explicit(&h->refcount, memory_order_acquire) <= 1)
    return SHM_POST_NOW;
  uint64_t s = atomic_load_explicit(&h->rel_head, memory_order_relaxed);
  bool swept = false;
  for (;;) {
    uint64_t t = atomic_load_explicit(&h->rel[s % SHM_RING].turn, memory_order_acquire);
    if (t == s) {
      if (atomic_compare_exchange_weak_explicit(&h->rel_head, &s, s + 1, memory_order_acq_rel,
                                                memory_order_relaxed))
        break;
    } else if (t > s) {                        /* rel_head moved on meanwhile */
      s = atomic_load_explicit(&h->rel_head, memory_order_relaxed);
    } else {                                   /* still entry s - SHM_RING: full */
      if (swept)
        return SHM_POST_FULL;
      shm_rel_sweep(h);
      swept = true;
    }
  }
  shm_rel_t *e = &h->rel[s % SHM_RING];
  uint64_t token = shm_token(s, (uintptr_t)chunk);
  *shm_rel_token_at(chunk) = token;
  atomic_store_explicit(&e->addr, (uintptr_t)addr, memory_order_relaxed);
  atomic_store_explicit(&e->len, len, memory_order_relaxed);
  atomic_store_explicit(&e->heap, (uintptr_t)ms, memory_order_relaxed);
  atomic_store_explicit(&e->chunk, (uintptr_t)chunk, memory_order_relaxed);
  atomic_store_explicit(&e->token, token, memory_order_relaxed);
  atomic_store_explicit(&e->poster, shm_me, memory_order_relaxed);
  atomic_fetch_add_explicit(&shm_pending, 1, memory_order_relaxed);
  atomic_store_explicit(&e->turn, s + 1, memory_order_release);
  return SHM_POST_LATER;
}

/* Calls the listeners for every entry of other processes not heard yet,
 * then publishes how far this process has heard. */
static void shm_rel_hear(shm_hdr_t *h)
{
  shm_rec_t *rec = &h->recs[shm_me];
  uint64_t at = atomic_load_explicit(&rec->heard, memory_order_relaxed);
  uint64_t head = atomic_load_explicit(&h->rel_head, memory_order_acquire);

  for (; at < head; at++) {
    shm_rel_t *e = &h->rel[at % SHM_RING];
    uint64_t t = atomic_load_explicit(&e->turn, memory_order_acquire);
    if (t == at)
      break;                                   /* being written: the next poll */
    if (t != at + 1)
      continue;                                /* dropped (or its poster gone) already */
    int poster = atomic_load_explicit(&e->poster, memory_order_relaxed);
    uintptr_t addr = atomic_load_explicit(&e->addr, memory_order_relaxed);
    size_t len = atomic_load_explicit(&e->len, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->turn, memory_order_relaxed) != at + 1)
      continue;                                /* dropped while read */
    if (poster != shm_me && addr - (uintptr_t)h < h->size && len <= h->size - (addr - (uintptr_t)h))
      os_release_shared((void *)addr, len, false);
  }
  atomic_store_explicit(&rec->heard, at, memory_order_release);
}

/* The number of the first entry some live process but this one has not
 * heard yet (every entry before it has been heard by all).  Whether a
 * process that lags is alive is asked of the system at most every
 * SHM_ALIVE_MS (a program may poll in a tight loop while one lags). */
#define SHM_ALIVE_MS 10u
static _Atomic uint64_t shm_alive_at;

static uint64_t shm_rel_floor(shm_hdr_t *h)
{
  uint32_t n = shm_recs(h);
  uint64_t floor = UINT64_MAX, now = shm_now_ms();
  bool ask = now - atomic_load_explicit(&shm_alive_at, memory_order_relaxed) >= SHM_ALIVE_MS;

  for (uint32_t i = 0; i < n; i++) {
    int pid = atomic_load_explicit(&h->recs[i].pid, memory_order_acquire);
    uint64_t heard = atomic_load_explicit(&h->recs[i].heard, memory_order_acquire);
    if ((int)i == shm_me || pid == 0 || heard >= floor)
      continue;
    if (!ask)
      floor = heard;
    else if (!pid_gone(pid))
      floor = heard;
  }
  if (ask && floor != UINT64_MAX)
    atomic_store_explicit(&shm_alive_at, now, memory_order_relaxed);
  return floor;
}

/* Settles this process's entries that every live process has heard. */
static void shm_rel_reap(shm_hdr_t *h)
{
  uint64_t s, floor = UINT64_MAX;
  bool floor_known = false;

  for (uint32_t i = 0; i < SHM_RING && atomic_load(&shm_pending) != 0; i++) {
    shm_rel_t *e = &h->rel[i];
    if (!shm_rel_held(h, i, &s) || atomic_load_explicit(&e->poster, memory_order_relaxed) != shm_me)
      continue;
    if (!floor_known) {
      floor = shm_rel_floor(h);
      floor_known = true;
    }
    if (s >= floor)
      continue;
    int r = ms_release_settle((mstate_t *)atomic_load_explicit(&e->heap, memory_order_relaxed),
                              (void *)atomic_load_explicit(&e->chunk, memory_order_relaxed),
                              (void *)atomic_load_explicit(&e->addr, memory_order_relaxed),
                              atomic_load_explicit(&e->len, memory_order_relaxed),
                              atomic_load_explicit(&e->token, memory_order_relaxed));
    if (r < 0)
      continue;                                /* its chunk is still being given back */
    shm_rel_retire(e, s);
    atomic_fetch_sub(&shm_pending, 1);
  }
}

PH_HOT bool shm_rel_due(void)
{
  shm_hdr_t *h = shm_hdr;

  if (h == NULL || shm_left || shm_me < 0)
    return false;
  return atomic_load_explicit(&shm_pending, memory_order_relaxed) != 0 ||
         atomic_load_explicit(&h->rel_head, memory_order_relaxed) !=
             atomic_load_explicit(&h->recs[shm_me].heard, memory_order_relaxed);
}

int shm_rel_poll(void)
{
  shm_hdr_t *h = shm_hdr;

  if (!shm_rel_due())
    return 0;
  if (!atomic_flag_test_and_set_explicit(&shm_polling, memory_order_acquire)) {
    shm_rel_hear(h);
    shm_rel_reap(h);
    atomic_flag_clear_explicit(&shm_polling, memory_order_release);
  }
  return (int)atomic_load(&shm_pending);
}

/* ---- fork and exit ------------------------------------------------------- */

#define SHM_MADV_POPULATE_WRITE 23   /* Linux 5.14; refused before (then faults) */

/* The part of the region in use, page-rounded. */
static size_t shm_used(const shm_hdr_t *h)
{
  size_t used = align_up((size_t)atomic_load(&h->cursor), os_page_size());
  return used > h->size ? (size_t)h->size : used;
}

/* Copies [off, end) of the region into the snapshot, only where the object
 * has data (SEEK_DATA / SEEK_HOLE on its descriptor): a hole -- pages never
 * written, or given back -- reads as zeros in both and is not touched, so
 * a region of 1 GiB with a few pages written costs a few pages (reserved
 * pages never touched are holes too).  Without the descriptor (the program
 * closed it and the name is gone), everything is copied. */
static void shm_snap_copy(const shm_hdr_t *h, char *snap, size_t used)
{
  int fd = shm_fd_get();
  if (fd < 0) {
    memcpy(snap, h, used);
    return;
  }
  off_t off = 0;
  while ((size_t)off < used) {
    off_t data = (off_t)ph_syscall(SYS_lseek, fd, off, SEEK_DATA);
    if (data < 0)
      break;                                  /* ENXIO: no data after off */
    off_t hole = (off_t)ph_syscall(SYS_lseek, fd, data, SEEK_HOLE);
    if (hole < 0 || (size_t)data >= used)
      break;
    size_t end = (size_t)hole < used ? (size_t)hole : used;
    /* the destination's pages made in one call, not one fault each */
    ph_syscall(SYS_madvise, snap + data, end - (size_t)data, SHM_MADV_POPULATE_WRITE);
    memcpy(snap + data, (const char *)h + data, end - (size_t)data);
    off = (off_t)end;
  }
}

/* Fork, in the parent, with every lock of the allocator held (its heaps are
 * consistent): a private snapshot of the part of the region in use, which
 * the child moves over the region (shm_fork_child).  Taken before fork
 * returns, so that the child sees its parent's heaps as they were at the
 * fork, and none of what the parent or the others write after. */
void shm_fork_prepare(void)
{
  shm_hdr_t *h = shm_hdr;

  shm_snap = NULL;
  if (h == NULL || shm_left || shm_me < 0)
    return;
  size_t used = shm_used(h);
  void *snap = shm_sys_mmap(NULL, used, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1);
  if (snap == MAP_FAILED)
    return;                                   /* the child makes do (below) */
  shm_snap_copy(h, snap, used);
  shm_snap = snap;
  shm_snap_len = used;
}

/* Fork, in the parent: the snapshot goes. */
void shm_fork_parent(void)
{
  if (shm_snap != NULL)
    shm_sys_munmap(shm_snap, shm_snap_len);
  shm_snap = NULL;
}

void shm_fork_child(void)
{
  shm_hdr_t *h = shm_hdr;

  ph_lock_reset(&shm_fb_lock);
  if (h == NULL || shm_left)
    return;
  /* The parent's snapshot, moved over the shared mapping at the same
   * address: the child's blocks stay where they are, and what the child
   * does no longer reaches the job's heap.  Other processes' heaps in it
   * are foreign: never locked (heap.c), their blocks the child frees stay
   * in its copy. */
  size_t used = shm_snap != NULL ? shm_snap_len : shm_used(h);
  void *copy = shm_snap;
  if (copy == NULL) {              /* no snapshot: copied now, as it is */
    copy = shm_sys_mmap(NULL, used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
    if (copy == MAP_FAILED)
      ph_fatal("fork", "no memory for the child's copy of the shared heap at", h);
    shm_snap_copy(h, copy, used);
  }
  if (ph_syscall(SYS_mremap, copy, used, used, MREMAP_MAYMOVE | MREMAP_FIXED, h) != (long)(uintptr_t)h)
    ph_fatal("fork", "cannot move the child's copy of the shared heap to", h);
  shm_snap = NULL;
  /* beyond the part in use: nothing of the job's, and no new slices */
  if (h->size > used)
    shm_sys_mmap((char *)h + used, (size_t)h->size - used, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1);
  /* bundles other processes handed this process's heaps while the
   * snapshot was taken may be torn in it: the parent takes them back */
  shm_rec_t *r = &h->recs[shm_me];
  for (uint32_t k = 0; k < SHM_REC_ARENAS; k++) {
    mstate_t *ms = (mstate_t *)(uintptr_t)atomic_load_explicit(&r->arenas[k], memory_order_relaxed);
    if (ms != NULL && (shm_adopted & (1u << k)))
      atomic_store_explicit(&ms->remote, NULL, memory_order_relaxed);
  }
  if (shm_fd >= 0)
    close(shm_fd);                 /* the child's copy is no longer the object */
  shm_fd = -1;
  shm_left = true;                 /* new slices: private mappings */
}

/* The last process to leave unlinks the object. */
__attribute__((destructor)) static void shm_leave(void)
{
  shm_hdr_t *h = shm_hdr;

  if (h == NULL || shm_left || shm_me < 0)
    return;
  /* Blocks of other processes this thread freed go back to them now (a
   * thread cache gathers them into bundles; the main thread's cache is not
   * emptied at exit otherwise). */
  tcache_flush_mine("exit");
  /* Its releases still waiting will not be settled: their slots go (the
   * pages stay in the object while it lives). */
  uint64_t s;
  for (uint32_t i = 0; i < SHM_RING; i++) {
    if (shm_rel_held(h, i, &s) && atomic_load_explicit(&h->rel[i].poster, memory_order_relaxed) == shm_me)
      shm_rel_retire(&h->rel[i], s);
  }
  atomic_store_explicit(&h->recs[shm_me].pid, 0, memory_order_relaxed);
  /* The last reference, or the last live process: the others ended
   * without leaving (killed), their references never given back. */
  if (atomic_fetch_sub(&h->refcount, 1) == 1 || shm_all_gone(h)) {
    uint32_t ready = SHM_READY;
    if (atomic_compare_exchange_strong(&h->state, &ready, SHM_DEAD))
      unlink(shm_path);
  }
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

