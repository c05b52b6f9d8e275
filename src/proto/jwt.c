/*
 * jwt.c — HS256 JSON Web Tokens (see jwt.h): strict base64url, the header
 * and claims through jansson (duplicate members refused), the HMAC through
 * libcrypto and compared in constant time, the payload parsed only once
 * the signature holds.
 */
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "m0/jwt.h"

/* Decoded parts are at most 3/4 of the token. */
#define PART_MAX (M0_JWT_MAX / 4 * 3 + 3)

/* ---------------------------------------------------------------- claims */

/* A NumericDate (RFC 7519 §2: a JSON number, maybe fractional): its floor
 * in *sec, and *frac = 1 when it was not a whole number. M0_ERR for
 * anything else, or a date so far out it would overflow our arithmetic. */
static int numeric_date(const json_t *v, int64_t *sec, int *frac)
{
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x > INT64_MAX / 4 || x < INT64_MIN / 4)
            return M0_ERR;
        *sec = (int64_t)x;
        *frac = 0;
        return M0_OK;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d > -4.0e18 && d < 4.0e18))
            return M0_ERR;           /* NaN cannot be parsed, but stay safe */
        int64_t f = (int64_t)d;
        if ((double)f > d)
            f--;                     /* truncation rounds negatives up */
        *sec = f;
        *frac = (double)f != d;
        return M0_OK;
    }
    return M0_ERR;
}

static json_t *parse_object(const unsigned char *p, size_t n)
{
    json_error_t e;
    json_t *v = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, &e);
    if (v != NULL && !json_is_object(v)) {
        json_decref(v);
        v = NULL;
    }
    return v;
}

/* Check the claims of payload against now; fill out's dates and sub. */
static int check_claims(json_t *claims, int64_t now, int64_t leeway, struct m0_jwt *out)
{
    int64_t exp, t;
    int frac;
    const json_t *v = json_object_get(claims, "exp");
    if (v == NULL)
        return M0_JWT_NO_EXP;
    if (numeric_date(v, &exp, &frac) != M0_OK)
        return M0_JWT_BAD_CLAIMS;
    /* valid while now < exp + leeway: for a fractional exp in (f, f+1),
     * now - leeway <= f. */
    int expired = frac ? now - leeway > exp : now - leeway >= exp;
    out->exp = exp;

    int early = 0;
    if ((v = json_object_get(claims, "nbf")) != NULL) {
        if (numeric_date(v, &t, &frac) != M0_OK)
            return M0_JWT_BAD_CLAIMS;
        early |= frac ? now + leeway <= t : now + leeway < t;    /* before nbf - leeway */
        out->nbf = t;
    }
    if ((v = json_object_get(claims, "iat")) != NULL) {
        if (numeric_date(v, &t, &frac) != M0_OK)
            return M0_JWT_BAD_CLAIMS;
        early |= frac ? t >= now + leeway : t > now + leeway;    /* issued in the future */
        out->iat = t;
    }
    if ((v = json_object_get(claims, "sub")) != NULL) {
        if (!json_is_string(v))
            return M0_JWT_BAD_CLAIMS;
        out->sub = json_string_value(v);
        out->sub_len = json_string_length(v);
    }
    if (expired)
        return M0_JWT_EXPIRED;
    if (early)
        return M0_JWT_NOT_YET;
    return M0_JWT_OK;
}

/* ---------------------------------------------------------------- verify */

/* The key for kid ("" when the token has none), or NULL. */
static const struct m0_jwt_key *select_key(const struct m0_jwt_keys *keys, const char *kid)
{
    if (keys == NULL || keys->n == 0)
        return NULL;
    if (kid[0] == '\0')
        return keys->n == 1 ? &keys->v[0] : NULL;
    for (size_t i = 0; i < keys->n; i++) {
        if (keys->v[i].kid != NULL && strcmp(keys->v[i].kid, kid) == 0)
            return &keys->v[i];
    }
    return NULL;
}

