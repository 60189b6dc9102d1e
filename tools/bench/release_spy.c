/*
 * release_spy.c -- tells the registration-cache workload when memory leaves
 * the process or loses its physical pages.  Main entry point:
 * release_spy_start().
 *
 * Two observers, chosen at start:
 *
 *   pinheap_listener  when a pinheap shim is loaded (its
 *                     <prefix>register_release is found with dlsym): the
 *                     release listener pinheap offers to MPI runtimes.  It
 *                     sees pinheap's own releases (free of a huge block,
 *                     trim, decommit) and every munmap, mremap, madvise
 *                     DONTNEED/FREE/REMOVE, shmdt ... of the process.
 *
 *   seccomp           for every other allocator (glibc, jemalloc, tcmalloc,
 *                     mimalloc), or when BENCH_REGCACHE_OBSERVER=seccomp:
 *                     a seccomp filter traps munmap, mremap, brk, madvise
 *                     with MADV_DONTNEED / MADV_FREE / MADV_REMOVE /
 *                     MADV_DONTNEED_LOCKED, and mmap with MAP_FIXED, made
 *                     from anywhere but this file's own syscall
 *                     instruction; the SIGSYS handler notes the range and
 *                     makes the call itself.  This is interposition at the
 *                     system-call boundary, so it sees releases whatever
 *                     path they take: glibc's malloc calls its internal
 *                     __munmap / __madvise / __brk, which no symbol
 *                     interposition can catch, jemalloc and mimalloc call
 *                     libc's madvise and munmap, tcmalloc calls madvise
 *                     (and, for some, raw syscalls).  Its cost (a signal,
 *                     a few microseconds per trapped call) is paid by the
 *                     allocators that release often; the runtime pays
 *                     something similar to learn of a release.
 *
 * Either way a release only appends [address, length) to a fixed ring
 * (no allocation, a spin lock held for a few instructions, safe inside a
 * signal handler and inside the allocator); the cache drains the ring
 * before each lookup, as UCX's rcache drains its invalidation queue.  If
 * the ring overflows the drain reports it and the cache drops everything.
 */
#define _GNU_SOURCE
#include "bench.h"
#include "pinheap_config.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#define RELEASE_SPY_HAS_SECCOMP 1
#else
#define RELEASE_SPY_HAS_SECCOMP 0
#endif

#define RELEASE_RING_SIZE 65536u   /* pending releases (a power of two) */

typedef bench_release_t release_range_t;

static struct {
  atomic_flag lock;
  uint64_t head;                  /* next to drain */
  uint64_t tail;                  /* next to fill */
  int overflowed;
  uint64_t events;                /* ranges noted since the start */
  uint64_t bytes;
  release_range_t ring[RELEASE_RING_SIZE];
} release_ring = {.lock = ATOMIC_FLAG_INIT};

static const char *release_observer = "none";

static void release_note(uintptr_t address, size_t length)
{
  if (length == 0)
    return;
  while (atomic_flag_test_and_set_explicit(&release_ring.lock, memory_order_acquire))
    ;
  if (release_ring.tail - release_ring.head >= RELEASE_RING_SIZE) {
    release_ring.overflowed = 1;
  } else {
    release_range_t *r = &release_ring.ring[release_ring.tail % RELEASE_RING_SIZE];
    r->address = address;
    r->length = length;
    release_ring.tail++;
  }
  release_ring.events++;
  release_ring.bytes += length;
  atomic_flag_clear_explicit(&release_ring.lock, memory_order_release);
}

size_t release_spy_drain(bench_release_t *out, size_t max, int *overflowed_p)
{
  size_t n = 0;
  while (atomic_flag_test_and_set_explicit(&release_ring.lock, memory_order_acquire))
    ;
  while (n < max && release_ring.head != release_ring.tail) {
    release_range_t *r = &release_ring.ring[release_ring.head % RELEASE_RING_SIZE];
    out[n].address = r->address;
    out[n].length = r->length;
    n++;
    release_ring.head++;
  }
  *overflowed_p = release_ring.overflowed;
  release_ring.overflowed = 0;
  atomic_flag_clear_explicit(&release_ring.lock, memory_order_release);
  return n;
}

