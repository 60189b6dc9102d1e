# sidebyside.cmake -- one list of release scenarios heard by pinheap and by
# UCX's libucm (issue 10, item 6): tools/sidebyside/run.py runs
# tools/sidebyside/scenarios.c built three ways (pinheap's events with the
# core library one level deep, reusing events_bench's libeventsmid.so ->
# libeventscore.so; UCX's libucm when installed; no observer) and prints
# which releases each heard and the start-up each added.  Plain builds only.
if(PINHEAP_SANITIZER OR NOT TARGET eventsmid)
  return()
endif()
set(_sbs ${CMAKE_CURRENT_LIST_DIR}/sidebyside)
set(_sbs_out ${CMAKE_CURRENT_BINARY_DIR}/sidebyside)

add_library(sbsplugin SHARED ${_sbs}/plugin.c)
set(_sbs_kinds pinheap none)
find_path(PINHEAP_UCM_INCLUDE ucm/api/ucm.h)
find_library(PINHEAP_UCM_LIB ucm)
find_library(PINHEAP_UCS_LIB ucs)
if(PINHEAP_UCM_INCLUDE AND PINHEAP_UCM_LIB AND PINHEAP_UCS_LIB)
  list(APPEND _sbs_kinds ucx)
endif()
foreach(kind ${_sbs_kinds})
  add_executable(sbs_${kind} ${_sbs}/scenarios.c)
  target_compile_definitions(sbs_${kind} PRIVATE
    SBS_PLUGIN="$<TARGET_FILE:sbsplugin>" PINHEAP_PREFIX=${PINHEAP_PREFIX})
  target_compile_options(sbs_${kind} PRIVATE -fno-builtin)
  target_link_libraries(sbs_${kind} PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
  add_dependencies(sbs_${kind} sbsplugin)
  set_target_properties(sbs_${kind} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_sbs_out})
endforeach()
target_compile_definitions(sbs_pinheap PRIVATE SBS_PINHEAP)
target_include_directories(sbs_pinheap PRIVATE ${PROJECT_BINARY_DIR}/include)
target_link_libraries(sbs_pinheap PRIVATE -Wl,--no-as-needed eventsmid)
if(TARGET sbs_ucx)
  target_compile_definitions(sbs_ucx PRIVATE SBS_UCX)
  target_include_directories(sbs_ucx PRIVATE ${PINHEAP_UCM_INCLUDE})
  target_link_libraries(sbs_ucx PRIVATE ${PINHEAP_UCM_LIB} ${PINHEAP_UCS_LIB})
endif()
set_target_properties(sbsplugin PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${_sbs_out})

# sidebyside_smoke: the runner prints the table and the start-up line; the
# program's own munmap must be heard by pinheap (and by UCX when present),
# and an unknown scenario is refused by name.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME sidebyside_smoke
    COMMAND ${Python3_EXECUTABLE} ${_sbs}/run.py ${_sbs_out} --runs 5 --check)
  set_tests_properties(sidebyside_smoke PROPERTIES TIMEOUT 180 LABELS "noasan"
    PASS_REGULAR_EXPRESSION "sidebyside-ok" FAIL_REGULAR_EXPRESSION "FAIL ")
else()
  add_test(NAME sidebyside_smoke
    COMMAND ${CMAKE_COMMAND} -E echo "SKIP: sidebyside_smoke needs python3 (not found at configure time)")
  set_tests_properties(sidebyside_smoke PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP:")
endif()
