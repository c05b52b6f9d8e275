/*
 * accesslog.c — access-log lines (see accesslog.h): a format compiled once
 * into a list of operations, rendered per request into a stack buffer and
 * written with one write(2), like the error log.
 *
 * The atoms are gunicorn's (its "access_log_format" setting), so a format
 * written for gunicorn works here unchanged; the ones that need a WSGI
 * environ ({var}e) are refused at startup instead of printing nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "m0/accesslog.h"
#include "m0/http.h"
#include "m0/log.h"
#include "m0/log_text.h"

#define MAX_OPS 64
#define MAX_NAME 64

enum op_kind {
    OP_LIT,         /* literal text */
    OP_ADDR,        /* h */
    OP_DASH,        /* l */
    OP_USER,        /* u */
    OP_TIME,        /* t */
    OP_REQLINE,     /* r */
    OP_METHOD,      /* m */
    OP_PATH,        /* U */
    OP_QUERY,       /* q */
    OP_PROTO,       /* H */
    OP_STATUS,      /* s */
    OP_BYTES,       /* B */
    OP_BYTES_CLF,   /* b */
    OP_REFERER,     /* f */
    OP_UA,          /* a */
    OP_SECS,        /* T */
    OP_MILLIS,      /* M */
    OP_MICROS,      /* D */
    OP_DECIMAL,     /* L */
    OP_PID,         /* p */
    OP_REQ_HDR,     /* {Name}i */
    OP_RESP_HDR,    /* {Name}o */
};

struct op {
    enum op_kind kind;
    size_t off, len;        /* OP_LIT: into text; header ops: into names */
};

/* Per process, read-only after boot: the format compiled once by
 * m0_access_log_init (before the first fork), read by every thread. */
static enum { FMT_DEFAULT, FMT_ATOMS, FMT_JSON } mode = FMT_DEFAULT;
static struct op ops[MAX_OPS];
static size_t nops;
static char text[1024];     /* literals of the compiled format */
static size_t text_len;
static char names[1024];    /* header names of {Name}i / {Name}o */
static size_t names_len;

static const struct {
    char atom;
    enum op_kind kind;
} atoms[] = {
    {'h', OP_ADDR},  {'l', OP_DASH},    {'u', OP_USER},   {'t', OP_TIME},      {'r', OP_REQLINE},
    {'m', OP_METHOD}, {'U', OP_PATH},   {'q', OP_QUERY},  {'H', OP_PROTO},     {'s', OP_STATUS},
    {'B', OP_BYTES}, {'b', OP_BYTES_CLF}, {'f', OP_REFERER}, {'a', OP_UA},     {'T', OP_SECS},
    {'M', OP_MILLIS}, {'D', OP_MICROS}, {'L', OP_DECIMAL}, {'p', OP_PID},
};

static int add_op(enum op_kind kind, size_t off, size_t len, char *err, size_t cap)
{
    if (nops == MAX_OPS) {
        snprintf(err, cap, "m0serve: error: --access-log-format: more than %d directives", MAX_OPS);
        return M0_ERR;
    }
    ops[nops++] = (struct op){.kind = kind, .off = off, .len = len};
    return M0_OK;
}

static int add_literal(const char *p, size_t n, char *err, size_t cap)
{
    if (n == 0)
        return M0_OK;
    if (text_len + n > sizeof text) {
        snprintf(err, cap, "m0serve: error: --access-log-format: format too long");
        return M0_ERR;
    }
    memcpy(text + text_len, p, n);
    /* Adjacent literals merge: "%%" splits none. */
    if (nops > 0 && ops[nops - 1].kind == OP_LIT && ops[nops - 1].off + ops[nops - 1].len == text_len) {
        ops[nops - 1].len += n;
        text_len += n;
        return M0_OK;
    }
    int rc = add_op(OP_LIT, text_len, n, err, cap);
    text_len += n;
    return rc;
}

