/*
 * origin.h — the web origin of a request and of its Origin header (RFC 6454),
 * for the grants' same-origin check (grant_hold.c). Pure: no I/O.
 *
 * An origin is a (scheme, host, port) triple (RFC 6454 §4); two origins are
 * the same when all three are (§5), the port defaulted by the scheme (80 for
 * http, 443 for https). Only http and https origins exist here: an Origin
 * of any other scheme ("null" included) is never the request's own.
 */
#ifndef M0_ORIGIN_H
#define M0_ORIGIN_H

#include <stddef.h>

struct m0_origin {
    int https;                  /* 1 https, 0 http */
    const char *host;           /* into the parsed text; "[v6]" kept with its brackets */
    size_t host_len;
    unsigned port;              /* 1..65535, the scheme's default when absent */
};

/* Parse an Origin header's value (n bytes), the serialization of RFC 6454
 * §6.2: "http" / "https" (either case) "://" host [ ":" port ]. Refused
 * (M0_ERR): "null", any other scheme, userinfo, a path (even "/"), a
 * query, an empty host or port, a port over 65535, white space or a
 * control byte anywhere. M0_OK fills o (pointing into s). */
int m0_origin_parse(const char *s, size_t n, struct m0_origin *o);

/* The origin a request arrived for: its Host header's value (n bytes,
 * RFC 9110 §7.2: uri-host [ ":" port ]; an empty port is the default) and
 * the scheme it came on (https: 1 only when a trusted proxy says so,
 * proxy.h). M0_OK fills o; M0_ERR for a malformed Host. */
int m0_origin_of_host(const char *s, size_t n, int https, struct m0_origin *o);

/* 1 when the Origin value (on bytes) names the request's own origin
 * (Host value hn bytes, arrived on https or http): scheme, host (ASCII
 * case-insensitively) and port all equal. 0 otherwise, or when either
 * fails to parse (origin NULL or host NULL: 0). */
int m0_origin_same(const char *origin, size_t on, const char *host, size_t hn, int https);

#endif
