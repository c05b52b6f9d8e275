/*
 * loop.c — the worker's event loop and its HTTP/1.1 connections.
 *
 * One epoll instance, level-triggered, owned by the loop thread. Every
 * connection is a slot in a table allocated at start; epoll data carries
 * (generation << 32 | slot), so an event for a slot that was closed and
 * reused within the same batch is recognised as stale and dropped (the
 * nginx "instance bit", widened). Jobs name connections the same way.
 *
 * A connection's life (enum m0_conn_state):
 *
 *   READ_HEAD ──head──▶ READ_BODY ──message──▶ DISPATCHED ──runner──▶ WRITE
 *       ▲                                                               │
 *       └───────────── keep-alive (pipelined bytes parsed at once) ◀────┤
 *                                                     close ──▶ LINGER ─┴─▶ CLOSING
 *
 * Rules that keep it correct:
 *   - Only READ_* states read from the socket; while a request is being
 *     served, further pipelined bytes wait in the kernel, so a client that
 *     pipelines without reading cannot grow our buffers (RFC 9112 §9.3.2:
 *     responses go out in request order because requests are taken one at
 *     a time).
 *   - Responses are written directly; EPOLLOUT is armed only for leftovers.
 *   - A runner streams a long body in credit-sized pieces: it is resumed only
 *     once what it queued has been written.
 *   - Closing never frees under our feet: the slot's generation is bumped
 *     at once (stale events drop) and the slot returns to the free list at
 *     the end of the event batch.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "m0/bus.h"
#include "m0/config.h"
#include "m0/health.h"
#include "m0/http.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/pool.h"
#include "m0/py.h"
#include "m0/registry.h"
#include "m0/response.h"
#include "m0/sse.h"
#include "m0/timer.h"
#include "m0/wsgi.h"

enum m0_conn_state {
    M0_CONN_FREE,        /* slot unused, on the free list */
    M0_CONN_READ_HEAD,   /* idle keep-alive, or reading a request head */
    M0_CONN_READ_BODY,   /* head parsed; reading the body */
    M0_CONN_DISPATCHED,  /* the job belongs to a runner */
    M0_CONN_WRITE,       /* writing the response; the runner may owe more */
    M0_CONN_HELD_SSE,    /* an SSE stream held by the loop: fed by the registry */
    M0_CONN_LINGER,      /* response sent; discarding input before closing */
    M0_CONN_CLOSING,     /* fd closed; slot released at the end of the batch */
    M0_CONN_ORPHAN,      /* fd closed while a runner holds the job: released on completion */
};

#define C_PEER_GONE   0x01u  /* the peer hung up or a write failed */
#define C_MORE        0x02u  /* the runner owes more body once out drains */
#define C_CLOSE_AFTER 0x04u  /* close once the queued bytes are written */
#define C_IN_RUNNER   0x08u  /* a record for this job is on the lane or running */
#define C_SLOW_LOGGED 0x10u  /* --request-timeout already reported this view */
#define C_DOOMED      0x20u  /* to be closed after the current fan-out */
#define C_HEAD_TIMER  0x40u  /* the current request's head timeout is running */

struct m0_conn {
    int fd;
    uint32_t gen;
    uint8_t state;           /* enum m0_conn_state */
    unsigned flags;          /* C_* */
    uint32_t events;         /* epoll interest currently registered */
    uint64_t deadline;       /* ms on the loop clock; 0 = none */
    uint64_t started_us;     /* request start, for the access log */
    struct m0_buf in;        /* bytes read, not yet parsed */
    struct m0_http http;
    struct m0_job *job;      /* allocated on first use, kept for the slot */
    struct m0_buf outbox;    /* held stream: event bytes not yet written */
    uint64_t last_write;     /* held stream: loop clock of the last write (heartbeats) */
    size_t allowance;        /* replay bytes still queued: allowed past --outbox-limit */
    struct m0_conn *prev, *next;   /* active list, for timeout sweeps */
    struct m0_conn *next_free;     /* free list / release list */
    struct m0_conn *next_doomed;   /* doomed list (a conn can be on it and then closed) */
};

struct m0_loop {
    const struct m0_config *cfg;
    int ep;
    int listen_fd;
    int sig_fd;
    int reserve_fd;          /* spare descriptor for the EMFILE trick */
    struct m0_conn *conns;
    struct m0_job **jobs;    /* slot → job, shared read-only with the pool */
    uint32_t nconns;
    struct m0_pool *pool;    /* NULL: the application runs on this thread */
    struct m0_conn *free_list;
    struct m0_conn *release_list;
    struct m0_conn active;   /* sentinel of the active list */
    uint32_t nactive;
    uint64_t now;            /* cached loop clock, ms */
    uint64_t next_sweep;
    uint64_t drain_deadline; /* 0 unless draining */
    uint64_t next_refusal_log;
    int draining;
    int stop_now;
    uint64_t keepalive_ms, header_ms, body_ms, write_ms, request_ms;

    /* --realtime */
    struct m0_registry *reg;
    int bus_fd;              /* this worker's bus read end, or -1 */
    char *bus_buf;           /* one datagram */
    uint64_t heartbeat_ms;
    size_t outbox_limit;
    struct m0_conn *doomed;  /* closed after the current fan-out */
    int replaying;           /* inside m0_registry_subscribe: replay allowance */
    uint32_t nheld;
    uint64_t published, delivered, slow_closed, next_slow_log;
    const char *health_path;
    size_t health_len;
};

#define TAG_LISTEN 0xffffffffu
#define TAG_SIGNAL 0xfffffffeu
#define TAG_POOL   0xfffffffdu
#define TAG_BUS    0xfffffffcu
#define READ_CHUNK (16 * 1024)
#define READS_PER_WAKEUP 8
#define SWEEP_MS 200
#define FANOUT_BUDGET 1024

static void conn_process(struct m0_loop *l, struct m0_conn *c);
static void conn_parse(struct m0_loop *l, struct m0_conn *c);
static void conn_flush(struct m0_loop *l, struct m0_conn *c);
static void access_log(struct m0_loop *l, struct m0_conn *c);

static uint64_t tag(uint32_t slot, uint32_t gen)
{
    return ((uint64_t)gen << 32) | slot;
}

static uint32_t slot_of(struct m0_loop *l, struct m0_conn *c)
{
    return (uint32_t)(c - l->conns);
}

