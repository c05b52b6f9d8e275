/*
 * grip.c — GRIP instruction headers into a struct m0_grip, and Pushpin's
 * id/content templates (see grip.h for the grammar and the choices).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "m0/base64.h"
#include "m0/grip.h"
#include "m0/http.h"
#include "m0/percent.h"
#include "m0/sse.h"

#define PARAMS_MAX 16                  /* parameters on one list element */
#define REASON_MAX 256                 /* bytes of a Grip-Status reason */
#define ARG_MAX 512                    /* bytes of a template argument */

/* Singleton fields already read: the first occurrence wins (Pushpin's get). */
#define SEEN_HOLD      0x01u
#define SEEN_TIMEOUT   0x02u
#define SEEN_KEEPALIVE 0x04u
#define SEEN_STATUS    0x08u

static int named(const char *name, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(name, lit, n) == 0;
}

static int ows(char c)
{
    return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *n)
{
    while (*n > 0 && ows(**s))
        (*s)++, (*n)--;
    while (*n > 0 && ows((*s)[*n - 1]))
        (*n)--;
}

void m0_grip_init(struct m0_grip *g)
{
    struct m0_buf store = g->store;
    memset(g, 0, sizeof *g);
    m0_buf_reset(&store);
    g->store = store;
}

void m0_grip_free(struct m0_grip *g)
{
    m0_buf_free(&g->store);
    memset(g, 0, sizeof *g);
}

int m0_grip_is_field(const char *name, size_t nlen)
{
    return nlen >= 5 && strncasecmp(name, "grip-", 5) == 0;
}

static struct m0_grip_span keep(struct m0_grip *g, const char *p, size_t n)
{
    struct m0_grip_span s = {(uint32_t)g->store.len, (uint32_t)n};
    if (n > 0)
        m0_buf_append(&g->store, p, n);
    return s;
}

static int span_eq(const struct m0_grip *g, struct m0_grip_span s, const char *p, size_t n)
{
    return s.len == n && memcmp(m0_grip_str(g, s), p, n) == 0;
}

/* ------------------------------------------------------------ list syntax */

/*
 * The next element of a list field: up to a comma outside double quotes
 * (a backslash inside quotes escapes the next byte), trimmed; empty
 * elements are skipped (RFC 9110 §5.6.1). Returns 1 with the element, 0 at
 * the end, M0_ERR for an unterminated quoted-string.
 */
static int next_element(const char **p, const char *end, const char **s, size_t *n)
{
    for (;;) {
        const char *a = *p;
        if (a >= end)
            return 0;
        const char *e = a;
        int quoted = 0;
        for (; e < end; e++) {
            if (quoted) {
                if (*e == '\\') {
                    if (++e >= end)
                        return M0_ERR;
                } else if (*e == '"') {
                    quoted = 0;
                }
            } else if (*e == '"') {
                quoted = 1;
            } else if (*e == ',') {
                break;
            }
        }
        if (quoted)
            return M0_ERR;
        *p = e < end ? e + 1 : end;
        *s = a;
        *n = (size_t)(e - a);
        trim(s, n);
        if (*n > 0)
            return 1;
    }
}

struct param {
    const char *name, *value;
    size_t nlen, vlen;
    uint8_t has_value;
};

struct element {
    const char *first;              /* the part before the first ';' (not with all) */
    size_t flen;
    unsigned np;
    struct param p[PARAMS_MAX];
};

/*
 * Split one element into its first part and "name[=value]" parameters
 * (all: the first part is a parameter too, as in Grip-Set-Meta). A quoted
 * value is unescaped into scratch (room for n bytes). Parameter names are
 * tokens (RFC 9110 §5.6.2); an empty parameter (";;") is skipped.
 */
