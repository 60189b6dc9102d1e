/*
 * feeds.c -- the consumers pinheap feeds its memory events to, attached
 * and described in one place: UCX's libucm (ucx.c), Open MPI's memory
 * hooks (ompi.c), libfabric's MR caches once the program imported
 * pinheap's monitor (fabric.c), and the other code patchers of libc that
 * pinheap's own system calls go through (peers.c).  Main entry points: feeds_attach(),
 * PINHEAP_NAME(consumers_text)().  A process with none of them pays one
 * walk of the loaded objects and one read of their symbol tables per
 * attach.
 */
#include "hooks/decide/dispatch.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "config/params.h"
#include "hooks/intercept/peers.h"
#include "pinheap.h"
#include "hooks/intercept/reloc.h"
#include "allocator/base/startup.h"

#define FEEDS_UCX  1
#define FEEDS_OMPI 2

/* The consumers seen so far (FEEDS_*): attached at every later call. */
static int feeds_seen;

typedef struct feeds_find_s {
  const char *const *prefixes;
  int n, found;
  char (*paths)[FEEDS_PATH_MAX];
} feeds_find_t;

PH_STARTUP static int feeds_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  feeds_find_t *f = data;
  const char *name = info->dlpi_name;
  const char *base = name != NULL ? reloc_file_of(name) : NULL;   /* once per object */
  (void)size;
  for (int i = 0; base != NULL && i < f->n; i++) {
    if ((f->found & (1 << i)) || !reloc_begins(base, f->prefixes[i]))
      continue;
    f->found |= 1 << i;
    if (f->paths != NULL)
      snprintf(f->paths[i], FEEDS_PATH_MAX, "%s", name);
  }
  return 0;
}

PH_STARTUP int feeds_objects(const char *const *prefixes, int n, char (*paths)[FEEDS_PATH_MAX])
{
  feeds_find_t f = { prefixes, n, 0, paths };
  dl_iterate_phdr(feeds_find_cb, &f);
  return f.found;
}

void *feeds_open(const char *prefix, char path[FEEDS_PATH_MAX])
{
  char paths[1][FEEDS_PATH_MAX];
  snprintf(path, FEEDS_PATH_MAX, "linked into the program");
  if (!feeds_objects(&prefix, 1, paths))
    return RTLD_DEFAULT;
  snprintf(path, FEEDS_PATH_MAX, "%s", paths[0]);
  return dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
}

/* One look for every consumer at once: their libraries among the loaded
 * objects, else their functions in any object's symbol table (linked
 * statically; read without dlsym, whose failed look-up allocates).  The
 * attach of each, which costs more, runs only where it is present. */
PH_STARTUP void feeds_attach(void)
{
  static const char *const libs[2] = { "libucm.so", "libopen-pal.so" };
  static const char *const names[2] = { "ucm_vm_mmap", "opal_mem_hooks_release_hook" };
  void *defs[2] = { NULL, NULL };

  if (params_get()->v[PARAM_EVENTS].value == 0 || copies_serving() != NULL)
    return;                    /* PINHEAP_EVENTS=0, or another copy of pinheap feeds them */
  int found = __atomic_load_n(&feeds_seen, __ATOMIC_ACQUIRE) | feeds_objects(libs, 2, NULL);
  if (found != (FEEDS_UCX | FEEDS_OMPI)) {
    if (reloc_defs_named(NULL, names, defs, 2) != 0)
      found |= FEEDS_UCX | FEEDS_OMPI;          /* uncertain: let each look */
    found |= (defs[0] != NULL ? FEEDS_UCX : 0) | (defs[1] != NULL ? FEEDS_OMPI : 0);
  }
  __atomic_fetch_or(&feeds_seen, found, __ATOMIC_RELEASE);
  if (found & FEEDS_UCX)
    ucx_feed_attach();
  if (found & FEEDS_OMPI)
    ompi_feed_attach();
  fabric_feed_attach();        /* libfabric, if it holds pinheap's monitor: what had to wait */
}

const char *PINHEAP_NAME(consumers_text)(void)
{
  static char text[2048];
  int (*const describe[])(char *, size_t) = { ucx_feed_describe, ompi_feed_describe,
                                              fabric_feed_describe, peers_describe };
  char one[1024];
  size_t used = 0;

  const copies_api_t *serving = copies_serving();  /* another copy serves (copies.c) */
  if (ph_unlikely(serving != NULL))
    return serving->consumers_text();
  feeds_attach();
  text[0] = '\0';
  for (size_t i = 0; i < sizeof(describe) / sizeof(describe[0]); i++) {
    if (describe[i](one, sizeof(one)) <= 0)
      continue;
    int n = snprintf(text + used, sizeof(text) - used, "%s%s", used > 0 ? " " : "", one);
    if (n < 0 || (size_t)n >= sizeof(text) - used)
      break;                   /* full: what fit stays */
    used += (size_t)n;
  }
  return text;
}
COPIES_SELF_ALIAS(consumers_text);
