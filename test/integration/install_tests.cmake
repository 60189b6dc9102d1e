# install_tests.cmake -- installation end to end (hooks/install.c): every
# memory call the application makes fires its event, and pinheap says by
# which method, with the core library linked directly (interposition),
# behind libc (relocation patching), and dlopen'ed late (patching, malloc
# left to glibc unless PINHEAP_LATE_MALLOC=1); PINHEAP_PATCH=0 and a memory
# checker (valgrind) patch nothing; python3 loading the core library with
# ctypes.  Driven by test/integration/install_test.py.  Plain builds only.
if(PINHEAP_SANITIZER)
  return()
endif()
find_program(PINHEAP_PYTHON3 python3)

foreach(cfg direct transitive late)
  add_executable(events_${cfg} ${CMAKE_CURRENT_SOURCE_DIR}/fixture/events_loaded.c)
  target_compile_definitions(events_${cfg} PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX})
  target_include_directories(events_${cfg} PRIVATE ${PROJECT_BINARY_DIR}/include)
  target_compile_options(events_${cfg} PRIVATE -fno-builtin)
  target_link_libraries(events_${cfg} PRIVATE ${CMAKE_DL_LIBS})
endforeach()
target_link_libraries(events_direct PRIVATE -Wl,--no-as-needed democore)
target_link_libraries(events_transitive PRIVATE -Wl,--no-as-needed mpifix)

# The transitive program built with a sanitizer (the core library stays a
# plain build, as a runtime's would be): pinheap must stand aside by itself.
include(CheckCSourceCompiles)
set(_install_tool_args "")
foreach(san address thread)
  set(CMAKE_REQUIRED_FLAGS -fsanitize=${san})
  set(CMAKE_REQUIRED_LINK_OPTIONS -fsanitize=${san})
  check_c_source_compiles("int main(void) { return 0; }" PINHEAP_CAN_SANITIZE_${san})
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(PINHEAP_CAN_SANITIZE_${san})
    add_executable(events_${san} ${CMAKE_CURRENT_SOURCE_DIR}/fixture/events_loaded.c)
    target_compile_definitions(events_${san} PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX})
    target_include_directories(events_${san} PRIVATE ${PROJECT_BINARY_DIR}/include)
    target_compile_options(events_${san} PRIVATE -fno-builtin -fsanitize=${san})
    target_link_options(events_${san} PRIVATE -fsanitize=${san})
    target_link_libraries(events_${san} PRIVATE ${CMAKE_DL_LIBS} -Wl,--no-as-needed mpifix)
  endif()
endforeach()

add_test(NAME install
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/install_test.py
          ${CMAKE_CURRENT_BINARY_DIR} $<TARGET_FILE:democore> ${PROJECT_BINARY_DIR}/tools/pinheap-info
          ${PINHEAP_PREFIX} ${PINHEAP_PARAM_PREFIX})
set_tests_properties(install PROPERTIES TIMEOUT 300 LABELS "install;noasan"
  FAIL_REGULAR_EXPRESSION "FAIL ")

# The account composed on demand (hooks/intercept/install.c): threads asking
# at once get one whole text (test/fixture/install_text_threads.c).
add_executable(install_text_threads ${PROJECT_SOURCE_DIR}/test/fixture/install_text_threads.c)
target_compile_definitions(install_text_threads PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX})
target_include_directories(install_text_threads PRIVATE ${PROJECT_BINARY_DIR}/include)
target_compile_options(install_text_threads PRIVATE -fno-builtin)
set_target_properties(install_text_threads PROPERTIES ENABLE_EXPORTS ON)
target_link_libraries(install_text_threads PRIVATE -Wl,--no-as-needed mpifix ${CMAKE_DL_LIBS}
                      Threads::Threads)
add_test(NAME install_text_threads COMMAND install_text_threads)
set_tests_properties(install_text_threads PROPERTIES
  ENVIRONMENT "${PINHEAP_MODE_VAR}=on"
  TIMEOUT 60 LABELS "install;noasan" FAIL_REGULAR_EXPRESSION "FAIL ")
