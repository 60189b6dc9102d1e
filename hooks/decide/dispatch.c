/*
 * dispatch.c -- the leave-pinned decision, taken once, and the dispatch
 * table that the unprefixed malloc family (replace.c) jumps through.
 *
 * Whichever comes first -- the constructor below or the very first
 * allocation call from anywhere -- runs dispatch_decide().  That path never
 * allocates: the parameters come from getenv, the probe uses raw syscalls,
 * warnings are raw writes.  Enabled: the table points at pinheap's
 * allocator, with free/realloc/malloc_usable_size sending pointers pinheap
 * does not own back to glibc.  Disabled: the table points at glibc's
 * __libc_* functions; the few with no such export are looked up in libc
 * once, lazily.  Main entry point: dispatch_decide(); PINHEAP_NAME(malloc_init)
 * is the plug-in interface's explicit form of the same start.
 *
 * The default alignment (PINHEAP_MALLOC_ALIGN, config/params.h).  At 16,
 * what both allocators give anyway, the tables stay as they are: no cost.
 * Above it, the decision swaps the table's malloc, calloc, realloc,
 * reallocarray, memalign, posix_memalign and aligned_alloc for the align_*
 * functions below, which call the chosen table's memalign (pinheap's, or
 * glibc's __libc_memalign) with the alignment; realloc keeps it (a resized
 * block that is not aligned is moved to one that is).  valloc and pvalloc
 * give pages already.  The prefixed API (pinheap_malloc, ...) is not
 * concerned: it keeps the allocator's 16.
 */
#include "hooks/decide/dispatch.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnu/lib-names.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "hooks/decide/decision.h"
#include "allocator/front/front.h"
#include "config/params.h"
#include "pinheap.h"
#include "hooks/intercept/reloc.h"
#include "allocator/base/startup.h"

/* glibc's exported allocator (stable ABI, GLIBC_2.2.5). */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern int __libc_mallopt(int, int);
extern struct mallinfo __libc_mallinfo(void);

__attribute__((weak)) int dispatch_preloaded = 0;  /* not const: a const weak gets folded */

int dispatch_state;                         /* DISPATCH_*; written once */
/* Fork: held only while the decision is taken (once, no fork inside); a
 * child forked meanwhile frees it and decides again (dispatch_fork_child). */
static ph_lock_t dispatch_lock;
static __thread int dispatch_deciding __attribute__((tls_model("initial-exec")));
static decision_t dispatch_decision;        /* why */
static char dispatch_text[DECISION_TEXT_MAX + 16];  /* "enabled: why" */

/* ======================================================================= */
/*  enabled: pinheap's allocator; foreign pointers go back to glibc         */
/* ======================================================================= */

PH_HOT_ENTRY static void en_free(void *p)
{
  /* NULL is in no arena: it takes the slow way to __libc_free(NULL). */
  if (ph_likely(front_free_fast(p)))
    return;
  uintptr_t o = owner_map_get(p);
  if (o != 0) {
    front_free_slow(p, o, "free");
    return;
  }
  __libc_free(p);                           /* glibc's block goes back to glibc */
}

static void *en_realloc(void *p, size_t n)
{
  if (p == NULL || owner_map_get(p) != 0)
    return realloc(p, n);
  return __libc_realloc(p, n);              /* glibc's block stays glibc's */
}

static void *en_reallocarray(void *p, size_t nmemb, size_t size)
{
  return ph_reallocarray(p, nmemb, size, en_realloc);
}

static size_t (*libc_usable_size)(void *);

