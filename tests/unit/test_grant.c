/*
 * test_grant.c — signed stream grants (src/core/grant.c): the key file (format,
 * refusals, mode check, reload that keeps the old keys on a bad file),
 * the channels claim on PyJWT-minted tokens, the 401/400 answers, the
 * token of a request (Bearer, ?token=, cookie), origins, and the
 * --grant-* flags through m0_config_parse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "m0/cli.h"
#include "m0/config.h"
#include "m0/grant.h"
#include "m0/keyfile.h"
#include "m0/http.h"
#include "jwt_vectors.h"

static const char key_text[] =
    "# grant keys: KID SECRET\n"
    "\n"
    "k1 " V_K1 "\n"
    "   # an indented comment\n"
    "k2\t\t" V_K2 "  \r\n"
    "k3 " V_K3 "\n"
    "k4 a secret with inner spaces, 32+ bytes long\n";

static const char *vec(const char *name)
{
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        if (strcmp(vectors[i].name, name) == 0)
            return vectors[i].token;
    }
    fail_msg("no vector %s", name);
    return NULL;
}

static struct m0_grant_keys *sample_keys(void)
{
    char err[256];
    struct m0_grant_keys *k = m0_grant_keys_parse(key_text, sizeof key_text - 1, "keys", err, sizeof err);
    if (k == NULL)
        fail_msg("%s", err);
    return k;
}

/* ------------------------------------------------------------ key file */

static void test_key_file_format(void **state)
{
    (void)state;
    struct m0_grant_keys *k = sample_keys();
    const struct m0_jwt_keys *j = m0_grant_keys_jwt(k);
    assert_int_equal(j->n, 4);
    assert_string_equal(j->v[0].kid, "k1");
    assert_int_equal(j->v[0].len, sizeof V_K1 - 1);
    assert_memory_equal(j->v[0].secret, V_K1, sizeof V_K1 - 1);
    assert_string_equal(j->v[1].kid, "k2");             /* tabs, trailing blanks and CR dropped */
    assert_int_equal(j->v[1].len, sizeof V_K2 - 1);
    assert_memory_equal(j->v[2].secret, V_K3, sizeof V_K3 - 1);   /* UTF-8 bytes as they are */
    assert_string_equal((const char *)j->v[3].secret, "a secret with inner spaces, 32+ bytes long");
    m0_grant_keys_free(k);
    m0_grant_keys_free(NULL);
}

static void test_key_file_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"k1 short-secret\n", "keys:1: the secret is shorter than 32 bytes"},
        {"# c\nk1\n", "keys:2: want KID SECRET"},
        {"k1 " V_K1 "\nk1 " V_K2 "\n", "keys:2: the kid is given twice"},
        {"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk " V_K1, "keys:1: the kid is longer"},
        {"k\xc3\xa9 " V_K1 "\n", "keys:1: the kid must be printable ASCII"},
        {"k1 \xff" V_K1 "\n", "keys:1: the secret is not UTF-8"},
        {"k1 \xed\xa0\x80" V_K1 "\n", "keys:1: the secret is not UTF-8"},        /* a surrogate */
        {"k1 \xc0\xaf" V_K1 "\n", "keys:1: the secret is not UTF-8"},            /* overlong */
        {"", "keys: no key"},
        {"# only a comment\n\n   \n", "keys: no key"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_null(m0_grant_keys_parse(bad[i].text, strlen(bad[i].text), "keys", err, sizeof err));
        if (strstr(err, bad[i].want) == NULL)
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].want);
        assert_non_null(strstr(err, "--grant-key-file"));
        assert_null(strchr(err, '\n'));
        assert_null(strstr(err, "secret-"));            /* never a secret in the message */
    }
    /* A NUL byte. */
    static const char nul[] = "k1 " V_K1 "\0\n";
    assert_null(m0_grant_keys_parse(nul, sizeof nul - 1, "keys", err, sizeof err));
    assert_non_null(strstr(err, "NUL"));
    /* A secret over 512 bytes; more than 64 keys. */
    static char big[64 * 1024];
    size_t n = (size_t)snprintf(big, sizeof big, "k1 ");
    memset(big + n, 's', 513);
    assert_null(m0_grant_keys_parse(big, n + 513, "keys", err, sizeof err));
    assert_non_null(strstr(err, "longer than 512"));
    n = 0;
    for (int i = 0; i < 65; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "k%d %s\n", i, V_K1);
    assert_null(m0_grant_keys_parse(big, n, "keys", err, sizeof err));
    assert_non_null(strstr(err, "keys:65: more than 64 keys"));
}

