/*
 * owner.c -- the owner map: which 64 KiB granules of the address space are
 * pinheap's, and which segment or huge chunk holds each.  Main entry point:
 * owner_map_set(); lookups are the inline owner_map_get() in heap.h.
 *
 * Leaves are mapped on first use and never released, so a lookup racing
 * with an update reads either the old or the new entry, never freed memory.
 * Entries of a range are set before the range is handed out and cleared
 * before it is released, always under the owning heap's lock.
 */
#include "heap.h"

_Atomic(uintptr_t *) owner_map_root[(size_t)1 << PH_OWNER_ROOT_BITS];
uint8_t *owner_kind;
uintptr_t owner_kind_limit;
static ph_lock_t owner_kind_lock;          /* creates the kind map and the leaves */

/* Reserves the kind map on first use.  Until it exists (or if it cannot),
 * owner_kind_limit is 0 and the fast paths ask the owner map. */
static void owner_kind_init(void)
{
  const uintptr_t entries = (uintptr_t)1 << (PH_OWNER_ROOT_BITS + PH_OWNER_LEAF_BITS);

  if (__atomic_load_n(&owner_kind_limit, __ATOMIC_ACQUIRE) != 0 || owner_kind == (uint8_t *)1)
    return;
  ph_lock(&owner_kind_lock);
  if (owner_kind == NULL) {
    uint8_t *m = os_reserve_meta(entries);
    owner_kind = m != NULL ? m : (uint8_t *)1;      /* 1: tried and refused */
    if (m != NULL)
      __atomic_store_n(&owner_kind_limit, entries, __ATOMIC_RELEASE);
  }
  ph_unlock(&owner_kind_lock);
}

static uintptr_t *owner_leaf_get(uintptr_t addr)
{
  size_t i = addr >> (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS);
  uintptr_t *leaf = atomic_load_explicit(&owner_map_root[i], memory_order_acquire);

  if (leaf == NULL) {                     /* created once, under a lock: no loser to free */
    ph_lock(&owner_kind_lock);
    leaf = atomic_load_explicit(&owner_map_root[i], memory_order_acquire);
    if (leaf == NULL) {
      leaf = os_reserve_meta(sizeof(uintptr_t) << PH_OWNER_LEAF_BITS);  /* never released */
      if (leaf != NULL)
        atomic_store_explicit(&owner_map_root[i], leaf, memory_order_release);
    }
    ph_unlock(&owner_kind_lock);
  }
  return leaf;
}

void owner_fork_lock(void)
{
  ph_lock(&owner_kind_lock);
}

void owner_fork_unlock(void)
{
  ph_unlock(&owner_kind_lock);
}

bool owner_map_set(const void *base, size_t len, uintptr_t value, unsigned kind)
{
  uintptr_t a = (uintptr_t)base;
  uintptr_t end = a + len;
  const uintptr_t leaf_mask = ((uintptr_t)1 << PH_OWNER_LEAF_BITS) - 1;

  if ((end >> (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS + PH_OWNER_ROOT_BITS)) != 0)
    return false;
  owner_kind_init();
  bool has_kind = owner_kind_limit != 0;
  for (; a < end; a += PH_GRANULE) {
    uintptr_t *leaf = owner_leaf_get(a);
    if (leaf == NULL)
      return false;
    /* set: the full entry first; clear: the kind first */
    if (value == 0 && has_kind)
      __atomic_store_n(&owner_kind[a >> PH_GRANULE_SHIFT], (uint8_t)kind, __ATOMIC_RELEASE);
    __atomic_store_n(&leaf[(a >> PH_GRANULE_SHIFT) & leaf_mask], value, __ATOMIC_RELEASE);
    if (value != 0 && has_kind)
      __atomic_store_n(&owner_kind[a >> PH_GRANULE_SHIFT], (uint8_t)kind, __ATOMIC_RELEASE);
  }
  return true;
}
