#include <stdlib.h>
#include <stdio.h>
#include <string.h>
int mpi_like_init(void);
int main(void)
{
  if (mpi_like_init() != 1) return 1;
  void *volatile keep[64];
  int nb = getenv("NB") ? atoi(getenv("NB")) : 64; for (int i = 0; i < nb; i++) keep[i] = malloc(16 + (size_t)i * 32);
  for (int i = 0; i < nb; i++) free(keep[i]);
  static char buf[1 << 16];
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512], name[256] = "";
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b; char perm[8]; unsigned long off;
    if (sscanf(line, "%lx-%lx %7s %lx", &a, &b, perm, &off) == 4) {
      char *p = strrchr(line, ' '); snprintf(name, sizeof name, "%s %lx %lu %s", perm, off, (b - a) / 4096, p + 1);
      name[strlen(name) - 1] = 0;
    } else if (strncmp(line, "Rss:", 4) == 0) {
      long kb = atol(line + 4); if (kb) printf("%5ld %s\n", kb / 4, name);
    } else if (strncmp(line, "Anonymous:", 10) == 0) {
      long kb = atol(line + 10); if (kb) printf("      anon %ld\n", kb / 4);
    }
  }
  (void)buf;
  return 0;
}
