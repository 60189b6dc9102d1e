/*
 * ucx.c -- hands pinheap's derived memory events to UCX's libucm when it
 * is in the process, and takes UCX's, so that UCX's registration caches
 * hear every release pinheap sees and pinheap's handlers every release UCX
 * sees, with no call hooked twice.  Main entry point: ucx_feed_attach(),
 * after installation, after each dlopen the relocation patcher wraps, and
 * from the self-test.
 *
 * libucm is found at run time (no build dependency): an object whose file
 * name starts with "libucm.so" among the loaded ones, opened again with
 * RTLD_NOLOAD (that reference keeps it loaded while it is fed), or its
 * functions resolved by the process (UCX linked statically).  Used:
 * ucm_vm_mmap and ucm_vm_munmap (libucm dispatches VM_MAPPED and
 * VM_UNMAPPED to its handlers), ucm_set_external_event and
 * ucm_set_event_handler.
 *
 * Two ways, chosen once:
 *  - external: pinheap sees every call of the program to a memory call
 *    (installed and verified, no entry of pinheap's rewritten by UCX) and
 *    glibc's own releases are seen (pinheap serves malloc, or libc's entries
 *    jump to pinheap by code patching, or to UCX's hooks).  pinheap declares VM_MAPPED and VM_UNMAPPED
 *    external events of libucm and feeds it all of its events: a UCX
 *    handler set after that installs no hook of its own, so nothing is
 *    hooked twice and UCX's test of its own hooks cannot fail against
 *    pinheap's.
 *  - shared: otherwise (UCX rewrote the entry of pinheap's interposing
 *    munmap or of libc's, or pinheap does not see everything -- glibc's
 *    malloc in use).  UCX keeps its hooks and pinheap installs no other; a
 *    UCX handler forwards UCX's events into pinheap's chain, and pinheap
 *    feeds UCX the rest (its allocator's releases, which go to the kernel
 *    directly).  A per-thread mark of the range crossing over keeps an
 *    event from coming back: each side hears each release once.
 * Which entry points UCX rewrote is read from their first bytes (a jump out
 * of the object that defines them, into neither pinheap nor libc), again at
 * each later attach while fed as external: UCX's constructor may run after
 * pinheap's.
 */
#include "hooks/decide/dispatch.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "allocator/heap/chunk.h"     /* ph_lock */
#include "hooks/events/events.h"
#include "config/params.h"
#include "hooks/intercept/patch.h"
#include "hooks/intercept/peers.h"
#include "hooks/intercept/reloc.h"
#include "pinheap.h"
#include "allocator/base/startup.h"

/* libucm's event bits (ucm_event_type_t, stable since UCX 1.3) */
#define UCX_EVENT_VM_MAPPED   (1 << 16)
#define UCX_EVENT_VM_UNMAPPED (1 << 17)
#define UCX_EVENT_SHMDT       (1 << 4)
#define UCX_EVENT_MADVISE     (1 << 6)

typedef void ucx_vm_fn(void *addr, size_t length);
typedef void ucx_external_fn(int events);
/* libucm's ucm_event_t starts, for the VM events, with address and size */
typedef struct ucx_vm_event_s {
  void *address;
  size_t size;
} ucx_vm_event_t;
/* ... for SHMDT, result and address; for MADVISE, result, range, advice */
typedef struct ucx_shmdt_event_s {
  int result;
  const void *shmaddr;
} ucx_shmdt_event_t;
typedef struct ucx_madvise_event_s {
  int result;
  void *addr;
  size_t length;
  int advice;
} ucx_madvise_event_t;
typedef void ucx_callback_fn(int event_type, ucx_vm_event_t *event, void *arg);
typedef int ucx_set_handler_fn(int events, int priority, ucx_callback_fn *cb, void *arg);

enum { UCX_NOT_FOUND = 0, UCX_FED_EXTERNAL, UCX_SHARED };

/* Fork: held across a call into libucm (ucm_set_external_event, its own
 * locks), so not taken before fork.  ucx_mode is published last: a child
 * forked while another thread attached frees the lock (ucx_fork_child)
 * and attaches again at its next attach point (the second
 * ucm_set_external_event sets the same bits). */
