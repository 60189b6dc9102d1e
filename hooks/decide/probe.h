/*
 * probe.h -- the OS-bypass driver probe: is an RDMA-capable device present?
 *
 * Decides the "runtime" cells of the leave-pinned matrix (hooks/decide/decision.h).
 * Every path is looked up under a root directory given by the caller
 * ("/" on a real system, a fake tree under /tmp in tests).  Main entry
 * point: probe_run().
 *
 * What is checked (paths relative to the root; the first four groups are
 * Open MPI's classic ptmalloc2 list, the rest are today's devices):
 *   sys/class/infiniband      a directory with at least one entry (any
 *                             verbs device: mlx*, hfi1_*, efa_*, irdma*, ...)
 *   dev/open-mx               Open-MX
 *   dev/myri[0-9]             Myrinet MX (myri0 .. myri9)
 *   dev/ipath                 QLogic InfiniPath
 *   dev/kgni0                 Cray Gemini / Aries
 *   dev/mic/scif, dev/scif    Intel MIC SCIF
 *   dev/infiniband/uverbs<N>  kernel verbs device of any RDMA NIC
 *                             (InfiniBand, RoCE, iWARP, AWS EFA)
 *   dev/cxi<N>                HPE Slingshot 11 (CXI)
 *   dev/hfi1_<N>              Intel / Cornelis Omni-Path
 * "exists" means stat() succeeds (a device node, a file, a symlink to an
 * existing target: all count; a dangling symlink does not).  <N> is one or
 * more decimal digits and nothing else.
 *
 * Never allocates (it runs inside the very first malloc): stat(), open()
 * and the raw getdents64 system call into a stack buffer, no opendir.
 * Unreadable or odd entries (a file where a directory is expected, a path
 * too long for the buffer) count as "not found", never as an error.
 */
#ifndef PINHEAP_PROBE_H
#define PINHEAP_PROBE_H

#include "rename.h"

#include <stddef.h>

/** Longest full path (root + relative path) kept, including the NUL. */
#define PROBE_PATH_MAX 512
/** Room for the list of checks. */
#define PROBE_CHECK_MAX 16
/** Longest matched entry name kept per check, including the NUL. */
#define PROBE_NAME_MAX 64

/* Flags of probe_run(). */
#define PROBE_FIRST 0x0   /* stop at the first device found (start-up) */
#define PROBE_ALL   0x1   /* run every check (the info tool) */

/** One check and its outcome. */
typedef struct probe_check_s {
  const char *path;     /* as listed above, relative to the root, e.g. "dev/cxi<N>" */
  const char *what;     /* the network it indicates, e.g. "HPE Slingshot (CXI)" */
  int  is_checked;      /* 0 if skipped because an earlier check matched (PROBE_FIRST) */
  int  found;
  char match[PROBE_NAME_MAX]; /* for name-pattern checks, the entry that matched */
} probe_check_t;

typedef struct probe_result_s {
  int    found;                  /* 1 if any check found a device */
  char   root[PROBE_PATH_MAX];   /* the root used */
  char   path[PROBE_PATH_MAX];   /* full path of the first device found ("" if none) */
  size_t nchecks;                /* entries used in checks[] */
  probe_check_t checks[PROBE_CHECK_MAX];
} probe_result_t;

/** Looks for OS-bypass devices under root.
 *  @param [in]  root    the directory standing for "/" (NULL or "" = "/");
 *                       a trailing '/' is ignored
 *  @param [in]  flags   PROBE_FIRST or PROBE_ALL
 *  @param [out] out_p   found flag, first match, every check
 *  @return out_p->found */
int probe_run(const char *root, int flags, probe_result_t *out_p);

#endif /* PINHEAP_PROBE_H */