static const char *parse_element(const char *s, size_t n, int all, struct element *el, char *scratch)
{
    size_t i = 0, used = 0;
    el->np = 0;
    el->first = NULL;
    el->flen = 0;
    if (!all) {
        while (i < n && s[i] != ';')
            i++;
        el->first = s;
        el->flen = i;
        trim(&el->first, &el->flen);
        if (i < n)
            i++;
    }
    while (i < n) {
        size_t a = i;
        while (i < n && s[i] != '=' && s[i] != ';')
            i++;
        struct param pr = {s + a, NULL, i - a, 0, 0};
        trim(&pr.name, &pr.nlen);
        if (i < n && s[i] == '=') {
            i++;
            while (i < n && ows(s[i]))
                i++;
            pr.has_value = 1;
            if (i < n && s[i] == '"') {
                pr.value = scratch + used;
                for (i++;; i++) {
                    if (i >= n)
                        return "unterminated quoted-string";
                    if (s[i] == '\\') {
                        if (++i >= n)
                            return "unterminated quoted-string";
                    } else if (s[i] == '"') {
                        break;
                    }
                    scratch[used++] = s[i];
                }
                pr.vlen = (size_t)(scratch + used - pr.value);
                for (i++; i < n && ows(s[i]); i++)
                    ;
                if (i < n && s[i] != ';')
                    return "text after a quoted-string";
            } else {
                size_t b = i;
                while (i < n && s[i] != ';')
                    i++;
                pr.value = s + b;
                pr.vlen = i - b;
                trim(&pr.value, &pr.vlen);
            }
        }
        if (i < n)
            i++;                    /* the ';' */
        if (pr.nlen == 0) {
            if (pr.has_value)
                return "a parameter without a name";
            continue;
        }
        if (!m0_http_is_token(pr.name, pr.nlen))
            return "a parameter name that is not a token";
        if (el->np == PARAMS_MAX)
            return "too many parameters";
        el->p[el->np++] = pr;
    }
    return NULL;
}

static const struct param *param_get(const struct element *el, const char *name)
{
    for (unsigned i = 0; i < el->np; i++) {
        if (named(el->p[i].name, el->p[i].nlen, name))
            return &el->p[i];
    }
    return NULL;
}

/* A decimal number of seconds: digits only (no sign: a negative value is
 * invalid, as in Pushpin), saturating at M0_GRIP_SECONDS_MAX. */
static int seconds(const char *s, size_t n, int *out)
{
    trim(&s, &n);
    if (n == 0)
        return M0_ERR;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return M0_ERR;
        if (v <= M0_GRIP_SECONDS_MAX)
            v = v * 10 + (s[i] - '0');
    }
    *out = v > M0_GRIP_SECONDS_MAX ? M0_GRIP_SECONDS_MAX : (int)v;
    return M0_OK;
}

/* Runs fn on every element of a list field; the scratch buffer is sized for
 * the whole value, so any element's unescaped parameters fit. */
typedef const char *(*element_fn)(struct m0_grip *g, const struct element *el);

static const char *each_element(struct m0_grip *g, const char *v, size_t n, int all, element_fn fn,
                                const char *unterminated)
{
    char *scratch = m0_xmalloc(n + 1);
    const char *p = v, *end = v + n, *s, *why = NULL;
    size_t len;
    int r;
    struct element el;
    while (why == NULL && (r = next_element(&p, end, &s, &len)) != 0) {
        if (r == M0_ERR || parse_element(s, len, all, &el, scratch) != NULL)
            why = unterminated;
        else
            why = fn(g, &el);
    }
    free(scratch);
    return why;
}

/* ------------------------------------------------------------ the fields */

