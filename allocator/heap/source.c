/*
 * source.c -- the memory sources, one descriptor each (types.h:
 * mem_source_t): what a heap may do with the memory it is laid over.  A
 * heap points at its source from ms_init() on.  Main entry points: the
 * descriptors mem_source_os and mem_source_region, and the table of the
 * sources' operations, mem_source_ops[] (types.h: mem_source_ops_t).  The
 * shared heap's descriptor (grows, releases -- in place: the pages of free
 * space leave the shared object, the slices stay (segment.c) --, in the
 * owner map, shared) lives in its region's header (shm.c), so that its
 * address is the same in every process that reads a heap of the region;
 * it names its row of operations by index (MEM_SOURCE_SHARED, 0), and the
 * row, with this process's code addresses, is here, put by the shared heap
 * at its start (source_ops_set).
 */
#include "allocator/heap/heap.h"
#include "allocator/base/startup.h"     /* PH_HOT_DATA */

/* Segments and huge chunks mapped by os.c: grown, mapped on their own,
 * given back, found through the owner map. */
const mem_source_t mem_source_os = {
  .grows = true,
  .maps_huge = true,
  .releases = true,
  .in_owner_map = true,
  .ops = MEM_SOURCE_OS,
};

/* The caller's region (create_mspace_with_base): one segment over memory
 * pinheap does not own and that may vanish unannounced, so never grown,
 * never given back, and not in the owner map. */
const mem_source_t mem_source_region = {
  .grows = false,
  .maps_huge = false,
  .releases = false,
  .in_owner_map = false,
  .ops = MEM_SOURCE_REGION,
};

/* The shared row until the shared heap registers its own (source_ops_set,
 * from shm_start): no region, so nothing is live and nothing is due.  The
 * other operations are called only where the descriptor's flags say the
 * source has them (types.h), which no heap's do before the region exists. */
PH_HOT static bool source_none(void) { return false; }
PH_HOT static int source_none_poll(void) { return 0; }

/* Per process: the heap calls the shared heap through its row, and names
 * no function of it: the shared heap (shm_start) puts its row here, once,
 * before any heap of the region exists.  The OS's and a region's rows are
 * empty: every call site tests the descriptor's flags first (types.h).
 * PH_HOT_DATA: read by every thread cache's refill (its poll check). */
PH_HOT_DATA mem_source_ops_t mem_source_ops[MEM_SOURCE_COUNT] = {
  [MEM_SOURCE_SHARED] = {
    .on = source_none,
    .due = source_none,
    .poll = source_none_poll,
    .fallback_active = source_none,
  },
};

void source_ops_set(unsigned id, const mem_source_ops_t *ops)
{
  mem_source_ops[id] = *ops;
}
