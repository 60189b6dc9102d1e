/*
 * params.c -- parses pinheap's configuration from the environment.
 *
 * Owns the descriptor table (param_descs: every parameter with its name,
 * its MCA-style alias, kind, default and accepted values) and the process's
 * evaluated copy (params_process), filled once and read-only after.  Main
 * entry point: params_get().  Runs inside the very first malloc: no
 * allocation, no stdio, no locale; the environment is scanned by hand.
 * See params.h.
 */
#include "internal.h"

#include "params.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

#define EXPECT_TRISTATE "1, 0, -1, true, false, yes or no"
#define EXPECT_BOOL     "1, 0, true, false, yes or no"
#define EXPECT_MODE     "on, off, auto, 1, 0, -1, true, false, yes or no"
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

static const param_desc_t param_descs[PARAM_COUNT] = {
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
  /* Which messages are written (allocator/error.c): those at this level
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
};

/* The process's table: 0 not parsed, 1 being parsed, 2 ready (read-only). */
static params_t params_process;
static int params_state;

/* ---- text helpers (ASCII only, no locale) ------------------------------- */

static int char_is_blank(char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static char char_lower(char c)
{
  return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Does [b, e) equal the lowercase word w, ignoring case? */
static int span_equals(const char *b, const char *e, const char *w)
{
  for (; b < e; b++, w++) {
    if (*w == '\0' || char_lower(*b) != *w)
      return 0;
  }
  return *w == '\0';
}

/* The key of a name or an entry: its first three bytes, mixed into 8 bits
 * (a name shorter than three bytes ends in '\0', in an entry in '=': both
 * count as 0 and end it). */
static unsigned env_key(const char *s)
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

/* Looks names[0 .. n) up in envp in one pass over it: texts[i] is the text
 * after the first "names[i]=" entry, or NULL (also for a NULL or empty
 * name).  The names are chained by key (above), so that an entry is
 * compared only with the names that start as it does, and nearly every
 * entry with none (start-up looks up some thirty names). */
#define ENV_SCAN_MAX 128            /* names (index + 1 must fit a byte) */
PH_HOT static void env_scan(char *const *envp, const char *const *names, size_t n, const char **texts)
{
  unsigned char head[256];             /* by key: the first name's index + 1, or 0 */
  unsigned char next[ENV_SCAN_MAX];    /* the chain: the next name's index + 1, or 0 */
  size_t left = 0;

  memset(head, 0, sizeof(head));
  for (size_t i = n; i-- > 0;) {       /* chained in order: the lowest index first */
    texts[i] = NULL;
    if (names[i] == NULL || names[i][0] == '\0')
      continue;
    unsigned k = env_key(names[i]);
    next[i] = head[k];
    head[k] = (unsigned char)(i + 1);
    left++;
  }
  if (envp == NULL)
    return;
  for (; left > 0 && *envp != NULL; envp++) {
    const char *e = *envp;
    for (unsigned j = head[env_key(e)]; j != 0; j = next[j - 1]) {
      const char *a = e, *b = names[j - 1];
      while (*b != '\0' && *a == *b)
        a++, b++;
      if (*b == '\0' && *a == '=' && texts[j - 1] == NULL) {
        texts[j - 1] = a + 1;          /* the first entry of a name wins */
        left--;
      }
    }
  }
}

/* A whole number of at most 19 digits in [b, e).  @return 1 and *v_p. */
static int span_number(const char *b, const char *e, unsigned long long *v_p)
{
  unsigned long long v = 0;

  if (b == e || e - b > 19)
    return 0;
  for (const char *c = b; c < e; c++) {
    if (*c < '0' || *c > '9')
      return 0;
    v = v * 10 + (unsigned long long)(*c - '0');
  }
  *v_p = v;
  return 1;
}

static int job_char_ok(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

/* The shared heap's kinds, on the blank-trimmed [b, e).  @return 1 and
 * *value_p (1 for a size or a job id) and *bytes_p (sizes), or 0. */
static int value_parse_shm(param_kind_t kind, const char *b, const char *e, int *value_p,
                           size_t *bytes_p)
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
    if (!span_number(b, e, &v) || v > (PARAM_SHM_SIZE_MAX >> shift) ||
        (v << shift) < PARAM_SHM_SIZE_MIN)
      return 0;
    *bytes_p = (size_t)(v << shift);
    *value_p = 1;
    return 1;
  case PARAM_KIND_RANKS:
    if (!span_number(b, e, &v) || v < 1 || v > PARAM_RANKS_MAX)
      return 0;
    *value_p = (int)v;
    return 1;
  case PARAM_KIND_MSEC:
    if (!span_number(b, e, &v) || v < 1 || v > PARAM_MSEC_MAX)
      return 0;
    *value_p = (int)v;
    return 1;
  case PARAM_KIND_JOB:
    if (b == e || e - b > PARAM_JOB_MAX)
      return 0;
    for (const char *c = b; c < e; c++) {
      if (!job_char_ok(*c))
        return 0;
    }
    *value_p = 1;
    return 1;
  default:
    return 0;
  }
}

/* Parses one value of the given kind.  @return 1 and *value_p, or 0. */
PH_HOT static int value_parse(param_kind_t kind, const char *text, int *value_p)
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

  while (b < e && char_is_blank(*b))
    b++;
  while (e > b && char_is_blank(e[-1]))
    e--;

  yes = span_equals(b, e, "1") || span_equals(b, e, "true") || span_equals(b, e, "yes");
  no = span_equals(b, e, "0") || span_equals(b, e, "false") || span_equals(b, e, "no");
  runtime = span_equals(b, e, "-1");

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
    if (!span_number(b, e, &v) || v < PARAM_ALIGN_MIN || v > PARAM_ALIGN_MAX || (v & (v - 1)) != 0)
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
    return 0;
  }
}