PH_STARTUP static void *libc_lookup(const char *name)
{
  void *f = NULL;
  /* read from libc's symbol table when that is dlsym's answer (no dlopen
   * at start-up: reloc.h) */
  if (reloc_defs_named("libc.so", &name, &f, 1) == 0)
    return f;
  void *h = dlopen(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
  f = h != NULL ? dlsym(h, name) : NULL;
  if (h != NULL)
    dlclose(h);
  if (f == NULL)
    ph_fatal("dlsym", "glibc does not export a malloc-family function pinheap forwards to", name);
  return f;
}

PH_STARTUP void dispatch_libc_prepare(void *usable_size)
{
  if (__atomic_load_n(&libc_usable_size, __ATOMIC_ACQUIRE) != NULL)
    return;
  if (usable_size == NULL)
    usable_size = libc_lookup("malloc_usable_size");
  __atomic_store_n(&libc_usable_size, (size_t (*)(void *))usable_size, __ATOMIC_RELEASE);
}

static size_t en_malloc_usable_size(void *p)
{
  if (p == NULL)
    return 0;
  if (owner_map_get(p) != 0)
    return malloc_usable_size(p);
  size_t (*f)(void *) = __atomic_load_n(&libc_usable_size, __ATOMIC_ACQUIRE);
  if (f == NULL) {
    f = (size_t (*)(void *))libc_lookup("malloc_usable_size");
    __atomic_store_n(&libc_usable_size, f, __ATOMIC_RELEASE);
  }
  return f(p);
}

static struct mallinfo en_mallinfo(void)
{
  struct mallinfo2 m2 = mallinfo2();
  struct mallinfo m;
  m.arena = (int)m2.arena;
  m.ordblks = (int)m2.ordblks;
  m.smblks = (int)m2.smblks;
  m.hblks = (int)m2.hblks;
  m.hblkhd = (int)m2.hblkhd;
  m.usmblks = (int)m2.usmblks;
  m.fsmblks = (int)m2.fsmblks;
  m.uordblks = (int)m2.uordblks;
  m.fordblks = (int)m2.fordblks;
  m.keepcost = (int)m2.keepcost;
  return m;
}

static const dispatch_table_t dispatch_enabled = {
  .fn_malloc = malloc,
  .fn_free = en_free,
  .fn_calloc = calloc,
  .fn_realloc = en_realloc,
  .fn_reallocarray = en_reallocarray,
  .fn_memalign = memalign,
  .fn_posix_memalign = posix_memalign,
  .fn_aligned_alloc = aligned_alloc,
  .fn_valloc = valloc,
  .fn_pvalloc = pvalloc,
  .fn_malloc_usable_size = en_malloc_usable_size,
  .fn_mallopt = mallopt,
  .fn_mallinfo = en_mallinfo,
  .fn_mallinfo2 = mallinfo2,
  .fn_malloc_stats = malloc_stats,
  .fn_malloc_trim = malloc_trim,
};

/* ======================================================================= */
/*  disabled: glibc, untouched                                              */
/* ======================================================================= */

/* No __libc_ export: resolved on first use, then the table points at
 * glibc's function itself -- unless the entry is no longer this function
 * (an align_* wrapper calls it, and stays in the table). */
#define DIS_LAZY(ret, name, params, args)                                    \
  static ret dis_##name params                                               \
  {                                                                          \
    ret (*f) params = (ret (*) params)libc_lookup(#name);                    \
    ret (*self) params = dis_##name;                                         \
    __atomic_compare_exchange_n(&dispatch_table.fn_##name, &self, f, 0,      \
                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);         \
    return f args;                                                           \
  }
DIS_LAZY(int, posix_memalign, (void **p, size_t a, size_t n), (p, a, n))
DIS_LAZY(void *, aligned_alloc, (size_t a, size_t n), (a, n))
DIS_LAZY(void *, reallocarray, (void *p, size_t m, size_t n), (p, m, n))
DIS_LAZY(size_t, malloc_usable_size, (void *p), (p))
DIS_LAZY(struct mallinfo2, mallinfo2, (void), ())
DIS_LAZY(int, malloc_trim, (size_t pad), (pad))

static void dis_malloc_stats(void)
{
  void (*f)(void) = (void (*)(void))libc_lookup("malloc_stats");
  void (*self)(void) = dis_malloc_stats;
  __atomic_compare_exchange_n(&dispatch_table.fn_malloc_stats, &self, f, 0, __ATOMIC_RELEASE,
                              __ATOMIC_RELAXED);
  f();
}

static const dispatch_table_t dispatch_disabled = {
  .fn_malloc = __libc_malloc,
  .fn_free = __libc_free,
  .fn_calloc = __libc_calloc,
  .fn_realloc = __libc_realloc,
  .fn_reallocarray = dis_reallocarray,
  .fn_memalign = __libc_memalign,
  .fn_posix_memalign = dis_posix_memalign,
  .fn_aligned_alloc = dis_aligned_alloc,
  .fn_valloc = __libc_valloc,
  .fn_pvalloc = __libc_pvalloc,
  .fn_malloc_usable_size = dis_malloc_usable_size,
  .fn_mallopt = __libc_mallopt,
  .fn_mallinfo = __libc_mallinfo,
  .fn_mallinfo2 = dis_mallinfo2,
  .fn_malloc_stats = dis_malloc_stats,
  .fn_malloc_trim = dis_malloc_trim,
};

/* ======================================================================= */
/*  the default alignment, above 16                                         */
/* ======================================================================= */

/* Both written once by the decision, before the table points here:
 * align_value first, then align_base (release). */
static size_t align_value;                  /* a power of two, 32 .. 4096 */
static const dispatch_table_t *align_base;  /* dispatch_enabled or _disabled */

/* The table the aligned entries wrap.  A thread that reached an align_*
 * function through the table (a relaxed load) without yet seeing the
 * decision's writes gets them from dispatch_decide(), whose acquire of the
 * state orders them. */
static const dispatch_table_t *align_table(void)
{
  const dispatch_table_t *b = __atomic_load_n(&align_base, __ATOMIC_ACQUIRE);
  if (ph_unlikely(b == NULL)) {
    dispatch_decide();
    b = __atomic_load_n(&align_base, __ATOMIC_ACQUIRE);
  }
  return b;
}

static int align_is_pow2(size_t a)
{
  return a != 0 && (a & (a - 1)) == 0;
}

static void *align_malloc(size_t n)
{
  const dispatch_table_t *b = align_table();
  return b->fn_memalign(align_value, n);
}

static void *align_calloc(size_t m, size_t n)
{
  const dispatch_table_t *b = align_table();
  size_t total;
  if (__builtin_mul_overflow(m, n, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = b->fn_memalign(align_value, total);
  if (p != NULL)
    memset(p, 0, total);
  return p;
}

/* The chosen allocator's realloc, then, if the block it gives is not
 * aligned (it moved the block to one its malloc made), a move to an
 * aligned one.  Should that allocation fail the old block is gone already:
 * the unaligned one is returned (its contents are right) and the failure
 * said once. */
static void *align_realloc(void *p, size_t n)
{
  static int said;
  if (p == NULL)
    return align_malloc(n);
  const dispatch_table_t *b = align_table();
  void *q = b->fn_realloc(p, n);
  if (q == NULL || ((uintptr_t)q & (align_value - 1)) == 0)
    return q;
  int saved = errno;
  void *r = b->fn_memalign(align_value, n);
  if (r == NULL) {
    errno = saved;
    if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED) == 0)
      ph_log(PH_LOG_WARN, "realloc: out of memory while moving a resized block to a %zu-byte "
             "boundary (PINHEAP_MALLOC_ALIGN): a block aligned to less was returned",
             align_value);
    return q;
  }
  memcpy(r, q, n);
  b->fn_free(q);
  errno = saved;
  return r;
}

static void *align_reallocarray(void *p, size_t m, size_t n)
{
  return ph_reallocarray(p, m, n, align_realloc);
}

/* Asked for less than the default: the default.  Invalid alignments go
 * through unchanged, to be refused as the allocator refuses them. */
static void *align_memalign(size_t a, size_t n)
{
  const dispatch_table_t *b = align_table();
  return b->fn_memalign(a < align_value ? align_value : a, n);
}

static int align_posix_memalign(void **pp, size_t a, size_t n)
{
  const dispatch_table_t *b = align_table();
  if (align_is_pow2(a) && a % sizeof(void *) == 0 && a < align_value)
    a = align_value;
  return b->fn_posix_memalign(pp, a, n);
}

static void *align_aligned_alloc(size_t a, size_t n)
{
  const dispatch_table_t *b = align_table();
  if (align_is_pow2(a) && a < align_value)
    a = align_value;
  return b->fn_aligned_alloc(a, n);
}

/* ======================================================================= */
/*  undecided: the first call decides                                       */
/* ======================================================================= */

/* glibc's reallocarray before the decision: the product is checked, as
 * glibc does (ENOMEM and NULL when m * n overflows). */
void *dispatch_libc_reallocarray(void *p, size_t m, size_t n)
{
  return ph_reallocarray(p, m, n, __libc_realloc);
}

/* After dispatch_decide() the table is installed -- unless this thread is
 * inside the decision itself (nothing on that path allocates, but should
 * something, glibc serves it). */
#define FIRST_CALL(ret, name, params, args, libc_call)                       \
  static ret first_##name params                                             \
  {                                                                          \
    dispatch_decide();                                                       \
    if (ph_unlikely(__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) ==    \
                    DISPATCH_UNDECIDED))                                     \
      return libc_call;                                                      \
    return __atomic_load_n(&dispatch_table.fn_##name, __ATOMIC_RELAXED) args; \
  }
FIRST_CALL(void *, malloc, (size_t n), (n), __libc_malloc(n))
FIRST_CALL(void *, calloc, (size_t m, size_t n), (m, n), __libc_calloc(m, n))
FIRST_CALL(void *, realloc, (void *p, size_t n), (p, n), __libc_realloc(p, n))
FIRST_CALL(void *, reallocarray, (void *p, size_t m, size_t n), (p, m, n), dispatch_libc_reallocarray(p, m, n))
FIRST_CALL(void *, memalign, (size_t a, size_t n), (a, n), __libc_memalign(a, n))
FIRST_CALL(int, posix_memalign, (void **p, size_t a, size_t n), (p, a, n), ENOMEM)
FIRST_CALL(void *, aligned_alloc, (size_t a, size_t n), (a, n), __libc_memalign(a, n))
FIRST_CALL(void *, valloc, (size_t n), (n), __libc_valloc(n))
FIRST_CALL(void *, pvalloc, (size_t n), (n), __libc_pvalloc(n))
FIRST_CALL(size_t, malloc_usable_size, (void *p), (p), 0)
FIRST_CALL(int, mallopt, (int p, int v), (p, v), __libc_mallopt(p, v))
FIRST_CALL(struct mallinfo, mallinfo, (void), (), __libc_mallinfo())
FIRST_CALL(int, malloc_trim, (size_t pad), (pad), 0)

static struct mallinfo2 first_mallinfo2(void)
{
  dispatch_decide();
  if (__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) == DISPATCH_UNDECIDED) {
    struct mallinfo2 zero;
    memset(&zero, 0, sizeof(zero));
    return zero;
  }
  return __atomic_load_n(&dispatch_table.fn_mallinfo2, __ATOMIC_RELAXED)();
}

static void first_free(void *p)
{
  dispatch_decide();
  if (__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) == DISPATCH_UNDECIDED) {
    __libc_free(p);
    return;
  }
  __atomic_load_n(&dispatch_table.fn_free, __ATOMIC_RELAXED)(p);
}