static char tmpdir[64];

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void test_key_file_load_and_mode(void **state)
{
    (void)state;
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/keys", tmpdir);
    write_file(path, key_text, 0600);
    struct m0_grant_keys *k = m0_grant_keys_load(path, err, sizeof err);
    assert_non_null(k);
    assert_int_equal(m0_grant_keys_jwt(k)->n, 4);
    m0_grant_keys_free(k);
    assert_non_null(k = m0_grant_keys_load(path, err, sizeof err));
    m0_grant_keys_free(k);
    chmod(path, 0400);
    assert_non_null(k = m0_grant_keys_load(path, err, sizeof err));
    m0_grant_keys_free(k);
    /* Any access for group or others: refused, with the fix named. */
    static const mode_t open_modes[] = {0640, 0604, 0644, 0620, 0601, 0610};
    for (size_t i = 0; i < sizeof open_modes / sizeof open_modes[0]; i++) {
        chmod(path, open_modes[i]);
        assert_null(m0_grant_keys_load(path, err, sizeof err));
        assert_non_null(strstr(err, "group or other users have access"));
        assert_non_null(strstr(err, "chmod 600"));
        assert_non_null(strstr(err, path));
        assert_null(strchr(err, '\n'));
    }
    assert_null(m0_grant_keys_load(tmpdir, err, sizeof err));
    assert_non_null(strstr(err, "not a regular file"));
    snprintf(path, sizeof path, "%s/missing", tmpdir);
    assert_null(m0_grant_keys_load(path, err, sizeof err));
    assert_non_null(strstr(err, "cannot open"));
}

/* --grip-key-file under the grant key file's rule (keyfile.h, issue 27
 * item 20): the first line is the key; the same refusals, the same shape. */
static void test_grip_key_file(void **state)
{
    (void)state;
    char path[128], err[256];
    unsigned char *key = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/grip", tmpdir);
    write_file(path, "the-grip-key with spaces\r\nsecond line\n", 0600);
    assert_int_equal(m0_keyfile_grip(path, &key, &len, err, sizeof err), M0_OK);
    assert_int_equal(len, 24);
    assert_memory_equal(key, "the-grip-key with spaces", 24);
    m0_keyfile_free(key, len);
    write_file(path, "no-newline-key", 0400);
    assert_int_equal(m0_keyfile_grip(path, &key, &len, err, sizeof err), M0_OK);
    assert_int_equal(len, 14);
    m0_keyfile_free(key, len);
    static const mode_t open_modes[] = {0640, 0604, 0620, 0601, 0610};
    for (size_t i = 0; i < sizeof open_modes / sizeof open_modes[0]; i++) {
        chmod(path, open_modes[i]);
        assert_int_equal(m0_keyfile_grip(path, &key, &len, err, sizeof err), M0_ERR);
        char want[300];
        snprintf(want, sizeof want, "m0serve: error: --grip-key-file: %s: group or other users have access "
                 "(mode %04o): chmod 600 it", path, (unsigned)open_modes[i]);
        assert_string_equal(err, want);
    }
    write_file(path, "\nkey on the second line\n", 0600);
    assert_int_equal(m0_keyfile_grip(path, &key, &len, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "the first line (the key) is empty"));
    FILE *f = fopen(path, "w");
    fwrite("ab\0cd\n", 1, 6, f);
    fclose(f);
    assert_int_equal(m0_keyfile_grip(path, &key, &len, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "NUL"));
    assert_int_equal(m0_keyfile_grip(tmpdir, &key, &len, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "not a regular file"));
    f = fopen(path, "w");
    for (int i = 0; i < 5000; i++)
        fputc('k', f);
    fclose(f);
    assert_int_equal(m0_keyfile_grip(path, &key, &len, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "larger than 4 KiB"));
}

