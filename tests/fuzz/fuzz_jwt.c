/*
 * fuzz_jwt.c — libFuzzer driver for HS256 tokens and grants (include/m0/
 * jwt.h, grant.h): base64url, the header and claims JSON, the signature
 * check.
 *
 * Input: byte 0 flags (bits 0-1: the signer's kid, 0 "k1", 1 "k2", 2 none,
 * 3 "k1" with k2's key), bytes 1-2 a position (little-endian), then the
 * body. Checked, each on the body:
 * 1. base64url: a decoded body re-encodes to itself (one spelling per byte
 *    string); any body encodes and decodes back to itself.
 * 2. As a token, verified with the keys of tests/unit/jwt_vectors.h at its
 *    clock: never a crash; when accepted, the claims are an object holding
 *    a numeric exp, sub is its "sub" string, a grant's channels each pass
 *    the channel-name rules, once each; a refusal leaves nothing to free.
 * 3. As a claims text, signed with m0_jwt_sign_hs256 when it is a JSON
 *    object: the token verifies (or fails on its claims only: no exp, a bad
 *    date, expired, not yet valid), unless signed with another kid's key
 *    (bad signature, always) or with no kid against two keys (unknown kid).
 *    Then one character, at the position, replaced by another: never
 *    accepted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "m0/grant.h"
#include "m0/jwt.h"
#include "m0/sse.h"
#include "../unit/jwt_vectors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "fuzz_jwt: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                         \
            abort();                                                                \
        }                                                                           \
    } while (0)

static const struct m0_jwt_key key_list[] = {
    {"k1", (const unsigned char *)V_K1, sizeof V_K1 - 1},
    {"k2", (const unsigned char *)V_K2, sizeof V_K2 - 1},
};
static const struct m0_jwt_keys two = {key_list, 2};
static const struct m0_jwt_keys one = {key_list, 1};

static struct m0_grant_keys *grant_keys(void)
{
    static struct m0_grant_keys *k;     /* built once; read-only after */
    if (k == NULL) {
        static const char text[] = "k1 " V_K1 "\nk2 " V_K2 "\n";
        char err[256];
        k = m0_grant_keys_parse(text, sizeof text - 1, "fuzz", err, sizeof err);
        CHECK(k != NULL);
    }
    return k;
}

static void check_b64(const uint8_t *p, size_t n)
{
    static unsigned char raw[8192];
    static char txt[16384];
    ssize_t got = m0_b64url_decode((const char *)p, n, raw, sizeof raw);
    if (got >= 0) {
        ssize_t back = m0_b64url_encode(raw, (size_t)got, txt, sizeof txt);
        CHECK(back == (ssize_t)n && memcmp(txt, p, n) == 0);
    }
    if (n <= sizeof raw) {
        ssize_t e = m0_b64url_encode(p, n, txt, sizeof txt);
        CHECK(e >= 0);
        got = m0_b64url_decode(txt, (size_t)e, raw, sizeof raw);
        CHECK(got == (ssize_t)n && memcmp(raw, p, n) == 0);
    }
}

static void check_accepted(const struct m0_jwt *t)
{
    CHECK(json_is_object(t->claims));
    CHECK(json_is_number(json_object_get(t->claims, "exp")));
    const json_t *sub = json_object_get(t->claims, "sub");
    CHECK(sub == NULL ? t->sub == NULL : t->sub == json_string_value(sub));
}

static void check_grant(const char *tok, size_t n)
{
    struct m0_grant g;
    int rc = m0_grant_verify(tok, n, grant_keys(), V_NOW, &g);
    if (rc != M0_JWT_OK) {
        CHECK(g.jwt.claims == NULL && g.nchannels == 0);
        return;
    }
    check_accepted(&g.jwt);
    CHECK(g.nchannels >= 1 && g.nchannels <= M0_GRANT_MAX_CHANNELS);
    for (unsigned i = 0; i < g.nchannels; i++) {
        CHECK(m0_sse_channel_error(g.channels[i], g.channel_len[i]) == NULL);
        for (unsigned j = 0; j < i; j++)
            CHECK(g.channel_len[i] != g.channel_len[j] || memcmp(g.channels[i], g.channels[j], g.channel_len[i]) != 0);
    }
    m0_grant_clear(&g);
}

static int verify(const char *tok, size_t n, const struct m0_jwt_keys *k)
{
    struct m0_jwt t;
    int rc = m0_jwt_verify(tok, n, k, V_NOW, M0_JWT_LEEWAY, &t);
    if (rc == M0_JWT_OK)
        check_accepted(&t);
    else
        CHECK(t.claims == NULL);
    m0_jwt_clear(&t);
    return rc;
}

static void check_signed(const uint8_t *p, size_t n, unsigned mode, size_t pos)
{
    static char tok[M0_JWT_MAX * 2];
    const char *kid = mode == 1 ? "k2" : mode == 2 ? NULL : "k1";
    const struct m0_jwt_key *key = &key_list[mode == 1 || mode == 3];
    ssize_t len = m0_jwt_sign_hs256(kid, (const char *)p, n, key->secret, key->len, tok, sizeof tok);
    if (len < 0)
        return;                       /* not an object, or too large */
    if ((size_t)len > M0_JWT_MAX) {
        CHECK(verify(tok, (size_t)len, &two) == M0_JWT_TOO_LARGE);
        return;
    }
    int rc = verify(tok, (size_t)len, mode == 2 ? &one : &two);
    if (mode == 3)
        CHECK(rc == M0_JWT_BAD_SIGNATURE);
    else
        CHECK(rc == M0_JWT_OK || rc == M0_JWT_NO_EXP || rc == M0_JWT_BAD_CLAIMS || rc == M0_JWT_EXPIRED ||
              rc == M0_JWT_NOT_YET);
    if (mode == 2)
        CHECK(verify(tok, (size_t)len, &two) == M0_JWT_UNKNOWN_KID);
    check_grant(tok, (size_t)len);

    /* One character changed: never accepted. */
    size_t at = pos % (size_t)len;
    char was = tok[at];
    tok[at] = was == 'A' ? 'B' : was == '.' ? 'x' : 'A';
    CHECK(verify(tok, (size_t)len, mode == 2 ? &one : &two) != M0_JWT_OK);
    tok[at] = was;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    unsigned mode = data[0] & 3;
    size_t pos = (size_t)data[1] | (size_t)data[2] << 8;
    const uint8_t *body = data + 3;
    size_t n = size - 3;

    check_b64(body, n);
    verify((const char *)body, n, &two);
    verify((const char *)body, n, &one);
    check_grant((const char *)body, n);
    check_signed(body, n, mode, pos);
    return 0;
}