static void first_malloc_stats(void)
{
  dispatch_decide();
  if (__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) != DISPATCH_UNDECIDED)
    __atomic_load_n(&dispatch_table.fn_malloc_stats, __ATOMIC_RELAXED)();
}

dispatch_table_t dispatch_table = {
  .fn_malloc = first_malloc,
  .fn_free = first_free,
  .fn_calloc = first_calloc,
  .fn_realloc = first_realloc,
  .fn_reallocarray = first_reallocarray,
  .fn_memalign = first_memalign,
  .fn_posix_memalign = first_posix_memalign,
  .fn_aligned_alloc = first_aligned_alloc,
  .fn_valloc = first_valloc,
  .fn_pvalloc = first_pvalloc,
  .fn_malloc_usable_size = first_malloc_usable_size,
  .fn_mallopt = first_mallopt,
  .fn_mallinfo = first_mallinfo,
  .fn_mallinfo2 = first_mallinfo2,
  .fn_malloc_stats = first_malloc_stats,
  .fn_malloc_trim = first_malloc_trim,
};

/* ======================================================================= */
/*  the decision                                                            */
/* ======================================================================= */

PH_STARTUP void dispatch_decide(void)
{
  if (ph_likely(__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) != DISPATCH_UNDECIDED))
    return;
  if (dispatch_deciding)
    return;                                 /* re-entered from the decision itself */
  ph_lock(&dispatch_lock);
  if (__atomic_load_n(&dispatch_state, __ATOMIC_RELAXED) == DISPATCH_UNDECIDED) {
    dispatch_deciding = 1;
    /* another copy of pinheap serves: no decision, its malloc family (copies.c) */
    const dispatch_table_t *serving = copies_table();
    int enabled = serving == NULL &&
                  decision_run(dispatch_preloaded, NULL, install_tool(), &dispatch_decision);
    release_init();
    const dispatch_table_t *t = serving != NULL ? serving
                                : enabled ? &dispatch_enabled : &dispatch_disabled;
    dispatch_table_t aligned;
    int align = params_get()->v[PARAM_MALLOC_ALIGN].value;
    if (align > PARAM_ALIGN_MIN && serving == NULL) {
      align_value = (size_t)align;
      __atomic_store_n(&align_base, t, __ATOMIC_RELEASE);
      aligned = *t;
      aligned.fn_malloc = align_malloc;
      aligned.fn_calloc = align_calloc;
      aligned.fn_realloc = align_realloc;
      aligned.fn_reallocarray = align_reallocarray;
      aligned.fn_memalign = align_memalign;
      aligned.fn_posix_memalign = align_posix_memalign;
      aligned.fn_aligned_alloc = align_aligned_alloc;
      t = &aligned;
    }
    /* Each pointer is replaced on its own; a racing caller sees either the
     * first-call function (which now finds the state decided) or the new
     * target, both correct. */
    dispatch_table_t *d = &dispatch_table;
#define SET(name, ret, params, event, entry) \
    __atomic_store_n(&d->fn_##name, t->fn_##name, __ATOMIC_RELAXED);
    PH_INTERCEPTED_FAMILY(SET)
#undef SET
    __atomic_store_n(&dispatch_state, enabled ? DISPATCH_ENABLED : DISPATCH_DISABLED,
                     __ATOMIC_RELEASE);
    dispatch_deciding = 0;
  }
  ph_unlock(&dispatch_lock);
}

