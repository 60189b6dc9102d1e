/*
 * params_info.c -- the public view of pinheap's parameters
 * (pinheap_param_info): each as this process read it, for a runtime that
 * shows its own parameters -- Open MPI's memory/pinheap component
 * registers them as MCA variables from it (tools/openmpi/) -- without the
 * internal table (config/params.h).  Main entry point:
 * PINHEAP_NAME(param_info)().
 */
#include "allocator/base/base.h"

#include <errno.h>
#include <string.h>

#include "config/params.h"
#include "pinheap.h"

int PINHEAP_NAME(param_info)(int index, pinheap_param_info_t *out)
{
  if (out == NULL || index < 0)
    return EINVAL;
  if (index >= PARAM_COUNT)          /* the process's rows (not the shared heap's) */
    return ENOENT;
  param_id_t id = (param_id_t)index;
  const param_desc_t *d = param_desc_get(id);
  const param_value_t *pv = &params_get()->v[id];

  memset(out, 0, sizeof(*out));
  out->name = d->name;
  out->mca_name = param_mca_name(d);
  out->default_value = param_value_name(id, d->default_value);
  bool set = pv->source == PARAM_SOURCE_ENV || pv->source == PARAM_SOURCE_FILE;
  out->value = set ? pv->raw : out->default_value;
  out->source = set                                  ? pv->from   /* variable, or path:line */
                : pv->source == PARAM_SOURCE_INVALID ? "invalid (ignored)"
                                                     : "default";
  out->accepted = d->expected;
  return 0;
}
