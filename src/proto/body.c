/*
 * body.c — response heads as bytes, and the body encoder (see body.h).
 *
 * RFC 9112 §6.3 decides the framing; m0_head_finish (response.c) writes the
 * closing lines. What this file adds is the bookkeeping every runner needs
 * and must not get wrong: one head per response, never a byte past a
 * promised length, the chunked terminator, the short-body verdict.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "m0/body.h"
#include "m0/grip.h"
#include "m0/http.h"

/* A list longer than channel[] keeps a heap copy whose pointer sits in
 * channel[] (channel_len > M0_CHANNEL_MAX says so): the common single
 * channel costs no more than before. */
static char *heap_list(const struct m0_head *h)
{
    char *p;
    memcpy(&p, h->channel, sizeof p);
    return p;
}

const char *m0_head_channel(const struct m0_head *h)
{
    return h->channel_len > M0_CHANNEL_MAX ? heap_list(h) : h->channel;
}

int m0_head_set_channels(struct m0_head *h, const char *const *name, const size_t *len, size_t n)
{
    if (n == 0 || n > M0_HEAD_MAX_CHANNELS)
        return M0_ERR;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (m0_sse_channel_error(name[i], len[i]) != NULL)
            return M0_ERR;
        total += len[i] + (i > 0);
    }
    if (h->channel_len > M0_CHANNEL_MAX)
        free(heap_list(h));
    char *dst = h->channel;
    if (total > M0_CHANNEL_MAX) {
        dst = m0_xmalloc(total + 1);
        memcpy(h->channel, &dst, sizeof dst);
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            dst[at++] = '\n';
        memcpy(dst + at, name[i], len[i]);
        at += len[i];
    }
    dst[at] = '\0';
    h->channel_len = (uint16_t)total;
    return M0_OK;
}

/* M0-Channel: one name, or a comma-separated list of them (RFC 9110 §5.6.1:
 * OWS around each; empty elements skipped; a repeat dropped). */
static const char *parse_channels(struct m0_head *h, const char *v, size_t vlen)
{
    const char *name[M0_HEAD_MAX_CHANNELS];
    size_t len[M0_HEAD_MAX_CHANNELS], n = 0;
    const char *p = v, *end = v + vlen;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma != NULL ? comma : end;
        const char *b = p;
        while (b < e && (*b == ' ' || *b == '\t'))
            b++;
        while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e > b) {
            const char *why = m0_sse_channel_error(b, (size_t)(e - b));
            if (why != NULL)
                return why;
            int dup = 0;
            for (size_t i = 0; i < n && !dup; i++)
                dup = len[i] == (size_t)(e - b) && memcmp(name[i], b, len[i]) == 0;
            if (!dup) {
                if (n == M0_HEAD_MAX_CHANNELS)
                    return "M0-Channel lists at most 32 channels";
                name[n] = b;
                len[n++] = (size_t)(e - b);
            }
        }
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    if (n == 0)
        return "empty channel name";
    m0_head_set_channels(h, name, len, n);
    return NULL;
}

void m0_head_reset(struct m0_head *h)
{
    if (h->channel_len > M0_CHANNEL_MAX)
        free(heap_list(h));
    if (h->grip != NULL) {
        m0_grip_free(h->grip);
        free(h->grip);
    }
    struct m0_buf lines = h->lines;
    m0_buf_reset(&lines);
    memset(h, 0, sizeof *h);
    h->lines = lines;
    h->content_length = -1;
}

void m0_head_free(struct m0_head *h)
{
    m0_buf_free(&h->lines);
    m0_head_reset(h);
}

void m0_head_status(struct m0_head *h, int status, const char *reason, size_t reason_len)
{
    h->status = status;
    if (status >= 100 && status <= 999) {
        char line[13] = "HTTP/1.1 000 ";
        line[9] = (char)('0' + status / 100);
        line[10] = (char)('0' + status / 10 % 10);
        line[11] = (char)('0' + status % 10);
        m0_buf_append(&h->lines, line, sizeof line);
    } else {
        m0_buf_printf(&h->lines, "HTTP/1.1 %03d ", status);
    }
    if (reason_len == 0)
        m0_buf_puts(&h->lines, m0_status_reason(status));
    else
        m0_buf_append(&h->lines, reason, reason_len);
    m0_buf_puts(&h->lines, "\r\n");
}

