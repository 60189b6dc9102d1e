# install.cmake -- install rules and the packages a runtime finds pinheap by:
# the CMake package (find_package(pinheap CONFIG) -> pinheap::pinheap) and the
# pkg-config file pinheap.pc.  Included by the top-level CMakeLists.txt.
#
# Installed tree (relative to the install prefix):
#   <libdir>/libpinheap.a                    the name-shifted allocator (static, PIC)
#   <libdir>/libopenmpi_malloc.a             empty; keeps legacy -lopenmpi_malloc lines linking
#   <includedir>/pinheap.h                   the public API
#   <includedir>/pinheap_config.h            the configured prefix and version
#   <libdir>/cmake/pinheap/pinheapConfig.cmake, pinheapConfigVersion.cmake
#   <libdir>/pkgconfig/pinheap.pc
#
# The archive must be linked WHOLE (no object dropped): the replacement entry
# points and constructors of later issues are never referenced by the
# runtime's own code, yet must end up in its core library.  Both packages say
# so in their link lines, and both are relocatable (paths are computed from
# where the package file lies, so `cmake --install --prefix DIR` works).

include(CMakePackageConfigHelpers)

set(PINHEAP_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/pinheap" CACHE STRING
    "Where pinheapConfig.cmake is installed (relative to the prefix)")
set(PINHEAP_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig" CACHE STRING
    "Where pinheap.pc is installed (relative to the prefix)")
mark_as_advanced(PINHEAP_INSTALL_CMAKEDIR PINHEAP_INSTALL_PKGCONFIGDIR)

foreach(dir CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR
            PINHEAP_INSTALL_CMAKEDIR PINHEAP_INSTALL_PKGCONFIGDIR)
  if(IS_ABSOLUTE "${${dir}}")
    message(FATAL_ERROR
      "pinheap: ${dir}='${${dir}}' is absolute; the pinheap packages are relocatable "
      "and expect a directory relative to the install prefix (e.g. lib, include).")
  endif()
endforeach()

# ---- the libraries and headers ------------------------------------------------
install(TARGETS pinheap openmpi_malloc
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES
    ${PROJECT_BINARY_DIR}/include/pinheap.h
    ${PROJECT_BINARY_DIR}/include/pinheap_config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# ---- the CMake package ------------------------------------------------------------
# Written by hand rather than with install(EXPORT): an exported STATIC target
# would be linked as a plain archive, and the linker would drop every object
# no caller references.  The template builds pinheap::pinheap as an
# INTERFACE target wrapping the archive in --whole-archive.
set(PINHEAP_PACKAGE_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
set(PINHEAP_PACKAGE_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/pinheapConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/pinheapConfig.cmake
  INSTALL_DESTINATION ${PINHEAP_INSTALL_CMAKEDIR}
  PATH_VARS PINHEAP_PACKAGE_LIBDIR PINHEAP_PACKAGE_INCLUDEDIR)
# While the version is 0.x the API may change between minor versions, so a
# request for X.Y is only met by X.Y.z.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/package/pinheapConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
    ${PROJECT_BINARY_DIR}/package/pinheapConfig.cmake
    ${PROJECT_BINARY_DIR}/package/pinheapConfigVersion.cmake
  DESTINATION ${PINHEAP_INSTALL_CMAKEDIR})

# ---- the pkg-config file ------------------------------------------------------------
# prefix= is computed from ${pcfiledir}, so the file stays right wherever the
# tree is installed or moved to.
file(RELATIVE_PATH PINHEAP_PC_TO_PREFIX
  "/pinheap-root/${PINHEAP_INSTALL_PKGCONFIGDIR}" "/pinheap-root")
string(REGEX REPLACE "/$" "" PINHEAP_PC_TO_PREFIX "${PINHEAP_PC_TO_PREFIX}")
if(PINHEAP_PC_TO_PREFIX STREQUAL "")
  set(PINHEAP_PC_TO_PREFIX ".")
endif()
# The link dependencies of the archive, as plain -l flags (glibc >= 2.34 has
# both in libc; older ones need them).
set(PINHEAP_PC_DEPS "-lpthread")
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND PINHEAP_PC_DEPS " -l${lib}")
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/pinheap.pc.in
  ${PROJECT_BINARY_DIR}/package/pinheap.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/pinheap.pc
  DESTINATION ${PINHEAP_INSTALL_PKGCONFIGDIR})
