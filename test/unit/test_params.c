/*
 * test_params.c -- tests of config/params*.c: the environment parameters.
 *
 * Every accepted spelling of every kind, unparsable values (one warning line
 * captured from fd 2, counted as not set), each variable independently,
 * the MCA-style aliases and their precedence, explicit envp arrays, the
 * parse-once process table (also under threads and with environ == NULL),
 * the events switch and the alignment, and Open MPI's habits: its parameter
 * files, spellings and synonyms with Open MPI's prefix, none of them with
 * another (the same file is built twice: test_params under the build's
 * prefix, test_params_other_prefix under the other kind), and the one
 * table: the shared heap's rows after the process's, the same parser, the
 * MCA names pinheap_param_info gives.  Main entry: the Criterion tests
 * below.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocator/api/api.h"

#include "config/params.h"
#include "pinheap.h"

extern char **environ;

/* ---- capturing what is written to fd 2 --------------------------------- */

typedef struct capture_s {
  int saved_fd;
  int mem_fd;
  char text[4096];
} capture_t;

static void capture_begin(capture_t *c)
{
  fflush(stderr);
  c->mem_fd = memfd_create("stderr", 0);
  cr_assert(c->mem_fd >= 0, "memfd_create: %s", strerror(errno));
  c->saved_fd = dup(STDERR_FILENO);
  cr_assert(c->saved_fd >= 0);
  cr_assert(dup2(c->mem_fd, STDERR_FILENO) == STDERR_FILENO);
}

static const char *capture_end(capture_t *c)
{
  ssize_t n;

  fflush(stderr);
  dup2(c->saved_fd, STDERR_FILENO);
  close(c->saved_fd);
  n = pread(c->mem_fd, c->text, sizeof(c->text) - 1, 0);
  cr_assert(n >= 0);
  c->text[n] = '\0';
  close(c->mem_fd);
  return c->text;
}

static int lines_count(const char *s)
{
  int n = 0;

  for (; *s != '\0'; s++)
    n += *s == '\n';
  return n;
}

/* Evaluates envp while capturing fd 2; returns the captured text. */
static const char *eval_captured(char *const *envp, params_t *out, capture_t *c)
{
  capture_begin(c);
  params_eval(envp, out);
  return capture_end(c);
}

/* What the booleans and tristates accept: Open MPI's spellings too in a
 * build with its prefix (PINHEAP_PARAM_FILES, pinheap_config.h). */
#if PINHEAP_PARAM_FILES
#define WANT_EXPECT_TRISTATE "1, 0, -1, true, false, yes, no, t, f, y, n, enabled, disabled or auto"
#define WANT_EXPECT_BOOL     "1, 0, true, false, yes, no, t, f, y, n, enabled or disabled"
#else
#define WANT_EXPECT_TRISTATE "1, 0, -1, true, false, yes or no"
#define WANT_EXPECT_BOOL     "1, 0, true, false, yes or no"
#endif

/* ---- descriptors -------------------------------------------------------- */

/* The names the build was configured with, composed by the test's own
 * cmake list from the cache variables (TEST_WANT_*), not taken from the
 * header macros that initialise the descriptors. */
static const struct {
  param_id_t id;
  const char *name;
  const char *short_name;
  const char *alias;        /* the MCA-style alias, NULL: none */
  const char *yes;          /* a value that parses to yes_value */
  int yes_value;
} want_names[] = {
#define MCA(suffix) TEST_WANT_PREFIX "memory_pinheap_" suffix
  { PARAM_LEAVE_PINNED, TEST_WANT_PREFIX TEST_WANT_LP, TEST_WANT_LP, NULL, "1", 1 },
  { PARAM_LEAVE_PINNED_PIPELINE, TEST_WANT_PREFIX TEST_WANT_LPP, TEST_WANT_LPP, NULL, "1", 1 },
  { PARAM_DISABLE, TEST_WANT_PREFIX TEST_WANT_DISABLE, TEST_WANT_DISABLE, NULL, "1", 1 },
  { PARAM_MODE, TEST_WANT_MODE, TEST_WANT_MODE, MCA("mode"), "on", 1 },
  { PARAM_FAKEROOTKEY, "FAKEROOTKEY", "FAKEROOTKEY", NULL, "x", 1 },
  { PARAM_FAKED_MODE, "FAKED_MODE", "FAKED_MODE", NULL, "x", 1 },
  { PARAM_SANDBOX_ON, "SANDBOX_ON", "SANDBOX_ON", NULL, "x", 1 },
  { PARAM_PROBE_ROOT, TEST_WANT_PROBE_ROOT, TEST_WANT_PROBE_ROOT, MCA("probe_root"), "/x", 1 },
  { PARAM_ARENA_MAX, "PINHEAP_ARENA_MAX", "PINHEAP_ARENA_MAX", MCA("arena_max"), "1", 1 },
  { PARAM_PATCH, "PINHEAP_PATCH", "PINHEAP_PATCH", MCA("patch"), "0", 0 },
  { PARAM_LATE_MALLOC, "PINHEAP_LATE_MALLOC", "PINHEAP_LATE_MALLOC", MCA("late_malloc"), "1", 1 },
  { PARAM_CODE_PATCH, "PINHEAP_CODE_PATCH", "PINHEAP_CODE_PATCH", MCA("code_patch"), "0", 0 },
  { PARAM_LOG_LEVEL, "PINHEAP_LOG_LEVEL", "PINHEAP_LOG_LEVEL", MCA("log_level"), "1", 1 },
  { PARAM_EVENTS, "PINHEAP_EVENTS", "PINHEAP_EVENTS", MCA("events"), "0", 0 },
  { PARAM_MALLOC_ALIGN, "PINHEAP_MALLOC_ALIGN", "PINHEAP_MALLOC_ALIGN", MCA("malloc_align"),
    "64", 64 },
  { PARAM_AUDIT, "PINHEAP_AUDIT", "PINHEAP_AUDIT", MCA("audit"), "1", 1 },
#undef MCA
};

Test(params, descriptor_names_follow_the_build_settings)
{
  cr_assert_eq(sizeof(want_names) / sizeof(want_names[0]), PARAM_COUNT,
               "a parameter without an expected name in this test");
  for (size_t k = 0; k < PARAM_COUNT; k++) {
    const param_desc_t *d = param_desc_get(want_names[k].id);
    cr_assert_not_null(d);
    cr_assert_str_eq(d->name, want_names[k].name);
    cr_assert_str_eq(d->short_name, want_names[k].short_name);
    if (want_names[k].alias == NULL)
      cr_assert_null(d->alias, "%s has an alias (%s)", d->name, d->alias);
    else
      cr_assert(d->alias != NULL && strcmp(d->alias, want_names[k].alias) == 0,
                "%s: alias %s, expected %s", d->name, d->alias ? d->alias : "(none)",
                want_names[k].alias);
  }
  cr_assert_null(param_desc_get(PARAM_COUNT));
  cr_assert_null(param_desc_get((param_id_t)-1));
}

/* Behaviour: setting exactly that variable -- its name, or its alias --
 * sets exactly that parameter, and `from` names the variable. */
Test(params, each_variable_reaches_its_parameter)
{
  for (size_t k = 0; k < PARAM_COUNT; k++) {
    for (int by_alias = 0; by_alias < 2; by_alias++) {
      const char *var = by_alias ? want_names[k].alias : want_names[k].name;
      char entry[128];
      char *envp[] = { entry, NULL };
      params_t t;

      if (var == NULL)
        continue;
      snprintf(entry, sizeof(entry), "%s=%s", var, want_names[k].yes);
      params_eval(envp, &t);
      for (int id = 0; id < PARAM_COUNT; id++) {
        if (id == (int)want_names[k].id) {
          cr_assert_eq(t.v[id].source, PARAM_SOURCE_ENV, "%s did not set its parameter", entry);
          cr_assert_eq(t.v[id].value, want_names[k].yes_value, "%s parsed to %d", entry,
                       t.v[id].value);
          cr_assert_str_eq(t.v[id].raw, want_names[k].yes);
          cr_assert(t.v[id].from != NULL && strcmp(t.v[id].from, var) == 0,
                    "%s: from is %s", entry, t.v[id].from ? t.v[id].from : "NULL");
          cr_assert_eq(t.v[id].alias_ignored, 0);
        } else {
          cr_assert_eq(t.v[id].source, PARAM_SOURCE_DEFAULT, "%s also set parameter %d", entry,
                       id);
          cr_assert_null(t.v[id].from);
        }
      }
    }
  }
}

/* ---- MCA-style aliases: precedence and the conflict warning ------------- */

#define ALIAS_LOG TEST_WANT_PREFIX "memory_pinheap_log_level"

Test(params, alias_alone_sets_the_parameter_and_is_named)
{
  char *envp[] = { ALIAS_LOG "=debug", TEST_WANT_PREFIX "memory_pinheap_events=no", NULL };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].value, PH_LOG_DEBUG);
  cr_assert_str_eq(p.v[PARAM_LOG_LEVEL].from, ALIAS_LOG);
  cr_assert_eq(p.v[PARAM_EVENTS].value, 0);
  cr_assert_str_eq(p.v[PARAM_EVENTS].from, TEST_WANT_PREFIX "memory_pinheap_events");
}