static void test_key_file_reload(void **state)
{
    (void)state;
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/rotate", tmpdir);
    write_file(path, "k1 " V_K1 "\n", 0600);
    struct m0_grant_keys *cur = m0_grant_keys_load(path, err, sizeof err);
    assert_non_null(cur);
    struct m0_grant g;
    const char *t1 = vec("valid_k1"), *t2 = vec("valid_k2");
    assert_int_equal(m0_grant_verify(t1, strlen(t1), cur, V_NOW, &g), M0_JWT_OK);
    m0_grant_clear(&g);

    /* A broken file: the old keys stay, and go on verifying. */
    write_file(path, "k1 " V_K1 "\nk2 short\n", 0600);
    struct m0_grant_keys *before = cur;
    assert_int_equal(m0_grant_keys_reload(&cur, path, err, sizeof err), M0_ERR);
    assert_ptr_equal(cur, before);
    assert_non_null(strstr(err, ":2: the secret is shorter"));
    assert_int_equal(m0_grant_verify(t1, strlen(t1), cur, V_NOW, &g), M0_JWT_OK);
    m0_grant_clear(&g);
    chmod(path, 0644);
    assert_int_equal(m0_grant_keys_reload(&cur, path, err, sizeof err), M0_ERR);
    assert_ptr_equal(cur, before);

    /* Rotation: both kids live, then the old one gone. */
    write_file(path, "k1 " V_K1 "\nk2 " V_K2 "\n", 0600);
    assert_int_equal(m0_grant_keys_reload(&cur, path, err, sizeof err), M0_OK);
    assert_int_equal(m0_grant_verify(t1, strlen(t1), cur, V_NOW, &g), M0_JWT_OK);
    m0_grant_clear(&g);
    assert_int_equal(m0_grant_verify(t2, strlen(t2), cur, V_NOW, &g), M0_JWT_OK);
    assert_string_equal(g.jwt.sub, "bob");
    m0_grant_clear(&g);
    write_file(path, "k2 " V_K2 "\n", 0600);
    assert_int_equal(m0_grant_keys_reload(&cur, path, err, sizeof err), M0_OK);
    assert_int_equal(m0_grant_verify(t1, strlen(t1), cur, V_NOW, &g), M0_JWT_UNKNOWN_KID);
    assert_int_equal(m0_grant_verify(t2, strlen(t2), cur, V_NOW, &g), M0_JWT_OK);
    m0_grant_clear(&g);
    m0_grant_keys_free(cur);
}

static struct m0_grant_keys *keys_of(const char *text)
{
    char err[256];
    struct m0_grant_keys *k = m0_grant_keys_parse(text, strlen(text), "keys", err, sizeof err);
    if (k == NULL)
        fail_msg("%s", err);
    return k;
}

/* The key a worker signs with during a rotation: the newest of its own
 * that every worker serving verifies (docs/realtime.md "Rotation"). */