static const char *channel_element(struct m0_grip *g, const struct element *el)
{
    if (m0_sse_channel_error(el->first, el->flen) != NULL)
        return "Grip-Channel names an invalid channel (1..200 bytes of printable ASCII, not m0.*)";
    struct m0_grip_channel c;
    memset(&c, 0, sizeof c);
    for (unsigned i = 0; i < el->np; i++) {
        const struct param *pr = &el->p[i];
        if (named(pr->name, pr->nlen, "prev-id")) {
            if (c.has_prev_id)
                continue;           /* the first one, as Pushpin's get */
            if (pr->vlen > M0_GRIP_ID_MAX)
                return "Grip-Channel prev-id is longer than 256 bytes";
            c.has_prev_id = 1;
            c.prev_id = keep(g, pr->value, pr->vlen);
        } else if (named(pr->name, pr->nlen, "filter")) {
            if (++c.nfilters > M0_GRIP_FILTERS_MAX)
                return "Grip-Channel has more than 5 filters on one channel";
            const char *f = pr->value;
            size_t fl = pr->vlen;
            if (named(f, fl, "skip-self"))
                c.filters |= M0_GRIP_F_SKIP_SELF;
            else if (named(f, fl, "skip-users"))
                c.filters |= M0_GRIP_F_SKIP_USERS;
            else if (named(f, fl, "require-sub"))
                c.filters |= M0_GRIP_F_REQUIRE_SUB;
            else if (named(f, fl, "build-id"))
                c.filters |= M0_GRIP_F_BUILD_ID;
            else if (named(f, fl, "var-subst"))
                c.filters |= M0_GRIP_F_VAR_SUBST;
            else
                c.filters |= M0_GRIP_F_OTHER;
        }
    }
    /* A channel named twice: the later entry replaces the earlier one (a
     * connection is subscribed to a channel once, Pushpin's hash). */
    for (unsigned i = 0; i < g->nchannels; i++) {
        if (span_eq(g, g->channels[i].name, el->first, el->flen)) {
            c.name = g->channels[i].name;
            g->channels[i] = c;
            return NULL;
        }
    }
    if (g->nchannels == M0_GRIP_CHANNELS_MAX)
        return "more than 64 Grip-Channel entries";
    c.name = keep(g, el->first, el->flen);
    g->channels[g->nchannels++] = c;
    return NULL;
}

static const char *link_element(struct m0_grip *g, const struct element *el)
{
    if (el->np == 0)
        return NULL;                /* no rel: not a link Pushpin reads */
    const char *u = el->first;
    size_t ul = el->flen;
    if (ul <= 2 || u[0] != '<' || u[ul - 1] != '>')
        return "failed to parse Grip-Link value";
    u++, ul -= 2;
    if (ul > M0_GRIP_LINK_MAX)
        return "Grip-Link is longer than 4096 bytes";
    for (size_t i = 0; i < ul; i++) {
        if (ows(u[i]) || u[i] == '<' || u[i] == '>')
            return "Grip-Link contains invalid link";
    }
    const struct param *rel = param_get(el, "rel");
    if (rel == NULL)
        return NULL;
    if (named(rel->value, rel->vlen, "next")) {
        const struct param *t = param_get(el, "timeout");
        int secs = M0_GRIP_NEXT_TIMEOUT_DEFAULT;
        if (t != NULL && seconds(t->value, t->vlen, &secs) != M0_OK)
            return "failed to parse Grip-Link timeout value";
        g->next_link = keep(g, u, ul);
        g->next_timeout = secs;
    } else if (named(rel->value, rel->vlen, "gone")) {
        g->gone_link = keep(g, u, ul);
    }
    return NULL;
}

static const char *meta_element(struct m0_grip *g, const struct element *el)
{
    if (el->np == 0 || el->p[0].nlen == 0)
        return "Grip-Set-Meta cannot be empty";
    const struct param *pr = &el->p[0];
    if (pr->nlen > M0_GRIP_META_LEN_MAX || pr->vlen > M0_GRIP_META_LEN_MAX)
        return "Grip-Set-Meta key or value is longer than 1024 bytes";
    for (unsigned i = 0; i < g->nmeta; i++) {
        if (span_eq(g, g->meta[i].key, pr->name, pr->nlen)) {
            g->meta[i].value = keep(g, pr->value, pr->vlen);
            return NULL;
        }
    }
    if (g->nmeta == M0_GRIP_META_MAX)
        return "more than 16 Grip-Set-Meta entries";
    g->meta[g->nmeta].key = keep(g, pr->name, pr->nlen);
    g->meta[g->nmeta].value = keep(g, pr->value, pr->vlen);
    g->nmeta++;
    return NULL;
}

