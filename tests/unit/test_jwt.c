/*
 * test_jwt.c — HS256 JWTs (src/proto/jwt.c): base64url both ways and its
 * refusals, tokens PyJWT minted (tests/unit/jwt_vectors.py) accepted, the
 * algorithm-confusion tokens, another kid's key, every byte of a token
 * flipped, times around the leeway, malformed and duplicate claims, the
 * size cap, the signer byte for byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "m0/jwt.h"
#include "jwt_vectors.h"

static const struct m0_jwt_key key_list[] = {
    {"k1", (const unsigned char *)V_K1, sizeof V_K1 - 1},
    {"k2", (const unsigned char *)V_K2, sizeof V_K2 - 1},
    {"k3", (const unsigned char *)V_K3, sizeof V_K3 - 1},
};
static const struct m0_jwt_keys keys = {key_list, 3};
static const struct m0_jwt_keys only_k1 = {key_list, 1};

static const char *vec(const char *name)
{
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        if (strcmp(vectors[i].name, name) == 0)
            return vectors[i].token;
    }
    fail_msg("no vector %s", name);
    return NULL;
}

static int verify_at(const char *name, const struct m0_jwt_keys *k, int64_t now, int leeway)
{
    struct m0_jwt t;
    const char *tok = vec(name);
    int rc = m0_jwt_verify(tok, strlen(tok), k, now, leeway, &t);
    if (rc != M0_JWT_OK)
        assert_null(t.claims);          /* nothing to release on refusal */
    m0_jwt_clear(&t);
    return rc;
}

static int verify(const char *name)
{
    return verify_at(name, &keys, V_NOW, M0_JWT_LEEWAY);
}

/* ------------------------------------------------------------- base64url */

