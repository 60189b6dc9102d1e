/*
 * patch.c -- code patching of libc's entry points (x86-64): glibc's mmap,
 * munmap, ... start with a jump to pinheap's entry point, so that every
 * call, glibc's own internal ones included, fires the events.  Main entry
 * points: patch_find(), patch_apply(), patch_undo() (patch.h).
 *
 * The write.  glibc's functions are 16-byte aligned, so their first 8
 * bytes are one aligned quadword: the 5-byte `jmp rel32` (e9 + 32-bit
 * displacement) is written together with the 3 bytes that follow it,
 * unchanged, as one atomic 8-byte store (no other thread runs: see
 * "Threads" below; the store being whole is for signal handlers and for
 * readers of the bytes, not for instruction fetch).  The text page is
 * lifted to read-write-execute only for the store (execute is never taken
 * away: other threads may be running the page) and then given back the
 * protection its segment has in the program headers.
 *
 * The target.  A jump reaches +-2 GiB.  A core library is usually mapped
 * next to libc, so its entry point is reached directly; pinheap linked
 * into a position-independent executable is not, and then the jump goes
 * to a 16-byte slot of a trampoline page mapped near libc (a free hole
 * found with MAP_FIXED_NOREPLACE) holding `movabs $target, %r11; jmp
 * *%r11` -- r11 is a scratch register at a call boundary.  Slots are
 * written with the page read-write-execute and are never unmapped.
 *
 * Threads.  Only a process where no other thread runs is patched (before
 * main, or a caller that knows every other thread is parked); with
 * PATCH_THREADS (a late load: other threads exist) nothing is written and
 * each site fails with a text saying so, and the calls that go through a
 * symbol stay with relocation patching.  Two ways were tried and dropped:
 *  - one 8-byte store of the jump: x86 does not promise that another core
 *    fetching the entry sees a cross-modified store whole.  It did not:
 *    test_patch stress failed 1 of 300 runs under load (patch and undo
 *    cycles, 355032 calls) with munmap answering -1/EINVAL -- a core ran
 *    `b8 fb 00 00 00`, the old opcode with the first byte of the new
 *    displacement: syscall 251, ioprio_set;
 *  - the breakpoint protocol (int3 over byte 0, sync the cores, the
 *    displacement, sync, e9, sync; a SIGTRAP handler sends the thread on):
 *    a thread that blocks SIGTRAP and meets the int3 kills the process --
 *    the kernel forces the trap signal back to its default action, no
 *    handler runs -- and glibc 2.34+ blocks every signal around the
 *    madvise a thread makes as it exits (posix_spawn likewise around
 *    munmap of its stack).  One patch and undo of madvise while another
 *    thread started and joined threads killed 21 of 100 processes.
 * patch_undo with PATCH_THREADS leaves the jump for the same reasons.
 *
 * Never patch twice.  An entry that starts (after an optional endbr64)
 * with a jump -- jmp rel32/rel8, jmp through memory, movabs to a register
 * then jmp through it, push/ret, int3 -- was patched by someone else (UCX's
 * libucm, Open MPI's patcher, another pinheap, a debugger): it is left
 * alone and the site's text says what it jumps to.
 */
#include "hooks/intercept/patch.h"
#include "hooks/intercept/reloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "allocator/heap/chunk.h"     /* ph_lock */
#include "allocator/base/startup.h"

#if defined(__x86_64__)

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#define PATCH_SLOT 16
#define PATCH_FIND_MAX 32                      /* sites patch_find reads from libc at once */
#define PATCH_REACH ((int64_t)0x7fff0000)      /* a little under 2 GiB */

/* Fork: held while sites are patched or undone, around mprotect and the
 * trampoline's mapping (whose events reach handlers); not taken before
 * fork, for the same reasons as install_lock (install.c).  With other
 * threads running (PATCH_THREADS: the only case in which another thread
 * can hold it at a fork) nothing is written, so a child forked meanwhile
 * finds libc's code whole; it frees the lock (patch_fork_child), and a
 * site left between states is looked at again by the next call, which
 * reads the code itself. */
PH_HOT_DATA static ph_lock_t patch_lock;
PH_HOT_DATA static unsigned char *patch_tramp;            /* the trampoline page, or NULL */
PH_HOT_DATA static size_t patch_tramp_used;               /* bytes of it written */

