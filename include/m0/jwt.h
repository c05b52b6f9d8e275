/*
 * jwt.h — JSON Web Tokens (RFC 7519) in the compact serialization of a JWS
 * (RFC 7515 §7.1), HS256 only (HMAC-SHA256, RFC 7518 §3.2). Pure: no I/O,
 * no Python; JSON through jansson, HMAC through libcrypto.
 *
 * Verification, in this order (each step's failure is its own code):
 *   1. size: over M0_JWT_MAX bytes is refused before anything is decoded;
 *   2. shape: exactly three base64url parts (RFC 7515 §2: no padding, only
 *      A-Z a-z 0-9 '-' '_', the unused bits of the last character zero, so
 *      one token has one spelling);
 *   3. header: a JSON object without duplicate members whose "alg" is
 *      exactly "HS256" ("none", RS*, ES*, PS*, HS384... are refused: the
 *      algorithm-confusion attacks), "typ" a string when present, "kid" a
 *      string of 1..M0_JWT_KID_MAX bytes when present, no "crit" (we
 *      implement no extension, RFC 7515 §4.1.11);
 *   4. key: the header's kid selects the key of that kid; a token without
 *      kid is verified with the set's only key (a set of several keys needs
 *      a kid);
 *   5. signature: 32 bytes, compared with CRYPTO_memcmp (constant time);
 *      only then is the payload parsed;
 *   6. claims: a JSON object without duplicate members; "exp" a number
 *      (RFC 7519 §2 NumericDate) and required; "nbf" and "iat" numbers when
 *      present; "sub" a string when present. The token is valid while
 *      nbf - leeway <= now < exp + leeway and iat <= now + leeway
 *      (RFC 7519 §4.1.4/§4.1.5 allow "some small leeway").
 *
 * Public reasons (m0_jwt_error_reason) are short and say nothing that helps
 * a forger: an unknown kid and a bad signature read the same.
 */
#ifndef M0_JWT_H
#define M0_JWT_H

#include "m0/types.h"

struct json_t;                  /* jansson's; include <jansson.h> to read claims */

#define M0_JWT_MAX     4096     /* bytes of a compact token, the largest accepted */
#define M0_JWT_LEEWAY  30       /* seconds: the documented clock-skew allowance */
#define M0_JWT_KID_MAX 64       /* bytes of a "kid" */
#define M0_JWT_SIG_LEN 32       /* HMAC-SHA256 */

/* Outcomes of m0_jwt_verify. Every code but M0_JWT_OK means "refuse". */
enum m0_jwt_status {
    M0_JWT_OK = 0,
    M0_JWT_TOO_LARGE,           /* over M0_JWT_MAX bytes (or empty) */
    M0_JWT_MALFORMED,           /* not three base64url parts */
    M0_JWT_BAD_HEADER,          /* header not a JSON object, duplicates, bad typ/kid, crit */
    M0_JWT_BAD_ALG,             /* alg missing or not exactly "HS256" */
    M0_JWT_UNKNOWN_KID,         /* no key for the kid (public reason: as BAD_SIGNATURE) */
    M0_JWT_BAD_SIGNATURE,       /* signature not 32 bytes, or not the HMAC */
    M0_JWT_BAD_CLAIMS,          /* payload not a JSON object, duplicates, a claim of the wrong type */
    M0_JWT_NO_EXP,              /* no "exp" claim */
    M0_JWT_EXPIRED,             /* now >= exp + leeway */
    M0_JWT_NOT_YET,             /* now < nbf - leeway, or iat > now + leeway */
    M0_JWT_STATUS_MAX
};

/* One HMAC key. kid NULL (or "") for a key known by no name. */
struct m0_jwt_key {
    const char *kid;            /* NUL-terminated */
    const unsigned char *secret;
    size_t len;                 /* bytes of secret */
};

/* The keys a verifier accepts: a view, owned by whoever built it. */
struct m0_jwt_keys {
    const struct m0_jwt_key *v;
    size_t n;
};

#define M0_JWT_ABSENT INT64_MIN /* nbf/iat not in the token */

/* A verified token. Zero it (or m0_jwt_clear it) before m0_jwt_verify. */
struct m0_jwt {
    struct json_t *claims;      /* the payload object; owned: m0_jwt_clear releases it */
    int64_t exp;                /* seconds since the epoch (a fractional date floored) */
    int64_t nbf, iat;           /* the same, or M0_JWT_ABSENT */
    const char *sub;            /* NUL-terminated, inside claims; NULL when absent */
    size_t sub_len;
    char kid[M0_JWT_KID_MAX + 1];   /* the header's kid, "" when absent */
};

/*
 * Verify the compact token tok (len bytes, not necessarily NUL-terminated)
 * with keys at time now_s (seconds since the epoch), allowing leeway_s
 * (>= 0; M0_JWT_LEEWAY is the documented default) seconds of clock skew.
 * Returns M0_JWT_OK and fills out (release with m0_jwt_clear), or another
 * enum m0_jwt_status code with out cleared (nothing to release).
 * Thread-safe; allocates only the parsed JSON.
 */
int m0_jwt_verify(const char *tok, size_t len, const struct m0_jwt_keys *keys, int64_t now_s, int leeway_s,
                  struct m0_jwt *out);

/* Release what m0_jwt_verify put in t and zero it; safe on a zeroed t. */
void m0_jwt_clear(struct m0_jwt *t);

/* The string claim name of a verified token (e.g. "iss"), NUL-terminated,
 * its length in *len when len != NULL; NULL when absent or not a string.
 * Valid until m0_jwt_clear. */
const char *m0_jwt_claim_str(const struct m0_jwt *t, const char *name, size_t *len);

/* A short public reason for code (no trailing newline, static): what a 401
 * body and an error_description may say. M0_JWT_UNKNOWN_KID reads as
 * M0_JWT_BAD_SIGNATURE. Unknown codes give "invalid token". */
const char *m0_jwt_error_reason(int code);

/* A stable name for code for logs and metrics ("bad_signature",
 * "unknown_kid", ...): tells the operator, never the client. */
const char *m0_jwt_error_name(int code);

/*
 * Sign: write the compact token "HEADER.PAYLOAD.SIG" for the claims
 * payload_json (payload_len bytes, a JSON object; checked) with key (keylen
 * bytes) to out (cap bytes), NUL-terminated. The header is
 * {"alg":"HS256","typ":"JWT"} plus "kid" when kid is neither NULL nor ""
 * (kid: 1..M0_JWT_KID_MAX bytes of UTF-8). Returns the token's length, or
 * M0_ERR when the payload is not a JSON object, the kid is too long, or
 * the token would not fit in cap (out then holds "").
 */
ssize_t m0_jwt_sign_hs256(const char *kid, const char *payload_json, size_t payload_len,
                          const unsigned char *key, size_t keylen, char *out, size_t cap);

/* The parts' base64url: m0_b64url_encode / m0_b64url_decode (base64.h). */
#include "m0/base64.h"

#endif