static int named(const char *n, size_t len, const char *want)
{
    return strlen(want) == len && strncasecmp(n, want, len) == 0;
}

/* RFC 9110 §7.6.1 and §6.6: the fields that describe this connection
 * (and Transfer-Encoding, RFC 9112 §6.1) are the server's to write. */
static int hop_by_hop(const char *n, size_t len)
{
    static const char *const hop[] = {"connection", "keep-alive", "transfer-encoding", "te",
                                      "trailer", "upgrade", "proxy-connection"};
    for (size_t i = 0; i < M0_ARRAY_LEN(hop); i++) {
        if (named(n, len, hop[i]))
            return 1;
    }
    return 0;
}

int m0_head_add(struct m0_head *h, const char *name, size_t nlen, const char *value, size_t vlen,
                const char **why)
{
    *why = NULL;
    if (h->grip_on && m0_grip_is_field(name, nlen)) {
        /* GRIP instructions (Pushpin strips every Grip-* field). */
        if (h->grip == NULL) {
            h->grip = m0_xmalloc(sizeof *h->grip);
            memset(h->grip, 0, sizeof *h->grip);
            m0_grip_init(h->grip);
        }
        const char *gw = NULL;
        if (h->grip_err == NULL && m0_grip_field(h->grip, name, nlen, value, vlen, &gw) != M0_OK)
            h->grip_err = gw != NULL ? gw : "invalid GRIP instruction";
        return M0_OK;
    }
    if (named(name, nlen, "content-length")) {
        char num[24];
        if (vlen == 0 || vlen >= sizeof num || value[0] < '0' || value[0] > '9') {
            *why = "Content-Length is not a decimal number";
            return M0_ERR;
        }
        memcpy(num, value, vlen);
        num[vlen] = '\0';
        char *end;
        errno = 0;
        long long cl = strtoll(num, &end, 10);
        if (errno != 0 || *end != '\0' || cl < 0) {
            *why = "Content-Length is not a decimal number";
            return M0_ERR;
        }
        if (h->content_length >= 0 && h->content_length != cl) {
            *why = "two different Content-Length values";
            return M0_ERR;
        }
        h->content_length = cl;
        return M0_OK;
    }
    if (nlen >= 3 && strncasecmp(name, "m0-", 3) == 0) {
        if (named(name, nlen, "m0-hold")) {
            if (vlen == 6 && strncasecmp(value, "stream", 6) == 0)
                h->hold = M0_HOLD_STREAM;
            else if (vlen == 9 && strncasecmp(value, "websocket", 9) == 0)
                h->hold = M0_HOLD_WEBSOCKET;
            else
                h->hold = M0_HOLD_UNKNOWN;
        } else if (named(name, nlen, "m0-websocket-protocol")) {
            /* RFC 6455 §4.1: a subprotocol is a token. */
            if (vlen > M0_WS_PROTOCOL_MAX || !m0_http_is_token(value, vlen)) {
                *why = "M0-WebSocket-Protocol must be one token of at most 64 bytes";
                return M0_ERR;
            }
            memcpy(h->ws_protocol, value, vlen);
            h->ws_protocol[vlen] = '\0';
            h->ws_protocol_len = (uint8_t)vlen;
        } else if (named(name, nlen, "m0-opcode")) {
            if (vlen == 4 && strncasecmp(value, "text", 4) == 0)
                h->ws_opcode = 1;
            else if (vlen == 6 && strncasecmp(value, "binary", 6) == 0)
                h->ws_opcode = 2;
            else {
                *why = "M0-Opcode must be text or binary";
                return M0_ERR;
            }
        } else if (named(name, nlen, "m0-presence")) {
            if (vlen > M0_HEAD_PRESENCE_MAX) {
                *why = "M0-Presence is at most 128 bytes";
                return M0_ERR;
            }
            memcpy(h->presence, value, vlen);
            h->presence[vlen] = '\0';
            h->presence_len = (uint8_t)vlen;
        } else if (named(name, nlen, "m0-last-event-id")) {
            uint64_t id = m0_sse_parse_last_id(value, vlen);
            if (vlen == 0 || id == UINT64_MAX) {
                *why = "M0-Last-Event-ID must be an event id";
                return M0_ERR;
            }
            h->resume_from = id;
        } else if (named(name, nlen, "m0-channel")) {
            if ((*why = parse_channels(h, value, vlen)) != NULL)
                return M0_ERR;
        }
        return M0_OK;        /* M0-* never reach the client */
    }
    if (named(name, nlen, "connection")) {
        h->app_close |= (unsigned)m0_http_list_has(value, vlen, "close");
        return M0_OK;
    }
    if (hop_by_hop(name, nlen))
        return M0_OK;
    if (named(name, nlen, "date"))
        h->has_date = 1;
    else if (named(name, nlen, "server"))
        h->has_server = 1;
    m0_buf_append(&h->lines, name, nlen);
    m0_buf_puts(&h->lines, ": ");
    m0_buf_append(&h->lines, value, vlen);
    m0_buf_puts(&h->lines, "\r\n");
    return M0_OK;
}

