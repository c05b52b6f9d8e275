/*
 * grip_hold.c — GRIP holds, Grip-Hold: stream and Grip-Hold: response (see
 * grip_hold.h). Loop thread only.
 *
 * What a hold keeps of the view's instructions (struct m0_grip is freed
 * with the head when the connection becomes HELD): every channel's last
 * id and filters (all Grip-Channels are subscribed; an item's prev-id
 * chains on its own channel's id), the keep-alive, and for a long-poll
 * the view's response and its deadline.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>

#include "m0/accesslog.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/grip.h"
#include "m0/grip_hold.h"
#include "m0/grip_item.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/loop.h"
#include "m0/response.h"
#include "m0/rt.h"
#include "m0/target.h"
#include "m0/runner.h"
#include "m0/request.h"
#include "m0/dispatch.h"

#include "grip_hold_int.h"
#include "grip_hold_link.h"

static const char *lookup_id(void *ctx, const char *name, size_t nlen, size_t *vlen)
{
    struct ent e;
    if (!find(ctx, name, nlen, &e))
        return NULL;
    *vlen = e.idlen;
    return e.id;
}

/* The channel e's last id is now id (e is stale afterwards). */
static void set_last(struct m0_griphold *gh, const struct ent *e, const char *id, size_t idlen)
{
    struct m0_buf b = {0};
    m0_buf_append(&b, gh->ids.data, e->at);
    put_entry(&b, e->name, e->nlen, id, idlen, 1, e->filters);
    m0_buf_append(&b, gh->ids.data + e->end, gh->ids.len - e->end);
    m0_buf_free(&gh->ids);
    gh->ids = b;
}

/* content with %I rendered (build-id: the id from id_format over the
 * channels' ids; "%%" is "%"), appended to out. M0_OK or M0_ERR. */
int m0_griphold_render(struct m0_griphold *gh, struct m0_buf *out, const char *p, size_t n)
{
    struct m0_buf id = {0};
    const char *why = NULL;
    if (gh->id_format.len > 0 &&
        m0_grip_render_id(&id, gh->id_format.data, gh->id_format.len, lookup_id, &gh->ids, &why) != M0_OK)
        m0_buf_reset(&id);          /* a channel it names is not ours: no id rather than no event */
    int rc = m0_grip_render_content(out, p, n, id.data != NULL ? id.data : "", id.len, &why);
    m0_buf_free(&id);
    return rc;
}

/* ------------------------------------------------------------ begin */

/* Is the field line p (n bytes, without CRLF) one the answer's framing owns? */
static int framing_field(const char *p, size_t n)
{
    static const char *const owned[] = {"content-length:", "connection:", "transfer-encoding:", "keep-alive:"};
    for (size_t k = 0; k < M0_ARRAY_LEN(owned); k++) {
        size_t l = strlen(owned[k]);
        if (n >= l && strncasecmp(p, owned[k], l) == 0)
            return 1;
    }
    return 0;
}

/* The view's response (p, n bytes: head and body) into gh->kept (its
 * status line and fields but the framing ones) and gh->kept_body. */
static void keep_response(struct m0_griphold *gh, const char *p, size_t n)
{
    const char *eoh = memmem(p, n, "\r\n\r\n", 4);
    const char *end = eoh != NULL ? eoh + 2 : p + n;
    for (const char *l = p; l < end;) {
        const char *eol = memmem(l, (size_t)(end - l), "\r\n", 2);
        const char *next = eol != NULL ? eol + 2 : end;
        if (l == p || !framing_field(l, (size_t)(next - l)))
            m0_buf_append(&gh->kept, l, (size_t)(next - l));
        l = next;
    }
    if (eoh != NULL)
        m0_buf_append(&gh->kept_body, eoh + 4, n - (size_t)(eoh + 4 - p));
}

