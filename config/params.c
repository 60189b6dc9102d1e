/*
 * params.c -- parses pinheap's configuration from the environment and, in a
 * build with Open MPI's prefix, from Open MPI's parameter files.
 *
 * Owns the descriptor table (param_descs: every parameter with its name,
 * its MCA-style alias, kind, default and accepted values) and the process's
 * evaluated copy (params_process), filled once and read-only after.  Main
 * entry point: params_get().  Runs inside the very first malloc: no
 * allocation, no stdio, no locale; the environment is scanned by hand.
 *
 * Open MPI's habits (PINHEAP_PARAM_FILES: the prefix is OMPI_MCA_; any other
 * prefix compiles none of it).  A user of Open MPI sets mpi_leave_pinned in
 * $HOME/.openmpi/mca-params.conf, writes "enabled" or "auto", and may still
 * use the old opal_leave_pinned; Open MPI honours all three, and a pinheap
 * that did not would leave every rank disabled while ompi_info reports the
 * parameter set.  So the files are read as Open MPI 4.1 reads them (the
 * section "Open MPI's parameter files" says which rules, from which
 * source): with raw system calls into fixed buffers, bounded (16 files,
 * 1 MiB each, lines of 1024 bytes), the environment winning over every
 * file.  A value from a file names "path:line" as its source (from).
 * See params.h.
 */
#include "internal.h"

#include "params.h"
#include "startup.h"     /* PH_STARTUP */

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* Does [b, e) equal one of the lowercase words (NULL-terminated), ignoring case? */
static int span_in(const char *b, const char *e, const char *const *words)
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

/* Writes the one warning line for an unparsable value of variable var, or
 * of the name var in a parameter file (where: "path:line", else NULL). */
static void value_warn(const param_desc_t *desc, const char *where, const char *var,
                       const char *text)
{
  char shown[72];
  const char *at = where != NULL ? where : "";
  const char *sep = where != NULL ? ": " : "";

  value_show(text, shown);
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

/* pv as not set: the default applies. */
PH_HOT static void value_reset(const param_desc_t *desc, param_value_t *pv)
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
 * valid).  Parses it, or warns and marks it invalid. */
PH_HOT static void value_take(const param_desc_t *desc, param_value_t *pv, const char *text,
                              const char *key, const char *where, int truncated,
                              char *where_buf)
{
  int value;

  raw_keep(pv, text);
  pv->key = key;
  pv->from = key;
  if (where != NULL) {
    size_t n = strlen(where);
    memcpy(where_buf, where, n + 1);
    pv->from = where_buf;
    pv->raw_truncated |= truncated;
  }
  if (!truncated && value_parse(desc->kind, text, &value)) {
    pv->source = where != NULL ? PARAM_SOURCE_FILE : PARAM_SOURCE_ENV;
    pv->value = value;
  } else {
    pv->source = PARAM_SOURCE_INVALID;
    pv->is_valid = 0;
    value_warn(desc, where, key, text);
  }
}

#if PINHEAP_PARAM_FILES
/* ======================================================================= */
/*  Open MPI's parameter files                                              */
/* ======================================================================= */
/*
 * What Open MPI 4.1 does (opal/mca/base/mca_base_var.c and the keyval
 * parser of mca_base_parse_paramfile.c; checked with ompi_info 4.1.4):
 *  - which files: OMPI_MCA_mca_base_param_files, a list separated by ','
 *    (not ':': "a:b" is one file name), "none" for no file; by default
 *    $HOME/.openmpi/mca-params.conf,<sysconfdir>/openmpi-mca-params.conf,
 *    the sysconfdir being OPAL_SYSCONFDIR when set (the installdirs env
 *    component), else the installation's -- which pinheap cannot know, so
 *    the build gives it (PINHEAP_OMPI_SYSCONFDIR, /etc/openmpi: Debian's).
 *    A file that cannot be opened is skipped without a word;
 *  - which file wins: the list is read from its end and each value replaces
 *    the one before, so the leftmost file that sets a name wins; inside a
 *    file, the last line that sets it;
 *  - a line: "name = value", blanks around the '=' and at the ends dropped,
 *    the value the rest of the line (a '#' in it is part of it); a line
 *    whose first non-blank is '#' is a comment; any other line is an error
 *    named with file:line, and skipped;
 *  - the environment wins over every file.
 * Not done: the override file (openmpi-mca-params-override.conf, which
 * beats the environment), aggregate parameter sets (param_file_prefix),
 * relative names searched along a path, C-style block comments.
 */
