/*
 * wshold.c — WebSocket holds (hold.h; DESIGN capability 6; RFC 6455): the
 * loop's side of a socket a plain view approved with M0-Hold: websocket.
 *
 * The socket's life:
 *
 *   view answers M0-Hold: websocket ──▶ ws_begin: handshake checked
 *     against the original request (400/426 if it is not one), 101 written
 *     in place of the view's head, the slot subscribed to the channel
 *   101 out ──▶ HELD: frames read and parsed here (ws.c), events written as
 *     text frames, pings at the heartbeat cadence
 *   a complete message ──▶ queued (bounded); one at a time to the runner of
 *     the target that gated the socket (C_WS_MSG); its answer comes back as
 *     one frame; the next message goes
 *   close frame in / protocol error / drain ──▶ our close frame out, then a
 *     FIN and LINGER (the peer's FIN or its close frame ends it)
 *   the peer vanishes ──▶ closed at once (unsubscribed; a message still with
 *     the runner orphans the slot until its completion, as any request does)
 *
 * What the loop owes the protocol on its own, with no Python: pong for
 * every ping (§5.5.2), the close handshake (§7.1.2: our close echoes the
 * peer's code), failing the connection with 1002/1007/1009 (§7.1.7), and
 * closing a peer that leaves a ping unanswered for two heartbeats.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "m0/accesslog.h"
#include "m0/config.h"
#include "m0/dispatch.h"
#include "m0/grip_item.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/loop.h"
#include "m0/request.h"
#include "m0/rt.h"
#include "m0/runner.h"
#include "m0/sse.h"
#include "m0/target.h"
#include "m0/timer.h"
#include "m0/ws.h"
#include "m0/wsframes.h"
#include "m0/wshold.h"
#include "wshold_int.h"
#include "wshold_woh.h"
#include "wshold_mailbox.h"

/* Bytes read per wakeup from one socket (a fast sender does not hold the loop). */
#define READ_BUDGET (256 * 1024)

static void ws_free(struct m0_wshold *ws);
static void ws_heartbeat(struct m0_server *s, struct m0_conn *c, uint64_t heartbeat_ms, uint64_t now);
static void pull(struct m0_server *s, struct m0_conn *c);
static void on_part(struct m0_server *s, struct m0_conn *c);
static void on_done(struct m0_server *s, struct m0_conn *c);

static struct m0_wshold *ws_of(const struct m0_conn *c)
{
    return m0_wshold_of(c);
}

static uint64_t now_ms(struct m0_server *s)
{
    return m0_loop_now(s->loop);
}

/* ------------------------------------------------------------ handshake */

/* The view's own header lines for the 101: all but the status line and
 * Content-Type (a 101 has no content). */
static void extra_lines(const struct m0_head *h, struct m0_buf *out)
{
    const char *p = h->lines.data, *end = p + h->lines.len;
    if (p == NULL)
        return;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    for (p = eol ? eol + 1 : end; p < end; p = eol + 1) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL)
            break;
        if ((size_t)(eol - p) >= 13 && strncasecmp(p, "content-type:", 13) == 0)
            continue;
        m0_buf_append(out, p, (size_t)(eol + 1 - p));
    }
}

/* The handshake is refused: job->resp is the refusal; nothing is held. */
static struct m0_hold *refuse(struct m0_job *job, int status, const char *why)
{
    struct m0_resp *rs = &job->resp;
    m0_buf_reset(&rs->out);
    m0_ws_refusal(&rs->out, status, why);
    rs->status = status;
    rs->flags &= ~M0_RESP_HOLD;
    job->body.keep = 0;
    return NULL;
}

/* The handshake check and the 101 for the job's request, in place of the
 * view's head (hold.h: begin). */