Test(params, name_wins_over_alias_and_a_conflict_is_one_warning_naming_both)
{
  char *envp[] = { ALIAS_LOG "=debug", "PINHEAP_LOG_LEVEL=info", NULL };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(envp, &p, &c),
                   "pinheap: warning: PINHEAP_LOG_LEVEL=\"info\" and " ALIAS_LOG "=\"debug\" "
                   "are both set and differ: PINHEAP_LOG_LEVEL wins, " ALIAS_LOG " is ignored\n");
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].value, PH_LOG_INFO);
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].source, PARAM_SOURCE_ENV);
  cr_assert_str_eq(p.v[PARAM_LOG_LEVEL].from, "PINHEAP_LOG_LEVEL");
  cr_assert_str_eq(p.v[PARAM_LOG_LEVEL].raw, "info");
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].alias_ignored, 1);
}

Test(params, same_value_under_both_names_is_no_conflict)
{
  /* the same text, and different spellings of the same value */
  char *same_text[] = { "PINHEAP_LOG_LEVEL=info", ALIAS_LOG "=info", NULL };
  char *same_value[] = { "PINHEAP_EVENTS= yes", TEST_WANT_PREFIX "memory_pinheap_events=1",
                         "PINHEAP_MALLOC_ALIGN=64", TEST_WANT_PREFIX "memory_pinheap_malloc_align="
                         " 0064 ", NULL };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(same_text, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].alias_ignored, 1);
  cr_assert_str_eq(eval_captured(same_value, &p, &c), "");
  cr_assert_eq(p.v[PARAM_EVENTS].value, 1);
  cr_assert_str_eq(p.v[PARAM_EVENTS].from, "PINHEAP_EVENTS");
  cr_assert_eq(p.v[PARAM_MALLOC_ALIGN].value, 64);
}

Test(params, invalid_name_is_not_replaced_by_a_valid_alias)
{
  /* the PINHEAP_ name wins even when its value is bad: one warning for the
   * bad value, one for the two names that differ; the default applies */
  char *envp[] = { "PINHEAP_MALLOC_ALIGN=48", TEST_WANT_PREFIX "memory_pinheap_malloc_align=64",
                   NULL };
  params_t p;
  capture_t c;
  const char *err = eval_captured(envp, &p, &c);

  cr_assert_eq(lines_count(err), 2, "'%s'", err);
  cr_assert(strstr(err, "pinheap: warning: PINHEAP_MALLOC_ALIGN=\"48\" is not a valid value "
                        "(expected a power of two from 16 to 4096); ignored, treated as not "
                        "set\n") == err, "'%s'", err);
  cr_assert(strstr(err, "are both set and differ: PINHEAP_MALLOC_ALIGN wins") != NULL, "'%s'",
            err);
  cr_assert_eq(p.v[PARAM_MALLOC_ALIGN].source, PARAM_SOURCE_INVALID);
  cr_assert_eq(p.v[PARAM_MALLOC_ALIGN].value, 16);
  cr_assert_str_eq(p.v[PARAM_MALLOC_ALIGN].from, "PINHEAP_MALLOC_ALIGN");
}

Test(params, invalid_alias_alone_is_warned_under_its_own_name)
{
  char *envp[] = { TEST_WANT_PREFIX "memory_pinheap_code_patch=sometimes", NULL };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(envp, &p, &c),
                   "pinheap: warning: " TEST_WANT_PREFIX "memory_pinheap_code_patch="
                   "\"sometimes\" is not a valid value (expected " WANT_EXPECT_BOOL "); "
                   "ignored, treated as not set\n");
  cr_assert_eq(p.v[PARAM_CODE_PATCH].source, PARAM_SOURCE_INVALID);
  cr_assert_eq(p.v[PARAM_CODE_PATCH].value, 1);
}

Test(params, variables_without_alias_do_not_answer_to_one)
{
  char *envp[] = { TEST_WANT_PREFIX "memory_pinheap_mpi_leave_pinned=1",
                   TEST_WANT_PREFIX "memory_pinheap_fakerootkey=1",
                   TEST_WANT_PREFIX "memory_pinheap_log_leve=debug",
                   TEST_WANT_PREFIX "memory_pinheap_LOG_LEVEL=debug", NULL };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  for (int id = 0; id < PARAM_COUNT; id++)
    cr_assert_eq(p.v[id].source, PARAM_SOURCE_DEFAULT, "param %d", id);
}

#ifdef PINHEAP_TEST_DEFAULT_NAMES
Test(params, default_names_are_open_mpis)
{
  cr_assert_str_eq(PINHEAP_ENV_LEAVE_PINNED, "OMPI_MCA_mpi_leave_pinned");
  cr_assert_str_eq(PINHEAP_ENV_LEAVE_PINNED_PIPELINE, "OMPI_MCA_mpi_leave_pinned_pipeline");
  cr_assert_str_eq(PINHEAP_ENV_DISABLE, "OMPI_MCA_memory_ptmalloc2_disable");
  cr_assert_str_eq(PINHEAP_ENV_MODE, "PINHEAP_MODE");
  cr_assert_str_eq(PINHEAP_ENV_PROBE_ROOT, "PINHEAP_PROBE_ROOT");
}
#endif

Test(params, value_and_source_names)
{
  cr_assert_str_eq(param_value_name(PARAM_LEAVE_PINNED, PARAM_TRI_YES), "yes");
  cr_assert_str_eq(param_value_name(PARAM_LEAVE_PINNED, PARAM_TRI_NO), "no");
  cr_assert_str_eq(param_value_name(PARAM_LEAVE_PINNED, PARAM_TRI_RUNTIME), "runtime");
  cr_assert_str_eq(param_value_name(PARAM_LEAVE_PINNED, PARAM_TRI_NOT_FOUND), "not found");
  cr_assert_str_eq(param_value_name(PARAM_LEAVE_PINNED, 7), "unknown");
  cr_assert_str_eq(param_value_name(PARAM_DISABLE, 1), "true");
  cr_assert_str_eq(param_value_name(PARAM_DISABLE, 0), "false");
  cr_assert_str_eq(param_value_name(PARAM_MODE, PARAM_MODE_ON), "on");
  cr_assert_str_eq(param_value_name(PARAM_MODE, PARAM_MODE_OFF), "off");
  cr_assert_str_eq(param_value_name(PARAM_MODE, PARAM_MODE_AUTO), "auto");
  cr_assert_str_eq(param_value_name(PARAM_FAKEROOTKEY, 1), "set");
  cr_assert_str_eq(param_value_name(PARAM_FAKEROOTKEY, 0), "not set");
  cr_assert_str_eq(param_value_name(PARAM_COUNT, 0), "unknown");
  cr_assert_str_eq(param_source_name(PARAM_SOURCE_DEFAULT), "default");
  cr_assert_str_eq(param_source_name(PARAM_SOURCE_ENV), "environment");
  cr_assert_str_eq(param_source_name(PARAM_SOURCE_INVALID), "invalid");
}

/* ---- empty environments -------------------------------------------------- */

static void assert_all_default(const params_t *p)
{
  for (int id = 0; id < PARAM_COUNT; id++) {
    cr_assert_eq(p->v[id].source, PARAM_SOURCE_DEFAULT, "param %d", id);
    cr_assert_eq(p->v[id].value, param_desc_get((param_id_t)id)->default_value, "param %d", id);
    cr_assert_eq(p->v[id].is_valid, 1);
    cr_assert_str_eq(p->v[id].raw, "");
  }
  cr_assert_eq(p->v[PARAM_LEAVE_PINNED].value, PARAM_TRI_NOT_FOUND);
  cr_assert_eq(p->v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_NOT_FOUND);
  cr_assert_eq(p->v[PARAM_DISABLE].value, 0);
  cr_assert_eq(p->v[PARAM_MODE].value, PARAM_MODE_AUTO);
  cr_assert_eq(p->v[PARAM_FAKEROOTKEY].value, 0);
  cr_assert_eq(p->v[PARAM_PROBE_ROOT].value, 0);
}

Test(params, null_and_empty_envp_mean_nothing_set)
{
  char *empty[] = { NULL };
  char *unrelated[] = { "PATH=/usr/bin", "HOME=/root", "noequals", "=x", NULL };
  params_t p;
  capture_t c;

  memset(&p, 0x5a, sizeof(p));
  cr_assert_str_eq(eval_captured(NULL, &p, &c), "");
  assert_all_default(&p);
  memset(&p, 0x5a, sizeof(p));
  cr_assert_str_eq(eval_captured(empty, &p, &c), "");
  assert_all_default(&p);
  memset(&p, 0x5a, sizeof(p));
  cr_assert_str_eq(eval_captured(unrelated, &p, &c), "");
  assert_all_default(&p);
}

/* ---- tristate spellings -------------------------------------------------- */

