/*
 * conn.c — a connection's socket (see conn.h): the one file that reads and
 * writes it, through the slot's transport (struct m0_xprt_ops; the plain
 * one is here), with the one output queue (c->out, then a file range), its
 * flush and the epoll interest it implies, the answers the loop makes
 * itself, lingering close, and the dispatch of a slot's epoll events. The
 * slot table, the states and the deadlines are conn_slots.c's.
 *
 * Rules that keep it correct:
 *   - Only READ_* states (and a lazy body being read) read from the socket;
 *     while a request is served, further pipelined bytes wait in the kernel,
 *     so a client that pipelines without reading cannot grow our buffers,
 *     and responses go out in request order (RFC 9112 §9.3.2).
 *   - Responses are written directly; EPOLLOUT is armed only for leftovers.
 *   - No other file calls recv, send, sendfile, writev or shutdown on a
 *     client socket (tools/layers.py checks it) but the second transport,
 *     TLS (xprt_tls.c: a second struct m0_xprt_ops, under the same queue;
 *     no protocol file knows which transport it speaks over).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "m0/accesslog.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/timer.h"

#define READ_CHUNK (16 * 1024)
#define READS_PER_WAKEUP 8

const char *m0_conn_state_name(enum m0_conn_state st)
{
    static const char *const names[] = {"FREE", "READ_HEAD", "READ_BODY", "RUN", "WRITE",
                                        "HELD", "LINGER", "CLOSING", "ORPHAN"};
    return (unsigned)st < M0_ARRAY_LEN(names) ? names[st] : "?";
}

const char *m0_conn_proto_name(enum m0_conn_proto p)
{
    static const char *const names[] = {"h1", "sse", "ws", "grip"};
    return (unsigned)p < M0_ARRAY_LEN(names) ? names[p] : "?";
}

void m0_conn_interest(struct m0_server *s, struct m0_conn *c, uint32_t events)
{
    if (c->events == events)
        return;
    if (m0_loop_mod_slot(s->loop, c->fd, m0_conn_slot(s, c), c->gen, events) == M0_ERR)
        m0_log_errno("epoll_ctl(MOD, fd %d)", c->fd);
    c->events = events;
}

/* ------------------------------------------------------- the plain transport */

static ssize_t plain_recv(struct m0_server *s, struct m0_conn *c, void *buf, size_t n)
{
    (void)s;
    return recv(c->fd, buf, n, MSG_DONTWAIT);
}

static ssize_t plain_writev(struct m0_server *s, struct m0_conn *c, const struct iovec *iov, int n, unsigned flags)
{
    (void)s;
    int f = MSG_NOSIGNAL | MSG_DONTWAIT | ((flags & M0_XPRT_MORE) ? MSG_MORE : 0);
    if (n == 1)
        return send(c->fd, iov[0].iov_base, iov[0].iov_len, f);    /* the usual case: no msghdr to copy in */
    struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
    return sendmsg(c->fd, &mh, f);
}

static ssize_t plain_sendfile(struct m0_server *s, struct m0_conn *c, int fd, off_t *off, size_t n)
{
    (void)s;
    return sendfile(c->fd, fd, off, n);
}

static int plain_shutdown(struct m0_server *s, struct m0_conn *c)
{
    (void)s;
    return shutdown(c->fd, SHUT_WR);
}

const struct m0_xprt_ops m0_xprt_plain = {
    .name = "plain",
    .recv = plain_recv,
    .writev = plain_writev,
    .sendfile = plain_sendfile,
    .shutdown = plain_shutdown,
};

static const struct m0_xprt_ops *xprt_of(const struct m0_server *s, const struct m0_conn *c)
{
    return s->xprt[c->xprt];
}

ssize_t m0_conn_recv(struct m0_server *s, struct m0_conn *c, void *buf, size_t n)
{
    const struct m0_xprt_ops *x = xprt_of(s, c);
    ssize_t r;
    do
        r = x->recv(s, c, buf, n);
    while (r == -1 && errno == EINTR);
    return r;
}

