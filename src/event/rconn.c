/*
 * rconn.c — a Redis connection on an m0 loop (see rconn.h): xconn.h's
 * transport, hiredis's reply reader (behind the reply guard) and command
 * formatter, a FIFO of callbacks.
 *
 * Why not hiredis's asynchronous context: hiredis 0.14 reads and writes the
 * socket itself, so it cannot speak TLS; with the transport ours, one code
 * path serves TCP, unix sockets and TLS alike.
 *
 * Interest: readable always once connected; writable while output waits,
 * while connecting, or while TLS asked for it. The socket is level-
 * triggered, and a read drains it (and TLS's own buffer) until it would
 * block, so nothing decrypted is left waiting for an event that will not
 * come.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "m0/broker_reply.h"
#include "m0/buf.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/rconn.h"
#include "m0/xconn.h"

struct waiting {
    m0_rconn_reply_fn *fn;
    void *priv;
};

struct m0_rconn {
    struct m0_loop *loop;
    struct m0_xconn x;
    const struct m0_rconn_ops *ops;
    void *ctx;
    redisReader *reader;
    struct m0_reply_guard guard;     /* in reader */
    struct m0_buf out;               /* formatted commands not written yet (from off) */
    struct waiting *q;               /* a ring of cap entries: head, n */
    size_t qhead, qn, qcap;
    uint32_t events;                 /* epoll interest registered (0: none) */
    int subscribed;
    int announced;                   /* ops->connected was called */
    int depth;                       /* callbacks running on it */
    int dead;                        /* closing: freed when depth is back to 0 */
    int notify;                      /* then: tell ops->closed */
    char why[256];
};

static void run(struct m0_rconn *c);
static void on_ready(struct m0_loop *l, int fd, uint32_t events, void *ctx);

/* What the guard asks: how many replies may begin now. */
static size_t guard_pending(void *ctx)
{
    const struct m0_rconn *c = ctx;
    return c->qn + (c->subscribed ? 1 : 0);
}

static void set_interest(struct m0_rconn *c)
{
    if (c->x.fd < 0)
        return;
    uint32_t want;
    if (c->dead)
        want = EPOLLIN | EPOLLOUT;    /* doomed outside a callback: the next pass frees it */
    else if (c->x.state != M0_XC_OPEN)
        want = c->x.want == M0_XC_WANT_READ ? EPOLLIN : EPOLLOUT;
    else if (!c->announced)
        want = EPOLLOUT;              /* connected at once (a unix socket): the next pass says so */
    else if (m0_buf_unread(&c->out) > 0 || c->x.want == M0_XC_WANT_WRITE)
        want = EPOLLIN | EPOLLOUT;
    else
        want = EPOLLIN;
    if (want == c->events)
        return;
    int rc = c->events == 0 ? m0_loop_add_fd(c->loop, c->x.fd, want, on_ready, c)
                            : m0_loop_mod_fd(c->loop, c->x.fd, want);
    if (rc != M0_OK) {
        m0_log_errno("epoll_ctl(redis)");
        return;
    }
    c->events = want;
}

/* Free what is left: every waiting callback gets NULL, then closed(). */
static void finish(struct m0_rconn *c)
{
    if (c->events != 0)
        m0_loop_del_fd(c->loop, c->x.fd);
    c->events = 0;
    m0_xconn_close(&c->x);
    c->depth++;                       /* callbacks below must not free c */
    while (c->qn > 0) {
        struct waiting w = c->q[c->qhead];
        c->qhead = (c->qhead + 1) % c->qcap;
        c->qn--;
        if (w.fn != NULL)
            w.fn(c, NULL, w.priv);
    }
    if (c->notify && c->ops->closed != NULL)
        c->ops->closed(c, c->ctx, c->why);
    redisReaderFree(c->reader);
    m0_buf_free(&c->out);
    free(c->q);
    free(c);
}

/* Mark c closing (why, and whether to tell the owner); freed now, or when
 * the callbacks running on it return. */
static void doom(struct m0_rconn *c, const char *why, int notify)
{
    if (c->dead)
        return;
    c->dead = 1;
    c->notify = notify;
    snprintf(c->why, sizeof c->why, "%s", why);
    if (c->depth == 0)
        finish(c);
}

struct m0_rconn *m0_rconn_open(struct m0_loop *l, const struct m0_xconn_target *t, struct ssl_ctx_st *tls,
                               const struct m0_rconn_ops *ops, void *ctx, char *err, size_t cap)
{
    struct m0_rconn *c = m0_xcalloc(sizeof *c);
    c->loop = l;
    c->ops = ops;
    c->ctx = ctx;
    if (m0_xconn_open(&c->x, t, tls, err, cap) != M0_OK) {
        free(c);
        return NULL;
    }
    c->reader = redisReaderCreate();
    if (c->reader == NULL) {
        snprintf(err, cap, "out of memory");
        m0_xconn_close(&c->x);
        free(c);
        return NULL;
    }
    m0_reply_guard_install(&c->guard, c->reader, guard_pending, c);
    c->qcap = 8;
    c->q = m0_xmalloc(c->qcap * sizeof *c->q);
    set_interest(c);
    return c;
}

