/*
 * shm_worker.c -- one process of the shared-heap tests (test/multiproc/test_shm.c
 * starts several with fork+exec).  It allocates with pinheap's malloc (the
 * prefixed API, PINHEAP_NAME(malloc)), so the shared heap starts inside its
 * first call when PINHEAP_SHM_SIZE is set.  Modes (argv[1]):
 *
 *   info            prints "index base size name" and allocates one block
 *   hold            starts the heap, prints "ready", waits to be killed
 *   ring PREV NEXT  the exchange: PREV and NEXT are socket descriptors to
 *                   the neighbours of a ring; this process sends its blocks
 *                   to NEXT, checks and rewrites PREV's blocks in place,
 *                   frees them, and checks its own usage returns to its
 *                   baseline once NEXT freed its blocks
 *   exhaust SIZE [hold]  mallocs SIZE-byte blocks until NULL (ENOMEM
 *                   expected) or, with the fallback, until past the region;
 *                   prints counts; with hold, keeps them until SIGTERM;
 *                   with SHM_WORKER_GATE=FILE, starts its heap, prints
 *                   "started" and waits for FILE first
 *   regrow FILE     allocates and writes 32 MiB in blocks of four sizes, frees
 *                   them and trims (the pages leave the object), prints
 *                   "trimmed BYTES" (the object's tmpfs usage), waits for
 *                   FILE to exist, then allocates (malloc, realloc growing a
 *                   block, posix_memalign) and writes blocks of those sizes
 *                   until NULL or past the region, as exhaust does
 *   double_free     frees one shared block twice (must end with SIGABRT)
 *   foreign         frees a pointer inside the region that malloc never
 *                   returned (must end with SIGABRT)
 *   squat ADDR      maps a page at ADDR first, then does what info does
 *   exec MODE       starts the heap, then execs this program in MODE (the
 *                   same process joins again after the exec)
 *   produce FD      allocates blocks of many sizes and streams their
 *                   addresses to FD while the other side frees them; at the
 *                   end its usage is back to its baseline
 *   consume FD      checks and frees every block it receives from FD
 *   threads         four threads allocate, free and hand blocks to each
 *                   other: every block in this process's part of the region
 *   fork            a forked child writes over, frees and allocates blocks
 *                   of the parent's: none of it reaches the region (the
 *                   child has a private copy); prints "forked ok", then as
 *                   hold
 *   give_back FD    mallocs and frees 64 MiB of large blocks and 4 MiB of
 *                   small ones beside live blocks it sends to FD, then calls
 *                   malloc_trim(0) and, once the peer heard, shm_poll(): its
 *                   release listener heard the ranges (inside the region,
 *                   none over a live block) and the object's tmpfs blocks
 *                   went down; prints "given back N"
 *   peek FD         reads the live blocks it receives from FD in place,
 *                   before and after the other side gave memory back; its
 *                   own listener hears that memory (shm_poll)
 *   release HOW     the driver of one scenario of releases every process
 *                   hears (it never allocates with pinheap): starts the
 *                   processes below on a job of its own, checks their exit
 *                   and that nothing is left in /dev/shm; prints
 *                   "release HOW ok".  HOW: heard, reused, untouched,
 *                   grown, dead, churn or ringfull.
 *   rel_give FD HOW frees a large block another process holds a pointer to
 *                   and trims: the pages stay until the other process has
 *                   heard (heard), are not removed once malloc took the
 *                   block again, written (reused) or not (untouched), or
 *                   realloc grew the block before it over it in place
 *                   (grown), or wait for an idle process and go once it is
 *                   killed (dead)
 *   rel_hear FD HOW the other process: its listener hears the range while
 *                   the pages still hold the block's bytes
 *   rel_churn FD    one of two processes that allocate, grow, free and trim
 *                   large blocks, polling: no live block loses its bytes
 *   rel_ring FD 1|2 more releases than the ring holds (1: gives, 2: hears
 *                   when told): those not posted are posted by the next trim
 *                   and all go, none kept for good
 *   fill            mallocs blocks of 1 MiB, then 64 KiB, 4 KiB and 256
 *                   bytes until NULL or a block outside the region (the
 *                   region is full for it),
 *                   prints "full", then as hold
 *   brief [die]     a short-lived process: allocates 1.5 MiB in blocks of many
 *                   sizes (all in the region), frees all but a few, prints
 *                   "brief ok INDEX" and exits (die: SIGKILLs itself)
 *   fork_snap       holds a block of 32 MiB and one of 1 GiB with one page
 *                   written, forks and writes the first block's last byte at
 *                   once: the child sees the block as it was at the fork,
 *                   and its copy of the region holds the pages written, not
 *                   the holes (its resident memory stays small); prints
 *                   "fork_snap ok" and the fork's time
 *   fork_time N [KIB] allocates KIB KiB in blocks (default 1024), then times N
 *                   forks (the child
 *                   _exits, the parent waits); prints "fork_time MEDIAN_US"
 *                   (tools/bench/shm/fork_cost.py: with and without the
 *                   shared heap)
 *   hammer FD       sends blocks of 3 KiB - 300 KiB to FD, 512 at a time (eat
 *                   frees them and acks) while allocating and freeing its own; once a write
 *                   fails (the peer was killed) goes on for 20000 more
 *                   operations: none may wait for the dead peer; prints
 *                   "hammer ok"
 *   eat FD          frees every block whose address arrives on FD; with
 *                   "twice" it frees the first one twice (must end with
 *                   SIGABRT, having taken nothing of the owner's)
 *
 * hold ends with exit(0) on SIGTERM, so that it leaves the heap properly.
 *
 * Exit status 0 when every check passed; otherwise one "FAIL ..." line.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pinheap.h"

/* The core's one release slot (allocator/os/os.c, name shifted as rename.h
 * does): the hooks layer's listeners hang from it; this worker links the
 * core alone. */
extern void PINHEAP_NAME(os_set_release_listener)(void (*fn)(void *addr, size_t len, void *ctx),
                                                  void *ctx);

#define NBLOCKS 48

static const size_t block_sizes[] = { 24, 100, 1000, 2000, 5000, 70000, 300000, 1500000 };

typedef struct msg_s {
  int index;
  int n;
  void *ptr[NBLOCKS];
  size_t size[NBLOCKS];
} msg_t;

static int fail(const char *what, long a, long b)
{
  printf("FAIL %s (%ld, %ld)\n", what, a, b);
  fflush(stdout);
  exit(2);
}

static void io_all(int fd, void *buf, size_t len, int out)
{
  char *p = buf;
  while (len > 0) {
    ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
    if (n <= 0)
      fail(out ? "write to a neighbour" : "read from a neighbour", (long)n, errno);
    p += n;
    len -= (size_t)n;
  }
}

static unsigned char pattern(int index, int i) { return (unsigned char)(index * 37 + i * 11 + 1); }

static size_t in_use(void)
{
  return PINHEAP_NAME(mallinfo2)().uordblks;
}

static void on_term(int sig)
{
  (void)sig;
  exit(0);                                    /* the heap is left by the destructor */
}

