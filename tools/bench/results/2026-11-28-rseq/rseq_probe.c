/*
 * rseq_probe.c -- what a per-CPU cache through rseq would cost and gain on
 * this machine (issue 30, item 3): the pop+push pair of a block on a list,
 * the way a cache's fast path takes and gives back a block, kept
 *   tls:  per thread (pinheap's, jemalloc's, tcmalloc 2.10's and mimalloc's way),
 *   rseq: per CPU, each operation a restartable sequence on glibc's
 *         registered struct rseq (google tcmalloc's way),
 *   lock: per CPU behind a spin lock taken by xchg (what per-CPU caches
 *         without rseq pay),
 * with T threads on this machine's CPUs.  Prints, per mode, ns per pair
 * (wall time x CPUs / pairs), how many sequences the kernel aborted
 * (preempted or migrated in a critical section) per million pairs, and
 * checks that no node was lost or doubled (the lists' counts add up).
 *
 * cc -O2 -pthread rseq_probe.c -o rseq_probe && ./rseq_probe MODE THREADS PAIRS
 * x86-64 Linux with glibc >= 2.35 only.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>
#include <time.h>
#include <unistd.h>

#define MAXCPU 256
#define NODES 64                 /* per list at the start */

typedef struct node { struct node *next; char pad[56]; } node_t;
typedef struct slot {            /* one list: a CPU's or a thread's */
  node_t *head;
  long count;                    /* pops minus pushes, to check */
  int lock;
  char pad[64 - sizeof(node_t *) - sizeof(long) - sizeof(int)];
} __attribute__((aligned(64))) slot_t;

static slot_t cpus[MAXCPU];
static int mode;                 /* 0 tls, 1 rseq, 2 lock */
static long pairs;
static __thread long aborts;

static struct rseq *rs(void)
{
  return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

/* The two ends of a restartable sequence (asm goto, operands [cs], [cpu],
 * [cur], label abort): its descriptor (start 1, commit end 2, abort 4),
 * stored in the thread's rseq area, then the CPU checked at its start;
 * the abort handler after the kernel's signature (RSEQ_SIG), out of line. */
#define RSEQ_BEGIN                                                            \
  ".pushsection __rseq_cs, \"aw\"\n\t"                                       \
  ".balign 32\n\t"                                                           \
  "3:\n\t"                                                                   \
  ".long 0x0, 0x0\n\t"                                                       \
  ".quad 1f, (2f - 1f), 4f\n\t"                                              \
  ".popsection\n\t"                                                          \
  "leaq 3b(%%rip), %%rax\n\t"                                                \
  "movq %%rax, %[cs]\n\t"                                                    \
  "1:\n\t"                                                                   \
  "cmpl %[cpu], %[cur]\n\t"                                                  \
  "jnz 4f\n\t"
#define RSEQ_ABORT                                                            \
  ".pushsection __rseq_failure, \"ax\"\n\t"                                  \
  ".byte 0x0f, 0xb9, 0x3d\n\t"                                               \
  ".long 0x53053053\n\t"                                                     \
  "4:\n\t"                                                                   \
  "jmp %l[abort]\n\t"                                                        \
  ".popsection\n\t"

/* Pops cpus[cpu].head if this thread still runs on cpu; the commit is the
 * store of the new head.  Returns the node, NULL if the list is empty, or
 * (node_t *)1 if the kernel aborted the sequence. */
static inline node_t *rseq_pop(slot_t *s, uint32_t cpu)
{
  node_t *head;
  __asm__ __volatile__ goto(
    RSEQ_BEGIN
    "movq %[head], %%rax\n\t"
    "testq %%rax, %%rax\n\t"
    "jz %l[empty]\n\t"
    "movq (%%rax), %%rcx\n\t"
    "movq %%rcx, %[head]\n\t"      /* commit */
    "2:\n\t"
    "movq %%rax, %[out]\n\t"
    "jmp 5f\n\t"
    RSEQ_ABORT
    "5:\n\t"
    : [out] "=m" (head)
    : [cs] "m" (rs()->rseq_cs), [cpu] "r" (cpu), [cur] "m" (rs()->cpu_id),
      [head] "m" (s->head)
    : "rax", "rcx", "memory", "cc"
    : abort, empty);
  return head;
abort:
  aborts++;
  return (node_t *)1;
empty:
  return NULL;
}

/* Pushes n on cpus[cpu] if this thread still runs on cpu.  0, or 1 if aborted. */
static inline int rseq_push(slot_t *s, uint32_t cpu, node_t *n)
{
  __asm__ __volatile__ goto(
    RSEQ_BEGIN
    "movq %[head], %%rax\n\t"
    "movq %%rax, (%[n])\n\t"
    "movq %[n], %[head]\n\t"       /* commit */
    "2:\n\t"
    RSEQ_ABORT
    :
    : [cs] "m" (rs()->rseq_cs), [cpu] "r" (cpu), [cur] "m" (rs()->cpu_id),
      [head] "m" (s->head), [n] "r" (n)
    : "rax", "memory", "cc"
    : abort);
  return 0;
abort:
  aborts++;
  return 1;
}

static void lock_take(slot_t *s)
{
  while (__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE) != 0)
    while (__atomic_load_n(&s->lock, __ATOMIC_RELAXED) != 0)
      sched_yield();
}
static void lock_drop(slot_t *s) { __atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE); }