/* ======================================================================= */
/*  reading code                                                            */
/* ======================================================================= */

PH_STARTUP static int64_t patch_distance(const void *from_end, const void *to)
{
  return (int64_t)((intptr_t)to - (intptr_t)from_end);
}

PH_STARTUP const void *patch_jump_target(const unsigned char *c, const char **kind_p)
{
  if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
    c += 4;                                              /* endbr64 */
  if (c[0] == 0xe9) {
    int32_t d;
    memcpy(&d, c + 1, 4);
    *kind_p = "jmp rel32";
    return c + 5 + d;
  }
  if (c[0] == 0xeb) {
    *kind_p = "jmp rel8";
    return c + 2 + (int8_t)c[1];
  }
  if (c[0] == 0xff && c[1] == 0x25) {                     /* jmp *disp32(%rip) */
    int32_t d;
    const void *t;
    memcpy(&d, c + 2, 4);
    memcpy(&t, c + 6 + d, sizeof(t));
    *kind_p = "jmp *(%rip)";
    return t;
  }
  if ((c[0] == 0x48 || c[0] == 0x49) && c[1] >= 0xb8 && c[1] <= 0xbf) {
    /* movabs $imm64, %reg; then jmp *%reg (ff e0+r, with 41 for r8-r15)
     * or push %reg; ret */
    const unsigned char *n = c + 10;
    if ((n[0] == 0x41 && n[1] == 0xff && (n[2] & 0xf8) == 0xe0) ||
        (n[0] == 0xff && (n[1] & 0xf8) == 0xe0) || (n[0] == 0x41 && (n[1] & 0xf8) == 0x50) ||
        ((n[0] & 0xf8) == 0x50)) {
      const void *t;
      memcpy(&t, c + 2, sizeof(t));
      *kind_p = "movabs + jmp *%reg";
      return t;
    }
  }
  if (c[0] == 0x68 && c[5] == 0xc3) {                     /* push $imm32; ret */
    uint32_t t;
    memcpy(&t, c + 1, 4);
    *kind_p = "push + ret";
    return (const void *)(uintptr_t)t;
  }
  if (c[0] == 0xcc) {
    *kind_p = "int3 (a breakpoint)";
    return c;
  }
  return NULL;
}

/* (not in the start-up text: an entry patched by someone else) */
static const char *patch_object_name(const void *addr)
{
  Dl_info info;
  if (dladdr(addr, &info) != 0 && info.dli_fname != NULL && info.dli_fname[0] != '\0')
    return info.dli_fname;
  return NULL;
}

PH_STARTUP const char *patch_describe(const void *entry, char *buf, size_t len)
{
  const char *kind = NULL, *kind2 = NULL;
  const void *t = patch_jump_target(entry, &kind);

  buf[0] = '\0';
  if (t == NULL)
    return buf;
  const char *obj = patch_object_name(t);
  const void *t2 = NULL;
  /* an anonymous trampoline: one more hop names the patcher */
  if (obj == NULL && t != entry) {
    t2 = patch_jump_target(t, &kind2);
    if (t2 != NULL)
      obj = patch_object_name(t2);
  }
  const char *who = "";
  if (obj != NULL && strstr(obj, "libucm") != NULL)
    who = " (UCX's libucm)";
  else if (obj != NULL && strstr(obj, "open-pal") != NULL)
    who = " (Open MPI's patcher)";
  snprintf(buf, len, "starts with %s to %p%s%s%s%s", kind, t2 != NULL ? t2 : t,
           t2 != NULL ? " through a trampoline" : "", obj != NULL ? " in " : " (no object)",
           obj != NULL ? obj : "", who);
  return buf;
}

/* ======================================================================= */
/*  memory: protection, the trampoline page                                  */
/* ======================================================================= */

/* The executable segments of libc.so.6 (dladdr would cost a linear walk
 * of libc's symbol table per lookup), with their protection. */
typedef struct patch_libc_s {
  uintptr_t lo[4], hi[4];
  int prot[4];
  int n;
} patch_libc_t;

