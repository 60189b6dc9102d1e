/*
 * fuzz_params.c -- libFuzzer harness for the environment parameters
 * (config/params.c) and the leave-pinned decision (hooks/decision.c).
 * Main entry point: LLVMFuzzerTestOneInput().
 *
 * The input is an environment: entries separated by '\n'.  An entry whose
 * first byte is below 0x40 names one of the known variables by index (its
 * value follows), so the mutator reaches every parameter at once; any other
 * entry is taken as raw "NAME=value" text.  A last entry after a 0x00 byte
 * is a probe root.  Each input then checks:
 *   params_eval()   against an independent reading of params.h's rules:
 *                   the first entry of a name wins, the PINHEAP_ name wins
 *                   over its MCA-style alias (which counts only when the
 *                   name is absent), `from` names the variable taken, raw
 *                   is its value cut to 255 bytes, truncation is flagged,
 *                   the value is exactly what the glossary says for that
 *                   spelling and anything else is INVALID with the default
 *                   value (never garbage accepted); exactly one warning
 *                   line on stderr per invalid value, naming the variable,
 *                   and one per parameter set under both names to
 *                   different values, naming both; printable, one line;
 *   decision_make() against the precedence of decision.h, on the inputs
 *                   built from those parameters and on raw fuzzed inputs:
 *                   enabled is 0 or 1, the reason is a known code whose name
 *                   is not "unknown", the text is non-empty and terminated,
 *                   decision_needs_probe() is 0 exactly when the answer does
 *                   not depend on probe_found;
 *   probe_run()     under the fuzzed root: never crashes, strings stay
 *                   terminated inside their buffers, found matches path.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

#include "pinheap_config.h"
#include "config/params.h"
#include "hooks/decide/decision.h"
#include "hooks/decide/probe.h"

#define MAX_ENTRIES 32
#define MAX_TEXT    1024

/* Names the mutator reaches by index (the first ten keep their indexes:
 * the seeds name them so), the MCA-style aliases, then near misses. */
#define ALIAS(suffix) PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_" suffix
static const char *const known_names[] = {
  PINHEAP_ENV_LEAVE_PINNED, PINHEAP_ENV_LEAVE_PINNED_PIPELINE, PINHEAP_ENV_DISABLE,
  PINHEAP_ENV_MODE, "FAKEROOTKEY", "FAKED_MODE", "SANDBOX_ON", PINHEAP_ENV_PROBE_ROOT,
  "PINHEAP_ARENA_MAX", "PINHEAP_LOG_LEVEL",
  /* 10 */ "PINHEAP_EVENTS", "PINHEAP_MALLOC_ALIGN", "PINHEAP_PATCH", "PINHEAP_CODE_PATCH",
  "PINHEAP_LATE_MALLOC",
  /* 15 */ ALIAS("mode"), ALIAS("probe_root"), ALIAS("arena_max"), ALIAS("patch"),
  ALIAS("late_malloc"), ALIAS("code_patch"), ALIAS("log_level"), ALIAS("events"),
  ALIAS("malloc_align"),
  /* 24 */ PINHEAP_ENV_LEAVE_PINNED "_", "PINHEAP_MOD", "pinheap_mode", "FAKEROOTKEY2", "",
  ALIAS("log_leve"), "memory_pinheap_events", ALIAS("EVENTS"),
};
#define KNOWN_COUNT (sizeof(known_names) / sizeof(known_names[0]))

static void fail(const char *what, const char *a, const char *b) __attribute__((noreturn));

static void fail(const char *what, const char *a, const char *b)
{
  fprintf(stderr, "fuzz_params: FAILED: %s [%s] [%s]\n", what, a ? a : "", b ? b : "");
  abort();
}

#define CHECK(cond, what, a, b) do { if (!(cond)) fail(what, a, b); } while (0)

/* ---- an independent reading of params.h's glossary ---------------------- */

