/*
 * owner.c -- the owner map: which 64 KiB granules of the address space are
 * pinheap's, and which segment or huge chunk holds each.  Main entry point:
 * owner_map_set(); lookups are the inline owner_map_get() in chunk.h.
 *
 * Leaves are mapped on first use and never released, so a lookup racing
 * with an update reads either the old or the new entry, never freed memory.
 * Entries of a range are set before the range is handed out and cleared
 * before it is released, always under the owning heap's lock.
 *
 * The leaves (512 KiB each) and the kind map (2 GiB) are tables that any
 * pointer may be looked up in, but only the parts describing pinheap's
 * memory are ever written.  They are mapped read-only (os_reserve_readonly:
 * no memory and no commit charge in any overcommit mode; what was never
 * written reads as zeros) and opened for writing a unit (64 KiB of table)
 * at a time, before the first entry in that unit is set.  An opened unit
 * stays open; a bit per unit says which are.  Opening is charged and can be
 * refused (strict overcommit, RLIMIT_DATA): owner_map_set() then returns
 * false before it writes anything, and its callers report out of memory.
 */
#include "allocator/os/os.h"
#include "allocator/base/startup.h"     /* PH_COLD_BSS, PH_HOT_DATA */

#define OWNER_KIND_ENTRIES ((uintptr_t)1 << (PH_OWNER_ROOT_BITS + PH_OWNER_LEAF_BITS))
#define OWNER_LEAF_BYTES   (sizeof(uintptr_t) << PH_OWNER_LEAF_BITS)
#define OWNER_UNIT         ((size_t)64 << 10)   /* bytes of table opened at once */
#define OWNER_SLOT_SHIFT   (PH_GRANULE_SHIFT + PH_OWNER_LEAF_BITS)  /* address -> root slot */
_Static_assert(OWNER_LEAF_BYTES / OWNER_UNIT == 8, "a leaf's open units are bits 0-7 of its word");
_Static_assert(OWNER_KIND_ENTRIES / OWNER_UNIT == (size_t)1 << PH_OWNER_ROOT_BITS,
               "a unit of the kind map describes the granules of one root slot");

/* A lookup table a small program writes one page of (the slots of the
 * addresses the kernel maps at): away from the small statics.  An entry is
 * its leaf's address | the slot's open bits: the units opened, a bit each,
 * set (release) once the unit is writable -- bits 0-7 the 8 units of its
 * leaf, bit 8 the unit of the kind map describing the same granules.  In
 * the entry, not in a table of their own indexed alike, which made one
 * more page resident in every process. */
PH_COLD_BSS _Atomic uintptr_t owner_map_root[(size_t)1 << PH_OWNER_ROOT_BITS];
uint8_t *owner_kind;
uintptr_t owner_kind_limit;
PH_HOT_DATA static ph_lock_t owner_lock;  /* creates the kind map and the leaves, opens their units */

#define OWNER_KIND_BIT 8
_Static_assert((((uintptr_t)2 << OWNER_KIND_BIT) - 1) == PH_OWNER_OPEN_MASK,
               "the open bits are the root entry's low bits");

/* Where a table's unit u has its open bit: bit b0 + u * bstep of entry
 * w[u * wstep]. */
typedef struct owner_units_s {
  _Atomic uintptr_t *w;
  size_t wstep;
  unsigned b0, bstep;
} owner_units_t;

PH_INLINE owner_units_t owner_leaf_units(size_t i)
{
  return (owner_units_t){ &owner_map_root[i], 0, 0, 1 };
}

PH_INLINE owner_units_t owner_kind_units(void)
{
  return (owner_units_t){ owner_map_root, 1, OWNER_KIND_BIT, 0 };
}

/* Reserves the kind map on first use.  Until it exists (or if it cannot),
 * owner_kind_limit is 0 and the fast paths ask the owner map. */
