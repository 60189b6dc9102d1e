/*
 * source.c -- the memory sources, one descriptor each (types.h:
 * mem_source_t): what a heap may do with the memory it is laid over.  A
 * heap points at its source from ms_init() on.  Main entry points: the
 * descriptors mem_source_os and mem_source_region.  The shared heap's
 * descriptor (grows, releases -- in place: the pages of free space leave
 * the shared object, the slices stay (segment.c) --, in the owner map,
 * shared) lives in its region's header (shm.c), so that its address is the
 * same in every process that reads a heap of the region.
 */
#include "internal.h"

/* Segments and huge chunks mapped by os.c: grown, mapped on their own,
 * given back, found through the owner map. */
const mem_source_t mem_source_os = {
  .grows = true,
  .maps_huge = true,
  .releases = true,
  .in_owner_map = true,
};

/* The caller's region (create_mspace_with_base): one segment over memory
 * pinheap does not own and that may vanish unannounced, so never grown,
 * never given back, and not in the owner map. */
const mem_source_t mem_source_region = {
  .grows = false,
  .maps_huge = false,
  .releases = false,
  .in_owner_map = false,
};