static struct m0_hold *ws_begin(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    struct m0_head *h = &job->head;
    struct m0_ws_handshake hs;
    const char *why;
    /* Over HTTP (wshold_woh.c) the handshake was checked before its OPEN,
     * which keeps its key; the OPEN's answer is the approval. */
    struct m0_woh *woh = job->woh ? m0_woh_begin(job) : NULL;
    const struct m0_hdr *key = woh != NULL ? m0_req_header(&job->req, "sec-websocket-key") : NULL;
    int status = woh != NULL ? 0 : m0_ws_handshake_check(&job->req, &hs, &why);
    if (woh != NULL && key == NULL) {
        status = 400;
        why = "Sec-WebSocket-Key is missing";
    } else if (key != NULL) {
        hs.key = key->value;
        hs.key_len = key->value_len;
    }
    if (status != 0) {
        m0_woh_free(woh);
        m0_debug("slot %u: %s approved as a WebSocket but %s: %d", m0_conn_slot(s, c), M0_REQ_LOG(&job->req),
                 why, status);
        return refuse(job, status, why);
    }
    if (h->ws_protocol_len > 0 && !m0_ws_protocol_offered(&job->req, h->ws_protocol, h->ws_protocol_len)) {
        m0_error("%s: the view chose WebSocket subprotocol %s, which the client did not offer: 500",
                 M0_REQ_LOG(&job->req), M0_LOG_TEXT(h->ws_protocol, h->ws_protocol_len));
        m0_woh_free(woh);
        return refuse(job, 500, "the application chose a subprotocol the client did not offer");
    }
    /* A granted socket (grant_hold.c) has no target unless --grant-inbound
     * names one: it only listens. */
    const struct m0_runner *r = job->target != NULL ? job->target->runner : NULL;
    if (r != NULL && r->message == NULL && r->submit == NULL) {
        m0_error("%s: a %s target cannot take WebSocket messages: 500", M0_REQ_LOG(&job->req),
                 job->target->runner->name);
        return refuse(job, 500, "this application cannot hold WebSockets");
    }
    char accept[M0_WS_ACCEPT_LEN + 1];
    m0_ws_accept(hs.key, hs.key_len, accept);
    struct m0_buf extra = {0};
    extra_lines(h, &extra);
    m0_buf_reset(&job->resp.out);
    m0_ws_switching(&job->resp.out, accept, h->ws_protocol_len ? h->ws_protocol : NULL, h->ws_protocol_len,
                    extra.data, extra.len, h->has_date, h->has_server);
    m0_buf_free(&extra);
    job->resp.status = 101;
    job->resp.body_bytes = 0;           /* a 101 has no content: the view's body never goes */

    size_t alen = strnlen(job->remote_addr, sizeof job->remote_addr - 1);
    struct m0_wshold *ws = m0_xmalloc(sizeof *ws + h->channel_len + 1 + alen + 1);
    memset(ws, 0, sizeof *ws);
    memcpy(ws->channel + h->channel_len + 1, job->remote_addr, alen + 1);   /* NUL included */
    ws->remote_port = job->remote_port;
    ws->https = job->https;
    m0_ws_parser_init(&ws->parser, s->cfg->ws_max_message);
    ws->target = job->target;
    /* An asynchronous runner keeps the job and takes messages as they are;
     * a synchronous one gets each as a request made from the handshake's. */
    ws->owned = r != NULL && r->submit != NULL;
    ws->woh = woh;
    if (!ws->owned && r != NULL)
        ws->req = m0_ws_snapshot_for(&job->req, woh != NULL);
    /* The messages' M0-Channel: a list as the field lists it (commas). */
    ws->channel_len = h->channel_len;
    memcpy(ws->channel, m0_head_channel(h), h->channel_len);
    ws->channel[h->channel_len] = '\0';
    for (char *p = ws->channel; (p = strchr(p, '\n')) != NULL;)
        *p = ',';
    return &ws->base;
}

/* ---------------------------------------------------------- sending */

/* Queue our close frame (why: wlen bytes, at most 123); nothing else is
 * sent after it (§5.5.1). */
