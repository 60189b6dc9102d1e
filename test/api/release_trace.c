/*
 * release_trace.c -- the workload behind the kernel-level release proof.
 *
 * It installs a release listener that writes one marker line
 *     R 0x<addr> 0x<len>\n
 * to a marker descriptor (with write(2) and hand formatting: no stdio, no
 * malloc) each time pinheap announces a release, then drives every release
 * path of the allocator: frees of huge (directly mapped) chunks, in-place
 * shrinking of huge chunks (mremap), growth of huge chunks, automatic top
 * trimming, malloc_trim (madvise of free pages and unmapping of the top),
 * mspace_trim, destroy_mspace, and many create/destroy cycles.
 *
 * Run under `strace -f -e trace=munmap,madvise,mremap,write` and handed to
 * release_trace_check.py, which checks that every munmap/madvise/mremap-
 * shrink between the BEGIN and END lines is preceded by exactly one marker
 * for exactly that range.  Nothing between BEGIN and END uses glibc's
 * malloc or stdio, so every release in that window is pinheap's.
 *
 * Usage: release_trace [--inject-unannounced]
 *   --inject-unannounced  also unmaps a page of its own with a raw syscall
 *                         and no marker: the checker must reject the trace.
 * Main entry point: main(); the workload is trace_workload().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pinheap.h"
#include "allocator/base/raw_syscall.h"

/* The OS layer's listener slot (hidden in the archive, linkable here). */
typedef void os_release_fn(void *addr, size_t len, void *ctx);
void PINHEAP_NAME(os_set_release_listener)(os_release_fn *fn, void *ctx);

#define TRACE_MIB ((size_t)1024 * 1024)
#define TRACE_KIB ((size_t)1024)

static int trace_fd = -1;
static size_t trace_markers;

static void trace_write(const char *s, size_t n)
{
  while (n > 0) {
    ssize_t w = write(trace_fd, s, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      _exit(3);
    s += w;
    n -= (size_t)w;
  }
}

/* Appends "0x<hex>" to buf at *pos. */
static void trace_put_hex(char *buf, size_t *pos, uintptr_t v)
{
  static const char digits[] = "0123456789abcdef";
  char tmp[2 * sizeof(v)];
  int n = 0;

  do {
    tmp[n++] = digits[v & 15];
    v >>= 4;
  } while (v != 0);
  buf[(*pos)++] = '0';
  buf[(*pos)++] = 'x';
  while (n > 0)
    buf[(*pos)++] = tmp[--n];
}

static void trace_put_dec(char *buf, size_t *pos, size_t v)
{
  char tmp[24];
  int n = 0;

  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0)
    buf[(*pos)++] = tmp[--n];
}

static void trace_listener(void *addr, size_t len, void *ctx)
{
  char buf[64];
  size_t pos = 0;

  (void)ctx;
  buf[pos++] = 'R';
  buf[pos++] = ' ';
  trace_put_hex(buf, &pos, (uintptr_t)addr);
  buf[pos++] = ' ';
  trace_put_hex(buf, &pos, (uintptr_t)len);
  buf[pos++] = '\n';
  trace_write(buf, pos);
  trace_markers++;
}

static void trace_fail(const char *what)
{
  trace_write("FAIL ", 5);
  trace_write(what, strlen(what));
  trace_write("\n", 1);
  _exit(2);
}

static void trace_touch(void *p, size_t n)
{
  /* one byte per page, so the kernel really backs the memory */
  for (size_t i = 0; i < n; i += 4096)
    ((volatile char *)p)[i] = (char)i;
  if (n > 0)
    ((volatile char *)p)[n - 1] = 1;
}

/* ---- the workload -------------------------------------------------------- */

static void trace_huge_frees(void)
{
  /* threshold fixed: no dynamic raise, so every block below is mapped */
  if (PINHEAP_NAME(mallopt)(M_MMAP_THRESHOLD, 128 * 1024) != 1)
    trace_fail("mallopt(M_MMAP_THRESHOLD, 128 KiB) refused");
  for (int i = 0; i < 24; i++) {
    size_t n = (size_t)(160 + 97 * i) * TRACE_KIB;
    void *p = PINHEAP_NAME(malloc)(n);
    if (p == NULL)
      trace_fail("malloc of a huge block returned NULL");
    trace_touch(p, n);
    PINHEAP_NAME(free)(p);
  }
  /* and several alive at once, freed in a shuffled order */
  void *blocks[16];
  for (int i = 0; i < 16; i++) {
    blocks[i] = PINHEAP_NAME(memalign)((size_t)4096 << (i % 5), 300 * TRACE_KIB + (size_t)i * 5000);
    if (blocks[i] == NULL)
      trace_fail("memalign of a huge block returned NULL");
    trace_touch(blocks[i], 300 * TRACE_KIB);
  }
  for (int i = 0; i < 16; i++)
    PINHEAP_NAME(free)(blocks[(i * 7) % 16]);
}