static struct m0_hold *grip_begin(struct m0_server *s, struct m0_conn *c)
{
    (void)s;
    struct m0_job *job = c->job;
    const struct m0_grip *g = job->head.grip;
    if (job->head.grip_hold == M0_GRIP_HOLD_RESPONSE && (c->flags & C_STREAMING)) {
        /* The view's body was too long to hold back: its head is out, so
         * it is the answer (as if Grip-Timeout had passed). */
        m0_warn("%s: Grip-Hold: response with a body too long to keep: answered now", M0_REQ_LOG(&job->req));
        job->resp.flags &= ~M0_RESP_HOLD;
        return NULL;
    }
    struct m0_griphold *gh = m0_xmalloc(sizeof *gh);
    memset(gh, 0, sizeof *gh);
    gh->kind = job->head.grip_hold;
    m0_griphold_take(gh, g, job->req.path, job->req.path_len);
    if (gh->link.len > 0) {
        /* Its client and Host, for the link's request once the request is
         * gone. */
        const struct m0_hdr *host = m0_req_header(&job->req, "host");
        gh->client = m0_xstrndup(job->remote_addr, strlen(job->remote_addr));
        gh->client_port = job->remote_port;
        gh->client_https = job->https;
        if (host != NULL)
            gh->host = m0_xstrndup(host->value, host->value_len);
    }
    struct m0_buf *out = &job->resp.out;
    if (gh->kind == M0_GRIP_HOLD_RESPONSE) {
        /* Nothing goes out now: the view's response waits for its timeout,
         * kept without the framing fields of a held head (its answer is
         * Content-Length framed, so the connection may persist). */
        struct m0_body_req fr = m0_job_framing(job);
        gh->keep = (uint8_t)(fr.keepalive != 0);
        gh->http10 = (uint8_t)(fr.http_minor == 0);
        if (gh->keep) {
            gh->peer = m0_xstrndup(job->peer_addr, strlen(job->peer_addr));
            gh->peer_port = job->peer_port;
        }
        gh->kept_status = job->head.status;
        keep_response(gh, out->data + out->off, m0_buf_unread(out));
        m0_buf_reset(out);
        job->resp.body_bytes = 0;            /* none of it is sent now (the access log's bytes) */
        gh->deadline = (uint64_t)g->timeout * 1000;      /* relative until enter */
    } else if (!(c->flags & C_STREAMING) && (gh->filters & CONTENT_FILTERS) && m0_buf_unread(out) > 0) {
        /* The view's body passes the channel's content filters too (Pushpin
         * applies build-id to the first response: django-eventstream's
         * "%%" comes back as "%"). */
        const char *p = out->data + out->off;
        const char *eoh = memmem(p, m0_buf_unread(out), "\r\n\r\n", 4);
        if (eoh != NULL) {
            size_t head = (size_t)(eoh + 4 - p);
            struct m0_buf nb = {0};
            m0_buf_append(&nb, p, head);
            if (m0_griphold_render(gh, &nb, p + head, m0_buf_unread(out) - head) == M0_OK) {
                job->resp.body_bytes = nb.len - head;      /* the access log's bytes */
                m0_buf_free(out);
                *out = nb;
            } else {
                m0_buf_free(&nb);
            }
        }
    }
    return &gh->base;
}

/* --------------------------------------------------------- the end */

/* Write what is queued, then close (the close-delimited stream's end, or
 * the long-poll answer's Connection: close). Called while deliveries are
 * being made (a registry pass may be iterating its subscribers), so the
 * close itself is left to the sweep (grip_tick) or to the EPOLLOUT that
 * writes the rest; a write error dooms it (closed after the batch). */
void m0_griphold_finish(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    gh->finishing = 1;
    if (!s->holds->corking && c->state == M0_CONN_HELD && m0_conn_write(s, c) == M0_ERR)
        m0_conn_doom(s, c);
}