#define PFILE_COUNT_MAX 16          /* files of the list read, at most */
#define PFILE_SIZE_MAX  (1 << 20)   /* bytes read of one file */
#define PFILE_LINE_MAX  1024        /* a longer line is skipped, with a warning */
#define PFILE_PATH_MAX  1024

/*
 * Open MPI 4.1 registers opal_leave_pinned and opal_leave_pinned_pipeline
 * as deprecated synonyms of mpi_leave_pinned and mpi_leave_pinned_pipeline
 * (opal/runtime/opal_params.c: mca_base_var_register_synonym(...,
 * MCA_BASE_VAR_SYN_FLAG_DEPRECATED)), so they are honoured.  A synonym
 * registers after its variable and sets the variable's value from wherever
 * it is set -- its environment variable, else the files -- so it wins over
 * mpi_leave_pinned even when that one is in the environment (ompi_info
 * 4.1.4 shows both); an invalid synonym is refused and the variable's
 * value stays.
 */
#define PARAM_SYNONYMS 2
static const struct {
  param_id_t id;
  const char *var;                  /* the environment variable */
  const char *key;                  /* the name in a file */
} param_synonyms[PARAM_SYNONYMS] = {
  { PARAM_LEAVE_PINNED, "OMPI_MCA_opal_leave_pinned", "opal_leave_pinned" },
  { PARAM_LEAVE_PINNED_PIPELINE, "OMPI_MCA_opal_leave_pinned_pipeline",
    "opal_leave_pinned_pipeline" },
};

/* The names a file may set: [id] parameter id's (pfile_key), then
 * [PARAM_COUNT + k] synonym k's. */
#define PFILE_KEYS (PARAM_COUNT + PARAM_SYNONYMS)

/* What the files set for one name. */
typedef struct pfile_hit_s {
  int file;                         /* the file's index in the list; -1: not set */
  int truncated;                    /* the value was longer than text holds */
  char text[PARAM_RAW_MAX];
  char where[PARAM_WHERE_MAX];      /* "path:line" */
} pfile_hit_t;

typedef struct pfile_scan_s {
  const char *keys[PFILE_KEYS];
  pfile_hit_t hits[PFILE_KEYS];
} pfile_scan_t;

/* The name a file gives a parameter: its MCA variable less the prefix --
 * the name's (mpi_leave_pinned) or the alias's (memory_pinheap_log_level);
 * NULL for the variables outside the MCA scheme (FAKEROOTKEY ...). */
PH_STARTUP static const char *pfile_key(const param_desc_t *desc)
{
  const char *prefix = PINHEAP_PARAM_PREFIX_STRING;
  size_t n = 0;

  while (prefix[n] != '\0' && desc->name[n] == prefix[n])
    n++;
  if (prefix[n] == '\0')
    return desc->name + n;
  return desc->alias != NULL ? desc->alias + sizeof(PINHEAP_PARAM_PREFIX_STRING) - 1 : NULL;
}

/* Does [b, e) equal w exactly (Open MPI's names are case-sensitive)? */
PH_STARTUP static int span_same(const char *b, const char *e, const char *w)
{
  size_t n = strlen(w);

  return (size_t)(e - b) == n && memcmp(b, w, n) == 0;
}

/* A character of a name in a file (the keyval lexer's: letters, digits and
 * _ . : -). */
PH_STARTUP static int pfile_name_char(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == ':' || c == '-';
}

/* dst = the a_len bytes of a, then the b_len bytes of b, if that fits in
 * PFILE_PATH_MAX.  @return 1, or 0 (dst "") */
PH_STARTUP static int path_join(char *dst, const char *a, size_t a_len, const char *b,
                                size_t b_len)
{
  dst[0] = '\0';
  if (a_len + b_len >= PFILE_PATH_MAX)
    return 0;
  memcpy(dst, a, a_len);
  memcpy(dst + a_len, b, b_len);
  dst[a_len + b_len] = '\0';
  return 1;
}

/* where = "path:line", the path's start cut (after "...") to fit. */
PH_STARTUP static void pfile_where(char where[PARAM_WHERE_MAX], const char *path, unsigned line)
{
  char num[24];
  const char *digits = ph_fmt_dec(num, line);
  size_t d = strlen(digits), p = strlen(path), n = 0;

  if (p + 1 + d >= PARAM_WHERE_MAX) {
    memcpy(where, "...", 3);
    n = 3;
    path += p - (PARAM_WHERE_MAX - 1 - 3 - 1 - d);
    p = PARAM_WHERE_MAX - 1 - 3 - 1 - d;
  }
  memcpy(where + n, path, p);
  n += p;
  where[n++] = ':';
  memcpy(where + n, digits, d + 1);
}

