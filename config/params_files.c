/*
 * params_files.c -- Open MPI's parameter files, read as Open MPI 4.1 reads
 * them, for the parameter table of params.c (a build with Open MPI's
 * prefix, PINHEAP_PARAM_FILES; any other prefix compiles none of it).
 *
 * A user of Open MPI sets mpi_leave_pinned in
 * $HOME/.openmpi/mca-params.conf, writes "enabled" or "auto", and may still
 * use the old opal_leave_pinned; Open MPI honours all three, and a pinheap
 * that did not would leave every rank disabled while ompi_info reports the
 * parameter set.  So the files are read as Open MPI 4.1 reads them (below:
 * which rules, from which source): with raw system calls into fixed
 * buffers, bounded (16 files, 1 MiB each, lines of 1024 bytes), the
 * environment winning over every file.  A value from a file names
 * "path:line" as its source (from).  Owns the files' scan and Open MPI's
 * deprecated synonyms (param_synonyms).  Main entry point: pfile_scan(),
 * called by params_eval (params.c), inside the very first malloc: no
 * allocation, no stdio, no locale.
 */
#include "allocator/base/base.h"

#include "config/params.h"
#include "config/params_internal.h"
#include "allocator/base/startup.h"     /* PH_STARTUP */

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>

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
#define PFILE_BUF_SIZE  4096        /* bytes read at once: a whole usual file */

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
const param_synonym_t param_synonyms[PARAM_SYNONYMS] = {
  { PARAM_LEAVE_PINNED, "OMPI_MCA_opal_leave_pinned", "opal_leave_pinned" },
  { PARAM_LEAVE_PINNED_PIPELINE, "OMPI_MCA_opal_leave_pinned_pipeline",
    "opal_leave_pinned_pipeline" },
};

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

  if (s->file[k] >= 0 && s->file[k] != file)
    return;
  s->file[k] = file;
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
  while (e > b && param_char_is_blank(e[-1]))
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
  if (memchr(b, '\0', (size_t)(e - b)) != NULL)
    return 0;
  size_t name_len = (size_t)(name_end - name);
  for (int k = 0; k < PFILE_KEYS; k++) {
    if (s->key_lens[k] == name_len && memcmp(name, s->keys[k], name_len) == 0)
      pfile_hit(s, k, file, path, line, b, e);
  }
  return 1;
}

/* Warns once per file: its first line that is not "name = value".
 * Not in the start-up text: a malformed file only. */
static void pfile_warn_line(const char *path, unsigned line, int *warned)
{
  char where[PARAM_WHERE_MAX];

  if (*warned)
    return;
  *warned = 1;
  pfile_where(where, path, line);
  ph_warn(where, ": not a \"name = value\" line of an Open MPI parameter file; ignored "
          "(this file's later such lines are not named)", (const char *)NULL);
}

/* Reads file number file of the list, at most PFILE_SIZE_MAX bytes, in
 * blocks of PFILE_BUF_SIZE into one stack buffer (no allocation: this runs
 * inside the first malloc), each line found with memchr where it lies, a
 * line cut by the block's end moved to the buffer's start: a small file is
 * one openat, a read, the read that sees its end and a close.  A file that
 * cannot be opened is skipped. */
PH_STARTUP static void pfile_read(pfile_scan_t *s, int file, const char *path)
{
  char buf[PFILE_BUF_SIZE];
  size_t have = 0, total = 0;       /* buf[0, have): the current line's start, unread */
  unsigned line = 1;
  int overlong = 0, warned = 0, end = 0;
  /* O_NONBLOCK: a FIFO named as a file must not hang the first malloc */
  int fd = (int)ph_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

  if (fd < 0)
    return;
  while (!end) {
    ssize_t n = ph_syscall(SYS_read, fd, buf + have, sizeof(buf) - have);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    if (total + (size_t)n > PFILE_SIZE_MAX) {
      n = (ssize_t)(PFILE_SIZE_MAX - total);
      ph_warn(path, ": longer than 1 MiB; only its first 1 MiB is read", (const char *)NULL);
    }
    total += (size_t)n;
    end = total >= PFILE_SIZE_MAX;
    const char *b = buf, *stop = buf + have + n, *nl;
    while ((nl = memchr(b, '\n', (size_t)(stop - b))) != NULL) {
      if (overlong || nl - b > PFILE_LINE_MAX)
        pfile_warn_line(path, line, &warned);
      else if (b < nl && *b != '#' && !pfile_line(s, file, path, line, b, nl))
        pfile_warn_line(path, line, &warned);   /* (an empty line or a comment at once) */
      overlong = 0;
      line++;
      b = nl + 1;
    }
    have = (size_t)(stop - b);      /* a line not ended yet */
    if (have > PFILE_LINE_MAX) {    /* too long already: only its end is looked for */
      overlong = 1;
      have = 0;
    }
    memmove(buf, b, have);
  }
  if ((have > 0 || overlong) && (overlong || !pfile_line(s, file, path, line, buf, buf + have)))
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
PH_STARTUP void pfile_scan(pfile_scan_t *s, const char *list, const char *home,
                           const char *sysconfdir)
{
  char path[PFILE_PATH_MAX];
  int saved = errno;                /* a missing file must not show in errno */

  for (int id = 0; id < PARAM_COUNT; id++)
    s->keys[id] = param_mca_name(&param_descs[id]);   /* the name a file gives it */
  for (int k = 0; k < PARAM_SYNONYMS; k++)
    s->keys[PARAM_COUNT + k] = param_synonyms[k].key;
  for (int k = 0; k < PFILE_KEYS; k++) {
    s->key_lens[k] = s->keys[k] != NULL ? strlen(s->keys[k]) : 0;
    s->file[k] = -1;
  }
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

/* A value's name for a message: "where: key" for a file, else the variable.
 * Not in the start-up text: warnings only. */
static const char *value_label(const param_value_t *pv, char *buf, size_t len)
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
 * a valid value wins, with one warning when the parameter's own differs.
 * Not in the start-up text: a deprecated synonym set, seldom. */
void pfile_synonym_take(const param_desc_t *desc, param_value_t *pv, int k,
                        const char *text, const pfile_hit_t *hit, char *where_buf)
{
  param_value_t syn;
  char syn_where[PARAM_WHERE_MAX];
  char label[PARAM_WHERE_MAX + 64], syn_label[PARAM_WHERE_MAX + 64];
  char shown[72], syn_shown[72];

  param_value_reset(desc, &syn);
  if (hit != NULL)
    param_value_take(desc, &syn, text, param_synonyms[k].key, hit->where, hit->truncated,
                     syn_where, NULL);
  else
    param_value_take(desc, &syn, text, param_synonyms[k].var, NULL, 0, syn_where, NULL);
  if (!syn.is_valid)
    return;                          /* warned; the parameter's own value stays */
  if (pv->source != PARAM_SOURCE_DEFAULT && (!pv->is_valid || pv->value != syn.value)) {
    param_value_show(pv->raw, shown);
    param_value_show(syn.raw, syn_shown);
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
