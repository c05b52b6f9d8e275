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
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>

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

#define CONTENT_FILTERS (M0_GRIP_F_BUILD_ID | M0_GRIP_F_VAR_SUBST)

struct m0_griphold {
    struct m0_hold base;            /* the accounting, the target (hold.h) */
    uint8_t kind;                   /* M0_GRIP_HOLD_STREAM or M0_GRIP_HOLD_RESPONSE */
    uint8_t finishing;              /* answered or closed: end once the queue is out */
    uint8_t ka_mode;                /* enum m0_grip_ka_mode */
    uint8_t keep;                   /* response hold: the request lets the connection persist */
    uint8_t http10;                 /* response hold: an HTTP/1.0 request (keep-alive is said) */
    uint16_t peer_port;             /* keep: the client's port */
    char *peer;                     /* keep: the client's address (the job goes back while held) */
    uint32_t filters;               /* the first channel's M0_GRIP_F_* (for the view's body) */
    /* Every channel, each subscribed: entries of (u8 has a last id, u32
     * filters, u16 name length, name, u16 id length, id), the id its
     * prev-id and then the last item's id it saw (for prev-id chaining
     * and id_format). */
    struct m0_buf ids;
    struct m0_buf id_format;        /* the id_format meta (build-id), empty when none */
    struct m0_buf user;             /* the user meta (skip-self, skip-users), empty when none */
    struct m0_buf ka;               /* keep-alive bytes */
    uint64_t ka_ms, last_ka;
    int kept_status;                /* response hold: the view's status (Grip-Status's) */
    struct m0_buf kept;             /* response hold: the view's status line and fields */
    struct m0_buf kept_body;        /* response hold: the view's body */
    uint64_t deadline;              /* response hold: loop clock of Grip-Timeout */
};

static struct m0_griphold *gh_of(struct m0_conn *c)
{
    return (struct m0_griphold *)c->hold;
}

/* ------------------------------------------------------------ the ids */

/* One channel of the hold, as read from gh->ids. */
struct ent {
    const char *name, *id;
    size_t nlen, idlen;
    uint8_t has_last;               /* the channel has a last id (its prev-id, then items' ids) */
    uint32_t filters;               /* its M0_GRIP_F_* */
    size_t at, end;                 /* its bytes in gh->ids */
};

static void put_entry(struct m0_buf *b, const char *name, size_t nlen, const char *id, size_t idlen, int has_last,
                      uint32_t filters)
{
    uint16_t n16 = (uint16_t)nlen, i16 = (uint16_t)idlen;
    uint8_t h8 = (uint8_t)has_last;
    m0_buf_append(b, &h8, 1);
    m0_buf_append(b, &filters, 4);
    m0_buf_append(b, &n16, 2);
    m0_buf_append(b, name, nlen);
    m0_buf_append(b, &i16, 2);
    m0_buf_append(b, id, idlen);
}

/* The entry at *off into e; *off moves past it. Returns 0 past the last. */
static int entry(const struct m0_buf *b, size_t *off, struct ent *e)
{
    if (*off + 7 > b->len)
        return 0;
    const char *p = b->data + *off;
    uint16_t n16, i16;
    e->at = *off;
    e->has_last = (uint8_t)p[0];
    memcpy(&e->filters, p + 1, 4);
    memcpy(&n16, p + 5, 2);
    e->name = p + 7;
    e->nlen = n16;
    memcpy(&i16, p + 7 + n16, 2);
    e->id = p + 9 + n16;
    e->idlen = i16;
    *off += 9u + n16 + i16;
    e->end = *off;
    return 1;
}

