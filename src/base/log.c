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

/* Wall-clock time in UTC as "2026-11-29 13:20:00 +0000" (error log) or
 * "29/Nov/2026:13:20:00 +0000" (access log, common log format).
 *
 * Always UTC, never the process's local zone: Django applies its TIME_ZONE
 * to the worker by setting TZ and calling tzset(), which would move the
 * workers' lines to another zone than the master's (the master never runs
 * Python). gmtime_r also takes no lock on the zone data. The text is
 * cached per thread for the current second: a busy access log formats one
 * timestamp a second, not one per request. */
static size_t stamp(char *dst, size_t cap, int access)
{
    static __thread time_t cached_sec = -1;
    static __thread char cached[2][40];
    static __thread size_t cached_len[2];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != cached_sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        cached_len[1] = strftime(cached[1], sizeof cached[1], "%d/%b/%Y:%H:%M:%S +0000", &tm);
        cached_len[0] = strftime(cached[0], sizeof cached[0], "%Y-%m-%d %H:%M:%S +0000", &tm);
        cached_sec = ts.tv_sec;
    }
    size_t n = cached_len[access ? 1 : 0];
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, cached[access ? 1 : 0], n);
    dst[n] = '\0';
    return n;
}

size_t m0_log_stamp(char *dst, size_t cap, int access)
{
    return stamp(dst, cap, access);
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

void m0_log_out(const char *p, size_t n)
{
    write_all(STDOUT_FILENO, p, n);
}
