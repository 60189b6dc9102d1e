/*
 * shm_mpi.c -- the shared-memory heap under a real MPI (issue 11, item 5):
 * built by the wrapper compiler mpicc with the core archive, run by mpirun
 * (test/multiproc/shm_mpi_tests.cmake).  Owns the demonstration only; the heap is
 * allocator/shm.c.  Main entry point: main().
 *
 * Every rank allocates its blocks with pinheap's malloc (the prefixed API:
 * pinheap's whatever the replacement decision) with PINHEAP_SHM_SIZE set,
 * so they lie in the shared region of its group.  The ranks of one group
 * share one region: each sends only the ADDRESS of its block (an MPI
 * message of 8 bytes) to the next rank of its group, which checks where it
 * lies (shm_contains, shm_owner), copies it once, checks every byte, and
 * frees it -- the block goes back to its owner, whose usage returns to its
 * baseline.  Between groups (simulated nodes: two job ids, hence two
 * regions) only data travels, by MPI_Sendrecv, and is checked.
 *
 * Modes (argv[1]):
 *   pairs    one group: the job id and the participant count come from the
 *            launcher (Open MPI's job id and local size)
 *   groups   two ranks per group: before MPI_Init the program execs itself
 *            again with PINHEAP_SHM_JOB (from the launcher's job id and
 *            rank / 2) and PINHEAP_SHM_RANKS=2, as a wrapper script would
 *
 * Output: one JSON line per rank; exit status 0 when every check passed.
 */
#include <mpi.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinheap.h"

#define BLOCK ((size_t)1 << 20)
#define NAME_MAX_LEN 128
#define TAG_ADDR 11
#define TAG_DATA 12

typedef struct rank_info_s {
  char name[NAME_MAX_LEN];    /* the region's object ("" off the shared heap) */
  uint64_t base;
  int index;
} rank_info_t;

static unsigned char pattern(int rank, size_t i, int round)
{
  return (unsigned char)(rank * 131 + (int)(i % 251) * 7 + round * 17 + 1);
}

static void fill(unsigned char *p, size_t n, int rank, int round)
{
  for (size_t i = 0; i < n; i++)
    p[i] = pattern(rank, i, round);
}

static long mismatches(const unsigned char *p, size_t n, int rank, int round)
{
  long bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += p[i] != pattern(rank, i, round);
  return bad;
}

static size_t in_use(void) { return PINHEAP_NAME(mallinfo2)().uordblks; }

/* groups mode, first pass: choose the job of this rank's group and exec
 * again (before MPI_Init: nothing of MPI's is started yet). */