/* libc's first executable segment, as patch_find found it (libc is never
 * unloaded; its entries are there): the segment of an entry is read from
 * here, without another walk of the objects (patch_seg_find).
 * patch_libc_known: 1 once written (release), 2 while being written (a
 * child forked then walks, as before). */
PH_HOT_DATA static struct {
  uintptr_t lo, hi;
  int prot;
} patch_libc_seen;
PH_HOT_DATA static int patch_libc_known;

/* The protection of a PT_LOAD segment's flags. */
PH_STARTUP static int patch_prot_of(const ElfW(Phdr) *ph)
{
  return ((ph->p_flags & PF_R) ? PROT_READ : 0) | ((ph->p_flags & PF_W) ? PROT_WRITE : 0) |
         ((ph->p_flags & PF_X) ? PROT_EXEC : 0);
}

typedef struct patch_seg_s {
  uintptr_t addr;
  uintptr_t lo, hi;       /* the PT_LOAD segment holding addr */
  int prot;
} patch_seg_t;

PH_STARTUP static int patch_seg_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  patch_seg_t *s = arg;
  (void)size;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (s->addr >= lo && s->addr < hi) {
      s->lo = lo;
      s->hi = hi;
      s->prot = patch_prot_of(ph);
      return 1;
    }
  }
  return 0;
}

/* The protection of the segment holding addr; -1 if no object holds it.
 * s may hold the previous answer (prot set, or -1): when addr lies in the
 * same segment, it stands, without a walk of the loaded objects (libc's
 * eight functions share one segment). */
PH_STARTUP static int patch_seg_find(const void *addr, patch_seg_t *s)
{
  if (s->prot >= 0 && (uintptr_t)addr >= s->lo && (uintptr_t)addr < s->hi)
    return s->prot;
  memset(s, 0, sizeof(*s));
  s->addr = (uintptr_t)addr;
  s->prot = -1;
  /* one of libc's executable segments, as patch_find saw it: no walk */
  if (__atomic_load_n(&patch_libc_known, __ATOMIC_ACQUIRE) == 1 &&
      s->addr >= patch_libc_seen.lo && s->addr < patch_libc_seen.hi) {
    s->lo = patch_libc_seen.lo;
    s->hi = patch_libc_seen.hi;
    s->prot = patch_libc_seen.prot;
    return s->prot;
  }
  dl_iterate_phdr(patch_seg_cb, s);
  return s->prot;
}

/* One atomic 8-byte store of val at entry, with the page lifted to RWX for
 * it and given back prot.  @return 0 or an errno.
 * Not in the start-up text: when one mprotect of the entries fails, and
 * late patches. */
