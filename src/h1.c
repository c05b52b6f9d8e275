/*
 * h1.c — HTTP/1.1 requests on a connection (RFC 9112): parse, route to a
 * target or answer in C, dispatch to the target's runner, take the
 * runner's completions, finish (keep-alive or close).
 *
 * Every request that gets an answer goes through begin_request(): the one
 * place per-request timers and flags are reset, so no answering path (a
 * view, /health, an error) can leave the next request without its head
 * timeout.
 *
 * Expect: 100-continue (RFC 9110 §10.1.1) is decided by the application:
 * the request is dispatched when its head is complete, the body is read by
 * the loop while the runner runs, and 100 Continue goes out only when the
 * application first reads wsgi.input (M0_CPL_CONTINUE). An application
 * that answers without reading gets its final response out at once, and
 * the connection closes unless the body arrived anyway (RFC 9112 §9.3).
 * Other request bodies are received whole before dispatch, which keeps
 * slow uploads off the pool threads.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "m0/accesslog.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/broker.h"
#include "m0/health.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/metrics.h"
#include "m0/pool.h"
#include "m0/proxy.h"
#include "m0/py.h"
#include "m0/runner.h"
#include "m0/static.h"
#include "m0/target.h"
#include "m0/timer.h"

static const char continue_100[] = "HTTP/1.1 100 Continue\r\n\r\n";

/* ---------------------------------------------------------- inline mode */

/* A runner on the loop thread (no pool) cannot wait for the loop: it
 * writes and reads the socket itself, blocking, bounded by the timeouts. */
static int wait_fd(int fd, short what, uint64_t ms)
{
    struct pollfd p = {.fd = fd, .events = what};
    int rc;
    do
        rc = poll(&p, 1, ms > 600000 ? 600000 : (int)ms);
    while (rc == -1 && errno == EINTR);
    return rc == 1 && !(p.revents & (POLLERR | POLLNVAL)) ? M0_OK : M0_ERR;
}

static int send_all(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w == -1) {
            if (errno == EINTR)
                continue;
            if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd(c->fd, POLLOUT, s->write_ms) == M0_OK)
                continue;
            c->flags |= C_PEER_GONE;
            return M0_ERR;
        }
        p += w;
        n -= (size_t)w;
    }
    return M0_OK;
}

static int inline_flush(struct m0_job *job, void *ctx)
{
    struct m0_server *s = ctx;
    struct m0_conn *c = &s->conns[job->slot];
    if (c->flags & C_PEER_GONE)
        return M0_ERR;
    m0_buf_append(&c->out, job->resp.out.data + job->resp.out.off, m0_buf_unread(&job->resp.out));
    m0_buf_reset(&job->resp.out);
    int rc = send_all(s, c, c->out.data + c->out.off, m0_buf_unread(&c->out));
    m0_buf_reset(&c->out);
    return rc;
}

static int feed_body(struct m0_server *s, struct m0_conn *c);

static int inline_read_body(struct m0_job *job, uint64_t want, void *ctx)
{
    struct m0_server *s = ctx;
    struct m0_conn *c = &s->conns[job->slot];
    if (!(c->flags & C_SENT_100)) {
        c->flags |= C_SENT_100;
        if (send_all(s, c, continue_100, sizeof continue_100 - 1) != M0_OK)
            return M0_ERR;
    }
    for (;;) {
        if (feed_body(s, c) != M0_OK || job->ch.body_error)
            return M0_ERR;
        if (job->ch.body_done || job->req.body_len >= want)
            return M0_OK;
        if (c->flags & C_PEER_GONE)
            return M0_ERR;
        if (wait_fd(c->fd, POLLIN, s->body_ms) != M0_OK)
            return M0_ERR;
        m0_conn_read(c);
    }
}

/* One server per process: ctx is set when the first job runs inline. */
static struct m0_job_inline inline_ops = {.flush = inline_flush, .read_body = inline_read_body};

/* ------------------------------------------------------------ responses */

