/*
 * text_layout_probe.c -- a small program for test/text_layout.sh: runs a
 * malloc/free loop (as pinheap-bench's fixed), then prints, for each
 * mapping of the file whose path contains argv[1], its protection, file
 * offset, size in pages and resident pages (/proc/self/pagemap's present
 * bit, readable without privileges):
 *   r-xp 0x10000 36 16
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: text_layout_probe PATH-SUBSTRING\n");
    return 2;
  }
  void *volatile blocks[16];
  for (int round = 0; round < 10000; round++) {
    for (int i = 0; i < 16; i++)
      blocks[i] = malloc(32);
    for (int i = 0; i < 16; i++)
      free(blocks[i]);
  }

  /* Read the maps whole first: the lines printed below must not change them. */
  static char maps[1 << 16];
  int fd = open("/proc/self/maps", O_RDONLY);
  size_t n = 0;
  ssize_t got;
  while (fd >= 0 && n < sizeof(maps) - 1 && (got = read(fd, maps + n, sizeof(maps) - 1 - n)) > 0)
    n += (size_t)got;
  maps[n] = '\0';
  int pm = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0 || pm < 0) {
    fprintf(stderr, "text_layout_probe: cannot read /proc/self/maps or /proc/self/pagemap\n");
    return 2;
  }
  close(fd);
  long page = sysconf(_SC_PAGESIZE);
  for (char *line = strtok(maps, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    unsigned long lo, hi, off;
    char perm[8];
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perm, &off, &path_at) < 4 || path_at == 0)
      continue;
    if (strstr(line + path_at, argv[1]) == NULL)
      continue;
    unsigned long total = (hi - lo) / (unsigned long)page, resident = 0;
    for (unsigned long a = lo; a < hi; a += (unsigned long)page) {
      uint64_t e = 0;
      if (pread(pm, &e, sizeof(e), (off_t)(a / (unsigned long)page * sizeof(e))) == (ssize_t)sizeof(e)
          && (e >> 63) != 0)
        resident++;
    }
    printf("%s 0x%lx %lu %lu\n", perm, off, total, resident);
  }
  return 0;
}
