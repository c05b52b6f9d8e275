/*
 * log_text.h — what a client or a token says, made safe for a log line: one
 * rule for every line that prints a request target, a header, a grant's
 * sub or kid, a channel name (issue 27 items 3 and 5).
 *
 * Redaction (RFC 6750 §5.3: a bearer token in a log is a credential anyone
 * reading the log can replay): the value of a "token" (a grant, grant.h)
 * or "access_token" (RFC 6750 §2.3) query parameter — the name compared
 * after percent-decoding, so "%74oken" is one too — and, in a header, the
 * credentials of Authorization and Proxy-Authorization (everything after
 * the auth-scheme, RFC 9110 §11.4) and the value of the grant cookie
 * (--grant-cookie) in Cookie and Set-Cookie. Each becomes REDACTED.
 * The access log (accesslog.c) asks the same functions where the secrets
 * are and escapes in its own way; the error log takes m0_log_target & co.
 *
 * Escaping for the error log: a control byte (below 0x20) and DEL become
 * \n, \r, \t or \xHH, a backslash \\ — a value holding a newline cannot
 * start a line of its own. Bytes from 0x80 up are kept (UTF-8 text stays
 * readable).
 */
#ifndef M0_LOG_TEXT_H
#define M0_LOG_TEXT_H

#include <stddef.h>

#define M0_LOG_REDACTED "REDACTED"
#define M0_LOG_TEXT_MAX 512         /* a buffer for one value in an error line */

/* The grant cookie's name (NULL: none), whose value the header functions
 * redact. Per process: set once before the workers fork (main.c); the
 * string must stay. */
void m0_log_secret_cookie(const char *name);

/* The next credential in the query q (n bytes, after the '?'), starting at
 * offset from: 1 with [*start, *end) the bytes of a token or access_token
 * value (possibly empty), 0 when there is none left. Pure. */
int m0_log_query_secret(const char *q, size_t n, size_t from, size_t *start, size_t *end);

/* The next credential in the value v (n bytes) of a header called name (nl
 * bytes, any case), starting at offset from: 1 with [*start, *end), 0 when
 * none is left (or the header carries none). */
int m0_log_header_secret(const char *name, size_t nl, const char *v, size_t n, size_t from, size_t *start,
                         size_t *end);

/* Error-log text, NUL-terminated in dst (cap >= 8 bytes), escaped as above
 * and cut with "..." when it does not fit (never inside an escape). Each
 * returns dst, for a printf argument; s NULL gives "-".
 *   m0_log_text    any value (a method, sub, kid, channel, reason)
 *   m0_log_target  a request-target (or a path): its query's secrets redacted
 *   m0_log_header  a header's value: its secrets redacted
 *   m0_log_request "METHOD TARGET", as m0_log_text and m0_log_target */
const char *m0_log_text(char *dst, size_t cap, const char *s, size_t n);
const char *m0_log_target(char *dst, size_t cap, const char *t, size_t n);
const char *m0_log_request(char *dst, size_t cap, const char *method, size_t ml, const char *target, size_t tl);

/* The same as printf arguments, each in a buffer of its own that lives to
 * the end of the enclosing block (a compound literal):
 *   m0_warn("... %s", M0_LOG_TARGET(r->target, r->target_len)); */
#define M0_LOG_TEXT(s, n)   m0_log_text((char[M0_LOG_TEXT_MAX]){0}, M0_LOG_TEXT_MAX, (s), (n))
#define M0_LOG_TARGET(t, n) m0_log_target((char[M0_LOG_TEXT_MAX]){0}, M0_LOG_TEXT_MAX, (t), (n))
const char *m0_log_header(char *dst, size_t cap, const char *name, size_t nl, const char *v, size_t n);

#endif