void m0_h1_access_log(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    uint64_t now_us = m0_clock_us();
    (void)s;
    struct m0_access a = {
        .addr = job->remote_addr,
        .req = &job->req,
        .resp_head = job->head.lines.data,
        .resp_head_len = job->head.lines.len,
        .status = job->resp.status,
        .bytes = job->resp.body_bytes,
        .duration_us = now_us > c->started_us ? now_us - c->started_us : 0,
    };
    m0_access_log(&a);
}

/* The per-request start of every answer: timers and flags of the previous
 * request are gone, whoever answers. The head timer is the keep-alive
 * reset's to clear (m0_h1_finish): it runs until the response is out. */
static void begin_request(struct m0_server *s, struct m0_conn *c)
{
    c->started_us = m0_clock_us();
    c->flags &= ~(C_SLOW_LOGGED | C_MORE | C_STREAMING);
    c->resp_flags = 0;
    s->requests++;
}

void m0_h1_finish(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    int keep = job->body.keep && !(c->resp_flags & M0_RESP_ABORT) && c->http.status == 0;
    if (c->flags & C_LAZY_BODY)
        keep = 0;       /* the body never came in whole: its end cannot be found */

    /* Counted as logged: every response, the server's own refusals too (a
     * request rejected before its method counts as method "other"). */
    if (job->resp.status != 0)
        m0_metrics_request(s->mx, job->mx_mount, job->req.method, job->resp.status, m0_clock_us() - c->started_us, 0);
    /* Every response that went out, the server's own refusals included (a
     * request rejected before its method has none: its line says "-"). */
    if (s->cfg->access_log && job->resp.status != 0)
        m0_h1_access_log(s, c);
    if (!keep) {
        /* Unread request bytes would turn our close into an RST that can
         * destroy the response in flight: shut down our side and discard
         * input briefly first (lingering close). */
        shutdown(c->fd, SHUT_WR);
        if (c->resp_flags & M0_RESP_ABORT) {
            m0_conn_close(s, c);
            return;
        }
        m0_conn_set_state(s, c, M0_CONN_LINGER);
        m0_buf_free(&c->in);
        m0_conn_interest(s, c, EPOLLIN | EPOLLRDHUP);
        return;
    }
    /* Keep-alive — also while draining when the head promised it: the next
     * request on it is answered with Connection: close. */
    m0_http_next(&c->http);
    m0_job_reset(job);
    job->gen = c->gen;
    /* Until the next head is complete, the client is the peer (an error
     * answered before then has no proxy headers to trust). */
    memcpy(job->remote_addr, job->peer_addr, sizeof job->remote_addr);
    job->remote_port = job->peer_port;
    job->https = 0;
    c->flags &= ~(C_STREAMING | C_SENT_100 | C_LAZY_BODY | C_MORE | C_HEAD_TIMER);
    c->resp_flags = 0;
    if (m0_buf_unread(&c->in) == 0) {
        m0_buf_free(&c->in);       /* idle connections shed their read buffer */
    } else {
        /* Pipelined bytes wait in c->in: the caller parses them at once. */
        c->flags |= C_HEAD_TIMER;
    }
    m0_conn_set_state(s, c, M0_CONN_READ_HEAD);
    m0_conn_interest(s, c, EPOLLIN | EPOLLRDHUP);
}

/* What the runner produced goes to the connection: the hold taken, the
 * bytes and file range moved, then written. rc is the runner's outcome. */
