/*
 * copies.c -- one copy of pinheap per process.  A runtime can carry a
 * second copy without knowing: the same archive linked into two of its
 * libraries, or another runtime's copy under its own prefix.  Two copies
 * that each decide, install and patch take the process's malloc from each
 * other (blocks of one freed by the other's free end in glibc's
 * munmap_chunk() abort), point each other's dlopen at their own wrapper
 * (a dlopen then recurses until the stack ends) and split the memory
 * events between two chains.  This file finds the other copies before
 * this one does anything, and makes one of them serve.  Main entry point:
 * copies_start(), run once by the first of dispatch_decide() (through
 * copies_table()) and the forwarding checks of the public API
 * (copies_serving()); a thread that finds it running waits.
 *
 * Finding each other.  Each copy carries a record (copies_record_t) and an
 * ELF note (owner "pinheap", type COPIES_NOTE_TYPE) whose descriptor holds
 * the record's offset from itself.  The linker gathers notes into a
 * PT_NOTE segment of whatever object the archive is linked into -- a
 * shared library, a dlopen'ed plug-in, the preload shim, the program
 * itself -- and dl_iterate_phdr lists every object with its segments, so a
 * copy is found with no symbol (a program's dynamic symbol table holds
 * none of its data unless a library refers to it), no dlsym and no
 * allocation.  Copies whose records see another glibc (another dlmopen
 * namespace) live in another world and are left out; so are records
 * without the replacement layer (the allocator's unit tests link only
 * pinheap_core).
 *
 * Who serves.  The copy that comes first in the list of loaded objects
 * (load order: the program, preloaded objects, their dependencies breadth
 * first, then each dlopen'ed object), whatever order the copies start in.
 * That is the order of symbol lookup for everything loaded at start-up,
 * and it has to be: with one prefix the two copies export the same names
 * (pinheap_free, pinheap_set_event_handler, ...), and the dynamic linker
 * binds every call of them -- a runtime's, and each copy's own calls from
 * one file to another (realloc's call of free, installation's of
 * set_event_handler) -- to the first definition.  Only the first copy's
 * code therefore sees its own API.  A copy loaded later never comes first:
 * a copy that started serving keeps serving.  A copy may start before the
 * first one has (constructors run in dependency order, not load order):
 * it stands down all the same, and the first copy, told of it
 * (copies_follow), settles its own place then; its record's pointers are
 * valid from the moment ld.so relocated it.
 *
 * What the copy that stands down does.
 *  - Its decision is not taken and nothing is installed or patched
 *    (install_run() stops at copies_stand_by()): its dispatch table
 *    forwards the unprefixed malloc family to the serving copy's functions
 *    of the same names, so whatever calls them -- a pointer captured from
 *    its symbol table, a relocation the serving copy's patcher did not
 *    rewrite -- reaches the allocator that serves the process.
 *  - Its public API forwards to the serving copy's (copies_api_t): set and
 *    unset event handlers, register and unregister release listeners,
 *    open, support_level, support_text, enabled, check_leave_pinned, so a
 *    runtime linked to it hears every release the serving copy sees.
 *  - Its own heap (its prefixed malloc keeps working, on its allocator) is
 *    reported to the serving copy's chain: its OS layer's release and map
 *    listeners call the serving copy's VM_UNMAPPED and VM_MAPPED events.
 *  - decision_text and install_text say that it stood down and where.
 * At installation it pins the serving copy's object (RTLD_NODELETE): its
 * forwarding must never call into unmapped code.
 *
 * What the serving copy does: what it does alone; it is told of each copy
 * that stands down (copies_follow) and says so in one warning line and in
 * its decision, install and support texts.  The copy standing down says it
 * in one warning line too: each names both objects, both prefixes and the
 * fix.
 *
 * Refused (one fatal line naming both objects, exit status 1, before main
 * for copies loaded at start-up): a first copy whose record this copy
 * cannot read -- another version of the note or the record, another event
 * layout, a malloc family without one of the names -- as nothing could be
 * forwarded to it.
 *
 * One prefix, the first copy dlopen'ed with RTLD_LOCAL and a later one
 * made global (RTLD_GLOBAL): the later copy's definitions are then found
 * first by dlsym on the program's handle, but the first copy's own
 * references keep binding to itself (glibc 2.36, checked with
 * LD_DEBUG=bindings: its lazily bound calls resolved after the load still
 * reach its own definitions), so this layout is served like the others.
 */
