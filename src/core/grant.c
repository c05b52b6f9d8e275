/*
 * grant.c — signed stream grants (see grant.h): the key file, the
 * "channels" claim on top of jwt.c, the token of a request, and the
 * --grant-* flag checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "m0/config.h"
#include "m0/grant.h"
#include "m0/http.h"
#include "m0/keyfile.h"
#include "m0/sse.h"

#define KEYFILE_FLAG "--grant-key-file"

struct m0_grant_keys {
    struct m0_jwt_keys set;             /* what m0_jwt_verify reads: .v is keys */
    struct m0_jwt_key keys[M0_GRANT_MAX_KEYS];
    char *text;                         /* the file's copy; kids and secrets NUL-terminated in it */
    size_t text_len;
};

/* ------------------------------------------------------------- key file */

/* White space as C's isspace and Python's bytes.split() see it. */
static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n';
}

/* Strict UTF-8 (RFC 3629 §4): no overlong forms, no surrogates, nothing
 * over U+10FFFF — what Python's bytes.decode("utf-8") accepts. */
static int utf8_ok(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i <= k)
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((p[i + j] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

struct m0_grant_keys *m0_grant_keys_parse(const char *text, size_t n, const char *name, char *err, size_t cap)
{
    if (memchr(text, '\0', n) != NULL) {
        snprintf(err, cap, "m0serve: error: " KEYFILE_FLAG ": %s: holds a NUL byte", name);
        return NULL;
    }
    struct m0_grant_keys *k = calloc(1, sizeof *k);
    char *t = k ? malloc(n + 1) : NULL;
    if (t == NULL) {
        free(k);
        snprintf(err, cap, "m0serve: error: " KEYFILE_FLAG ": %s: out of memory", name);
        return NULL;
    }
    memcpy(t, text, n);
    t[n] = '\0';
    k->text = t;
    k->text_len = n;
    k->set.v = k->keys;

    const char *why = NULL;
    unsigned line = 0;
    char *p = t, *end = t + n;
    while (p < end && why == NULL) {
        line++;
        char *eol = memchr(p, '\n', (size_t)(end - p));
        char *next = eol ? eol + 1 : end;
        char *le = eol ? eol : end;
        while (le > p && is_ws(le[-1]))
            le--;
        char *s = p;
        while (s < le && is_ws(*s))
            s++;
        p = next;
        if (s == le || *s == '#')
            continue;                   /* blank, or a comment */
        char *kid = s;
        while (s < le && !is_ws(*s))
            s++;
        char *kid_end = s;
        while (s < le && is_ws(*s))
            s++;
        size_t kid_len = (size_t)(kid_end - kid), slen = (size_t)(le - s);
        for (char *c = kid; c < kid_end && why == NULL; c++) {
            if ((unsigned char)*c < 0x21 || (unsigned char)*c > 0x7e)
                why = "the kid must be printable ASCII";
        }
        if (why != NULL)
            break;
        if (kid_len > M0_JWT_KID_MAX)
            why = "the kid is longer than 64 bytes";
        else if (slen == 0)
            why = "want KID SECRET (no secret)";
        else if (slen < M0_GRANT_KEY_MIN)
            why = "the secret is shorter than 32 bytes (RFC 7518 §3.2: HS256 wants 256 bits or more)";
        else if (slen > M0_GRANT_KEY_MAX)
            why = "the secret is longer than 512 bytes";
        else if (!utf8_ok((const unsigned char *)s, slen))
            why = "the secret is not UTF-8";
        else if (k->set.n == M0_GRANT_MAX_KEYS)
            why = "more than 64 keys";
        if (why != NULL)
            break;
        *kid_end = '\0';
        *le = '\0';
        for (size_t i = 0; i < k->set.n; i++) {
            if (strcmp(k->keys[i].kid, kid) == 0)
                why = "the kid is given twice";
        }
        if (why != NULL)
            break;
        k->keys[k->set.n++] = (struct m0_jwt_key){.kid = kid, .secret = (const unsigned char *)s, .len = slen};
    }
    if (why == NULL && k->set.n == 0) {
        snprintf(err, cap, "m0serve: error: " KEYFILE_FLAG ": %s: no key (want one 'KID SECRET' a line)", name);
        m0_grant_keys_free(k);
        return NULL;
    }
    if (why != NULL) {
        snprintf(err, cap, "m0serve: error: " KEYFILE_FLAG ": %s:%u: %s", name, line, why);
        m0_grant_keys_free(k);
        return NULL;
    }
    return k;
}

struct m0_grant_keys *m0_grant_keys_load(const char *path, char *err, size_t cap)
{
    size_t n;
    char *buf = m0_keyfile_read(KEYFILE_FLAG, path, M0_GRANT_FILE_MAX, &n, err, cap);
    if (buf == NULL)
        return NULL;
    struct m0_grant_keys *k = m0_grant_keys_parse(buf, n, path, err, cap);
    m0_keyfile_free(buf, n);
    return k;
}

void m0_grant_keys_free(struct m0_grant_keys *k)
{
    if (k == NULL)
        return;
    OPENSSL_cleanse(k->text, k->text_len);
    free(k->text);
    free(k);
}

const struct m0_jwt_keys *m0_grant_keys_jwt(const struct m0_grant_keys *k)
{
    return &k->set;
}

/* k holds key: the same kid and the same secret. */
static int holds(const struct m0_grant_keys *k, const struct m0_jwt_key *key)
{
    for (size_t i = 0; i < k->set.n; i++) {
        const struct m0_jwt_key *v = &k->keys[i];
        if (strcmp(v->kid, key->kid) == 0)
            return v->len == key->len && CRYPTO_memcmp(v->secret, key->secret, v->len) == 0;
    }
    return 0;
}

int m0_grant_keys_newest_shared(const struct m0_grant_keys *k, const struct m0_grant_keys *const *others, size_t n)
{
    for (size_t i = k->set.n; i-- > 0;) {
        size_t j = 0;
        while (j < n && (others[j] == k || holds(others[j], &k->keys[i])))
            j++;
        if (j == n)
            return (int)i;
    }
    return -1;
}

int m0_grant_keys_reload(struct m0_grant_keys **cur, const char *path, char *err, size_t cap)
{
    struct m0_grant_keys *k = m0_grant_keys_load(path, err, cap);
    if (k == NULL)
        return M0_ERR;
    m0_grant_keys_free(*cur);
    *cur = k;
    return M0_OK;
}

/* --------------------------------------------------------------- verify */

static int take_channels(struct m0_grant *g)
{
    const json_t *ch = json_object_get(g->jwt.claims, "channels");
    if (ch == NULL)
        return M0_GRANT_NO_CHANNELS;
    if (!json_is_array(ch))
        return M0_GRANT_BAD_CHANNELS;
    size_t n = json_array_size(ch);
    if (n == 0)
        return M0_GRANT_NO_CHANNELS;
    if (n > M0_GRANT_MAX_CHANNELS)
        return M0_GRANT_BAD_CHANNELS;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(ch, i);
        if (!json_is_string(v))
            return M0_GRANT_BAD_CHANNELS;
        const char *name = json_string_value(v);
        size_t len = json_string_length(v);
        if (m0_sse_channel_error(name, len) != NULL)
            return M0_GRANT_BAD_CHANNEL;
        if (m0_grant_covers(g, name, len))
            continue;                   /* a repeat: each channel is held once */
        g->channels[g->nchannels] = name;
        g->channel_len[g->nchannels++] = (uint16_t)len;    /* <= M0_CHANNEL_MAX */
    }
    return M0_JWT_OK;
}

int m0_grant_verify(const char *tok, size_t len, const struct m0_grant_keys *keys, int64_t now_s,
                    struct m0_grant *g)
{
    memset(g, 0, sizeof *g);
    int rc = m0_jwt_verify(tok, len, keys != NULL ? &keys->set : NULL, now_s, M0_JWT_LEEWAY, &g->jwt);
    if (rc == M0_JWT_OK && (rc = take_channels(g)) != M0_JWT_OK)
        m0_grant_clear(g);
    return rc;
}

void m0_grant_clear(struct m0_grant *g)
{
    m0_jwt_clear(&g->jwt);
    memset(g, 0, sizeof *g);
    g->jwt.nbf = g->jwt.iat = M0_JWT_ABSENT;
}

int m0_grant_covers(const struct m0_grant *g, const char *channel, size_t len)
{
    for (unsigned i = 0; i < g->nchannels; i++) {
        if (g->channel_len[i] == len && memcmp(g->channels[i], channel, len) == 0)
            return 1;
    }
    return 0;
}

const char *m0_grant_error_reason(int code)
{
    switch (code) {
    case M0_GRANT_NO_TOKEN:
        return "no grant token (Authorization: Bearer, ?token= or the grant cookie)";
    case M0_GRANT_BAD_REQUEST:
        return "the grant token was sent more than once";
    case M0_GRANT_NO_CHANNELS:
        return "token grants no channel";
    case M0_GRANT_BAD_CHANNELS:
        return "token channels claim is not a list of channel names";
    case M0_GRANT_BAD_CHANNEL:
        return "token names an invalid channel";
    default:
        return m0_jwt_error_reason(code);
    }
}

int m0_grant_http_status(int code)
{
    return code == M0_GRANT_BAD_REQUEST ? 400 : 401;
}

size_t m0_grant_challenge(int code, char *dst, size_t cap)
{
    int n;
    if (code == M0_GRANT_NO_TOKEN)
        n = snprintf(dst, cap, "Bearer");
    else if (code == M0_GRANT_BAD_REQUEST)
        n = snprintf(dst, cap, "Bearer error=\"invalid_request\", error_description=\"%s\"",
                     m0_grant_error_reason(code));
    else        /* the reasons are static ASCII without '"' or '\\' (RFC 6750 §3 error_description) */
        n = snprintf(dst, cap, "Bearer error=\"invalid_token\", error_description=\"%s\"",
                     m0_grant_error_reason(code));
    if (n < 0 || cap == 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

/* -------------------------------------------------------------- request */

static const char *trim_ows(const char *p, const char *e, const char **out_end)
{
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *out_end = e;
    return p;
}

/* The value of the first cookie called name (nl bytes) in one Cookie
 * field value v (n bytes): 1 and the value in *val and *vlen, else 0. */
static int cookie_find(const char *v, size_t n, const char *name, size_t nl, const char **val, size_t *vlen)
{
    const char *p = v, *end = v + n;
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *se, *s = trim_ows(p, semi ? semi : end, &se);
        const char *eq = memchr(s, '=', (size_t)(se - s));
        if (eq != NULL && (size_t)(eq - s) == nl && memcmp(s, name, nl) == 0) {
            const char *ve, *vs = trim_ows(eq + 1, se, &ve);
            if (ve - vs >= 2 && vs[0] == '"' && ve[-1] == '"') {
                vs++;
                ve--;
            }
            *val = vs;
            *vlen = (size_t)(ve - vs);
            return 1;
        }
        if (semi == NULL)
            break;
        p = semi + 1;
    }
    return 0;
}

int m0_grant_token(const struct m0_req *r, const char *cookie_name, const char **tok, size_t *len)
{
    *tok = NULL;
    *len = 0;
    unsigned na = 0;
    const struct m0_hdr *a = m0_req_header_count(r, "authorization", &na);
    if (na > 1)
        return M0_GRANT_BAD_REQUEST;
    const char *ht = NULL, *he = NULL;
    if (a != NULL && a->value_len >= 7 && strncasecmp(a->value, "bearer ", 7) == 0)
        ht = trim_ows(a->value + 7, a->value + a->value_len, &he);
    const char *qv = NULL;
    size_t ql = 0;
    unsigned nq = r->query != NULL ? m0_http_query_param(r->query, r->query_len, M0_GRANT_QUERY_PARAM, &qv, &ql) : 0;
    if (nq > 1 || (nq == 1 && ht != NULL))
        return M0_GRANT_BAD_REQUEST;
    if (ht != NULL) {
        *tok = ht;
        *len = (size_t)(he - ht);
        return M0_OK;
    }
    if (nq == 1) {
        *tok = qv;
        *len = ql;
        return M0_OK;
    }
    if (cookie_name != NULL) {
        size_t nl = strlen(cookie_name);
        for (unsigned i = 0; i < r->nhdrs; i++) {
            const struct m0_hdr *h = &r->hdrs[i];
            if (h->name_len == 6 && strncasecmp(h->name, "cookie", 6) == 0 &&
                cookie_find(h->value, h->value_len, cookie_name, nl, tok, len))
                return M0_OK;
        }
    }
    return M0_GRANT_NO_TOKEN;
}

/* ---------------------------------------------------------------- flags */

const char *m0_grant_origin_error(const char *s, size_t n)
{
    if (n == 1 && s[0] == '*')
        return "'*' cannot go with credentials: name each origin";
    if (n == 4 && memcmp(s, "null", 4) == 0)
        return "the opaque origin 'null' is refused";
    size_t skip;
    unsigned defport;
    if (n > 7 && memcmp(s, "http://", 7) == 0)
        skip = 7, defport = 80;
    else if (n > 8 && memcmp(s, "https://", 8) == 0)
        skip = 8, defport = 443;
    else
        return "want http://HOST[:PORT] or https://HOST[:PORT]";
    const char *h = s + skip, *end = s + n, *he = h;
    if (*h == '[') {
        he = memchr(h, ']', (size_t)(end - h));
        if (he == NULL || he == h + 1)
            return "an IPv6 address goes in [brackets]";
        for (const char *c = h + 1; c < he; c++) {
            if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') || *c == ':' || *c == '.'))
                return "an IPv6 address is lowercase hex digits, ':' and '.'";
        }
        he++;
    } else {
        for (; he < end && *he != ':'; he++) {
            char c = *he;
            if (c == '/')
                return "nothing may follow the host but :PORT (no path, no trailing '/')";
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
                return "the host is lowercase letters, digits, '-' and '.' (an IDN in punycode), as browsers send it";
        }
        if (he == h)
            return "empty host";
    }
    if (he == end)
        return NULL;
    if (*he != ':' || he + 1 == end)
        return "nothing may follow the host but :PORT (no path, no trailing '/')";
    unsigned port = 0;
    for (const char *c = he + 1; c < end; c++) {
        if (*c < '0' || *c > '9' || c - he > 5)
            return "the port is 1..65535";
        port = port * 10 + (unsigned)(*c - '0');
    }
    if (he[1] == '0' || port == 0 || port > 65535)
        return "the port is 1..65535, without leading zeros";
    if (port == defport)
        return "leave the scheme's default port out, as browsers do";
    return NULL;
}

int m0_grant_check_flags(const struct m0_config *cfg, char *err, size_t cap)
{
    if (cfg->grant_path != NULL) {
        if (cfg->grant_key_file == NULL) {
            snprintf(err, cap, "m0serve: error: --grant-path: needs --grant-key-file (the keys grants are signed with)");
            return M0_ERR;
        }
    } else {
        const char *lone = cfg->grant_cookie != NULL ? "--grant-cookie"
                           : cfg->ngrant_cors_origins > 0 ? "--grant-cors-origin"
                           : cfg->grant_inbound != NULL ? "--grant-inbound"
                           : cfg->grant_expire != NULL ? "--grant-expire"
                           : cfg->grant_refresh >= 0 ? "--grant-refresh" : NULL;
        if (lone != NULL) {
            snprintf(err, cap, "m0serve: error: %s: needs --grant-path", lone);
            return M0_ERR;
        }
    }
    const char *c = cfg->grant_cookie;
    if (c != NULL && !m0_http_is_token(c, strlen(c))) {
        snprintf(err, cap, "m0serve: error: --grant-cookie: invalid value '%s' (a cookie name: an RFC 9110 token)", c);
        return M0_ERR;
    }
    const char *in = cfg->grant_inbound;
    if (in != NULL) {
        int ok = in[0] == '/';
        for (const char *p = in; ok && *p; p++)
            ok = (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f && *p != '?' && *p != '#';
        if (!ok) {
            snprintf(err, cap, "m0serve: error: --grant-inbound: invalid value '%s' (an absolute path, e.g. "
                     "/chat/inbound)", in);
            return M0_ERR;
        }
    }
    return M0_OK;
}