static void set_interest(struct m0_loop *l, struct m0_conn *c, uint32_t events)
{
    if (c->events == events)
        return;
    struct epoll_event ev = {.events = events, .data.u64 = tag(slot_of(l, c), c->gen)};
    if (epoll_ctl(l->ep, EPOLL_CTL_MOD, c->fd, &ev) == -1)
        m0_log_errno("epoll_ctl(MOD, fd %d)", c->fd);
    c->events = events;
}

static void active_add(struct m0_loop *l, struct m0_conn *c)
{
    c->next = l->active.next;
    c->prev = &l->active;
    l->active.next->prev = c;
    l->active.next = c;
    l->nactive++;
}

static void active_del(struct m0_loop *l, struct m0_conn *c)
{
    c->prev->next = c->next;
    c->next->prev = c->prev;
    c->prev = c->next = NULL;
    l->nactive--;
}

/* ------------------------------------------------------------ lifecycle */

/* Release the runner's Python state for a job whose connection is gone.
 * Returns 1 if that happens asynchronously (the slot must wait). */
static int abandon_job(struct m0_loop *l, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    if (!(c->flags & C_MORE) && job->app_result == NULL && job->app_iter == NULL)
        return 0;
    c->flags &= ~C_MORE;
    if (l->pool != NULL) {
        c->flags |= C_IN_RUNNER;
        m0_pool_submit(l->pool, slot_of(l, c), c->gen, M0_RUN_ABANDON);
        return 1;
    }
    m0_py_attach();
    m0_wsgi_abandon(job);
    m0_py_detach();
    return 0;
}

static void conn_close(struct m0_loop *l, struct m0_conn *c)
{
    if (c->state == M0_CONN_CLOSING || c->state == M0_CONN_FREE || c->state == M0_CONN_ORPHAN)
        return;
    if (l->reg != NULL)
        m0_registry_unsubscribe(l->reg, slot_of(l, c));
    if (c->state == M0_CONN_HELD_SSE)
        l->nheld--;
    m0_buf_free(&c->outbox);
    close(c->fd);      /* also removes it from the epoll set */
    c->fd = -1;
    c->gen++;          /* every queued event for this slot is now stale */
    active_del(l, c);
    /* A job on the lane or in a pool thread keeps its slot until it comes
     * back: the slot is never reused under a runner's feet. One that has
     * not started yet never will: nobody is left to answer. */
    if (c->flags & C_IN_RUNNER) {
        int queued = M0_JOB_QUEUED;
        atomic_compare_exchange_strong(&c->job->run_state, &queued, M0_JOB_CANCELLED);
    }
    if ((c->flags & C_IN_RUNNER) || abandon_job(l, c)) {
        c->state = M0_CONN_ORPHAN;
        return;
    }
    c->state = M0_CONN_CLOSING;
    c->next_free = l->release_list;
    l->release_list = c;
}

/* Return closed slots to the free list; runs after each event batch. */
static void release_closed(struct m0_loop *l)
{
    while (l->release_list != NULL) {
        struct m0_conn *c = l->release_list;
        l->release_list = c->next_free;
        m0_buf_free(&c->in);
        m0_buf_free(&c->outbox);
        c->allowance = 0;
        m0_http_next(&c->http);          /* resets the request too */
        m0_resp_reset(&c->job->resp);
        c->state = M0_CONN_FREE;
        c->flags = 0;
        c->deadline = 0;
        c->next_free = l->free_list;
        l->free_list = c;
    }
}

static void conn_go_idle(struct m0_loop *l, struct m0_conn *c)
{
    c->state = M0_CONN_READ_HEAD;
    c->deadline = l->now + l->keepalive_ms;
    set_interest(l, c, EPOLLIN | EPOLLRDHUP);
}

static void on_accept(struct m0_loop *l)
{
    for (int i = 0; i < 64; i++) {
        union {
            struct sockaddr sa;
            struct sockaddr_in in4;
            struct sockaddr_in6 in6;
            struct sockaddr_un un;
        } addr;
        socklen_t alen = sizeof addr;
        int fd = accept4(l->listen_fd, &addr.sa, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd == -1) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
                return;
            if ((errno == EMFILE || errno == ENFILE) && l->reserve_fd != -1) {
                /* Out of descriptors: free the spare one, take the pending
                 * connection and close it, so the client gets a prompt
                 * close instead of waiting in the backlog forever. */
                close(l->reserve_fd);
                int tmp = accept4(l->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (tmp != -1)
                    close(tmp);
                l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (l->now >= l->next_refusal_log) {
                    m0_warn("out of file descriptors (%u connections open): refusing new connections "
                            "(raise ulimit -n)", l->nactive);
                    l->next_refusal_log = l->now + 1000;
                }
                return;
            }
            m0_log_errno("accept4");
            return;
        }
        struct m0_conn *c = l->free_list;
        if (c == NULL) {
            close(fd);
            if (l->now >= l->next_refusal_log) {   /* at most one line a second */
                m0_warn("all %u connection slots busy: refusing connections (see --max-connections)", l->nconns);
                l->next_refusal_log = l->now + 1000;
            }
            continue;
        }
        l->free_list = c->next_free;
        c->fd = fd;
        c->flags = 0;
        c->events = EPOLLIN | EPOLLRDHUP;
        struct m0_job *job = c->job;
        if (job == NULL) {
            job = c->job = m0_xmalloc(sizeof *job);
            memset(job, 0, sizeof *job);
            m0_req_init(&job->req);
            m0_resp_init(&job->resp);
            m0_http_init(&c->http, &job->req, &l->cfg->limits);
            l->jobs[slot_of(l, c)] = job;
        }
        job->slot = slot_of(l, c);
        job->gen = c->gen;
        if (addr.sa.sa_family == AF_INET) {
            inet_ntop(AF_INET, &addr.in4.sin_addr, job->remote_addr, sizeof job->remote_addr);
            job->remote_port = ntohs(addr.in4.sin_port);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        } else if (addr.sa.sa_family == AF_INET6) {
            inet_ntop(AF_INET6, &addr.in6.sin6_addr, job->remote_addr, sizeof job->remote_addr);
            job->remote_port = ntohs(addr.in6.sin6_port);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        } else {
            job->remote_addr[0] = '\0';
            job->remote_port = 0;
        }
        struct epoll_event ev = {.events = c->events, .data.u64 = tag(job->slot, c->gen)};
        if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) == -1) {
            m0_log_errno("epoll_ctl(ADD)");
            close(fd);
            c->next_free = l->free_list;
            l->free_list = c;
            continue;
        }
        active_add(l, c);
        c->state = M0_CONN_READ_HEAD;
        c->deadline = l->now + l->header_ms;
        c->flags |= C_HEAD_TIMER;
        /* Optimistic read: the request usually arrives with the SYN's ACK. */
        conn_process(l, c);
    }
}

