/*
 * ompi.c -- joins pinheap's memory events and Open MPI's memory hooks
 * (libopen-pal's opal_mem_hooks_*), both ways, so that Open MPI's
 * registration caches (rcache/grdma, and libfabric's through the monitor
 * Open MPI exports to it) hear every release pinheap sees, and pinheap's
 * handlers every release Open MPI's patcher sees.  Main entry point:
 * ompi_feed_attach(), from feeds_attach() (after installation, after each
 * dlopen the relocation patcher wraps, and from the self-test).
 *
 * libopen-pal is found at run time (no build dependency): an object whose
 * file name starts with "libopen-pal.so" among the loaded ones, opened
 * again with RTLD_NOLOAD (that reference keeps it loaded while it is fed),
 * or its functions resolved by the process (Open MPI linked statically).
 *
 * Feeding.  A VM_UNMAPPED handler of priority 0 calls
 * opal_mem_hooks_release_hook(addr, len, from_alloc) before the range goes,
 * from_alloc being 1 for pinheap's allocator's own releases (Open MPI's
 * callbacks must then not allocate).  Before opal_mem_hooks_init and after
 * opal_mem_hooks_finalize that call returns at once: Open MPI runs its
 * callbacks only while some are registered.
 *
 * Taking.  Open MPI's patcher (memory/patcher, opened when a registration
 * cache is created) rewrites the entry of whatever `munmap` & co. its
 * dlsym finds -- libc's, over pinheap's own patch, or pinheap's interposer
 * -- with a jump to hooks that tell Open MPI's callbacks and make the raw
 * system call: those calls no longer reach pinheap.  So pinheap registers
 * a callback of its own (opal_mem_hooks_register_release) that brings
 * Open MPI's releases into its chain.  Open MPI accepts callbacks only once
 * its hooks are on (opal_mem_hooks_set_support), and the patcher rewrites
 * right after turning them on: pinheap points libopen-pal's call of
 * opal_mem_hooks_set_support at a wrapper (relocation patching), which
 * registers the callback in that moment; each attach registers it too when
 * the hooks are on already (pinheap loaded late, PINHEAP_PATCH=0).  A
 * libopen-pal with no memory/patcher (pinheap its memory component: Open
 * MPI builds one) has nothing to take: no callback, no wrapper, and so no
 * relocation pass of its own at start-up.
 *
 * Once each.  A per-thread mark of the range crossing from one side to the
 * other keeps it from coming back; and pinheap's own system calls never go
 * through Open MPI's hooks on libc (peers_exempt), since the feed has told
 * Open MPI already.
 */
#include "hooks/decide/dispatch.h"

#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "allocator/heap/chunk.h"     /* ph_lock */
#include "hooks/events/events.h"
#include "config/params.h"
#include "hooks/intercept/peers.h"
#include "pinheap.h"
#include "hooks/intercept/reloc.h"
#include "allocator/base/startup.h"

/* opal/memoryhooks/memory.h, stable since Open MPI 1.3 */
#define OMPI_FREE_SUPPORT   0x1
#define OMPI_MUNMAP_SUPPORT 0x2
#define OMPI_SUCCESS        0

typedef void ompi_release_hook_fn(void *buf, size_t length, bool from_alloc);
typedef void ompi_callback_fn(void *buf, size_t length, void *cbdata, bool from_alloc);
typedef int ompi_register_fn(ompi_callback_fn *fn, void *cbdata);
typedef int ompi_support_fn(void);
typedef void ompi_set_support_fn(int support);

/* Fork: held for a few stores, ompi_found last; a child forked meanwhile
 * frees it (ompi_fork_child) and, finding nothing published, attaches
 * again. */
