/*
 * params.c -- parses pinheap's configuration from the environment (and,
 * through params_files.c, from Open MPI's parameter files).
 *
 * Owns the one descriptor table (param_descs: every parameter, the
 * process's and the shared heap's, with its name, its MCA-style alias,
 * kind, default and accepted values), the one value parser and the
 * environment scan that serve every row, and the process's evaluated copy
 * (params_process), filled once and read-only after.  Main entry point:
 * params_get().  Runs inside the very first malloc: no allocation, no
 * stdio, no locale; the environment is scanned by hand.  The shared heap's
 * rows are parsed only when asked, through params_shm.c.  See params.h.
 */
#include "allocator/base/base.h"

#include "config/params.h"
#include "config/params_internal.h"
#include "allocator/base/startup.h"     /* PH_STARTUP */

#include <sched.h>
#include <string.h>

extern char **environ;

#if PINHEAP_PARAM_FILES
/* Open MPI's names: its boolean spellings too (see value_parse). */
#define EXPECT_TRISTATE "1, 0, -1, true, false, yes, no, t, f, y, n, enabled, disabled or auto"
#define EXPECT_BOOL     "1, 0, true, false, yes, no, t, f, y, n, enabled or disabled"
#define EXPECT_MODE     "on, off, auto, 1, 0, -1, true, false, yes, no, t, f, y, n, enabled " \
                        "or disabled"
#else
#define EXPECT_TRISTATE "1, 0, -1, true, false, yes or no"
#define EXPECT_BOOL     "1, 0, true, false, yes or no"
#define EXPECT_MODE     "on, off, auto, 1, 0, -1, true, false, yes or no"
#endif
#define EXPECT_PATH     "an absolute path (starting with '/')"
#define EXPECT_COUNT    "a whole number from 1 to 256"
#define EXPECT_SIZE     "a size in bytes from 8M to 1T, with an optional K, M, G or T suffix (powers of 1024)"
#define EXPECT_MIB      "a whole number of MiB from 8 to 1048576"
#define EXPECT_RANKS    "a whole number from 1 to 4096"
#define EXPECT_JOB      "1 to 64 characters among A-Z, a-z, 0-9, '.', '_' and '-'"
#define EXPECT_LEVEL    "fatal, error, warn, info, debug or 0 to 4"
#define EXPECT_MSEC     "a whole number of milliseconds from 1 to 3600000"
#define EXPECT_ALIGN    "a power of two from 16 to 4096"

/* The MCA-style alias of a PINHEAP_ parameter: the build's parameter prefix,
 * the framework and component ("memory_pinheap_"), the name in lowercase. */
#define MCA_ALIAS(suffix) PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_" suffix
/* A pinheap parameter: PINHEAP_<NAME>, shown under that name, and its MCA
 * alias <prefix>memory_pinheap_<name>. */
#define PINHEAP_PARAM(NAME, name, kind, def, expected) \
  { "PINHEAP_" NAME, "PINHEAP_" NAME, kind, def, expected, MCA_ALIAS(name) }
/* A shared heap's parameter: row PARAM_COUNT + id, under its one name. */
#define SHM_PARAM(id, NAME, kind, def, expected) \
  [PARAM_COUNT + (id)] = { NAME, NAME, kind, def, expected, NULL }

/* The one table: the process's rows (params_get), then the shared heap's
 * (parsed only when asked: params_shm.c). */
