/*
 * log_text.c — client text made safe for a log line (see log_text.h): where
 * the credentials are, and the error log's escaping.
 */
#include <string.h>
#include <strings.h>

#include "m0/log_text.h"

static const char *secret_cookie;       /* read-only once the workers fork */
static size_t secret_cookie_len;

void m0_log_secret_cookie(const char *name)
{
    secret_cookie = name;
    secret_cookie_len = name != NULL ? strlen(name) : 0;
}

static int hexval(unsigned char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The parameter name p (n bytes) is "token" or "access_token" once
 * percent-decoded (an application's query parser decodes it so). */
static int secret_name(const char *p, size_t n)
{
    char d[16];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k == sizeof d)
            return 0;
        int hi, lo;
        if (p[i] == '%' && i + 2 < n && (hi = hexval((unsigned char)p[i + 1])) >= 0 &&
            (lo = hexval((unsigned char)p[i + 2])) >= 0) {
            d[k++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            d[k++] = p[i];
        }
    }
    return (k == 5 && memcmp(d, "token", 5) == 0) || (k == 12 && memcmp(d, "access_token", 12) == 0);
}

int m0_log_query_secret(const char *q, size_t n, size_t from, size_t *start, size_t *end)
{
    if (from >= n)
        return 0;
    /* Cheap when nothing can match: without a '%', a secret's name is
     * spelled out, and both end in "token=". */
    if (memchr(q + from, '%', n - from) == NULL && memmem(q + from, n - from, "token=", 6) == NULL)
        return 0;
    size_t p = from;
    while (p < n) {
        const char *amp = memchr(q + p, '&', n - p);
        size_t pe = amp ? (size_t)(amp - q) : n;
        const char *eq = memchr(q + p, '=', pe - p);
        if (eq != NULL && secret_name(q + p, (size_t)(eq - q) - p)) {
            *start = (size_t)(eq - q) + 1;
            *end = pe;
            return 1;
        }
        p = pe + 1;
    }
    return 0;
}

static int named(const char *name, size_t nl, const char *want)
{
    return nl == strlen(want) && strncasecmp(name, want, nl) == 0;
}

/* The grant cookie's value among the "; "-separated pairs of v from from
 * (Cookie, RFC 6265 §4.2.1; Set-Cookie's first pair is its cookie, §4.1.1). */
static int cookie_secret(const char *v, size_t n, size_t from, int set, size_t *start, size_t *end)
{
    if (secret_cookie == NULL)
        return 0;
    size_t p = from;
    while (p < n) {
        while (p < n && (v[p] == ' ' || v[p] == '\t'))
            p++;
        const char *semi = memchr(v + p, ';', n - p);
        size_t pe = semi ? (size_t)(semi - v) : n;
        const char *eq = memchr(v + p, '=', pe - p);
        if (eq != NULL && (size_t)(eq - v) - p == secret_cookie_len &&
            memcmp(v + p, secret_cookie, secret_cookie_len) == 0) {
            *start = (size_t)(eq - v) + 1;
            *end = pe;
            return 1;
        }
        if (set)
            return 0;                   /* the rest are the cookie's attributes */
        p = pe + 1;
    }
    return 0;
}

int m0_log_header_secret(const char *name, size_t nl, const char *v, size_t n, size_t from, size_t *start,
                         size_t *end)
{
    if (named(name, nl, "authorization") || named(name, nl, "proxy-authorization")) {
        /* credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]:
         * the scheme stays, what follows it is the secret. */
        if (from > 0)
            return 0;
        size_t p = 0;
        while (p < n && v[p] != ' ' && v[p] != '\t')
            p++;
        while (p < n && (v[p] == ' ' || v[p] == '\t'))
            p++;
        if (p == n)
            p = 0;                      /* no scheme: all of it */
        if (p == n)
            return 0;
        *start = p;
        *end = n;
        return 1;
    }
    if (named(name, nl, "cookie"))
        return cookie_secret(v, n, from, 0, start, end);
    if (named(name, nl, "set-cookie"))
        return from == 0 && cookie_secret(v, n, 0, 1, start, end);
    return 0;
}

/* ------------------------------------------------------------ escaping */

struct w {
    char *p;
    size_t n, room;         /* room: bytes usable before the "...\0" reserve */
    int cut;
};

/* A whole piece or nothing: an escape is never cut in two. */
static void piece(struct w *w, const char *s, size_t k)
{
    if (w->cut)
        return;
    if (k > w->room - w->n) {
        w->cut = 1;
        return;
    }
    memcpy(w->p + w->n, s, k);
    w->n += k;
}

/* Plain bytes: as many as fit. */
static void run(struct w *w, const char *s, size_t k)
{
    if (w->cut)
        return;
    if (k > w->room - w->n) {
        k = w->room - w->n;
        w->cut = 1;
    }
    memcpy(w->p + w->n, s, k);
    w->n += k;
}

static void esc(struct w *w, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t plain = 0;
    for (size_t i = 0; i < n && !w->cut; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != 0x7f && c != '\\')
            continue;
        run(w, s + plain, i - plain);
        char e[4] = {'\\', 0, 0, 0};
        size_t el = 2;
        if (c == '\n')
            e[1] = 'n';
        else if (c == '\r')
            e[1] = 'r';
        else if (c == '\t')
            e[1] = 't';
        else if (c == '\\')
            e[1] = '\\';
        else
            e[1] = 'x', e[2] = hex[c >> 4], e[3] = hex[c & 15], el = 4;
        piece(w, e, el);
        plain = i + 1;
    }
    if (plain < n)
        run(w, s + plain, n - plain);
}

