/*
 * broker_nats.c — a worker loop's side of the NATS JetStream engine (see
 * broker_engine.h, broker_nats.h, docs/broker.md "NATS JetStream"):
 * the source of events the realtime engine reads (rt.h) in place of the
 * local bus.
 *
 * The loop watches its link's eventfd (broker_nats_link.c) and takes, in
 * order, what the link's thread and libnats's callbacks queued: events
 * read by the ordered consumer (each a stream sequence: the event's global
 * id), the connection lost and back, the reader's position, the stream's
 * state once a second, resumes answered. It never calls libnats: every
 * blocking call is the link thread's, so a slow, paused or dead NATS
 * server never holds the loop.
 *
 *   events    in id order; an id that does not follow the previous one means
 *             the stream no longer had the ones between (trimmed per channel
 *             by --broker-retention or in all by --broker-backlog while this
 *             reader was away): live streams get m0-gap. While fan-outs are
 *             backed up the loop stops taking them (they wait in the link's
 *             queue, then in the stream: see the link).
 *   resumes   a Last-Event-ID the worker's journal cannot prove whole goes to
 *             the link, which reads the channel's history from the stream;
 *             the answer is replayed as the Redis engine's is (broker.c):
 *             m0-gap first when something after the id is no longer kept,
 *             then the events, then the stream joins.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/epoll.h>

#include "m0/broker_engine.h"
#include "m0/broker_grip.h"
#include "m0/config.h"
#include "m0/fork.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/natsjs.h"
#include "m0/rt.h"
#include "broker_nats.h"

#define MAX_WAITING 1024            /* resumes waiting or in flight; beyond, 503 */

/* Per process, written once by m0_broker_nats_prepare before the loop runs
 * and read-only afterwards: where the stream stood at boot. */
static int boot_known;
static uint64_t boot_position;

struct nsrc {
    struct m0_rt *rt;
    struct m0_loop *loop;
    const struct m0_broker_cfg *cfg;
    size_t replay_bytes;
    struct m0_nats_link *link;
    int started, stopped;
    int positioned;                 /* the reader's position is known */
    int up;                         /* connected to a server */
    int reading;                    /* the ordered consumer is in place */
    int probe_ok;                   /* the last probe of the stream answered */
    int stalled;                    /* fan-outs backed up: items wait in own, the eventfd is not watched */
    int watching;                   /* the eventfd is watched for EPOLLIN */
    struct m0_nats_item *own, *own_tail;    /* taken from the link, not handled yet */
    struct m0_nats_resume *wait_head, *wait_tail;   /* resumes waiting for the position */
    size_t nwait, inflight;
    uint64_t newest;                /* the stream's newest id, as last probed */
    struct m0_nats_state st;        /* the stream, as last probed */
    char server[256];               /* the server the link is connected to */
    uint64_t reconnects, resumes, resume_gaps, gaps, events;
    char last_error[200];
    char channel[256];              /* scratch: one event's channel */
    struct m0_buf frame;            /* scratch: one event's frame with its id line */
    uint64_t position;              /* newest id read; atomic (runners, the link's thread) */
};

static void set_position(struct nsrc *b, uint64_t id)
{
    __atomic_store_n(&b->position, id, __ATOMIC_SEQ_CST);
}

static uint64_t position(const struct nsrc *b)
{
    return __atomic_load_n(&b->position, __ATOMIC_SEQ_CST);
}

static void note_error(struct nsrc *b, const char *what)
{
    if (strcmp(b->last_error, what) != 0)
        m0_warn("%s", what);
    snprintf(b->last_error, sizeof b->last_error, "%s", what);
}

/* Resumes answer from the stream and join behind the reader: they go to
 * the link once the reader's position is known. */
