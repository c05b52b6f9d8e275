/*
 * serve.c — a worker's serving lifecycle (see serve.h): the slot table,
 * the loop's handlers and hooks, signals and the master's control socket,
 * graceful drain, teardown.
 *
 * Drain (SIGTERM, SIGINT, or the master's 'D' on a reload) is what makes a
 * reload lose nothing:
 *   - the listener closes here, but the socket stays open in the master
 *     and the next worker, so connections waiting in it are kept;
 *   - the bus is left to the next worker ('R' tells the master, which only
 *     then lets the replacement read it);
 *   - requests in flight finish; a response whose head promised keep-alive
 *     keeps its connection, and the request that follows on it is answered
 *     with Connection: close — closing a kept connection at an arbitrary
 *     moment would race with a request already on the wire;
 *   - idle keep-alive connections get M0_DRAIN_IDLE_MS to send one;
 *   - held streams end with a FIN: their clients reconnect and resume.
 *
 * With --threads N a worker runs N of these, one per thread (worker.c),
 * joined by m0_serve_group: the first loop has the signals and the
 * master's control socket and relays what concerns the process to the
 * others over a socket pair each (control.h), so every loop goes, drains
 * and stops together, and the master hears one worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "m0/apps.h"
#include "m0/broker.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/endpoint.h"
#include "m0/grant_hold.h"
#include "m0/health.h"
#include "m0/fork.h"
#include "m0/h1.h"
#include "m0/handoff.h"
#include "m0/grip_control.h"
#include "m0/pubep.h"
#include "m0/pubsock.h"
#include "m0/grip_hold.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/loops.h"
#include "m0/metrics.h"
#include "m0/metrics_http.h"
#include "m0/pool.h"
#include "m0/presence_loop.h"
#include "m0/rt.h"
#include "m0/serve.h"
#include "m0/server.h"
#include "m0/static_http.h"
#include "m0/timer.h"
#include "m0/wshold.h"
#include "m0/wshold_open.h"
#include "m0/wsframes.h"
#include "m0/xprt_tls.h"
#include "m0/control.h"

#define SWEEP_MS 200
#define ASK_AGAIN_MS 10000

struct serve {
    struct m0_server s;        /* first: a struct m0_server * is a struct serve * */
    int sig_fd;                /* -1 on a loop other than the first */
    int ctl_fd;                /* the first loop: the master's (-1 without one); another
                                  loop: its end of the pair with the first */
    int peer_fds[M0_MAX_LOOPS];   /* the first loop: its end of each other loop's pair */
    unsigned retired;          /* the first loop: loops that said 'R' (itself included) */
    unsigned pongs_owed;       /* the first loop: loops yet to answer the master's ping */
    /* The first loop, by loop index: retired ('R', or stopped), stopped
     * ('X', or its socket closed), owes the current ping's answer. */
    unsigned char peer_retired[M0_MAX_LOOPS], peer_gone[M0_MAX_LOOPS], peer_pinged[M0_MAX_LOOPS];
    int serving;               /* the master said go */
    int stop_now;              /* SIGQUIT */
    int rc;
    uint64_t quota;            /* --max-requests (+ jitter) for this worker, every loop's; 0 = none */
    uint64_t asked_at;         /* loop ms M0_CTL_REPLACE was last sent; 0 = never */
};

static struct serve *serve_of(struct m0_server *s)
{
    return (struct serve *)s;
}

static void ctl_send(struct serve *v, char what)
{
    if (v->ctl_fd == -1)
        return;
    ssize_t w;
    do
        w = send(v->ctl_fd, &what, 1, MSG_NOSIGNAL);
    while (w == -1 && errno == EINTR);
}

