/*
 * grant.h — signed stream grants (issue 18): an HS256 JWT (jwt.h) whose
 * "channels" claim names the channels a client may listen to, verified in
 * C with no Python call; the key file behind --grant-key-file; the token
 * of a request (Authorization: Bearer, ?token=, a cookie); and the checks
 * of the --grant-* flags. Pure: no Python (the key file is read with
 * open/read, nothing else touches the outside).
 *
 * A grant is a JWT with
 *   exp       required (jwt.h; M0_JWT_LEEWAY seconds of skew allowed, also
 *             for nbf and iat)
 *   channels  a JSON array of 1..M0_GRANT_MAX_CHANNELS channel names, each
 *             passing the channel-name rules (m0_sse_channel_error);
 *             repeats are dropped (the first one kept)
 *   sub       optional string: who it was minted for (logged, handed to an
 *             inbound view)
 * and its header's kid naming a key of the key file.
 */
#ifndef M0_GRANT_H
#define M0_GRANT_H

#include "m0/types.h"
#include "m0/jwt.h"

#define M0_GRANT_MAX_CHANNELS 32
#define M0_GRANT_MAX_KEYS     64
#define M0_GRANT_KEY_MIN      32          /* bytes: RFC 7518 §3.2, at least the hash's size */
#define M0_GRANT_KEY_MAX      512         /* bytes of one secret */
#define M0_GRANT_FILE_MAX     (64 * 1024) /* bytes of the key file */
#define M0_GRANT_QUERY_PARAM  "token"     /* RFC 6750 §2.3's place, by this name */
#define M0_GRANT_LAST_ID_PARAM "last_event_id"  /* PREFIX/sse: where to resume when no Last-Event-ID
                                                  header came (a page's new EventSource cannot send one) */
#define M0_GRANT_REFRESH_DEFAULT 30       /* seconds: --grant-refresh when not given */

/* Outcomes beyond enum m0_jwt_status (which m0_grant_verify also returns). */
enum m0_grant_status {
    M0_GRANT_NO_TOKEN = 100,    /* the request carries no token: 401, a bare challenge (RFC 6750 §3.1) */
    M0_GRANT_BAD_REQUEST,       /* a token sent twice, or by two methods: 400 invalid_request */
    M0_GRANT_NO_CHANNELS,       /* no "channels" claim, or an empty one */
    M0_GRANT_BAD_CHANNELS,      /* "channels" not an array of strings, or over M0_GRANT_MAX_CHANNELS */
    M0_GRANT_BAD_CHANNEL,       /* a name that fails the channel-name rules */
};

/* A verified grant. channels[i] (channel_len[i] bytes, NUL-terminated)
 * and jwt.sub point into jwt.claims: valid until m0_grant_clear. */
struct m0_grant {
    struct m0_jwt jwt;
    unsigned nchannels;
    const char *channels[M0_GRANT_MAX_CHANNELS];
    uint16_t channel_len[M0_GRANT_MAX_CHANNELS];
};

/* ---------------------------------------------------------------- keys */

/* A key file's keys; opaque, immutable once loaded. */
struct m0_grant_keys;

/*
 * Load the key file at path: one key a line, "KID SECRET": KID is 1..64
 * printable ASCII bytes without white space, then white space, then SECRET
 * up to the end of the line (trailing white space dropped; inner spaces
 * kept): its UTF-8 bytes (M0_GRANT_KEY_MIN..M0_GRANT_KEY_MAX of them) are
 * the HMAC key, as PyJWT takes a str key. Lines whose first non-blank
 * character is '#' are comments; blank lines are skipped. The last key of
 * the file is the newest: m0pub.grant signs with it when no kid is asked.
 *
 * Refused, with one line in err (cap bytes) naming the file and the line,
 * never a secret: a file that is not a regular file, one whose mode gives
 * group or other users any access (st_mode & 077: "chmod 600"), over
 * M0_GRANT_FILE_MAX bytes, a NUL byte, a malformed line, a secret that is
 * not UTF-8 or of the wrong length, a kid given twice, no key at all, more
 * than M0_GRANT_MAX_KEYS keys. Returns the set (m0_grant_keys_free) or NULL.
 */
struct m0_grant_keys *m0_grant_keys_load(const char *path, char *err, size_t cap);

/* The same rules over text (n bytes) already read; name is what err calls
 * the file. For tests, and for load. */
struct m0_grant_keys *m0_grant_keys_parse(const char *text, size_t n, const char *name, char *err, size_t cap);

/* Wipe the secrets and free k; NULL is fine. */
void m0_grant_keys_free(struct m0_grant_keys *k);

/* The keys as m0_jwt_verify takes them (kids in file order); valid while k
 * lives. */
const struct m0_jwt_keys *m0_grant_keys_jwt(const struct m0_grant_keys *k);

/*
 * Key rotation (docs/realtime.md "Rotation"): the index in k of its newest
 * key (the last in file order) that each of the n sets others[i] also
 * holds — the same kid with the same secret, so a grant signed with it is
 * accepted by whoever verifies with any of them; k's last key when n is 0;
 * -1 when no key of k is in all of them. others may contain k itself.
 */
int m0_grant_keys_newest_shared(const struct m0_grant_keys *k, const struct m0_grant_keys *const *others, size_t n);

/*
 * Key rotation (SIGHUP): load path into a new set and, only when it loads,
 * free *cur and put the new set there; M0_OK. Otherwise *cur is untouched
 * (the old keys go on verifying) and err says why: M0_ERR. Not
 * thread-safe: call it where no verification runs concurrently (the master
 * before forking a new generation, or the loop thread).
 */
int m0_grant_keys_reload(struct m0_grant_keys **cur, const char *path, char *err, size_t cap);

/* -------------------------------------------------------------- verify */

/*
 * Verify the grant tok (len bytes) with keys at now_s (seconds since the
 * epoch) and M0_JWT_LEEWAY: M0_JWT_OK and g filled (m0_grant_clear), or an
 * enum m0_jwt_status / m0_grant_status code with g cleared. keys NULL
 * verifies nothing (M0_JWT_UNKNOWN_KID).
 */
int m0_grant_verify(const char *tok, size_t len, const struct m0_grant_keys *keys, int64_t now_s,
                    struct m0_grant *g);

/* Release g's claims and zero it; safe on a zeroed g. */
void m0_grant_clear(struct m0_grant *g);

/* 1 when the grant names channel (len bytes), else 0. */
int m0_grant_covers(const struct m0_grant *g, const char *channel, size_t len);

/* The public one-line reason for a jwt or grant code (static; the 401
 * body, error_description). */
const char *m0_grant_error_reason(int code);

/* The HTTP status for a refusal code: 400 for M0_GRANT_BAD_REQUEST, else
 * 401 (RFC 6750 §3.1). A valid grant that does not cover what was asked is
 * the caller's 403. */
int m0_grant_http_status(int code);

/* The WWW-Authenticate value for a refusal code (RFC 6750 §3), written to
 * dst (cap bytes, NUL-terminated): "Bearer" when the request had no token,
 * Bearer error="invalid_request" for M0_GRANT_BAD_REQUEST, else
 * Bearer error="invalid_token", error_description="REASON". Returns its
 * length (truncated to cap - 1). */
size_t m0_grant_challenge(int code, char *dst, size_t cap);

/* ------------------------------------------------------------- request */

/*
 * The grant token of request r (its head parsed), in this order:
 *   1. Authorization: Bearer TOKEN (RFC 6750 §2.1; the scheme matched
 *      case-insensitively, RFC 9110 §11.1; another scheme is not a token);
 *   2. the query parameter "token" (RFC 6750 §2.3's method under the name
 *      issue 18 gives it; undecoded: a JWT needs no percent-encoding);
 *   3. the cookie cookie_name when it is not NULL (RFC 6265 §4.2: "a=b; c=d"
 *      in one or more Cookie fields; the first pair of that name; a value in
 *      DQUOTEs loses them) — only when neither 1 nor 2 is present, since a
 *      browser sends its cookies with every request.
 * *tok and *len point into r (not NUL-terminated). Returns M0_OK,
 * M0_GRANT_NO_TOKEN, or M0_GRANT_BAD_REQUEST for two Authorization fields,
 * two "token" parameters, or a header and a parameter both (RFC 6750 §3.1:
 * "uses more than one method").
 */
int m0_grant_token(const struct m0_req *r, const char *cookie_name, const char **tok, size_t *len);

/* --------------------------------------------------------------- flags */

/* NULL when s (n bytes) is a serialized origin (RFC 6454 §6.2) a browser
 * sends in Origin: "http" or "https", "://", a lowercase host name or
 * address ([v6] in brackets), an optional ":PORT" (1..65535, not the
 * scheme's default, which browsers leave out), nothing after; else a
 * static reason. "*" and "null" are refused: credentials go with these
 * requests. */
const char *m0_grant_origin_error(const char *s, size_t n);

/* The --grant-* flags against each other (the key file's contents are
 * m0_grant_keys_load's business): --grant-path needs --grant-key-file (it
 * implies --realtime: m0_config_parse sets it); --grant-cookie, --grant-cors-origin, --grant-inbound,
 * --grant-expire and --grant-refresh need --grant-path; --grant-cookie must be a token (RFC 6265 §4.1.1
 * cookie-name), --grant-inbound an absolute path. M0_OK, or M0_ERR with
 * one line naming the flag in err. */
int m0_grant_check_flags(const struct m0_config *cfg, char *err, size_t cap);

#endif
