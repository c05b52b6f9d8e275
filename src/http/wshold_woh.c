/*
 * wshold_woh.c — WebSocket-over-HTTP on the WebSocket holds (see
 * wshold_woh.h; the codec is woh.h): the endpoint that opens such a socket,
 * and the socket's events and answers while it is held.
 *
 * The socket's life, as Pushpin's WebSocketOverHttp and WsProxySession
 * lead it (read for their behaviour, written here in our shape):
 *
 *   handshake under --ws-over-http ──▶ checked (400/426), then an OPEN
 *     POST to the mount's view (Connection-Id, Sec-WebSocket-Extensions:
 *     grip, the handshake's fields; Grip-Sig with a GRIP key)
 *   its answer: 200 application/websocket-events starting with OPEN
 *     ──▶ 101 with the answer's own fields, the hold taken (its first
 *     c:subscribe channels subscribed from the OPEN's dispatch on, as a
 *     GRIP hold is), its other events sent once the 101 is out;
 *     any other status or type ──▶ that answer is the client's (Pushpin's
 *     "rejected"); a malformed one ──▶ 502
 *   messages, pings, the peer's close ──▶ queued (the mailbox's bound),
 *     posted in batches, one request at a time: TEXT, BINARY, PING,
 *     then CLOSE (the peer's close frame) or DISCONNECT (it left without
 *     one), each told once; Keep-Alive-Interval posts an empty one
 *   each answer ──▶ Set-Meta-* (sent back as Meta-* from then on), TEXT
 *     and BINARY as frames (with GRIP: "c:" control messages, the
 *     message prefix removed from the others), PING as a ping, CLOSE as
 *     our close frame, DISCONNECT drops the connection
 *
 * m0serve answers the client's pings itself (RFC 6455 §5.5.2) and posts
 * them too; a PONG event is not sent (the pong went out already). After
 * the application's CLOSE, or a detach, nothing more is posted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "m0/accesslog.h"
#include "m0/body.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/dispatch.h"
#include "m0/endpoint.h"
#include "m0/grip.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/loop.h"
#include "m0/request.h"
#include "m0/rt.h"
#include "m0/runner.h"
#include "m0/server.h"
#include "m0/sse.h"
#include "m0/target.h"
#include "m0/timer.h"
#include "m0/woh.h"
#include "m0/ws.h"
#include "wshold_int.h"
#include "wshold_woh.h"
#include "wshold_mailbox.h"

#define META_MAX 16              /* Meta-* values a socket keeps */
#define META_BYTES 4096          /* and their bytes */

/* What an over-HTTP socket keeps beside its WebSocket hold. */
struct m0_woh {
    char cid[M0_WOH_CID_LEN + 1];   /* Connection-Id */
    uint8_t grip;                   /* the OPEN answer enabled GRIP: c: messages, the prefix */
    uint8_t prefix_len;
    uint8_t detached;               /* c:detach: nothing is posted any more */
    uint8_t told_end;               /* CLOSE or DISCONNECT was posted, or the application closed */
    uint8_t owe_close;              /* the peer's close frame: post CLOSE after its messages */
    uint8_t owe_disconnect;         /* the peer left without one: post DISCONNECT */
    uint8_t post_empty;             /* Keep-Alive-Interval is due: post a request without events */
    uint8_t ka_op, ka_interval;     /* the keep-alive message's opcode; interval (else idle) mode */
    uint8_t in_tick;                /* m0_woh_tick runs: it sets the next look itself */
    char prefix[M0_WOH_PREFIX_MAX];
    uint32_t every_ms;              /* Keep-Alive-Interval (0: none) */
    uint32_t ka_ms;                 /* the keep-alive message's cadence (0: none) */
    uint64_t last_post, ka_last;    /* loop clock */
    struct m0_buf close;            /* the peer's close payload while owed (code, reason) */
    struct m0_buf ka;               /* the keep-alive message */
    struct m0_buf meta;             /* (u16 name length, name, u16 value length, value)... */
    struct m0_buf channels;         /* subscribed channels, '\n'-joined */
    struct m0_buf opening;          /* the OPEN answer's events, until the 101 is out */
};

/* ------------------------------------------------------------ fields */

/* Each field line of an answer's head (its lines after the status line):
 * fn(ctx, name, nlen, value, vlen) → 1 to keep the line, 0 to drop it. The
 * kept lines replace the head's when keep is set. */
