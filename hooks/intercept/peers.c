/*
 * peers.c -- pinheap's own system calls for the memory calls, made through
 * libc's entry point wherever someone else rewrote it, so that code
 * patchers pinheap does not know by name (a tool, a runtime's own patcher)
 * hear pinheap's releases as they hear glibc's.  Main entry points:
 * peers_munmap() & co. (peers.h), peers_find() and peers_snapshot() from
 * the installation.
 *
 * Why.  pinheap enters the kernel with raw system calls: its allocator's
 * releases (free of a large block, trim) and the last step of its entry
 * points (the program's munmap, which pinheap interposes).  A patcher that
 * rewrote libc's munmap -- the way Open MPI's patcher, UCX's libucm and
 * libfabric's monitors hear releases -- would never see them, and a
 * registration cache behind it would keep registrations for memory that
 * left.  So each such call first looks at libc's entry:
 *  - it holds what it held when pinheap last looked and nobody else's
 *    jump was there (libc's own code, or pinheap's jump): the raw system
 *    call, one 8-byte load and compare more than before;
 *  - otherwise it is decoded: no jump (libc's code put back), a jump into
 *    pinheap's own object, or into a consumer pinheap feeds directly
 *    (peers_exempt: libucm, libopen-pal) -- the raw call; any other jump --
 *    libc's entry is called, and the hook behind it makes the call.
 * A hook that calls pinheap's interposed munmap as its "original" comes
 * back into events.c for the same address: peers_returning() tells the
 * entry point to make the raw call and report nothing a second time.
 *
 * The ranges of pinheap's object and of exempt objects are read once
 * (dl_iterate_phdr), so the per-call check takes no lock and calls no
 * ld.so function.
 */
#include "hooks/intercept/peers.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "allocator/heap/chunk.h"     /* ph_lock */
#include "hooks/intercept/patch.h"
#include "hooks/intercept/reloc.h"
#include "allocator/base/startup.h"

enum { PEERS_MMAP, PEERS_MUNMAP, PEERS_MREMAP, PEERS_MADVISE, PEERS_SHMAT, PEERS_SHMDT,
       PEERS_BRK, PEERS_N };
static const char *const peers_names[PEERS_N] = { "mmap", "munmap", "mremap", "madvise",
                                                  "shmat", "shmdt", "brk" };

#define PEERS_EXEMPT_MAX 8

typedef struct peers_range_s {
  uintptr_t lo, hi;
} peers_range_t;

/* libc's entry points; entry is written once by peers_find */
PH_HOT_DATA static void *peers_entry[PEERS_N];
/* their first 8 bytes when nobody else's jump was there (0: someone's was) */
PH_HOT_DATA static uint64_t peers_plain[PEERS_N];
/* the last bytes decided on, and the decision (1: forward), for the
 * per-call check: written by any thread, read as seen, fwd, seen again */
static uint64_t peers_seen[PEERS_N];
static int peers_fwd[PEERS_N];
/* 1 where the snapshot saw pinheap's own jump */
static unsigned char peers_was_own[PEERS_N];
static peers_range_t peers_self;
static peers_range_t peers_exempts[PEERS_EXEMPT_MAX];
static int peers_nexempt;
/* Set-up only: a few stores, no call out.  Fork: a child forked while
 * another thread held it frees it (peers_fork_child); an entry or exempt
 * range not stored yet is looked for again by the next set-up call. */
static ph_lock_t peers_lock;

/* The call this thread forwards through a hook, if any: its address. */
static __thread int peers_busy __attribute__((tls_model("initial-exec")));
static __thread const void *peers_busy_addr __attribute__((tls_model("initial-exec")));

/* ======================================================================= */
/*  objects                                                                 */
/* ======================================================================= */

typedef struct peers_find_obj_s {
  uintptr_t addr;
  peers_range_t range;
} peers_find_obj_t;

/* The span of the PT_LOAD segments of the object that holds want->addr. */
static int peers_object_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  peers_find_obj_t *want = data;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  int holds = 0;
  (void)size;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
    lo = a < lo ? a : lo;
    hi = b > hi ? b : hi;
    holds |= want->addr >= a && want->addr < b;
  }
  if (!holds)
    return 0;
  want->range.lo = lo;
  want->range.hi = hi;
  return 1;
}

