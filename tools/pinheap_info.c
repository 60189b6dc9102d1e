/*
 * pinheap_info.c -- pinheap-info: explains what pinheap would do here.
 *
 * Prints the build settings (prefixes, version, parameter names), the
 * configuration (every parameter of config/params.c's table: name, MCA
 * alias, value, source, default, accepted values), every input of the
 * leave-pinned decision with its value and source, the driver probe (every
 * path checked), the decision and why, the support level, the
 * shared-memory heap (its parameters, where each setting came from, and
 * this process's place in it) and mallinfo2 -- as text, or as JSON with
 * --json.  Main entry point: main().
 * Runs in main(), so stdio is fine here (unlike config/ and hooks/).
 *
 * Usage: pinheap-info [--json] [--probe-root DIR] [--preloaded] [--version] [--help]
 * Exit status (INFO_EXIT_*): 0 nothing wrong; 1 leave-pinned is asked for
 * (mpi_leave_pinned or mpi_leave_pinned_pipeline is 1) but the support
 * level lacks FREE or MUNMAP, so a registration cache may go stale; 2 a
 * usage error; 3 the output could not be written.  tools/README.md has the
 * text's sections and the JSON schema.
 */
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinheap.h"

/* Defined before rename.h is included: it renames the token mallinfo2,
 * which is also glibc's struct tag. */
typedef struct mallinfo2 info_mallinfo_t;

static info_mallinfo_t info_mallinfo(void)
{
  return PINHEAP_NAME(mallinfo2)();
}

#include "allocator/api/api.h"

#include "hooks/decide/decision.h"
#include "config/params.h"
#include "hooks/decide/probe.h"

extern char **environ;

enum { INFO_EXIT_OK = 0, INFO_EXIT_UNSAFE = 1, INFO_EXIT_USAGE = 2, INFO_EXIT_OUTPUT = 3 };

typedef struct info_opts_s {
  int is_json;
  int is_preloaded;
  const char *probe_root;   /* NULL: the parameter, else "/" */
} info_opts_t;

typedef struct info_s {
  const params_t *params;
  probe_result_t probe;
  decision_input_t input;
  decision_t decision;
  info_mallinfo_t mi;
  /* this process, after the self-test */
  const char *process_decision;
  int process_enabled;
  int level;
  char level_names[32];
  const char *support_text;
  int unsafe;               /* leave-pinned asked for, FREE or MUNMAP missing */
  char verdict[512];
  /* the shared-memory heap */
  shm_params_t shm_params;
  shm_conf_t shm;
  char shm_object[128];
} info_t;

static void level_names_make(int level, char *buf, size_t len)
{
  snprintf(buf, len, "%s%s%s%s", (level & PINHEAP_SUPPORT_FREE) ? "FREE|" : "",
           (level & PINHEAP_SUPPORT_CHUNK) ? "CHUNK|" : "",
           (level & PINHEAP_SUPPORT_MUNMAP) ? "MUNMAP|" : "", level == 0 ? "none|" : "");
  buf[strlen(buf) - 1] = '\0';
}

static void usage_print(FILE *f)
{
  fputs("usage: pinheap-info [--json] [--probe-root DIR] [--preloaded] [--version] [--help]\n"
        "\n"
        "Shows what pinheap decides in this process and why: a one-line verdict,\n"
        "every parameter with its value and source, the driver probe, the decision,\n"
        "the support level, how each memory call is intercepted, the registration\n"
        "caches fed, the shared-memory heap and the allocator's statistics.\n"
        "\n"
        "  --json            print one JSON object instead of text\n"
        "  --probe-root DIR  run the driver probe under DIR instead of /\n"
        "                    (default: $" PINHEAP_ENV_PROBE_ROOT " if set, else /)\n"
        "  --preloaded       decide as the preload shim would (enabled by default)\n"
        "  --version         print the version and the build's prefixes and exit\n"
        "  --help            show this help and exit\n"
        "\n"
        "The first line is the verdict: whether pinheap serves malloc, the releases\n"
        "it reports (FREE, CHUNK, MUNMAP) and why.  Exit status: 0 nothing wrong;\n"
        "1 leave-pinned is asked for but pinheap cannot see every release (FREE or\n"
        "MUNMAP missing); 2 a usage error; 3 the output could not be written.\n", f);
}

