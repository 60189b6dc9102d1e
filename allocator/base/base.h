/*
 * base.h -- the base every layer of the archive stands on: attribute
 * macros, small inline helpers (stat fields, the clock, alignment,
 * reallocarray), the logger and the one error path (error.c), the heap
 * lock (lock.c).  It includes rename.h, which shifts every global name,
 * and types.h, every type and constant.  The layers' headers include it
 * and one another upward only: os/os.h, heap/heap.h (with heap/chunk.h),
 * shm/shm.h, front/front.h, api/api.h; each declares the cross-file
 * names of its folder, grouped by the file that owns them.
 */
#ifndef PINHEAP_BASE_H
#define PINHEAP_BASE_H

#include "rename.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ---- attributes, defined once ------------------------------------------- */
#define ph_likely(x)     __builtin_expect(!!(x), 1)
#define ph_unlikely(x)   __builtin_expect(!!(x), 0)
#define PH_INLINE        static inline __attribute__((always_inline))
#define PH_NOINLINE      __attribute__((noinline))
#define PH_COLD          __attribute__((cold, noinline))
/* PH_HOT: the functions a small program runs (malloc, free and their
 * slow paths, the thread cache, the arena, the OS layer, the event entry
 * points), gathered in .text.hot (GNU ld and gold place it next to
 * .text.startup, allocator/base/startup.h's once-only code, before the rest of
 * .text).  The kernel maps a library's text 64 KiB at a time around each
 * page a process executes (fault-around): spread among the 140 kB of text,
 * these ~58 kB made all of it resident; gathered, the code a small program
 * never runs (mspaces, statistics, the shared heap, realloc, checks'
 * reports) fills windows of its own that stay out of its resident set (a
 * malloc/free loop under the preload shim: 51 text pages resident -> 16;
 * test/packaging/text_layout.sh).  The set was measured with callgrind on the
 * benchmark's fixed, falseshare, prodcons and larson workloads at 1 and 2
 * threads.  The mark moves code; it changes no behaviour. */
#define PH_HOT           __attribute__((section(".text.hot.pinheap")))
/* PH_HOT_ENTRY: PH_HOT for the two functions every malloc and free of a
 * small block runs (the preload shim's dispatch jumps straight to them),
 * started on a 64-byte line: left at 16, where they fall moved with the
 * size of every function before them in the section, and `fixed` ran 4-5%
 * slower or faster with the same code (2026-11-28: 0.386 against 0.366 s
 * at 1 thread, medians of 9 interleaved runs, after a change to start-up
 * code only; 0.366 once aligned).  The mark moves code, no behaviour. */
#define PH_HOT_ENTRY     PH_HOT __attribute__((aligned(64)))
/* PH_WARM: the functions a small program runs only past its first few
 * blocks (a chunk cache's refill and overflow, the OS layer's release
 * report), too big for the shim's first window: in a runtime's core library
 * GNU ld's own script gathers them with the hot text (.text.hot.*), which
 * left in plain .text cost the transitive start-up program one more 64 KiB
 * window, 16 pages of the core library's text (issue 30); the shim puts
 * them after its hot text (tools/preload_text.ld). */
#define PH_WARM          __attribute__((section(".text.hot.pinheap_warm")))
#define PH_NORETURN      __attribute__((noreturn))
#define PH_EXPORT        __attribute__((visibility("default")))
#define PH_HIDDEN        __attribute__((visibility("hidden")))

/* Set bits of a word, without the compiler's call to libgcc's
 * __popcountdi2 (x86-64 has no popcnt before -mpopcnt): that function, like
 * glibc's pthread_atfork wrapper below, is linked after all of pinheap's
 * code, so calling it at start-up made a text window of its own resident
 * (3-15 pages in the transitive case, by load address). */
PH_INLINE unsigned ph_popcount(uint64_t x)
{
  x -= (x >> 1) & 0x5555555555555555ull;
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

/* pthread_atfork is a wrapper of libc_nonshared.a around the exported
 * __register_atfork (GLIBC_2.3.2), linked into the including library after
 * pinheap's code; its handlers go with the library's __dso_handle (removed
 * if it is unloaded), as the wrapper's do. */
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                             void *dso);
extern void *__dso_handle __attribute__((weak, visibility("hidden")));
PH_INLINE int ph_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
  return __register_atfork(prepare, parent, child, &__dso_handle != NULL ? __dso_handle : NULL);
}

