/*
 * layout_probe.c -- a small program for test/packaging/text_layout.sh and
 * test/packaging/data_layout.sh: runs a malloc/free loop (as pinheap-bench's fixed),
 * then counts the pages the preloaded object (the file whose path contains
 * PATH-SUBSTRING) keeps resident (/proc/self/pagemap, readable without
 * privileges).
 *
 * layout_probe PATH-SUBSTRING
 *     for each of its mappings: protection, file offset, size in pages and
 *     resident pages, e.g.  r-xp 0x10000 36 16
 * layout_probe PATH-SUBSTRING SEGMENT-END (hex, from the load base)
 *     its writable segment:  data N bss M
 *       data: resident pages of its file-backed writable mappings (.data,
 *             .got: read or written, each one counts in the RSS)
 *       bss:  pages of the anonymous mapping after them, up to the
 *             segment's end, that were written (present and mapped by this
 *             process alone; a page only read is the shared zero page and
 *             costs nothing)
 * With LAYOUT_PROBE_PAGES=1 in the environment, each mapping's line is
 * followed by one listing its resident pages (text_layout_core.sh):
 *     pages r-xp 0x6000 0x7f12345a6000: 0 1 2@1a2b3ch 3@1a2b3dt 5
 *     (protection, file offset, start address, page indices in the mapping;
 *     where the page frame can be read (root), "@frame" and "h" or "t" for
 *     the head or a tail page of a large folio, from /proc/kpageflags)
 * and the loop is preceded by the start-up row's blocks (tools/bench/
 * startup.py: 64 blocks of 16 + 32 i bytes, up to 2032, made then freed),
 * which reach the chunk caches as well as the slab pages.
 * With LAYOUT_PROBE_THREAD=1 in the environment, the loop runs on a thread
 * of its own, joined before the count (as pinheap-bench runs a workload):
 * the thread's arena, made on its first malloc, and its exit run code a
 * program without threads does not (text_layout_thread).
 * layout_probe --startup PREFIX
 *     the bytes pinheap holds in use as main() starts, before main
 *     allocates anything (PREFIXmallinfo2's uordblks): what pinheap's own
 *     start-up left allocated through the allocator it installed (ld.so's
 *     set-up of a dlopen handle, dlerror's state after a failed dlsym...),
 *     each such block making its size class's page resident.
 *         in use at main: N bytes
 *     Exits 1 if PREFIXowns is not found or does not own a malloc block
 *     (pinheap is not the process's malloc: the count would mean nothing).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PM_PRESENT   ((uint64_t)1 << 63)
#define PM_EXCLUSIVE ((uint64_t)1 << 56)
#define PM_PFN       (((uint64_t)1 << 55) - 1)
#define KPF_HEAD     ((uint64_t)1 << 15)     /* linux/kernel-page-flags.h */
#define KPF_TAIL     ((uint64_t)1 << 16)

static int pm = -1;
static int kpf = -1;                    /* /proc/kpageflags: root only */
static unsigned long page;

/* The pagemap entry of the page at a (0 if it cannot be read). */
static uint64_t pm_entry(unsigned long a)
{
  uint64_t e = 0;
  if (pread(pm, &e, sizeof(e), (off_t)(a / page * sizeof(e))) != (ssize_t)sizeof(e))
    return 0;
  return e;
}

/* --startup: read before main allocates anything. */
static int startup_blocks(const char *prefix)
{
  char name[128];
  snprintf(name, sizeof(name), "%smallinfo2", prefix);
  struct mallinfo2 (*info)(void) = (struct mallinfo2 (*)(void))dlsym(RTLD_DEFAULT, name);
  snprintf(name, sizeof(name), "%sowns", prefix);
  int (*owns)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, name);
  if (info == NULL || owns == NULL) {
    printf("layout_probe: %s or %smallinfo2 not found: pinheap is not loaded\n", name, prefix);
    return 1;
  }
  size_t in_use = info().uordblks;
  void *volatile p = malloc(32);
  int ours = owns(p);
  free(p);
  if (!ours) {
    printf("layout_probe: malloc's block is not pinheap's: pinheap is not this process's malloc\n");
    return 1;
  }
  printf("in use at main: %zu bytes\n", in_use);
  return 0;
}

static int pages_mode;