ssize_t m0_conn_send_now(struct m0_server *s, struct m0_conn *c, const void *p, size_t n)
{
    const struct m0_xprt_ops *x = xprt_of(s, c);
    struct iovec iov = {.iov_base = (void *)p, .iov_len = n};
    ssize_t w;
    do
        w = x->writev(s, c, &iov, 1, 0);
    while (w == -1 && errno == EINTR);
    if (w == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return w;
}

void m0_conn_shutdown(struct m0_server *s, struct m0_conn *c)
{
    xprt_of(s, c)->shutdown(s, c);
}

int m0_conn_describe(struct m0_server *s, struct m0_conn *c, struct m0_job *job)
{
    const struct m0_xprt_ops *x = xprt_of(s, c);
    job->tls.version = 0;
    job->tls.dn_len = 0;
    if (x->describe != NULL)
        x->describe(s, c, &job->tls);
    return job->tls.version != 0;
}

/* Wait (blocking, the inline runner's) until the socket is readable or
 * writable (what), at most ms. Bytes a transport holds count as readable. */
static int wait_fd(struct m0_server *s, struct m0_conn *c, short what, uint64_t ms)
{
    const struct m0_xprt_ops *x = xprt_of(s, c);
    if (what == POLLIN && x->pending != NULL && x->pending(s, c) > 0)
        return M0_OK;
    struct pollfd p = {.fd = c->fd, .events = what};
    int rc;
    do
        rc = poll(&p, 1, ms > 600000 ? 600000 : (int)ms);
    while (rc == -1 && errno == EINTR);
    return rc == 1 && !(p.revents & (POLLERR | POLLNVAL)) ? M0_OK : M0_ERR;
}

int m0_conn_send_wait(struct m0_server *s, struct m0_conn *c, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = m0_conn_send_now(s, c, p, n);
        if (w == 0 && wait_fd(s, c, POLLOUT, s->timeouts.write_ms) == M0_OK)
            continue;
        if (w <= 0) {
            c->flags |= C_PEER_GONE;
            return M0_ERR;
        }
        p += w;
        n -= (size_t)w;
    }
    return M0_OK;
}

int m0_conn_wait_readable(struct m0_server *s, struct m0_conn *c, uint64_t ms)
{
    return wait_fd(s, c, POLLIN, ms);
}

/* ------------------------------------------------------------------ I/O */

void m0_conn_read(struct m0_server *s, struct m0_conn *c)
{
    const struct m0_xprt_ops *x = xprt_of(s, c);
    for (int i = 0; i < READS_PER_WAKEUP; i++) {
        char *dst = m0_buf_reserve(&c->in, READ_CHUNK);
        ssize_t n = x->recv(s, c, dst, c->in.cap - c->in.len);
        if (n > 0) {
            c->in.len += (size_t)n;
            /* A short read drained the socket, unless the transport still
             * holds bytes it decoded (TLS records): epoll would not say so. */
            if ((size_t)n < READ_CHUNK && (x->pending == NULL || x->pending(s, c) == 0))
                break;
            continue;
        }
        if (n == 0) {
            c->flags |= C_PEER_GONE;
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            c->flags |= C_PEER_GONE;
        } else if (x->wants != NULL) {
            /* A TLS read that must write first asks for EPOLLOUT; once it
             * no longer does, a connection that is only reading drops it
             * (level-triggered, it would wake the loop for nothing). */
            uint32_t w = x->wants(s, c), ev = c->events | w;
            if ((c->state == M0_CONN_READ_HEAD || c->state == M0_CONN_READ_BODY) && !(w & EPOLLOUT))
                ev &= ~(uint32_t)EPOLLOUT;
            m0_conn_interest(s, c, ev);
        }
        return;
    }
}

/* The one interest computation of a connection that writes: EPOLLOUT
 * while bytes are queued, what its protocol watches meanwhile (a streaming
 * response: the client leaving, RDHUP, so the runner is told at once; a
 * held stream: its input, unless the hold stops reading), and what its
 * transport needs. */
static uint32_t want(struct m0_server *s, const struct m0_conn *c, int leftovers)
{
    const struct m0_conn_ops *ops = s->proto[c->proto];
    const struct m0_xprt_ops *x = xprt_of(s, c);
    return (leftovers ? EPOLLOUT : 0) | (ops->watch != NULL ? ops->watch(s, c) : 0) |
           (x->wants != NULL ? x->wants(s, c) : 0);
}

void m0_conn_rearm(struct m0_server *s, struct m0_conn *c)
{
    m0_conn_interest(s, c, want(s, c, m0_buf_unread(&c->out) > 0 || c->file_left > 0));
}