PH_STARTUP static void owner_kind_init(void)
{
  /* (owner_kind is read here without the lock: atomic, as its one store) */
  if (__atomic_load_n(&owner_kind_limit, __ATOMIC_ACQUIRE) != 0 ||
      __atomic_load_n(&owner_kind, __ATOMIC_RELAXED) == (uint8_t *)1)
    return;
  ph_lock(&owner_lock);
  if (owner_kind == NULL) {
    uint8_t *m = os_reserve_readonly(OWNER_KIND_ENTRIES);
    __atomic_store_n(&owner_kind, m != NULL ? m : (uint8_t *)1, __ATOMIC_RELAXED);  /* 1: tried and refused */
    if (m != NULL)
      __atomic_store_n(&owner_kind_limit, OWNER_KIND_ENTRIES, __ATOMIC_RELEASE);
  }
  ph_unlock(&owner_lock);
}

/* The leaf of root slot i, mapped (read-only) if it does not exist yet.
 * NULL if the OS refuses. */
PH_STARTUP static uintptr_t *owner_leaf_get(size_t i)
{
  uintptr_t *leaf = owner_root_leaf(i);

  if (leaf == NULL) {                     /* created once, under a lock: no loser to free */
    ph_lock(&owner_lock);
    leaf = owner_root_leaf(i);
    if (leaf == NULL) {
      leaf = os_reserve_readonly(OWNER_LEAF_BYTES);  /* never released */
      if (leaf != NULL)                   /* (a page: its low bits are free) */
        atomic_fetch_or_explicit(&owner_map_root[i], (uintptr_t)leaf, memory_order_release);
    }
    ph_unlock(&owner_lock);
  }
  return leaf;
}

PH_INLINE bool owner_unit_is_open(owner_units_t bits, size_t u)
{
  return (atomic_load_explicit(&bits.w[u * bits.wstep], memory_order_acquire) >>
          (bits.b0 + u * bits.bstep)) & 1u;
}

/* Makes bytes [from, to) of table (tsize bytes, from os_reserve_readonly)
 * writable, in whole units (or whole pages where a page is larger), and
 * records them in bits.  @return false if the OS refused a unit; the units
 * opened before it stay open. */
PH_HOT static bool owner_open(uint8_t *table, size_t tsize, owner_units_t bits, size_t from, size_t to)
{
  size_t u0 = from / OWNER_UNIT, u1 = (to - 1) / OWNER_UNIT, u;

  for (u = u0; u <= u1 && owner_unit_is_open(bits, u); u++)
    ;
  if (ph_likely(u > u1))
    return true;
  size_t step = os_page_size() > OWNER_UNIT ? os_page_size() : OWNER_UNIT;
  bool ok = true;
  ph_lock(&owner_lock);
  for (; u <= u1; u++) {
    if (owner_unit_is_open(bits, u))
      continue;
    size_t start = align_down(u * OWNER_UNIT, step);
    size_t len = tsize - start < step ? tsize - start : step;
    if (os_open(table + start, len) != 0) {
      ok = false;
      break;
    }
    for (size_t v = start / OWNER_UNIT; v * OWNER_UNIT < start + len; v++)
      atomic_fetch_or_explicit(&bits.w[v * bits.wstep], (uintptr_t)1 << (bits.b0 + v * bits.bstep),
                               memory_order_release);
  }
  ph_unlock(&owner_lock);
  return ok;
}

/* Makes every leaf entry and kind byte of granules [a, end) writable. */
PH_STARTUP static bool owner_range_open(uintptr_t a, uintptr_t end, bool has_kind)
{
  const uintptr_t leaf_mask = ((uintptr_t)1 << PH_OWNER_LEAF_BITS) - 1;

  while (a < end) {
    size_t i = a >> OWNER_SLOT_SHIFT;
    uintptr_t slot_end = (uintptr_t)(i + 1) << OWNER_SLOT_SHIFT;
    uintptr_t e = end < slot_end ? end : slot_end;
    uintptr_t g0 = a >> PH_GRANULE_SHIFT, g1 = (e - 1) >> PH_GRANULE_SHIFT;  /* inclusive */
    uintptr_t *leaf = owner_leaf_get(i);

    if (leaf == NULL ||
        !owner_open((uint8_t *)leaf, OWNER_LEAF_BYTES, owner_leaf_units(i),
                    (g0 & leaf_mask) * sizeof(uintptr_t), ((g1 & leaf_mask) + 1) * sizeof(uintptr_t)))
      return false;
    if (has_kind && !owner_open(owner_kind, OWNER_KIND_ENTRIES, owner_kind_units(), g0, g1 + 1))
      return false;
    a = e;
  }
  return true;
}