static void send_close_n(struct m0_server *s, struct m0_conn *c, unsigned code, const char *why, size_t wlen)
{
    struct m0_wshold *ws = ws_of(c);
    if (ws->close_sent)
        return;
    char frame[M0_WS_CONTROL_MAX + 2];
    struct m0_buf b = {.data = frame, .cap = sizeof frame};
    m0_ws_close_frame(&b, code == M0_WS_CLOSE_NO_STATUS ? 0 : code, why, wlen);
    m0_hold_send(s, c, b.data, b.len);
    ws->close_sent = 1;
    if (ws->end_code == 0)
        ws->end_code = (uint16_t)code;
}

static void send_close(struct m0_server *s, struct m0_conn *c, unsigned code, const char *why)
{
    send_close_n(s, c, code, why, why ? strlen(why) : 0);
}

void m0_wshold_close(struct m0_server *s, struct m0_conn *c, unsigned code, const char *why, size_t wlen)
{
    send_close_n(s, c, code, why, wlen);
}

/* Our close frame is out: shut our side and let LINGER wait for the
 * peer's FIN (bounded); the socket leaves the registry now. */
static void finish_close(struct m0_server *s, struct m0_conn *c)
{
    m0_hold_release(s, c);
    m0_conn_shutdown(s, c);
    m0_buf_free(&c->in);
    m0_conn_set_state(s, c, M0_CONN_LINGER);
    m0_conn_interest(s, c, EPOLLIN | EPOLLRDHUP);
}

/* Messages views still owe a socket approved by a view (each one runs,
 * even after a close: what a client sent before it left is not dropped). */
static int views_owe(const struct m0_wshold *ws)
{
    return !ws->owned && (ws->q_head != NULL || ws->in_flight || (ws->woh != NULL && m0_woh_owes(ws)));
}

/* The peer is gone (EOF, a ping unanswered; hard: a reset, reported
 * whatever the interest): the slot closes now, or once the views have
 * what it sent (and, over HTTP, its DISCONNECT). */
static void peer_left(struct m0_server *s, struct m0_conn *c, int hard)
{
    c->flags |= C_PEER_GONE;
    struct m0_wshold *ws = ws_of(c);
    if (ws->woh != NULL)
        m0_woh_peer_gone(ws);
    if (!views_owe(ws)) {
        m0_conn_close(s, c);
        return;
    }
    ws->peer_gone = 1;
    if (ws->end_code == 0)
        ws->end_code = 1006;
    if (!hard) {
        m0_conn_interest(s, c, 0);
        if (ws->woh != NULL)
            m0_wsbox_drive(s, c);
        return;
    }
    /* The descriptor must go now, or the loop would spin on its HUP; over
     * HTTP its DISCONNECT still goes when no request is in flight (the
     * slot waits for it: ORPHAN). */
    if (ws->woh != NULL && !ws->in_flight)
        m0_wsbox_drive(s, c);
    if (c->state == M0_CONN_HELD)
        m0_conn_close(s, c);
}

/* After anything that may have queued our close frame, or ended the last
 * message the views owed: the close handshake (LINGER), or the slot's end
 * when the peer is gone. */
void m0_wshold_settle(struct m0_server *s, struct m0_conn *c)
{
    if (c->state != M0_CONN_HELD || c->hold == NULL || (c->flags & C_DOOMED))
        return;
    struct m0_wshold *ws = ws_of(c);
    if (!(ws->close_sent || ws->peer_gone) || views_owe(ws))
        return;
    if (ws->peer_gone)
        m0_conn_close(s, c);
    else if (m0_conn_queued(c) == 0)
        finish_close(s, c);
}

/* Fail the connection (§7.1.7): our close frame with code, then close. */
void m0_wshold_fail(struct m0_server *s, struct m0_conn *c, unsigned code, const char *why)
{
    m0_debug("slot %u: closing WebSocket %u (%s)", m0_conn_slot(s, c), code, why);
    send_close(s, c, code, why);
}