/* A long-poll's answer: head (status line code, and fields without the
 * framing ones) and body, Content-Length framed; then the connection
 * persists when the request allowed it and the worker is not draining
 * (RFC 9112 §9.3), or closes. A 1xx, 204 or 304 answer is its head alone
 * (RFC 9110 §15.3.5, §15.4.5; RFC 9112 §6.3): no Content-Length, the body
 * dropped — bytes after it would be read as the next response. */
static void answer(struct m0_server *s, struct m0_conn *c, int code, const char *head, size_t hn,
                   const char *body, size_t bn)
{
    struct m0_griphold *gh = gh_of(c);
    if (gh->finishing)
        return;
    if (atomic_load(&s->life.draining))
        gh->keep = 0;
    int bodiless = m0_status_bodiless(code);
    if (bodiless)
        bn = 0;
    struct m0_buf r = {0};
    m0_buf_append(&r, head, hn);
    if (!bodiless)
        m0_buf_printf(&r, "Content-Length: %zu\r\n", bn);
    m0_buf_printf(&r, "%s\r\n",
                  !gh->keep ? "Connection: close\r\n" : gh->http10 ? "Connection: keep-alive\r\n" : "");
    m0_buf_append(&r, body, bn);
    m0_hold_answered(c, code, r.len - bn);      /* the access log's status and body bytes */
    m0_hold_send(s, c, r.data, r.len);
    m0_buf_free(&r);
    m0_griphold_finish(s, c);
}

static void answer_kept(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    answer(s, c, gh->kept_status, gh->kept.data, gh->kept.len, gh->kept_body.data, gh->kept_body.len);
}

/* The answer (or the stream's end) is out: a long-poll whose connection
 * persists goes back to HTTP/1.1 for the next request; anything else
 * closes. Not while a registry pass runs (finish). */
static void done(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    if (gh->keep) {
        char *peer = gh->peer;
        uint16_t port = gh->peer_port;
        gh->peer = NULL;
        m0_hold_release(s, c);
        s->proto[M0_CONN_PROTO_H1]->resume(s, c, peer, port);
        free(peer);
        return;
    }
    m0_conn_shutdown(s, c);
    m0_conn_close(s, c);
}

/* The answer an http-response item gives: its code (a final one:
 * m0_grip_item_decode), reason, headers (without the ones the framing
 * owns) and body, framed by answer. */
static void answer_item(struct m0_server *s, struct m0_conn *c, const struct m0_grip_item *it)
{
    struct m0_buf r = {0};
    int code = it->code;
    m0_buf_printf(&r, "HTTP/1.1 %03d ", code);
    if (it->reason.n > 0)
        m0_buf_append(&r, it->reason.p, it->reason.n);
    else
        m0_buf_puts(&r, m0_status_reason(code));
    m0_buf_puts(&r, "\r\n");
    static const char *const owned[] = {"content-length", "connection", "transfer-encoding", "keep-alive",
                                        "te", "trailer", "upgrade"};
    for (unsigned i = 0; i < it->nheaders; i++) {
        int skip = 0;
        for (size_t k = 0; k < M0_ARRAY_LEN(owned); k++)
            skip |= it->hname[i].n == strlen(owned[k]) && strncasecmp(it->hname[i].p, owned[k], it->hname[i].n) == 0;
        if (skip)
            continue;
        m0_buf_append(&r, it->hname[i].p, it->hname[i].n);
        m0_buf_puts(&r, ": ");
        m0_buf_append(&r, it->hvalue[i].p, it->hvalue[i].n);
        m0_buf_puts(&r, "\r\n");
    }
    m0_head_server_fields(&r, 0, 0);
    answer(s, c, code, r.data, r.len, it->body.p, it->body.n);
    m0_buf_free(&r);
}

/* An item was missed (a gap notice, or an item that does not chain): a
 * stream with a next link asks the application for what it missed at the
 * next tick (never inside a fan-out pass: its answer may change the
 * subscription), what comes meanwhile waiting for the answer. */
