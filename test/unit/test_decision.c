/*
 * test_decision.c -- tests of hooks/decision.c: the leave-pinned decision.
 *
 * Every cell of Open MPI's matrix with the probe found and not found, each
 * safety switch in every cell, the override's interplay with them, the
 * preloaded flag, the reason codes and texts, and the glue (inputs from a
 * parameter table, decision_run() on the process with a fake probe tree).
 * Main entry: the Criterion tests below.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocator/api/api.h"

#include "hooks/decide/decision.h"
#include "config/params.h"

static const int tri_values[4] = {
  PARAM_TRI_YES, PARAM_TRI_NO, PARAM_TRI_RUNTIME, PARAM_TRI_NOT_FOUND
};
static const char *const tri_names[4] = { "yes", "no", "runtime", "not found" };

/* The matrix of issue 3, written out: rows lp, columns lpp, in the order
 * yes, no, runtime, not found.  'y' enabled, 'n' disabled, 'r' runtime. */
static const char matrix[4][4] = {
  /*            yes  no   rt   nf */
  /* yes */   { 'y', 'y', 'y', 'y' },
  /* no  */   { 'y', 'n', 'n', 'n' },
  /* rt  */   { 'y', 'n', 'r', 'r' },
  /* nf  */   { 'y', 'n', 'r', 'r' },
};

#define PROBE_PATH "/dev/infiniband/uverbs0"

static decision_input_t input_plain(int lp, int lpp, int probe_found)
{
  decision_input_t in;

  memset(&in, 0, sizeof(in));
  in.lp = lp;
  in.lpp = lpp;
  in.mode = PARAM_MODE_AUTO;
  in.probe_found = probe_found;
  in.probe_path = probe_found ? PROBE_PATH : NULL;
  return in;
}

/* The reason text the matrix must give for (lp, lpp, probe). */
static void expected_matrix_reason(int r, int c, int probe, decision_reason_t *reason_p,
                                   const char **text_p)
{
  if (tri_values[r] == PARAM_TRI_YES) {
    *reason_p = DECISION_REASON_LP_YES;
    *text_p = PINHEAP_PARAM_LEAVE_PINNED_STRING "=1 (" PINHEAP_ENV_LEAVE_PINNED ")";
  } else if (tri_values[c] == PARAM_TRI_YES) {
    *reason_p = DECISION_REASON_LPP_YES;
    *text_p = PINHEAP_PARAM_LEAVE_PINNED_PIPELINE_STRING "=1 ("
              PINHEAP_ENV_LEAVE_PINNED_PIPELINE ")";
  } else if (tri_values[r] == PARAM_TRI_NO) {
    *reason_p = DECISION_REASON_LP_NO;
    *text_p = PINHEAP_PARAM_LEAVE_PINNED_STRING "=0 (" PINHEAP_ENV_LEAVE_PINNED ")";
  } else if (tri_values[c] == PARAM_TRI_NO) {
    *reason_p = DECISION_REASON_LPP_NO;
    *text_p = PINHEAP_PARAM_LEAVE_PINNED_PIPELINE_STRING "=0 ("
              PINHEAP_ENV_LEAVE_PINNED_PIPELINE ")";
  } else if (probe) {
    *reason_p = DECISION_REASON_RUNTIME_FOUND;
    *text_p = "runtime: OS-bypass driver found: " PROBE_PATH;
  } else {
    *reason_p = DECISION_REASON_RUNTIME_NOT_FOUND;
    *text_p = "runtime: no OS-bypass driver found";
  }
}

Test(decision, every_matrix_cell_with_and_without_a_driver)
{
  int cells = 0;

  for (int r = 0; r < 4; r++) {
    for (int c = 0; c < 4; c++) {
      for (int probe = 0; probe <= 1; probe++) {
        decision_input_t in = input_plain(tri_values[r], tri_values[c], probe);
        decision_t d;
        decision_reason_t want_reason;
        const char *want_text;
        int want = matrix[r][c] == 'y' || (matrix[r][c] == 'r' && probe);

        memset(&d, 0x5a, sizeof(d));
        decision_make(&in, &d);
        cr_assert_eq(d.enabled, want, "lp=%s lpp=%s probe=%d: enabled=%d, matrix says %c",
                     tri_names[r], tri_names[c], probe, d.enabled, matrix[r][c]);
        expected_matrix_reason(r, c, probe, &want_reason, &want_text);
        cr_assert_eq(d.reason, want_reason, "lp=%s lpp=%s probe=%d: reason %s",
                     tri_names[r], tri_names[c], probe, decision_reason_name(d.reason));
        cr_assert_str_eq(d.text, want_text, "lp=%s lpp=%s probe=%d", tri_names[r],
                         tri_names[c], probe);
        /* the probe is needed exactly in the "runtime" cells */
        cr_assert_eq(decision_needs_probe(&in), matrix[r][c] == 'r',
                     "lp=%s lpp=%s: needs_probe", tri_names[r], tri_names[c]);
        cells++;
      }
    }
  }
  cr_assert_eq(cells, 32);
}

