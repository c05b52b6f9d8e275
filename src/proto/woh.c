/*
 * woh.c — WebSocket-over-HTTP, the codec (see woh.h): events in and out,
 * the GRIP control messages, the grip extension's parameters.
 *
 * Stricter than Pushpin's decoder where it is lenient with garbage (a size
 * past the end is cut short there, the CRLF after content never checked):
 * a body that is not this encoding is refused whole, so a view's answer is
 * either understood or reported, never half-applied.
 */
#include <jansson.h>
#include <string.h>
#include <strings.h>

#include "m0/base64.h"
#include "m0/http.h"
#include "m0/percent.h"
#include "m0/woh.h"

static const char *const names[] = {
    [M0_WOH_OTHER] = "",          [M0_WOH_OPEN] = "OPEN",   [M0_WOH_TEXT] = "TEXT",
    [M0_WOH_BINARY] = "BINARY",   [M0_WOH_PING] = "PING",   [M0_WOH_PONG] = "PONG",
    [M0_WOH_CLOSE] = "CLOSE",     [M0_WOH_DISCONNECT] = "DISCONNECT",
};

const char *m0_woh_name(enum m0_woh_type t)
{
    return (unsigned)t < M0_ARRAY_LEN(names) ? names[t] : "";
}

void m0_woh_put(struct m0_buf *b, enum m0_woh_type t, const void *p, size_t n)
{
    m0_buf_puts(b, m0_woh_name(t));
    if (p == NULL) {
        m0_buf_puts(b, "\r\n");
        return;
    }
    m0_buf_printf(b, " %zx\r\n", n);
    m0_buf_append(b, p, n);
    m0_buf_puts(b, "\r\n");
}

static enum m0_woh_type type_of(const char *p, size_t n)
{
    for (size_t t = 1; t < M0_ARRAY_LEN(names); t++) {
        if (strlen(names[t]) == n && memcmp(names[t], p, n) == 0)
            return (enum m0_woh_type)t;
    }
    return M0_WOH_OTHER;
}

int m0_woh_next(const char *body, size_t n, size_t *off, struct m0_woh_event *ev)
{
    size_t at = *off;
    if (at >= n)
        return 0;
    const char *line = body + at;
    const char *eol = memmem(line, n - at, "\r\n", 2);
    if (eol == NULL)
        return M0_ERR;
    size_t llen = (size_t)(eol - line);
    const char *sp = memchr(line, ' ', llen);
    size_t tlen = sp != NULL ? (size_t)(sp - line) : llen;
    if (tlen == 0)
        return M0_ERR;
    for (size_t i = 0; i < tlen; i++) {
        if (!(line[i] >= 'A' && line[i] <= 'Z') && !(line[i] >= '0' && line[i] <= '9') && line[i] != '-' &&
            line[i] != '_')
            return M0_ERR;
    }
    memset(ev, 0, sizeof *ev);
    ev->type = type_of(line, tlen);
    at += llen + 2;
    if (sp == NULL) {
        *off = at;
        return 1;
    }
    size_t digits = llen - tlen - 1;
    if (digits == 0 || digits > 8)
        return M0_ERR;
    size_t clen = 0;
    for (size_t i = 0; i < digits; i++) {
        int v = m0_hex_digit((unsigned char)sp[1 + i]);
        if (v < 0)
            return M0_ERR;
        clen = clen * 16 + (size_t)v;
    }
    if (clen > n - at || n - at - clen < 2 || body[at + clen] != '\r' || body[at + clen + 1] != '\n')
        return M0_ERR;
    ev->content = body + at;
    ev->len = clen;
    ev->has_content = 1;
    *off = at + clen + 2;
    return 1;
}

/* ---------------------------------------------------- control messages */

