/*
 * openmpi_malloc_compat.c -- the empty libopenmpi_malloc.a.
 *
 * libopenmpi_malloc once held the whole ptmalloc2 allocator.  The allocator
 * is now name-shifted and lives in libpinheap.a, so this archive is kept
 * only so that old link lines with -lopenmpi_malloc still link.  It defines
 * nothing a program could come to depend on.
 */
typedef int pinheap_openmpi_malloc_compat_empty; /* ISO C wants a non-empty unit */
