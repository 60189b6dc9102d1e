/*
 * core.c -- the fake runtime core library of the install/consumer test.
 * Main entry point: consumer_core_name().
 *
 * A runtime links libpinheap.a WHOLE into its core shared library.  This
 * file deliberately references nothing of pinheap: every pinheap symbol that
 * the consumer program later finds in libconsumer_core.so is there only
 * because the package linked the archive whole.  A package that linked it
 * as a plain archive would leave the library without them, and the
 * consumer program would fail to link.
 */
const char *consumer_core_name(void);

const char *consumer_core_name(void)
{
  return "consumer_core";
}
