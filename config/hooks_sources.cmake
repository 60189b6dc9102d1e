# hooks_sources.cmake -- the hooks/ and config/ sources of the archive.
# Included by config/sources.cmake; paths are relative to the project root.
# Main entry: PINHEAP_HOOKS_SOURCES (appended, so other areas can add theirs).
list(APPEND PINHEAP_HOOKS_SOURCES
  config/params.c
  config/params_info.c
  hooks/probe.c
  hooks/decision.c
  hooks/events.c
  hooks/events_calls.c
  hooks/files.c
  hooks/peers.c
  hooks/reloc.c
  hooks/reloc_elf.c
  hooks/reloc_loads.c
  hooks/copies.c
)
