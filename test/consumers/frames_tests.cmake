# frames_tests.cmake -- the frame-level proof (test/fixture/frames.c): a
# simulated registration cache checked against /proc/self/pagemap, in the
# three ways a core library can be loaded -- linked by the executable,
# reached through another library (libmpifix.so -> libdemocore.so), and
# dlopen'ed late with RTLD_LOCAL -- plus a blind run that must see misses.
# Root only (frame numbers); test/consumers/frames_test.py says SKIP otherwise.
# Plain builds only: under a sanitizer pinheap does not replace malloc.
if(PINHEAP_SANITIZER)
  return()
endif()
find_program(PINHEAP_PYTHON3 python3)

# The library the dlclose step loads and unloads.
add_library(framesplug SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fixture/framesplug.c)
set_target_properties(framesplug PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

foreach(cfg direct transitive late)
  add_executable(frames_${cfg} ${CMAKE_CURRENT_SOURCE_DIR}/fixture/frames.c)
  target_compile_definitions(frames_${cfg} PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX}
    FRAMES_PLUGIN="$<TARGET_FILE:framesplug>")
  add_dependencies(frames_${cfg} framesplug)
  # malloc/free are watched for what they do to memory, not optimised away.
  target_compile_options(frames_${cfg} PRIVATE -fno-builtin)
  target_link_libraries(frames_${cfg} PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
endforeach()
target_link_libraries(frames_direct PRIVATE -Wl,--no-as-needed democore)
target_link_libraries(frames_transitive PRIVATE -Wl,--no-as-needed mpifix)

add_test(NAME frames
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/frames_test.py ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(frames PROPERTIES TIMEOUT 300 LABELS "frames;noasan"
  FAIL_REGULAR_EXPRESSION "FAIL ")
