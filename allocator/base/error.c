/*
 * error.c -- pinheap's only output path: the logger, fatal misuse reports
 * and warnings.  Main entry points: ph_log() and ph_fatal().
 *
 * Everything here runs inside malloc and free (possibly with the heap
 * corrupted), inside event handlers, and before the leave-pinned decision
 * (inside the very first malloc), so it formats into one stack buffer and
 * hands the whole line to the kernel with ONE raw write(2): no stdio, no
 * locale, no allocation, no locks; errno is preserved.
 *
 * The formatter is a printf subset: %s %d %u %x %p %zu %zd %zx %lu %ld %lx
 * %llu %lld %llx %c %%, with an optional '-' (left-justify) and '0' (zero
 * pad) flag, a field width (digits or '*') and for %s a precision (digits
 * or '*').  Any other conversion is copied literally and reads no
 * argument.  A line longer than PH_LOG_LINE_MAX is cut, between words
 * where it can, and ends in "...\n".
 */
#include "allocator/base/base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where messages go: stderr, or a test's descriptor (ph_log_set_fd). */
static int log_fd = STDERR_FILENO;
/* The level in force; params_get() sets it from PINHEAP_LOG_LEVEL once
 * the process's table is parsed.  The logger never calls into the
 * parameters itself: their parsing warns through it. */
static int log_level = PH_LOG_WARN;

/* Level names as they appear in a line ("pinheap: warning: ..."). */
static const char *const log_level_names[PH_LOG_LEVEL_COUNT] = {
  [PH_LOG_FATAL] = "fatal",
  [PH_LOG_ERROR] = "error",
  [PH_LOG_WARN]  = "warning",
  [PH_LOG_INFO]  = "info",
  [PH_LOG_DEBUG] = "debug",
};

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

PH_HOT char *ph_fmt_dec(char *buf, uint64_t v)
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

/* ---- the formatter ------------------------------------------------------- */

/* An output buffer: text goes to buf[0 .. cap), the rest is counted as
 * lost (truncated) and never written. */
typedef struct log_out_s {
  char  *buf;
  size_t cap;
  size_t len;
  int    is_truncated;
} log_out_t;

static void out_char(log_out_t *o, char c)
{
  if (o->len < o->cap)
    o->buf[o->len++] = c;
  else
    o->is_truncated = 1;
}

static void out_chars(log_out_t *o, const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    out_char(o, s[i]);
}

static void out_pad(log_out_t *o, char c, int n)
{
  for (; n > 0; n--)
    out_char(o, c);
}

/* One field: sign/prefix + body, padded to width. */
static void out_field(log_out_t *o, const char *prefix, const char *body, size_t body_len,
                      int width, int is_left, int is_zero)
{
  size_t prefix_len = strlen(prefix);
  int pad = width - (int)(prefix_len + body_len);

  if (pad < 0)
    pad = 0;
  if (is_left) {
    out_chars(o, prefix, prefix_len);
    out_chars(o, body, body_len);
    out_pad(o, ' ', pad);
  } else if (is_zero) {
    out_chars(o, prefix, prefix_len);
    out_pad(o, '0', pad);
    out_chars(o, body, body_len);
  } else {
    out_pad(o, ' ', pad);
    out_chars(o, prefix, prefix_len);
    out_chars(o, body, body_len);
  }
}

/* Digits of v in base 10 or 16 into tmp (at least 24 bytes), not
 * terminated.  @return the number of digits; they start at tmp. */
static size_t digits_of(char *tmp, unsigned long long v, unsigned base)
{
  static const char digits[] = "0123456789abcdef";
  char rev[24];
  size_t n = 0;

  do {
    rev[n++] = digits[v % base];
    v /= base;
  } while (v != 0);
  for (size_t i = 0; i < n; i++)
    tmp[i] = rev[n - 1 - i];
  return n;
}