static int probe_root_check(const char *dir)
{
  if (dir[0] == '/')
    return 0;
  fprintf(stderr, "pinheap-info: --probe-root '%s' is not an absolute path (expected a "
          "directory starting with '/')\n", dir);
  usage_print(stderr);
  return 2;
}

/* @return 0 to go on, 1 to exit 0 (help, version), 2 for a usage error. */
static int opts_parse(int argc, char **argv, info_opts_t *opts_p)
{
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];

    if (strcmp(a, "--json") == 0) {
      opts_p->is_json = 1;
    } else if (strcmp(a, "--preloaded") == 0) {
      opts_p->is_preloaded = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage_print(stdout);
      return 1;
    } else if (strcmp(a, "--version") == 0) {
      printf("pinheap-info %s (symbol prefix %s, parameter prefix %s)\n", PINHEAP_VERSION_STRING,
             PINHEAP_PREFIX_STRING, PINHEAP_PARAM_PREFIX_STRING);
      return 1;
    } else if (strcmp(a, "--probe-root") == 0) {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') {
        fprintf(stderr, "pinheap-info: option '--probe-root' needs a directory\n");
        usage_print(stderr);
        return 2;
      }
      opts_p->probe_root = argv[++i];
      if (probe_root_check(opts_p->probe_root) != 0)
        return 2;
    } else if (strncmp(a, "--probe-root=", 13) == 0 && a[13] != '\0') {
      opts_p->probe_root = a + 13;
      if (probe_root_check(opts_p->probe_root) != 0)
        return 2;
    } else {
      fprintf(stderr, "pinheap-info: unknown option '%s'\n", a);
      usage_print(stderr);
      return 2;
    }
  }
  return 0;
}

static void info_gather(const info_opts_t *opts, info_t *info_p)
{
  const char *root = opts->probe_root;

  info_p->params = params_get();
  if (root == NULL && info_p->params->v[PARAM_PROBE_ROOT].value)
    root = info_p->params->v[PARAM_PROBE_ROOT].raw;
  /* The tool runs every check so that all of them can be shown; the
   * decision only uses the found flag, as at start-up. */
  probe_run(root, PROBE_ALL, &info_p->probe);
  decision_inputs_from_params(info_p->params, opts->is_preloaded, &info_p->input);
  info_p->input.probe_found = info_p->probe.found;
  info_p->input.probe_path = info_p->probe.path;
  decision_make(&info_p->input, &info_p->decision);

  /* What this very process decided at start-up, and the self-test. */
  PINHEAP_NAME(open)();
  info_p->process_decision = PINHEAP_NAME(decision_text)();
  info_p->process_enabled = PINHEAP_NAME(enabled)();
  info_p->level = PINHEAP_NAME(support_level)();
  level_names_make(info_p->level, info_p->level_names, sizeof(info_p->level_names));
  info_p->support_text = PINHEAP_NAME(support_text)();
  /* its warning (stderr) says why, once */
  info_p->unsafe = PINHEAP_NAME(check_leave_pinned)() != 0;
  const char *why = strstr(info_p->process_decision, ": ");   /* after "enabled: " */
  snprintf(info_p->verdict, sizeof(info_p->verdict), "%s; events %s; why: %s%s",
           info_p->process_enabled ? "pinheap serves malloc"
                                   : "pinheap does not serve malloc (glibc's does)",
           info_p->level_names, why != NULL ? why + 2 : info_p->process_decision,
           info_p->unsafe ? "; leave-pinned is asked for but not every release is seen" : "");
  info_p->mi = info_mallinfo();               /* starts the shared heap if set */

  /* The shared heap's parameters: their warnings were said at start-up. */
  fflush(stderr);
  int saved = dup(2), null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved >= 0 && null_fd >= 0)
    dup2(null_fd, 2);
  shm_params_eval(environ, &info_p->shm_params);
  shm_conf_eval(environ, &info_p->shm);
  if (saved >= 0 && null_fd >= 0)
    dup2(saved, 2);
  if (saved >= 0)
    close(saved);
  if (null_fd >= 0)
    close(null_fd);
  snprintf(info_p->shm_object, sizeof(info_p->shm_object), "/pinheap-%u-%s", (unsigned)geteuid(),
           info_p->shm.job);
}

