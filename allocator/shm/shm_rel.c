/*
 * shm_rel.c -- releases every process hears: pages of the region's free
 * space given back only once every process attached has told its
 * listeners (a ring of releases in the header).  Main entry points:
 * shm_rel_post(), shm_rel_due(), shm_rel_poll().
 */
#include "allocator/shm/shm_region.h"

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
bool shm_rel_held(shm_hdr_t *h, uint32_t i, uint64_t *s_p)
{
  uint64_t t = atomic_load_explicit(&h->rel[i].turn, memory_order_acquire);
  *s_p = t - 1;
  return t % SHM_RING == (i + 1) % SHM_RING;
}

/* Frees the slot of entry s, unless someone did first. */
void shm_rel_retire(shm_rel_t *e, uint64_t s)
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
    if (pid == 0 || shm_pid_gone(pid))
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
    else if (!shm_pid_gone(pid))
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