static const struct {
    const char *name;
    enum m0_woh_ctl_type type;
} ctl_types[] = {
    {"subscribe", M0_WOH_CTL_SUBSCRIBE},     {"unsubscribe", M0_WOH_CTL_UNSUBSCRIBE},
    {"detach", M0_WOH_CTL_DETACH},           {"keep-alive", M0_WOH_CTL_KEEP_ALIVE},
    {"set-meta", M0_WOH_CTL_SET_META},       {"session", M0_WOH_CTL_SESSION},
    {"send-delayed", M0_WOH_CTL_SEND_DELAYED}, {"flush-delayed", M0_WOH_CTL_FLUSH_DELAYED},
};

static const struct {
    const char *name;
    uint8_t opcode;
} msg_types[] = {{"text", 1}, {"binary", 2}, {"ping", 9}, {"pong", 10}};

void m0_woh_ctl_free(struct m0_woh_ctl *ctl)
{
    m0_buf_free(&ctl->channel);
    m0_buf_free(&ctl->content);
}

/* The keep-alive's members (wscontrolmessage.cpp's rules). */
static int keep_alive(json_t *o, struct m0_woh_ctl *ctl, const char **why)
{
    json_t *mt = json_object_get(o, "message-type");
    int opcode = 0;
    if (mt != NULL) {
        if (!json_is_string(mt))
            return *why = "'message-type' is not a string", M0_ERR;
        for (size_t i = 0; i < M0_ARRAY_LEN(msg_types); i++) {
            if (strcmp(json_string_value(mt), msg_types[i].name) == 0)
                opcode = msg_types[i].opcode;
        }
        if (opcode == 0)
            return *why = "'message-type' is not text, binary, ping or pong", M0_ERR;
    }
    json_t *bin = json_object_get(o, "content-bin"), *text = json_object_get(o, "content");
    if (bin != NULL) {
        if (!json_is_string(bin))
            return *why = "'content-bin' is not a string", M0_ERR;
        size_t blen = json_string_length(bin);
        unsigned char *out = (unsigned char *)m0_buf_reserve(&ctl->content, blen / 4 * 3 + 3);
        ssize_t got = m0_base64_decode(json_string_value(bin), blen, M0_B64_PAD, out, blen / 4 * 3 + 3);
        if (got < 0)
            return *why = "'content-bin' is not base64", M0_ERR;
        ctl->content.len += (size_t)got;
        ctl->has_content = 1;
        if (opcode == 0)
            opcode = 2;
    } else if (text != NULL) {
        if (!json_is_string(text))
            return *why = "'content' is not a string", M0_ERR;
        m0_buf_append(&ctl->content, json_string_value(text), json_string_length(text));
        ctl->has_content = 1;
    }
    ctl->opcode = (uint8_t)(opcode != 0 ? opcode : 1);
    json_t *to = json_object_get(o, "timeout");
    if (to != NULL) {
        if (!json_is_integer(to) || json_integer_value(to) < 0 || json_integer_value(to) > 7 * 24 * 3600)
            return *why = "'timeout' is not a number of seconds", M0_ERR;
        ctl->timeout_s = (int)json_integer_value(to);
    }
    if (ctl->timeout_s == 0)
        ctl->timeout_s = M0_WOH_KEEPALIVE_DEFAULT;
    json_t *mode = json_object_get(o, "mode");
    if (mode != NULL && !json_is_string(mode))
        return *why = "'mode' is not a string", M0_ERR;
    ctl->interval = mode != NULL && strcmp(json_string_value(mode), "interval") == 0;
    return M0_OK;
}

