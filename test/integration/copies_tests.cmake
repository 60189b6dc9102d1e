# copies_tests.cmake -- two copies of pinheap in one process (hooks/copies.c):
# one serves malloc and the memory events, the other stands down and
# forwards its API there.
#
# Fixture core libraries (test/fixture/copies_core.c), each holding an
# archive whole: libcopies_a.so and libcopies_b.so the build's libpinheap.a
# (the same archive linked into two libraries, an easy slip), libcopies_z.so
# a second archive of the same sources built here with another prefix
# (another runtime's copy).  test/fixture/copies_app.c runs with two of them,
# both linked or the second dlopen'ed (RTLD_LOCAL); test/integration/copies_test.py runs
# each program with leave-pinned unset and set and checks its output and the
# warning lines.  Plain builds only, and labelled noasan: the fixtures link
# the archive into shared objects that a program without sanitizer flags
# loads, which an instrumented archive does not allow.
if(PINHEAP_SANITIZER)
  return()
endif()

# The other prefix: any but the build's own.
set(_copies_other_prefix phcopy_)
if(PINHEAP_PREFIX STREQUAL _copies_other_prefix)
  set(_copies_other_prefix phcopy2_)
endif()

# libpinheap_<prefix>.a: the archive's sources (config/sources.cmake) built
# again with another prefix, from their own generated headers, which come
# before the build's in the include path.
function(copies_add_archive prefix)
  set(PINHEAP_PREFIX ${prefix})
  set(_inc ${CMAKE_CURRENT_BINARY_DIR}/copies_${prefix}/include)
  configure_file(${PROJECT_SOURCE_DIR}/config/pinheap_config.h.in ${_inc}/pinheap_config.h @ONLY)
  configure_file(${PROJECT_SOURCE_DIR}/allocator/api/pinheap.h.in ${_inc}/pinheap.h @ONLY)
  set(_srcs ${PINHEAP_CORE_SOURCES} ${PINHEAP_REPLACE_SOURCES})
  list(TRANSFORM _srcs PREPEND ${PROJECT_SOURCE_DIR}/)
  add_library(pinheap_${prefix} STATIC EXCLUDE_FROM_ALL ${_srcs})
  pinheap_setup_target(pinheap_${prefix})
  target_include_directories(pinheap_${prefix} BEFORE PRIVATE ${_inc})
endfunction()
copies_add_archive(${_copies_other_prefix})

# copies_add_core(NAME ARCHIVE): libcopies_<NAME>.so holding ARCHIVE whole.
function(copies_add_core name archive)
  add_library(copies_${name} SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fixture/copies_core.c)
  target_compile_definitions(copies_${name} PRIVATE COPIES_CORE_NAME="libcopies_${name}.so")
  target_link_libraries(copies_${name} PRIVATE
    -Wl,--whole-archive $<TARGET_FILE:${archive}> -Wl,--no-whole-archive
    ${CMAKE_DL_LIBS} Threads::Threads)
  add_dependencies(copies_${name} ${archive})
  set_target_properties(copies_${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
endfunction()
copies_add_core(a pinheap)
copies_add_core(b pinheap)
copies_add_core(z pinheap_${_copies_other_prefix})

# copies_add_app(NAME SECOND PREFIX DLOPEN): copies_<NAME>, with
# libcopies_a.so linked and libcopies_<SECOND>.so (prefix PREFIX) linked
# after it (DLOPEN 0) or dlopen'ed by main (DLOPEN 1).
function(copies_add_app name second prefix dlopen)
  add_executable(copies_${name} ${CMAKE_CURRENT_SOURCE_DIR}/fixture/copies_app.c)
  target_include_directories(copies_${name} PRIVATE ${PROJECT_BINARY_DIR}/include)
  target_compile_definitions(copies_${name} PRIVATE
    COPY_A_PATH="$<TARGET_FILE:copies_a>" COPY_A_PREFIX="${PINHEAP_PREFIX}"
    COPY_B_PATH="$<TARGET_FILE:copies_${second}>" COPY_B_PREFIX="${prefix}"
    COPIES_DLOPEN=${dlopen})
  # the program's malloc and free are watched for what they release
  target_compile_options(copies_${name} PRIVATE -fno-builtin)
  target_link_libraries(copies_${name} PRIVATE -Wl,--no-as-needed copies_a ${CMAKE_DL_LIBS})
  if(dlopen)
    add_dependencies(copies_${name} copies_${second})
  else()
    target_link_libraries(copies_${name} PRIVATE copies_${second})
  endif()
endfunction()
copies_add_app(same_linked b ${PINHEAP_PREFIX} 0)
copies_add_app(same_dlopen b ${PINHEAP_PREFIX} 1)
copies_add_app(prefixes_linked z ${_copies_other_prefix} 0)
copies_add_app(prefixes_dlopen z ${_copies_other_prefix} 1)

find_program(PINHEAP_PYTHON3 python3)

# A first "copy" whose record no copy of today can read (a note of another
# version): libcopies_a.so's copy refuses the layout before main.
add_library(copies_future SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fixture/copies_future.c)
set_target_properties(copies_future PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
add_executable(copies_refused ${CMAKE_CURRENT_SOURCE_DIR}/fixture/copies_app.c)
target_include_directories(copies_refused PRIVATE ${PROJECT_BINARY_DIR}/include)
target_compile_definitions(copies_refused PRIVATE
  COPY_A_PATH="$<TARGET_FILE:copies_a>" COPY_A_PREFIX="${PINHEAP_PREFIX}"
  COPY_B_PATH="$<TARGET_FILE:copies_future>" COPY_B_PREFIX="" COPIES_DLOPEN=0)
target_link_libraries(copies_refused PRIVATE -Wl,--no-as-needed copies_future copies_a
                      ${CMAKE_DL_LIBS})
add_test(NAME copies_refused
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/copies_test.py
          $<TARGET_FILE:copies_refused> ${PINHEAP_PARAM_PREFIX}${PINHEAP_PARAM_LEAVE_PINNED}
          ${PINHEAP_PROBE_ROOT_VAR} --refused $<TARGET_FILE:copies_a> $<TARGET_FILE:copies_future>)
set_tests_properties(copies_refused PROPERTIES TIMEOUT 120 LABELS "copies;noasan"
  FAIL_REGULAR_EXPRESSION "FAIL ")

foreach(app same_linked same_dlopen prefixes_linked prefixes_dlopen)
  add_test(NAME copies_${app}
    COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/copies_test.py
            $<TARGET_FILE:copies_${app}> ${PINHEAP_PARAM_PREFIX}${PINHEAP_PARAM_LEAVE_PINNED}
            ${PINHEAP_PROBE_ROOT_VAR})
  set_tests_properties(copies_${app} PROPERTIES TIMEOUT 300 LABELS "copies;noasan"
    FAIL_REGULAR_EXPRESSION "FAIL ")
endforeach()
