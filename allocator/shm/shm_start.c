/*
 * shm_start.c -- the shared heap's start-up: create the region or join it
 * (the checks, the address, the header), replace a stale one, and the
 * fallback to the private heap when it cannot be had.  Main entry point:
 * shm_start(), called once by heap_default() inside the very first malloc:
 * it never allocates.  The region's layout is in shm_region.h; shm.c has
 * the overview.
 */
#include "allocator/shm/shm_region.h"

extern char **environ;

/* ---- messages (no allocation) ---------------------------------------------
 * A start-up message is said in pieces, across functions (the failing step
 * says what went wrong, shm_fail() says what happens next), into one
 * buffer that goes to the logger as one line.  Start-up runs once, in the
 * first malloc; the one later message ("is full") is said once. */

static char shm_msg[PH_LOG_LINE_MAX];

/* the logger cuts a message that fills shm_msg with "..." */
void shm_say(const char *s) { ph_str_add(shm_msg, sizeof(shm_msg), s); }
/* Ends the message said since shm_say_begin(): one line at level. */
void shm_say_end(int level, const char *last)
{
  shm_say(last);
  ph_log(level, "%s", shm_msg);
  shm_msg[0] = '\0';
}
void shm_say_dec(uint64_t v) { ph_str_dec(shm_msg, sizeof(shm_msg), v); }
void shm_say_hex(uintptr_t v) { ph_str_hex(shm_msg, sizeof(shm_msg), v); }
void shm_say_oct(unsigned v)
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
  shm_say(b);
}
void shm_say_begin(void)
{
  shm_msg[0] = '\0';
  shm_say("shared heap ");
  shm_say(shm_obj);
  shm_say(": ");
}

/* Ends the start-up: with the fallback, the private heap (said); without,
 * the process ends (exit status 1).  The message has been written up to
 * its last sentence. */
static mstate_t *shm_fail(void)
{
  if (shm_conf.fallback) {
    shm_say_end(PH_LOG_WARN, "; this process runs on its private heap instead (PINHEAP_SHM_FALLBACK)");
    return NULL;
  }
  shm_say_end(PH_LOG_FATAL, "; the process ends (PINHEAP_SHM_FALLBACK=1 would run it on its private heap)");
  _exit(1);
}

/* ---- small system helpers ------------------------------------------------ */

uint64_t shm_now_ms(void) { return ph_clock_ns(CLOCK_MONOTONIC) / 1000000u; }

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
bool shm_pid_gone(int pid)
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

/* ---- start-up ------------------------------------------------------------ */

/* Maps the whole region at base (span reserved, size of it backed by fd),
 * checked to land exactly there.  @return false, with the message begun
 * (the mapping in the way named) if something is in the way. */