static void flush_waiting(struct nsrc *b)
{
    if (!b->positioned || b->stopped)
        return;
    while (b->wait_head != NULL) {
        struct m0_nats_resume *r = b->wait_head;
        b->wait_head = r->next;
        b->nwait--;
        b->inflight++;
        b->resumes++;
        m0_nats_link_resume(b->link, r);
    }
    b->wait_tail = NULL;
}

/* The reader knows where it stands (at boot, or when it first connected). */
static void positioned(struct nsrc *b, uint64_t p, int told)
{
    b->positioned = 1;
    if (p > b->newest)
        b->newest = p;
    set_position(b, p);
    m0_rt_floor(b->rt, p);
    if (told) {
        struct m0_rt_stats st;
        m0_rt_stats(b->rt, &st);
        if (p != 0 && st.held > 0)
            m0_rt_lost(b->rt, p);   /* streams held before it could be read may have missed events */
    }
    m0_info("broker %s: reading stream %s after id %llu", b->cfg->shown, m0_nats_stream(), (unsigned long long)p);
    flush_waiting(b);
}

/* ---------------------------------------------------------------- events */

static void take_event(struct nsrc *b, const struct m0_nats_item *it)
{
    if (it->gen != m0_nats_link_gen(b->link))
        return;                     /* an older subscription's: the new one reads it again */
    uint64_t at = position(b);
    if (it->seq <= at)
        return;                     /* already read */
    if (at != 0 && it->seq != at + 1) {
        /* The ids between were issued and the stream no longer has them. */
        b->gaps++;
        m0_rt_lost(b->rt, it->seq - 1);
    }
    set_position(b, it->seq);
    if (it->seq > b->newest)
        b->newest = it->seq;
    b->events++;
    size_t clen;
    if (m0_nats_channel(it->bytes, it->slen, m0_nats_sprefix(), b->channel, sizeof b->channel, &clen) != M0_OK)
        return;                     /* not ours, or oversized: skipped, its id counted */
    m0_broker_entry_frame(&b->frame, it->seq, it->bytes + it->slen, it->dlen);
    m0_rt_event(b->rt, b->channel, clen, it->seq, b->frame.data, b->frame.len);
}

/* --------------------------------------------------------------- resumes */

static void deliver_gap(struct nsrc *b, const struct m0_nats_resume *res, uint64_t last, uint64_t from, int unknown)
{
    b->resume_gaps++;
    m0_rt_replay_gap(b->rt, res->slot, last, from, unknown);
}

/* The link's answer to a resume from res->last: replayed as the Redis
 * engine replays its script's (broker.c, finish_resume). */
static void finish_resume(struct nsrc *b, struct m0_nats_resume *res)
{
    if (!m0_rt_awaiting(b->rt, res->slot, res->gen))
        return;                     /* the client left meanwhile */
    if (res->rc != M0_OK) {
        /* The stream could not answer: resync from now. */
        note_error(b, res->why);
        uint64_t at = position(b);
        deliver_gap(b, res, res->last, at + 1, 0);
        m0_rt_join(b->rt, res->slot, res->gen, res->channel, res->clen, at);
        return;
    }
    if (res->last > res->top) {
        /* An id the stream never issued: resync, start from now. */
        deliver_gap(b, res, 0, 0, 1);
        m0_rt_join(b->rt, res->slot, res->gen, res->channel, res->clen, res->top);
        return;
    }
    int whole = res->found && res->total <= (size_t)b->cfg->retention && res->n == res->total;
    uint64_t oldest = res->n > 0 ? res->seq[0] : res->top + 1;
    if (!whole)
        deliver_gap(b, res, res->last, oldest, 0);
    uint64_t through = res->last;
    for (size_t i = 0; i < res->n; i++) {
        if (res->seq[i] <= through)
            continue;
        m0_broker_entry_frame(&b->frame, res->seq[i], res->frames.data + res->off[i], res->len[i]);
        m0_rt_replay(b->rt, res->slot, b->frame.data, b->frame.len);
        through = res->seq[i];
    }
    /* Nothing of this channel is between the last replayed event and top. */
    m0_rt_join(b->rt, res->slot, res->gen, res->channel, res->clen, through > res->top ? through : res->top);
}