/* A GRIP item from the registry: its ws-message, if it has one, as one
 * frame of its type (RFC 6455 §5.6: text is UTF-8, epcp.c checked); its
 * http-stream / http-response formats are GRIP holds' (grip_item.h). In
 * publish order, id and prev-id not checked: Pushpin's sequencing
 * reorders, and its reliability recovers, HTTP holds only. */
static void ws_deliver_item(struct m0_server *s, struct m0_conn *c, const struct m0_rt_event *ev)
{
    struct m0_grip_item it;
    if (m0_grip_item_decode(ev->frame, ev->n, &it) != M0_OK || !(it.flags & M0_GRIP_IT_WS))
        return;
    struct m0_buf *out = &m0_ws_scratch_of(s)->data;
    m0_buf_reset(out);
    m0_ws_frame(out, it.ws_opcode, it.ws_content.p, it.ws_content.n);
    m0_hold_deliver(s, c, out->data, out->len);
    if (out->cap > 256 * 1024)
        m0_buf_free(out);    /* a large message's bytes are not kept by an idle loop */
}

/* An SSE event from the engine: its data as text frames (converted once
 * per event for every socket, wsframes.h); a GRIP item: its ws-message; a
 * notice (m0-gap) is for resuming EventSources, not a socket's message
 * (hold.h: deliver). */
static void ws_deliver(struct m0_server *s, struct m0_conn *c, const struct m0_rt_event *ev)
{
    struct m0_wshold *ws = ws_of(c);
    if (ws->close_sent || ws->peer_gone || ev->kind == M0_RT_NOTICE)
        return;
    if (ev->kind == M0_RT_GRIP) {
        ws_deliver_item(s, c, ev);
        return;
    }
    const struct m0_buf *frames = m0_ws_event_frames(m0_ws_scratch_of(s), ev);
    if (frames->len > 0)
        m0_hold_deliver(s, c, frames->data, frames->len);
}

/* --------------------------------------------------------------- input */

/* Parse n bytes of frames; what cannot be taken while the queue is full
 * waits in c->in. */
void m0_wshold_input(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    while (n > 0) {
        if (c->state != M0_CONN_HELD || c->hold == NULL || (c->flags & C_DOOMED))
            return;
        struct m0_wshold *ws = ws_of(c);
        if (ws->close_sent || ws->close_received)
            return;                   /* nothing after a close is read (§5.5.1) */
        if (ws->paused) {
            m0_buf_append(&c->in, p, n);
            return;
        }
        size_t used = 0;
        struct m0_ws_event ev;
        enum m0_ws_event_type t = m0_ws_parse(&ws->parser, p, n, &used, &ev);
        p += used;
        n -= used;
        switch (t) {
        case M0_WS_EV_NONE:
            break;
        case M0_WS_EV_MESSAGE:
            if (ws->target == NULL) {
                /* A grant is for listening (issue 18): 1008, policy violation. */
                m0_wshold_fail(s, c, M0_WS_CLOSE_POLICY, "this socket only listens");
                break;
            }
            if (ws->woh != NULL && m0_woh_detached(ws))
                break;                /* detached: nobody takes its messages (Pushpin drops them) */
            m0_wsbox_push(ws, ev.opcode, &ws->parser);
            m0_wsbox_drive(s, c);
            break;
        case M0_WS_EV_PING: {
            char frame[M0_WS_CONTROL_MAX + 2];
            struct m0_buf b = {.data = frame, .cap = sizeof frame};
            m0_ws_frame(&b, M0_WS_PONG, ev.data, ev.len);     /* §5.5.3: the same payload */
            m0_hold_send(s, c, b.data, b.len);
            if (ws->woh != NULL && !m0_woh_detached(ws)) {
                m0_wsbox_push_copy(ws, M0_WS_PING, ev.data, ev.len);    /* posted too, as Pushpin does */
                m0_wsbox_drive(s, c);
            }
            break;
        }
        case M0_WS_EV_PONG:
            ws->ping_at = 0;
            ws->last_pong = now_ms(s);
            break;
        case M0_WS_EV_CLOSE:
            /* §5.5.1: answer with a close frame, echoing the code. */
            ws->close_received = 1;
            ws->end_code = (uint16_t)ev.code;
            if (ws->owned && c->job != NULL)
                m0_job_peer_reason(c->job, ev.data, ev.len);   /* for websocket.disconnect */
            send_close(s, c, ev.code, NULL);
            if (ws->woh != NULL) {
                m0_woh_peer_closed(ws, ev.code, ev.data, ev.len);   /* CLOSE, after its messages */
                m0_wsbox_drive(s, c);
            }
            break;            /* the messages before it are still delivered */
        case M0_WS_EV_ERROR:
            m0_wshold_fail(s, c, ev.code, ev.why);
            break;
        }
    }
}