typedef struct spelling_s {
  const char *text;
  int value;
} spelling_t;

static const spelling_t tristate_ok[] = {
  { "1", PARAM_TRI_YES }, { "0", PARAM_TRI_NO }, { "-1", PARAM_TRI_RUNTIME },
  { "true", PARAM_TRI_YES }, { "TRUE", PARAM_TRI_YES }, { "True", PARAM_TRI_YES },
  { "false", PARAM_TRI_NO }, { "FaLsE", PARAM_TRI_NO },
  { "yes", PARAM_TRI_YES }, { "YES", PARAM_TRI_YES }, { "Yes", PARAM_TRI_YES },
  { "no", PARAM_TRI_NO }, { "NO", PARAM_TRI_NO }, { "nO", PARAM_TRI_NO },
  { " 1", PARAM_TRI_YES }, { "0 ", PARAM_TRI_NO }, { "  -1  ", PARAM_TRI_RUNTIME },
  { "\tyes\n", PARAM_TRI_YES }, { "\r\n false \v\f", PARAM_TRI_NO },
};

static const char *const tristate_bad[] = {
  "", "   ", "2", "-2", "10", "01", "+1", "- 1", "-1x", "1 1", "maybe",
#if !PINHEAP_PARAM_FILES
  "y", "n", "auto",                 /* Open MPI's, accepted with its prefix */
#endif
  "on", "off", "runtime", "yess", "tru", "-", "1\x01", "ye", "enable", "tt", "autoo",
};

/* Evaluates NAME=text alone; checks the id got value with source ENV, every
 * other parameter stayed at its default, nothing was printed. */
static void check_alone_ok(param_id_t id, const char *text, int value)
{
  char entry[512];
  char *envp[] = { entry, NULL };
  params_t p;
  capture_t c;
  const char *err;

  snprintf(entry, sizeof(entry), "%s=%s", param_desc_get(id)->name, text);
  err = eval_captured(envp, &p, &c);
  cr_assert_str_eq(err, "", "%s: unexpected output '%s'", entry, err);
  cr_assert_eq(p.v[id].value, value, "%s: value %d, expected %d", entry, p.v[id].value, value);
  cr_assert_eq(p.v[id].source, PARAM_SOURCE_ENV, "%s", entry);
  cr_assert_eq(p.v[id].is_valid, 1);
  cr_assert_str_eq(p.v[id].raw, text);
  for (int other = 0; other < PARAM_COUNT; other++) {
    if (other == (int)id)
      continue;
    cr_assert_eq(p.v[other].source, PARAM_SOURCE_DEFAULT, "%s changed param %d", entry, other);
    cr_assert_eq(p.v[other].value, param_desc_get((param_id_t)other)->default_value);
  }
}

/* Evaluates NAME=text alone; checks it is invalid, counted as not set, and
 * produced exactly one warning line naming variable, value, expectation. */
static void check_alone_bad(param_id_t id, const char *text, const char *shown)
{
  const param_desc_t *desc = param_desc_get(id);
  char entry[512];
  char want[512];
  char *envp[] = { entry, NULL };
  params_t p;
  capture_t c;
  const char *err;

  snprintf(entry, sizeof(entry), "%s=%s", desc->name, text);
  err = eval_captured(envp, &p, &c);
  cr_assert_eq(p.v[id].source, PARAM_SOURCE_INVALID, "%s", entry);
  cr_assert_eq(p.v[id].is_valid, 0, "%s", entry);
  cr_assert_eq(p.v[id].value, desc->default_value, "%s: invalid must count as not set", entry);
  cr_assert_eq(lines_count(err), 1, "%s: expected one warning line, got '%s'", entry, err);
  cr_assert(strncmp(err, "pinheap: warning: ", 18) == 0, "%s: '%s'", entry, err);
  snprintf(want, sizeof(want), "%s=\"%s\"", desc->name, shown);
  cr_assert(strstr(err, want) != NULL, "%s: warning '%s' lacks '%s'", entry, err, want);
  snprintf(want, sizeof(want), "expected %s", desc->expected);
  cr_assert(strstr(err, want) != NULL, "%s: warning '%s' lacks '%s'", entry, err, want);
  cr_assert(strstr(err, "treated as not set") != NULL, "%s: '%s'", entry, err);
  for (int other = 0; other < PARAM_COUNT; other++) {
    if (other != (int)id)
      cr_assert_eq(p.v[other].source, PARAM_SOURCE_DEFAULT);
  }
}

Test(params, tristate_spellings_each_variable)
{
  param_id_t ids[] = { PARAM_LEAVE_PINNED, PARAM_LEAVE_PINNED_PIPELINE };

  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof(tristate_ok) / sizeof(tristate_ok[0]); i++)
      check_alone_ok(ids[k], tristate_ok[i].text, tristate_ok[i].value);
}

Test(params, tristate_unparsable_warns_once_and_counts_as_not_found)
{
  param_id_t ids[] = { PARAM_LEAVE_PINNED, PARAM_LEAVE_PINNED_PIPELINE };

  cr_assert_str_eq(param_desc_get(PARAM_LEAVE_PINNED)->expected, WANT_EXPECT_TRISTATE);
  for (size_t k = 0; k < 2; k++) {
    for (size_t i = 0; i < sizeof(tristate_bad) / sizeof(tristate_bad[0]); i++) {
      char shown[64];
      size_t n = 0;
      for (const char *s = tristate_bad[i]; *s; s++)
        shown[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
      shown[n] = '\0';
      check_alone_bad(ids[k], tristate_bad[i], shown);
    }
  }
}

Test(params, warning_text_is_exact)
{
  char *envp[] = { PINHEAP_ENV_LEAVE_PINNED "=maybe", NULL };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(envp, &p, &c),
                   "pinheap: warning: " PINHEAP_ENV_LEAVE_PINNED "=\"maybe\" is not a valid "
                   "value (expected " WANT_EXPECT_TRISTATE "); ignored, treated as "
                   "not set\n");
}

Test(params, warning_stays_one_line_for_newlines_and_long_values)
{
  char longval[400];
  char entry[512];
  char *envp[] = { PINHEAP_ENV_LEAVE_PINNED_PIPELINE "=a\nb\tc", entry, NULL };
  params_t p;
  capture_t c;
  const char *err;

  memset(longval, 'x', sizeof(longval) - 1);
  longval[sizeof(longval) - 1] = '\0';
  snprintf(entry, sizeof(entry), "%s=%s", PINHEAP_ENV_LEAVE_PINNED, longval);
  err = eval_captured(envp, &p, &c);
  cr_assert_eq(lines_count(err), 2, "one line per bad variable: '%s'", err);
  cr_assert(strstr(err, PINHEAP_ENV_LEAVE_PINNED_PIPELINE "=\"a?b?c\"") != NULL, "%s", err);
  /* the long value is cut in the message, and its raw copy is cut too */
  cr_assert(strstr(err, "xxxx...\"") != NULL, "%s", err);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].raw_truncated, 1);
  cr_assert_eq(strlen(p.v[PARAM_LEAVE_PINNED].raw), PARAM_RAW_MAX - 1);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_NOT_FOUND);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_NOT_FOUND);
}

Test(params, long_blank_padding_still_parses)
{
  char entry[1024];
  char *envp[] = { entry, NULL };
  params_t p;
  capture_t c;

  snprintf(entry, sizeof(entry), "%s=%400s", PINHEAP_ENV_LEAVE_PINNED, "yes");
  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].raw_truncated, 1);
}

/* ---- the other kinds ----------------------------------------------------- */

Test(params, disable_is_a_boolean)
{
  static const spelling_t ok[] = {
    { "1", 1 }, { "true", 1 }, { "YES", 1 }, { " yes ", 1 },
    { "0", 0 }, { "false", 0 }, { "No", 0 },
  };

  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    check_alone_ok(PARAM_DISABLE, ok[i].text, ok[i].value);
  check_alone_bad(PARAM_DISABLE, "-1", "-1");
  check_alone_bad(PARAM_DISABLE, "", "");
  check_alone_bad(PARAM_DISABLE, "disable", "disable");
}

Test(params, mode_spellings)
{
  static const spelling_t ok[] = {
    { "on", PARAM_MODE_ON }, { "ON", PARAM_MODE_ON }, { "1", PARAM_MODE_ON },
    { "true", PARAM_MODE_ON }, { "yes", PARAM_MODE_ON },
    { "off", PARAM_MODE_OFF }, { " Off ", PARAM_MODE_OFF }, { "0", PARAM_MODE_OFF },
    { "false", PARAM_MODE_OFF }, { "no", PARAM_MODE_OFF },
    { "auto", PARAM_MODE_AUTO }, { "AUTO", PARAM_MODE_AUTO }, { "-1", PARAM_MODE_AUTO },
  };

  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    check_alone_ok(PARAM_MODE, ok[i].text, ok[i].value);
  check_alone_bad(PARAM_MODE, "force", "force");
  check_alone_bad(PARAM_MODE, "onn", "onn");
  check_alone_bad(PARAM_MODE, "", "");
}

