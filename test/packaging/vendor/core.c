/*
 * core.c -- the vendoring runtime's core library (test/packaging/vendor).
 * It references nothing of pinheap: the archive is there, whole, because
 * the parent linked pinheap::pinheap.  Main entry point: myrt_core_name().
 */
const char *myrt_core_name(void);

const char *myrt_core_name(void)
{
  return "myrt_core";
}