static int patch_store(void *entry, uint64_t val, int prot)
{
  size_t page = os_page_size();
  uintptr_t pg = (uintptr_t)entry & ~(uintptr_t)(page - 1);
  size_t len = ((uintptr_t)entry + 8 > pg + page) ? 2 * page : page;

  if (mprotect((void *)pg, len, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
    return errno;
  __atomic_store_n((uint64_t *)entry, val, __ATOMIC_SEQ_CST);
  if (mprotect((void *)pg, len, prot) != 0)
    return errno;
  return 0;
}

/* A trampoline page within reach of [lo, hi); NULL if none was found. */
PH_STARTUP static unsigned char *patch_tramp_map(uintptr_t lo, uintptr_t hi)
{
  size_t page = os_page_size();
  const uintptr_t step = (uintptr_t)1 << 20;
  lo &= ~(step - 1);
  for (uintptr_t d = step; d < (uintptr_t)PATCH_REACH - (hi - lo) - step; d += step) {
    uintptr_t cand[2] = { lo - d, ((hi + step - 1) & ~(step - 1)) + d - step };
    for (int k = 0; k < 2; k++) {
      if (k == 0 && d > lo)
        continue;
      long r = ph_syscall(SYS_mmap, cand[k], page, PROT_READ | PROT_WRITE | PROT_EXEC,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0L);
      if (r == -1)
        continue;
      if ((uintptr_t)r == cand[k])
        return (unsigned char *)r;
      ph_syscall(SYS_munmap, r, page);  /* an old kernel took it as a hint */
    }
  }
  return NULL;
}

/* A trampoline slot jumping to target, reachable from entry.  NULL when no
 * page near libc could be mapped or it is full. */
PH_STARTUP static void *patch_tramp_slot(const void *entry, void *target)
{
  size_t page = os_page_size();

  if (patch_tramp == NULL) {
    patch_seg_t s = { .prot = -1 };   /* (no previous answer: patch_seg_find) */
    if (patch_seg_find(entry, &s) < 0)
      return NULL;
    patch_tramp = patch_tramp_map(s.lo, s.hi);
    if (patch_tramp == NULL)
      return NULL;
    patch_tramp_used = 0;
  } else if (mprotect(patch_tramp, page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
    return NULL;
  }
  /* one slot per target */
  unsigned char *slot = NULL;
  for (size_t off = 0; off < patch_tramp_used; off += PATCH_SLOT) {
    void *t;
    memcpy(&t, patch_tramp + off + 2, sizeof(t));
    if (t == target)
      slot = patch_tramp + off;
  }
  if (slot == NULL && patch_tramp_used + PATCH_SLOT <= page) {
    slot = patch_tramp + patch_tramp_used;
    slot[0] = 0x49;                                   /* movabs $target, %r11 */
    slot[1] = 0xbb;
    memcpy(slot + 2, &target, sizeof(target));
    slot[10] = 0x41;                                  /* jmp *%r11 */
    slot[11] = 0xff;
    slot[12] = 0xe3;
    slot[13] = slot[14] = slot[15] = 0xcc;
    patch_tramp_used += PATCH_SLOT;
  }
  mprotect(patch_tramp, page, PROT_READ | PROT_EXEC);
  if (slot != NULL) {
    int64_t d = patch_distance((const char *)entry + 5, slot);
    if (d > PATCH_REACH || d < -PATCH_REACH)
      return NULL;
  }
  return slot;
}

/* ======================================================================= */
/*  finding, applying, undoing                                              */
/* ======================================================================= */


PH_STARTUP static int patch_libc_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  patch_libc_t *l = arg;
  (void)size;
  if (!reloc_file_begins(info->dlpi_name, "libc.so"))
    return 0;
  for (int i = 0; i < info->dlpi_phnum && l->n < 4; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      l->lo[l->n] = info->dlpi_addr + ph->p_vaddr;
      l->hi[l->n] = l->lo[l->n] + ph->p_memsz;
      l->prot[l->n] = patch_prot_of(ph);
      l->n++;
    }
  }
  return 1;
}

PH_STARTUP static int patch_in_libc(const patch_libc_t *l, const void *addr)
{
  for (int i = 0; i < l->n; i++)
    if ((uintptr_t)addr >= l->lo[i] && (uintptr_t)addr < l->hi[i])
      return 1;
  return 0;
}

/* A site's text, to be written: marked as said.  patch_unsay empties a
 * text said before (a site patched on a later try); an unsaid text is
 * never read nor written, so its page stays untouched. */
PH_STARTUP static char *patch_said(patch_site_t *s)
{
  s->said = 1;
  return s->text;
}

PH_STARTUP static void patch_unsay(patch_site_t *s)
{
  if (s->said) {
    s->text[0] = '\0';
    s->said = 0;
  }
}

/* libc's definitions of the sites' names, as dlsym(dlopen("libc.so.6"))
 * returns them: read from libc's symbol table when that answer is sure
 * (reloc.h: reloc_defs_named), which spares start-up dlopen's set-up of a
 * handle (code of libc's and ld.so's, and an allocation); else by dlsym. */
/* A site whose definition is known already, in libc's code (range):
 * dlsym of libc's handle would return the same. */
PH_STARTUP static int patch_known(const patch_libc_t *range, const patch_site_t *s)
{
  return s->known != NULL && patch_in_libc(range, s->known);
}

PH_STARTUP static void **patch_libc_defs(patch_site_t *sites, size_t n, const patch_libc_t *range,
                                         void **defs, void **libc_p)
{
  const char *names[PATCH_FIND_MAX] = { NULL };
  size_t k = 0;
  *libc_p = NULL;
  for (size_t i = 0; i < n && k < PATCH_FIND_MAX; i++)
    if (sites[i].entry == NULL && sites[i].name != NULL && !patch_known(range, &sites[i]))
      names[k++] = sites[i].name;
  if (k == 0)
    return defs;              /* each one known: no walk of the objects */
  if (k < PATCH_FIND_MAX && reloc_defs_named("libc.so", names, defs, k) == 0)
    return defs;
  *libc_p = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);   /* ld.so's, not malloc */
  return NULL;
}