static int ring(int prev, int next)
{
  msg_t mine, theirs;
  char token = 0;
  void *warm = PINHEAP_NAME(malloc)(16);         /* starts the heap */
  PINHEAP_NAME(free)(warm);
  int me = PINHEAP_NAME(shm_index)();
  size_t baseline = in_use();
  if (me < 0)
    fail("not on the shared heap", me, 0);
  mine.index = me;
  mine.n = NBLOCKS;
  for (int i = 0; i < NBLOCKS; i++) {
    size_t sz = block_sizes[i % (sizeof(block_sizes) / sizeof(block_sizes[0]))] + (size_t)i;
    unsigned char *p = PINHEAP_NAME(malloc)(sz);
    if (p == NULL)
      fail("malloc", (long)sz, errno);
    if (!PINHEAP_NAME(shm_contains)(p) || PINHEAP_NAME(shm_owner)(p) != me)
      fail("a block outside this process's part of the region", PINHEAP_NAME(shm_owner)(p), me);
    memset(p, pattern(me, i), sz);
    mine.ptr[i] = p;
    mine.size[i] = sz;
  }
  io_all(next, &mine, sizeof(mine), 1);
  io_all(prev, &theirs, sizeof(theirs), 0);
  /* the neighbour's blocks, read and rewritten in place */
  for (int i = 0; i < theirs.n; i++) {
    unsigned char *p = theirs.ptr[i];
    if (PINHEAP_NAME(shm_owner)(p) != theirs.index)
      fail("shm_owner of a neighbour's block", PINHEAP_NAME(shm_owner)(p), theirs.index);
    for (size_t j = 0; j < theirs.size[i]; j++) {
      if (p[j] != pattern(theirs.index, i))
        fail("a neighbour's block does not hold its pattern", i, (long)j);
    }
    memset(p, pattern(theirs.index, i) ^ 0xff, theirs.size[i]);
  }
  io_all(prev, &token, 1, 1);
  io_all(next, &token, 1, 0);
  for (int i = 0; i < NBLOCKS; i++) {
    unsigned char *p = mine.ptr[i];
    for (size_t j = 0; j < mine.size[i]; j++) {
      if (p[j] != (unsigned char)(pattern(me, i) ^ 0xff))
        fail("the neighbour's writes are not seen in place", i, (long)j);
    }
  }
  if (in_use() <= baseline)
    fail("usage did not grow with the blocks", (long)in_use(), (long)baseline);
  /* checked: NEXT may free them now; PREV's may be freed once PREV checked */
  io_all(next, &token, 1, 1);
  io_all(prev, &token, 1, 0);
  /* the neighbour's blocks go back to their owner from here; the
   * statistics call hands this thread's gathered remote frees over */
  for (int i = 0; i < theirs.n; i++)
    PINHEAP_NAME(free)(theirs.ptr[i]);
  (void)in_use();
  io_all(prev, &token, 1, 1);
  io_all(next, &token, 1, 0);
  /* Every block of this process was freed by the neighbour: reclaimed
   * (the statistics take the remote stack in first). */
  size_t now = in_use();
  if (now != baseline)
    fail("the blocks freed by the neighbour were not reclaimed (in use, baseline)", (long)now,
         (long)baseline);
  if (PINHEAP_NAME(malloc_check)() != 0)
    fail("malloc_check", 1, 0);
  printf("ok %d\n", me);
  return 0;
}

#define STREAM_BLOCKS 40000
#define STREAM_BATCH 64
#define STREAM_WINDOW 16          /* batches between acknowledgements */

typedef struct stream_msg_s {
  int n;                       /* 0: the end */
  void *ptr[STREAM_BATCH];
  size_t size[STREAM_BATCH];
} stream_msg_t;

static size_t stream_size(unsigned *seed)
{
  *seed = *seed * 1103515245u + 12345u;
  unsigned r = (*seed >> 8) % 1000;
  return r < 900 ? 16 + r % 900 : r < 990 ? 1000 + (size_t)r * 50 : 200000 + (size_t)r * 100;
}

/* Blocks stream to the consumer, which frees them while this process goes
 * on allocating: the remote stack is pushed and taken in concurrently. */
static int produce(int fd)
{
  void *warm = PINHEAP_NAME(malloc)(16);
  PINHEAP_NAME(free)(warm);
  size_t baseline = in_use();
  unsigned seed = 7;
  stream_msg_t m;
  char ack;
  void *own[16] = { NULL };
  long batches = 0;

  m.n = 0;
  for (int i = 0; i < STREAM_BLOCKS; i++) {
    size_t sz = stream_size(&seed);
    unsigned char *p = PINHEAP_NAME(malloc)(sz);
    if (p == NULL)
      fail("malloc", (long)sz, errno);
    if (PINHEAP_NAME(shm_owner)(p) != PINHEAP_NAME(shm_index)())
      fail("a block outside this process's part", PINHEAP_NAME(shm_owner)(p), i);
    p[0] = (unsigned char)i;
    p[sz - 1] = (unsigned char)(i >> 3);
    if (i % 7 == 0) {                      /* some stay here for a while */
      PINHEAP_NAME(free)(own[i % 16]);
      own[i % 16] = p;
      continue;
    }
    m.ptr[m.n] = p;
    m.size[m.n] = sz;
    if (++m.n == STREAM_BATCH) {
      io_all(fd, &m, sizeof(m), 1);
      m.n = 0;
      if (++batches % STREAM_WINDOW == 0)
        io_all(fd, &ack, 1, 0);            /* at most two windows in flight */
    }
  }
  if (m.n > 0)
    io_all(fd, &m, sizeof(m), 1);
  for (int i = 0; i < 16; i++)
    PINHEAP_NAME(free)(own[i]);
  m.n = 0;
  io_all(fd, &m, sizeof(m), 1);
  io_all(fd, &ack, 1, 0);                  /* every block freed over there */
  size_t now = in_use();
  if (now != baseline)
    fail("the streamed blocks were not reclaimed (in use, baseline)", (long)now, (long)baseline);
  if (PINHEAP_NAME(malloc_check)() != 0)
    fail("malloc_check", 1, 0);
  printf("produced ok\n");
  return 0;
}

static int consume(int fd)
{
  stream_msg_t m;
  long blocks = 0, batches = 0;
  char ack = 1;

  for (;;) {
    io_all(fd, &m, sizeof(m), 0);
    if (m.n == 0)
      break;
    if (m.n == STREAM_BATCH && ++batches % STREAM_WINDOW == 0)
      io_all(fd, &ack, 1, 1);
    for (int i = 0; i < m.n; i++) {
      unsigned char *p = m.ptr[i];
      if (!PINHEAP_NAME(shm_contains)(p) || PINHEAP_NAME(shm_owner)(p) == PINHEAP_NAME(shm_index)())
        fail("a streamed block is not the producer's", (long)blocks, PINHEAP_NAME(shm_owner)(p));
      p[m.size[i] / 2] = 0x77;             /* written in place */
      PINHEAP_NAME(free)(p);
      blocks++;
    }
  }
  /* the blocks gathered in this thread's cache go back to their owner */
  (void)in_use();
  io_all(fd, &ack, 1, 1);
  printf("consumed %ld ok\n", blocks);
  return 0;
}

#define THREADS 4
#define THREAD_BLOCKS 1000        /* about 7 MiB a thread */

static void *thread_slots[THREADS][THREAD_BLOCKS];
static pthread_barrier_t thread_barrier;

/* Allocates its blocks, then frees its neighbour's (another arena's). */
static void *thread_run(void *arg)
{
  int t = (int)(intptr_t)arg;
  unsigned seed = (unsigned)t + 1;
  for (int i = 0; i < THREAD_BLOCKS; i++) {
    size_t sz = stream_size(&seed);
    unsigned char *p = PINHEAP_NAME(malloc)(sz);
    if (p == NULL)
      fail("malloc in a thread", (long)sz, errno);
    if (PINHEAP_NAME(shm_owner)(p) != PINHEAP_NAME(shm_index)())
      fail("a thread's block outside this process's part", t, i);
    memset(p, t, sz < 64 ? sz : 64);
    thread_slots[t][i] = p;
  }
  pthread_barrier_wait(&thread_barrier);
  int n = (t + 1) % THREADS;
  for (int i = 0; i < THREAD_BLOCKS; i++) {
    unsigned char *p = thread_slots[n][i];
    if (p[0] != (unsigned char)n)
      fail("a neighbour thread's block changed", n, i);
    PINHEAP_NAME(free)(p);
  }
  return NULL;
}

