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
 * Two more (issue 25, item 7), a split single copy: the receive buffer is
 * shared too (the receiver's malloc in the shared heap: heapsplit; a second
 * part of the raw mapping: rawsplit), so for a message of at least SPLIT_MIN
 * bytes sender and receiver copy at the same time, each its own part,
 * straight from the source block into the receive buffer: every byte is
 * still copied once.  The receive buffer is persistent (as MPI_Recv_init):
 * its address (heapsplit) and that of a flag word (a cache line in the
 * shared heap) reach the sender once, before the first message; the
 * acknowledgement of a message also re-posts the buffer for the next one.
 * Per message the sender sends {source address, split point R} by MPI_Send
 * (16 bytes; R = the size: no split), then copies bytes [R, size) and
 * stores the message's sequence number in the flag (release); the receiver
 * copies [0, R) and, when R < size, waits until the flag holds the sequence
 * number (acquire).  The sender's CPU time includes its part of the copy.
 * heapsplit checks the receive buffer and the flag are in the region (a
 * sender can see it: the region is at the same address everywhere); if not,
 * it falls back to the receiver copying alone (R = the size).
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
 * Usage: shm_bench METHOD MAXSIZE BYTES_PER_SIZE [SPLIT_MIN [SENDER_PERCENT]]
 *   METHOD  mpi | heap | raw | cma | ring | heapsplit | rawsplit
 *   heap and heapsplit need pinheap's shared heap in the process
 *   (PINHEAP_SHM_SIZE set, pinheap serving malloc): they check that the
 *   send buffer is in the region.
 *   SPLIT_MIN       smallest message the split methods split (default
 *                   SPLIT_MIN_DEFAULT below)
 *   SENDER_PERCENT  the sender's part of a split message, 1..99 (default
 *                   SPLIT_SENDER_PERCENT_DEFAULT), rounded down to 64 bytes
 * Prints "size method usec_per_msg sender_cpu_usec sender_bytes" lines from
 * rank 0 (sender_bytes: what the sender copied of the last message, 0 for
 * the methods that do not split).
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

/* the split methods' defaults, chosen by measurement
 * (tools/bench/results/issue25-shm2/README.md) */
#define SPLIT_MIN_DEFAULT ((size_t)64 << 10)
#define SPLIT_SENDER_PERCENT_DEFAULT 50

/* what the sender of a split method sends per message (heap, raw and cma
 * send the 8-byte address alone): the source (an address; for rawsplit an
 * offset in the mapping) and the split point (the receiver copies
 * [0, split), the sender the rest) */
typedef struct msg_s {
  uintptr_t src;
  uint64_t split;
} msg_t;

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

/* rawsplit's layout of the raw mapping: the flag's cache line, then the
 * send buffer, then the receive buffer (offsets: the mapping's address
 * differs between the ranks) */
#define RAWSPLIT_SRC 4096
static size_t rawsplit_dst(size_t maxsize)
{
  return RAWSPLIT_SRC + ((maxsize + 4095) & ~(size_t)4095);
}

/* the split point of an N-byte message: the sender copies the last
 * SENDER_PERCENT of it (rounded down to whole cache lines) */
static size_t split_point(size_t n, size_t split_min, int percent)
{
  if (n < split_min)
    return n;
  size_t part = (size_t)((double)n * percent / 100.0) & ~(size_t)63;
  return n - part;
}