typedef int (*field_fn)(void *ctx, const char *n, size_t nl, const char *v, size_t vl);

static void each_field(struct m0_head *h, field_fn fn, void *ctx, int keep)
{
    const char *p = h->lines.data, *end = p + h->lines.len;
    if (p == NULL)
        return;
    struct m0_buf kept = {0};
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (keep)
        m0_buf_append(&kept, p, eol ? (size_t)(eol + 1 - p) : h->lines.len);
    for (p = eol ? eol + 1 : end; p < end; p = eol + 1) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL)
            break;
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon == NULL)
            continue;
        const char *v = colon + 1, *ve = eol;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        if (fn(ctx, p, (size_t)(colon - p), v, (size_t)(ve - v)) && keep)
            m0_buf_append(&kept, p, (size_t)(eol + 1 - p));
    }
    if (keep) {
        m0_buf_free(&h->lines);
        h->lines = kept;
    }
}

static int named(const char *n, size_t nl, const char *want)
{
    return strlen(want) == nl && strncasecmp(n, want, nl) == 0;
}

struct one_field {
    const char *name;
    const char *v;
    size_t vl;
};

static int find_field(void *ctx, const char *n, size_t nl, const char *v, size_t vl)
{
    struct one_field *f = ctx;
    if (f->v == NULL && named(n, nl, f->name)) {
        f->v = v;
        f->vl = vl;
    }
    return 1;
}

const char *m0_woh_field(struct m0_head *h, const char *name, size_t *vl)
{
    struct one_field f = {.name = name};
    each_field(h, find_field, &f, 0);
    *vl = f.vl;
    return f.v;
}

/* Set-Meta-NAME: VALUE — the value sent back as Meta-NAME from now on (an
 * empty one removes it). */
static void meta_set(struct m0_woh *w, const char *n, size_t nl, const char *v, size_t vl)
{
    struct m0_buf nb = {0};
    unsigned count = 0;
    for (size_t off = 0; off + 4 <= w->meta.len;) {
        uint16_t a, b;
        memcpy(&a, w->meta.data + off, 2);
        memcpy(&b, w->meta.data + off + 2 + a, 2);
        size_t len = 4u + a + b;
        if (!(a == nl && strncasecmp(w->meta.data + off + 2, n, nl) == 0)) {
            m0_buf_append(&nb, w->meta.data + off, len);
            count++;
        }
        off += len;
    }
    if (vl > 0) {
        if (count >= META_MAX || nb.len + nl + vl + 4 > META_BYTES) {
            m0_warn("WebSocket %s: Set-Meta-%s ignored (more than %d values or %d bytes)", w->cid,
                    M0_LOG_TEXT(n, nl), META_MAX, META_BYTES);
        } else {
            uint16_t a = (uint16_t)nl, b = (uint16_t)vl;
            m0_buf_append(&nb, &a, 2);
            m0_buf_append(&nb, n, nl);
            m0_buf_append(&nb, &b, 2);
            m0_buf_append(&nb, v, vl);
        }
    }
    m0_buf_free(&w->meta);
    w->meta = nb;
}

/* The fields of an answer that are the protocol's, read into w: Set-Meta-*,
 * Keep-Alive-Interval; on the OPEN answer also the grip extension and the
 * subprotocol (the head's, checked against the offer). Dropped from the
 * head (the rest goes on the 101), with Content-Type and any Grip-*. */
struct take_ctx {
    struct m0_woh *w;
    struct m0_head *h;
};

