/*
 * shm_fork.c -- the shared heap at fork and at exit: the parent's snapshot
 * of the part in use, the child's private copy moved over the region, and
 * the last process's unlink.  Main entry points: shm_fork_prepare(),
 * shm_fork_parent(), shm_fork_child() (init.c's fork handlers) and
 * shm_leave() (init.c's destructor).
 */
#include "allocator/shm/shm_region.h"

/* ---- fork and exit ------------------------------------------------------- */

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
    os_region_populate(snap + data, end - (size_t)data);
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
  void *snap = os_region_map(NULL, used, PROT_READ | PROT_WRITE,
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
    os_region_unmap(shm_snap, shm_snap_len);
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
    copy = os_region_map(NULL, used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
    if (copy == MAP_FAILED)
      ph_fatal("fork", "no memory for the child's copy of the shared heap at", h);
    shm_snap_copy(h, copy, used);
  }
  if (!os_region_move(copy, used, h))
    ph_fatal("fork", "cannot move the child's copy of the shared heap to", h);
  shm_snap = NULL;
  /* beyond the part in use: nothing of the job's, and no new slices */
  if (h->size > used)
    os_region_map((char *)h + used, (size_t)h->size - used, PROT_NONE,
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
void shm_leave(void)
{
  shm_hdr_t *h = shm_hdr;

  if (h == NULL || shm_left || shm_me < 0)
    return;
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