/* How a shared-heap parameter was set, in words (raw value or default). */
static void shm_param_text(const info_t *info, shm_param_id_t id, char *buf, size_t len)
{
  const param_desc_t *desc = shm_param_desc_get(id);
  const param_value_t *pv = &info->shm_params.v[id];

  switch (pv->source) {
  case PARAM_SOURCE_DEFAULT:
    if (desc->default_value != 0)
      snprintf(buf, len, "%d (default)", desc->default_value);
    else
      snprintf(buf, len, "not set");
    break;
  case PARAM_SOURCE_ENV:
  case PARAM_SOURCE_FILE:
    snprintf(buf, len, "\"%s\"%s", pv->raw, pv->raw_truncated ? "..." : "");
    break;
  case PARAM_SOURCE_INVALID:
    snprintf(buf, len, "\"%s%s\" is invalid, expected %s; ignored", pv->raw,
             pv->raw_truncated ? "..." : "", desc->expected);
    break;
  }
}

/* ---- text --------------------------------------------------------------- */

/* Prints a raw environment value on one line: unprintable bytes as '?'. */
static void text_raw_print(const param_value_t *pv)
{
  for (const char *s = pv->raw; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    putchar(c >= 0x20 && c < 0x7f ? c : '?');
  }
  if (pv->raw_truncated)
    fputs("...", stdout);
}

/* Where a value was set: VAR="raw", or from a parameter file
 * path:line: name="raw". */
static void text_source_print(const param_value_t *pv)
{
  if (param_file_where(pv) != NULL)
    printf("%s: ", param_file_where(pv));
  printf("%s=\"", pv->key);
  text_raw_print(pv);
  putchar('"');
}

static const char *install_method_name(int method)
{
  switch (method) {
  case PINHEAP_INSTALL_INTERPOSE: return "interpose";
  case PINHEAP_INSTALL_RELOC: return "reloc";
  case PINHEAP_INSTALL_CODE: return "code";
  default: return "none";
  }
}

static const char *install_code_name(int code)
{
  switch (code) {
  case PINHEAP_CODE_PATCHED: return "patched";
  case PINHEAP_CODE_FOREIGN: return "foreign";
  case PINHEAP_CODE_FAILED: return "failed";
  default: return "none";
  }
}

/* A parsed value in words; a count as its number (the word is "set"). */
static const char *config_value_text(param_id_t id, int value, char *buf, size_t len)
{
  if (param_desc_get(id)->kind == PARAM_KIND_COUNT && value != 0) {
    snprintf(buf, len, "%d", value);
    return buf;
  }
  return param_value_name(id, value);
}

/* A value as the text shows it: a tristate's "not found" (Open MPI's word
 * for a parameter nobody set, which the JSON keeps) reads "unset". */
static const char *text_word(const char *w)
{
  return strcmp(w, "not found") == 0 ? "unset" : w;
}

/* The configuration: each parameter on two lines, its name, value,
 * default and source, then its MCA alias and what it accepts. */
static void text_config_print(const params_t *params)
{
  printf("\nconfiguration (a PINHEAP_ name wins over its MCA alias when both are set):\n");
  printf("  %-36s %-10s %-10s %s\n", "parameter", "value", "default", "source");
  for (int id = 0; id < PARAM_COUNT; id++) {
    const param_desc_t *desc = param_desc_get((param_id_t)id);
    const param_value_t *pv = &params->v[id];

    char num[16];
    printf("  %-36s %-10s %-10s ", desc->name,
           text_word(config_value_text((param_id_t)id, pv->value, num, sizeof(num))),
           text_word(param_value_name((param_id_t)id, desc->default_value)));
    if (pv->source == PARAM_SOURCE_DEFAULT) {
      printf("default\n");
    } else {
      printf("%s", pv->source == PARAM_SOURCE_INVALID ? "invalid: " : "");
      text_source_print(pv);
      printf("%s%s\n", pv->source == PARAM_SOURCE_INVALID ? " (ignored)" : "",
             pv->alias_ignored ? " (its alias is set too: ignored)" : "");
    }
    printf("    alias %s; accepts %s\n", desc->alias != NULL ? desc->alias : "none",
           desc->expected);
  }
}

