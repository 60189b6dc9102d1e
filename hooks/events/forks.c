/*
 * forks.c -- the hooks' fork handler: one pthread_atfork registration,
 * whose child part frees, file by file, the locks of the hooks that have
 * no prefork handler.  Main entry point: forks_init().
 *
 * Why child-only.  A lock taken before fork (glibc's way: prefork takes
 * it, the parent releases it, the child makes it new) makes fork wait for
 * whoever holds it, and the hooks' locks that lack a handler are held
 * across long work (the self-test, the installation: milliseconds) and
 * across calls that reach the application (release listeners, event
 * handlers) or other libraries (libucm, libfabric, ld.so), which may fork
 * themselves: prefork, run by the forking thread, would then wait for
 * that very thread.  And the handlers that do take locks before fork
 * (events.c, release.c, reloc.c, the allocator's) are registered lazily,
 * at their first use, so their order against a new prefork could not be
 * fixed: a prefork waiting for a thread that waits for a lock an earlier
 * prefork took deadlocks.  A child handler waits for nothing.
 *
 * What it costs: the child's copy of what the lost thread was changing.
 * Each file's *_fork_child() makes that usable before freeing its lock --
 * the work is published last everywhere here, so the child finds it not
 * done and does it again (decision, self-test, feeds), or keeps what was
 * done and says so (installation), or widens what it cannot trust
 * (libfabric's hulls).  hooks/README.md ("Fork") lists every lock of
 * hooks/ and allocator/ and its treatment.
 */
#include "hooks/decide/dispatch.h"

#include <pthread.h>

#include "hooks/intercept/patch.h"
#include "hooks/intercept/peers.h"
#include "hooks/intercept/reloc.h"
#include "allocator/base/startup.h"

/* In the child only the forking thread runs, so the order matters only
 * for readability: outermost work first (the decision, the installation
 * and the self-test, which call into the rest), then the feeds, then the
 * set-up locks of the patchers.  None of them takes a lock. */
__attribute__((cold)) static void forks_child(void)
{
  dispatch_fork_child();
  install_fork_child();
  selftest_fork_child();
  patch_fork_child();
  ucx_fork_child();
  ompi_fork_child();
  fabric_fork_child();
  copies_fork_child();
  peers_fork_child();
  reloc_fork_child();
}

PH_STARTUP void forks_init(void)
{
  PH_HOT_DATA static int forks_registered;

  if (ph_likely(__atomic_load_n(&forks_registered, __ATOMIC_ACQUIRE)) ||
      __atomic_exchange_n(&forks_registered, 1, __ATOMIC_ACQ_REL))
    return;
  /* pthread_atfork allocates under glibc's lock of the handler list: the
   * allocator is started first, or its start (front_init registers its
   * own handlers) inside that allocation would wait for that lock. */
  if (__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) == DISPATCH_ENABLED)
    front_init();
  ph_atfork(NULL, NULL, forks_child);
}