static int take_field(void *ctx, const char *n, size_t nl, const char *v, size_t vl)
{
    struct take_ctx *t = ctx;
    struct m0_woh *w = t->w;
    if (nl > 9 && strncasecmp(n, "set-meta-", 9) == 0) {
        meta_set(w, n + 9, nl - 9, v, vl);
        return 0;
    }
    if (named(n, nl, "keep-alive-interval")) {
        long x = 0;
        for (size_t i = 0; i < vl && i < 9; i++)
            x = v[i] >= '0' && v[i] <= '9' ? x * 10 + (v[i] - '0') : -1000000000;
        w->every_ms = x > 0 ? (uint32_t)(x < M0_WOH_KEEPALIVE_MIN ? M0_WOH_KEEPALIVE_MIN : x) * 1000 : 0;
        return 0;
    }
    if (t->h == NULL)
        return 1;
    if (named(n, nl, "sec-websocket-extensions")) {
        size_t plen = 0;
        int g = m0_woh_grip_extension(v, vl, w->prefix, &plen);
        if (g == M0_ERR)
            m0_warn("WebSocket %s: a grip extension whose message-prefix is too long or malformed: GRIP off",
                    w->cid);
        w->grip = g == 1;
        w->prefix_len = (uint8_t)(g == 1 ? plen : 0);
        return 0;                 /* never offered by the client: not the client's to see */
    }
    if (named(n, nl, "sec-websocket-protocol")) {
        if (vl <= M0_WS_PROTOCOL_MAX && m0_http_is_token(v, vl)) {
            memcpy(t->h->ws_protocol, v, vl);
            t->h->ws_protocol[vl] = '\0';
            t->h->ws_protocol_len = (uint8_t)vl;
        }
        return 0;                 /* the 101 names it (m0_ws_switching) */
    }
    return !(named(n, nl, "content-type") || named(n, nl, "content-bytes-accepted") || m0_grip_is_field(n, nl));
}

/* ------------------------------------------------------------ requests */

void m0_woh_events_request(struct m0_req *r, const struct m0_ws_snapshot *snap, const char *cid,
                           const struct m0_buf *meta, struct m0_buf *body)
{
    unsigned nmeta = 0;
    for (size_t off = 0; meta != NULL && off + 4 <= meta->len; nmeta++) {
        uint16_t a, b;
        memcpy(&a, meta->data + off, 2);
        memcpy(&b, meta->data + off + 2 + a, 2);
        off += 4u + a + b;
    }
    m0_ws_snapshot_request(r, snap, 4 + nmeta);
    static const char ct[] = M0_WOH_CONTENT_TYPE;
    m0_ws_request_add(r, "Accept", 6, ct, sizeof ct - 1);
    m0_ws_request_add(r, "Content-Type", 12, ct, sizeof ct - 1);
    m0_ws_request_add(r, "Connection-Id", 13, cid, strlen(cid));
    m0_ws_request_add(r, "Sec-WebSocket-Extensions", 24, "grip", 4);
    for (size_t off = 0; meta != NULL && off + 4 <= meta->len;) {
        uint16_t a, b;
        memcpy(&a, meta->data + off, 2);
        memcpy(&b, meta->data + off + 2 + a, 2);
        char name[5 + 256];
        int nl = snprintf(name, sizeof name, "Meta-%.*s", (int)(a < 250 ? a : 250), meta->data + off + 2);
        m0_ws_request_add(r, name, (size_t)nl, meta->data + off + 4 + a, b);
        off += 4u + a + b;
    }
    m0_ws_request_body(r, body);
}

int m0_woh_pending(const struct m0_wshold *ws)
{
    const struct m0_woh *w = ws->woh;
    return !w->detached && !w->told_end && (ws->q_head != NULL || w->owe_close || w->owe_disconnect || w->post_empty);
}

int m0_woh_owes(const struct m0_wshold *ws)
{
    const struct m0_woh *w = ws->woh;
    return !w->detached && !w->told_end && (w->owe_close || w->owe_disconnect);
}

void m0_woh_request(struct m0_server *s, struct m0_conn *c, struct m0_job *job)
{
    struct m0_wshold *ws = m0_wshold_of(c);
    struct m0_woh *w = ws->woh;
    struct m0_buf body = {0};
    while (ws->q_head != NULL) {
        struct m0_wsmsg *m = ws->q_head;
        ws->q_head = m->next;
        enum m0_woh_type t = m->opcode == M0_WS_TEXT ? M0_WOH_TEXT : m->opcode == M0_WS_BINARY ? M0_WOH_BINARY
                                                                                              : M0_WOH_PING;
        /* Pushpin's compactness: a ping's content only when it has one. */
        const char *p = m->payload.data != NULL ? m->payload.data + m->payload.off : "";
        size_t n = m0_buf_unread(&m->payload);
        m0_woh_put(&body, t, t == M0_WOH_PING && n == 0 ? NULL : p, n);
        m0_buf_free(&m->payload);
        free(m);
    }
    ws->q_tail = NULL;
    ws->q_len = 0;
    ws->q_bytes = 0;
    if (w->owe_close) {
        m0_woh_put(&body, M0_WOH_CLOSE, w->close.len > 0 ? w->close.data : NULL, w->close.len);
        w->told_end = 1;
    } else if (w->owe_disconnect) {
        m0_woh_put(&body, M0_WOH_DISCONNECT, NULL, 0);
        w->told_end = 1;
    }
    m0_buf_free(&w->close);
    w->owe_close = w->owe_disconnect = w->post_empty = 0;
    w->last_post = m0_loop_now(s->loop);
    job->begin_id = m0_rt_newest(s->rt);       /* a c:subscribe in its answer starts here */
    m0_woh_events_request(&job->req, ws->req, w->cid, &w->meta, &body);
    m0_buf_free(&body);
    job->msg_opcode = M0_WS_TEXT;
}