/* The first loop: one byte to every other loop of the worker. */
static void tell_loops(struct serve *v, char what)
{
    for (unsigned i = 1; v->s.loops != NULL && v->s.loop_index == 0 && i < v->s.loops->n; i++) {
        ssize_t w;
        do
            w = send(v->peer_fds[i], &what, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (w == -1 && errno == EINTR);
    }
}

static unsigned nloops(const struct serve *v)
{
    return v->s.loops != NULL ? v->s.loops->n : 1;
}

/* The first loop: one more loop retired; the master hears 'R' when every
 * loop has, so a successor never reads a bus endpoint still being read. */
static void note_retired(struct serve *v)
{
    if (++v->retired == nloops(v))
        ctl_send(v, M0_CTL_RETIRED);
}

/* Every loop has said 'R' (or stopped): what the first loop waits for
 * before it stops; true on any other loop. */
static int all_retired(const struct serve *v)
{
    return v->s.loop_index != 0 || v->retired >= nloops(v);
}

/* The master's ping, answered once every loop has turned (the first
 * loop's own answer, then each other's 'A'): the connections of them all. */
static void answer_ping(struct serve *v)
{
    uint8_t pong[5] = {M0_CTL_PONG};
    struct m0_loop_sum sum;
    m0_loops_sum(&v->s, &sum);
    uint32_t conns = (uint32_t)sum.v[M0_LS_CONNS];
    memcpy(pong + 1, &conns, sizeof conns);
    ssize_t w;
    do
        w = send(v->ctl_fd, pong, sizeof pong, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w == -1 && errno == EINTR);
}

static void start_drain(struct serve *v)
{
    struct m0_server *s = &v->s;
    if (atomic_load(&s->life.draining))
        return;
    tell_loops(v, M0_CTL_DRAIN);
    uint64_t now = m0_loop_now(s->loop);
    atomic_store(&s->life.draining, 1);
    s->life.drain_deadline = now + (uint64_t)(s->cfg->graceful_timeout * 1000);
    for (int i = 0; i < s->accept.n; i++) {
        if (s->accept.on)
            m0_loop_del_fd(s->loop, s->accept.fds[i]);
        close(s->accept.fds[i]);
        s->accept.fds[i] = -1;
    }
    s->accept.n = 0;
    s->accept.on = 0;
    m0_rt_stop_reading(s->rt);
    if (s->loop_index == 0)
        note_retired(v);
    else
        ctl_send(v, M0_CTL_RETIRED);      /* to the first loop */
    m0_hold_end_all(s);
    /* Idle keep-alive connections: a last moment to send a request. */
    for (struct m0_conn *c = s->slots.active.next; c != &s->slots.active; c = c->next) {
        if (c->state == M0_CONN_READ_HEAD && !c->job->http.in_message && m0_buf_unread(&c->in) == 0 &&
            c->deadline > now + M0_DRAIN_IDLE_MS)
            c->deadline = now + M0_DRAIN_IDLE_MS;
    }
    if (s->loop_index == 0)
        m0_info("worker draining: %u connection(s) in flight", s->slots.nactive);
    else
        m0_info("worker draining: event loop %u: %u connection(s) in flight", s->loop_index, s->slots.nactive);
}

/* The loop's events: the local bus, or the broker in its place. */
static int start_events(struct m0_server *s)
{
    if (m0_broker != NULL)
        return m0_rt_start(s->rt, &m0_broker_source, m0_broker_new(s->rt, s->loop, s->cfg));
    return m0_rt_start(s->rt, NULL, NULL);
}

static void go(struct serve *v)
{
    struct m0_server *s = &v->s;
    if (v->serving || atomic_load(&s->life.draining))
        return;
    v->serving = 1;
    s->accept.on = 1;
    tell_loops(v, M0_CTL_GO);
    /* Several loops accept on the same sockets (their own descriptors of
     * them, worker.c): EPOLLEXCLUSIVE wakes one loop per connection rather
     * than every loop for each. */
    uint32_t ev = EPOLLIN | (nloops(v) > 1 ? EPOLLEXCLUSIVE : 0);
    for (int i = 0; i < s->accept.n; i++) {
        if (m0_loop_add_fd(s->loop, s->accept.fds[i], ev, m0_conn_accept, s) == M0_ERR) {
            m0_log_errno("epoll_ctl(listener)");
            v->rc = M0_EXIT_FAIL;
            m0_loop_stop(s->loop);
            return;
        }
    }
    /* Set up before booted was reported (m0_serve_prepare): only reading
     * starts here, once the predecessor has stopped. */
    if (s->cfg->realtime && start_events(s) != M0_OK) {
        m0_error("cannot start the realtime bus");
        v->rc = M0_EXIT_FAIL;
        m0_loop_stop(s->loop);
    }
}

/* Signals arrive as bytes on the worker's self-pipe (worker.c). */
static void on_signal(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    struct serve *v = ctx;
    unsigned char sigs[64];
    ssize_t n;
    (void)events;
    while ((n = read(fd, sigs, sizeof sigs)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (sigs[i] == SIGTERM || sigs[i] == SIGINT) {
                start_drain(v);
            } else if (sigs[i] == SIGQUIT) {
                v->stop_now = 1;
                tell_loops(v, M0_CTL_STOP);
                m0_loop_stop(l);
            }
        }
    }
}

/* One control message (bytes) from fd into msg: its length; 0 when none
 * is there yet; -1 when the other end is gone (fd is then unregistered). */
static ssize_t ctl_recv(struct m0_loop *l, int fd, char *msg, size_t cap)
{
    ssize_t n = recv(fd, msg, cap, MSG_DONTWAIT);
    if (n == -1 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0) {
        m0_loop_del_fd(l, fd);
        return -1;
    }
    return n;
}

static void ping_loops(struct serve *v);

static void on_ctl(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    struct serve *v = ctx;
    char msg[16];
    (void)events;
    ssize_t n = ctl_recv(l, fd, msg, sizeof msg);
    if (n == -1)
        start_drain(v);      /* the master (or the first loop) is gone: stop taking work */
    if (n == 2 && msg[0] == M0_CTL_SIGN) {
        m0_apps_grant_sign((unsigned char)msg[1]);    /* the process's: not relayed to other loops */
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (msg[i] == M0_CTL_GO) {
            go(v);
        } else if (msg[i] == M0_CTL_DRAIN) {
            start_drain(v);
        } else if (msg[i] == M0_CTL_PING) {
            /* Answered by the loops themselves: the master's watchdog
             * measures whether loops turn, not whether views are quick. */
            if (v->s.loop_index != 0) {
                ctl_send(v, M0_CTL_PONG);
            } else if (nloops(v) == 1) {
                answer_ping(v);
            } else if (v->pongs_owed == 0) {
                ping_loops(v);
            }
        } else if (msg[i] == M0_CTL_STOP) {
            v->stop_now = 1;
            m0_loop_stop(l);
        }
    }
}

/* The first loop: loop k's answer to the current ping (or its stop,
 * which answers for it); the master hears 'A' when none is owed. */
static void peer_answered(struct serve *v, unsigned k)
{
    if (v->peer_pinged[k]) {
        v->peer_pinged[k] = 0;
        if (--v->pongs_owed == 0)
            answer_ping(v);
    }
}

static void peer_retire(struct serve *v, unsigned k)
{
    if (!v->peer_retired[k]) {
        v->peer_retired[k] = 1;
        note_retired(v);
    }
}

/* The first loop: the master's ping to every other loop still running. */
static void ping_loops(struct serve *v)
{
    char p = M0_CTL_PING;
    for (unsigned k = 1; k < nloops(v); k++) {
        if (!v->peer_gone[k] && send(v->peer_fds[k], &p, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
            v->peer_pinged[k] = 1;
            v->pongs_owed++;
        }
    }
    if (v->pongs_owed == 0)
        answer_ping(v);
}

/* The first loop: what another loop reports (control.h). */
static void on_peer(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    struct serve *v = ctx;
    char msg[16];
    (void)events;
    unsigned k = 1;
    while (k < nloops(v) && v->peer_fds[k] != fd)
        k++;
    if (k == nloops(v))
        return;
    ssize_t n = ctl_recv(l, fd, msg, sizeof msg);
    if (n == -1) {           /* its end closed: as if it had said so */
        msg[0] = M0_CTL_EXITED;
        n = 1;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (msg[i] == M0_CTL_RETIRED) {
            peer_retire(v, k);
        } else if (msg[i] == M0_CTL_PONG) {
            peer_answered(v, k);
        } else if (msg[i] == M0_CTL_EXITED && !v->peer_gone[k]) {
            /* It reads its bus endpoint no more and answers no ping: it
             * counts as retired and as having answered. A loop that stops
             * while the worker serves leaves its share of the connections
             * unserved: the process is replaced whole. */
            v->peer_gone[k] = 1;
            peer_retire(v, k);
            peer_answered(v, k);
            if (!atomic_load(&v->s.life.draining)) {
                m0_error("event loop %u of this worker stopped: draining the worker", k);
                start_drain(v);
            }
        } else if (msg[i] == M0_CTL_REPLACE || msg[i] == M0_CTL_RELOAD) {
            ctl_send(v, msg[i]);
        }
    }
}

void m0_serve_tell_master(struct m0_server *s, char what)
{
    ctl_send(serve_of(s), what);
}

/* Before sleeping: the timeout sweep, released slots, the end of a drain. */
static void serve_hook(struct m0_loop *l, void *ctx)
{
    struct serve *v = ctx;
    struct m0_server *s = &v->s;
    uint64_t now = m0_loop_now(l);
    if (now >= s->life.next_sweep) {
        m0_conn_sweep(s);
        s->life.next_sweep = now + SWEEP_MS;
    }
    m0_conn_release_closed(s);
    m0_loops_publish(s);
    /* --max-requests counts the process: every loop adds to one count as
     * it begins a request (loops.h), and the first loop to end a pass with
     * the count at the bound asks, once. It is over by at most the requests
     * begun on the loops between the crossing and that pass's end: those
     * already in flight then (a client that waits for each answer has one). */
    uint64_t answered = m0_loops_requests(s);
    if (v->quota != 0 && answered >= v->quota && !atomic_load(&s->life.draining) &&
        (v->asked_at != 0 ? now - v->asked_at >= ASK_AGAIN_MS : m0_loops_claim_replace(s))) {
        /* --max-requests: the master boots a replacement first, then
         * drains this worker (as a reload does, for one slot). Asked again
         * after a while if nothing came of it (the master was reloading,
         * or the successor could not boot). */
        if (v->asked_at == 0)
            m0_info("worker answered %llu requests (--max-requests): asking to be replaced",
                    (unsigned long long)answered);
        v->asked_at = now;
        ctl_send(v, M0_CTL_REPLACE);
    }
    if (atomic_load(&s->life.draining)) {
        /* Done when every connection is closed and every runner has
         * returned its job: an ASGI app sees its sockets' disconnect (and a
         * view whose client left finishes) before lifespan shutdown. The
         * first loop, done, still waits for the others' 'R' (to the
         * deadline): it alone tells the master, whose successor takes the
         * slot's sockets only then. Stopped, it would tell nobody until the
         * process exits, after the last view of the slowest loop, while
         * the connections steered to the slot's sockets sat unaccepted. */
        if (s->slots.nactive == 0 && s->slots.norphans == 0) {
            if (all_retired(v) || now >= s->life.drain_deadline)
                m0_loop_stop(l);
        } else if (now >= s->life.drain_deadline) {
            m0_warn("graceful timeout: closing %u connection(s) still in flight (%u application task(s) "
                    "still running)", s->slots.nactive, s->slots.norphans);
            s->life.abandoned = 1;
            m0_loop_stop(l);
        }
    }
    m0_loop_wake_at(l, s->life.next_sweep);
}

static void close_conn_fds(struct m0_conn *c, void *ctx)
{
    (void)ctx;
    if (c->fd != -1)
        close(c->fd);
    if (c->file_fd != -1)
        close(c->file_fd);
}

static void free_conn(struct m0_conn *c, void *ctx)
{
    (void)ctx;
    if (c->job != NULL)
        m0_http_free(&c->job->http);
    m0_buf_free(&c->in);
    m0_buf_free(&c->out);
    m0_job_free(c->job);
}

/* In a child forked by the application (fork.h): every descriptor the
 * server owns. */
static void close_in_child(void *ctx)
{
    struct serve *v = ctx;
    struct m0_server *s = &v->s;
    m0_conn_each(s, close_conn_fds, NULL);
    for (int i = 0; i < s->accept.n; i++)
        close(s->accept.fds[i]);
    if (s->accept.reserve_fd != -1)
        close(s->accept.reserve_fd);
    if (v->ctl_fd != -1)
        close(v->ctl_fd);
    if (v->sig_fd != -1)
        close(v->sig_fd);
    m0_handoff_in_child(s);
    for (unsigned i = 1; i < M0_MAX_LOOPS; i++) {
        if (v->peer_fds[i] != -1)
            close(v->peer_fds[i]);
    }
    m0_loop_close_in_child(s->loop);
}

/* Occupancy and presence (issue 32, presence_loop.h): the loop's tracker,
 * an extension of the loop and the watcher of its realtime engine (rt.h);
 * the holds reach it only through the engine (m0_rt_presence). */
static void *presence_init(struct m0_server *s)
{
    return m0_presence_loop_new(s->cfg, s->slots.n);
}

static void presence_fini(struct m0_server *s, void *pl)
{
    if (s->rt != NULL)
        m0_rt_watch(s->rt, NULL, NULL);
    m0_presence_loop_free(pl);
}

static const struct m0_ext presence_ext = {.name = "presence", .init = presence_init, .fini = presence_fini};

struct m0_server *m0_serve_new(const struct m0_config *cfg, const int *listen_fds, int nlisten, int sig_fd,
                               int ctl_fd)
{
    struct serve *v = m0_xmalloc(sizeof *v);
    memset(v, 0, sizeof *v);
    struct m0_server *s = &v->s;
    v->sig_fd = sig_fd;
    v->ctl_fd = ctl_fd;
    for (unsigned i = 0; i < M0_MAX_LOOPS; i++)
        v->peer_fds[i] = -1;
    s->cfg = cfg;
    for (int i = 0; i < nlisten && i < M0_MAX_LISTENERS; i++)
        s->accept.fds[s->accept.n++] = listen_fds[i];
    if (cfg->max_requests > 0) {
        /* gunicorn's semantics: N plus a random 0..J, drawn per worker. */
        v->quota = (uint64_t)cfg->max_requests;
        if (cfg->max_requests_jitter > 0) {
            unsigned seed = (unsigned)getpid() ^ (unsigned)m0_clock_ms();
            v->quota += (uint64_t)rand_r(&seed) % (uint64_t)(cfg->max_requests_jitter + 1);
        }
    }
    s->timeouts.keepalive_ms = (uint64_t)(cfg->keepalive_timeout * 1000);
    s->timeouts.header_ms = (uint64_t)(cfg->header_timeout * 1000);
    s->timeouts.body_ms = (uint64_t)(cfg->body_timeout * 1000);
    s->timeouts.write_ms = 60000;
    s->timeouts.request_ms = (uint64_t)(cfg->request_timeout * 1000);
    s->slots.active.next = s->slots.active.prev = &s->slots.active;
    s->slots.n = (uint32_t)cfg->max_connections;
    /* Nothing per slot is touched before it is used: the chunks come as
     * connections do, and the job table's pages (calloc: fresh zero pages)
     * as their slots serve. */
    s->slots.chunks = calloc((s->slots.n + M0_CONN_CHUNK - 1) / M0_CONN_CHUNK, sizeof *s->slots.chunks);
    s->slots.jobs = calloc(s->slots.n, sizeof *s->slots.jobs);
    s->loop = m0_loop_new();
    if (s->slots.chunks == NULL || s->slots.jobs == NULL || s->loop == NULL) {
        m0_log_errno("cannot set up the event loop (%u connection slots)", s->slots.n);
        return NULL;
    }
    s->accept.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    m0_loop_on_slot(s->loop, m0_conn_on_event, s);
    m0_loop_on_complete(s->loop, m0_conn_on_complete, s);
    /* The composition root: the protocols a connection may speak, and the
     * holds with the realtime engine they are the sink of. */
    s->proto[M0_CONN_PROTO_H1] = &m0_h1_conn_ops;
    s->proto[M0_CONN_PROTO_SSE] = &m0_sse_conn_ops;
    s->proto[M0_CONN_PROTO_WS] = &m0_ws_conn_ops;
    s->proto[M0_CONN_PROTO_GRIP] = &m0_grip_conn_ops;
    s->xprt[M0_XPRT_PLAIN] = &m0_xprt_plain;
    s->xprt[M0_XPRT_TLS] = &m0_xprt_tls;
    s->accept.tls = cfg->tls != NULL ? cfg->tls_listeners : 0;     /* the listeners that speak TLS */
    m0_holds_init(s);
    m0_ext_register(s, &presence_ext);
    struct m0_presence_loop *pl = m0_ext_of(s, &presence_ext);
    if (pl != NULL)
        m0_rt_watch(s->rt, &m0_presence_loop_watch, pl);
    if ((sig_fd != -1 && m0_loop_add_fd(s->loop, sig_fd, EPOLLIN, on_signal, v) == M0_ERR) ||
        (ctl_fd != -1 && m0_loop_add_fd(s->loop, ctl_fd, EPOLLIN, on_ctl, v) == M0_ERR)) {
        m0_log_errno("epoll_ctl(signals)");
        return NULL;
    }
    m0_loop_add_hook(s->loop, serve_hook, v);
    /* The features' per-loop state (server.h), made on first use. */
    m0_ext_register(s, &m0_ws_scratch_ext);
    m0_ext_register(s, &m0_grip_publisher_ext);
    m0_ext_register(s, &m0_tls_ext);
    m0_metrics_attach(s);
    /* Who answers a request, in this order (endpoint.h): the listeners
     * answered in C, the paths answered in C, the mounts, the 404. */
    m0_endpoint_add(s, &m0_pubsock_endpoint);
    m0_endpoint_add(s, &m0_grip_control_endpoint);
    m0_endpoint_add(s, &m0_metrics_endpoint);
    m0_endpoint_add(s, &m0_health_endpoint);
    m0_endpoint_add(s, &m0_grant_endpoint);
    m0_endpoint_add(s, &m0_static_endpoint);
    m0_endpoint_add(s, &m0_woh_endpoint);          /* before the mounts: their WebSockets over HTTP */
    m0_endpoint_add(s, &m0_h1_app_endpoint);
    m0_endpoint_add(s, &m0_unmounted_endpoint);
    s->life.next_sweep = m0_loop_now(s->loop) + SWEEP_MS;
    s->run.env = (struct m0_runner_env){.loop = s->loop, .jobs = s->slots.jobs, .njobs = s->slots.n, .draining = &s->life.draining,
                                    .newest_id = m0_rt_newest, .newest_ctx = s->rt};
    m0_fork_on_child(close_in_child, v);
    return s;
}

int m0_serve_group(struct m0_server **loops, unsigned n)
{
    if (n == 1)
        return M0_OK;        /* a lone loop: nothing to share (s->loops stays NULL) */
    struct m0_loops *ls = m0_loops_new(n);
    for (unsigned i = 0; i < n; i++) {
        struct m0_server *s = loops[i];
        ls->s[i] = s;
        s->loops = ls;
        s->slots.worker_conns = &ls->conns;
        s->loop_index = i;
        s->run.env.loop_index = i;
        m0_rt_set_loop(s->rt, (int)i);
        if (m0_handoff_open(s) != M0_OK)
            return M0_ERR;
        if (i == 0)
            continue;
        serve_of(s)->quota = serve_of(loops[0])->quota;    /* --max-requests counts the process: one draw */
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
            m0_log_errno("socketpair (event loops)");
            return M0_ERR;
        }
        serve_of(loops[0])->peer_fds[i] = sv[0];
        serve_of(s)->ctl_fd = sv[1];
        if (m0_loop_add_fd(loops[0]->loop, sv[0], EPOLLIN, on_peer, serve_of(loops[0])) == M0_ERR ||
            m0_loop_add_fd(s->loop, sv[1], EPOLLIN, on_ctl, serve_of(s)) == M0_ERR) {
            m0_log_errno("epoll_ctl(event loops)");
            return M0_ERR;
        }
    }
    return M0_OK;
}

int m0_serve_prepare(struct m0_server *s)
{
    if (s->cfg->realtime && m0_rt_prepare(s->rt) != M0_OK) {
        m0_error("cannot set up the realtime bus");
        return M0_ERR;
    }
    return M0_OK;
}

void m0_serve_booted(struct m0_server *s)
{
    struct serve *v = serve_of(s);
    if (v->ctl_fd == -1)
        go(v);
    else
        ctl_send(v, M0_CTL_BOOTED);
}

int m0_serve_run(struct m0_server *s)
{
    struct serve *v = serve_of(s);
    if (m0_loop_run(s->loop) != M0_OK)
        v->rc = M0_EXIT_FAIL;
    /* Whatever is still queued will not be started: its client is about
     * to be disconnected. */
    m0_conn_close_all(s);
    m0_conn_release_closed(s);
    unsigned threads, busy, max, queued;
    m0_pool_stats(s->run.pool, &threads, &busy, &max, &queued);
    if ((s->life.abandoned || v->stop_now) && busy > 0) {
        /* A view is still running past the deadline: joining it would only
         * make the master kill us later. Leave now. */
        m0_warn("leaving %u handler thread(s) mid-view", busy);
        return M0_EXIT_ABANDONED;
    }
    if (v->rc != M0_EXIT_OK)
        return v->rc;
    return s->life.abandoned ? M0_EXIT_ABANDONED : M0_EXIT_OK;
}

void m0_serve_free(struct m0_server *s)
{
    struct serve *v = serve_of(s);
    /* Threads finish their current job, then stop; only then may jobs be
     * freed. */
    m0_pool_stop(s->run.pool);
    s->run.pool = NULL;
    /* The extensions, last registered first: the broker publisher's
     * thread posts to the loop (joined before the loop goes), connections
     * handed too late are closed, the WebSocket scratch freed, the
     * presence tracker taken from the engine and freed. */
    m0_ext_fini_all(s);
    m0_conn_each(s, free_conn, NULL);
    m0_conn_job_cache_free(s);
    m0_holds_free(s);
    m0_conn_slots_free(s);
    m0_loop_free(s->loop);
    if (s->accept.reserve_fd != -1)
        close(s->accept.reserve_fd);
    if (v->ctl_fd != -1)
        close(v->ctl_fd);
    for (unsigned i = 1; i < M0_MAX_LOOPS; i++) {
        if (v->peer_fds[i] != -1)
            close(v->peer_fds[i]);
    }
    m0_fork_forget(v);
    free(v);
}