static peers_range_t peers_object_of(const void *addr)
{
  peers_find_obj_t want = { (uintptr_t)addr, { 0, 0 } };
  dl_iterate_phdr(peers_object_cb, &want);
  return want.range;
}

/* pinheap's own object, read the first time it is needed. */
static const peers_range_t *peers_self_range(void)
{
  if (__atomic_load_n(&peers_self.hi, __ATOMIC_ACQUIRE) == 0) {
    peers_range_t r = peers_object_of((const void *)&peers_self_range);
    __atomic_store_n(&peers_self.lo, r.lo, __ATOMIC_RELAXED);
    __atomic_store_n(&peers_self.hi, r.hi, __ATOMIC_RELEASE);
  }
  return &peers_self;
}

static int peers_in(const peers_range_t *r, const void *addr)
{
  return (uintptr_t)addr >= r->lo && (uintptr_t)addr < r->hi;
}

void peers_fork_child(void)
{
  ph_lock_reset(&peers_lock);
}

void peers_exempt(const void *addr)
{
  peers_range_t r = peers_object_of(addr);
  if (r.hi == 0)
    return;
  ph_lock(&peers_lock);
  int known = 0;
  for (int i = 0; i < peers_nexempt; i++)
    known |= peers_exempts[i].lo == r.lo;
  if (!known && peers_nexempt < PEERS_EXEMPT_MAX) {
    peers_exempts[peers_nexempt] = r;
    __atomic_store_n(&peers_nexempt, peers_nexempt + 1, __ATOMIC_RELEASE);
    for (int i = 0; i < PEERS_N; i++)      /* decided without it: again */
      __atomic_store_n(&peers_seen[i], 0, __ATOMIC_RELEASE);
  }
  ph_unlock(&peers_lock);
}

#if defined(__x86_64__)

/* ======================================================================= */
/*  whose jump                                                              */
/* ======================================================================= */