static void read_frames(struct m0_server *s, struct m0_conn *c)
{
    char *rbuf = m0_ws_scratch_of(s)->rbuf;
    size_t total = 0;
    int gone = 0;
    while (total < READ_BUDGET) {
        struct m0_wshold *ws = ws_of(c);
        if (ws->paused || ws->close_sent || ws->close_received)
            break;
        ssize_t r = m0_conn_recv(s, c, rbuf, sizeof m0_ws_scratch_of(s)->rbuf);
        if (r > 0) {
            total += (size_t)r;
            m0_wshold_input(s, c, rbuf, (size_t)r);
            if (c->state != M0_CONN_HELD || c->hold == NULL)
                return;
            if ((size_t)r < sizeof m0_ws_scratch_of(s)->rbuf)
                break;
            continue;
        }
        if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        gone = 1;                     /* EOF or an error: the peer left */
        break;
    }
    if (gone) {
        /* Whatever the handshake state, nobody reads our frames any more:
         * unsubscribe and free the slot now (an owning runner gets what it
         * sent before leaving, ws_release) — unless views still owe
         * it messages: they run first, then the slot closes (m0_wshold_settle). */
        peer_left(s, c, 0);
        return;
    }
    struct m0_wshold *ws = ws_of(c);
    /* A full queue or a close stops the reading: epoll must stop reporting
     * the input it leaves (level-triggered), until the mailbox resumes it. */
    m0_conn_rearm(s, c);
    if (ws->close_sent || ws->close_received) {
        /* Input after a close is discarded until LINGER reads it. */
        m0_wshold_settle(s, c);
    }
}

static void ws_enter(struct m0_server *s, struct m0_conn *c)
{
    struct m0_wshold *ws = ws_of(c);
    ws->last_pong = now_ms(s);
    if (ws->owned) {
        /* What the runner sent while the 101 was going out, or its end. */
        if (ws->runner_done)
            on_done(s, c);
        else
            on_part(s, c);
        if (c->state != M0_CONN_HELD || c->hold == NULL)
            return;
    }
    if (ws->woh != NULL) {
        /* The OPEN answer's events after its OPEN (its messages, its
         * control messages). */
        m0_woh_enter(s, c, c->job != NULL ? c->job->begin_id : 0);
        if (c->state != M0_CONN_HELD || c->hold == NULL || (c->flags & C_DOOMED)) {
            m0_conn_close_doomed(s);
            return;
        }
    }
    if (m0_buf_unread(&c->in) > 0) {
        /* Frames the client sent right behind its handshake. */
        struct m0_buf in = c->in;
        memset(&c->in, 0, sizeof c->in);
        m0_wshold_input(s, c, in.data + in.off, m0_buf_unread(&in));
        m0_buf_free(&in);
        if (c->state == M0_CONN_HELD && c->hold != NULL) {
            m0_conn_rearm(s, c);
            m0_wshold_settle(s, c);
        }
    }
    m0_conn_close_doomed(s);
}