static void missed(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    if (gh->kind == M0_GRIP_HOLD_RESPONSE)
        answer_kept(s, c);     /* the client asks again */
    else if (gh->link.len > 0)
        gh->want = 1;          /* recovered through the link, the stream kept open */
    else
        m0_griphold_finish(s, c);        /* the client reconnects with Last-Event-ID */
}

/* ---------------------------------------------------------- delivery */


/* The item's meta value for key, or NULL. */
static const struct m0_grip_view *item_meta(const struct m0_grip_item *it, const char *key)
{
    size_t n = strlen(key);
    for (unsigned i = 0; i < it->nmeta; i++) {
        if (it->mkey[i].n == n && memcmp(it->mkey[i].p, key, n) == 0)
            return &it->mvalue[i];
    }
    return NULL;
}

/* Does the comma-separated list v name s (n bytes)? */
static int list_has(struct m0_grip_view v, const char *s, size_t n)
{
    const char *p = v.p, *end = v.p + v.n;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma != NULL ? comma : end;
        const char *a = p, *b = e;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if ((size_t)(b - a) == n && memcmp(a, s, n) == 0)
            return 1;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return 0;
}

/* Pushpin's delivery filters on the subscribed channel: skip-self (the
 * item's sender meta is this subscriber's user), skip-users (its
 * skip_users list names the user), require-sub (its require_sub channel
 * is not one this hold was given). 1: drop the item. */
static int filtered(const struct m0_griphold *gh, uint32_t filters, const struct m0_grip_item *it)
{
    const struct m0_grip_view *v;
    if ((filters & M0_GRIP_F_SKIP_SELF) && gh->user.len > 0 && (v = item_meta(it, "sender")) != NULL &&
        v->n == gh->user.len && memcmp(v->p, gh->user.data, v->n) == 0)
        return 1;
    if ((filters & M0_GRIP_F_SKIP_USERS) && gh->user.len > 0 && (v = item_meta(it, "skip_users")) != NULL &&
        list_has(*v, gh->user.data, gh->user.len))
        return 1;
    if ((filters & M0_GRIP_F_REQUIRE_SUB) && (v = item_meta(it, "require_sub")) != NULL) {
        size_t vlen;
        if (lookup_id((void *)&gh->ids, v->p, v->n, &vlen) == NULL)
            return 1;
    }
    return 0;
}

static void grip_deliver(struct m0_server *s, struct m0_conn *c, const struct m0_rt_event *ev)
{
    struct m0_griphold *gh = gh_of(c);
    if (gh->finishing)
        return;
    if (ev->kind != M0_RT_GRIP) {
        /* An m0 SSE event on the same channel is not GRIP content; the
         * worker's gap notice is a missed item. */
        if (ev->kind == M0_RT_NOTICE)
            missed(s, c);
        return;
    }
    if (gh->want || gh->fetching) {
        /* The link's answer decides what of these is new (Pushpin's
         * queue while it updates): they wait for it, within the limit. */
        uint32_t n32 = (uint32_t)ev->n;
        if (gh->waiting.len + ev->n + 4 > s->holds->outbox_limit) {
            m0_warn("a GRIP stream waiting for its next link has more than --outbox-limit queued: closing it");
            m0_griphold_finish(s, c);
            return;
        }
        m0_buf_append(&gh->waiting, &n32, 4);
        m0_buf_append(&gh->waiting, ev->frame, ev->n);
        return;
    }
    m0_griphold_deliver(s, c, ev->frame, ev->n);
}

/* One GRIP item for the hold (live, replayed, or one that waited for the
 * link's answer: gh->front drops those that do not chain). */
