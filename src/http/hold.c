/*
 * hold.c — held connections (see hold.h; DESIGN capabilities 4 and 5;
 * WHATWG SSE §9.2): the base every hold shares (its outbox, bounded by
 * --outbox-limit, written directly or corked through a fan-out pass), the
 * loop's holds as the sink of its realtime engine (rt.h), and the SSE
 * stream, the first implementation of the hold interface.
 *
 * The engine hands each delivery over by slot; the sink queues it on the
 * slot's connection with the hold's deliver (an SSE stream: the bytes as
 * they are; a WebSocket: text frames, wshold.c). A subscriber that falls
 * more than --outbox-limit behind is doomed and closed after the batch
 * (never during it): it reconnects and resumes with Last-Event-ID, and the
 * worker's memory stays bounded.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "m0/accesslog.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/grip_item.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/metrics.h"
#include "m0/presence_loop.h"
#include "m0/rt.h"
#include "m0/sse.h"
#include "m0/target.h"
#include "m0/timer.h"

/* ---------------------------------------------------------- held sends */

uint32_t m0_hold_interest(const struct m0_conn *c, int want_out)
{
    /* An implementation may stop reading (a WebSocket whose queue is full,
     * or whose close has begun: TCP pushes back, LINGER reads the rest). */
    const struct m0_hold *h = c->hold;
    int reads = h == NULL || h->ops->reads == NULL || h->ops->reads(h);
    return (reads ? EPOLLIN | EPOLLRDHUP : 0) | (want_out ? EPOLLOUT : 0);
}

int m0_hold_flush(struct m0_server *s, struct m0_conn *c)
{
    struct m0_hold *h = c->hold;
    while (m0_buf_unread(&h->outbox) > 0) {
        ssize_t w = send(c->fd, h->outbox.data + h->outbox.off, m0_buf_unread(&h->outbox),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w == -1) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                m0_conn_interest(s, c, m0_hold_interest(c, 1));
                return M0_AGAIN;
            }
            return M0_ERR;
        }
        /* Which bytes went is not tracked: count the runner's last, so
         * the limit is never applied to them. */
        size_t other = m0_buf_unread(&h->outbox) - h->owed;
        m0_buf_consume(&h->outbox, (size_t)w);
        h->sent += (uint64_t)w;
        if ((size_t)w > other)
            h->owed -= (size_t)w - other;
        h->allowance = h->allowance > (size_t)w ? h->allowance - (size_t)w : 0;
        h->last_write = m0_loop_now(s->loop);
        if (h->ops->written != NULL)
            h->ops->written(s, c);      /* a runner that owns the socket may send again */
    }
    h->allowance = 0;
    h->owed = 0;
    if (h->outbox.cap > 16 * 1024)
        m0_buf_free(&h->outbox);     /* a burst's buffer is not kept idle */
    m0_conn_interest(s, c, m0_hold_interest(c, 0));
    return M0_OK;
}

/* A subscriber more than --outbox-limit behind: counted, logged at most
 * once a second, closed after the batch. */
static void too_slow(struct m0_server *s, struct m0_conn *c)
{
    struct m0_holds *hs = s->holds;
    m0_rt_counters(s->rt)->slow_closed++;
    if (m0_loop_now(s->loop) >= hs->next_slow_log) {
        m0_warn("closing a held stream more than %zu bytes behind (slow subscriber)", hs->outbox_limit);
        hs->next_slow_log = m0_loop_now(s->loop) + 1000;
    }
    m0_conn_doom(s, c);
}

void m0_hold_send(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    struct m0_holds *hs = s->holds;
    struct m0_hold *h = c->hold;
    if ((c->flags & C_DOOMED) || h == NULL)
        return;
    if (c->state == M0_CONN_HELD && m0_buf_unread(&h->outbox) == 0 && !hs->corking) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            h->sent += (uint64_t)w;
        if (w == (ssize_t)n) {
            h->last_write = m0_loop_now(s->loop);
            return;
        }
        if (w == -1 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            m0_conn_doom(s, c);
            return;
        }
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            h->last_write = m0_loop_now(s->loop);
        }
        m0_buf_append(&h->outbox, p, n);
        if (hs->owing)
            h->owed += n;
        m0_conn_interest(s, c, m0_hold_interest(c, 1));
        return;
    }
    /* A resume's replay may exceed the limit by the journal's size: it is
     * bounded by --replay-bytes, and refusing it would only make the client
     * reconnect and ask again. A runner's own bytes are bounded by its
     * credit window. Only the rest counts against the limit. */
    if (hs->owing) {
        h->owed += n;
    } else if (hs->replaying) {
        h->allowance += n;
    } else if (m0_buf_unread(&h->outbox) - h->owed + n > hs->outbox_limit + h->allowance) {
        too_slow(s, c);
        return;
    }
    m0_buf_append(&h->outbox, p, n);
    if (hs->corking && c->state == M0_CONN_HELD && !h->corked) {
        h->corked = 1;
        hs->corked[hs->ncorked++] = m0_conn_slot(s, c);
    }
}

