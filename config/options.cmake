# options.cmake -- build-time settings of the leave-pinned decision.
#
# Included by the top CMakeLists.txt before configure_file(), so every value
# here lands in the generated pinheap_config.h (config/pinheap_config.h.in).
# Main entry point: the cache variables below, one line of help each.
#
# Parameters are MCA-style environment variables <prefix><framework>_<name>.
# The defaults keep Open MPI's documented names working:
#   OMPI_MCA_mpi_leave_pinned, OMPI_MCA_mpi_leave_pinned_pipeline,
#   OMPI_MCA_memory_ptmalloc2_disable.
# A runtime with its own parameter system sets e.g.
#   -DPINHEAP_PARAM_PREFIX=MYRT_MCA_ -DPINHEAP_PARAM_DISABLE=memory_pinheap_disable

set(PINHEAP_PARAM_PREFIX "OMPI_MCA_" CACHE STRING
    "Prefix of the MCA-style environment variables (<prefix><framework>_<name>); may be empty")
set(PINHEAP_PARAM_LEAVE_PINNED "mpi_leave_pinned" CACHE STRING
    "<framework>_<name> of the leave-pinned parameter (rows of the decision matrix)")
set(PINHEAP_PARAM_LEAVE_PINNED_PIPELINE "mpi_leave_pinned_pipeline" CACHE STRING
    "<framework>_<name> of the leave-pinned-pipeline parameter (columns of the decision matrix)")
set(PINHEAP_PARAM_DISABLE "memory_ptmalloc2_disable" CACHE STRING
    "<framework>_<name> of the component's disable parameter (1/true/yes keeps pinheap disabled)")
set(PINHEAP_MODE_VAR "PINHEAP_MODE" CACHE STRING
    "Environment variable of the explicit override: on, off or auto (off always wins)")
set(PINHEAP_PROBE_ROOT_VAR "PINHEAP_PROBE_ROOT" CACHE STRING
    "Environment variable naming the root directory the driver probe looks under (default /)")
set(PINHEAP_OMPI_SYSCONFDIR "/etc/openmpi" CACHE STRING
    "Open MPI's sysconfdir: its openmpi-mca-params.conf is read (OMPI_MCA_ prefix only) unless OPAL_SYSCONFDIR names another")

# Open MPI's parameter habits -- its parameter files and its boolean
# spellings (config/params.c) -- belong to its own names: they are on when
# the prefix is Open MPI's, and a runtime with its own prefix keeps plain
# environment variables.
if(PINHEAP_PARAM_PREFIX STREQUAL "OMPI_MCA_")
  set(PINHEAP_PARAM_FILES 1)
else()
  set(PINHEAP_PARAM_FILES 0)
endif()
if(NOT PINHEAP_OMPI_SYSCONFDIR MATCHES "^/[^\"]*$")
  message(FATAL_ERROR
    "pinheap: PINHEAP_OMPI_SYSCONFDIR='${PINHEAP_OMPI_SYSCONFDIR}' is not an absolute path "
    "(expected '/' first and no double quote, e.g. /etc/openmpi).")
endif()

if(NOT PINHEAP_PARAM_PREFIX MATCHES "^([A-Za-z_][A-Za-z0-9_]*)?$")
  message(FATAL_ERROR
    "pinheap: PINHEAP_PARAM_PREFIX='${PINHEAP_PARAM_PREFIX}' is not a valid environment "
    "variable prefix (expected letters, digits and underscores, not starting with a digit, "
    "or empty).")
endif()
foreach(var PINHEAP_PARAM_LEAVE_PINNED PINHEAP_PARAM_LEAVE_PINNED_PIPELINE PINHEAP_PARAM_DISABLE)
  if(NOT ${var} MATCHES "^[A-Za-z0-9]+_[A-Za-z0-9_]+$")
    message(FATAL_ERROR
      "pinheap: ${var}='${${var}}' is not a parameter name of the form <framework>_<name> "
      "(expected letters, digits and underscores with at least one underscore after the "
      "framework, e.g. mpi_leave_pinned).")
  endif()
  if(PINHEAP_PARAM_PREFIX STREQUAL "" AND ${var} MATCHES "^[0-9]")
    message(FATAL_ERROR
      "pinheap: ${var}='${${var}}' starts with a digit and PINHEAP_PARAM_PREFIX is empty: "
      "the environment variable name would not be valid (expected a leading letter or '_').")
  endif()
endforeach()
foreach(var PINHEAP_MODE_VAR PINHEAP_PROBE_ROOT_VAR)
  if(NOT ${var} MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR
      "pinheap: ${var}='${${var}}' is not a valid environment variable name "
      "(expected letters, digits and underscores, not starting with a digit).")
  endif()
endforeach()
