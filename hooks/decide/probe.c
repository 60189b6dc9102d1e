/*
 * probe.c -- looks for OS-bypass network devices under a root directory.
 *
 * Owns the table of device checks (probe_checks) and the directory scan
 * over the raw getdents64 system call; a directory that several checks look
 * in (dev/) is read once per run.  Main entry point: probe_run().
 * Runs inside the very first malloc: stack buffers only, no opendir, no
 * stdio; errno is preserved.  See probe.h for the list and its rules.
 *
 * Sources for the modern names:
 *  - dev/infiniband/uverbs<N>: the kernel's ib_uverbs character devices,
 *    created by udev as /dev/infiniband/uverbs0, uverbs1, ... (Red Hat
 *    bug 170053, rdma-core's udev rules); every verbs provider (mlx5,
 *    efa, irdma, rxe, hfi1, ...) shows up there.
 *  - dev/cxi<N>: HPE Slingshot 11; libcxi opens "/dev/cxi%u".
 *  - dev/hfi1_<N>: Omni-Path; Open MPI's psm2 MTL globs "/dev/hfi1_[0-9]"
 *    (hfi1_diagpkt and friends are not units and do not match).
 */
#include "allocator/api/api.h"
#include "allocator/base/startup.h"

#include "hooks/decide/probe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef enum check_kind_e {
  CHECK_EXISTS,        /* stat(dir/name) succeeds */
  CHECK_DIR_NONEMPTY,  /* dir holds at least one existing entry besides . and .. */
  CHECK_NAME_UNIT      /* dir holds an existing entry <prefix><digits> */
} check_kind_t;

typedef struct check_desc_s {
  const char  *path;        /* shown to users, relative to the root */
  const char  *dir;         /* directory looked at, relative to the root */
  const char  *name;        /* CHECK_EXISTS: entry; CHECK_NAME_UNIT: prefix */
  int          max_digits;  /* CHECK_NAME_UNIT: 0 = any number of digits */
  check_kind_t kind;
  const char  *what;
} check_desc_t;

static const check_desc_t probe_checks[] = {
  /* Open MPI's classic list */
  { "sys/class/infiniband", "sys/class/infiniband", NULL, 0, CHECK_DIR_NONEMPTY,
    "InfiniBand / RDMA verbs devices (sysfs)" },
  { "dev/open-mx", "dev", "open-mx", 0, CHECK_EXISTS, "Open-MX" },
  { "dev/myri[0-9]", "dev", "myri", 1, CHECK_NAME_UNIT, "Myrinet MX" },
  { "dev/ipath", "dev", "ipath", 0, CHECK_EXISTS, "QLogic InfiniPath" },
  { "dev/kgni0", "dev", "kgni0", 0, CHECK_EXISTS, "Cray Gemini / Aries" },
  { "dev/mic/scif", "dev/mic", "scif", 0, CHECK_EXISTS, "Intel MIC SCIF" },
  { "dev/scif", "dev", "scif", 0, CHECK_EXISTS, "Intel SCIF" },
  /* today's devices */
  { "dev/infiniband/uverbs<N>", "dev/infiniband", "uverbs", 0, CHECK_NAME_UNIT,
    "RDMA verbs device (InfiniBand, RoCE, iWARP, AWS EFA)" },
  { "dev/cxi<N>", "dev", "cxi", 0, CHECK_NAME_UNIT, "HPE Slingshot (CXI)" },
  { "dev/hfi1_<N>", "dev", "hfi1_", 0, CHECK_NAME_UNIT, "Omni-Path (hfi1)" },
};

#define PROBE_NCHECKS (sizeof(probe_checks) / sizeof(probe_checks[0]))
_Static_assert(PROBE_NCHECKS <= PROBE_CHECK_MAX, "PROBE_CHECK_MAX too small");

/* The kernel's record layout for getdents64. */
struct probe_dirent64 {
  uint64_t       d_ino;
  int64_t        d_off;
  unsigned short d_reclen;
  unsigned char  d_type;
  char           d_name[];
};

