# text_layout_apply.cmake -- run by the archive's POST_BUILD step
# (config/text_layout.cmake): objcopy's renames on a copy of ARCHIVE,
# which replaces it only when objcopy succeeds.  Where it cannot (objects
# that are LTO bitcode, an objcopy that does not know the format), the
# archive stays as the compiler made it -- only its layout is lost -- and
# the reason is printed.
#   cmake -DOBJCOPY=... -DARCHIVE=... -DARGS_FILE=<objcopy's options, one a line>
#         -P text_layout_apply.cmake
file(STRINGS ${ARGS_FILE} _args)
set(_tmp "${ARCHIVE}.layout.tmp")
execute_process(COMMAND ${OBJCOPY} ${_args} ${ARCHIVE} ${_tmp}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(_rc EQUAL 0)
  file(RENAME ${_tmp} ${ARCHIVE})
else()
  file(REMOVE ${_tmp})
  string(STRIP "${_err}${_out}" _msg)
  message(STATUS "pinheap: the functions a small program runs are not grouped in ${ARCHIVE} "
    "(objcopy exited with ${_rc}: ${_msg}); the archive is unchanged and works the same")
endif()
