# The archive's sources, by area.  Paths are relative to the project root.
set(PINHEAP_ALLOCATOR_SOURCES
  allocator/base/error.c
  allocator/base/lock.c
  allocator/os/os.c
  allocator/os/owner.c
  allocator/heap/source.c
  allocator/shm/shm.c
  allocator/shm/shm_start.c
  allocator/shm/shm_rel.c
  allocator/shm/shm_fork.c
  allocator/heap/state.c
  allocator/front/init.c
  allocator/heap/arena.c
  allocator/heap/bins.c
  allocator/heap/segment.c
  allocator/heap/huge.c
  allocator/heap/heap.c
  allocator/heap/defer.c
  allocator/front/tcache.c
  allocator/front/slab.c
  allocator/front/slab_free.c
  allocator/api/stats.c
  allocator/api/mspace.c
  allocator/api/malloc.c
  allocator/api/check.c
)
# hooks/ and config/: parameters, the decision matrix, the driver probe.
set(PINHEAP_HOOKS_SOURCES)
include(${CMAKE_CURRENT_LIST_DIR}/hooks_sources.cmake)
# code patching of libc's entry points (hooks/intercept/patch.c), used by install.c
list(APPEND PINHEAP_HOOKS_SOURCES hooks/intercept/patch.c)
# watches: validity tokens over the VM_UNMAPPED events (hooks/watch/)
list(APPEND PINHEAP_HOOKS_SOURCES hooks/watch/watch.c hooks/watch/audit.c)
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