static bool is_blank(char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The value with blanks trimmed and lowered into buf; false if too long. */
static bool word_of(const char *text, char *buf, size_t cap)
{
  size_t b = 0, e = strlen(text), n = 0;

  while (b < e && is_blank(text[b]))
    b++;
  while (e > b && is_blank(text[e - 1]))
    e--;
  if (e - b >= cap)
    return false;
  for (size_t i = b; i < e; i++) {
    char c = text[i];
    buf[n++] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
  }
  buf[n] = '\0';
  return true;
}

static bool word_in(const char *w, const char *const *list)
{
  for (; *list != NULL; list++)
    if (strcmp(w, *list) == 0)
      return true;
  return false;
}

/* Does entry name what the oracle leaves out: in an OMPI_MCA_ build, the
 * variables that choose the parameter files and Open MPI's synonyms of the
 * leave-pinned parameters (test_params covers them)?  Such entries are
 * dropped from the input's environment. */
static bool files_var(const char *entry)
{
  static const char *const vars[] = {
    "HOME=", "OMPI_MCA_mca_base_param_files=", "OPAL_SYSCONFDIR=",
    "OMPI_MCA_opal_leave_pinned=", "OMPI_MCA_opal_leave_pinned_pipeline=", NULL
  };

  if (!PINHEAP_PARAM_FILES)
    return false;
  for (const char *const *v = vars; *v != NULL; v++)
    if (strncmp(entry, *v, strlen(*v)) == 0)
      return true;
  return false;
}

/* The value params.h promises for text, or false if it must be invalid. */
static bool oracle_parse(param_kind_t kind, const char *text, int *value_p)
{
  /* an OMPI_MCA_ build takes Open MPI's spellings too (params.h) */
#if PINHEAP_PARAM_FILES
  static const char *const yes[] = { "1", "true", "yes", "t", "y", "enabled", NULL };
  static const char *const no[] = { "0", "false", "no", "f", "n", "disabled", NULL };
  const bool ompi_auto = true;
#else
  static const char *const yes[] = { "1", "true", "yes", NULL };
  static const char *const no[] = { "0", "false", "no", NULL };
  const bool ompi_auto = false;
#endif
  char w[32];

  switch (kind) {
  case PARAM_KIND_PRESENCE:
    *value_p = 1;
    return true;
  case PARAM_KIND_PATH:
    if (text[0] != '/' || strlen(text) > PARAM_RAW_MAX - 1)
      return false;
    *value_p = 1;
    return true;
  default:
    break;
  }
  if (!word_of(text, w, sizeof(w)))
    return false;
  switch (kind) {
  case PARAM_KIND_TRISTATE:
    if (word_in(w, yes)) { *value_p = PARAM_TRI_YES; return true; }
    if (word_in(w, no)) { *value_p = PARAM_TRI_NO; return true; }
    if (strcmp(w, "-1") == 0 || (ompi_auto && strcmp(w, "auto") == 0)) {
      *value_p = PARAM_TRI_RUNTIME;
      return true;
    }
    return false;
  case PARAM_KIND_BOOL:
    if (word_in(w, yes)) { *value_p = 1; return true; }
    if (word_in(w, no)) { *value_p = 0; return true; }
    return false;
  case PARAM_KIND_MODE:
    if (word_in(w, yes) || strcmp(w, "on") == 0) { *value_p = PARAM_MODE_ON; return true; }
    if (word_in(w, no) || strcmp(w, "off") == 0) { *value_p = PARAM_MODE_OFF; return true; }
    if (strcmp(w, "-1") == 0 || strcmp(w, "auto") == 0) { *value_p = PARAM_MODE_AUTO; return true; }
    return false;
  case PARAM_KIND_LEVEL: {
    /* fatal error warn info debug, or their numbers 0..4 */
    static const char *const names[] = { "fatal", "error", "warn", "info", "debug" };
    for (int i = 0; i < 5; i++) {
      char digit[2] = { (char)('0' + i), '\0' };
      if (strcmp(w, names[i]) == 0 || strcmp(w, digit) == 0) {
        *value_p = i;
        return true;
      }
    }
    if (strcmp(w, "warning") == 0) {
      *value_p = 2;
      return true;
    }
    return false;
  }
  case PARAM_KIND_COUNT: {
    long v = 0;
    size_t n = strlen(w);
    if (n == 0 || n > 3)
      return false;
    for (size_t i = 0; i < n; i++) {
      if (w[i] < '0' || w[i] > '9')
        return false;
      v = v * 10 + (w[i] - '0');
    }
    if (v < 1 || v > PARAM_COUNT_MAX)
      return false;
    *value_p = (int)v;
    return true;
  }
  case PARAM_KIND_ALIGN: {
    /* decimal, at most 19 digits (leading zeros too), a power of two
     * from 16 to 4096 */
    unsigned long long v = 0;
    size_t n = strlen(w);
    if (n == 0 || n > 19)
      return false;
    for (size_t i = 0; i < n; i++) {
      if (w[i] < '0' || w[i] > '9')
        return false;
      v = v * 10 + (unsigned long long)(w[i] - '0');
    }
    if (v < 16 || v > 4096 || (v & (v - 1)) != 0)
      return false;
    *value_p = (int)v;
    return true;
  }
  default:
    return false;
  }
}

/* ---- stderr capture (sanitizer reports keep the real stderr) ------------- */

static int real_stderr = -1;

static int capture_begin(int pipefd[2])
{
  if (pipe2(pipefd, O_NONBLOCK) != 0)
    return -1;
  fflush(stderr);
  dup2(pipefd[1], STDERR_FILENO);
  return 0;
}

static size_t capture_end(int pipefd[2], char *buf, size_t cap)
{
  size_t n = 0;
  ssize_t r;

  dup2(real_stderr, STDERR_FILENO);
  close(pipefd[1]);
  while (n < cap - 1 && (r = read(pipefd[0], buf + n, cap - 1 - n)) > 0)
    n += (size_t)r;
  close(pipefd[0]);
  buf[n] = '\0';
  return n;
}

/* ---- the checks --------------------------------------------------------- */

static const char *env_first(char *const *envp, const char *name)
{
  size_t len = strlen(name);

  for (; *envp != NULL; envp++)
    if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=')
      return *envp + len + 1;
  return NULL;
}

static void check_params(char *const *envp, const params_t *p, const char *warnings)
{
  size_t warned = 0, lines = 0;

  for (int id = 0; id < PARAM_COUNT; id++) {
    const param_desc_t *d = param_desc_get((param_id_t)id);
    const param_value_t *v = &p->v[id];
    CHECK(d != NULL, "no descriptor", NULL, NULL);
    const char *text = env_first(envp, d->name);
    const char *var = d->name;
    const char *alias_text = d->alias != NULL ? env_first(envp, d->alias) : NULL;
    int want = 0, alias_want = 0;

    if (text == NULL) {
      text = alias_text;
      var = d->alias;
      alias_text = NULL;
    }
    CHECK(memchr(v->raw, '\0', sizeof(v->raw)) != NULL, "raw is not terminated", d->name, NULL);
    CHECK(strcmp(param_source_name(v->source), "unknown") != 0, "unknown source", d->name, NULL);
    CHECK(param_value_name((param_id_t)id, v->value) != NULL, "value name NULL", d->name, NULL);
    if (text == NULL) {
      CHECK(v->source == PARAM_SOURCE_DEFAULT && v->value == d->default_value &&
            v->is_valid && v->raw[0] == '\0' && !v->raw_truncated && v->from == NULL &&
            !v->alias_ignored,
            "an unset variable is not at its default", d->name, v->raw);
      continue;
    }
    CHECK(v->from != NULL && strcmp(v->from, var) == 0,
          "from does not name the variable taken (the name before the alias)", d->name, var);
    CHECK(v->alias_ignored == (alias_text != NULL), "alias_ignored is wrong", d->name, text);
    size_t len = strlen(text);
    CHECK(v->raw_truncated == (len >= PARAM_RAW_MAX), "raw_truncated is wrong", d->name, text);
    CHECK(strncmp(v->raw, text, PARAM_RAW_MAX - 1) == 0 &&
          strlen(v->raw) == (len < PARAM_RAW_MAX ? len : PARAM_RAW_MAX - 1),
          "raw is not the value (first entry, cut to 255 bytes)", d->name, text);
    if (oracle_parse(d->kind, text, &want)) {
      CHECK(v->source == PARAM_SOURCE_ENV && v->is_valid && v->value == want,
            "a valid spelling was not parsed to the documented value", d->name, text);
      CHECK(strcmp(param_value_name((param_id_t)id, v->value), "unknown") != 0,
            "a parsed value has no name", d->name, text);
    } else {
      CHECK(v->source == PARAM_SOURCE_INVALID && !v->is_valid && v->value == d->default_value,
            "garbage was accepted (or an invalid value did not fall back to the default)",
            d->name, text);
      warned++;
      /* its warning names the variable */
      char head[PARAM_RAW_MAX + 64];
      snprintf(head, sizeof(head), "pinheap: warning: %s=\"", var);
      CHECK(strstr(warnings, head) != NULL, "no warning for an invalid value", var, text);
    }
    if (alias_text != NULL) {
      /* both names: the same text, or the same valid value, is no conflict */
      bool same = strcmp(text, alias_text) == 0 ||
                  (v->is_valid && oracle_parse(d->kind, alias_text, &alias_want) &&
                   alias_want == v->value);
      if (!same) {
        warned++;
        char both[256];
        snprintf(both, sizeof(both), "are both set and differ: %s wins, %s is ignored\n",
                 d->name, d->alias);
        CHECK(strstr(warnings, both) != NULL, "no warning naming both names", d->name,
              alias_text);
      }
    }
  }
  for (const char *s = warnings; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '\n')
      lines++;
    else
      CHECK(c >= 0x20 && c < 0x7f, "a warning holds an unprintable byte (not one line)",
            warnings, NULL);
  }
  CHECK(warnings[0] == '\0' || warnings[strlen(warnings) - 1] == '\n',
        "the warnings do not end with a newline", warnings, NULL);
  CHECK(lines == warned, "not exactly one warning line per invalid value", warnings, NULL);
}

