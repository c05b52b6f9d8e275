/*
 * hold.c — held connections (see hold.h; DESIGN capabilities 4 and 5;
 * WHATWG SSE §9.2): the base every hold shares (its sends through the
 * connection's one output queue, with the accounting of --outbox-limit,
 * written directly or corked through a fan-out pass), the loop's holds as
 * the sink of its realtime engine (rt.h), and the SSE stream, the first
 * implementation of the hold interface.
 *
 * The engine hands each delivery over by slot; the sink queues it on the
 * slot's connection with the hold's deliver (an SSE stream: the bytes as
 * they are; a WebSocket: text frames, wshold.c). A subscriber that falls
 * more than --outbox-limit behind is doomed and closed after the batch
 * (never during it): it reconnects and resumes with Last-Event-ID, and the
 * worker's memory stays bounded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "m0/accesslog.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/grant.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/metrics.h"
#include "m0/rt.h"
#include "m0/sse.h"
#include "m0/target.h"
#include "m0/timer.h"

/* ---------------------------------------------------------- held sends */

/* The connection's input while it is held (conn.h: watch): read, unless
 * the implementation stops reading (a WebSocket whose queue is full, or
 * whose close has begun: TCP pushes back, LINGER reads the rest). */
uint32_t m0_hold_watch(struct m0_server *s, const struct m0_conn *c)
{
    (void)s;
    const struct m0_hold *h = c->hold;
    int reads = h == NULL || h->ops->reads == NULL || h->ops->reads(h);
    return reads ? EPOLLIN | EPOLLRDHUP : 0;
}

/* n bytes of the connection's queue went out (conn.h: wrote): the hold's
 * accounting. Which bytes went is not tracked: the runner's own are
 * counted last, so the limit is never applied to them. */
void m0_hold_wrote(struct m0_server *s, struct m0_conn *c, size_t n)
{
    struct m0_hold *h = c->hold;
    if (h == NULL)
        return;
    size_t left = m0_conn_queued(c);
    size_t other = left + n - h->owed;
    if (n > other)
        h->owed -= n - other;
    h->sent += (uint64_t)n;
    h->allowance = h->allowance > n ? h->allowance - n : 0;
    h->last_write = m0_loop_now(s->loop);
    if (left == 0)
        h->allowance = h->owed = 0;
    if (h->ops->written != NULL)
        h->ops->written(s, c);      /* a runner that owns the socket may send again */
}

/* The bytes waiting for c: its queue once HELD; before, what waits for
 * the head to go out. */
static size_t queued(const struct m0_conn *c, const struct m0_hold *h)
{
    if (c->state == M0_CONN_HELD)
        return m0_conn_queued(c);
    return h->early != NULL ? m0_buf_unread(h->early) : 0;
}

/* A subscriber more than --outbox-limit behind: counted, closed after the
 * batch (conn.h: the slow-client policy). */
static void too_slow(struct m0_server *s, struct m0_conn *c)
{
    m0_rt_counters(s->rt)->slow_closed++;
    m0_conn_too_slow(s, c, "a held stream more than --outbox-limit behind (slow subscriber)");
}

void m0_hold_send(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    struct m0_holds *hs = s->holds;
    struct m0_hold *h = c->hold;
    if ((c->flags & C_DOOMED) || h == NULL)
        return;
    if (c->state == M0_CONN_HELD && m0_conn_queued(c) == 0 && !hs->corking) {
        ssize_t w = m0_conn_send_now(s, c, p, n);
        if (w == -1) {
            m0_conn_doom(s, c);
            return;
        }
        if (w > 0) {
            h->sent += (uint64_t)w;
            h->last_write = m0_loop_now(s->loop);
        }
        if (w == (ssize_t)n)
            return;
        p += w;
        n -= (size_t)w;
        m0_conn_queue(c, p, n);
        if (hs->owing)
            h->owed += n;
        m0_conn_rearm(s, c);           /* EPOLLOUT for the rest */
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
    } else if (queued(c, h) - h->owed + n > hs->outbox_limit + h->allowance) {
        too_slow(s, c);
        return;
    }
    if (c->state != M0_CONN_HELD) {
        /* The response's head (and a streaming view's body) is still going
         * out of the queue: these follow it once it is out (m0_hold_enter). */
        if (h->early == NULL) {
            h->early = m0_xmalloc(sizeof *h->early);
            memset(h->early, 0, sizeof *h->early);
        }
        m0_buf_append(h->early, p, n);
        return;
    }
    m0_conn_queue(c, p, n);
    if (hs->corking && !h->corked) {
        h->corked = 1;
        hs->corked[hs->ncorked++] = m0_conn_slot(s, c);
    }
}

