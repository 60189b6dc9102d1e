/*
 * memory_pinheap_component.c -- Open MPI's memory/pinheap component: pinheap
 * as libopen-pal's memory manager, the way ptmalloc2 once was.
 *
 * pinheap's archive, built with the opal_memory_pinheap_ prefix, is linked
 * whole into libopen-pal with this file (Makefile.am).  It decides before
 * main from mpi_leave_pinned & co. whether it serves malloc, installs its
 * entry points, and feeds Open MPI's memory hooks by itself: every release
 * it sees goes to opal_mem_hooks_release_hook first (pinheap's hooks/bridges/ompi.c
 * finds libopen-pal among the loaded objects -- here, the library it is in).
 * This component does what only Open MPI can ask for: when the memory
 * framework opens it (a registration cache being created, ompi_info), it
 * runs pinheap's self-test and sets Open MPI's support level from what the
 * test saw; and it registers pinheap's memory_pinheap_* parameters as MCA
 * variables, so that ompi_info lists them, with the value pinheap uses and
 * where that came from in each one's help.
 *
 * Main entry point: mca_memory_pinheap_component (the framework's static
 * component table names it).
 */
#include "opal_config.h"

#include <stdio.h>
#include <string.h>

#include "opal/constants.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/memory/base/base.h"
#include "opal/mca/memory/base/empty.h"
#include "opal/mca/memory/memory.h"
#include "opal/memoryhooks/memory.h"
#include "opal/memoryhooks/memory_internal.h"
#include "opal/util/output.h"

#include "pinheap.h"

static int pinheap_component_open(void);
static int pinheap_component_register(void);
static int pinheap_component_query(int *priority);

/* Above patcher's 80: should both ever be built, pinheap is the one. */
static int pinheap_priority = 90;

opal_memory_base_component_2_0_0_t mca_memory_pinheap_component = {
    .memoryc_version = {
        OPAL_MEMORY_BASE_VERSION_2_0_0,
        .mca_component_name = "pinheap",
        MCA_BASE_MAKE_VERSION(component, OPAL_MAJOR_VERSION, OPAL_MINOR_VERSION,
                              OPAL_RELEASE_VERSION),
        .mca_open_component = pinheap_component_open,
        .mca_register_component_params = pinheap_component_register,
    },
    .memoryc_data = {
        MCA_BASE_METADATA_PARAM_CHECKPOINT
    },
    .memoryc_query = pinheap_component_query,
    .memoryc_register = opal_memory_base_component_register_empty,
    .memoryc_deregister = opal_memory_base_component_deregister_empty,
    .memoryc_set_alignment = opal_memory_base_component_set_alignment_empty,
};

/* ---- parameters ------------------------------------------------------------ */

#define PINHEAP_MCA_PREFIX "memory_pinheap_"
#define PINHEAP_MCA_MAX 32

/* The variables' storage (Open MPI writes the value it finds there). */
static char *pinheap_mca_values[PINHEAP_MCA_MAX];

/* Each of pinheap's memory_pinheap_<name> parameters as the MCA variable
 * <name> of this component.  pinheap read its parameters before main,
 * before Open MPI could; the help says what pinheap uses and from where,
 * and a value Open MPI finds that pinheap did not use is named. */
static int pinheap_component_register(void)
{
    pinheap_param_info_t pi;
    int n = 0;

    (void) mca_base_component_var_register(&mca_memory_pinheap_component.memoryc_version,
                                           "priority", "Priority of the pinheap memory component",
                                           MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_9,
                                           MCA_BASE_VAR_SCOPE_CONSTANT, &pinheap_priority);
    for (int i = 0; opal_memory_pinheap_param_info(i, &pi) == 0 && n < PINHEAP_MCA_MAX; i++) {
        if (pi.mca_name == NULL ||
            strncmp(pi.mca_name, PINHEAP_MCA_PREFIX, strlen(PINHEAP_MCA_PREFIX)) != 0) {
            continue;                   /* mpi_leave_pinned & co. are Open MPI's own */
        }
        const char *name = pi.mca_name + strlen(PINHEAP_MCA_PREFIX);
        char help[512];
        snprintf(help, sizeof(help),
                 "pinheap's %s (read before main): in effect %s (%s); "
                 "default %s; accepted: %s", pi.name, pi.value, pi.source, pi.default_value,
                 pi.accepted);
        pinheap_mca_values[n] = NULL;
        int idx = mca_base_component_var_register(&mca_memory_pinheap_component.memoryc_version,
                                                  name, help, MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0,
                                                  OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
                                                  &pinheap_mca_values[n]);
        if (idx >= 0) {
            const char *seen = pinheap_mca_values[n];
            if (seen != NULL && strcmp(seen, pi.value) != 0) {
                opal_output(0, "memory:pinheap: %s%s is \"%s\" for Open MPI, but pinheap "
                            "read its parameters before main and uses %s (%s): set it in "
                            "the environment (%s) or a parameter file to change what "
                            "pinheap does", PINHEAP_MCA_PREFIX, name, seen, pi.value,
                            pi.source, pi.name);
            }
        }
        n++;
    }
    return OPAL_SUCCESS;
}

/* ---- selection and opening ------------------------------------------------- */

static int pinheap_component_query(int *priority)
{
    *priority = pinheap_priority;
    return OPAL_SUCCESS;
}

/* Opened by the memory framework when Open MPI first cares (a registration
 * cache, UCX or libfabric support, ompi_info): the self-test, then Open
 * MPI's support level from what it saw. */
static int pinheap_component_open(void)
{
    int level, support = 0;

    opal_memory_pinheap_open();
    level = opal_memory_pinheap_support_level();
    if (level & PINHEAP_SUPPORT_FREE) {
        support |= OPAL_MEMORY_FREE_SUPPORT;
    }
    if (level & PINHEAP_SUPPORT_CHUNK) {
        support |= OPAL_MEMORY_CHUNK_SUPPORT;
    }
    if (level & PINHEAP_SUPPORT_MUNMAP) {
        support |= OPAL_MEMORY_MUNMAP_SUPPORT;
    }
    opal_mem_hooks_set_support(support);
    return OPAL_SUCCESS;
}