static const char *expose_element(struct m0_grip *g, const struct element *el)
{
    if (!m0_http_is_token(el->first, el->flen) || el->np != 0)
        return "Grip-Expose-Headers lists something that is not a field name";
    if (g->nexpose == M0_GRIP_EXPOSE_MAX)
        return "more than 32 Grip-Expose-Headers names";
    g->expose[g->nexpose++] = keep(g, el->first, el->flen);
    return NULL;
}

/*
 * Keep-alive data in the cstring format: the C escapes \\ \r \n and \xHH
 * (Pushpin's set). An unknown escape or a lone trailing backslash is an
 * error. Writes at most n bytes to out; returns their count or -1.
 */
static ssize_t cstring_decode(const char *s, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            out[k++] = s[i];
            continue;
        }
        if (++i >= n)
            return -1;
        switch (s[i]) {
        case '\\': out[k++] = '\\'; break;
        case 'r': out[k++] = '\r'; break;
        case 'n': out[k++] = '\n'; break;
        case 'x': {
            if (i + 2 >= n)
                return -1;
            int hi = m0_hex_digit((unsigned char)s[i + 1]), lo = m0_hex_digit((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            out[k++] = (char)(hi << 4 | lo);
            i += 2;
            break;
        }
        default:
            return -1;
        }
    }
    return (ssize_t)k;
}

static const char *keepalive_field(struct m0_grip *g, const char *v, size_t n)
{
    char *scratch = m0_xmalloc(n + 1), *data = m0_xmalloc(n + 1);
    struct element el;
    const char *why = parse_element(v, n, 0, &el, scratch);
    ssize_t dl = -1;
    if (why != NULL) {
        why = "failed to parse Grip-Keep-Alive";
        goto out;
    }
    if (el.flen == 0) {
        why = "Grip-Keep-Alive cannot be empty";
        goto out;
    }
    const struct param *mode = param_get(&el, "mode"), *t = param_get(&el, "timeout"),
                       *fmt = param_get(&el, "format");
    enum m0_grip_ka_mode m = M0_GRIP_KA_IDLE;
    if (mode != NULL && mode->vlen > 0 && !named(mode->value, mode->vlen, "idle")) {
        if (!named(mode->value, mode->vlen, "interval")) {
            why = "Grip-Keep-Alive mode must be idle or interval";
            goto out;
        }
        m = M0_GRIP_KA_INTERVAL;
    }
    int secs = M0_GRIP_KEEPALIVE_DEFAULT;
    if (t != NULL && seconds(t->value, t->vlen, &secs) != M0_OK) {
        why = "failed to parse Grip-Keep-Alive timeout value";
        goto out;
    }
    if (fmt == NULL || fmt->vlen == 0 || named(fmt->value, fmt->vlen, "raw")) {
        memcpy(data, el.first, el.flen);
        dl = (ssize_t)el.flen;
    } else if (named(fmt->value, fmt->vlen, "cstring")) {
        if ((dl = cstring_decode(el.first, el.flen, data)) < 0) {
            why = "failed to parse Grip-Keep-Alive cstring format";
            goto out;
        }
    } else if (named(fmt->value, fmt->vlen, "base64")) {
        if ((dl = m0_base64_decode(el.first, el.flen, M0_B64_PAD, (unsigned char *)data, n + 1)) < 0) {
            why = "failed to parse Grip-Keep-Alive base64 format";
            goto out;
        }
    } else {
        why = "Grip-Keep-Alive format must be raw, cstring or base64";
        goto out;
    }
    if (dl == 0) {
        why = "Grip-Keep-Alive cannot be empty";
        goto out;
    }
    if (dl > M0_GRIP_KEEPALIVE_MAX) {
        why = "Grip-Keep-Alive data is longer than 4096 bytes";
        goto out;
    }
    g->ka_mode = m;
    g->ka_timeout = secs < 1 ? 1 : secs;
    g->ka_data = keep(g, data, (size_t)dl);
out:
    free(scratch);
    free(data);
    return why;
}