#include "hooks/decide/dispatch.h"
#include "hooks/events/events.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "allocator/heap/chunk.h"     /* ph_lock */
#include "pinheap.h"
#include "allocator/base/startup.h"

/* The note's type: the version of the record's layout.  The layout of
 * every type the record points to is part of it (pinheap_event_t,
 * replace_symbol_t, the API's signatures, dispatch_table_t's functions):
 * any change takes a new type. */
#define COPIES_NOTE_TYPE 1
#define COPIES_MAGIC 0x70686370u      /* "phcp" */

/* A record's state, written by its own copy only. */
enum {
  COPIES_IDLE = 0,      /* not started */
  COPIES_SERVING = 1,   /* alone, or the first copy: serves */
  COPIES_STOOD_DOWN = 2 /* forwards to the first copy */
};

typedef struct copies_record_s {
  uint32_t magic;                   /* COPIES_MAGIC */
  uint32_t size;                    /* sizeof(copies_record_t) */
  uint32_t event_size;              /* sizeof(pinheap_event_t) */
  int state;                        /* COPIES_* */
  const char *prefix;               /* "pinheap_" */
  const char *version;              /* "0.1.0" (for a later version's messages) */
  const void *libc;                 /* glibc's __libc_free as this copy binds it */
  copies_api_t api;                 /* the public API: this copy's own functions */
  const replace_symbol_t *symbols;  /* replace.c's unprefixed functions */
  const unsigned *symbols_count;
  void (*vm_unmapped)(void *addr, size_t len, int source);
  void (*vm_mapped)(void *addr, size_t len, int source);
  /* a copy behind this one stood down in its favour */
  void (*follow)(const char *object, const char *prefix);
} copies_record_t;

/* ======================================================================= */
/*  this copy's record and note                                             */
/* ======================================================================= */

/* The replacement layer's part of the API (dispatch.c, release.c,
 * selftest.c, install.c, events.c, feeds.c, fabric.c), by the hidden
 * aliases of this copy's definitions (COPIES_SELF_ALIAS, dispatch.h): the
 * record binds at link time, no symbol lookup at load.  Weak, for the
 * builds without that layer (the allocator's unit tests link pinheap_core),
 * whose record is incomplete and left out by every copy. */
#define COPIES_API(X)                                                              \
  X(set_event_handler) X(unset_event_handler) X(register_release) X(unregister_release) \
  X(open) X(support_level) X(support_text) X(enabled) X(check_leave_pinned)           \
  X(decision_text) X(install_text) X(consumers_text) X(fabric_monitor_import)
#define COPIES_WEAK(name) \
  extern __typeof__(PINHEAP_NAME(name)) COPIES_SELF(name) __attribute__((weak, visibility("hidden")));
COPIES_API(COPIES_WEAK)
#undef COPIES_WEAK

extern void __libc_free(void *);

static void copies_follow(const char *object, const char *prefix);

/* Hidden, but global and named for the note below (a static could be
 * renamed by LTO); "used": the note is its only reference the compiler
 * sees. */
PH_HIDDEN __attribute__((used)) copies_record_t copies_record = {
  .magic = COPIES_MAGIC,
  .size = sizeof(copies_record_t),
  .event_size = sizeof(pinheap_event_t),
  .state = COPIES_IDLE,
  .prefix = PINHEAP_PREFIX_STRING,
  .version = PINHEAP_VERSION_STRING,
  .libc = (const void *)__libc_free,
#define COPIES_ENTRY(name) .name = COPIES_SELF(name),
  .api = { COPIES_API(COPIES_ENTRY) },
#undef COPIES_ENTRY
  .symbols = replace_symbols,
  .symbols_count = &replace_symbols_count,
  .vm_unmapped = events_vm_unmapped,
  .vm_mapped = events_vm_mapped,
  .follow = copies_follow,
};

/* The note: namesz, descsz, type, "pinheap\0", then the record's offset
 * from the descriptor (resolved by the static linker: no relocation at
 * load, the segment stays read-only). */