/* Header checks (jwt.h step 3); the kid goes to out->kid. */
static int check_header(const json_t *h, struct m0_jwt *out)
{
    const json_t *alg = json_object_get(h, "alg");
    if (!json_is_string(alg) || json_string_length(alg) != 5 || memcmp(json_string_value(alg), "HS256", 5) != 0)
        return M0_JWT_BAD_ALG;
    const json_t *typ = json_object_get(h, "typ");
    if (typ != NULL && !json_is_string(typ))
        return M0_JWT_BAD_HEADER;
    if (json_object_get(h, "crit") != NULL)
        return M0_JWT_BAD_HEADER;
    const json_t *kid = json_object_get(h, "kid");
    if (kid != NULL) {
        size_t n = json_is_string(kid) ? json_string_length(kid) : 0;
        if (n == 0 || n > M0_JWT_KID_MAX)
            return M0_JWT_BAD_HEADER;
        memcpy(out->kid, json_string_value(kid), n);
        out->kid[n] = '\0';
    }
    return M0_JWT_OK;
}

int m0_jwt_verify(const char *tok, size_t len, const struct m0_jwt_keys *keys, int64_t now_s, int leeway_s,
                  struct m0_jwt *out)
{
    memset(out, 0, sizeof *out);
    out->nbf = out->iat = M0_JWT_ABSENT;
    if (len > M0_JWT_MAX)
        return M0_JWT_TOO_LARGE;
    if (len == 0 || tok == NULL)
        return M0_JWT_MALFORMED;
    const char *end = tok + len;
    const char *d1 = memchr(tok, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', (size_t)(end - d1 - 1)) : NULL;
    /* An empty signature is a shape alg "none" tokens have: refused below,
     * by their header, for the clearer reason. */
    if (d2 == NULL || memchr(d2 + 1, '.', (size_t)(end - d2 - 1)) != NULL || d1 == tok || d2 == d1 + 1)
        return M0_JWT_MALFORMED;

    unsigned char hb[PART_MAX], pb[PART_MAX], sb[PART_MAX];
    ssize_t hn = m0_b64url_decode(tok, (size_t)(d1 - tok), hb, sizeof hb);
    ssize_t pn = m0_b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), pb, sizeof pb);
    ssize_t sn = m0_b64url_decode(d2 + 1, (size_t)(end - d2 - 1), sb, sizeof sb);
    if (hn < 0 || pn < 0 || sn < 0)
        return M0_JWT_MALFORMED;

    json_t *header = parse_object(hb, (size_t)hn);
    if (header == NULL)
        return M0_JWT_BAD_HEADER;
    int rc = check_header(header, out);
    json_decref(header);
    if (rc != M0_JWT_OK)
        goto fail;

    const struct m0_jwt_key *key = select_key(keys, out->kid);
    if (key == NULL) {
        rc = M0_JWT_UNKNOWN_KID;
        goto fail;
    }
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    static const unsigned char empty_key[1];
    if (sn != M0_JWT_SIG_LEN ||
        HMAC(EVP_sha256(), key->len ? key->secret : empty_key, (int)key->len, (const unsigned char *)tok,
             (size_t)(d2 - tok), mac, &maclen) == NULL ||
        maclen != M0_JWT_SIG_LEN || CRYPTO_memcmp(mac, sb, M0_JWT_SIG_LEN) != 0) {
        rc = M0_JWT_BAD_SIGNATURE;
        goto fail;
    }

    json_t *claims = parse_object(pb, (size_t)pn);
    if (claims == NULL) {
        rc = M0_JWT_BAD_CLAIMS;
        goto fail;
    }
    if (leeway_s < 0)
        leeway_s = 0;
    rc = check_claims(claims, now_s, leeway_s, out);
    if (rc != M0_JWT_OK) {
        json_decref(claims);
        goto fail;
    }
    out->claims = claims;
    return M0_JWT_OK;
fail:
    memset(out, 0, sizeof *out);
    out->nbf = out->iat = M0_JWT_ABSENT;
    return rc;
}

void m0_jwt_clear(struct m0_jwt *t)
{
    if (t->claims != NULL)
        json_decref(t->claims);
    memset(t, 0, sizeof *t);
    t->nbf = t->iat = M0_JWT_ABSENT;
}

