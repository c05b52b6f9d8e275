/*
 * request.h — the parsed request (request.c, of the HTTP/1.1 parser's module,
 * http.h): its life, its fields, its body as the parser stored it, its
 * access-log text, and the RFC 9110 token and list rules its readers share.
 */
#ifndef M0_REQUEST_H
#define M0_REQUEST_H

#include "m0/http.h"

/* Initialise / release a request. */
void m0_req_init(struct m0_req *r);

void m0_req_free(struct m0_req *r);

void m0_req_reset(struct m0_req *r);

/* First header named name (case-insensitive), or NULL. */
const struct m0_hdr *m0_req_header(const struct m0_req *r, const char *name);

/* The same, and *count the number of field lines called name (RFC 9110
 * §5.3: a field that may not be a list, such as Range, is invalid when
 * repeated). */
const struct m0_hdr *m0_req_header_count(const struct m0_req *r, const char *name, unsigned *count);

/* Copy up to n body bytes starting at offset off into dst; returns bytes
 * copied (0 at end of body) or M0_ERR with errno set. */
ssize_t m0_req_body_read(const struct m0_req *r, uint64_t off, void *dst, size_t n);

/* The whole body in one NUL-terminated allocation (the caller frees it),
 * its length in *n; NULL (and *n 0) when it cannot be read whole. For the
 * endpoints answered in C that read a small body the loop has already
 * received (the publish socket, the GRIP control port). */
char *m0_req_body_whole(const struct m0_req *r, size_t *n);

/* Is r's path (the target before '?', undecoded) exactly path? */
int m0_req_path_is(const struct m0_req *r, const char *path);

/* "METHOD TARGET" of r for a log line (log_text.h's m0_log_request: the
 * target's token and access_token REDACTED, control bytes escaped),
 * NUL-terminated in dst (cap bytes); returns dst. */
const char *m0_req_log(char *dst, size_t cap, const struct m0_req *r);

/* Is c a tchar (RFC 9110 §5.6.2: "!#$%&'*+-.^_`|~", DIGIT, ALPHA)? */
int m0_http_is_tchar(unsigned char c);

/* Is [p, p+n) a token (RFC 9110 §5.6.2)? A valid field value (no CR, LF, NUL)? */
int m0_http_is_token(const char *p, size_t n);

int m0_http_is_field_value(const char *p, size_t n);

/* Iterate a comma-separated field value (RFC 9110 §5.6.1 "#rule"): on each
 * call, the next non-empty element of [*p, end) with surrounding whitespace
 * removed goes to *item and *len, and *p moves past it. Returns 0 when none is
 * left. */
int m0_http_list_next(const char **p, const char *end, const char **item, size_t *len);

/* Does the list value v (n bytes) hold token, case-insensitively? */
int m0_http_list_has(const char *v, size_t n, const char *token);

/* The query parameters called name in q (n bytes: the target after '?',
 * not decoded). Pairs are split on '&' (WHATWG URL, "application/
 * x-www-form-urlencoded parsing"), a pair without '=' has an empty value,
 * names compare byte for byte, undecoded. Returns how many there are; the
 * first one's value goes to *val and *vlen (NULL and 0 when there is none). */
unsigned m0_http_query_param(const char *q, size_t n, const char *name, const char **val, size_t *vlen);

#endif