/* Records value [b, e) of key k from file number file, line line: unless
 * an earlier file of the list set it (the leftmost wins); a later line of
 * the same file replaces it. */
PH_STARTUP static void pfile_hit(pfile_scan_t *s, int k, int file, const char *path,
                                 unsigned line, const char *b, const char *e)
{
  pfile_hit_t *h = &s->hits[k];
  size_t n = (size_t)(e - b);

  if (h->file >= 0 && h->file != file)
    return;
  h->file = file;
  h->truncated = n >= PARAM_RAW_MAX;
  if (h->truncated)
    n = PARAM_RAW_MAX - 1;
  memcpy(h->text, b, n);
  h->text[n] = '\0';
  pfile_where(h->where, path, line);
}

/* One line [b, e) of a file (no '\n').  @return 0 when it is not a
 * comment, a blank line or "name = value". */
PH_STARTUP static int pfile_line(pfile_scan_t *s, int file, const char *path, unsigned line,
                                 const char *b, const char *e)
{
  while (b < e && (*b == ' ' || *b == '\t'))
    b++;
  while (e > b && char_is_blank(e[-1]))
    e--;
  if (b == e || *b == '#')
    return 1;
  const char *name = b;
  while (b < e && pfile_name_char(*b))
    b++;
  const char *name_end = b;
  while (b < e && (*b == ' ' || *b == '\t'))
    b++;
  if (name == name_end || b == e || *b != '=')
    return 0;
  for (b++; b < e && (*b == ' ' || *b == '\t'); b++)
    ;
  for (const char *c = b; c < e; c++) {
    if (*c == '\0')
      return 0;
  }
  for (int k = 0; k < PFILE_KEYS; k++) {
    if (s->keys[k] != NULL && span_same(name, name_end, s->keys[k]))
      pfile_hit(s, k, file, path, line, b, e);
  }
  return 1;
}

/* Warns once per file: its first line that is not "name = value". */
PH_STARTUP static void pfile_warn_line(const char *path, unsigned line, int *warned)
{
  char where[PARAM_WHERE_MAX];

  if (*warned)
    return;
  *warned = 1;
  pfile_where(where, path, line);
  ph_warn(where, ": not a \"name = value\" line of an Open MPI parameter file; ignored "
          "(this file's later such lines are not named)", (const char *)NULL);
}

/* Reads file number file of the list, line by line, at most
 * PFILE_SIZE_MAX bytes.  A file that cannot be opened is skipped. */
PH_STARTUP static void pfile_read(pfile_scan_t *s, int file, const char *path)
{
  char buf[2048], ln[PFILE_LINE_MAX];
  size_t len = 0, total = 0;
  unsigned line = 1;
  int overlong = 0, warned = 0;
  /* O_NONBLOCK: a FIFO named as a file must not hang the first malloc */
  int fd = (int)ph_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

  if (fd < 0)
    return;
  for (;;) {
    ssize_t n = ph_syscall(SYS_read, fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    if (total + (size_t)n > PFILE_SIZE_MAX) {
      n = (ssize_t)(PFILE_SIZE_MAX - total);
      ph_warn(path, ": longer than 1 MiB; only its first 1 MiB is read", (const char *)NULL);
    }
    total += (size_t)n;
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] != '\n') {
        if (len < sizeof(ln))
          ln[len++] = buf[i];
        else
          overlong = 1;
        continue;
      }
      if (overlong || !pfile_line(s, file, path, line, ln, ln + len))
        pfile_warn_line(path, line, &warned);
      len = 0;
      overlong = 0;
      line++;
    }
    if (total >= PFILE_SIZE_MAX)
      break;
  }
  if ((len > 0 || overlong) && (overlong || !pfile_line(s, file, path, line, ln, ln + len)))
    pfile_warn_line(path, line, &warned);
  ph_syscall(SYS_close, fd);
}

/* Reads the list's files, the ','-separated [b, e) of
 * OMPI_MCA_mca_base_param_files; a leading "~/" is the home directory. */
