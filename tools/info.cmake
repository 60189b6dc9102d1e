# info.cmake -- the info tool pinheap-info (tools/pinheap_info.c).
# Included by tools/CMakeLists.txt; the binary lands in <build>/tools/.
# Main entry: the pinheap-info target, linked against the static archive.
add_executable(pinheap-info ${CMAKE_CURRENT_LIST_DIR}/pinheap_info.c)
target_link_libraries(pinheap-info PRIVATE pinheap)
target_compile_definitions(pinheap-info PRIVATE _GNU_SOURCE)
target_compile_options(pinheap-info PRIVATE -Wall -Wextra -Wshadow)
target_include_directories(pinheap-info PRIVATE
  ${PROJECT_SOURCE_DIR}
  ${PROJECT_SOURCE_DIR}/config
  ${PROJECT_SOURCE_DIR})
if(PINHEAP_INSTALL)
  install(TARGETS pinheap-info RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
