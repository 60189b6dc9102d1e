# text_layout.cmake -- where the archive's functions land in the library
# that links it: the functions a small program runs (config/resident_text.txt)
# go to .text.hot.<name>, next to the once-only code (.text.startup), and
# the rest stays in .text.<name>.
#
# Why.  The kernel maps a library's text 64 KiB at a time around each page a
# process executes (fault-around).  Spread over the whole 140 kB of text, the
# few functions every process runs made all of it resident; grouped, they
# fill one window and the others are never mapped.  GNU ld and gold place
# .text.unlikely, .text.startup and .text.hot, in that order, before the
# rest of .text, in any library the archive is linked into; lld keeps the
# input order (nothing lost, nothing gained).
#
# How.  The objects are compiled with -ffunction-sections (each function in
# a section of its own, named after it); after the archive is made, objcopy
# renames the listed ones.  The rename changes no code: the mark moves
# functions, like PH_STARTUP.
#
# pinheap_text_layout(TARGET): the renames, on TARGET's archive after it is
# built (config/text_layout_apply.cmake).  Without objcopy, or where it
# fails (LTO bitcode), the archive is left as the compiler made it.
set(PINHEAP_RESIDENT_TEXT_LIST ${PROJECT_SOURCE_DIR}/config/resident_text.txt)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PINHEAP_RESIDENT_TEXT_LIST})

function(pinheap_text_layout tgt)
  if(NOT CMAKE_OBJCOPY)
    message(STATUS "pinheap: no objcopy (CMAKE_OBJCOPY is empty): the archive's text is "
      "left in the compiler's order (config/text_layout.cmake)")
    return()
  endif()
  file(STRINGS ${PINHEAP_RESIDENT_TEXT_LIST} _lines)
  set(_args)
  foreach(line IN LISTS _lines)
    string(STRIP "${line}" name)
    if(name STREQUAL "" OR name MATCHES "^#")
      continue()
    endif()
    if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_.]*$")
      message(FATAL_ERROR "pinheap: config/resident_text.txt names '${name}', expected a "
        "function's name (letters, digits, underscores, and a clone suffix such as .part.0)")
    endif()
    list(APPEND _args --rename-section .text.${name}=.text.hot.${name})
    if(NOT PINHEAP_PREFIX STREQUAL "")
      list(APPEND _args --rename-section .text.${PINHEAP_PREFIX}${name}=.text.hot.${PINHEAP_PREFIX}${name})
    endif()
  endforeach()
  # objcopy's options, one a line, for text_layout_apply.cmake
  string(REPLACE ";" "\n" _lines "${_args}")
  file(WRITE ${PROJECT_BINARY_DIR}/${tgt}_text_layout.txt "${_lines}\n")
  add_custom_command(TARGET ${tgt} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DOBJCOPY=${CMAKE_OBJCOPY} -DARCHIVE=$<TARGET_FILE:${tgt}>
            -DARGS_FILE=${PROJECT_BINARY_DIR}/${tgt}_text_layout.txt
            -P ${PROJECT_SOURCE_DIR}/config/text_layout_apply.cmake
    COMMENT "Grouping the functions a small program runs in ${tgt} (config/resident_text.txt)"
    VERBATIM)
endfunction()