/* Epoll events on a held socket (conn.h: event). */
static void ws_event(struct m0_server *s, struct m0_conn *c, uint32_t ev)
{
    if (c->state != M0_CONN_HELD)
        return;
    if ((ev & EPOLLOUT) && ws_of(c)->owned && !ws_of(c)->runner_done)
        m0_job_credit(c->job, m0_conn_queued(c));
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        read_frames(s, c);
    if (c->state == M0_CONN_HELD && (ev & (EPOLLHUP | EPOLLERR))) {
        /* Reset, or gone both ways, while its input was not being read (a
         * full queue): these are reported whatever the interest, so the
         * socket must go now or the loop would spin on them. */
        peer_left(s, c, 1);
    }
    if (c->state == M0_CONN_HELD && c->hold != NULL)
        m0_wshold_settle(s, c);
    m0_conn_close_doomed(s);
}

/* ---------------------------------------------------------- heartbeats */

/* Pings at the heartbeat cadence; a peer silent for two heartbeats after a
 * ping is closed (conn.h: tick). */
static void ws_sweep(struct m0_server *s, struct m0_conn *c)
{
    if (c->state != M0_CONN_HELD)
        return;
    struct m0_wshold *ws = ws_of(c);
    uint64_t heartbeat_ms = s->holds->heartbeat_ms;
    uint64_t now = now_ms(s);
    uint64_t woh_next = 0;
    if (ws->woh != NULL && !ws->peer_gone) {
        woh_next = m0_woh_tick(s, c);       /* its keep-alives */
        if (c->state != M0_CONN_HELD || c->hold == NULL)
            return;
    }
    ws_heartbeat(s, c, heartbeat_ms, now);
    if (woh_next != 0 && c->state == M0_CONN_HELD && woh_next < c->deadline)
        c->deadline = woh_next;
}

/* Pings at the heartbeat cadence; a peer silent for two heartbeats after
 * a ping is gone. */
static void ws_heartbeat(struct m0_server *s, struct m0_conn *c, uint64_t heartbeat_ms, uint64_t now)
{
    struct m0_wshold *ws = ws_of(c);
    c->deadline = now + (heartbeat_ms != 0 ? heartbeat_ms : 60000);     /* the next look (conn.h: tick) */
    if (heartbeat_ms == 0 || ws->close_sent || ws->peer_gone)
        return;
    if (ws->ping_at != 0) {
        /* A peer that leaves a ping unanswered for two intervals is gone
         * (a half-open TCP connection, a laptop lid closed). While its
         * socket is not read (queue full) its pong cannot be seen. */
        c->deadline = ws->paused ? now + heartbeat_ms : ws->ping_at + 2 * heartbeat_ms;
        if (!ws->paused && now - ws->ping_at >= 2 * heartbeat_ms) {
            m0_info("closing a WebSocket that did not answer a ping in %.1f s",
                    (double)(2 * heartbeat_ms) / 1000);
            peer_left(s, c, 0);
        }
        return;
    }
    c->deadline = c->hold->last_write + heartbeat_ms;
    if (now - c->hold->last_write >= heartbeat_ms) {
        char frame[2 + 8];
        struct m0_buf b = {.data = frame, .cap = sizeof frame};
        m0_ws_frame(&b, M0_WS_PING, NULL, 0);
        m0_hold_send(s, c, b.data, b.len);
        c->hold->last_write = now;
        ws->ping_at = now;
        c->deadline = now + 2 * heartbeat_ms;      /* the pong's deadline */
    }
}

/* A grant's m0-refresh notice (docs/realtime.md "Expiry and refresh"): one text frame
 * a page tells from an event by its type. */
