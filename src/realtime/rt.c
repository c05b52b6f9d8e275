/*
 * rt.c — a loop's realtime engine (see rt.h): the local bus read in the
 * loop, put back in id order (order.h), journaled and fanned out by the
 * registry (registry.h) to the sink; or another source in the bus's place.
 *
 * Within a pass the fan-out is corked (the sink queues, and writes every
 * connection touched once at the end), so when events queue up (a burst)
 * one send() carries several of them — the send, half of it the loopback
 * receive path run in the sender's call, is nearly all a delivery costs. A
 * pass takes further slices while the sink has touched fewer than
 * FANOUT_BUDGET subscribers (at most CORK_SLICES slices), so a pass still
 * writes to at most about FANOUT_BUDGET connections.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "m0/bus.h"
#include "m0/config.h"
#include "m0/fork.h"
#include "m0/grip_item.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/order.h"
#include "m0/registry.h"
#include "m0/rt.h"
#include "m0/sse.h"

#define FANOUT_BUDGET 1024          /* subscribers per slice (~a few ms of sends) */
#define CORK_SLICES 16              /* slices one pass may take while few connections are touched */
#define BUS_BACKLOG 256             /* unfinished fan-outs before the bus waits */
#define REORDER_WINDOW_MS 100       /* how long an early event waits for a missing one */

struct m0_rt {
    struct m0_loop *loop;
    struct m0_rt_sink sink;
    struct m0_registry *reg;
    uint32_t nslots;
    int journal;                    /* --replay > 0: resumes from the journal */
    int bus_fd;                     /* this loop's bus read end */
    int endpoint;                   /* its index in the bus (m0_bus_endpoint) */
    int loop_index;                 /* which of the worker's loops (--threads) */
    int reading;                    /* the bus is registered, or the source started */
    char *buf;                      /* one datagram */
    struct m0_order order;
    int replaying;                  /* inside a subscribe or a source's replay */
    int hooked;                     /* rt_hook is registered with the loop */
    const struct m0_rt_source_ops *src;     /* NULL: the local bus */
    void *src_ctx;
    const uint64_t *position;       /* the source's read position (atomic); NULL: the bus's counter */
    uint64_t seen_lost;             /* the lost[] marker last acted on */
    uint64_t noticed;               /* newest id already announced lost */
    struct m0_rt_stats st;
    const struct m0_rt_watch_ops *watch;  /* NULL: nobody follows (m0_rt_watch) */
    void *watch_ctx;
    /* Queries from other threads (m0_rt_history): a list under qmu, an
     * eventfd to wake the loop. */
    pthread_mutex_t qmu;
    struct rt_query *qhead;
    int qfd;
    pthread_t thread;               /* the loop's (a query from it is answered at once) */
};

/* What the bytes of an event are (the engine's one look at them): a GRIP
 * item carries its tag (grip_item.h), an event of the bus its id line; what
 * has neither is a notice of the server's own. id: what the journal says
 * (0: parse the id line, for a source's replay). */
static struct m0_rt_event typed(uint64_t id, const char *p, size_t n, int replay)
{
    struct m0_rt_event ev = {.id = id, .replay = (uint8_t)replay, .frame = p, .n = n};
    if (m0_grip_is_item(p, n)) {
        ev.kind = M0_RT_GRIP;
    } else if (n > 4 && memcmp(p, "id: ", 4) == 0) {
        ev.kind = M0_RT_SSE;
        if (id == 0) {
            const char *eol = memchr(p + 4, '\n', n - 4);
            ev.id = eol != NULL ? m0_sse_parse_last_id(p + 4, (size_t)(eol - p - 4)) : 0;
            if (ev.id == UINT64_MAX)
                ev.id = 0;
        }
    } else {
        ev.kind = id != 0 ? M0_RT_SSE : M0_RT_NOTICE;
    }
    return ev;
}

/* Per process: each loop's engine, for a thread that asks its loop
 * (m0_rt_history); set when the loop starts reading, before any view runs
 * on it, and cleared only when the engine is freed. */
static struct m0_rt *by_loop[M0_MAX_LOOPS];

/* Registry delivery callback: one copy of an event to the sink. */
static void deliver(void *ctx, uint32_t slot, uint64_t id, const char *p, size_t n)
{
    struct m0_rt *rt = ctx;
    rt->st.delivered++;
    struct m0_rt_event ev = typed(id, p, n, rt->replaying);
    rt->sink.deliver(rt->sink.ctx, slot, &ev);
}

