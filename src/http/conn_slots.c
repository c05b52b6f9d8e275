/*
 * conn_slots.c — the connections' slot table (see conn.h): slots made in
 * chunks as they are needed, the free and release lists, the active list
 * and the wheel of held connections, the state changes and the deadlines
 * they imply, the job cache, the accept path, closing, the sweep of
 * timeouts and the routing of runners' completions. Reading and writing a
 * connection's socket is conn.c's alone.
 *
 * Closing never frees under our feet: the slot's generation is bumped at
 * once (stale events drop) and the slot returns to the free list at the
 * end of the pass — or, when a runner holds its job, on the runner's
 * completion (ORPHAN), so a slot is never reused under a runner.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "m0/config.h"
#include "m0/dispatch.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/metrics.h"
#include "m0/target.h"
#include "m0/timer.h"

#define LINGER_MS 2000

static void list_link(struct m0_server *s, struct m0_conn *c)
{
    c->next = s->slots.active.next;
    c->prev = &s->slots.active;
    s->slots.active.next->prev = c;
    s->slots.active.next = c;
}

static void list_unlink(struct m0_conn *c)
{
    c->prev->next = c->next;
    c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* ---------------------------------------------------------- the wheel */

static struct m0_conn **bucket_of(struct m0_server *s, uint64_t due)
{
    uint64_t t = due / M0_CONN_WHEEL_MS;
    if (t < s->slots.wheel_tick)
        t = s->slots.wheel_tick;               /* already due: the next sweep */
    return &s->slots.wheel[t % M0_CONN_WHEEL];
}

/* c (HELD) into the bucket of c->deadline. */
static void wheel_add(struct m0_server *s, struct m0_conn *c)
{
    if (s->slots.wheel == NULL) {
        s->slots.wheel = m0_xmalloc(M0_CONN_WHEEL * sizeof *s->slots.wheel);
        memset(s->slots.wheel, 0, M0_CONN_WHEEL * sizeof *s->slots.wheel);
        s->slots.wheel_tick = m0_loop_now(s->loop) / M0_CONN_WHEEL_MS;
    }
    struct m0_conn **b = bucket_of(s, c->deadline);
    c->prev = NULL;
    c->next = *b;
    if (*b != NULL)
        (*b)->prev = c;
    *b = c;
    c->flags |= C_WHEEL;
}

static void wheel_del(struct m0_server *s, struct m0_conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        *bucket_of(s, c->deadline) = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->flags &= ~C_WHEEL;
}

/* The buckets whose time has come (at most one round of them): each HELD
 * connection in them whose deadline has come is ticked and goes back in
 * at the deadline its tick set; one whose time is a later round goes back
 * as it is. */
static void wheel_run(struct m0_server *s, uint64_t now)
{
    if (s->slots.wheel == NULL)
        return;
    uint64_t until = now / M0_CONN_WHEEL_MS;
    for (unsigned n = 0; s->slots.wheel_tick <= until && n < M0_CONN_WHEEL; n++) {
        struct m0_conn **b = &s->slots.wheel[s->slots.wheel_tick % M0_CONN_WHEEL];
        struct m0_conn *c = *b;
        *b = NULL;
        s->slots.wheel_tick++;
        while (c != NULL) {
            struct m0_conn *next = c->next;
            c->prev = c->next = NULL;
            c->flags &= ~C_WHEEL;
            if (c->deadline > now) {
                wheel_add(s, c);
            } else {
                const struct m0_conn_ops *ops = s->proto[c->proto];
                if (ops->tick != NULL)
                    ops->tick(s, c);     /* heartbeats, pings; sets the next deadline */
                if (c->state == M0_CONN_HELD && !(c->flags & C_WHEEL)) {
                    if (c->deadline <= now)
                        c->deadline = now + M0_CONN_WHEEL_MS;
                    wheel_add(s, c);
                }
            }
            c = next;
        }
    }
    if (s->slots.wheel_tick <= until)
        s->slots.wheel_tick = until + 1;       /* a stall longer than a round: every bucket ran */
}

static void active_add(struct m0_server *s, struct m0_conn *c)
{
    list_link(s, c);
    s->slots.nactive++;
}

/* --threads: a slot of the worker's --max-connections, counted first and
 * undone when over, so two loops accepting at once never both take the
 * last. 1: taken (given back by active_del), 0: every one is. */