static int threads_run(void)
{
  pthread_t th[THREADS];
  void *warm = PINHEAP_NAME(malloc)(16);
  PINHEAP_NAME(free)(warm);
  size_t baseline = in_use();
  pthread_barrier_init(&thread_barrier, NULL, THREADS);
  for (int t = 0; t < THREADS; t++)
    if (pthread_create(&th[t], NULL, thread_run, (void *)(intptr_t)t) != 0)
      fail("pthread_create", t, 0);
  for (int t = 0; t < THREADS; t++)
    pthread_join(th[t], NULL);
  size_t now = in_use();
  if (now != baseline)
    fail("the threads' blocks were not reclaimed (in use, baseline)", (long)now, (long)baseline);
  if (PINHEAP_NAME(malloc_check)() != 0)
    fail("malloc_check", 1, 0);
  printf("threads ok\n");
  return 0;
}

/* ---- memory given back from the region ----------------------------------- */

#define LIVE_BLOCKS 6
#define GIVE_LARGE 32             /* 2 MiB each: 64 MiB */
#define GIVE_SMALL 4000           /* about 1 KiB each: 4 MiB */

static const size_t live_sizes[LIVE_BLOCKS] = { 40, 3000, 70000, 1 << 20, 3 << 20, 200 };

typedef struct live_msg_s {
  unsigned char *ptr[LIVE_BLOCKS];
} live_msg_t;

typedef struct heard_s {
  size_t bytes, ranges, outside, over_live;
  live_msg_t live;
} heard_t;

static heard_t heard;

/* The release listener: every range given back from the region must lie
 * inside it and clear of every live block. */
static void on_give_back(void *addr, size_t len, void *ctx)
{
  heard_t *h = ctx;
  uintptr_t lo = (uintptr_t)addr, hi = lo + len;
  uintptr_t base = (uintptr_t)PINHEAP_NAME(shm_base)();
  if (lo < base || hi > base + PINHEAP_NAME(shm_size)()) {
    h->outside++;
    return;
  }
  h->bytes += len;
  h->ranges++;
  for (int i = 0; i < LIVE_BLOCKS; i++) {
    uintptr_t b = (uintptr_t)h->live.ptr[i];
    if (b != 0 && lo < b + live_sizes[i] && b < hi)
      h->over_live++;
  }
}

/* The object's tmpfs usage (st_blocks of /dev/shm/<name>), in bytes. */
static long long object_bytes(void)
{
  char path[256];
  struct stat st;
  snprintf(path, sizeof(path), "/dev/shm%s", PINHEAP_NAME(shm_name)());
  if (stat(path, &st) != 0)
    fail("stat of the shared object", errno, 0);
  return (long long)st.st_blocks * 512;
}

/* Flushes what was printed (the test waits for it), then waits up to 60 s
 * for the file to exist.  @return whether it does. */
static bool said_then_wait_for(const char *file)
{
  struct stat st;
  fflush(stdout);
  for (int t = 0; stat(file, &st) != 0; t++) {
    if (t > 60000)
      return false;
    usleep(1000);
  }
  return true;
}

/* regrow: see the top.  The second round takes the pages the first gave
 * back: each is reserved in the tmpfs again, or the allocation fails --
 * never a write that meets a full tmpfs (SIGBUS). */
static int regrow(const char *file)
{
  static const size_t sizes[] = { 1 << 20, 64 << 10, 1000, 5000 };
  enum { MAX = 8192 };
  static void *blocks[MAX];
  size_t n = 0, total = 0;

  while (total < (32u << 20) && n < MAX) {
    size_t sz = sizes[n % 4];
    void *p = PINHEAP_NAME(malloc)(sz);
    if (p == NULL || !PINHEAP_NAME(shm_contains)(p))
      return fail("first round: a block outside the region or NULL", (long)n, (long)sz);
    memset(p, 0x33, sz);
    blocks[n++] = p;
    total += sz;
  }
  for (size_t i = 0; i < n; i++)
    PINHEAP_NAME(free)(blocks[i]);
  PINHEAP_NAME(malloc_trim)(0);
  printf("trimmed %lld\n", object_bytes());
  if (!said_then_wait_for(file))
    return fail("no go file within 60 s", 0, 0);
  size_t in = 0, out = 0;
  for (n = 0;; n++) {
    size_t sz = sizes[n % 4];
    void *p = NULL;
    errno = 0;
    if (n % 7 == 3) {                          /* an aligned block */
      int rc = PINHEAP_NAME(posix_memalign)(&p, 4096, sz);
      errno = rc;
    } else if (n % 3 == 1) {                   /* grown by realloc */
      p = PINHEAP_NAME(malloc)(sz / 2);
      if (p != NULL) {
        memset(p, 0x44, sz / 2);
        void *q = PINHEAP_NAME(realloc)(p, sz);
        if (q == NULL) {
          printf("null errno=%d in=%zu out=%zu (realloc)\n", errno, in, out);
          return errno == ENOMEM ? 0 : 3;
        }
        p = q;
      }
    } else {
      p = PINHEAP_NAME(malloc)(sz);
    }
    if (p == NULL) {
      printf("null errno=%d in=%zu out=%zu\n", errno, in, out);
      return errno == ENOMEM ? 0 : 3;
    }
    memset(p, 0x5a, sz);
    if (PINHEAP_NAME(shm_contains)(p))
      in++;
    else
      out++;
    if (out >= 64 || n > 4 * PINHEAP_NAME(shm_size)() / 1000) {
      printf("kept going in=%zu out=%zu\n", in, out);
      return 0;
    }
  }
}

static unsigned char live_pattern(int i, size_t j) { return (unsigned char)(i * 29 + j % 251 + 3); }

static void live_check(const live_msg_t *m, const char *when)
{
  for (int i = 0; i < LIVE_BLOCKS; i++) {
    for (size_t j = 0; j < live_sizes[i]; j++) {
      if (m->ptr[i][j] != live_pattern(i, j)) {
        printf("FAIL live block %d changed at byte %zu %s\n", i, j, when);
        fflush(stdout);
        exit(2);
      }
    }
  }
}

/* Polls until none of this process's releases waits (5 s at most). */
static void settle_all(void)
{
  for (int t = 0; t < 5000 && PINHEAP_NAME(shm_poll)() != 0; t++)
    usleep(1000);
  if (PINHEAP_NAME(shm_poll)() != 0)
    fail("releases still wait after 5 s", PINHEAP_NAME(shm_poll)(), 0);
}