Test(params, presence_switches_count_any_value)
{
  param_id_t ids[] = { PARAM_FAKEROOTKEY, PARAM_FAKED_MODE, PARAM_SANDBOX_ON };

  for (size_t k = 0; k < 3; k++) {
    check_alone_ok(ids[k], "", 1);
    check_alone_ok(ids[k], "0", 1);
    check_alone_ok(ids[k], "12345", 1);
  }
}

Test(params, probe_root_must_be_absolute_and_short)
{
  char longpath[PARAM_RAW_MAX + 10];

  check_alone_ok(PARAM_PROBE_ROOT, "/tmp/fake-root", 1);
  check_alone_ok(PARAM_PROBE_ROOT, "/", 1);
  check_alone_bad(PARAM_PROBE_ROOT, "relative/dir", "relative/dir");
  check_alone_bad(PARAM_PROBE_ROOT, "", "");
  longpath[0] = '/';
  memset(longpath + 1, 'd', sizeof(longpath) - 2);
  longpath[sizeof(longpath) - 1] = '\0';
  {
    char entry[600];
    char *envp[] = { entry, NULL };
    params_t p;
    capture_t c;
    const char *err;

    snprintf(entry, sizeof(entry), "%s=%s", PINHEAP_ENV_PROBE_ROOT, longpath);
    err = eval_captured(envp, &p, &c);
    cr_assert_eq(p.v[PARAM_PROBE_ROOT].source, PARAM_SOURCE_INVALID);
    cr_assert_eq(p.v[PARAM_PROBE_ROOT].value, 0);
    cr_assert_eq(lines_count(err), 1);
    cr_assert(strstr(err, "is too long") != NULL, "%s", err);
  }
}

/* ---- lookup rules ---------------------------------------------------------- */

Test(params, names_match_exactly_and_first_entry_wins)
{
  char *envp[] = {
    PINHEAP_ENV_LEAVE_PINNED "X=1",          /* longer name: not ours */
    "X" PINHEAP_ENV_LEAVE_PINNED "=1",       /* longer name: not ours */
    PINHEAP_ENV_LEAVE_PINNED,                /* no '=': not an entry for it */
    PINHEAP_ENV_LEAVE_PINNED_PIPELINE "=0",  /* lp is a prefix of lpp: must not match lp */
    PINHEAP_ENV_LEAVE_PINNED "=-1",          /* first real lp entry */
    PINHEAP_ENV_LEAVE_PINNED "=1",           /* shadowed, as with getenv() */
    PINHEAP_ENV_LEAVE_PINNED_PIPELINE "=bad",/* shadowed: no warning */
    NULL,
  };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_RUNTIME);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].raw, "-1");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_NO);
}

/* The environment is read in one pass for every name: odd entries around
 * the names change nothing, a value may hold '=', and each name still
 * takes its own first entry wherever the others' are. */
Test(params, one_pass_reads_each_name_once_among_odd_entries)
{
  char odd_first[] = { (char)0xff, 'P', '=', '1', '\0' };
  char *envp[] = {
    "",                                      /* empty entry */
    "=",                                     /* empty name */
    "=PINHEAP_MODE=on",                      /* empty name again */
    odd_first,                               /* a byte above 0x7f first */
    "PINHEAP_MODE_AND_A_NAME_LONGER_THAN_ANY_OF_OURS=on",
    "PINHEAP_LOG_LEVEL",                     /* no '=' */
    PINHEAP_ENV_PROBE_ROOT "=/a=b",          /* '=' inside the value */
    PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_mode=off",  /* the alias first ... */
    PINHEAP_ENV_MODE "=off",                 /* ... then the name, same value */
    "PINHEAP_LOG_LEVEL=debug",
    PINHEAP_ENV_MODE "=on",                  /* shadowed */
    "PINHEAP_LOG_LEVEL=nonsense",            /* shadowed: no warning */
    NULL,
  };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_MODE].value, PARAM_MODE_OFF);
  cr_assert_str_eq(p.v[PARAM_MODE].from, PINHEAP_ENV_MODE);
  cr_assert_eq(p.v[PARAM_MODE].alias_ignored, 1);
  cr_assert_str_eq(p.v[PARAM_PROBE_ROOT].raw, "/a=b");
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].value, PH_LOG_DEBUG);
  cr_assert_eq(p.v[PARAM_EVENTS].source, PARAM_SOURCE_DEFAULT);
}

/* Under mpirun the environment holds some 150 OMPI_MCA_ variables, all
 * starting as the MCA aliases do: each name still takes its own entry, and
 * an entry of the same length and the same last bytes as a name (the
 * scan's hash) is not taken for it. */
Test(params, many_mca_variables_and_look_alike_names)
{
  static char dummies[150][48];
  char *envp[160];
  int n = 0;
  params_t p;
  capture_t c;

  for (int i = 0; i < 150; i++) {
    snprintf(dummies[i], sizeof(dummies[i]), "%sx_%d=%d", PINHEAP_PARAM_PREFIX_STRING, i + 1, i);
    envp[n++] = dummies[i];
    if (i == 0)                       /* the alias's twin: same length, same end */
      envp[n++] = PINHEAP_PARAM_PREFIX_STRING "xemory_pinheap_mode=off";
    if (i == 75)
      envp[n++] = PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_log_level=error";
    if (i == 76)
      envp[n++] = "PINHEAP_LOG_LEVEM=debug";     /* the name's look-alike */
  }
  envp[n++] = PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_mode=on";
  envp[n] = NULL;
  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_MODE].value, PARAM_MODE_ON);
  cr_assert_str_eq(p.v[PARAM_MODE].from, PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_mode");
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].value, PH_LOG_ERROR);
  cr_assert_str_eq(p.v[PARAM_LOG_LEVEL].from,
                   PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_log_level");
  cr_assert_eq(p.v[PARAM_EVENTS].source, PARAM_SOURCE_DEFAULT);
}

Test(params, all_variables_together_are_independent)
{
  char *envp[] = {
    PINHEAP_ENV_LEAVE_PINNED "=no",
    PINHEAP_ENV_LEAVE_PINNED_PIPELINE "=true",
    PINHEAP_ENV_DISABLE "=yes",
    PINHEAP_ENV_MODE "=off",
    "FAKEROOTKEY=4711",
    "SANDBOX_ON=1",
    PINHEAP_ENV_PROBE_ROOT "=/x",
    NULL,
  };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_NO);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_YES);
  cr_assert_eq(p.v[PARAM_DISABLE].value, 1);
  cr_assert_eq(p.v[PARAM_MODE].value, PARAM_MODE_OFF);
  cr_assert_eq(p.v[PARAM_FAKEROOTKEY].value, 1);
  cr_assert_str_eq(p.v[PARAM_FAKEROOTKEY].raw, "4711");
  cr_assert_eq(p.v[PARAM_FAKED_MODE].value, 0);
  cr_assert_eq(p.v[PARAM_FAKED_MODE].source, PARAM_SOURCE_DEFAULT);
  cr_assert_eq(p.v[PARAM_SANDBOX_ON].value, 1);
  cr_assert_str_eq(p.v[PARAM_PROBE_ROOT].raw, "/x");
}

/* ---- the process table ------------------------------------------------------ */

Test(params, process_table_is_parsed_once_and_read_only)
{
  const params_t *p1;
  const params_t *p2;
  capture_t c;

  cr_assert_eq(setenv(PINHEAP_ENV_LEAVE_PINNED, " Yes ", 1), 0);
  cr_assert_eq(setenv(PINHEAP_ENV_DISABLE, "bogus", 1), 0);
  unsetenv(PINHEAP_ENV_LEAVE_PINNED_PIPELINE);
  capture_begin(&c);
  p1 = params_get();
  /* later changes are not seen and nothing is parsed (or warned) again */
  setenv(PINHEAP_ENV_LEAVE_PINNED, "0", 1);
  setenv(PINHEAP_ENV_LEAVE_PINNED_PIPELINE, "1", 1);
  p2 = params_get();
  cr_assert_eq(lines_count(capture_end(&c)), 1, "'%s'", c.text);
  cr_assert(strstr(c.text, PINHEAP_ENV_DISABLE "=\"bogus\"") != NULL, "%s", c.text);
  cr_assert_eq(p1, p2);
  cr_assert_eq(p1->v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES);
  cr_assert_eq(p1->v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_NOT_FOUND);
  cr_assert_eq(p1->v[PARAM_DISABLE].source, PARAM_SOURCE_INVALID);
}

Test(params, process_table_with_null_environ)
{
  const params_t *p;

  setenv(PINHEAP_ENV_LEAVE_PINNED, "1", 1);
  environ = NULL;
  p = params_get();
  cr_assert_not_null(p);
  assert_all_default(p);
}

static void *thread_get(void *arg)
{
  (void)arg;
  return (void *)params_get();
}