/* A value as a warning quotes it: anything unprintable shown as '?', cut
 * at 64 bytes with "...", so that the warning always stays one line. */
static void value_show(const char *text, char shown[72])
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

/* Writes the one warning line for an unparsable value of variable var. */
static void value_warn(const param_desc_t *desc, const char *var, const char *text)
{
  char shown[72];

  value_show(text, shown);
  if (desc->kind == PARAM_KIND_PATH && text[0] == '/')
    ph_warn(var, "=\"", shown, "\" is too long (expected ", desc->expected,
            " shorter than 256 bytes); ignored, treated as not set", (const char *)NULL);
  else
    ph_warn(var, "=\"", shown, "\" is not a valid value (expected ", desc->expected,
            "); ignored, treated as not set", (const char *)NULL);
}

/* Writes the one warning line for a parameter set under both its names to
 * different values: the PINHEAP_ name wins. */
static void value_warn_conflict(const param_desc_t *desc, const char *text,
                                const char *alias_text)
{
  char shown[72], alias_shown[72];

  value_show(text, shown);
  value_show(alias_text, alias_shown);
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

PH_HOT void params_eval(char *const *envp, params_t *out_p)
{
  /* every name and alias in one pass: [2 id] the name, [2 id + 1] the alias */
  const char *names[2 * PARAM_COUNT];
  const char *texts[2 * PARAM_COUNT];

  _Static_assert(2 * PARAM_COUNT <= ENV_SCAN_MAX, "env_scan takes at most ENV_SCAN_MAX names");
  for (int id = 0; id < PARAM_COUNT; id++) {
    names[2 * id] = param_descs[id].name;
    names[2 * id + 1] = param_descs[id].alias;
  }
  env_scan(envp, names, 2 * PARAM_COUNT, texts);
  for (int id = 0; id < PARAM_COUNT; id++) {
    const param_desc_t *desc = &param_descs[id];
    param_value_t *pv = &out_p->v[id];
    const char *text = texts[2 * id];
    const char *from = desc->name;
    const char *alias_text = texts[2 * id + 1];
    int value, alias_value;

    pv->source = PARAM_SOURCE_DEFAULT;
    pv->value = desc->default_value;
    pv->is_valid = 1;
    pv->raw_truncated = 0;
    pv->from = NULL;
    pv->alias_ignored = 0;
    pv->raw[0] = '\0';
    if (text == NULL) {              /* the alias alone */
      text = alias_text;
      from = desc->alias;
      alias_text = NULL;
    }
    if (text == NULL)
      continue;

    raw_keep(pv, text);
    pv->from = from;
    if (value_parse(desc->kind, text, &value)) {
      pv->source = PARAM_SOURCE_ENV;
      pv->value = value;
    } else {
      pv->source = PARAM_SOURCE_INVALID;
      pv->is_valid = 0;
      value_warn(desc, from, text);
    }
    if (alias_text != NULL) {        /* both names: the PINHEAP_ one won */
      pv->alias_ignored = 1;
      int same = strcmp(text, alias_text) == 0 ||
                 (pv->is_valid && value_parse(desc->kind, alias_text, &alias_value) &&
                  alias_value == pv->value);
      if (!same)
        value_warn_conflict(desc, text, alias_text);
    }
  }
}

PH_HOT int params_events_on(const char *what)
{
  static int said;
  const param_value_t *pv = &params_get()->v[PARAM_EVENTS];
  char shown[72];

  if (ph_likely(pv->value != 0))
    return 1;
  if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED) == 0) {
    value_show(pv->raw, shown);
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
    params_eval(environ, &params_process);
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

const char *param_source_name(param_source_t source)
{
  switch (source) {
  case PARAM_SOURCE_DEFAULT: return "default";
  case PARAM_SOURCE_ENV:     return "environment";
  case PARAM_SOURCE_INVALID: return "invalid";
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

/* ======================================================================= */
/*  The shared-memory heap's parameters                                     */
/* ======================================================================= */

static const param_desc_t shm_param_descs[SHM_PARAM_COUNT] = {
  [SHM_PARAM_SIZE] = { "PINHEAP_SHM_SIZE", "PINHEAP_SHM_SIZE", PARAM_KIND_SIZE, 0, EXPECT_SIZE, NULL },
  [SHM_PARAM_SM_SIZE] = { "SM_SIZE", "SM_SIZE", PARAM_KIND_MIB, 0, EXPECT_MIB, NULL },
  [SHM_PARAM_RANKS] = { "PINHEAP_SHM_RANKS", "PINHEAP_SHM_RANKS", PARAM_KIND_RANKS, 0, EXPECT_RANKS, NULL },
  [SHM_PARAM_SM_RANKS] = { "SM_RANKS", "SM_RANKS", PARAM_KIND_RANKS, 0, EXPECT_RANKS, NULL },
  [SHM_PARAM_JOB] = { "PINHEAP_SHM_JOB", "PINHEAP_SHM_JOB", PARAM_KIND_JOB, 0, EXPECT_JOB, NULL },
  [SHM_PARAM_FALLBACK] = { "PINHEAP_SHM_FALLBACK", "PINHEAP_SHM_FALLBACK", PARAM_KIND_BOOL, 0,
                           EXPECT_BOOL, NULL },
  [SHM_PARAM_TIMEOUT] = { "PINHEAP_SHM_TIMEOUT", "PINHEAP_SHM_TIMEOUT", PARAM_KIND_MSEC,
                          SHM_TIMEOUT_DEFAULT_MS, EXPECT_MSEC, NULL },
};

PH_HOT const param_desc_t *shm_param_desc_get(shm_param_id_t id)
{
  if ((int)id < 0 || id >= SHM_PARAM_COUNT)
    return NULL;
  return &shm_param_descs[id];
}

/* The shared heap's parameters from their texts (texts[id]: the value of
 * the variable shm_param_descs[id] names, or NULL). */
static void shm_params_from(const char *const *texts, shm_params_t *out_p)
{
  for (int id = 0; id < SHM_PARAM_COUNT; id++) {
    const param_desc_t *desc = &shm_param_descs[id];
    param_value_t *pv = &out_p->v[id];
    const char *text = texts[id];
    int value = 0;
    size_t bytes = 0;

    pv->source = PARAM_SOURCE_DEFAULT;
    pv->value = desc->default_value;
    pv->is_valid = 1;
    pv->raw_truncated = 0;
    pv->from = NULL;
    pv->alias_ignored = 0;
    pv->raw[0] = '\0';
    out_p->bytes[id] = 0;
    if (text == NULL)
      continue;
    raw_keep(pv, text);
    pv->from = desc->name;
    const char *b = text, *e = text + strlen(text);
    while (b < e && char_is_blank(*b))
      b++;
    while (e > b && char_is_blank(e[-1]))
      e--;
    int ok = desc->kind == PARAM_KIND_BOOL ? value_parse(desc->kind, text, &value)
                                           : value_parse_shm(desc->kind, b, e, &value, &bytes);
    if (ok) {
      pv->source = PARAM_SOURCE_ENV;
      pv->value = value;
      out_p->bytes[id] = bytes;
      if (desc->kind == PARAM_KIND_JOB) {       /* raw holds the id, blanks trimmed */
        memmove(pv->raw, b, (size_t)(e - b));
        pv->raw[e - b] = '\0';
      }
    } else {
      pv->source = PARAM_SOURCE_INVALID;
      pv->is_valid = 0;
      value_warn(desc, desc->name, text);
    }
  }
}

/* texts[id]: the value of the variable shm_param_descs[id] names in envp,
 * or NULL (one pass over envp). */
PH_HOT static void shm_params_scan(char *const *envp, const char *texts[SHM_PARAM_COUNT])
{
  const char *names[SHM_PARAM_COUNT];

  for (int id = 0; id < SHM_PARAM_COUNT; id++)
    names[id] = shm_param_descs[id].name;
  env_scan(envp, names, SHM_PARAM_COUNT, texts);
}

void shm_params_eval(char *const *envp, shm_params_t *out_p)
{
  const char *texts[SHM_PARAM_COUNT];

  shm_params_scan(envp, texts);
  shm_params_from(texts, out_p);
}

PH_HOT bool shm_params_any_set(char *const *envp)
{
  const char *texts[SHM_PARAM_COUNT];

  shm_params_scan(envp, texts);
  for (int id = 0; id < SHM_PARAM_COUNT; id++)
    if (texts[id] != NULL)
      return true;
  return false;
}

/* A launcher's count: the leading whole number of text (Slurm's
 * "2(x3),1" gives 2), if it is 1 .. PARAM_RANKS_MAX.  @return it or 0. */
static unsigned launcher_count(const char *text)
{
  unsigned long long v = 0;
  const char *e = text;

  if (text == NULL)
    return 0;
  while (*e >= '0' && *e <= '9')
    e++;
  if (!span_number(text, e, &v) || v < 1 || v > PARAM_RANKS_MAX)
    return 0;
  return (unsigned)v;
}

/* Appends text to job (length *n), its characters outside the job id's
 * set made '_', cut at PARAM_JOB_MAX. */
static void job_append(char *job, size_t *n, const char *text)
{
  for (; *text != '\0' && *n < PARAM_JOB_MAX; text++)
    job[(*n)++] = job_char_ok(*text) ? *text : '_';
  job[*n] = '\0';
}

/* The launcher's variables shm_conf_eval reads, after the parameters'
 * names in one scan: the participant count's, then the job id's. */
enum {
  SHM_VAR_RANKS = SHM_PARAM_COUNT,      /* 4 of them */
  SHM_VAR_SLURM_JOB = SHM_VAR_RANKS + 4,
  SHM_VAR_SLURM_STEP,
  SHM_VAR_JOB,                          /* 3 of them */
  SHM_VAR_COUNT = SHM_VAR_JOB + 3
};
static const char *const shm_launcher_vars[SHM_VAR_COUNT - SHM_PARAM_COUNT] = {
  "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE",
  "SLURM_STEP_TASKS_PER_NODE",
  "SLURM_JOB_ID", "SLURM_STEP_ID",
  "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_KVSNAME",
};

void shm_conf_eval(char *const *envp, shm_conf_t *out_p)
{
  shm_params_t p;
  const char *names[SHM_VAR_COUNT];
  const char *texts[SHM_VAR_COUNT];
  const char *const *rank_vars = &shm_launcher_vars[SHM_VAR_RANKS - SHM_PARAM_COUNT];
  const char *const *job_vars = &shm_launcher_vars[SHM_VAR_JOB - SHM_PARAM_COUNT];
  const char *const *rank_texts = &texts[SHM_VAR_RANKS];
  const char *const *job_texts = &texts[SHM_VAR_JOB];

  _Static_assert(SHM_VAR_COUNT <= ENV_SCAN_MAX, "env_scan takes at most ENV_SCAN_MAX names");
  for (int id = 0; id < SHM_PARAM_COUNT; id++)
    names[id] = shm_param_descs[id].name;
  for (int i = SHM_PARAM_COUNT; i < SHM_VAR_COUNT; i++)
    names[i] = shm_launcher_vars[i - SHM_PARAM_COUNT];
  env_scan(envp, names, SHM_VAR_COUNT, texts);
  shm_params_from(texts, &p);
  memset(out_p, 0, sizeof(*out_p));
  if (p.v[SHM_PARAM_SIZE].source == PARAM_SOURCE_ENV) {
    out_p->size = p.bytes[SHM_PARAM_SIZE];
    out_p->size_from = "PINHEAP_SHM_SIZE";
  } else if (p.v[SHM_PARAM_SM_SIZE].source == PARAM_SOURCE_ENV) {
    out_p->size = p.bytes[SHM_PARAM_SM_SIZE];
    out_p->size_from = "SM_SIZE";
  } else {
    out_p->size_from = "not set";
  }
  out_p->on = out_p->size != 0;

  out_p->ranks_from = "not known";
  if (p.v[SHM_PARAM_RANKS].source == PARAM_SOURCE_ENV) {
    out_p->ranks = (unsigned)p.v[SHM_PARAM_RANKS].value;
    out_p->ranks_from = "PINHEAP_SHM_RANKS";
  } else if (p.v[SHM_PARAM_SM_RANKS].source == PARAM_SOURCE_ENV) {
    out_p->ranks = (unsigned)p.v[SHM_PARAM_SM_RANKS].value;
    out_p->ranks_from = "SM_RANKS";
  } else {
    for (size_t i = 0; i < SHM_VAR_SLURM_JOB - SHM_VAR_RANKS; i++) {
      unsigned n = launcher_count(rank_texts[i]);
      if (n != 0) {
        out_p->ranks = n;
        out_p->ranks_from = rank_vars[i];
        break;
      }
    }
  }

  size_t n = 0;
  const char *text;
  if (p.v[SHM_PARAM_JOB].source == PARAM_SOURCE_ENV) {
    job_append(out_p->job, &n, p.v[SHM_PARAM_JOB].raw);
    out_p->job_from = "PINHEAP_SHM_JOB";
  } else if ((text = texts[SHM_VAR_SLURM_JOB]) != NULL && *text != '\0') {
    /* a step's processes share a heap; the steps of a job do not */
    job_append(out_p->job, &n, "slurm");
    job_append(out_p->job, &n, text);
    const char *step = texts[SHM_VAR_SLURM_STEP];
    if (step != NULL && *step != '\0') {
      job_append(out_p->job, &n, ".");
      job_append(out_p->job, &n, step);
    }
    out_p->job_from = "SLURM_JOB_ID";
  } else {
    for (size_t i = 0; i < SHM_VAR_COUNT - SHM_VAR_JOB && n == 0; i++) {
      text = job_texts[i];
      if (text != NULL && *text != '\0') {
        job_append(out_p->job, &n, text);
        out_p->job_from = job_vars[i];
      }
    }
  }
  if (n == 0) {                           /* one parent's or one pipeline's processes */
    char num[24];
    job_append(out_p->job, &n, "pg");
    job_append(out_p->job, &n, ph_fmt_dec(num, (uint64_t)getpgrp()));
    out_p->job_from = "process group";
  }
  out_p->fallback = p.v[SHM_PARAM_FALLBACK].value;
  out_p->timeout_ms = (unsigned)p.v[SHM_PARAM_TIMEOUT].value;
}