static bool shm_map_at(int fd, uintptr_t base, size_t size, size_t span)
{
  void *want = (void *)base;
  void *p = os_region_map(want, span, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1);
  if (p != want) {
    if (p != MAP_FAILED)                     /* a kernel without MAP_FIXED_NOREPLACE */
      os_region_unmap(p, span);
    char line[256];
    uintptr_t s, e;
    shm_say_begin();
    shm_say("cannot map the region at ");
    shm_say_hex(base);
    shm_say(" (");
    shm_say_dec(span);
    shm_say(" bytes of address space, as every process of the job must)");
    if (maps_overlap(base, base + span, &s, &e, line, sizeof(line))) {
      shm_say(": this mapping is in the way: ");
      shm_say(line);
    }
    return false;
  }
  if (os_region_map(want, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd) != want) {
    os_region_unmap(want, span);
    shm_say_begin();
    shm_say("mapping the shared object failed (errno ");
    shm_say_dec((uint64_t)errno);
    shm_say(")");
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
    shm_say_begin();
    shm_say("cannot size the new object to ");
    shm_say_dec(size);
    shm_say(" bytes (errno ");
    shm_say_dec((uint64_t)errno);
    shm_say(")");
    return false;
  }
  /* A page the file system cannot back would be a SIGBUS later: refuse now. */
  if (fstatfs(fd, &sf) == 0 && (uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize < size) {
    shm_say_begin();
    shm_say("/dev/shm has ");
    shm_say_dec((uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize);
    shm_say(" bytes free, fewer than the ");
    shm_say_dec(size);
    shm_say(" asked for (");
    shm_say(shm_conf.size_from);
    shm_say(")");
    return false;
  }
  shm_layout_t l = shm_layout(size, span);
  if (l.data_off + 4 * PH_DEFAULT_SEGMENT > size) {
    shm_say_begin();
    shm_say("the region of ");
    shm_say_dec(size);
    shm_say(" bytes is too small for its header and a first arena");
    return false;
  }
  /* The header's tmpfs blocks, before it is written ("reserved, not hoped
   * for", below). */
  int err = shm_reserve(fd, 0, l.data_off);
  if (err != 0) {
    shm_say_begin();
    shm_say("cannot reserve the header's ");
    shm_say_dec(l.data_off);
    shm_say(" bytes in /dev/shm (errno ");
    shm_say_dec((uint64_t)err);
    shm_say(err == ENOSPC ? ": no space left)" : ")");
    return false;
  }
  uintptr_t base = shm_pick_address(span);
  if (base == 0) {
    shm_say_begin();
    shm_say("no hole of ");
    shm_say_dec(span);
    shm_say(" bytes of address space found below ");
    shm_say_hex(SHM_TOP);
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
bool shm_all_gone(const shm_hdr_t *h)
{
  uint32_t n = atomic_load_explicit(&((shm_hdr_t *)h)->nprocs, memory_order_acquire);
  n = n > h->max_procs ? h->max_procs : n;
  for (uint32_t i = 0; i < n; i++) {
    int pid = atomic_load_explicit(&((shm_hdr_t *)h)->recs[i].pid, memory_order_relaxed);
    if (pid != 0 && pid != (int)getpid() && !shm_pid_gone(pid))   /* our own pid: before an exec */
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
    shm_say_begin();
    shm_say("fstat failed");
    return JOIN_FAIL;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 07777) != 0600 || !S_ISREG(st.st_mode)) {
    shm_say_begin();
    shm_say("refused: it belongs to uid ");
    shm_say_dec(st.st_uid);
    shm_say(" with mode ");
    shm_say_oct((unsigned)(st.st_mode & 07777));
    shm_say(", expected uid ");
    shm_say_dec(geteuid());
    shm_say(" with mode 0600 (another user must not plant or read the heap; remove ");
    shm_say(shm_path);
    shm_say(" if it is not in use)");
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
      shm_say_begin();
      shm_say("the object was never sized by its creator within ");
      shm_say_dec(shm_conf.timeout_ms);
      shm_say(" ms (PINHEAP_SHM_TIMEOUT); remove ");
      shm_say(shm_path);
      shm_say(" if no process of the job is starting");
      return JOIN_FAIL;
    }
    shm_nap();
    if (fstat(fd, &st) != 0)
      return JOIN_RETRY;
  }
  shm_hdr_t *h = os_region_map(NULL, hsize, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
  if (h == MAP_FAILED) {
    shm_say_begin();
    shm_say("cannot map its header");
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
    if (shm_pid_gone(creator)) {                  /* died before ready: stale */
      shm_replace(fd, h, SHM_INIT);
      rc = JOIN_RETRY;
      goto out;
    }
    if (shm_now_ms() > deadline) {
      shm_say_begin();
      shm_say("its creator (pid ");
      shm_say_dec((uint64_t)(creator > 0 ? creator : 0));
      shm_say(") did not make it ready within ");
      shm_say_dec(shm_conf.timeout_ms);
      shm_say(" ms (PINHEAP_SHM_TIMEOUT)");
      goto out;
    }
    shm_nap();
  }
  if (h->magic != SHM_MAGIC || h->version != SHM_VERSION || h->size > (uint64_t)st.st_size ||
      h->base % SHM_SLOT != 0 || h->span != shm_span(h->size)) {
    shm_say_begin();
    shm_say("its header is not a pinheap shared heap of this version");
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
  os_region_unmap(h, hsize);
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
    if (pid != 0 && pid != me && !shm_pid_gone(pid))
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
      shm_say_begin();
      shm_say("more than ");
      shm_say_dec(h->max_procs);
      shm_say(" processes joined it (the participant count, ");
      shm_say(shm_conf.ranks_from);
      shm_say(")");
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
  os_region_unmap(h, (size_t)h->span);
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

/* The shared heap's row of operations (source.c): what the heap calls
 * instead of naming these functions. */
static const mem_source_ops_t shm_source_ops = {
  .on = shm_on,
  .heap_create = shm_heap_create,
  .take = shm_slice_take,
  .back = shm_back,
  .post = shm_rel_post,
  .remove = shm_remove,
  .due = shm_rel_due,
  .poll = shm_rel_poll,
  .foreign = shm_foreign,
  .fallback_active = shm_fallback_active,
  .fallback_heap = shm_fallback_heap,
};

mstate_t *shm_start(void)
{
  shm_conf_eval(environ, &shm_conf);
  if (!shm_conf.on)
    return NULL;
  /* before any heap of the region: the heap calls it through this row */
  source_ops_set(MEM_SOURCE_SHARED, &shm_source_ops);
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
      shm_say_begin();
      shm_say("cannot create ");
      shm_say(shm_path);
      shm_say(" (errno ");
      shm_say_dec((uint64_t)errno);
      shm_say(")");
      return shm_fail();
    }
    fd = open(shm_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT && shm_now_ms() <= deadline)
        continue;                            /* unlinked meanwhile: try to create it */
      shm_say_begin();
      shm_say("cannot open ");
      shm_say(shm_path);
      shm_say(" (errno ");
      shm_say_dec((uint64_t)errno);
      shm_say(errno == ELOOP ? ": a symbolic link)" : ")");
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
      shm_say_begin();
      shm_say("the object kept going away or being replaced for ");
      shm_say_dec(shm_conf.timeout_ms);
      shm_say(" ms");
      return shm_fail();
    }
  }

  /* The free key is the region's, before any heap holds a waiting chunk. */
  if (!created) {
    if (chunk_free_key != shm_hdr->free_key && ms_any()) {
      shm_abandon(true);
      shm_say_begin();
      shm_say("it must start before any other heap of pinheap (an mspace was created before the "
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
    shm_say_begin();
    shm_say("the owner map already describes part of its address range");
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
    shm_say_begin();
    shm_say("the region is full: no room for this process's first arena");
    return shm_fail();
  }
  return ms;
}