static ph_lock_t ompi_lock;
static int ompi_found;                   /* 1 once fed; under ompi_lock, read atomically */
static ompi_release_hook_fn *ompi_release_hook;
static ompi_register_fn *ompi_register;
static ompi_support_fn *ompi_support;
static int ompi_taking;                  /* pinheap's callback is registered with Open MPI */
static int ompi_wrapped;                 /* set_support goes through ompi_set_support */
static int ompi_no_patcher;              /* libopen-pal holds no memory/patcher */
static char ompi_path[FEEDS_PATH_MAX];
static void ompi_set_support(int support);
static reloc_entry_t ompi_reloc[1] = {
  { .name = "opal_mem_hooks_set_support", .replacement = (void *)ompi_set_support } };

/* The range crossing from one side to the other on this thread. */
static __thread void *ompi_x_addr __attribute__((tls_model("initial-exec")));
static __thread size_t ompi_x_size __attribute__((tls_model("initial-exec")));

/* pinheap's releases, to Open MPI's callbacks. */
static int ompi_feed(int type, pinheap_event_t *ev, void *arg)
{
  void *addr = ev->vm_unmapped.address;
  size_t size = ev->vm_unmapped.size;
  (void)type, (void)arg;
  if (addr == ompi_x_addr && size == ompi_x_size)
    return PINHEAP_EVENT_PASS;          /* it came from Open MPI */
  void *saved_addr = ompi_x_addr;
  size_t saved_size = ompi_x_size;
  ompi_x_addr = addr;
  ompi_x_size = size;
  ompi_release_hook(addr, size, ev->vm_unmapped.source == PINHEAP_EVENT_SOURCE_ALLOCATOR);
  ompi_x_addr = saved_addr;
  ompi_x_size = saved_size;
  return PINHEAP_EVENT_PASS;
}

/* Open MPI's releases (its patcher's hooks), into pinheap's chain. */
static void ompi_take(void *buf, size_t length, void *cbdata, bool from_alloc)
{
  (void)cbdata, (void)from_alloc;
  if (buf == ompi_x_addr && length == ompi_x_size)
    return;                             /* pinheap's own, fed to Open MPI */
  void *saved_addr = ompi_x_addr;
  size_t saved_size = ompi_x_size;
  ompi_x_addr = buf;
  ompi_x_size = length;
  events_vm_unmapped(buf, length, PINHEAP_EVENT_SOURCE_APP);
  ompi_x_addr = saved_addr;
  ompi_x_size = saved_size;
}

/* Registers ompi_take once Open MPI's hooks are on (Open MPI refuses
 * callbacks before); again after a finalize emptied the list. */
static void ompi_take_start(void)
{
  if (ompi_no_patcher || !(ompi_support() & (OMPI_FREE_SUPPORT | OMPI_MUNMAP_SUPPORT)))
    return;
  int rc = ompi_register(ompi_take, NULL);   /* OPAL_EXISTS when it is there */
  if (rc == OMPI_SUCCESS)
    __atomic_store_n(&ompi_taking, 1, __ATOMIC_RELEASE);
}

/* libopen-pal's calls of opal_mem_hooks_set_support come here: Open MPI's
 * hooks are being turned on, its patcher is about to rewrite entries. */
static void ompi_set_support(int support)
{
  ompi_set_support_fn *real = (ompi_set_support_fn *)ompi_reloc[0].original;
  if (real != NULL)
    real(support);
  if (__atomic_load_n(&ompi_found, __ATOMIC_ACQUIRE))
    ompi_take_start();
}

/* libopen-pal's four functions from handle h; 0 when one is missing. */
static int ompi_resolve(void *h, ompi_release_hook_fn **hook_p,
                                   ompi_register_fn **reg_p, ompi_support_fn **sup_p,
                                   void **set_p)
{
  *hook_p = (ompi_release_hook_fn *)dlsym(h, "opal_mem_hooks_release_hook");
  *reg_p = *hook_p != NULL ? (ompi_register_fn *)dlsym(h, "opal_mem_hooks_register_release") : NULL;
  *sup_p = *reg_p != NULL ? (ompi_support_fn *)dlsym(h, "opal_mem_hooks_support_level") : NULL;
  *set_p = *sup_p != NULL ? dlsym(h, "opal_mem_hooks_set_support") : NULL;
  return *set_p != NULL;
}