static void after_run(struct m0_server *s, struct m0_conn *c, int rc)
{
    struct m0_job *job = c->job;
    struct m0_resp *rs = &job->resp;
    if ((rs->flags & M0_RESP_HOLD) && m0_hold_subscribe(s, c) != M0_OK) {
        if (rc == M0_AGAIN) {
            /* Only run_inline passes M0_AGAIN, after it detached (a pool's
             * job is abandoned on its own thread): close() is Python. */
            m0_py_attach();
            job->target->runner->abandon(job);
            m0_py_detach();
        }
        rc = M0_DONE;
        if (c->flags & C_STREAMING) {
            /* Its head is already out (a body too long to hold back): one
             * head per response, so the stream is cut, never followed by a
             * second status line. */
            m0_warn("hold on %s not taken (worker draining): closing the stream", job->head.channel);
            m0_resp_reset(rs);
            rs->flags = M0_RESP_ABORT;
        } else {
            if (job->head.hold == M0_HOLD_WEBSOCKET)
                m0_warn("WebSocket %s %s not accepted (worker draining): answering 503", job->req.method,
                        job->req.target);
            else
                m0_warn("hold on %s not taken (worker draining): answering 503", job->head.channel);
            m0_resp_reset(rs);
            m0_error_response(&rs->out, 503, "The stream could not be held; retry", 1, 0);
            rs->status = 503;
            rs->flags = 0;
            job->body.keep = 0;
        }
    }
    if (m0_buf_unread(&c->out) == 0) {
        struct m0_buf t = c->out;
        m0_buf_reset(&t);
        c->out = rs->out;
        rs->out = t;
    } else {
        m0_buf_append(&c->out, rs->out.data + rs->out.off, m0_buf_unread(&rs->out));
        m0_buf_reset(&rs->out);
    }
    if (rs->file_fd != -1) {
        c->file_fd = rs->file_fd;
        c->file_off = rs->file_off;
        c->file_left = rs->file_left;
        rs->file_fd = -1;
        rs->file_left = 0;
    }
    c->resp_flags = rs->flags;
    if (rc == M0_AGAIN)
        c->flags |= C_MORE;
    else
        c->flags &= ~C_MORE;
    m0_conn_set_state(s, c, M0_CONN_WRITE);
    m0_conn_flush(s, c);
}

static void run_inline(struct m0_server *s, struct m0_conn *c, int resume)
{
    struct m0_job *job = c->job;
    const struct m0_runner *r = job->target->runner;
    m0_py_attach();
    int rc = resume ? r->resume(job) : r->start(job);
    m0_py_detach();
    after_run(s, c, rc);
}

void m0_h1_resume_inline(struct m0_server *s, struct m0_conn *c)
{
    run_inline(s, c, 1);
}

static void dispatch(struct m0_server *s, struct m0_conn *c, const struct m0_target *t)
{
    struct m0_job *job = c->job;
    begin_request(s, c);
    job->target = t;
    struct m0_target_stats *ts = m0_target_stats_of(&m0_targets, t);
    ts->requests++;
    m0_conn_set_state(s, c, M0_CONN_RUN);
    /* EPOLLIN stays armed while the request is served: a client that waits
     * for its answer sends nothing, so no epoll_ctl is spent here. If bytes
     * do arrive (pipelining, a half-close), the event handler disarms then. */
    if (t->runner->submit != NULL) {
        /* An asynchronous runner schedules the job on its own executor. */
        job->inl = NULL;
        job->wake = t->runner->wake;
        job->queued_ms = m0_loop_now(s->loop);
        atomic_store(&job->run_state, M0_JOB_QUEUED);
        c->flags |= C_RUNNER;
        ts->in_flight++;                 /* until its final completion */
        t->runner->submit(t, job);
        return;
    }
    if (t->pool != NULL) {
        job->inl = NULL;
        job->queued_ms = m0_loop_now(s->loop);
        atomic_store(&job->run_state, M0_JOB_QUEUED);
        c->flags |= C_RUNNER;
        ts->in_flight++;                 /* until its final completion */
        m0_pool_submit(t->pool, m0_conn_slot(s, c), c->gen);
        return;
    }
    inline_ops.ctx = s;
    job->inl = &inline_ops;
    uint64_t began = m0_clock_ms();
    run_inline(s, c, 0);
    if (s->request_ms && m0_clock_ms() - began > s->request_ms)
        m0_warn("view ran %.1f s (over --request-timeout): %s %s", (double)(m0_clock_ms() - began) / 1000,
                job->req.method, job->req.target);
}

/* How an answer generated by the loop is framed: keep-alive unless the
 * request or a drain says otherwise. */