/* Events up to id will never reach this loop: tell every live subscriber
 * and make resumes across them report the gap. */
static void announce_lost(struct m0_rt *rt, uint64_t id)
{
    if (id <= rt->noticed)
        return;
    rt->noticed = id;
    rt->st.lost++;
    m0_registry_raise_floor(rt->reg, id);
    char frame[96];
    int n = snprintf(frame, sizeof frame, "event: m0-gap\ndata: {\"lost_through\": %llu}\n\n",
                     (unsigned long long)id);
    m0_warn("worker missed events up to id %llu: %zu live stream(s) told (m0-gap)",
            (unsigned long long)id, m0_registry_notice_all(rt->reg, frame, (size_t)n, deliver, rt));
}

/* ----------------------------------------------------------------- bus */

static void publish(struct m0_rt *rt, const char *dgram, size_t n)
{
    struct m0_bus_msg m;
    if (m0_bus_decode(dgram, n, &m) != M0_OK)
        return;
    rt->st.received++;
    m0_registry_publish(rt->reg, m.channel, m.channel_len, m.id, m.payload, m.payload_len, deliver, rt);
    if (rt->watch != NULL)
        rt->watch->event(rt->watch_ctx, m.channel, m.channel_len, m.id);
}

/* The newest id this loop's journal knows on a channel (the watcher's
 * join: presence's last_id, seeded when a first listener comes). */
static uint64_t journal_last(void *ctx, const char *name, size_t len)
{
    struct m0_rt *rt = ctx;
    int complete;
    uint64_t last;
    m0_registry_history(rt->reg, name, len, UINT64_MAX, 0, 0, NULL, NULL, &complete, &last);   /* no event: the id alone */
    return last;
}

/* Deliver what the reorder window has in order, then see whether anything
 * was lost. */
static void settle(struct m0_rt *rt)
{
    struct m0_order_item it;
    uint64_t now = m0_loop_now(rt->loop);
    for (;;) {
        while (m0_order_pop(&rt->order, &it)) {
            publish(rt, it.data, it.len);
            free(it.data);
        }
        uint64_t lost = m0_order_expire(&rt->order, now, REORDER_WINDOW_MS);
        if (lost == 0)
            break;
        announce_lost(rt, lost);
    }
    uint64_t marked = m0_bus_lost(rt->endpoint);
    if (marked > rt->seen_lost) {
        /* A publisher found our bus full: that event is not coming. */
        rt->seen_lost = marked;
        announce_lost(rt, marked);
    }
}

static void bus_read(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    struct m0_rt *rt = ctx;
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
            publish(rt, rt->buf, (size_t)n);
            break;
        case M0_ORDER_HELD:
            break;
        case M0_ORDER_LATE:
            rt->st.late++;
            break;
        }
        settle(rt);
    }
    settle(rt);
    rt->sink.flush(rt->sink.ctx);
}

/* Before sleeping: the next slice of queued fan-outs, losses noticed, and
 * a wakeup for the reorder window's deadline. */
static void rt_hook(struct m0_loop *l, void *ctx)
{
    struct m0_rt *rt = ctx;
    if (rt->reading && rt->src == NULL)
        settle(rt);
    if (m0_registry_fanout_pending(rt->reg)) {
        /* One event in flight: its slices touch each subscriber once. */
        rt->sink.cork(rt->sink.ctx, m0_registry_fanout_backlog(rt->reg) == 1);
        int slices = 0;
        do
            m0_registry_fanout(rt->reg, deliver, rt);
        while (++slices < CORK_SLICES && rt->sink.corked(rt->sink.ctx) < FANOUT_BUDGET &&
               m0_registry_fanout_pending(rt->reg));
        rt->sink.flush(rt->sink.ctx);
        if (m0_registry_fanout_pending(rt->reg))
            m0_loop_wake_at(l, m0_loop_now(l));     /* more to send: only peek at other events */
    }
    uint64_t at = m0_order_deadline(&rt->order, REORDER_WINDOW_MS);
    if (at != 0)
        m0_loop_wake_at(l, at);
}

/* ------------------------------------------------------------ queries */

/* A history query from another thread. The asker and the loop share it
 * (refs): an asker that gives up leaves it for the loop to free. */
struct rt_query {
    struct rt_query *next;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, refs, rc;
    struct m0_rt_history h;         /* the question, then the answer */
    size_t clen;
    char channel[];
};

static void query_free(struct rt_query *q)
{
    m0_buf_free(&q->h.events);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* The registry's history callback: an SSE event is taken (GRIP items are
 * another format); ctx NULL only asks whether it would be. */
