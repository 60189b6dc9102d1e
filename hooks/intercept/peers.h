/*
 * peers.h -- the other observers of the memory calls in the process: code
 * patchers that rewrote libc's entry points (Open MPI's patcher, a tool,
 * a runtime pinheap does not know by name).  pinheap's own system calls
 * for the memory calls -- its allocator's releases and the last step of
 * each entry point of events.h -- are made through libc's entry when
 * someone else rewrote it, so that their hook hears pinheap's releases as
 * it hears glibc's, instead of the raw system call that would pass it by.
 * Owned by hooks/intercept/peers.c.
 *
 * Consumers that pinheap feeds directly (UCX's libucm, Open MPI's memory
 * hooks, hooks/bridges/ucx.c and hooks/bridges/ompi.c) are exempt: their hooks on libc are
 * passed by, as they hear every release from the feed already.
 *
 * A forwarded call that comes back into pinheap's entry point for the same
 * address (a hook whose "original" is pinheap's interposed munmap) goes
 * straight to the kernel: peers_returning() says so.  Nothing allocates;
 * x86-64 only (elsewhere every call is the raw system call).
 */
#ifndef PINHEAP_PEERS_H
#define PINHEAP_PEERS_H

#include "allocator/api/api.h"
#include "hooks/intercept/patch.h"

#include <stdint.h>
#include <sys/types.h>

/* ---- set-up (install.c) --------------------------------------------------- */
/** Finds libc's mmap, munmap, mremap, madvise, shmat, shmdt and brk: in
 *  found[0..n) (code patching's sites, by name, where it found them), else
 *  in libc, before relocation patching points libc's symbol table at
 *  pinheap; then routes the allocator's releases through peers_munmap & co.
 *  Idempotent.  Call peers_snapshot() after patching. */
PH_HIDDEN void peers_find(const patch_site_t *found, size_t n);
/** Records what libc's entries hold now (pinheap's jump, libc's code, or
 *  someone else's jump), as code patching's sites[0..n) say (their state)
 *  or, for a call they do not name, as the entry's first bytes say: after
 *  the installation's patching. */
PH_HIDDEN void peers_snapshot(const patch_site_t *sites, size_t n);
/** The object holding addr is a consumer pinheap feeds directly (libucm,
 *  libopen-pal): calls are never forwarded through its hooks. */
PH_HIDDEN void peers_exempt(const void *addr);
/** Is addr (a return address) in a consumer pinheap feeds directly?  Its
 *  hooks announce a call themselves (into pinheap's chain too) and then make
 *  it with syscall(): that call is not announced again. */
PH_HIDDEN bool peers_exempt_at(const void *addr);
/** In a fork child (hooks/events/forks.c): frees the set-up lock. */
PH_HIDDEN void peers_fork_child(void);

/* ---- the system calls, forwarded where someone else hooked libc --------- */
PH_HIDDEN void *peers_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
PH_HIDDEN int peers_munmap(void *addr, size_t len);
PH_HIDDEN void *peers_mremap(void *addr, size_t old_len, size_t new_len, int flags,
                             void *new_addr);
PH_HIDDEN int peers_madvise(void *addr, size_t len, int advice);
PH_HIDDEN void *peers_shmat(int shmid, const void *addr, int flags);
PH_HIDDEN int peers_shmdt(const void *addr);
/** The brk system call's answer (the break after the call), made through
 *  libc's brk when someone else hooked it. */
PH_HIDDEN uintptr_t peers_brk(void *addr);

/** 1 when this thread is inside a forwarded call for addr: the entry point
 *  reached again must make the system call and report nothing (the outer
 *  call did). */
PH_HIDDEN int peers_returning(const void *addr);

/** One sentence per libc entry point someone else rewrote (where it jumps,
 *  whether pinheap's releases go through it, whether it replaced pinheap's
 *  own patch so that glibc's internal calls now reach only that hook);
 *  snprintf's return value (0, buf empty, when there is none). */
PH_HIDDEN int peers_describe(char *buf, size_t size);

#endif /* PINHEAP_PEERS_H */
