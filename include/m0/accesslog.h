/*
 * accesslog.h — the access log: one line per answered request on stdout.
 *
 * The line's shape is compiled once, before the workers fork, from
 * --access-log-format:
 *   - unset: the combined log format plus the duration in seconds,
 *       ADDR - - [29/Nov/2026:13:20:00 +0000] "GET /x HTTP/1.1" 200 13 "-" "curl/8" 0.000123
 *   - gunicorn's atoms, %(NAME)s, and %% for a percent sign:
 *       h remote address   l "-"             u Basic-auth user or "-"
 *       t [time]           r request line    m method    U path    q query
 *       H protocol         s status          B body bytes          b body bytes or "-"
 *       f Referer          a User-Agent      T seconds   M milliseconds
 *       D microseconds     L seconds with six decimals             p <pid>
 *       {Name}i a request header      {Name}o a response header
 *   - "json": one JSON object per line (time in ISO 8601 UTC, remote_addr,
 *     method, path, query, protocol, status, bytes, referer, user_agent,
 *     duration_us, pid).
 * Client-supplied text is escaped ('"', '\\' and control bytes as \xHH, or
 * JSON escapes), so a client cannot forge fields or lines. Times are UTC.
 * The value of a "token" or "access_token" query parameter (a grant, an
 * RFC 6750 bearer token) is written as REDACTED wherever the query appears
 * (r, q, the JSON query): a token in a log is a credential.
 *
 * With the access log off (no --access-log) nothing here runs: callers test
 * cfg->access_log first.
 */
#ifndef M0_ACCESSLOG_H
#define M0_ACCESSLOG_H

#include "m0/types.h"

/* What one line is made of. Every pointer may be NULL (printed as "-"). */
struct m0_access {
    const char *addr;               /* the client's address (after proxy headers) */
    const struct m0_req *req;       /* the request; its method/target may be NULL */
    const char *resp_head;          /* the response's header lines ("Name: v\r\n"...) */
    size_t resp_head_len;
    int status;
    uint64_t bytes;                 /* response body bytes */
    uint64_t duration_us;
};

/* Compile fmt as the process's access-log format: NULL or "" selects the
 * default line, "json" the JSON object, anything else gunicorn's atoms.
 * Returns M0_OK, or M0_ERR with one line in err (cap bytes) naming the
 * first unknown atom or malformed directive. Call before forking. */
int m0_access_compile(const char *fmt, char *err, size_t cap);

/* Render one line (with its '\n') for a into dst (cap bytes; truncated
 * lines still end with '\n'). Returns its length. Pure: for tests. */
size_t m0_access_render(char *dst, size_t cap, const struct m0_access *a);

/* Render and write one line to stdout (a single write(2)). Thread-safe. */
void m0_access_log(const struct m0_access *a);

/*
 * A held connection (an SSE stream, a WebSocket, a GRIP hold) is logged
 * once, when it ends, as nginx logs a long request: the request line and
 * status it began with, the bytes sent on it, the time from the request
 * to the close. Its request is freed while it is held, so what the line
 * needs is kept: m0_access_keep copies a's client, request line and the
 * request and response fields the compiled format reads (not status,
 * bytes or duration) into one allocation (never NULL; free it with
 * m0_access_kept_free). m0_access_keep_head replaces the response fields
 * kept with those of head (len bytes of "Name: value\r\n" lines; NULL:
 * none). m0_access_kept_view points a's addr, req and (when some were
 * kept) resp_head at the kept copy, valid until it is freed; the caller
 * sets the rest and renders or logs a.
 */
struct m0_access_kept;
struct m0_access_kept *m0_access_keep(const struct m0_access *a);
void m0_access_keep_head(struct m0_access_kept *k, const char *head, size_t len);
void m0_access_kept_view(const struct m0_access_kept *k, struct m0_access *a);
void m0_access_kept_free(struct m0_access_kept *k);

#endif