int m0_access_compile(const char *fmt, char *err, size_t cap)
{
    nops = text_len = names_len = 0;
    mode = FMT_DEFAULT;
    if (fmt == NULL || fmt[0] == '\0')
        return M0_OK;
    if (strcmp(fmt, "json") == 0) {
        mode = FMT_JSON;
        return M0_OK;
    }
    const char *p = fmt;
    while (*p) {
        const char *pct = strchr(p, '%');
        if (pct == NULL) {
            if (add_literal(p, strlen(p), err, cap) != M0_OK)
                return M0_ERR;
            break;
        }
        if (add_literal(p, (size_t)(pct - p), err, cap) != M0_OK)
            return M0_ERR;
        if (pct[1] == '%') {
            if (add_literal("%", 1, err, cap) != M0_OK)
                return M0_ERR;
            p = pct + 2;
            continue;
        }
        const char *close = pct[1] == '(' ? strchr(pct + 2, ')') : NULL;
        if (close == NULL || close[1] != 's') {
            snprintf(err, cap, "m0serve: error: --access-log-format: expected %%(NAME)s at '%.20s'", pct);
            return M0_ERR;
        }
        const char *name = pct + 2;
        size_t nlen = (size_t)(close - name);
        if (nlen >= 3 && name[0] == '{' && name[nlen - 2] == '}' &&
            (name[nlen - 1] == 'i' || name[nlen - 1] == 'o')) {
            size_t hl = nlen - 3;
            if (hl == 0 || hl > MAX_NAME || names_len + hl > sizeof names) {
                snprintf(err, cap, "m0serve: error: --access-log-format: bad header name in '%%(%.*s)s'",
                         (int)nlen, name);
                return M0_ERR;
            }
            memcpy(names + names_len, name + 1, hl);
            if (add_op(name[nlen - 1] == 'i' ? OP_REQ_HDR : OP_RESP_HDR, names_len, hl, err, cap) != M0_OK)
                return M0_ERR;
            names_len += hl;
        } else {
            size_t k = 0;
            while (k < M0_ARRAY_LEN(atoms) && !(nlen == 1 && atoms[k].atom == name[0]))
                k++;
            if (k == M0_ARRAY_LEN(atoms)) {
                snprintf(err, cap, "m0serve: error: --access-log-format: unknown atom '%%(%.*s)s'", (int)nlen,
                         name);
                return M0_ERR;
            }
            if (add_op(atoms[k].kind, 0, 0, err, cap) != M0_OK)
                return M0_ERR;
        }
        p = close + 2;
    }
    mode = FMT_ATOMS;
    return M0_OK;
}

/* ------------------------------------------------------------ rendering */

struct out {
    char *p;
    size_t n, cap;          /* cap keeps one byte for the final '\n' */
};

static void put(struct out *o, const char *s, size_t n)
{
    if (n > o->cap - o->n)
        n = o->cap - o->n;
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void put_num(struct out *o, unsigned long long v)
{
    char b[24];
    int k = snprintf(b, sizeof b, "%llu", v);
    put(o, b, (size_t)k);
}

/* Seconds with six decimals from microseconds: "0.000123". */
static void put_secs(struct out *o, uint64_t us)
{
    char b[32];
    int k = snprintf(b, sizeof b, "%llu.%06llu", (unsigned long long)(us / 1000000),
                     (unsigned long long)(us % 1000000));
    put(o, b, (size_t)k);
}

/* Client text: '"', '\\' and control bytes become \xHH (json: JSON
 * escapes, and bytes >= 0x80 as \u00XX, latin-1 as received). */
static void put_esc(struct out *o, const char *s, size_t n, int json)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (json && (c == '"' || c == '\\')) {
            char e[2] = {'\\', (char)c};
            put(o, e, 2);
        } else if (json && (c < 0x20 || c >= 0x7f)) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(o, e, 6);
        } else if (!json && (c == '"' || c == '\\' || c < 0x20 || c == 0x7f)) {
            char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
            put(o, e, 4);
        } else {
            put(o, (const char *)&c, 1);
        }
    }
}

/* A query string (n bytes after '?'), escaped, with the value of every
 * "token" and "access_token" parameter written as REDACTED: where they are
 * is m0_log_query_secret's one rule (log_text.h), the error log's too. */