PH_STARTUP int patch_find(patch_site_t *sites, size_t n)
{
  void *libc = NULL;
  void *found[PATCH_FIND_MAX];
  patch_libc_t range = { { 0 }, { 0 }, { 0 }, 0 };
  Dl_info info;
  size_t k = 0;

  dl_iterate_phdr(patch_libc_cb, &range);
  if (range.n > 0 && !__atomic_load_n(&patch_libc_known, __ATOMIC_ACQUIRE) &&
      !__atomic_exchange_n(&patch_libc_known, 2, __ATOMIC_ACQ_REL)) {
    patch_libc_seen.lo = range.lo[0];
    patch_libc_seen.hi = range.hi[0];
    patch_libc_seen.prot = range.prot[0];
    __atomic_store_n(&patch_libc_known, 1, __ATOMIC_RELEASE);
  }
  void **defs = patch_libc_defs(sites, n, &range, found, &libc);

  for (size_t i = 0; i < n; i++) {
    patch_site_t *s = &sites[i];
    if (s->entry != NULL || s->name == NULL)
      continue;             /* found, or no site */
    void *e = patch_known(&range, s) ? s->known
              : defs != NULL         ? defs[k++]
              : libc != NULL         ? dlsym(libc, s->name)
                                     : NULL;
    if (e == NULL) {
      s->state = PATCH_FAILED;
      snprintf(patch_said(s), PATCH_TEXT_MAX, "libc.so.6 does not define %s", s->name);
      continue;
    }
    /* relocation patching (or another pinheap's) may have pointed libc's
     * symbol table at a replacement: only libc's own code is patched */
    if (!patch_in_libc(&range, e)) {
      if (dladdr(e, &info) == 0)
        info.dli_fname = NULL;
      s->state = PATCH_FAILED;
      snprintf(patch_said(s), PATCH_TEXT_MAX,
               "libc's symbol table entry for %s points outside libc, at %p in %s: left alone",
               s->name, e, info.dli_fname != NULL ? info.dli_fname : "no object");
      continue;
    }
    s->entry = e;
    memcpy(s->orig, e, sizeof(s->orig));
  }
  if (libc != NULL)
    dlclose(libc);
  return 0;
}

#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define PATCH_HAVE_SINGLE_THREADED 1
#endif
#endif

PH_STARTUP int patch_threads_running(void)
{
#ifdef PATCH_HAVE_SINGLE_THREADED
  /* glibc 2.32+: true until the first pthread_create, never true again --
   * one load, where /proc/self/status costs 20-40 us the first time */
  if (__libc_single_threaded)
    return 0;
#endif
  char buf[4096];
  int saved = errno;
  int fd = (int)ph_syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC);
  long have = 0, n;

  if (fd < 0) {
    errno = saved;
    return 1;                     /* unknown: assume they do */
  }
  while (have < (long)sizeof(buf) - 1 &&
         (n = ph_syscall(SYS_read, fd, buf + have, sizeof(buf) - 1 - have)) > 0)
    have += n;
  ph_syscall(SYS_close, fd);
  errno = saved;
  buf[have] = '\0';
  const char *t = strstr(buf, "\nThreads:");
  if (t == NULL)
    return 1;
  t += 9;
  while (*t == ' ' || *t == '\t')
    t++;
  return !(t[0] == '1' && (t[1] < '0' || t[1] > '9'));
}

/* The writes of one patch_apply: one lifting of protection over the span
 * of every entry when they lie in one segment (libc's text: 4 pages for
 * the eight functions), else one per entry. */
#define PATCH_BATCH 64
typedef struct patch_write_s {
  patch_site_t *site;
  uint64_t val;
  int prot;
  uintptr_t seg;
} patch_write_t;

PH_STARTUP static void patch_write_fail(patch_site_t *s, int err)
{
  s->state = PATCH_FAILED;
  snprintf(patch_said(s), PATCH_TEXT_MAX,
           "%s was not patched: mprotect of libc's text refused (errno %d)", s->name, err);
}

