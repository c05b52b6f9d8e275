/*
 * log.c — leveled error log on stderr and the access log on stdout.
 * Every line is formatted into a stack buffer and written with a single
 * write(2), so lines from threads and processes never interleave.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "m0/log.h"

enum m0_log_level m0_log_threshold = M0_LOG_INFO;

static const char *const names[] = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"};

int m0_log_parse_level(const char *s, enum m0_log_level *out)
{
    for (size_t i = 0; i < M0_ARRAY_LEN(names); i++) {
        if (strcasecmp(s, names[i]) == 0) {
            *out = (enum m0_log_level)i;
            return M0_OK;
        }
    }
    if (strcasecmp(s, "warn") == 0) {
        *out = M0_LOG_WARNING;
        return M0_OK;
    }
    return M0_ERR;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w == -1) {
            if (errno == EINTR)
                continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Local time as "2026-11-29 13:20:00 +0000" (error log) or
 * "29/Nov/2026:13:20:00 +0000" (access log, common log format). */
static size_t stamp(char *dst, size_t cap, int access)
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    if (access)
        return strftime(dst, cap, "%d/%b/%Y:%H:%M:%S %z", &tm);
    return strftime(dst, cap, "%Y-%m-%d %H:%M:%S %z", &tm);
}

static void vlog(enum m0_log_level lvl, int err, const char *fmt, va_list ap)
{
    char line[2048];
    size_t n = 0;

    line[n++] = '[';
    n += stamp(line + n, sizeof line - n, 0);
    n += (size_t)snprintf(line + n, sizeof line - n, "] [%d] [%s] ", (int)getpid(), names[lvl]);
    int k = vsnprintf(line + n, sizeof line - n, fmt, ap);
    if (k > 0)
        n += (size_t)k < sizeof line - n ? (size_t)k : sizeof line - n - 1;
    if (err && n < sizeof line - 1)
        n += (size_t)snprintf(line + n, sizeof line - n, ": %s", strerror(err));
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    write_all(STDERR_FILENO, line, n);
}

void m0_log(enum m0_log_level lvl, const char *fmt, ...)
{
    if (lvl < m0_log_threshold)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(lvl, 0, fmt, ap);
    va_end(ap);
}

void m0_log_errno(const char *fmt, ...)
{
    int err = errno;
    va_list ap;
    va_start(ap, fmt);
    vlog(M0_LOG_ERROR, err, fmt, ap);
    va_end(ap);
    errno = err;
}

void m0_log_raw(const char *p, size_t n)
{
    write_all(STDERR_FILENO, p, n);
}

/* Copy s into dst (cap bytes, NUL-terminated, truncated), escaping '"',
 * '\\' and control bytes as \xHH so a client cannot forge log fields. */
static const char *escape(char *dst, size_t cap, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (; *s && o + 5 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\' || c < 0x20 || c == 0x7f) {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[c >> 4];
            dst[o++] = hex[c & 15];
        } else {
            dst[o++] = (char)c;
        }
    }
    dst[o] = '\0';
    return dst;
}

void m0_log_access(const char *addr, const char *method, const char *target, int minor,
                   int status, uint64_t bytes, const char *referer, const char *ua,
                   uint64_t duration_us)
{
    char line[4096], when[40], t[1200], r[600], u[600];
    stamp(when, sizeof when, 1);
    int n = snprintf(line, sizeof line, "%s - - [%s] \"%s %s HTTP/1.%d\" %d %llu \"%s\" \"%s\" %llu.%06llu\n",
                     addr, when, method, escape(t, sizeof t, target), minor, status, (unsigned long long)bytes,
                     referer ? escape(r, sizeof r, referer) : "-", ua ? escape(u, sizeof u, ua) : "-",
                     (unsigned long long)(duration_us / 1000000), (unsigned long long)(duration_us % 1000000));
    if (n > 0)
        write_all(STDOUT_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}