/* Formats fmt with ap into o (see the banner for the subset). */
static void log_format(log_out_t *o, const char *fmt, va_list ap)
{
  for (const char *p = fmt; *p != '\0'; p++) {
    const char *start = p;
    int is_left = 0, is_zero = 0, width = 0, prec = -1;
    int len_mod = 0;             /* 0 int, 1 long, 2 long long, 3 size_t */
    char tmp[24];

    if (*p != '%') {
      out_char(o, *p);
      continue;
    }
    p++;
    for (;; p++) {
      if (*p == '-')
        is_left = 1;
      else if (*p == '0')
        is_zero = 1;
      else
        break;
    }
    if (*p == '*') {
      width = va_arg(ap, int);
      if (width < 0) {
        is_left = 1;
        width = width == -2147483647 - 1 ? 0 : -width;
      }
      p++;
    } else {
      while (*p >= '0' && *p <= '9') {
        if (width < 10000)
          width = width * 10 + (*p - '0');
        p++;
      }
    }
    if (*p == '.') {
      p++;
      prec = 0;
      if (*p == '*') {
        prec = va_arg(ap, int);
        p++;
      } else {
        while (*p >= '0' && *p <= '9') {
          if (prec < 100000)
            prec = prec * 10 + (*p - '0');
          p++;
        }
      }
    }
    if (*p == 'z') {
      len_mod = 3;
      p++;
    } else if (*p == 'l') {
      len_mod = 1;
      p++;
      if (*p == 'l') {
        len_mod = 2;
        p++;
      }
    }

    switch (*p) {
    case '%':
      out_char(o, '%');
      break;
    case 'c':
      tmp[0] = (char)va_arg(ap, int);
      out_field(o, "", tmp, 1, width, is_left, 0);
      break;
    case 's': {
      const char *s = va_arg(ap, const char *);
      size_t n = 0;
      if (s == NULL)
        s = "(null)";
      while (s[n] != '\0' && (prec < 0 || n < (size_t)prec))
        n++;
      out_field(o, "", s, n, width, is_left, 0);
      break;
    }
    case 'd': {
      long long v = len_mod == 0 ? va_arg(ap, int)
                  : len_mod == 1 ? va_arg(ap, long)
                  : len_mod == 2 ? va_arg(ap, long long)
                                 : (long long)va_arg(ap, ssize_t);
      unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
      size_t n = digits_of(tmp, u, 10);
      out_field(o, v < 0 ? "-" : "", tmp, n, width, is_left, is_zero);
      break;
    }
    case 'u':
    case 'x': {
      unsigned long long u = len_mod == 0 ? va_arg(ap, unsigned)
                           : len_mod == 1 ? va_arg(ap, unsigned long)
                           : len_mod == 2 ? va_arg(ap, unsigned long long)
                                          : (unsigned long long)va_arg(ap, size_t);
      size_t n = digits_of(tmp, u, *p == 'x' ? 16 : 10);
      out_field(o, "", tmp, n, width, is_left, is_zero);
      break;
    }
    case 'p': {
      uintptr_t u = (uintptr_t)va_arg(ap, void *);
      size_t n = digits_of(tmp, u, 16);
      out_field(o, "0x", tmp, n, width, is_left, is_zero);
      break;
    }
    default:
      /* Unknown (or a lone '%' at the end): copy it as written, read no
       * argument. */
      if (*p == '\0') {
        out_chars(o, start, (size_t)(p - start));
        p--;
      } else {
        out_chars(o, start, (size_t)(p - start) + 1);
      }
      break;
    }
  }
}

/* ---- the line ------------------------------------------------------------ */

