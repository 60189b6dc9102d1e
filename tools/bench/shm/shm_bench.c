/*
 * shm_bench.c -- moving a message from rank 0 to rank 1 of one node, five
 * ways (issue 11, item 6): MPI_Send/MPI_Recv; one copy out of pinheap's
 * shared heap (the sender mallocs, sends the 8-byte address, the receiver
 * copies from it in place); one copy out of a raw shared mapping (the
 * ceiling for the shared heap); CMA (process_vm_readv of the sender's
 * buffer); a pipelined two-copy ring in a shared mapping (sender copies
 * chunks in, receiver copies them out, as MPI's shared-memory transports do
 * without CMA).  Run under mpirun -np 2 with the ranks bound to different
 * cores by tools/bench/shm/run.py.
 *
 * Per message: the sender rewrites its whole buffer (a resent unchanged
 * buffer would be read from the receiver's cache and flatter one-copy
 * methods), then the clock starts; the receiver has every byte in its
 * private buffer and sends a 0-byte acknowledgement; the sender's clock
 * stops when it arrives.  Sender CPU time counts from the start until the
 * send operation returned (not the wait for the acknowledgement): what the
 * sender pays.  The receiver checks the bytes of the first and the last
 * message of every size.
 *
 * Usage: shm_bench METHOD MAXSIZE BYTES_PER_SIZE
 *   METHOD  mpi | heap | raw | cma | ring
 *   heap needs pinheap's shared heap in the process (PINHEAP_SHM_SIZE set,
 *   pinheap serving malloc): it checks that the buffer is in the region.
 * Prints "size method usec_per_msg sender_cpu_usec" lines from rank 0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* pinheap's API by name (the program does not include pinheap.h): the
 * prefix comes from the build */
#define STR2(x) #x
#define STR(x) STR2(x)
#define PINHEAP_SHM_CONTAINS STR(PINHEAP_BENCH_PREFIX) "shm_contains"

#define RING_SLOTS 8
#define RING_CHUNK (128u << 10)

typedef struct ring_slot_s {
  _Atomic size_t full;        /* bytes in the slot; 0: empty */
  char pad[64 - sizeof(size_t)];
} ring_slot_t;

static int rank;
static const char *method;
static char *raw_base;        /* raw / ring: the shared mapping */
static size_t raw_size;

