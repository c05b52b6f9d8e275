/*
 * epcp.c — an EPCP publish body into items (see epcp.h). Every error is a
 * 400 with a sentence naming the item and the field, as Pushpin's control
 * port answers ("Invalid format: ..."); a channel name must also be one
 * m0serve's bus carries (sse.h), its rule named after the field.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "m0/epcp.h"
#include "m0/base64.h"
#include "m0/grip.h"
#include "m0/http.h"
#include "m0/sse.h"
#include "m0/ws.h"

struct ctx {
    struct m0_epcp_publish *pub;
    unsigned index;                 /* the item being read, from 0 */
};

__attribute__((format(printf, 2, 3)))
static int fail(struct ctx *c, const char *fmt, ...)
{
    char *e = c->pub->err;
    int k = snprintf(e, M0_EPCP_ERR_MAX, "Invalid format: item %u: ", c->index);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e + k, M0_EPCP_ERR_MAX - (size_t)k, fmt, ap);
    va_end(ap);
    return M0_ERR;
}

static struct m0_epcp_bytes copy(struct ctx *c, const char *p, size_t n)
{
    struct m0_epcp_bytes b = {m0_arena_strndup(&c->pub->arena, p, n), n};
    return b;
}

/* An optional string member: M0_OK with *out set (or untouched when
 * absent; *present says which), M0_ERR when it is there but not a string. */
static int get_string(struct ctx *c, json_t *obj, const char *where, const char *key,
                      struct m0_epcp_bytes *out, uint8_t *present)
{
    json_t *v = json_object_get(obj, key);
    if (present != NULL)
        *present = 0;
    if (v == NULL)
        return M0_OK;
    if (!json_is_string(v))
        return fail(c, "%s contains '%s' with wrong type", where, key);
    *out = copy(c, json_string_value(v), json_string_length(v));
    if (present != NULL)
        *present = 1;
    return M0_OK;
}

/* A base64 member into bytes. */
static int get_base64(struct ctx *c, json_t *v, const char *where, const char *key,
                      struct m0_epcp_bytes *out)
{
    if (!json_is_string(v))
        return fail(c, "%s contains '%s' with wrong type", where, key);
    size_t n = json_string_length(v);
    char *buf = m0_arena_alloc(&c->pub->arena, n / 4 * 3 + 3 + 1);
    ssize_t k = m0_base64_decode(json_string_value(v), n, M0_B64_PAD, (unsigned char *)buf, n / 4 * 3 + 3);
    if (k < 0)
        return fail(c, "%s contains '%s' that is not base64", where, key);
    buf[k] = '\0';
    out->p = buf;
    out->len = (size_t)k;
    return M0_OK;
}

static int get_int(struct ctx *c, json_t *obj, const char *where, const char *key, int lo, int hi,
                   int *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL)
        return M0_OK;
    if (!json_is_integer(v))
        return fail(c, "%s contains '%s' with wrong type", where, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail(c, "%s contains '%s' with invalid value", where, key);
    *out = (int)x;
    return M0_OK;
}

static int get_action(struct ctx *c, json_t *obj, const char *where, enum m0_epcp_action *out)
{
    struct m0_epcp_bytes a = {NULL, 0};
    uint8_t has = 0;
    if (get_string(c, obj, where, "action", &a, &has) != M0_OK)
        return M0_ERR;
    *out = M0_EPCP_SEND;
    if (!has || strcmp(a.p, "send") == 0)
        return M0_OK;
    if (strcmp(a.p, "close") == 0)
        *out = M0_EPCP_CLOSE;
    else if (strcmp(a.p, "hint") == 0)
        *out = M0_EPCP_HINT;
    else if (strcmp(a.p, "refresh") == 0)
        *out = M0_EPCP_REFRESH;
    else
        return fail(c, "%s contains 'action' with unknown value", where);
    return M0_OK;
}

/* content-filters: a list of filter names, as grip.h's bits (a name this
 * server does not know sets M0_GRIP_F_OTHER, like Grip-Channel filter=). */
static int get_filters(struct ctx *c, json_t *obj, const char *where, uint8_t *has,
                       uint32_t *bits)
{
    json_t *v = json_object_get(obj, "content-filters");
    *has = 0;
    *bits = 0;
    if (v == NULL)
        return M0_OK;
    if (!json_is_array(v))
        return fail(c, "%s contains 'content-filters' with wrong type", where);
    size_t i;
    json_t *f;
    json_array_foreach(v, i, f) {
        if (!json_is_string(f))
            return fail(c, "content-filters contains element with wrong type");
        const char *s = json_string_value(f);
        if (strcmp(s, "skip-self") == 0)
            *bits |= M0_GRIP_F_SKIP_SELF;
        else if (strcmp(s, "skip-users") == 0)
            *bits |= M0_GRIP_F_SKIP_USERS;
        else if (strcmp(s, "require-sub") == 0)
            *bits |= M0_GRIP_F_REQUIRE_SUB;
        else if (strcmp(s, "build-id") == 0)
            *bits |= M0_GRIP_F_BUILD_ID;
        else if (strcmp(s, "var-subst") == 0)
            *bits |= M0_GRIP_F_VAR_SUBST;
        else
            *bits |= M0_GRIP_F_OTHER;
    }
    *has = 1;
    return M0_OK;
}