static int take_event(void *ctx, uint64_t id, const char *frame, size_t n)
{
    if (typed(id, frame, n, 1).kind != M0_RT_SSE)
        return 0;
    struct m0_rt_history *h = ctx;
    if (h != NULL) {
        unsigned char hd[12];
        for (int i = 0; i < 8; i++)
            hd[i] = (unsigned char)(id >> (8 * i));
        for (int i = 0; i < 4; i++)
            hd[8 + i] = (unsigned char)((uint64_t)n >> (8 * i));
        m0_buf_append(&h->events, hd, sizeof hd);
        m0_buf_append(&h->events, frame, n);
        h->count++;
    }
    return 1;
}

/* Answer h from this loop's journal (its loop thread). */
static void answer(struct m0_rt *rt, const char *channel, size_t clen, struct m0_rt_history *h)
{
    uint64_t newest = m0_rt_newest(rt);
    if (!rt->journal)
        m0_registry_raise_floor(rt->reg, newest);   /* nothing kept: nothing proven */
    h->count = 0;
    m0_registry_history(rt->reg, channel, clen, h->since, h->tail, h->limit, take_event, h, &h->complete,
                        &h->last_id);
    if (!h->tail && h->since > newest)
        h->complete = 0;                            /* an id never issued: m0-gap's null case */
}

static void query_read(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    struct m0_rt *rt = ctx;
    uint64_t v;
    (void)l;
    (void)events;
    if (read(fd, &v, sizeof v) < 0 && errno != EAGAIN)
        m0_log_errno("read(rt queries)");
    pthread_mutex_lock(&rt->qmu);
    struct rt_query *q = rt->qhead;
    rt->qhead = NULL;
    pthread_mutex_unlock(&rt->qmu);
    while (q != NULL) {
        struct rt_query *next = q->next;
        pthread_mutex_lock(&q->mu);
        if (q->refs == 2) {
            answer(rt, q->channel, q->clen, &q->h);
            q->rc = M0_OK;
        }
        q->done = 1;
        int last = --q->refs == 0;
        pthread_cond_signal(&q->cv);
        pthread_mutex_unlock(&q->mu);
        if (last)
            query_free(q);
        q = next;
    }
}

static void query_close_in_child(void *ctx)
{
    struct m0_rt *rt = ctx;
    if (rt->qfd != -1)
        close(rt->qfd);
}

static void query_start(struct m0_rt *rt)
{
    rt->thread = pthread_self();
    if (rt->qfd == -1) {
        rt->qfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (rt->qfd == -1 || m0_loop_add_fd(rt->loop, rt->qfd, EPOLLIN, query_read, rt) == M0_ERR) {
            m0_log_errno("presence: the loop's query queue (m0pub.history answers nothing)");
            if (rt->qfd != -1)
                close(rt->qfd);
            rt->qfd = -1;
        } else {
            m0_fork_on_child(query_close_in_child, rt);
        }
    }
    if (rt->loop_index >= 0 && rt->loop_index < M0_MAX_LOOPS)
        __atomic_store_n(&by_loop[rt->loop_index], rt, __ATOMIC_RELEASE);
}

/* The loop ends: queries still queued are told no. */
static void query_stop(struct m0_rt *rt)
{
    if (rt->loop_index >= 0 && rt->loop_index < M0_MAX_LOOPS &&
        __atomic_load_n(&by_loop[rt->loop_index], __ATOMIC_ACQUIRE) == rt)
        __atomic_store_n(&by_loop[rt->loop_index], NULL, __ATOMIC_RELEASE);
    pthread_mutex_lock(&rt->qmu);
    struct rt_query *q = rt->qhead;
    rt->qhead = NULL;
    int fd = rt->qfd;
    rt->qfd = -1;
    pthread_mutex_unlock(&rt->qmu);
    if (fd != -1) {
        m0_fork_forget(rt);
        m0_loop_del_fd(rt->loop, fd);
        close(fd);
    }
    while (q != NULL) {
        struct rt_query *next = q->next;
        pthread_mutex_lock(&q->mu);
        q->done = 1;
        q->rc = M0_ERR;
        int last = --q->refs == 0;
        pthread_cond_signal(&q->cv);
        pthread_mutex_unlock(&q->mu);
        if (last)
            query_free(q);
        q = next;
    }
}