void m0_hold_deliver(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    struct m0_holds *hs = s->holds;
    if (!hs->corking || !hs->direct || c->hold == NULL || m0_buf_unread(&c->hold->outbox) > 0) {
        m0_hold_send(s, c, p, n);
        return;
    }
    /* Unqueued, as outside a pass: a short write queues the rest and arms
     * EPOLLOUT, an error dooms (closed at the pass's end). */
    hs->corking = 0;
    m0_hold_send(s, c, p, n);
    hs->corking = 1;
    hs->ndirect++;
}

void m0_hold_send_owed(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    s->holds->owing = 1;
    m0_hold_send(s, c, p, n);
    s->holds->owing = 0;
}

/* ----------------------------------------------- the sink of the engine */

static void sink_deliver(void *ctx, uint32_t slot, const char *p, size_t n, int replay)
{
    struct m0_server *s = ctx;
    struct m0_conn *c = m0_conn_of(s, slot);
    if (c->hold == NULL)
        return;
    int was = s->holds->replaying;
    s->holds->replaying = replay;
    c->hold->ops->deliver(s, c, p, n);
    s->holds->replaying = was;
}

static void sink_cork(void *ctx, int once)
{
    struct m0_server *s = ctx;
    s->holds->corking = 1;
    s->holds->direct = once;
    s->holds->ndirect = 0;
}

static unsigned sink_corked(const void *ctx)
{
    const struct m0_server *s = ctx;
    return s->holds->ncorked + s->holds->ndirect;
}

/* The end of a batch: one write per connection a corked pass touched, then
 * the closes the deliveries doomed. */
static void sink_flush(void *ctx)
{
    struct m0_server *s = ctx;
    struct m0_holds *hs = s->holds;
    if (hs->corking) {
        hs->corking = 0;
        hs->direct = 0;
        for (uint32_t i = 0; i < hs->ncorked; i++) {
            struct m0_conn *c = m0_conn_of(s, hs->corked[i]);
            struct m0_hold *h = c->hold;
            if (h == NULL || !h->corked)
                continue;
            h->corked = 0;
            if (c->flags & C_DOOMED)
                continue;
            int rc = m0_hold_flush(s, c);
            if (rc == M0_ERR)
                m0_conn_doom(s, c);
            else if (rc == M0_OK)
                m0_buf_free(&h->outbox);     /* written: an idle connection keeps no buffer */
        }
        hs->ncorked = 0;
    }
    m0_conn_close_doomed(s);
}

/* A hold whose resume the source answers: still the same connection, not
 * doomed, its head written or on its way. */
static int sink_awaiting(void *ctx, uint32_t slot, uint32_t gen)
{
    struct m0_server *s = ctx;
    const struct m0_conn *c = m0_conn_at(s, slot);
    if (c == NULL || c->gen != gen || c->hold == NULL || (c->flags & C_DOOMED))
        return 0;
    return c->state == M0_CONN_HELD || c->state == M0_CONN_WRITE || c->state == M0_CONN_RUN;
}

void m0_holds_init(struct m0_server *s)
{
    const struct m0_config *cfg = s->cfg;
    struct m0_holds *hs = m0_xmalloc(sizeof *hs);
    memset(hs, 0, sizeof *hs);
    hs->corked = m0_xmalloc(s->nconns * sizeof *hs->corked);
    hs->heartbeat_ms = (uint64_t)(cfg->heartbeat * 1000);
    hs->outbox_limit = (size_t)cfg->outbox_limit;
    s->holds = hs;
    const struct m0_rt_sink sink = {.ctx = s, .deliver = sink_deliver, .cork = sink_cork, .corked = sink_corked,
                                    .flush = sink_flush, .awaiting = sink_awaiting};
    s->rt = m0_rt_new(s->loop, cfg, s->nconns, &sink);
    m0_rt_watch(s->rt, &m0_presence_loop_watch, m0_presence_loop_new(cfg, s->nconns));   /* issue 32 */
}

void m0_holds_free(struct m0_server *s)
{
    m0_rt_free(s->rt);
    s->rt = NULL;
    if (s->holds != NULL)
        free(s->holds->corked);
    free(s->holds);
    s->holds = NULL;
}

/* --------------------------------------------------------------- holds */