void release_spy_totals(uint64_t *events_p, uint64_t *bytes_p)
{
  while (atomic_flag_test_and_set_explicit(&release_ring.lock, memory_order_acquire))
    ;
  *events_p = release_ring.events;
  *bytes_p = release_ring.bytes;
  atomic_flag_clear_explicit(&release_ring.lock, memory_order_release);
}

const char *release_spy_observer(void)
{
  return release_observer;
}

/* ---- pinheap's release listener --------------------------------------------- */

static void release_listener(void *addr, size_t len, int from_alloc, void *ctx)
{
  (void)from_alloc;
  (void)ctx;
  release_note((uintptr_t)addr, len);
}

static int release_listener_start(void)
{
  typedef int register_fn_t(void (*)(void *, size_t, int, void *), void *);
  typedef int open_fn_t(void);
  void *reg = dlsym(RTLD_DEFAULT, PINHEAP_PREFIX_STRING "register_release");
  void *open_sym = dlsym(RTLD_DEFAULT, PINHEAP_PREFIX_STRING "open");
  if (reg == NULL)
    return 0;
  if (open_sym != NULL) {          /* what an MPI runtime calls at MPI_Init */
    open_fn_t *open_fn;
    memcpy(&open_fn, &open_sym, sizeof(open_fn));
    open_fn();
  }
  register_fn_t *reg_fn;
  memcpy(&reg_fn, &reg, sizeof(reg_fn));
  int rc = reg_fn(release_listener, NULL);
  if (rc != 0 && rc != EEXIST)
    bench_fail("%sregister_release failed: %s", PINHEAP_PREFIX_STRING, strerror(rc));
  release_observer = "pinheap_listener";
  return 1;
}

/* ---- the seccomp observer -------------------------------------------------- */

#if RELEASE_SPY_HAS_SECCOMP

/* The one syscall instruction the filter lets through: the handler makes
 * the trapped calls here.  gadget(nr, a0, a1, a2, a3, a4, a5). */
long release_gadget(long nr, long a0, long a1, long a2, long a3, long a4, long a5);
extern const char release_gadget_end[];
__asm__(".text\n"
        ".p2align 4\n"
        ".globl release_gadget\n"
        ".hidden release_gadget\n"
        ".type release_gadget, @function\n"
        "release_gadget:\n"
        "  movq %rdi, %rax\n"
        "  movq %rsi, %rdi\n"
        "  movq %rdx, %rsi\n"
        "  movq %rcx, %rdx\n"
        "  movq %r8, %r10\n"
        "  movq %r9, %r8\n"
        "  movq 8(%rsp), %r9\n"
        "  syscall\n"
        "  ret\n"
        ".globl release_gadget_end\n"
        ".hidden release_gadget_end\n"
        "release_gadget_end:\n"
        ".size release_gadget, .-release_gadget\n");

static void release_sigsys(int sig, siginfo_t *info, void *context)
{
  (void)sig;
  ucontext_t *uc = context;
  greg_t *g = uc->uc_mcontext.gregs;
  long nr = info->si_syscall;
  long a0 = g[REG_RDI], a1 = g[REG_RSI], a2 = g[REG_RDX];
  long a3 = g[REG_R10], a4 = g[REG_R8], a5 = g[REG_R9];
  long ret;
  int saved_errno = errno;
  if (nr == SYS_brk) {
    long old = release_gadget(SYS_brk, 0, 0, 0, 0, 0, 0);
    ret = release_gadget(SYS_brk, a0, 0, 0, 0, 0, 0);
    if (ret < old)
      release_note((uintptr_t)ret, (size_t)(old - ret));
  } else {
    /* munmap, madvise, mremap (the whole old range), mmap MAP_FIXED: noted
     * before the call, as pinheap's VM_UNMAPPED event is. */
    release_note((uintptr_t)a0, (size_t)a1);
    ret = release_gadget(nr, a0, a1, a2, a3, a4, a5);
  }
  g[REG_RAX] = ret;
  errno = saved_errno;
}

