#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdint.h>
int mpi_like_init(void);
int main(void)
{
  if (mpi_like_init() != 1) return 1;
  void *volatile keep[64];
  int nb = getenv("NB") ? atoi(getenv("NB")) : 64;
  for (int i = 0; i < nb; i++) keep[i] = malloc(16 + (size_t)i * 32);
  for (int i = 0; i < nb; i++) free(keep[i]);
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512]; unsigned long base = 0; int after = 0;
  int pm = open("/proc/self/pagemap", O_RDONLY);
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b, off; char perm[8];
    sscanf(line, "%lx-%lx %7s %lx", &a, &b, perm, &off);
    if (strstr(line, "libdemocore.so") && base == 0) base = a;
    if (strstr(line, "libdemocore.so") && strstr(line, "rw-p")) { after = 1; }
    else if (after == 1 || (base && strstr(line, "libdemocore.so") && strstr(line, "rw-p"))) {}
    if (base && (strstr(line, "libdemocore.so") || after)) {
      printf("%s", line);
      for (unsigned long p = a; p < b; p += 4096) {
        uint64_t e; pread(pm, &e, 8, (p / 4096) * 8);
        if (e >> 63) printf("  %lx\n", p - base);
      }
      if (after == 1 && !strstr(line, "libdemocore.so")) after = 2;
    }
    if (after == 2) break;
  }
  return 0;
}
