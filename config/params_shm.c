/*
 * params_shm.c -- the shared-memory heap's parameters (allocator/shm.c):
 * their descriptors, their evaluation from the environment, and what the
 * shared heap runs with once the launcher's variables fill the gaps
 * (shm_conf_t).  Main entry point: shm_conf_eval(); shm_params_any_set(),
 * on the start-up path, only looks the names up.  Never allocates.  See
 * params.h.
 */
#include "internal.h"

#include "params.h"
#include "params_internal.h"

#include <string.h>
#include <unistd.h>

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

    param_value_reset(desc, pv);
    out_p->bytes[id] = 0;
    if (text == NULL)
      continue;
    param_raw_keep(pv, text);
    pv->from = desc->name;
    pv->key = desc->name;
    const char *b = text, *e = text + strlen(text);
    while (b < e && param_char_is_blank(*b))
      b++;
    while (e > b && param_char_is_blank(e[-1]))
      e--;
    int ok = desc->kind == PARAM_KIND_BOOL
                 ? param_value_parse(desc->kind, text, &value)
                 : param_value_parse_shm(desc->kind, b, e, &value, &bytes);
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
      param_value_warn(desc, NULL, desc->name, text);
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
  param_env_scan(envp, names, SHM_PARAM_COUNT, texts);
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

  _Static_assert(SHM_VAR_COUNT <= ENV_SCAN_MAX, "param_env_scan takes at most ENV_SCAN_MAX names");
  for (int id = 0; id < SHM_PARAM_COUNT; id++)
    names[id] = shm_param_descs[id].name;
  for (int i = SHM_PARAM_COUNT; i < SHM_VAR_COUNT; i++)
    names[i] = shm_launcher_vars[i - SHM_PARAM_COUNT];
  param_env_scan(envp, names, SHM_VAR_COUNT, texts);
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