void m0_woh_peer_closed(struct m0_wshold *ws, unsigned code, const char *reason, size_t rlen)
{
    struct m0_woh *w = ws->woh;
    if (w->detached || w->told_end || w->owe_close)
        return;
    w->owe_close = 1;
    m0_buf_reset(&w->close);
    if (code != M0_WS_CLOSE_NO_STATUS) {
        unsigned char be[2] = {(unsigned char)(code >> 8), (unsigned char)code};
        m0_buf_append(&w->close, be, 2);
        m0_buf_append(&w->close, reason, rlen);
    }
}

void m0_woh_peer_gone(struct m0_wshold *ws)
{
    struct m0_woh *w = ws->woh;
    if (!w->detached && !w->told_end && !w->owe_close)
        w->owe_disconnect = 1;
}

int m0_woh_detached(const struct m0_wshold *ws)
{
    return ws->woh->detached;
}

/* ------------------------------------------------------------ answers */

/* One frame of ours on the socket: the head, then the payload in place. */
static void send_frame(struct m0_server *s, struct m0_conn *c, int op, const char *p, size_t n)
{
    uint8_t head[M0_WS_FRAME_HEAD_MAX];
    size_t hl = m0_ws_frame_head(head, op, n, 1);
    m0_hold_send(s, c, (const char *)head, hl);
    if (n > 0)
        m0_hold_send(s, c, p, n);
}

/* The socket's channels are now w->channels (m0_rt_set_channels): a kept
 * one goes on, a new one from the request's dispatch on (job->begin_id). */
static void resubscribe(struct m0_server *s, struct m0_conn *c, uint64_t start)
{
    struct m0_woh *w = m0_wshold_of(c)->woh;
    if (w->channels.len > 0 && !m0_rt_reading(s->rt)) {
        m0_warn("WebSocket %s: c:subscribe needs --realtime (no bus is read): ignored", w->cid);
        m0_buf_reset(&w->channels);
        return;
    }
    m0_rt_set_channels(s->rt, m0_conn_slot(s, c), w->channels.data != NULL ? w->channels.data : "", w->channels.len,
                       start);
}

/* Where name is in the '\n'-joined list b: its offset, or -1. */
static long list_find(const struct m0_buf *b, const char *name, size_t n)
{
    for (size_t off = 0; off < b->len;) {
        const char *nl = memchr(b->data + off, '\n', b->len - off);
        size_t l = (size_t)((nl != NULL ? nl : b->data + b->len) - (b->data + off));
        if (l == n && memcmp(b->data + off, name, n) == 0)
            return (long)off;
        off += l + 1;
    }
    return -1;
}

static size_t list_count(const struct m0_buf *b)
{
    size_t k = b->len > 0;
    for (size_t i = 0; i < b->len; i++)
        k += b->data[i] == '\n';
    return k;
}

/* The keep-alives changed: the socket's next look no later than they are
 * due (outside its tick, which sets it itself). */
static void reschedule(struct m0_server *s, struct m0_conn *c)
{
    struct m0_woh *w = m0_wshold_of(c)->woh;
    if (w->in_tick || c->state != M0_CONN_HELD)
        return;
    uint64_t due = 0;
    if (w->ka_ms != 0)
        due = w->ka_last + w->ka_ms;
    if (w->every_ms != 0 && (due == 0 || w->last_post + w->every_ms < due))
        due = w->last_post + w->every_ms;
    if (due != 0 && due < c->deadline)
        m0_conn_tick_at(s, c, due);
}

