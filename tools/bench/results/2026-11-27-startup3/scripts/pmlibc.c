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
  for (int i = 0; i < 64; i++) keep[i] = malloc(16 + (size_t)i * 32);
  for (int i = 0; i < 64; i++) free(keep[i]);
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512]; unsigned long base = 0;
  int pm = open("/proc/self/pagemap", O_RDONLY);
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b, off; char perm[8];
    sscanf(line, "%lx-%lx %7s %lx", &a, &b, perm, &off);
    if (!strstr(line, "libc.so.6")) continue;
    if (base == 0) base = a - off;
    if (perm[2] != 'x') continue;
    for (unsigned long p = a; p < b; p += 4096) {
      uint64_t e; pread(pm, &e, 8, (p / 4096) * 8);
      if (e >> 63) printf("%lx\n", p - base);
    }
  }
  printf("base %lx\n", base);
  return 0;
}