/* The engine's resume (rt.h, struct m0_rt_source_ops.resume). */
static int nats_resume(void *ctx, uint32_t slot, uint32_t gen, const char *channel, size_t clen, uint64_t last_id)
{
    struct nsrc *b = ctx;
    if (b->stopped || b->nwait + b->inflight >= MAX_WAITING)
        return M0_ERR;
    struct m0_nats_resume *r = m0_xcalloc(sizeof *r + clen);
    r->slot = slot;
    r->gen = gen;
    r->last = last_id;
    r->clen = clen;
    memcpy(r->channel, channel, clen);
    if (b->wait_tail != NULL)
        b->wait_tail->next = r;
    else
        b->wait_head = r;
    b->wait_tail = r;
    b->nwait++;
    flush_waiting(b);
    return M0_OK;
}

/* ------------------------------------------------------------ the queue */

static void handle(struct nsrc *b, struct m0_nats_item *it)
{
    switch (it->kind) {
    case M0_NI_MSG:
        take_event(b, it);
        break;
    case M0_NI_UP:
        m0_info("broker %s: connected to %s", b->cfg->shown, it->bytes);
        if (b->server[0] != '\0')
            b->reconnects++;
        b->up = 1;
        snprintf(b->server, sizeof b->server, "%s", it->bytes);
        break;
    case M0_NI_DOWN:
        if (b->up)
            m0_warn("broker %s: connection to %s lost (reconnecting)", b->cfg->shown, b->server);
        b->up = 0;
        break;
    case M0_NI_POSITIONED:
        if (!b->positioned)
            positioned(b, it->seq, 1);
        break;
    case M0_NI_READING:
        b->reading = 1;
        b->last_error[0] = '\0';
        break;
    case M0_NI_PROBE:
        b->probe_ok = it->seq == 0;
        if (b->probe_ok) {
            b->st = it->st;
            if (it->st.last > b->newest)
                b->newest = it->st.last;
            if (b->up && b->reading && strncmp(b->last_error, "broker", 6) == 0)
                b->last_error[0] = '\0';    /* the stream answers again */
        } else {
            b->st.leader[0] = '\0';
            note_error(b, it->bytes);
        }
        break;
    case M0_NI_REWOUND:
        m0_warn("broker %s: stream %s was deleted and made anew (its newest id is %llu; this worker had read "
                "%llu): live streams are told (m0-gap), and its ids are read from there", b->cfg->shown,
                m0_nats_stream(), (unsigned long long)it->seq, (unsigned long long)position(b));
        b->gaps++;
        m0_rt_lost(b->rt, position(b));
        set_position(b, it->seq);
        b->newest = it->seq;
        break;
    case M0_NI_ERROR:
        note_error(b, it->bytes);
        break;
    case M0_NI_RESUME:
        b->inflight--;
        finish_resume(b, it->res);
        break;
    }
}

/* Watch the link's eventfd, or not (stalled, stopped). */
static void watch(struct nsrc *b, int on)
{
    if (on == b->watching)
        return;
    if (on)
        m0_loop_mod_fd(b->loop, m0_nats_link_fd(b->link), EPOLLIN);
    else
        m0_loop_mod_fd(b->loop, m0_nats_link_fd(b->link), 0);
    b->watching = on;
}

/* Handle what was taken, in order, until fan-outs back up: then the
 * eventfd is not watched, so what the link reads waits in its queue (and,
 * once that is full, in the stream) instead of in this loop's memory. */