void m0_conn_queue(struct m0_conn *c, const void *p, size_t n)
{
    m0_buf_append(&c->out, p, n);
}

int m0_conn_write(struct m0_server *s, struct m0_conn *c)
{
    const struct m0_xprt_ops *x = xprt_of(s, c);
    const struct m0_conn_ops *ops = s->proto[c->proto];
    int held = c->state == M0_CONN_HELD;
    uint64_t now = m0_loop_now(s->loop);
    while (m0_buf_unread(&c->out) > 0) {
        /* A head followed by a file range (static files, file_wrapper):
         * MSG_MORE lets the head share the file's first segment. */
        struct iovec iov = {.iov_base = c->out.data + c->out.off, .iov_len = m0_buf_unread(&c->out)};
        ssize_t w = x->writev(s, c, &iov, 1, c->file_left > 0 ? M0_XPRT_MORE : 0);
        if (w == -1) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                goto full;
            c->flags |= C_PEER_GONE;
            return M0_ERR;
        }
        m0_buf_consume(&c->out, (size_t)w);
        if (held)
            ops->wrote(s, c, (size_t)w);         /* the hold's accounting (its deadline is its tick's) */
        else
            c->deadline = now + s->timeouts.write_ms;     /* progress restarts the write timeout */
    }
    /* A burst's buffer is not kept idle: a held stream's beyond 16 KiB; a
     * response's beyond 256 KiB once no runner streams into it (freed and
     * regrown per window, each cycle was a fresh mmap and a page fault per
     * 4 KB). */
    if (held ? c->out.cap > 16 * 1024 : c->out.cap > 256 * 1024 && !(c->flags & C_RUNNER))
        m0_buf_free(&c->out);
    while (c->file_left > 0) {
        size_t chunk = c->file_left > (1u << 30) ? (1u << 30) : (size_t)c->file_left;
        ssize_t w = x->sendfile(s, c, c->file_fd, &c->file_off, chunk);
        if (w == -1) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                goto full;
            if (errno != EPIPE && errno != ECONNRESET)
                m0_log_errno("sendfile");
            return M0_ERR;
        }
        if (w == 0) {
            /* The file shrank under us: the promised length cannot be met. */
            m0_error("sendfile: file ended %llu bytes early; aborting the response",
                     (unsigned long long)c->file_left);
            return M0_ERR;
        }
        c->file_left -= (uint64_t)w;
        c->deadline = now + s->timeouts.write_ms;
    }
    if (c->file_fd != -1) {
        close(c->file_fd);
        c->file_fd = -1;
    }
    if (held)
        m0_conn_interest(s, c, want(s, c, 0));
    return M0_OK;
full:
    m0_conn_interest(s, c, want(s, c, 1));
    return M0_AGAIN;
}

void m0_conn_flush(struct m0_server *s, struct m0_conn *c)
{
    int rc = m0_conn_write(s, c);
    if (rc == M0_ERR) {
        m0_conn_close(s, c);
        return;
    }
    if (c->flags & C_STREAMING) {
        /* A runner on another thread streams: what is still unwritten is
         * its credit; once all is out, it waits for its next piece (or
         * its completion). */
        m0_job_credit(c->job, m0_buf_unread(&c->out));
        if (rc == M0_AGAIN)
            return;
        if (c->flags & C_RUNNER) {
            m0_conn_interest(s, c, want(s, c, 0));
            return;
        }
    }
    if (rc == M0_AGAIN)
        return;
    /* All of it is out: the protocol goes on (the next piece of an inline
     * runner, a hold entered, keep-alive or close). */
    s->proto[c->proto]->drained(s, c);
}

void m0_conn_error(struct m0_server *s, struct m0_conn *c, int status, const char *reason)
{
    struct m0_job *job = c->job;
    m0_debug("slot %u: %d %s", m0_conn_slot(s, c), status, reason);
    m0_buf_reset(&c->out);
    /* Logged once, by the protocol when it is out, like every response:
     * with the body bytes sent. A read-side error (408) ran no request:
     * its duration is 0 rather than whatever the last one left. */
    job->resp.body_bytes = m0_error_response(&c->out, status, reason, 1, (job->req.flags & M0_REQ_HEAD) != 0);
    job->resp.status = status;
    job->body.keep = 0;
    c->resp_flags = 0;
    if (c->state == M0_CONN_READ_HEAD || c->state == M0_CONN_READ_BODY)
        c->started_us = m0_clock_us();
    m0_conn_set_state(s, c, M0_CONN_WRITE);
    m0_conn_flush(s, c);
}