Test(params, first_use_from_many_threads_parses_once)
{
  pthread_t t[8];
  void *r[8];
  capture_t c;

  setenv(PINHEAP_ENV_MODE, "sometimes", 1);
  setenv(PINHEAP_ENV_LEAVE_PINNED_PIPELINE, "-1", 1);
  capture_begin(&c);
  for (int i = 0; i < 8; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, thread_get, NULL), 0);
  for (int i = 0; i < 8; i++)
    pthread_join(t[i], &r[i]);
  capture_end(&c);
  cr_assert_eq(lines_count(c.text), 1, "one warning per process: '%s'", c.text);
  for (int i = 1; i < 8; i++)
    cr_assert_eq(r[i], r[0]);
  cr_assert_eq(((const params_t *)r[0])->v[PARAM_LEAVE_PINNED_PIPELINE].value,
               PARAM_TRI_RUNTIME);
  cr_assert_eq(((const params_t *)r[0])->v[PARAM_MODE].value, PARAM_MODE_AUTO);
}

Test(params, arena_max_is_a_count_from_1_to_256)
{
  check_alone_ok(PARAM_ARENA_MAX, "1", 1);
  check_alone_ok(PARAM_ARENA_MAX, " 8 ", 8);
  check_alone_ok(PARAM_ARENA_MAX, "256", 256);
  check_alone_bad(PARAM_ARENA_MAX, "0", "0");
  check_alone_bad(PARAM_ARENA_MAX, "257", "257");
  check_alone_bad(PARAM_ARENA_MAX, "-2", "-2");
  check_alone_bad(PARAM_ARENA_MAX, "four", "four");
  check_alone_bad(PARAM_ARENA_MAX, "", "");
  cr_assert_str_eq(param_value_name(PARAM_ARENA_MAX, 0), "default");
  cr_assert_str_eq(param_value_name(PARAM_ARENA_MAX, 4), "set");
}

/* ---- the log level -------------------------------------------------------- */

Test(params, log_level_spellings)
{
  static const spelling_t ok[] = {
    { "fatal", PH_LOG_FATAL }, { "ERROR", PH_LOG_ERROR }, { "warn", PH_LOG_WARN },
    { "Warning", PH_LOG_WARN }, { "info", PH_LOG_INFO }, { "DeBuG", PH_LOG_DEBUG },
    { "0", PH_LOG_FATAL }, { "1", PH_LOG_ERROR }, { "2", PH_LOG_WARN }, { "3", PH_LOG_INFO },
    { "4", PH_LOG_DEBUG }, { " debug\n", PH_LOG_DEBUG }, { "\t3 ", PH_LOG_INFO },
  };
  static const char *const bad[] = { "", "5", "-1", "04", "trace", "verbose", "warnings",
                                     "deb", "info debug" };

  cr_assert_eq(param_desc_get(PARAM_LOG_LEVEL)->default_value, PH_LOG_WARN);
  cr_assert_str_eq(param_desc_get(PARAM_LOG_LEVEL)->expected,
                   "fatal, error, warn, info, debug or 0 to 4");
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    check_alone_ok(PARAM_LOG_LEVEL, ok[i].text, ok[i].value);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    check_alone_bad(PARAM_LOG_LEVEL, bad[i], bad[i]);
  cr_assert_str_eq(param_value_name(PARAM_LOG_LEVEL, PH_LOG_WARN), "warn");
  cr_assert_str_eq(param_value_name(PARAM_LOG_LEVEL, PH_LOG_DEBUG), "debug");
}

Test(params, log_level_bad_value_warning_is_exact)
{
  char *envp[] = { "PINHEAP_LOG_LEVEL=chatty", NULL };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(envp, &p, &c),
                   "pinheap: warning: PINHEAP_LOG_LEVEL=\"chatty\" is not a valid value "
                   "(expected fatal, error, warn, info, debug or 0 to 4); ignored, treated as "
                   "not set\n");
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].value, PH_LOG_WARN);
}

/* params_eval of an explicit array does not touch the logger; the
 * process's table sets it once parsed. */
Test(params, log_level_reaches_the_logger_from_the_process_table_only)
{
  char *envp[] = { "PINHEAP_LOG_LEVEL=debug", NULL };
  params_t p;

  params_eval(envp, &p);
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].value, PH_LOG_DEBUG);
  cr_assert_eq(ph_log_level(), PH_LOG_WARN);
  setenv("PINHEAP_LOG_LEVEL", "info", 1);
  params_get();
  cr_assert_eq(ph_log_level(), PH_LOG_INFO);
}

/* ---- the events switch ---------------------------------------------------- */

Test(params, events_is_a_boolean_on_by_default)
{
  cr_assert_eq(param_desc_get(PARAM_EVENTS)->default_value, 1);
  cr_assert_eq(param_desc_get(PARAM_EVENTS)->kind, PARAM_KIND_BOOL);
  check_alone_ok(PARAM_EVENTS, "0", 0);
  check_alone_ok(PARAM_EVENTS, " No ", 0);
  check_alone_ok(PARAM_EVENTS, "true", 1);
  check_alone_bad(PARAM_EVENTS, "off", "off");
  check_alone_bad(PARAM_EVENTS, "", "");
  cr_assert_str_eq(param_value_name(PARAM_EVENTS, 0), "false");
}

/* Off: params_events_on says 0, and one line, once, naming the variable
 * that turned the events off and the refusing function. */
Test(params, events_off_is_said_once_naming_the_variable)
{
  capture_t c;

  setenv(TEST_WANT_PREFIX "memory_pinheap_events", "no", 1);
  capture_begin(&c);
  int first = params_events_on("set_event_handler");
  int second = params_events_on("register_release");
  const char *err = capture_end(&c);
  cr_assert_eq(first, 0);
  cr_assert_eq(second, 0);
  cr_assert_str_eq(err, "pinheap: warning: set_event_handler refused: the memory events are off ("
                        TEST_WANT_PREFIX "memory_pinheap_events=\"no\"), so pinheap intercepts "
                        "no memory call and reports no release\n");
}

Test(params, events_on_says_nothing)
{
  capture_t c;

  unsetenv("PINHEAP_EVENTS");
  unsetenv(TEST_WANT_PREFIX "memory_pinheap_events");
  capture_begin(&c);
  int on = params_events_on("set_event_handler");
  cr_assert_str_eq(capture_end(&c), "");
  cr_assert_eq(on, 1);
}

/* ---- the default malloc alignment ----------------------------------------- */

Test(params, malloc_align_accepts_powers_of_two_from_16_to_4096)
{
  static const spelling_t ok[] = {
    { "16", 16 }, { "32", 32 }, { "64", 64 }, { " 64 ", 64 }, { "\t128\n", 128 },
    { "256", 256 }, { "512", 512 }, { "1024", 1024 }, { "2048", 2048 }, { "4096", 4096 },
    { "0064", 64 }, { "0000000000000004096", 4096 },
  };
  static const char *const bad[] = {
    "", " ", "0", "8", "1", "2", "15", "17", "48", "96", "100", "8192", "65536", "-64", "+64",
    "0x40", "64k", "6 4", "abc", "sixty-four", "4096.0",
    "18446744073709551680",            /* 2^64 + 64: 20 digits, not read as 64 */
    "99999999999999999999999999",      /* longer than any number */
    "00000000000000000064",            /* 20 digits */
  };

  cr_assert_eq(param_desc_get(PARAM_MALLOC_ALIGN)->default_value, 16);
  cr_assert_str_eq(param_desc_get(PARAM_MALLOC_ALIGN)->expected, "a power of two from 16 to 4096");
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    check_alone_ok(PARAM_MALLOC_ALIGN, ok[i].text, ok[i].value);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    check_alone_bad(PARAM_MALLOC_ALIGN, bad[i], bad[i]);
  cr_assert_str_eq(param_value_name(PARAM_MALLOC_ALIGN, 16), "16");
  cr_assert_str_eq(param_value_name(PARAM_MALLOC_ALIGN, 4096), "4096");
  cr_assert_str_eq(param_value_name(PARAM_MALLOC_ALIGN, 48), "unknown");
}

Test(params, malloc_align_bad_value_warning_is_exact)
{
  char *envp[] = { "PINHEAP_MALLOC_ALIGN=8", NULL };
  params_t p;
  capture_t c;

  cr_assert_str_eq(eval_captured(envp, &p, &c),
                   "pinheap: warning: PINHEAP_MALLOC_ALIGN=\"8\" is not a valid value "
                   "(expected a power of two from 16 to 4096); ignored, treated as not set\n");
  cr_assert_eq(p.v[PARAM_MALLOC_ALIGN].value, 16);
  cr_assert_eq(p.v[PARAM_MALLOC_ALIGN].source, PARAM_SOURCE_INVALID);
}

/* ---- Open MPI's parameter files and spellings --------------------------- */
/*
 * A build with Open MPI's prefix reads Open MPI's parameter files (the
 * environment wins) and takes its boolean spellings; any other prefix
 * keeps plain variables (test_params_other_prefix runs this file built
 * so).  The files live in a scratch directory: <dir>/home is HOME,
 * <dir>/etc the sysconfdir (OPAL_SYSCONFDIR), never the real ones.
 */