static void test_newest_shared_key(void **state)
{
    (void)state;
    struct m0_grant_keys *o = keys_of("k1 " V_K1 "\n"), *n = keys_of("k1 " V_K1 "\nk2 " V_K2 "\n"),
                         *n3 = keys_of("k0 " V_K3 "\nk1 " V_K1 "\nk2 " V_K2 "\n"),
                         *moved = keys_of("k2 " V_K2 "\nk1 " V_K1 "\n"), *fresh = keys_of("k3 " V_K3 "\n"),
                         *same_kid = keys_of("k1 " V_K2 "\nk2 " V_K2 "\n");
    const struct m0_grant_keys *old[] = {o}, *both[] = {o, n}, *newer[] = {n, n3};
    assert_int_equal(m0_grant_keys_newest_shared(n, NULL, 0), 1);      /* nobody else: the last */
    assert_int_equal(m0_grant_keys_newest_shared(n, old, 1), 0);       /* k2 added: k1 until o is gone */
    assert_int_equal(m0_grant_keys_newest_shared(n, both, 2), 0);      /* k itself among them */
    assert_int_equal(m0_grant_keys_newest_shared(o, both, 2), 0);
    assert_int_equal(m0_grant_keys_newest_shared(n3, newer, 2), 2);    /* both verify k2: it signs */
    assert_int_equal(m0_grant_keys_newest_shared(moved, both, 2), 1);  /* file order decides "newest" */
    assert_int_equal(m0_grant_keys_newest_shared(fresh, both, 2), -1); /* every key replaced */
    assert_int_equal(m0_grant_keys_newest_shared(same_kid, old, 1), -1);   /* k1 with another secret is another key */
    const struct m0_grant_keys *sk[] = {same_kid};
    assert_int_equal(m0_grant_keys_newest_shared(n, sk, 1), 1);        /* ... but k2 is the same */
    m0_grant_keys_free(o);
    m0_grant_keys_free(n);
    m0_grant_keys_free(n3);
    m0_grant_keys_free(moved);
    m0_grant_keys_free(fresh);
    m0_grant_keys_free(same_kid);
}

/* --------------------------------------------------------------- verify */

static int grant(const char *name, struct m0_grant *g)
{
    static struct m0_grant_keys *k;
    if (k == NULL)
        k = sample_keys();
    const char *t = vec(name);
    int rc = m0_grant_verify(t, strlen(t), k, V_NOW, g);
    if (rc != M0_JWT_OK)
        assert_int_equal(g->nchannels, 0);
    return rc;
}

static void test_grant_channels(void **state)
{
    (void)state;
    struct m0_grant g;
    assert_int_equal(grant("valid_k1", &g), M0_JWT_OK);
    assert_int_equal(g.nchannels, 2);
    assert_string_equal(g.channels[0], "news");
    assert_string_equal(g.channels[1], "chat");
    assert_int_equal(g.channel_len[1], 4);
    assert_string_equal(g.jwt.sub, "alice");
    assert_true(m0_grant_covers(&g, "chat", 4));
    assert_false(m0_grant_covers(&g, "cha", 3));
    assert_false(m0_grant_covers(&g, "other", 5));
    m0_grant_clear(&g);
    assert_int_equal(g.nchannels, 0);

    assert_int_equal(grant("channels_repeat", &g), M0_JWT_OK);     /* a, b, a: held once each */
    assert_int_equal(g.nchannels, 2);
    assert_string_equal(g.channels[0], "a");
    assert_string_equal(g.channels[1], "b");
    m0_grant_clear(&g);
    assert_int_equal(grant("valid_k3_utf8_key", &g), M0_JWT_OK);
    m0_grant_clear(&g);
    /* m0pub.grant's token (python/m0pub.py): the same claims, read here. */
    assert_int_equal(grant("m0pub_k2", &g), M0_JWT_OK);
    assert_string_equal(g.jwt.kid, "k2");
    assert_string_equal(g.jwt.sub, "dave");
    assert_int_equal(g.jwt.exp, V_NOW + 600);
    assert_int_equal(g.jwt.iat, V_NOW);
    assert_int_equal(g.nchannels, 2);
    m0_grant_clear(&g);
}