static int give_back(int fd)
{
  static void *large[GIVE_LARGE], *small[GIVE_SMALL];
  char token = 0;
  void *warm = PINHEAP_NAME(malloc)(16);
  PINHEAP_NAME(free)(warm);
  if (PINHEAP_NAME(shm_index)() < 0)
    fail("not on the shared heap", 0, 0);
  /* live blocks, between and after the ones freed */
  for (int i = 0; i < LIVE_BLOCKS; i++) {
    if (i == 3) {
      for (int k = 0; k < GIVE_LARGE; k++)
        large[k] = PINHEAP_NAME(malloc)((size_t)2 << 20);
      for (int k = 0; k < GIVE_SMALL; k++)
        small[k] = PINHEAP_NAME(malloc)(900 + (size_t)(k % 200));
    }
    heard.live.ptr[i] = PINHEAP_NAME(malloc)(live_sizes[i]);
    if (heard.live.ptr[i] == NULL || !PINHEAP_NAME(shm_contains)(heard.live.ptr[i]))
      fail("a live block in the region", i, errno);
    for (size_t j = 0; j < live_sizes[i]; j++)
      heard.live.ptr[i][j] = live_pattern(i, j);
  }
  for (int k = 0; k < GIVE_LARGE; k++) {
    if (large[k] == NULL || !PINHEAP_NAME(shm_contains)(large[k]))
      fail("a large block in the region", k, errno);
    memset(large[k], 0x6b, (size_t)2 << 20);
  }
  for (int k = 0; k < GIVE_SMALL; k++) {
    if (small[k] == NULL)
      fail("a small block", k, errno);
    memset(small[k], 0x6c, 900);
  }
  io_all(fd, &heard.live, sizeof(heard.live), 1);
  io_all(fd, &token, 1, 0);                  /* the peer read them */
  PINHEAP_NAME(os_set_release_listener)(on_give_back, &heard);
  long long before = object_bytes();
  for (int k = 0; k < GIVE_LARGE; k++)
    PINHEAP_NAME(free)(large[k]);
  for (int k = 0; k < GIVE_SMALL; k++)
    PINHEAP_NAME(free)(small[k]);
  PINHEAP_NAME(malloc_trim)(0);
  /* the pages go once the peer has heard of them */
  io_all(fd, &token, 1, 1);
  io_all(fd, &token, 1, 0);
  settle_all();
  long long after = object_bytes();
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
  printf("object %lld -> %lld bytes; heard %zu ranges, %zu bytes, %zu outside, %zu over live\n",
         before, after, heard.ranges, heard.bytes, heard.outside, heard.over_live);
  if (before < (60LL << 20))
    fail("the blocks were not in the object (bytes)", (long)before, 0);
  if (before - after < (60LL << 20))
    fail("the object did not shrink by the freed blocks (before, after)", (long)before, (long)after);
  if (heard.bytes < (size_t)(before - after) || heard.over_live != 0)
    fail("the listener did not hear exactly the free space (bytes, over live)", (long)heard.bytes,
         (long)heard.over_live);
  live_check(&heard.live, "after the trim, here");
  io_all(fd, &token, 1, 1);                  /* the peer reads them again */
  io_all(fd, &token, 1, 0);
  /* the space given back is used again */
  for (int k = 0; k < GIVE_LARGE; k++) {
    large[k] = PINHEAP_NAME(malloc)((size_t)2 << 20);
    if (large[k] == NULL || !PINHEAP_NAME(shm_contains)(large[k]))
      fail("a large block in the region again", k, errno);
    memset(large[k], 0x6d, (size_t)2 << 20);
  }
  if (object_bytes() < after + (60LL << 20))
    fail("the blocks used again are not in the object", (long)object_bytes(), (long)after);
  for (int k = 0; k < GIVE_LARGE; k++)
    PINHEAP_NAME(free)(large[k]);
  for (int i = 0; i < LIVE_BLOCKS; i++)
    PINHEAP_NAME(free)(heard.live.ptr[i]);
  if (PINHEAP_NAME(malloc_check)() != 0)
    fail("malloc_check", 1, 0);
  printf("given back %lld\n", before - after);
  return 0;
}

static int peek(int fd)
{
  live_msg_t m;
  char token = 0;
  void *warm = PINHEAP_NAME(malloc)(16);      /* joins the heap first */
  PINHEAP_NAME(free)(warm);
  io_all(fd, &m, sizeof(m), 0);
  live_check(&m, "before the trim, in the peer");
  heard.live = m;
  PINHEAP_NAME(os_set_release_listener)(on_give_back, &heard);
  io_all(fd, &token, 1, 1);
  io_all(fd, &token, 1, 0);                  /* the other side trimmed */
  PINHEAP_NAME(shm_poll)();
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
  if (heard.bytes < (60u << 20) || heard.outside != 0 || heard.over_live != 0)
    fail("the peer did not hear the release of the freed blocks (bytes, over live)",
         (long)heard.bytes, (long)heard.over_live);
  io_all(fd, &token, 1, 1);
  io_all(fd, &token, 1, 0);
  live_check(&m, "after the trim, in the peer");
  io_all(fd, &token, 1, 1);
  printf("peeked ok\n");
  return 0;
}

/* ---- releases every process hears ---------------------------------------- */

#define REL_SIZE ((size_t)8 << 20)
#define REL_OLD 0x5e
#define REL_NEW 0x77

typedef struct rel_heard_s {
  size_t ranges;
  int covered, saw_old;
  unsigned char *watch;      /* a byte in the middle of the block */
} rel_heard_t;

static rel_heard_t rel_heard;

static void on_rel_heard(void *addr, size_t len, void *ctx)
{
  rel_heard_t *h = ctx;
  unsigned char *a = addr;
  h->ranges++;
  if (h->watch >= a && h->watch < a + len) {
    h->covered++;
    h->saw_old += *h->watch == REL_OLD;
  }
}

static bool overlaps(const void *a, size_t alen, const void *b, size_t blen)
{
  return (const char *)a < (const char *)b + blen && (const char *)b < (const char *)a + alen;
}

/* The giver's listener: what went, and whether any of it lay over its
 * live block. */
typedef struct rel_given_s {
  size_t bytes, over_live;
  const unsigned char *live;
  size_t live_len;
} rel_given_t;

static rel_given_t rel_given;

static void on_rel_given(void *addr, size_t len, void *ctx)
{
  rel_given_t *g = ctx;
  g->bytes += len;
  if (g->live != NULL && overlaps(addr, len, g->live, g->live_len))
    g->over_live++;
}

#define REL_HEAD 100000           /* grown: the block before, grown over the freed one */