static struct m0_body_req answer_framing(struct m0_server *s, const struct m0_req *r)
{
    return (struct m0_body_req){.http_minor = r->http_minor,
                                .keepalive = (r->flags & M0_REQ_KEEPALIVE) && !atomic_load(&s->draining),
                                .head = (r->flags & M0_REQ_HEAD) != 0};
}

/* A static mount (DESIGN capability 10): answered on the loop thread, no
 * Python; the body is a file range the normal write path sends. */
static void answer_static(struct m0_server *s, struct m0_conn *c, const struct m0_target *t)
{
    struct m0_job *job = c->job;
    struct m0_static_out o;
    begin_request(s, c);
    m0_target_stats_of(&m0_targets, t)->requests++;
    struct m0_body_req br = answer_framing(s, &job->req);
    m0_static_respond(t->files, &job->req, t->prefix_len, &br, &job->head, &job->body, &c->out, &o);
    job->resp.status = o.status;
    job->resp.body_bytes = o.body_bytes;
    if (o.fd != -1) {
        c->file_fd = o.fd;
        c->file_off = o.off;
        c->file_left = o.len;
    }
    c->resp_flags = 0;
    m0_conn_set_state(s, c, M0_CONN_WRITE);
    m0_conn_flush(s, c);
}

/* No mount claims the path: a 404 from the loop (no Python), counted for
 * /health; the connection is kept like any other answer's. */
static void answer_unmounted(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    begin_request(s, c);
    m0_targets.unmatched++;
    struct m0_body_req br = answer_framing(s, &job->req);
    job->resp.body_bytes = m0_static_plain(&job->head, &job->body, &c->out, &br, 404, NULL,
                                           "No application is mounted at this path");
    job->resp.status = 404;
    c->resp_flags = 0;
    m0_conn_set_state(s, c, M0_CONN_WRITE);
    m0_conn_flush(s, c);
}

/* /health, answered here in C: it must stay readable while every Python
 * thread is busy (DESIGN capability 11). */
static void answer_health(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    struct m0_channel_stat top[20];
    struct m0_rt_stats rt;
    m0_rt_stats(s, &rt);
    begin_request(s, c);
    struct m0_health h = {
        .pid = (int)getpid(),
        .worker = m0_bus_index,
        .connections = s->nactive,
        .held_streams = rt.held,
        .websockets = rt.websockets,
        .events_published = rt.published,
        .events_delivered = rt.delivered,
        .events_lost = rt.lost,
        .slow_closed = rt.slow_closed,
        .requests = s->requests,
        .draining = atomic_load(&s->draining),
    };
    m0_pool_stats(s->pool, &h.pool_threads, &h.pool_busy, &h.pool_max, &h.pool_queued);
    h.targets = &m0_targets;
    struct m0_buf body = {0}, broker = {0};
    if (m0_broker != NULL && s->rt != NULL) {
        h.degraded = !m0_broker_health(s, &broker);
        m0_buf_append(&broker, "", 1);
        h.broker = broker.data;
    }
    m0_health_render(&body, &h, top, m0_rt_top(s, top, M0_ARRAY_LEN(top)));
    m0_buf_free(&broker);
    m0_head_reset(&job->head);
    m0_head_status(&job->head, 200, NULL, 0);
    const char *why;
    m0_head_add(&job->head, "Content-Type", 12, "application/json", 16, &why);
    m0_head_add(&job->head, "Cache-Control", 13, "no-store", 8, &why);
    struct m0_body_req br = answer_framing(s, &job->req);
    m0_body_reset(&job->body);
    m0_body_commit(&job->body, &c->out, &job->head, &br, (int64_t)body.len, 0);
    m0_body_emit(&job->body, &c->out, body.data, body.len);
    job->resp.status = 200;
    job->resp.body_bytes = body.len;
    m0_buf_free(&body);
    c->resp_flags = 0;
    m0_conn_set_state(s, c, M0_CONN_WRITE);
    m0_conn_flush(s, c);
}

/* Who the request speaks for (proxy.h): the peer, or the client a trusted
 * proxy names. Recomputed per request: one upstream connection of a proxy
 * carries requests of many clients. Whether the peer may speak for anyone
 * is m0_proxy_client's decision alone (its contract, unit-tested there). */