int PINHEAP_NAME(malloc_init)(void)
{
  dispatch_decide();
  release_init();                           /* the events: idempotent */
  install_run();
  /* front_init() is false while another thread starts the allocator (or
   * this thread, from inside the start): wait a while, never forever. */
  for (int i = 0; !front_init(); i++) {
    if (i >= 100000)
      return EAGAIN;
    sched_yield();
  }
  return 0;
}

/* The decision publishes dispatch_state last, after every pointer of the
 * table (each correct on its own): a child whose decision was lost with
 * the thread taking it still finds the state undecided, and takes it. */
void dispatch_fork_child(void)
{
  if (!dispatch_deciding)      /* this thread forked from inside it: it goes on */
    ph_lock_reset(&dispatch_lock);
}

/* Before main, in case nothing allocated earlier.  The real work is
 * idempotent and also reachable from the first malloc.  The fork handler
 * before the installation: a late load installs while threads run. */
__attribute__((constructor(101))) static void dispatch_ctor(void)
{
  dispatch_decide();
  forks_init();
  install_run();
  selftest_say();
}

/* The text is composed once, outside the first malloc, by whichever thread
 * asks first; the others wait for it (dispatch_text_state: 0 none, 1 being
 * written, 2 ready and read-only). */
static int dispatch_text_state;