static int rel_give(int fd, const char *how)
{
  char token = 0;
  bool untouched = strcmp(how, "untouched") == 0, grown = strcmp(how, "grown") == 0;
  bool reused = untouched || strcmp(how, "reused") == 0;
  void *warm = PINHEAP_NAME(malloc)(16);
  PINHEAP_NAME(free)(warm);
  unsigned char *head = NULL, *guard = NULL;   /* grown: the guard keeps the block off the top */
  if (grown) {
    io_all(fd, &token, 1, 0);                /* the other process has joined: always boxed in */
    /* head, block and guard in that order, the block right after the head,
     * wherever this process carves: its first slice may be boxed in by the
     * other process's, so that consecutive mallocs land apart (CI, once,
     * when the other process joined first: realloc then moved the head).
     * The exchange above makes that the case every time.  One chunk for
     * head and block, the guard right after it (bigger than any free chunk
     * left in the first slice: carved next), then the chunk shrunk in place
     * to the head: the block takes the tail that leaves free. */
    head = PINHEAP_NAME(malloc)(REL_HEAD + REL_SIZE + REL_HEAD);
    guard = PINHEAP_NAME(malloc)(REL_SIZE / 2);
    if (head == NULL || guard == NULL || PINHEAP_NAME(realloc)(head, REL_HEAD) != head)
      fail("the head did not shrink in place (scenario)", errno, 0);
  }
  unsigned char *block = PINHEAP_NAME(malloc)(REL_SIZE);
  if (block == NULL || !PINHEAP_NAME(shm_contains)(block) || (grown && (head == NULL || guard == NULL)))
    fail("the blocks in the region", errno, 0);
  if (grown && !(head < block && block < guard &&
                 (size_t)(guard - head) <= REL_HEAD + REL_SIZE + REL_HEAD + 256))
    fail("head, block and guard are not laid out in a row (scenario) (block - head, guard - block)",
         (long)(block - head), (long)(guard - block));
  memset(block, REL_OLD, REL_SIZE);
  io_all(fd, &block, sizeof(block), 1);
  io_all(fd, &token, 1, 0);                  /* the other side is on the heap */
  PINHEAP_NAME(os_set_release_listener)(on_rel_given, &rel_given);
  long long before = object_bytes();
  PINHEAP_NAME(free)(block);
  PINHEAP_NAME(malloc_trim)(0);
  long long now = object_bytes();
  if (before - now >= (long long)(REL_SIZE / 2))
    fail("the pages left the object before the other process heard (before, now)", (long)before,
         (long)now);
  if (PINHEAP_NAME(shm_poll)() == 0)
    fail("no release waits for the other process", 0, 0);
  unsigned char *again = NULL;
  if (reused) {                              /* malloc takes the block again and writes it
                                                all, or nothing (a buffer for a transfer) */
    again = PINHEAP_NAME(malloc)(REL_SIZE);
    if (again == NULL || !overlaps(again, REL_SIZE, block + REL_SIZE / 2, 1))
      fail("the block was not used again (scenario)", (long)(again - block), 0);
    if (!untouched)
      memset(again, REL_NEW, REL_SIZE);
    rel_given.live = again;
    rel_given.live_len = REL_SIZE;
  }
  if (grown) {                               /* the block before grows over it in place,
                                                its new bytes not written */
    again = PINHEAP_NAME(realloc)(head, REL_HEAD + REL_SIZE / 2 + 4096);
    if (again != head)
      fail("realloc did not grow the block in place (scenario)", (long)(again - head), 0);
    rel_given.live = again;
    rel_given.live_len = REL_HEAD + REL_SIZE / 2 + 4096;
  }
  if (strcmp(how, "dead") == 0) {
    /* an idle process delays the removal */
    for (int t = 0; t < 200; t++) {
      if (PINHEAP_NAME(shm_poll)() == 0)
        fail("a release went while another process had not heard it", t, 0);
      usleep(1000);
    }
    if (before - object_bytes() >= (long long)(REL_SIZE / 2))
      fail("the pages left the object before the idle process heard", 0, 0);
  }
  io_all(fd, &token, 1, 1);                  /* posted: hear it (or: kill the idle one) */
  io_all(fd, &token, 1, 0);
  settle_all();
  long long after = object_bytes();
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
  printf("object %lld -> %lld -> %lld bytes; heard %zu bytes\n", before, now, after, rel_given.bytes);
  if (again != NULL) {
    if (before - after >= (long long)(REL_SIZE / 4))
      fail("the pages of a block used again left the object (before, after)", (long)before,
           (long)after);
    if (rel_given.over_live != 0)
      fail("this process heard a release over its live block", (long)rel_given.over_live, 0);
    for (size_t i = 0; reused && !untouched && i < REL_SIZE; i++) {
      if (again[i] != REL_NEW)
        fail("the block used again changed at", (long)i, again[i]);
    }
    if ((grown || untouched) && block[REL_SIZE / 2 + 123] != REL_OLD)
      fail("the bytes of the block used again changed", block[REL_SIZE / 2 + 123], REL_OLD);
  } else {
    if (before - after < (long long)(REL_SIZE - (1 << 20)))
      fail("the pages did not leave the object once heard (before, after)", (long)before,
           (long)after);
    if (rel_given.bytes < (size_t)(before - after))
      fail("this process's listener did not hear the pages go (heard, gone)",
           (long)rel_given.bytes, (long)(before - after));
  }
  io_all(fd, &token, 1, 1);                  /* settled */
  io_all(fd, &token, 1, 0);
  PINHEAP_NAME(free)(again);
  PINHEAP_NAME(free)(guard);
  if (PINHEAP_NAME(malloc_check)() != 0)
    fail("malloc_check", 1, 0);
  printf("gave %s ok\n", how);
  return 0;
}

static int rel_hear(int fd, const char *how)
{
  char token = 0;
  void *warm = PINHEAP_NAME(malloc)(16);      /* joins the heap first */
  PINHEAP_NAME(free)(warm);
  if (strcmp(how, "grown") == 0)
    io_all(fd, &token, 1, 1);                /* joined: the giver lays out its blocks */
  unsigned char *block;
  io_all(fd, &block, sizeof(block), 0);
  rel_heard.watch = block + REL_SIZE / 2 + 123;
  if (*rel_heard.watch != REL_OLD)
    fail("the other process's block is not seen in place", *rel_heard.watch, 0);
  PINHEAP_NAME(os_set_release_listener)(on_rel_heard, &rel_heard);
  io_all(fd, &token, 1, 1);
  io_all(fd, &token, 1, 0);                  /* freed and trimmed over there */
  PINHEAP_NAME(shm_poll)();
  if (rel_heard.covered != 1)
    fail("this process's listener did not hear the release of the block (ranges, covering)",
         (long)rel_heard.ranges, rel_heard.covered);
  if (strcmp(how, "reused") != 0 && rel_heard.saw_old != 1)
    fail("the pages were gone when the listener heard of them", *rel_heard.watch, 0);
  io_all(fd, &token, 1, 1);
  io_all(fd, &token, 1, 0);                  /* settled over there */
  unsigned char want = strcmp(how, "reused") == 0 ? REL_NEW : strcmp(how, "heard") == 0 ? 0 : REL_OLD;
  if (*rel_heard.watch != want)
    fail("after the other side settled, the block's byte is not what it should be (is, want)",
         *rel_heard.watch, want);
  io_all(fd, &token, 1, 1);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
  printf("heard %s ok\n", how);
  return 0;
}

/* Both processes allocate, grow, free and trim large blocks for a while,
 * polling between: a block's pages never go while it is live, whoever
 * posted what. */
#define CHURN_LIVE 8
#define CHURN_ROUNDS 600

typedef struct churn_block_s {
  unsigned char *p;
  size_t n;
  unsigned char v;
} churn_block_t;

static void churn_check(const churn_block_t *b, int round)
{
  for (size_t i = 0; i < b->n; i += 509) {
    if (b->p[i] != b->v)
      fail("a live block lost its bytes (round, offset)", round, (long)i);
  }
  if (b->p[b->n - 1] != b->v)
    fail("a live block lost its last byte (round)", round, 0);
}

static int rel_churn(int fd)
{
  char token = 0;
  churn_block_t live[CHURN_LIVE] = { { NULL, 0, 0 } };
  unsigned seed = (unsigned)getpid();
  void *warm = PINHEAP_NAME(malloc)(16);
  PINHEAP_NAME(free)(warm);
  io_all(fd, &token, 1, 1);
  io_all(fd, &token, 1, 0);                  /* both on the heap */
  for (int round = 0; round < CHURN_ROUNDS; round++) {
    seed = seed * 1103515245u + 12345u;
    churn_block_t *b = &live[(seed >> 8) % CHURN_LIVE];
    size_t n = ((size_t)16 << 10) + (size_t)((seed >> 4) % (3u << 20));
    if (b->p != NULL) {
      churn_check(b, round);
      if ((seed >> 20) % 3 == 0 && b->n + n <= ((size_t)6 << 20)) {   /* grows (in place if it can) */
        unsigned char *q = PINHEAP_NAME(realloc)(b->p, b->n + n);
        if (q == NULL)
          fail("realloc", (long)(b->n + n), errno);
        b->p = q;
        churn_check(b, round);
        memset(q + b->n, b->v, n);
        b->n += n;
        continue;
      }
      PINHEAP_NAME(free)(b->p);
    }
    b->p = PINHEAP_NAME(malloc)(n);
    if (b->p == NULL)
      fail("malloc", (long)n, errno);
    b->n = n;
    b->v = (unsigned char)(round | 1);
    memset(b->p, b->v, n);
    if (round % 7 == 0)
      PINHEAP_NAME(malloc_trim)(0);
    PINHEAP_NAME(shm_poll)();
    for (int k = 0; k < CHURN_LIVE; k++) {
      if (live[k].p != NULL)
        churn_check(&live[k], round);
    }
  }
  for (int k = 0; k < CHURN_LIVE; k++)
    PINHEAP_NAME(free)(live[k].p);
  PINHEAP_NAME(malloc_trim)(0);
  /* each side's releases wait for the other to hear them: both poll until
   * both are done */
  settle_all();
  io_all(fd, &token, 1, 1);
  fcntl(fd, F_SETFL, O_NONBLOCK);
  int t = 0;
  for (; t < 5000 && read(fd, &token, 1) != 1; t++) {
    PINHEAP_NAME(shm_poll)();
    usleep(1000);
  }
  if (t == 5000)
    fail("the other process did not finish", 0, 0);
  if (PINHEAP_NAME(malloc_check)() != 0)
    fail("malloc_check", 1, 0);
  printf("churned ok\n");
  return 0;
}