static ph_lock_t ucx_lock;
static int ucx_mode;                 /* UCX_*; set once, under ucx_lock */
static ucx_vm_fn *ucx_vm_mmap;
static ucx_vm_fn *ucx_vm_munmap;
static char ucx_path[FEEDS_PATH_MAX];
static ucx_set_handler_fn *ucx_set_handler;
static int ucx_taken;                /* UCX_TAKEN_* found */
static int ucx_forwarded;            /* ucx_forward is UCX's handler */
/* The range of the event crossing from one side to the other on this
 * thread, which must not come back; a release a handler causes meanwhile
 * (another range) crosses as usual. */
static __thread void *ucx_x_addr __attribute__((tls_model("initial-exec")));
static __thread size_t ucx_x_size __attribute__((tls_model("initial-exec")));

static int ucx_handler(int type, pinheap_event_t *ev, void *arg)
{
  void *addr = type == PINHEAP_EVENT_VM_UNMAPPED ? ev->vm_unmapped.address : ev->vm_mapped.address;
  size_t size = type == PINHEAP_EVENT_VM_UNMAPPED ? ev->vm_unmapped.size : ev->vm_mapped.size;
  (void)arg;
  if (addr == ucx_x_addr && size == ucx_x_size)
    return PINHEAP_EVENT_PASS;       /* it came from UCX */
  void *saved_addr = ucx_x_addr;
  size_t saved_size = ucx_x_size;
  ucx_x_addr = addr;                 /* UCX hands it to ucx_forward too */
  ucx_x_size = size;
  if (type == PINHEAP_EVENT_VM_UNMAPPED)
    ucx_vm_munmap(addr, size);
  else
    ucx_vm_mmap(addr, size);
  ucx_x_addr = saved_addr;
  ucx_x_size = saved_size;
  return PINHEAP_EVENT_PASS;
}

/* UCX's VM events, into pinheap's chain. */
static void ucx_forward(int type, ucx_vm_event_t *ev, void *arg)
{
  (void)arg;
  if (ev->address == ucx_x_addr && ev->size == ucx_x_size)
    return;                          /* pinheap's own, fed to UCX */
  void *saved_addr = ucx_x_addr;
  size_t saved_size = ucx_x_size;
  ucx_x_addr = ev->address;
  ucx_x_size = ev->size;
  if (type == UCX_EVENT_VM_UNMAPPED)
    events_vm_unmapped(ev->address, ev->size, PINHEAP_EVENT_SOURCE_APP);
  else if (type == UCX_EVENT_VM_MAPPED)
    events_vm_mapped(ev->address, ev->size, PINHEAP_EVENT_SOURCE_APP);
  ucx_x_addr = saved_addr;
  ucx_x_size = saved_size;
}

/* The madvise calls that reach UCX's hooks (shared), before the call is
 * made.  libucm announces DONTNEED, REMOVE and FREE as releases; advice
 * that takes pages away too and that it does not know (GUARD_INSTALL of
 * Linux 6.13, DONTNEED_LOCKED) is announced here, to UCX's handlers first
 * (ucx_forward then hands it to pinheap's chain): in the shared way
 * pinheap's own madvise is not called at all where UCX rewrote its entry
 * (libucm makes the system call itself). */
static void ucx_madvise_seen(int type, ucx_vm_event_t *ev, void *arg)
{
  const ucx_madvise_event_t *m = (const ucx_madvise_event_t *)(void *)ev;
  (void)arg;
  if (type != UCX_EVENT_MADVISE || !events_advice_releases(m->advice))
    return;
  switch (m->advice) {
  case MADV_DONTNEED:
  case MADV_REMOVE:
  case MADV_FREE:
    return;                          /* libucm announced it itself */
  default:
    break;
  }
  size_t len = events_page_len(m->addr, m->length);
  if (len != 0)                      /* (0: the kernel refuses it, nothing leaves) */
    ucx_vm_munmap(m->addr, len);
}

/* The shmdt calls that reach UCX's hooks (shared), before the call.
 * libucm announces the mapping that starts at the address (the size it
 * recorded at shmat, or that mapping's); a segment split into fragments
 * (mprotect, a partial munmap) loses them all.  Every range the call
 * detaches is announced to UCX's handlers here (the first one again: a
 * second invalidation, never a miss). */
static void ucx_shmdt_release(void *start, size_t len)
{
  ucx_vm_munmap(start, len);
}

static void ucx_shmdt_seen(int type, ucx_vm_event_t *ev, void *arg)
{
  (void)arg;
  if (type == UCX_EVENT_SHMDT)
    events_shmdt_ranges(((const ucx_shmdt_event_t *)(void *)ev)->shmaddr, ucx_shmdt_release);
}

