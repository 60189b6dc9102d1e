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

static uintptr_t *owner_leaf_get(uintptr_t addr)
{
  size_t i = addr >> (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS);
  uintptr_t *leaf = atomic_load_explicit(&owner_map_root[i], memory_order_acquire);

  if (leaf == NULL) {
    size_t len = sizeof(uintptr_t) << PH_OWNER_LEAF_BITS;
    uintptr_t *fresh = os_map(len);
    if (fresh == NULL)
      return NULL;
    if (!atomic_compare_exchange_strong_explicit(&owner_map_root[i], &leaf, fresh,
                                                 memory_order_acq_rel, memory_order_acquire))
      os_release(fresh, len);  /* another thread won; leaf holds its leaf */
    else
      leaf = fresh;
  }
  return leaf;
}

bool owner_map_set(const void *base, size_t len, uintptr_t value)
{
  uintptr_t a = (uintptr_t)base;
  uintptr_t end = a + len;
  const uintptr_t leaf_mask = ((uintptr_t)1 << PH_OWNER_LEAF_BITS) - 1;

  if ((end >> (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS + PH_OWNER_ROOT_BITS)) != 0)
    return false;
  for (; a < end; a += PH_GRANULE) {
    uintptr_t *leaf = owner_leaf_get(a);
    if (leaf == NULL)
      return false;
    __atomic_store_n(&leaf[(a >> PH_GRANULE_SHIFT) & leaf_mask], value, __ATOMIC_RELEASE);
  }
  return true;
}