/* ---------------------------------------------------------- held streams */

/* Write a held stream's outbox. Returns M0_OK (all out), M0_AGAIN (EPOLLOUT
 * armed) or M0_ERR (the client is gone). */
static int held_flush(struct m0_loop *l, struct m0_conn *c)
{
    while (m0_buf_unread(&c->outbox) > 0) {
        ssize_t w = send(c->fd, c->outbox.data + c->outbox.off, m0_buf_unread(&c->outbox),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w == -1) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                set_interest(l, c, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
                return M0_AGAIN;
            }
            return M0_ERR;
        }
        m0_buf_consume(&c->outbox, (size_t)w);
        c->allowance = c->allowance > (size_t)w ? c->allowance - (size_t)w : 0;
        c->last_write = l->now;
    }
    c->allowance = 0;
    if (c->outbox.cap > 16 * 1024)
        m0_buf_free(&c->outbox);     /* a burst's buffer is not kept idle */
    set_interest(l, c, EPOLLIN | EPOLLRDHUP);
    return M0_OK;
}

static void doom(struct m0_loop *l, struct m0_conn *c)
{
    if (c->flags & C_DOOMED)
        return;
    c->flags |= C_DOOMED;
    c->next_doomed = l->doomed;
    l->doomed = c;
}

/* Close what a fan-out doomed. A doomed connection may have been closed by
 * another path meanwhile (conn_close is a no-op then); its own link field
 * keeps this list apart from the free and release lists. */
static void close_doomed(struct m0_loop *l)
{
    while (l->doomed != NULL) {
        struct m0_conn *c = l->doomed;
        l->doomed = c->next_doomed;
        c->next_doomed = NULL;
        c->flags &= ~C_DOOMED;
        conn_close(l, c);
    }
}

/* Queue bytes on a held (or about to be held) stream: written at once when
 * nothing is waiting, else appended to a bounded outbox. A subscriber that
 * falls more than --outbox-limit behind is closed; it reconnects and
 * resumes with Last-Event-ID, and the worker's memory stays bounded. */
static void held_send(struct m0_loop *l, struct m0_conn *c, const char *p, size_t n)
{
    if (c->flags & C_DOOMED)
        return;
    if (c->state == M0_CONN_HELD_SSE && m0_buf_unread(&c->outbox) == 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w == (ssize_t)n) {
            c->last_write = l->now;
            return;
        }
        if (w == -1 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            doom(l, c);
            return;
        }
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            c->last_write = l->now;
        }
        m0_buf_append(&c->outbox, p, n);
        set_interest(l, c, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
        return;
    }
    /* A resume's replay may exceed the limit by the journal's size: it is
     * bounded by --replay-bytes, and refusing it would only make the client
     * reconnect and ask again. */
    if (l->replaying) {
        c->allowance += n;     /* bounded by --replay-bytes per channel */
    } else if (m0_buf_unread(&c->outbox) + n > l->outbox_limit + c->allowance) {
        l->slow_closed++;
        if (l->now >= l->next_slow_log) {
            m0_warn("closing a held stream more than %zu bytes behind (slow subscriber)", l->outbox_limit);
            l->next_slow_log = l->now + 1000;
        }
        doom(l, c);
        return;
    }
    m0_buf_append(&c->outbox, p, n);
}

/* Registry delivery callback. */
static void deliver(void *ctx, uint32_t slot, const char *p, size_t n)
{
    struct m0_loop *l = ctx;
    l->delivered++;
    held_send(l, &l->conns[slot], p, n);
}

/* The head and the view's body are out: the slot becomes a held stream.
 * Everything per-request is released — a held stream costs the slot, its
 * job struct and a registry link, and no Python object at all. */
static void enter_held(struct m0_loop *l, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    if (l->cfg->access_log)
        access_log(l, c);
    c->state = M0_CONN_HELD_SSE;
    c->deadline = 0;
    c->last_write = l->now;
    l->nheld++;
    m0_req_free(&job->req);
    m0_req_init(&job->req);
    m0_http_free(&c->http);
    m0_buf_free(&c->in);
    m0_resp_reset(&job->resp);
    m0_buf_free(&job->resp.out);
    m0_buf_free(&job->pending);
    if (held_flush(l, c) == M0_ERR)
        conn_close(l, c);
}

static void held_read(struct m0_loop *l, struct m0_conn *c)
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
        conn_close(l, c);  /* EOF or error: the client left; unsubscribe now */
        return;
    }
}

/* Subscribe a slot (resume from last_id), replay included. */
static void subscribe(struct m0_loop *l, uint32_t slot, const char *channel, size_t len, uint64_t last_id)
{
    uint64_t newest = m0_bus_last_id();
    m0_registry_raise_floor(l->reg, m0_bus_lost(m0_bus_index));
    if (l->cfg->replay == 0)
        m0_registry_raise_floor(l->reg, newest);   /* no journal: any resume may have missed some */
    l->replaying = 1;
    if (last_id > newest) {
        /* An id we never issued (garbage, or from before a full restart
         * reset the counter): tell the client to resync, start afresh. */
        static const char gap[] = "event: m0-gap\ndata: {\"last_event_id\": null}\n\n";
        held_send(l, &l->conns[slot], gap, sizeof gap - 1);
        last_id = 0;
    }
    m0_registry_subscribe(l->reg, slot, channel, len, last_id, deliver, l);
    l->replaying = 0;
}

/* A pool thread's hold frame: subscribe the slot it names, if that request
 * is still the one in flight there. */
static void on_hold_frame(struct m0_loop *l, const struct m0_bus_msg *m)
{
    if (m->slot >= l->nconns || m->pid != (uint32_t)getpid() || l->draining)
        return;     /* another generation's frame (a SIGHUP shares the bus), or we are leaving */
    struct m0_conn *c = &l->conns[m->slot];
    if (c->gen != m->gen || c->state != M0_CONN_DISPATCHED || m0_registry_is_subscribed(l->reg, m->slot))
        return;
    subscribe(l, m->slot, m->channel, m->channel_len, m->id);
}

