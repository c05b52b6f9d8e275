/*
 * log.h — the error log (stderr) and the access log (stdout).
 *
 * Error-log lines look like gunicorn's, always in UTC:
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

/* Write raw bytes to stdout in one write(2) where possible (the access log,
 * accesslog.h). */
void m0_log_out(const char *p, size_t n);

/* The current time in UTC, formatted for the error log (access 0:
 * "2026-11-29 13:20:00 +0000") or the access log (access 1:
 * "29/Nov/2026:13:20:00 +0000"), NUL-terminated in dst (cap bytes).
 * Returns its length. Every process and thread of the server uses UTC,
 * whatever TZ the application sets. */
size_t m0_log_stamp(char *dst, size_t cap, int access);

#define m0_debug(...) do { if (m0_log_threshold <= M0_LOG_DEBUG) m0_log(M0_LOG_DEBUG, __VA_ARGS__); } while (0)
#define m0_info(...)  m0_log(M0_LOG_INFO, __VA_ARGS__)
#define m0_warn(...)  m0_log(M0_LOG_WARNING, __VA_ARGS__)
#define m0_error(...) m0_log(M0_LOG_ERROR, __VA_ARGS__)

#endif