static void test_grant_refusals(void **state)
{
    (void)state;
    struct m0_grant g;
    assert_int_equal(grant("channels_string", &g), M0_GRANT_BAD_CHANNELS);
    assert_int_equal(grant("channels_number_item", &g), M0_GRANT_BAD_CHANNELS);
    assert_int_equal(grant("channels_33", &g), M0_GRANT_BAD_CHANNELS);
    assert_int_equal(grant("channels_missing", &g), M0_GRANT_NO_CHANNELS);
    assert_int_equal(grant("channels_empty", &g), M0_GRANT_NO_CHANNELS);
    assert_int_equal(grant("channel_reserved", &g), M0_GRANT_BAD_CHANNEL);
    assert_int_equal(grant("channel_control", &g), M0_GRANT_BAD_CHANNEL);
    assert_int_equal(grant("channel_non_ascii", &g), M0_GRANT_BAD_CHANNEL);
    assert_int_equal(grant("channel_too_long", &g), M0_GRANT_BAD_CHANNEL);
    /* The token's own refusals come through unchanged. */
    assert_int_equal(grant("alg_none", &g), M0_JWT_BAD_ALG);
    assert_int_equal(grant("other_kids_key", &g), M0_JWT_BAD_SIGNATURE);
    assert_int_equal(grant("unknown_kid", &g), M0_JWT_UNKNOWN_KID);
    assert_int_equal(grant("expired", &g), M0_JWT_EXPIRED);
    assert_int_equal(grant("nbf_future", &g), M0_JWT_NOT_YET);
    assert_int_equal(grant("no_exp", &g), M0_JWT_NO_EXP);
    assert_int_equal(grant("dup_claims", &g), M0_JWT_BAD_CLAIMS);
    const char *t = vec("valid_k1");
    assert_int_equal(m0_grant_verify(t, strlen(t), NULL, V_NOW, &g), M0_JWT_UNKNOWN_KID);
}

static void test_answers(void **state)
{
    (void)state;
    char h[256];
    assert_int_equal(m0_grant_http_status(M0_GRANT_NO_TOKEN), 401);
    m0_grant_challenge(M0_GRANT_NO_TOKEN, h, sizeof h);
    assert_string_equal(h, "Bearer");                  /* RFC 6750 §3.1: no error without credentials */
    assert_int_equal(m0_grant_http_status(M0_GRANT_BAD_REQUEST), 400);
    m0_grant_challenge(M0_GRANT_BAD_REQUEST, h, sizeof h);
    assert_true(strncmp(h, "Bearer error=\"invalid_request\"", 30) == 0);
    assert_int_equal(m0_grant_http_status(M0_JWT_EXPIRED), 401);
    size_t n = m0_grant_challenge(M0_JWT_EXPIRED, h, sizeof h);
    assert_string_equal(h, "Bearer error=\"invalid_token\", error_description=\"token expired\"");
    assert_int_equal(n, strlen(h));
    char a[256], b[256];
    m0_grant_challenge(M0_JWT_UNKNOWN_KID, a, sizeof a);
    m0_grant_challenge(M0_JWT_BAD_SIGNATURE, b, sizeof b);
    assert_string_equal(a, b);                         /* nothing tells a forger which kids exist */
    assert_string_equal(m0_grant_error_reason(M0_JWT_UNKNOWN_KID), m0_grant_error_reason(M0_JWT_BAD_SIGNATURE));
    assert_int_equal(m0_grant_challenge(M0_JWT_EXPIRED, h, 10), 9);
    assert_string_equal(h, "Bearer er");
    static const int codes[] = {M0_GRANT_NO_TOKEN, M0_GRANT_BAD_REQUEST, M0_GRANT_NO_CHANNELS,
                                M0_GRANT_BAD_CHANNELS, M0_GRANT_BAD_CHANNEL};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        assert_null(strpbrk(m0_grant_error_reason(codes[i]), "\"\\\r\n"));
}