/* Appends s to buf (holding len bytes); 0 if it does not fit. */
PH_STARTUP_RARE static int path_append(char *buf, size_t *len, const char *s)
{
  size_t l = strlen(s);

  if (*len + l + 1 > PROBE_PATH_MAX)
    return 0;
  memcpy(buf + *len, s, l + 1);
  *len += l;
  return 1;
}

/* buf = base "/" rel ["/" name].  base has no trailing '/' ("" = root). */
PH_STARTUP_RARE static int path_join(char *buf, const char *base, const char *rel, const char *name)
{
  size_t len = 0;

  buf[0] = '\0';
  if (!path_append(buf, &len, base) || !path_append(buf, &len, "/")
      || !path_append(buf, &len, rel))
    return 0;
  if (name != NULL && (!path_append(buf, &len, "/") || !path_append(buf, &len, name)))
    return 0;
  return 1;
}

PH_STARTUP_RARE static int path_exists(const char *path)
{
  struct stat st;

  return stat(path, &st) == 0;
}

/* Does name match <prefix><digits> (1..max_digits digits, 0 = any)? */
PH_STARTUP_RARE static int name_is_unit(const char *name, const char *prefix, int max_digits)
{
  size_t pl = strlen(prefix);
  int digits = 0;

  if (strncmp(name, prefix, pl) != 0)
    return 0;
  for (const char *s = name + pl; *s != '\0'; s++, digits++) {
    if (*s < '0' || *s > '9')
      return 0;
  }
  return digits > 0 && (max_digits == 0 || digits <= max_digits);
}

/* The unit checks (<prefix><digits>) of one probe run: several look in the
 * same directory (three in dev/), which is read once for all of them. */
typedef struct unit_scan_s {
  signed char state[PROBE_NCHECKS];     /* 0 not scanned yet, 1 found, -1 not found */
  char name[PROBE_NCHECKS][256];        /* what each found check matched (NAME_MAX + 1) */
} unit_scan_t;

/* Scans the directory dirpath once.  Without a scan (NULL): @return 1 if
 * it holds an existing entry besides . and .., its name in match and its
 * path in full.  With one: every unit check j >= first on dir that is not
 * answered yet gets the first existing entry <prefix><digits> in directory
 * order (the same entry a scan of its own would find), or "not found". */
