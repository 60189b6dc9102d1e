/*
 * slab.h -- what slab.c and slab_free.c share: a page's states, the slab
 * constants, and the inline helpers on a page, its remote stack's word and
 * its owner's lists (these were inlined in the one slab.c; they stay
 * inline).  The cross-file functions of the two files are hidden ones, with
 * their prototypes in front.h (slab.c).  Included by those two files only.
 */
#ifndef PINHEAP_SLAB_H
#define PINHEAP_SLAB_H

#include "allocator/front/front.h"

#define SLAB_CUR    1u   /* its owner's current page of its class */
#define SLAB_AVAIL  2u   /* in its owner's list of pages with room */
#define SLAB_FULL   3u   /* in its owner's list of full pages */
#define SLAB_CACHED 4u   /* empty, in its arena's cache, no owner */
#define SLAB_ORPHAN 5u   /* its owner exited: in its arena's orphans */
#define SLAB_LOST   6u   /* fork child: another thread's page, in no list */

#define PH_SLAB_CACHE 4u       /* empty pages an arena keeps */
#define SLAB_FULL_SCAN 4u      /* full pages looked at for remote frees */
#define SLAB_CARVE 4096u       /* fresh blocks put on the list at once: those
                                  starting in one page (slab_carve) */
#define SLAB_REMOTE_BATCH 32u  /* blocks of another thread's page pushed at once */
_Static_assert(SLAB_REMOTE_BATCH <= UINT8_MAX, "a batch's count fits tcache_t's rb_count");
#define SLAB_ROOM_SHIFT 4u     /* a full page goes back to "avail" when 1/16 of
                                  its blocks (and one) are free, */
#define SLAB_ROOM_MIN 8u       /* and at least 8 (and one): a page of 640-1024-byte
                                  blocks (63-102) came back with 5-7, and took a
                                  page switch per 7-17 mallocs of the class */
/* An orphan's remote stack, whole: no block is pushed there, frees take
 * the arena's lock (blocks are 16-aligned: no stack top has this bit). */
#define SLAB_ORPHAN_TAG ((void *)(uintptr_t)1)
/* A remote stack's word: how many blocks it holds, in the bits from
 * SLAB_COUNT_SHIFT up (at least 1: the word of a stack is never 0 or the
 * tag), SLAB_STACK_WALK, and its top block's offset in the page below:
 * the owner takes a stack into an empty list whole, without walking it,
 * unless SLAB_STACK_WALK says a block was pushed alone by a thread without
 * a cache (slab_collect_stack). */
#define SLAB_COUNT_SHIFT 32u
#define SLAB_STACK_WALK ((uintptr_t)1 << 31)

/* ---- small helpers --------------------------------------------------------- */

PH_INLINE tcache_t *page_owner(const slab_page_t *pg)
{
  return __atomic_load_n(&pg->owner, __ATOMIC_RELAXED);
}
/* Every change of owner comes here: owner_tp follows owner. */
PH_INLINE void page_set_owner(slab_page_t *pg, tcache_t *tc)
{
  __atomic_store_n(&pg->owner, tc, __ATOMIC_RELAXED);
  __atomic_store_n(&pg->owner_tp, tc != NULL ? tc->tp : 0, __ATOMIC_RELAXED);
}
PH_INLINE char *page_first(const slab_page_t *pg)
{
  return (char *)((uintptr_t)pg & ~(PH_GRANULE - 1));
}
/* Bytes of blocks the page may hold: up to its header. */
PH_INLINE uint32_t page_area(const slab_page_t *pg)
{
  return (uint32_t)((uintptr_t)pg & (PH_GRANULE - 1));
}
/* Blocks the page holds, span / bsize, by the block test's reciprocal
 * instead of a division (at each page switch, full_append): mulc * bsize
 * is 2^64 + e with 0 < e <= bsize (slab_format), so span * mulc is the
 * count times 2^64 plus the count times e, far below 2^64. */
PH_INLINE uint32_t page_capacity(const slab_page_t *pg)
{
  return (uint32_t)(((unsigned __int128)pg->span * pg->mulc) >> 64);
}
PH_INLINE uint32_t page_used(const slab_page_t *pg) { return pg->over + pg->mark; }
/* The count of blocks in use becomes `used`; the mark stays if below. */
PH_INLINE void page_used_set(slab_page_t *pg, uint32_t used)
{
  if (pg->mark >= used)
    pg->mark = 0;
  pg->over = used - pg->mark;
}
/* The slot of class c in a cache's slab_cur[] (its last). */
PH_INLINE slab_page_t **cur_slot(tcache_t *tc, unsigned c)
{
  return &tc->slab_cur[(slab_class_size[c] >> 4) - 1];
}
/* pg becomes the current page of class c: every slot of the class.  A
 * class has 1, 2, 4 or 8 slots, stored without a loop: the classes of 8
 * (640 .. 1024 bytes) switch pages most, and the loop was 40 instructions
 * of a page switch's 180 (churn). */
