/*
 * startup.h -- where code and data go in the archive's sections, for the
 * whole archive (the base layer: allocator/, which hooks/ and config/ build
 * on).  PH_STARTUP, the mark of once-only code: the decision, installation
 * (interposition checks, relocation and code patching, the probe),
 * event-handler registration, the allocator's own start-up.  Such code runs
 * before main (and again only when an object is loaded later), never on an
 * allocation's path.  PH_HOT_DATA and PH_COLD_BSS, below, for data.
 *
 * Why a section.  The kernel maps a library's text 64 KiB at a time around
 * each page a process touches (fault-around), so code that runs once, spread
 * among the allocator's hot functions, makes every window of pinheap's text
 * resident in every process.  In ".text.startup" (GNU ld and gold place it
 * together, after .text.unlikely and before the rest of .text; lld keeps
 * the input order) the once-only code shares windows with itself and with
 * the compiler's own constructors, and the code that never runs in a
 * given process stays out of its resident set.  The order of the archive's
 * members (config/sources.cmake) does the same between files.
 *
 * A function marked PH_STARTUP may still be called at any time: the mark
 * moves code and compiles it for size, it changes no behaviour.
 *
 * Libc's pages count as well: each libc function start-up calls that the
 * program itself does not brings its own 64 KiB window of libc's text in.
 * The small string helpers below (startup_env, startup_contains,
 * startup_span) stand for getenv, strstr, strspn and strcspn there.
 */
#ifndef PINHEAP_STARTUP_H
#define PINHEAP_STARTUP_H

/* Compiled for size: it runs once, and every byte of it is in the window
 * every process keeps resident (the shim's first 64 KiB, test/packaging/text_layout.sh):
 * 8 kB less there, for about 9,000 more instructions at start-up (3%). */
#if defined(__clang__)
#define PH_STARTUP_SIZE __attribute__((minsize))
#elif defined(__GNUC__)
#define PH_STARTUP_SIZE __attribute__((optimize("Os")))
#else
#define PH_STARTUP_SIZE
#endif
#define PH_STARTUP __attribute__((section(".text.startup.pinheap"))) PH_STARTUP_SIZE
/* Start-up code that only some runs take (the OS-bypass probe: when no
 * setting decides): in a runtime's core library GNU ld's own script
 * gathers it with the rest of the start-up text (.text.startup.*); the shim
 * puts it after its first window (tools/preload_text.ld), which the code
 * every run takes fills. */
#define PH_STARTUP_RARE __attribute__((section(".text.startup.pinheap_rare"))) PH_STARTUP_SIZE

/* The hooks' small statics that start-up writes (counts, locks, states):
 * in .data, whose few pages every process has resident anyway, rather
 * than scattered between the big tables of .bss, where each one would make
 * one more page resident. */
#define PH_HOT_DATA __attribute__((section(".data.pinheap_hot")))

/* The big zero-initialised tables that a small program never writes, or
 * writes on one page only (worst-case tables, scratch, lookup tables
 * indexed by address): in ".lbss", which GNU ld places after the whole of
 * .bss, so that the small statics and the hot heads of arrays left in .bss
 * share a few pages instead of each sitting between two cold tables.  Only
 * where the section is known to stay NOBITS (GCC on x86-64; clang 14 would
 * make it PROGBITS: zeros in the file); elsewhere plain .bss, same
 * behaviour. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PH_COLD_BSS __attribute__((section(".lbss.pinheap")))
#else
#define PH_COLD_BSS
#endif

#include <stddef.h>

extern char **environ;

/* The value of the environment variable name (as getenv), or NULL. */
PH_STARTUP static inline const char *startup_env(const char *name)
{
  for (char **e = environ; e != NULL && *e != NULL; e++) {
    const char *a = *e, *b = name;
    while (*b != '\0' && *a == *b)
      a++, b++;
    if (*b == '\0' && *a == '=')
      return a + 1;
  }
  return NULL;
}

/* 1 when sub occurs in s (as strstr(s, sub) != NULL). */
PH_STARTUP static inline int startup_contains(const char *s, const char *sub)
{
  for (;; s++) {
    const char *a = s, *b = sub;
    while (*b != '\0' && *a == *b)
      a++, b++;
    if (*b == '\0')
      return 1;
    if (*s == '\0')
      return 0;
  }
}

/* The length of s's first span of bytes that are (in == 1, as strspn) or
 * are not (in == 0, as strcspn) among set's. */
PH_STARTUP static inline size_t startup_span(const char *s, const char *set, int in)
{
  size_t n = 0;
  for (; s[n] != '\0'; n++) {
    const char *c = set;
    while (*c != '\0' && *c != s[n])
      c++;
    if ((*c != '\0') != in)
      break;
  }
  return n;
}

#endif
