# consumers_tests.cmake -- the frame-level proof (test/fixture/frames.c) with
# the registration cache fed by another consumer than pinheap's own
# listeners, the way that consumer's cache hears releases:
#   frames_patcher  test/fixture/fakepatcher.c, a code patcher of libc's
#                   mmap/munmap/mremap/madvise/shmdt/brk pinheap does not
#                   know by name: installed after pinheap (direct,
#                   transitive, preload) and before it (late);
#   frames_opal     Open MPI's opal_mem_hooks (its memory framework opened
#                   as its registration caches open it), an mpicc-built
#                   program under mpirun -np 2: preload, direct, transitive,
#                   and late (Open MPI's patcher on before pinheap loads);
#   frames_ucx      UCX's registration cache itself (ucs_rcache, libucs):
#                   preload, direct, transitive.
# Each with pinheap enabled and disabled, and a run with no callback that
# must see misses.  Driven by test/consumers/frames_test.py (root only: frame
# numbers; SKIP otherwise, and for frames_opal without mpicc/mpirun).
# Plain builds only.
if(PINHEAP_SANITIZER)
  return()
endif()
find_program(PINHEAP_PYTHON3 python3)
find_program(PINHEAP_MPICC mpicc)
find_program(PINHEAP_MPIRUN mpirun)

add_library(fakepatcher SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fixture/fakepatcher.c)
target_link_libraries(fakepatcher PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(fakepatcher PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

set(_frames_src ${CMAKE_CURRENT_SOURCE_DIR}/fixture/frames.c)
# The preload configuration needs the shim (PINHEAP_BUILD_TOOLS).
set(_shim "")
if(TARGET pinheap-preload)
  set(_shim $<TARGET_FILE:pinheap-preload>)
endif()
foreach(cfg direct transitive late preload)
  add_executable(frames_patcher_${cfg} ${_frames_src})
  target_compile_definitions(frames_patcher_${cfg} PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX}
    FRAMES_PLUGIN="$<TARGET_FILE:framesplug>")
  add_dependencies(frames_patcher_${cfg} framesplug)
  target_compile_options(frames_patcher_${cfg} PRIVATE -fno-builtin)
  target_link_libraries(frames_patcher_${cfg} PRIVATE -Wl,--no-as-needed fakepatcher
                        ${CMAKE_DL_LIBS} Threads::Threads)
endforeach()
target_link_libraries(frames_patcher_direct PRIVATE democore)
target_link_libraries(frames_patcher_transitive PRIVATE mpifix)

add_test(NAME frames_patcher
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/frames_test.py ${CMAKE_CURRENT_BINARY_DIR}
          --consumer patcher --shim "${_shim}")
set_tests_properties(frames_patcher PROPERTIES TIMEOUT 600 LABELS "frames;consumers;noasan"
  FAIL_REGULAR_EXPRESSION "FAIL ")

# UCX's registration cache (ucs_rcache, Debian's libucx-dev).
find_path(PINHEAP_UCS_RCACHE_INCLUDE ucs/memory/rcache.h)
find_library(PINHEAP_UCS_LIB ucs)
find_library(PINHEAP_UCM_LIB ucm)
set(_ucx_ok FALSE)
if(PINHEAP_UCS_RCACHE_INCLUDE AND PINHEAP_UCS_LIB AND PINHEAP_UCM_LIB)
  set(_ucx_ok TRUE)
  foreach(cfg direct transitive preload)
    add_executable(frames_ucx_${cfg} ${_frames_src})
    target_compile_definitions(frames_ucx_${cfg} PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX}
      FRAMES_UCX FRAMES_PLUGIN="$<TARGET_FILE:framesplug>")
    target_include_directories(frames_ucx_${cfg} PRIVATE ${PINHEAP_UCS_RCACHE_INCLUDE})
    add_dependencies(frames_ucx_${cfg} framesplug)
    target_compile_options(frames_ucx_${cfg} PRIVATE -fno-builtin)
    target_link_libraries(frames_ucx_${cfg} PRIVATE -Wl,--no-as-needed ${PINHEAP_UCS_LIB}
                          ${PINHEAP_UCM_LIB} ${CMAKE_DL_LIBS} Threads::Threads)
  endforeach()
  target_link_libraries(frames_ucx_direct PRIVATE democore)
  target_link_libraries(frames_ucx_transitive PRIVATE mpifix)
endif()
add_test(NAME frames_ucx
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/frames_test.py ${CMAKE_CURRENT_BINARY_DIR}
          --consumer ucx --shim "${_shim}")
set_tests_properties(frames_ucx PROPERTIES TIMEOUT 600 LABELS "frames;consumers;ucx;noasan"
  FAIL_REGULAR_EXPRESSION "FAIL ")

# The MPI program, built by the wrapper compiler as a user builds one.
set(_opal_apps)
if(PINHEAP_MPICC AND PINHEAP_MPIRUN)
  foreach(cfg direct transitive preload late)
    set(_app ${CMAKE_CURRENT_BINARY_DIR}/frames_opal_${cfg})
    set(_libs)
    if(cfg STREQUAL "direct")
      set(_libs -ldemocore)
    elseif(cfg STREQUAL "transitive")
      set(_libs -lmpifix)
    endif()
    add_custom_command(OUTPUT ${_app}
      COMMAND ${PINHEAP_MPICC} -O2 -fno-builtin -DFRAMES_MPI -DPINHEAP_PREFIX=${PINHEAP_PREFIX}
              "-DFRAMES_PLUGIN=\"$<TARGET_FILE:framesplug>\"" -o ${_app} ${_frames_src}
              -Wl,--no-as-needed -L${CMAKE_CURRENT_BINARY_DIR} ${_libs}
              -Wl,-rpath,${CMAKE_CURRENT_BINARY_DIR} -ldl -lpthread
      DEPENDS ${_frames_src} mpifix democore framesplug
      COMMENT "mpicc frames_opal_${cfg}" VERBATIM)
    list(APPEND _opal_apps ${_app})
  endforeach()
  add_custom_target(frames_opal ALL DEPENDS ${_opal_apps})
endif()
add_test(NAME frames_opal
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/frames_test.py ${CMAKE_CURRENT_BINARY_DIR}
          --consumer opal --shim "${_shim}" --mpirun "${PINHEAP_MPIRUN}"
          --param-prefix ${PINHEAP_PARAM_PREFIX})
set_tests_properties(frames_opal PROPERTIES TIMEOUT 900 LABELS "frames;consumers;mpi;noasan"
  FAIL_REGULAR_EXPRESSION "FAIL ")

# What feeding each consumer adds to a release (tools/events_bench/
# consumer_cost.sh counts it with callgrind; not a test).
add_executable(consumer_cost ${PROJECT_SOURCE_DIR}/tools/events_bench/consumer_cost.c)
target_compile_definitions(consumer_cost PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX})
target_include_directories(consumer_cost PRIVATE ${PROJECT_BINARY_DIR}/include)
target_link_libraries(consumer_cost PRIVATE -Wl,--no-as-needed democore fakepatcher ${CMAKE_DL_LIBS})