const param_desc_t param_descs[PARAM_ROWS] = {
  [PARAM_LEAVE_PINNED] = {
    PINHEAP_ENV_LEAVE_PINNED, PINHEAP_PARAM_LEAVE_PINNED_STRING,
    PARAM_KIND_TRISTATE, PARAM_TRI_NOT_FOUND, EXPECT_TRISTATE, NULL },
  [PARAM_LEAVE_PINNED_PIPELINE] = {
    PINHEAP_ENV_LEAVE_PINNED_PIPELINE, PINHEAP_PARAM_LEAVE_PINNED_PIPELINE_STRING,
    PARAM_KIND_TRISTATE, PARAM_TRI_NOT_FOUND, EXPECT_TRISTATE, NULL },
  [PARAM_DISABLE] = {
    PINHEAP_ENV_DISABLE, PINHEAP_PARAM_DISABLE_STRING,
    PARAM_KIND_BOOL, 0, EXPECT_BOOL, NULL },
  [PARAM_MODE] = {
    PINHEAP_ENV_MODE, PINHEAP_ENV_MODE,
    PARAM_KIND_MODE, PARAM_MODE_AUTO, EXPECT_MODE, MCA_ALIAS("mode") },
  [PARAM_FAKEROOTKEY] = {
    "FAKEROOTKEY", "FAKEROOTKEY", PARAM_KIND_PRESENCE, 0, "any value", NULL },
  [PARAM_FAKED_MODE] = {
    "FAKED_MODE", "FAKED_MODE", PARAM_KIND_PRESENCE, 0, "any value", NULL },
  [PARAM_SANDBOX_ON] = {
    "SANDBOX_ON", "SANDBOX_ON", PARAM_KIND_PRESENCE, 0, "any value", NULL },
  [PARAM_PROBE_ROOT] = {
    PINHEAP_ENV_PROBE_ROOT, PINHEAP_ENV_PROBE_ROOT,
    PARAM_KIND_PATH, 0, EXPECT_PATH, MCA_ALIAS("probe_root") },
  /* How many arenas threads spread over (as mallopt(M_ARENA_MAX)); 0: the
   * default, four per CPU. */
  [PARAM_ARENA_MAX] = PINHEAP_PARAM("ARENA_MAX", "arena_max", PARAM_KIND_COUNT, 0, EXPECT_COUNT),
  /* 0: no relocation patching; calls reach pinheap only where its own
   * symbols interpose (hooks/install.c). */
  [PARAM_PATCH] = PINHEAP_PARAM("PATCH", "patch", PARAM_KIND_BOOL, 1, EXPECT_BOOL),
  /* 1: replace malloc by patching even when pinheap was loaded after the
   * program started (dlopen): blocks of pointers to free captured earlier
   * would go to glibc, so it is off unless asked for. */
  [PARAM_LATE_MALLOC] = PINHEAP_PARAM("LATE_MALLOC", "late_malloc",
    PARAM_KIND_BOOL, 0, EXPECT_BOOL),
  /* 0: no code patching of libc's entry points (hooks/patch.c); glibc's
   * own internal munmap/madvise/brk stay unseen. */
  [PARAM_CODE_PATCH] = PINHEAP_PARAM("CODE_PATCH", "code_patch", PARAM_KIND_BOOL, 1, EXPECT_BOOL),
  /* Which messages are written (allocator/base/error.c): those at this level
   * and more severe; fatal ones always. */
  [PARAM_LOG_LEVEL] = PINHEAP_PARAM("LOG_LEVEL", "log_level",
    PARAM_KIND_LEVEL, PH_LOG_WARN, EXPECT_LEVEL),
  /* 0: pinheap intercepts no memory call and fires no event: nothing is
   * patched for mmap ... sbrk, handlers and release listeners are refused
   * (ENOTSUP), UCX's libucm is not fed, the support level is 0.  The malloc
   * replacement (PINHEAP_MODE) does not depend on it. */
  [PARAM_EVENTS] = PINHEAP_PARAM("EVENTS", "events", PARAM_KIND_BOOL, 1, EXPECT_BOOL),
  /* What the process's malloc, calloc, realloc, reallocarray (and
   * memalign, posix_memalign, aligned_alloc asked for less) align blocks
   * to, pinheap enabled or disabled (hooks/dispatch.c). */
  [PARAM_MALLOC_ALIGN] = PINHEAP_PARAM("MALLOC_ALIGN", "malloc_align",
    PARAM_KIND_ALIGN, PARAM_ALIGN_MIN, EXPECT_ALIGN),
  /* 1: watched ranges are also registered with userfaultfd and a helper
   * thread reports the releases the kernel saw but pinheap did not announce
   * (hooks/watch/audit.c). */
  [PARAM_AUDIT] = PINHEAP_PARAM("AUDIT", "audit", PARAM_KIND_BOOL, 0, EXPECT_BOOL),
  /* The shared-memory heap's (allocator/shm/shm.c): on when a size is given. */
  SHM_PARAM(SHM_PARAM_SIZE, "PINHEAP_SHM_SIZE", PARAM_KIND_SIZE, 0, EXPECT_SIZE),
  SHM_PARAM(SHM_PARAM_SM_SIZE, "SM_SIZE", PARAM_KIND_MIB, 0, EXPECT_MIB),
  SHM_PARAM(SHM_PARAM_RANKS, "PINHEAP_SHM_RANKS", PARAM_KIND_RANKS, 0, EXPECT_RANKS),
  SHM_PARAM(SHM_PARAM_SM_RANKS, "SM_RANKS", PARAM_KIND_RANKS, 0, EXPECT_RANKS),
  SHM_PARAM(SHM_PARAM_JOB, "PINHEAP_SHM_JOB", PARAM_KIND_JOB, 0, EXPECT_JOB),
  SHM_PARAM(SHM_PARAM_FALLBACK, "PINHEAP_SHM_FALLBACK", PARAM_KIND_BOOL, 0, EXPECT_BOOL),
  SHM_PARAM(SHM_PARAM_TIMEOUT, "PINHEAP_SHM_TIMEOUT", PARAM_KIND_MSEC, SHM_TIMEOUT_DEFAULT_MS,
            EXPECT_MSEC),
};

