/*
 * error.c -- pinheap's only output path: fatal misuse reports and warnings.
 *
 * Everything here runs inside malloc and free, possibly with the heap
 * corrupted, so it formats into stack buffers and writes with raw write(2):
 * no stdio, no allocation, no locks.  Main entry point: ph_fatal().
 */
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ph_write_str(int fd, const char *s)
{
  size_t len = strlen(s);
  int saved = errno;

  while (len > 0) {
    ssize_t n = write(fd, s, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    s += n;
    len -= (size_t)n;
  }
  errno = saved;
}

char *ph_fmt_hex(char *buf, uintptr_t v)
{
  static const char digits[] = "0123456789abcdef";
  char tmp[2 * sizeof(v)];
  int n = 0;

  do {
    tmp[n++] = digits[v & 0xf];
    v >>= 4;
  } while (v != 0);
  buf[0] = '0';
  buf[1] = 'x';
  for (int i = 0; i < n; i++)
    buf[2 + i] = tmp[n - 1 - i];
  buf[2 + n] = '\0';
  return buf;
}

char *ph_fmt_dec(char *buf, uint64_t v)
{
  char tmp[21];
  int n = 0;

  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (int i = 0; i < n; i++)
    buf[i] = tmp[n - 1 - i];
  buf[n] = '\0';
  return buf;
}

void ph_fatal(const char *func, const char *what, const void *ptr)
{
  char line[256];
  char hex[24];
  size_t len = 0;
  const char *parts[6];
  int nparts = 0;

  parts[nparts++] = "pinheap: ";
  parts[nparts++] = func;
  parts[nparts++] = "(): ";
  parts[nparts++] = what;
  if (ptr != NULL) {
    parts[nparts++] = " ";
    parts[nparts++] = ph_fmt_hex(hex, (uintptr_t)ptr);
  }
  for (int i = 0; i < nparts; i++) {
    size_t l = strlen(parts[i]);
    if (len + l > sizeof(line) - 2)
      l = sizeof(line) - 2 - len;
    memcpy(line + len, parts[i], l);
    len += l;
  }
  line[len++] = '\n';
  line[len] = '\0';
  ph_write_str(STDERR_FILENO, line);
  abort();
}

void ph_warn(const char *first, ...)
{
  char line[512];
  size_t len = 0;
  va_list ap;
  static const char head[] = "pinheap: warning: ";

  memcpy(line, head, sizeof(head) - 1);
  len = sizeof(head) - 1;
  va_start(ap, first);
  for (const char *s = first; s != NULL; s = va_arg(ap, const char *)) {
    size_t l = strlen(s);
    if (len + l > sizeof(line) - 2)
      l = sizeof(line) - 2 - len;
    memcpy(line + len, s, l);
    len += l;
  }
  va_end(ap);
  line[len++] = '\n';
  line[len] = '\0';
  ph_write_str(STDERR_FILENO, line);
}