typedef struct scratch_s {
  char dir[64];
  char home[96];             /* <dir>/home, with .openmpi/ in it */
  char etc[96];              /* <dir>/etc */
  char home_conf[160];       /* <home>/.openmpi/mca-params.conf */
  char etc_conf[160];        /* <etc>/openmpi-mca-params.conf */
  char env_home[128];        /* "HOME=<home>" */
  char env_etc[128];         /* "OPAL_SYSCONFDIR=<etc>" */
} scratch_t;

static void scratch_make(scratch_t *t)
{
  char openmpi[128];

  snprintf(t->dir, sizeof(t->dir), "/tmp/test_params.XXXXXX");
  cr_assert_not_null(mkdtemp(t->dir), "mkdtemp: %s", strerror(errno));
  snprintf(t->home, sizeof(t->home), "%s/home", t->dir);
  snprintf(t->etc, sizeof(t->etc), "%s/etc", t->dir);
  snprintf(openmpi, sizeof(openmpi), "%s/.openmpi", t->home);
  cr_assert_eq(mkdir(t->home, 0700), 0);
  cr_assert_eq(mkdir(openmpi, 0700), 0);
  cr_assert_eq(mkdir(t->etc, 0700), 0);
  snprintf(t->home_conf, sizeof(t->home_conf), "%s/mca-params.conf", openmpi);
  snprintf(t->etc_conf, sizeof(t->etc_conf), "%s/openmpi-mca-params.conf", t->etc);
  snprintf(t->env_home, sizeof(t->env_home), "HOME=%s", t->home);
  snprintf(t->env_etc, sizeof(t->env_etc), "OPAL_SYSCONFDIR=%s", t->etc);
}

static void scratch_remove(scratch_t *t)
{
  char cmd[128];

  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
  cr_assert_eq(system(cmd), 0);
}

/* Writes text to path (created or replaced). */
static void file_put(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");

  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

/* "path:line" */
static const char *at_line(char *buf, size_t len, const char *path, int line)
{
  snprintf(buf, len, "%s:%d", path, line);
  return buf;
}

#if PINHEAP_PARAM_FILES

/* Writes text as the home directory's parameter file, then evaluates an
 * environment of just the scratch HOME and OPAL_SYSCONFDIR. */
static const char *eval_home_file(scratch_t *t, const char *text, params_t *p, capture_t *c)
{
  char *envp[] = { t->env_home, t->env_etc, NULL };

  file_put(t->home_conf, text);
  return eval_captured(envp, p, c);
}

Test(params_files, home_file_sets_leave_pinned)
{
  scratch_t t;
  char where[256];
  params_t p;
  capture_t c;

  scratch_make(&t);
  cr_assert_str_eq(eval_home_file(&t, "# Open MPI habits\n\nmpi_leave_pinned = 1\n", &p, &c), "");
  const param_value_t *v = &p.v[PARAM_LEAVE_PINNED];
  cr_assert_eq(v->value, PARAM_TRI_YES);
  cr_assert_eq(v->source, PARAM_SOURCE_FILE);
  cr_assert_str_eq(param_source_name(v->source), "file");
  cr_assert_str_eq(v->from, at_line(where, sizeof(where), t.home_conf, 3));
  cr_assert_str_eq(param_file_where(v), where);
  cr_assert_str_eq(v->key, "mpi_leave_pinned");
  cr_assert_str_eq(v->raw, "1");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].source, PARAM_SOURCE_DEFAULT);
  scratch_remove(&t);
}

Test(params_files, environment_wins_over_every_file)
{
  scratch_t t;
  char *envp[] = { t.env_home, t.env_etc, PINHEAP_ENV_LEAVE_PINNED "=0",
                   TEST_WANT_PREFIX "memory_pinheap_log_level=error", NULL };
  char where[256];
  params_t p;
  capture_t c;

  scratch_make(&t);
  file_put(t.home_conf, "mpi_leave_pinned = 1\nmemory_pinheap_log_level = debug\n");
  file_put(t.etc_conf, "mpi_leave_pinned = 1\nmpi_leave_pinned_pipeline = 1\n");
  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_NO);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].source, PARAM_SOURCE_ENV);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].from, PINHEAP_ENV_LEAVE_PINNED);
  cr_assert_null(param_file_where(&p.v[PARAM_LEAVE_PINNED]));
  /* an alias in the environment wins over the same name in a file too */
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].value, PH_LOG_ERROR);
  cr_assert_str_eq(p.v[PARAM_LOG_LEVEL].from, TEST_WANT_PREFIX "memory_pinheap_log_level");
  /* what the environment does not set, the files do */
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_YES);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].from,
                   at_line(where, sizeof(where), t.etc_conf, 2));
  scratch_remove(&t);
}

/* pinheap's own parameters answer in a file to their MCA alias's name. */
Test(params_files, aliases_are_read_from_files)
{
  scratch_t t;
  char where[256];
  params_t p;
  capture_t c;

  scratch_make(&t);
  cr_assert_str_eq(eval_home_file(&t, "memory_pinheap_log_level = debug\n"
                                  "memory_pinheap_events = disabled\n"
                                  "memory_ptmalloc2_disable = t\n", &p, &c), "");
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].value, PH_LOG_DEBUG);
  cr_assert_str_eq(p.v[PARAM_LOG_LEVEL].from, at_line(where, sizeof(where), t.home_conf, 1));
  cr_assert_str_eq(p.v[PARAM_LOG_LEVEL].key, "memory_pinheap_log_level");
  cr_assert_eq(p.v[PARAM_EVENTS].value, 0);
  cr_assert_eq(p.v[PARAM_DISABLE].value, 1);
  cr_assert_eq(p.v[PARAM_DISABLE].source, PARAM_SOURCE_FILE);
  scratch_remove(&t);
}

/* The home directory's file wins over the sysconfdir's; inside one file the
 * last line wins; blanks, comments and other names do not matter. */
Test(params_files, home_file_wins_over_sysconfdir_file_and_last_line_wins)
{
  scratch_t t;
  char *envp[] = { t.env_home, t.env_etc, NULL };
  char where[256];
  params_t p;
  capture_t c;

  scratch_make(&t);
  file_put(t.home_conf, "mpi_leave_pinned=0\n  # mpi_leave_pinned = 1\n"
                        "btl = ^openib\n\t mpi_leave_pinned \t=  yes \r\n");
  file_put(t.etc_conf, "mpi_leave_pinned = 0\nmpi_leave_pinned_pipeline = 1\n"
                       "mpi_leave_pinned_pipeline = -1\n");
  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].raw, "yes");
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].from, at_line(where, sizeof(where), t.home_conf, 4));
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_RUNTIME);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].from,
                   at_line(where, sizeof(where), t.etc_conf, 3));
  scratch_remove(&t);
}

/* OMPI_MCA_mca_base_param_files replaces the default list: ','-separated,
 * the leftmost file that sets a name wins, "none" reads nothing, ':' is
 * part of a name (as in Open MPI), "~/" is the home directory. */
Test(params_files, param_files_list_replaces_the_default_files)
{
  scratch_t t;
  char a[128], b[128], list[512], where[256];
  char *envp[] = { t.env_home, t.env_etc, list, NULL };
  params_t p;
  capture_t c;

  scratch_make(&t);
  snprintf(a, sizeof(a), "%s/a.conf", t.dir);
  snprintf(b, sizeof(b), "%s/b.conf", t.dir);
  file_put(a, "mpi_leave_pinned = 0\n");
  file_put(b, "mpi_leave_pinned = 1\nmpi_leave_pinned_pipeline = 1\n");
  file_put(t.home_conf, "mpi_leave_pinned_pipeline = 0\n");
  file_put(t.etc_conf, "mpi_leave_pinned_pipeline = 0\n");

  snprintf(list, sizeof(list), "OMPI_MCA_mca_base_param_files=%s,,%s", a, b);
  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_NO);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].from, at_line(where, sizeof(where), a, 1));
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_YES, "the home file was read");
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].from, at_line(where, sizeof(where), b, 2));

  snprintf(list, sizeof(list), "OMPI_MCA_mca_base_param_files=%s,%s", b, a);
  eval_captured(envp, &p, &c);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES);

  snprintf(list, sizeof(list), "OMPI_MCA_mca_base_param_files=%s:%s", b, a);
  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].source, PARAM_SOURCE_DEFAULT);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].source, PARAM_SOURCE_DEFAULT);

  snprintf(list, sizeof(list), "OMPI_MCA_mca_base_param_files=none");
  eval_captured(envp, &p, &c);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].source, PARAM_SOURCE_DEFAULT);

  snprintf(list, sizeof(list), "OMPI_MCA_mca_base_param_files=~/.openmpi/mca-params.conf");
  eval_captured(envp, &p, &c);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_NO);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].from,
                   at_line(where, sizeof(where), t.home_conf, 1));
  scratch_remove(&t);
}