/* -------------------------------------------------------------- request */

static struct m0_req req;
static struct m0_hdr hdrs[8];

static void request(const char *query)
{
    memset(&req, 0, sizeof req);
    req.method = "GET";
    req.query = query;
    req.query_len = (uint32_t)strlen(query);
    req.hdrs = hdrs;
}

static void header(const char *name, const char *value)
{
    hdrs[req.nhdrs++] = (struct m0_hdr){name, value, (uint32_t)strlen(name), (uint32_t)strlen(value)};
}

static const char *token(const char *cookie, int want)
{
    static char out[256];
    const char *t;
    size_t n;
    assert_int_equal(m0_grant_token(&req, cookie, &t, &n), want);
    if (want != M0_OK)
        return NULL;
    snprintf(out, sizeof out, "%.*s", (int)n, t);
    return out;
}

static void test_token_sources(void **state)
{
    (void)state;
    request("");
    header("Authorization", "Bearer abc.def.ghi");
    assert_string_equal(token(NULL, M0_OK), "abc.def.ghi");
    request("");
    header("authorization", "bearer   abc.def  ");       /* the scheme in any case, RFC 9110 §11.1 */
    assert_string_equal(token("g", M0_OK), "abc.def");
    request("");
    header("Authorization", "Basic Ym9iOnNlY3JldA==");   /* another scheme: not a grant */
    token("g", M0_GRANT_NO_TOKEN);

    request("a=1&token=tok.en.x&b=2");
    assert_string_equal(token(NULL, M0_OK), "tok.en.x");
    request("xtoken=1&token_=2&token");                  /* names compare whole; a bare name is empty */
    assert_string_equal(token(NULL, M0_OK), "");
    request("xtoken=1");
    token(NULL, M0_GRANT_NO_TOKEN);

    /* Cookies: the named one, the first of that name, quotes dropped,
     * several Cookie fields; only when neither header nor query has one. */
    request("");
    header("Cookie", "a=1; gg=no;g=from-cookie; g=second");
    assert_string_equal(token("g", M0_OK), "from-cookie");
    token(NULL, M0_GRANT_NO_TOKEN);
    request("");
    header("Cookie", "a=1");
    header("Cookie", "grant=\"quoted.tok\"");
    assert_string_equal(token("grant", M0_OK), "quoted.tok");
    request("token=q");
    header("Cookie", "grant=c");
    assert_string_equal(token("grant", M0_OK), "q");
    request("");
    header("Authorization", "Bearer h");
    header("Cookie", "grant=c");
    assert_string_equal(token("grant", M0_OK), "h");
}

static void test_token_sent_twice(void **state)
{
    (void)state;
    /* RFC 6750 §3.1 invalid_request: a repeated parameter, or two methods. */
    request("token=a&token=b");
    token(NULL, M0_GRANT_BAD_REQUEST);
    request("token=a");
    header("Authorization", "Bearer b");
    token(NULL, M0_GRANT_BAD_REQUEST);
    request("");
    header("Authorization", "Bearer a");
    header("Authorization", "Bearer b");
    token(NULL, M0_GRANT_BAD_REQUEST);
}

static void test_query_param(void **state)
{
    (void)state;
    const char *v;
    size_t n;
    assert_int_equal(m0_http_query_param("a=1&b=2&a=3", 11, "a", &v, &n), 2);
    assert_int_equal(n, 1);
    assert_true(v[0] == '1');
    assert_int_equal(m0_http_query_param("a=1&b=2", 7, "c", &v, &n), 0);
    assert_null(v);
    assert_int_equal(m0_http_query_param("", 0, "a", &v, &n), 0);
    assert_int_equal(m0_http_query_param("&&a==x&", 7, "a", &v, &n), 1);
    assert_int_equal(n, 2);
    assert_memory_equal(v, "=x", 2);
    assert_int_equal(m0_http_query_param("a=1&b", 3, "b", &v, &n), 0);   /* the length bounds it */
}

