/*
 * broken.c -- libbench-broken-malloc.so, a deliberately broken allocator
 * for the bench_verify test.  Main entry points: malloc(), free(),
 * realloc().  Preloaded, it serves glibc's memory (__libc_malloc and
 * friends) with one fault chosen by the BENCH_BROKEN environment variable:
 *
 *   overlap   every 97th malloc returns the previous malloc's block again
 *             while that block is still in use (two owners, one block);
 *   nocopy    realloc moves every block and copies nothing;
 *   null      every malloc after the first 1000 returns NULL (ENOMEM).
 *
 * The workloads must notice each fault they can see and exit with status 2
 * and a message, which is what the test checks: a benchmark that would time
 * a broken allocator without noticing is itself broken.  Not installed,
 * never used for measurements.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void *__libc_malloc(size_t size);
void *__libc_realloc(void *ptr, size_t size);
void __libc_free(void *ptr);

#define BROKEN_OVERLAP_EVERY 97
#define BROKEN_NULL_AFTER 1000
#define BROKEN_ALIASES_MAX 256

typedef enum broken_mode {
  BROKEN_UNSET, BROKEN_NONE, BROKEN_OVERLAP, BROKEN_NOCOPY, BROKEN_NULL
} broken_mode_t;

static broken_mode_t broken_mode;
static pthread_mutex_t broken_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long broken_calls;
static void *broken_last;              /* the last real block, while in use */
static size_t broken_last_size;
static void *broken_aliases[BROKEN_ALIASES_MAX];  /* blocks handed out twice */

static broken_mode_t broken_mode_get(void)
{
  if (broken_mode == BROKEN_UNSET) {
    const char *m = getenv("BENCH_BROKEN");
    broken_mode = m == NULL ? BROKEN_NONE
                  : strcmp(m, "overlap") == 0 ? BROKEN_OVERLAP
                  : strcmp(m, "nocopy") == 0 ? BROKEN_NOCOPY
                  : strcmp(m, "null") == 0 ? BROKEN_NULL
                  : BROKEN_NONE;
  }
  return broken_mode;
}

/** Removes ptr from the alias table; 1 if it was there.  Lock held. */
static int broken_alias_take(void *ptr)
{
  for (int i = 0; i < BROKEN_ALIASES_MAX; i++)
    if (broken_aliases[i] == ptr && ptr != NULL) {
      broken_aliases[i] = NULL;
      return 1;
    }
  return 0;
}

void *malloc(size_t size)
{
  broken_mode_t mode = broken_mode_get();
  pthread_mutex_lock(&broken_lock);
  unsigned long n = ++broken_calls;
  if (mode == BROKEN_NULL && n > BROKEN_NULL_AFTER) {
    pthread_mutex_unlock(&broken_lock);
    errno = ENOMEM;
    return NULL;
  }
  if (mode == BROKEN_OVERLAP && n % BROKEN_OVERLAP_EVERY == 0 && broken_last != NULL &&
      size <= broken_last_size) {
    for (int i = 0; i < BROKEN_ALIASES_MAX; i++)
      if (broken_aliases[i] == NULL) {
        void *alias = broken_aliases[i] = broken_last;
        pthread_mutex_unlock(&broken_lock);
        return alias;
      }
  }
  pthread_mutex_unlock(&broken_lock);

  void *p = __libc_malloc(size);
  pthread_mutex_lock(&broken_lock);
  broken_last = p;
  broken_last_size = size;
  pthread_mutex_unlock(&broken_lock);
  return p;
}

void free(void *ptr)
{
  if (ptr == NULL)
    return;
  pthread_mutex_lock(&broken_lock);
  int alias = broken_alias_take(ptr);
  if (!alias && ptr == broken_last)
    broken_last = NULL;
  pthread_mutex_unlock(&broken_lock);
  if (!alias)
    __libc_free(ptr);
}

void *realloc(void *ptr, size_t size)
{
  broken_mode_t mode = broken_mode_get();
  if (ptr == NULL)
    return malloc(size);
  if (mode == BROKEN_NOCOPY) {
    void *p = __libc_malloc(size);
    if (p != NULL)
      free(ptr);
    return p;
  }
  pthread_mutex_lock(&broken_lock);
  int alias = broken_alias_take(ptr);
  if (!alias && ptr == broken_last)
    broken_last = NULL;
  pthread_mutex_unlock(&broken_lock);
  if (alias) {
    /* Give the second owner a block of its own, with what it saw. */
    void *p = __libc_malloc(size);
    if (p != NULL)
      memcpy(p, ptr, size < malloc_usable_size(ptr) ? size : malloc_usable_size(ptr));
    return p;
  }
  return __libc_realloc(ptr, size);
}