size_t ph_log_format(char *buf, size_t size, int level, int with_name, const char *fmt,
                     va_list ap)
{
  static const char head[] = "pinheap: ";
  static const char cut[] = "...\n";
  log_out_t o;

  if (size < sizeof(cut))                         /* too small for any line */
    return 0;
  /* Room for the '\n' is kept back; the text fills the rest.  A cut line
   * gives up its last three bytes of text for "...". */
  o.buf = buf;
  o.cap = size - 1;
  o.len = 0;
  o.is_truncated = 0;
  out_chars(&o, head, sizeof(head) - 1);
  if (with_name && level >= 0 && level < PH_LOG_LEVEL_COUNT) {
    const char *name = log_level_names[level];
    out_chars(&o, name, strlen(name));
    out_chars(&o, ": ", 2);
  }
  size_t text = o.len;                            /* the message starts here */
  log_format(&o, fmt, ap);
  if (o.is_truncated) {
    /* cut between words: back to the last space of the message's last 64
     * bytes (a longer word is cut where it is) */
    size_t at = size - (sizeof(cut) - 1), low = at > text + 64 ? at - 64 : text;
    size_t sp = at;
    while (sp > low && buf[sp] != ' ')
      sp--;
    if (sp > low)
      at = sp;
    memcpy(buf + at, cut, sizeof(cut) - 1);
    return at + sizeof(cut) - 1;
  }
  /* A message's own trailing newline is not doubled. */
  if (o.len > 0 && o.buf[o.len - 1] == '\n')
    o.len--;
  buf[o.len++] = '\n';
  return o.len;
}

/* Hands the line to the kernel in one write(2) (retried on EINTR; a short
 * write, on a pipe only when the line is larger than its atomic size, is
 * completed).  errno is preserved. */
static void log_write(const char *line, size_t len)
{
  int saved = errno;
  int fd = __atomic_load_n(&log_fd, __ATOMIC_RELAXED);

  while (len > 0) {
    ssize_t n = write(fd, line, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    line += n;
    len -= (size_t)n;
  }
  errno = saved;
}

PH_HOT int ph_log_level(void)
{
  return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

PH_HOT void ph_log_set_level(int level)
{
  if (level < PH_LOG_FATAL)
    level = PH_LOG_FATAL;
  if (level > PH_LOG_DEBUG)
    level = PH_LOG_DEBUG;
  __atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

const char *ph_log_level_name(int level)
{
  if (level < 0 || level >= PH_LOG_LEVEL_COUNT)
    return "unknown";
  return level == PH_LOG_WARN ? "warn" : log_level_names[level];
}

int ph_log_set_fd(int fd)
{
  return __atomic_exchange_n(&log_fd, fd, __ATOMIC_RELAXED);
}

/* Formats and writes one line, whatever the level setting. */
static void log_emit(int level, int with_name, const char *fmt, va_list ap)
{
  char line[PH_LOG_LINE_MAX];
  int saved = errno;
  size_t len = ph_log_format(line, sizeof(line), level, with_name, fmt, ap);

  log_write(line, len);
  errno = saved;
}

void ph_log_v(int level, const char *fmt, va_list ap)
{
  int saved = errno;

  if (level <= PH_LOG_FATAL || level <= ph_log_level())
    log_emit(level, 1, fmt, ap);
  errno = saved;
}

void ph_log(int level, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  ph_log_v(level, fmt, ap);
  va_end(ap);
}

void ph_log_plain(int level, const char *fmt, ...)
{
  va_list ap;
  int saved = errno;

  if (level <= PH_LOG_FATAL || level <= ph_log_level()) {
    va_start(ap, fmt);
    log_emit(level, 0, fmt, ap);
    va_end(ap);
  }
  errno = saved;
}

void ph_fatal(const char *func, const char *what, const void *ptr)
{
  /* The misuse report keeps the form README documents and the misuse
   * tests pin: "pinheap: <func>(): <what> 0x<ptr>". */
  if (ptr != NULL)
    ph_log_plain(PH_LOG_FATAL, "%s(): %s %p", func, what, ptr);
  else
    ph_log_plain(PH_LOG_FATAL, "%s(): %s", func, what);
  abort();
}

void ph_warn(const char *first, ...)
{
  char text[PH_LOG_LINE_MAX] = "";
  va_list ap;

  if (PH_LOG_WARN > ph_log_level())
    return;
  /* Join the pieces (cut where the line would be cut anyway), then log
   * the result as one %s: pieces are never read as a format. */
  va_start(ap, first);
  for (const char *s = first; s != NULL; s = va_arg(ap, const char *))
    ph_str_add(text, sizeof(text), s);
  va_end(ap);
  ph_log(PH_LOG_WARN, "%s", text);
}
