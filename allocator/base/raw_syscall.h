/*
 * raw_syscall.h -- ph_syscall(), a system call made by the instruction
 * itself.  Stands alone (no rename.h, no pinheap type): base.h includes
 * it for the archive, and a test that must make a call no symbol sees
 * (test/api/release_trace.c) includes it too.
 */
#ifndef PINHEAP_RAW_SYSCALL_H
#define PINHEAP_RAW_SYSCALL_H

#include <unistd.h>

/* ---- the raw system call ------------------------------------------------- */
/* ph_syscall(nr, args...): the system call nr, with glibc's syscall()
 * semantics (-1 and errno for a result in [-4095, -1]), made by the
 * instruction itself.  pinheap exports its own syscall() (hooks/replace.c:
 * the memory numbers fire the events), and a call of `syscall` from inside
 * the archive -- through the core library's PLT, a slot relocation patching
 * rewrites -- would reach it: each of pinheap's munmaps would fire its event
 * again, or loop (peers_munmap -> syscall -> events_munmap -> peers_munmap).
 * So nothing in the archive but replace.c names `syscall`
 * (test/packaging/packaging.cmake checks the objects).  Elsewhere than x86-64 and
 * aarch64 pinheap exports no syscall() and this is libc's. */
#if defined(__x86_64__) || defined(__aarch64__)
#define PH_RAW_SYSCALL 1
#include <errno.h>
static inline __attribute__((always_inline)) long ph_syscall6(long nr, long a, long b, long c,
                                                             long d, long e, long f)
{
  long r;
#if defined(__x86_64__)
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
#else
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  r = x0;
#endif
  if (__builtin_expect((unsigned long)r > -4096UL, 0)) {
    errno = (int)-r;
    return -1;
  }
  return r;
}
#define ph_syscall(...) PH_SYSCALL_PAD_(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)
#define PH_SYSCALL_PAD_(nr, a, b, c, d, e, f, ...)                                        \
  ph_syscall6((long)(nr), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))
#else
#define PH_RAW_SYSCALL 0
#define ph_syscall syscall
#endif

#endif /* PINHEAP_RAW_SYSCALL_H */