Test(params_files, open_mpi_spellings_are_accepted_in_any_case)
{
  static const spelling_t tri[] = {
    { "t", PARAM_TRI_YES }, { "T", PARAM_TRI_YES }, { "y", PARAM_TRI_YES },
    { "Y", PARAM_TRI_YES }, { "enabled", PARAM_TRI_YES }, { " ENABLED ", PARAM_TRI_YES },
    { "f", PARAM_TRI_NO }, { "F", PARAM_TRI_NO }, { "n", PARAM_TRI_NO }, { "N", PARAM_TRI_NO },
    { "disabled", PARAM_TRI_NO }, { "Disabled", PARAM_TRI_NO },
    { "auto", PARAM_TRI_RUNTIME }, { "AUTO", PARAM_TRI_RUNTIME },
  };
  static const spelling_t bools[] = {
    { "t", 1 }, { "Y", 1 }, { "Enabled", 1 }, { "f", 0 }, { "n", 0 }, { "DISABLED", 0 },
  };
  param_id_t ids[] = { PARAM_LEAVE_PINNED, PARAM_LEAVE_PINNED_PIPELINE };

  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof(tri) / sizeof(tri[0]); i++)
      check_alone_ok(ids[k], tri[i].text, tri[i].value);
  for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
    check_alone_ok(PARAM_DISABLE, bools[i].text, bools[i].value);
  check_alone_ok(PARAM_MODE, "enabled", PARAM_MODE_ON);
  check_alone_bad(PARAM_DISABLE, "auto", "auto");     /* a bool has no "decide" */

  /* and in a file */
  scratch_t t;
  params_t p;
  capture_t c;

  scratch_make(&t);
  cr_assert_str_eq(eval_home_file(&t, "mpi_leave_pinned = Enabled\n"
                                  "mpi_leave_pinned_pipeline = auto\n", &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_RUNTIME);
  scratch_remove(&t);
}

/* A bad value in a file: one warning naming file:line, the name, the value
 * and what is accepted; counted as not set.  A line that is not
 * "name = value" is named once per file, and the rest is still read. */
Test(params_files, bad_value_and_bad_line_are_named_with_file_and_line)
{
  scratch_t t;
  char want[1024], where[256];
  params_t p;
  capture_t c;

  scratch_make(&t);
  snprintf(want, sizeof(want), "pinheap: warning: %s:3: mpi_leave_pinned=\"maybe\" is not a "
           "valid value (expected " WANT_EXPECT_TRISTATE "); ignored, treated as not set\n",
           t.home_conf);
  cr_assert_str_eq(eval_home_file(&t, "# tuning\nmpi_leave_pinned_pipeline = 1\n"
                                  "mpi_leave_pinned = maybe\n", &p, &c), want);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].source, PARAM_SOURCE_INVALID);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_NOT_FOUND);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].from, at_line(where, sizeof(where), t.home_conf, 3));
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_YES);

  const char *err = eval_home_file(&t, "mpi_leave_pinned 1\n= 0\nmpi_leave_pinned_pipeline = 0\n"
                                   "what is this\nmpi_leave_pinned = 1", &p, &c);
  cr_assert_eq(lines_count(err), 1, "'%s'", err);
  snprintf(want, sizeof(want), "pinheap: warning: %s:1: not a \"name = value\" line",
           t.home_conf);
  cr_assert(strstr(err, want) == err, "'%s'", err);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES, "the last line (no newline)");
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].from, at_line(where, sizeof(where), t.home_conf, 5));
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_NO);
  scratch_remove(&t);
}

/* Files that do not exist or cannot be read are skipped without a word;
 * an overlong line is named and skipped; a long value is cut and invalid. */
Test(params_files, missing_unreadable_and_overlong_are_skipped)
{
  scratch_t t;
  char list[512], good[128];
  char *envp[] = { t.env_home, t.env_etc, list, NULL };
  static char text[4096];
  params_t p;
  capture_t c;

  scratch_make(&t);
  snprintf(good, sizeof(good), "%s/good.conf", t.dir);
  file_put(good, "mpi_leave_pinned = 1\n");
  /* a directory, a missing file, a file in a missing directory, then one */
  snprintf(list, sizeof(list), "OMPI_MCA_mca_base_param_files=%s,%s/missing.conf,"
           "/nonexistent/dir/x.conf,%s", t.etc, t.dir, good);
  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES);

  /* the default files missing altogether (no .openmpi, no sysconfdir) */
  char *bare[] = { "HOME=/nonexistent", "OPAL_SYSCONFDIR=/nonexistent", NULL };
  cr_assert_str_eq(eval_captured(bare, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].source, PARAM_SOURCE_DEFAULT);

  /* a 2000-byte line, then a good one; a 300-byte value */
  memset(text, 'x', 2000);
  snprintf(text + 2000, sizeof(text) - 2000, "\nmpi_leave_pinned_pipeline = 0\n"
           "mpi_leave_pinned = %0300d\n", 1);
  const char *err = eval_home_file(&t, text, &p, &c);
  cr_assert_eq(lines_count(err), 2, "'%s'", err);
  cr_assert(strstr(err, ":1: not a \"name = value\" line") != NULL, "'%s'", err);
  cr_assert(strstr(err, ":3: mpi_leave_pinned=\"000") != NULL, "'%s'", err);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_NO);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].source, PARAM_SOURCE_INVALID);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].raw_truncated, 1);
  scratch_remove(&t);
}

/* The files are read in blocks: a line cut by a block's end, a line of
 * exactly the longest length, one byte longer, one longer than a block,
 * and a last line without '\n' each count as one line with its number. */
Test(params_files, lines_across_read_blocks_keep_their_numbers)
{
  scratch_t t;
  static char text[16384];
  char where[256];
  size_t n = 0;
  params_t p;
  capture_t c;

  scratch_make(&t);
  for (int i = 0; i < 40; i++) {      /* lines 1-40: 102 bytes each, 4080 in all */
    memset(text + n, '#', 101);
    n += 101;
    text[n++] = '\n';
  }
  n += (size_t)sprintf(text + n, "mpi_leave_pinned_pipeline = 1\n");   /* 41, across 4096 */
  memset(text + n, '#', 1024);        /* 42: 1024 bytes, the longest line taken */
  n += 1024;
  text[n++] = '\n';
  memset(text + n, '#', 1025);        /* 43: one byte too long */
  n += 1025;
  text[n++] = '\n';
  memset(text + n, 'x', 6000);        /* 44: longer than a block */
  n += 6000;
  text[n++] = '\n';
  sprintf(text + n, "memory_pinheap_log_level = error");   /* 45, no '\n' */
  const char *err = eval_home_file(&t, text, &p, &c);
  cr_assert_eq(lines_count(err), 1, "'%s'", err);
  cr_assert(strstr(err, ":43: not a \"name = value\" line") != NULL, "'%s'", err);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_YES);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].from,
                   at_line(where, sizeof(where), t.home_conf, 41));
  cr_assert_eq(p.v[PARAM_LOG_LEVEL].value, PH_LOG_ERROR);
  cr_assert_str_eq(p.v[PARAM_LOG_LEVEL].from, at_line(where, sizeof(where), t.home_conf, 45));
  scratch_remove(&t);
}

/* opal_leave_pinned and opal_leave_pinned_pipeline are Open MPI 4.1's
 * deprecated synonyms of mpi_leave_pinned(_pipeline): set anywhere, a
 * synonym wins, with one warning when the two differ; an invalid synonym
 * is warned and the parameter's own value stays. */
Test(params_files, opal_synonyms_are_honoured_as_open_mpi_does)
{
  scratch_t t;
  char *alone[] = { t.env_home, t.env_etc, "OMPI_MCA_opal_leave_pinned=1",
                    "OMPI_MCA_opal_leave_pinned_pipeline=0", NULL };
  char *both[] = { t.env_home, t.env_etc, "OMPI_MCA_opal_leave_pinned=0",
                   PINHEAP_ENV_LEAVE_PINNED "=1", NULL };
  char *env_name[] = { t.env_home, t.env_etc, PINHEAP_ENV_LEAVE_PINNED "=0", NULL };
  char *bad[] = { t.env_home, t.env_etc, "OMPI_MCA_opal_leave_pinned=maybe",
                  PINHEAP_ENV_LEAVE_PINNED "=1", NULL };
  char where[256];
  params_t p;
  capture_t c;
  const char *err;

  scratch_make(&t);
  cr_assert_str_eq(eval_captured(alone, &p, &c), "");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].from, "OMPI_MCA_opal_leave_pinned");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_NO);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED_PIPELINE].from, "OMPI_MCA_opal_leave_pinned_pipeline");

  cr_assert_str_eq(eval_captured(both, &p, &c),
                   "pinheap: warning: OMPI_MCA_opal_leave_pinned=\"0\" and "
                   PINHEAP_ENV_LEAVE_PINNED "=\"1\" are both set and differ: "
                   "OMPI_MCA_opal_leave_pinned wins (Open MPI's deprecated synonym of "
                   "mpi_leave_pinned, it overrides it)\n");
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_NO);

  /* in a file, it still wins over mpi_leave_pinned in the environment */
  file_put(t.home_conf, "opal_leave_pinned = 1\n");
  err = eval_captured(env_name, &p, &c);
  cr_assert_eq(lines_count(err), 1, "'%s'", err);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].source, PARAM_SOURCE_FILE);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].key, "opal_leave_pinned");
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].from, at_line(where, sizeof(where), t.home_conf, 1));

  err = eval_captured(bad, &p, &c);
  cr_assert_eq(lines_count(err), 1, "'%s'", err);
  cr_assert(strstr(err, "OMPI_MCA_opal_leave_pinned=\"maybe\" is not a valid value") != NULL,
            "'%s'", err);
  cr_assert_eq(p.v[PARAM_LEAVE_PINNED].value, PARAM_TRI_YES);
  cr_assert_str_eq(p.v[PARAM_LEAVE_PINNED].from, PINHEAP_ENV_LEAVE_PINNED);
  scratch_remove(&t);
}

