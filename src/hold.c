/*
 * hold.c — held streams and the loop side of the broadcast bus (see
 * hold.h; DESIGN capabilities 4 and 5; WHATWG SSE §9.2).
 *
 * The bus: this worker's datagrams are read in the loop, put back in id
 * order (order.h), journaled and fanned out by the registry in slices of
 * FANOUT_BUDGET subscribers per loop pass (so one event to many thousands
 * of streams never holds the loop), and written to each stream's outbox.
 *
 * Within a pass the fan-out is corked: event bytes are appended to each
 * connection's outbox and every connection touched is written once at the
 * end of the pass, so when events queue up (a burst) one send() carries
 * several of them — the send, half of it the loopback receive path run in
 * the sender's call, is nearly all a delivery costs. A pass takes further
 * slices while it has touched fewer than FANOUT_BUDGET connections (at
 * most CORK_SLICES slices), so a pass still writes to at most about
 * FANOUT_BUDGET connections, as before.
 *
 * Nothing is lost silently: when this worker learns it missed events — a
 * publisher found its bus full (the shared lost[] marker), or an id never
 * arrived within the reorder window — every live stream gets an
 * "event: m0-gap" notice, and the journal's floor rises so a resume across
 * the hole gets one too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "m0/broker.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/metrics.h"
#include "m0/order.h"
#include "m0/registry.h"
#include "m0/sse.h"
#include "m0/target.h"

#define FANOUT_BUDGET 1024          /* subscribers per slice (~a few ms of sends) */
#define CORK_SLICES 16              /* slices one pass may take while few connections are touched */
#define BUS_BACKLOG 256             /* unfinished fan-outs before the bus waits */
#define REORDER_WINDOW_MS 100       /* how long an early event waits for a missing one */

struct m0_realtime {
    struct m0_registry *reg;
    int bus_fd;                     /* this worker's bus read end */
    int reading;                    /* registered with the loop */
    char *buf;                      /* one datagram */
    struct m0_order order;
    uint64_t heartbeat_ms;
    size_t outbox_limit;
    int replaying;                  /* inside a subscribe: replay allowance */
    int broker;                     /* --broker: events come from broker.c, not the bus */
    int hooked;                     /* rt_hook is registered with the loop */
    uint64_t seen_lost;             /* the lost[] marker last acted on */
    uint64_t noticed;               /* newest id already announced lost */
    uint64_t next_slow_log;
    int corking;                    /* inside a fan-out pass: queue, write at its end */
    int owing;                      /* m0_hold_send_owed is sending: a runner's own bytes */
    uint32_t *corked;               /* slots with bytes queued this pass */
    uint32_t ncorked;
    struct m0_rt_stats st;
};

/* ---------------------------------------------------------- held sends */

uint32_t m0_hold_interest(const struct m0_conn *c, int want_out)
{
    /* A WebSocket whose message queue is full is not read (TCP pushes back). */
    /* Nor one whose close has begun or whose peer left: the rest is read by LINGER. */
    const struct m0_wshold *ws = c->hold != NULL ? c->hold->ws : NULL;
    uint32_t in = (ws != NULL && (ws->paused || ws->close_sent || ws->close_received || ws->peer_gone))
                      ? 0 : EPOLLIN | EPOLLRDHUP;
    return in | (want_out ? EPOLLOUT : 0);
}

/* A runner that owns the socket (wshold.c) may send again once its bytes
 * are written, however the outbox drained (EPOLLOUT, a fan-out's flush). */
static void credit(struct m0_conn *c)
{
    const struct m0_wshold *ws = c->hold->ws;
    if (ws != NULL && ws->owned && !ws->runner_done)
        m0_job_credit(c->job, m0_buf_unread(&c->hold->outbox));
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
        if ((size_t)w > other)
            h->owed -= (size_t)w - other;
        h->allowance = h->allowance > (size_t)w ? h->allowance - (size_t)w : 0;
        h->last_write = m0_loop_now(s->loop);
        credit(c);
    }
    h->allowance = 0;
    h->owed = 0;
    if (h->outbox.cap > 16 * 1024)
        m0_buf_free(&h->outbox);     /* a burst's buffer is not kept idle */
    m0_conn_interest(s, c, m0_hold_interest(c, 0));
    return M0_OK;
}

