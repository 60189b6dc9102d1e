/*
 * wl_tree.c -- the binary-tree workload, tree_run() (the shape of the
 * "binary-trees" benchmark).
 *
 * Thread 0 first builds one long-lived tree of depth TREE_DEPTH_MAX.
 * Then, for each depth d = TREE_DEPTH_MIN, +2, ... up to the maximum
 * depth, the threads build, check and tear down 2^(max - d + min)
 * complete binary trees of depth d between them (each thread its share),
 * so every depth costs about the same number of nodes and the big trees
 * do not fit in any cache.  Nodes are TREE_NODE_SIZE bytes; a tree is torn
 * down in post-order (children before the parent), as a recursive
 * destructor does.  The long-lived tree is checked and freed at the end.
 *
 * The maximum depth comes from the scale: 16 at scale 1, one more per
 * doubling of the scale (14 at 0.25, 10 at 0.01); nodes built at scale 1:
 * about 15 million.  With THREADS > 1 each thread runs its share of every
 * depth's trees, so the per-thread heaps grow and shrink together.
 *
 * Each node is checked (tag and number) before its pointers are followed,
 * and each tree by its node count and the sum of its numbers.
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>

#define TREE_DEPTH_MIN 4
#define TREE_DEPTH_AT_SCALE_1 16
#define TREE_DEPTH_FLOOR 6
#define TREE_DEPTH_CEIL 24

typedef struct tree_node {
  uint64_t tag;                     /* first: what a reused node loses first */
  struct tree_node *left;
  struct tree_node *right;
  uint64_t value;
} tree_node_t;

#define TREE_NODE_SIZE sizeof(tree_node_t)

typedef struct tree_shared {
  int depth_max;
} tree_shared_t;

static uint64_t tree_tag(int thread_id, uint64_t value)
{
  return (value * 0x9FB21C651E98DF25ULL) ^ ((uint64_t)thread_id << 52) ^ 0x74726565ULL;
}

/* Node numbered value has children 2*value and 2*value+1 (root = 1). */
static tree_node_t *tree_build(bench_thread_t *t, int depth, uint64_t value)
{
  tree_node_t *node = bench_malloc(TREE_NODE_SIZE, "tree node");
  t->ops++;
  node->tag = tree_tag(t->id, value);
  node->value = value;
  if (depth > 0) {
    node->left = tree_build(t, depth - 1, 2 * value);
    node->right = tree_build(t, depth - 1, 2 * value + 1);
  } else {
    node->left = node->right = NULL;
  }
  return node;
}

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
  t->check += count;
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

static void tree_thread(bench_thread_t *t)
{
  const tree_shared_t *shared = t->shared;
  int max = shared->depth_max;
  tree_node_t *keep = t->id == 0 ? tree_build(t, max, 1) : NULL;

  for (int d = TREE_DEPTH_MIN; d <= max; d += 2) {
    uint64_t iterations = bench_share((uint64_t)1 << (max - d + TREE_DEPTH_MIN), t->id,
                                      t->nthreads);
    for (uint64_t i = 0; i < iterations; i++) {
      tree_node_t *tree = tree_build(t, d, 1);
      tree_check(t, tree, d);
      tree_free(t, tree);
    }
  }
  if (keep != NULL) {
    tree_check(t, keep, max);
    tree_free(t, keep);
  }
}

/** The maximum depth for a scale (see the banner). */
static int tree_depth_max(double scale)
{
  int depth = TREE_DEPTH_AT_SCALE_1 + (int)lround(log2(scale));
  if (depth < TREE_DEPTH_FLOOR)
    depth = TREE_DEPTH_FLOOR;
  if (depth > TREE_DEPTH_CEIL)
    depth = TREE_DEPTH_CEIL;
  return depth;
}

void tree_run(const bench_args_t *args, bench_result_t *result_p)
{
  static tree_shared_t shared;
  shared.depth_max = tree_depth_max(args->scale);
  bench_threads_run(args, tree_thread, &shared, result_p);

  /* Every node built was checked once and freed once. */
  uint64_t nodes = ((uint64_t)1 << (shared.depth_max + 1)) - 1;
  for (int d = TREE_DEPTH_MIN; d <= shared.depth_max; d += 2)
    nodes += ((uint64_t)1 << (shared.depth_max - d + TREE_DEPTH_MIN)) *
             (((uint64_t)1 << (d + 1)) - 1);
  if (result_p->check != nodes || result_p->ops != 2 * nodes)
    bench_fail("%llu nodes checked and %llu allocator calls, expected %llu and %llu",
               (unsigned long long)result_p->check, (unsigned long long)result_p->ops,
               (unsigned long long)nodes, (unsigned long long)(2 * nodes));
}
