/*
 * h1.c — HTTP/1.1 requests on a connection (RFC 9112), the protocol a
 * connection speaks until a hold is entered (conn.h: m0_h1_conn_ops): parse,
 * ask the endpoint table who answers (endpoint.h), run an application's
 * runner (dispatch.h), take the runners' completions, finish (keep-alive or
 * close).
 *
 * Every request that gets an answer goes through begin_request(): the one
 * place its start time, the request count and the previous response's
 * flags are reset, whoever answers (a view, /health, an error). The head
 * timer is reset by the keep-alive step alone (finish), so it bounds the
 * next head from its first byte.
 *
 * Who answers is decided once, when the head is complete (decide(): the
 * endpoint table's first claim), and kept on the job with the claim's
 * flags; the Expect branch and the routing act on them alone. An answer
 * that reads no body (the metrics, /health, a grant, a static file, a 404,
 * every refusal of the GRIP control port) is given then, from the head
 * alone: no 100 Continue, no byte of the body read or spooled, and the
 * connection closed after it (RFC 9112 §9.6) — a GET endpoint sent 1 GB is
 * answered at once. Only an application, the publish socket and an
 * authenticated GRIP publish within --grip-max-body read a body.
 *
 * Expect: 100-continue (RFC 9110 §10.1.1) is decided by the application (an
 * endpoint that may start before the body, M0_EP_EARLY): the request is
 * dispatched when its head is complete, the body is read by the loop while
 * the runner runs, and 100 Continue goes out only when the application
 * first reads the body (wsgi.input, ASGI's receive: M0_CPL_CONTINUE). An
 * application that answers without reading gets its final response out at
 * once, and the connection closes unless the body arrived anyway (RFC 9112
 * §9.3). Other request bodies are received whole before their answerer
 * runs, which keeps slow uploads off the pool threads.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "m0/accesslog.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/dispatch.h"
#include "m0/endpoint.h"
#include "m0/h1.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/loops.h"
#include "m0/metrics.h"
#include "m0/pool.h"
#include "m0/proxy.h"
#include "m0/rt.h"
#include "m0/runner.h"
#include "m0/target.h"
#include "m0/timer.h"

static const char continue_100[] = "HTTP/1.1 100 Continue\r\n\r\n";

/* ---------------------------------------------------------- inline mode */

/* A runner on the loop thread (no pool) cannot wait for the loop: it
 * writes and reads the socket itself, blocking, bounded by the timeouts
 * (conn.h: m0_conn_send_wait, m0_conn_wait_readable). */
static int inline_flush(struct m0_job *job, void *ctx)
{
    struct m0_server *s = ctx;
    struct m0_conn *c = m0_conn_of(s, job->slot);
    if (c->flags & C_PEER_GONE)
        return M0_ERR;
    m0_buf_append(&c->out, job->resp.out.data + job->resp.out.off, m0_buf_unread(&job->resp.out));
    m0_buf_reset(&job->resp.out);
    int rc = m0_conn_send_wait(s, c, c->out.data + c->out.off, m0_buf_unread(&c->out));
    m0_buf_reset(&c->out);
    return rc;
}

static int feed_body(struct m0_server *s, struct m0_conn *c);

static int inline_read_body(struct m0_job *job, uint64_t want, void *ctx)
{
    struct m0_server *s = ctx;
    struct m0_conn *c = m0_conn_of(s, job->slot);
    if (!(c->flags & C_SENT_100)) {
        c->flags |= C_SENT_100;
        if (m0_conn_send_wait(s, c, continue_100, sizeof continue_100 - 1) != M0_OK)
            return M0_ERR;
    }
    for (;;) {
        if (feed_body(s, c) != M0_OK || job->ch.body_error)
            return M0_ERR;
        if (job->ch.body_done || job->req.body_len >= want)
            return M0_OK;
        if (c->flags & C_PEER_GONE)
            return M0_ERR;
        if (m0_conn_wait_readable(s, c, s->timeouts.body_ms) != M0_OK)
            return M0_ERR;
        m0_conn_read(s, c);
    }
}


/* ------------------------------------------------------------ responses */

/* The per-request start of every answer: the flags of the previous
 * response are gone, whoever answers. The head timer is the keep-alive
 * reset's to clear (finish): it runs until the response is out. */
