/*
 * log.h — the error log (stderr) and the access log (stdout).
 *
 * Error-log lines look like gunicorn's:
 *   [2026-11-29 13:20:00 +0000] [4242] [INFO] message
 * Safe from any thread: each line is one write(2).
 */
#ifndef M0_LOG_H
#define M0_LOG_H

#include "m0/types.h"

enum m0_log_level { M0_LOG_DEBUG, M0_LOG_INFO, M0_LOG_WARNING, M0_LOG_ERROR, M0_LOG_CRITICAL };

/* Lines below this level are dropped. Default M0_LOG_INFO. */
extern enum m0_log_level m0_log_threshold;

/* Parse "debug|info|warning|error|critical"; returns M0_OK or M0_ERR. */
int m0_log_parse_level(const char *s, enum m0_log_level *out);

void m0_log(enum m0_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Like m0_log at ERROR, with ": strerror(errno)" appended. */
void m0_log_errno(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Write raw bytes to the error log (wsgi.errors, tracebacks). */
void m0_log_raw(const char *p, size_t n);

/* One access-log line on stdout, in the combined format plus the duration:
 *   ADDR - - [29/Nov/2026:13:20:00 +0000] "GET /x HTTP/1.1" 200 13 "-" "curl/8" 0.000123
 * referer and ua may be NULL. duration_us in microseconds. */
void m0_log_access(const char *addr, const char *method, const char *target, int minor,
                   int status, uint64_t bytes, const char *referer, const char *ua,
                   uint64_t duration_us);

#define m0_debug(...) do { if (m0_log_threshold <= M0_LOG_DEBUG) m0_log(M0_LOG_DEBUG, __VA_ARGS__); } while (0)
#define m0_info(...)  m0_log(M0_LOG_INFO, __VA_ARGS__)
#define m0_warn(...)  m0_log(M0_LOG_WARNING, __VA_ARGS__)
#define m0_error(...) m0_log(M0_LOG_ERROR, __VA_ARGS__)

#endif