static int worker_take(struct m0_server *s)
{
    if (s->slots.worker_conns == NULL)
        return 1;          /* a lone loop: its slot table is the bound */
    if (atomic_fetch_add_explicit(s->slots.worker_conns, 1, memory_order_relaxed) < s->slots.n)
        return 1;
    atomic_fetch_sub_explicit(s->slots.worker_conns, 1, memory_order_relaxed);
    return 0;
}

static void worker_give(struct m0_server *s)
{
    if (s->slots.worker_conns != NULL)
        atomic_fetch_sub_explicit(s->slots.worker_conns, 1, memory_order_relaxed);
}

static void active_del(struct m0_server *s, struct m0_conn *c)
{
    if (c->flags & C_WHEEL)
        wheel_del(s, c);
    else if (c->prev != NULL)
        list_unlink(c);                  /* (neither: a held one being ticked) */
    s->slots.nactive--;
    worker_give(s);
}

void m0_conn_set_state(struct m0_server *s, struct m0_conn *c, enum m0_conn_state st)
{
    uint64_t now = m0_loop_now(s->loop);
    if (m0_log_threshold <= M0_LOG_DEBUG && c->state != st)
        m0_debug("slot %u (%s): %s -> %s", m0_conn_slot(s, c), m0_conn_proto_name(c->proto),
                 m0_conn_state_name(c->state), m0_conn_state_name(st));
    /* HELD connections are in the wheel, keyed by their deadline; every
     * other open one is on the active list; a closed one is on neither. */
    if (c->flags & C_WHEEL)
        wheel_del(s, c);
    else if (st == M0_CONN_HELD && c->prev != NULL)
        list_unlink(c);
    c->state = (uint8_t)st;
    switch (st) {
    case M0_CONN_READ_HEAD:
        /* Idle keep-alive until the first byte of a request; from then on
         * (C_HEAD_TIMER) the head timeout bounds it. */
        c->deadline = now + ((c->flags & C_HEAD_TIMER) ? s->timeouts.header_ms : s->timeouts.keepalive_ms);
        if (atomic_load(&s->life.draining) && !(c->flags & C_HEAD_TIMER) && c->deadline > now + M0_DRAIN_IDLE_MS)
            c->deadline = now + M0_DRAIN_IDLE_MS;    /* draining: a last moment to send one */
        break;
    case M0_CONN_READ_BODY:
        c->deadline = now + s->timeouts.body_ms;
        break;
    case M0_CONN_WRITE:
        c->deadline = now + s->timeouts.write_ms;
        break;
    case M0_CONN_LINGER:
        c->deadline = now + LINGER_MS;
        break;
    case M0_CONN_HELD:
        /* The first tick a heartbeat interval from now (none: a minute;
         * the tick only re-arms then). */
        c->deadline = now + (s->cfg->heartbeat > 0 ? (uint64_t)(s->cfg->heartbeat * 1000) : 60000);
        break;
    default:
        c->deadline = 0;
        break;
    }
    if (c->fd == -1)
        return;
    if (st == M0_CONN_HELD)
        wheel_add(s, c);
    else if (c->prev == NULL && st != M0_CONN_CLOSING && st != M0_CONN_ORPHAN && st != M0_CONN_FREE)
        list_link(s, c);                 /* out of a hold (LINGER): swept again */
}

void m0_conn_tick_at(struct m0_server *s, struct m0_conn *c, uint64_t due)
{
    if (!(c->flags & C_WHEEL)) {
        c->deadline = due;               /* being ticked, or not held: taken as it is */
        return;
    }
    wheel_del(s, c);
    c->deadline = due;
    wheel_add(s, c);
}

void m0_conn_close_all(struct m0_server *s)
{
    struct m0_conn *c = s->slots.active.next;
    while (c != &s->slots.active) {
        struct m0_conn *next = c->next;
        m0_conn_close(s, c);
        c = next;
    }
    if (s->slots.wheel == NULL)
        return;
    for (unsigned i = 0; i < M0_CONN_WHEEL; i++) {
        while (s->slots.wheel[i] != NULL)
            m0_conn_close(s, s->slots.wheel[i]);
    }
}

struct held_visit {
    struct m0_server *s;
    void (*fn)(struct m0_server *s, struct m0_conn *c);
};

static void each_held(struct m0_conn *c, void *ctx)
{
    const struct held_visit *v = ctx;
    if (c->state == M0_CONN_HELD)
        v->fn(v->s, c);
}

void m0_conn_each_held(struct m0_server *s, void (*fn)(struct m0_server *s, struct m0_conn *c))
{
    struct held_visit v = {s, fn};
    m0_conn_each(s, each_held, &v);
}

