/*
 * wl_smallobj.c -- the many-small-objects workload, smallobj_run().
 *
 * Each thread keeps one long-lived binary tree and, until it has made its
 * share of SMALLOBJ_NODES nodes, builds short-lived structures, checks them
 * and frees them: a complete binary tree of depth SMALLOBJ_DEPTH (32-byte
 * nodes, freed in post-order) and a singly linked list of
 * SMALLOBJ_LIST_LEN nodes of 32-128 bytes (freed from the head).  Trees
 * are checked node by node (tag and number) and by count and sum, lists
 * node by node (marks).
 */
#include "bench.h"

#include <stdlib.h>

#define SMALLOBJ_NODES 16000000u    /* nodes at scale 1, all threads */
#define SMALLOBJ_LONG_DEPTH 14      /* the long-lived tree */
#define SMALLOBJ_DEPTH 10           /* each short-lived tree */
#define SMALLOBJ_LIST_LEN 2000
#define SMALLOBJ_LIST_MIN 32
#define SMALLOBJ_LIST_MAX 128

/* The tag comes first: it is what an allocator overwrites when it takes a
 * freed node back, so a stale node is caught before its pointers are used. */
typedef struct tree_node {
  uint64_t tag;
  uint64_t value;
  struct tree_node *left;
  struct tree_node *right;
} tree_node_t;

typedef struct list_node {
  uint64_t tag;                     /* = first mark word */
  struct list_node *next;
  uint64_t size;
} list_node_t;

static uint64_t tree_tag(int thread_id, uint64_t value)
{
  return (value * 0xD6E8FEB86659FD93ULL) ^ ((uint64_t)thread_id << 56) ^ 0x7265656e6f6465ULL;
}

/* Node numbered `value` has children 2*value and 2*value+1 (root = 1). */
static tree_node_t *tree_build(bench_thread_t *t, int depth, uint64_t value)
{
  tree_node_t *node = bench_malloc(sizeof(*node), "smallobj tree node");
  t->ops++;
  node->tag = tree_tag(t->id, value);
  node->value = value;
  node->left = depth > 0 ? tree_build(t, depth - 1, 2 * value) : NULL;
  node->right = depth > 0 ? tree_build(t, depth - 1, 2 * value + 1) : NULL;
  return node;
}

/** Sum of the values below node, which must be numbered `value`; checks
 *  each node before following its pointers. */
static uint64_t tree_sum(const bench_thread_t *t, const tree_node_t *node, uint64_t value,
                         uint64_t *count_p)
{
  if (node == NULL)
    return 0;
  if (node->tag != tree_tag(t->id, value) || node->value != value)
    bench_fail("thread %d: tree node %p should be node %llu; it holds tag 0x%016llx and value "
               "%llu (node overwritten or handed out twice)", t->id, (const void *)node,
               (unsigned long long)value, (unsigned long long)node->tag,
               (unsigned long long)node->value);
  (*count_p)++;
  return node->value + tree_sum(t, node->left, 2 * value, count_p) +
         tree_sum(t, node->right, 2 * value + 1, count_p);
}

static void tree_free(bench_thread_t *t, tree_node_t *node)
{
  if (node == NULL)
    return;
  tree_free(t, node->left);
  tree_free(t, node->right);
  free(node);
  t->ops++;
}

static void tree_check(bench_thread_t *t, const tree_node_t *root, int depth)
{
  uint64_t n = ((uint64_t)1 << (depth + 1)) - 1;
  uint64_t count = 0;
  uint64_t sum = tree_sum(t, root, 1, &count);
  if (count != n || sum != n * (n + 1) / 2)
    bench_fail("thread %d: tree of depth %d has %llu nodes summing to %llu, expected %llu "
               "summing to %llu", t->id, depth, (unsigned long long)count,
               (unsigned long long)sum, (unsigned long long)n,
               (unsigned long long)(n * (n + 1) / 2));
  t->check += sum;
}

static uint64_t list_tag(int thread_id, uint64_t i)
{
  return ((uint64_t)thread_id << 40) ^ (i * 0x9E3779B97F4A7C15ULL);
}

static void list_run(bench_thread_t *t)
{
  list_node_t *head = NULL;
  for (uint64_t i = 0; i < SMALLOBJ_LIST_LEN; i++) {
    size_t size = (size_t)rng_range(&t->rng, SMALLOBJ_LIST_MIN, SMALLOBJ_LIST_MAX);
    list_node_t *node = bench_malloc(size, "smallobj list node");
    t->ops++;
    bench_mark(node, size, list_tag(t->id, i), "smallobj list node");
    node->size = size;
    node->next = head;
    head = node;
  }
  uint64_t i = SMALLOBJ_LIST_LEN;
  while (head != NULL) {
    list_node_t *next = head->next;
    i--;
    bench_mark_check(head, head->size, list_tag(t->id, i), "smallobj list node");
    free(head);
    t->ops++;
    head = next;
  }
  if (i != 0)
    bench_fail("thread %d: list had %llu nodes, expected %d", t->id,
               (unsigned long long)(SMALLOBJ_LIST_LEN - i), SMALLOBJ_LIST_LEN);
  t->check += SMALLOBJ_LIST_LEN;
}

static void smallobj_thread(bench_thread_t *t)
{
  uint64_t share = bench_share(bench_scaled(SMALLOBJ_NODES, t->args->scale), t->id, t->nthreads);
  tree_node_t *keep = tree_build(t, SMALLOBJ_LONG_DEPTH, 1);

  uint64_t made = 0;
  while (made < share) {
    tree_node_t *tree = tree_build(t, SMALLOBJ_DEPTH, 1);
    tree_check(t, tree, SMALLOBJ_DEPTH);
    tree_free(t, tree);
    list_run(t);
    made += ((uint64_t)1 << (SMALLOBJ_DEPTH + 1)) - 1 + SMALLOBJ_LIST_LEN;
  }
  tree_check(t, keep, SMALLOBJ_LONG_DEPTH);
  tree_free(t, keep);
}

void smallobj_run(const bench_args_t *args, bench_result_t *result_p)
{
  bench_threads_run(args, smallobj_thread, NULL, result_p);
}