static void fill(slot_t *s)
{
  for (int i = 0; i < NODES; i++) {
    node_t *n = aligned_alloc(64, sizeof(node_t));
    n->next = s->head;
    s->head = n;
  }
}

static long total_aborts;
static pthread_mutex_t total_lock = PTHREAD_MUTEX_INITIALIZER;

static void *run(void *arg)
{
  slot_t *mine = arg;            /* tls: the thread's own list */
  for (long i = 0; i < pairs; i++) {
    if (mode == 0) {
      node_t *n = mine->head;
      mine->head = n->next;
      __asm__ __volatile__("" ::: "memory");        /* the block is used here */
      n->next = mine->head;
      mine->head = n;
    } else if (mode == 1) {
      node_t *n;
      uint32_t cpu;
      do {
        cpu = __atomic_load_n(&rs()->cpu_id, __ATOMIC_RELAXED);
        n = rseq_pop(&cpus[cpu], cpu);
      } while (n == (node_t *)1);
      if (n == NULL) { fprintf(stderr, "rseq_probe: CPU %u's list empty\n", cpu); exit(1); }
      __asm__ __volatile__("" ::: "memory");
      do                                              /* freed on the CPU it runs on now */
        cpu = __atomic_load_n(&rs()->cpu_id, __ATOMIC_RELAXED);
      while (rseq_push(&cpus[cpu], cpu, n));
    } else {
      uint32_t cpu = __atomic_load_n(&rs()->cpu_id, __ATOMIC_RELAXED);
      slot_t *s = &cpus[cpu];
      lock_take(s);
      node_t *n = s->head;
      s->head = n->next;
      lock_drop(s);
      __asm__ __volatile__("" ::: "memory");
      cpu = __atomic_load_n(&rs()->cpu_id, __ATOMIC_RELAXED);
      s = &cpus[cpu];
      lock_take(s);
      n->next = s->head;
      s->head = n;
      lock_drop(s);
    }
  }
  pthread_mutex_lock(&total_lock);
  total_aborts += aborts;
  pthread_mutex_unlock(&total_lock);
  return NULL;
}

static long count(slot_t *s)
{
  long c = 0;
  for (node_t *n = s->head; n != NULL && c <= 1000000; n = n->next)
    c++;
  return c;
}

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: rseq_probe tls|rseq|lock THREADS PAIRS\n");
    return 2;
  }
  mode = strcmp(argv[1], "tls") == 0 ? 0 : strcmp(argv[1], "rseq") == 0 ? 1
       : strcmp(argv[1], "lock") == 0 ? 2 : -1;
  int threads = atoi(argv[2]);
  pairs = atol(argv[3]);
  if (mode < 0 || threads < 1 || threads > 1024 || pairs < 1) {
    fprintf(stderr, "rseq_probe: bad arguments '%s %s %s': expected tls|rseq|lock, 1-1024 threads, "
            "pairs > 0\n", argv[1], argv[2], argv[3]);
    return 2;
  }
  if (__rseq_size == 0 || (int)rs()->cpu_id < 0) {
    printf("SKIP: glibc registered no rseq area (__rseq_size %u)\n", __rseq_size);
    return 77;
  }
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  if (ncpu > MAXCPU) ncpu = MAXCPU;
  for (long c = 0; c < ncpu; c++)
    fill(&cpus[c]);
  slot_t *own = aligned_alloc(64, sizeof(slot_t) * (size_t)threads);
  memset(own, 0, sizeof(slot_t) * (size_t)threads);
  for (int t = 0; t < threads; t++)
    fill(&own[t]);
  pthread_t *tid = calloc((size_t)threads, sizeof(pthread_t));
  struct timespec a, b, ca, cb;
  clock_gettime(CLOCK_MONOTONIC, &a);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
  for (int t = 0; t < threads; t++)
    pthread_create(&tid[t], NULL, run, &own[t]);
  for (int t = 0; t < threads; t++)
    pthread_join(tid[t], NULL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
  long nodes = 0, want = (ncpu + threads) * NODES;
  for (long c = 0; c < ncpu; c++)
    nodes += count(&cpus[c]);
  for (int t = 0; t < threads; t++)
    nodes += count(&own[t]);
  double cpu_s = (double)(cb.tv_sec - ca.tv_sec) + (double)(cb.tv_nsec - ca.tv_nsec) * 1e-9;
  double wall = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
  printf("{\"mode\":\"%s\",\"threads\":%d,\"pairs\":%ld,\"wall_s\":%.4f,\"cpu_ns_per_pair\":%.2f,"
         "\"aborts_per_million\":%.2f,\"nodes\":%ld,\"nodes_expected\":%ld}\n",
         argv[1], threads, pairs * threads, wall, cpu_s * 1e9 / ((double)pairs * threads),
         (double)total_aborts * 1e6 / ((double)pairs * threads), nodes, want);
  return nodes == want ? 0 : 1;
}
