/*
 * startup.h -- PH_STARTUP, the mark of the hooks' once-only code: the
 * decision, installation (interposition checks, relocation and code
 * patching, the probe), event-handler registration.  Such code runs before
 * main (and again only when an object is loaded later), never on an
 * allocation's path.
 *
 * Why a section.  The kernel maps a library's text 64 KiB at a time around
 * each page a process touches (fault-around), so code that runs once, spread
 * among the allocator's hot functions, makes every window of pinheap's text
 * resident in every process.  In ".text.startup" (GNU ld and gold place it
 * together, after .text.unlikely and before the rest of .text; lld keeps
 * the input order) the once-only code shares windows with itself and with
 * the compiler's own constructors, and the code that never runs in a
 * given process stays out of its resident set.  The order of the archive's
 * members (config/sources.cmake) does the same between files.
 *
 * A function marked PH_STARTUP may still be called at any time: the mark
 * moves code, it changes no behaviour.
 */
#ifndef PINHEAP_STARTUP_H
#define PINHEAP_STARTUP_H

#define PH_STARTUP __attribute__((section(".text.startup.pinheap")))

#endif
