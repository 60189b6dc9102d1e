/*
 * test_shm.c -- tests of the shared-memory heap (allocator/shm.c) and of its
 * parameters (config/params.c: shm_params_eval, shm_conf_eval).
 *
 * Parameters: every kind's accepted spellings and bounds, one warning line
 * naming the variable, the value and what is accepted for a bad value, the
 * launchers' defaults.  Main entry: the Criterion tests below.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#include "params.h"

/* ---- capturing what is written to fd 2 --------------------------------- */

typedef struct capture_s {
  int saved_fd;
  int mem_fd;
  char text[8192];
} capture_t;

static void capture_begin(capture_t *c)
{
  fflush(stderr);
  c->mem_fd = memfd_create("stderr", 0);
  cr_assert(c->mem_fd >= 0, "memfd_create: %s", strerror(errno));
  c->saved_fd = dup(STDERR_FILENO);
  cr_assert(dup2(c->mem_fd, STDERR_FILENO) == STDERR_FILENO);
}

static const char *capture_end(capture_t *c)
{
  fflush(stderr);
  dup2(c->saved_fd, STDERR_FILENO);
  close(c->saved_fd);
  ssize_t n = pread(c->mem_fd, c->text, sizeof(c->text) - 1, 0);
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

/* Evaluates the one variable entry; returns the parameter id's value. */
static const param_value_t *eval_one(shm_params_t *t, const char *entry, shm_param_id_t id,
                                     const char **warn_p)
{
  static capture_t cap;
  char *envp[] = { (char *)entry, NULL };

  capture_begin(&cap);
  shm_params_eval(envp, t);
  *warn_p = capture_end(&cap);
  return &t->v[id];
}

static void size_ok(const char *entry, shm_param_id_t id, size_t want)
{
  shm_params_t t;
  const char *warn;
  const param_value_t *v = eval_one(&t, entry, id, &warn);

  cr_assert_eq(v->source, PARAM_SOURCE_ENV, "%s: not accepted (%s)", entry, warn);
  cr_assert_eq(t.bytes[id], want, "%s: %zu bytes, expected %zu", entry, t.bytes[id], want);
  cr_assert_str_empty(warn, "%s: warned: %s", entry, warn);
}

/* A bad value: exactly one line naming the variable, the value and what is
 * accepted; the parameter counts as not set. */
static void value_bad(const char *entry, shm_param_id_t id, const char *accepted)
{
  shm_params_t t;
  const char *warn;
  const param_value_t *v = eval_one(&t, entry, id, &warn);
  char name[64];
  const char *eq = strchr(entry, '=');

  snprintf(name, sizeof(name), "%.*s", (int)(eq - entry), entry);
  cr_assert_eq(v->source, PARAM_SOURCE_INVALID, "%s: accepted", entry);
  cr_assert_eq(t.bytes[id], 0);
  cr_assert_eq(lines_count(warn), 1, "%s: %d lines: %s", entry, lines_count(warn), warn);
  cr_assert(strstr(warn, name) != NULL, "%s: the warning does not name the variable: %s", entry, warn);
  char shown[61];
  snprintf(shown, sizeof(shown), "%s", eq + 1);     /* long values are cut in the warning */
  cr_assert(strstr(warn, shown) != NULL, "%s: the warning does not show the value: %s", entry, warn);
  cr_assert(strstr(warn, accepted) != NULL, "%s: the warning does not say what is accepted: %s",
            entry, warn);
}

Test(shm_params, sizes_with_suffixes)
{
  size_ok("PINHEAP_SHM_SIZE=8388608", SHM_PARAM_SIZE, (size_t)8 << 20);
  size_ok("PINHEAP_SHM_SIZE=8192K", SHM_PARAM_SIZE, (size_t)8 << 20);
  size_ok("PINHEAP_SHM_SIZE=64M", SHM_PARAM_SIZE, (size_t)64 << 20);
  size_ok("PINHEAP_SHM_SIZE= 64m ", SHM_PARAM_SIZE, (size_t)64 << 20);
  size_ok("PINHEAP_SHM_SIZE=2g", SHM_PARAM_SIZE, (size_t)2 << 30);
  size_ok("PINHEAP_SHM_SIZE=1T", SHM_PARAM_SIZE, (size_t)1 << 40);
  size_ok("SM_SIZE=8", SHM_PARAM_SM_SIZE, (size_t)8 << 20);
  size_ok("SM_SIZE=1024", SHM_PARAM_SM_SIZE, (size_t)1 << 30);
}

Test(shm_params, bad_sizes_are_named_once)
{
  const char *accepted = "from 8M to 1T";
  value_bad("PINHEAP_SHM_SIZE=", SHM_PARAM_SIZE, accepted);
  value_bad("PINHEAP_SHM_SIZE=M", SHM_PARAM_SIZE, accepted);
  value_bad("PINHEAP_SHM_SIZE=4M", SHM_PARAM_SIZE, accepted);         /* below the least */
  value_bad("PINHEAP_SHM_SIZE=2T", SHM_PARAM_SIZE, accepted);         /* above the most */
  value_bad("PINHEAP_SHM_SIZE=64MB", SHM_PARAM_SIZE, accepted);
  value_bad("PINHEAP_SHM_SIZE=-64M", SHM_PARAM_SIZE, accepted);
  value_bad("PINHEAP_SHM_SIZE=1.5G", SHM_PARAM_SIZE, accepted);
  value_bad("PINHEAP_SHM_SIZE=99999999999999999999", SHM_PARAM_SIZE, accepted);
  value_bad("PINHEAP_SHM_SIZE=18446744073709551615K", SHM_PARAM_SIZE, accepted);
  value_bad("SM_SIZE=7", SHM_PARAM_SM_SIZE, "MiB from 8 to 1048576");
  value_bad("SM_SIZE=64M", SHM_PARAM_SM_SIZE, "MiB from 8 to 1048576");
}

Test(shm_params, ranks_jobs_timeout_fallback)
{
  shm_params_t t;
  const char *warn;

  cr_assert_eq(eval_one(&t, "PINHEAP_SHM_RANKS=4", SHM_PARAM_RANKS, &warn)->value, 4);
  cr_assert_eq(eval_one(&t, "SM_RANKS=4096", SHM_PARAM_SM_RANKS, &warn)->value, 4096);
  value_bad("PINHEAP_SHM_RANKS=0", SHM_PARAM_RANKS, "from 1 to 4096");
  value_bad("SM_RANKS=4097", SHM_PARAM_SM_RANKS, "from 1 to 4096");
  value_bad("PINHEAP_SHM_RANKS=two", SHM_PARAM_RANKS, "from 1 to 4096");
  const param_value_t *v = eval_one(&t, "PINHEAP_SHM_JOB= job-1.a_b ", SHM_PARAM_JOB, &warn);
  cr_assert_eq(v->source, PARAM_SOURCE_ENV);
  cr_assert_str_eq(v->raw, "job-1.a_b");
  value_bad("PINHEAP_SHM_JOB=a/b", SHM_PARAM_JOB, "A-Z, a-z, 0-9");
  value_bad("PINHEAP_SHM_JOB=", SHM_PARAM_JOB, "A-Z, a-z, 0-9");
  value_bad("PINHEAP_SHM_JOB=0123456789012345678901234567890123456789012345678901234567890123456789",
            SHM_PARAM_JOB, "1 to 64 characters");
  cr_assert_eq(eval_one(&t, "PINHEAP_SHM_TIMEOUT=250", SHM_PARAM_TIMEOUT, &warn)->value, 250);
  value_bad("PINHEAP_SHM_TIMEOUT=0", SHM_PARAM_TIMEOUT, "milliseconds");
  cr_assert_eq(eval_one(&t, "PINHEAP_SHM_FALLBACK=yes", SHM_PARAM_FALLBACK, &warn)->value, 1);
  value_bad("PINHEAP_SHM_FALLBACK=maybe", SHM_PARAM_FALLBACK, "true, false");
  char *none[] = { NULL };
  shm_params_eval(none, &t);
  cr_assert_eq(t.v[SHM_PARAM_TIMEOUT].value, SHM_TIMEOUT_DEFAULT_MS);
  cr_assert_eq(t.v[SHM_PARAM_FALLBACK].value, 0);
  cr_assert_not_null(shm_param_desc_get(SHM_PARAM_SIZE));
  cr_assert_null(shm_param_desc_get(SHM_PARAM_COUNT));
}

Test(shm_params, mode_is_on_when_a_size_is_given)
{
  shm_conf_t c;
  char *off[] = { "PINHEAP_SHM_RANKS=2", NULL };
  shm_conf_eval(off, &c);
  cr_assert_eq(c.on, 0);
  char *hmpi[] = { "SM_SIZE=16", "SM_RANKS=3", NULL };
  shm_conf_eval(hmpi, &c);
  cr_assert_eq(c.on, 1);
  cr_assert_eq(c.size, (size_t)16 << 20);
  cr_assert_str_eq(c.size_from, "SM_SIZE");
  cr_assert_eq(c.ranks, 3);
  char *both[] = { "SM_SIZE=16", "PINHEAP_SHM_SIZE=32M", "SM_RANKS=3", "PINHEAP_SHM_RANKS=5", NULL };
  shm_conf_eval(both, &c);
  cr_assert_eq(c.size, (size_t)32 << 20, "PINHEAP_SHM_SIZE wins over SM_SIZE");
  cr_assert_eq(c.ranks, 5);
  char *bad[] = { "PINHEAP_SHM_SIZE=huge", NULL };
  capture_t cap;
  capture_begin(&cap);
  shm_conf_eval(bad, &c);
  capture_end(&cap);
  cr_assert_eq(c.on, 0, "an invalid size leaves the mode off");
}

Test(shm_params, launcher_defaults)
{
  shm_conf_t c;
  char *ompi[] = { "PINHEAP_SHM_SIZE=16M", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
                   "OMPI_MCA_ess_base_jobid=3735879681", NULL };
  shm_conf_eval(ompi, &c);
  cr_assert_eq(c.ranks, 4);
  cr_assert_str_eq(c.ranks_from, "OMPI_COMM_WORLD_LOCAL_SIZE");
  cr_assert_str_eq(c.job, "3735879681");
  char *pmix[] = { "PMIX_NAMESPACE=prterun-host-1234@1", "MPI_LOCALNRANKS=2", NULL };
  shm_conf_eval(pmix, &c);
  cr_assert_str_eq(c.job, "prterun-host-1234_1", "a launcher's other characters become '_'");
  cr_assert_eq(c.ranks, 2);
  cr_assert_str_eq(c.ranks_from, "MPI_LOCALNRANKS");
  char *slurm[] = { "SLURM_JOB_ID=777", "SLURM_STEP_ID=3", "SLURM_STEP_TASKS_PER_NODE=2(x3),1",
                    "PMIX_NAMESPACE=ignored", NULL };
  shm_conf_eval(slurm, &c);
  cr_assert_str_eq(c.job, "slurm777.3");
  cr_assert_eq(c.ranks, 2);
  char *user[] = { "SLURM_JOB_ID=777", "PINHEAP_SHM_JOB=mine", "PINHEAP_SHM_RANKS=7",
                   "OMPI_COMM_WORLD_LOCAL_SIZE=4", NULL };
  shm_conf_eval(user, &c);
  cr_assert_str_eq(c.job, "mine");
  cr_assert_eq(c.ranks, 7);
  char *none[] = { NULL };
  char want[32];
  shm_conf_eval(none, &c);
  snprintf(want, sizeof(want), "pg%d", (int)getpgrp());
  cr_assert_str_eq(c.job, want);
  cr_assert_str_eq(c.job_from, "process group");
  cr_assert_eq(c.ranks, 0);
  cr_assert_eq(c.timeout_ms, SHM_TIMEOUT_DEFAULT_MS);
}