static void drain(struct nsrc *b)
{
    while (b->own != NULL && !b->stopped) {
        if (b->own->kind == M0_NI_MSG && m0_rt_busy(b->rt)) {
            b->stalled = 1;
            m0_nats_link_stalled(b->link, 1);
            watch(b, 0);
            break;
        }
        struct m0_nats_item *it = b->own;
        b->own = it->next;
        if (b->own == NULL)
            b->own_tail = NULL;
        handle(b, it);
        if (it->res != NULL)
            m0_nats_resume_free(it->res);
        free(it);
    }
    if (b->own == NULL && b->stalled) {
        b->stalled = 0;
        m0_nats_link_stalled(b->link, 0);
        if (!b->stopped)
            watch(b, 1);            /* what waits in the link's queue: the next pass */
    }
    m0_rt_settle(b->rt);
    if (b->frame.cap > 256 * 1024)
        m0_buf_free(&b->frame);
}

static void on_link(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    struct nsrc *b = ctx;
    (void)l;
    (void)fd;
    (void)events;
    if (b->stopped || b->stalled)
        return;
    struct m0_nats_item *got = m0_nats_link_take(b->link);
    if (got != NULL) {
        if (b->own_tail != NULL)
            b->own_tail->next = got;
        else
            b->own = got;
        struct m0_nats_item *t = got;
        while (t->next != NULL)
            t = t->next;
        b->own_tail = t;
    }
    drain(b);
}

static void nats_hook(struct m0_loop *l, void *ctx)
{
    struct nsrc *b = ctx;
    (void)l;
    if (!b->stopped && b->stalled && !m0_rt_busy(b->rt))
        drain(b);
}

/* ------------------------------------------------------------- lifecycle */

void m0_broker_nats_prepare(void)
{
    char err[400];
    /* Before the loop runs: the stream made or brought to this server's
     * settings, and where it stands, so the reader starts there. */
    int rc = m0_broker_nats_counter(&boot_position, err, sizeof err);
    boot_known = rc == M0_OK;
    if (rc != M0_OK)
        m0_debug("%s (the worker reads the stream once it connects)", err);
}

static void close_in_child(void *ctx)
{
    struct nsrc *b = ctx;
    if (b->link != NULL)
        m0_nats_link_close_in_child(b->link);
}

void *m0_broker_nats_new(struct m0_rt *rt, struct m0_loop *l, const struct m0_config *cfg)
{
    struct nsrc *b = m0_xcalloc(sizeof *b);
    b->rt = rt;
    b->loop = l;
    b->replay_bytes = (size_t)cfg->replay_bytes;
    b->cfg = m0_broker;
    return b;
}

/* Begin (rt.h, start): the link's thread connects and reads. */
static int nats_start(void *ctx)
{
    struct nsrc *b = ctx;
    char err[200];
    set_position(b, 0);
    m0_rt_set_position(b->rt, &b->position);
    if (boot_known)
        positioned(b, boot_position, 0);
    b->link = m0_nats_link_new(boot_known, boot_position, &b->position, b->cfg->retention, b->replay_bytes, err,
                               sizeof err);
    if (b->link == NULL) {
        m0_error("broker %s: %s", b->cfg->shown, err);
        return M0_ERR;
    }
    if (m0_loop_add_fd(b->loop, m0_nats_link_fd(b->link), EPOLLIN, on_link, b) != M0_OK) {
        m0_log_errno("epoll_ctl(broker)");
        return M0_ERR;
    }
    b->watching = 1;
    m0_loop_add_hook(b->loop, nats_hook, b);
    m0_fork_on_child(close_in_child, b);
    b->started = 1;
    return M0_OK;
}

/* Drain (rt.h, stop): stop reading and answering resumes; the link's
 * thread leaves on its own (nothing here waits for it). */
static void nats_stop(void *ctx)
{
    struct nsrc *b = ctx;
    if (b->stopped)
        return;
    b->stopped = 1;
    if (b->link != NULL) {
        watch(b, 0);                /* what the link still posts is not taken (nor spun on) */
        m0_nats_link_stop(b->link);
    }
    while (b->wait_head != NULL) {
        struct m0_nats_resume *r = b->wait_head;
        b->wait_head = r->next;
        m0_nats_resume_free(r);
    }
    b->wait_tail = NULL;
    b->nwait = 0;
}