static uint64_t peers_load8(const void *p)
{
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

/* Where the jump at code c finally lands: through one trampoline in
 * anonymous memory (pinheap's own, or a patcher's far jump), or NULL when
 * c starts with no jump. */
static const void *peers_jump_end(const void *c)
{
  const char *kind;
  const void *t = patch_jump_target(c, &kind);
  if (t == NULL || t == c)
    return t;
  if (!peers_in(peers_self_range(), t) && peers_object_of(t).hi == 0) {
    const void *t2 = patch_jump_target(t, &kind);
    if (t2 != NULL && t2 != t)
      return t2;
  }
  return t;
}

PH_STARTUP bool peers_exempt_at(const void *addr)
{
  int n = __atomic_load_n(&peers_nexempt, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (peers_in(&peers_exempts[i], addr))
      return true;
  return false;
}

/* 1 when the jump at the start of entry goes to someone who must hear
 * pinheap's call: not pinheap, not an exempt consumer. */
static int peers_foreign(const void *entry)
{
  const void *t = peers_jump_end(entry);
  return t != NULL && t != entry && !peers_in(peers_self_range(), t) && !peers_exempt_at(t);
}

/* The decision for bytes now at libc's entry for call i, cached: the
 * bytes changed since pinheap looked (someone patched, or unpatched). */
static PH_NOINLINE void *peers_decide(int i, void *e, uint64_t now)
{
  if (__atomic_load_n(&peers_seen[i], __ATOMIC_ACQUIRE) == now) {
    int fwd = __atomic_load_n(&peers_fwd[i], __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&peers_seen[i], __ATOMIC_RELAXED) == now)
      return fwd ? e : NULL;
  }
  int fwd = peers_foreign(e);
  __atomic_store_n(&peers_seen[i], 0, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&peers_fwd[i], fwd, __ATOMIC_RELAXED);
  __atomic_store_n(&peers_seen[i], now, __ATOMIC_RELEASE);
  return fwd ? e : NULL;
}

/* libc's entry for call i when the call must go through it, else NULL:
 * two loads and a compare while libc's entry holds what pinheap saw. */
PH_HOT static void *peers_route(int i, const void *addr)
{
  void *e = __atomic_load_n(&peers_entry[i], __ATOMIC_RELAXED);
  if (e == NULL)
    return NULL;
  uint64_t now = peers_load8(e);
  if (ph_likely(now == __atomic_load_n(&peers_plain[i], __ATOMIC_RELAXED)) ||
      (peers_busy && peers_busy_addr == addr))
    return NULL;
  return peers_decide(i, e, now);
}

/* ======================================================================= */
/*  set-up                                                                  */
/* ======================================================================= */

PH_STARTUP void peers_find(const patch_site_t *found, size_t n)
{
  PH_COLD_BSS static char texts[PEERS_N][PATCH_TEXT_MAX];
  patch_site_t sites[PEERS_N];

  if (__atomic_load_n(&peers_entry[PEERS_MUNMAP], __ATOMIC_ACQUIRE) != NULL)
    return;
  memset(sites, 0, sizeof(sites));
  int missing = 0;
  for (int i = 0; i < PEERS_N; i++) {
    for (size_t k = 0; k < n && sites[i].entry == NULL; k++)
      if (found[k].name != NULL && found[k].entry != NULL &&
          reloc_streq(found[k].name, peers_names[i]))
        sites[i].entry = found[k].entry;
    if (sites[i].entry == NULL) {      /* code patching did not look for it */
      sites[i].name = peers_names[i];
      sites[i].text = texts[i];
      missing++;
    }
  }
  if (missing > 0 && patch_find(sites, PEERS_N) != 0)
    return;
  ph_lock(&peers_lock);
  for (int i = 0; i < PEERS_N; i++)
    if (sites[i].entry != NULL && peers_entry[i] == NULL)
      __atomic_store_n(&peers_entry[i], sites[i].entry, __ATOMIC_RELEASE);
  ph_unlock(&peers_lock);
  /* the allocator's releases, from now on, as the entry points' calls */
  static const os_kernel_t kernel = { peers_munmap, peers_madvise, peers_mremap };
  os_set_kernel(&kernel);
}

/* What patch_apply left at site i: PATCH_DONE (pinheap's jump),
 * PATCH_FOREIGN (someone's), or -1 when code patching did not look. */
PH_STARTUP static int peers_state_of(int i, const patch_site_t *sites, size_t n)
{
  for (size_t k = 0; k < n; k++)
    if (sites[k].name != NULL && sites[k].entry == peers_entry[i] &&
        (sites[k].state == PATCH_DONE || sites[k].state == PATCH_FOREIGN))
      return sites[k].state;
  return -1;
}

PH_STARTUP void peers_snapshot(const patch_site_t *sites, size_t n)
{
  ph_lock(&peers_lock);
  for (int i = 0; i < PEERS_N; i++) {
    void *e = peers_entry[i];
    if (e == NULL)
      continue;
    int state = peers_state_of(i, sites, n);
    int own = state == PATCH_DONE, plain = own || state == -1;
    if (state == -1 && patch_jump_target(e, &(const char *){ NULL }) != NULL) {
      const void *t = peers_jump_end(e);   /* someone's, or pinheap's from before */
      own = t != NULL && t != e && peers_in(peers_self_range(), t);
      plain = own;
    }
    peers_was_own[i] = (unsigned char)own;
    __atomic_store_n(&peers_plain[i], plain ? peers_load8(e) : 0, __ATOMIC_RELAXED);
  }
  ph_unlock(&peers_lock);
}

#else /* !__x86_64__ */

static void *peers_route(int i, const void *addr)
{
  (void)i, (void)addr;
  return NULL;
}

PH_STARTUP void peers_find(const patch_site_t *found, size_t n)
{
  (void)found, (void)n;
}

PH_STARTUP void peers_snapshot(const patch_site_t *sites, size_t n)
{
  (void)sites, (void)n;
}

#endif

PH_HOT int peers_returning(const void *addr)
{
  return peers_busy && peers_busy_addr == addr;
}

/* ======================================================================= */
/*  the calls                                                               */
/* ======================================================================= */

/* Through the hook: peers_busy marks the address meanwhile, so that the
 * hook's call of pinheap's entry point for it makes the system call. */
#define PEERS_VIA(type, e, addr, fn_type, ...)                                      \
  {                                                                                 \
    const void *saved = peers_busy_addr;                                            \
    int was = peers_busy;                                                           \
    peers_busy = 1;                                                                 \
    peers_busy_addr = addr;                                                         \
    type r = ((fn_type)e)(__VA_ARGS__);                                             \
    peers_busy = was;                                                               \
    peers_busy_addr = saved;                                                        \
    return r;                                                                       \
  }

typedef void *peers_mmap_fn(void *, size_t, int, int, int, off_t);
typedef int peers_munmap_fn(void *, size_t);
typedef void *peers_mremap_fn(void *, size_t, size_t, int, ...);
typedef int peers_madvise_fn(void *, size_t, int);
typedef void *peers_shmat_fn(int, const void *, int);
typedef int peers_shmdt_fn(const void *);
typedef int peers_brk_fn(void *);

static PH_NOINLINE void *peers_mmap_via(void *e, void *addr, size_t len, int prot, int flags,
                                        int fd, off_t off)
PEERS_VIA(void *, e, addr, peers_mmap_fn *, addr, len, prot, flags, fd, off)

static PH_NOINLINE int peers_munmap_via(void *e, void *addr, size_t len)
PEERS_VIA(int, e, addr, peers_munmap_fn *, addr, len)

static PH_NOINLINE void *peers_mremap_via(void *e, void *addr, size_t old_len, size_t new_len,
                                          int flags, void *new_addr)
PEERS_VIA(void *, e, addr, peers_mremap_fn *, addr, old_len, new_len, flags, new_addr)

static PH_NOINLINE int peers_madvise_via(void *e, void *addr, size_t len, int advice)
PEERS_VIA(int, e, addr, peers_madvise_fn *, addr, len, advice)

static PH_NOINLINE void *peers_shmat_via(void *e, int shmid, const void *addr, int flags)
PEERS_VIA(void *, e, addr, peers_shmat_fn *, shmid, addr, flags)

static PH_NOINLINE int peers_shmdt_via(void *e, const void *addr)
PEERS_VIA(int, e, addr, peers_shmdt_fn *, addr)

static PH_NOINLINE uintptr_t peers_brk_via(void *e, void *addr)
{
  const void *saved = peers_busy_addr;
  int was = peers_busy, err = errno;
  peers_busy = 1;
  peers_busy_addr = addr;
  ((peers_brk_fn *)e)(addr);
  peers_busy = was;
  peers_busy_addr = saved;
  errno = err;
  return (uintptr_t)ph_syscall(SYS_brk, 0);   /* the break the hook left */
}

PH_HOT void *peers_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
  void *e = peers_route(PEERS_MMAP, addr);
  if (ph_likely(e == NULL))
    return (void *)ph_syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  return peers_mmap_via(e, addr, len, prot, flags, fd, off);
}

