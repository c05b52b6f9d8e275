/*
 * base64.h — base64 (RFC 4648 §4) and base64url (§5), strict: no white
 * space, no characters outside the alphabet, '=' only as the final
 * padding. One codec for the WebSocket key check (RFC 6455 §4.2.1), JWT
 * parts (RFC 7515 §2: base64url, unpadded) and GRIP's binary payloads
 * (content-bin, Grip-Keep-Alive format=base64). Pure: no I/O, no state.
 */
#ifndef M0_BASE64_H
#define M0_BASE64_H

#include <stddef.h>
#include <sys/types.h>

#define M0_B64_URL        0x1  /* the base64url alphabet ("-_" for "+/") */
#define M0_B64_PAD        0x2  /* '=' padding accepted (then the length is a multiple of 4); else refused */
#define M0_B64_CANONICAL  0x4  /* the unused bits of the last character must be zero: one spelling per byte string */

/* The 6-bit value of c in the standard (url = 0) or url alphabet, or -1. */
int m0_base64_value(unsigned char c, int url);

/* Decode s[0..n) under flags into out (at most cap bytes). Returns the
 * byte count, or -1 (M0_ERR) for a character outside the alphabet,
 * misplaced or refused padding, a length no encoding has (n % 4 == 1),
 * non-zero spare bits under M0_B64_CANONICAL, or no room. */
ssize_t m0_base64_decode(const char *s, size_t n, int flags, unsigned char *out, size_t cap);

/* base64url of p[0..n), unpadded (RFC 7515 §2), NUL-terminated in out.
 * Returns the length without the NUL, or -1 when cap is too small (out is
 * then "" if cap > 0). */
ssize_t m0_b64url_encode(const unsigned char *p, size_t n, char *out, size_t cap);

/* JWT's decoding: base64url, unpadded, canonical. */
ssize_t m0_b64url_decode(const char *s, size_t n, unsigned char *out, size_t cap);

#endif
