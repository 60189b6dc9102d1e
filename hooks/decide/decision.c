/*
 * decision.c -- the leave-pinned decision: inputs -> enabled/disabled + why.
 *
 * Owns the precedence rules and the Open MPI matrix documented in
 * decision.h.  Main entry point: decision_make() (pure); decision_run()
 * gathers the process's inputs and calls it.  Never allocates: the reason
 * text is composed in the caller's decision_t.
 */
#include "allocator/api/api.h"

#include "hooks/decide/decision.h"
#include "hooks/decide/probe.h"
#include "allocator/base/startup.h"

#include <stdarg.h>
#include <string.h>

/* Builds the reason text from NULL-terminated pieces (cut if too long). */
static void text_set(decision_t *out_p, const char *first, ...)
    __attribute__((sentinel));

PH_STARTUP static void text_set(decision_t *out_p, const char *first, ...)
{
  va_list ap;

  out_p->text[0] = '\0';
  va_start(ap, first);
  for (const char *s = first; s != NULL; s = va_arg(ap, const char *))
    ph_str_add(out_p->text, DECISION_TEXT_MAX, s);
  va_end(ap);
}

PH_STARTUP static void decide(decision_t *out_p, int enabled, decision_reason_t reason)
{
  out_p->enabled = enabled;
  out_p->reason = reason;
}

/* The override's variable, as it was set (PINHEAP_MODE or its alias). */
PH_STARTUP static const char *mode_var(const decision_input_t *in)
{
  return in->mode_var != NULL ? in->mode_var : PINHEAP_ENV_MODE;
}

/* Reason text for a safety switch, noting when it beat PINHEAP_MODE=on.
 * Not in the start-up text: a safety switch set, seldom. */
static void decide_blocked(const decision_input_t *in, decision_t *out_p,
                           decision_reason_t reason, const char *var, const char *why)
{
  decide(out_p, 0, reason);
  text_set(out_p, "disabled by ", var, why, in->mode == PARAM_MODE_ON ? " (" : "",
           in->mode == PARAM_MODE_ON ? mode_var(in) : "",
           in->mode == PARAM_MODE_ON ? "=on does not override it)" : "", (const char *)NULL);
}

PH_STARTUP void decision_make(const decision_input_t *in, decision_t *out_p)
{
  const char *lp_name = PINHEAP_PARAM_LEAVE_PINNED_STRING;
  const char *lpp_name = PINHEAP_PARAM_LEAVE_PINNED_PIPELINE_STRING;
  /* where the matrix's value was set: a variable, or a parameter file */
  const char *lp_from = in->lp_from != NULL ? in->lp_from : PINHEAP_ENV_LEAVE_PINNED;
  const char *lpp_from = in->lpp_from != NULL ? in->lpp_from : PINHEAP_ENV_LEAVE_PINNED_PIPELINE;

  /* 1. override off always wins */
  if (in->mode == PARAM_MODE_OFF) {
    decide(out_p, 0, DECISION_REASON_MODE_OFF);
    text_set(out_p, "disabled by ", mode_var(in), "=off", (const char *)NULL);
    return;
  }

  /* 2. safety switches, before the matrix and before override on */
  if (in->is_disable_set) {
    decide_blocked(in, out_p, DECISION_REASON_DISABLE_VAR, PINHEAP_ENV_DISABLE, "");
    return;
  }
  if (in->blockers & DECISION_BLOCK_FAKEROOTKEY) {
    decide_blocked(in, out_p, DECISION_REASON_FAKEROOTKEY, "FAKEROOTKEY",
                   " (running under fakeroot)");
    return;
  }
  if (in->blockers & DECISION_BLOCK_FAKED_MODE) {
    decide_blocked(in, out_p, DECISION_REASON_FAKED_MODE, "FAKED_MODE",
                   " (running under fakeroot)");
    return;
  }
  if (in->blockers & DECISION_BLOCK_SANDBOX_ON) {
    decide_blocked(in, out_p, DECISION_REASON_SANDBOX_ON, "SANDBOX_ON",
                   " (running in a sandbox)");
    return;
  }

  /* 3. override on */
  if (in->mode == PARAM_MODE_ON) {
    decide(out_p, 1, DECISION_REASON_MODE_ON);
    text_set(out_p, "enabled by ", mode_var(in), "=on", (const char *)NULL);
    return;
  }

  /* 4. a memory checker keeps malloc, unless the override above says on */
  if (in->tool != NULL) {
    decide(out_p, 0, DECISION_REASON_TOOL);
    text_set(out_p, "running under ", in->tool, ", whose malloc must stay in charge (",
             PINHEAP_ENV_MODE, "=on overrides)", (const char *)NULL);
    return;
  }
  /* 5. the preload shim, when no leave-pinned parameter says otherwise */
  if (in->is_preloaded && in->lp == PARAM_TRI_NOT_FOUND && in->lpp == PARAM_TRI_NOT_FOUND) {
    decide(out_p, 1, DECISION_REASON_PRELOADED);
    text_set(out_p, "preloaded: the preload shim enables pinheap when neither ",
             PINHEAP_ENV_LEAVE_PINNED, " nor ", PINHEAP_ENV_LEAVE_PINNED_PIPELINE,
             " is set", (const char *)NULL);
    return;
  }

  /* 6. the matrix */
  if (in->lp == PARAM_TRI_YES) {
    decide(out_p, 1, DECISION_REASON_LP_YES);
    text_set(out_p, lp_name, "=1 (", lp_from, ")", (const char *)NULL);
  } else if (in->lpp == PARAM_TRI_YES) {
    decide(out_p, 1, DECISION_REASON_LPP_YES);
    text_set(out_p, lpp_name, "=1 (", lpp_from, ")", (const char *)NULL);
  } else if (in->lp == PARAM_TRI_NO) {
    decide(out_p, 0, DECISION_REASON_LP_NO);
    text_set(out_p, lp_name, "=0 (", lp_from, ")", (const char *)NULL);
  } else if (in->lpp == PARAM_TRI_NO) {
    decide(out_p, 0, DECISION_REASON_LPP_NO);
    text_set(out_p, lpp_name, "=0 (", lpp_from, ")", (const char *)NULL);
  } else if (in->probe_found) {
    decide(out_p, 1, DECISION_REASON_RUNTIME_FOUND);
    if (in->probe_path != NULL && in->probe_path[0] != '\0')
      text_set(out_p, "runtime: OS-bypass driver found: ", in->probe_path, (const char *)NULL);
    else
      text_set(out_p, "runtime: OS-bypass driver found", (const char *)NULL);
  } else {
    decide(out_p, 0, DECISION_REASON_RUNTIME_NOT_FOUND);
    text_set(out_p, "runtime: no OS-bypass driver found", (const char *)NULL);
  }
}