__asm__(".pushsection .note.pinheap,\"a\",%note\n"
        "\t.balign 4\n"
        "\t.long 8, 8, " COPIES_STR(COPIES_NOTE_TYPE) "\n"
        "\t.asciz \"pinheap\"\n"
        "1:\t.quad " COPIES_STR(copies_record) " - 1b\n"
        "\t.popsection\n");

/* ======================================================================= */
/*  what this copy knows of the others                                      */
/* ======================================================================= */

/* Only the path of a copy alone is in .text.startup (PH_STARTUP: the scan,
 * taking its place, the checks of copies_serving); what runs only with
 * another copy in the process is plain, noinline code, out of the window
 * of text every process keeps resident (allocator/base/startup.h). */

#define COPIES_TEXT_MAX 2048

/* Fork: held for a count and a line of text, for the composed text, and
 * around a dlopen(RTLD_NOLOAD) that pins the serving copy; not taken before
 * fork (ld.so's lock inside).  A child forked meanwhile frees it
 * (copies_fork_child): at worst a note or text cut short, and the pin is
 * tried again. */
PH_HOT_DATA static ph_lock_t copies_lock;
PH_HOT_DATA static int copies_started;          /* 0 no, 1 running, 2 done (release) */
/* objects by their dlpi_name ("": the program; NULL: not listed) */
PH_HOT_DATA static const char *copies_self_path;
/* stood down: the serving copy's record and object; NULL while serving */
PH_HOT_DATA static const copies_record_t *copies_to;
PH_HOT_DATA static const char *copies_to_path;
PH_HOT_DATA static int copies_pinned;           /* its object pinned (copies_stand_by) */
PH_COLD_BSS static dispatch_table_t copies_forward;  /* the serving copy's malloc family */
/* This copy's warning line, and the same as a sentence of its texts:
 * written once, before copies_said is set (release), read-only after. */
PH_COLD_BSS static char copies_said_text[PH_LOG_LINE_MAX];
PH_COLD_BSS static char copies_note_text[PH_LOG_LINE_MAX + 4];
PH_HOT_DATA static int copies_said;
/* serving: how many copies stood down in its favour (the first is named
 * in its texts, each in a warning line) */
PH_HOT_DATA static unsigned copies_followers;
/* the texts of copies_text(), per kind: two buffers, the one published
 * and the next (the base each was composed from, to see it change) */
PH_COLD_BSS static char copies_texts[2][2][COPIES_TEXT_MAX];
PH_COLD_BSS static const char *copies_text_base[2][2];
PH_COLD_BSS static int copies_text_shown[2];    /* 1 + the index published, 0: none */

/* Appends the NULL-terminated list of strings to buf (size bytes, holding
 * a string), cut to fit. */
__attribute__((sentinel)) static void copies_cat(char *buf, size_t size, ...)
{
  va_list ap;
  va_start(ap, size);
  for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *))
    ph_str_add(buf, size, s);
  va_end(ap);
}

/* Keeps line as this copy's account of the copies (once: at its start
 * when it stands down, under copies_lock when it is told of a copy that
 * did): the warning line, and "More ...; ... library. " for the texts. */
static void copies_keep(const char *line)
{
  copies_cat(copies_said_text, sizeof(copies_said_text), line, NULL);
  copies_cat(copies_note_text, sizeof(copies_note_text), line, ". ", NULL);
  if (copies_note_text[0] >= 'a' && copies_note_text[0] <= 'z')
    copies_note_text[0] = (char)(copies_note_text[0] - 'a' + 'A');
  __atomic_store_n(&copies_said, 1, __ATOMIC_RELEASE);
}

/* An object's name for messages: its path, or the program's. */
static const char *copies_object_name(const char *path)
{
  if (path == NULL)
    return "an object dl_iterate_phdr does not list";
  return path[0] != '\0' ? path : program_invocation_name;
}

/* ======================================================================= */
/*  the scan                                                                */
/* ======================================================================= */

typedef struct copies_scan_s {
  const copies_record_t *first;    /* the first copy before this one that counts */
  const char *first_path;          /* its object */
  unsigned first_type;             /* its note's type (another: unreadable) */
  const char *self_path;           /* this copy's object, once seen */
} copies_scan_t;