static void ws_refresh(struct m0_server *s, struct m0_conn *c, int64_t exp)
{
    struct m0_wshold *ws = ws_of(c);
    if (ws->close_sent || ws->peer_gone)
        return;
    char text[64], frame[M0_WS_FRAME_HEAD_MAX + sizeof text];
    int n = snprintf(text, sizeof text, "{\"type\": \"m0-refresh\", \"exp\": %lld}", (long long)exp);
    struct m0_buf b = {.data = frame, .cap = sizeof frame};
    m0_ws_frame(&b, M0_WS_TEXT, text, (size_t)n);
    m0_hold_send(s, c, b.data, b.len);
}

/* The grant lapsed: our close frame, 4001 (ws.h), then the handshake's end. */
static void ws_expire(struct m0_server *s, struct m0_conn *c)
{
    struct m0_wshold *ws = ws_of(c);
    if (ws->peer_gone) {
        m0_wshold_settle(s, c);
        return;
    }
    send_close(s, c, M0_WS_CLOSE_GRANT_EXPIRED, "grant expired");
    if (c->state == M0_CONN_HELD && c->hold != NULL && !(c->flags & C_DOOMED))
        m0_wshold_settle(s, c);
}

/* Periodic (conn.h: tick): a grant's notice and end, pings. */
static void ws_tick(struct m0_server *s, struct m0_conn *c)
{
    if (m0_hold_grant_tick(s, c))
        return;
    ws_sweep(s, c);
    m0_hold_grant_due(s, c);
}

/* ---------------------------------------------------------- the end */

static void ws_end(struct m0_server *s, struct m0_conn *c)
{
    struct m0_wshold *ws = ws_of(c);
    if (ws->owned && !ws->runner_done)
        pull(s, c);                   /* what the application sent before the drain */
    if (ws->peer_gone) {
        m0_wshold_settle(s, c);
        return;
    }
    send_close(s, c, M0_WS_CLOSE_GOING_AWAY, "server shutting down");
    if (c->state == M0_CONN_HELD && c->hold != NULL && !(c->flags & C_DOOMED))
        m0_wshold_settle(s, c);
}

/* ------------------------------------------------------- owned sockets */

/* Move what the runner queued (frames, then its close) to the socket. */
static void pull(struct m0_server *s, struct m0_conn *c)
{
    struct m0_buf *taken = &m0_ws_scratch_of(s)->taken;
    struct m0_wshold *ws = ws_of(c);
    struct m0_job *job = c->job;
    m0_job_take(job, taken);
    if (m0_buf_unread(taken) > 0 && !ws->close_sent)
        m0_hold_send_owed(s, c, taken->data + taken->off, m0_buf_unread(taken));
    m0_buf_reset(taken);
    if (taken->cap > 256 * 1024)
        m0_buf_free(taken);
    unsigned code;
    char reason[M0_WS_REASON_MAX];
    size_t rlen;
    if (m0_job_take_close(job, &code, reason, &rlen))
        send_close_n(s, c, code, reason, rlen);
    if (!ws->runner_done && !(c->flags & C_DOOMED))
        m0_job_credit(job, m0_conn_queued(c));
}

static void on_part(struct m0_server *s, struct m0_conn *c)
{
    if (c->state != M0_CONN_HELD)
        return;          /* the 101 is still going out: ws_enter pulls */
    pull(s, c);
    m0_wshold_settle(s, c);
    m0_conn_close_doomed(s);
}

static void on_taken(struct m0_server *s, struct m0_conn *c)
{
    if (c->state != M0_CONN_HELD)
        return;
    ws_of(c)->in_flight = 0;
    m0_wsbox_drive(s, c);
    if (c->state == M0_CONN_HELD && c->hold != NULL)
        m0_wshold_settle(s, c);
    m0_conn_close_doomed(s);
}

static void on_done(struct m0_server *s, struct m0_conn *c)
{
    struct m0_wshold *ws = ws_of(c);
    ws->runner_done = 1;
    if (c->state != M0_CONN_HELD)
        return;
    pull(s, c);
    /* An application that returns without closing: a normal closure. */
    send_close(s, c, M0_WS_CLOSE_NORMAL, NULL);
    m0_wsbox_clear(ws);
    m0_wshold_settle(s, c);
    m0_conn_close_doomed(s);
}