/* The bytes of a "content"/"content-bin" (or "body"/"body-bin") pair:
 * 1 found, 0 neither there, M0_ERR. */
static int get_payload(struct ctx *c, json_t *obj, const char *where, const char *text,
                       const char *bin, struct m0_epcp_bytes *out)
{
    json_t *b = json_object_get(obj, bin);
    if (b != NULL)
        return get_base64(c, b, where, bin, out) == M0_OK ? 1 : M0_ERR;
    json_t *t = json_object_get(obj, text);
    if (t == NULL)
        return 0;
    if (!json_is_string(t))
        return fail(c, "%s contains '%s' with wrong type", where, text);
    *out = copy(c, json_string_value(t), json_string_length(t));
    return 1;
}

static int header_ok(struct ctx *c, const char *n, size_t nl, const char *v, size_t vl)
{
    if (!m0_http_is_token(n, nl))
        return fail(c, "headers contains a name that is not a field name");
    if (!m0_http_is_field_value(v, vl))
        return fail(c, "headers contains a value with CR, LF, NUL or another control byte");
    return M0_OK;
}

static int get_headers(struct ctx *c, json_t *obj, struct m0_epcp_response *r)
{
    json_t *h = json_object_get(obj, "headers");
    if (h == NULL)
        return M0_OK;
    size_t n = json_is_array(h) ? json_array_size(h) : json_is_object(h) ? json_object_size(h) : 0;
    if (!json_is_array(h) && !json_is_object(h))
        return fail(c, "'http-response' contains 'headers' with wrong type");
    if (n > M0_EPCP_HEADERS_MAX)
        return fail(c, "headers has more than %d fields", M0_EPCP_HEADERS_MAX);
    r->headers = m0_arena_alloc(&c->pub->arena, (n ? n : 1) * sizeof *r->headers);
    if (json_is_array(h)) {
        size_t i;
        json_t *pair;
        json_array_foreach(h, i, pair) {
            if (!json_is_array(pair))
                return fail(c, "headers contains element with wrong type");
            if (json_array_size(pair) != 2)
                return fail(c, "headers contains list with wrong number of elements");
            json_t *hn = json_array_get(pair, 0), *hv = json_array_get(pair, 1);
            if (!json_is_string(hn))
                return fail(c, "header contains name element with wrong type");
            if (!json_is_string(hv))
                return fail(c, "header contains value element with wrong type");
            if (header_ok(c, json_string_value(hn), json_string_length(hn), json_string_value(hv),
                          json_string_length(hv)) != M0_OK)
                return M0_ERR;
            r->headers[r->nheaders].name = copy(c, json_string_value(hn), json_string_length(hn));
            r->headers[r->nheaders].value = copy(c, json_string_value(hv), json_string_length(hv));
            r->nheaders++;
        }
        return M0_OK;
    }
    const char *key;
    json_t *hv;
    json_object_foreach(h, key, hv) {
        if (!json_is_string(hv))
            return fail(c, "headers contains '%.64s' with wrong type", key);
        if (header_ok(c, key, strlen(key), json_string_value(hv), json_string_length(hv)) != M0_OK)
            return M0_ERR;
        r->headers[r->nheaders].name = copy(c, key, strlen(key));
        r->headers[r->nheaders].value = copy(c, json_string_value(hv), json_string_length(hv));
        r->nheaders++;
    }
    return M0_OK;
}

static int parse_stream(struct ctx *c, json_t *f, struct m0_epcp_stream *s)
{
    const char *w = "'http-stream'";
    if (!json_is_object(f))
        return fail(c, "%s is not an object", w);
    s->present = 1;
    if (get_action(c, f, w, &s->action) != M0_OK)
        return M0_ERR;
    if (s->action != M0_EPCP_SEND)
        return M0_OK;
    if (get_filters(c, f, w, &s->has_filters, &s->filters) != M0_OK)
        return M0_ERR;
    int r = get_payload(c, f, w, "content", "content-bin", &s->content);
    if (r == 0)
        return fail(c, "%s does not contain 'content' or 'content-bin'", w);
    return r < 0 ? M0_ERR : M0_OK;
}

