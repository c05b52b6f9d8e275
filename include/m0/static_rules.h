/*
 * static_rules.h — the rules a static answer follows (static_rules.c, of
 * the static module, static.h): the path under the root, the ETag and the
 * conditions (RFC 9110 §13), ranges (§14), HTTP dates, Accept-Encoding.
 */
#ifndef M0_STATIC_RULES_H
#define M0_STATIC_RULES_H

#include "m0/static.h"

/* The relative file path a request path names. raw (n bytes) is the raw
 * path after the mount's prefix: "" or "/...". Percent-decodes once into
 * out (cap bytes, NUL-terminated) and sets *dir_slash when the path ends
 * with '/'. Returns 0 when the path is acceptable, else the status to
 * answer with *why set: 400 for a malformed escape, a NUL or a control
 * byte; 404 for a dot-segment or dotfile, an empty segment, an encoded
 * '/' or '\\', a raw '\\', or a path longer than cap. */
int m0_static_path(const char *raw, size_t n, char *out, size_t cap, size_t *outlen, int *dir_slash,
                   const char **why);

/* The ETag of a file (see the policy above), quotes included, into out
 * (cap >= 64). Returns its length. */
size_t m0_static_etag(char *out, size_t cap, const struct stat *st);

/* Evaluate If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since
 * and If-Range of r against the representation's etag and mtime (seconds).
 * *use_range is cleared when If-Range does not match (the Range field is
 * then ignored). */
enum m0_cond_verdict m0_static_conditions(const struct m0_req *r, const char *etag, size_t elen, time_t mtime,
                                          int *use_range);

/* Does the entity-tag list v (n bytes: "*" or 1#entity-tag, as in
 * If-None-Match and If-Match) match etag? weak: the weak comparison (RFC
 * 9110 §8.8.3.2, If-None-Match); else the strong one (If-Match, If-Range).
 * A malformed list matches nothing. */
int m0_etag_match(const char *v, size_t n, const char *etag, size_t elen, int weak);

/* Evaluate a Range field value (n bytes) against a representation of len
 * bytes (RFC 9110 §14.1.2): "bytes=first-last", "bytes=first-",
 * "bytes=-suffix". A malformed value, another unit, several ranges, or an
 * empty representation give WHOLE. */
enum m0_range_verdict m0_range_parse(const char *v, size_t n, uint64_t len, struct m0_range *r);

/* Format t as an IMF-fixdate (29 characters) into out (cap >= 30). */
void m0_http_date_format(time_t t, char *out, size_t cap);

/* Parse an HTTP-date (RFC 9110 §5.6.7: IMF-fixdate, and the obsolete
 * RFC 850 and asctime forms recipients must accept). M0_OK or M0_ERR. */
int m0_http_date_parse(const char *v, size_t n, time_t *out);

/* The codings to try, best first, for the Accept-Encoding field lines of
 * r (RFC 9110 §12.5.3: q-values, "*", "identity", x-gzip as gzip; br ahead
 * of gzip ahead of identity at equal q; q=0 excluded). identity always
 * comes last when nothing better is acceptable: a file is never refused
 * for want of a coding (no 406). Without Accept-Encoding: identity only.
 * Returns the count written to order (at most 3). */
size_t m0_accept_encoding(const struct m0_req *r, enum m0_coding order[3]);

#endif