void owner_fork_lock(void)
{
  ph_lock(&owner_lock);
}

void owner_fork_unlock(void)
{
  ph_unlock(&owner_lock);
}

PH_HOT PH_STARTUP_SIZE bool owner_map_set(const void *base, size_t len, uintptr_t value, unsigned kind)
{
  uintptr_t a = (uintptr_t)base;
  uintptr_t end = a + len;
  const uintptr_t leaf_mask = ((uintptr_t)1 << PH_OWNER_LEAF_BITS) - 1;

  if (end < a || (end >> (OWNER_SLOT_SHIFT + PH_OWNER_ROOT_BITS)) != 0)
    return false;
  if (value == 0 && kind == PH_KIND_NONE) {
    /* Clearing: an entry that is already 0 may lie in a unit never opened,
     * so only what is set is written.  The kind first, then the entry. */
    bool has_kind = __atomic_load_n(&owner_kind_limit, __ATOMIC_ACQUIRE) != 0;
    for (; a < end; a += PH_GRANULE) {
      uintptr_t g = a >> PH_GRANULE_SHIFT;
      uintptr_t *leaf = owner_root_leaf(a >> OWNER_SLOT_SHIFT);
      if (has_kind && __atomic_load_n(&owner_kind[g], __ATOMIC_RELAXED) != PH_KIND_NONE)
        __atomic_store_n(&owner_kind[g], (uint8_t)PH_KIND_NONE, __ATOMIC_RELEASE);
      if (leaf != NULL && __atomic_load_n(&leaf[g & leaf_mask], __ATOMIC_RELAXED) != 0)
        __atomic_store_n(&leaf[g & leaf_mask], (uintptr_t)0, __ATOMIC_RELEASE);
    }
    return true;
  }
  owner_kind_init();
  bool has_kind = owner_kind_limit != 0;
  if (!owner_range_open(a, end, has_kind))
    return false;                        /* nothing written */
  for (; a < end; a += PH_GRANULE) {
    uintptr_t g = a >> PH_GRANULE_SHIFT;
    uintptr_t *leaf = owner_root_leaf(a >> OWNER_SLOT_SHIFT);
    /* set: the full entry first, then the kind */
    __atomic_store_n(&leaf[g & leaf_mask], value, __ATOMIC_RELEASE);
    if (has_kind)
      __atomic_store_n(&owner_kind[g], (uint8_t)kind, __ATOMIC_RELEASE);
  }
  return true;
}

bool owner_map_adopt(const void *base, size_t span, uintptr_t *leaves, size_t len, unsigned kind)
{
  size_t first = (uintptr_t)base >> OWNER_SLOT_SHIFT;
  size_t n = span >> OWNER_SLOT_SHIFT;
  bool ok = true;

  if (((uintptr_t)base | span) & (((uintptr_t)1 << OWNER_SLOT_SHIFT) - 1) || n == 0 ||
      first + n > ((size_t)1 << PH_OWNER_ROOT_BITS) || ((uintptr_t)leaves & PH_OWNER_OPEN_MASK))
    return false;
  ph_lock(&owner_lock);
  for (size_t i = first; i < first + n; i++)
    ok = ok && owner_root_leaf(i) == NULL;
  for (size_t i = first; ok && i < first + n; i++) {
    /* the region's leaves are writable shared memory: every unit is open
     * (the leaf and its open bits in one store: a reader sees both or none) */
    atomic_fetch_or_explicit(&owner_map_root[i],
                             (uintptr_t)(leaves + ((i - first) << PH_OWNER_LEAF_BITS)) | 0xff,
                             memory_order_release);
  }
  ph_unlock(&owner_lock);
  if (!ok)
    return false;
  owner_kind_init();
  if (owner_kind_limit == 0)
    return true;                         /* no kind map: every pointer asks the owner map */
  uintptr_t g0 = (uintptr_t)base >> PH_GRANULE_SHIFT, g1 = g0 + (len >> PH_GRANULE_SHIFT);
  if (!owner_open(owner_kind, OWNER_KIND_ENTRIES, owner_kind_units(), g0, g1))
    return false;
  for (uintptr_t g = g0; g < g1; g++)
    __atomic_store_n(&owner_kind[g], (uint8_t)kind, __ATOMIC_RELEASE);
  return true;
}