PH_STARTUP static void patch_write_all(patch_write_t *w, size_t k)
{
  size_t page = os_page_size();
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  int one = k > 0;

  for (size_t i = 0; i < k; i++) {
    uintptr_t e = (uintptr_t)w[i].site->entry;
    lo = e < lo ? e : lo;
    hi = e + 8 > hi ? e + 8 : hi;
    one &= w[i].seg == w[0].seg && w[i].prot == w[0].prot;
  }
  lo &= ~(uintptr_t)(page - 1);
  hi = (hi + page - 1) & ~(uintptr_t)(page - 1);
  /* (the raw system call: no lazy binding of libc's mprotect at start-up) */
  if (one && hi - lo <= 64 * page &&
      ph_syscall(SYS_mprotect, lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC) == 0) {
    for (size_t i = 0; i < k; i++) {
      __atomic_store_n((uint64_t *)w[i].site->entry, w[i].val, __ATOMIC_SEQ_CST);
      w[i].site->state = PATCH_DONE;
      patch_unsay(w[i].site);
    }
    if (ph_syscall(SYS_mprotect, lo, hi - lo, w[0].prot) != 0)
      ph_warn("pinheap could not give libc's text its protection back after code patching", NULL);
    return;
  }
  for (size_t i = 0; i < k; i++) {
    int err = patch_store(w[i].site->entry, w[i].val, w[i].prot);
    if (err != 0) {
      patch_write_fail(w[i].site, err);
      continue;
    }
    w[i].site->state = PATCH_DONE;
    patch_unsay(w[i].site);
  }
}

/* A late patch: other threads may be fetching the entry (see "Threads"
 * above). */
PH_STARTUP static void patch_refuse(patch_site_t *s)
{
  s->state = PATCH_FAILED;
  snprintf(patch_said(s), PATCH_TEXT_MAX,
           "%s was not patched: other threads run, and a core fetching the entry while the "
           "jump is written may run old and new bytes mixed (a breakpoint instead would kill a "
           "thread that blocks SIGTRAP); calls through a symbol stay relocation patched",
           s->name);
}

/* An earlier site of the same call for the same function, or NULL. */
PH_STARTUP static const patch_site_t *patch_alias_of(const patch_site_t *sites, size_t i)
{
  if (sites[i].entry == NULL)
    return NULL;
  for (size_t j = 0; j < i; j++)
    if (sites[j].entry == sites[i].entry)
      return &sites[j];
  return NULL;
}

PH_STARTUP int patch_apply(patch_site_t *sites, size_t n, unsigned flags)
{
  int done = 0;
  patch_write_t w[PATCH_BATCH];
  size_t k = 0;
  patch_seg_t seg = { .prot = -1 };   /* the last segment found */

  ph_lock(&patch_lock);
  for (size_t i = 0; i < n; i++) {
    patch_site_t *s = &sites[i];
    if (s->state == PATCH_DONE || patch_alias_of(sites, i) != NULL)
      continue;
    if (s->entry == NULL || ((uintptr_t)s->entry & 7) != 0) {
      if (s->entry != NULL) {
        s->state = PATCH_FAILED;
        snprintf(patch_said(s), PATCH_TEXT_MAX, "%s at %p is not 8-byte aligned", s->name, s->entry);
      }
      continue;
    }
    uint64_t cur = __atomic_load_n((uint64_t *)s->entry, __ATOMIC_ACQUIRE);
    unsigned char c[8];
    memcpy(c, &cur, 8);
    char seen[256];
    patch_describe(s->entry, seen, sizeof(seen));
    if (seen[0] != '\0') {
      s->state = PATCH_FOREIGN;
      snprintf(patch_said(s), PATCH_TEXT_MAX, "%s was already patched by someone else: it %s",
               s->name, seen);
      continue;
    }
    if (flags & PATCH_THREADS) {
      patch_refuse(s);
      continue;
    }
    int prot = patch_seg_find(s->entry, &seg);
    if (prot < 0 || !(prot & PROT_EXEC)) {
      s->state = PATCH_FAILED;
      snprintf(patch_said(s), PATCH_TEXT_MAX, "%s at %p is not in an executable segment", s->name,
               s->entry);
      continue;
    }
    void *to = s->target;
    int64_t d = patch_distance((char *)s->entry + 5, to);
    s->via = NULL;
    if (d > PATCH_REACH || d < -PATCH_REACH) {
      to = patch_tramp_slot(s->entry, s->target);
      if (to == NULL) {
        s->state = PATCH_FAILED;
        snprintf(patch_said(s), PATCH_TEXT_MAX,
                 "%s was not patched: pinheap is beyond a jump's reach and no trampoline "
                 "page could be mapped within 2 GiB of libc", s->name);
        continue;
      }
      s->via = to;
      d = patch_distance((char *)s->entry + 5, to);
    }
    memcpy(s->orig, c, 8);
    int32_t rel = (int32_t)d;
    c[0] = 0xe9;
    memcpy(c + 1, &rel, 4);
    if (k == PATCH_BATCH) {
      patch_write_all(w, k);
      k = 0;
    }
    w[k].site = s;
    memcpy(&w[k].val, c, 8);
    w[k].prot = prot;
    w[k].seg = seg.lo;
    k++;
  }
  patch_write_all(w, k);
  for (size_t i = 0; i < n; i++) {
    const patch_site_t *a = patch_alias_of(sites, i);
    if (a != NULL) {           /* the same function under another name (mmap64) */
      sites[i].state = a->state;
      sites[i].via = a->via;
      memcpy(sites[i].orig, a->orig, sizeof(a->orig));
      if (a->said)              /* (an empty text stays unwritten) */
        memcpy(patch_said(&sites[i]), a->text, PATCH_TEXT_MAX);
      else
        patch_unsay(&sites[i]);
    }
    if (sites[i].state == PATCH_DONE)
      done++;
  }
  ph_unlock(&patch_lock);
  return done;
}