static const char *dispatch_decision_text(void)
{
  int expected = 0;

  dispatch_decide();
  if (ph_likely(__atomic_load_n(&dispatch_text_state, __ATOMIC_ACQUIRE) == 2))
    return dispatch_text;
  if (__atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) == DISPATCH_UNDECIDED)
    return "undecided: asked from inside the decision itself";
  if (__atomic_compare_exchange_n(&dispatch_text_state, &expected, 1, 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    const char *head = __atomic_load_n(&dispatch_state, __ATOMIC_ACQUIRE) == DISPATCH_ENABLED
                       ? "enabled: " : "disabled: ";
    size_t h = strlen(head);
    memcpy(dispatch_text, head, h);
    memcpy(dispatch_text + h, dispatch_decision.text, strlen(dispatch_decision.text) + 1);
    __atomic_store_n(&dispatch_text_state, 2, __ATOMIC_RELEASE);
    return dispatch_text;
  }
  while (__atomic_load_n(&dispatch_text_state, __ATOMIC_ACQUIRE) != 2)
    sched_yield();
  return dispatch_text;
}

/* What the copies of pinheap in the process did, said too (copies.c). */
const char *PINHEAP_NAME(decision_text)(void)
{
  return copies_text(COPIES_TEXT_DECISION, dispatch_decision_text());
}
COPIES_SELF_ALIAS(decision_text);