#define SPY_LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(off))
#define SPY_JEQ(k, jt, jf) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(k), (jt), (jf))
#define SPY_ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#define SPY_IP_LO offsetof(struct seccomp_data, instruction_pointer)
#define SPY_IP_HI (offsetof(struct seccomp_data, instruction_pointer) + 4)
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

static void release_seccomp_start(void)
{
  uintptr_t lo = (uintptr_t)release_gadget, hi = (uintptr_t)release_gadget_end;
  if ((lo >> 32) != (hi >> 32))
    bench_fail("the syscall gadget %p..%p crosses a 4 GiB boundary; the seccomp filter "
               "cannot describe it", (void *)lo, (void *)hi);
  /* A jump goes to (its index + 1 + offset); the indices are on the left. */
  struct sock_filter filter[] = {
    /*  0 */ SPY_LD(offsetof(struct seccomp_data, arch)),
    /*  1 */ SPY_JEQ(AUDIT_ARCH_X86_64, 0, 6),                 /* else -> 8 allow */
    /*  2 */ SPY_LD(offsetof(struct seccomp_data, nr)),
    /*  3 */ SPY_JEQ(SYS_munmap, 13, 0),                       /* -> 17 */
    /*  4 */ SPY_JEQ(SYS_mremap, 12, 0),                       /* -> 17 */
    /*  5 */ SPY_JEQ(SYS_brk, 11, 0),                          /* -> 17 */
    /*  6 */ SPY_JEQ(SYS_madvise, 4, 0),                       /* -> 11 */
    /*  7 */ SPY_JEQ(SYS_mmap, 1, 0),                          /* -> 9 */
    /*  8 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    /*  9 */ SPY_LD(SPY_ARG_LO(3)),                            /* mmap flags */
    /* 10 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_FIXED, 6, 5),  /* -> 17, else 16 */
    /* 11 */ SPY_LD(SPY_ARG_LO(2)),                            /* madvise advice */
    /* 12 */ SPY_JEQ(MADV_DONTNEED, 4, 0),                     /* -> 17 */
    /* 13 */ SPY_JEQ(MADV_FREE, 3, 0),
    /* 14 */ SPY_JEQ(MADV_REMOVE, 2, 0),
    /* 15 */ SPY_JEQ(MADV_DONTNEED_LOCKED, 1, 0),
    /* 16 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    /* 17 */ SPY_LD(SPY_IP_HI),                                /* from the gadget? */
    /* 18 */ SPY_JEQ(lo >> 32, 0, 3),                          /* else -> 22 trap */
    /* 19 */ SPY_LD(SPY_IP_LO),
    /* 20 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)lo, 0, 1),   /* else -> 22 */
    /* 21 */ BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, (uint32_t)hi, 0, 1),   /* -> 22, else 23 */
    /* 22 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
    /* 23 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof(filter) / sizeof(filter[0])), filter};

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = release_sigsys;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSYS, &sa, NULL) != 0)
    bench_fail("sigaction(SIGSYS) failed: %s", strerror(errno));
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    bench_fail("prctl(PR_SET_NO_NEW_PRIVS) failed: %s", strerror(errno));
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
    bench_fail("seccomp(SECCOMP_SET_MODE_FILTER) failed: %s; the regcache workload needs it to "
               "see the releases of allocators other than pinheap", strerror(errno));
  release_observer = "seccomp";
}

#endif /* RELEASE_SPY_HAS_SECCOMP */

const char *release_spy_start(void)
{
  static int started;
  if (started)
    return release_observer;
  started = 1;
  const char *want = getenv("BENCH_REGCACHE_OBSERVER");
  if (want != NULL && strcmp(want, "seccomp") != 0 && strcmp(want, "auto") != 0)
    bench_fail("BENCH_REGCACHE_OBSERVER='%s'; expected 'auto' or 'seccomp'", want);
  int force_seccomp = want != NULL && strcmp(want, "seccomp") == 0;
  if (!force_seccomp && release_listener_start())
    return release_observer;
#if RELEASE_SPY_HAS_SECCOMP
  release_seccomp_start();
#else
  bench_fail("no pinheap release listener in this process and no seccomp observer on this "
             "architecture: the regcache workload cannot see releases");
#endif
  return release_observer;
}