#ifdef PINHEAP_TEST_DEFAULT_NAMES
Test(decision, reason_texts_with_open_mpi_names)
{
  decision_input_t in = input_plain(PARAM_TRI_YES, PARAM_TRI_NOT_FOUND, 0);
  decision_t d;

  decision_make(&in, &d);
  cr_assert_str_eq(d.text, "mpi_leave_pinned=1 (OMPI_MCA_mpi_leave_pinned)");
  in = input_plain(PARAM_TRI_RUNTIME, PARAM_TRI_NO, 1);
  decision_make(&in, &d);
  cr_assert_str_eq(d.text, "mpi_leave_pinned_pipeline=0 (OMPI_MCA_mpi_leave_pinned_pipeline)");
  in = input_plain(PARAM_TRI_YES, PARAM_TRI_YES, 1);
  in.is_disable_set = 1;
  decision_make(&in, &d);
  cr_assert_str_eq(d.text, "disabled by OMPI_MCA_memory_ptmalloc2_disable");
  in.is_disable_set = 0;
  in.mode = PARAM_MODE_OFF;
  decision_make(&in, &d);
  cr_assert_str_eq(d.text, "disabled by PINHEAP_MODE=off");
}
#endif

Test(decision, runtime_found_without_a_path_still_explains)
{
  decision_input_t in = input_plain(PARAM_TRI_RUNTIME, PARAM_TRI_RUNTIME, 1);
  decision_t d;

  in.probe_path = NULL;
  decision_make(&in, &d);
  cr_assert_eq(d.enabled, 1);
  cr_assert_str_eq(d.text, "runtime: OS-bypass driver found");
  in.probe_path = "/fake/dev/cxi0";
  decision_make(&in, &d);
  cr_assert_str_eq(d.text, "runtime: OS-bypass driver found: /fake/dev/cxi0");
}

/* ---- safety switches ------------------------------------------------------- */

typedef struct blocker_case_s {
  int is_disable_set;
  int blockers;
  decision_reason_t reason;
  const char *text;
} blocker_case_t;

static const blocker_case_t blocker_cases[] = {
  { 1, 0, DECISION_REASON_DISABLE_VAR, "disabled by " PINHEAP_ENV_DISABLE },
  { 0, DECISION_BLOCK_FAKEROOTKEY, DECISION_REASON_FAKEROOTKEY,
    "disabled by FAKEROOTKEY (running under fakeroot)" },
  { 0, DECISION_BLOCK_FAKED_MODE, DECISION_REASON_FAKED_MODE,
    "disabled by FAKED_MODE (running under fakeroot)" },
  { 0, DECISION_BLOCK_SANDBOX_ON, DECISION_REASON_SANDBOX_ON,
    "disabled by SANDBOX_ON (running in a sandbox)" },
};

Test(decision, each_safety_switch_disables_every_cell)
{
  for (size_t k = 0; k < sizeof(blocker_cases) / sizeof(blocker_cases[0]); k++) {
    const blocker_case_t *bc = &blocker_cases[k];
    for (int r = 0; r < 4; r++) {
      for (int c = 0; c < 4; c++) {
        for (int pre = 0; pre <= 1; pre++) {
          decision_input_t in = input_plain(tri_values[r], tri_values[c], 1);
          decision_t d;

          in.is_disable_set = bc->is_disable_set;
          in.blockers = bc->blockers;
          in.is_preloaded = pre;
          decision_make(&in, &d);
          cr_assert_eq(d.enabled, 0, "switch %zu lp=%s lpp=%s preloaded=%d", k,
                       tri_names[r], tri_names[c], pre);
          cr_assert_eq(d.reason, bc->reason, "switch %zu: reason %s", k,
                       decision_reason_name(d.reason));
          cr_assert_str_eq(d.text, bc->text);
          cr_assert_eq(decision_needs_probe(&in), 0);
        }
      }
    }
  }
}

