/*
 * app.c -- the vendoring runtime's program (test/packaging/vendor): prints
 * the prefix its malloc came through and whether pinheap serves it.  Main
 * entry point: main().
 */
#include <stdio.h>
#include <stdlib.h>

#include "pinheap.h"

const char *myrt_core_name(void);

int main(void)
{
  void *p = malloc(100);
  printf("%s: prefix %s, enabled %d, owns malloc's block %d\n", myrt_core_name(),
         PINHEAP_PREFIX_STRING, PINHEAP_NAME(enabled)(), PINHEAP_NAME(owns)(p));
  free(p);
  return 0;
}