PH_STARTUP static void pfile_read_list(pfile_scan_t *s, const char *list, const char *home)
{
  char path[PFILE_PATH_MAX];
  const char *end = list + strlen(list);
  int file = 0;

  if (span_same(list, end, "none"))
    return;
  for (const char *b = list; b < end && file < PFILE_COUNT_MAX;) {
    const char *e = b;
    while (e < end && *e != ',')
      e++;
    int tilde = e - b >= 2 && b[0] == '~' && b[1] == '/' && home != NULL;
    int ok = tilde ? path_join(path, home, strlen(home), b + 1, (size_t)(e - b - 1))
                   : path_join(path, b, (size_t)(e - b), "", 0);
    if (e > b && ok)
      pfile_read(s, file++, path);
    b = e + 1;
  }
}

/* Reads the files Open MPI would: the list if it is given, else the home
 * directory's and the sysconfdir's. */
PH_STARTUP static void pfile_scan(pfile_scan_t *s, const char *list, const char *home,
                                  const char *sysconfdir)
{
  char path[PFILE_PATH_MAX];
  int saved = errno;                /* a missing file must not show in errno */

  for (int id = 0; id < PARAM_COUNT; id++)
    s->keys[id] = pfile_key(&param_descs[id]);
  for (int k = 0; k < PARAM_SYNONYMS; k++)
    s->keys[PARAM_COUNT + k] = param_synonyms[k].key;
  for (int k = 0; k < PFILE_KEYS; k++)
    s->hits[k].file = -1;
  if (list != NULL) {
    pfile_read_list(s, list, home);
  } else {
    int file = 0;
    static const char home_conf[] = "/.openmpi/mca-params.conf";
    static const char sys_conf[] = "/openmpi-mca-params.conf";
    if (home != NULL && home[0] != '\0' &&
        path_join(path, home, strlen(home), home_conf, sizeof(home_conf) - 1))
      pfile_read(s, file++, path);
    if (sysconfdir == NULL || sysconfdir[0] == '\0')
      sysconfdir = PINHEAP_OMPI_SYSCONFDIR;
    if (path_join(path, sysconfdir, strlen(sysconfdir), sys_conf, sizeof(sys_conf) - 1))
      pfile_read(s, file, path);
  }
  errno = saved;
}

/* A value's name for a message: "where: key" for a file, else the variable. */
PH_STARTUP static const char *value_label(const param_value_t *pv, char *buf, size_t len)
{
  const char *where = param_file_where(pv);
  if (where == NULL)
    return pv->key;
  size_t w = strlen(where), k = strlen(pv->key);
  if (w + 2 + k >= len)
    return pv->key;
  memcpy(buf, where, w);
  memcpy(buf + w, ": ", 2);
  memcpy(buf + w + 2, pv->key, k + 1);
  return buf;
}

/* Synonym k of pv's parameter is set (text; hit: from a file, else NULL):
 * a valid value wins, with one warning when the parameter's own differs. */
PH_STARTUP static void synonym_take(const param_desc_t *desc, param_value_t *pv, int k,
                                    const char *text, const pfile_hit_t *hit, char *where_buf)
{
  param_value_t syn;
  char syn_where[PARAM_WHERE_MAX];
  char label[PARAM_WHERE_MAX + 64], syn_label[PARAM_WHERE_MAX + 64];
  char shown[72], syn_shown[72];

  value_reset(desc, &syn);
  if (hit != NULL)
    value_take(desc, &syn, text, param_synonyms[k].key, hit->where, hit->truncated, syn_where);
  else
    value_take(desc, &syn, text, param_synonyms[k].var, NULL, 0, syn_where);
  if (!syn.is_valid)
    return;                          /* warned; the parameter's own value stays */
  if (pv->source != PARAM_SOURCE_DEFAULT && (!pv->is_valid || pv->value != syn.value)) {
    value_show(pv->raw, shown);
    value_show(syn.raw, syn_shown);
    ph_warn(value_label(&syn, syn_label, sizeof(syn_label)), "=\"", syn_shown, "\" and ",
            value_label(pv, label, sizeof(label)), "=\"", shown,
            "\" are both set and differ: ", syn.key, " wins (Open MPI's deprecated synonym of ",
            desc->short_name, ", it overrides it)", (const char *)NULL);
  }
  *pv = syn;
  if (syn.from == syn_where) {
    memcpy(where_buf, syn_where, strlen(syn_where) + 1);
    pv->from = where_buf;
  }
}
#endif /* PINHEAP_PARAM_FILES */

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

