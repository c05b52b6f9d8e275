/*
 * percent.h — percent-decoding of a request path (RFC 3986 §2.1): the one
 * decoder of the server. The WSGI PATH_INFO and the ASGI scope's path
 * carry the path decoded once, leniently (m0_percent_decode); a static
 * mount's path rules refuse what these keep (static_rules.c, through
 * m0_percent_byte).
 */
#ifndef M0_PERCENT_H
#define M0_PERCENT_H

#include <stddef.h>

/* The value 0..15 of the hex digit c (RFC 5234 HEXDIG, either case), or -1
 * for any other byte. Also the hex of a WebSocket-over-HTTP event's size
 * (woh.c) and of a GRIP keep-alive's \xHH escape (grip.c). */
int m0_hex_digit(unsigned char c);

/* s[i] is a '%' of the n bytes at s: the byte "%" HEXDIG HEXDIG stands
 * for (0..255), or -1 when two hex digits do not follow within n. */
int m0_percent_byte(const char *s, size_t n, size_t i);

/* Decode the n bytes at s into dst (room for n bytes; it may be s itself):
 * "%" HEXDIG HEXDIG becomes that byte; a '%' not followed by two hex digits
 * is kept as it is, with what follows it (a path is never refused here).
 * Returns the decoded length (<= n). */
size_t m0_percent_decode(const char *s, size_t n, char *dst);

#endif