static void bus_drain(struct m0_loop *l)
{
    if (l->bus_fd == -1)
        return;
    for (int i = 0; i < 512; i++) {
        /* Events wait in the bus (publishers feel the backpressure) rather
         * than pile up here while earlier fan-outs are still in progress. */
        if (m0_registry_fanout_backlog(l->reg) >= 256)
            break;
        ssize_t n = recv(l->bus_fd, l->bus_buf, M0_BUS_MAX_DGRAM, MSG_DONTWAIT | MSG_TRUNC);
        if (n == -1) {
            if (errno == EINTR)
                continue;
            break;
        }
        struct m0_bus_msg m;
        if (n > M0_BUS_MAX_DGRAM || m0_bus_decode(l->bus_buf, (size_t)n, &m) != M0_OK ||
            m0_sse_channel_error(m.channel, m.channel_len) != NULL)
            continue;      /* malformed, oversized or a reserved name: drop */
        if (m.kind == 'h') {
            on_hold_frame(l, &m);
            continue;
        }
        l->published++;
        m0_registry_publish(l->reg, m.channel, m.channel_len, m.id, m.payload, m.payload_len, deliver, l);
    }
    close_doomed(l);
}

/* ------------------------------------------------------------ responses */

/* Queue a C-generated error and close after it is written. */
static void conn_error(struct m0_loop *l, struct m0_conn *c, int status, const char *reason)
{
    struct m0_job *job = c->job;
    m0_debug("slot %u: %d %s", job->slot, status, reason);
    m0_error_response(&job->resp.out, status, reason, 1, (job->req.flags & M0_REQ_HEAD) != 0);
    job->resp.status = status;
    job->resp.flags |= M0_RESP_HEAD_SENT | M0_RESP_DONE | M0_RESP_CLOSE;
    c->state = M0_CONN_WRITE;
    c->deadline = l->now + l->write_ms;
    if (l->cfg->access_log)
        m0_log_access(job->remote_addr[0] ? job->remote_addr : "-", job->req.method ? job->req.method : "-",
                      job->req.target ? job->req.target : "-", job->req.http_minor, status, 0, NULL, NULL, 0);
    conn_flush(l, c);
}

static void access_log(struct m0_loop *l, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    const struct m0_hdr *ref = m0_req_header(&job->req, "referer");
    const struct m0_hdr *ua = m0_req_header(&job->req, "user-agent");
    uint64_t now_us = m0_clock_ms() * 1000;
    (void)l;
    m0_log_access(job->remote_addr[0] ? job->remote_addr : "-", job->req.method, job->req.target,
                  job->req.http_minor, job->resp.status, job->resp.body_bytes,
                  ref ? ref->value : NULL, ua ? ua->value : NULL,
                  now_us > c->started_us ? now_us - c->started_us : 0);
}

/* The response is fully written: keep the connection for the next request
 * (parsing any pipelined bytes at once) or close it. */
static void conn_finish(struct m0_loop *l, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    int keep = !(job->resp.flags & (M0_RESP_CLOSE | M0_RESP_ABORT)) && !(c->flags & C_CLOSE_AFTER) && !l->draining;

    if (l->cfg->access_log && job->req.method != NULL && job->resp.status != 0)
        access_log(l, c);
    if (!keep) {
        /* Unread request bytes would turn our close into an RST that can
         * destroy the response in flight: shut down our side and discard
         * input briefly first (lingering close). */
        shutdown(c->fd, SHUT_WR);
        if (job->resp.flags & M0_RESP_ABORT) {
            conn_close(l, c);
            return;
        }
        c->state = M0_CONN_LINGER;
        c->deadline = l->now + 2000;
        m0_buf_free(&c->in);
        set_interest(l, c, EPOLLIN | EPOLLRDHUP);
        return;
    }
    m0_resp_reset(&job->resp);
    m0_http_next(&c->http);
    if (m0_buf_unread(&c->in) == 0) {
        /* Idle connections shed their read buffer. */
        m0_buf_free(&c->in);
        conn_go_idle(l, c);
        return;
    }
    /* Pipelined bytes are waiting in c->in: the caller parses them
     * (conn_parse loops; the EPOLLOUT path calls it). */
    c->state = M0_CONN_READ_HEAD;
    c->deadline = l->now + l->header_ms;
    set_interest(l, c, EPOLLIN | EPOLLRDHUP);
}

/* Run a job step on this thread (no pool), attached to the interpreter
 * only for the call. Returns the runner's M0_DONE or M0_AGAIN. */
static int run_inline(struct m0_conn *c, enum m0_run_kind kind)
{
    int rc;
    m0_py_attach();
    rc = kind == M0_RUN_RESUME ? m0_wsgi_resume(c->job) : m0_wsgi_start(c->job);
    m0_py_detach();
    return rc;
}

/* A runner produced (part of) the response: write it. */
static void after_run(struct m0_loop *l, struct m0_conn *c, int rc)
{
    struct m0_job *job = c->job;
    if ((job->resp.flags & M0_RESP_HOLD) && !m0_registry_is_subscribed(l->reg, slot_of(l, c))) {
        if (l->draining) {
            /* A worker on its way out holds nothing new (its bus may already
             * be its replacement's): the 503 below sends the client back. */
        } else if (l->pool == NULL) {
            /* (A slot doomed here is closed after the next fan-out or sweep,
             * never under this function's feet.) */
            subscribe(l, slot_of(l, c), job->hold_channel, job->hold_channel_len, job->hold_last_id);
        } else {
            /* The pool thread sent its hold frame before this completion:
             * drain the bus so the subscription precedes the head. */
            bus_drain(l);
            if (c->state != M0_CONN_DISPATCHED)
                return;     /* closed by that drain (a slow subscriber already) */
        }
        if (!m0_registry_is_subscribed(l->reg, slot_of(l, c))) {
            m0_error("hold on %s not registered: answering 503", job->hold_channel);
            m0_resp_reset(&job->resp);
            m0_buf_reset(&c->outbox);
            m0_error_response(&job->resp.out, 503, "The stream could not be held; retry", 1, 0);
            job->resp.status = 503;
            job->resp.flags |= M0_RESP_HEAD_SENT | M0_RESP_DONE | M0_RESP_CLOSE;
        }
    }
    c->state = M0_CONN_WRITE;
    c->deadline = l->now + l->write_ms;
    if (rc == M0_AGAIN)
        c->flags |= C_MORE;
    else
        c->flags &= ~C_MORE;
    conn_flush(l, c);
}