/* A control message (woh.h): the JSON after "c:". */
static void control(struct m0_server *s, struct m0_conn *c, const char *p, size_t n, uint64_t start)
{
    struct m0_wshold *ws = m0_wshold_of(c);
    struct m0_woh *w = ws->woh;
    struct m0_woh_ctl ctl = {0};
    const char *why = NULL;
    if (m0_woh_control(p, n, &ctl, &why) != M0_OK) {
        m0_warn("WebSocket %s: a GRIP control message ignored (%s): %s", w->cid, why, M0_LOG_TEXT(p, n));
        m0_woh_ctl_free(&ctl);
        return;
    }
    const char *ch = ctl.channel.data;
    size_t chl = ctl.channel.len;
    switch (ctl.type) {
    case M0_WOH_CTL_SUBSCRIBE: {
        const char *bad = m0_sse_channel_error(ch, chl);
        if (bad != NULL) {
            m0_warn("WebSocket %s: subscribe to %s ignored: %s", w->cid, M0_LOG_TEXT(ch, chl), bad);
        } else if (list_find(&w->channels, ch, chl) < 0) {
            if (list_count(&w->channels) >= M0_HEAD_MAX_CHANNELS) {
                m0_warn("WebSocket %s: subscribe to %s ignored: %d channels already", w->cid, M0_LOG_TEXT(ch, chl),
                        M0_HEAD_MAX_CHANNELS);
                break;
            }
            if (w->channels.len > 0)
                m0_buf_append(&w->channels, "\n", 1);
            m0_buf_append(&w->channels, ch, chl);
            resubscribe(s, c, start);
        }
        break;
    }
    case M0_WOH_CTL_UNSUBSCRIBE: {
        long at = list_find(&w->channels, ch, chl);
        if (at < 0)
            break;
        struct m0_buf nb = {0};
        m0_buf_append(&nb, w->channels.data, (size_t)at);
        size_t rest = (size_t)at + chl + 1;
        if (rest < w->channels.len)
            m0_buf_append(&nb, w->channels.data + rest, w->channels.len - rest);
        else if (nb.len > 0)
            nb.len--;                           /* the '\n' before the last one */
        m0_buf_free(&w->channels);
        w->channels = nb;
        resubscribe(s, c, start);
        break;
    }
    case M0_WOH_CTL_DETACH:
        /* The application lets go: the socket stays for what is published
         * to it, nothing it sends is posted any more (Pushpin's detach). */
        w->detached = 1;
        m0_wsbox_clear(ws);
        break;
    case M0_WOH_CTL_KEEP_ALIVE:
        m0_buf_free(&w->ka);
        w->ka_ms = 0;
        if (!ctl.has_content)
            break;
        if ((ctl.opcode == M0_WS_PING || ctl.opcode == M0_WS_PONG) && ctl.content.len > M0_WS_CONTROL_MAX) {
            m0_warn("WebSocket %s: a keep-alive %s of %zu bytes ignored (at most 125, RFC 6455 §5.5)", w->cid,
                    ctl.opcode == M0_WS_PING ? "ping" : "pong", ctl.content.len);
            break;
        }
        m0_buf_append(&w->ka, ctl.content.data != NULL ? ctl.content.data : "", ctl.content.len);
        w->ka_op = ctl.opcode;
        w->ka_interval = ctl.interval;
        w->ka_ms = (uint32_t)ctl.timeout_s * 1000;
        w->ka_last = m0_loop_now(s->loop);
        reschedule(s, c);
        break;
    default:
        /* set-meta and session steer Pushpin's publish filters, which a
         * held WebSocket here does not have; the delayed sends are not
         * supported. */
        m0_debug("WebSocket %s: GRIP control message %s not supported: ignored", w->cid, M0_LOG_TEXT(p, n));
        break;
    }
    m0_woh_ctl_free(&ctl);
}

/* A TEXT or BINARY event of an answer: with GRIP, a control message or a
 * message with the prefix (removed), else dropped; without, as it is. */
static void message(struct m0_server *s, struct m0_conn *c, int op, const char *p, size_t n, uint64_t start)
{
    struct m0_woh *w = m0_wshold_of(c)->woh;
    if (w->grip) {
        if (op == M0_WS_TEXT && n >= 2 && p[0] == 'c' && p[1] == ':') {
            control(s, c, p + 2, n - 2, start);
            return;
        }
        if (n < w->prefix_len || memcmp(p, w->prefix, w->prefix_len) != 0) {
            m0_debug("WebSocket %s: a message without the prefix dropped", w->cid);
            return;
        }
        p += w->prefix_len;
        n -= w->prefix_len;
    }
    if (op == M0_WS_TEXT && !m0_ws_utf8_valid(p, n)) {
        m0_warn("WebSocket %s: a TEXT event that is not UTF-8 sent as a binary message", w->cid);
        op = M0_WS_BINARY;
    }
    send_frame(s, c, op, p, n);
}

