# prefix_check.cmake -- refuses, at configure time, a PINHEAP_PREFIX that
# would make one of pinheap's names one of glibc's (posix_ + memalign is
# posix_memalign): the archive would then define a libc function.  Main
# entry point: pinheap_prefix_check(PREFIX).
#
# pinheap's names are every name rename.h shifts and every name the public
# header declares with the prefix; glibc's are the dynamic symbols libc.so.6
# defines, as nm lists them.  Without nm or libc.so.6 the check says so and
# is skipped.
function(pinheap_prefix_check prefix)
  set(root ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/..)
  file(STRINGS ${root}/rename.h lines REGEX "PINHEAP_NAME\\([A-Za-z0-9_]+\\)")
  set(names "")
  foreach(l ${lines})
    if(l MATCHES "PINHEAP_NAME\\(([A-Za-z0-9_]+)\\)")
      list(APPEND names ${CMAKE_MATCH_1})
    endif()
  endforeach()
  file(READ ${root}/allocator/api/pinheap.h.in header)
  string(REGEX MATCHALL "@PINHEAP_PREFIX@[A-Za-z0-9_]+" public "${header}")
  foreach(n ${public})
    string(REPLACE "@PINHEAP_PREFIX@" "" n "${n}")
    list(APPEND names ${n})
  endforeach()
  list(REMOVE_DUPLICATES names)

  find_program(PINHEAP_NM nm)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libc.so.6
                  OUTPUT_VARIABLE libc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(EXISTS "${libc}")
    get_filename_component(libc "${libc}" REALPATH)
  endif()
  if(NOT PINHEAP_NM OR NOT EXISTS "${libc}")
    message(STATUS "pinheap: prefix not checked against glibc's names (no nm or libc.so.6)")
    return()
  endif()
  execute_process(COMMAND ${PINHEAP_NM} -D --defined-only ${libc}
                  OUTPUT_VARIABLE syms ERROR_QUIET)
  set(clash "")
  foreach(n ${names})
    string(FIND "${syms}" " ${prefix}${n}@" at)      # "addr T name@@GLIBC_x"
    if(NOT at EQUAL -1)
      list(APPEND clash ${prefix}${n})
    endif()
  endforeach()
  if(clash)
    list(JOIN clash ", " clash)
    message(FATAL_ERROR
      "pinheap: PINHEAP_PREFIX='${prefix}' is not a usable prefix: it makes pinheap define "
      "${clash}, which glibc (${libc}) defines too. Expected a prefix that makes none of "
      "pinheap's names one of glibc's, e.g. myrt_heap_.")
  endif()
endfunction()
