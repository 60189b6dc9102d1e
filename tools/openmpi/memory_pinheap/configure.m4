# -*- shell-script -*-
#
# configure.m4 -- Open MPI's configure macros for the memory/pinheap
# component (pinheap's tools/openmpi/build.sh copies this folder to
# opal/mca/memory/pinheap of an Open MPI 4.1 source tree).
#
# Open MPI builds one memory component: the happy one with the highest
# configure priority (opal/mca/memory/configure.m4: STOP_AT_FIRST).
# patcher's is 41; pinheap's is above it, so whenever --with-pinheap is
# given, pinheap is the memory component and patcher is not built.  Without
# --with-pinheap this component is not happy and nothing changes.

AC_DEFUN([MCA_opal_memory_pinheap_PRIORITY], [60])

# Static only, as the old ptmalloc2 component was: the allocator must be
# in libopen-pal itself, before main.
AC_DEFUN([MCA_opal_memory_pinheap_COMPILE_MODE], [
    AC_MSG_CHECKING([for MCA component $2:$3 compile mode])
    $4="static"
    AC_MSG_RESULT([$$4])
])

# MCA_opal_memory_pinheap_CONFIG([action-if-happy], [action-if-not-happy])
AC_DEFUN([MCA_opal_memory_pinheap_CONFIG],[
    AC_CONFIG_FILES([opal/mca/memory/pinheap/Makefile])
    AC_ARG_WITH([pinheap],
        [AS_HELP_STRING([--with-pinheap=DIR],
            [use pinheap as the memory component: pinheap installed under DIR with
             the opal_memory_pinheap_ prefix (DIR/include/pinheap.h,
             DIR/lib/libpinheap.a)])])
    opal_memory_pinheap_happy=no
    opal_memory_pinheap_dir=
    AS_IF([test -n "$with_pinheap" && test "$with_pinheap" != "no"], [
        AC_MSG_CHECKING([for pinheap with the opal_memory_pinheap_ prefix in $with_pinheap])
        AS_IF([test -r "$with_pinheap/include/pinheap.h" &&
               test -r "$with_pinheap/lib/libpinheap.a" &&
               grep opal_memory_pinheap_open "$with_pinheap/include/pinheap.h" >/dev/null 2>&1],
              [opal_memory_pinheap_happy=yes
               opal_memory_pinheap_dir=`cd "$with_pinheap" && pwd`])
        AC_MSG_RESULT([$opal_memory_pinheap_happy])
        AS_IF([test "$opal_memory_pinheap_happy" = "no"],
              [AC_MSG_ERROR([--with-pinheap=$with_pinheap: expected $with_pinheap/include/pinheap.h declaring opal_memory_pinheap_open and $with_pinheap/lib/libpinheap.a (build pinheap with -DPINHEAP_PREFIX=opal_memory_pinheap_ and install it there)])])
    ])
    # Not *_LIBS / *_LDFLAGS: those of a static component go to mpicc's
    # link line and ompi-c.pc, and a program must not link pinheap twice.
    AC_SUBST([opal_memory_pinheap_dir])
    AS_IF([test "$opal_memory_pinheap_happy" = "yes"], [$1], [$2])
])