static void put_query(struct out *o, const char *q, size_t n, int json)
{
    size_t pos = 0, s0, s1;
    while (m0_log_query_secret(q, n, pos, &s0, &s1)) {
        put_esc(o, q + pos, s0 - pos, json);
        puts_(o, M0_LOG_REDACTED);
        pos = s1;
    }
    put_esc(o, q + pos, n - pos, json);
}

/* A header's value (name nl bytes), its credentials (Authorization's, the
 * grant cookie's: m0_log_header_secret) written as REDACTED. */
static void put_header(struct out *o, const char *name, size_t nl, const char *v, size_t n)
{
    if (v == NULL) {
        put(o, "-", 1);
        return;
    }
    size_t pos = 0, s0, s1;
    while (pos < n && m0_log_header_secret(name, nl, v, n, pos, &s0, &s1)) {
        put_esc(o, v + pos, s0 - pos, 0);
        puts_(o, M0_LOG_REDACTED);
        pos = s1;
    }
    put_esc(o, v + pos, n - pos, 0);
}

/* A request-target: its query through put_query. */
static void put_target(struct out *o, const char *t, size_t n, int json)
{
    const char *qm = memchr(t, '?', n);
    if (qm == NULL) {
        put_esc(o, t, n, json);
        return;
    }
    put_esc(o, t, (size_t)(qm - t) + 1, json);
    put_query(o, qm + 1, n - (size_t)(qm - t) - 1, json);
}

static void put_opt(struct out *o, const char *s, size_t n)
{
    if (s == NULL)
        put(o, "-", 1);
    else
        put_esc(o, s, n, 0);
}

static const struct m0_hdr *req_hdr(const struct m0_req *r, const char *name, size_t n)
{
    if (r == NULL || r->method == NULL)
        return NULL;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        if (r->hdrs[i].name_len == n && strncasecmp(r->hdrs[i].name, name, n) == 0)
            return &r->hdrs[i];
    }
    return NULL;
}