static void set_client(struct m0_server *s, struct m0_job *job)
{
    struct m0_client cl;
    m0_proxy_client(&s->cfg->forwarded_trust, job->peer_addr, job->peer_port, &job->req, &cl);
    memcpy(job->remote_addr, cl.addr, sizeof job->remote_addr);
    job->remote_port = cl.port;
    job->https = cl.https;
}

/* A complete request: to the health path, a target, or a 404. */
static void route(struct m0_server *s, struct m0_conn *c)
{
    const struct m0_req *r = &c->job->req;
    set_client(s, c->job);
    c->job->mx_mount = -1;
    if (m0_metrics_claims(s, c)) {       /* metrics.h: answered in C, never the app */
        begin_request(s, c);
        m0_metrics_answer(s, c);
        return;
    }
    if (s->health_len != 0 && r->path_len == s->health_len && memcmp(r->path, s->health_path, s->health_len) == 0) {
        answer_health(s, c);
        return;
    }
    const struct m0_target *t = m0_target_match(&m0_targets, r->path, r->path_len);
    c->job->mx_mount = t != NULL ? (int8_t)(t - m0_targets.t) : -1;
    if (t == NULL)
        answer_unmounted(s, c);
    else if (t->runner == NULL)
        answer_static(s, c, t);
    else
        dispatch(s, c, t);
}

/* ---------------------------------------------------- the lazy body */

/* Feed what c->in holds to the parser as body bytes of the running job
 * (under the job's lock: the runner reads the body meanwhile). Returns
 * M0_OK, or M0_ERR when the body is malformed or over a limit. */
static int feed_body(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    int done = 0, error = 0;
    (void)s;
    m0_job_lock(job);
    while (m0_buf_unread(&c->in) > 0 && !done && !error) {
        size_t used = 0;
        int rc = m0_http_feed(&c->http, c->in.data + c->in.off, m0_buf_unread(&c->in), &used);
        m0_buf_consume(&c->in, used);
        if (rc == M0_ERR)
            error = 1;
        else if (rc == M0_DONE)
            done = 1;
        else if (rc != M0_AGAIN)
            error = 1;   /* a second head inside a body cannot happen: be safe */
        else
            break;
    }
    if (!done && !error && (c->flags & C_PEER_GONE))
        error = 1;       /* the client left before the body ended */
    if (job->inl != NULL) {
        /* Inline: the runner is this thread, nothing to wake. */
        job->ch.body_done |= (uint8_t)done;
        job->ch.body_error |= (uint8_t)error;
    }
    m0_job_unlock(job);
    if (job->inl == NULL)
        m0_job_body_progress(job, done, error);
    if (done || error) {
        c->flags &= ~C_LAZY_BODY;
        if (error)
            m0_debug("slot %u: lazy request body failed: %s", m0_conn_slot(s, c),
                     c->http.reason ? c->http.reason : "client left");
        m0_buf_compact(&c->in);
    }
    return error ? M0_ERR : M0_OK;
}

void m0_h1_read_lazy_body(struct m0_server *s, struct m0_conn *c)
{
    m0_conn_read(c);
    feed_body(s, c);
    if (!(c->flags & C_LAZY_BODY)) {
        m0_conn_interest(s, c, 0);      /* pipelined bytes wait their turn */
        c->deadline = 0;
    } else if (c->flags & C_SENT_100) {
        c->deadline = m0_loop_now(s->loop) + s->body_ms;     /* progress restarts the idle timeout */
    }
}

/* 100 Continue now (RFC 9110 §10.1.1), once per request. */
static void put_continue(struct m0_server *s, struct m0_conn *c)
{
    if (c->flags & C_SENT_100)
        return;
    c->flags |= C_SENT_100;
    /* Small and first on the wire: a direct send; what the socket cannot
     * take now goes out ahead of the response. */
    ssize_t w = send(c->fd, continue_100, sizeof continue_100 - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < (ssize_t)(sizeof continue_100 - 1))
        m0_buf_append(&c->out, continue_100 + (w > 0 ? w : 0), sizeof continue_100 - 1 - (size_t)(w > 0 ? w : 0));
    c->deadline = m0_loop_now(s->loop) + s->body_ms;
    m0_conn_interest(s, c, EPOLLIN | EPOLLRDHUP);
}

