# libpinheap-preload.so: the archive linked whole into a shared object.
add_library(pinheap-preload SHARED ${CMAKE_CURRENT_LIST_DIR}/preload.c)
target_include_directories(pinheap-preload PRIVATE
  ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/allocator ${PROJECT_BINARY_DIR}/include)
target_compile_definitions(pinheap-preload PRIVATE _GNU_SOURCE)
set_target_properties(pinheap-preload PROPERTIES C_VISIBILITY_PRESET hidden)
target_link_libraries(pinheap-preload PRIVATE
  -Wl,--whole-archive $<TARGET_FILE:pinheap> -Wl,--no-whole-archive
  ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(pinheap-preload pinheap)
# One text-and-read-only-data segment instead of three page-aligned ones:
# fewer file pages resident in every process that preloads the shim.
target_link_options(pinheap-preload PRIVATE -Wl,-z,noseparate-code)