/* decision.h's precedence, written again: 1 enabled, 0 disabled, -1 runtime. */
static int oracle_decide(const decision_input_t *in)
{
  if (in->mode == PARAM_MODE_OFF)
    return 0;
  if (in->is_disable_set || (in->blockers & (DECISION_BLOCK_FAKEROOTKEY |
                                             DECISION_BLOCK_FAKED_MODE |
                                             DECISION_BLOCK_SANDBOX_ON)))
    return 0;
  if (in->mode == PARAM_MODE_ON)
    return 1;
  if (in->is_preloaded && in->lp == PARAM_TRI_NOT_FOUND && in->lpp == PARAM_TRI_NOT_FOUND)
    return 1;
  if (in->lp == PARAM_TRI_YES || in->lpp == PARAM_TRI_YES)
    return 1;
  if (in->lp == PARAM_TRI_NO || in->lpp == PARAM_TRI_NO)
    return 0;
  return -1;
}

static void check_decision(const decision_input_t *in0)
{
  decision_input_t in = *in0;
  decision_t d0, d1;
  int want = oracle_decide(&in);
  bool documented = in.mode >= PARAM_MODE_AUTO && in.mode <= PARAM_MODE_OFF;

  in.probe_found = 0;
  decision_make(&in, &d0);
  in.probe_found = 1;
  decision_make(&in, &d1);
  for (int k = 0; k < 2; k++) {
    const decision_t *d = k ? &d1 : &d0;
    CHECK(d->enabled == 0 || d->enabled == 1, "enabled is not 0 or 1", d->text, NULL);
    CHECK((int)d->reason >= 0 && d->reason < DECISION_REASON_COUNT, "reason out of range",
          d->text, NULL);
    CHECK(strcmp(decision_reason_name(d->reason), "unknown") != 0, "reason has no name",
          d->text, NULL);
    CHECK(memchr(d->text, '\0', sizeof(d->text)) != NULL && d->text[0] != '\0',
          "the reason text is empty or not terminated", NULL, NULL);
  }
  /* The answer depends on the probe exactly when decision_needs_probe says so. */
  bool depends = d0.enabled != d1.enabled;
  if (documented) {
    CHECK(decision_needs_probe(&in) == (want == -1), "decision_needs_probe disagrees with the "
          "precedence of decision.h", d0.text, d1.text);
    if (want == -1)
      CHECK(d0.enabled == 0 && d1.enabled == 1, "runtime: enabled must follow the probe",
            d0.text, d1.text);
    else
      CHECK(d0.enabled == want && d1.enabled == want,
            "the decision contradicts the precedence of decision.h", d0.text, d1.text);
  }
  if (!decision_needs_probe(&in))
    CHECK(!depends, "decision_needs_probe said 0 but the answer follows the probe",
          d0.text, d1.text);
}