PH_INLINE void cur_set(tcache_t *tc, unsigned c, slab_page_t *pg)
{
  unsigned first = c == 0 ? 0 : slab_class_size[c - 1] >> 4, end = slab_class_size[c] >> 4;
  slab_page_t **s = &tc->slab_cur[first];
  switch (end - first) {
  case 8:
    s[7] = s[6] = s[5] = s[4] = pg;
    /* fall through */
  case 4:
    s[3] = s[2] = pg;
    /* fall through */
  case 2:
    s[1] = pg;
    /* fall through */
  case 1:
    s[0] = pg;
    break;
  default:
    for (unsigned i = first; i < end; i++)
      tc->slab_cur[i] = pg;
  }
}
PH_INLINE uintptr_t link_enc(const slab_page_t *pg, const void *p) { return (uintptr_t)p ^ pg->secret; }
/* The count of blocks of a remote stack's word v (0: empty), its top
 * block (v not empty), and the word of a stack of n blocks from top. */
PH_INLINE uint32_t remote_count(const void *v) { return (uint32_t)((uintptr_t)v >> SLAB_COUNT_SHIFT); }
PH_INLINE void *remote_top(const slab_page_t *pg, const void *v)
{
  return page_first(pg) + ((uintptr_t)v & (PH_GRANULE - 1));
}
PH_INLINE void *remote_word(const void *top, uint32_t n, uintptr_t walk)
{
  return (void *)(((uintptr_t)n << SLAB_COUNT_SHIFT) | walk | ((uintptr_t)top & (PH_GRANULE - 1)));
}

/* Names a pointer into pg that is not one of its blocks, or a free one. */
PH_INLINE void slab_block_check(const slab_page_t *pg, const void *mem, const char *fn)
{
  uint64_t u = (uintptr_t)mem & (PH_GRANULE - 1);
  if (u * pg->mulc >= pg->lim)
    ph_fatal(fn, "invalid pointer", mem);
  if (((const uint64_t *)mem)[1] == chunk_free_key)
    ph_fatal(fn, "double free", mem);
}

/* ---- the owner's lists ------------------------------------------------------ */

/* Every list of pages (an owner's avail and full lists, an arena's orphans)
 * is doubly linked through prev/next from *head; only the full list keeps
 * a tail (tail NULL for the others). */
PH_INLINE void page_push_front(slab_page_t **head, slab_page_t *pg)
{
  pg->prev = NULL;
  pg->next = *head;
  if (*head != NULL)
    (*head)->prev = pg;
  *head = pg;
}

PH_INLINE void page_unlink(slab_page_t **head, slab_page_t **tail, slab_page_t *pg)
{
  if (pg->prev != NULL)
    pg->prev->next = pg->next;
  else
    *head = pg->next;
  if (pg->next != NULL)
    pg->next->prev = pg->prev;
  else if (tail != NULL)
    *tail = pg->prev;
}

PH_INLINE void avail_push(tcache_t *tc, slab_page_t *pg)
{
  page_push_front(&tc->slab_avail[pg->cls], pg);
  pg->state = SLAB_AVAIL;
}

PH_INLINE void avail_remove(tcache_t *tc, slab_page_t *pg)
{
  page_unlink(&tc->slab_avail[pg->cls], NULL, pg);
}

/* Takes pg, the first of tc's pages with room of class c, out of the list. */
PH_INLINE void avail_pop(tcache_t *tc, unsigned c, slab_page_t *pg)
{
  slab_page_t *next = pg->next;
  tc->slab_avail[c] = next;
  if (next != NULL)
    next->prev = NULL;
}

/* Takes pg out of the full list: its mark goes. */
PH_INLINE void full_remove(tcache_t *tc, slab_page_t *pg)
{
  unsigned c = pg->cls;
  pg->over += pg->mark;
  pg->mark = 0;
  page_unlink(&tc->slab_full[c], &tc->slab_full_tail[c], pg);
}

/* Takes pg out of whichever of its owner's lists it is in. */
PH_INLINE void owner_list_remove(tcache_t *tc, slab_page_t *pg)
{
  if (pg->state == SLAB_AVAIL)
    avail_remove(tc, pg);
  else if (pg->state == SLAB_FULL)
    full_remove(tc, pg);
  else if (pg->state == SLAB_CUR)
    cur_set(tc, pg->cls, &slab_none);
}

#endif /* PINHEAP_SLAB_H */