/* Queue bytes on a held (or about to be held) stream: written at once when
 * nothing is waiting, else appended to a bounded outbox. A subscriber that
 * falls more than --outbox-limit behind is closed; it reconnects and
 * resumes with Last-Event-ID, and the worker's memory stays bounded. */
void m0_hold_send(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    struct m0_realtime *rt = s->rt;
    struct m0_hold *h = c->hold;
    if ((c->flags & C_DOOMED) || h == NULL)
        return;
    if (c->state == M0_CONN_HELD && m0_buf_unread(&h->outbox) == 0 && !rt->corking) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
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
        if (rt->owing)
            h->owed += n;
        m0_conn_interest(s, c, m0_hold_interest(c, 1));
        return;
    }
    /* A resume's replay may exceed the limit by the journal's size: it is
     * bounded by --replay-bytes, and refusing it would only make the client
     * reconnect and ask again. A runner's own bytes are bounded by its
     * credit window. Only the rest counts against the limit. */
    if (rt->owing) {
        h->owed += n;
    } else if (rt->replaying) {
        h->allowance += n;
    } else if (m0_buf_unread(&h->outbox) - h->owed + n > rt->outbox_limit + h->allowance) {
        rt->st.slow_closed++;
        if (m0_loop_now(s->loop) >= rt->next_slow_log) {
            m0_warn("closing a held stream more than %zu bytes behind (slow subscriber)", rt->outbox_limit);
            rt->next_slow_log = m0_loop_now(s->loop) + 1000;
        }
        m0_conn_doom(s, c);
        return;
    }
    m0_buf_append(&h->outbox, p, n);
    if (rt->corking && c->state == M0_CONN_HELD && !h->corked) {
        h->corked = 1;
        rt->corked[rt->ncorked++] = m0_conn_slot(s, c);
    }
}

void m0_hold_send_owed(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    s->rt->owing = 1;
    m0_hold_send(s, c, p, n);
    s->rt->owing = 0;
}

