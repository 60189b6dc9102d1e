/*
 * params.h -- pinheap's configuration: the environment parameters behind
 * the leave-pinned decision and every switch of the replacement layer.
 *
 * One descriptor table, in the spirit of mimalloc's mi_option_desc_t: each
 * parameter has a name (the environment variable), a kind (how its value is
 * parsed), a default, and after evaluation a source, the variable that set
 * it, the raw text, the parsed value and a valid flag.  One value parser and
 * one environment scan serve every row.  The table has two parts: the
 * process's rows (param_id_t, PARAM_COUNT of them), parsed once, on first
 * use (params_get()), and read-only after that; and the shared-memory
 * heap's rows (shm_param_id_t, at PARAM_COUNT + id), parsed only when asked
 * (shm_params_eval, shm_conf_eval, below).  Main entry points: params_get()
 * for the process, params_eval() for an explicit envp array (tests, the
 * info tool).
 *
 * MCA-style aliases.  Every PINHEAP_* parameter also answers to
 * <parameter prefix>memory_pinheap_<suffix in lowercase> (the prefix is the
 * build's PINHEAP_PARAM_PREFIX, "OMPI_MCA_" by default), e.g.
 * PINHEAP_LOG_LEVEL and OMPI_MCA_memory_pinheap_log_level.  The PINHEAP_
 * name wins when both are set (the alias is then ignored, valid or not);
 * when their values differ -- not the same text and not the same parsed
 * value -- one warning line names both.  Open MPI's own variables
 * (leave-pinned, the disable switch) and the fakeroot/sandbox switches keep
 * their single names.
 *
 * Open MPI's parameter files (a build whose prefix is OMPI_MCA_ only:
 * PINHEAP_PARAM_FILES).  Every parameter with an MCA name may also be set in
 * the files Open MPI 4.1 reads, under that name less the prefix
 * ("mpi_leave_pinned = 1", "memory_pinheap_log_level = debug"): those of
 * OMPI_MCA_mca_base_param_files (','-separated, "none": no file), else
 * $HOME/.openmpi/mca-params.conf then <OPAL_SYSCONFDIR, else the build's
 * PINHEAP_OMPI_SYSCONFDIR>/openmpi-mca-params.conf.  The environment wins;
 * then the leftmost file; inside a file, the last line.  Such a value has
 * source PARAM_SOURCE_FILE and from "path:line".  opal_leave_pinned and
 * opal_leave_pinned_pipeline, Open MPI's deprecated synonyms, win over
 * mpi_leave_pinned(_pipeline) wherever they are set (as in Open MPI).
 *
 * Glossary of values:
 *   tristate  1 / 0 / -1, also true/false and yes/no -> PARAM_TRI_YES / _NO /
 *             _RUNTIME; absent or unparsable -> PARAM_TRI_NOT_FOUND.
 *   bool      1 / 0, true/false, yes/no; absent or unparsable -> 0.
 *   mode      on / off / auto, also 1 / 0 / -1, true/false, yes/no
 *             -> PARAM_MODE_ON / _OFF / _AUTO; absent or unparsable -> auto.
 *   (OMPI_MCA_ builds: all three also take Open MPI's t/y/enabled and
 *   f/n/disabled, the tristate also auto for -1.)
 *   presence  set (any value, even empty) -> 1; absent -> 0.  Never invalid.
 *   path      an absolute path ('/' first, at most PARAM_RAW_MAX - 1 bytes)
 *             -> 1 and raw holds it; absent or invalid -> 0.
 *   level     fatal / error / warn (also warning) / info / debug, or 0 .. 4
 *             -> PH_LOG_FATAL .. PH_LOG_DEBUG (allocator/base/base.h);
 *             absent or unparsable -> PH_LOG_WARN.
 *   align     a power of two from PARAM_ALIGN_MIN (16) to PARAM_ALIGN_MAX
 *             (4096), in decimal -> that number; absent or unparsable -> 16.
 * Spellings are case-insensitive and may be surrounded by blanks (space,
 * tab, newline, CR, VT, FF).  An unparsable value gets exactly one warning
 * line on stderr naming the variable, the value and what was expected, and
 * counts as not set.
 *
 * The warnings go through the logger (ph_log), which never reads this
 * table: params_get() hands it the log level once the process's table is
 * parsed (it logs at warn until then), so parsing never recurses.
 *
 * THIS CODE RUNS INSIDE THE VERY FIRST malloc, possibly before main: it never
 * allocates, uses no stdio and no locale, looks variables up in the environ
 * array itself (environ == NULL means an empty environment) and reads the
 * parameter files with raw system calls into fixed buffers.
 */