void m0_conn_answer(struct m0_server *s, struct m0_conn *c, int status, uint64_t body_bytes)
{
    struct m0_job *job = c->job;
    job->resp.status = status;
    job->resp.body_bytes = body_bytes;
    c->resp_flags = 0;
    m0_conn_set_state(s, c, M0_CONN_WRITE);
    m0_conn_flush(s, c);
}

void m0_conn_answer_body(struct m0_server *s, struct m0_conn *c, int status, const char *ctype, const char *body,
                         size_t len)
{
    struct m0_job *job = c->job;
    const char *why;
    m0_head_reset(&job->head);
    m0_head_status(&job->head, status, NULL, 0);
    m0_head_add(&job->head, "Content-Type", 12, ctype, strlen(ctype), &why);
    m0_head_add(&job->head, "Cache-Control", 13, "no-store", 8, &why);
    struct m0_body_req br = m0_job_framing(job);
    m0_body_reset(&job->body);
    m0_body_commit(&job->body, &c->out, &job->head, &br, (int64_t)len, 0);
    m0_body_emit(&job->body, &c->out, body, len);
    m0_conn_answer(s, c, status, len);
}

void m0_conn_access_log(struct m0_server *s, struct m0_conn *c)
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
    if (job->alog != NULL)
        m0_access_kept_view(job->alog, &a);      /* the request as it came, not as rewritten */
    m0_access_log(&a);
}

static void linger(struct m0_server *s, struct m0_conn *c)
{
    char sink[4096];
    for (int i = 0; i < READS_PER_WAKEUP; i++) {
        ssize_t n = m0_conn_recv(s, c, sink, sizeof sink);
        if (n > 0)
            continue;
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        break;
    }
    m0_conn_close(s, c);
}

void m0_conn_on_event(struct m0_loop *l, uint32_t slot, uint32_t gen, uint32_t ev, void *ctx)
{
    struct m0_server *s = ctx;
    (void)l;
    struct m0_conn *c = m0_conn_at(s, slot);
    if (c == NULL)
        return;
    if ((c->gen & 0x7fffffffu) != gen || c->state == M0_CONN_FREE || c->state == M0_CONN_CLOSING ||
        c->state == M0_CONN_ORPHAN)
        return;   /* stale: the slot was closed (and maybe reused) */
    switch (c->state) {
    case M0_CONN_READ_HEAD:
    case M0_CONN_READ_BODY:
        /* EPOLLOUT here only when the transport asked for it (a TLS
         * handshake that must write before it can read more). */
        if (ev & (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
            m0_conn_read(s, c);
            s->proto[c->proto]->input(s, c);
        }
        break;
    case M0_CONN_RUN:       /* a runner has the request: the protocol decides (a lazy body, a FIN) */
        s->proto[c->proto]->event(s, c, ev);
        break;
    case M0_CONN_HELD:
        /* What a held stream queued is written here, as any response's;
         * then its protocol reads, or goes on once the queue is empty. */
        if ((ev & EPOLLOUT) && m0_conn_write(s, c) == M0_ERR) {
            m0_conn_close(s, c);
            break;
        }
        s->proto[c->proto]->event(s, c, ev);
        break;
    case M0_CONN_WRITE:
        if ((ev & EPOLLERR) || ((c->flags & C_STREAMING) && (ev & (EPOLLRDHUP | EPOLLHUP)))) {
            c->flags |= C_PEER_GONE;
            m0_conn_close(s, c);
            break;
        }
        if (!(ev & (EPOLLOUT | EPOLLHUP))) {
            m0_conn_interest(s, c, c->events & (EPOLLOUT | EPOLLRDHUP));   /* input waits its turn */
            break;
        }
        m0_conn_flush(s, c);
        if (c->state == M0_CONN_READ_HEAD && m0_buf_unread(&c->in) > 0)
            s->proto[c->proto]->input(s, c);       /* pipelined requests waited their turn */
        break;
    case M0_CONN_LINGER:
        linger(s, c);
        break;
    default:
        break;
    }
}