Test(decision, safety_switches_are_reported_in_a_fixed_order)
{
  decision_input_t in = input_plain(PARAM_TRI_YES, PARAM_TRI_YES, 1);
  decision_t d;

  in.is_disable_set = 1;
  in.blockers = DECISION_BLOCK_FAKEROOTKEY | DECISION_BLOCK_FAKED_MODE | DECISION_BLOCK_SANDBOX_ON;
  decision_make(&in, &d);
  cr_assert_eq(d.reason, DECISION_REASON_DISABLE_VAR);
  in.is_disable_set = 0;
  decision_make(&in, &d);
  cr_assert_eq(d.reason, DECISION_REASON_FAKEROOTKEY);
  in.blockers &= ~DECISION_BLOCK_FAKEROOTKEY;
  decision_make(&in, &d);
  cr_assert_eq(d.reason, DECISION_REASON_FAKED_MODE);
  in.blockers &= ~DECISION_BLOCK_FAKED_MODE;
  decision_make(&in, &d);
  cr_assert_eq(d.reason, DECISION_REASON_SANDBOX_ON);
  in.blockers = 0;
  decision_make(&in, &d);
  cr_assert_eq(d.reason, DECISION_REASON_LP_YES);
  cr_assert_eq(d.enabled, 1);
}

/* ---- the override ------------------------------------------------------------ */

Test(decision, override_off_always_wins)
{
  for (int r = 0; r < 4; r++) {
    for (int c = 0; c < 4; c++) {
      for (int extra = 0; extra < 3; extra++) {
        decision_input_t in = input_plain(tri_values[r], tri_values[c], 1);
        decision_t d;

        in.mode = PARAM_MODE_OFF;
        in.is_preloaded = extra == 1;
        if (extra == 2) {
          in.is_disable_set = 1;
          in.blockers = DECISION_BLOCK_FAKEROOTKEY;
        }
        decision_make(&in, &d);
        cr_assert_eq(d.enabled, 0);
        cr_assert_eq(d.reason, DECISION_REASON_MODE_OFF);
        cr_assert_str_eq(d.text, "disabled by " PINHEAP_ENV_MODE "=off");
        cr_assert_eq(decision_needs_probe(&in), 0);
      }
    }
  }
}

Test(decision, override_on_beats_the_matrix_in_every_cell)
{
  for (int r = 0; r < 4; r++) {
    for (int c = 0; c < 4; c++) {
      decision_input_t in = input_plain(tri_values[r], tri_values[c], 0);
      decision_t d;

      in.mode = PARAM_MODE_ON;
      decision_make(&in, &d);
      cr_assert_eq(d.enabled, 1, "lp=%s lpp=%s", tri_names[r], tri_names[c]);
      cr_assert_eq(d.reason, DECISION_REASON_MODE_ON);
      cr_assert_str_eq(d.text, "enabled by " PINHEAP_ENV_MODE "=on");
      cr_assert_eq(decision_needs_probe(&in), 0);
    }
  }
}

Test(decision, override_on_does_not_beat_safety_switches)
{
  for (size_t k = 0; k < sizeof(blocker_cases) / sizeof(blocker_cases[0]); k++) {
    const blocker_case_t *bc = &blocker_cases[k];
    decision_input_t in = input_plain(PARAM_TRI_YES, PARAM_TRI_YES, 1);
    decision_t d;
    char want[DECISION_TEXT_MAX];

    in.mode = PARAM_MODE_ON;
    in.is_disable_set = bc->is_disable_set;
    in.blockers = bc->blockers;
    decision_make(&in, &d);
    cr_assert_eq(d.enabled, 0, "switch %zu", k);
    cr_assert_eq(d.reason, bc->reason);
    snprintf(want, sizeof(want), "%s (%s=on does not override it)", bc->text, PINHEAP_ENV_MODE);
    cr_assert_str_eq(d.text, want);
  }
}

Test(decision, override_auto_leaves_the_matrix_in_charge)
{
  decision_input_t in = input_plain(PARAM_TRI_NO, PARAM_TRI_NOT_FOUND, 1);
  decision_t d;

  in.mode = PARAM_MODE_AUTO;
  decision_make(&in, &d);
  cr_assert_eq(d.enabled, 0);
  cr_assert_eq(d.reason, DECISION_REASON_LP_NO);
}

/* ---- preloaded ------------------------------------------------------------------ */