/* The malloc/free loop (as pinheap-bench's fixed). */
static void *probe_loop(void *arg)
{
  void *volatile blocks[16];
  (void)arg;
  if (pages_mode) {
    void *volatile keep[64];
    for (int i = 0; i < 64; i++)
      keep[i] = malloc(16 + (size_t)i * 32);
    for (int i = 0; i < 64; i++)
      free(keep[i]);
  }
  for (int round = 0; round < 10000; round++) {
    for (int i = 0; i < 16; i++)
      blocks[i] = malloc(32);
    for (int i = 0; i < 16; i++)
      free(blocks[i]);
  }
  return NULL;
}

int main(int argc, char **argv)
{
  if (argc == 3 && strcmp(argv[1], "--startup") == 0)
    return startup_blocks(argv[2]);
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: layout_probe PATH-SUBSTRING [SEGMENT-END]\n");
    return 2;
  }
  int data_mode = argc == 3;
  unsigned long seg_end = data_mode ? strtoul(argv[2], NULL, 16) : 0;
  const char *pages_env = getenv("LAYOUT_PROBE_PAGES");
  pages_mode = pages_env != NULL && strcmp(pages_env, "1") == 0;
  const char *thread = getenv("LAYOUT_PROBE_THREAD");
  if (thread != NULL && strcmp(thread, "1") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, probe_loop, NULL) != 0 || pthread_join(t, NULL) != 0) {
      fprintf(stderr, "layout_probe: cannot run the loop on a thread\n");
      return 2;
    }
  } else {
    probe_loop(NULL);
  }

  /* Read the maps whole first: the lines printed below must not change them. */
  static char maps[1 << 16];
  int fd = open("/proc/self/maps", O_RDONLY);
  size_t n = 0;
  ssize_t got;
  while (fd >= 0 && n < sizeof(maps) - 1 && (got = read(fd, maps + n, sizeof(maps) - 1 - n)) > 0)
    n += (size_t)got;
  maps[n] = '\0';
  pm = open("/proc/self/pagemap", O_RDONLY);
  if (pages_mode)
    kpf = open("/proc/kpageflags", O_RDONLY);
  if (fd < 0 || pm < 0) {
    fprintf(stderr, "layout_probe: cannot read /proc/self/maps or /proc/self/pagemap\n");
    return 2;
  }
  close(fd);
  page = (unsigned long)sysconf(_SC_PAGESIZE);
  unsigned long base = 0, mine_end = 0, data = 0, bss = 0;
  int found = 0;
  for (char *line = strtok(maps, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    unsigned long lo, hi, off;
    char perm[8];
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perm, &off, &path_at) < 4)
      continue;
    const char *path = path_at != 0 ? line + path_at : "";
    int mine = strstr(path, argv[1]) != NULL;
    if (!data_mode) {
      if (!mine)
        continue;
      unsigned long resident = 0;
      for (unsigned long a = lo; a < hi; a += page)
        resident += (pm_entry(a) & PM_PRESENT) != 0;
      printf("%s 0x%lx %lu %lu\n", perm, off, (hi - lo) / page, resident);
      if (pages_mode) {
        printf("pages %s 0x%lx 0x%lx:", perm, off, lo);
        for (unsigned long a = lo; a < hi; a += page) {
          uint64_t e = pm_entry(a), pfn = e & PM_PFN, flags = 0;
          if (!(e & PM_PRESENT))
            continue;
          printf(" %lu", (a - lo) / page);
          if (pfn == 0 || kpf < 0)
            continue;                  /* frames hidden (not root) */
          if (pread(kpf, &flags, sizeof(flags), (off_t)(pfn * sizeof(flags))) != (ssize_t)sizeof(flags))
            flags = 0;
          printf("@%llx%s", (unsigned long long)pfn,
                 flags & KPF_HEAD ? "h" : flags & KPF_TAIL ? "t" : "");
        }
        printf("\n");
      }
      continue;
    }
    if (mine && off == 0 && !found) {
      base = lo;
      found = 1;
    }
    int anon_tail = !mine && found && path[0] == '\0' && lo == mine_end && lo < base + seg_end;
    if (mine)
      mine_end = hi;
    if (!(mine && perm[1] == 'w') && !anon_tail)
      continue;
    if (anon_tail && hi > base + seg_end)
      hi = (base + seg_end + page - 1) / page * page;
    for (unsigned long a = lo; a < hi; a += page) {
      uint64_t e = pm_entry(a);
      if (!(e & PM_PRESENT))
        continue;
      if (mine)
        data++;
      else if (e & PM_EXCLUSIVE)
        bss++;
    }
  }
  if (!data_mode)
    return 0;
  if (!found) {
    fprintf(stderr, "layout_probe: no mapping of a file whose path contains %s\n", argv[1]);
    return 2;
  }
  printf("data %lu bss %lu\n", data, bss);
  return 0;
}