static const char *status_field(struct m0_grip *g, const char *v, size_t n)
{
    trim(&v, &n);
    size_t i = 0;
    while (i < n && v[i] != ' ')
        i++;
    int code = 0;
    if (i != 3)
        return "Grip-Status contains invalid status code";
    for (size_t k = 0; k < 3; k++) {
        if (v[k] < '0' || v[k] > '9')
            return "Grip-Status contains invalid status code";
        code = code * 10 + (v[k] - '0');
    }
    /* A final status: 1xx cannot end a response (RFC 9110 §15.2). */
    if (code < 200 || code > 599)
        return "Grip-Status contains invalid status code";
    const char *r = i < n ? v + i + 1 : v + n;
    size_t rl = i < n ? n - i - 1 : 0;
    if (rl > REASON_MAX)
        return "Grip-Status reason is longer than 256 bytes";
    g->status = code;
    g->reason = keep(g, r, rl);
    return NULL;
}

int m0_grip_field(struct m0_grip *g, const char *name, size_t nlen, const char *value, size_t vlen,
                  const char **why)
{
    *why = NULL;
    if (!m0_grip_is_field(name, nlen))
        return M0_OK;
    g->any = 1;
    if (named(name, nlen, "grip-hold")) {
        if (g->seen & SEEN_HOLD)
            return M0_OK;
        g->seen |= SEEN_HOLD;
        const char *s = value;
        size_t n = vlen;
        trim(&s, &n);
        if (named(s, n, "response"))
            g->hold = M0_GRIP_HOLD_RESPONSE;
        else if (named(s, n, "stream"))
            g->hold = M0_GRIP_HOLD_STREAM;
        else
            *why = "Grip-Hold must be set to either 'response' or 'stream'";
    } else if (named(name, nlen, "grip-channel")) {
        *why = each_element(g, value, vlen, 0, channel_element, "failed to parse Grip-Channel");
    } else if (named(name, nlen, "grip-timeout")) {
        if (g->seen & SEEN_TIMEOUT)
            return M0_OK;
        g->seen |= SEEN_TIMEOUT;
        if (seconds(value, vlen, &g->timeout) != M0_OK)
            *why = "failed to parse Grip-Timeout";
        g->has_timeout = 1;
    } else if (named(name, nlen, "grip-keep-alive")) {
        if (g->seen & SEEN_KEEPALIVE)
            return M0_OK;
        g->seen |= SEEN_KEEPALIVE;
        *why = keepalive_field(g, value, vlen);
    } else if (named(name, nlen, "grip-status")) {
        if (g->seen & SEEN_STATUS)
            return M0_OK;
        g->seen |= SEEN_STATUS;
        *why = status_field(g, value, vlen);
    } else if (named(name, nlen, "grip-link")) {
        *why = each_element(g, value, vlen, 0, link_element, "failed to parse Grip-Link value");
    } else if (named(name, nlen, "grip-set-meta")) {
        *why = each_element(g, value, vlen, 1, meta_element, "failed to parse Grip-Set-Meta");
    } else if (named(name, nlen, "grip-expose-headers")) {
        *why = each_element(g, value, vlen, 0, expose_element,
                            "failed to parse Grip-Expose-Headers");
    }
    return *why == NULL ? M0_OK : M0_ERR;
}

int m0_grip_finish(struct m0_grip *g, const char **why)
{
    *why = NULL;
    if (g->hold != M0_GRIP_HOLD_NONE && g->nchannels == 0)
        return *why = "Grip-Hold needs at least one Grip-Channel", M0_ERR;
    if (g->hold == M0_GRIP_HOLD_STREAM && g->next_link.len == 0) {
        for (unsigned i = 0; i < g->nchannels; i++) {
            if (g->channels[i].has_prev_id)
                return *why = "a Grip-Channel of a stream hold gives prev-id but there is no "
                              "Grip-Link rel=next to recover from",
                       M0_ERR;
        }
    }
    if (!g->has_timeout)
        g->timeout = M0_GRIP_TIMEOUT_DEFAULT;
    if (g->timeout < M0_GRIP_TIMEOUT_MIN)
        g->timeout = M0_GRIP_TIMEOUT_MIN;
    return M0_OK;
}