static void text_print(const info_opts_t *opts, const info_t *info)
{
  const probe_result_t *pr = &info->probe;

  printf("%s\n", info->verdict);
  printf("pinheap %s, symbol prefix %s, parameter prefix %s\n", PINHEAP_VERSION_STRING,
         PINHEAP_PREFIX_STRING, PINHEAP_PARAM_PREFIX_STRING);

  text_config_print(info->params);

  printf("\ndriver probe (root %s):\n", pr->root);
  for (size_t i = 0; i < pr->nchecks; i++) {
    const probe_check_t *c = &pr->checks[i];
    printf("  %-28s %-10s %s%s%s%s\n", c->path,
           c->found ? "found" : "not found", c->what,
           c->match[0] != '\0' ? " [" : "", c->match, c->match[0] != '\0' ? "]" : "");
  }
  printf("  => %s%s\n", pr->found ? "OS-bypass device found: " : "no OS-bypass device found",
         pr->found ? pr->path : "");

  printf("\ndecision: %s\n", info->decision.enabled ? "enabled" : "disabled");
  printf("  reason: %s\n", info->decision.text);
  printf("  preloaded: %s\n", opts->is_preloaded ? "yes (--preloaded)" : "no");

  printf("\nthis process: %s (pinheap %s malloc)\n", info->process_decision,
         info->process_enabled ? "serves" : "does not serve");
  printf("support level: %s (%d) after the self-test\n", info->level_names, info->level);
  printf("  %s\n", info->support_text);
  printf("  watches: %zu live (validity tokens, hooks/watch/)\n", PINHEAP_NAME(watch_count)());
  if (params_get()->v[PARAM_AUDIT].value)
    printf("  audit (PINHEAP_AUDIT): %zu unannounced releases seen, %zu watches unaudited\n",
           PINHEAP_NAME(watch_unannounced)(), PINHEAP_NAME(watch_unaudited)());

  const char *consumers = PINHEAP_NAME(consumers_text)();
  printf("\nconsumers: %s\n", consumers[0] != '\0' ? consumers
         : "none in this process (no UCX libucm, no Open MPI libopen-pal, no other patcher of "
           "libc's memory calls): pinheap's own listeners are the only ones");

  printf("\ninstallation: %s\n", PINHEAP_NAME(install_text)());
  printf("  %-20s %-10s %-9s %-24s %s\n", "symbol", "method", "verified", "patched slots (objects)",
         "libc's code");
  pinheap_install_info_t ii;
  for (unsigned i = 0; PINHEAP_NAME(install_info)(i, &ii) == 0; i++) {
    char slots[48] = "-";
    if (ii.method == PINHEAP_INSTALL_RELOC)
      snprintf(slots, sizeof(slots), "%u (%u)", ii.slots, ii.objects);
    printf("  %-20s %-10s %-9s %-24s %s\n", ii.symbol, install_method_name(ii.method),
           ii.method == PINHEAP_INSTALL_NONE ? "-" : ii.verified ? "yes" : "no", slots,
           ii.event == 0 ? "-"
           : ii.event & PINHEAP_EVENT_CALLS ? install_code_name(ii.code)
           : strcmp(ii.symbol, "syscall") == 0 ? "not patched (memory numbers: their calls' events)"
                                               : "not patched (no call event: VM_UNMAPPED only)");
    if (ii.code_text != NULL && ii.code_text[0] != '\0' &&
        (ii.code == PINHEAP_CODE_FOREIGN || ii.code == PINHEAP_CODE_FAILED))
      printf("    %s\n", ii.code_text);
  }

  const shm_conf_t *sc = &info->shm;
  printf("\nshared-memory heap: %s\n", sc->on ? "on" : "off (no PINHEAP_SHM_SIZE or SM_SIZE)");
  if (sc->on)
    printf("  malloc: %s\n",
           info->process_enabled
               ? "pinheap's: every block of the process is in the region"
               : "NOT pinheap's in this process (the decision left it to glibc): only "
                 PINHEAP_PREFIX_STRING "malloc and its kin allocate in the region");
  for (int id = 0; id < SHM_PARAM_COUNT; id++) {
    char how[160];
    shm_param_text(info, (shm_param_id_t)id, how, sizeof(how));
    printf("  %-28s ", shm_param_desc_get((shm_param_id_t)id)->name);
    for (const char *c = how; *c != '\0'; c++)
      putchar((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f ? *c : '?');
    putchar('\n');
  }
  printf("  => size %zu (%s), participants ", sc->size, sc->size_from);
  if (sc->ranks != 0)
    printf("%u (%s)", sc->ranks, sc->ranks_from);
  else
    printf("not known (up to %d)", PARAM_RANKS_MAX);
  printf(", job %s (%s)\n", sc->job, sc->job_from);
  printf("  object %s, fallback %s, start-up timeout %u ms\n", info->shm_object,
         sc->fallback ? "on" : "off", sc->timeout_ms);
  if (shm_index() >= 0)
    printf("  this process: index %d, region %p (%zu bytes)\n", shm_index(),
           shm_base(), shm_size());
  else
    printf("  this process: not on the shared heap\n");

  printf("\nmallinfo2 (pinheap's heap in this process):\n");
  printf("  arena     %zu\n", info->mi.arena);
  printf("  ordblks   %zu\n", info->mi.ordblks);
  printf("  hblks     %zu\n", info->mi.hblks);
  printf("  hblkhd    %zu\n", info->mi.hblkhd);
  printf("  uordblks  %zu\n", info->mi.uordblks);
  printf("  fordblks  %zu\n", info->mi.fordblks);
  printf("  keepcost  %zu\n", info->mi.keepcost);
}

/* ---- JSON --------------------------------------------------------------- */

static void json_string(const char *s)
{
  putchar('"');
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c == '\n')
      fputs("\\n", stdout);
    else if (c == '\t')
      fputs("\\t", stdout);
    else if (c < 0x20 || c >= 0x7f)
      printf("\\u%04x", c);   /* bytes >= 0x80 shown as Latin-1: still valid JSON */
    else
      putchar(c);
  }
  putchar('"');
}

