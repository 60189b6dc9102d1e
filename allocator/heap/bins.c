/*
 * bins.c -- the bins of free chunks: the two-level bin map, the sorted
 * large bins, and the designated victim (dv).  The inline parts (bin_unlink,
 * chunk_carve, ...) are in chunk.h.  Main entry point: bin_insert().
 */
#include "allocator/heap/chunk.h"

/* First non-empty bin at or above i, or PH_NBINS. */
PH_HOT unsigned binmap_next(const mstate_t *ms, unsigned i)
{
  unsigned w = i >> 6;
  if (w >= PH_BINMAP_WORDS)
    return PH_NBINS;
  uint64_t bits = ms->binmap[w] & (~(uint64_t)0 << (i & 63));
  if (bits != 0)
    return (w << 6) + (unsigned)__builtin_ctzll(bits);
  uint64_t words = ms->binmap_words & (~(uint64_t)1 << w);    /* the words above w */
  if (words == 0)
    return PH_NBINS;
  w = (unsigned)__builtin_ctzll(words);
  return (w << 6) + (unsigned)__builtin_ctzll(ms->binmap[w]);
}

PH_HOT void bin_insert(mstate_t *ms, chunk_t *c, size_t size)
{
  unsigned i = bin_index(size);
  chunk_t *b = bin_at(ms, i);
  chunk_t *after = b;            /* insert before after->fd */

  if (!bin_live(ms, i))          /* empty: its header may never have been set */
    b->fd = b->bk = b;
  if (i >= PH_NSMALL) {          /* keep large bins sorted, ascending */
    chunk_t *x = b->fd;
    while (x != b && chunk_size(x) < size)
      x = x->fd;
    after = x->bk;
  }
  c->fd = after->fd;
  c->bk = after;
  after->fd->bk = c;
  after->fd = c;
  binmap_mark(ms, i);
}

/* Makes the free chunk c the designated victim; the previous one, if any,
 * goes to its bin. */
PH_HOT void dv_replace(mstate_t *ms, chunk_t *c)
{
  chunk_t *b = bin_at(ms, PH_DV_BIN), *old = b->fd;

  if (old != b) {
    bin_links_check(old);
    bin_insert(ms, old, chunk_size(old));
  }
  c->fd = c->bk = b;
  b->fd = b->bk = c;
}

/* Takes nb bytes from the designated victim dv (dsize >= nb).  The rest
 * stays the victim, in place. */
PH_HOT chunk_t *dv_take(mstate_t *ms, chunk_t *dv, size_t dsize, size_t nb)
{
  chunk_t *b = bin_at(ms, PH_DV_BIN);

  bin_links_check(dv);
  b->fd = b->bk = b;
  return chunk_carve(ms, dv, dsize, nb);
}

/* Puts the designated victim into its bin (before a walk of the bins that
 * must see every free chunk in its place). */
void dv_flush(mstate_t *ms)
{
  chunk_t *dv = dv_get(ms);

  if (dv != NULL) {
    bin_unlink(ms, dv, chunk_size(dv));
    bin_insert(ms, dv, chunk_size(dv));
  }
}
