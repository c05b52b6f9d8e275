/*
 * redis_loop.c — hiredis's async event hooks on an m0 loop (see
 * redis_loop.h). hiredis asks for read interest once connected and for
 * write interest while it has bytes to send (and to learn that a
 * non-blocking connect finished); it calls cleanup before it closes the
 * socket, so the loop never watches a closed or reused descriptor. The
 * reader's reply guard counts the callbacks hiredis holds. Host names are
 * resolved before the loop runs (hiredis would call getaddrinfo on it).
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <string.h>
#include <sys/epoll.h>

#include "m0/log.h"
#include "m0/loop.h"
#include "m0/redis_loop.h"

static void on_ready(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    struct m0_redis_ev *ev = ctx;
    (void)l;
    (void)fd;
    /* Errors and hang-ups go to whichever side is watched: hiredis turns
     * them into a failed read (or a failed connect, on the write side). */
    if (ev->ac != NULL && (ev->events & EPOLLIN) && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        redisAsyncHandleRead(ev->ac);
    /* The read may have ended the connection: the context is then gone. */
    if (ev->ac != NULL && (ev->events & EPOLLOUT) && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
        redisAsyncHandleWrite(ev->ac);
}

static void set_interest(struct m0_redis_ev *ev, uint32_t want)
{
    if (want == ev->events)
        return;
    int rc;
    if (ev->events == 0)
        rc = m0_loop_add_fd(ev->loop, ev->fd, want, on_ready, ev);
    else if (want == 0) {
        m0_loop_del_fd(ev->loop, ev->fd);
        rc = M0_OK;
    } else
        rc = m0_loop_mod_fd(ev->loop, ev->fd, want);
    if (rc != M0_OK) {
        m0_log_errno("epoll_ctl(redis)");
        return;
    }
    ev->events = want;
}

static void add_read(void *p)
{
    struct m0_redis_ev *ev = p;
    set_interest(ev, ev->events | EPOLLIN);
}

static void del_read(void *p)
{
    struct m0_redis_ev *ev = p;
    set_interest(ev, ev->events & ~(uint32_t)EPOLLIN);
}

static void add_write(void *p)
{
    struct m0_redis_ev *ev = p;
    set_interest(ev, ev->events | EPOLLOUT);
}

static void del_write(void *p)
{
    struct m0_redis_ev *ev = p;
    set_interest(ev, ev->events & ~(uint32_t)EPOLLOUT);
}

static void cleanup(void *p)
{
    struct m0_redis_ev *ev = p;
    set_interest(ev, 0);
    ev->ac = NULL;
}

/* Commands sent (or queued) and not answered: hiredis's callback list. */
static size_t pending(void *p)
{
    const struct m0_redis_ev *ev = p;
    size_t n = 0;
    if (ev->ac != NULL)
        for (const redisCallback *cb = ev->ac->replies.head; cb != NULL; cb = cb->next)
            n++;
    return n;
}

int m0_redis_attach(struct m0_redis_ev *ev, struct m0_loop *loop, redisAsyncContext *ac)
{
    if (ac->ev.data != NULL)
        return M0_ERR;
    ev->loop = loop;
    ev->ac = ac;
    ev->fd = ac->c.fd;
    ev->events = 0;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    ac->ev.data = ev;
    m0_reply_guard_install(&ev->guard, ac->c.reader, pending, ev);
    return M0_OK;
}

int m0_redis_resolve(const char *host, char *out, size_t cap, const char **why)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST;
    out[0] = '\0';
    if (getaddrinfo(host, NULL, &hints, &res) == 0) {
        freeaddrinfo(res);
        return M0_OK;           /* already numeric */
    }
    hints.ai_flags = 0;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || res == NULL) {
        *why = rc != 0 ? gai_strerror(rc) : "no address";
        return M0_ERR;
    }
    const void *addr = res->ai_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr
                                                 : (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr;
    if (inet_ntop(res->ai_family, addr, out, (socklen_t)cap) == NULL)
        out[0] = '\0';
    freeaddrinfo(res);
    return M0_OK;
}