/* The process's table: 0 not parsed, 1 being parsed, 2 ready (read-only).
 * The state is with the hot statics: in .bss it was read before anything
 * on its page was written, so that page faulted twice (the zero page,
 * then its copy). */
static params_t params_process;
PH_HOT_DATA static int params_state;

/* ---- text helpers (ASCII only, no locale) ------------------------------- */

PH_STARTUP static char char_lower(char c)
{
  return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Does [b, e) equal the lowercase word w, ignoring case? */
PH_STARTUP static int span_equals(const char *b, const char *e, const char *w)
{
  for (; b < e; b++, w++) {
    if (*w == '\0' || char_lower(*b) != *w)
      return 0;
  }
  return *w == '\0';
}

/* Does [b, e) equal one of the lowercase words (NULL-terminated), ignoring case? */
PH_STARTUP static int span_in(const char *b, const char *e, const char *const *words)
{
  for (; *words != NULL; words++) {
    if (span_equals(b, e, *words))
      return 1;
  }
  return 0;
}

/* A boolean's spellings.  Open MPI 4.1's (mca_base_var_enum.c: the bool and
 * auto_bool enumerators, compared with strcasecmp) add t, y, enabled and
 * f, n, disabled; its auto_bool (mpi_leave_pinned's) adds auto for -1.  They
 * are Open MPI's words, so only a build with its prefix takes them.  Its
 * numbers stay pinheap's (1, 0, -1): Open MPI also clamps any other
 * integer, which pinheap refuses as before. */
static const char *const words_yes[] = {
  "1", "true", "yes",
#if PINHEAP_PARAM_FILES
  "t", "y", "enabled",
#endif
  NULL
};
static const char *const words_no[] = {
  "0", "false", "no",
#if PINHEAP_PARAM_FILES
  "f", "n", "disabled",
#endif
  NULL
};

/* The filter key of a name or an entry: its first three bytes, mixed into
 * 8 bits (a name shorter than three bytes ends in '\0', in an entry in '=':
 * both count as 0 and end it). */
PH_HOT static unsigned env_key(const char *s)
{
  unsigned c0 = (unsigned char)s[0], c1 = 0, c2 = 0;

  if (c0 != 0) {
    c1 = (unsigned char)s[1];
    if (c1 == '=')
      c1 = 0;
    if (c1 != 0) {
      c2 = (unsigned char)s[2];
      if (c2 == '=')
        c2 = 0;
    }
  }
  return ((c0 << 16 | c1 << 8 | c2) * 0x9e3779b1u) >> 24;
}

/* The hash of a name of len bytes (len >= 1): its length and its last
 * three bytes, where the names that share a start differ (every
 * OMPI_MCA_memory_pinheap_<name> shares 24 bytes).  Equal names give equal
 * hashes; a collision only costs one comparison more. */
PH_HOT static uint32_t env_hash(const char *s, size_t len)
{
  uint32_t tail = (unsigned char)s[len - 1];

  if (len > 1)
    tail |= (uint32_t)(unsigned char)s[len - 2] << 8;
  if (len > 2)
    tail |= (uint32_t)(unsigned char)s[len - 3] << 16;
  return (tail ^ (uint32_t)len << 24) * 0x9e3779b1u;
}

#define ENV_SLOTS 256               /* the hash table's: 2 ENV_SCAN_MAX, a power of two */

/* Looks names[0 .. n) up in envp in one pass over it: texts[i] is the text
 * after the first "names[i]=" entry, or NULL (also for a NULL or empty
 * name).  Two steps per entry: a bitmap keyed by its first three bytes
 * (env_key) turns away nearly every entry that no name starts as; the rest
 * (under mpirun some 150 OMPI_MCA_ ones, which all share their start) are
 * looked up by their name's hash (env_hash) in an open-addressed table of
 * the names, and compared in full only with a name of the same hash and
 * length: no entry is compared with every name. */
PH_HOT void param_env_scan(char *const *envp, const char *const *names, size_t n,
                           const char **texts)
{
  uint32_t start[256 / 32];            /* bit env_key: some name starts so */
  unsigned char slot[ENV_SLOTS];       /* by hash: a name's index + 1, or 0 */
  uint32_t hash[ENV_SCAN_MAX];
  uint32_t len[ENV_SCAN_MAX];
  size_t left = 0;

  memset(start, 0, sizeof(start));
  memset(slot, 0, sizeof(slot));
  for (size_t i = 0; i < n; i++) {
    texts[i] = NULL;
    if (names[i] == NULL || names[i][0] == '\0')
      continue;
    unsigned k = env_key(names[i]);
    start[k / 32] |= 1u << (k % 32);
    len[i] = (uint32_t)strlen(names[i]);
    hash[i] = env_hash(names[i], len[i]);
    unsigned s = hash[i] >> 24;
    while (slot[s] != 0)
      s = (s + 1) % ENV_SLOTS;
    slot[s] = (unsigned char)(i + 1);
    left++;
  }
  if (envp == NULL)
    return;
  for (; left > 0 && *envp != NULL; envp++) {
    const char *e = *envp;
    unsigned k = env_key(e);
    if ((start[k / 32] & 1u << (k % 32)) == 0)
      continue;
    /* (no strchr nor memcmp of libc's: start-up binds none it can spare) */
    const char *eq = e;
    while (*eq != '\0' && *eq != '=')
      eq++;
    if (*eq != '=' || eq == e)
      continue;
    size_t l = (size_t)(eq - e);
    uint32_t h = env_hash(e, l);
    for (unsigned s = h >> 24; slot[s] != 0; s = (s + 1) % ENV_SLOTS) {
      unsigned j = slot[s] - 1u;
      size_t m = 0;
      while (hash[j] == h && len[j] == l && m < l && names[j][m] == e[m])
        m++;
      if (hash[j] == h && len[j] == l && texts[j] == NULL && m == l) {
        texts[j] = eq + 1;             /* the first entry of a name wins */
        left--;
      }
    }
  }
}

/* [*b_p, *e_p) without its leading and trailing blanks. */
PH_INLINE void span_trim(const char **b_p, const char **e_p)
{
  const char *b = *b_p, *e = *e_p;

  while (b < e && param_char_is_blank(*b))
    b++;
  while (e > b && param_char_is_blank(e[-1]))
    e--;
  *b_p = b;
  *e_p = e;
}

/* The shared heap's kinds, on the blank-trimmed [b, e).  @return 1 and
 * *value_p (1 for a size or a job id) and *bytes_p (sizes), or 0.  Out of
 * the hot text: only the shared heap's rows have these kinds. */
PH_NOINLINE static int value_parse_shm(param_kind_t kind, const char *b, const char *e,
                                       int *value_p, size_t *bytes_p)
{
  unsigned long long v;
  unsigned shift = 0;

  switch (kind) {
  case PARAM_KIND_SIZE:
    if (b < e) {
      char u = char_lower(e[-1]);
      shift = u == 'k' ? 10 : u == 'm' ? 20 : u == 'g' ? 30 : u == 't' ? 40 : 0;
      if (shift != 0)
        e--;
    }
    /* fall through */
  case PARAM_KIND_MIB:
    if (kind == PARAM_KIND_MIB)
      shift = 20;
    if (!param_span_number(b, e, &v) || v > (PARAM_SHM_SIZE_MAX >> shift) ||
        (v << shift) < PARAM_SHM_SIZE_MIN)
      return 0;
    *bytes_p = (size_t)(v << shift);
    *value_p = 1;
    return 1;
  case PARAM_KIND_RANKS:
    if (!param_span_number(b, e, &v) || v < 1 || v > PARAM_RANKS_MAX)
      return 0;
    *value_p = (int)v;
    return 1;
  case PARAM_KIND_MSEC:
    if (!param_span_number(b, e, &v) || v < 1 || v > PARAM_MSEC_MAX)
      return 0;
    *value_p = (int)v;
    return 1;
  case PARAM_KIND_JOB:
    if (b == e || e - b > PARAM_JOB_MAX)
      return 0;
    for (const char *c = b; c < e; c++) {
      if (!param_job_char_ok(*c))
        return 0;
    }
    *value_p = 1;
    return 1;
  default:
    return 0;
  }
}

/* The value parser, for every kind of every row: parses text.  @return 1,
 * *value_p and, for a size, *bytes_p; or 0. */
PH_STARTUP static int value_parse(param_kind_t kind, const char *text, int *value_p,
                                  size_t *bytes_p)
{
  const char *b = text;
  const char *e = text + strlen(text);
  int yes, no, runtime;

  if (kind == PARAM_KIND_PRESENCE) {
    *value_p = 1;
    return 1;
  }
  if (kind == PARAM_KIND_PATH) {
    if (text[0] != '/' || strlen(text) >= PARAM_RAW_MAX)
      return 0;
    *value_p = 1;
    return 1;
  }

  span_trim(&b, &e);
  yes = span_in(b, e, words_yes);
  no = span_in(b, e, words_no);
  runtime = span_equals(b, e, "-1") || (PINHEAP_PARAM_FILES && span_equals(b, e, "auto"));

  switch (kind) {
  case PARAM_KIND_COUNT: {
    int v = 0;
    if (b == e || e - b > 3)
      return 0;
    for (const char *c = b; c < e; c++) {
      if (*c < '0' || *c > '9')
        return 0;
      v = v * 10 + (*c - '0');
    }
    if (v < 1 || v > PARAM_COUNT_MAX)
      return 0;
    *value_p = v;
    return 1;
  }
  case PARAM_KIND_TRISTATE:
    if (yes || no || runtime) {
      *value_p = yes ? PARAM_TRI_YES : no ? PARAM_TRI_NO : PARAM_TRI_RUNTIME;
      return 1;
    }
    return 0;
  case PARAM_KIND_BOOL:
    if (yes || no) {
      *value_p = yes;
      return 1;
    }
    return 0;
  case PARAM_KIND_LEVEL:
    for (int level = 0; level < PH_LOG_LEVEL_COUNT; level++) {
      char digit[2] = { (char)('0' + level), '\0' };
      if (span_equals(b, e, ph_log_level_name(level)) || span_equals(b, e, digit)) {
        *value_p = level;
        return 1;
      }
    }
    if (span_equals(b, e, "warning")) {
      *value_p = PH_LOG_WARN;
      return 1;
    }
    return 0;
  case PARAM_KIND_ALIGN: {
    unsigned long long v;
    if (!param_span_number(b, e, &v) || v < PARAM_ALIGN_MIN || v > PARAM_ALIGN_MAX ||
        (v & (v - 1)) != 0)
      return 0;
    *value_p = (int)v;
    return 1;
  }
  case PARAM_KIND_MODE:
    if (yes || span_equals(b, e, "on")) {
      *value_p = PARAM_MODE_ON;
      return 1;
    }
    if (no || span_equals(b, e, "off")) {
      *value_p = PARAM_MODE_OFF;
      return 1;
    }
    if (runtime || span_equals(b, e, "auto")) {
      *value_p = PARAM_MODE_AUTO;
      return 1;
    }
    return 0;
  default:
    return value_parse_shm(kind, b, e, value_p, bytes_p);
  }
}

/* A value as a warning quotes it: anything unprintable shown as '?', cut
 * at 64 bytes with "...", so that the warning always stays one line. */
void param_value_show(const char *text, char shown[72])
{
  size_t n = 0;
  size_t len = strlen(text);

  for (; n < len && n < 64; n++) {
    unsigned char c = (unsigned char)text[n];
    shown[n] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  if (n < len) {
    memcpy(shown + n, "...", 3);
    n += 3;
  }
  shown[n] = '\0';
}

/* Writes the one warning line for an unparsable value of variable var, or
 * of the name var in a parameter file (where: "path:line", else NULL). */
static void value_warn(const param_desc_t *desc, const char *where, const char *var,
                       const char *text)
{
  char shown[72];
  const char *at = where != NULL ? where : "";
  const char *sep = where != NULL ? ": " : "";

  param_value_show(text, shown);
  if (desc->kind == PARAM_KIND_PATH && text[0] == '/')
    ph_warn(at, sep, var, "=\"", shown, "\" is too long (expected ", desc->expected,
            " shorter than 256 bytes); ignored, treated as not set", (const char *)NULL);
  else
    ph_warn(at, sep, var, "=\"", shown, "\" is not a valid value (expected ", desc->expected,
            "); ignored, treated as not set", (const char *)NULL);
}

/* Writes the one warning line for a parameter set under both its names to
 * different values: the PINHEAP_ name wins. */
static void value_warn_conflict(const param_desc_t *desc, const char *text,
                                const char *alias_text)
{
  char shown[72], alias_shown[72];

  param_value_show(text, shown);
  param_value_show(alias_text, alias_shown);
  ph_warn(desc->name, "=\"", shown, "\" and ", desc->alias, "=\"", alias_shown,
          "\" are both set and differ: ", desc->name, " wins, ", desc->alias, " is ignored",
          (const char *)NULL);
}

/* ---- API ---------------------------------------------------------------- */

/* Copies text into pv->raw (cut at PARAM_RAW_MAX - 1). */
static void raw_keep(param_value_t *pv, const char *text)
{
  size_t len = strlen(text);

  if (len >= PARAM_RAW_MAX) {
    len = PARAM_RAW_MAX - 1;
    pv->raw_truncated = 1;
  }
  memcpy(pv->raw, text, len);
  pv->raw[len] = '\0';
}

/* pv as not set: the default applies. */
PH_HOT void param_value_reset(const param_desc_t *desc, param_value_t *pv)
{
  pv->source = PARAM_SOURCE_DEFAULT;
  pv->value = desc->default_value;
  pv->is_valid = 1;
  pv->raw_truncated = 0;
  pv->from = NULL;
  pv->key = NULL;
  pv->alias_ignored = 0;
  pv->raw[0] = '\0';
}

/* Sets pv from text, the value of key: a variable (where NULL), or a name
 * in a parameter file at where ("path:line", copied to where_buf, which
 * pv->from then points at; truncated: the value was cut, so it cannot be
 * valid).  Parses it, or warns and marks it invalid.  bytes_p (NULL: not
 * wanted): a size's byte count, left as it is when the value is not valid. */
PH_HOT void param_value_take(const param_desc_t *desc, param_value_t *pv, const char *text,
                             const char *key, const char *where, int truncated,
                             char *where_buf, size_t *bytes_p)
{
  int value;
  size_t bytes = 0;

  raw_keep(pv, text);
  pv->key = key;
  pv->from = key;
  if (where != NULL) {
    size_t n = strlen(where);
    memcpy(where_buf, where, n + 1);
    pv->from = where_buf;
    pv->raw_truncated |= truncated;
  }
  if (!truncated && value_parse(desc->kind, text, &value, &bytes)) {
    pv->source = where != NULL ? PARAM_SOURCE_FILE : PARAM_SOURCE_ENV;
    pv->value = value;
    if (bytes_p != NULL)
      *bytes_p = bytes;
    if (desc->kind == PARAM_KIND_JOB) {       /* raw holds the id, blanks trimmed */
      const char *b = pv->raw, *e = pv->raw + strlen(pv->raw);
      span_trim(&b, &e);
      memmove(pv->raw, b, (size_t)(e - b));
      pv->raw[e - b] = '\0';
    }
  } else {
    pv->source = PARAM_SOURCE_INVALID;
    pv->is_valid = 0;
    value_warn(desc, where, key, text);
  }
}

/* The variables params_eval looks up, after [2 id] each parameter's name
 * and [2 id + 1] its alias. */
enum {
  ENV_SYNONYM = 2 * PARAM_COUNT,    /* OMPI_MCA_opal_leave_pinned ... */
#if PINHEAP_PARAM_FILES
  ENV_FILES = ENV_SYNONYM + PARAM_SYNONYMS,
  ENV_HOME,
  ENV_SYSCONFDIR,
  ENV_COUNT
#else
  ENV_COUNT = ENV_SYNONYM
#endif
};

/* Row id from the environment: text its name's value, alias_text its
 * alias's (NULL: not set).  The name wins; both set to different values:
 * one warning.  bytes_p (NULL: not wanted): a size's byte count, else 0.
 * @return whether either was set. */
PH_HOT static int param_eval_env(int id, const char *text, const char *alias_text,
                                 param_value_t *pv, size_t *bytes_p)
{
  const param_desc_t *desc = &param_descs[id];
  const char *key = desc->name;
  int alias_value;
  size_t alias_bytes;

  param_value_reset(desc, pv);
  if (bytes_p != NULL)
    *bytes_p = 0;
  if (text == NULL) {              /* the alias alone */
    text = alias_text;
    key = desc->alias;
    alias_text = NULL;
  }
  if (text == NULL)
    return 0;
  param_value_take(desc, pv, text, key, NULL, 0, NULL, bytes_p);
  if (alias_text != NULL) {        /* both names: the PINHEAP_ one won */
    pv->alias_ignored = 1;
    int same = strcmp(text, alias_text) == 0 ||
               (pv->is_valid && value_parse(desc->kind, alias_text, &alias_value, &alias_bytes) &&
                alias_value == pv->value);
    if (!same)
      value_warn_conflict(desc, text, alias_text);
  }
  return 1;
}

/* One row of the process's: its variables' texts (texts[2 id], [2 id + 1],
 * the synonyms' at ENV_SYNONYM; NULL: not set), then what the files set
 * (scan: a pfile_scan_t, NULL in a build without files). */
PH_HOT static void param_eval_one(int id, const char *const *texts, const void *scan,
                                  param_value_t *pv, char *where_buf)
{
  int set = param_eval_env(id, texts[2 * id], texts[2 * id + 1], pv, NULL);
#if PINHEAP_PARAM_FILES
  const param_desc_t *desc = &param_descs[id];
  const pfile_scan_t *s = scan;
  if (!set && s != NULL && s->file[id] >= 0)   /* the files, after the environment */
    param_value_take(desc, pv, s->hits[id].text, s->keys[id], s->hits[id].where,
                     s->hits[id].truncated, where_buf, NULL);
  for (int k = 0; k < PARAM_SYNONYMS && s != NULL; k++) {
    if (param_synonyms[k].id != (param_id_t)id)
      continue;
    const pfile_hit_t *hit = s->file[PARAM_COUNT + k] >= 0 ? &s->hits[PARAM_COUNT + k] : NULL;
    if (texts[ENV_SYNONYM + k] != NULL)
      pfile_synonym_take(desc, pv, k, texts[ENV_SYNONYM + k], NULL, where_buf);
    else if (hit != NULL)
      pfile_synonym_take(desc, pv, k, hit->text, hit, where_buf);
  }
#else
  (void)set;
  (void)scan;
  (void)where_buf;
#endif
}

PH_HOT void params_names(int first, int n, const char **names)
{
  for (int i = 0; i < n; i++) {
    names[2 * i] = param_descs[first + i].name;
    names[2 * i + 1] = param_descs[first + i].alias;
  }
}

void params_eval_rows(int first, int n, const char *const *texts, param_value_t *out_p,
                      size_t *bytes_p)
{
  for (int i = 0; i < n; i++)
    param_eval_env(first + i, texts[2 * i], texts[2 * i + 1], &out_p[i], &bytes_p[i]);
}

/* A file source's "path:line" for each parameter (from points here), apart
 * from the tables, in cold .bss: a process that sets nothing in a file
 * never writes these pages (test data_layout).  The process table's, and
 * the last params_eval's. */
PH_COLD_BSS static char params_where_process[PARAM_COUNT][PARAM_WHERE_MAX];
PH_COLD_BSS static char params_where_eval[PARAM_COUNT][PARAM_WHERE_MAX];
#if PINHEAP_PARAM_FILES
/* What the files set (pfile_scan_t.hits), the same way: written only for a
 * name a file sets. */
PH_COLD_BSS static pfile_hit_t params_hits_process[PFILE_KEYS];
PH_COLD_BSS static pfile_hit_t params_hits_eval[PFILE_KEYS];
#else
#define params_hits_process NULL
#define params_hits_eval NULL
#endif

PH_STARTUP static void params_eval_into(char *const *envp, params_t *out_p,
                                        char (*where)[PARAM_WHERE_MAX], void *hits)
{
  const char *names[ENV_COUNT];
  const char *texts[ENV_COUNT];
  const void *scan = NULL;

  _Static_assert(ENV_COUNT <= ENV_SCAN_MAX, "param_env_scan takes at most ENV_SCAN_MAX names");
  params_names(0, PARAM_COUNT, names);
#if PINHEAP_PARAM_FILES
  pfile_scan_t files;
  files.hits = hits;
  for (int k = 0; k < PARAM_SYNONYMS; k++)
    names[ENV_SYNONYM + k] = param_synonyms[k].var;
  names[ENV_FILES] = "OMPI_MCA_mca_base_param_files";
  names[ENV_HOME] = "HOME";
  names[ENV_SYSCONFDIR] = "OPAL_SYSCONFDIR";
#endif
  param_env_scan(envp, names, ENV_COUNT, texts);
#if PINHEAP_PARAM_FILES
  pfile_scan(&files, texts[ENV_FILES], texts[ENV_HOME], texts[ENV_SYSCONFDIR]);
  scan = &files;
#else
  (void)hits;
#endif
  for (int id = 0; id < PARAM_COUNT; id++)
    param_eval_one(id, texts, scan, &out_p->v[id], where[id]);
}

PH_HOT void params_eval(char *const *envp, params_t *out_p)
{
  params_eval_into(envp, out_p, params_where_eval, params_hits_eval);
}

PH_HOT int params_events_on(const char *what)
{
  static int said;
  const param_value_t *pv = &params_get()->v[PARAM_EVENTS];
  char shown[72];

  if (ph_likely(pv->value != 0))
    return 1;
  if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED) == 0) {
    param_value_show(pv->raw, shown);
    ph_warn(what, " refused: the memory events are off (", pv->from, "=\"", shown,
            "\"), so pinheap intercepts no memory call and reports no release",
            (const char *)NULL);
  }
  return 0;
}

