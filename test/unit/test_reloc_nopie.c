/*
 * test_reloc_nopie.c -- the start-up resolve (reloc_startup_resolve, what
 * the installation's step (a) asks instead of dlsym) in a program linked
 * without PIE that takes getppid's address: the program's dynamic symbol
 * table then has getppid undefined with a value (its canonical PLT entry),
 * and dlsym(RTLD_DEFAULT, "getppid") returns that entry, not libc's
 * function.  The resolve must give dlsym's answer or leave it to dlsym
 * (NULL); libc's definition would be a different answer.  Main entry
 * point: main(); prints PASS/FAIL per check, or SKIP when the program was
 * linked as PIE after all (no canonical entry to test).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include "fixture/relocfix.h"

/* getppid's address, taken in the program's code (an absolute
 * relocation, not a data pointer ld.so fills): its canonical PLT entry */
__attribute__((noinline)) static void *nopie_getppid(void)
{
  return (void *)getppid;
}

int main(void)
{
  const char *const names[] = { "getppid", "munmap" };
  void *out[2] = { NULL, NULL };
  void *d = dlsym(RTLD_DEFAULT, "getppid");
  if (d != nopie_getppid()) {
    printf("SKIP: dlsym(getppid) %p is not the program's canonical entry %p (linked as PIE?)\n", d,
           nopie_getppid());
    return 0;
  }
  int rc = relocfix_pin_startup_resolve(names, out, 2);
  int ok = rc == 1 && (out[0] == NULL || out[0] == d);
  printf("%s start-up resolve: getppid, undefined with a value in the program, is dlsym's or left "
         "to it: read %p, dlsym %p, rc %d\n", ok ? "PASS" : "FAIL", out[0], d, rc);
  int ok2 = out[1] != NULL && out[1] == dlsym(RTLD_DEFAULT, "munmap");
  printf("%s start-up resolve: munmap is read from libc's table: read %p, dlsym %p\n",
         ok2 ? "PASS" : "FAIL", out[1], dlsym(RTLD_DEFAULT, "munmap"));
  return ok && ok2 ? 0 : 1;
}