static void json_field(const char *indent, const char *key, const char *value, int is_last)
{
  printf("%s", indent);
  json_string(key);
  fputs(": ", stdout);
  json_string(value);
  puts(is_last ? "" : ",");
}

/* A string, or null. */
static void json_string_or_null(const char *s)
{
  if (s == NULL)
    fputs("null", stdout);
  else
    json_string(s);
}

static void json_param_print(const params_t *params, param_id_t id, int is_last)
{
  const param_desc_t *desc = param_desc_get(id);
  const param_value_t *pv = &params->v[id];

  printf("    ");
  json_string(desc->short_name);
  puts(": {");
  json_field("      ", "variable", desc->name, 0);
  json_field("      ", "value", param_value_name(id, pv->value), 0);
  json_field("      ", "default", param_value_name(id, desc->default_value), 0);
  json_field("      ", "source", pv->source == PARAM_SOURCE_DEFAULT ? "not set" : pv->from, 0);
  printf("      \"name\": ");               /* the variable, or the name in the file */
  json_string_or_null(pv->key);
  puts(",");
  printf("      \"valid\": %s,\n", pv->is_valid ? "true" : "false");
  printf("      \"raw\": ");
  if (pv->source == PARAM_SOURCE_DEFAULT)
    fputs("null", stdout);
  else
    json_string(pv->raw);
  printf(",\n      \"raw_truncated\": %s\n", pv->raw_truncated ? "true" : "false");
  printf("    }%s\n", is_last ? "" : ",");
}

/* "configuration": every parameter by name: alias, value, default, source
 * ("default", the variable that set it, or "invalid"), the variable whose
 * text was read, raw, accepted values. */