/* Apply the events of an answer (p, n bytes, well-formed: checked by the
 * caller), in order. first: the OPEN answer, whose leading OPEN is its
 * acceptance. start: the newest event id when its request was made. */
static void apply(struct m0_server *s, struct m0_conn *c, const char *p, size_t n, int first, uint64_t start)
{
    size_t off = 0;
    struct m0_woh_event ev;
    while (m0_woh_next(p, n, &off, &ev) == 1) {
        if (c->state != M0_CONN_HELD || c->hold == NULL || (c->flags & C_DOOMED))
            return;
        struct m0_wshold *ws = m0_wshold_of(c);
        struct m0_woh *w = ws->woh;
        if (ws->close_sent || ws->peer_gone)
            return;           /* nothing goes after our close frame (§5.5.1), nor to nobody */
        switch (ev.type) {
        case M0_WOH_OPEN:
            if (first) {
                first = 0;
                break;
            }
            /* Pushpin: an OPEN on an open socket ends it. */
            /* fall through */
        case M0_WOH_DISCONNECT:
            w->told_end = 1;
            m0_wsbox_clear(ws);
            m0_debug("WebSocket %s: the application dropped the connection", w->cid);
            m0_conn_doom(s, c);
            return;
        case M0_WOH_TEXT:
        case M0_WOH_BINARY:
            message(s, c, ev.type == M0_WOH_TEXT ? M0_WS_TEXT : M0_WS_BINARY, ev.content, ev.len, start);
            break;
        case M0_WOH_PING:
            if (ev.len <= M0_WS_CONTROL_MAX)
                send_frame(s, c, M0_WS_PING, ev.content, ev.len);
            break;
        case M0_WOH_CLOSE: {
            /* Our close frame with the application's code (a code that
             * may not be sent, django-grip's 0 included: 1000). */
            unsigned code = ev.len >= 2 ? ((unsigned)(unsigned char)ev.content[0] << 8 |
                                           (unsigned char)ev.content[1])
                                        : M0_WS_CLOSE_NO_STATUS;
            if (code != M0_WS_CLOSE_NO_STATUS && !m0_ws_close_code_valid(code))
                code = M0_WS_CLOSE_NORMAL;
            size_t rl = ev.len > 2 ? ev.len - 2 : 0;
            if (rl > 0 && !m0_ws_utf8_valid(ev.content + 2, rl))
                rl = 0;
            w->told_end = 1;
            m0_wsbox_clear(ws);
            m0_wshold_close(s, c, code, rl > 0 ? ev.content + 2 : NULL, rl);
            return;
        }
        default:
            break;            /* PONG: the client's ping was answered already; others are not ours */
        }
    }
}

int m0_woh_well_formed(const char *p, size_t n, int *first_type, size_t *count)
{
    size_t off = 0, k = 0;
    struct m0_woh_event ev;
    int rc;
    *first_type = M0_WOH_OTHER;
    while ((rc = m0_woh_next(p, n, &off, &ev)) == 1) {
        if (k++ == 0)
            *first_type = (int)ev.type;
    }
    *count = k;
    return rc == 0;
}

void m0_woh_answer(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    struct m0_resp *rs = &job->resp;
    struct m0_wshold *ws = m0_wshold_of(c);
    struct m0_woh *w = ws->woh;
    if (rs->flags & M0_RESP_ABORT) {
        w->told_end = 1;
        m0_wsbox_clear(ws);
        m0_wshold_fail(s, c, M0_WS_CLOSE_INTERNAL, "the application failed");
        return;
    }
    if (ws->close_sent || ws->peer_gone)
        return;                 /* the answer to its CLOSE or DISCONNECT: nothing more to send */
    size_t ctl = 0;
    const char *ct = m0_woh_field(&job->head, "content-type", &ctl);
    const char *p = rs->out.data != NULL ? rs->out.data + rs->out.off : "";
    size_t n = m0_buf_unread(&rs->out);
    int first;
    size_t count;
    const char *bad = job->head.status != 200 ? "its status is not 200"
                      : ct == NULL || !m0_woh_is_content_type(ct, ctl) ? "it is not application/websocket-events"
                      : !m0_woh_well_formed(p, n, &first, &count)             ? "its events are malformed"
                                                                       : NULL;
    if (bad != NULL) {
        /* Pushpin drops such a socket; a close frame says why. */
        m0_warn("WebSocket %s: the application's answer to its events was %d and %s: closing it (1011)", w->cid,
                job->head.status, bad);
        w->told_end = 1;
        m0_wsbox_clear(ws);
        m0_wshold_fail(s, c, M0_WS_CLOSE_INTERNAL, "the application refused the events");
        return;
    }
    struct take_ctx t = {.w = w, .h = NULL};
    each_field(&job->head, take_field, &t, 0);
    apply(s, c, p, n, 0, job->begin_id);
    if (c->state == M0_CONN_HELD && c->hold != NULL)
        reschedule(s, c);
}

