/*
 * test_probe.c -- tests of hooks/probe.c: the OS-bypass driver probe.
 *
 * Every check runs against fake trees under /tmp: an empty tree finds
 * nothing; each device kind is found and named; near-miss names, an empty
 * sys/class/infiniband, files where directories belong, dangling symlinks,
 * unreadable and crowded directories are handled without a crash.  Main
 * entry: the Criterion tests below.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocator/api/api.h"

#include "hooks/decide/probe.h"

static char root[64];

static void tree_make(void)
{
  strcpy(root, "/tmp/pinheap-probe-XXXXXX");
  cr_assert_not_null(mkdtemp(root));
}

static void tree_remove(void)
{
  char cmd[128];

  /* the tree may hold chmod 000 directories: make them removable first */
  snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", root, root);
  if (system(cmd) != 0)
    cr_log_warn("could not remove %s", root);
}

/* Creates root/rel: parent directories, then a file ('f'), a directory
 * ('d') or a symlink to target ('l'). */
static void tree_add(const char *rel, char kind, const char *target)
{
  char path[512];

  snprintf(path, sizeof(path), "%s/%s", root, rel);
  for (char *s = path + strlen(root) + 1; *s != '\0'; s++) {
    if (*s == '/') {
      *s = '\0';
      if (mkdir(path, 0755) != 0 && errno != EEXIST)
        cr_assert_fail("mkdir %s: %s", path, strerror(errno));
      *s = '/';
    }
  }
  if (kind == 'd') {
    cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
  } else if (kind == 'l') {
    cr_assert_eq(symlink(target, path), 0, "symlink %s: %s", path, strerror(errno));
  } else {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0, "create %s: %s", path, strerror(errno));
    close(fd);
  }
}

static const probe_check_t *check_find(const probe_result_t *r, const char *path)
{
  for (size_t i = 0; i < r->nchecks; i++) {
    if (strcmp(r->checks[i].path, path) == 0)
      return &r->checks[i];
  }
  cr_assert_fail("no check named %s", path);
  return NULL;
}

static void assert_nothing_found(const probe_result_t *r, const char *why)
{
  cr_assert_eq(r->found, 0, "%s: found %s", why, r->path);
  cr_assert_str_eq(r->path, "", "%s", why);
  for (size_t i = 0; i < r->nchecks; i++) {
    cr_assert_eq(r->checks[i].is_checked, 1, "%s: PROBE_ALL must run %s", why,
                 r->checks[i].path);
    cr_assert_eq(r->checks[i].found, 0, "%s: %s", why, r->checks[i].path);
  }
}

/* ---- the list --------------------------------------------------------------- */

Test(probe, lists_the_classic_and_modern_checks, .init = tree_make, .fini = tree_remove)
{
  static const char *const want[] = {
    "sys/class/infiniband", "dev/open-mx", "dev/myri[0-9]", "dev/ipath", "dev/kgni0",
    "dev/mic/scif", "dev/scif", "dev/infiniband/uverbs<N>", "dev/cxi<N>", "dev/hfi1_<N>",
  };
  probe_result_t r;

  probe_run(root, PROBE_ALL, &r);
  cr_assert_eq(r.nchecks, sizeof(want) / sizeof(want[0]));
  for (size_t i = 0; i < r.nchecks; i++) {
    cr_assert_str_eq(r.checks[i].path, want[i]);
    cr_assert(r.checks[i].what != NULL && r.checks[i].what[0] != '\0');
  }
}

Test(probe, empty_tree_finds_nothing, .init = tree_make, .fini = tree_remove)
{
  probe_result_t r;

  memset(&r, 0x5a, sizeof(r));
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 0);
  assert_nothing_found(&r, "empty root");
  cr_assert_str_eq(r.root, root);
  /* empty dev/ and sys/ directories change nothing */
  tree_add("dev/infiniband", 'd', NULL);
  tree_add("dev/mic", 'd', NULL);
  tree_add("sys/class", 'd', NULL);
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 0);
  assert_nothing_found(&r, "empty directories");
}

Test(probe, missing_root_finds_nothing_and_keeps_errno)
{
  probe_result_t r;

  errno = 4242;
  cr_assert_eq(probe_run("/nonexistent/pinheap-probe-root", PROBE_ALL, &r), 0);
  cr_assert_eq(errno, 4242, "probe_run changed errno");
  assert_nothing_found(&r, "missing root");
}

/* ---- each device kind --------------------------------------------------------- */

/* Criterion runs each parameter in a fresh process: the cases hold their
 * strings inline, not pointers into the parent's memory. */
typedef struct device_case_s {
  char create[48];   /* relative path of the entry to create */
  char check[32];    /* the check that must find it */
  char match[16];    /* the entry name it reports ("" for exact paths) */
  char found[48];    /* the path reported, relative to root */
} device_case_t;