/* ---------------------------------------------------------------- flags */

static void test_origins(void **state)
{
    (void)state;
    static const char *const good[] = {"https://app.example.com", "http://localhost:8080", "https://[::1]:8443",
                                       "http://127.0.0.1:3000", "https://xn--caf-dma.example"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const char *why = m0_grant_origin_error(good[i], strlen(good[i]));
        if (why != NULL)
            fail_msg("%s: %s", good[i], why);
    }
    static const char *const bad[] = {"*", "null", "https://a.example/", "https://a.example/path", "https://A.example",
                                      "ftp://x", "app.example", "https://", "https://x:", "https://x:443",
                                      "http://x:80", "https://x:0", "https://x:65536", "https://x:08",
                                      "https://x:123456", "https://[::1", "https://[]", "https://x y",
                                      "https://user@x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (m0_grant_origin_error(bad[i], strlen(bad[i])) == NULL)
            fail_msg("%s accepted", bad[i]);
    }
}

static int parse(struct m0_config *cfg, char *err, int argc, char **argv)
{
    m0_config_defaults(cfg);
    return m0_config_parse(cfg, argc, argv, err, 256);
}

static void test_flags(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *ok[] = {"m0serve", "app:app", "--realtime", "--grant-key-file", "/k", "--grant-path", "/rt/",
                  "--grant-cookie", "grant", "--grant-cors-origin", "https://a.example",
                  "--grant-cors-origin=http://localhost:8080", "--grant-inbound", "/chat/in"};
    assert_int_equal(parse(&cfg, err, 14, ok), M0_OK);
    assert_string_equal(cfg.grant_path, "/rt");        /* normalised as a mount prefix */
    assert_string_equal(cfg.grant_key_file, "/k");
    assert_string_equal(cfg.grant_cookie, "grant");
    assert_int_equal(cfg.ngrant_cors_origins, 2);
    assert_string_equal(cfg.grant_cors_origins[1], "http://localhost:8080");
    assert_string_equal(cfg.grant_inbound, "/chat/in");
    assert_null(cfg.grant_keys);                       /* main loads the file, not the parser */

    char *root[] = {"m0serve", "app:app", "--realtime", "--grant-key-file", "/k", "--grant-path", "/"};
    assert_int_equal(parse(&cfg, err, 7, root), M0_OK);
    assert_string_equal(cfg.grant_path, "");
    char *keys_only[] = {"m0serve", "app:app", "--grant-key-file", "/k"};   /* for m0pub.grant in the app */
    assert_int_equal(parse(&cfg, err, 4, keys_only), M0_OK);
    assert_false(cfg.realtime);
    /* One rule with --grip-key-file (issue 27 item 20): --grant-path
     * implies --realtime (a grant opens a held stream), in either spelling. */
    char *implied[] = {"m0serve", "app:app", "--grant-key-file", "/k", "--grant-path", "/rt"};
    assert_int_equal(parse(&cfg, err, 6, implied), M0_OK);
    assert_true(cfg.realtime);
    setenv("M0_GRANT_PATH", "/rt", 1);
    char *implied_env[] = {"m0serve", "app:app", "--grant-key-file", "/k"};
    assert_int_equal(parse(&cfg, err, 4, implied_env), M0_OK);
    unsetenv("M0_GRANT_PATH");
    assert_true(cfg.realtime);
    assert_string_equal(cfg.grant_path, "/rt");

    static const struct {
        int argc;
        char *argv[10];
        const char *want;
    } bad[] = {
        {4, {"m0serve", "app:app", "--grant-path", "/rt"}, "--grant-path: needs --grant-key-file"},
        {5, {"m0serve", "app:app", "--realtime", "--grant-path", "/rt"}, "--grant-path: needs --grant-key-file"},
        {4, {"m0serve", "app:app", "--grant-cookie", "g"}, "--grant-cookie: needs --grant-path"},
        {4, {"m0serve", "app:app", "--grant-cors-origin", "https://a.example"}, "--grant-cors-origin: needs --grant-path"},
        {4, {"m0serve", "app:app", "--grant-inbound", "/in"}, "--grant-inbound: needs --grant-path"},
        {4, {"m0serve", "app:app", "--grant-path", "rt"}, "--grant-path: invalid value 'rt'"},
        {4, {"m0serve", "app:app", "--grant-path", "/a/../b"}, "--grant-path: invalid value"},
        {4, {"m0serve", "app:app", "--grant-cors-origin", "*"}, "--grant-cors-origin: invalid value '*'"},
        {4, {"m0serve", "app:app", "--grant-cors-origin", "https://a/"}, "--grant-cors-origin: invalid value"},
        {4, {"m0serve", "app:app", "--grant-key-file", ""}, "--grant-key-file: invalid value"},
        {9, {"m0serve", "app:app", "--realtime", "--grant-key-file", "/k", "--grant-path", "/rt", "--grant-cookie",
             "a b"}, "--grant-cookie: invalid value 'a b'"},
        {9, {"m0serve", "app:app", "--realtime", "--grant-key-file", "/k", "--grant-path", "/rt", "--grant-inbound",
             "in"}, "--grant-inbound: invalid value 'in'"},
        {9, {"m0serve", "app:app", "--realtime", "--grant-key-file", "/k", "--grant-path", "/rt", "--grant-inbound",
             "/in?x=1"}, "--grant-inbound: invalid value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(parse(&cfg, err, bad[i].argc, (char **)bad[i].argv), M0_ERR);
        if (strstr(err, bad[i].want) == NULL)
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].want);
        assert_null(strchr(err, '\n'));
    }
}

