/*
 * params_internal.h -- the cross-file pieces of the parameter code of
 * config/ (params.c, params_files.c, params_shm.c), grouped by the file
 * that owns them.  Nothing outside config/params*.c includes it: the rest
 * of the archive sees the parameters through params.h.
 */
#ifndef PINHEAP_PARAMS_INTERNAL_H
#define PINHEAP_PARAMS_INTERNAL_H

#include "allocator/base/base.h"
#include "config/params.h"

#include <stddef.h>

/* ======================================================================= */
/*  params.c: the table, the value parser, the environment                  */
/* ======================================================================= */

/* The one table: [0, PARAM_COUNT) the process's rows, then the shared
 * heap's (row PARAM_COUNT + shm_param_id_t). */
extern const param_desc_t param_descs[PARAM_ROWS];

/** 1 for a blank: space, tab, newline, CR, VT, FF (ASCII only, no locale). */
PH_INLINE int param_char_is_blank(char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/** Looks names[0 .. n) up in envp in one pass over it: texts[i] is the
 *  text after the first "names[i]=" entry, or NULL (also for a NULL or
 *  empty name).  n is at most ENV_SCAN_MAX. */
#define ENV_SCAN_MAX 128            /* names (index + 1 must fit a byte) */
void param_env_scan(char *const *envp, const char *const *names, size_t n, const char **texts);

/** A whole number of at most 19 digits in [b, e).  @return 1 and *v_p. */
PH_INLINE int param_span_number(const char *b, const char *e, unsigned long long *v_p)
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

/** 1 for a character of a job id: [A-Za-z0-9._-]. */
PH_INLINE int param_job_char_ok(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

/** A value as a warning quotes it: unprintables as '?', cut at 64 bytes
 *  with "...". */
void param_value_show(const char *text, char shown[72]);
/** pv as not set: the default applies. */
void param_value_reset(const param_desc_t *desc, param_value_t *pv);
/** Sets pv from text, the value of key: a variable (where NULL), or a name
 *  in a parameter file at where ("path:line", copied to where_buf, which
 *  pv->from then points at; truncated: the value was cut, so it cannot be
 *  valid).  Parses it (the one value parser, for every kind), or warns and
 *  marks it invalid.  bytes_p (NULL: not wanted): a size's byte count. */
void param_value_take(const param_desc_t *desc, param_value_t *pv, const char *text,
                      const char *key, const char *where, int truncated, char *where_buf,
                      size_t *bytes_p);

/** names[2 i], names[2 i + 1]: the name and the alias (NULL: none) of row
 *  first + i of the table, i < n, for param_env_scan. */
void params_names(int first, int n, const char **names);
/** Rows [first, first + n) of the table from their variables' texts
 *  (texts[2 i], [2 i + 1]: the name's and the alias's, NULL: not set, as
 *  param_env_scan found them for params_names), from the environment only:
 *  out_p[i], and bytes_p[i] a size's byte count (else 0).  Warns for each
 *  unparsable value. */
void params_eval_rows(int first, int n, const char *const *texts, param_value_t *out_p,
                      size_t *bytes_p);

#if PINHEAP_PARAM_FILES
/* ======================================================================= */
/*  params_files.c: Open MPI's parameter files (PINHEAP_PARAM_FILES)        */
/* ======================================================================= */

/* Open MPI's deprecated synonyms of a parameter (opal_leave_pinned ...). */
#define PARAM_SYNONYMS 2
typedef struct param_synonym_s {
  param_id_t id;
  const char *var;                  /* the environment variable */
  const char *key;                  /* the name in a file */
} param_synonym_t;
extern const param_synonym_t param_synonyms[PARAM_SYNONYMS];

/* The names a file may set: [id] parameter id's (param_mca_name), then
 * [PARAM_COUNT + k] synonym k's. */
#define PFILE_KEYS (PARAM_COUNT + PARAM_SYNONYMS)

/* What the files set for one name (valid when pfile_scan_t.file[k] >= 0). */
typedef struct pfile_hit_s {
  int truncated;                    /* the value was longer than text holds */
  char text[PARAM_RAW_MAX];
  char where[PARAM_WHERE_MAX];      /* "path:line" */
} pfile_hit_t;

typedef struct pfile_scan_s {
  const char *keys[PFILE_KEYS];
  size_t key_lens[PFILE_KEYS];      /* strlen(keys[k]), 0 for NULL */
  /* the index in the list of the file that set key k; -1: not set.  Apart
   * from the hits: hits[k] is written only when a file sets key k, so a
   * scan that finds none touches no page of them (PFILE_KEYS of them, the
   * caller's: 11 kB, in cold .bss rather than on the stack, where they
   * would leave the frames below them pages further down) */
  int file[PFILE_KEYS];
  pfile_hit_t *hits;
} pfile_scan_t;

/** Reads the files Open MPI would into s: the list (the value of
 *  OMPI_MCA_mca_base_param_files) if it is given, else the home
 *  directory's and the sysconfdir's.  errno is left as it was. */
void pfile_scan(pfile_scan_t *s, const char *list, const char *home, const char *sysconfdir);
/** Synonym k of pv's parameter is set (text; hit: from a file, else NULL):
 *  a valid value wins, with one warning when the parameter's own differs;
 *  a file's "path:line" is copied to where_buf. */
void pfile_synonym_take(const param_desc_t *desc, param_value_t *pv, int k, const char *text,
                        const pfile_hit_t *hit, char *where_buf);
#endif /* PINHEAP_PARAM_FILES */

#endif /* PINHEAP_PARAMS_INTERNAL_H */