void patch_fork_child(void)
{
  ph_lock_reset(&patch_lock);
}

int patch_undo(patch_site_t *sites, size_t n, unsigned flags)
{
  int undone = 0;
  patch_seg_t seg = { .prot = -1 };   /* the last segment found */

  if (flags & PATCH_THREADS)
    return 0;                   /* the jump stays: see "Threads" above */
  ph_lock(&patch_lock);
  for (size_t i = 0; i < n; i++) {
    patch_site_t *s = &sites[i];
    if (s->state != PATCH_DONE)
      continue;
    const patch_site_t *a = patch_alias_of(sites, i);
    if (a != NULL) {
      s->state = a->state;     /* undone (or not) with it */
      continue;
    }
    const char *kind;
    const void *to = patch_jump_target(s->entry, &kind);
    if (to != (s->via != NULL ? s->via : s->target) || ((unsigned char *)s->entry)[0] != 0xe9)
      continue;                 /* someone rewrote it since: theirs now */
    int prot = patch_seg_find(s->entry, &seg);
    uint64_t cur = __atomic_load_n((uint64_t *)s->entry, __ATOMIC_ACQUIRE), val;
    unsigned char c[8];
    memcpy(c, &cur, 8);
    memcpy(c, s->orig, 5);      /* the 3 bytes after the jump are still the original */
    memcpy(&val, c, 8);
    if (prot < 0 || patch_store(s->entry, val, prot) != 0)
      continue;
    s->state = PATCH_NONE;
    undone++;
  }
  ph_unlock(&patch_lock);
  return undone;
}

#else /* not x86-64 */

PH_STARTUP int patch_find(patch_site_t *sites, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    sites[i].state = PATCH_FAILED;
    snprintf(patch_said(&sites[i]), PATCH_TEXT_MAX,
             "code patching is implemented for x86-64 only");
  }
  return ENOSYS;
}

PH_STARTUP int patch_apply(patch_site_t *sites, size_t n, unsigned flags)
{
  (void)sites, (void)n, (void)flags;
  return -ENOSYS;
}

int patch_undo(patch_site_t *sites, size_t n, unsigned flags)
{
  (void)sites, (void)n, (void)flags;
  return -ENOSYS;
}

void patch_fork_child(void) {}

PH_STARTUP int patch_threads_running(void)
{
  return 1;
}

PH_STARTUP const char *patch_describe(const void *entry, char *buf, size_t len)
{
  (void)entry;
  if (len > 0)
    buf[0] = '\0';
  return buf;
}

#endif