/* ---------------------------------------------------------- the socket */

struct m0_woh *m0_woh_begin(struct m0_job *job)
{
    struct m0_woh *w = m0_xmalloc(sizeof *w);
    memset(w, 0, sizeof *w);
    const struct m0_hdr *cid = m0_req_header(&job->req, "connection-id");
    snprintf(w->cid, sizeof w->cid, "%.*s", cid ? (int)cid->value_len : 0, cid ? cid->value : "");
    struct take_ctx t = {.w = w, .h = &job->head};
    each_field(&job->head, take_field, &t, 1);
    /* The events after the OPEN are applied once the 101 is out. */
    w->opening = job->resp.out;
    memset(&job->resp.out, 0, sizeof job->resp.out);
    if (job->head.channel_len > 0)
        m0_buf_append(&w->channels, m0_head_channel(&job->head), job->head.channel_len);
    return w;
}

void m0_woh_enter(struct m0_server *s, struct m0_conn *c, uint64_t start)
{
    struct m0_woh *w = m0_wshold_of(c)->woh;
    struct m0_buf ev = w->opening;
    memset(&w->opening, 0, sizeof w->opening);
    w->last_post = w->ka_last = m0_loop_now(s->loop);
    if (m0_buf_unread(&ev) > 0)
        apply(s, c, ev.data + ev.off, m0_buf_unread(&ev), 1, start);
    m0_buf_free(&ev);
    if (c->state == M0_CONN_HELD && c->hold != NULL)
        reschedule(s, c);
}

uint64_t m0_woh_tick(struct m0_server *s, struct m0_conn *c)
{
    struct m0_wshold *ws = m0_wshold_of(c);
    struct m0_woh *w = ws->woh;
    uint64_t now = m0_loop_now(s->loop), next = 0;
    if (ws->close_sent || ws->peer_gone)
        return 0;
    w->in_tick = 1;
    if (w->ka_ms != 0) {
        /* The keep-alive message: every ka_ms (interval), or after ka_ms
         * without a write (idle). */
        uint64_t since = w->ka_interval || c->hold->last_write < w->ka_last ? w->ka_last : c->hold->last_write;
        if (now - since >= w->ka_ms && m0_conn_queued(c) == 0) {
            send_frame(s, c, w->ka_op, w->ka.data != NULL ? w->ka.data : "", w->ka.len);
            w->ka_last = now;
            since = now;
        }
        next = since + w->ka_ms;
    }
    if (w->every_ms != 0 && !w->detached && !w->told_end) {
        /* Keep-Alive-Interval: a request without events after every_ms
         * without one. */
        if (now - w->last_post >= w->every_ms && !ws->in_flight) {
            w->post_empty = 1;
            m0_wsbox_drive(s, c);
            if (c->state != M0_CONN_HELD || c->hold == NULL)
                return 0;             /* answered inline and closed: w is gone */
        }
        uint64_t due = w->last_post + w->every_ms;
        if (due <= now)
            due = now + w->every_ms;
        if (next == 0 || due < next)
            next = due;
    }
    w->in_tick = 0;
    return next;
}

void m0_woh_free(struct m0_woh *w)
{
    if (w == NULL)
        return;
    m0_buf_free(&w->close);
    m0_buf_free(&w->ka);
    m0_buf_free(&w->meta);
    m0_buf_free(&w->channels);
    m0_buf_free(&w->opening);
    free(w);
}

size_t m0_woh_size(const struct m0_woh *w)
{
    return sizeof *w + w->close.cap + w->ka.cap + w->meta.cap + w->channels.cap + w->opening.cap;
}