/* ------------------------------------------------------------ lifecycle */

void m0_conn_close(struct m0_server *s, struct m0_conn *c)
{
    if (c->state == M0_CONN_CLOSING || c->state == M0_CONN_FREE || c->state == M0_CONN_ORPHAN)
        return;
    const struct m0_conn_ops *ops = s->proto[c->proto];
    if (ops->closing != NULL)
        ops->closing(s, c);            /* a hold is released: unsubscribed, freed */
    if (s->xprt[c->xprt]->close != NULL)
        s->xprt[c->xprt]->close(s, c);     /* the transport's state (TLS: its close_notify) */
    close(c->fd);      /* also removes it from the epoll set */
    c->fd = -1;
    c->gen++;          /* every queued event for this slot is now stale */
    active_del(s, c);
    struct m0_job *job = c->job;
    if (c->flags & C_RUNNER) {
        /* The job stays with its runner until its completion: the slot is
         * never reused under a runner's feet. One that has not started
         * never will (nobody is left to answer) — but a held socket's
         * request, which answers nobody (what the peer sent, its
         * DISCONNECT over HTTP: wshold.h); one that runs is told, so a
         * streaming response stops and close() runs at once. */
        if (!(c->flags & C_WS_MSG))
            m0_job_cancel(job);
        m0_job_gone(job);
        m0_conn_set_state(s, c, M0_CONN_ORPHAN);
        s->slots.norphans++;
        return;
    }
    if (c->flags & C_MORE) {
        /* An inline runner keeps Python state between pieces: release it. */
        c->flags &= ~C_MORE;
        m0_dispatch_abandon(job);
    }
    m0_conn_set_state(s, c, M0_CONN_CLOSING);
    c->next_free = s->slots.release_list;
    s->slots.release_list = c;
}

void m0_conn_release_closed(struct m0_server *s)
{
    while (s->slots.release_list != NULL) {
        struct m0_conn *c = s->slots.release_list;
        s->slots.release_list = c->next_free;
        m0_buf_free(&c->in);
        m0_buf_free(&c->out);
        if (c->file_fd != -1)
            close(c->file_fd);
        c->file_fd = -1;
        c->file_left = 0;
        if (c->job != NULL) {
            m0_http_next(&c->job->http);      /* resets the request too */
            m0_job_reset(c->job);
            m0_conn_job_put(s, c);       /* a closed slot keeps no job (but a pinned one) */
        }
        c->state = M0_CONN_FREE;
        c->proto = M0_CONN_PROTO_H1;
        c->flags = 0;
        c->resp_flags = 0;
        c->deadline = 0;
        c->next_free = s->slots.free_list;
        s->slots.free_list = c;
    }
}

void m0_conn_too_slow(struct m0_server *s, struct m0_conn *c, const char *why)
{
    if (c->flags & C_DOOMED)
        return;
    if (m0_loop_now(s->loop) >= s->slots.next_slow_log) {
        m0_warn("closing a slow client's connection: %s (%zu bytes queued)", why, m0_buf_unread(&c->out));
        s->slots.next_slow_log = m0_loop_now(s->loop) + 1000;
    }
    m0_conn_doom(s, c);
}

void m0_conn_doom(struct m0_server *s, struct m0_conn *c)
{
    if (c->flags & C_DOOMED)
        return;
    c->flags |= C_DOOMED;
    c->next_doomed = s->slots.doomed;
    s->slots.doomed = c;
}

/* A doomed connection may have been closed by another path meanwhile
 * (m0_conn_close is a no-op then); its own link field keeps this list
 * apart from the free and release lists. */
void m0_conn_close_doomed(struct m0_server *s)
{
    while (s->slots.doomed != NULL) {
        struct m0_conn *c = s->slots.doomed;
        s->slots.doomed = c->next_doomed;
        c->next_doomed = NULL;
        c->flags &= ~C_DOOMED;
        m0_conn_close(s, c);
    }
}

/* The peer's address as accept() reported it. */
union peer {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
    struct sockaddr_un un;
};

/* accept4 failed: nothing pending, out of descriptors (the EMFILE trick)
 * or worse. The accepting stops for this wakeup. */