static void trace_huge_reallocs(void)
{
  for (int round = 0; round < 6; round++) {
    size_t n = 8 * TRACE_MIB;
    char *p = PINHEAP_NAME(malloc)(n);
    if (p == NULL)
      trace_fail("malloc(8 MiB) returned NULL");
    trace_touch(p, n);
    /* shrink in place, step by step: each step gives back a tail */
    while (n > 2 * TRACE_MIB) {
      n -= TRACE_MIB + (size_t)round * 64 * TRACE_KIB;
      p = PINHEAP_NAME(realloc)(p, n);
      if (p == NULL)
        trace_fail("shrinking realloc of a huge block returned NULL");
    }
    /* grow again (in place when the address space after it is free, else
     * by moving, which frees the old mapping) */
    p = PINHEAP_NAME(realloc)(p, 12 * TRACE_MIB);
    if (p == NULL)
      trace_fail("growing realloc of a huge block returned NULL");
    trace_touch(p, 12 * TRACE_MIB);
    /* and down below the threshold: the block moves into the heap */
    p = PINHEAP_NAME(realloc)(p, 1000);
    if (p == NULL)
      trace_fail("realloc of a huge block to 1000 bytes returned NULL");
    PINHEAP_NAME(free)(p);
  }
}

static void trace_heap_trims(void)
{
  enum { N = 160 };
  void *blocks[N];

  /* heap only: the large blocks below must come from segments */
  if (PINHEAP_NAME(mallopt)(M_MMAP_MAX, 0) != 1 ||
      PINHEAP_NAME(mallopt)(M_TRIM_THRESHOLD, 128 * 1024) != 1 ||
      PINHEAP_NAME(mallopt)(M_TOP_PAD, 0) != 1)
    trace_fail("mallopt refused a documented parameter");
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < N; i++) {
      size_t n = 40 * TRACE_KIB + (size_t)(i % 7) * 4096;
      blocks[i] = PINHEAP_NAME(malloc)(n);
      if (blocks[i] == NULL)
        trace_fail("malloc in the heap returned NULL");
      trace_touch(blocks[i], n);
    }
    /* every other block: free chunks with whole pages inside, kept apart
     * by live blocks, which only malloc_trim can give back (madvise) */
    for (int i = 0; i < N; i += 2)
      PINHEAP_NAME(free)(blocks[i]);
    PINHEAP_NAME(malloc_trim)(0);
    /* the rest, newest first: the top grows past the trim threshold and
     * is trimmed by free itself */
    for (int i = N - 1; i >= 1; i -= 2)
      PINHEAP_NAME(free)(blocks[i]);
    PINHEAP_NAME(malloc_trim)(0);
  }
  if (PINHEAP_NAME(mallopt)(M_MMAP_MAX, 65536) != 1)
    trace_fail("mallopt(M_MMAP_MAX) refused");
}

static void trace_mspaces(void)
{
  for (int cycle = 0; cycle < 30; cycle++) {
    pinheap_mspace msp = PINHEAP_NAME(create_mspace)(cycle % 3 == 0 ? 0 : 256 * TRACE_KIB, cycle & 1);
    void *keep[8];
    if (msp == NULL)
      trace_fail("create_mspace returned NULL");
    for (int i = 0; i < 8; i++) {
      size_t n = i == 7 ? 2 * TRACE_MIB : (size_t)(i + 1) * 96 * TRACE_KIB;
      keep[i] = PINHEAP_NAME(mspace_malloc)(msp, n);
      if (keep[i] == NULL)
        trace_fail("mspace_malloc returned NULL");
      trace_touch(keep[i], n);
    }
    for (int i = 0; i < 8; i += 2)
      PINHEAP_NAME(mspace_free)(msp, keep[i]);
    PINHEAP_NAME(mspace_trim)(msp, 0);
    /* the odd ones stay: destroy_mspace must give them back too */
    PINHEAP_NAME(destroy_mspace)(msp);
  }
}

/* A system call no symbol sees: the instruction itself (ph_syscall).  A
 * call of mmap, munmap or syscall() would also link the archive's
 * interposers into this program, which runs under ASan too, and syscall()
 * would announce it. */
static void trace_inject_unannounced(void)
{
  long p = ph_syscall(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
  if (p == -1)
    trace_fail("mmap for --inject-unannounced failed");
  ph_syscall(SYS_munmap, p, 4096);
}

static void trace_workload(int inject)
{
  trace_huge_frees();
  trace_huge_reallocs();
  if (inject)
    trace_inject_unannounced();
  trace_heap_trims();
  trace_mspaces();
}

int main(int argc, char **argv)
{
  int inject = 0;
  char end[64];
  size_t pos = 0;

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--inject-unannounced") == 0) {
      inject = 1;
    } else {
      fprintf(stderr, "release_trace: unknown argument '%s' (expected --inject-unannounced "
              "or nothing)\n", argv[i]);
      return 64;
    }
  }
  trace_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (trace_fd < 0) {
    perror("release_trace: open /dev/null");
    return 1;
  }
  /* Warm up before BEGIN, so that loader and libc activity is outside the
   * window: stdio's buffer, the allocator's first segment. */
  fprintf(stderr, "release_trace: marker fd %d\n", trace_fd);
  PINHEAP_NAME(free)(PINHEAP_NAME(malloc)(16));

  PINHEAP_NAME(os_set_release_listener)(trace_listener, NULL);
  trace_write("BEGIN pinheap-release-trace\n", 28);
  trace_workload(inject);
  PINHEAP_NAME(os_set_release_listener)(NULL, NULL);
  memcpy(end, "END markers=", 12);
  pos = 12;
  trace_put_dec(end, &pos, trace_markers);
  end[pos++] = '\n';
  trace_write(end, pos);
  return 0;
}