/* The running application asked for a lazy body: 100 Continue, then its
 * bytes as they come. */
static void send_continue(struct m0_server *s, struct m0_conn *c)
{
    if (c->flags & C_LAZY_BODY)
        put_continue(s, c);
}

/* -------------------------------------------------------------- parsing */

void m0_h1_parse(struct m0_server *s, struct m0_conn *c)
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
            begin_request(s, c);
            m0_conn_error(s, c, c->http.status, c->http.reason);
            return;
        }
        if (rc == M0_OK) {
            /* Head complete: decide about the body before reading it. */
            m0_conn_set_state(s, c, M0_CONN_READ_BODY);
            if ((job->req.flags & M0_REQ_EXPECT100) && (job->req.flags & M0_REQ_CHUNKED)) {
                /* A chunked body's size is known only once it is read, and
                 * WSGI frameworks size wsgi.input by CONTENT_LENGTH (Django
                 * reads nothing without it): read it now, as any chunked
                 * body, so --max-body answers 413 before the application
                 * runs and CONTENT_LENGTH is exact. */
                put_continue(s, c);
            } else if ((job->req.flags & M0_REQ_EXPECT100) && job->req.content_length > 0) {
                /* The application decides whether the body is wanted. */
                const struct m0_target *t = m0_target_match(&m0_targets, job->req.path, job->req.path_len);
                int health = s->health_len != 0 && job->req.path_len == s->health_len &&
                             memcmp(job->req.path, s->health_path, s->health_len) == 0;
                if (t != NULL && t->runner != NULL && !health) {   /* a static mount wants no body */
                    set_client(s, job);
                    c->flags |= C_LAZY_BODY;
                    job->ch.body_lazy = 1;
                    m0_buf_compact(&c->in);
                    dispatch(s, c, t);
                    if (c->state == M0_CONN_RUN && (c->flags & C_LAZY_BODY) && m0_buf_unread(&c->in) > 0)
                        m0_h1_read_lazy_body(s, c);     /* body bytes sent without waiting */
                    if (c->state != M0_CONN_READ_HEAD)
                        return;
                    continue;       /* answered inline already: pipelined requests next */
                }
            }
            head_paused = 1;
            continue;
        }
        /* M0_DONE: one whole request. Pipelined bytes stay in c->in. */
        m0_buf_compact(&c->in);
        route(s, c);
        if (c->state != M0_CONN_READ_HEAD)
            return;     /* still writing, lingering or closed */
    }
    if (c->flags & C_PEER_GONE) {
        if (c->state == M0_CONN_READ_BODY || c->http.in_message)
            m0_debug("slot %u: peer closed mid-request", m0_conn_slot(s, c));   /* nobody to answer */
        m0_conn_close(s, c);
        return;
    }
    if (c->state == M0_CONN_READ_HEAD && c->http.in_message && !(c->flags & C_HEAD_TIMER)) {
        /* The first bytes of a request: from now on the head timeout, not
         * what was left of the keep-alive idle time, bounds it. */
        c->flags |= C_HEAD_TIMER;
        m0_conn_set_state(s, c, M0_CONN_READ_HEAD);
    }
    if (c->state == M0_CONN_READ_BODY && progressed)
        m0_conn_set_state(s, c, M0_CONN_READ_BODY);   /* an idle timeout: any progress restarts it */
    if (m0_buf_unread(&c->in) == 0 && c->in.cap > 32 * 1024)
        m0_buf_free(&c->in);
}

/* ---------------------------------------------------------- completions */