const char *m0_grip_meta_get(const struct m0_grip *g, const char *key, size_t klen, size_t *len)
{
    for (unsigned i = 0; i < g->nmeta; i++) {
        if (span_eq(g, g->meta[i].key, key, klen)) {
            *len = g->meta[i].value.len;
            return m0_grip_str(g, g->meta[i].value);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ templates */

typedef int (*directive_fn)(void *ctx, char type, const char *arg, size_t alen, int has_arg,
                            struct m0_buf *out, const char **why);

static int process(struct m0_buf *out, const char *f, size_t n, directive_fn fn, void *ctx,
                   const char **why)
{
    char arg[ARG_MAX];
    *why = NULL;
    for (size_t i = 0; i < n; i++) {
        if (f[i] != '%') {
            m0_buf_append(out, &f[i], 1);
            continue;
        }
        if (++i >= n)
            return *why = "a template ends with '%'", M0_ERR;
        if (f[i] == '%') {
            m0_buf_append(out, "%", 1);
            continue;
        }
        size_t alen = 0;
        int has_arg = 0;
        if (f[i] == '(') {
            has_arg = 1;
            for (i++;; i++) {
                if (i >= n)
                    return *why = "a template has an unterminated %(", M0_ERR;
                if (f[i] == '\\') {
                    if (++i >= n)
                        return *why = "a template has an unterminated %(", M0_ERR;
                } else if (f[i] == ')') {
                    break;
                }
                if (alen == sizeof arg)
                    return *why = "a template argument is longer than 512 bytes", M0_ERR;
                arg[alen++] = f[i];
            }
            if (++i >= n)
                return *why = "a template has no directive after %(...)", M0_ERR;
        }
        char c = f[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return *why = "a template has an unknown directive", M0_ERR;
        if (fn(ctx, c, arg, alen, has_arg, out, why) != M0_OK)
            return M0_ERR;
    }
    return M0_OK;
}

struct id_ctx {
    m0_grip_lookup_fn lookup;
    void *ctx;
};

static int id_directive(void *ctx, char type, const char *arg, size_t alen, int has_arg,
                        struct m0_buf *out, const char **why)
{
    struct id_ctx *ic = ctx;
    if (type != 's')
        return *why = "id_format has an unknown directive (only %(CHANNEL)s)", M0_ERR;
    if (!has_arg)
        return *why = "id_format directive s requires an argument", M0_ERR;
    size_t vlen = 0;
    const char *v = ic->lookup(ic->ctx, arg, alen, &vlen);
    if (v == NULL)
        return *why = "id_format names a channel without a last id", M0_ERR;
    m0_buf_append(out, v, vlen);
    return M0_OK;
}

int m0_grip_render_id(struct m0_buf *out, const char *fmt, size_t n, m0_grip_lookup_fn lookup,
                      void *ctx, const char **why)
{
    struct id_ctx ic = {lookup, ctx};
    return process(out, fmt, n, id_directive, &ic, why);
}

struct content_ctx {
    const char *id;
    size_t idlen;
};

static int content_directive(void *ctx, char type, const char *arg, size_t alen, int has_arg,
                             struct m0_buf *out, const char **why)
{
    struct content_ctx *cc = ctx;
    if (type != 'I')
        return *why = "content has an unknown directive (only %I)", M0_ERR;
    if (has_arg) {
        m0_buf_append(out, arg, alen);
        return M0_OK;
    }
    if (cc->id == NULL)
        return *why = "content has %I but there is no id to put there", M0_ERR;
    m0_buf_append(out, cc->id, cc->idlen);
    return M0_OK;
}

int m0_grip_render_content(struct m0_buf *out, const char *content, size_t n, const char *id,
                           size_t idlen, const char **why)
{
    struct content_ctx cc = {id, idlen};
    return process(out, content, n, content_directive, &cc, why);
}