void m0_griphold_deliver(struct m0_server *s, struct m0_conn *c, const char *frame, size_t n)
{
    struct m0_griphold *gh = gh_of(c);
    struct m0_grip_item it;
    if (m0_grip_item_decode(frame, n, &it) != M0_OK)
        return;
    if (gh->kind == M0_GRIP_HOLD_STREAM && !(it.flags & (M0_GRIP_IT_STREAM | M0_GRIP_IT_STREAM_CLOSE)))
        return;
    if (gh->kind == M0_GRIP_HOLD_RESPONSE && !(it.flags & M0_GRIP_IT_RESPONSE))
        return;
    /* The item's channel: its prev-id chains on that channel's last id
     * (each Grip-Channel has its own sequence). */
    struct ent e = {0};
    size_t off = 0;
    if (it.channel.n > 0 ? !find(&gh->ids, it.channel.p, it.channel.n, &e) : !entry(&gh->ids, &off, &e))
        return;
    uint32_t filters = e.filters;
    if (e.has_last && (it.flags & M0_GRIP_IT_PREV_ID) &&
        (e.idlen != it.prev_id.n || memcmp(e.id, it.prev_id.p, e.idlen) != 0)) {
        if (s->holds->replaying || gh->front)
            return;          /* published while the view ran (or the link was asked): its body has it */
        missed(s, c);
        return;
    }
    gh->front = 0;           /* from here on, one that does not chain was missed */
    unsigned idx = e.idx;
    if (it.flags & M0_GRIP_IT_ID)
        set_last(gh, &e, it.id.p, it.id.n);
    if (filtered(gh, filters, &it))
        return;              /* not for this subscriber (its sequence still moves on) */
    if (gh->kind == M0_GRIP_HOLD_RESPONSE) {
        answer_item(s, c, &it);
        return;
    }
    if (it.flags & M0_GRIP_IT_STREAM_CLOSE) {
        m0_griphold_finish(s, c);
        return;
    }
    /* Content filters: an item that names its own must name the
     * channel's (Pushpin drops it otherwise). */
    uint32_t want = filters & CONTENT_FILTERS;
    if ((it.flags & M0_GRIP_IT_FILTERS) && (it.filters & CONTENT_FILTERS) != want)
        return;
    if (want & M0_GRIP_F_BUILD_ID) {
        struct m0_buf out = {0};
        if (m0_griphold_render(gh, &out, it.content.p, it.content.n) == M0_OK)
            m0_hold_send(s, c, out.data, out.len);
        m0_buf_free(&out);
    } else {
        m0_hold_send(s, c, it.content.p, it.content.n);
    }
    if (gh->link.len > 0 && idx < 64) {
        /* Every channel had an item within the link's timeout: no need to
         * ask it (Pushpin's activeChannels). */
        gh->active |= 1ull << idx;
        size_t at = 0;
        struct ent x;
        unsigned k = 0;
        while (entry(&gh->ids, &at, &x))
            k++;
        if (k > 64 || gh->active == (k == 64 ? ~0ull : (1ull << k) - 1)) {
            gh->active = 0;
            gh->link_due = m0_loop_now(s->loop) + gh->link_ms;
        }
    }
}

/* ---------------------------------------------------------- lifecycle */

static void grip_enter(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    uint64_t now = m0_loop_now(s->loop);
    gh->last_ka = now;
    gh->link_due = now + gh->link_ms;
    if (gh->kind == M0_GRIP_HOLD_RESPONSE)
        gh->deadline += now;
    m0_conn_tick_at(s, c, now);          /* looked at every sweep (grip_tick), from the next */
}

static void grip_end(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    if (gh->kind == M0_GRIP_HOLD_RESPONSE && !gh->finishing) {
        answer_kept(s, c);     /* drain: the view's answer now */
        return;
    }
    m0_conn_write(s, c);
    m0_conn_shutdown(s, c);
    m0_conn_close(s, c);
}