/* A response header's value from the head's "Name: value\r\n" lines. */
static const char *resp_hdr(const struct m0_access *a, const char *name, size_t n, size_t *vlen)
{
    const char *p = a->resp_head, *end = a->resp_head + a->resp_head_len;
    if (p == NULL)
        return NULL;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *le = eol ? eol : end;
        if ((size_t)(le - p) > n && p[n] == ':' && strncasecmp(p, name, n) == 0) {
            const char *v = p + n + 1;
            while (v < le && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = le;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        p = le + 1;
    }
    return NULL;
}

/* The user name of an "Authorization: Basic" header (RFC 7617), or NULL. */
static size_t basic_user(const struct m0_req *r, char *dst, size_t cap)
{
    const struct m0_hdr *h = req_hdr(r, "authorization", 13);
    if (h == NULL || h->value_len < 7 || strncasecmp(h->value, "basic ", 6) != 0)
        return 0;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (uint32_t i = 6; i < h->value_len; i++) {
        char c = h->value[i];
        int v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
        if (v < 0) {
            if (c == '=' || c == ' ')
                continue;
            return 0;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char ch = (char)((acc >> bits) & 0xff);
            if (ch == ':')
                return o;
            if (o + 1 >= cap)
                return o;
            dst[o++] = ch;
        }
    }
    return o;
}

static void put_reqline(struct out *o, const struct m0_req *r)
{
    if (r == NULL || r->method == NULL) {
        put(o, "-", 1);
        return;
    }
    put_esc(o, r->method, r->method_len, 0);
    put(o, " ", 1);
    put_target(o, r->target ? r->target : "-", r->target ? r->target_len : 1, 0);
    if (r->http_major != 0) {      /* a request rejected before its version has none */
        puts_(o, " HTTP/");
        put_num(o, r->http_major);
        put(o, ".", 1);
        put_num(o, r->http_minor);
    }
}

static void render_default(struct out *o, const struct m0_access *a)
{
    const struct m0_req *r = a->req;
    char when[40];
    m0_log_stamp(when, sizeof when, 1);
    puts_(o, a->addr && a->addr[0] ? a->addr : "-");
    puts_(o, " - - [");
    puts_(o, when);
    puts_(o, "] \"");
    put_reqline(o, r);
    puts_(o, "\" ");
    put_num(o, (unsigned long long)a->status);
    puts_(o, " ");
    put_num(o, a->bytes);
    puts_(o, " \"");
    const struct m0_hdr *ref = req_hdr(r, "referer", 7), *ua = req_hdr(r, "user-agent", 10);
    put_opt(o, ref ? ref->value : NULL, ref ? ref->value_len : 0);
    puts_(o, "\" \"");
    put_opt(o, ua ? ua->value : NULL, ua ? ua->value_len : 0);
    puts_(o, "\" ");
    put_secs(o, a->duration_us);
}

static void put_json_str(struct out *o, const char *key, const char *s, size_t n, int first)
{
    int query = strcmp(key, "query") == 0;
    if (!first)
        put(o, ",", 1);
    put(o, "\"", 1);
    puts_(o, key);
    put(o, "\":", 2);
    if (s == NULL) {
        puts_(o, "null");
        return;
    }
    put(o, "\"", 1);
    if (query)
        put_query(o, s, n, 1);
    else
        put_esc(o, s, n, 1);
    put(o, "\"", 1);
}

static void render_json(struct out *o, const struct m0_access *a)
{
    const struct m0_req *r = a->req;
    int have = r != NULL && r->method != NULL;
    char when[40];
    m0_log_stamp(when, sizeof when, 0);       /* "2026-11-29 13:20:00 +0000" */
    char iso[40];
    snprintf(iso, sizeof iso, "%.10sT%.8sZ", when, when + 11);
    put(o, "{", 1);
    put_json_str(o, "time", iso, strlen(iso), 1);
    put_json_str(o, "remote_addr", a->addr && a->addr[0] ? a->addr : NULL, a->addr ? strlen(a->addr) : 0, 0);
    put_json_str(o, "method", have ? r->method : NULL, have ? r->method_len : 0, 0);
    put_json_str(o, "path", have && r->path ? r->path : NULL, have ? r->path_len : 0, 0);
    put_json_str(o, "query", have && r->query ? r->query : NULL, have ? r->query_len : 0, 0);
    char proto[16];
    int has_proto = have && r->http_major != 0;
    snprintf(proto, sizeof proto, "HTTP/%u.%u", has_proto ? r->http_major : 0, has_proto ? r->http_minor : 0);
    put_json_str(o, "protocol", has_proto ? proto : NULL, strlen(proto), 0);
    puts_(o, ",\"status\":");
    put_num(o, (unsigned long long)a->status);
    puts_(o, ",\"bytes\":");
    put_num(o, a->bytes);
    const struct m0_hdr *ref = req_hdr(r, "referer", 7), *ua = req_hdr(r, "user-agent", 10);
    put_json_str(o, "referer", ref ? ref->value : NULL, ref ? ref->value_len : 0, 0);
    put_json_str(o, "user_agent", ua ? ua->value : NULL, ua ? ua->value_len : 0, 0);
    puts_(o, ",\"duration_us\":");
    put_num(o, a->duration_us);
    puts_(o, ",\"pid\":");
    put_num(o, (unsigned long long)getpid());
    puts_(o, "}");
}

static void render_atoms(struct out *o, const struct m0_access *a)
{
    const struct m0_req *r = a->req;
    int have = r != NULL && r->method != NULL;
    for (size_t i = 0; i < nops; i++) {
        const struct op *op = &ops[i];
        switch (op->kind) {
        case OP_LIT:
            put(o, text + op->off, op->len);
            break;
        case OP_ADDR:
            puts_(o, a->addr && a->addr[0] ? a->addr : "-");
            break;
        case OP_DASH:
            put(o, "-", 1);
            break;
        case OP_USER: {
            char u[128];
            size_t n = basic_user(r, u, sizeof u);
            put_opt(o, n ? u : NULL, n);
            break;
        }
        case OP_TIME: {
            char when[40];
            m0_log_stamp(when, sizeof when, 1);
            put(o, "[", 1);
            puts_(o, when);
            put(o, "]", 1);
            break;
        }
        case OP_REQLINE:
            put_reqline(o, r);
            break;
        case OP_METHOD:
            put_opt(o, have ? r->method : NULL, have ? r->method_len : 0);
            break;
        case OP_PATH:
            put_opt(o, have && r->path ? r->path : NULL, have ? r->path_len : 0);
            break;
        case OP_QUERY:
            if (have && r->query_len > 0)
                put_query(o, r->query, r->query_len, 0);
            break;
        case OP_PROTO:
            if (have && r->http_major != 0) {
                puts_(o, "HTTP/");
                put_num(o, r->http_major);
                put(o, ".", 1);
                put_num(o, r->http_minor);
            } else
                put(o, "-", 1);
            break;
        case OP_STATUS:
            put_num(o, (unsigned long long)a->status);
            break;
        case OP_BYTES:
            put_num(o, a->bytes);
            break;
        case OP_BYTES_CLF:
            if (a->bytes == 0)
                put(o, "-", 1);
            else
                put_num(o, a->bytes);
            break;
        case OP_REFERER:
        case OP_UA: {
            const struct m0_hdr *h = op->kind == OP_REFERER ? req_hdr(r, "referer", 7) : req_hdr(r, "user-agent", 10);
            put_opt(o, h ? h->value : NULL, h ? h->value_len : 0);
            break;
        }
        case OP_SECS:
            put_num(o, a->duration_us / 1000000);
            break;
        case OP_MILLIS:
            put_num(o, a->duration_us / 1000);
            break;
        case OP_MICROS:
            put_num(o, a->duration_us);
            break;
        case OP_DECIMAL:
            put_secs(o, a->duration_us);
            break;
        case OP_PID:
            puts_(o, "<");
            put_num(o, (unsigned long long)getpid());
            puts_(o, ">");
            break;
        case OP_REQ_HDR: {
            const struct m0_hdr *h = req_hdr(r, names + op->off, op->len);
            put_header(o, names + op->off, op->len, h ? h->value : NULL, h ? h->value_len : 0);
            break;
        }
        case OP_RESP_HDR: {
            size_t vlen = 0;
            const char *v = resp_hdr(a, names + op->off, op->len, &vlen);
            put_header(o, names + op->off, op->len, v, vlen);
            break;
        }
        }
    }
}

size_t m0_access_render(char *dst, size_t cap, const struct m0_access *a)
{
    if (cap < 2)
        return 0;
    struct out o = {.p = dst, .n = 0, .cap = cap - 1};
    if (mode == FMT_JSON)
        render_json(&o, a);
    else if (mode == FMT_ATOMS)
        render_atoms(&o, a);
    else
        render_default(&o, a);
    dst[o.n++] = '\n';
    return o.n;
}

void m0_access_log(const struct m0_access *a)
{
    char line[4096];
    size_t n = m0_access_render(line, sizeof line, a);
    m0_log_out(line, n);
}

/* --------------------------------------------- a held connection's line */

/* What a held connection's line needs once its request is gone (hold.h:
 * the request is freed when the connection is HELD): the client, the
 * request line, the request fields and response fields the compiled
 * format reads — in one block, so a held stream costs its line's bytes
 * and no more. */
struct m0_access_kept {
    struct m0_req req;              /* method, target, path, query, version, hdrs: into the block */
    const char *addr;
    char *head;                     /* the response's fields the format reads ("Name: v\r\n"...) */
    size_t head_len;
};

/* Does the compiled format read the request field name (n bytes)? */
static int reads_req_hdr(const char *name, size_t n)
{
    if ((n == 7 && strncasecmp(name, "referer", 7) == 0) || (n == 10 && strncasecmp(name, "user-agent", 10) == 0))
        return 1;
    if (mode != FMT_ATOMS)
        return 0;
    for (size_t i = 0; i < nops; i++) {
        if (ops[i].kind == OP_USER && n == 13 && strncasecmp(name, "authorization", 13) == 0)
            return 1;
        if (ops[i].kind == OP_REQ_HDR && ops[i].len == n && strncasecmp(names + ops[i].off, name, n) == 0)
            return 1;
    }
    return 0;
}

/* Does it read the response field name (n bytes)? */
static int reads_resp_hdr(const char *name, size_t n)
{
    if (mode != FMT_ATOMS)
        return 0;
    for (size_t i = 0; i < nops; i++) {
        if (ops[i].kind == OP_RESP_HDR && ops[i].len == n && strncasecmp(names + ops[i].off, name, n) == 0)
            return 1;
    }
    return 0;
}

static char *take(char **at, const char *s, size_t n)
{
    char *d = *at;
    if (n > 0)
        memcpy(d, s, n);
    d[n] = '\0';
    *at += n + 1;
    return d;
}

struct m0_access_kept *m0_access_keep(const struct m0_access *a)
{
    const struct m0_req *r = a->req;
    int have = r != NULL && r->method != NULL;
    size_t alen = a->addr != NULL ? strlen(a->addr) : 0;
    size_t size = sizeof(struct m0_access_kept) + alen + 1, nh = 0;
    if (have) {
        size += r->method_len + r->target_len + r->path_len + r->query_len + 4;
        for (unsigned i = 0; i < r->nhdrs; i++) {
            if (reads_req_hdr(r->hdrs[i].name, r->hdrs[i].name_len)) {
                nh++;
                size += sizeof(struct m0_hdr) + r->hdrs[i].name_len + r->hdrs[i].value_len + 2;
            }
        }
    }
    struct m0_access_kept *k = m0_xmalloc(size);
    memset(k, 0, sizeof *k);
    struct m0_hdr *hd = (struct m0_hdr *)(k + 1);
    char *at = (char *)(hd + nh);
    k->addr = a->addr != NULL ? take(&at, a->addr, alen) : NULL;
    if (have) {
        k->req.method = take(&at, r->method, r->method_len);
        k->req.method_len = r->method_len;
        k->req.target = r->target != NULL ? take(&at, r->target, r->target_len) : NULL;
        k->req.target_len = r->target_len;
        k->req.path = r->path != NULL ? take(&at, r->path, r->path_len) : NULL;
        k->req.path_len = r->path_len;
        k->req.query = r->query != NULL ? take(&at, r->query, r->query_len) : NULL;
        k->req.query_len = r->query_len;
        k->req.http_major = r->http_major;
        k->req.http_minor = r->http_minor;
        k->req.hdrs = hd;
        for (unsigned i = 0; i < r->nhdrs; i++) {
            const struct m0_hdr *h = &r->hdrs[i];
            if (!reads_req_hdr(h->name, h->name_len))
                continue;
            hd->name = take(&at, h->name, h->name_len);
            hd->name_len = h->name_len;
            hd->value = take(&at, h->value, h->value_len);
            hd->value_len = h->value_len;
            hd++;
        }
        k->req.nhdrs = k->req.hdrs_cap = (unsigned)nh;
    }
    m0_access_keep_head(k, a->resp_head, a->resp_head_len);
    return k;
}

void m0_access_keep_head(struct m0_access_kept *k, const char *head, size_t len)
{
    free(k->head);
    k->head = NULL;
    k->head_len = 0;
    const char *p = head, *end = head != NULL ? head + len : NULL;
    while (p != NULL && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *next = eol != NULL ? eol + 1 : end;
        const char *colon = memchr(p, ':', (size_t)(next - p));
        if (colon != NULL && reads_resp_hdr(p, (size_t)(colon - p))) {
            size_t n = (size_t)(next - p);
            k->head = m0_xrealloc(k->head, k->head_len + n);
            memcpy(k->head + k->head_len, p, n);
            k->head_len += n;
        }
        p = next;
    }
}

void m0_access_kept_view(const struct m0_access_kept *k, struct m0_access *a)
{
    a->addr = k->addr;
    a->req = &k->req;
    if (k->head != NULL) {
        a->resp_head = k->head;
        a->resp_head_len = k->head_len;
    }
}

void m0_access_kept_free(struct m0_access_kept *k)
{
    if (k == NULL)
        return;
    free(k->head);
    free(k);
}