static const char *finish(struct w *w)
{
    if (w->cut) {
        memcpy(w->p + w->n, "...", 3);
        w->n += 3;
    }
    w->p[w->n] = '\0';
    return w->p;
}

static int start(struct w *w, char *dst, size_t cap)
{
    *w = (struct w){.p = dst, .room = cap >= 4 ? cap - 4 : 0};
    if (cap < 4) {
        if (cap > 0)
            dst[0] = '\0';
        return 0;
    }
    return 1;
}

const char *m0_log_text(char *dst, size_t cap, const char *s, size_t n)
{
    struct w w;
    if (!start(&w, dst, cap))
        return dst;
    if (s == NULL)
        piece(&w, "-", 1);
    else
        esc(&w, s, n);
    return finish(&w);
}

/* A request-target's bytes into w, its query's secrets redacted. */
static void target_into(struct w *w, const char *t, size_t n)
{
    if (t == NULL) {
        piece(w, "-", 1);
        return;
    }
    const char *qm = memchr(t, '?', n);
    size_t at = qm ? (size_t)(qm - t) + 1 : n;
    esc(w, t, at);
    const char *q = t + at;
    size_t qn = n - at, pos = 0, s0, s1;
    while (m0_log_query_secret(q, qn, pos, &s0, &s1)) {
        esc(w, q + pos, s0 - pos);
        piece(w, M0_LOG_REDACTED, sizeof M0_LOG_REDACTED - 1);
        pos = s1;
    }
    esc(w, q + pos, qn - pos);
}

const char *m0_log_target(char *dst, size_t cap, const char *t, size_t n)
{
    struct w w;
    if (!start(&w, dst, cap))
        return dst;
    target_into(&w, t, n);
    return finish(&w);
}

const char *m0_log_request(char *dst, size_t cap, const char *method, size_t ml, const char *target, size_t tl)
{
    struct w w;
    if (!start(&w, dst, cap))
        return dst;
    if (method == NULL)
        piece(&w, "-", 1);
    else
        esc(&w, method, ml);
    piece(&w, " ", 1);
    target_into(&w, target, tl);
    return finish(&w);
}

const char *m0_log_header(char *dst, size_t cap, const char *name, size_t nl, const char *v, size_t n)
{
    struct w w;
    if (!start(&w, dst, cap))
        return dst;
    if (v == NULL) {
        piece(&w, "-", 1);
        return finish(&w);
    }
    size_t pos = 0, s0, s1;
    while (pos < n && m0_log_header_secret(name, nl, v, n, pos, &s0, &s1)) {
        esc(&w, v + pos, s0 - pos);
        piece(&w, M0_LOG_REDACTED, sizeof M0_LOG_REDACTED - 1);
        pos = s1;
    }
    esc(&w, v + pos, n - pos);
    return finish(&w);
}