static void json_config_print(const params_t *params)
{
  puts("  \"configuration\": {");
  for (int id = 0; id < PARAM_COUNT; id++) {
    const param_desc_t *desc = param_desc_get((param_id_t)id);
    const param_value_t *pv = &params->v[id];

    printf("    ");
    json_string(desc->name);
    printf(": {\"alias\": ");
    json_string_or_null(desc->alias);
    char num[16];
    printf(", \"value\": ");
    json_string(config_value_text((param_id_t)id, pv->value, num, sizeof(num)));
    printf(", \"default\": ");
    json_string(param_value_name((param_id_t)id, desc->default_value));
    printf(", \"source\": ");
    json_string(pv->source == PARAM_SOURCE_DEFAULT ? "default"
                : pv->source == PARAM_SOURCE_INVALID ? "invalid" : pv->from);
    printf(", \"variable\": ");
    json_string_or_null(pv->key);
    printf(", \"file\": ");
    json_string_or_null(param_file_where(pv));
    printf(", \"raw\": ");
    json_string_or_null(pv->source == PARAM_SOURCE_DEFAULT ? NULL : pv->raw);
    printf(", \"alias_ignored\": %s, \"accepted\": ", pv->alias_ignored ? "true" : "false");
    json_string(desc->expected);
    printf("}%s\n", id + 1 < PARAM_COUNT ? "," : "");
  }
  puts("  },");
}