#ifndef PINHEAP_PARAMS_H
#define PINHEAP_PARAMS_H

#include "rename.h"

#include <stdbool.h>
#include <stddef.h>

/* ---- parameter identifiers (index into the table) ----------------------- */
typedef enum param_id_e {
  PARAM_LEAVE_PINNED,           /* <prefix>mpi_leave_pinned           tristate */
  PARAM_LEAVE_PINNED_PIPELINE,  /* <prefix>mpi_leave_pinned_pipeline  tristate */
  PARAM_DISABLE,                /* <prefix>memory_ptmalloc2_disable   bool     */
  PARAM_MODE,                   /* PINHEAP_MODE                       mode     */
  PARAM_FAKEROOTKEY,            /* FAKEROOTKEY (fakeroot)             presence */
  PARAM_FAKED_MODE,             /* FAKED_MODE (fakeroot daemon)       presence */
  PARAM_SANDBOX_ON,             /* SANDBOX_ON (Gentoo sandbox)        presence */
  PARAM_PROBE_ROOT,             /* PINHEAP_PROBE_ROOT                 path     */
  PARAM_ARENA_MAX,              /* PINHEAP_ARENA_MAX                  count    */
  PARAM_PATCH,                  /* PINHEAP_PATCH                      bool     */
  PARAM_LATE_MALLOC,            /* PINHEAP_LATE_MALLOC                bool     */
  PARAM_CODE_PATCH,             /* PINHEAP_CODE_PATCH                 bool     */
  PARAM_LOG_LEVEL,              /* PINHEAP_LOG_LEVEL                  level    */
  PARAM_EVENTS,                 /* PINHEAP_EVENTS                     bool     */
  PARAM_MALLOC_ALIGN,           /* PINHEAP_MALLOC_ALIGN               align    */
  PARAM_AUDIT,                  /* PINHEAP_AUDIT                      bool     */
  PARAM_COUNT                   /* the process's rows; the shared heap's follow */
} param_id_t;

/* The rows of the table: the process's, then the shared heap's
 * (shm_param_id_t id is row PARAM_COUNT + id). */
#define PARAM_ROWS (PARAM_COUNT + SHM_PARAM_COUNT)

typedef enum param_kind_e {
  PARAM_KIND_TRISTATE,
  PARAM_KIND_BOOL,
  PARAM_KIND_MODE,
  PARAM_KIND_PRESENCE,
  PARAM_KIND_PATH,
  PARAM_KIND_COUNT,             /* a whole number, 1 .. PARAM_COUNT_MAX */
  PARAM_KIND_SIZE,              /* bytes, optional K/M/G/T suffix (powers of 1024) */
  PARAM_KIND_MIB,               /* a whole number of MiB (HMPI's SM_SIZE) */
  PARAM_KIND_RANKS,             /* a whole number, 1 .. PARAM_RANKS_MAX */
  PARAM_KIND_JOB,               /* 1 .. PARAM_JOB_MAX of [A-Za-z0-9._-] */
  PARAM_KIND_MSEC,              /* milliseconds, 1 .. PARAM_MSEC_MAX */
  PARAM_KIND_LEVEL,             /* a log level: fatal|error|warn|info|debug or 0..4 */
  PARAM_KIND_ALIGN              /* a power of two, PARAM_ALIGN_MIN .. PARAM_ALIGN_MAX */
} param_kind_t;

#define PARAM_COUNT_MAX 256
#define PARAM_RANKS_MAX 4096
#define PARAM_JOB_MAX   64
#define PARAM_MSEC_MAX  3600000
/* The default malloc alignment's bounds (PARAM_KIND_ALIGN): 16 is what the
 * allocators give anyway, 4096 a page. */
#define PARAM_ALIGN_MIN 16
#define PARAM_ALIGN_MAX 4096
/* The shared heap's size bounds (PARAM_KIND_SIZE and PARAM_KIND_MIB). */
#define PARAM_SHM_SIZE_MIN ((size_t)8 << 20)
#define PARAM_SHM_SIZE_MAX ((size_t)1 << 40)