/* The record a pinheap note points to (type 1, an 8-byte offset). */
PH_STARTUP static const void *copies_note_target(const char *desc, uint32_t descsz, uint32_t type)
{
  int64_t off;
  if (type != COPIES_NOTE_TYPE || descsz != sizeof(off))
    return NULL;
  memcpy(&off, desc, sizeof(off));
  return desc + off;
}

/* Another copy's note, before this copy's: noted when it is the first that
 * counts -- a record of this namespace with the replacement layer, or one
 * this copy cannot read (to be refused).  A record is read only inside a
 * writable segment of its object. */
PH_NOINLINE static void copies_scan_other(copies_scan_t *s, const struct dl_phdr_info *info,
                                          const copies_record_t *rec, uint32_t type)
{
  int inside = 0;
  for (ElfW(Half) k = 0; rec != NULL && k < info->dlpi_phnum; k++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, at = (uintptr_t)rec;
    inside |= ph->p_type == PT_LOAD && (ph->p_flags & PF_W) && at >= lo &&
              at + sizeof(*rec) <= lo + ph->p_memsz;
  }
  if (s->first != NULL || s->first_type != 0)
    return;
  if (inside && rec->magic == COPIES_MAGIC && rec->size == sizeof(*rec) &&
      (rec->libc != copies_record.libc || rec->symbols == NULL || rec->api.open == NULL))
    return;                    /* another namespace's, or without the replacement layer */
  s->first = inside ? rec : NULL;
  s->first_type = type;
  s->first_path = info->dlpi_name != NULL ? info->dlpi_name : "";
}

/* Walks the objects in load order up to this copy's own; each object's
 * notes are searched for one of owner "pinheap". */
PH_STARTUP static int copies_scan_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
  copies_scan_t *s = arg;
  (void)size;
  for (ElfW(Half) k = 0; k < info->dlpi_phnum; k++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
    if (ph->p_type != PT_NOTE)
      continue;
    size_t align = ph->p_align == 8 ? 8 : 4;
    const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
    while (p + 12 <= end) {
      uint32_t hdr[3];         /* namesz, descsz, type */
      memcpy(hdr, p, sizeof(hdr));
      const char *desc = p + 12 + ((hdr[0] + align - 1) & ~(align - 1));
      uint64_t owner, want;     /* the owner's 8 bytes, compared as one word */
      memcpy(&want, "pinheap", 8);
      if (hdr[0] == 8 && desc + hdr[1] <= end && (memcpy(&owner, p + 12, 8), owner == want)) {
        const void *rec = copies_note_target(desc, hdr[1], hdr[2]);
        if (rec == &copies_record) {
          s->self_path = info->dlpi_name != NULL ? info->dlpi_name : "";
          return 1;            /* the copies after this one come later */
        }
        copies_scan_other(s, info, rec, hdr[2]);
        return 0;
      }
      p = desc + ((hdr[1] + align - 1) & ~(align - 1));
    }
  }
  return 0;
}

/* ======================================================================= */
/*  standing down, refusing, following                                      */
/* ======================================================================= */

/* The malloc family, by name, and where each goes in a dispatch table. */
static const struct {
  const char *name;
  size_t at;
} copies_family[] = {
#define COPIES_ROW(name, ret, params, event, entry) { #name, offsetof(dispatch_table_t, fn_##name) },
  PH_INTERCEPTED_FAMILY(COPIES_ROW)   /* symbols.h */
#undef COPIES_ROW
};
#define COPIES_FAMILY (sizeof(copies_family) / sizeof(copies_family[0]))

/* Fills copies_forward with the serving copy's functions.  @return 0, or
 * -1 when its table lacks one of them. */
static int copies_forward_fill(const copies_record_t *to)
{
  for (size_t f = 0; f < COPIES_FAMILY; f++) {
    void *fn = NULL;
    for (unsigned i = 0; i < *to->symbols_count && fn == NULL; i++)
      if (to->symbols[i].event == 0 && strcmp(to->symbols[i].name, copies_family[f].name) == 0)
        fn = to->symbols[i].self;
    if (fn == NULL)
      return -1;
    memcpy((char *)&copies_forward + copies_family[f].at, &fn, sizeof(fn));
  }
  return 0;
}