PH_HOT int peers_munmap(void *addr, size_t len)
{
  void *e = peers_route(PEERS_MUNMAP, addr);
  if (ph_likely(e == NULL))
    return (int)ph_syscall(SYS_munmap, addr, len);
  return peers_munmap_via(e, addr, len);
}

PH_HOT void *peers_mremap(void *addr, size_t old_len, size_t new_len, int flags, void *new_addr)
{
  void *e = peers_route(PEERS_MREMAP, addr);
  if (ph_likely(e == NULL))
    return (void *)ph_syscall(SYS_mremap, addr, old_len, new_len, flags, new_addr);
  return peers_mremap_via(e, addr, old_len, new_len, flags, new_addr);
}

PH_HOT int peers_madvise(void *addr, size_t len, int advice)
{
  void *e = peers_route(PEERS_MADVISE, addr);
  if (ph_likely(e == NULL))
    return (int)ph_syscall(SYS_madvise, addr, len, advice);
  return peers_madvise_via(e, addr, len, advice);
}

PH_HOT void *peers_shmat(int shmid, const void *addr, int flags)
{
  void *e = peers_route(PEERS_SHMAT, addr);
  if (ph_likely(e == NULL))
    return (void *)ph_syscall(SYS_shmat, shmid, addr, flags);
  return peers_shmat_via(e, shmid, addr, flags);
}