static void flag_wait(_Atomic uint64_t *flag, uint64_t seq)
{
  while (atomic_load_explicit(flag, memory_order_acquire) != seq) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
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
  if (argc < 4 || argc > 6) {
    if (rank == 0)
      fprintf(stderr, "usage: shm_bench mpi|heap|raw|cma|ring|heapsplit|rawsplit MAXSIZE "
                      "BYTES_PER_SIZE [SPLIT_MIN [SENDER_PERCENT]]\n");
    MPI_Finalize();
    return 64;
  }
  method = argv[1];
  size_t maxsize = strtoull(argv[2], NULL, 0);
  double per_size = strtod(argv[3], NULL);
  size_t split_min = argc > 4 ? strtoull(argv[4], NULL, 0) : SPLIT_MIN_DEFAULT;
  int percent = argc > 5 ? atoi(argv[5]) : SPLIT_SENDER_PERCENT_DEFAULT;
  int m_mpi = !strcmp(method, "mpi"), m_heap = !strcmp(method, "heap");
  int m_raw = !strcmp(method, "raw"), m_cma = !strcmp(method, "cma"), m_ring = !strcmp(method, "ring");
  int m_hsplit = !strcmp(method, "heapsplit"), m_rsplit = !strcmp(method, "rawsplit");
  int m_split = m_hsplit || m_rsplit;
  if (!(m_mpi || m_heap || m_raw || m_cma || m_ring || m_split)) {
    if (rank == 0)
      fprintf(stderr, "shm_bench: unknown method '%s' (expected mpi, heap, raw, cma, ring, "
                      "heapsplit or rawsplit)\n", method);
    MPI_Finalize();
    return 64;
  }
  if (nranks != 2 || maxsize < 1024 || per_size <= 0 || percent < 1 || percent > 99) {
    if (rank == 0)
      fprintf(stderr, "shm_bench: needs exactly 2 ranks (got %d), MAXSIZE >= 1024 (got %zu), "
                      "BYTES_PER_SIZE > 0 and SENDER_PERCENT 1..99 (got %d)\n",
              nranks, maxsize, percent);
    MPI_Finalize();
    return 64;
  }

  if (m_raw)
    raw_setup(maxsize);
  if (m_ring)
    raw_setup(4096 + (size_t)RING_SLOTS * RING_CHUNK);
  if (m_rsplit)
    raw_setup(rawsplit_dst(maxsize) + maxsize);
  int (*shm_contains)(const void *) = NULL;
  if (m_heap || m_hsplit) {
    shm_contains = (int (*)(const void *))dlsym(RTLD_DEFAULT, PINHEAP_SHM_CONTAINS);
    if (shm_contains == NULL)
      die("pinheap's shm_contains not found: pinheap's shared heap is not in this process");
  }
  pid_t peer_pid = getpid();
  MPI_Bcast(&peer_pid, sizeof(peer_pid), MPI_BYTE, 0, MPI_COMM_WORLD);

  /* the sender's buffer: private (mpi, cma, ring), the shared heap (heap,
   * heapsplit) or the raw mapping (raw, rawsplit); the receiver's: private
   * (malloc: in the shared heap for heap and heapsplit), the raw mapping
   * for rawsplit */
  char *buf = NULL;
  if (rank == 0) {
    buf = m_raw ? raw_base : m_rsplit ? raw_base + RAWSPLIT_SRC : malloc(maxsize);
    if (buf == NULL)
      die("malloc of the send buffer");
    if ((m_heap || m_hsplit) && !shm_contains(buf))
      die("the send buffer is not in the shared heap (is PINHEAP_SHM_SIZE set?)");
  } else {
    buf = m_rsplit ? raw_base + rawsplit_dst(maxsize) : malloc(maxsize);
    if (buf == NULL)
      die("malloc of the receive buffer");
  }
  memset(buf, 0, maxsize);
  char *check = rank == 1 ? malloc(maxsize) : NULL;

  /* the split methods' persistent receive: the receive buffer and the flag
   * (rawsplit: the mapping's first cache line; heapsplit: a cache line the
   * receiver allocates, with the buffer's address sent once); the sender
   * splits only when both are shared */
  _Atomic uint64_t *flag = NULL;
  char *dst = NULL;             /* the sender's view of the receive buffer */
  int can_split = 0;
  if (m_rsplit) {
    flag = (_Atomic uint64_t *)raw_base;
    dst = raw_base + rawsplit_dst(maxsize);
    can_split = 1;
  } else if (m_hsplit) {
    uintptr_t post[2] = { 0, 0 };
    if (rank == 1) {
      void *f = NULL;
      if (posix_memalign(&f, 64, 64) != 0)
        die("posix_memalign of the flag");
      atomic_init((_Atomic uint64_t *)f, 0);
      flag = f;
      post[0] = (uintptr_t)buf;
      post[1] = (uintptr_t)f;
      MPI_Send(post, sizeof(post), MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    } else {
      MPI_Recv(post, sizeof(post), MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      dst = (char *)post[0];
      flag = (_Atomic uint64_t *)post[1];
      can_split = shm_contains(dst) && shm_contains(dst + maxsize - 1) && shm_contains(flag);
    }
  }
  uint64_t seq = 0;             /* messages so far: the flag's value */

  for (size_t n = 1024; n <= maxsize; n *= 4) {
    int iters = (int)(per_size / (double)n);
    iters = iters < 4 ? 4 : iters > 20000 ? 20000 : iters;
    double wall = 0, cpu = 0;
    size_t sender_bytes = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < iters; it++) {
      seq++;
      if (rank == 0) {
        fill(buf, n, (unsigned)it);
        double t0 = now_us(CLOCK_MONOTONIC), c0 = now_us(CLOCK_THREAD_CPUTIME_ID);
        if (m_mpi) {
          MPI_Send(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        } else if (m_ring) {
          ring_send(buf, n);
        } else if (m_split) {
          size_t r = can_split ? split_point(n, split_min, percent) : n;
          msg_t msg = { m_rsplit ? RAWSPLIT_SRC : (uintptr_t)buf, r };
          MPI_Send(&msg, sizeof(msg), MPI_BYTE, 1, 1, MPI_COMM_WORLD);
          if (r < n) {
            memcpy(dst + r, buf + r, n - r);
            atomic_store_explicit(flag, seq, memory_order_release);
          }
          sender_bytes = n - r;
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
        } else if (m_split) {
          msg_t msg;
          MPI_Recv(&msg, sizeof(msg), MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          const char *src = m_rsplit ? raw_base + msg.src : (const char *)msg.src;
          memcpy(buf, src, msg.split);
          if (msg.split < n)
            flag_wait(flag, seq);
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
      printf("%zu %s %.3f %.3f %zu\n", n, method, wall / iters, cpu / iters, sender_bytes);
    fflush(stdout);
  }
  if (rank == 0 && !m_raw && !m_rsplit)
    free(buf);
  free(check);
  if (rank == 1 && !m_rsplit)
    free(buf);
  if (rank == 1 && m_hsplit)
    free((void *)flag);
  MPI_Finalize();
  return 0;
}