static void check_probe(const char *root)
{
  probe_result_t r;
  int found;

  memset(&r, 0x5a, sizeof(r));
  found = probe_run(root, PROBE_ALL, &r);
  CHECK(found == r.found && (found == 0 || found == 1), "probe_run's result", root, NULL);
  CHECK(memchr(r.root, '\0', sizeof(r.root)) != NULL, "probe root not terminated", root, NULL);
  CHECK(memchr(r.path, '\0', sizeof(r.path)) != NULL, "probe path not terminated", root, NULL);
  CHECK(r.nchecks <= PROBE_CHECK_MAX, "too many checks", root, NULL);
  CHECK((r.path[0] != '\0') == (found == 1), "found and path disagree", root, r.path);
  for (size_t i = 0; i < r.nchecks; i++) {
    CHECK(r.checks[i].path != NULL && r.checks[i].what != NULL, "check without a name", root,
          NULL);
    CHECK(memchr(r.checks[i].match, '\0', sizeof(r.checks[i].match)) != NULL,
          "match not terminated", root, r.checks[i].path);
  }
}

/* ---- the entry point ---------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  /* Sanitizer reports go to the real stderr, even while fd 2 is captured. */
  real_stderr = dup(STDERR_FILENO);
  if (real_stderr < 0) {
    perror("fuzz_params: dup(2)");
    exit(2);
  }
  __sanitizer_set_report_fd((void *)(intptr_t)real_stderr);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static char text[MAX_ENTRIES][MAX_TEXT];
  char *envp[MAX_ENTRIES + 1];
  char root[MAX_TEXT];
  char warnings[8192];
  size_t n = 0, i = 0;
  bool have_root = false;
  params_t p;
  int pipefd[2];
  decision_input_t in;

  root[0] = '\0';
  while (i < size && n < MAX_ENTRIES) {
    size_t j = i, len = 0;
    while (j < size && data[j] != '\n' && data[j] != '\0')
      j++;
    if (data[i] < 0x40 && j > i) {     /* a known name by index, then the value */
      const char *name = known_names[data[i] % KNOWN_COUNT];
      len = (size_t)snprintf(text[n], MAX_TEXT, "%s=", name);
      i++;
    }
    size_t vlen = j - i;
    if (len + vlen >= MAX_TEXT)
      vlen = MAX_TEXT - 1 - len;
    memcpy(text[n] + len, data + i, vlen);
    text[n][len + vlen] = '\0';
    envp[n] = text[n];
    if (!files_var(text[n]))
      n++;
    if (j < size && data[j] == '\0') {  /* the rest is the probe root */
      size_t rlen = size - j - 1;
      if (rlen >= sizeof(root))
        rlen = sizeof(root) - 1;
      memcpy(root, data + j + 1, rlen);
      root[rlen] = '\0';
      root[strnlen(root, rlen)] = '\0';
      have_root = true;
      break;
    }
    i = j + 1;
  }
  envp[n] = NULL;

  if (capture_begin(pipefd) != 0) {
    perror("fuzz_params: pipe2");
    abort();
  }
  params_eval(envp, &p);
  capture_end(pipefd, warnings, sizeof(warnings));
  check_params(envp, &p, warnings);

  /* Decisions from the parsed parameters, preloaded or not. */
  for (int pre = 0; pre < 2; pre++) {
    decision_inputs_from_params(&p, pre, &in);
    CHECK(in.probe_found == 0 && in.probe_path == NULL, "inputs_from_params left probe fields",
          NULL, NULL);
    check_decision(&in);
  }
  /* Decisions from raw inputs: every int field straight from the input. */
  if (size >= 24) {
    int32_t raw[6];
    memcpy(raw, data, sizeof(raw));
    in.lp = (int)((unsigned)raw[0] % 4) - 2;
    in.lpp = (int)((unsigned)raw[1] % 4) - 2;
    in.is_disable_set = raw[2] & 1;
    in.blockers = raw[3] & (DECISION_BLOCK_FAKEROOTKEY | DECISION_BLOCK_FAKED_MODE |
                            DECISION_BLOCK_SANDBOX_ON);   /* the documented bits */
    in.mode = (int)((unsigned)raw[4] % 3);
    in.is_preloaded = raw[5] & 1;
    in.probe_path = have_root ? root : NULL;   /* may be long: the text is cut */
    check_decision(&in);
  }
  if (have_root)
    check_probe(root);
  return 0;
}
