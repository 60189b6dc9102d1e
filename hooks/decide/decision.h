/*
 * decision.h -- the leave-pinned decision: does pinheap replace malloc?
 *
 * decision_make() is a pure function of its inputs (no environment, no file
 * system): the dispatch layer gathers the inputs once (params_get(), and
 * probe_run() only when decision_needs_probe() says the answer depends on
 * it), or calls decision_run() which does exactly that.  Main entry point:
 * decision_make().
 *
 * Precedence, first rule that applies decides:
 *   1. override off (PINHEAP_MODE=off, also 0/false/no)      -> disabled
 *   2. safety switches, in this order                         -> disabled
 *        the component's disable parameter is true
 *          (OMPI_MCA_memory_ptmalloc2_disable=1/true/yes)
 *        FAKEROOTKEY set (any value), FAKED_MODE set (fakeroot)
 *        SANDBOX_ON set (sandbox)
 *      These exist for processes where replacing malloc is known to break
 *      (fakeroot's and sandboxes' wrappers allocate inside intercepted
 *      calls), so they come "before the matrix" and the force-on override
 *      does NOT beat them; the reason then says so.  To run pinheap under
 *      fakeroot anyway, unset the variable.
 *   3. override on (PINHEAP_MODE=on, also 1/true/yes)         -> enabled
 *   4. preloaded (the preload shim) and neither mpi_leave_pinned nor
 *      mpi_leave_pinned_pipeline set to a valid value        -> enabled
 *   5. the matrix, rows lp = mpi_leave_pinned, columns lpp =
 *      mpi_leave_pinned_pipeline (unparsable values count as not found):
 *          lp \ lpp     yes   no    runtime   not found
 *          yes          yes   yes   yes       yes
 *          no           yes   no    no        no
 *          runtime      yes   no    runtime   runtime
 *          not found    yes   no    runtime   runtime
 *      evaluated as: lp yes -> enabled; else lpp yes -> enabled; else
 *      lp no -> disabled; else lpp no -> disabled; else "runtime":
 *      enabled iff the driver probe found an OS-bypass device.
 * PINHEAP_MODE=auto (or -1, or unset) leaves rules 4 and 5 in charge.
 */
#ifndef PINHEAP_DECISION_H
#define PINHEAP_DECISION_H

#include "rename.h"

#include "config/params.h"

/* Bits of decision_input_t.blockers. */
#define DECISION_BLOCK_FAKEROOTKEY 0x1
#define DECISION_BLOCK_FAKED_MODE  0x2
#define DECISION_BLOCK_SANDBOX_ON  0x4

/** Everything the decision depends on. */
typedef struct decision_input_s {
  int lp;                 /* param_tristate_t: mpi_leave_pinned */
  int lpp;                /* param_tristate_t: mpi_leave_pinned_pipeline */
  const char *lp_from;    /* where lp and lpp were set (a variable, or a
                             parameter file's "path:line"); NULL: their */
  const char *lpp_from;   /* variables' names (PINHEAP_ENV_LEAVE_PINNED...) */
  int is_disable_set;     /* the disable parameter is true */
  int blockers;           /* DECISION_BLOCK_* bits */
  int mode;               /* param_mode_t: the override */
  const char *mode_var;   /* the variable that set it (PINHEAP_MODE or its
                             MCA alias); NULL: PINHEAP_MODE */
  int is_preloaded;       /* the preload shim wants enabled-by-default */
  int probe_found;        /* an OS-bypass device was found */
  const char *probe_path; /* where (may be NULL); only used in the reason */
  const char *tool;       /* a memory checker running the process (valgrind,
                             a sanitizer), or NULL */
} decision_input_t;

/** Which rule decided. */
typedef enum decision_reason_e {
  DECISION_REASON_MODE_OFF,
  DECISION_REASON_DISABLE_VAR,
  DECISION_REASON_FAKEROOTKEY,
  DECISION_REASON_FAKED_MODE,
  DECISION_REASON_SANDBOX_ON,
  DECISION_REASON_MODE_ON,
  DECISION_REASON_TOOL,
  DECISION_REASON_PRELOADED,
  DECISION_REASON_LP_YES,
  DECISION_REASON_LPP_YES,
  DECISION_REASON_LP_NO,
  DECISION_REASON_LPP_NO,
  DECISION_REASON_RUNTIME_FOUND,
  DECISION_REASON_RUNTIME_NOT_FOUND,
  DECISION_REASON_COUNT
} decision_reason_t;

#define DECISION_TEXT_MAX 640

/** The outcome. */
typedef struct decision_s {
  int enabled;                   /* 1: pinheap serves malloc; 0: glibc does */
  decision_reason_t reason;
  char text[DECISION_TEXT_MAX];  /* why, naming the deciding input, e.g.
                                    "mpi_leave_pinned=1 (OMPI_MCA_mpi_leave_pinned)",
                                    "disabled by OMPI_MCA_memory_ptmalloc2_disable",
                                    "runtime: no OS-bypass driver found" */
} decision_t;

/* ======================================================================= */
/*  API                                                                     */
/* ======================================================================= */

/** The decision.  Pure: same inputs, same output.  Never allocates.
 *  @param [in]  in      the inputs (probe fields used only in "runtime")
 *  @param [out] out_p   enabled flag, reason code and text */
void decision_make(const decision_input_t *in, decision_t *out_p);

/** @return 1 if decision_make()'s answer for in depends on probe_found,
 *  i.e. the driver probe has to run; 0 if it can be skipped. */
int decision_needs_probe(const decision_input_t *in);

/** Fills the parameter-derived fields of the inputs from a parameter table
 *  (probe_found = 0, probe_path = NULL).
 *  @param [in]  params        evaluated parameters (params_get() or params_eval())
 *  @param [in]  is_preloaded  1 for the preload shim
 *  @param [out] out_p         the inputs */
void decision_inputs_from_params(const params_t *params, int is_preloaded,
                                 decision_input_t *out_p);

/** The whole start-up decision for this process: params_get(), the probe
 *  when needed (under probe_root if not NULL, else under the probe-root
 *  parameter if set, else "/"), decision_make().  tool: the memory checker
 *  the process runs under, or NULL.  Never allocates; uses a few KiB of
 *  stack.
 *  @return out_p->enabled */
int decision_run(int is_preloaded, const char *probe_root, const char *tool, decision_t *out_p);

/** A short constant name for a reason code, e.g. "lp_yes" (for JSON). */
const char *decision_reason_name(decision_reason_t reason);

#endif /* PINHEAP_DECISION_H */