void m0_h1_check_request_timeout(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    uint64_t now = m0_loop_now(s->loop);
    if (now - job->queued_ms < s->request_ms)
        return;
    int queued = M0_JOB_QUEUED;
    if (atomic_compare_exchange_strong(&job->run_state, &queued, M0_JOB_CANCELLED)) {
        unsigned threads, busy, max, waiting;
        m0_pool_stats(s->pool, &threads, &busy, &max, &waiting);
        m0_warn("503 for %s %s: still queued after %.1f s (all %u handler threads busy)", job->req.method,
                job->req.target, (double)s->request_ms / 1000, threads);
        m0_conn_error(s, c, 503, "No handler thread became free in time (--request-timeout)");
        return;
    }
    if (!(c->flags & C_SLOW_LOGGED)) {
        c->flags |= C_SLOW_LOGGED;
        m0_warn("view still running after %.1f s: %s %s", (double)(now - job->queued_ms) / 1000,
                job->req.method, job->req.target);
    }
}

void m0_h1_on_complete(struct m0_loop *l, const struct m0_completion *done, void *ctx)
{
    struct m0_server *s = ctx;
    (void)l;
    if (done->slot >= s->nconns)
        return;
    struct m0_conn *c = &s->conns[done->slot];
    struct m0_job *job = c->job;
    if (job == NULL || !(c->flags & C_RUNNER))
        return;
    switch (done->kind) {
    case M0_CPL_PART:
        if (c->flags & C_UPGRADED) {
            /* Frames from the runner of an accepted socket (dropped if it was refused). */
            if (c->hold != NULL && c->hold->ws != NULL)
                m0_ws_hold_on_part(s, c);
            return;
        }
        /* A streaming runner handed over body bytes; it keeps the job. */
        if (c->state != M0_CONN_RUN && c->state != M0_CONN_WRITE)
            return;
        m0_job_take(job, &c->out);
        c->flags |= C_STREAMING;
        if (c->state == M0_CONN_RUN)
            m0_conn_set_state(s, c, M0_CONN_WRITE);
        m0_conn_flush(s, c);
        return;
    case M0_CPL_CONTINUE:
        if (c->state == M0_CONN_RUN || c->state == M0_CONN_WRITE)
            send_continue(s, c);
        return;
    case M0_CPL_UPGRADE:
        /* An asynchronous runner accepted a WebSocket: the 101 and the
         * hold, as for a view's approval; the runner keeps the job. */
        if (c->state == M0_CONN_RUN) {
            c->flags |= C_UPGRADED;
            after_run(s, c, M0_DONE);
        }
        return;
    case M0_CPL_TAKEN:
        if ((c->flags & C_UPGRADED) && c->hold != NULL && c->hold->ws != NULL)
            m0_ws_hold_on_taken(s, c);
        return;
    default:
        break;
    }
    c->flags &= ~C_RUNNER;
    if (job->target != NULL)
        m0_target_stats_of(&m0_targets, job->target)->in_flight--;
    if (c->state == M0_CONN_ORPHAN) {
        s->norphans--;
        /* The client left while the job ran: the runner is done with the
         * job (close() included), so the slot is free at last. */
        m0_conn_set_state(s, c, M0_CONN_CLOSING);
        c->next_free = s->release_list;
        s->release_list = c;
        return;
    }
    if (c->flags & C_WS_MSG) {
        /* An inbound WebSocket message's view returned (wshold.c). */
        m0_ws_hold_on_complete(s, c);
        return;
    }
    if (c->flags & C_UPGRADED) {
        /* The runner of an accepted socket ended: wshold.c closes the
         * socket if it is still held; a refused or finished one owes nothing. */
        c->flags &= ~C_UPGRADED;
        if (c->hold != NULL && c->hold->ws != NULL)
            m0_ws_hold_on_done(s, c);
        return;
    }
    if (atomic_load(&job->run_state) == M0_JOB_CANCELLED)
        return;   /* answered 503 by the loop; the thread never started it */
    m0_job_take(job, &c->out);          /* what a streaming runner left queued comes first */
    after_run(s, c, M0_DONE);
    if (c->state == M0_CONN_READ_HEAD && m0_buf_unread(&c->in) > 0)
        m0_h1_parse(s, c);   /* pipelined requests waited their turn */
}