static void grip_release(struct m0_server *s, struct m0_conn *c)
{
    (void)s;
    struct m0_griphold *gh = gh_of(c);
    m0_buf_free(&gh->ids);
    m0_buf_free(&gh->id_format);
    m0_buf_free(&gh->user);
    m0_buf_free(&gh->ka);
    m0_buf_free(&gh->kept);
    m0_buf_free(&gh->kept_body);
    m0_buf_free(&gh->link);
    m0_buf_free(&gh->waiting);
    free(gh->peer);
    free(gh->client);
    free(gh->host);
}

/* A stream's client bytes are discarded (a held request has no more
 * input); a long-poll whose connection persists keeps them, up to a
 * head's worth, as its next request. The client's EOF closes the hold. */
static void held_read(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    char sink[512];
    for (;;) {
        ssize_t n = m0_conn_recv(s, c, sink, sizeof sink);
        if (n > 0 && gh->keep) {
            if (m0_buf_unread(&c->in) + (size_t)n > s->cfg->limits.max_header_bytes) {
                m0_conn_close(s, c);      /* more than a request head while held */
                return;
            }
            m0_buf_append(&c->in, sink, (size_t)n);
            continue;
        }
        if (n > 0)
            continue;
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        m0_conn_close(s, c);
        return;
    }
}

/* Epoll events on a held GRIP connection (conn.h: event; conn.c wrote
 * its queue): a finished hold whose bytes are out ends. */
static void grip_event(struct m0_server *s, struct m0_conn *c, uint32_t ev)
{
    if (c->state != M0_CONN_HELD)
        return;
    if ((ev & EPOLLOUT) && gh_of(c)->finishing && m0_conn_queued(c) == 0) {
        done(s, c);
        return;
    }
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        held_read(s, c);
        /* The next request came after the answer went out: serve it now. */
        if (c->state == M0_CONN_HELD && gh_of(c)->finishing && m0_conn_queued(c) == 0)
            done(s, c);
    }
}

/* Periodic: a finished hold whose bytes are out closes; a long-poll past
 * its Grip-Timeout is answered with the view's response; a stream gets
 * its keep-alive (idle: after ka_ms without a write; interval: every
 * ka_ms). */
static void grip_tick(struct m0_server *s, struct m0_conn *c)
{
    if (c->state != M0_CONN_HELD)
        return;
    struct m0_griphold *gh = gh_of(c);
    uint64_t now = m0_loop_now(s->loop);
    c->deadline = now;                   /* the next sweep again (conn.h: tick) */
    if (gh->finishing) {
        if (m0_conn_queued(c) == 0)
            done(s, c);
        return;
    }
    if (gh->kind == M0_GRIP_HOLD_RESPONSE) {
        if (now >= gh->deadline)
            answer_kept(s, c);
        return;
    }
    if (gh->link.len > 0 && !gh->fetching && (gh->want || (gh->link_ms != 0 && now >= gh->link_due))) {
        m0_griphold_fetch(s, c);  /* a missed item, or no item on every channel for the link's timeout */
        if (c->state != M0_CONN_HELD || c->hold == NULL || gh->finishing)
            return;
    }
    if (gh->ka_ms == 0 || m0_conn_queued(c) != 0)
        return;
    uint64_t since = gh->ka_mode == M0_GRIP_KA_INTERVAL ? gh->last_ka : gh->base.last_write;
    if (now - since >= gh->ka_ms) {
        m0_hold_send(s, c, gh->ka.data, gh->ka.len);
        gh->last_ka = now;
    }
}

const struct m0_hold_ops m0_grip_hold_ops = {
    .proto = M0_CONN_PROTO_GRIP,
    .begin = grip_begin,
    .deliver = grip_deliver,
    .enter = grip_enter,
    .end = grip_end,
    .release = grip_release,
};

const struct m0_conn_ops m0_grip_conn_ops = {
    .name = "grip",
    .wrote = m0_hold_wrote,
    .watch = m0_hold_watch,
    .event = grip_event,
    .tick = grip_tick,
    .complete = m0_griphold_complete,
    .closing = m0_hold_release,
    .hold = &m0_grip_hold_ops,
};