Test(decision, preloaded_enables_when_nothing_is_set)
{
  for (int probe = 0; probe <= 1; probe++) {
    decision_input_t in = input_plain(PARAM_TRI_NOT_FOUND, PARAM_TRI_NOT_FOUND, probe);
    decision_t d;

    in.is_preloaded = 1;
    decision_make(&in, &d);
    cr_assert_eq(d.enabled, 1);
    cr_assert_eq(d.reason, DECISION_REASON_PRELOADED);
    cr_assert(strstr(d.text, "preloaded") == d.text, "%s", d.text);
    cr_assert(strstr(d.text, PINHEAP_ENV_LEAVE_PINNED) != NULL, "%s", d.text);
    cr_assert_eq(decision_needs_probe(&in), 0);
    /* without the flag the same inputs are a "runtime" cell */
    in.is_preloaded = 0;
    decision_make(&in, &d);
    cr_assert_eq(d.enabled, probe);
    cr_assert_eq(decision_needs_probe(&in), 1);
  }
}

Test(decision, preloaded_yields_to_explicit_parameters)
{
  /* every cell except (not found, not found) is decided by the matrix */
  for (int r = 0; r < 4; r++) {
    for (int c = 0; c < 4; c++) {
      if (r == 3 && c == 3)
        continue;
      for (int probe = 0; probe <= 1; probe++) {
        decision_input_t in = input_plain(tri_values[r], tri_values[c], probe);
        decision_t with;
        decision_t without;

        decision_make(&in, &without);
        in.is_preloaded = 1;
        decision_make(&in, &with);
        cr_assert_eq(with.enabled, without.enabled, "lp=%s lpp=%s probe=%d", tri_names[r],
                     tri_names[c], probe);
        cr_assert_eq(with.reason, without.reason);
        cr_assert_neq(with.reason, DECISION_REASON_PRELOADED);
      }
    }
  }
}

/* ---- names and glue ------------------------------------------------------------- */

Test(decision, reason_names_are_distinct)
{
  for (int i = 0; i < DECISION_REASON_COUNT; i++) {
    const char *a = decision_reason_name((decision_reason_t)i);
    cr_assert_str_neq(a, "unknown", "reason %d has no name", i);
    for (int j = i + 1; j < DECISION_REASON_COUNT; j++)
      cr_assert_str_neq(a, decision_reason_name((decision_reason_t)j));
  }
  cr_assert_str_eq(decision_reason_name(DECISION_REASON_COUNT), "unknown");
  cr_assert_str_eq(decision_reason_name((decision_reason_t)-1), "unknown");
  cr_assert_str_eq(decision_reason_name(DECISION_REASON_LP_YES), "lp_yes");
}

Test(decision, inputs_from_a_parameter_table)
{
  char *envp[] = {
    PINHEAP_ENV_LEAVE_PINNED "=-1",
    PINHEAP_ENV_LEAVE_PINNED_PIPELINE "=false",
    PINHEAP_ENV_MODE "=on",
    "FAKED_MODE=",
    "SANDBOX_ON=1",
    NULL,
  };
  char *none[] = { NULL };
  params_t p;
  decision_input_t in;

  params_eval(envp, &p);
  memset(&in, 0x5a, sizeof(in));
  decision_inputs_from_params(&p, 1, &in);
  cr_assert_eq(in.lp, PARAM_TRI_RUNTIME);
  cr_assert_eq(in.lpp, PARAM_TRI_NO);
  cr_assert_eq(in.mode, PARAM_MODE_ON);
  cr_assert_eq(in.is_disable_set, 0);
  cr_assert_eq(in.blockers, DECISION_BLOCK_FAKED_MODE | DECISION_BLOCK_SANDBOX_ON);
  cr_assert_eq(in.is_preloaded, 1);
  cr_assert_eq(in.probe_found, 0);
  cr_assert_null(in.probe_path);

  params_eval(none, &p);
  decision_inputs_from_params(&p, 0, &in);
  cr_assert_eq(in.lp, PARAM_TRI_NOT_FOUND);
  cr_assert_eq(in.lpp, PARAM_TRI_NOT_FOUND);
  cr_assert_eq(in.mode, PARAM_MODE_AUTO);
  cr_assert_eq(in.blockers, 0);
  cr_assert_eq(in.is_preloaded, 0);
}

/* The override set through its MCA alias: the reason names the variable
 * the user set, not PINHEAP_MODE. */