int m0_hold_subscribe(struct m0_server *s, struct m0_conn *c, const struct m0_hold_ops *ops)
{
    struct m0_job *job = c->job;
    /* A worker on its way out holds nothing new (its bus is about to be its
     * replacement's): the caller's 503 sends the client back. */
    if (atomic_load(&s->draining))
        return M0_ERR;
    /* A channel needs the bus (or the broker) being read; a socket an
     * asynchronous runner accepted without one needs neither. */
    int subscribe = job->head.channel_len > 0;
    if (subscribe && !m0_rt_reading(s->rt))
        return M0_ERR;
    struct m0_hold *h = ops->begin(s, c);
    if (h == NULL)
        return M0_OK;        /* refused: job->resp is the refusal, nothing held */
    h->ops = ops;
    h->target = job->target;
    c->hold = h;
    if (!subscribe)
        return M0_OK;
    m0_rt_presence(s->rt, m0_conn_slot(s, c), job->head.presence, job->head.presence_len);   /* issue 32 */
    if (m0_rt_subscribe(s->rt, m0_conn_slot(s, c), c->gen, m0_head_channel(&job->head), job->head.channel_len,
                        job->hold_last_id, job->hold_start) != M0_OK) {
        if (h->ops->release != NULL)
            h->ops->release(s, c);
        m0_buf_free(&h->outbox);
        free(h);
        c->hold = NULL;
        return M0_ERR;
    }
    return M0_OK;
}

/* --access-log: what the hold's line needs once the request is gone (it
 * is written when the hold ends: m0_hold_release). A long-poll may have
 * been answered already (by an item replayed before its head went out):
 * its status stays the answer's. */
static void keep_line(struct m0_conn *c)
{
    struct m0_job *job = c->job;
    struct m0_hold *h = c->hold;
    m0_job_keep_access(job);             /* unless the request was kept before a rewrite */
    h->alog = job->alog;
    job->alog = NULL;
    m0_access_keep_head(h->alog, job->head.lines.data, job->head.lines.len);
    if (h->log_status == 0)
        h->log_status = job->resp.status;
    h->sent += job->resp.body_bytes;     /* the view's body, out with the head */
}

void m0_hold_answered(struct m0_conn *c, int code, size_t head_len)
{
    if (c->hold != NULL) {
        c->hold->log_status = code;
        c->hold->heads += head_len;
    }
}

void m0_hold_enter(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    struct m0_hold *h = c->hold;
    if (s->cfg->access_log)
        keep_line(c);
    if (atomic_load(&s->draining)) {       /* head out, nothing more will come: end it */
        m0_conn_close(s, c);
        return;
    }
    m0_metrics_request(s->mx, job->mx_mount, job->req.method, job->resp.status, 0, 1);
    m0_conn_set_state(s, c, M0_CONN_HELD);
    c->proto = h->ops->proto;            /* from now on the hold's protocol answers for it */
    h->last_write = m0_loop_now(s->loop);
    struct m0_rt_stats *st = m0_rt_counters(s->rt);
    st->held++;
    if (h->target != NULL)
        m0_target_stats_of(&s->tstats, h->target)->held++;
    int inbound = h->ops->proto == M0_CONN_PROTO_WS;
    if (inbound)
        st->websockets++;
    /* Everything per-request is released: a held stream costs the slot,
     * its hold, a registry link and no Python object; the job goes back to
     * the loop's cache at the end (a WebSocket's message takes one again). */
    m0_req_free(&job->req);
    m0_req_init(&job->req);
    m0_http_free(&c->job->http);
    /* A socket's early frames stay (they are read next), and so do a
     * GRIP hold's pipelined bytes (a long-poll's next request). */
    if (!(inbound || h->ops->proto == M0_CONN_PROTO_GRIP) || m0_buf_unread(&c->in) == 0)
        m0_buf_free(&c->in);
    m0_buf_free(&c->out);
    m0_resp_reset(&job->resp);
    m0_buf_free(&job->resp.out);
    m0_head_free(&job->head);
    if (m0_hold_flush(s, c) == M0_ERR) {
        m0_conn_close(s, c);
        return;
    }
    if (h->ops->enter != NULL)
        h->ops->enter(s, c);
    if (c->state == M0_CONN_HELD)
        m0_conn_job_put(s, c);       /* unless a message took it to a runner, or it is pinned */
}

void m0_hold_complete(struct m0_server *s, struct m0_conn *c, const struct m0_completion *done)
{
    if (c->hold != NULL && c->hold->ops->complete != NULL)
        c->hold->ops->complete(s, c, done);
}