static void conn_dispatch(struct m0_loop *l, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    c->state = M0_CONN_DISPATCHED;
    c->started_us = m0_clock_ms() * 1000;
    c->deadline = 0;
    c->flags &= ~(C_SLOW_LOGGED | C_HEAD_TIMER);
    /* EPOLLIN stays armed while the request is served: a client that waits
     * for its answer sends nothing, so no epoll_ctl is spent here. If bytes
     * do arrive (pipelining, a half-close), the event handler disarms then. */
    job->draining = l->draining;
    if (l->pool != NULL) {
        /* Park the slot; a pool thread takes it from the lane. */
        job->queued_ms = l->now;
        atomic_store(&job->run_state, M0_JOB_QUEUED);
        c->flags |= C_IN_RUNNER;
        m0_pool_submit(l->pool, slot_of(l, c), c->gen, M0_RUN_START);
        return;
    }
    after_run(l, c, run_inline(c, M0_RUN_START));
    if (l->request_ms && m0_clock_ms() * 1000 - c->started_us > l->request_ms * 1000)
        m0_warn("view ran %.1f s (over --request-timeout): %s %s",
                (double)(m0_clock_ms() * 1000 - c->started_us) / 1e6, job->req.method, job->req.target);
}

/* A pool thread finished a step of the slot's job. */
static void on_complete(struct m0_loop *l, const struct m0_completion *done)
{
    if (done->slot >= l->nconns)
        return;
    struct m0_conn *c = &l->conns[done->slot];
    struct m0_job *job = c->job;
    c->flags &= ~C_IN_RUNNER;
    if (c->state == M0_CONN_ORPHAN) {
        /* The client left while the job ran: finish the runner's business,
         * then free the slot. The completion never reaches a new client. */
        if (done->rc == M0_AGAIN || job->app_result != NULL || job->app_iter != NULL) {
            c->flags |= C_IN_RUNNER;
            m0_pool_submit(l->pool, done->slot, done->gen, M0_RUN_ABANDON);
            return;
        }
        c->state = M0_CONN_CLOSING;
        c->next_free = l->release_list;
        l->release_list = c;
        return;
    }
    if (done->kind == M0_RUN_START && atomic_load(&job->run_state) == M0_JOB_CANCELLED)
        return;   /* answered 503 by the loop; the thread never started it */
    if (done->kind == M0_RUN_ABANDON)
        return;
    after_run(l, c, done->rc);
    if (c->state == M0_CONN_WRITE || c->state == M0_CONN_READ_HEAD || c->state == M0_CONN_LINGER) {
        if (c->state == M0_CONN_READ_HEAD && m0_buf_unread(&c->in) > 0)
            conn_parse(l, c);   /* pipelined requests waited their turn */
    }
}

/*
 * Write what the job queued: bytes first, then a file range by sendfile.
 * When everything is out, resume a streaming runner or finish.
 */
static void conn_flush(struct m0_loop *l, struct m0_conn *c)
{
    struct m0_resp *rs = &c->job->resp;

    for (;;) {
        while (m0_buf_unread(&rs->out) > 0) {
            ssize_t w = send(c->fd, rs->out.data + rs->out.off, m0_buf_unread(&rs->out), MSG_NOSIGNAL);
            if (w == -1) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    goto wait_writable;
                c->flags |= C_PEER_GONE;
                conn_close(l, c);
                return;
            }
            m0_buf_consume(&rs->out, (size_t)w);
            c->deadline = l->now + l->write_ms;
        }
        while (rs->file_left > 0) {
            size_t want = rs->file_left > (1u << 30) ? (1u << 30) : (size_t)rs->file_left;
            ssize_t w = sendfile(c->fd, rs->file_fd, &rs->file_off, want);
            if (w == -1) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    goto wait_writable;
                if (errno != EPIPE && errno != ECONNRESET)
                    m0_log_errno("sendfile");
                conn_close(l, c);
                return;
            }
            if (w == 0) {
                /* The file shrank under us: the promised length cannot be met. */
                m0_error("sendfile: file ended %llu bytes early; aborting the response",
                         (unsigned long long)rs->file_left);
                conn_close(l, c);
                return;
            }
            rs->file_left -= (uint64_t)w;
            c->deadline = l->now + l->write_ms;
        }
        if (c->flags & C_MORE) {
            /* Credit returned: ask the runner for the next piece. */
            if (l->pool != NULL) {
                c->flags |= C_IN_RUNNER;
                m0_pool_submit(l->pool, slot_of(l, c), c->gen, M0_RUN_RESUME);
                if (c->events & EPOLLOUT)
                    set_interest(l, c, 0);
                return;
            }
            if (run_inline(c, M0_RUN_RESUME) != M0_AGAIN)
                c->flags &= ~C_MORE;
            continue;
        }
        if (rs->flags & M0_RESP_ABORT) {
            conn_close(l, c);
            return;
        }
        if (rs->flags & M0_RESP_HOLD) {
            if (l->draining) {       /* head out, nothing more will come: end it */
                conn_close(l, c);
                return;
            }
            enter_held(l, c);
            return;
        }
        conn_finish(l, c);
        return;
    }
wait_writable:
    set_interest(l, c, EPOLLOUT);
}

/* ------------------------------------------------------------- requests */