static void test_origin_list_in_the_environment(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    setenv("M0_GRANT_CORS_ORIGINS", " https://a.example , http://localhost:8080,", 1);
    char *argv[] = {"m0serve", "app:app", "--realtime", "--grant-key-file", "/k", "--grant-path", "/rt"};
    assert_int_equal(parse(&cfg, err, 7, argv), M0_OK);
    assert_int_equal(cfg.ngrant_cors_origins, 2);
    assert_string_equal(cfg.grant_cors_origins[0], "https://a.example");
    /* One on the command line replaces the environment's list. */
    char *argv2[] = {"m0serve", "app:app", "--realtime", "--grant-key-file", "/k", "--grant-path", "/rt",
                     "--grant-cors-origin", "https://b.example"};
    assert_int_equal(parse(&cfg, err, 9, argv2), M0_OK);
    assert_int_equal(cfg.ngrant_cors_origins, 1);
    assert_string_equal(cfg.grant_cors_origins[0], "https://b.example");
    setenv("M0_GRANT_CORS_ORIGINS", "https://a.example,https://x:443", 1);
    assert_int_equal(parse(&cfg, err, 7, argv), M0_ERR);
    assert_non_null(strstr(err, "M0_GRANT_CORS_ORIGINS: invalid value 'https://x:443'"));
    unsetenv("M0_GRANT_CORS_ORIGINS");
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/m0-test-grant-XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_file_format),
        cmocka_unit_test(test_key_file_refusals),
        cmocka_unit_test(test_key_file_load_and_mode),
        cmocka_unit_test(test_key_file_reload),
        cmocka_unit_test(test_newest_shared_key),
        cmocka_unit_test(test_grip_key_file),
        cmocka_unit_test(test_grant_channels),
        cmocka_unit_test(test_grant_refusals),
        cmocka_unit_test(test_answers),
        cmocka_unit_test(test_token_sources),
        cmocka_unit_test(test_token_sent_twice),
        cmocka_unit_test(test_query_param),
        cmocka_unit_test(test_origins),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_origin_list_in_the_environment),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