/* The hold's channel named name (nlen bytes) into e. 0: not one of them. */
static int find(const struct m0_buf *b, const char *name, size_t nlen, struct ent *e)
{
    size_t off = 0;
    while (entry(b, &off, e)) {
        if (e->nlen == nlen && memcmp(e->name, name, nlen) == 0)
            return 1;
    }
    return 0;
}

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
static int render(struct m0_griphold *gh, struct m0_buf *out, const char *p, size_t n)
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
    gh->filters = g->channels[0].filters;
    for (unsigned i = 0; i < g->nchannels; i++) {
        const struct m0_grip_channel *ch = &g->channels[i];
        struct ent e;
        if (find(&gh->ids, m0_grip_str(g, ch->name), ch->name.len, &e))
            continue;                   /* a repeat: its first mention counts */
        put_entry(&gh->ids, m0_grip_str(g, ch->name), ch->name.len, m0_grip_str(g, ch->prev_id), ch->prev_id.len,
                  ch->has_prev_id, ch->filters);
    }
    size_t flen = 0;
    const char *fmt = m0_grip_meta_get(g, "id_format", 9, &flen);
    if (fmt != NULL && (gh->filters & M0_GRIP_F_BUILD_ID))
        m0_buf_append(&gh->id_format, fmt, flen);
    size_t ulen = 0;
    const char *user = m0_grip_meta_get(g, "user", 4, &ulen);
    if (user != NULL)
        m0_buf_append(&gh->user, user, ulen);
    if (g->ka_mode != M0_GRIP_KA_NONE && gh->kind == M0_GRIP_HOLD_STREAM) {
        gh->ka_mode = (uint8_t)g->ka_mode;
        m0_buf_append(&gh->ka, m0_grip_str(g, g->ka_data), g->ka_data.len);
        gh->ka_ms = (uint64_t)g->ka_timeout * 1000;
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
            if (render(gh, &nb, p + head, m0_buf_unread(out) - head) == M0_OK) {
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
static void finish(struct m0_server *s, struct m0_conn *c)
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
    finish(s, c);
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

/* An item was missed (a gap notice, or an item that does not chain). */
static void missed(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    if (gh->kind == M0_GRIP_HOLD_RESPONSE)
        answer_kept(s, c);     /* the client asks again */
    else
        finish(s, c);        /* the client reconnects with Last-Event-ID */
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
    struct m0_grip_item it;
    if (m0_grip_item_decode(ev->frame, ev->n, &it) != M0_OK)
        return;
    if (gh->kind == M0_GRIP_HOLD_STREAM && !(it.flags & (M0_GRIP_IT_STREAM | M0_GRIP_IT_STREAM_CLOSE)))
        return;
    if (gh->kind == M0_GRIP_HOLD_RESPONSE && !(it.flags & M0_GRIP_IT_RESPONSE))
        return;
    /* The item's channel: its prev-id chains on that channel's last id
     * (each Grip-Channel has its own sequence). */
    struct ent e;
    size_t off = 0;
    if (it.channel.n > 0 ? !find(&gh->ids, it.channel.p, it.channel.n, &e) : !entry(&gh->ids, &off, &e))
        return;
    uint32_t filters = e.filters;
    if (e.has_last && (it.flags & M0_GRIP_IT_PREV_ID) &&
        (e.idlen != it.prev_id.n || memcmp(e.id, it.prev_id.p, e.idlen) != 0)) {
        if (s->holds->replaying)
            return;          /* published while the view ran: its body has it */
        missed(s, c);
        return;
    }
    if (it.flags & M0_GRIP_IT_ID)
        set_last(gh, &e, it.id.p, it.id.n);
    if (filtered(gh, filters, &it))
        return;              /* not for this subscriber (its sequence still moves on) */
    if (gh->kind == M0_GRIP_HOLD_RESPONSE) {
        answer_item(s, c, &it);
        return;
    }
    if (it.flags & M0_GRIP_IT_STREAM_CLOSE) {
        finish(s, c);
        return;
    }
    /* Content filters: an item that names its own must name the
     * channel's (Pushpin drops it otherwise). */
    uint32_t want = filters & CONTENT_FILTERS;
    if ((it.flags & M0_GRIP_IT_FILTERS) && (it.filters & CONTENT_FILTERS) != want)
        return;
    if (want & M0_GRIP_F_BUILD_ID) {
        struct m0_buf out = {0};
        if (render(gh, &out, it.content.p, it.content.n) == M0_OK)
            m0_hold_send(s, c, out.data, out.len);
        m0_buf_free(&out);
    } else {
        m0_hold_send(s, c, it.content.p, it.content.n);
    }
}

/* ---------------------------------------------------------- lifecycle */

static void grip_enter(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    uint64_t now = m0_loop_now(s->loop);
    gh->last_ka = now;
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
    free(gh->peer);
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
    .closing = m0_hold_release,
    .hold = &m0_grip_hold_ops,
};