/* The process table reads the files too: from HOME in environ. */
Test(params_files, process_table_reads_the_home_file)
{
  scratch_t t;
  char where[256];

  scratch_make(&t);
  file_put(t.home_conf, "mpi_leave_pinned_pipeline = y\n");
  setenv("HOME", t.home, 1);
  setenv("OPAL_SYSCONFDIR", t.etc, 1);
  unsetenv("OMPI_MCA_mca_base_param_files");
  unsetenv(PINHEAP_ENV_LEAVE_PINNED_PIPELINE);
  unsetenv("OMPI_MCA_opal_leave_pinned_pipeline");
  const params_t *p = params_get();
  cr_assert_eq(p->v[PARAM_LEAVE_PINNED_PIPELINE].value, PARAM_TRI_YES);
  cr_assert_str_eq(p->v[PARAM_LEAVE_PINNED_PIPELINE].from,
                   at_line(where, sizeof(where), t.home_conf, 1));
  scratch_remove(&t);
}

#else /* !PINHEAP_PARAM_FILES */

/* Another prefix keeps today's behaviour: no file is read, Open MPI's
 * spellings and synonyms mean nothing. */
Test(params_files, another_prefix_reads_no_file_and_no_open_mpi_spelling)
{
  scratch_t t;
  char list[256];
  char *envp[] = { t.env_home, t.env_etc, list, "OMPI_MCA_opal_leave_pinned=1", NULL };
  params_t p;
  capture_t c;

  scratch_make(&t);
  file_put(t.home_conf, "mpi_leave_pinned = 1\nmemory_pinheap_log_level = debug\n");
  file_put(t.etc_conf, "mpi_leave_pinned_pipeline = 1\n");
  snprintf(list, sizeof(list), "OMPI_MCA_mca_base_param_files=%s", t.home_conf);
  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  for (int id = 0; id < PARAM_COUNT; id++)
    cr_assert_eq(p.v[id].source, PARAM_SOURCE_DEFAULT, "param %d", id);
  check_alone_bad(PARAM_LEAVE_PINNED, "y", "y");
  check_alone_bad(PARAM_LEAVE_PINNED, "auto", "auto");
  check_alone_bad(PARAM_DISABLE, "enabled", "enabled");
  cr_assert_str_eq(param_desc_get(PARAM_DISABLE)->expected, "1, 0, true, false, yes or no");
  scratch_remove(&t);
}

#endif /* PINHEAP_PARAM_FILES */

/* ---- the one table: the process's rows, then the shared heap's --------- */

/* The name less the build's parameter prefix (param_mca_name): the name
 * parameter files and pinheap_param_info use. */
Test(params, mca_name_is_the_name_less_the_prefix)
{
  const char *lp = param_mca_name(param_desc_get(PARAM_LEAVE_PINNED));

  if (TEST_WANT_PREFIX[0] != '\0')
    cr_assert(lp != NULL && strcmp(lp, TEST_WANT_LP) == 0, "%s", lp ? lp : "NULL");
  else
    cr_assert_null(lp, "%s", lp);     /* no prefix: the variable is no MCA name */
  cr_assert_str_eq(param_mca_name(param_desc_get(PARAM_MODE)), "memory_pinheap_mode");
  cr_assert_str_eq(param_mca_name(param_desc_get(PARAM_LOG_LEVEL)), "memory_pinheap_log_level");
  cr_assert_null(param_mca_name(param_desc_get(PARAM_FAKEROOTKEY)));
  for (int id = 0; id < SHM_PARAM_COUNT; id++)
    cr_assert_null(param_mca_name(shm_param_desc_get((shm_param_id_t)id)));
}

/* pinheap_param_info lists every row of the process's, as the table has
 * it, under its MCA name, and no more. */
Test(params, param_info_lists_the_process_rows)
{
  pinheap_param_info_t pi;

  for (int id = 0; id < PARAM_COUNT; id++) {
    const param_desc_t *d = param_desc_get((param_id_t)id);
    cr_assert_eq(PINHEAP_NAME(param_info)(id, &pi), 0, "row %d", id);
    cr_assert_str_eq(pi.name, d->name);
    cr_assert_eq(pi.mca_name, param_mca_name(d), "%s", d->name);
    cr_assert_str_eq(pi.default_value, param_value_name((param_id_t)id, d->default_value));
    cr_assert_str_eq(pi.accepted, d->expected);
  }
  cr_assert_eq(PINHEAP_NAME(param_info)(PARAM_COUNT, &pi), ENOENT);
  cr_assert_eq(PINHEAP_NAME(param_info)(-1, &pi), EINVAL);
}

/* The shared heap's parameters are the rows after the process's: names of
 * their own, no alias, and params_eval neither reads them nor warns. */
Test(params, shared_heap_rows_follow_the_process_rows)
{
  static const char *const want[SHM_PARAM_COUNT] = {
    [SHM_PARAM_SIZE] = "PINHEAP_SHM_SIZE", [SHM_PARAM_SM_SIZE] = "SM_SIZE",
    [SHM_PARAM_RANKS] = "PINHEAP_SHM_RANKS", [SHM_PARAM_SM_RANKS] = "SM_RANKS",
    [SHM_PARAM_JOB] = "PINHEAP_SHM_JOB", [SHM_PARAM_FALLBACK] = "PINHEAP_SHM_FALLBACK",
    [SHM_PARAM_TIMEOUT] = "PINHEAP_SHM_TIMEOUT",
  };
  char *envp[] = { "PINHEAP_SHM_SIZE=bad", "SM_RANKS=0", "PINHEAP_SHM_JOB=a/b", NULL };
  params_t p;
  capture_t c;

  cr_assert_eq(shm_param_desc_get(SHM_PARAM_SIZE), param_desc_get(PARAM_COUNT - 1) + 1);
  for (int id = 0; id < SHM_PARAM_COUNT; id++) {
    const param_desc_t *d = shm_param_desc_get((shm_param_id_t)id);
    cr_assert_not_null(d);
    cr_assert_str_eq(d->name, want[id]);
    cr_assert_null(d->alias);
    for (int other = 0; other < PARAM_COUNT; other++)
      cr_assert_str_neq(d->name, param_desc_get((param_id_t)other)->name);
  }
  cr_assert_str_eq(eval_captured(envp, &p, &c), "");
  for (int id = 0; id < PARAM_COUNT; id++)
    cr_assert_eq(p.v[id].source, PARAM_SOURCE_DEFAULT, "param %d", id);
}

/* One value parser: a boolean of the shared heap's reads as the process's
 * do, and an unparsable one gets the same warning. */
Test(params, shared_heap_rows_share_the_parser)
{
  static const char *const texts[] = { "1", "0", " yes ", "FALSE", "no", "t", "enabled",
                                       "maybe", "" };

  for (size_t k = 0; k < sizeof(texts) / sizeof(texts[0]); k++) {
    char entry[64], shm_entry[64], want[512];
    char *envp[] = { entry, NULL };
    char *shm_envp[] = { shm_entry, NULL };
    params_t p;
    shm_params_t s;
    capture_t c;

    snprintf(entry, sizeof(entry), "PINHEAP_PATCH=%s", texts[k]);
    snprintf(shm_entry, sizeof(shm_entry), "PINHEAP_SHM_FALLBACK=%s", texts[k]);
    snprintf(want, sizeof(want), "%s", eval_captured(envp, &p, &c));
    capture_begin(&c);
    shm_params_eval(shm_envp, &s);
    const char *got = capture_end(&c);
    const param_value_t *pv = &p.v[PARAM_PATCH], *sv = &s.v[SHM_PARAM_FALLBACK];
    cr_assert_eq(sv->is_valid, pv->is_valid, "%s", shm_entry);
    if (pv->is_valid)
      cr_assert_eq(sv->value, pv->value, "%s", shm_entry);
    cr_assert_eq(strstr(want, "PINHEAP_PATCH=") != NULL,
                 strstr(got, "PINHEAP_SHM_FALLBACK=") != NULL, "%s: %s", shm_entry, got);
    if (!pv->is_valid)   /* the same words after the name */
      cr_assert_str_eq(strchr(got, '='), strchr(want, '='), "%s", shm_entry);
  }
}