static device_case_t device_cases[] = {
  { "sys/class/infiniband/mlx5_0", "sys/class/infiniband", "mlx5_0", "sys/class/infiniband/mlx5_0" },
  { "sys/class/infiniband/hfi1_0", "sys/class/infiniband", "hfi1_0", "sys/class/infiniband/hfi1_0" },
  { "dev/open-mx", "dev/open-mx", "", "dev/open-mx" },
  { "dev/myri0", "dev/myri[0-9]", "myri0", "dev/myri0" },
  { "dev/myri9", "dev/myri[0-9]", "myri9", "dev/myri9" },
  { "dev/ipath", "dev/ipath", "", "dev/ipath" },
  { "dev/kgni0", "dev/kgni0", "", "dev/kgni0" },
  { "dev/mic/scif", "dev/mic/scif", "", "dev/mic/scif" },
  { "dev/scif", "dev/scif", "", "dev/scif" },
  { "dev/infiniband/uverbs0", "dev/infiniband/uverbs<N>", "uverbs0", "dev/infiniband/uverbs0" },
  { "dev/infiniband/uverbs12", "dev/infiniband/uverbs<N>", "uverbs12", "dev/infiniband/uverbs12" },
  { "dev/cxi0", "dev/cxi<N>", "cxi0", "dev/cxi0" },
  { "dev/cxi3", "dev/cxi<N>", "cxi3", "dev/cxi3" },
  { "dev/hfi1_0", "dev/hfi1_<N>", "hfi1_0", "dev/hfi1_0" },
  { "dev/hfi1_15", "dev/hfi1_<N>", "hfi1_15", "dev/hfi1_15" },
};

ParameterizedTestParameters(probe, each_device_kind_is_found_and_named)
{
  return cr_make_param_array(device_case_t, device_cases,
                             sizeof(device_cases) / sizeof(device_cases[0]));
}

ParameterizedTest(device_case_t *dc, probe, each_device_kind_is_found_and_named,
                  .init = tree_make, .fini = tree_remove)
{
  char want[600];
  probe_result_t r;
  const probe_check_t *hit;

  tree_add(dc->create, 'f', NULL);
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 1, "%s not found", dc->create);
  snprintf(want, sizeof(want), "%s/%s", root, dc->found);
  cr_assert_str_eq(r.path, want);
  hit = check_find(&r, dc->check);
  cr_assert_eq(hit->found, 1);
  cr_assert_str_eq(hit->match, dc->match);
  for (size_t i = 0; i < r.nchecks; i++) {
    if (&r.checks[i] != hit)
      cr_assert_eq(r.checks[i].found, 0, "%s also matched %s", dc->create, r.checks[i].path);
  }
  /* the start-up mode finds it too */
  cr_assert_eq(probe_run(root, PROBE_FIRST, &r), 1);
  cr_assert_str_eq(r.path, want);
}

/* ---- near misses --------------------------------------------------------------- */

Test(probe, near_miss_names_are_not_devices, .init = tree_make, .fini = tree_remove)
{
  static const char *const misses[] = {
    "dev/myri", "dev/myri10", "dev/myrix", "dev/myri0x", "dev/kgni1", "dev/ipath0x",
    "dev/open-mx0", "dev/infiniband/uverbs", "dev/infiniband/uverbsX",
    "dev/infiniband/uverbs0a", "dev/infiniband/rdma_cm", "dev/infiniband/umad0",
    "dev/uverbs0", "dev/cxi", "dev/cxil", "dev/cxi_0", "dev/hfi1", "dev/hfi1_",
    "dev/hfi1_diagpkt", "dev/hfi10", "dev/scif0/x", "dev/mic/scif0",
    "sys/class/infiniband_verbs/uverbs0", "sys/class/net/ib0",
  };
  probe_result_t r;

  for (size_t i = 0; i < sizeof(misses) / sizeof(misses[0]); i++)
    tree_add(misses[i], 'f', NULL);
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 0, "found %s", r.path);
  assert_nothing_found(&r, "near misses");
}

Test(probe, empty_sys_class_infiniband_does_not_count, .init = tree_make, .fini = tree_remove)
{
  probe_result_t r;

  tree_add("sys/class/infiniband", 'd', NULL);
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 0);
  assert_nothing_found(&r, "empty sys/class/infiniband");
  tree_add("sys/class/infiniband/irdma0", 'd', NULL);
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 1);
  cr_assert_str_eq(check_find(&r, "sys/class/infiniband")->match, "irdma0");
}

/* ---- odd entries ---------------------------------------------------------------- */