#if defined(__x86_64__)
/* 1 when the entry fn, of the object at base, now jumps out of that object
 * and out of pinheap's (self). */
static int ucx_entry_taken(const void *fn, const void *self)
{
  Dl_info at, there;
  if (fn == NULL || dladdr(fn, &at) == 0)
    return 0;
  const char *kind;
  const void *t = patch_jump_target(fn, &kind);
  if (t == NULL)
    return 0;
  if (dladdr(t, &there) == 0)
    return 1;                    /* into anonymous memory: a trampoline */
  return there.dli_fbase != at.dli_fbase && there.dli_fbase != self;
}
#endif

/* Which entry points for the memory calls now jump somewhere neither
 * pinheap nor libc is -- rewritten by someone, UCX's libucm by its presence:
 * UCX_TAKEN_SELF for pinheap's own (the program's calls no longer reach
 * pinheap), UCX_TAKEN_LIBC for libc's (glibc's internal calls are seen). */
#define UCX_TAKEN_SELF 1
#define UCX_TAKEN_LIBC 2
static int ucx_entries_taken(void)
{
  Dl_info self;
  int taken = 0;
  if (replace_symbols == NULL || dladdr((void *)&ucx_feed_attach, &self) == 0)
    return 0;
#if defined(__x86_64__)
  void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  /* the entries relocation patching points slots and libc's symbol table
   * at (what dlsym finds for "munmap" once libc's definitions are patched) */
  for (unsigned i = 0; i < events_symbols_count; i++)
    if (ucx_entry_taken(events_symbols[i].entry, self.dli_fbase))
      taken |= UCX_TAKEN_SELF;
  for (unsigned i = 0; i < replace_symbols_count; i++) {
    pinheap_install_info_t ii = { 0 };
    if (replace_symbols[i].event == 0)
      continue;
    if (ucx_entry_taken(replace_symbols[i].self, self.dli_fbase))
      taken |= UCX_TAKEN_SELF;
    /* libc's entry: not when the jump is pinheap's own (code patching,
     * perhaps through a trampoline page in anonymous memory) */
    if (PINHEAP_NAME(install_info)(i, &ii) == 0 && ii.code == PINHEAP_CODE_PATCHED)
      continue;
    if (libc != NULL && ucx_entry_taken(dlsym(libc, replace_symbols[i].name), self.dli_fbase))
      taken |= UCX_TAKEN_LIBC;
  }
  if (libc != NULL)
    dlclose(libc);
#endif
  return taken;
}

/* Shared: UCX's VM events into pinheap's chain, and the madvise and shmdt
 * calls UCX's hooks take (priority -1: before libucm's handler at 0 makes
 * the call). */
static void ucx_take(ucx_set_handler_fn *set_handler)
{
  set_handler(UCX_EVENT_VM_MAPPED | UCX_EVENT_VM_UNMAPPED, -1, ucx_forward, NULL);
  set_handler(UCX_EVENT_MADVISE, -1, ucx_madvise_seen, NULL);
  set_handler(UCX_EVENT_SHMDT, -1, ucx_shmdt_seen, NULL);
}

/* Fed as external, but UCX rewrote pinheap's entries since (its constructor
 * ran after pinheap's; UCX hooks munmap for its own purposes, whatever the
 * external events): the program's calls reach UCX's hooks only, so pinheap
 * takes UCX's events from now on. */
static void ucx_check_taken(void)
{
  if (__atomic_load_n(&ucx_forwarded, __ATOMIC_ACQUIRE) ||
      !(ucx_entries_taken() & UCX_TAKEN_SELF))
    return;
  ph_lock(&ucx_lock);
  int first = !ucx_forwarded;
  __atomic_store_n(&ucx_forwarded, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&ucx_taken, ucx_taken | UCX_TAKEN_SELF, __ATOMIC_RELAXED);
  ph_unlock(&ucx_lock);
  if (first)
    ucx_take(ucx_set_handler);
}

void ucx_fork_child(void)
{
  ph_lock_reset(&ucx_lock);
}