static void json_print(const info_opts_t *opts, const info_t *info)
{
  const probe_result_t *pr = &info->probe;

  puts("{");
  json_field("  ", "verdict", info->verdict, 0);
  printf("  \"exit_status\": %d,\n", info->unsafe ? INFO_EXIT_UNSAFE : INFO_EXIT_OK);
  json_field("  ", "version", PINHEAP_VERSION_STRING, 0);
  puts("  \"build\": {");
  json_field("    ", "symbol_prefix", PINHEAP_PREFIX_STRING, 0);
  json_field("    ", "param_prefix", PINHEAP_PARAM_PREFIX_STRING, 0);
  json_field("    ", "leave_pinned_var", PINHEAP_ENV_LEAVE_PINNED, 0);
  json_field("    ", "leave_pinned_pipeline_var", PINHEAP_ENV_LEAVE_PINNED_PIPELINE, 0);
  json_field("    ", "disable_var", PINHEAP_ENV_DISABLE, 0);
  json_field("    ", "mode_var", PINHEAP_ENV_MODE, 0);
  json_field("    ", "probe_root_var", PINHEAP_ENV_PROBE_ROOT, 1);
  puts("  },");
  json_config_print(info->params);

  puts("  \"inputs\": {");
  for (int id = 0; id < PARAM_COUNT; id++)
    json_param_print(info->params, (param_id_t)id, 0);
  printf("    \"preloaded\": %s\n", opts->is_preloaded ? "true" : "false");
  puts("  },");

  puts("  \"probe\": {");
  json_field("    ", "root", pr->root, 0);
  printf("    \"found\": %s,\n", pr->found ? "true" : "false");
  printf("    \"path\": ");
  if (pr->found)
    json_string(pr->path);
  else
    fputs("null", stdout);
  puts(",\n    \"checks\": [");
  for (size_t i = 0; i < pr->nchecks; i++) {
    const probe_check_t *c = &pr->checks[i];
    printf("      {\"path\": ");
    json_string(c->path);
    printf(", \"what\": ");
    json_string(c->what);
    printf(", \"found\": %s, \"match\": ", c->found ? "true" : "false");
    if (c->match[0] != '\0')
      json_string(c->match);
    else
      fputs("null", stdout);
    printf("}%s\n", i + 1 < pr->nchecks ? "," : "");
  }
  puts("    ]");
  puts("  },");

  puts("  \"decision\": {");
  printf("    \"enabled\": %s,\n", info->decision.enabled ? "true" : "false");
  json_field("    ", "reason", decision_reason_name(info->decision.reason), 0);
  json_field("    ", "text", info->decision.text, 1);
  puts("  },");

  puts("  \"process\": {");
  json_field("    ", "decision", info->process_decision, 0);
  printf("    \"enabled\": %s\n", info->process_enabled ? "true" : "false");
  puts("  },");
  puts("  \"support_level\": {");
  puts("    \"measured\": true,");
  printf("    \"value\": %d,\n", info->level);
  json_field("    ", "flags", info->level_names, 0);
  json_field("    ", "text", info->support_text, 1);
  puts("  },");
  if (params_get()->v[PARAM_AUDIT].value)
    printf("  \"watches\": {\"live\": %zu, \"audit\": true, \"unannounced\": %zu, "
           "\"unaudited\": %zu},\n", PINHEAP_NAME(watch_count)(), PINHEAP_NAME(watch_unannounced)(),
           PINHEAP_NAME(watch_unaudited)());
  else
    printf("  \"watches\": {\"live\": %zu},\n", PINHEAP_NAME(watch_count)());
  json_field("  ", "consumers", PINHEAP_NAME(consumers_text)(), 0);
  puts("  \"installation\": {");
  json_field("    ", "text", PINHEAP_NAME(install_text)(), 0);
  puts("    \"symbols\": [");
  pinheap_install_info_t ii;
  for (unsigned i = 0; PINHEAP_NAME(install_info)(i, &ii) == 0; i++) {
    pinheap_install_info_t next;
    printf("      {\"symbol\": \"%s\", \"event\": %d, \"method\": \"%s\", \"verified\": %s, "
           "\"slots\": %u, \"objects\": %u, \"code\": \"%s\", \"code_text\": ", ii.symbol,
           ii.event, install_method_name(ii.method), ii.verified ? "true" : "false", ii.slots,
           ii.objects, install_code_name(ii.code));
    json_string(ii.code_text != NULL ? ii.code_text : "");
    printf("}%s\n", PINHEAP_NAME(install_info)(i + 1, &next) == 0 ? "," : "");
  }
  puts("    ]");
  puts("  },");

  const shm_conf_t *sc = &info->shm;
  puts("  \"shm\": {");
  printf("    \"on\": %s,\n", sc->on ? "true" : "false");
  printf("    \"serves_malloc\": %s,\n", sc->on && info->process_enabled ? "true" : "false");
  printf("    \"size\": %zu,\n", sc->size);
  json_field("    ", "size_from", sc->size_from, 0);
  printf("    \"ranks\": %u,\n", sc->ranks);
  json_field("    ", "ranks_from", sc->ranks_from, 0);
  json_field("    ", "job", sc->job, 0);
  json_field("    ", "job_from", sc->job_from, 0);
  json_field("    ", "object", info->shm_object, 0);
  printf("    \"fallback\": %s,\n", sc->fallback ? "true" : "false");
  printf("    \"timeout_ms\": %u,\n", sc->timeout_ms);
  printf("    \"index\": %d,\n", shm_index());
  printf("    \"base\": %lu,\n", (unsigned long)(uintptr_t)shm_base());
  puts("    \"params\": {");
  for (int id = 0; id < SHM_PARAM_COUNT; id++) {
    char how[160];
    shm_param_text(info, (shm_param_id_t)id, how, sizeof(how));
    printf("      ");
    json_string(shm_param_desc_get((shm_param_id_t)id)->name);
    printf(": ");
    json_string(how);
    puts(id + 1 < SHM_PARAM_COUNT ? "," : "");
  }
  puts("    }");
  puts("  },");
  puts("  \"mallinfo2\": {");
  printf("    \"arena\": %zu,\n", info->mi.arena);
  printf("    \"ordblks\": %zu,\n", info->mi.ordblks);
  printf("    \"hblks\": %zu,\n", info->mi.hblks);
  printf("    \"hblkhd\": %zu,\n", info->mi.hblkhd);
  printf("    \"uordblks\": %zu,\n", info->mi.uordblks);
  printf("    \"fordblks\": %zu,\n", info->mi.fordblks);
  printf("    \"keepcost\": %zu\n", info->mi.keepcost);
  puts("  }");
  puts("}");
}

int main(int argc, char **argv)
{
  info_opts_t opts = { 0, 0, NULL };
  info_t info;
  int rc = opts_parse(argc, argv, &opts);

  if (rc != 0)
    return rc == 1 ? INFO_EXIT_OK : INFO_EXIT_USAGE;
  info_gather(&opts, &info);
  if (opts.is_json)
    json_print(&opts, &info);
  else
    text_print(&opts, &info);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "pinheap-info: cannot write the output\n");
    return INFO_EXIT_OUTPUT;
  }
  return info.unsafe ? INFO_EXIT_UNSAFE : INFO_EXIT_OK;
}