static void conn_read(struct m0_conn *c)
{
    for (int i = 0; i < READS_PER_WAKEUP; i++) {
        char *dst = m0_buf_reserve(&c->in, READ_CHUNK);
        ssize_t n = recv(c->fd, dst, c->in.cap - c->in.len, 0);
        if (n > 0) {
            c->in.len += (size_t)n;
            if ((size_t)n < READ_CHUNK)
                break;
            continue;
        }
        if (n == 0) {
            c->flags |= C_PEER_GONE;
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            c->flags |= C_PEER_GONE;
        return;
    }
}

/* /health, answered here in C: it must stay readable while every Python
 * thread is busy. */
static void answer_health(struct m0_loop *l, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    struct m0_channel_stat top[20];
    size_t ntop = l->reg ? m0_registry_top(l->reg, top, M0_ARRAY_LEN(top)) : 0;
    struct m0_health h = {
        .pid = (int)getpid(),
        .worker = m0_bus_index,
        .connections = l->nactive,
        .held_streams = l->nheld,
        .events_published = l->published,
        .events_delivered = l->delivered,
        .slow_closed = l->slow_closed,
        .pool_threads = l->pool ? m0_pool_size(l->pool) : 0,
        .pool_busy = l->pool ? m0_pool_busy(l->pool) : 0,
        .draining = l->draining,
    };
    struct m0_buf body = {0};
    m0_health_render(&body, &h, top, ntop);
    int head = (job->req.flags & M0_REQ_HEAD) != 0;
    struct m0_head_info hi = {
        .status = 200, .http_minor = job->req.http_minor,
        .keepalive = (job->req.flags & M0_REQ_KEEPALIVE) && !l->draining,
        .head = head, .content_length = -1, .body_len = (int64_t)body.len,
    };
    struct m0_buf *out = &job->resp.out;
    m0_buf_puts(out, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n");
    m0_head_finish(out, &hi, &job->keep);
    if (!job->keep)
        job->resp.flags |= M0_RESP_CLOSE;
    if (!head)
        m0_buf_append(out, body.data, body.len);
    m0_buf_free(&body);
    job->resp.status = 200;
    job->resp.body_bytes = head ? 0 : body.len;
    job->resp.flags |= M0_RESP_HEAD_SENT | M0_RESP_DONE;
    c->started_us = m0_clock_ms() * 1000;
    c->state = M0_CONN_WRITE;
    c->deadline = l->now + l->write_ms;
    conn_flush(l, c);
}

/* Parse buffered bytes as far as they go, serving each complete request
 * in turn (pipelining) while responses complete synchronously. */
static void conn_parse(struct m0_loop *l, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    int head_paused = 0;
    int progressed = m0_buf_unread(&c->in) > 0;

    /* After the head pause the parser needs one more call even with no new
     * bytes: a request without a body completes on it. */
    while (m0_buf_unread(&c->in) > 0 || head_paused) {
        size_t used = 0;
        const char *p = c->in.data ? c->in.data + c->in.off : "";
        head_paused = 0;
        int rc = m0_http_feed(&c->http, p, m0_buf_unread(&c->in), &used);
        m0_buf_consume(&c->in, used);
        if (rc == M0_AGAIN)
            break;
        if (rc == M0_ERR) {
            conn_error(l, c, c->http.status, c->http.reason);
            return;
        }
        if (rc == M0_OK) {
            /* Head complete: decide about the body before reading it. */
            c->state = M0_CONN_READ_BODY;
            c->deadline = l->now + l->body_ms;
            if ((job->req.flags & M0_REQ_EXPECT100) &&
                (job->req.content_length > 0 || (job->req.flags & M0_REQ_CHUNKED))) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                /* Small and first on the wire: a direct send; if the socket
                 * cannot take it, it is queued ahead of the response. */
                ssize_t w = send(c->fd, cont, sizeof cont - 1, MSG_NOSIGNAL);
                if (w < (ssize_t)(sizeof cont - 1))
                    m0_buf_append(&job->resp.out, cont + (w > 0 ? w : 0),
                                  sizeof cont - 1 - (size_t)(w > 0 ? w : 0));
            }
            head_paused = 1;
            continue;
        }
        /* M0_DONE: one whole request. Pipelined bytes stay in c->in. */
        m0_buf_compact(&c->in);
        if (l->health_len != 0 && job->req.path_len == l->health_len &&
            memcmp(job->req.path, l->health_path, l->health_len) == 0)
            answer_health(l, c);
        else
            conn_dispatch(l, c);
        if (c->state != M0_CONN_READ_HEAD)
            return;     /* still writing, lingering or closed */
    }
    if (c->flags & C_PEER_GONE) {
        if (c->state == M0_CONN_READ_BODY || c->http.in_message) {
            /* A truncated request: there is nobody to answer. */
            m0_debug("slot %u: peer closed mid-request", job->slot);
        }
        conn_close(l, c);
        return;
    }
    if (c->state == M0_CONN_READ_HEAD && c->http.in_message && !(c->flags & C_HEAD_TIMER)) {
        /* The first bytes of a request: from now on the head timeout, not
         * what was left of the keep-alive idle time, bounds it. */
        c->flags |= C_HEAD_TIMER;
        c->deadline = l->now + l->header_ms;
    }
    if (c->state == M0_CONN_READ_BODY && progressed)
        c->deadline = l->now + l->body_ms;   /* an idle timeout: any progress restarts it */
    if (m0_buf_unread(&c->in) == 0 && c->in.cap > READ_CHUNK * 2)
        m0_buf_free(&c->in);
}

/* Read what is available, then parse it. */
static void conn_process(struct m0_loop *l, struct m0_conn *c)
{
    conn_read(c);
    conn_parse(l, c);
}

static void conn_linger(struct m0_loop *l, struct m0_conn *c)
{
    char sink[4096];
    for (int i = 0; i < READS_PER_WAKEUP; i++) {
        ssize_t n = recv(c->fd, sink, sizeof sink, 0);
        if (n > 0)
            continue;
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        break;
    }
    conn_close(l, c);
}

static void on_conn_event(struct m0_loop *l, struct m0_conn *c, uint32_t ev)
{
    switch (c->state) {
    case M0_CONN_READ_HEAD:
    case M0_CONN_READ_BODY:
        if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            conn_process(l, c);
        break;
    case M0_CONN_DISPATCHED:
        /* Reported whatever the interest: the client reset the connection
         * while its view runs. Free the descriptor now; the slot waits. */
        if (ev & (EPOLLHUP | EPOLLERR))
            conn_close(l, c);
        else
            set_interest(l, c, 0);   /* input waits its turn (lazy disarm) */
        break;
    case M0_CONN_WRITE:
        if (ev & EPOLLERR) {
            conn_close(l, c);
            break;
        }
        if ((c->flags & C_IN_RUNNER) && atomic_load(&c->job->run_state) != M0_JOB_CANCELLED) {
            if (ev & EPOLLHUP)
                conn_close(l, c);
            else
                set_interest(l, c, 0);
            break;          /* the next piece is being produced */
        }
        if (!(ev & (EPOLLOUT | EPOLLHUP))) {
            set_interest(l, c, c->events & EPOLLOUT);   /* input waits its turn */
            break;
        }
        if (ev & (EPOLLOUT | EPOLLHUP)) {
            conn_flush(l, c);
            if (c->state == M0_CONN_READ_HEAD && m0_buf_unread(&c->in) > 0)
                conn_parse(l, c);
        }
        break;
    case M0_CONN_LINGER:
        conn_linger(l, c);
        break;
    case M0_CONN_HELD_SSE:
        if ((ev & EPOLLOUT) && held_flush(l, c) == M0_ERR) {
            conn_close(l, c);
            break;
        }
        if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            held_read(l, c);
        break;
    default:
        break;
    }
}

/* ------------------------------------------------------------- timeouts */

/* --request-timeout on a pool: a request still queued after S seconds is
 * answered 503 by the loop (if it wins the job from the pool); one already
 * running is reported once with its path. */
static void check_request_timeout(struct m0_loop *l, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    if (l->now - job->queued_ms < l->request_ms)
        return;
    int queued = M0_JOB_QUEUED;
    if (atomic_compare_exchange_strong(&job->run_state, &queued, M0_JOB_CANCELLED)) {
        m0_warn("503 for %s %s: still queued after %.1f s (all %u handler threads busy)", job->req.method,
                job->req.target, (double)l->request_ms / 1000, m0_pool_size(l->pool));
        conn_error(l, c, 503, "No handler thread became free in time (--request-timeout)");
        return;
    }
    if (!(c->flags & C_SLOW_LOGGED)) {
        c->flags |= C_SLOW_LOGGED;
        m0_warn("view still running after %.1f s: %s %s", (double)(l->now - job->queued_ms) / 1000,
                job->req.method, job->req.target);
    }
}

static void sweep(struct m0_loop *l)
{
    struct m0_conn *c = l->active.next;
    while (c != &l->active) {
        struct m0_conn *next = c->next;
        if (c->state == M0_CONN_DISPATCHED && l->request_ms != 0 && l->pool != NULL)
            check_request_timeout(l, c);
        if (c->state == M0_CONN_HELD_SSE && l->heartbeat_ms != 0 &&
            l->now - c->last_write >= l->heartbeat_ms && m0_buf_unread(&c->outbox) == 0) {
            /* A comment line: ignored by EventSource, keeps proxies from
             * timing out an idle stream (WHATWG SSE §9.2.7). */
            held_send(l, c, M0_SSE_HEARTBEAT, sizeof M0_SSE_HEARTBEAT - 1);
            c->last_write = l->now;
        }
        if (c->deadline != 0 && c->deadline <= l->now) {
            switch (c->state) {
            case M0_CONN_READ_HEAD:
                if (c->http.in_message || m0_buf_unread(&c->in) > 0)
                    conn_error(l, c, 408, "Request head not received in time");
                else
                    conn_close(l, c);      /* idle keep-alive expired */
                break;
            case M0_CONN_READ_BODY:
                conn_error(l, c, 408, "Request body not received in time");
                break;
            case M0_CONN_WRITE:
                if (c->flags & C_IN_RUNNER)
                    break;
                m0_info("closing a connection whose client stopped reading");
                conn_close(l, c);
                break;
            case M0_CONN_LINGER:
                conn_close(l, c);
                break;
            default:
                break;
            }
        }
        c = next;
    }
    close_doomed(l);
}

/* ---------------------------------------------------------------- drain */

static void start_drain(struct m0_loop *l)
{
    if (l->draining)
        return;
    l->draining = 1;
    l->drain_deadline = l->now + (uint64_t)(l->cfg->graceful_timeout * 1000);
    if (l->listen_fd != -1) {
        epoll_ctl(l->ep, EPOLL_CTL_DEL, l->listen_fd, NULL);
        close(l->listen_fd);
        l->listen_fd = -1;
    }
    if (l->bus_fd != -1) {
        /* A replacement worker (SIGHUP) shares this bus: leave it the events. */
        epoll_ctl(l->ep, EPOLL_CTL_DEL, l->bus_fd, NULL);
    }
    /* Idle keep-alive connections have nothing in flight, and held streams
     * never end on their own: close both now. A held stream gets what is
     * queued and a clean FIN; its client reconnects (to another worker, or
     * after the restart) and resumes with Last-Event-ID. */
    struct m0_conn *c = l->active.next;
    while (c != &l->active) {
        struct m0_conn *next = c->next;
        if (c->state == M0_CONN_READ_HEAD && !c->http.in_message && m0_buf_unread(&c->in) == 0) {
            conn_close(l, c);
        } else if (c->state == M0_CONN_HELD_SSE) {
            held_flush(l, c);
            shutdown(c->fd, SHUT_WR);
            conn_close(l, c);
        }
        c = next;
    }
    m0_info("worker draining: %u connection(s) in flight", l->nactive);
}

/* Signals arrive as bytes on the worker's self-pipe (worker.c): one byte,
 * the signal number, per delivery. */
static void on_signal(struct m0_loop *l)
{
    unsigned char sigs[64];
    ssize_t n;
    while ((n = read(l->sig_fd, sigs, sizeof sigs)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (sigs[i] == SIGTERM || sigs[i] == SIGINT)
                start_drain(l);
            else if (sigs[i] == SIGQUIT)
                l->stop_now = 1;
        }
    }
}

/* ----------------------------------------------------------------- run */

pthread_t m0_loop_thread;

int m0_loop_run(const struct m0_config *cfg, int listen_fd, int sig_fd)
{
    struct m0_loop loop;
    struct m0_loop *l = &loop;
    struct epoll_event events[256];

    memset(l, 0, sizeof *l);
    m0_loop_thread = pthread_self();
    l->cfg = cfg;
    l->listen_fd = listen_fd;
    l->sig_fd = sig_fd;
    l->keepalive_ms = (uint64_t)(cfg->keepalive_timeout * 1000);
    l->header_ms = (uint64_t)(cfg->header_timeout * 1000);
    l->body_ms = (uint64_t)(cfg->body_timeout * 1000);
    l->write_ms = 60000;
    l->active.next = l->active.prev = &l->active;
    l->request_ms = (uint64_t)(cfg->request_timeout * 1000);
    l->nconns = (uint32_t)cfg->max_connections;
    l->conns = calloc(l->nconns, sizeof *l->conns);
    l->jobs = calloc(l->nconns, sizeof *l->jobs);
    if (l->conns == NULL || l->jobs == NULL) {
        m0_log_errno("cannot allocate %u connection slots", l->nconns);
        return M0_EXIT_FAIL;
    }
    for (uint32_t i = l->nconns; i-- > 0;) {
        l->conns[i].fd = -1;
        l->conns[i].next_free = l->free_list;
        l->free_list = &l->conns[i];
    }
    l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    if (l->ep == -1) {
        m0_log_errno("epoll_create1");
        return M0_EXIT_FAIL;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_LISTEN};
    if (epoll_ctl(l->ep, EPOLL_CTL_ADD, listen_fd, &ev) == -1) {
        m0_log_errno("epoll_ctl(listener)");
        return M0_EXIT_FAIL;
    }
    ev.data.u64 = TAG_SIGNAL;
    if (epoll_ctl(l->ep, EPOLL_CTL_ADD, sig_fd, &ev) == -1) {
        m0_log_errno("epoll_ctl(signal pipe)");
        return M0_EXIT_FAIL;
    }
    l->bus_fd = -1;
    l->health_path = cfg->health_path;
    l->health_len = cfg->health_path ? strlen(cfg->health_path) : 0;
    int hold_fd = -1;
    if (cfg->realtime && m0_bus_current != NULL) {
        l->bus_fd = m0_bus_current->read_fds[m0_bus_index];
        hold_fd = m0_bus_current->write_fds[m0_bus_index];
        l->bus_buf = m0_xmalloc(M0_BUS_MAX_DGRAM + 1);
        l->heartbeat_ms = (uint64_t)(cfg->heartbeat * 1000);
        l->outbox_limit = (size_t)cfg->outbox_limit;
        /* Events numbered up to now were published before this worker
         * could journal them: a resume from below is not provably whole. */
        l->reg = m0_registry_new(l->nconns, (unsigned)cfg->replay, (size_t)cfg->replay_bytes, m0_bus_last_id());
        /* ~1,000 sends (a few ms) per pass: other connections are served
         * between the slices of a large fan-out. */
        m0_registry_set_budget(l->reg, FANOUT_BUDGET);
        m0_registry_set_journal_cap(l->reg, (size_t)cfg->replay_total);
        ev.data.u64 = TAG_BUS;
        if (epoll_ctl(l->ep, EPOLL_CTL_ADD, l->bus_fd, &ev) == -1) {
            m0_log_errno("epoll_ctl(bus)");
            return M0_EXIT_FAIL;
        }
    } else {
        l->reg = m0_registry_new(l->nconns, 0, 0, 0);   /* empty: holds degrade */
    }
    if (cfg->blocking_threads > 0) {
        char err[256];
        l->pool = m0_pool_start((unsigned)cfg->blocking_threads, l->jobs, l->nconns, hold_fd, err, sizeof err);
        if (l->pool == NULL) {
            m0_error("%s", err);
            return M0_EXIT_FAIL;
        }
        ev.data.u64 = TAG_POOL;
        if (epoll_ctl(l->ep, EPOLL_CTL_ADD, m0_pool_wake_fd(l->pool), &ev) == -1) {
            m0_log_errno("epoll_ctl(pool)");
            return M0_EXIT_FAIL;
        }
    }
    l->now = m0_clock_ms();
    l->next_sweep = l->now + SWEEP_MS;

    int timed_out = 0;
    while (!l->stop_now) {
        m0_pool_flush(l->pool);     /* this pass's submissions, in one call */
        int timeout = l->next_sweep > l->now ? (int)(l->next_sweep - l->now) : 0;
        if (m0_registry_fanout_pending(l->reg)) {
            m0_registry_fanout(l->reg, deliver, l);   /* the next slice */
            close_doomed(l);
            if (m0_registry_fanout_pending(l->reg))
                timeout = 0;        /* more to send: only peek at other events */
        }
        int n = epoll_wait(l->ep, events, (int)M0_ARRAY_LEN(events), timeout);
        if (n == -1 && errno != EINTR) {
            m0_log_errno("epoll_wait");
            break;
        }
        l->now = m0_clock_ms();
        for (int i = 0; i < n; i++) {
            uint64_t t = events[i].data.u64;
            uint32_t slot = (uint32_t)t;
            if (slot == TAG_LISTEN) {
                if (l->listen_fd != -1)
                    on_accept(l);
                continue;
            }
            if (slot == TAG_SIGNAL) {
                on_signal(l);
                continue;
            }
            if (slot == TAG_BUS) {
                bus_drain(l);
                continue;
            }
            if (slot == TAG_POOL) {
                struct m0_completion done[64];
                size_t nd;
                do {
                    nd = m0_pool_drain(l->pool, done, M0_ARRAY_LEN(done));
                    for (size_t k = 0; k < nd; k++)
                        on_complete(l, &done[k]);
                } while (nd == M0_ARRAY_LEN(done));
                continue;
            }
            if (slot >= l->nconns)
                continue;
            struct m0_conn *c = &l->conns[slot];
            if (c->gen != (uint32_t)(t >> 32) || c->state == M0_CONN_FREE || c->state == M0_CONN_CLOSING)
                continue;   /* stale: the slot was closed (and maybe reused) */
            on_conn_event(l, c, events[i].events);
        }
        if (l->now >= l->next_sweep) {
            sweep(l);
            l->next_sweep = l->now + SWEEP_MS;
        }
        release_closed(l);
        if (l->draining) {
            if (l->nactive == 0)
                break;
            if (l->now >= l->drain_deadline) {
                m0_warn("graceful timeout: closing %u connection(s) still in flight", l->nactive);
                timed_out = 1;
                break;
            }
        }
    }

    /* Whatever is still queued will not be started: its client is about
     * to be disconnected. */
    struct m0_conn *c = l->active.next;
    while (c != &l->active) {
        struct m0_conn *next = c->next;
        if (c->state == M0_CONN_DISPATCHED) {
            int queued = M0_JOB_QUEUED;
            atomic_compare_exchange_strong(&c->job->run_state, &queued, M0_JOB_CANCELLED);
        }
        conn_close(l, c);
        c = next;
    }
    release_closed(l);
    if ((timed_out || l->stop_now) && l->pool != NULL && m0_pool_busy(l->pool) > 0) {
        /* A view is still running past the deadline: joining it would only
         * make the master kill us later. Leave now. */
        m0_warn("leaving %u handler thread(s) mid-view", m0_pool_busy(l->pool));
        return M0_EXIT_ABANDON;
    }
    /* Threads finish their current job and any abandon records, then stop;
     * only then may jobs be freed. */
    m0_pool_stop(l->pool);
    l->pool = NULL;
    for (uint32_t i = 0; i < l->nconns; i++) {
        if (l->conns[i].job != NULL) {
            m0_req_free(&l->conns[i].job->req);
            m0_resp_free(&l->conns[i].job->resp);
            m0_buf_free(&l->conns[i].job->pending);
            m0_http_free(&l->conns[i].http);
            free(l->conns[i].job);
        }
    }
    free(l->conns);
    free(l->jobs);
    m0_registry_free(l->reg);
    free(l->bus_buf);
    close(l->ep);
    if (l->reserve_fd != -1)
        close(l->reserve_fd);
    return M0_EXIT_OK;
}