/* The connection closes (hold.h: release): an owning runner is told the
 * socket ended (with what the peer sent before), and what the socket kept
 * is freed; the hold itself is hold.c's to free. */
static void ws_release(struct m0_server *s, struct m0_conn *c)
{
    struct m0_wshold *ws = ws_of(c);
    (void)s;
    if (ws->owned && !ws->runner_done) {
        if (ws->q_head != NULL)
            m0_wsbox_offer_all(c);             /* what the peer sent before it left or closed */
        m0_job_socket_gone(c->job, ws->end_code ? ws->end_code : 1006);   /* 1006: no close frame (§7.1.5) */
    }
    ws_free(ws);
}

static void ws_free(struct m0_wshold *ws)
{
    m0_woh_free(ws->woh);
    ws->woh = NULL;
    m0_wsbox_clear(ws);
    m0_ws_parser_free(&ws->parser);
    m0_ws_snapshot_free(ws->req);
    ws->req = NULL;
}

/* ------------------------------------------------- the hold interface */

/* A socket whose message queue is full is not read (TCP pushes back), nor
 * one whose close has begun or whose peer left: LINGER reads the rest. */
static int ws_reads(const struct m0_hold *h)
{
    const struct m0_wshold *ws = (const struct m0_wshold *)h;
    return !(ws->paused || ws->close_sent || ws->close_received || ws->peer_gone);
}

/* A runner that owns the socket may send again once its bytes are
 * written, however the queue drained (EPOLLOUT, a fan-out's flush). */
static void ws_written(struct m0_server *s, struct m0_conn *c)
{
    const struct m0_wshold *ws = ws_of(c);
    (void)s;
    if (ws->owned && !ws->runner_done)
        m0_job_credit(c->job, m0_conn_queued(c));
}

/* A runner's completion for this socket (conn.h: complete; before it is
 * HELD, h1.c passes it on through m0_hold_complete): frames or our close
 * from an owning runner's channel (PART), the offered messages taken
 * (TAKEN), a message's view returned or the owning runner ended (DONE). */
static void ws_complete(struct m0_server *s, struct m0_conn *c, const struct m0_completion *done)
{
    switch (done->kind) {
    case M0_CPL_PART:
        if ((c->flags & C_UPGRADED) && c->hold != NULL)
            on_part(s, c);
        return;
    case M0_CPL_TAKEN:
        if ((c->flags & C_UPGRADED) && c->hold != NULL)
            on_taken(s, c);
        return;
    case M0_CPL_DONE:
        if (c->flags & C_WS_MSG) {
            m0_wsbox_message_done(s, c);
        } else if (c->flags & C_UPGRADED) {
            /* The runner of an accepted socket ended: close the socket if
             * it is still held; a refused or finished one owes nothing. */
            c->flags &= ~C_UPGRADED;
            if (c->hold != NULL)
                on_done(s, c);
        }
        return;
    default:
        return;
    }
}

const struct m0_hold_ops m0_ws_hold_ops = {
    .proto = M0_CONN_PROTO_WS,
    .begin = ws_begin,
    .reads = ws_reads,
    .written = ws_written,
    .deliver = ws_deliver,
    .enter = ws_enter,
    .end = ws_end,
    .release = ws_release,
    .complete = ws_complete,
    .refresh = ws_refresh,
    .expire = ws_expire,
};

const struct m0_conn_ops m0_ws_conn_ops = {
    .name = "ws",
    .wrote = m0_hold_wrote,
    .watch = m0_hold_watch,
    .event = ws_event,
    .tick = ws_tick,
    .closing = m0_hold_release,
    .complete = ws_complete,
    .hold = &m0_ws_hold_ops,
};
