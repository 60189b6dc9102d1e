# The archive's sources, by area.  Paths are relative to the project root.
set(PINHEAP_ALLOCATOR_SOURCES
  allocator/error.c
  allocator/lock.c
  allocator/os.c
  allocator/owner.c
  allocator/source.c
  allocator/shm.c
  allocator/shm_start.c
  allocator/shm_rel.c
  allocator/shm_fork.c
  allocator/state.c
  allocator/init.c
  allocator/arena.c
  allocator/bins.c
  allocator/segment.c
  allocator/huge.c
  allocator/heap.c
  allocator/defer.c
  allocator/tcache.c
  allocator/slab.c
  allocator/slab_free.c
  allocator/stats.c
  allocator/mspace.c
  allocator/malloc.c
  allocator/check.c
)
# hooks/ and config/: parameters, the decision matrix, the driver probe.
set(PINHEAP_HOOKS_SOURCES)
include(${CMAKE_CURRENT_LIST_DIR}/hooks_sources.cmake)
# code patching of libc's entry points (hooks/intercept/patch.c), used by install.c
list(APPEND PINHEAP_HOOKS_SOURCES hooks/intercept/patch.c)
set(PINHEAP_CORE_SOURCES ${PINHEAP_ALLOCATOR_SOURCES} ${PINHEAP_HOOKS_SOURCES})

# The replacement layer: the dispatch, release listeners, self-test, and the
# only unprefixed symbols (hooks/intercept/replace.c).
set(PINHEAP_REPLACE_SOURCES
  hooks/decide/dispatch.c
  hooks/events/release.c
  hooks/decide/selftest.c
  hooks/intercept/install.c
  hooks/intercept/install_verify.c
  hooks/bridges/ucx.c
  hooks/bridges/ompi.c
  hooks/bridges/fabric.c
  hooks/bridges/feeds.c
  hooks/events/forks.c
  hooks/intercept/replace.c
)
