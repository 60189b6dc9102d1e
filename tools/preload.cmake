# libpinheap-preload.so: the archive linked whole into a shared object.
add_library(pinheap-preload SHARED ${CMAKE_CURRENT_LIST_DIR}/preload.c)
target_include_directories(pinheap-preload PRIVATE
  ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/include)
target_compile_definitions(pinheap-preload PRIVATE _GNU_SOURCE)
set_target_properties(pinheap-preload PROPERTIES C_VISIBILITY_PRESET hidden)
target_link_libraries(pinheap-preload PRIVATE
  -Wl,--whole-archive $<TARGET_FILE:pinheap> -Wl,--no-whole-archive
  ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(pinheap-preload pinheap)
# Text in a segment of its own, aligned to 64 KiB (glibc's ld.so honours
# p_align since 2.35): the kernel's 64 KiB fault-around windows then fall on
# fixed offsets of the text, whose first window holds the code a small
# program runs (.text.startup and .text.hot, PH_HOT, allocator/base/base.h, plus
# libgcc's and libc_nonshared's few functions, preload_text.ld) and whose
# others, never run in it, stay out of its resident set.  (With one
# text-and-read-only-data segment, as before, the read-only data after the
# text and the random base made every window resident.)
include(CheckLinkerFlag)
target_link_options(pinheap-preload PRIVATE -Wl,-z,separate-code -Wl,-z,max-page-size=0x10000)
check_linker_flag(C "-Wl,-T,${CMAKE_CURRENT_LIST_DIR}/preload_text.ld" PINHEAP_LD_INSERT_OK)
if(PINHEAP_LD_INSERT_OK)
  target_link_options(pinheap-preload PRIVATE "-Wl,-T,${CMAKE_CURRENT_LIST_DIR}/preload_text.ld")
  set_property(TARGET pinheap-preload APPEND PROPERTY LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/preload_text.ld)
endif()
# Relative relocations packed (DT_RELR: glibc 2.36, binutils 2.38): ld.so
# reads 0.2 kB of them instead of 10 kB of .rela.dyn (two pages fewer).  The
# toolchain adds it only when the C library it links against supports it.
check_linker_flag(C "-Wl,-z,pack-relative-relocs" PINHEAP_LD_RELR_OK)
if(PINHEAP_LD_RELR_OK)
  target_link_options(pinheap-preload PRIVATE -Wl,-z,pack-relative-relocs)
endif()
if(PINHEAP_INSTALL)
  install(TARGETS pinheap-preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