void m0_hold_deliver(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    struct m0_holds *hs = s->holds;
    if (!hs->corking || !hs->direct || c->hold == NULL || m0_conn_queued(c) > 0) {
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

static void sink_deliver(void *ctx, uint32_t slot, const struct m0_rt_event *ev)
{
    struct m0_server *s = ctx;
    struct m0_conn *c = m0_conn_of(s, slot);
    if (c->hold == NULL)
        return;
    int was = s->holds->replaying;
    s->holds->replaying = ev->replay;
    c->hold->ops->deliver(s, c, ev);
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
            int rc = m0_conn_write(s, c);
            if (rc == M0_ERR)
                m0_conn_doom(s, c);
            else if (rc == M0_OK)
                m0_buf_free(&c->out);     /* written: an idle connection keeps no buffer */
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
    hs->corked = m0_xmalloc(s->slots.n * sizeof *hs->corked);
    hs->heartbeat_ms = (uint64_t)(cfg->heartbeat * 1000);
    hs->refresh_ms = (uint64_t)((cfg->grant_refresh < 0 ? M0_GRANT_REFRESH_DEFAULT : cfg->grant_refresh) * 1000);
    hs->outbox_limit = (size_t)cfg->outbox_limit;
    s->holds = hs;
    const struct m0_rt_sink sink = {.ctx = s, .deliver = sink_deliver, .cork = sink_cork, .corked = sink_corked,
                                    .flush = sink_flush, .awaiting = sink_awaiting};
    s->rt = m0_rt_new(s->loop, cfg, s->slots.n, &sink);
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

/* ------------------------------------------------------ a grant's end */

/* The grant's exp (wall clock seconds) as the loop clock's moments: the
 * end at exp, the notice --grant-refresh before it — at most half the
 * grant's remaining life before it, so a short grant still gets its notice
 * with time to act on it. A grant already past exp (inside jwt.h's skew
 * leeway) gets its notice and its end at the first tick. */
static void grant_arm(struct m0_server *s, struct m0_hold *h, int64_t exp)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (exp - (int64_t)ts.tv_sec > (int64_t)100 * 366 * 86400)
        return;                               /* a century away: never, and no overflow */
    int64_t left = exp * 1000 - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    if (left < 0)
        left = 0;
    uint64_t lead = (uint64_t)left / 2;
    if (s->holds->refresh_ms < lead)
        lead = s->holds->refresh_ms;
    h->exp = exp;
    h->expire_at = m0_loop_now(s->loop) + (uint64_t)left + 1;     /* never 0 */
    h->refresh_at = s->holds->refresh_ms != 0 ? h->expire_at - lead : 0;
}

int m0_hold_grant_tick(struct m0_server *s, struct m0_conn *c)
{
    struct m0_hold *h = c->hold;
    if (h == NULL || h->expire_at == 0 || c->state != M0_CONN_HELD || (c->flags & C_DOOMED))
        return 0;
    uint64_t now = m0_loop_now(s->loop);
    if (h->refresh_at != 0 && now >= h->refresh_at) {
        h->refresh_at = 0;
        h->ops->refresh(s, c, h->exp);
        if (c->hold != h || c->state != M0_CONN_HELD || (c->flags & C_DOOMED))
            return 1;                         /* too slow for the notice: closed after the sweep */
    }
    if (now < h->expire_at)
        return 0;
    h->expire_at = 0;
    m0_debug("slot %u: the grant expired (exp %lld): ending the stream", m0_conn_slot(s, c), (long long)h->exp);
    h->ops->expire(s, c);
    return 1;
}

void m0_hold_grant_due(struct m0_server *s, struct m0_conn *c)
{
    const struct m0_hold *h = c->hold;
    if (h == NULL || h->expire_at == 0 || c->state != M0_CONN_HELD)
        return;
    uint64_t next = h->refresh_at != 0 ? h->refresh_at : h->expire_at;
    if (next < c->deadline)
        m0_conn_tick_at(s, c, next);
}

/* --------------------------------------------------------------- holds */

/* The base's own memory (an implementation's release freed the rest). */
static void hold_free(struct m0_hold *h)
{
    if (h->early != NULL) {
        m0_buf_free(h->early);
        free(h->early);
    }
    free(h);
}

int m0_hold_subscribe(struct m0_server *s, struct m0_conn *c, const struct m0_hold_ops *ops)
{
    struct m0_job *job = c->job;
    /* A worker on its way out holds nothing new (its bus is about to be its
     * replacement's): the caller's 503 sends the client back. */
    if (atomic_load(&s->life.draining))
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
    if (job->grant_exp != 0 && ops->expire != NULL)
        grant_arm(s, h, job->grant_exp);
    if (!subscribe)
        return M0_OK;
    /* Whom the hold counts for in occupancy and presence (a grant's sub, a
     * view's M0-Presence): the engine's watcher hears it (rt.h). */
    m0_rt_presence(s->rt, m0_conn_slot(s, c), job->head.presence, job->head.presence_len);
    if (m0_rt_subscribe(s->rt, m0_conn_slot(s, c), c->gen, m0_head_channel(&job->head), job->head.channel_len,
                        job->hold_last_id, job->hold_start) != M0_OK) {
        if (h->ops->release != NULL)
            h->ops->release(s, c);
        hold_free(h);
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
    if (atomic_load(&s->life.draining)) {       /* head out, nothing more will come: end it */
        m0_conn_close(s, c);
        return;
    }
    m0_metrics_request(m0_metrics_block(), job->mx_mount, job->req.method, job->resp.status, 0, 1);
    m0_conn_set_state(s, c, M0_CONN_HELD);
    c->proto = h->ops->proto;            /* from now on the hold's protocol answers for it */
    h->last_write = m0_loop_now(s->loop);
    m0_hold_grant_due(s, c);             /* a grant's notice or end before the first heartbeat */
    struct m0_rt_stats *st = m0_rt_counters(s->rt);
    st->held++;
    if (h->target != NULL)
        m0_target_stats_of(&s->run.tstats, h->target)->held++;
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
    m0_resp_reset(&job->resp);
    m0_buf_free(&job->resp.out);
    m0_head_free(&job->head);
    /* The response is out: the connection's queue is the hold's now, and
     * what came for it meanwhile goes first. */
    m0_buf_free(&c->out);
    if (h->early != NULL) {
        c->out = *h->early;
        free(h->early);
        h->early = NULL;
    }
    if (m0_conn_write(s, c) == M0_ERR) {
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
            m0_target_stats_of(&s->run.tstats, h->target)->held--;
        if (h->ops->proto == M0_CONN_PROTO_WS)
            st->websockets--;
    }
    if (h->ops->release != NULL)
        h->ops->release(s, c);
    hold_free(h);
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

static void sse_deliver(struct m0_server *s, struct m0_conn *c, const struct m0_rt_event *ev)
{
    if (ev->kind == M0_RT_GRIP)
        return;              /* a GRIP item on the channel: for GRIP and WebSocket holds (grip_item.h) */
    m0_hold_deliver(s, c, ev->frame, ev->n);
}

/* Drain: what is queued, then a FIN (the client reconnects and resumes). */
static void sse_end(struct m0_server *s, struct m0_conn *c)
{
    m0_conn_write(s, c);
    m0_conn_shutdown(s, c);
    m0_conn_close(s, c);
}

static void held_read(struct m0_server *s, struct m0_conn *c)
{
    char sink[512];
    for (;;) {
        ssize_t n = m0_conn_recv(s, c, sink, sizeof sink);
        if (n > 0)
            continue;      /* an event stream has no inbound traffic: discard */
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        m0_conn_close(s, c);   /* EOF or error: the client left; unsubscribe now */
        return;
    }
}

/* Epoll events on a held stream (conn.h: event; conn.c wrote its queue). */
static void sse_event(struct m0_server *s, struct m0_conn *c, uint32_t ev)
{
    if (c->state != M0_CONN_HELD)
        return;
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        held_read(s, c);
}

/* A grant's m0-refresh notice (docs/realtime.md "Expiry and refresh"): an event with
 * no id, so the stream's Last-Event-ID stays the last real event's. */
static void sse_refresh(struct m0_server *s, struct m0_conn *c, int64_t exp)
{
    char ev[96];
    int n = snprintf(ev, sizeof ev, "event: m0-refresh\ndata: {\"exp\": %lld}\n\n", (long long)exp);
    m0_hold_send(s, c, ev, (size_t)n);
}

/* A heartbeat comment on an idle stream. */
static void sse_heartbeat(struct m0_server *s, struct m0_conn *c)
{
    struct m0_holds *hs = s->holds;
    uint64_t now = m0_loop_now(s->loop);
    if (c->state != M0_CONN_HELD)
        return;
    if (hs->heartbeat_ms == 0) {
        c->deadline = now + 60000;        /* nothing to send: the wheel just keeps it */
        return;
    }
    if (now - c->hold->last_write >= hs->heartbeat_ms && m0_conn_queued(c) == 0) {
        /* A comment line: ignored by EventSource, keeps proxies from timing
         * out an idle stream (WHATWG SSE §9.2.7). */
        m0_hold_send(s, c, M0_SSE_HEARTBEAT, sizeof M0_SSE_HEARTBEAT - 1);
        c->hold->last_write = now;
    }
    /* A heartbeat interval after the last write (a stream written to
     * meanwhile is looked at again then, not moved on every write). */
    c->deadline = c->hold->last_write + hs->heartbeat_ms;
}

/* Periodic (conn.h: tick): a grant's notice and end, heartbeats. */
static void sse_tick(struct m0_server *s, struct m0_conn *c)
{
    if (m0_hold_grant_tick(s, c))
        return;
    sse_heartbeat(s, c);
    m0_hold_grant_due(s, c);
}

const struct m0_hold_ops m0_sse_hold_ops = {
    .proto = M0_CONN_PROTO_SSE,
    .begin = sse_begin,
    .deliver = sse_deliver,
    .end = sse_end,
    .refresh = sse_refresh,
    .expire = sse_end,                   /* as a drain: FIN; the page reconnects with a fresh grant */
};

const struct m0_conn_ops m0_sse_conn_ops = {
    .name = "sse",
    .wrote = m0_hold_wrote,
    .watch = m0_hold_watch,
    .event = sse_event,
    .tick = sse_tick,
    .closing = m0_hold_release,
    .hold = &m0_sse_hold_ops,
};
