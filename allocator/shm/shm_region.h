/*
 * shm_region.h -- the shared heap's region as its files see it: the
 * header's layout (shm_hdr_t), this process's view of the region, and the
 * one message buffer.  Private to shm.c (slices, arenas, tmpfs blocks,
 * queries), shm_start.c (create or join), shm_rel.c (releases every
 * process hears) and shm_fork.c (fork and exit); the rest of the allocator
 * sees the shared heap through shm.h.
 */
#ifndef PINHEAP_SHM_REGION_H
#define PINHEAP_SHM_REGION_H

#include "allocator/shm/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config/params.h"
#include "pinheap.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define SHM_MAGIC    0x316d68737061656eULL   /* "neapshm1" */
#define SHM_VERSION  4u
#define SHM_MAX_PROCS PARAM_RANKS_MAX
#define SHM_SLOT     ((uintptr_t)1 << (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS))  /* 4 GiB */
#define SHM_LEAF_BYTES (sizeof(uintptr_t) << PH_OWNER_LEAF_BITS)
/* Where the region goes: the highest hole below SHM_TOP (the mmap area
 * grows down from near 0x7fff..., randomized over about a TiB: 16 TiB of
 * room) and above SHM_FLOOR. */
#define SHM_TOP      ((uintptr_t)0x700000000000ULL)
#define SHM_FLOOR    ((uintptr_t)0x100000000000ULL)
#define SHM_NAME_MAX 96

enum { SHM_INIT = 0, SHM_READY = 1, SHM_DEAD = 2 };

#define SHM_REC_ARENAS 16
typedef struct shm_rec_s {
  _Atomic int pid;           /* 0: left (or never joined) */
  int joined;                /* 1 once the process took its index */
  _Atomic uint64_t heard;    /* its listeners heard every release posted before */
  /* The heaps of this index (mstate_t * in the region; 0: none), which a
   * process taking the index over after its holder ended adopts. */
  _Atomic uint64_t arenas[SHM_REC_ARENAS];
} shm_rec_t;

/* A release posted to the ring (below: "releases every process hears"). */
#define SHM_RING 64u         /* a power of two */
typedef struct shm_rel_s {
  _Atomic uint64_t turn;     /* s: free for entry s; s + 1: holds entry s */
  _Atomic uint64_t addr;     /* the pages [addr, addr + len) */
  _Atomic uint64_t len;
  _Atomic uint64_t heap;     /* the poster's heap (mstate_t *) and its free chunk */
  _Atomic uint64_t chunk;
  _Atomic uint64_t token;    /* also in the chunk (shm_rel_token_at) while it stays free */
  _Atomic int poster;        /* the poster's index */
} shm_rel_t;

typedef struct shm_hdr_s {
  uint64_t magic;
  uint32_t version;
  _Atomic uint32_t state;    /* SHM_INIT -> SHM_READY (release) -> SHM_DEAD */
  _Atomic int creator_pid;   /* written first, before the object is sized for others */
  uint32_t max_procs;        /* the participant count, or SHM_MAX_PROCS */
  uint64_t size;
  uint64_t base;
  uint64_t span;             /* whole root slots reserved from base */
  _Atomic uint32_t refcount; /* processes attached; the last one unlinks */
  _Atomic uint32_t nprocs;   /* indexes handed out */
  _Atomic uint64_t cursor;   /* offset of the first byte no slice holds */
  uint64_t owners_off;       /* uint16_t per granule */
  uint64_t leaves_off;       /* the owner map's leaves, one per root slot */
  uint64_t backed_off;       /* a bit per page: reserved in the tmpfs (below) */
  uint64_t data_off;         /* the first slice */
  uint64_t free_key;         /* chunk_free_key of every process */
  mem_source_t source;       /* what every heap of the region points at */
  _Atomic uint64_t rel_head; /* the next entry's number */
  shm_rel_t rel[SHM_RING];
  shm_rec_t recs[SHM_MAX_PROCS];
} shm_hdr_t;

/* This process's view (set once by shm_start, read-only after). */
PH_HIDDEN extern shm_hdr_t *shm_hdr;
PH_HIDDEN extern int shm_me;
PH_HIDDEN extern shm_conf_t shm_conf;
PH_HIDDEN extern char shm_obj[SHM_NAME_MAX];          /* "/pinheap-<uid>-<job>" */
PH_HIDDEN extern char shm_path[SHM_NAME_MAX + 16];    /* "/dev/shm" + shm_obj */
PH_HIDDEN extern bool shm_left;                       /* the child of a fork: a private copy */
PH_HIDDEN extern atomic_bool shm_full;                /* the region filled up, fallback on */
PH_HIDDEN extern atomic_flag shm_full_said;
PH_HIDDEN extern mstate_t *_Atomic shm_fb_heap;
PH_HIDDEN extern int shm_fd;                     /* the object, kept open (fork's snapshot,
                                               reservations) */
PH_HIDDEN extern uint64_t shm_fd_dev, shm_fd_ino;     /* what it must still be */
PH_HIDDEN extern void *shm_snap;                      /* fork: the parent's snapshot, or NULL */
PH_HIDDEN extern size_t shm_snap_len;
PH_HIDDEN extern uint32_t shm_adopted;                /* bit k: arenas[k] of this process's
                                               record is its own, or was tried */
/* Fork: held while the fallback heap is made (ms_create: a mapping, the
 * owner map), outside every heap lock; not in malloc_prefork_lock's order,
 * which would then have to come first.  shm_fb_heap is published last: a
 * child forked meanwhile frees the lock (shm_fork_child) and makes its
 * own when it needs one (the half-made one's mapping is lost). */
PH_HIDDEN extern ph_lock_t shm_fb_lock;

static inline uint16_t *shm_owners(void)
{
  return (uint16_t *)((char *)shm_hdr + shm_hdr->owners_off);
}

/* ---- across the shm files ------------------------------------------------ */
/* The start-up message (shm_start.c): said in pieces into shm_msg, one
 * line to the logger at the end. */
PH_HIDDEN void shm_say(const char *s);
PH_HIDDEN void shm_say_begin(void);
PH_HIDDEN void shm_say_end(int level, const char *last);
PH_HIDDEN void shm_say_dec(uint64_t v);
PH_HIDDEN void shm_say_hex(uintptr_t v);
PH_HIDDEN void shm_say_oct(unsigned v);

/* shm.c */
PH_HIDDEN int shm_fd_get(void);
PH_HIDDEN int shm_reserve(int fd, uint64_t off, uint64_t len);
PH_HIDDEN void shm_backed_set(shm_hdr_t *h, uint64_t off, uint64_t len);
/* shm_start.c */
PH_HIDDEN uint64_t shm_now_ms(void);
PH_HIDDEN bool shm_pid_gone(int pid);
PH_HIDDEN bool shm_all_gone(const shm_hdr_t *h);
/* shm_rel.c */
PH_HIDDEN bool shm_rel_held(shm_hdr_t *h, uint32_t i, uint64_t *s_p);
PH_HIDDEN void shm_rel_retire(shm_rel_t *e, uint64_t s);

#endif