static int parse_response(struct ctx *c, json_t *f, struct m0_epcp_response *r)
{
    const char *w = "'http-response'";
    if (!json_is_object(f))
        return fail(c, "%s is not an object", w);
    r->present = 1;
    r->code = 200;
    if (get_action(c, f, w, &r->action) != M0_OK)
        return M0_ERR;
    if (r->action != M0_EPCP_SEND)
        return M0_OK;
    /* A final status (RFC 9110 §15): Pushpin takes 0..999, but nothing
     * outside 200..599 can end a held request. */
    if (get_int(c, f, w, "code", 200, 599, &r->code) != M0_OK)
        return M0_ERR;
    if (get_string(c, f, w, "reason", &r->reason, NULL) != M0_OK)
        return M0_ERR;
    if (r->reason.p != NULL && !m0_http_is_field_value(r->reason.p, r->reason.len))
        return fail(c, "%s contains 'reason' with invalid value", w);
    if (get_headers(c, f, r) != M0_OK)
        return M0_ERR;
    if (get_filters(c, f, w, &r->has_filters, &r->filters) != M0_OK)
        return M0_ERR;
    int got = get_payload(c, f, w, "body", "body-bin", &r->body);
    if (got < 0)
        return M0_ERR;
    if (got == 0) {
        if (json_object_get(f, "body-patch") != NULL)
            return fail(c, "%s contains 'body-patch', which this server does not support", w);
        return fail(c, "%s does not contain 'body', 'body-bin', or 'body-patch'", w);
    }
    return M0_OK;
}

static int parse_ws(struct ctx *c, json_t *f, struct m0_epcp_ws *m)
{
    const char *w = "'ws-message'";
    if (!json_is_object(f))
        return fail(c, "%s is not an object", w);
    m->present = 1;
    m->close_code = -1;
    if (get_action(c, f, w, &m->action) != M0_OK)
        return M0_ERR;
    if (m->action == M0_EPCP_CLOSE) {
        /* RFC 6455 §7.4: a close code is two bytes. */
        if (get_int(c, f, w, "code", 0, 65535, &m->close_code) != M0_OK)
            return M0_ERR;
        return get_string(c, f, w, "reason", &m->reason, NULL);
    }
    if (m->action != M0_EPCP_SEND)
        return M0_OK;
    struct m0_epcp_bytes type = {NULL, 0};
    uint8_t has_type = 0;
    if (get_string(c, f, w, "type", &type, &has_type) != M0_OK)
        return M0_ERR;
    if (has_type) {
        if (strcmp(type.p, "text") == 0)
            m->type = M0_EPCP_WS_TEXT;
        else if (strcmp(type.p, "binary") == 0)
            m->type = M0_EPCP_WS_BINARY;
        else if (strcmp(type.p, "ping") == 0)
            m->type = M0_EPCP_WS_PING;
        else if (strcmp(type.p, "pong") == 0)
            m->type = M0_EPCP_WS_PONG;
        else
            return fail(c, "%s contains 'type' with unknown value", w);
    }
    if (get_filters(c, f, w, &m->has_filters, &m->filters) != M0_OK)
        return M0_ERR;
    int bin = json_object_get(f, "content-bin") != NULL;
    int r = get_payload(c, f, w, "content", "content-bin", &m->content);
    if (r < 0)
        return M0_ERR;
    if (r == 0 && (!has_type || m->type == M0_EPCP_WS_TEXT || m->type == M0_EPCP_WS_BINARY))
        return fail(c, "%s does not contain 'content' or 'content-bin'", w);
    if (!has_type)
        m->type = bin ? M0_EPCP_WS_BINARY : M0_EPCP_WS_TEXT;
    /* RFC 6455 §5.6: a text frame's payload is UTF-8 ("content" is, from
     * JSON; "content-bin" with "type": "text" must be). */
    if (m->type == M0_EPCP_WS_TEXT && !m0_ws_utf8_valid(m->content.p, m->content.len))
        return fail(c, "%s contains text content that is not UTF-8", w);
    /* RFC 6455 §5.5: a control frame's payload is at most 125 bytes. */
    if ((m->type == M0_EPCP_WS_PING || m->type == M0_EPCP_WS_PONG) && m->content.len > 125)
        return fail(c, "%s ping or pong content is longer than 125 bytes", w);
    return M0_OK;
}

static int parse_meta(struct ctx *c, json_t *obj, struct m0_epcp_item *it)
{
    json_t *m = json_object_get(obj, "meta");
    if (m == NULL)
        return M0_OK;
    if (!json_is_object(m))
        return fail(c, "publish item object contains 'meta' with wrong type");
    size_t n = json_object_size(m);
    if (n > M0_EPCP_META_MAX)
        return fail(c, "'meta' has more than %d entries", M0_EPCP_META_MAX);
    it->meta = m0_arena_alloc(&c->pub->arena, (n ? n : 1) * sizeof *it->meta);
    const char *key;
    json_t *v;
    json_object_foreach(m, key, v) {
        if (!json_is_string(v))
            return fail(c, "'meta' contains '%.64s' with wrong type", key);
        it->meta[it->nmeta].name = copy(c, key, strlen(key));
        it->meta[it->nmeta].value = copy(c, json_string_value(v), json_string_length(v));
        it->nmeta++;
    }
    return M0_OK;
}