/* One parameter: its variables' texts (texts[2 id], [2 id + 1], the
 * synonyms' at ENV_SYNONYM; NULL: not set), then what the files set (scan:
 * a pfile_scan_t, NULL in a build without files). */
PH_HOT static void param_eval_one(int id, const char *const *texts, const void *scan,
                                  param_value_t *pv, char *where_buf)
{
  const param_desc_t *desc = &param_descs[id];
  const char *text = texts[2 * id];
  const char *key = desc->name;
  const char *alias_text = texts[2 * id + 1];
  int alias_value;

  value_reset(desc, pv);
  if (text == NULL) {              /* the alias alone */
    text = alias_text;
    key = desc->alias;
    alias_text = NULL;
  }
  if (text != NULL) {
    value_take(desc, pv, text, key, NULL, 0, where_buf);
  }
#if PINHEAP_PARAM_FILES
  const pfile_scan_t *s = scan;
  if (text == NULL && s != NULL && s->hits[id].file >= 0)   /* the files, after the environment */
    value_take(desc, pv, s->hits[id].text, s->keys[id], s->hits[id].where,
               s->hits[id].truncated, where_buf);
#else
  (void)scan;
#endif
  if (alias_text != NULL) {        /* both names: the PINHEAP_ one won */
    pv->alias_ignored = 1;
    int same = strcmp(text, alias_text) == 0 ||
               (pv->is_valid && value_parse(desc->kind, alias_text, &alias_value) &&
                alias_value == pv->value);
    if (!same)
      value_warn_conflict(desc, text, alias_text);
  }
#if PINHEAP_PARAM_FILES
  for (int k = 0; k < PARAM_SYNONYMS && s != NULL; k++) {
    if (param_synonyms[k].id != (param_id_t)id)
      continue;
    const pfile_hit_t *hit = s->hits[PARAM_COUNT + k].file >= 0 ? &s->hits[PARAM_COUNT + k] : NULL;
    if (texts[ENV_SYNONYM + k] != NULL)
      synonym_take(desc, pv, k, texts[ENV_SYNONYM + k], NULL, where_buf);
    else if (hit != NULL)
      synonym_take(desc, pv, k, hit->text, hit, where_buf);
  }
#endif
}

/* A file source's "path:line" for each parameter (from points here), apart
 * from the tables, in cold .bss: a process that sets nothing in a file
 * never writes these pages (test data_layout).  The process table's, and
 * the last params_eval's. */
PH_COLD_BSS static char params_where_process[PARAM_COUNT][PARAM_WHERE_MAX];
PH_COLD_BSS static char params_where_eval[PARAM_COUNT][PARAM_WHERE_MAX];

PH_HOT static void params_eval_into(char *const *envp, params_t *out_p,
                                    char (*where)[PARAM_WHERE_MAX])
{
  const char *names[ENV_COUNT];
  const char *texts[ENV_COUNT];
  const void *scan = NULL;

  _Static_assert(ENV_COUNT <= ENV_SCAN_MAX, "env_scan takes at most ENV_SCAN_MAX names");
  for (int id = 0; id < PARAM_COUNT; id++) {
    names[2 * id] = param_descs[id].name;
    names[2 * id + 1] = param_descs[id].alias;
  }
#if PINHEAP_PARAM_FILES
  pfile_scan_t files;
  for (int k = 0; k < PARAM_SYNONYMS; k++)
    names[ENV_SYNONYM + k] = param_synonyms[k].var;
  names[ENV_FILES] = "OMPI_MCA_mca_base_param_files";
  names[ENV_HOME] = "HOME";
  names[ENV_SYSCONFDIR] = "OPAL_SYSCONFDIR";
#endif
  env_scan(envp, names, ENV_COUNT, texts);
#if PINHEAP_PARAM_FILES
  pfile_scan(&files, texts[ENV_FILES], texts[ENV_HOME], texts[ENV_SYSCONFDIR]);
  scan = &files;
#endif
  for (int id = 0; id < PARAM_COUNT; id++)
    param_eval_one(id, texts, scan, &out_p->v[id], where[id]);
}

PH_HOT void params_eval(char *const *envp, params_t *out_p)
{
  params_eval_into(envp, out_p, params_where_eval);
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
    params_eval_into(environ, &params_process, params_where_process);
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

    value_reset(desc, pv);
    out_p->bytes[id] = 0;
    if (text == NULL)
      continue;
    raw_keep(pv, text);
    pv->from = desc->name;
    pv->key = desc->name;
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
      value_warn(desc, NULL, desc->name, text);
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