#ifndef PINHEAP_DEBUG
#define PINHEAP_DEBUG 1
#endif
/* PINHEAP_DEBUG (CMake cache variable of the same name):
 *   1  the default: every check that catches misuse (headers, check bytes,
 *      double frees, foreign and interior pointers) -- these are never off;
 *   2  also the full heap checker (check.c) after every public call, which
 *      ends the process naming the call after which the heap went wrong:
 *      O(heap) per call, for tests and for hunting a corruption. */
#if PINHEAP_DEBUG != 1 && PINHEAP_DEBUG != 2
#error "PINHEAP_DEBUG must be 1 or 2"
#endif

#include "allocator/base/types.h"

#include "allocator/base/raw_syscall.h"   /* ph_syscall: pinheap's own system calls */

/* Field n (numbered from 1, as proc(5) does; n >= 3) of a /proc/<pid>/stat
 * line read into the NUL-terminated buf: counted from the last ')', which
 * ends field 2 (the command's name may hold spaces and parentheses).
 * @return its first character, or NULL if the line has no such field. */
PH_INLINE const char *ph_stat_field(const char *buf, int n)
{
  const char *p = NULL;
  for (const char *q = buf; *q != '\0'; q++)
    if (*q == ')')
      p = q + 1;
  for (int field = 2; p != NULL && field < n; p++) {
    if (*p == '\0')
      return NULL;
    field += *p == ' ';
  }
  return p;
}

/* The decimal number at p (NULL: 0). */
PH_INLINE uint64_t ph_stat_number(const char *p)
{
  uint64_t v = 0;
  for (; p != NULL && *p >= '0' && *p <= '9'; p++)
    v = v * 10 + (uint64_t)(*p - '0');
  return v;
}

/* The clock clk (CLOCK_MONOTONIC, or CLOCK_MONOTONIC_COARSE: cheaper, a
 * tick's resolution) in nanoseconds.  The one clock of the tree (segment.c's
 * now_ms, shm.c's waits, hooks/install.c's timing); the vDSO's, nothing
 * allocated: safe inside the first malloc. */