/* Write what waits, as far as the socket takes it. 0, or -1 (doomed). */
static int flush(struct m0_rconn *c)
{
    while (m0_buf_unread(&c->out) > 0) {
        char err[200];
        ssize_t n = m0_xconn_write(&c->x, c->out.data + c->out.off, m0_buf_unread(&c->out), err, sizeof err);
        if (n == M0_AGAIN)
            break;
        if (n < 0) {
            doom(c, err, 1);
            return -1;
        }
        m0_buf_consume(&c->out, (size_t)n);
    }
    if (m0_buf_unread(&c->out) == 0)
        m0_buf_reset(&c->out);
    return 0;
}

static int queue(struct m0_rconn *c, m0_rconn_reply_fn *fn, void *priv, char *cmd, int len)
{
    if (c->dead || len < 0) {
        free(cmd);
        return M0_ERR;
    }
    if (c->qn == c->qcap) {
        struct waiting *q = m0_xmalloc(2 * c->qcap * sizeof *q);
        for (size_t i = 0; i < c->qn; i++)
            q[i] = c->q[(c->qhead + i) % c->qcap];
        free(c->q);
        c->q = q;
        c->qhead = 0;
        c->qcap *= 2;
    }
    c->q[(c->qhead + c->qn) % c->qcap] = (struct waiting){fn, priv};
    c->qn++;
    m0_buf_append(&c->out, cmd, (size_t)len);
    free(cmd);
    /* Within a callback the pass ends with a flush; else write now (one
     * write for the command, not a loop pass later). */
    if (c->depth == 0 && c->x.state == M0_XC_OPEN && c->announced) {
        c->depth++;
        flush(c);                    /* a failure dooms c: the callbacks get NULL from the loop, */
        c->depth--;                  /* never inside this call */
        set_interest(c);
    }
    return M0_OK;
}

int m0_rconn_command(struct m0_rconn *c, m0_rconn_reply_fn *fn, void *priv, int argc, const char **argv,
                     const size_t *lens)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    return queue(c, fn, priv, cmd, len);
}

int m0_rconn_commandf(struct m0_rconn *c, m0_rconn_reply_fn *fn, void *priv, const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    va_start(ap, fmt);
    int len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    return queue(c, fn, priv, cmd, len);
}

void m0_rconn_subscribed(struct m0_rconn *c)
{
    c->subscribed = 1;
}

void *m0_rconn_ctx(const struct m0_rconn *c)
{
    return c->ctx;
}

size_t m0_rconn_pending(const struct m0_rconn *c)
{
    return c->qn;
}

int m0_rconn_is_open(const struct m0_rconn *c)
{
    return c->x.state == M0_XC_OPEN;
}

void m0_rconn_close(struct m0_rconn *c)
{
    doom(c, "closed", 0);
}

void m0_rconn_close_fd(struct m0_rconn *c)
{
    if (c->x.fd >= 0)
        close(c->x.fd);            /* the rest is the parent's: left alone */
}

/* Hand every complete reply to its callback, in order. */
static void dispatch(struct m0_rconn *c)
{
    while (!c->dead) {
        void *reply = NULL;
        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
            char why[240];
            if (c->guard.tripped)
                snprintf(why, sizeof why, "protocol error: %s", c->guard.why);
            else
                snprintf(why, sizeof why, "protocol error: %s", c->reader->errstr);
            doom(c, why, 1);
            return;
        }
        if (reply == NULL)
            return;                   /* wants more bytes */
        if (c->qn > 0) {
            struct waiting w = c->q[c->qhead];
            c->qhead = (c->qhead + 1) % c->qcap;
            c->qn--;
            if (w.fn != NULL)
                w.fn(c, reply, w.priv);
        } else if (c->ops->push != NULL) {
            c->ops->push(c, reply, c->ctx);   /* subscriber mode (the guard let nothing else in) */
        }
        freeReplyObject(reply);
    }
}

static void take_input(struct m0_rconn *c)
{
    char buf[16384];
    while (!c->dead) {
        char err[200];
        ssize_t n = m0_xconn_read(&c->x, buf, sizeof buf, err, sizeof err);
        if (n == M0_AGAIN)
            return;
        if (n == 0) {
            doom(c, "connection closed by the broker", 1);
            return;
        }
        if (n < 0) {
            doom(c, err, 1);
            return;
        }
        if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
            doom(c, "out of memory", 1);
            return;
        }
        dispatch(c);
    }
}

/* One readiness event, or the transport's first steps. */
static void run(struct m0_rconn *c)
{
    if (c->dead) {
        if (c->depth == 0)
            finish(c);               /* doomed by a write outside a callback */
        return;
    }
    c->depth++;
    if (c->x.state != M0_XC_OPEN) {
        char err[200];
        if (m0_xconn_advance(&c->x, err, sizeof err) == M0_ERR)
            doom(c, err, 1);
    }
    if (!c->dead && c->x.state == M0_XC_OPEN && !c->announced) {
        c->announced = 1;
        if (c->ops->connected != NULL)
            c->ops->connected(c, c->ctx);
    }
    if (!c->dead && c->x.state == M0_XC_OPEN) {
        take_input(c);
        if (!c->dead)
            flush(c);
    }
    c->depth--;
    if (c->dead) {
        if (c->depth == 0)
            finish(c);
        return;
    }
    set_interest(c);
}

static void on_ready(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    (void)l;
    (void)fd;
    (void)events;             /* errors and hang-ups surface in the read or the connect */
    run(ctx);
}