void ucx_feed_attach(void)
{
  if (params_get()->v[PARAM_EVENTS].value == 0)
    return;                    /* PINHEAP_EVENTS=0: no events to feed, none taken */
  int mode = __atomic_load_n(&ucx_mode, __ATOMIC_ACQUIRE);
  if (mode == UCX_FED_EXTERNAL) {
    ucx_check_taken();
    return;
  }
  if (mode != UCX_NOT_FOUND)
    return;
  char path[FEEDS_PATH_MAX];
  void *h = feeds_open("libucm.so", path);
  if (h == NULL)
    return;
  ucx_vm_fn *vm_mmap = (ucx_vm_fn *)dlsym(h, "ucm_vm_mmap");
  ucx_vm_fn *vm_munmap = vm_mmap != NULL ? (ucx_vm_fn *)dlsym(h, "ucm_vm_munmap") : NULL;
  ucx_external_fn *external =
      vm_munmap != NULL ? (ucx_external_fn *)dlsym(h, "ucm_set_external_event") : NULL;
  ucx_set_handler_fn *set_handler =
      external != NULL ? (ucx_set_handler_fn *)dlsym(h, "ucm_set_event_handler") : NULL;
  if (vm_mmap == NULL || vm_munmap == NULL || external == NULL || set_handler == NULL) {
    if (h != RTLD_DEFAULT)
      dlclose(h);
    return;
  }
  /* external: pinheap sees every call the program makes, and glibc's
   * internal releases are seen by someone (pinheap's malloc is in use,
   * pinheap code-patched libc's entries, or UCX hooked them) */
  int taken = ucx_entries_taken();
  int complete = !(taken & UCX_TAKEN_SELF) && install_calls_seen() &&
                 (install_malloc_served_enabled() || install_glibc_releases_patched() ||
                  (taken & UCX_TAKEN_LIBC));
  ph_lock(&ucx_lock);
  if (ucx_mode != UCX_NOT_FOUND) {
    ph_unlock(&ucx_lock);
    if (h != RTLD_DEFAULT)
      dlclose(h);         /* another thread attached: drop this reference */
    return;
  }
  ucx_vm_mmap = vm_mmap;
  ucx_vm_munmap = vm_munmap;
  ucx_set_handler = set_handler;
  ucx_taken = taken;
  ucx_forwarded = !complete || taken != 0;
  snprintf(ucx_path, sizeof(ucx_path), "%s", path);
  if (complete)
    external(UCX_EVENT_VM_MAPPED | UCX_EVENT_VM_UNMAPPED);
  __atomic_store_n(&ucx_mode, complete ? UCX_FED_EXTERNAL : UCX_SHARED, __ATOMIC_RELEASE);
  ph_unlock(&ucx_lock);
  peers_exempt((void *)vm_mmap); /* its hooks on libc hear pinheap's calls from the feed */
  /* Priority 0, as release listeners; UCX's forwarder before the release.
   * Set after the external events, UCX's handler installs nothing. */
  PINHEAP_NAME(set_event_handler)(PINHEAP_EVENT_VM_MAPPED | PINHEAP_EVENT_VM_UNMAPPED, 0,
                                  ucx_handler, NULL);
  if (ucx_forwarded)
    ucx_take(set_handler);
}

int ucx_feed_describe(char *buf, size_t size)
{
  int mode = __atomic_load_n(&ucx_mode, __ATOMIC_ACQUIRE);
  int taken = __atomic_load_n(&ucx_taken, __ATOMIC_RELAXED);
  const char *hooks = (taken & UCX_TAKEN_SELF) ? "; UCX rewrote pinheap's own entry points for "
                                                 "the memory calls, so pinheap hears the "
                                                 "program's calls from UCX's hooks"
                      : (taken & UCX_TAKEN_LIBC) ? "; pinheap hears glibc's own releases from "
                                                   "UCX's hooks on libc's entry points"
                      : "";
  switch (mode) {
  case UCX_FED_EXTERNAL:
    return snprintf(buf, size,
                    "UCX's libucm (%s) hears every VM_MAPPED and VM_UNMAPPED pinheap sees, as "
                    "its external events, so it needs no hooks of its own for them%s.",
                    ucx_path, hooks);
  case UCX_SHARED:
    return snprintf(buf, size,
                    "UCX's libucm (%s) hears the releases pinheap sees, but keeps its own hooks "
                    "since pinheap does not see every release of this process (glibc's malloc "
                    "is in use); pinheap hears what UCX's hooks see%s.",
                    ucx_path, hooks);
  default:
    if (size > 0)
      buf[0] = '\0';
    return 0;
  }
}