int m0_rt_history(unsigned loop_index, const char *channel, size_t clen, struct m0_rt_history *h)
{
    struct m0_rt *rt = loop_index < M0_MAX_LOOPS ? __atomic_load_n(&by_loop[loop_index], __ATOMIC_ACQUIRE) : NULL;
    h->count = 0;
    h->complete = 0;
    h->last_id = 0;
    if (rt == NULL)
        return M0_ERR;
    if (pthread_equal(pthread_self(), rt->thread)) {
        answer(rt, channel, clen, h);     /* a view on the loop thread (--blocking-threads 0) */
        return M0_OK;
    }
    struct rt_query *q = m0_xcalloc(sizeof *q + clen);
    pthread_mutex_init(&q->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    q->refs = 2;
    q->rc = M0_ERR;
    q->h = (struct m0_rt_history){.since = h->since, .tail = h->tail, .limit = h->limit};
    q->clen = clen;
    memcpy(q->channel, channel, clen);
    pthread_mutex_lock(&rt->qmu);
    if (rt->qfd == -1) {
        pthread_mutex_unlock(&rt->qmu);
        query_free(q);
        return M0_ERR;
    }
    q->next = rt->qhead;
    rt->qhead = q;
    uint64_t one = 1;
    ssize_t w = write(rt->qfd, &one, sizeof one);
    (void)w;                        /* a full counter: the loop is woken already */
    pthread_mutex_unlock(&rt->qmu);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += M0_RT_QUERY_TIMEOUT_MS / 1000;
    pthread_mutex_lock(&q->mu);
    while (!q->done && pthread_cond_timedwait(&q->cv, &q->mu, &until) != ETIMEDOUT) {
    }
    int rc = q->done ? q->rc : M0_ERR;
    if (q->done && rc == M0_OK) {
        m0_buf_free(&h->events);
        h->events = q->h.events;
        q->h.events = (struct m0_buf){0};
        h->count = q->h.count;
        h->complete = q->h.complete;
        h->last_id = q->h.last_id;
    }
    int last = --q->refs == 0;
    pthread_mutex_unlock(&q->mu);
    if (last)
        query_free(q);
    return rc;
}

/* ------------------------------------------------------------ lifecycle */

struct m0_rt *m0_rt_new(struct m0_loop *l, const struct m0_config *cfg, uint32_t nslots, const struct m0_rt_sink *sink)
{
    struct m0_rt *rt = m0_xmalloc(sizeof *rt);
    memset(rt, 0, sizeof *rt);
    rt->loop = l;
    rt->sink = *sink;
    rt->nslots = nslots;
    rt->journal = cfg->replay != 0;
    rt->bus_fd = -1;
    rt->reg = m0_registry_new(nslots, (unsigned)cfg->replay, (size_t)cfg->replay_bytes, 0);
    m0_registry_set_budget(rt->reg, FANOUT_BUDGET);
    m0_registry_set_journal_cap(rt->reg, (size_t)cfg->replay_total);
    m0_order_init(&rt->order, 1);
    pthread_mutex_init(&rt->qmu, NULL);
    rt->qfd = -1;
    return rt;
}

void m0_rt_watch(struct m0_rt *rt, const struct m0_rt_watch_ops *ops, void *ctx)
{
    rt->watch = ops;
    rt->watch_ctx = ctx;
}

void m0_rt_set_loop(struct m0_rt *rt, int loop_index)
{
    rt->loop_index = loop_index;
}

int m0_rt_prepare(struct m0_rt *rt)
{
    if (m0_bus_current == NULL)
        return M0_ERR;
    if (!rt->hooked) {
        m0_loop_add_hook(rt->loop, rt_hook, rt);
        rt->hooked = 1;
    }
    return M0_OK;
}

int m0_rt_start(struct m0_rt *rt, const struct m0_rt_source_ops *src, void *src_ctx)
{
    if (m0_rt_prepare(rt) != M0_OK)
        return M0_ERR;
    rt->endpoint = m0_bus_endpoint(rt->loop_index);
    if (rt->endpoint < 0)
        return M0_ERR;
    rt->bus_fd = m0_bus_current->read_fds[rt->endpoint];
    rt->buf = m0_xmalloc(M0_BUS_MAX_DGRAM + 1);
    /* Events numbered up to now were published before this worker could
     * journal them: a resume from below is not provably whole. And what a
     * publisher lost for our predecessor is not ours to announce. */
    uint64_t newest = m0_bus_last_id();
    m0_registry_raise_floor(rt->reg, newest);
    m0_order_free(&rt->order);
    m0_order_init(&rt->order, newest + 1);
    rt->seen_lost = rt->noticed = m0_bus_lost(rt->endpoint);
    if (rt->watch != NULL)
        rt->watch->start(rt->watch_ctx, rt->endpoint);
    query_start(rt);
    if (src != NULL) {
        /* The source replaces the bus as this loop's events. */
        rt->src = src;
        rt->src_ctx = src_ctx;
        rt->reading = 1;
        return src->start(src_ctx);
    }
    if (m0_loop_add_fd(rt->loop, rt->bus_fd, EPOLLIN, bus_read, rt) == M0_ERR) {
        m0_log_errno("epoll_ctl(bus)");
        return M0_ERR;
    }
    rt->reading = 1;
    return M0_OK;
}

void m0_rt_stop_reading(struct m0_rt *rt)
{
    if (rt->watch != NULL)
        rt->watch->stop(rt->watch_ctx);   /* presence: the worker's part leaves the broker, no more join/leave */
    if (rt->src != NULL) {
        rt->src->stop(rt->src_ctx);
        rt->reading = 0;
    } else if (rt->reading) {
        /* A replacement worker reads this bus next: leave it the events. */
        m0_loop_del_fd(rt->loop, rt->bus_fd);
        rt->reading = 0;
    }
}

void m0_rt_free(struct m0_rt *rt)
{
    if (rt == NULL)
        return;
    if (rt->src != NULL)
        rt->src->free(rt->src_ctx);
    query_stop(rt);
    m0_registry_free(rt->reg);
    m0_order_free(&rt->order);
    free(rt->buf);
    free(rt);
}

int m0_rt_reading(const struct m0_rt *rt)
{
    return rt->reading;
}

uint64_t m0_rt_newest(const void *ctx)
{
    const struct m0_rt *rt = ctx;
    const uint64_t *at = rt != NULL ? __atomic_load_n(&rt->position, __ATOMIC_ACQUIRE) : NULL;
    return at != NULL ? __atomic_load_n(at, __ATOMIC_SEQ_CST) : m0_bus_last_id();
}

void m0_rt_stats(const struct m0_rt *rt, struct m0_rt_stats *out)
{
    *out = rt->st;
    out->late = rt->order.late;
}

struct m0_rt_stats *m0_rt_counters(struct m0_rt *rt)
{
    return &rt->st;
}

size_t m0_rt_top(const struct m0_rt *rt, struct m0_channel_stat *out, size_t max)
{
    return m0_registry_top(rt->reg, out, max);
}

int m0_rt_source_health(const struct m0_rt *rt, struct m0_buf *out)
{
    if (rt->src == NULL || rt->src->health == NULL) {
        m0_buf_puts(out, "null");
        return 0;
    }
    return rt->src->health(rt->src_ctx, out);
}

void m0_rt_source_stats(const struct m0_rt *rt, struct m0_rt_source_stats *out)
{
    memset(out, 0, sizeof *out);
    if (rt->src != NULL && rt->src->stats != NULL)
        rt->src->stats(rt->src_ctx, out);
}

/* ------------------------------------------------------------ the sink */

int m0_rt_subscribe(struct m0_rt *rt, uint32_t slot, uint32_t gen, const char *channel, size_t clen, uint64_t last,
                    uint64_t start)
{
    uint64_t newest = m0_rt_newest(rt);
    int quiet = 0;
    if (!rt->journal)
        m0_registry_raise_floor(rt->reg, newest);   /* no journal: any resume may have missed some */
    /* A list of channels ('\n'-separated) is answered from this loop's
     * journals alone (a source resumes one channel): what they cannot prove
     * whole gets the m0-gap notice. */
    int list = memchr(channel, '\n', clen) != NULL;
    if (rt->src != NULL && !list && last != 0 &&
        (last > newest || !m0_registry_resumable(rt->reg, channel, clen, last))) {
        /* The client's id is ahead of this loop or behind its journal: the
         * source's retention answers (later: the stream starts when its
         * reply arrives). */
        int rc = rt->src->resume(rt->src_ctx, slot, gen, channel, clen, last);
        if (rc != M0_OK && rt->watch != NULL)
            rt->watch->leave(rt->watch_ctx, slot);          /* its sub is forgotten */
        return rc;
    }
    rt->replaying = 1;
    if (last > newest) {
        /* An id we never issued (garbage, or from before a full restart
         * reset the counter): tell the client to resync, start afresh. */
        static const char gap[] = "event: m0-gap\ndata: {\"last_event_id\": null}\n\n";
        const struct m0_rt_event ev = {.kind = M0_RT_NOTICE, .replay = 1, .frame = gap, .n = sizeof gap - 1};
        rt->sink.deliver(rt->sink.ctx, slot, &ev);
        last = 0;
    }
    if (last == 0) {
        /* Events published after the view decided to hold reach it from
         * the journal, even if the bus delivered them before this moment. */
        last = start;
        quiet = 1;
    }
    m0_registry_subscribe(rt->reg, slot, channel, clen, last, quiet, deliver, rt);
    rt->replaying = 0;
    if (rt->watch != NULL && m0_registry_is_subscribed(rt->reg, slot))
        rt->watch->join(rt->watch_ctx, slot, channel, clen, journal_last, rt);
    return M0_OK;
}

void m0_rt_unsubscribe(struct m0_rt *rt, uint32_t slot)
{
    m0_registry_unsubscribe(rt->reg, slot);
    if (rt->watch != NULL)
        rt->watch->leave(rt->watch_ctx, slot);
}

void m0_rt_presence(struct m0_rt *rt, uint32_t slot, const char *sub, size_t slen)
{
    if (rt->watch != NULL)
        rt->watch->sub(rt->watch_ctx, slot, sub, slen);
}

void m0_rt_set_channels(struct m0_rt *rt, uint32_t slot, const char *channel, size_t clen, uint64_t start)
{
    rt->replaying = 1;
    m0_registry_set_channels(rt->reg, slot, channel, clen, start, deliver, rt);
    rt->replaying = 0;
}

/* ---------------------------------------------------------- a source */

void m0_rt_set_position(struct m0_rt *rt, const uint64_t *position)
{
    __atomic_store_n(&rt->position, position, __ATOMIC_RELEASE);
}

void m0_rt_event(struct m0_rt *rt, const char *channel, size_t clen, uint64_t id, const char *frame, size_t flen)
{
    rt->st.received++;
    m0_registry_publish(rt->reg, channel, clen, id, frame, flen, deliver, rt);
    if (rt->watch != NULL)
        rt->watch->event(rt->watch_ctx, channel, clen, id);
}

void m0_rt_lost(struct m0_rt *rt, uint64_t id)
{
    announce_lost(rt, id);
}

void m0_rt_floor(struct m0_rt *rt, uint64_t id)
{
    m0_registry_raise_floor(rt->reg, id);
}

int m0_rt_busy(const struct m0_rt *rt)
{
    return m0_registry_fanout_backlog(rt->reg) >= BUS_BACKLOG;
}

int m0_rt_awaiting(struct m0_rt *rt, uint32_t slot, uint32_t gen)
{
    return slot < rt->nslots && !m0_registry_is_subscribed(rt->reg, slot) &&
           rt->sink.awaiting(rt->sink.ctx, slot, gen);
}

void m0_rt_replay(struct m0_rt *rt, uint32_t slot, const char *p, size_t n)
{
    rt->replaying = 1;
    struct m0_rt_event ev = typed(0, p, n, 1);
    rt->sink.deliver(rt->sink.ctx, slot, &ev);
    rt->replaying = 0;
}

void m0_rt_replay_gap(struct m0_rt *rt, uint32_t slot, uint64_t last, uint64_t from, int unknown)
{
    char gap[160];
    int n = unknown ? snprintf(gap, sizeof gap, "event: m0-gap\ndata: {\"last_event_id\": null}\n\n")
                    : snprintf(gap, sizeof gap,
                               "event: m0-gap\ndata: {\"last_event_id\": %llu, \"replay_from\": %llu}\n\n",
                               (unsigned long long)last, (unsigned long long)from);
    m0_rt_replay(rt, slot, gap, (size_t)n);
}

void m0_rt_join(struct m0_rt *rt, uint32_t slot, uint32_t gen, const char *channel, size_t clen, uint64_t last)
{
    if (rt->sink.awaiting(rt->sink.ctx, slot, gen)) {
        rt->replaying = 1;
        m0_registry_subscribe(rt->reg, slot, channel, clen, last, 0, deliver, rt);
        rt->replaying = 0;
        if (rt->watch != NULL && m0_registry_is_subscribed(rt->reg, slot))
            rt->watch->join(rt->watch_ctx, slot, channel, clen, journal_last, rt);
    }
    m0_rt_settle(rt);
}

void m0_rt_settle(struct m0_rt *rt)
{
    rt->sink.flush(rt->sink.ctx);
}
