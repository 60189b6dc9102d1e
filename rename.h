/*
 * rename.h -- the name shift.  The one table of pinheap's global names.
 *
 * Allocator code is written with the classic names (malloc, free,
 * create_mspace, ...).  Every translation unit of the archive includes this
 * file first, so each of those names becomes <PINHEAP_PREFIX><name>, e.g.
 * opal_memory_ptmalloc2_malloc when a runtime configures
 * -DPINHEAP_PREFIX=opal_memory_ptmalloc2_.  The archive therefore never
 * defines glibc's names and can sit in any program beside glibc's malloc.
 *
 * Section 2 shifts the archive's internal cross-file names the same way, so
 * that `nm libpinheap.a` shows nothing but prefixed globals (test/nm_prefix.sh).
 * Anything that is not listed here must be static.
 *
 * The only deliberate exceptions are the unprefixed replacement entry points
 * of hooks/ (the allow-list of test/nm_prefix.sh); those files do not
 * include this header.
 */
#ifndef PINHEAP_RENAME_H
#define PINHEAP_RENAME_H

#include "pinheap_config.h"

#define PINHEAP_CAT_(a, b) a##b
#define PINHEAP_CAT(a, b) PINHEAP_CAT_(a, b)
#define PINHEAP_NAME(n) PINHEAP_CAT(PINHEAP_PREFIX, n)

/* ---- 1. public allocator API, classic names ---------------------------- */
/* hooks/replace.c defines the unprefixed entry points itself and calls
 * pinheap's with PINHEAP_NAME(): it sets PINHEAP_NO_CLASSIC_RENAME. */
#ifndef PINHEAP_NO_CLASSIC_RENAME
#define malloc                  PINHEAP_NAME(malloc)
#define free                    PINHEAP_NAME(free)
#define calloc                  PINHEAP_NAME(calloc)
#define realloc                 PINHEAP_NAME(realloc)
#define reallocarray            PINHEAP_NAME(reallocarray)
#define memalign                PINHEAP_NAME(memalign)
#define posix_memalign          PINHEAP_NAME(posix_memalign)
#define aligned_alloc           PINHEAP_NAME(aligned_alloc)
#define valloc                  PINHEAP_NAME(valloc)
#define pvalloc                 PINHEAP_NAME(pvalloc)
#define malloc_usable_size      PINHEAP_NAME(malloc_usable_size)
#define mallopt                 PINHEAP_NAME(mallopt)
#define mallinfo2               PINHEAP_NAME(mallinfo2)
#define malloc_stats            PINHEAP_NAME(malloc_stats)
#define malloc_trim             PINHEAP_NAME(malloc_trim)
#define create_mspace           PINHEAP_NAME(create_mspace)
#define create_mspace_with_base PINHEAP_NAME(create_mspace_with_base)
#define destroy_mspace          PINHEAP_NAME(destroy_mspace)
#define mspace_malloc           PINHEAP_NAME(mspace_malloc)
#define mspace_free             PINHEAP_NAME(mspace_free)
#define mspace_calloc           PINHEAP_NAME(mspace_calloc)
#define mspace_realloc          PINHEAP_NAME(mspace_realloc)
#define mspace_memalign         PINHEAP_NAME(mspace_memalign)
#define mspace_usable_size      PINHEAP_NAME(mspace_usable_size)
#define mspace_trim             PINHEAP_NAME(mspace_trim)
#define mspace_mallinfo         PINHEAP_NAME(mspace_mallinfo)
#define mspace_check            PINHEAP_NAME(mspace_check)
#define malloc_check            PINHEAP_NAME(malloc_check)
#define malloc_prefork_lock     PINHEAP_NAME(malloc_prefork_lock)
#define malloc_postfork_unlock  PINHEAP_NAME(malloc_postfork_unlock)
#endif /* PINHEAP_NO_CLASSIC_RENAME */

