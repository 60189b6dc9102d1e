/*
 * startup.c -- how long an MPI program takes from exec to main (the loader,
 * the core libraries' constructors: pinheap's decision and installation when
 * libopen-pal holds it), for tools/openmpi/bench.py.
 *
 * Built twice by mpicc (pinheap's Open MPI, Debian's).  With no argument it
 * writes the CLOCK_MONOTONIC time at main to fd 3, in nanoseconds.  With
 * "spawn N": runs itself N times (posix_spawn, fd 3 a pipe) and prints the
 * median and the quartiles of the time from just before the spawn to main.
 * It links -lmpi (it calls MPI_Initialized, which needs no MPI_Init).
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

int main(int argc, char **argv)
{
  int64_t t_main = now_ns();
  int flag;
  MPI_Initialized(&flag);                     /* a real reference to libmpi */
  if (argc < 3 || strcmp(argv[1], "spawn") != 0) {
    dprintf(3, "%lld\n", (long long)t_main);
    return 0;
  }
  int n = atoi(argv[2]);
  int64_t *d = calloc((size_t)n, sizeof(*d));
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
    waitpid(pid, NULL, 0);
    posix_spawn_file_actions_destroy(&fa);
    if (got <= 0)
      return 1;
    d[i] = atoll(buf) - t0;
  }
  qsort(d, (size_t)n, sizeof(*d), cmp);
  printf("%.1f %.1f %.1f\n", d[n / 2] / 1e3, d[n / 4] / 1e3, d[3 * n / 4] / 1e3);
  return 0;
}