static void group_exec(char **argv)
{
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  const char *j = getenv("OMPI_MCA_ess_base_jobid");
  char job[64], group[16];

  if (r == NULL)
    r = getenv("PMI_RANK");
  if (r == NULL) {
    printf("FAIL groups mode: no OMPI_COMM_WORLD_RANK or PMI_RANK (not under mpirun?)\n");
    exit(2);
  }
  snprintf(group, sizeof(group), "%d", atoi(r) / 2);
  snprintf(job, sizeof(job), "mpi%s-g%s", j != NULL ? j : "x", group);
  setenv("PINHEAP_SHM_JOB", job, 1);
  setenv("PINHEAP_SHM_RANKS", "2", 1);
  setenv("SHM_MPI_GROUP", group, 1);
  execv("/proc/self/exe", argv);
  printf("FAIL exec: %s\n", strerror(errno));
  exit(2);
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "pairs";
  int rank, size;
  long errors = 0;
  char why[256] = "";

  setvbuf(stdout, NULL, _IOLBF, 0);
  if (strcmp(mode, "groups") == 0 && getenv("SHM_MPI_GROUP") == NULL)
    group_exec(argv);
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      errors++;                                                   \
      if (why[0] == '\0')                                         \
        snprintf(why, sizeof(why), __VA_ARGS__);                  \
    }                                                             \
  } while (0)

  void *warm = PINHEAP_NAME(malloc)(16);      /* starts the heap */
  PINHEAP_NAME(free)(warm);
  size_t baseline = in_use();
  rank_info_t me, *all = calloc((size_t)size, sizeof(rank_info_t));
  memset(&me, 0, sizeof(me));
  if (PINHEAP_NAME(shm_name)() != NULL)
    snprintf(me.name, sizeof(me.name), "%s", PINHEAP_NAME(shm_name)());
  me.base = (uint64_t)(uintptr_t)PINHEAP_NAME(shm_base)();
  me.index = PINHEAP_NAME(shm_index)();
  MPI_Allgather(&me, sizeof(me), MPI_BYTE, all, sizeof(me), MPI_BYTE, MPI_COMM_WORLD);
  if (me.index < 0) {
    printf("FAIL rank %d: not on the shared heap\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  /* The group: the ranks on the same region, in rank order. */
  int group[64], gsize = 0, pos = -1, groups = 0;
  for (int r = 0; r < size && gsize < 64; r++) {
    if (strcmp(all[r].name, me.name) == 0) {
      if (r == rank)
        pos = gsize;
      group[gsize++] = r;
    }
    int first = 1;
    for (int q = 0; q < r; q++)
      first &= strcmp(all[q].name, all[r].name) != 0;
    groups += first;
  }
  int next = group[(pos + 1) % gsize], prev = group[(pos + gsize - 1) % gsize];

  /* Within the group: only the address travels; one copy. */
  unsigned char *mine = PINHEAP_NAME(malloc)(BLOCK);
  unsigned char *copy = PINHEAP_NAME(malloc)(BLOCK);
  CHECK(mine != NULL && copy != NULL, "malloc of %zu bytes failed", BLOCK);
  CHECK(PINHEAP_NAME(shm_contains)(mine) && PINHEAP_NAME(shm_owner)(mine) == me.index,
        "own block %p not in this process's part of the region", (void *)mine);
  fill(mine, BLOCK, rank, 0);
  uint64_t out_addr = (uint64_t)(uintptr_t)mine, in_addr = 0;
  MPI_Sendrecv(&out_addr, 1, MPI_UINT64_T, next, TAG_ADDR, &in_addr, 1, MPI_UINT64_T, prev,
               TAG_ADDR, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  unsigned char *theirs = (unsigned char *)(uintptr_t)in_addr;
  int within = 0;
  if (gsize > 1) {
    CHECK(all[prev].base == me.base, "rank %d maps the region at %#llx, this rank at %#llx", prev,
          (unsigned long long)all[prev].base, (unsigned long long)me.base);
    CHECK(PINHEAP_NAME(shm_contains)(theirs) == 1, "rank %d's block %p is not in the region", prev,
          (void *)theirs);
    CHECK(PINHEAP_NAME(shm_owner)(theirs) == all[prev].index, "shm_owner %d, rank %d has index %d",
          PINHEAP_NAME(shm_owner)(theirs), prev, all[prev].index);
    memcpy(copy, theirs, BLOCK);                  /* the single copy */
    long bad = mismatches(copy, BLOCK, prev, 0);
    CHECK(bad == 0, "%ld bytes of rank %d's block wrong", bad, prev);
    PINHEAP_NAME(free)(theirs);                   /* back to its owner */
    within = 1;
  }
  PINHEAP_NAME(free)(copy);
  MPI_Barrier(MPI_COMM_WORLD);
  /* mine was freed by prev: this process's usage is back to its baseline */
  size_t now = in_use();
  if (gsize > 1)
    CHECK(now == baseline, "usage %zu after the group freed its blocks, baseline %zu", now, baseline);

  /* Between groups: the data itself, by MPI; pointers stay in their group. */
  int between = 0;
  if (groups > 1) {
    int partner = -1, seen = 0;
    for (int r = 0; r < size; r++) {
      if (strcmp(all[r].name, me.name) != 0 && seen++ == pos)
        partner = r;
    }
    CHECK(partner >= 0, "no partner in the other group");
    if (partner >= 0) {
      unsigned char *out = PINHEAP_NAME(malloc)(BLOCK), *in = PINHEAP_NAME(malloc)(BLOCK);
      fill(out, BLOCK, rank, 1);
      MPI_Sendrecv(out, (int)BLOCK, MPI_BYTE, partner, TAG_DATA, in, (int)BLOCK, MPI_BYTE, partner,
                   TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      long bad = mismatches(in, BLOCK, partner, 1);
      CHECK(bad == 0, "%ld bytes from rank %d wrong", bad, partner);
      CHECK(strcmp(all[partner].name, me.name) != 0, "the partner shares the region");
      PINHEAP_NAME(free)(out);
      PINHEAP_NAME(free)(in);
      between = 1;
    }
  }
  CHECK(PINHEAP_NAME(malloc_check)() == 0, "malloc_check");

  long total = 0;
  MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  printf("{\"rank\":%d,\"object\":\"%s\",\"index\":%d,\"gsize\":%d,\"groups\":%d,"
         "\"within\":%d,\"between\":%d,\"errors\":%ld,\"total_errors\":%ld,\"why\":\"%s\"}\n",
         rank, me.name, me.index, gsize, groups, within, between, errors, total, why);
  free(all);
  MPI_Finalize();
  return total != 0;
}