/* Starts this program with args, fd kept open across the exec (-1: none),
 * its stdout to out_fd (-1: this one's). */
static pid_t rel_spawn(const char *self, char *const *args, int keep_fd, int out_fd)
{
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    fail("fork", errno, 0);
  if (pid == 0) {
    char *argv[6] = { (char *)self };
    for (int i = 0; args[i] != NULL && i < 4; i++)
      argv[i + 1] = args[i];
    if (out_fd >= 0)
      dup2(out_fd, 1);
    for (int f = 3; f < 64; f++) {
      if (f != keep_fd)
        close(f);
    }
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  return pid;
}

static int rel_wait(pid_t pid, const char *who)
{
  int st = 0;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    printf("FAIL %s ended with status %#x\n", who, st);
    return 1;
  }
  return 0;
}

/* More blocks freed and trimmed than the ring has entries, while another
 * process is attached: the trim posts what fits and keeps the rest free
 * and unmarked; once the other has heard, a second trim posts the rest,
 * and every block's pages leave the object. */
#define RING_BLOCKS 80
#define RING_BLOCK ((size_t)256 << 10)

static int rel_ring(int fd, int role)
{
  static unsigned char *blocks[RING_BLOCKS], *guards[RING_BLOCKS];
  char token = 0;
  void *warm = PINHEAP_NAME(malloc)(16);      /* on the heap */
  PINHEAP_NAME(free)(warm);
  if (role == 2) {                            /* hears when told, until told to stop */
    io_all(fd, &token, 1, 1);
    for (;;) {
      io_all(fd, &token, 1, 0);
      if (token == 'q')
        break;
      PINHEAP_NAME(shm_poll)();
      io_all(fd, &token, 1, 1);
    }
    printf("ring hear ok\n");
    return 0;
  }
  io_all(fd, &token, 1, 0);                   /* the other one is attached */
  for (int i = 0; i < RING_BLOCKS; i++) {     /* each kept apart by a live guard */
    blocks[i] = PINHEAP_NAME(malloc)(RING_BLOCK);
    guards[i] = PINHEAP_NAME(malloc)(4096);    /* above the thread cache: carved next */
    if (blocks[i] == NULL || guards[i] == NULL || !PINHEAP_NAME(shm_contains)(blocks[i]))
      fail("the blocks in the region", i, errno);
    memset(blocks[i], 0x5a, RING_BLOCK);
  }
  long long before = object_bytes();
  for (int i = 0; i < RING_BLOCKS; i++)
    PINHEAP_NAME(free)(blocks[i]);
  for (int round = 0; round < 3; round++) {
    PINHEAP_NAME(malloc_trim)(0);            /* posts what the ring holds */
    token = 'h';
    io_all(fd, &token, 1, 1);                 /* hear */
    io_all(fd, &token, 1, 0);
    settle_all();
  }
  long long after = object_bytes();
  printf("object %lld -> %lld bytes (%d blocks of %zu freed)\n", before, after, RING_BLOCKS,
         RING_BLOCK);
  if (before - after < (long long)(RING_BLOCKS * (RING_BLOCK - 8192)))
    fail("blocks the full ring could not post were never given back (gone, freed)",
         (long)(before - after), (long)(RING_BLOCKS * RING_BLOCK));
  token = 'q';
  io_all(fd, &token, 1, 1);
  for (int i = 0; i < RING_BLOCKS; i++)
    PINHEAP_NAME(free)(guards[i]);
  if (PINHEAP_NAME(malloc_check)() != 0)
    fail("malloc_check", 1, 0);
  printf("ring give ok\n");
  return 0;
}

static int release_run(const char *self, const char *how)
{
  char job[64], path[128], fds[2][12];
  int sv[2], bad = 0;
  snprintf(job, sizeof(job), "rel%d-%s", (int)getpid(), how);
  snprintf(path, sizeof(path), "/dev/shm/pinheap-%u-%s", (unsigned)geteuid(), job);
  setenv("PINHEAP_SHM_JOB", job, 1);
  setenv("PINHEAP_SHM_SIZE", "256M", 1);
  unsetenv("PINHEAP_SHM_RANKS");
  unsetenv("PINHEAP_SHM_FALLBACK");
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
    fail("socketpair", errno, 0);
  snprintf(fds[0], 12, "%d", sv[0]);
  snprintf(fds[1], 12, "%d", sv[1]);
  char *give[] = { "rel_give", fds[0], (char *)how, NULL };
  if (strcmp(how, "dead") != 0) {
    /* the giver and the process that hears (churn: two of a kind) */
    bool churn = strcmp(how, "churn") == 0, ring = strcmp(how, "ringfull") == 0;
    char *hear[] = { "rel_hear", fds[1], (char *)how, NULL };
    char *one[] = { "rel_churn", fds[0], NULL }, *two[] = { "rel_churn", fds[1], NULL };
    char *ring1[] = { "rel_ring", fds[0], "1", NULL }, *ring2[] = { "rel_ring", fds[1], "2", NULL };
    pid_t a = rel_spawn(self, churn ? one : ring ? ring1 : give, sv[0], -1);
    pid_t b = rel_spawn(self, churn ? two : ring ? ring2 : hear, sv[1], -1);
    close(sv[0]);
    close(sv[1]);
    bad += rel_wait(a, "the giver (the first process)");
    bad += rel_wait(b, "the process that hears (the second)");
  } else {
    /* an idle process on the heap, killed once the giver has posted */
    int out[2];
    char line[256] = "";
    size_t n = 0;
    char *hold[] = { "hold", NULL };
    if (pipe(out) != 0)
      fail("pipe", errno, 0);
    pid_t idle = rel_spawn(self, hold, -1, out[1]);
    close(out[1]);
    while (strstr(line, "ready") == NULL && n + 1 < sizeof(line)) {
      ssize_t got = read(out[0], line + n, sizeof(line) - 1 - n);
      if (got <= 0)
        fail("the idle process did not start", (long)got, errno);
      n += (size_t)got;
      line[n] = '\0';
    }
    pid_t a = rel_spawn(self, give, sv[0], -1);
    close(sv[0]);
    unsigned char *block;
    char token = 0;
    /* the giver's side of the exchange; if it fails, the giver says why */
    if (read(sv[1], &block, sizeof(block)) == (ssize_t)sizeof(block) && write(sv[1], &token, 1) == 1 &&
        read(sv[1], &token, 1) == 1) {       /* posted, and waiting for the idle one */
      kill(idle, SIGKILL);                   /* not reaped yet: a zombie counts as gone */
      if (write(sv[1], &token, 1) == 1 && read(sv[1], &token, 1) == 1)   /* settled */
        (void)!write(sv[1], &token, 1);
    }
    kill(idle, SIGKILL);
    waitpid(idle, NULL, 0);
    close(sv[1]);
    bad += rel_wait(a, "the giver");
    /* the killed process's object is stale: the next process replaces it,
     * and leaves nothing behind */
    char *info[] = { "info", NULL };
    bad += rel_wait(rel_spawn(self, info, -1, -1), "the process after the job");
  }
  struct stat st;
  if (stat(path, &st) == 0) {
    unlink(path);
    printf("FAIL %s was left behind\n", path);
    bad++;
  }
  if (bad != 0)
    return 1;
  printf("release %s ok\n", how);
  return 0;
}