Test(probe, files_where_directories_belong, .init = tree_make, .fini = tree_remove)
{
  probe_result_t r;

  tree_add("sys/class/infiniband", 'f', NULL);
  tree_add("dev/infiniband", 'f', NULL);
  tree_add("dev/mic", 'f', NULL);
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 0);
  assert_nothing_found(&r, "files instead of directories");
}

Test(probe, dangling_symlinks_do_not_count, .init = tree_make, .fini = tree_remove)
{
  char target[256];
  probe_result_t r;

  tree_add("dev/cxi0", 'l', "/nonexistent/pinheap-target");
  tree_add("dev/kgni0", 'l', "/nonexistent/pinheap-target");
  tree_add("dev/infiniband/uverbs0", 'l', "../../nowhere");
  tree_add("sys/class/infiniband/mlx5_0", 'l', "/nonexistent/pinheap-target");
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 0, "found %s", r.path);
  assert_nothing_found(&r, "dangling symlinks");
  /* a symlink to something that exists does count (sysfs is all symlinks) */
  tree_add("devices/mlx5_1", 'd', NULL);
  snprintf(target, sizeof(target), "%s/devices/mlx5_1", root);
  tree_add("sys/class/infiniband/mlx5_1", 'l', target);
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 1);
  cr_assert_str_eq(check_find(&r, "sys/class/infiniband")->match, "mlx5_1");
}

Test(probe, crowded_directory_is_scanned_to_the_end, .init = tree_make, .fini = tree_remove)
{
  char rel[128];
  probe_result_t r;

  /* far more entries than one getdents64 buffer holds */
  for (int i = 0; i < 600; i++) {
    snprintf(rel, sizeof(rel), "dev/infiniband/some-other-rather-long-device-name-%04d", i);
    tree_add(rel, 'f', NULL);
  }
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 0);
  tree_add("dev/infiniband/uverbs7", 'f', NULL);
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 1);
  cr_assert_str_eq(check_find(&r, "dev/infiniband/uverbs<N>")->match, "uverbs7");
}

Test(probe, unreadable_directory_does_not_crash, .init = tree_make, .fini = tree_remove)
{
  char path[256];
  probe_result_t r;
  int found;

  tree_add("dev/infiniband/uverbs0", 'f', NULL);
  tree_add("sys/class/infiniband/mlx5_0", 'f', NULL);
  snprintf(path, sizeof(path), "%s/dev/infiniband", root);
  cr_assert_eq(chmod(path, 0), 0);
  snprintf(path, sizeof(path), "%s/sys/class/infiniband", root);
  cr_assert_eq(chmod(path, 0), 0);
  found = probe_run(root, PROBE_ALL, &r);
  if (geteuid() == 0) {
    /* root reads through permissions: the devices are there */
    cr_assert_eq(found, 1);
  } else {
    cr_assert_eq(found, 0);
    assert_nothing_found(&r, "unreadable directories");
  }
}

/* ---- roots and modes ------------------------------------------------------------- */

Test(probe, trailing_slashes_on_the_root_are_ignored, .init = tree_make, .fini = tree_remove)
{
  char slashed[128];
  char want[256];
  probe_result_t r;

  tree_add("dev/scif", 'f', NULL);
  snprintf(want, sizeof(want), "%s/dev/scif", root);
  snprintf(slashed, sizeof(slashed), "%s/", root);
  cr_assert_eq(probe_run(slashed, PROBE_FIRST, &r), 1);
  cr_assert_str_eq(r.path, want);
  snprintf(slashed, sizeof(slashed), "%s///", root);
  cr_assert_eq(probe_run(slashed, PROBE_FIRST, &r), 1);
  cr_assert_str_eq(r.path, want);
  cr_assert_str_eq(r.root, slashed);
}

Test(probe, first_mode_stops_all_mode_reports_everything, .init = tree_make,
     .fini = tree_remove)
{
  char want[256];
  probe_result_t r;

  tree_add("sys/class/infiniband/mlx5_0", 'f', NULL);
  tree_add("dev/cxi1", 'f', NULL);
  snprintf(want, sizeof(want), "%s/sys/class/infiniband/mlx5_0", root);

  cr_assert_eq(probe_run(root, PROBE_FIRST, &r), 1);
  cr_assert_str_eq(r.path, want);
  cr_assert_eq(check_find(&r, "sys/class/infiniband")->is_checked, 1);
  cr_assert_eq(check_find(&r, "dev/cxi<N>")->is_checked, 0);
  cr_assert_eq(check_find(&r, "dev/cxi<N>")->found, 0);

  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 1);
  cr_assert_str_eq(r.path, want, "the first match is reported");
  cr_assert_eq(check_find(&r, "dev/cxi<N>")->is_checked, 1);
  cr_assert_eq(check_find(&r, "dev/cxi<N>")->found, 1);
  cr_assert_str_eq(check_find(&r, "dev/cxi<N>")->match, "cxi1");
}