Test(decision, reason_names_the_variable_that_set_the_override)
{
  char *envp_on[] = { PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_mode=on", NULL };
  char *envp_off[] = { PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_mode=off", NULL };
  char *envp_sandbox[] = { PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_mode=on", "SANDBOX_ON=1",
                           NULL };
  params_t p;
  decision_input_t in;
  decision_t d;

  params_eval(envp_on, &p);
  decision_inputs_from_params(&p, 0, &in);
  decision_make(&in, &d);
  cr_assert_eq(d.enabled, 1);
  cr_assert_str_eq(d.text, "enabled by " PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_mode=on");

  params_eval(envp_off, &p);
  decision_inputs_from_params(&p, 0, &in);
  decision_make(&in, &d);
  cr_assert_eq(d.enabled, 0);
  cr_assert_str_eq(d.text, "disabled by " PINHEAP_PARAM_PREFIX_STRING "memory_pinheap_mode=off");

  params_eval(envp_sandbox, &p);
  decision_inputs_from_params(&p, 0, &in);
  decision_make(&in, &d);
  cr_assert_eq(d.enabled, 0);
  cr_assert(strstr(d.text, "(" PINHEAP_PARAM_PREFIX_STRING
                           "memory_pinheap_mode=on does not override it)") != NULL,
            "%s", d.text);
}

Test(decision, invalid_parameter_counts_as_not_found_in_the_matrix)
{
  char *envp[] = { PINHEAP_ENV_LEAVE_PINNED "=2", PINHEAP_ENV_LEAVE_PINNED_PIPELINE "=0", NULL };
  params_t p;
  decision_input_t in;
  decision_t d;

  params_eval(envp, &p);   /* warns on stderr */
  decision_inputs_from_params(&p, 0, &in);
  decision_make(&in, &d);
  cr_assert_eq(d.enabled, 0);
  cr_assert_eq(d.reason, DECISION_REASON_LPP_NO);   /* row "not found", column "no" */
}

/* decision_run() on this process: a fake probe tree through the parameter. */
static char fake_root[64];

static void fake_tree_make(void)
{
  char path[128];
  FILE *f;

  strcpy(fake_root, "/tmp/pinheap-decision-XXXXXX");
  cr_assert_not_null(mkdtemp(fake_root));
  snprintf(path, sizeof(path), "%s/dev", fake_root);
  cr_assert_eq(mkdir(path, 0755), 0);
  snprintf(path, sizeof(path), "%s/dev/cxi0", fake_root);
  f = fopen(path, "w");
  cr_assert_not_null(f);
  fclose(f);
}

static void fake_tree_remove(void)
{
  char path[128];

  snprintf(path, sizeof(path), "%s/dev/cxi0", fake_root);
  unlink(path);
  snprintf(path, sizeof(path), "%s/dev", fake_root);
  rmdir(path);
  rmdir(fake_root);
}

Test(decision, run_uses_the_probe_root_parameter, .init = fake_tree_make,
     .fini = fake_tree_remove)
{
  char want[256];
  decision_t d;

  setenv(PINHEAP_ENV_LEAVE_PINNED, "-1", 1);
  setenv(PINHEAP_ENV_PROBE_ROOT, fake_root, 1);
  unsetenv(PINHEAP_ENV_LEAVE_PINNED_PIPELINE);
  unsetenv(PINHEAP_ENV_DISABLE);
  unsetenv(PINHEAP_ENV_MODE);
  unsetenv("FAKEROOTKEY");
  unsetenv("FAKED_MODE");
  unsetenv("SANDBOX_ON");
  cr_assert_eq(decision_run(0, NULL, NULL, &d), 1);
  cr_assert_eq(d.reason, DECISION_REASON_RUNTIME_FOUND);
  snprintf(want, sizeof(want), "runtime: OS-bypass driver found: %s/dev/cxi0", fake_root);
  cr_assert_str_eq(d.text, want);
  /* an explicit root beats the parameter: the empty dev/ has no device */
  snprintf(want, sizeof(want), "%s/dev", fake_root);
  cr_assert_eq(decision_run(0, want, NULL, &d), 0);
  cr_assert_eq(d.reason, DECISION_REASON_RUNTIME_NOT_FOUND);
  /* preloaded with lp set: the matrix still decides */
  cr_assert_eq(decision_run(1, want, NULL, &d), 0);
}

Test(decision, run_preloaded_with_an_empty_environment)
{
  decision_t d;

  clearenv();
  cr_assert_eq(decision_run(1, "/nonexistent-root", NULL, &d), 1);
  cr_assert_eq(d.reason, DECISION_REASON_PRELOADED);
}