/* The hold's one line (keep_line): as nginx logs a request when it ends. */
static void log_line(struct m0_conn *c, struct m0_hold *h)
{
    uint64_t now_us = m0_clock_us();
    struct m0_access a = {
        .status = h->log_status,
        .bytes = h->sent > h->heads ? h->sent - h->heads : 0,
        .duration_us = now_us > c->started_us ? now_us - c->started_us : 0,
    };
    m0_access_kept_view(h->alog, &a);
    m0_access_log(&a);
    m0_access_kept_free(h->alog);
    h->alog = NULL;
}

void m0_hold_release(struct m0_server *s, struct m0_conn *c)
{
    struct m0_hold *h = c->hold;
    if (h == NULL)
        return;
    if (h->alog != NULL)
        log_line(c, h);
    m0_rt_unsubscribe(s->rt, m0_conn_slot(s, c));
    if (c->state == M0_CONN_HELD) {
        struct m0_rt_stats *st = m0_rt_counters(s->rt);
        st->held--;
        if (h->target != NULL)
            m0_target_stats_of(&s->tstats, h->target)->held--;
        if (h->ops->proto == M0_CONN_PROTO_WS)
            st->websockets--;
    }
    if (h->ops->release != NULL)
        h->ops->release(s, c);
    m0_buf_free(&h->outbox);
    free(h);
    c->hold = NULL;
}

static void end_one(struct m0_server *s, struct m0_conn *c)
{
    c->hold->ops->end(s, c);
}

void m0_hold_end_all(struct m0_server *s)
{
    m0_conn_each_held(s, end_one);
}

/* ------------------------------------------------------------ SSE */

static struct m0_hold *sse_begin(struct m0_server *s, struct m0_conn *c)
{
    (void)s;
    (void)c;
    struct m0_hold *h = m0_xmalloc(sizeof *h);
    memset(h, 0, sizeof *h);
    return h;
}

static void sse_deliver(struct m0_server *s, struct m0_conn *c, const char *frame, size_t n)
{
    if (m0_grip_is_item(frame, n))
        return;              /* a GRIP item on the channel: for GRIP and WebSocket holds (grip_item.h) */
    m0_hold_deliver(s, c, frame, n);
}

/* Drain: what is queued, then a FIN (the client reconnects and resumes). */
static void sse_end(struct m0_server *s, struct m0_conn *c)
{
    m0_hold_flush(s, c);
    shutdown(c->fd, SHUT_WR);
    m0_conn_close(s, c);
}

static void held_read(struct m0_server *s, struct m0_conn *c)
{
    char sink[512];
    for (;;) {
        ssize_t n = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n > 0)
            continue;      /* an event stream has no inbound traffic: discard */
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n == -1 && errno == EINTR)
            continue;
        m0_conn_close(s, c);   /* EOF or error: the client left; unsubscribe now */
        return;
    }
}

static void sse_event(struct m0_server *s, struct m0_conn *c, uint32_t ev)
{
    if (c->state != M0_CONN_HELD)
        return;
    if ((ev & EPOLLOUT) && m0_hold_flush(s, c) == M0_ERR) {
        m0_conn_close(s, c);
        return;
    }
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        held_read(s, c);
}

/* Periodic: a heartbeat comment on an idle stream. */
static void sse_tick(struct m0_server *s, struct m0_conn *c)
{
    struct m0_holds *hs = s->holds;
    uint64_t now = m0_loop_now(s->loop);
    if (c->state != M0_CONN_HELD)
        return;
    if (hs->heartbeat_ms == 0) {
        c->deadline = now + 60000;        /* nothing to send: the wheel just keeps it */
        return;
    }
    if (now - c->hold->last_write >= hs->heartbeat_ms && m0_buf_unread(&c->hold->outbox) == 0) {
        /* A comment line: ignored by EventSource, keeps proxies from timing
         * out an idle stream (WHATWG SSE §9.2.7). */
        m0_hold_send(s, c, M0_SSE_HEARTBEAT, sizeof M0_SSE_HEARTBEAT - 1);
        c->hold->last_write = now;
    }
    /* A heartbeat interval after the last write (a stream written to
     * meanwhile is looked at again then, not moved on every write). */
    c->deadline = c->hold->last_write + hs->heartbeat_ms;
}

const struct m0_hold_ops m0_sse_hold_ops = {
    .proto = M0_CONN_PROTO_SSE,
    .begin = sse_begin,
    .deliver = sse_deliver,
    .end = sse_end,
};

const struct m0_conn_ops m0_sse_conn_ops = {
    .name = "sse",
    .event = sse_event,
    .tick = sse_tick,
    .closing = m0_hold_release,
    .hold = &m0_sse_hold_ops,
};