static double now_us(clockid_t c)
{
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what)
{
  fprintf(stderr, "shm_bench rank %d (%s): %s\n", rank, method, what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static void fill(char *p, size_t n, unsigned seed)
{
  uint64_t v = 0x9e3779b97f4a7c15ull * (seed + 1);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    memcpy(p + i, &v, 8);
    v += 0x632be59bd9b4e019ull;
  }
  for (; i < n; i++)
    p[i] = (char)(seed + i);
}

/* The raw mapping: rank 0 creates it, both map it (any address). */
static void raw_setup(size_t size)
{
  char name[64];
  int jobid;
  if (rank == 0)
    jobid = (int)getpid();
  MPI_Bcast(&jobid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  snprintf(name, sizeof(name), "/pinheap-shmbench-%d", jobid);
  int fd = -1;
  if (rank == 0) {
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
      die("shm_open/ftruncate of the raw mapping");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1 && (fd = shm_open(name, O_RDWR, 0)) < 0)
    die("shm_open of the raw mapping");
  raw_base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (raw_base == MAP_FAILED)
    die("mmap of the raw mapping");
  close(fd);
  raw_size = size;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    shm_unlink(name);       /* both hold it; nothing left in /dev/shm */
}

static void ring_send(const char *src, size_t n)
{
  ring_slot_t *slots = (ring_slot_t *)raw_base;
  char *data = raw_base + 4096;
  size_t off = 0;
  for (unsigned k = 0; off < n; k = (k + 1) % RING_SLOTS) {
    size_t c = n - off < RING_CHUNK ? n - off : RING_CHUNK;
    while (atomic_load_explicit(&slots[k].full, memory_order_acquire) != 0)
      ;
    memcpy(data + (size_t)k * RING_CHUNK, src + off, c);
    atomic_store_explicit(&slots[k].full, c, memory_order_release);
    off += c;
  }
}

static void ring_recv(char *dst, size_t n)
{
  ring_slot_t *slots = (ring_slot_t *)raw_base;
  char *data = raw_base + 4096;
  size_t off = 0;
  for (unsigned k = 0; off < n; k = (k + 1) % RING_SLOTS) {
    size_t c;
    while ((c = atomic_load_explicit(&slots[k].full, memory_order_acquire)) == 0)
      ;
    memcpy(dst + off, data + (size_t)k * RING_CHUNK, c);
    atomic_store_explicit(&slots[k].full, 0, memory_order_release);
    off += c;
  }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int nranks;
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (argc != 4) {
    if (rank == 0)
      fprintf(stderr, "usage: shm_bench mpi|heap|raw|cma|ring MAXSIZE BYTES_PER_SIZE\n");
    MPI_Finalize();
    return 64;
  }
  method = argv[1];
  size_t maxsize = strtoull(argv[2], NULL, 0);
  double per_size = strtod(argv[3], NULL);
  int m_mpi = !strcmp(method, "mpi"), m_heap = !strcmp(method, "heap");
  int m_raw = !strcmp(method, "raw"), m_cma = !strcmp(method, "cma"), m_ring = !strcmp(method, "ring");
  if (!(m_mpi || m_heap || m_raw || m_cma || m_ring)) {
    if (rank == 0)
      fprintf(stderr, "shm_bench: unknown method '%s' (expected mpi, heap, raw, cma or ring)\n",
              method);
    MPI_Finalize();
    return 64;
  }
  if (nranks != 2 || maxsize < 1024 || per_size <= 0) {
    if (rank == 0)
      fprintf(stderr, "shm_bench: needs exactly 2 ranks (got %d), MAXSIZE >= 1024 (got %zu) and "
                      "BYTES_PER_SIZE > 0\n", nranks, maxsize);
    MPI_Finalize();
    return 64;
  }

  if (m_raw)
    raw_setup(maxsize);
  if (m_ring)
    raw_setup(4096 + (size_t)RING_SLOTS * RING_CHUNK);
  int (*shm_contains)(const void *) = NULL;
  if (m_heap) {
    shm_contains = (int (*)(const void *))dlsym(RTLD_DEFAULT, PINHEAP_SHM_CONTAINS);
    if (shm_contains == NULL)
      die("pinheap's shm_contains not found: pinheap's shared heap is not in this process");
  }
  pid_t peer_pid = getpid();
  MPI_Bcast(&peer_pid, sizeof(peer_pid), MPI_BYTE, 0, MPI_COMM_WORLD);

  /* the sender's buffer: private (mpi, cma, ring), the shared heap (heap)
   * or the raw mapping (raw); the receiver's: private */
  char *buf = NULL;
  if (rank == 0) {
    buf = m_raw ? raw_base : malloc(maxsize);
    if (buf == NULL)
      die("malloc of the send buffer");
    if (m_heap && !shm_contains(buf))
      die("the send buffer is not in the shared heap (is PINHEAP_SHM_SIZE set?)");
  } else {
    buf = malloc(maxsize);
    if (buf == NULL)
      die("malloc of the receive buffer");
  }
  memset(buf, 0, maxsize);
  char *check = rank == 1 ? malloc(maxsize) : NULL;

  for (size_t n = 1024; n <= maxsize; n *= 4) {
    int iters = (int)(per_size / (double)n);
    iters = iters < 4 ? 4 : iters > 20000 ? 20000 : iters;
    double wall = 0, cpu = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < iters; it++) {
      if (rank == 0) {
        fill(buf, n, (unsigned)it);
        double t0 = now_us(CLOCK_MONOTONIC), c0 = now_us(CLOCK_THREAD_CPUTIME_ID);
        if (m_mpi) {
          MPI_Send(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        } else if (m_ring) {
          ring_send(buf, n);
        } else {
          uintptr_t a = (uintptr_t)buf;
          MPI_Send(&a, sizeof(a), MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        }
        cpu += now_us(CLOCK_THREAD_CPUTIME_ID) - c0;
        MPI_Recv(NULL, 0, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        wall += now_us(CLOCK_MONOTONIC) - t0;
      } else {
        if (m_mpi) {
          MPI_Recv(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (m_ring) {
          ring_recv(buf, n);
        } else {
          uintptr_t a;
          MPI_Recv(&a, sizeof(a), MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          if (m_heap) {
            memcpy(buf, (const void *)a, n);          /* the same address here */
          } else if (m_raw) {
            memcpy(buf, raw_base, n);                 /* the mapping, wherever it is here */
          } else {
            struct iovec l = { buf, n }, r = { (void *)a, n };
            if (process_vm_readv(peer_pid, &l, 1, &r, 1, 0) != (ssize_t)n)
              die("process_vm_readv (CMA) failed: ptrace scope? see /proc/sys/kernel/yama/ptrace_scope");
          }
        }
        if (it == 0 || it == iters - 1) {
          fill(check, n, (unsigned)it);
          if (memcmp(check, buf, n) != 0)
            die("the received bytes differ from the ones sent");
        }
        MPI_Send(NULL, 0, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
      }
    }
    if (rank == 0)
      printf("%zu %s %.3f %.3f\n", n, method, wall / iters, cpu / iters);
    fflush(stdout);
  }
  if (rank == 0 && !m_raw)
    free(buf);
  free(check);
  if (rank == 1)
    free(buf);
  MPI_Finalize();
  return 0;
}