/* ---- 2. internal cross-file names --------------------------------------- */
#define os_page_size            PINHEAP_NAME(os_page_size)
#define os_map_aligned          PINHEAP_NAME(os_map_aligned)
#define os_map_reserved         PINHEAP_NAME(os_map_reserved)
#define os_open                 PINHEAP_NAME(os_open)
#define os_release              PINHEAP_NAME(os_release)
#define os_decommit             PINHEAP_NAME(os_decommit)
#define os_remap                PINHEAP_NAME(os_remap)
#define os_set_release_listener PINHEAP_NAME(os_set_release_listener)
#define os_stats_get            PINHEAP_NAME(os_stats_get)
#define ph_fatal                PINHEAP_NAME(fatal)
#define ph_warn                 PINHEAP_NAME(warn)
#define ph_write_str            PINHEAP_NAME(write_str)
#define ph_fmt_hex              PINHEAP_NAME(fmt_hex)
#define ph_fmt_dec              PINHEAP_NAME(fmt_dec)
#define owner_map_set           PINHEAP_NAME(owner_map_set)
#define owner_map_root          PINHEAP_NAME(owner_map_root)
#define owner_kind              PINHEAP_NAME(owner_kind)
#define owner_kind_limit        PINHEAP_NAME(owner_kind_limit)
#define owner_fork_lock         PINHEAP_NAME(owner_fork_lock)
#define owner_fork_unlock       PINHEAP_NAME(owner_fork_unlock)
#define os_reserve_meta         PINHEAP_NAME(os_reserve_meta)
#define os_reserve_readonly     PINHEAP_NAME(os_reserve_readonly)
#define ph_lock_slow            PINHEAP_NAME(lock_slow)
#define heap_default            PINHEAP_NAME(heap_default)
#define mstate_check            PINHEAP_NAME(mstate_check)
#define mstate_check_add        PINHEAP_NAME(mstate_check_add)
#define mparams                 PINHEAP_NAME(mparams)
#define heap_owns               PINHEAP_NAME(heap_owns)
#define ms_create               PINHEAP_NAME(ms_create)
#define ms_destroy              PINHEAP_NAME(ms_destroy)
#define ms_malloc               PINHEAP_NAME(ms_malloc)
#define ms_calloc               PINHEAP_NAME(ms_calloc)
#define ms_memalign             PINHEAP_NAME(ms_memalign)
#define ms_realloc              PINHEAP_NAME(ms_realloc)
#define ms_free_owned           PINHEAP_NAME(ms_free_owned)
#define ms_trim                 PINHEAP_NAME(ms_trim)
#define ms_info                 PINHEAP_NAME(ms_info)
#define mem_usable              PINHEAP_NAME(mem_usable)
#define ms_alloc_batch          PINHEAP_NAME(ms_alloc_batch)
#define ms_remote_push          PINHEAP_NAME(ms_remote_push)
#define ms_defer_bundle         PINHEAP_NAME(ms_defer_bundle)
#define ms_lock_all             PINHEAP_NAME(ms_lock_all)
#define ms_unlock_all           PINHEAP_NAME(ms_unlock_all)
#define arena_for_each          PINHEAP_NAME(arena_for_each)
#define tcache_check_mine       PINHEAP_NAME(tcache_check_mine)
#define heap_debug_check        PINHEAP_NAME(heap_debug_check)
#define chunk_free_key          PINHEAP_NAME(chunk_free_key)
#define tcache_tls              PINHEAP_NAME(tcache_tls)
#define front_malloc_slow       PINHEAP_NAME(front_malloc_slow)
#define front_free_full         PINHEAP_NAME(front_free_full)
#define front_malloc_corrupt    PINHEAP_NAME(front_malloc_corrupt)
#define front_free_slow         PINHEAP_NAME(front_free_slow)
#define front_arena             PINHEAP_NAME(front_arena)
#define mem_source_os           PINHEAP_NAME(mem_source_os)
#define mem_source_region       PINHEAP_NAME(mem_source_region)
#define ms_init                 PINHEAP_NAME(ms_init)
#define front_init              PINHEAP_NAME(front_init)
#define ms_register             PINHEAP_NAME(ms_register)
#define ms_unregister           PINHEAP_NAME(ms_unregister)
#define arena_init              PINHEAP_NAME(arena_init)
#define arena_max_set           PINHEAP_NAME(arena_max_set)
#define arena_pick              PINHEAP_NAME(arena_pick)
#define binmap_next             PINHEAP_NAME(binmap_next)
#define bin_insert              PINHEAP_NAME(bin_insert)
#define dv_replace              PINHEAP_NAME(dv_replace)
#define dv_take                 PINHEAP_NAME(dv_take)
#define dv_flush                PINHEAP_NAME(dv_flush)
#define now_ms                  PINHEAP_NAME(now_ms)
#define seg_format              PINHEAP_NAME(seg_format)
#define ms_grow_in_place        PINHEAP_NAME(ms_grow_in_place)
#define ms_grow                 PINHEAP_NAME(ms_grow)
#define ms_trim_top             PINHEAP_NAME(ms_trim_top)
#define ms_trim_decay           PINHEAP_NAME(ms_trim_decay)
#define seg_take_out            PINHEAP_NAME(seg_take_out)
#define ms_idle_collect         PINHEAP_NAME(ms_idle_collect)
#define huge_total              PINHEAP_NAME(huge_total)
#define huge_cache_fork_lock    PINHEAP_NAME(huge_cache_fork_lock)
#define huge_cache_fork_unlock  PINHEAP_NAME(huge_cache_fork_unlock)
#define huge_cache_decay        PINHEAP_NAME(huge_cache_decay)
#define huge_alloc              PINHEAP_NAME(huge_alloc)
#define huge_check              PINHEAP_NAME(huge_check)
#define huge_free               PINHEAP_NAME(huge_free)
#define huge_move_copy          PINHEAP_NAME(huge_move_copy)
#define ms_alloc_chunk          PINHEAP_NAME(ms_alloc_chunk)
#define ms_free_chunk           PINHEAP_NAME(ms_free_chunk)
#define ms_free_mem             PINHEAP_NAME(ms_free_mem)
#define ms_free_locked          PINHEAP_NAME(ms_free_locked)
#define ms_drain_remote         PINHEAP_NAME(ms_drain_remote)
#define ms_fast_consolidate     PINHEAP_NAME(ms_fast_consolidate)
#define tcache_init             PINHEAP_NAME(tcache_init)
#define tc_pool_fork_lock       PINHEAP_NAME(tc_pool_fork_lock)
#define tc_pool_fork_unlock     PINHEAP_NAME(tc_pool_fork_unlock)
#define tcache_flush_mine       PINHEAP_NAME(tcache_flush_mine)
#define dispatch_table          PINHEAP_NAME(dispatch_table)
#define dispatch_decide         PINHEAP_NAME(dispatch_decide)
#define dispatch_state          PINHEAP_NAME(dispatch_state)
#define dispatch_preloaded      PINHEAP_NAME(dispatch_preloaded)
#define dispatch_libc           PINHEAP_NAME(dispatch_libc)
#define dispatch_libc_reallocarray PINHEAP_NAME(dispatch_libc_reallocarray)
#define release_dispatch        PINHEAP_NAME(release_dispatch)
#define release_init            PINHEAP_NAME(release_init)
#define replace_self            PINHEAP_NAME(replace_self)
#define replace_own_malloc      PINHEAP_NAME(replace_own_malloc)
#define replace_own_free        PINHEAP_NAME(replace_own_free)
#define replace_own_munmap      PINHEAP_NAME(replace_own_munmap)
#define selftest_run            PINHEAP_NAME(selftest_run)
#define reloc_install           PINHEAP_NAME(reloc_install)
#define reloc_uninstall         PINHEAP_NAME(reloc_uninstall)
#define reloc_query             PINHEAP_NAME(reloc_query)
#define reloc_lookup_slot       PINHEAP_NAME(reloc_lookup_slot)
#define reloc_lookup_slot_addr  PINHEAP_NAME(reloc_lookup_slot_addr)
#define reloc_stats_get         PINHEAP_NAME(reloc_stats_get)

/* ---- 3. hooks/ and config/ names --------------------------------------- */
/* (decision matrix, parameters, driver probe; kept in this section) */
#define params_get                  PINHEAP_NAME(params_get)
#define params_eval                 PINHEAP_NAME(params_eval)
#define param_desc_get              PINHEAP_NAME(param_desc_get)
#define param_source_name           PINHEAP_NAME(param_source_name)
#define param_value_name            PINHEAP_NAME(param_value_name)
#define probe_run                   PINHEAP_NAME(probe_run)
#define decision_make               PINHEAP_NAME(decision_make)
#define decision_needs_probe        PINHEAP_NAME(decision_needs_probe)
#define decision_inputs_from_params PINHEAP_NAME(decision_inputs_from_params)
#define decision_run                PINHEAP_NAME(decision_run)
#define decision_reason_name        PINHEAP_NAME(decision_reason_name)

/* ---- end of section 3 --------------------------------------------------- */

#endif /* PINHEAP_RENAME_H */