int m0_head_grip_finish(struct m0_head *h)
{
    struct m0_grip *g = h->grip;
    if (g == NULL)
        return M0_OK;
    const char *why = NULL;
    if (h->grip_err == NULL && m0_grip_finish(g, &why) != M0_OK)
        h->grip_err = why != NULL ? why : "invalid GRIP instructions";
    if (h->grip_err != NULL)
        return M0_ERR;
    if (g->status != 0) {
        /* Grip-Status: the client's status line instead of the view's. */
        const char *p = h->lines.data, *eol = memchr(p, '\n', h->lines.len);
        size_t rest_off = eol != NULL ? (size_t)(eol + 1 - p) : h->lines.len;
        struct m0_buf rest = {0};
        m0_buf_append(&rest, p + rest_off, h->lines.len - rest_off);
        m0_buf_reset(&h->lines);
        m0_head_status(h, g->status, m0_grip_str(g, g->reason), g->reason.len);
        m0_buf_append(&h->lines, rest.data, rest.len);
        m0_buf_free(&rest);
    }
    if (g->hold == M0_GRIP_HOLD_NONE || g->nchannels == 0)
        return M0_OK;
    /* A stream is content after the head, and a 1xx, 204 or 304 head ends
     * its response (RFC 9110 §15.2, §15.3.5, §15.4.5; RFC 9112 §6.3): such
     * a stream cannot be followed (a long-poll's answer may be bodiless). */
    if (g->hold == M0_GRIP_HOLD_STREAM && m0_status_bodiless(h->status)) {
        h->grip_err = "Grip-Hold: stream with a 1xx, 204 or 304 status, which carries no content";
        return M0_ERR;
    }
    /* Every Grip-Channel is subscribed (a repeat once): the hold checks
     * each channel's prev-id on its own (grip_hold.c). */
    const char *name[M0_HEAD_MAX_CHANNELS];
    size_t nlen[M0_HEAD_MAX_CHANNELS], n = 0;
    for (unsigned i = 0; i < g->nchannels; i++) {
        const struct m0_grip_channel *ch = &g->channels[i];
        const char *nm = m0_grip_str(g, ch->name);
        if (ch->name.len > M0_CHANNEL_MAX || m0_sse_channel_error(nm, ch->name.len) != NULL) {
            h->grip_err = "Grip-Channel: not a valid channel name";
            return M0_ERR;
        }
        int dup = 0;
        for (size_t k = 0; k < n && !dup; k++)
            dup = nlen[k] == ch->name.len && memcmp(name[k], nm, nlen[k]) == 0;
        if (dup)
            continue;
        if (n == M0_HEAD_MAX_CHANNELS) {
            h->grip_err = "Grip-Channel: too many channels";
            return M0_ERR;
        }
        name[n] = nm;
        nlen[n++] = ch->name.len;
    }
    if (m0_head_set_channels(h, name, nlen, n) != M0_OK) {
        h->grip_err = "Grip-Channel: the channels are too long together";
        return M0_ERR;
    }
    h->hold = M0_HOLD_STREAM;
    h->grip_hold = (uint8_t)g->hold;
    return M0_OK;
}

void m0_body_reset(struct m0_body *b)
{
    memset(b, 0, sizeof *b);
    b->framing = M0_FRAME_NONE;
    b->length = -1;
}