/* Why the first copy's record cannot be served from, or NULL. */
static const char *copies_unreadable(const copies_scan_t *s)
{
  const copies_record_t *r = s->first;
  if (s->first_type != COPIES_NOTE_TYPE)
    return "its record is of another version (note type not 1)";
  if (r == NULL || r->magic != COPIES_MAGIC || r->size != sizeof(copies_record_t))
    return "its record is of another layout";
  if (r->event_size != sizeof(pinheap_event_t))
    return "its memory events are of another layout";
  if (copies_forward_fill(r) != 0)
    return "its malloc family lacks a function this copy forwards";
  return NULL;
}

PH_NORETURN static void copies_refuse(const copies_scan_t *s, const char *why)
{
  char line[PH_LOG_LINE_MAX] = "";
  copies_cat(line, sizeof(line), "copies of pinheap in this process that cannot share: this "
             "one, in ", copies_object_name(s->self_path), " (prefix ", PINHEAP_PREFIX_STRING,
             "), and the one in ", copies_object_name(s->first_path), ": ", why,
             "; link libpinheap.a into exactly one library", NULL);
  ph_log(PH_LOG_FATAL, "%s", line);
  _exit(1);
}

/* The OS layer's releases and mappings of this copy's own heap, reported
 * to the serving copy's chain. */
static void copies_forward_release(void *addr, size_t len, void *ctx)
{
  (void)ctx;
  copies_to->vm_unmapped(addr, len, PINHEAP_EVENT_SOURCE_ALLOCATOR);
}

static void copies_forward_map(void *addr, size_t len, void *ctx)
{
  (void)ctx;
  copies_to->vm_mapped(addr, len, PINHEAP_EVENT_SOURCE_ALLOCATOR);
}

/* Another copy comes first: refuses, or stands down in its favour and
 * tells it. */
PH_NOINLINE static void copies_stand_down(const copies_scan_t *s)
{
  char line[PH_LOG_LINE_MAX] = "";

  const char *why = copies_unreadable(s);
  if (why != NULL)
    copies_refuse(s, why);
  copies_cat(line, sizeof(line), "more than one copy of pinheap in this process: this one, in ",
             copies_object_name(s->self_path), " (prefix ", PINHEAP_PREFIX_STRING, "), stands "
             "down and forwards to the one in ", copies_object_name(s->first_path), " (prefix ",
             s->first->prefix, "), which serves malloc and the memory events; link "
             "libpinheap.a into exactly one library", NULL);
  copies_to_path = s->first_path;
  os_set_release_listener(copies_forward_release, NULL);
  os_set_map_listener(copies_forward_map, NULL);
  __atomic_store_n(&copies_record.state, COPIES_STOOD_DOWN, __ATOMIC_RELEASE);
  copies_keep(line);
  __atomic_store_n(&copies_to, s->first, __ATOMIC_RELEASE);
  ph_warn(line, NULL);
  s->first->follow(copies_object_name(s->self_path), PINHEAP_PREFIX_STRING);
}

/* Another thread is starting this copy: waits for it. */
PH_NOINLINE static void copies_wait(void)
{
  while (__atomic_load_n(&copies_started, __ATOMIC_ACQUIRE) != 2)
    sched_yield();
}

/* Finds the other copies and takes this copy's place: serving, or stood
 * down (the first copy is told), or refused.  Once; never allocates. */