PH_STARTUP int decision_needs_probe(const decision_input_t *in)
{
  if (in->mode != PARAM_MODE_AUTO || in->is_disable_set || in->blockers != 0 || in->tool != NULL)
    return 0;
  if (in->is_preloaded && in->lp == PARAM_TRI_NOT_FOUND && in->lpp == PARAM_TRI_NOT_FOUND)
    return 0;
  if (in->lp == PARAM_TRI_YES || in->lpp == PARAM_TRI_YES
      || in->lp == PARAM_TRI_NO || in->lpp == PARAM_TRI_NO)
    return 0;
  return 1;
}

PH_STARTUP void decision_inputs_from_params(const params_t *params, int is_preloaded,
                                 decision_input_t *out_p)
{
  out_p->lp = params->v[PARAM_LEAVE_PINNED].value;
  out_p->lpp = params->v[PARAM_LEAVE_PINNED_PIPELINE].value;
  out_p->lp_from = params->v[PARAM_LEAVE_PINNED].from;
  out_p->lpp_from = params->v[PARAM_LEAVE_PINNED_PIPELINE].from;
  out_p->is_disable_set = params->v[PARAM_DISABLE].value != 0;
  out_p->blockers = 0;
  if (params->v[PARAM_FAKEROOTKEY].value)
    out_p->blockers |= DECISION_BLOCK_FAKEROOTKEY;
  if (params->v[PARAM_FAKED_MODE].value)
    out_p->blockers |= DECISION_BLOCK_FAKED_MODE;
  if (params->v[PARAM_SANDBOX_ON].value)
    out_p->blockers |= DECISION_BLOCK_SANDBOX_ON;
  out_p->mode = params->v[PARAM_MODE].value;
  out_p->mode_var = params->v[PARAM_MODE].from;
  out_p->is_preloaded = is_preloaded != 0;
  out_p->probe_found = 0;
  out_p->probe_path = NULL;
  out_p->tool = NULL;
}

PH_STARTUP int decision_run(int is_preloaded, const char *probe_root, const char *tool, decision_t *out_p)
{
  const params_t *params = params_get();
  decision_input_t in;
  probe_result_t probe;

  decision_inputs_from_params(params, is_preloaded, &in);
  in.tool = tool;
  if (decision_needs_probe(&in)) {
    if (probe_root == NULL && params->v[PARAM_PROBE_ROOT].value)
      probe_root = params->v[PARAM_PROBE_ROOT].raw;
    probe_run(probe_root, PROBE_FIRST, &probe);
    in.probe_found = probe.found;
    in.probe_path = probe.path;
  }
  decision_make(&in, out_p);
  return out_p->enabled;
}

const char *decision_reason_name(decision_reason_t reason)
{
  static const char *const names[DECISION_REASON_COUNT] = {
    [DECISION_REASON_MODE_OFF] = "mode_off",
    [DECISION_REASON_DISABLE_VAR] = "disable_var",
    [DECISION_REASON_FAKEROOTKEY] = "fakerootkey",
    [DECISION_REASON_FAKED_MODE] = "faked_mode",
    [DECISION_REASON_SANDBOX_ON] = "sandbox_on",
    [DECISION_REASON_MODE_ON] = "mode_on",
    [DECISION_REASON_TOOL] = "tool",
    [DECISION_REASON_PRELOADED] = "preloaded",
    [DECISION_REASON_LP_YES] = "lp_yes",
    [DECISION_REASON_LPP_YES] = "lpp_yes",
    [DECISION_REASON_LP_NO] = "lp_no",
    [DECISION_REASON_LPP_NO] = "lpp_no",
    [DECISION_REASON_RUNTIME_FOUND] = "runtime_found",
    [DECISION_REASON_RUNTIME_NOT_FOUND] = "runtime_not_found",
  };

  if ((int)reason < 0 || reason >= DECISION_REASON_COUNT)
    return "unknown";
  return names[reason];
}
