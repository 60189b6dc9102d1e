/*
 * startup.c -- what the memory component costs an MPI rank's start-up, for
 * tools/openmpi/bench.py: the time from exec to main (the loader, the core
 * libraries' constructors: pinheap's decision and installation when
 * libopen-pal holds it) and the time Open MPI takes to open its memory
 * framework (memory/patcher patches munmap, mremap, madvise ... there, when
 * a registration cache, UCX or libfabric first needs the hooks: in
 * MPI_Init; memory/pinheap runs its self-test there).  A component that
 * works before main and one that works in MPI_Init are compared on the
 * sum.
 *
 * Built by each mpicc, with -lopen-pal (the framework is libopen-pal's).
 * With no argument it writes "T_MAIN OPEN" to fd 3: the CLOCK_MONOTONIC
 * time at main and the framework open's duration, in nanoseconds.  With
 * "spawn N": runs itself N times (posix_spawn, fd 3 a pipe) and prints the
 * median and the quartiles of the time from just before the spawn to main,
 * then the same for spawn to main plus the framework's open (us).  It
 * references MPI_Initialized, so libmpi is loaded as an MPI program's is;
 * nothing calls MPI_Init.
 */
#include <mpi.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* libopen-pal's, declared here: Open MPI installs no header for them */
int opal_init_util(int *argc, char ***argv);
int mca_base_framework_open(void *framework, int flags);
extern char opal_memory_base_framework[];

static int64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void quartiles(int64_t *d, int n)
{
  qsort(d, (size_t)n, sizeof(*d), cmp);
  printf("%.1f %.1f %.1f\n", d[n / 2] / 1e3, d[n / 4] / 1e3, d[3 * n / 4] / 1e3);
}

int main(int argc, char **argv)
{
  int64_t t_main = now_ns();
  int flag;
  MPI_Initialized(&flag);                     /* a real reference to libmpi */
  if (argc < 3 || strcmp(argv[1], "spawn") != 0) {
    if (opal_init_util(&argc, &argv) != 0)
      return 2;
    int64_t t0 = now_ns();
    if (mca_base_framework_open(opal_memory_base_framework, 0) != 0)
      return 3;
    dprintf(3, "%lld %lld\n", (long long)t_main, (long long)(now_ns() - t0));
    return 0;
  }
  int n = atoi(argv[2]);
  if (n < 1) {
    fprintf(stderr, "startup: spawn %s: expected a positive count\n", argv[2]);
    return 1;
  }
  int64_t *d = calloc((size_t)n, sizeof(*d)), *all = calloc((size_t)n, sizeof(*all));
  char *child[] = { argv[0], NULL };
  for (int i = 0; i < n; i++) {
    int fds[2];
    if (pipe(fds) != 0)
      return 1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 3);
    pid_t pid;
    int64_t t0 = now_ns();
    if (posix_spawn(&pid, argv[0], &fa, NULL, child, environ) != 0)
      return 1;
    close(fds[1]);
    char buf[64] = "";
    ssize_t got = read(fds[0], buf, sizeof(buf) - 1);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    posix_spawn_file_actions_destroy(&fa);
    long long main_at, open_ns;
    if (got <= 0 || sscanf(buf, "%lld %lld", &main_at, &open_ns) != 2) {
      fprintf(stderr, "startup: a child said %s(exit status %d)\n", got > 0 ? buf : "nothing ",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      return 1;
    }
    d[i] = main_at - t0;
    all[i] = d[i] + open_ns;
  }
  quartiles(d, n);
  quartiles(all, n);
  return 0;
}