PH_STARTUP_RARE static int dir_scan(const char *dirpath, const char *dir, size_t first, unit_scan_t *scan,
                    char *match, char *full)
{
  char buf[2048] __attribute__((aligned(8)));
  int fd = open(dirpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int found = 0;
  size_t open_units = 0;

  if (scan != NULL) {
    for (size_t j = first; j < PROBE_NCHECKS; j++)
      if (probe_checks[j].kind == CHECK_NAME_UNIT && scan->state[j] == 0 &&
          strcmp(probe_checks[j].dir, dir) == 0)
        open_units++;
  }
  if (fd >= 0) {
    while (scan != NULL ? open_units > 0 : !found) {
      long n = ph_syscall(SYS_getdents64, fd, buf, sizeof(buf));
      if (n <= 0)
        break;   /* end of directory, or an error: what was seen is the answer */
      for (long off = 0; off < n && (scan != NULL ? open_units > 0 : !found);) {
        struct probe_dirent64 *d = (struct probe_dirent64 *)(buf + off);
        const char *name = d->d_name;
        size_t want = PROBE_NCHECKS;

        if (d->d_reclen == 0)
          break;
        off += d->d_reclen;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
          continue;
        if (scan != NULL) {
          for (size_t j = first; j < PROBE_NCHECKS && want == PROBE_NCHECKS; j++)
            if (probe_checks[j].kind == CHECK_NAME_UNIT && scan->state[j] == 0 &&
                strcmp(probe_checks[j].dir, dir) == 0 &&
                name_is_unit(name, probe_checks[j].name, probe_checks[j].max_digits))
              want = j;
          if (want == PROBE_NCHECKS)
            continue;
        }
        if (strlen(dirpath) + 1 + strlen(name) + 1 > PROBE_PATH_MAX)
          continue;
        strcpy(full, dirpath);
        strcat(full, "/");
        strcat(full, name);
        if (!path_exists(full))
          continue;   /* dangling symlink or vanished entry */
        if (scan != NULL) {
          /* a name is <prefix><digits> for at most one prefix of a directory
           * unless one prefix extends another; then each check still gets
           * its own first match (the entry may answer several) */
          for (size_t j = want; j < PROBE_NCHECKS; j++)
            if (probe_checks[j].kind == CHECK_NAME_UNIT && scan->state[j] == 0 &&
                strcmp(probe_checks[j].dir, dir) == 0 &&
                name_is_unit(name, probe_checks[j].name, probe_checks[j].max_digits)) {
              scan->state[j] = 1;
              strcpy(scan->name[j], name);
              open_units--;
            }
          continue;
        }
        if (strlen(name) < PROBE_NAME_MAX)
          strcpy(match, name);
        else
          match[0] = '\0';
        found = 1;
      }
    }
    close(fd);
  }
  if (scan != NULL) {
    for (size_t j = first; j < PROBE_NCHECKS; j++)
      if (probe_checks[j].kind == CHECK_NAME_UNIT && scan->state[j] == 0 &&
          strcmp(probe_checks[j].dir, dir) == 0)
        scan->state[j] = -1;
  }
  return found;
}

/* Runs check i; on success fills check->match and full. */
PH_STARTUP_RARE static int check_run(size_t i, const char *base, unit_scan_t *scan, probe_check_t *check,
                     char *full)
{
  const check_desc_t *desc = &probe_checks[i];
  char dirpath[PROBE_PATH_MAX];

  switch (desc->kind) {
  case CHECK_EXISTS:
    if (!path_join(full, base, desc->dir, desc->name))
      return 0;
    return path_exists(full);
  case CHECK_DIR_NONEMPTY:
    if (!path_join(dirpath, base, desc->dir, NULL))
      return 0;
    return dir_scan(dirpath, desc->dir, i, NULL, check->match, full);
  case CHECK_NAME_UNIT:
    if (!path_join(dirpath, base, desc->dir, NULL))
      return 0;
    if (scan->state[i] == 0)
      dir_scan(dirpath, desc->dir, i, scan, NULL, full);
    if (scan->state[i] != 1 || !path_join(full, base, desc->dir, scan->name[i]))
      return 0;
    if (strlen(scan->name[i]) < PROBE_NAME_MAX)
      strcpy(check->match, scan->name[i]);
    else
      check->match[0] = '\0';
    return 1;
  }
  return 0;
}

PH_STARTUP_RARE int probe_run(const char *root, int flags, probe_result_t *out_p)
{
  int saved_errno = errno;
  char base[PROBE_PATH_MAX];
  char full[PROBE_PATH_MAX];
  size_t len;
  int root_ok = 1;
  unit_scan_t scan;

  if (root == NULL || root[0] == '\0')
    root = "/";
  len = strlen(root);
  if (len >= PROBE_PATH_MAX) {
    /* Cannot be looked at: every check is "not found". */
    root_ok = 0;
    len = PROBE_PATH_MAX - 1;
  }
  memcpy(out_p->root, root, len);
  out_p->root[len] = '\0';
  memcpy(base, out_p->root, len + 1);
  while (len > 0 && base[len - 1] == '/')
    base[--len] = '\0';

  out_p->found = 0;
  out_p->path[0] = '\0';
  out_p->nchecks = PROBE_NCHECKS;
  memset(scan.state, 0, sizeof(scan.state));
  for (size_t i = 0; i < PROBE_NCHECKS; i++) {
    const check_desc_t *desc = &probe_checks[i];
    probe_check_t *check = &out_p->checks[i];

    check->path = desc->path;
    check->what = desc->what;
    check->found = 0;
    check->match[0] = '\0';
    check->is_checked = 0;
    if (out_p->found && !(flags & PROBE_ALL))
      continue;
    check->is_checked = 1;
    if (!root_ok || !check_run(i, base, &scan, check, full))
      continue;
    check->found = 1;
    if (!out_p->found) {
      out_p->found = 1;
      memcpy(out_p->path, full, strlen(full) + 1);
    }
  }
  errno = saved_errno;
  return out_p->found;
}