PH_HOT int peers_shmdt(const void *addr)
{
  void *e = peers_route(PEERS_SHMDT, addr);
  if (ph_likely(e == NULL))
    return (int)ph_syscall(SYS_shmdt, addr);
  return peers_shmdt_via(e, addr);
}

PH_HOT uintptr_t peers_brk(void *addr)
{
  void *e = peers_route(PEERS_BRK, addr);
  if (ph_likely(e == NULL))
    return (uintptr_t)ph_syscall(SYS_brk, addr);
  return peers_brk_via(e, addr);
}

/* ======================================================================= */
/*  description                                                             */
/* ======================================================================= */

/* Appends to buf what the group of calls in mask (their entries jump to
 * obj, forwarded or not, replacing pinheap's patches or not) means. */
static size_t peers_say(char *buf, size_t size, size_t used, unsigned mask, const char *obj,
                        int fwd, int own)
{
  char names[128] = "";
  size_t n = 0;
  int count = 0, total = (int)ph_popcount(mask);
  for (int i = 0; i < PEERS_N; i++) {
    if (!(mask & (1u << i)))
      continue;
    count++;
    n += (size_t)snprintf(names + n, n < sizeof(names) ? sizeof(names) - n : 0, "%s%s",
                          count == 1 ? "" : count == total ? " and " : ", ", peers_names[i]);
  }
  int w = snprintf(buf + used, used < size ? size - used : 0,
                   "%slibc's %s jump%s into %s: pinheap's own calls of %s %s.%s",
                   used > 0 ? " " : "", names, total == 1 ? "s" : "", obj,
                   total == 1 ? "it" : "them",
                   fwd ? "go through that hook, so that it hears them"
                       : "pass the hook by (a consumer pinheap feeds directly)",
                   !own ? ""
                   : fwd ? " This replaced pinheap's own patch: glibc's internal calls reach that "
                           "hook, not pinheap's listeners."
                         : " This replaced pinheap's own patch: glibc's internal calls reach "
                           "that hook, and pinheap hears them from the consumer.");
  return w > 0 ? used + (size_t)w : used;
}

int peers_describe(char *buf, size_t size)
{
  size_t used = 0;
  if (size > 0)
    buf[0] = '\0';
#if defined(__x86_64__)
  unsigned done = 0;
  for (int i = 0; i < PEERS_N; i++) {
    void *e = __atomic_load_n(&peers_entry[i], __ATOMIC_ACQUIRE);
    if ((done & (1u << i)) || e == NULL ||
        peers_load8(e) == __atomic_load_n(&peers_plain[i], __ATOMIC_RELAXED))
      continue;
    const void *t = peers_jump_end(e);
    Dl_info at;
    if (t == NULL || t == e || peers_in(peers_self_range(), t))
      continue;
    const char *obj = dladdr(t, &at) != 0 && at.dli_fname != NULL ? at.dli_fname
                                                                 : "anonymous memory";
    int fwd = peers_foreign(e), own = peers_was_own[i];
    unsigned mask = 0;
    for (int k = i; k < PEERS_N; k++) {     /* the calls that go the same way */
      void *ek = __atomic_load_n(&peers_entry[k], __ATOMIC_ACQUIRE);
      const void *tk = ek != NULL ? peers_jump_end(ek) : NULL;
      Dl_info atk;
      const char *objk = tk != NULL && dladdr(tk, &atk) != 0 && atk.dli_fname != NULL
                             ? atk.dli_fname : "anonymous memory";
      if (tk != NULL && tk != ek && !(done & (1u << k)) && strcmp(objk, obj) == 0 &&
          peers_foreign(ek) == fwd && peers_was_own[k] == own &&
          peers_load8(ek) != __atomic_load_n(&peers_plain[k], __ATOMIC_RELAXED))
        mask |= 1u << k;
    }
    done |= mask;
    used = peers_say(buf, size, used, mask, obj, fwd, own);
  }
#endif
  return (int)(used < size ? used : size > 0 ? size - 1 : 0);
}