int m0_woh_control(const char *json, size_t n, struct m0_woh_ctl *ctl, const char **why)
{
    m0_buf_reset(&ctl->channel);
    m0_buf_reset(&ctl->content);
    ctl->has_content = ctl->opcode = ctl->interval = 0;
    ctl->timeout_s = 0;
    *why = NULL;
    json_error_t err;
    json_t *o = json_loadb(json, n, JSON_REJECT_DUPLICATES, &err);
    if (o == NULL)
        return *why = "not JSON", M0_ERR;
    int rc = M0_ERR;
    json_t *t = json_object_get(o, "type");
    if (!json_is_object(o)) {
        *why = "not an object";
        goto done;
    }
    if (!json_is_string(t)) {
        *why = "no string 'type'";
        goto done;
    }
    size_t i;
    for (i = 0; i < M0_ARRAY_LEN(ctl_types); i++) {
        if (strcmp(json_string_value(t), ctl_types[i].name) == 0)
            break;
    }
    if (i == M0_ARRAY_LEN(ctl_types)) {
        *why = "'type' is not one Pushpin defines";
        goto done;
    }
    ctl->type = ctl_types[i].type;
    if (ctl->type == M0_WOH_CTL_SUBSCRIBE || ctl->type == M0_WOH_CTL_UNSUBSCRIBE) {
        json_t *ch = json_object_get(o, "channel");
        if (!json_is_string(ch) || json_string_length(ch) == 0) {
            *why = "no non-empty string 'channel'";
            goto done;
        }
        m0_buf_append(&ctl->channel, json_string_value(ch), json_string_length(ch));
    } else if (ctl->type == M0_WOH_CTL_KEEP_ALIVE) {
        if (keep_alive(o, ctl, why) != M0_OK)
            goto done;
    }
    rc = M0_OK;
done:
    json_decref(o);
    return rc;
}

/* --------------------------------------------------- the extension */

/* Skip optional white space (RFC 9110 §5.6.3) from p up to end. */
static const char *ows(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

int m0_woh_grip_extension(const char *v, size_t n, char *prefix, size_t *plen)
{
    const char *p = v, *end = v + n;
    while (p < end) {
        /* One element: a token, then ";param[=value]"... up to a comma
         * outside quotes (RFC 6455 §9.1). */
        p = ows(p, end);
        const char *tok = p;
        while (p < end && *p != ';' && *p != ',' && *p != ' ' && *p != '\t')
            p++;
        int grip = p - tok == 4 && strncasecmp(tok, "grip", 4) == 0;
        if (grip) {
            memcpy(prefix, "m:", 2);
            *plen = 2;
        }
        p = ows(p, end);
        while (p < end && *p == ';') {
            p = ows(p + 1, end);
            const char *pn = p;
            while (p < end && *p != '=' && *p != ';' && *p != ',' && *p != ' ' && *p != '\t')
                p++;
            size_t pnl = (size_t)(p - pn);
            p = ows(p, end);
            char val[M0_WOH_PREFIX_MAX];
            size_t vl = 0;
            int has_val = 0, too_long = 0;
            if (p < end && *p == '=') {
                has_val = 1;
                p = ows(p + 1, end);
                if (p < end && *p == '"') {
                    for (p++; p < end && *p != '"'; p++) {
                        if (*p == '\\' && p + 1 < end)
                            p++;
                        if (vl < sizeof val)
                            val[vl++] = *p;
                        else
                            too_long = 1;
                    }
                    if (p >= end)
                        return grip ? M0_ERR : 0;        /* an unterminated quote */
                    p++;
                } else {
                    for (; p < end && *p != ';' && *p != ',' && *p != ' ' && *p != '\t'; p++) {
                        if (vl < sizeof val)
                            val[vl++] = *p;
                        else
                            too_long = 1;
                    }
                }
                p = ows(p, end);
            }
            if (grip && pnl == 14 && strncasecmp(pn, "message-prefix", 14) == 0) {
                if (too_long)
                    return M0_ERR;
                memcpy(prefix, val, vl);
                *plen = has_val ? vl : 0;
            }
        }
        if (grip)
            return 1;
        while (p < end && *p != ',')
            p++;
        if (p < end)
            p++;
    }
    return 0;
}

int m0_woh_is_content_type(const char *v, size_t n)
{
    const char *end = v + n, *p = ows(v, end);
    size_t l = sizeof M0_WOH_CONTENT_TYPE - 1;
    if ((size_t)(end - p) < l || strncasecmp(p, M0_WOH_CONTENT_TYPE, l) != 0)
        return 0;
    p = ows(p + l, end);
    return p == end || *p == ';';
}