static void accept_failed(struct m0_server *s, int lfd)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        return;
    if ((errno == EMFILE || errno == ENFILE) && s->accept.reserve_fd != -1) {
        /* Out of descriptors: free the spare one, take the pending
         * connection and close it, so the client gets a prompt close
         * instead of waiting in the backlog forever. */
        close(s->accept.reserve_fd);
        int tmp = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (tmp != -1)
            close(tmp);
        s->accept.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        m0_mx_add(m0_metrics_block(), M0_MX_REFUSED_FDS, 1);
        if (m0_loop_now(s->loop) >= s->slots.next_refusal_log) {
            m0_warn("out of file descriptors (%u connections open): refusing new connections "
                    "(raise ulimit -n)", s->slots.nactive);
            s->slots.next_refusal_log = m0_loop_now(s->loop) + 1000;
        }
        return;
    }
    m0_log_errno("accept4");
}

int m0_conn_grow(struct m0_server *s)
{
    uint32_t first = s->slots.nchunks << M0_CONN_CHUNK_SHIFT;
    if (first >= s->slots.n)
        return M0_ERR;
    uint32_t n = s->slots.n - first < M0_CONN_CHUNK ? s->slots.n - first : M0_CONN_CHUNK;
    struct m0_conn *chunk = calloc(n, sizeof *chunk);
    if (chunk == NULL) {
        m0_log_errno("cannot make %u more connection slots", n);
        return M0_ERR;
    }
    for (uint32_t i = n; i-- > 0;) {
        chunk[i].fd = -1;
        chunk[i].file_fd = -1;
        chunk[i].slot = first + i;
        chunk[i].next_free = s->slots.free_list;
        s->slots.free_list = &chunk[i];
    }
    s->slots.chunks[s->slots.nchunks++] = chunk;
    return M0_OK;
}

void m0_conn_each(struct m0_server *s, void (*fn)(struct m0_conn *c, void *ctx), void *ctx)
{
    for (uint32_t k = 0; k < s->slots.nchunks; k++) {
        uint32_t first = k << M0_CONN_CHUNK_SHIFT;
        uint32_t n = s->slots.n - first < M0_CONN_CHUNK ? s->slots.n - first : M0_CONN_CHUNK;
        for (uint32_t i = 0; i < n; i++)
            fn(&s->slots.chunks[k][i], ctx);
    }
}

struct m0_job *m0_conn_job(struct m0_server *s, struct m0_conn *c)
{
    if (c->job != NULL)
        return c->job;
    uint32_t slot = m0_conn_slot(s, c);
    struct m0_job *job = s->slots.job_cache;
    if (job != NULL) {
        s->slots.job_cache = job->next_free;
        s->slots.njob_cache--;
        job->next_free = NULL;
    } else {
        job = m0_job_new(slot);
        job->loop = s->loop;
        job->env = &s->run.env;
    }
    job->slot = slot;
    m0_http_init(&job->http, &job->req, &s->cfg->limits);
    s->slots.jobs[slot] = job;     /* before any dispatch: the lane's submit orders it for the pool */
    c->job = job;
    return job;
}

void m0_conn_job_put(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    if (job == NULL || job->pinned || (c->flags & (C_RUNNER | C_MORE)))
        return;
    s->slots.jobs[m0_conn_slot(s, c)] = NULL;
    c->job = NULL;
    s->slots.jobs_released++;
    m0_http_free(&job->http);
    m0_job_reset(job);
    m0_req_reset(&job->req);
    if (s->slots.njob_cache >= M0_JOB_CACHE) {
        m0_job_free(job);
        return;
    }
    job->next_free = s->slots.job_cache;
    s->slots.job_cache = job;
    s->slots.njob_cache++;
}

void m0_conn_job_cache_free(struct m0_server *s)
{
    while (s->slots.job_cache != NULL) {
        struct m0_job *job = s->slots.job_cache;
        s->slots.job_cache = job->next_free;
        m0_http_free(&job->http);
        m0_job_free(job);
    }
    s->slots.njob_cache = 0;
}

void m0_conn_slots_free(struct m0_server *s)
{
    for (uint32_t k = 0; k < s->slots.nchunks; k++)
        free(s->slots.chunks[k]);
    free(s->slots.chunks);
    free(s->slots.wheel);
    free(s->slots.jobs);
    s->slots.chunks = NULL;
    s->slots.wheel = NULL;
    s->slots.jobs = NULL;
    s->slots.nchunks = 0;
}

/* A free slot takes the accepted descriptor fd from listener lidx: its job
 * (m0_conn_job), the peer, the slot's registration. M0_OK, or M0_ERR
 * (fd closed, the slot free again). */
