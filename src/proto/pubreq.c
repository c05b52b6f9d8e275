/*
 * pubreq.c — a publish socket's request body (see pubreq.h).
 *
 * Strict on purpose: the socket is a program's interface, not a form, and
 * a member it does not know is more likely a typo than an extension; an
 * error naming it costs the caller one fix, a silently different event
 * costs a reader a wrong message.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "m0/pubreq.h"
#include "m0/sse.h"

const struct m0_limits m0_pubreq_limits = {
    .max_target = 1024,
    .max_header_bytes = 8192,
    .max_headers = 32,
    .max_body = M0_PUBREQ_BODY_MAX,
    .body_mem = M0_PUBREQ_BODY_MAX,
};

__attribute__((format(printf, 2, 3)))
static int fail(struct m0_pubreq *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    r->channel = r->data = r->event = r->key = NULL;
    r->channel_len = r->data_len = r->key_len = 0;
    return 400;
}

/* A member that must be a string (or, when nullable, null: *out NULL). */
static int string_member(struct m0_pubreq *r, json_t *v, const char *name, int nullable, const char **out,
                         size_t *len)
{
    if (nullable && json_is_null(v)) {
        *out = NULL;
        *len = 0;
        return M0_OK;
    }
    if (!json_is_string(v)) {
        fail(r, "%s: want a string%s", name, nullable ? " or null" : "");
        return M0_ERR;
    }
    *out = json_string_value(v);
    *len = json_string_length(v);
    return M0_OK;
}

int m0_pubreq_parse(struct m0_pubreq *r, const char *body, size_t len)
{
    memset(r, 0, sizeof *r);
    if (len > M0_PUBREQ_BODY_MAX) {
        snprintf(r->err, sizeof r->err, "body of %zu bytes is over the %d-byte limit", len, M0_PUBREQ_BODY_MAX);
        return 413;
    }
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    r->json = root;
    if (root == NULL)
        return fail(r, "body is not a JSON object: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
    if (!json_is_object(root))
        return fail(r, "body is not a JSON object");
    const char *name;
    json_t *v;
    size_t event_len = 0;
    int has_channel = 0, has_data = 0;
    json_object_foreach(root, name, v) {
        if (strcmp(name, "channel") == 0) {
            if (string_member(r, v, "channel", 0, &r->channel, &r->channel_len) != M0_OK)
                return 400;
            has_channel = 1;
        } else if (strcmp(name, "data") == 0) {
            if (string_member(r, v, "data", 0, &r->data, &r->data_len) != M0_OK)
                return 400;
            has_data = 1;
        } else if (strcmp(name, "event") == 0) {
            if (string_member(r, v, "event", 1, &r->event, &event_len) != M0_OK)
                return 400;
        } else if (strcmp(name, "key") == 0) {
            if (string_member(r, v, "key", 1, &r->key, &r->key_len) != M0_OK)
                return 400;
        } else if (strcmp(name, "id") == 0) {
            return fail(r, "id: event ids are the server's (one global sequence) and cannot be given");
        } else {
            /* A name may hold any character: show a printable prefix. */
            char shown[40];
            size_t n = 0;
            for (const char *p = name; *p && n < sizeof shown - 1; p++)
                shown[n++] = (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f ? *p : '?';
            shown[n] = '\0';
            return fail(r, "unknown member '%s' (a publish has channel, data, event, key)", shown);
        }
    }
    if (!has_channel)
        return fail(r, "channel: required");
    if (!has_data)
        return fail(r, "data: required");
    const char *why = m0_sse_channel_error(r->channel, r->channel_len);
    if (why != NULL)
        return fail(r, "channel: %s", why);
    if (r->event != NULL && (strpbrk(r->event, "\r\n") != NULL || strlen(r->event) != event_len))
        return fail(r, "event: one line (no CR, LF or NUL)");
    return 200;
}

void m0_pubreq_free(struct m0_pubreq *r)
{
    json_decref(r->json);
    r->json = NULL;
}

int m0_pubreq_encode(struct m0_buf *out, const char *channel, size_t clen, const char *data, size_t dlen,
                     const char *event, const char *key, char *err, size_t cap)
{
    json_t *o = json_object();
    json_t *c = json_stringn(channel, clen);
    json_t *d = json_stringn(data, dlen);
    json_t *e = event != NULL ? json_string(event) : NULL;
    json_t *k = key != NULL ? json_string(key) : NULL;
    const char *bad = c == NULL ? "channel" : d == NULL ? "data" : event != NULL && e == NULL ? "event"
                      : key != NULL && k == NULL ? "key" : NULL;
    char *text = NULL;
    if (bad == NULL) {
        json_object_set_new(o, "channel", c);
        json_object_set_new(o, "data", d);
        if (e != NULL)
            json_object_set_new(o, "event", e);
        if (k != NULL)
            json_object_set_new(o, "key", k);
        c = d = e = k = NULL;
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(c);
    json_decref(d);
    json_decref(e);
    json_decref(k);
    json_decref(o);
    if (text == NULL) {
        snprintf(err, cap, "%s: not UTF-8 text (an event stream is UTF-8)", bad ? bad : "body");
        return M0_ERR;
    }
    m0_buf_puts(out, text);
    free(text);
    return M0_OK;
}

/* The value of head field name (lower case) within [p, end), or NULL. */
static const char *field(const char *p, const char *end, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol != NULL ? eol : end;
        if ((size_t)(line_end - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            const char *v = p + nl + 1;
            while (v < line_end && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = line_end;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        p = line_end + 1;
    }
    return NULL;
}

int m0_pubreq_answer(const char *resp, size_t n, int *status, const char **body, size_t *blen, uint64_t *id)
{
    *status = 0;
    *body = NULL;
    *blen = 0;
    *id = 0;
    if (n < 12 || memcmp(resp, "HTTP/1.", 7) != 0 || resp[7] < '0' || resp[7] > '9' || resp[8] != ' ')
        return M0_ERR;
    int st = 0;
    for (int i = 9; i < 12; i++) {
        if (resp[i] < '0' || resp[i] > '9')
            return M0_ERR;
        st = st * 10 + (resp[i] - '0');
    }
    if (st < 100 || (n > 12 && resp[12] != ' ' && resp[12] != '\r'))
        return M0_ERR;
    const char *head_end = memmem(resp, n, "\r\n\r\n", 4);
    if (head_end == NULL)
        return M0_ERR;
    const char *b = head_end + 4, *end = resp + n;
    size_t len = (size_t)(end - b), vl;
    const char *cl = field(resp, head_end + 2, "content-length", &vl);
    if (cl != NULL) {
        size_t want = 0;
        if (vl == 0 || vl > 9)
            return M0_ERR;
        for (size_t i = 0; i < vl; i++) {
            if (cl[i] < '0' || cl[i] > '9')
                return M0_ERR;
            want = want * 10 + (size_t)(cl[i] - '0');
        }
        if (want > len)
            return M0_ERR;
        len = want;
    }
    if (st == 200) {
        json_t *root = json_loadb(b, len, 0, NULL);
        json_t *v = json_object_get(root, "id");
        json_int_t k = json_is_integer(v) ? json_integer_value(v) : 0;
        json_decref(root);
        if (k <= 0)
            return M0_ERR;
        *id = (uint64_t)k;
    }
    *status = st;
    *body = b;
    *blen = len;
    return M0_OK;
}
