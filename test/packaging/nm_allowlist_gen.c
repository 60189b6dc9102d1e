/*
 * nm_allowlist_gen.c -- prints the allow-list of test/nm_prefix.sh: the
 * defined global symbols of libpinheap.a that may lack the configured
 * prefix, which are exactly the intercepted symbols of hooks/intercept/symbols.h,
 * each defined by hooks/intercept/replace.c alone.  Run at build time
 * (test/packaging.cmake) into the build's test/nm_allowlist.txt (the
 * file named by its argument; stdout without one).
 *
 * Format: one symbol per line, followed by the archive member that alone
 * may define it; '#' starts a comment.
 */
#include <stddef.h>
#include <stdio.h>

#include "hooks/intercept/symbols.h"

int main(int argc, char **argv)
{
  if (argc > 1 && freopen(argv[1], "w", stdout) == NULL)
    return 1;
  puts("# nm_allowlist.txt -- generated from hooks/intercept/symbols.h by test/nm_allowlist_gen.c:\n"
       "# the unprefixed entry points of hooks/intercept/replace.c, each with the only archive\n"
       "# member that may define it.  Read by test/nm_prefix.sh.");
#define ALLOW(name, ...) puts(#name " replace.c.o");
  puts("\n# the memory calls");
  PH_INTERCEPTED_CALLS(ALLOW)
  puts("\n# releases through a file, and syscall()");
  PH_INTERCEPTED_FILES(ALLOW)
  PH_INTERCEPTED_SYSCALL(ALLOW)
  puts("\n# the malloc family");
  PH_INTERCEPTED_FAMILY(ALLOW)
#undef ALLOW
  return 0;
}