static void nats_free(void *ctx)
{
    struct nsrc *b = ctx;
    nats_stop(b);
    m0_fork_forget(b);
    if (b->link != NULL) {
        if (b->started)
            m0_loop_del_fd(b->loop, m0_nats_link_fd(b->link));
        m0_nats_link_free(b->link);
    }
    while (b->own != NULL) {
        struct m0_nats_item *it = b->own;
        b->own = it->next;
        if (it->res != NULL)
            m0_nats_resume_free(it->res);
        free(it);
    }
    m0_buf_free(&b->frame);
    free(b);
}

static int healthy(const struct nsrc *b)
{
    return b->up && b->reading && b->probe_ok && (b->st.leader[0] != '\0' || b->st.standalone);
}

/* Where writes go: the stream's leader (a server's name), or, on one
 * server without clustering, that server (HOST:PORT); "" while not known. */
static void primary_of(const struct nsrc *b, char *out, size_t cap)
{
    const char *url = b->server;
    if (strncmp(url, "nats://", 7) == 0)
        url += 7;
    snprintf(out, cap, "%s", b->st.standalone && b->probe_ok ? url : b->st.leader);
}

/* The /health "broker" object (rt.h, health); 1 when connected, reading
 * and the stream has a leader. */
static int nats_health(const void *ctx, struct m0_buf *out)
{
    const struct nsrc *b = ctx;
    int connected = healthy(b);
    uint64_t at = position(b);
    m0_buf_puts(out, "{\"engine\": \"nats\", \"url\": ");
    m0_buf_json_str(out, b->cfg->shown, strlen(b->cfg->shown));
    m0_buf_puts(out, ", \"stream\": ");
    m0_buf_json_str(out, m0_nats_stream(), strlen(m0_nats_stream()));
    char primary[280];
    primary_of(b, primary, sizeof primary);
    m0_buf_puts(out, ", \"primary\": ");
    m0_buf_json_str(out, primary, strlen(primary));
    m0_buf_puts(out, ", \"server\": ");
    m0_buf_json_str(out, b->up ? b->server : "", b->up ? strlen(b->server) : 0);
    m0_buf_printf(out, ", \"replicas\": %d, \"replicas_current\": %d, \"connected\": %s, \"reader\": \"%s\"",
                  b->st.replicas, b->probe_ok ? b->st.current : 0, connected ? "true" : "false",
                  b->reading && b->up ? "up" : b->up ? "connecting" : "down");
    m0_broker_health_reading(out, &(struct m0_broker_reading){
        .at = at, .newest = b->newest, .events = b->events, .gaps = b->gaps, .reconnects = b->reconnects,
        .resumes = b->resumes, .resume_gaps = b->resume_gaps, .inflight = b->inflight, .waiting = b->nwait,
        .waiting_max = MAX_WAITING});
    m0_buf_puts(out, ", \"last_error\": ");
    m0_buf_json_str(out, b->last_error, strlen(b->last_error));
    m0_buf_puts(out, "}");
    return connected;
}

static void nats_stats(const void *ctx, struct m0_rt_source_stats *out)
{
    const struct nsrc *b = ctx;
    uint64_t at = position(b);
    out->up = healthy(b);
    out->lag = b->newest > at ? b->newest - at : 0;
    out->reconnects = b->reconnects;
    out->engine = "nats";
    primary_of(b, out->primary, sizeof out->primary);
}

const struct m0_rt_source_ops m0_broker_nats_source = {
    .name = "broker",
    .start = nats_start,
    .stop = nats_stop,
    .free = nats_free,
    .resume = nats_resume,
    .health = nats_health,
    .stats = nats_stats,
};
