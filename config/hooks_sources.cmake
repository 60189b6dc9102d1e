# hooks_sources.cmake -- the hooks/ and config/ sources of the archive.
# Included by config/sources.cmake; paths are relative to the project root.
# Main entry: PINHEAP_HOOKS_SOURCES (appended, so other areas can add theirs).
list(APPEND PINHEAP_HOOKS_SOURCES
  config/params.c
  config/params_info.c
  config/params_files.c
  config/params_shm.c
  hooks/decide/probe.c
  hooks/decide/decision.c
  hooks/events/events.c
  hooks/events/events_calls.c
  hooks/events/files.c
  hooks/intercept/peers.c
  hooks/intercept/reloc.c
  hooks/intercept/reloc_elf.c
  hooks/intercept/reloc_loads.c
  hooks/decide/copies.c
)
