# The archive's sources.  Each owning area appends its own list.
set(PINHEAP_ALLOCATOR_SOURCES
  allocator/error.c
  allocator/os.c
  allocator/owner.c
  allocator/malloc.c
  allocator/check.c
)
# hooks/ and config/ sources (decision matrix, parameters, probe, ...).
set(PINHEAP_HOOKS_SOURCES)
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/hooks_sources.cmake)
  include(${CMAKE_CURRENT_LIST_DIR}/hooks_sources.cmake)
endif()
set(PINHEAP_SOURCES ${PINHEAP_ALLOCATOR_SOURCES} ${PINHEAP_HOOKS_SOURCES})