static void test_b64url_rfc4648_vectors(void **state)
{
    (void)state;
    /* RFC 4648 §10, padding removed (RFC 7515 §2). */
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const enc[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
    char out[32];
    unsigned char raw[32];
    for (size_t i = 0; i < 7; i++) {
        ssize_t n = m0_b64url_encode((const unsigned char *)plain[i], strlen(plain[i]), out, sizeof out);
        assert_int_equal(n, strlen(enc[i]));
        assert_string_equal(out, enc[i]);
        n = m0_b64url_decode(enc[i], strlen(enc[i]), raw, sizeof raw);
        assert_int_equal(n, strlen(plain[i]));
        assert_memory_equal(raw, plain[i], (size_t)n);
    }
    /* The URL-safe alphabet: 62 is '-', 63 is '_'. */
    static const unsigned char hi[] = {0xfb, 0xff, 0xbf};
    assert_int_equal(m0_b64url_encode(hi, 3, out, sizeof out), 4);
    assert_string_equal(out, "-_-_");
    assert_int_equal(m0_b64url_decode("-_-_", 4, raw, sizeof raw), 3);
    assert_memory_equal(raw, hi, 3);
    /* Too small an output buffer. */
    assert_int_equal(m0_b64url_encode((const unsigned char *)"foo", 3, out, 4), M0_ERR);
    assert_int_equal(m0_b64url_encode((const unsigned char *)"foo", 3, out, 5), 4);
    assert_int_equal(m0_b64url_decode("Zm9vYmFy", 8, raw, 5), M0_ERR);
}

static void test_b64url_refusals(void **state)
{
    (void)state;
    unsigned char raw[32];
    static const char *const bad[] = {
        "Zg==",      /* padding */
        "Zm8=",
        "Zm9v+w",    /* base64's '+' and '/' are not base64url */
        "Zm9v/w",
        "Z",         /* 1 mod 4: six bits cannot make a byte */
        "Zm9vY",
        "Zh",        /* nonzero unused bits: a second spelling of "f" */
        "Zm9",       /* ... of "fo" */
        "Zm 9v",     /* white space */
        "Zm9v\n",
        "Zm\0v",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = i == sizeof bad / sizeof bad[0] - 1 ? 4 : strlen(bad[i]);
        assert_int_equal(m0_b64url_decode(bad[i], n, raw, sizeof raw), M0_ERR);
    }
}

/* --------------------------------------------------------------- accepted */

static void test_pyjwt_tokens_verify(void **state)
{
    (void)state;
    struct m0_jwt t;
    const char *tok = vec("valid_k1");
    assert_int_equal(m0_jwt_verify(tok, strlen(tok), &keys, V_NOW, M0_JWT_LEEWAY, &t), M0_JWT_OK);
    assert_string_equal(t.kid, "k1");
    assert_int_equal(t.exp, V_NOW + 3600);
    assert_int_equal(t.iat, V_NOW - 10);
    assert_true(t.nbf == M0_JWT_ABSENT);
    assert_string_equal(t.sub, "alice");
    assert_int_equal(t.sub_len, 5);
    json_t *ch = json_object_get(t.claims, "channels");
    assert_true(json_is_array(ch) && json_array_size(ch) == 2);
    assert_string_equal(json_string_value(json_array_get(ch, 1)), "chat");
    assert_null(m0_jwt_claim_str(&t, "iss", NULL));
    m0_jwt_clear(&t);
    assert_null(t.claims);

    assert_int_equal(verify("valid_k2"), M0_JWT_OK);
    assert_int_equal(verify("valid_k3_utf8_key"), M0_JWT_OK);   /* the key is the secret's UTF-8 bytes */

    tok = vec("valid_nbf_iat");
    assert_int_equal(m0_jwt_verify(tok, strlen(tok), &keys, V_NOW, M0_JWT_LEEWAY, &t), M0_JWT_OK);
    size_t n = 0;
    assert_string_equal(m0_jwt_claim_str(&t, "iss", &n), "issuer-x");      /* GRIP's iss */
    assert_int_equal(n, 8);
    assert_int_equal(t.nbf, V_NOW - 5);
    assert_null(m0_jwt_claim_str(&t, "exp", NULL));                         /* not a string */
    m0_jwt_clear(&t);
}

static void test_kid_selects_the_key(void **state)
{
    (void)state;
    /* No kid: the set's only key; with several keys a kid is needed. */
    assert_int_equal(verify_at("valid_nokid", &only_k1, V_NOW, 0), M0_JWT_OK);
    assert_int_equal(verify("valid_nokid"), M0_JWT_UNKNOWN_KID);
    /* A kid: that key and no other. */
    assert_int_equal(verify("unknown_kid"), M0_JWT_UNKNOWN_KID);
    assert_int_equal(verify("other_kids_key"), M0_JWT_BAD_SIGNATURE);
    assert_int_equal(verify_at("valid_k2", &only_k1, V_NOW, 0), M0_JWT_UNKNOWN_KID);
    struct m0_jwt_keys none = {NULL, 0};
    assert_int_equal(verify_at("valid_k1", &none, V_NOW, 0), M0_JWT_UNKNOWN_KID);
    assert_int_equal(verify_at("valid_k1", NULL, V_NOW, 0), M0_JWT_UNKNOWN_KID);
    /* The same public reason, so a client cannot tell which kids exist. */
    assert_string_equal(m0_jwt_error_reason(M0_JWT_UNKNOWN_KID), m0_jwt_error_reason(M0_JWT_BAD_SIGNATURE));
    assert_string_not_equal(m0_jwt_error_name(M0_JWT_UNKNOWN_KID), m0_jwt_error_name(M0_JWT_BAD_SIGNATURE));
}

/* ---------------------------------------------------------------- refused */

static void test_algorithm_confusion_refused(void **state)
{
    (void)state;
    assert_int_equal(verify("alg_none"), M0_JWT_BAD_ALG);
    assert_int_equal(verify("alg_hs384"), M0_JWT_BAD_ALG);
    assert_int_equal(verify("alg_hs512"), M0_JWT_BAD_ALG);
    assert_int_equal(verify("alg_rs256_forged"), M0_JWT_BAD_ALG);   /* HMAC'd with the key, still refused */
    assert_int_equal(verify("alg_lower"), M0_JWT_BAD_ALG);          /* "hs256": exactly HS256 */
    assert_int_equal(verify("no_alg"), M0_JWT_BAD_ALG);
    /* alg none with an empty signature part, as such tokens travel. */
    const char *none = vec("alg_none");
    assert_true(none[strlen(none) - 1] == '.');
}

static void test_bad_headers_refused(void **state)
{
    (void)state;
    assert_int_equal(verify("crit"), M0_JWT_BAD_HEADER);
    assert_int_equal(verify("kid_number"), M0_JWT_BAD_HEADER);
    assert_int_equal(verify("dup_header"), M0_JWT_BAD_HEADER);
}

static void test_times(void **state)
{
    (void)state;
    assert_int_equal(verify("expired"), M0_JWT_EXPIRED);
    assert_int_equal(verify("expired_in_leeway"), M0_JWT_OK);
    assert_int_equal(verify_at("expired_in_leeway", &keys, V_NOW, 0), M0_JWT_EXPIRED);
    assert_int_equal(verify("nbf_future"), M0_JWT_NOT_YET);
    assert_int_equal(verify("nbf_in_leeway"), M0_JWT_OK);
    assert_int_equal(verify_at("nbf_in_leeway", &keys, V_NOW, 0), M0_JWT_NOT_YET);
    assert_int_equal(verify("iat_future"), M0_JWT_NOT_YET);
    /* exp = NOW + 0.5: valid through NOW + 30.5 with the leeway. */
    assert_int_equal(verify_at("valid_frac_exp", &keys, V_NOW + 30, M0_JWT_LEEWAY), M0_JWT_OK);
    assert_int_equal(verify_at("valid_frac_exp", &keys, V_NOW + 31, M0_JWT_LEEWAY), M0_JWT_EXPIRED);
    assert_int_equal(verify_at("valid_frac_exp", &keys, V_NOW, 0), M0_JWT_OK);
    assert_int_equal(verify_at("valid_frac_exp", &keys, V_NOW + 1, 0), M0_JWT_EXPIRED);
    /* The exact edge: valid while now < exp + leeway. */
    assert_int_equal(verify_at("valid_k1", &keys, V_NOW + 3600 + 29, 30), M0_JWT_OK);
    assert_int_equal(verify_at("valid_k1", &keys, V_NOW + 3600 + 30, 30), M0_JWT_EXPIRED);
    assert_int_equal(verify_at("valid_k1", &keys, V_NOW + 3600, -5), M0_JWT_EXPIRED);    /* negative: 0 */
}

static void test_bad_claims_refused(void **state)
{
    (void)state;
    assert_int_equal(verify("no_exp"), M0_JWT_NO_EXP);
    assert_int_equal(verify("exp_string"), M0_JWT_BAD_CLAIMS);
    assert_int_equal(verify("exp_bool"), M0_JWT_BAD_CLAIMS);
    assert_int_equal(verify("sub_number"), M0_JWT_BAD_CLAIMS);
    assert_int_equal(verify("dup_claims"), M0_JWT_BAD_CLAIMS);
    assert_int_equal(verify("claims_array"), M0_JWT_BAD_CLAIMS);
    assert_int_equal(verify("claims_not_json"), M0_JWT_BAD_CLAIMS);
}

/* Every character of a valid token replaced by every other base64url
 * character (and by '=', '+', '.'): never accepted. */
static void test_every_flipped_byte_refused(void **state)
{
    (void)state;
    static const char repl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+.";
    const char *tok = vec("valid_k1");
    size_t n = strlen(tok);
    char buf[M0_JWT_MAX];
    const char *d1 = strchr(tok, '.'), *d2 = strrchr(tok, '.');
    unsigned seen[3] = {0};
    for (size_t i = 0; i < n; i++) {
        if (tok[i] == '.')
            continue;
        int part = tok + i < d1 ? 0 : tok + i < d2 ? 1 : 2;
        for (const char *r = repl; *r; r++) {
            if (*r == tok[i])
                continue;
            memcpy(buf, tok, n);
            buf[i] = *r;
            struct m0_jwt t;
            int rc = m0_jwt_verify(buf, n, &keys, V_NOW, M0_JWT_LEEWAY, &t);
            if (rc == M0_JWT_OK)
                fail_msg("accepted with byte %zu (part %d) set to '%c'", i, part, *r);
            assert_null(t.claims);
            /* A changed payload or signature is a bad signature (or not
             * base64url at all), never a parsed claim. */
            if (part > 0)
                assert_true(rc == M0_JWT_BAD_SIGNATURE || rc == M0_JWT_MALFORMED);
            seen[part]++;
        }
    }
    assert_true(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    /* A bit flipped (not a character swapped) in each part. */
    for (int part = 0; part < 3; part++) {
        const char *at = part == 0 ? tok + 3 : part == 1 ? d1 + 3 : d2 + 3;
        memcpy(buf, tok, n);
        buf[at - tok] ^= 0x01;
        struct m0_jwt t;
        assert_int_not_equal(m0_jwt_verify(buf, n, &keys, V_NOW, M0_JWT_LEEWAY, &t), M0_JWT_OK);
    }
}

static void test_shape_and_size(void **state)
{
    (void)state;
    struct m0_jwt t;
    const char *tok = vec("valid_k1");
    size_t n = strlen(tok);
    /* Over the cap: refused before any decoding, whatever it holds. */
    static char huge[M0_JWT_MAX + 2];
    memset(huge, 'A', sizeof huge);
    memcpy(huge, tok, n);
    assert_int_equal(m0_jwt_verify(huge, M0_JWT_MAX + 1, &keys, V_NOW, 30, &t), M0_JWT_TOO_LARGE);
    assert_int_equal(m0_jwt_verify(huge, M0_JWT_MAX, &keys, V_NOW, 30, &t), M0_JWT_MALFORMED);
    assert_int_equal(m0_jwt_verify(tok, 0, &keys, V_NOW, 30, &t), M0_JWT_MALFORMED);

    char buf[M0_JWT_MAX];
    static const char *const shapes[] = {"abc", "abc.def", "a.b.c.d", ".eyJ9.sig", "eyJ9..sig"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        assert_int_equal(m0_jwt_verify(shapes[i], strlen(shapes[i]), &keys, V_NOW, 30, &t), M0_JWT_MALFORMED);
    /* An empty signature part is a shape ("{}" has no alg). */
    assert_int_equal(m0_jwt_verify("e30.e30.", 8, &keys, V_NOW, 30, &t), M0_JWT_BAD_ALG);
    /* Padding on the signature (base64, not base64url): malformed. */
    snprintf(buf, sizeof buf, "%s=", tok);
    assert_int_equal(m0_jwt_verify(buf, n + 1, &keys, V_NOW, 30, &t), M0_JWT_MALFORMED);
    /* A NUL inside: the length is what counts, and NUL is no base64url. */
    memcpy(buf, tok, n);
    buf[5] = '\0';
    assert_int_equal(m0_jwt_verify(buf, n, &keys, V_NOW, 30, &t), M0_JWT_MALFORMED);
    /* The header not JSON / not an object. */
    assert_int_equal(m0_jwt_verify("bm90anNvbg.eyJ9.c2ln", 20, &keys, V_NOW, 30, &t), M0_JWT_BAD_HEADER);
    assert_int_equal(m0_jwt_verify("WzFd.eyJ9.c2ln", 14, &keys, V_NOW, 30, &t), M0_JWT_BAD_HEADER);
    /* A short signature. */
    char *dot = strrchr(memcpy(buf, tok, n + 1), '.');
    strcpy(dot + 1, "c2ln");
    assert_int_equal(m0_jwt_verify(buf, strlen(buf), &keys, V_NOW, 30, &t), M0_JWT_BAD_SIGNATURE);
    /* Only the first len bytes count: a valid token followed by junk. */
    snprintf(buf, sizeof buf, "%sJUNK", tok);
    assert_int_equal(m0_jwt_verify(buf, n, &keys, V_NOW, 30, &t), M0_JWT_OK);
    m0_jwt_clear(&t);
}

/* ------------------------------------------------------------------- sign */

static void test_signer(void **state)
{
    (void)state;
    char out[1024];
    const char *p = V_SIGNED_PAYLOAD;
    ssize_t n = m0_jwt_sign_hs256("k1", p, strlen(p), (const unsigned char *)V_K1, sizeof V_K1 - 1, out, sizeof out);
    /* Byte for byte what tests/unit/jwt_vectors.py computed and PyJWT decoded. */
    assert_int_equal(n, strlen(vec("c_signer_k1")));
    assert_string_equal(out, vec("c_signer_k1"));
    struct m0_jwt t;
    assert_int_equal(m0_jwt_verify(out, (size_t)n, &keys, V_NOW, 0, &t), M0_JWT_OK);
    assert_string_equal(t.sub, "carol");
    m0_jwt_clear(&t);

    /* No kid: the header has none, and a one-key set verifies it. */
    n = m0_jwt_sign_hs256(NULL, p, strlen(p), (const unsigned char *)V_K1, sizeof V_K1 - 1, out, sizeof out);
    assert_true(n > 0);
    unsigned char hdr[128];
    ssize_t hn = m0_b64url_decode(out, (size_t)(strchr(out, '.') - out), hdr, sizeof hdr);
    assert_int_equal(hn, strlen("{\"alg\":\"HS256\",\"typ\":\"JWT\"}"));
    assert_memory_equal(hdr, "{\"alg\":\"HS256\",\"typ\":\"JWT\"}", (size_t)hn);
    assert_int_equal(m0_jwt_verify(out, (size_t)n, &only_k1, V_NOW, 0, &t), M0_JWT_OK);
    m0_jwt_clear(&t);

    /* Refusals: no room (out left ""), a payload that is not an object, a
     * kid too long. */
    assert_int_equal(m0_jwt_sign_hs256("k1", p, strlen(p), (const unsigned char *)V_K1, 36, out, 40), M0_ERR);
    assert_string_equal(out, "");
    assert_int_equal(m0_jwt_sign_hs256("k1", p, (size_t)n, (const unsigned char *)V_K1, 36, out, (size_t)n), M0_ERR);
    assert_int_equal(m0_jwt_sign_hs256("k1", "[1]", 3, (const unsigned char *)V_K1, 36, out, sizeof out), M0_ERR);
    assert_int_equal(m0_jwt_sign_hs256("k1", "{\"a\":1,\"a\":2}", 13, (const unsigned char *)V_K1, 36, out,
                                       sizeof out), M0_ERR);
    char longkid[M0_JWT_KID_MAX + 2];
    memset(longkid, 'k', sizeof longkid - 1);
    longkid[sizeof longkid - 1] = '\0';
    assert_int_equal(m0_jwt_sign_hs256(longkid, p, strlen(p), (const unsigned char *)V_K1, 36, out, sizeof out),
                     M0_ERR);
    longkid[M0_JWT_KID_MAX] = '\0';
    assert_true(m0_jwt_sign_hs256(longkid, p, strlen(p), (const unsigned char *)V_K1, 36, out, sizeof out) > 0);
}

static void test_reasons(void **state)
{
    (void)state;
    for (int c = 0; c < M0_JWT_STATUS_MAX; c++) {
        const char *r = m0_jwt_error_reason(c);
        assert_true(r != NULL && r[0] != '\0');
        assert_null(strpbrk(r, "\"\\\r\n"));      /* fits an error_description */
        assert_true(m0_jwt_error_name(c)[0] != '\0');
    }
    assert_string_equal(m0_jwt_error_reason(-1), "invalid token");
    assert_string_equal(m0_jwt_error_reason(M0_JWT_STATUS_MAX), "invalid token");
    assert_string_equal(m0_jwt_error_reason(M0_JWT_EXPIRED), "token expired");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64url_rfc4648_vectors),
        cmocka_unit_test(test_b64url_refusals),
        cmocka_unit_test(test_pyjwt_tokens_verify),
        cmocka_unit_test(test_kid_selects_the_key),
        cmocka_unit_test(test_algorithm_confusion_refused),
        cmocka_unit_test(test_bad_headers_refused),
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_bad_claims_refused),
        cmocka_unit_test(test_every_flipped_byte_refused),
        cmocka_unit_test(test_shape_and_size),
        cmocka_unit_test(test_signer),
        cmocka_unit_test(test_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
