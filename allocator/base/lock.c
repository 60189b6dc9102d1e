/*
 * lock.c -- the slow paths of the heap lock (ph_lock_t; the fast paths are
 * inline in chunk.h): spin, then sleep on a futex.  Main entry points:
 * ph_lock_slow(), ph_lock_wake().
 */
#include "allocator/base/base.h"

#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>

/* The heap lock (ph_lock_t, inline in chunk.h) is a futex lock: held is
 * 0 (free), 1 (held) or 2 (held, and a thread may be asleep on it).  A
 * thread that finds it held spins for a while, since most holds are
 * short; then it marks it 2 and sleeps until the word changes.  The holder
 * that releases a 2 wakes one sleeper, which takes the lock as 2 again (it
 * cannot know whether others still sleep): at worst one wake too many,
 * never one too few.  With more threads than CPUs the holder may be
 * preempted, and sleeping then lets it run instead of the spinners.
 *
 * The futex calls are the shared kind (no FUTEX_PRIVATE_FLAG): the shared
 * heap's locks live in its region and are taken by several processes.  A
 * fork child's copies are held by the forking thread, and nobody sleeps on
 * them in the child: releasing them needs no wake (one is harmless). */
#define PH_LOCK_SPINS 128

static void lock_futex(ph_lock_t *l, int op, int val)
{
  int saved = errno;                      /* EAGAIN, EINTR: the caller looks again */
  ph_syscall(SYS_futex, &l->held, op, val, NULL, NULL, 0);
  errno = saved;
}

void ph_lock_slow(ph_lock_t *l)
{
  for (unsigned spins = 0; spins < PH_LOCK_SPINS; spins++) {
    int v = atomic_load_explicit(&l->held, memory_order_relaxed);
    if (v == 0 && atomic_compare_exchange_weak_explicit(&l->held, &v, 1, memory_order_acquire,
                                                        memory_order_relaxed))
      return;
    if (v == 2)
      break;                              /* others sleep already: join them */
    __builtin_ia32_pause();
  }
  while (atomic_exchange_explicit(&l->held, 2, memory_order_acquire) != 0)
    lock_futex(l, FUTEX_WAIT, 2);
}

void ph_lock_wake(ph_lock_t *l)
{
  lock_futex(l, FUTEX_WAKE, 1);
}