static int open_slot(struct m0_server *s, struct m0_conn *c, int fd, int lidx, const void *peer)
{
    const union peer *addr = peer;
    uint32_t slot = m0_conn_slot(s, c);
    struct m0_job *job = m0_conn_job(s, c);
    c->fd = fd;
    c->proto = M0_CONN_PROTO_H1;
    /* The listener's transport (server.h accept.tls). */
    c->xprt = lidx >= 0 && lidx < M0_MAX_LISTENERS && ((s->accept.tls >> lidx) & 1) ? M0_XPRT_TLS : M0_XPRT_PLAIN;
    c->flags = C_HEAD_TIMER;        /* a new connection owes a head at once */
    c->events = EPOLLIN | EPOLLRDHUP;
    c->file_fd = -1;
    job->gen = c->gen;
    if (addr->sa.sa_family == AF_INET || addr->sa.sa_family == AF_INET6) {
        if (addr->sa.sa_family == AF_INET) {
            inet_ntop(AF_INET, &addr->in4.sin_addr, job->peer_addr, sizeof job->peer_addr);
            job->peer_port = ntohs(addr->in4.sin_port);
        } else {
            inet_ntop(AF_INET6, &addr->in6.sin6_addr, job->peer_addr, sizeof job->peer_addr);
            job->peer_port = ntohs(addr->in6.sin6_port);
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    } else {
        job->peer_addr[0] = '\0';
        job->peer_port = 0;
    }
    memcpy(job->remote_addr, job->peer_addr, sizeof job->remote_addr);
    job->remote_port = job->peer_port;
    job->https = 0;
    job->lidx = (int8_t)lidx;
    if (lidx >= 0 && lidx < M0_MAX_LISTENERS && s->accept.limits[lidx] != NULL)
        job->http.lim = s->accept.limits[lidx];    /* a listener's own (the publish socket's small ones) */
    m0_mx_add(m0_metrics_block(), M0_MX_ACCEPTED, 1);
    const struct m0_xprt_ops *x = s->xprt[c->xprt];
    if (x->open != NULL && x->open(s, c) != M0_OK) {
        close(fd);
        c->fd = -1;
        c->next_free = s->slots.free_list;
        s->slots.free_list = c;
        return M0_ERR;
    }
    if (m0_loop_add_slot(s->loop, fd, slot, c->gen, c->events) == M0_ERR) {
        m0_log_errno("epoll_ctl(ADD)");
        if (x->close != NULL)
            x->close(s, c);
        close(fd);
        c->fd = -1;
        c->next_free = s->slots.free_list;
        s->slots.free_list = c;
        return M0_ERR;
    }
    active_add(s, c);
    m0_conn_set_state(s, c, M0_CONN_READ_HEAD);
    return M0_OK;
}

int m0_conn_take(struct m0_server *s, int fd, int lidx, const void *addr)
{
    if (s->slots.free_list == NULL)
        m0_conn_grow(s);             /* the next chunk of slots, if --max-connections allows */
    struct m0_conn *c = s->slots.free_list;
    if (c == NULL || !worker_take(s)) {     /* the loop's slots, then the worker's */
        close(fd);
        m0_mx_add(m0_metrics_block(), M0_MX_REFUSED_SLOTS, 1);
        if (m0_loop_now(s->loop) >= s->slots.next_refusal_log) {   /* at most one line a second */
            m0_warn("all %u connection slots busy: refusing connections (see --max-connections)", s->slots.n);
            s->slots.next_refusal_log = m0_loop_now(s->loop) + 1000;
        }
        return M0_ERR;
    }
    s->slots.free_list = c->next_free;
    if (open_slot(s, c, fd, lidx, addr) != M0_OK) {
        worker_give(s);
        return M0_ERR;
    }
    /* Optimistic read: the request usually arrives with the SYN's ACK. */
    m0_conn_read(s, c);
    s->proto[c->proto]->input(s, c);
    return M0_OK;
}

/* lfd's index among s's listeners, or -1. */
static int listener_index(const struct m0_server *s, int lfd)
{
    for (int i = 0; i < s->accept.n; i++) {
        if (s->accept.fds[i] == lfd)
            return i;
    }
    return -1;
}

void m0_conn_accept(struct m0_loop *l, int lfd, uint32_t events, void *ctx)
{
    struct m0_server *s = ctx;
    (void)l;
    (void)events;
    /* A listener the loops share may have its connections handed to each
     * other, unless an endpoint answered in C owns it (endpoint.h). */
    int lidx = listener_index(s, lfd);
    int shared = s->accept.hand_off != NULL && lidx >= 0 && ((s->accept.shared & ~s->accept.owned) >> lidx) & 1;
    for (int i = 0; i < 64 && s->accept.on; i++) {
        union peer addr;
        socklen_t alen = sizeof addr;
        int fd = accept4(lfd, &addr.sa, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd == -1) {
            accept_failed(s, lfd);
            return;
        }
        if (shared && s->accept.hand_off(s, fd, lidx, &addr, alen) == M0_OK)
            continue;                    /* another loop's now */
        m0_conn_take(s, fd, lidx, &addr);
    }
}

/* ------------------------------------------------------------- timeouts */

/* After a burst of requests that became holds (or closed), give the heap's
 * free pages back: each of those requests had a 16 KiB read buffer, a 4 KiB
 * arena block and its head for a moment, and the small, long-lived holds
 * allocated among them keep the heap from shrinking at its top, so without
 * this the burst's high-water mark stays resident (~900 B per stream for
 * 10,000 opened 512 at a time). At most once a second, and only after
 * TRIM_AFTER jobs were given back; a few ms for a heap of tens of MB. */
#define TRIM_AFTER 1024
static void trim(struct m0_server *s, uint64_t now)
{
#ifdef __GLIBC__
    if (s->slots.jobs_released < TRIM_AFTER || now < s->slots.next_trim)
        return;
    s->slots.jobs_released = 0;
    s->slots.next_trim = now + 1000;
    malloc_trim(0);
#else
    (void)s;
    (void)now;
#endif
}

void m0_conn_sweep(struct m0_server *s)
{
    uint64_t now = m0_loop_now(s->loop);
    struct m0_conn *c = s->slots.active.next;
    while (c != &s->slots.active) {
        struct m0_conn *next = c->next;
        const struct m0_conn_ops *ops = s->proto[c->proto];
        if (ops->tick != NULL)
            ops->tick(s, c);          /* --request-timeout, heartbeats */
        if (c->deadline != 0 && c->deadline <= now) {
            switch (c->state) {
            case M0_CONN_READ_HEAD:
                if (c->job->http.in_message || m0_buf_unread(&c->in) > 0)
                    m0_conn_error(s, c, 408, "Request head not received in time");
                else
                    m0_conn_close(s, c);      /* idle keep-alive expired */
                break;
            case M0_CONN_READ_BODY:
                m0_conn_error(s, c, 408, "Request body not received in time");
                break;
            case M0_CONN_RUN:
                /* A lazy body stalled: the application's read fails. */
                c->deadline = 0;
                m0_job_body_progress(c->job, 0, 1);
                break;
            case M0_CONN_WRITE:
                if ((c->flags & C_RUNNER) && m0_buf_unread(&c->out) == 0 && c->file_left == 0) {
                    c->deadline = 0;          /* waiting for the runner, not the client */
                    break;
                }
                m0_conn_too_slow(s, c, "its client stopped reading the response");
                break;
            case M0_CONN_LINGER:
                m0_conn_close(s, c);
                break;
            default:
                break;
            }
        }
        c = next;
    }
    wheel_run(s, now);
    m0_conn_close_doomed(s);
    trim(s, now);
}

/* ---------------------------------------------------------- completions */

void m0_conn_on_complete(struct m0_loop *l, const struct m0_completion *done, void *ctx)
{
    struct m0_server *s = ctx;
    (void)l;
    struct m0_conn *c = m0_conn_at(s, done->slot);
    if (c == NULL)
        return;
    struct m0_job *job = c->job;
    if (job == NULL || !(c->flags & C_RUNNER))
        return;
    if (done->kind == M0_CPL_DONE) {
        /* The runner is finished with the job: it is the loop's again. */
        c->flags &= ~C_RUNNER;
        if (job->target != NULL)
            m0_target_stats_of(&s->run.tstats, job->target)->in_flight--;
        if (c->state == M0_CONN_ORPHAN) {
            s->slots.norphans--;
            /* The client left while the job ran: the runner is done with
             * the job (close() included), so the slot is free at last. */
            m0_conn_set_state(s, c, M0_CONN_CLOSING);
            c->next_free = s->slots.release_list;
            s->slots.release_list = c;
            return;
        }
    }
    const struct m0_conn_ops *ops = s->proto[c->proto];
    if (ops->complete != NULL)
        ops->complete(s, c, done);
}