/* Headers a held stream's head sets itself (WHATWG SSE §9.2.4, and the
 * proxy hint nginx honours). */
static int stream_owned(const char *n, size_t len)
{
    return named(n, len, "content-type") || named(n, len, "cache-control") ||
           named(n, len, "x-accel-buffering");
}

/* Copy h's lines to out, without the fields a held stream owns. */
static void copy_lines_for_hold(struct m0_buf *out, const struct m0_head *h)
{
    const char *p = h->lines.data, *end = p + h->lines.len;
    const char *eol = memchr(p, '\n', (size_t)(end - p));      /* the status line */
    m0_buf_append(out, p, (size_t)(eol + 1 - p));
    for (p = eol + 1; p < end; p = eol + 1) {
        eol = memchr(p, '\n', (size_t)(end - p));
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon == NULL || !stream_owned(p, (size_t)(colon - p)))
            m0_buf_append(out, p, (size_t)(eol + 1 - p));
    }
}

int m0_body_commit(struct m0_body *b, struct m0_buf *out, const struct m0_head *h,
                   const struct m0_body_req *r, int64_t body_len, int hold)
{
    if (b->committed)
        return M0_ERR;
    b->committed = 1;
    b->sent = 0;
    if (hold) {
        /* The head of a Server-Sent-Events stream: no length, no chunking
         * (close-delimited), proxies told not to buffer. A GRIP hold's
         * media type is the view's (a stream may be anything). */
        if (h->grip_hold) {
            m0_buf_append(out, h->lines.data, h->lines.len);
        } else {
            copy_lines_for_hold(out, h);
            m0_buf_puts(out, "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                             "X-Accel-Buffering: no\r\n");
        }
        m0_head_server_fields(out, h->has_date, h->has_server);
        m0_buf_puts(out, "Connection: close\r\n\r\n");
        b->framing = M0_FRAME_CLOSE;
        b->keep = 0;
        b->hold = 1;
        b->length = -1;
        return M0_OK;
    }
    int bodiless = m0_status_bodiless(h->status);
    struct m0_head_info hi = {
        .status = h->status,
        .http_minor = r->http_minor,
        .keepalive = r->keepalive,
        .head = r->head,
        .app_close = h->app_close,
        .content_length = h->content_length,
        .body_len = bodiless ? -1 : body_len,
        .has_date = h->has_date,
        .has_server = h->has_server,
    };
    m0_buf_append(out, h->lines.data, h->lines.len);
    int keep;
    b->framing = m0_head_finish(out, &hi, &keep);
    b->keep = (uint8_t)keep;
    b->length = b->framing == M0_FRAME_LENGTH ? (h->content_length >= 0 ? h->content_length : body_len) : -1;
    return M0_OK;
}

size_t m0_body_emit(struct m0_body *b, struct m0_buf *out, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    switch (b->framing) {
    case M0_FRAME_NONE:
        return n;
    case M0_FRAME_LENGTH: {
        uint64_t room = (uint64_t)b->length > b->sent ? (uint64_t)b->length - b->sent : 0;
        if (n > room) {
            /* Never a byte past Content-Length: it would be read as the
             * start of the next response. */
            b->truncated = 1;
            n = (size_t)room;
        }
        m0_buf_append(out, p, n);
        break;
    }
    case M0_FRAME_CHUNKED:
        m0_buf_append_chunk(out, p, n);
        break;
    case M0_FRAME_CLOSE:
        m0_buf_append(out, p, n);
        break;
    }
    b->sent += n;
    return n;
}

int m0_body_enough(const struct m0_body *b)
{
    if (!b->committed)
        return 0;
    if (b->framing == M0_FRAME_NONE)
        return 1;
    return b->framing == M0_FRAME_LENGTH && b->sent >= (uint64_t)b->length;
}

int m0_body_finish(struct m0_body *b, struct m0_buf *out)
{
    if (b->framing == M0_FRAME_CHUNKED)
        m0_buf_puts(out, "0\r\n\r\n");
    else if (b->framing == M0_FRAME_LENGTH && b->sent < (uint64_t)b->length)
        return M0_ERR;
    return M0_OK;
}
