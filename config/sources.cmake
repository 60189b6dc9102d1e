# The archive's sources, by area.  Paths are relative to the project root.
set(PINHEAP_ALLOCATOR_SOURCES
  allocator/error.c
  allocator/os.c
  allocator/owner.c
  allocator/source.c
  allocator/shm.c
  allocator/shm_start.c
  allocator/shm_rel.c
  allocator/shm_fork.c
  allocator/init.c
  allocator/arena.c
  allocator/bins.c
  allocator/segment.c
  allocator/huge.c
  allocator/heap.c
  allocator/defer.c
  allocator/tcache.c
  allocator/slab.c
  allocator/stats.c
  allocator/mspace.c
  allocator/malloc.c
  allocator/check.c
)
# hooks/ and config/: parameters, the decision matrix, the driver probe.
set(PINHEAP_HOOKS_SOURCES)
include(${CMAKE_CURRENT_LIST_DIR}/hooks_sources.cmake)
# code patching of libc's entry points (hooks/patch.c), used by install.c
list(APPEND PINHEAP_HOOKS_SOURCES hooks/patch.c)
# watches: validity tokens over the VM_UNMAPPED events (hooks/watch/)
list(APPEND PINHEAP_HOOKS_SOURCES hooks/watch/watch.c)
set(PINHEAP_CORE_SOURCES ${PINHEAP_ALLOCATOR_SOURCES} ${PINHEAP_HOOKS_SOURCES})

# The replacement layer: the dispatch, release listeners, self-test, and the
# only unprefixed symbols (hooks/replace.c).
set(PINHEAP_REPLACE_SOURCES
  hooks/dispatch.c
  hooks/release.c
  hooks/selftest.c
  hooks/install.c
  hooks/ucx.c
  hooks/ompi.c
  hooks/fabric.c
  hooks/feeds.c
  hooks/forks.c
  hooks/replace.c
)