const char *m0_jwt_claim_str(const struct m0_jwt *t, const char *name, size_t *len)
{
    const json_t *v = t->claims != NULL ? json_object_get(t->claims, name) : NULL;
    if (!json_is_string(v))
        return NULL;
    if (len != NULL)
        *len = json_string_length(v);
    return json_string_value(v);
}

/* ---------------------------------------------------------------- errors */

static const struct {
    const char *name, *reason;
} errors[M0_JWT_STATUS_MAX] = {
    [M0_JWT_OK] = {"ok", "valid token"},
    [M0_JWT_TOO_LARGE] = {"too_large", "token too large"},
    [M0_JWT_MALFORMED] = {"malformed", "malformed token"},
    [M0_JWT_BAD_HEADER] = {"bad_header", "malformed token header"},
    [M0_JWT_BAD_ALG] = {"bad_alg", "unsupported token algorithm (HS256 only)"},
    [M0_JWT_UNKNOWN_KID] = {"unknown_kid", "invalid token signature"},
    [M0_JWT_BAD_SIGNATURE] = {"bad_signature", "invalid token signature"},
    [M0_JWT_BAD_CLAIMS] = {"bad_claims", "malformed token claims"},
    [M0_JWT_NO_EXP] = {"no_exp", "token has no exp claim"},
    [M0_JWT_EXPIRED] = {"expired", "token expired"},
    [M0_JWT_NOT_YET] = {"not_yet_valid", "token not yet valid"},
};

const char *m0_jwt_error_reason(int code)
{
    return code >= 0 && code < M0_JWT_STATUS_MAX ? errors[code].reason : "invalid token";
}

const char *m0_jwt_error_name(int code)
{
    return code >= 0 && code < M0_JWT_STATUS_MAX ? errors[code].name : "invalid";
}

/* ------------------------------------------------------------------ sign */

ssize_t m0_jwt_sign_hs256(const char *kid, const char *payload_json, size_t payload_len,
                          const unsigned char *key, size_t keylen, char *out, size_t cap)
{
    if (cap > 0)
        out[0] = '\0';
    json_t *claims = parse_object((const unsigned char *)payload_json, payload_len);
    if (claims == NULL)
        return M0_ERR;
    json_decref(claims);
    size_t kidlen = kid != NULL ? strlen(kid) : 0;
    if (kidlen > M0_JWT_KID_MAX)
        return M0_ERR;

    json_t *h = json_object();
    if (h == NULL)
        return M0_ERR;
    int bad = json_object_set_new(h, "alg", json_string("HS256")) != 0 ||
              json_object_set_new(h, "typ", json_string("JWT")) != 0 ||
              (kidlen > 0 && json_object_set_new(h, "kid", json_stringn(kid, kidlen)) != 0);
    char hjson[256];
    size_t hlen = bad ? 0 : json_dumpb(h, hjson, sizeof hjson, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (hlen == 0 || hlen > sizeof hjson)
        return M0_ERR;               /* a kid that is not UTF-8, or no memory */

    ssize_t a = m0_b64url_encode((const unsigned char *)hjson, hlen, out, cap);
    if (a < 0 || (size_t)a + 1 >= cap)
        goto small;
    out[a++] = '.';
    ssize_t b = m0_b64url_encode((const unsigned char *)payload_json, payload_len, out + a, cap - (size_t)a);
    if (b < 0 || (size_t)(a + b) + 1 >= cap)
        goto small;
    size_t signed_len = (size_t)(a + b);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    static const unsigned char empty_key[1];
    if (HMAC(EVP_sha256(), keylen ? key : empty_key, (int)keylen, (const unsigned char *)out, signed_len, mac,
             &maclen) == NULL)
        goto small;
    out[signed_len] = '.';
    ssize_t c = m0_b64url_encode(mac, maclen, out + signed_len + 1, cap - signed_len - 1);
    OPENSSL_cleanse(mac, sizeof mac);
    if (c < 0)
        goto small;
    return (ssize_t)(signed_len + 1 + (size_t)c);
small:
    if (cap > 0)
        out[0] = '\0';
    return M0_ERR;
}