PH_HOT const params_t *params_get(void)
{
  int expected = 0;

  if (ph_likely(__atomic_load_n(&params_state, __ATOMIC_ACQUIRE) == 2))
    return &params_process;
  if (__atomic_compare_exchange_n(&params_state, &expected, 1, 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    params_eval_into(environ, &params_process, params_where_process, params_hits_process);
    /* The logger stayed at warn while the table was parsed (its warnings
     * went through it); from now on it follows the parameter. */
    ph_log_set_level(params_process.v[PARAM_LOG_LEVEL].value);
    __atomic_store_n(&params_state, 2, __ATOMIC_RELEASE);
    return &params_process;
  }
  /* Another thread is parsing (a few microseconds, no allocation, no lock
   * it could be waiting for): wait for it to publish. */
  while (__atomic_load_n(&params_state, __ATOMIC_ACQUIRE) != 2)
    sched_yield();
  return &params_process;
}

const param_desc_t *param_desc_get(param_id_t id)
{
  if ((int)id < 0 || id >= PARAM_COUNT)
    return NULL;
  return &param_descs[id];
}

PH_STARTUP const char *param_mca_name(const param_desc_t *desc)
{
  const char *prefix = PINHEAP_PARAM_PREFIX_STRING;
  size_t n = 0;

  while (prefix[n] != '\0' && desc->name[n] == prefix[n])
    n++;
  if (n != 0 && prefix[n] == '\0')
    return desc->name + n;          /* <prefix>mpi_leave_pinned */
  /* <prefix>memory_pinheap_<name> */
  return desc->alias != NULL ? desc->alias + sizeof(PINHEAP_PARAM_PREFIX_STRING) - 1 : NULL;
}

const char *param_source_name(param_source_t source)
{
  switch (source) {
  case PARAM_SOURCE_DEFAULT: return "default";
  case PARAM_SOURCE_ENV:     return "environment";
  case PARAM_SOURCE_INVALID: return "invalid";
  case PARAM_SOURCE_FILE:    return "file";
  }
  return "unknown";
}

const char *param_value_name(param_id_t id, int value)
{
  const param_desc_t *desc = param_desc_get(id);

  if (desc == NULL)
    return "unknown";
  switch (desc->kind) {
  case PARAM_KIND_TRISTATE:
    switch (value) {
    case PARAM_TRI_YES:       return "yes";
    case PARAM_TRI_NO:        return "no";
    case PARAM_TRI_RUNTIME:   return "runtime";
    case PARAM_TRI_NOT_FOUND: return "not found";
    }
    break;
  case PARAM_KIND_BOOL:
    return value ? "true" : "false";
  case PARAM_KIND_MODE:
    switch (value) {
    case PARAM_MODE_AUTO: return "auto";
    case PARAM_MODE_ON:   return "on";
    case PARAM_MODE_OFF:  return "off";
    }
    break;
  case PARAM_KIND_PRESENCE:
  case PARAM_KIND_PATH:
    return value ? "set" : "not set";
  case PARAM_KIND_LEVEL:
    return ph_log_level_name(value);
  case PARAM_KIND_ALIGN: {
    static const char *const names[] = { "16", "32", "64", "128", "256", "512", "1024",
                                         "2048", "4096" };
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
      if (value == PARAM_ALIGN_MIN << i)
        return names[i];
    break;
  }
  case PARAM_KIND_COUNT:
  case PARAM_KIND_SIZE:
  case PARAM_KIND_MIB:
  case PARAM_KIND_RANKS:
  case PARAM_KIND_JOB:
  case PARAM_KIND_MSEC:
    return value ? "set" : "default";
  }
  return "unknown";
}