static int parse_item(struct ctx *c, json_t *v, struct m0_epcp_item *it)
{
    const char *w = "publish item object";
    if (!json_is_object(v))
        return fail(c, "%s is not an object", w);
    json_t *ch = json_object_get(v, "channel");
    if (ch == NULL)
        return fail(c, "%s does not contain 'channel'", w);
    if (!json_is_string(ch))
        return fail(c, "%s contains 'channel' with wrong type", w);
    if (json_string_length(ch) == 0)
        return fail(c, "%s contains 'channel' with invalid value", w);
    /* A name the bus and the holds take (sse.h), or the item could only be
     * refused later, by the bus, as if it were too large. */
    const char *why = m0_sse_channel_error(json_string_value(ch), json_string_length(ch));
    if (why != NULL)
        return fail(c, "%s contains 'channel' with invalid value: %s", w, why);
    it->channel = copy(c, json_string_value(ch), json_string_length(ch));
    if (get_string(c, v, w, "id", &it->id, &it->has_id) != M0_OK ||
        get_string(c, v, w, "prev-id", &it->prev_id, &it->has_prev_id) != M0_OK)
        return M0_ERR;
    json_t *formats = json_object_get(v, "formats");
    if (formats != NULL && !json_is_object(formats))
        return fail(c, "%s contains 'formats' with wrong type", w);
    if (formats == NULL)
        formats = v;
    json_t *f;
    int any = 0;
    if ((f = json_object_get(formats, "http-response")) != NULL) {
        if (parse_response(c, f, &it->response) != M0_OK)
            return M0_ERR;
        any = 1;
    }
    if ((f = json_object_get(formats, "http-stream")) != NULL) {
        if (parse_stream(c, f, &it->stream) != M0_OK)
            return M0_ERR;
        any = 1;
    }
    if ((f = json_object_get(formats, "ws-message")) != NULL) {
        if (parse_ws(c, f, &it->ws) != M0_OK)
            return M0_ERR;
        any = 1;
    }
    if (!any)
        return fail(c, "no formats specified");
    if (parse_meta(c, v, it) != M0_OK)
        return M0_ERR;
    json_t *ns = json_object_get(v, "no-seq");
    if (ns != NULL) {
        if (!json_is_boolean(ns))
            return fail(c, "%s contains 'no-seq' with wrong type", w);
        it->no_seq = json_is_true(ns);
    }
    return M0_OK;
}

int m0_epcp_parse(struct m0_epcp_publish *pub, const char *body, size_t len)
{
    memset(pub, 0, sizeof *pub);
    json_error_t jerr;
    /* JSON_ALLOW_NUL: "\u0000" is text like any other in content. */
    json_t *doc = json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
    if (doc == NULL) {
        snprintf(pub->err, sizeof pub->err, "Body is not valid JSON.");
        return 400;
    }
    int status = 400;
    json_t *items = json_is_object(doc) ? json_object_get(doc, "items") : NULL;
    if (!json_is_object(doc)) {
        snprintf(pub->err, sizeof pub->err, "Invalid format.");
    } else if (items == NULL) {
        snprintf(pub->err, sizeof pub->err, "Invalid format: object does not contain 'items'");
    } else if (!json_is_array(items)) {
        snprintf(pub->err, sizeof pub->err,
                 "Invalid format: object contains 'items' with wrong type");
    } else if (json_array_size(items) > M0_EPCP_ITEMS_MAX) {
        snprintf(pub->err, sizeof pub->err, "Invalid format: more than %d items",
                 M0_EPCP_ITEMS_MAX);
    } else {
        size_t n = json_array_size(items);
        struct ctx c = {pub, 0};
        pub->items = m0_arena_alloc(&pub->arena, (n ? n : 1) * sizeof *pub->items);
        memset(pub->items, 0, (n ? n : 1) * sizeof *pub->items);
        status = 200;
        for (size_t i = 0; i < n; i++) {
            c.index = (unsigned)i;
            if (parse_item(&c, json_array_get(items, i), &pub->items[i]) != M0_OK) {
                status = 400;
                break;
            }
            pub->nitems++;
        }
    }
    json_decref(doc);
    if (status != 200)
        pub->nitems = 0;
    return status;
}

void m0_epcp_free(struct m0_epcp_publish *pub)
{
    m0_arena_free(&pub->arena);
    pub->items = NULL;
    pub->nitems = 0;
}