/* The end of a corked pass: one write per connection touched. */
static void cork_flush(struct m0_server *s)
{
    struct m0_realtime *rt = s->rt;
    rt->corking = 0;
    for (uint32_t i = 0; i < rt->ncorked; i++) {
        struct m0_conn *c = &s->conns[rt->corked[i]];
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
    rt->ncorked = 0;
}

/* Registry delivery callback. */
static void deliver(void *ctx, uint32_t slot, const char *p, size_t n)
{
    struct m0_server *s = ctx;
    struct m0_conn *c = &s->conns[slot];
    s->rt->st.delivered++;
    if (c->hold != NULL && c->hold->ws != NULL)
        m0_ws_hold_deliver(s, c, p, n);     /* the event's data as a text frame */
    else
        m0_hold_send(s, c, p, n);
}

/* ----------------------------------------------------------------- bus */

/* Events up to id will never reach this worker: tell every live stream and
 * make resumes across them report the gap. */
static void announce_lost(struct m0_server *s, uint64_t id)
{
    struct m0_realtime *rt = s->rt;
    if (id <= rt->noticed)
        return;
    rt->noticed = id;
    rt->st.lost++;
    m0_registry_raise_floor(rt->reg, id);
    char frame[96];
    int n = snprintf(frame, sizeof frame, "event: m0-gap\ndata: {\"lost_through\": %llu}\n\n",
                     (unsigned long long)id);
    m0_warn("worker missed events up to id %llu: %zu live stream(s) told (m0-gap)",
            (unsigned long long)id, m0_registry_notice_all(rt->reg, frame, (size_t)n, deliver, s));
}

static void publish(struct m0_server *s, const char *dgram, size_t n)
{
    struct m0_bus_msg m;
    if (m0_bus_decode(dgram, n, &m) != M0_OK)
        return;
    s->rt->st.published++;
    m0_registry_publish(s->rt->reg, m.channel, m.channel_len, m.id, m.payload, m.payload_len, deliver, s);
}

/* Deliver what the reorder window has in order, then see whether anything
 * was lost. */
static void settle(struct m0_server *s)
{
    struct m0_realtime *rt = s->rt;
    struct m0_order_item it;
    uint64_t now = m0_loop_now(s->loop);
    for (;;) {
        while (m0_order_pop(&rt->order, &it)) {
            publish(s, it.data, it.len);
            free(it.data);
        }
        uint64_t lost = m0_order_expire(&rt->order, now, REORDER_WINDOW_MS);
        if (lost == 0)
            break;
        announce_lost(s, lost);
    }
    uint64_t marked = m0_bus_lost(m0_bus_index);
    if (marked > rt->seen_lost) {
        /* A publisher found our bus full: that event is not coming. */
        rt->seen_lost = marked;
        announce_lost(s, marked);
    }
}

static void bus_read(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    struct m0_server *s = ctx;
    struct m0_realtime *rt = s->rt;
    (void)events;
    for (int i = 0; i < 512; i++) {
        /* Events wait in the bus (publishers feel the backpressure) rather
         * than pile up here while earlier fan-outs are still in progress. */
        if (m0_registry_fanout_backlog(rt->reg) >= BUS_BACKLOG)
            break;
        ssize_t n = recv(fd, rt->buf, M0_BUS_MAX_DGRAM, MSG_DONTWAIT | MSG_TRUNC);
        if (n == -1) {
            if (errno == EINTR)
                continue;
            break;
        }
        struct m0_bus_msg m;
        if (n > M0_BUS_MAX_DGRAM || m0_bus_decode(rt->buf, (size_t)n, &m) != M0_OK ||
            m0_sse_channel_error(m.channel, m.channel_len) != NULL)
            continue;      /* malformed, oversized or a reserved name: drop */
        switch (m0_order_offer(&rt->order, m.id, rt->buf, (size_t)n, m0_loop_now(l))) {
        case M0_ORDER_NOW:
            publish(s, rt->buf, (size_t)n);
            break;
        case M0_ORDER_HELD:
            break;
        case M0_ORDER_LATE:
            rt->st.late++;
            break;
        }
        settle(s);
    }
    settle(s);
    m0_conn_close_doomed(s);
}

/* Before sleeping: the next slice of queued fan-outs, losses noticed, and
 * a wakeup for the reorder window's deadline. */
static void rt_hook(struct m0_loop *l, void *ctx)
{
    struct m0_server *s = ctx;
    struct m0_realtime *rt = s->rt;
    if (rt->reading && !rt->broker)
        settle(s);
    if (m0_registry_fanout_pending(rt->reg)) {
        rt->corking = 1;
        int slices = 0;
        do
            m0_registry_fanout(rt->reg, deliver, s);
        while (++slices < CORK_SLICES && rt->ncorked < FANOUT_BUDGET && m0_registry_fanout_pending(rt->reg));
        cork_flush(s);
        m0_conn_close_doomed(s);
        if (m0_registry_fanout_pending(rt->reg))
            m0_loop_wake_at(l, m0_loop_now(l));     /* more to send: only peek at other events */
    }
    uint64_t at = m0_order_deadline(&rt->order, REORDER_WINDOW_MS);
    if (at != 0)
        m0_loop_wake_at(l, at);
}

void m0_rt_init(struct m0_server *s)
{
    const struct m0_config *cfg = s->cfg;
    if (s->rt != NULL)
        return;
    struct m0_realtime *rt = m0_xmalloc(sizeof *rt);
    memset(rt, 0, sizeof *rt);
    s->rt = rt;
    rt->bus_fd = -1;
    rt->corked = m0_xmalloc(s->nconns * sizeof *rt->corked);
    rt->heartbeat_ms = (uint64_t)(cfg->heartbeat * 1000);
    rt->outbox_limit = (size_t)cfg->outbox_limit;
    rt->reg = m0_registry_new(s->nconns, (unsigned)cfg->replay, (size_t)cfg->replay_bytes, 0);
    m0_registry_set_budget(rt->reg, FANOUT_BUDGET);
    m0_registry_set_journal_cap(rt->reg, (size_t)cfg->replay_total);
    m0_order_init(&rt->order, 1);
}

int m0_rt_prepare(struct m0_server *s)
{
    if (m0_bus_current == NULL)
        return M0_ERR;
    m0_rt_init(s);
    if (!s->rt->hooked) {
        m0_loop_add_hook(s->loop, rt_hook, s);
        s->rt->hooked = 1;
    }
    return M0_OK;
}

int m0_rt_start(struct m0_server *s)
{
    if (m0_rt_prepare(s) != M0_OK)
        return M0_ERR;
    struct m0_realtime *rt = s->rt;
    rt->bus_fd = m0_bus_current->read_fds[m0_bus_index];
    rt->buf = m0_xmalloc(M0_BUS_MAX_DGRAM + 1);
    /* Events numbered up to now were published before this worker could
     * journal them: a resume from below is not provably whole. And what a
     * publisher lost for our predecessor is not ours to announce. */
    uint64_t newest = m0_bus_last_id();
    m0_registry_raise_floor(rt->reg, newest);
    m0_order_free(&rt->order);
    m0_order_init(&rt->order, newest + 1);
    rt->seen_lost = rt->noticed = m0_bus_lost(m0_bus_index);
    if (m0_broker != NULL) {
        /* The broker replaces the bus as this worker's source of events. */
        rt->broker = 1;
        rt->reading = 1;
        return m0_broker_start(s);
    }
    if (m0_loop_add_fd(s->loop, rt->bus_fd, EPOLLIN, bus_read, s) == M0_ERR) {
        m0_log_errno("epoll_ctl(bus)");
        return M0_ERR;
    }
    rt->reading = 1;
    return M0_OK;
}

void m0_rt_stop_reading(struct m0_server *s)
{
    if (s->rt != NULL && s->rt->broker) {
        m0_broker_stop(s);
        s->rt->reading = 0;
    } else if (s->rt != NULL && s->rt->reading) {
        /* A replacement worker reads this bus next: leave it the events. */
        m0_loop_del_fd(s->loop, s->rt->bus_fd);
        s->rt->reading = 0;
    }
}

void m0_rt_free(struct m0_server *s)
{
    struct m0_realtime *rt = s->rt;
    if (rt == NULL)
        return;
    if (rt->broker)
        m0_broker_free(s);
    m0_registry_free(rt->reg);
    m0_order_free(&rt->order);
    free(rt->buf);
    free(rt->corked);
    free(rt);
    s->rt = NULL;
}

void m0_rt_stats(const struct m0_server *s, struct m0_rt_stats *out)
{
    if (s->rt == NULL) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = s->rt->st;
    out->late = s->rt->order.late;
}

size_t m0_rt_top(const struct m0_server *s, struct m0_channel_stat *out, size_t max)
{
    return s->rt != NULL ? m0_registry_top(s->rt->reg, out, max) : 0;
}

/* -------------------------------------------------------------- broker */

void m0_rt_event(struct m0_server *s, const char *channel, size_t clen, uint64_t id, const char *frame, size_t flen)
{
    s->rt->st.published++;
    m0_registry_publish(s->rt->reg, channel, clen, id, frame, flen, deliver, s);
}

void m0_rt_lost(struct m0_server *s, uint64_t id)
{
    announce_lost(s, id);
}

void m0_rt_floor(struct m0_server *s, uint64_t id)
{
    m0_registry_raise_floor(s->rt->reg, id);
}

int m0_rt_busy(const struct m0_server *s)
{
    return m0_registry_fanout_backlog(s->rt->reg) >= BUS_BACKLOG;
}

struct m0_conn *m0_rt_awaiting(struct m0_server *s, uint32_t slot, uint32_t gen)
{
    if (s->rt == NULL || slot >= s->nconns)
        return NULL;
    struct m0_conn *c = &s->conns[slot];
    if (c->gen != gen || c->hold == NULL || (c->flags & C_DOOMED) || m0_registry_is_subscribed(s->rt->reg, slot))
        return NULL;
    if (c->state != M0_CONN_HELD && c->state != M0_CONN_WRITE && c->state != M0_CONN_RUN)
        return NULL;
    return c;
}

void m0_rt_replay(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    s->rt->replaying = 1;
    if (c->hold->ws != NULL)
        m0_ws_hold_deliver(s, c, p, n);     /* sockets do not resume; kept uniform with deliver() */
    else
        m0_hold_send(s, c, p, n);
    s->rt->replaying = 0;
}

void m0_rt_join(struct m0_server *s, struct m0_conn *c, const char *channel, size_t clen, uint64_t last)
{
    struct m0_realtime *rt = s->rt;
    if ((c->flags & C_DOOMED) == 0) {
        rt->replaying = 1;
        m0_registry_subscribe(rt->reg, m0_conn_slot(s, c), channel, clen, last, 0, deliver, s);
        rt->replaying = 0;
    }
    m0_conn_close_doomed(s);
}

/* --------------------------------------------------------------- holds */

int m0_hold_subscribe(struct m0_server *s, struct m0_conn *c)
{
    struct m0_realtime *rt = s->rt;
    struct m0_job *job = c->job;
    uint32_t slot = m0_conn_slot(s, c);
    /* A worker on its way out holds nothing new (its bus is about to be its
     * replacement's): the caller's 503 sends the client back. */
    if (rt == NULL || atomic_load(&s->draining))
        return M0_ERR;
    /* A channel needs the bus (or the broker) being read; a socket an
     * asynchronous runner accepted without one needs neither. */
    int subscribe = job->head.channel_len > 0;
    if (subscribe && !rt->reading)
        return M0_ERR;
    if (job->head.hold == M0_HOLD_WEBSOCKET) {
        if (m0_ws_hold_begin(s, c) != M0_OK)
            return M0_OK;        /* refused: job->resp is the 400/426, nothing held */
    } else {
        c->hold = m0_xmalloc(sizeof *c->hold);
        memset(c->hold, 0, sizeof *c->hold);
    }
    c->hold->target = job->target;
    if (!subscribe)
        return M0_OK;
    uint64_t newest = m0_bus_last_id();
    uint64_t last = job->hold_last_id;
    int quiet = 0;
    if (s->cfg->replay == 0)
        m0_registry_raise_floor(rt->reg, newest);   /* no journal: any resume may have missed some */
    if (rt->broker && last != 0 &&
        (last > newest || !m0_registry_resumable(rt->reg, job->head.channel, job->head.channel_len, last))) {
        /* The client's id is ahead of this worker or behind its journal:
         * the broker's retention answers (asynchronously; the stream starts
         * when the reply arrives). */
        if (m0_broker_resume(s, c, job->head.channel, job->head.channel_len, last) != M0_OK) {
            free(c->hold);
            c->hold = NULL;
            return M0_ERR;
        }
        return M0_OK;
    }
    rt->replaying = 1;
    if (last > newest) {
        /* An id we never issued (garbage, or from before a full restart
         * reset the counter): tell the client to resync, start afresh. */
        static const char gap[] = "event: m0-gap\ndata: {\"last_event_id\": null}\n\n";
        m0_hold_send(s, c, gap, sizeof gap - 1);
        last = 0;
    }
    if (last == 0) {
        /* Events published after the view decided to hold reach it from
         * the journal, even if the bus delivered them before this moment. */
        last = job->hold_start;
        quiet = 1;
    }
    m0_registry_subscribe(rt->reg, slot, job->head.channel, job->head.channel_len, last, quiet, deliver, s);
    rt->replaying = 0;
    return M0_OK;
}

void m0_hold_enter(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    if (atomic_load(&s->draining)) {       /* head out, nothing more will come: end it */
        m0_conn_close(s, c);
        return;
    }
    m0_metrics_request(s->mx, job->mx_mount, job->req.method, job->resp.status, 0, 1);
    if (s->cfg->access_log)
        m0_h1_access_log(s, c);
    m0_conn_set_state(s, c, M0_CONN_HELD);
    c->hold->last_write = m0_loop_now(s->loop);
    s->rt->st.held++;
    if (c->hold->target != NULL)
        m0_target_stats_of(&m0_targets, c->hold->target)->held++;
    int ws = c->hold->ws != NULL;
    if (ws)
        s->rt->st.websockets++;
    /* Everything per-request is released: a held stream costs the slot,
     * its job struct, a registry link and its outbox, and no Python object. */
    m0_req_free(&job->req);
    m0_req_init(&job->req);
    m0_http_free(&c->http);
    if (!ws || m0_buf_unread(&c->in) == 0)
        m0_buf_free(&c->in);         /* a socket's early frames stay: they are read next */
    m0_buf_free(&c->out);
    m0_resp_reset(&job->resp);
    m0_buf_free(&job->resp.out);
    m0_head_free(&job->head);
    if (m0_hold_flush(s, c) == M0_ERR)
        m0_conn_close(s, c);
    else if (ws)
        m0_ws_hold_enter(s, c);
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

void m0_hold_on_event(struct m0_server *s, struct m0_conn *c, uint32_t ev)
{
    if (c->hold->ws != NULL) {
        m0_ws_hold_on_event(s, c, ev);
        return;
    }
    if ((ev & EPOLLOUT) && m0_hold_flush(s, c) == M0_ERR) {
        m0_conn_close(s, c);
        return;
    }
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        held_read(s, c);
}

void m0_hold_sweep(struct m0_server *s, struct m0_conn *c)
{
    struct m0_realtime *rt = s->rt;
    uint64_t now = m0_loop_now(s->loop);
    if (c->hold->ws != NULL) {
        m0_ws_hold_sweep(s, c, rt->heartbeat_ms);
        return;
    }
    if (rt->heartbeat_ms != 0 && now - c->hold->last_write >= rt->heartbeat_ms &&
        m0_buf_unread(&c->hold->outbox) == 0) {
        /* A comment line: ignored by EventSource, keeps proxies from timing
         * out an idle stream (WHATWG SSE §9.2.7). */
        m0_hold_send(s, c, M0_SSE_HEARTBEAT, sizeof M0_SSE_HEARTBEAT - 1);
        c->hold->last_write = now;
    }
}

void m0_hold_release(struct m0_server *s, struct m0_conn *c)
{
    if (s->rt != NULL)
        m0_registry_unsubscribe(s->rt->reg, m0_conn_slot(s, c));
    if (c->state == M0_CONN_HELD) {
        s->rt->st.held--;
        if (c->hold->target != NULL)
            m0_target_stats_of(&m0_targets, c->hold->target)->held--;
        if (c->hold->ws != NULL)
            s->rt->st.websockets--;
    }
    if (c->hold->ws != NULL)
        m0_ws_hold_release(s, c);
    m0_buf_free(&c->hold->outbox);
    free(c->hold);
    c->hold = NULL;
}

void m0_hold_end_all(struct m0_server *s)
{
    struct m0_conn *c = s->active.next;
    while (c != &s->active) {
        struct m0_conn *next = c->next;
        if (c->state == M0_CONN_HELD && c->hold->ws != NULL) {
            /* Its close frame (1001) after what is queued, then the close
             * handshake (LINGER), within the drain's deadline. */
            m0_ws_hold_end(s, c);
        } else if (c->state == M0_CONN_HELD) {
            m0_hold_flush(s, c);
            shutdown(c->fd, SHUT_WR);
            m0_conn_close(s, c);
        }
        c = next;
    }
}
