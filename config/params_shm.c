/*
 * params_shm.c -- the shared-memory heap's view of the parameter table
 * (allocator/shm/shm.c): its rows of the one table (params.c), evaluated only
 * when asked, by the same parser from the same environment scan, and what
 * the shared heap runs with once the launcher's variables fill the gaps
 * (shm_conf_t).  Main entry point: shm_conf_eval(); shm_params_any_set(),
 * on the start-up path, only looks the names up.  Never allocates.  See
 * params.h.
 */
#include "allocator/base/base.h"

#include "config/params.h"
#include "config/params_internal.h"

#include <string.h>
#include <unistd.h>

/* ======================================================================= */
/*  The shared-memory heap's parameters                                     */
/* ======================================================================= */

/* Their rows of the one table (params.c): row SHM_ROW + shm_param_id_t. */
#define SHM_ROW PARAM_COUNT

/* The shared heap's names, then the callers' in names[2 SHM_PARAM_COUNT ..
 * n), looked up in envp in one pass: texts[2 id], [2 id + 1] the values of
 * row id's name and alias (NULL: not set), then the callers'. */
PH_HOT static void shm_params_scan(char *const *envp, const char **names, size_t n,
                                   const char **texts)
{
  params_names(SHM_ROW, SHM_PARAM_COUNT, names);
  param_env_scan(envp, names, n, texts);
}

PH_HOT const param_desc_t *shm_param_desc_get(shm_param_id_t id)
{
  if ((int)id < 0 || id >= SHM_PARAM_COUNT)
    return NULL;
  return &param_descs[SHM_ROW + id];
}

void shm_params_eval(char *const *envp, shm_params_t *out_p)
{
  const char *names[2 * SHM_PARAM_COUNT];
  const char *texts[2 * SHM_PARAM_COUNT];

  shm_params_scan(envp, names, 2 * SHM_PARAM_COUNT, texts);
  params_eval_rows(SHM_ROW, SHM_PARAM_COUNT, texts, out_p->v, out_p->bytes);
}

PH_HOT bool shm_params_any_set(char *const *envp)
{
  const char *names[2 * SHM_PARAM_COUNT];
  const char *texts[2 * SHM_PARAM_COUNT];

  shm_params_scan(envp, names, 2 * SHM_PARAM_COUNT, texts);
  for (int i = 0; i < 2 * SHM_PARAM_COUNT; i++)
    if (texts[i] != NULL)
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
  if (!param_span_number(text, e, &v) || v < 1 || v > PARAM_RANKS_MAX)
    return 0;
  return (unsigned)v;
}

/* Appends text to job (length *n), its characters outside the job id's
 * set made '_', cut at PARAM_JOB_MAX. */
static void job_append(char *job, size_t *n, const char *text)
{
  for (; *text != '\0' && *n < PARAM_JOB_MAX; text++)
    job[(*n)++] = param_job_char_ok(*text) ? *text : '_';
  job[*n] = '\0';
}

/* The launcher's variables shm_conf_eval reads, after the parameters'
 * names and aliases in one scan: the participant count's, then the job
 * id's. */
enum {
  SHM_VAR_RANKS = 2 * SHM_PARAM_COUNT,  /* 4 of them */
  SHM_VAR_SLURM_JOB = SHM_VAR_RANKS + 4,
  SHM_VAR_SLURM_STEP,
  SHM_VAR_JOB,                          /* 3 of them */
  SHM_VAR_COUNT = SHM_VAR_JOB + 3
};
static const char *const shm_launcher_vars[SHM_VAR_COUNT - SHM_VAR_RANKS] = {
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
  const char *const *rank_vars = shm_launcher_vars;
  const char *const *job_vars = &shm_launcher_vars[SHM_VAR_JOB - SHM_VAR_RANKS];
  const char *const *rank_texts = &texts[SHM_VAR_RANKS];
  const char *const *job_texts = &texts[SHM_VAR_JOB];

  _Static_assert(SHM_VAR_COUNT <= ENV_SCAN_MAX, "param_env_scan takes at most ENV_SCAN_MAX names");
  for (int i = SHM_VAR_RANKS; i < SHM_VAR_COUNT; i++)
    names[i] = shm_launcher_vars[i - SHM_VAR_RANKS];
  shm_params_scan(envp, names, SHM_VAR_COUNT, texts);
  params_eval_rows(SHM_ROW, SHM_PARAM_COUNT, texts, p.v, p.bytes);
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