PH_INLINE uint64_t ph_clock_ns(clockid_t clk)
{
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* reallocarray on top of a realloc: NULL with errno ENOMEM when
 * nmemb * size overflows, as glibc's; else realloc_fn(p, nmemb * size).
 * The one reallocarray of the tree (allocator/api/malloc.c, hooks/dispatch.c). */
PH_INLINE void *ph_reallocarray(void *p, size_t nmemb, size_t size,
                                void *(*realloc_fn)(void *, size_t))
{
  size_t total;
  if (__builtin_mul_overflow(nmemb, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc_fn(p, total);
}

PH_INLINE size_t align_up(size_t v, size_t a) { return (v + a - 1) & ~(a - 1); }
PH_INLINE size_t align_down(size_t v, size_t a) { return v & ~(a - 1); }

/* ======================================================================= */
/*  error.c -- the only output path; never allocates                        */
/* ======================================================================= */

/* The logger: ph_log(level, fmt, ...) writes "pinheap: <level>: <text>\n"
 * when level <= the PINHEAP_LOG_LEVEL parameter (warn until the parameters
 * are parsed: the logger never calls into them; fatal lines are always
 * written), as ONE write(2) of a line
 * formatted on the stack: no allocation, no stdio, no locale, no locks,
 * errno preserved.  Safe inside malloc, inside event handlers and before
 * the decision.  fmt is a printf subset: %s %d %u %x %p %c %% with the
 * length modifiers z, l, ll, the flags '-' and '0', a width (or '*') and a
 * precision for %s (or '.*'); %s of NULL prints "(null)"; an unknown
 * conversion is copied literally and reads no argument.  A line longer
 * than PH_LOG_LINE_MAX bytes is cut -- after the last whole word if one
 * ends in its last 64 bytes -- and ends in "...\n". */
typedef enum ph_log_level_e {
  PH_LOG_FATAL,
  PH_LOG_ERROR,
  PH_LOG_WARN,
  PH_LOG_INFO,
  PH_LOG_DEBUG,
  PH_LOG_LEVEL_COUNT
} ph_log_level_t;

#define PH_LOG_LINE_MAX 1024

PH_HIDDEN void ph_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** ph_log without the level name ("pinheap: <text>\n"): only for the
 *  misuse report's documented form -- ph_fatal's line and the heap
 *  checker's lines before it, which README and the misuse tests pin. */
PH_HIDDEN void ph_log_plain(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** ph_log with a va_list, for wrappers. */
PH_HIDDEN void ph_log_v(int level, const char *fmt, va_list ap);
/** The level in force: the parameter once the process's parameters are
 *  parsed (params_get() sets it), PH_LOG_WARN before. */
PH_HIDDEN int ph_log_level(void);
/** Sets the level (params_get(); tests).  Out-of-range values are
 *  clamped to fatal .. debug. */
PH_HIDDEN void ph_log_set_level(int level);
/** "fatal", "error", "warn", "info", "debug" (the parameter's spellings). */
PH_HIDDEN const char *ph_log_level_name(int level);
/** Formats one line ("pinheap: " [+ "<level>: " if with_name] + text +
 *  "\n") into buf[0 .. size), cut with "...\n" if it does not fit; never
 *  writes past buf + size and does not NUL-terminate.  @return its length
 *  (0 if size < 5). */
PH_HIDDEN size_t ph_log_format(char *buf, size_t size, int level, int with_name, const char *fmt,
                               va_list ap);
/** For tests only: where lines go (stderr by default).  @return the old fd. */
PH_HIDDEN int ph_log_set_fd(int fd);

/** Ends the process: writes "pinheap: <func>(): <what> <ptr>\n" (the
 *  misuse report's documented form, through the logger's line writer),
 *  then abort().  ptr may be NULL (then not printed). */
PH_HIDDEN PH_COLD PH_NORETURN void ph_fatal(const char *func, const char *what, const void *ptr);
/** ph_log(PH_LOG_WARN, ...) of the pieces (a NULL-terminated list of
 *  strings, joined, never read as a format): "pinheap: warning: ...\n". */
PH_HIDDEN PH_COLD void ph_warn(const char *first, ...);
/** Writes a NUL-terminated string to fd, retrying short writes and EINTR
 *  (raw output: malloc_stats; messages go through ph_log). */
PH_HIDDEN void ph_write_str(int fd, const char *s);
/** Formats v as "0x..." / decimal into buf (at least 24 bytes); returns buf. */
PH_HIDDEN char *ph_fmt_hex(char *buf, uintptr_t v);
PH_HIDDEN char *ph_fmt_dec(char *buf, uint64_t v);

/* The one message builder, for text made in pieces (no allocation, no
 * stdio): ph_str_add appends s (NULL: "(null)", as ph_log's %s) to the
 * NUL-terminated text in dst[0 .. cap), cut to fit, as snprintf would;
 * ph_str_dec and ph_str_hex append a number as ph_fmt_dec and ph_fmt_hex
 * spell it.  A line goes out with ph_log(level, "%s", dst). */
PH_INLINE void ph_str_add(char *dst, size_t cap, const char *s)
{
  if (s == NULL)
    s = "(null)";
  size_t have = strlen(dst), len = strlen(s);
  if (len > cap - 1 - have)
    len = cap - 1 - have;
  memcpy(dst + have, s, len);
  dst[have + len] = '\0';
}
PH_INLINE void ph_str_dec(char *dst, size_t cap, uint64_t v)
{
  char num[24];
  ph_str_add(dst, cap, ph_fmt_dec(num, v));
}
PH_INLINE void ph_str_hex(char *dst, size_t cap, uintptr_t v)
{
  char num[24];
  ph_str_add(dst, cap, ph_fmt_hex(num, v));
}

/* ======================================================================= */
/*  lock.c -- the heap lock's slow paths                                    */
/* ======================================================================= */

/** The heap lock's slow paths: ph_lock() found it held (spins, then
 *  sleeps on a futex); ph_unlock() found a sleeper (wakes one). */
PH_HIDDEN void ph_lock_slow(ph_lock_t *l);
PH_HIDDEN void ph_lock_wake(ph_lock_t *l);

/* ---- locks --------------------------------------------------------------- */
/* held: 0 free, 1 held, 2 held and a thread may be asleep on it (arena.c). */
PH_INLINE void ph_lock(ph_lock_t *l)
{
  int expected = 0;
  if (ph_likely(atomic_compare_exchange_weak_explicit(&l->held, &expected, 1,
                                                      memory_order_acquire, memory_order_relaxed)))
    return;
  ph_lock_slow(l);
}
PH_INLINE void ph_unlock(ph_lock_t *l)
{
  if (ph_unlikely(atomic_exchange_explicit(&l->held, 0, memory_order_release) == 2))
    ph_lock_wake(l);
}

/* A fork child's copy of a lock whose holder was another thread (gone in
 * the child): free again.  The caller has made what the lock guarded
 * usable first (hooks/forks.c). */
PH_INLINE void ph_lock_reset(ph_lock_t *l)
{
  atomic_store_explicit(&l->held, 0, memory_order_relaxed);
}
/* 1 when some thread held l (at fork: the forking one, or one now gone). */
PH_INLINE int ph_lock_held(ph_lock_t *l)
{
  return atomic_load_explicit(&l->held, memory_order_relaxed) != 0;
}

#endif