/* Values of tristate parameters (the matrix's yes / no / runtime / not found). */
typedef enum param_tristate_e {
  PARAM_TRI_NOT_FOUND = -2,
  PARAM_TRI_RUNTIME = -1,
  PARAM_TRI_NO = 0,
  PARAM_TRI_YES = 1
} param_tristate_t;

/* Values of the override. */
typedef enum param_mode_e {
  PARAM_MODE_AUTO = 0,
  PARAM_MODE_ON = 1,
  PARAM_MODE_OFF = 2
} param_mode_t;

typedef enum param_source_e {
  PARAM_SOURCE_DEFAULT,   /* not set anywhere: the default applies */
  PARAM_SOURCE_ENV,       /* set in the environment and parsed */
  PARAM_SOURCE_INVALID,   /* set but unparsable: warned, the default applies */
  PARAM_SOURCE_FILE       /* set in a parameter file and parsed (OMPI_MCA_ builds) */
} param_source_t;

/** Static description of one parameter. */
typedef struct param_desc_s {
  const char  *name;          /* environment variable, e.g. "OMPI_MCA_mpi_leave_pinned" */
  const char  *short_name;    /* e.g. "mpi_leave_pinned" (for messages) */
  param_kind_t kind;
  int          default_value; /* value when not set or invalid */
  const char  *expected;      /* what a valid value looks like (for messages) */
  const char  *alias;         /* the MCA-style name, e.g.
                               * "OMPI_MCA_memory_pinheap_log_level"; NULL: none */
} param_desc_t;

/** Size of the raw-text copy kept per parameter (including the NUL). */
#define PARAM_RAW_MAX 256
/** Size of a file source "path:line" (including the NUL); a longer path
 *  keeps its end, after "...". */
#define PARAM_WHERE_MAX 320

/** The evaluated state of one parameter. */
typedef struct param_value_s {
  param_source_t source;
  int   value;                /* parsed value, or default_value */
  int   is_valid;             /* 1 unless source == PARAM_SOURCE_INVALID */
  int   raw_truncated;        /* raw holds only the first PARAM_RAW_MAX-1 bytes */
  const char *from;           /* where it was set: the variable (the descriptor's
                               * name or alias, static), or for a file "path:line"
                               * (a buffer of params.c's: see params_eval); NULL
                               * when not set */
  const char *key;            /* the name set: the variable, or the name in the file
                               * (e.g. "mpi_leave_pinned"); static; NULL when not set */
  int   alias_ignored;        /* the alias was set too, and ignored (the name wins) */
  char  raw[PARAM_RAW_MAX];   /* the value's text as found ("" if not set) */
} param_value_t;

typedef struct params_s {
  param_value_t v[PARAM_COUNT];
} params_t;

/** A value's parameter file position, "path:line", or NULL when it was not
 *  set in a file (a value from a file has a from that is not its key). */
static inline const char *param_file_where(const param_value_t *pv)
{
  return pv->from != NULL && pv->from != pv->key ? pv->from : NULL;
}

/* ======================================================================= */
/*  API                                                                     */
/* ======================================================================= */

/** The process's parameters: parsed from environ on the first call (one
 *  warning line per unparsable variable, once per process), read-only and
 *  shared afterwards.  Thread-safe; never allocates.  Never NULL. */
const params_t *params_get(void);

/** Evaluates the parameters from an explicit NULL-terminated array of
 *  "NAME=value" strings (envp NULL = empty environment).  The first entry
 *  of a name wins, as with getenv().  In an OMPI_MCA_ build the parameter
 *  files are those envp names (HOME, OMPI_MCA_mca_base_param_files,
 *  OPAL_SYSCONFDIR), so a test gives its own.  Warns like params_get() for
 *  each unparsable value.  Never allocates.  A file source's "path:line",
 *  which a value's from points at, stays until the next call (the process
 *  table's have buffers of their own).
 *  @param [in]  envp    the environment to read
 *  @param [out] out_p   the evaluated table */
void params_eval(char *const *envp, params_t *out_p);

/** @return the descriptor of id, or NULL if id is out of range. */
const param_desc_t *param_desc_get(param_id_t id);