static void begin_request(struct m0_server *s, struct m0_conn *c)
{
    c->started_us = m0_clock_us();
    c->flags &= ~(C_SLOW_LOGGED | C_MORE | C_STREAMING);
    c->resp_flags = 0;
    m0_loops_begin_request(s);
}

static void finish(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    int keep = job->body.keep && !(c->resp_flags & M0_RESP_ABORT) && c->job->http.status == 0;
    if (c->flags & C_LAZY_BODY)
        keep = 0;       /* the body never came in whole: its end cannot be found */

    /* Counted as logged: every response, the server's own refusals too (a
     * request rejected before its method counts as method "other"). */
    if (job->resp.status != 0)
        m0_metrics_request(m0_metrics_block(), job->mx_mount, job->req.method, job->resp.status, m0_clock_us() - c->started_us, 0);
    /* Every response that went out, the server's own refusals included (a
     * request rejected before its method has none: its line says "-"). */
    if (s->cfg->access_log && job->resp.status != 0)
        m0_conn_access_log(s, c);
    if (!keep) {
        /* Unread request bytes would turn our close into an RST that can
         * destroy the response in flight: shut down our side and discard
         * input briefly first (lingering close). */
        m0_conn_shutdown(s, c);
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
    m0_http_next(&c->job->http);
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
static void after_run_as(struct m0_server *s, struct m0_conn *c, int rc, int defer);
static void after_run(struct m0_server *s, struct m0_conn *c, int rc)
{
    after_run_as(s, c, rc, 0);
}

/* A view that ran inline for at least DEFER_MIN_US (and under
 * DEFER_MAX_US) has its complete answer written on the loop's next pass
 * (EPOLLOUT), with the other answers of this pass, not at once: on
 * loopback (a proxy or a benchmark client on the host) each send() runs
 * the receiver's wake-up, and a client that idled through the view costs
 * that wake-up per response, ~10 us of the worker's CPU on a VM where a
 * pool's batched answers paid ~5 (Django: 90 vs 76 us a request inline vs
 * pooled; docs/performance.md, "The hand-off"). A quick view's client is
 * still busy with the previous answer (deferring it costs two epoll_ctl);
 * a slow one's answer is not held behind the rest of the pass. */
#define DEFER_MIN_US 20
#define DEFER_MAX_US 1000

static void after_run_as(struct m0_server *s, struct m0_conn *c, int rc, int defer)
{
    struct m0_job *job = c->job;
    struct m0_resp *rs = &job->resp;
    /* The hold's implementation: an SSE stream or a WebSocket (hold.h). */
    enum m0_conn_proto p = job->head.hold == M0_HOLD_WEBSOCKET ? M0_CONN_PROTO_WS
                           : job->head.grip_hold            ? M0_CONN_PROTO_GRIP
                                                            : M0_CONN_PROTO_SSE;
    const struct m0_hold_ops *kind = s->proto[p]->hold;
    if ((rs->flags & M0_RESP_HOLD) && m0_hold_subscribe(s, c, kind) != M0_OK) {
        if (rc == M0_AGAIN)
            m0_dispatch_abandon(job);      /* an inline runner that owed more: close() now, attached */
        rc = M0_DONE;
        if (c->flags & C_STREAMING) {
            /* Its head is already out (a body too long to hold back): one
             * head per response, so the stream is cut, never followed by a
             * second status line. */
            m0_warn("hold on %s not taken (worker draining): closing the stream",
                    M0_LOG_TEXT(m0_head_channel(&job->head), strlen(m0_head_channel(&job->head))));
            m0_resp_reset(rs);
            rs->flags = M0_RESP_ABORT;
        } else {
            if (job->head.hold == M0_HOLD_WEBSOCKET)
                m0_warn("WebSocket %s not accepted (worker draining): answering 503", M0_REQ_LOG(&job->req));
            else
                m0_warn("hold on %s not taken (worker draining): answering 503",
                        M0_LOG_TEXT(m0_head_channel(&job->head), strlen(m0_head_channel(&job->head))));
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
    if (defer && rc == M0_DONE && c->file_left == 0 && !(c->resp_flags & M0_RESP_HOLD))
        m0_conn_interest(s, c, EPOLLOUT);        /* m0_conn_on_event writes it (WRITE state) */
    else
        m0_conn_flush(s, c);
}


static void dispatch(struct m0_server *s, struct m0_conn *c, const struct m0_target *t)
{
    struct m0_job *job = c->job;
    job->target = t;
    struct m0_target_stats *ts = m0_target_stats_of(&s->run.tstats, t);
    ts->requests++;
    m0_conn_set_state(s, c, M0_CONN_RUN);
    /* EPOLLIN stays armed while the request is served: a client that waits
     * for its answer sends nothing, so no epoll_ctl is spent here. If bytes
     * do arrive (pipelining, a half-close), the event handler disarms then.
     * Inline, the runner reads and writes the socket itself (blocking). */
    s->run.inline_io = (struct m0_job_inline){.flush = inline_flush, .read_body = inline_read_body, .ctx = s};
    uint64_t began = m0_clock_us();      /* only an inline run is timed here */
    if (t->grip_key != NULL)
        job->begin_id = m0_rt_newest(s->rt);             /* where a GRIP hold's journal replay starts */
    int rc = m0_dispatch(job, M0_RUN_START, &s->run.inline_io, m0_loop_now(s->loop));
    if (rc == M0_QUEUED) {
        c->flags |= C_RUNNER;
        ts->in_flight++;                 /* until its final completion */
        return;
    }
    /* Logged before after_run: that resets the job for the next request
     * (or closes the connection), and the line names this one. */
    uint64_t ran_us = m0_clock_us() - began;
    if (s->timeouts.request_ms && ran_us / 1000 > s->timeouts.request_ms)
        m0_warn("view ran %.1f s (over --request-timeout): %s", (double)ran_us / 1e6, M0_REQ_LOG(&job->req));
    after_run_as(s, c, rc, ran_us >= DEFER_MIN_US && ran_us < DEFER_MAX_US);
}

/* Who the request speaks for (proxy.h): the peer, or the client a trusted
 * proxy names. Recomputed per request: one upstream connection of a proxy
 * carries requests of many clients. Whether the peer may speak for anyone
 * is m0_proxy_client's decision alone (its contract, unit-tested there). */
static void set_client(struct m0_server *s, struct m0_conn *c, struct m0_job *job)
{
    struct m0_client cl;
    int tls = m0_conn_describe(s, c, job);       /* the connection's own TLS, job->tls */
    m0_proxy_client(&s->cfg->forwarded_trust, job->peer_addr, job->peer_port, &job->req, &cl);
    memcpy(job->remote_addr, cl.addr, sizeof job->remote_addr);
    job->remote_port = cl.port;
    /* A TLS listener's requests are https, unless a trusted proxy in front
     * says how its client came (X-Forwarded-Proto, Forwarded proto=). */
    job->https = cl.scheme_given ? cl.https : (uint8_t)(cl.https | tls);
}

/* The application mounts (endpoint.h): a mount with a runner answers
 * what falls under it; the request is run once it is whole, or at its
 * head when the client waits for 100 Continue (M0_EP_EARLY). */
static unsigned app_claims(struct m0_server *s, struct m0_conn *c)
{
    (void)s;
    const struct m0_target *t = m0_endpoint_mount(c);
    return t != NULL && t->runner != NULL ? M0_EP_CLAIMED | M0_EP_READS_BODY | M0_EP_EARLY : 0;
}

static int app_answer(struct m0_server *s, struct m0_conn *c, int head_only)
{
    (void)head_only;                    /* it reads every body: never asked from the head */
    dispatch(s, c, c->job->route_target);
    return M0_EP_ANSWERED;              /* answered, or running (C_RUNNER): h1_complete goes on */
}

const struct m0_endpoint m0_h1_app_endpoint = {
    .name = "app",
    .flags = M0_EP_CLAIMED | M0_EP_READS_BODY | M0_EP_EARLY,
    .claims = app_claims,
    .answer = app_answer,
};

/* The one decision of who answers c's request, made when its head is
 * complete and before any byte of its body is read (endpoint.h): the
 * Expect branch of h1_parse and route() act on the endpoint and the flags
 * kept on the job alone. */
static void decide(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    unsigned flags;
    set_client(s, c, job);
    job->route = m0_endpoint_route(s, c, &flags);
    job->route_flags = (uint8_t)flags;
}

/* A complete request (or, with head_only, a head whose body is not read):
 * to the endpoint decide() chose. Every answer begins the request here,
 * whoever gives it (the start time, the count, the last response's flags
 * gone). */
static void route(struct m0_server *s, struct m0_conn *c, int head_only)
{
    struct m0_job *job = c->job;
    if (job->route == NULL)
        decide(s, c);
    const struct m0_endpoint *ep = job->route;
    begin_request(s, c);
    job->mx_mount = job->route_target != NULL ? (int8_t)(job->route_target - m0_targets.t) : -1;
    if (ep == NULL) {
        m0_conn_error(s, c, 500, "No endpoint answers this request");
        return;
    }
    if (ep->answer(s, c, head_only) == M0_EP_AS_RUNNER)
        after_run(s, c, M0_DONE);        /* its answer is in job->resp, as a runner's (a grant's hold) */
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
        int rc = m0_http_feed(&c->job->http, c->in.data + c->in.off, m0_buf_unread(&c->in), &used);
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
                     c->job->http.reason ? c->job->http.reason : "client left");
        m0_buf_compact(&c->in);
    }
    return error ? M0_ERR : M0_OK;
}

static void read_lazy_body(struct m0_server *s, struct m0_conn *c)
{
    m0_conn_read(s, c);
    feed_body(s, c);
    if (!(c->flags & C_LAZY_BODY)) {
        m0_conn_interest(s, c, 0);      /* pipelined bytes wait their turn */
        c->deadline = 0;
    } else if (c->flags & C_SENT_100) {
        c->deadline = m0_loop_now(s->loop) + s->timeouts.body_ms;     /* progress restarts the idle timeout */
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
    ssize_t w = m0_conn_send_now(s, c, continue_100, sizeof continue_100 - 1);
    if (w < (ssize_t)(sizeof continue_100 - 1))
        m0_buf_append(&c->out, continue_100 + (w > 0 ? w : 0), sizeof continue_100 - 1 - (size_t)(w > 0 ? w : 0));
    c->deadline = m0_loop_now(s->loop) + s->timeouts.body_ms;
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

static void h1_parse(struct m0_server *s, struct m0_conn *c)
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
        int rc = m0_http_feed(&c->job->http, p, m0_buf_unread(&c->in), &used);
        m0_buf_consume(&c->in, used);
        if (rc == M0_AGAIN)
            break;
        if (rc == M0_ERR) {
            begin_request(s, c);
            m0_conn_error(s, c, c->job->http.status, c->job->http.reason);
            return;
        }
        if (rc == M0_OK) {
            /* Head complete: who answers is decided now, once, and so is
             * whether the body is read at all. */
            m0_conn_set_state(s, c, M0_CONN_READ_BODY);
            decide(s, c);
            int chunked = (job->req.flags & M0_REQ_CHUNKED) != 0;
            if ((chunked || job->req.content_length > 0) && !(job->route_flags & M0_EP_READS_BODY)) {
                /* Answered from the head alone (a refusal, the metrics, a
                 * 404...): no 100 Continue, not a byte of the body read or
                 * stored, and the connection closes after the answer — the
                 * unread body must never be parsed as the next request
                 * (RFC 9110 §10.1.1, RFC 9112 §9.6). */
                job->req.flags &= ~(unsigned)M0_REQ_KEEPALIVE;     /* Connection: close */
                route(s, c, 1);
                return;
            }
            if ((job->req.flags & M0_REQ_EXPECT100) && (job->route_flags & M0_EP_EARLY) && !chunked &&
                job->req.content_length > 0) {
                /* The answerer (an application) decides whether the body is wanted. */
                c->flags |= C_LAZY_BODY;
                job->ch.body_lazy = 1;
                m0_buf_compact(&c->in);
                route(s, c, 0);
                if (c->state == M0_CONN_RUN && (c->flags & C_LAZY_BODY) && m0_buf_unread(&c->in) > 0)
                    read_lazy_body(s, c);     /* body bytes sent without waiting */
                if (c->state != M0_CONN_READ_HEAD)
                    return;
                continue;       /* answered inline already: pipelined requests next */
            }
            if ((job->req.flags & M0_REQ_EXPECT100) && (chunked || job->req.content_length > 0)) {
                /* A body read before its answerer runs: an authenticated
                 * GRIP publish, or an application's chunked body (its size
                 * is known only once it is read, and WSGI frameworks size
                 * wsgi.input by CONTENT_LENGTH — Django reads nothing
                 * without it — so it is read now, as any chunked body, and
                 * --max-body answers 413 before the application runs). */
                put_continue(s, c);
            }
            head_paused = 1;
            continue;
        }
        /* M0_DONE: one whole request. Pipelined bytes stay in c->in. */
        m0_buf_compact(&c->in);
        route(s, c, 0);
        if (c->state != M0_CONN_READ_HEAD)
            return;     /* still writing, lingering or closed */
    }
    if (c->flags & C_PEER_GONE) {
        if (c->state == M0_CONN_READ_BODY || c->job->http.in_message)
            m0_debug("slot %u: peer closed mid-request", m0_conn_slot(s, c));   /* nobody to answer */
        m0_conn_close(s, c);
        return;
    }
    if (c->state == M0_CONN_READ_HEAD && c->job->http.in_message && !(c->flags & C_HEAD_TIMER)) {
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

static void check_request_timeout(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    uint64_t now = m0_loop_now(s->loop);
    if (now - job->queued_ms < s->timeouts.request_ms)
        return;
    if (m0_job_cancel(job)) {
        unsigned threads, busy, max, waiting;
        m0_pool_stats(s->run.pool, &threads, &busy, &max, &waiting);
        m0_warn("503 for %s: still queued after %.1f s (all %u handler threads busy)",
                M0_REQ_LOG(&job->req), (double)s->timeouts.request_ms / 1000, threads);
        m0_conn_error(s, c, 503, "No handler thread became free in time (--request-timeout)");
        return;
    }
    if (!(c->flags & C_SLOW_LOGGED)) {
        c->flags |= C_SLOW_LOGGED;
        m0_warn("view still running after %.1f s: %s", (double)(now - job->queued_ms) / 1000,
                M0_REQ_LOG(&job->req));
    }
}

/* A runner's completion for a request of this connection (conn.c did the
 * DONE bookkeeping). */
static void h1_complete(struct m0_server *s, struct m0_conn *c, const struct m0_completion *done)
{
    struct m0_job *job = c->job;
    if (job->route != NULL && job->route->complete != NULL) {
        /* What an endpoint handed on (a publish through the broker:
         * grip_control.h, pubsock.h) is answered now. */
        if (done->kind == M0_CPL_DONE) {
            if (job->route->complete(s, c) == M0_EP_AS_RUNNER)
                after_run(s, c, M0_DONE);     /* its answer is in job->resp (a WebSocket's OPEN: a hold) */
            if (c->state == M0_CONN_READ_HEAD && m0_buf_unread(&c->in) > 0)
                h1_parse(s, c);   /* pipelined requests waited their turn */
        }
        return;
    }
    if ((c->flags & C_UPGRADED) &&
        (done->kind == M0_CPL_PART || done->kind == M0_CPL_TAKEN || done->kind == M0_CPL_DONE)) {
        /* The socket an asynchronous runner accepted, its 101 still going
         * out: its frames, its taking messages and its end are the hold's.
         * A refused socket owes nothing (its frames are dropped). */
        if (c->hold != NULL)
            m0_hold_complete(s, c, done);
        else if (done->kind == M0_CPL_DONE)
            c->flags &= ~C_UPGRADED;
        return;
    }
    switch (done->kind) {
    case M0_CPL_PART:
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
    case M0_CPL_DONE:
        break;
    default:
        return;
    }
    if (atomic_load(&job->run_state) == M0_JOB_CANCELLED)
        return;   /* answered 503 by the loop; the thread never started it */
    m0_job_take(job, &c->out);          /* what a streaming runner left queued comes first */
    after_run(s, c, M0_DONE);
    if (c->state == M0_CONN_READ_HEAD && m0_buf_unread(&c->in) > 0)
        h1_parse(s, c);   /* pipelined requests waited their turn */
}

/* The resume operation (conn.h). */
static void h1_resume(struct m0_server *s, struct m0_conn *c, const char *peer, uint16_t peer_port)
{
    int had = c->job != NULL;           /* kept (pinned, or a runner's), its parser freed by the hold */
    struct m0_job *job = m0_conn_job(s, c);
    if (had) {
        m0_job_reset(job);
        m0_http_init(&job->http, &job->req, &s->cfg->limits);
    }
    c->proto = M0_CONN_PROTO_H1;
    job->gen = c->gen;
    snprintf(job->peer_addr, sizeof job->peer_addr, "%s", peer);
    job->peer_port = peer_port;
    memcpy(job->remote_addr, job->peer_addr, sizeof job->remote_addr);
    job->remote_port = job->peer_port;
    job->https = 0;
    job->lidx = -1;                     /* a GRIP hold is on a listener no endpoint owns */
    c->flags &= ~(C_STREAMING | C_SENT_100 | C_LAZY_BODY | C_MORE | C_HEAD_TIMER);
    c->resp_flags = 0;
    if (m0_buf_unread(&c->in) == 0)
        m0_buf_free(&c->in);
    else
        c->flags |= C_HEAD_TIMER;  /* the next request's bytes came while it was held */
    m0_conn_set_state(s, c, M0_CONN_READ_HEAD);
    m0_conn_interest(s, c, EPOLLIN | EPOLLRDHUP);
    if (m0_buf_unread(&c->in) > 0)
        h1_parse(s, c);
}

/* ------------------------------------------------------ the protocol */

/* Epoll events while a runner has the request (RUN). */
static void h1_event(struct m0_server *s, struct m0_conn *c, uint32_t ev)
{
    if (c->state != M0_CONN_RUN)
        return;
    if ((c->flags & C_LAZY_BODY) && (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))) {
        read_lazy_body(s, c);
        return;
    }
    /* Reported whatever the interest: the client reset the connection
     * while its view runs. Free the descriptor now; the slot waits. */
    if (ev & (EPOLLHUP | EPOLLERR)) {
        m0_conn_close(s, c);
    } else if (c->job->target != NULL && c->job->target->runner->submit != NULL) {
        /* An asynchronous application waits for http.disconnect (or
         * websocket.disconnect before its accept): the client's FIN is its
         * leaving, as under uvicorn. Pipelined bytes wait, and the FIN
         * stays watched. */
        if (ev & EPOLLRDHUP) {
            c->flags |= C_PEER_GONE;
            m0_conn_close(s, c);
        } else {
            m0_conn_interest(s, c, EPOLLRDHUP);
        }
    } else {
        /* A view's answer still goes to a client that half-closed
         * (gunicorn's behaviour); input waits its turn (lazy disarm). */
        m0_conn_interest(s, c, 0);
    }
}

/* The response (or this piece of it) is written. */
static void h1_drained(struct m0_server *s, struct m0_conn *c)
{
    if (c->flags & C_MORE) {
        /* An inline runner owes more: produce the next piece now. */
        after_run(s, c, m0_dispatch_resume(c->job));
    } else if (c->resp_flags & M0_RESP_ABORT) {
        m0_conn_close(s, c);
    } else if (c->resp_flags & M0_RESP_HOLD) {
        m0_hold_enter(s, c);           /* from now on the hold's protocol */
    } else {
        finish(s, c);
    }
}

/* The sweep: --request-timeout for a job still with the pool. */
static void h1_tick(struct m0_server *s, struct m0_conn *c)
{
    if (c->state == M0_CONN_RUN && s->timeouts.request_ms != 0 && s->run.pool != NULL)
        check_request_timeout(s, c);
}

/* While a response is written (conn.h: watch): a streaming one watches
 * for the client leaving (RDHUP), so its runner is told at once instead of
 * at its next write; input otherwise waits its turn. */
static uint32_t h1_watch(struct m0_server *s, const struct m0_conn *c)
{
    (void)s;
    return (c->flags & C_STREAMING) ? EPOLLRDHUP : 0;
}

const struct m0_conn_ops m0_h1_conn_ops = {
    .name = "h1",
    .watch = h1_watch,
    .input = h1_parse,
    .event = h1_event,
    .drained = h1_drained,
    .tick = h1_tick,
    .closing = m0_hold_release,        /* a hold taken, its head not yet out */
    .complete = h1_complete,
    .resume = h1_resume,
};