/* dev/ holds the entries of three unit checks, read in one scan: each check
 * gets its own entry, near misses of one prefix answer no other, and the
 * answers do not depend on which check asked first. */
Test(probe, one_directory_answers_every_unit_check, .init = tree_make, .fini = tree_remove)
{
  static const char *const entries[] = {
    "dev/myri10", "dev/cxi", "dev/hfi1_diagpkt", "dev/hfi1_2", "dev/cxi7", "dev/myri4",
    "dev/cxil",
  };
  char want[600];
  probe_result_t r;

  for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
    tree_add(entries[i], 'f', NULL);
  cr_assert_eq(probe_run(root, PROBE_ALL, &r), 1);
  cr_assert_str_eq(check_find(&r, "dev/myri[0-9]")->match, "myri4");
  cr_assert_str_eq(check_find(&r, "dev/cxi<N>")->match, "cxi7");
  cr_assert_str_eq(check_find(&r, "dev/hfi1_<N>")->match, "hfi1_2");
  snprintf(want, sizeof(want), "%s/dev/myri4", root);
  cr_assert_str_eq(r.path, want, "the first check in table order names the path");
  cr_assert_eq(check_find(&r, "dev/infiniband/uverbs<N>")->found, 0);

  /* the start-up mode stops at the first: the same path */
  cr_assert_eq(probe_run(root, PROBE_FIRST, &r), 1);
  cr_assert_str_eq(r.path, want);
  cr_assert_eq(check_find(&r, "dev/cxi<N>")->is_checked, 0);
}

Test(probe, null_and_empty_root_mean_slash, .init = tree_make, .fini = tree_remove)
{
  static const char *const every_kind[] = {
    "sys/class/infiniband/mlx5_0", "dev/open-mx", "dev/myri0", "dev/ipath", "dev/kgni0",
    "dev/mic/scif", "dev/scif", "dev/infiniband/uverbs0", "dev/cxi0", "dev/hfi1_0",
  };
  char cwd[512];
  probe_result_t a;
  probe_result_t b;
  probe_result_t c;
  probe_result_t fake;

  /* The current directory holds a device of every kind: a NULL or empty
   * root taken as "." (or as a relative base) would find them all. */
  for (size_t i = 0; i < sizeof(every_kind) / sizeof(every_kind[0]); i++)
    tree_add(every_kind[i], 'f', NULL);
  probe_run(root, PROBE_ALL, &fake);
  for (size_t i = 0; i < fake.nchecks; i++)
    cr_assert_eq(fake.checks[i].found, 1, "the fake tree lacks %s", fake.checks[i].path);
  cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
  cr_assert_eq(chdir(root), 0, "chdir %s: %s", root, strerror(errno));

  probe_run(NULL, PROBE_ALL, &a);
  probe_run("", PROBE_ALL, &b);
  cr_assert_eq(chdir("/"), 0);
  probe_run("/", PROBE_ALL, &c);
  cr_assert_eq(chdir(cwd), 0);

  cr_assert_str_eq(a.root, "/");
  cr_assert_str_eq(b.root, "/");
  cr_assert_str_eq(c.root, "/");
  cr_assert_eq(c.nchecks, fake.nchecks);
  for (size_t i = 0; i < c.nchecks; i++) {
    /* the real system, check by check: the same answers from the fake
     * tree's directory as from "/" itself */
    cr_assert_eq(a.checks[i].found, c.checks[i].found, "NULL root, %s: %d, \"/\": %d",
                 c.checks[i].path, a.checks[i].found, c.checks[i].found);
    cr_assert_eq(b.checks[i].found, c.checks[i].found, "empty root, %s: %d, \"/\": %d",
                 c.checks[i].path, b.checks[i].found, c.checks[i].found);
    cr_assert_str_eq(a.checks[i].match, c.checks[i].match);
  }
  cr_assert_str_eq(a.path, c.path);
  cr_assert_str_eq(b.path, c.path);
  /* paths of the real system start with a single '/', never in the tree */
  if (c.found) {
    cr_assert(c.path[0] == '/' && c.path[1] != '/', "%s", c.path);
    cr_assert(strncmp(a.path, root, strlen(root)) != 0, "NULL root found %s", a.path);
  }
}

Test(probe, overlong_root_finds_nothing)
{
  char longroot[PROBE_PATH_MAX + 100];
  probe_result_t r;

  longroot[0] = '/';
  memset(longroot + 1, 'r', sizeof(longroot) - 2);
  longroot[sizeof(longroot) - 1] = '\0';
  cr_assert_eq(probe_run(longroot, PROBE_ALL, &r), 0);
  assert_nothing_found(&r, "overlong root");
  cr_assert_eq(strlen(r.root), PROBE_PATH_MAX - 1);
}