/* Does libopen-pal (handle h) hold Open MPI's memory/patcher?  Open MPI
 * builds one memory component: when it is pinheap (or none), no patcher
 * rewrites munmap & co. and nothing turns Open MPI's hooks on but
 * pinheap's own component, so there is nothing to take and no
 * set_support to wrap -- and no second walk of every loaded object's
 * relocations at start-up (in an Open MPI rank with memory/pinheap, 360k
 * instructions, over 40% of what pinheap adds before main). */
static bool ompi_has_patcher(void *h)
{
  return dlsym(h, "mca_memory_patcher_component") != NULL;
}

/* libopen-pal is in the process (handle h, or RTLD_DEFAULT when linked
 * statically): feed it, and take its events once its hooks are on. */
static void ompi_attach_found(void *h, const char *path)
{
  ompi_release_hook_fn *hook;
  ompi_register_fn *reg;
  ompi_support_fn *sup;
  void *set;
  if (!ompi_resolve(h, &hook, &reg, &sup, &set)) {
    if (h != RTLD_DEFAULT)
      dlclose(h);
    return;
  }
  bool patcher = ompi_has_patcher(h);
  ph_lock(&ompi_lock);
  if (ompi_found) {
    ph_unlock(&ompi_lock);
    if (h != RTLD_DEFAULT)
      dlclose(h);              /* another thread attached: drop this reference */
    return;
  }
  ompi_no_patcher = !patcher;
  ompi_release_hook = hook;
  ompi_register = reg;
  ompi_support = sup;
  ompi_reloc[0].original = set;
  snprintf(ompi_path, sizeof(ompi_path), "%s", path);
  __atomic_store_n(&ompi_found, 1, __ATOMIC_RELEASE);
  ph_unlock(&ompi_lock);
  peers_exempt((void *)hook);  /* its hooks on libc hear pinheap's releases from the feed */
  if (patcher && params_get()->v[PARAM_PATCH].value != 0 &&
      reloc_install(ompi_reloc, 1) == 0 && ompi_reloc[0].slots > 0)
    __atomic_store_n(&ompi_wrapped, 1, __ATOMIC_RELEASE);
  PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_UNMAPPED, 0, ompi_feed, NULL);
  ompi_take_start();           /* Open MPI's hooks may be on already */
}

void ompi_fork_child(void)
{
  ph_lock_reset(&ompi_lock);
}

void ompi_feed_attach(void)
{
  if (__atomic_load_n(&ompi_found, __ATOMIC_ACQUIRE)) {
    if (!__atomic_load_n(&ompi_taking, __ATOMIC_ACQUIRE))
      ompi_take_start();
    return;
  }
  char path[FEEDS_PATH_MAX];
  void *h = feeds_open("libopen-pal.so", path);
  if (h == NULL)
    return;
  ompi_attach_found(h, path);
}

int ompi_feed_describe(char *buf, size_t size)
{
  if (!__atomic_load_n(&ompi_found, __ATOMIC_ACQUIRE)) {
    if (size > 0)
      buf[0] = '\0';
    return 0;
  }
  int taking = __atomic_load_n(&ompi_taking, __ATOMIC_ACQUIRE);
  return snprintf(buf, size,
                  "Open MPI's memory hooks (%s) hear every release pinheap sees "
                  "(opal_mem_hooks_release_hook, before the memory goes)%s.",
                  ompi_path,
                  taking ? ", and pinheap hears the releases Open MPI's patcher sees"
                  : ompi_no_patcher
                      ? "; it holds no memory/patcher (pinheap is its memory component, or it "
                        "has none): no other part of it sees releases"
                  : __atomic_load_n(&ompi_wrapped, __ATOMIC_ACQUIRE)
                      ? "; Open MPI's own hooks are not on yet: pinheap takes their releases "
                        "from the moment they are"
                      : "; Open MPI's own hooks are not on");
}