#define HAMMER_BATCH 512

static int hammer(int fd)
{
  unsigned seed = (unsigned)getpid();
  void *own[64] = { NULL };
  void *batch[HAMMER_BATCH];
  int nb = 0;
  long sent = 0, after = 0;
  bool peer = true;

  char ack;
  int peer_pid = 0;               /* the peer says it first (a socket pair's
                                     credentials are its maker's) */

  if (read(fd, &peer_pid, sizeof(peer_pid)) != (ssize_t)sizeof(peer_pid))
    peer_pid = 0;                  /* killed before it could */
  signal(SIGPIPE, SIG_IGN);
  for (long i = 0; after < 20000; i++) {
    seed = seed * 1103515245u + 12345u;
    size_t sz = 3000 + (seed >> 8) % (i % 16 == 0 ? 300000 : 30000);
    unsigned char *p = PINHEAP_NAME(malloc)(sz);
    if (p == NULL)
      fail("malloc", (long)sz, errno);
    p[0] = 1;
    p[sz - 1] = 2;
    if (peer) {
      batch[nb++] = p;
      if (nb < HAMMER_BATCH)
        continue;
      nb = 0;
      /* one batch in flight (a killed peer leaks at most that), then
       * the peer's ack */
      if (write(fd, batch, sizeof(batch)) == (ssize_t)sizeof(batch) && read(fd, &ack, 1) == 1) {
        sent += HAMMER_BATCH;
        continue;
      }
      peer = false;             /* killed, having freed some of the batch (p is */
      continue;                 /* its last) or not: the batch stays allocated */
    }
    PINHEAP_NAME(free)(own[i % 64]);
    own[i % 64] = p;
    if (!peer)
      after++;
    if (i > 4000000)
      fail("the peer was never killed (blocks sent)", sent, 0);
  }
  for (int i = 0; i < 64; i++)
    PINHEAP_NAME(free)(own[i]);
  if (PINHEAP_NAME(malloc_check)() != 0)
    fail("malloc_check", 1, 0);
  /* The peer's socket closed as it died; it may still be dying.  Leave
   * once it has ended (a zombie or reaped, 5 s at most), so that this
   * process is the last live member: the test checks it unlinks. */
  for (int t = 0; t < 5000 && peer_pid > 0 && kill(peer_pid, 0) == 0; t++) {
    char path[64], st[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", peer_pid);
    FILE *f = fopen(path, "r");
    char *r = f != NULL ? fgets(st, sizeof(st), f) : NULL;
    if (f != NULL)
      fclose(f);
    char *p = r != NULL ? strrchr(st, ')') : NULL;
    if (p != NULL && (p[2] == 'Z' || p[2] == 'X'))
      break;
    usleep(1000);
  }
  printf("hammer ok sent %ld\n", sent);
  return 0;
}

/* Frees the blocks of each batch hammer sends, all at once. */
static int eat(int fd, bool twice)
{
  void *batch[HAMMER_BATCH];
  void *warm = PINHEAP_NAME(malloc)(16);   /* joins the heap first */
  long n = 0;
  char ack = 1;
  int me = (int)getpid();

  PINHEAP_NAME(free)(warm);
  if (write(fd, &me, sizeof(me)) != (ssize_t)sizeof(me))
    return 0;
  for (;;) {
    size_t have = 0;
    while (have < sizeof(batch)) {
      ssize_t r = read(fd, (char *)batch + have, sizeof(batch) - have);
      if (r <= 0)
        break;
      have += (size_t)r;
    }
    if (have < sizeof(batch))
      break;
    for (int k = 0; k < HAMMER_BATCH; k++) {
      PINHEAP_NAME(free)(batch[k]);
      if (twice)
        PINHEAP_NAME(free)(batch[k]);
    }
    n += HAMMER_BATCH;
    if (write(fd, &ack, 1) != 1)
      break;
  }
  printf("ate %ld\n", n);
  return 0;
}

int main(int argc, char **argv)
{
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2)
    return 64;
  if (strcmp(argv[1], "squat") == 0 && argc == 3) {
    void *want = (void *)strtoul(argv[2], NULL, 0);
    if ((void *)syscall(SYS_mmap, want, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                        0L) != want)
      fail("mmap at the address to squat", errno, 0);
    argv[1] = "info";
  }
  if (strcmp(argv[1], "exec") == 0 && argc == 3) {
    void *p = PINHEAP_NAME(malloc)(1000);
    printf("before exec %d\n", PINHEAP_NAME(shm_index)());
    PINHEAP_NAME(free)(p);
    execl("/proc/self/exe", argv[0], argv[2], (char *)NULL);
    fail("exec", errno, 0);
  }
  if (strcmp(argv[1], "fork") == 0) {
    unsigned char *b = PINHEAP_NAME(malloc)(5000);
    unsigned char *big = PINHEAP_NAME(malloc)(300000);
    if (b == NULL || big == NULL || !PINHEAP_NAME(shm_contains)(b))
      fail("a block in the region", errno, 0);
    memset(b, 0x3c, 5000);
    memset(big, 0x3d, 300000);
    pid_t pid = fork();
    if (pid == 0) {
      memset(b, 0xaa, 5000);
      memset(big, 0xab, 300000);
      PINHEAP_NAME(free)(b);
      PINHEAP_NAME(free)(big);
      for (int i = 0; i < 200; i++)
        memset(PINHEAP_NAME(malloc)(4000), 0xac, 4000);     /* kept: the copy's part */
      _exit(PINHEAP_NAME(malloc_check)() == 0 ? 0 : 9);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail("the child (status)", st, 0);
    for (int i = 0; i < 5000; i++) {
      if (b[i] != 0x3c)
        fail("the child's writes reached the parent's block", i, b[i]);
    }
    for (int i = 0; i < 300000; i++) {
      if (big[i] != 0x3d)
        fail("the child's writes reached the parent's large block", i, big[i]);
    }
    /* the blocks are still the parent's: freed and allocated again */
    PINHEAP_NAME(free)(b);
    PINHEAP_NAME(free)(big);
    if (PINHEAP_NAME(malloc_check)() != 0)
      fail("malloc_check after the child", 1, 0);
    printf("forked ok\n");
    argv[1] = "hold";
  }
  if (strcmp(argv[1], "fill") == 0) {
    long n = 0;
    void *kept = PINHEAP_NAME(malloc)(1000);   /* for hold's block, below */
    for (size_t sz = (size_t)1 << 20; sz >= 256; sz /= 16) {
      void *p;
      while ((p = PINHEAP_NAME(malloc)(sz)) != NULL && PINHEAP_NAME(shm_contains)(p))
        n++;                    /* (with the fallback on: until a block is private) */
    }
    PINHEAP_NAME(free)(kept);
    printf("full after %ld\n", n);
    argv[1] = "hold";
  }
  if (strcmp(argv[1], "fork_time") == 0 && (argc == 3 || argc == 4)) {
    int n = atoi(argv[2]);
    long kib = argc == 4 ? atol(argv[3]) : 1024;
    double t[256];
    n = n < 1 ? 1 : n > 256 ? 256 : n;
    for (long i = 0; i < kib; i++)
      memset(PINHEAP_NAME(malloc)(1000), 1, 1000);
    for (int i = 0; i < n; i++) {
      struct timespec t0, t1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      pid_t pid = fork();
      if (pid == 0)
        _exit(0);
      waitpid(pid, NULL, 0);
      clock_gettime(CLOCK_MONOTONIC, &t1);
      t[i] = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
    }
    for (int i = 1; i < n; i++)             /* insertion sort: the median */
      for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
        double x = t[j];
        t[j] = t[j - 1];
        t[j - 1] = x;
      }
    printf("fork_time %.1f\n", t[n / 2]);
    return 0;
  }
  if (strcmp(argv[1], "fork_snap") == 0) {
    size_t n = (size_t)32 << 20, big = (size_t)1 << 30;
    unsigned char *b = PINHEAP_NAME(malloc)(n), *g = PINHEAP_NAME(malloc)(big);
    if (b == NULL || g == NULL || !PINHEAP_NAME(shm_contains)(g))
      fail("blocks in the region", errno, 0);
    memset(b, 0x3e, n);
    g[big / 2] = 0x11;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid == 0) {
      usleep(20000);                       /* the parent has written by now */
      long rss_kb = 0;
      FILE *f = fopen("/proc/self/status", "r");
      char line[128];
      while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %ld", &rss_kb) == 1)
          break;
      if (f != NULL)
        fclose(f);
      if (b[n - 1] != 0x3e)
        _exit(10);                         /* the parent's write after the fork */
      if (g[big / 2] != 0x11 || g[0] != 0)
        _exit(11);
      _exit(rss_kb > (256 << 10) ? 12 : 0);  /* more than 256 MiB: the holes */
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    b[n - 1] = 0x77;                       /* at once, after fork returned */
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
      fail("fork", errno, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail(WIFEXITED(st) && WEXITSTATUS(st) == 10   ? "the child saw a write made after the fork"
           : WIFEXITED(st) && WEXITSTATUS(st) == 12 ? "the child's copy faulted in the holes"
                                                    : "the child (status)",
           st, 0);
    printf("fork_snap ok %.2f ms\n",
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    return 0;
  }
  if (strcmp(argv[1], "brief") == 0) {
    void *b[300];
    for (int i = 0; i < 300; i++) {
      size_t sz = i % 10 == 9 ? 100000 : 100 + (size_t)i * 17;
      b[i] = PINHEAP_NAME(malloc)(sz);
      if (b[i] == NULL || !PINHEAP_NAME(shm_contains)(b[i]))
        fail("a block in the region (block, errno)", i, errno);
      memset(b[i], 0x5b, sz);
    }
    for (int i = 0; i < 300; i++)
      if (i % 50 != 0)
        PINHEAP_NAME(free)(b[i]);
    printf("brief ok %d\n", PINHEAP_NAME(shm_index)());
    if (argc == 3 && strcmp(argv[2], "die") == 0)
      raise(SIGKILL);
    return 0;
  }
  if (strcmp(argv[1], "hold") == 0)
    signal(SIGTERM, on_term);
  if (strcmp(argv[1], "info") == 0 || strcmp(argv[1], "hold") == 0) {
    void *p = PINHEAP_NAME(malloc)(1000);
    if (p == NULL)
      fail("malloc", 1000, errno);
    printf("%d %p %zu %s %d\n", PINHEAP_NAME(shm_index)(), PINHEAP_NAME(shm_base)(),
           PINHEAP_NAME(shm_size)(), PINHEAP_NAME(shm_name)() ? PINHEAP_NAME(shm_name)() : "-",
           PINHEAP_NAME(shm_contains)(p));
    if (argv[1][0] == 'h') {
      printf("ready\n");
      for (;;)
        pause();
    }
    PINHEAP_NAME(free)(p);
    return 0;
  }
  if (strcmp(argv[1], "threads") == 0)
    return threads_run();
  if (strcmp(argv[1], "hammer") == 0 && argc == 3)
    return hammer(atoi(argv[2]));
  if (strcmp(argv[1], "eat") == 0 && (argc == 3 || argc == 4))
    return eat(atoi(argv[2]), argc == 4 && strcmp(argv[3], "twice") == 0);
  if (strcmp(argv[1], "produce") == 0 && argc == 3)
    return produce(atoi(argv[2]));
  if (strcmp(argv[1], "consume") == 0 && argc == 3) {
    void *warm = PINHEAP_NAME(malloc)(16);  /* joins the heap first */
    PINHEAP_NAME(free)(warm);
    return consume(atoi(argv[2]));
  }
  if (strcmp(argv[1], "give_back") == 0 && argc == 3)
    return give_back(atoi(argv[2]));
  if (strcmp(argv[1], "peek") == 0 && argc == 3)
    return peek(atoi(argv[2]));
  if (strcmp(argv[1], "release") == 0 && argc == 3)
    return release_run(argv[0], argv[2]);
  if (strcmp(argv[1], "rel_give") == 0 && argc == 4)
    return rel_give(atoi(argv[2]), argv[3]);
  if (strcmp(argv[1], "rel_hear") == 0 && argc == 4)
    return rel_hear(atoi(argv[2]), argv[3]);
  if (strcmp(argv[1], "rel_churn") == 0 && argc == 3)
    return rel_churn(atoi(argv[2]));
  if (strcmp(argv[1], "rel_ring") == 0 && argc == 4)
    return rel_ring(atoi(argv[2]), atoi(argv[3]));
  if (strcmp(argv[1], "ring") == 0 && argc == 4)
    return ring(atoi(argv[2]), atoi(argv[3]));
  if (strcmp(argv[1], "exhaust") == 0 && (argc == 3 || (argc == 4 && strcmp(argv[3], "hold") == 0))) {
    size_t sz = strtoul(argv[2], NULL, 0);
    size_t in = 0, out = 0, n = 0;
    int rc = 0;
    if (argc == 4)
      signal(SIGTERM, on_term);
    const char *gate = getenv("SHM_WORKER_GATE");
    if (gate != NULL) {                        /* joined: wait for the others */
      PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(100));
      printf("started\n");
      if (!said_then_wait_for(gate))
        return fail("no gate file within 60 s", 0, 0);
    }
    for (;;) {
      errno = 0;
      void *p = PINHEAP_NAME(malloc)(sz);
      if (p == NULL) {
        printf("null errno=%d in=%zu out=%zu\n", errno, in, out);
        rc = errno == ENOMEM ? 0 : 3;
        break;
      }
      memset(p, 0x5a, sz);
      if (PINHEAP_NAME(shm_contains)(p))
        in++;
      else
        out++;
      if (++n > 4 * PINHEAP_NAME(shm_size)() / sz + 16 || out >= 64) {
        printf("kept going in=%zu out=%zu\n", in, out);
        break;
      }
    }
    if (argc == 4 && rc == 0) {                /* hold: its blocks stay until SIGTERM */
      fflush(stdout);
      for (;;)
        pause();
    }
    return rc;
  }
  if (strcmp(argv[1], "regrow") == 0 && argc == 3)
    return regrow(argv[2]);
  if (strcmp(argv[1], "double_free") == 0) {
    void *p = PINHEAP_NAME(malloc)(200);
    PINHEAP_NAME(free)(p);
    PINHEAP_NAME(free)(p);
    return 5;
  }
  if (strcmp(argv[1], "foreign") == 0) {
    char *p = PINHEAP_NAME(malloc)(5000);
    PINHEAP_NAME(free)(p + 48);
    return 5;
  }
  return 64;
}