/** The name a parameter has without the build's parameter prefix (its MCA
 *  name, which Open MPI's parameter files and pinheap_param_info use): its
 *  variable's (mpi_leave_pinned) or its alias's (memory_pinheap_log_level);
 *  NULL for a variable outside the MCA scheme (FAKEROOTKEY, the shared
 *  heap's). */
const char *param_mca_name(const param_desc_t *desc);

/** @return "default", "environment", "invalid" or "file". */
const char *param_source_name(param_source_t source);

/** A word for a parsed value of parameter id: "yes"/"no"/"runtime"/
 *  "not found" (tristate), "true"/"false" (bool), "on"/"off"/"auto" (mode),
 *  "set"/"not set" (presence and path), the level's name (level), the
 *  number (align: "16" .. "4096").  Never NULL. */
const char *param_value_name(param_id_t id, int value);

/** 1 when the memory events are on (PINHEAP_EVENTS, from the process's
 *  table).  When they are off, the first call that finds so writes one
 *  warning line naming the variable that turned them off and `what` (the
 *  function refusing); later calls say nothing.  Never allocates. */
int params_events_on(const char *what);

/* ======================================================================= */
/*  The shared-memory heap's parameters (allocator/shm/shm.c)                   */
/* ======================================================================= */
/*
 * Rows of the one table (row PARAM_COUNT + id), parsed by the same parser
 * from the same scan of the environment, but only when asked: not by
 * params_get(), and not from Open MPI's parameter files (they have no MCA
 * name).  The mode is on when a size is given (PINHEAP_SHM_SIZE, else
 * HMPI's SM_SIZE).  The participant count and the job id default from the
 * launcher (shm_conf_eval).
 */
typedef enum shm_param_id_e {
  SHM_PARAM_SIZE,        /* PINHEAP_SHM_SIZE      bytes with K/M/G/T */
  SHM_PARAM_SM_SIZE,     /* SM_SIZE (HMPI)        MiB */
  SHM_PARAM_RANKS,       /* PINHEAP_SHM_RANKS     participants */
  SHM_PARAM_SM_RANKS,    /* SM_RANKS (HMPI)       participants */
  SHM_PARAM_JOB,         /* PINHEAP_SHM_JOB       job id */
  SHM_PARAM_FALLBACK,    /* PINHEAP_SHM_FALLBACK  bool: exhaustion -> private heap */
  SHM_PARAM_TIMEOUT,     /* PINHEAP_SHM_TIMEOUT   start-up timeout, ms */
  SHM_PARAM_COUNT
} shm_param_id_t;

#define SHM_TIMEOUT_DEFAULT_MS 10000

typedef struct shm_params_s {
  param_value_t v[SHM_PARAM_COUNT];
  size_t bytes[SHM_PARAM_COUNT];    /* SIZE and MIB kinds: the parsed byte count */
} shm_params_t;

/** What the shared heap runs with: the parameters, then the launcher's
 *  variables, then the defaults.  Each *_from names where a value came from
 *  (a variable's name, "process group", "default"). */
typedef struct shm_conf_s {
  int on;                           /* a valid size was given */
  size_t size;
  const char *size_from;
  unsigned ranks;                   /* 0: not known (up to PARAM_RANKS_MAX join) */
  const char *ranks_from;
  char job[PARAM_JOB_MAX + 1];      /* [A-Za-z0-9._-]: a launcher's other characters become '_' */
  const char *job_from;
  int fallback;
  unsigned timeout_ms;
} shm_conf_t;

/** Evaluates the shared heap's rows from envp (warns like params_eval for
 *  each unparsable value).  Never allocates. */
void shm_params_eval(char *const *envp, shm_params_t *out_p);
/** @return whether envp sets any of the shared heap's parameters
 *  (PINHEAP_SHM_*, SM_*): without one, the shared heap is off.  Looks the
 *  names up only (no parsing, no warning): it is on the start-up path. */
bool shm_params_any_set(char *const *envp);
/** @return the descriptor of id (row PARAM_COUNT + id of the table), or
 *  NULL if out of range. */
const param_desc_t *shm_param_desc_get(shm_param_id_t id);
/** The parameters of envp plus the launcher's defaults.  Never allocates. */
void shm_conf_eval(char *const *envp, shm_conf_t *out_p);

#endif /* PINHEAP_PARAMS_H */