PH_STARTUP static void copies_start(void)
{
  copies_scan_t s = { NULL, NULL, 0, NULL };
  int idle = 0;

  if (ph_likely(__atomic_load_n(&copies_started, __ATOMIC_ACQUIRE) == 2))
    return;
  if (!__atomic_compare_exchange_n(&copies_started, &idle, 1, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    copies_wait();
    return;
  }
  /* a build without the replacement layer (pinheap_core) is left alone */
  if (copies_record.symbols != NULL && copies_record.api.open != NULL)
    dl_iterate_phdr(copies_scan_cb, &s);
  copies_self_path = s.self_path;
  /* this copy's object not listed: alone, as far as it can know */
  if (s.self_path != NULL && (s.first != NULL || s.first_type != 0))
    copies_stand_down(&s);
  else
    __atomic_store_n(&copies_record.state, COPIES_SERVING, __ATOMIC_RELEASE);
  __atomic_store_n(&copies_started, 2, __ATOMIC_RELEASE);
}

/* A copy behind this one stood down in its favour: this copy takes its own
 * place first (the first copy: serving), then says it. */
static void copies_follow(const char *object, const char *prefix)
{
  char line[PH_LOG_LINE_MAX] = "";

  copies_start();
  copies_cat(line, sizeof(line), "more than one copy of pinheap in this process: this one, in ",
             copies_object_name(copies_self_path), " (prefix ", PINHEAP_PREFIX_STRING, "), serves "
             "malloc and the memory events; the one in ", object, " (prefix ", prefix, ") stands "
             "down and forwards to it; link libpinheap.a into exactly one library", NULL);
  ph_lock(&copies_lock);
  if (copies_followers++ == 0)
    copies_keep(line);
  ph_unlock(&copies_lock);
  ph_warn(line, NULL);
}

/* ======================================================================= */
/*  the rest of the hooks' view                                             */
/* ======================================================================= */

PH_HOT const copies_api_t *copies_serving(void)
{
  copies_start();
  const copies_record_t *to = __atomic_load_n(&copies_to, __ATOMIC_ACQUIRE);
  return to != NULL ? &to->api : NULL;
}

PH_STARTUP const dispatch_table_t *copies_table(void)
{
  return copies_serving() != NULL ? &copies_forward : NULL;
}

/* The serving copy's object stays mapped while this one forwards to it:
 * made no-delete, as RTLD_NODELETE would have (the program needs none). */
PH_NOINLINE static void copies_pin(void)
{
  ph_lock(&copies_lock);
  if (!copies_pinned && copies_to_path[0] != '\0') {
    void *h = dlopen(copies_to_path, RTLD_NOLOAD | RTLD_NODELETE | RTLD_LAZY);
    if (h != NULL)
      dlclose(h);             /* the reference just taken; NODELETE stays */
    else
      ph_warn("pinheap stood down in favour of another copy but could not pin its object (",
              copies_to_path, "): a dlclose of it would leave this copy forwarding into "
              "unmapped code", NULL);
  }
  __atomic_store_n(&copies_pinned, 1, __ATOMIC_RELEASE);
  ph_unlock(&copies_lock);
}

PH_STARTUP int copies_stand_by(void)
{
  if (copies_serving() == NULL)
    return 0;
  if (!__atomic_load_n(&copies_pinned, __ATOMIC_ACQUIRE))
    copies_pin();
  return 1;
}

const char *copies_note(void)
{
  copies_start();
  return __atomic_load_n(&copies_said, __ATOMIC_ACQUIRE) ? copies_note_text : NULL;
}

/* The stood-down copy's own account of kind (its base is ignored). */
static void copies_text_stood_down(int kind, char *buf)
{
  if (kind == COPIES_TEXT_DECISION)
    copies_cat(buf, COPIES_TEXT_MAX, "stood down: ", copies_said_text, ". The serving copy's "
               "decision: ", copies_to->api.decision_text(), NULL);
  else
    copies_cat(buf, COPIES_TEXT_MAX, "nothing installed: ", copies_said_text, ".", NULL);
}

/* What goes between base and a sentence after it. */
static const char *copies_gap(const char *base)
{
  size_t n = strlen(base);
  if (n == 0 || base[n - 1] == ' ')
    return "";
  return base[n - 1] == '.' ? " " : ". ";
}

/* kind's text, composed once when stood down, and again for each new
 * base when serving (copies_lock held). */
static const char *copies_text_compose(int kind, const char *base)
{
  int shown = copies_text_shown[kind] - 1;
  if (shown >= 0 && (copies_to != NULL || copies_text_base[kind][shown] == base))
    return copies_texts[kind][shown];
  int next = shown < 0 ? 0 : !shown;
  char *buf = copies_texts[kind][next];
  buf[0] = '\0';
  if (copies_to != NULL)
    copies_text_stood_down(kind, buf);
  else
    copies_cat(buf, COPIES_TEXT_MAX, base, copies_gap(base), copies_note_text, NULL);
  copies_text_base[kind][next] = base;
  copies_text_shown[kind] = next + 1;
  return buf;
}

void copies_fork_child(void)
{
  ph_lock_reset(&copies_lock);
}

const char *copies_text(int kind, const char *base)
{
  if (copies_note() == NULL)
    return base;               /* alone */
  ph_lock(&copies_lock);
  const char *text = copies_text_compose(kind, base);
  ph_unlock(&copies_lock);
  return text;
}
