/*
 * handoff.c — the connections of a shared listening socket spread over
 * the loops of one worker in turn (see handoff.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "m0/conn.h"
#include "m0/handoff.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/loops.h"
#include "m0/server.h"

/* One handed connection: its listener's index and its peer's address; the
 * descriptor rides along as SCM_RIGHTS. */
struct handed {
    uint8_t lidx;
    uint8_t pad;
    uint16_t addr_len;
    struct sockaddr_storage addr;
};

union fdbuf {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
};

/* One message off the inbox: M0_OK with *fd (-1: none came with it), or
 * M0_AGAIN when the inbox is empty. */
static int take_one(int inbox, struct handed *m, int *fd)
{
    union fdbuf cm;
    struct iovec iov = {.iov_base = m, .iov_len = sizeof *m};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
    ssize_t n;
    do
        n = recvmsg(inbox, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (n == -1 && errno == EINTR);
    if (n <= 0)
        return M0_AGAIN;
    *fd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(fd, CMSG_DATA(c), sizeof(int));
    }
    if (*fd != -1 && (size_t)n != sizeof *m) {
        close(*fd);        /* not one of ours: never from our loops, but never served half-read */
        *fd = -1;
    }
    return M0_OK;
}

static void on_inbox(struct m0_loop *l, int inbox, uint32_t events, void *ctx)
{
    struct m0_server *s = ctx;
    (void)l;
    (void)events;
    for (int i = 0; i < 64; i++) {
        struct handed m;
        int fd;
        if (take_one(inbox, &m, &fd) != M0_OK)
            return;
        if (fd == -1)
            continue;
        /* Served as this loop's own accept of it (after a drain closed the
         * listeners it is still served, with Connection: close). */
        m0_conn_take(s, fd, m.lidx, &m.addr);
    }
}

/* The loop's inbox (its extension's state, server.h): the read end of the
 * pair the other loops write to (loops->inbox_w[loop_index]). */
struct inbox {
    int fd;
};

static void *inbox_init(struct m0_server *s)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == -1) {
        m0_log_errno("socketpair (connection hand-off)");
        return NULL;
    }
    if (m0_loop_add_fd(s->loop, sv[0], EPOLLIN, on_inbox, s) == M0_ERR) {
        m0_log_errno("epoll_ctl(connection hand-off)");
        close(sv[0]);
        close(sv[1]);
        return NULL;
    }
    struct inbox *in = m0_xmalloc(sizeof *in);
    in->fd = sv[0];
    s->loops->inbox_w[s->loop_index] = sv[1];
    return in;
}

/* The loop ends: connections handed too late are closed. */
static void inbox_fini(struct m0_server *s, void *state)
{
    struct inbox *in = state;
    struct handed m;
    int fd;
    while (take_one(in->fd, &m, &fd) == M0_OK) {
        if (fd != -1)
            close(fd);
    }
    m0_loop_del_fd(s->loop, in->fd);
    close(in->fd);
    free(in);
    if (s->loops != NULL && s->loops->inbox_w[s->loop_index] != -1) {
        close(s->loops->inbox_w[s->loop_index]);
        s->loops->inbox_w[s->loop_index] = -1;
    }
}

const struct m0_ext m0_handoff_ext = {.name = "hand-off", .init = inbox_init, .fini = inbox_fini};

int m0_handoff_open(struct m0_server *s)
{
    m0_ext_register(s, &m0_handoff_ext);
    if (m0_ext_of(s, &m0_handoff_ext) == NULL)
        return M0_ERR;
    s->accept.hand_off = m0_handoff_send;
    return M0_OK;
}

void m0_handoff_in_child(struct m0_server *s)
{
    const struct inbox *in = m0_ext_peek(s, &m0_handoff_ext);
    if (in != NULL)
        close(in->fd);
    if (s->loops != NULL && s->loops->inbox_w[s->loop_index] != -1)
        close(s->loops->inbox_w[s->loop_index]);
}

/* A loop busy for this long without going back to epoll (a view inline
 * on it, --blocking-threads 0) is passed over: its turn goes to the next. */
#define STALLED_MS 50

/* The loop whose turn the next connection is: the turns go round every
 * loop, this one's included, skipping one that is stalled or draining. */
static unsigned next_loop(struct m0_server *s)
{
    struct m0_loops *ls = s->loops;
    uint64_t now = m0_loop_now(s->loop);
    for (unsigned tries = 0; tries < ls->n; tries++) {
        unsigned k = atomic_fetch_add_explicit(&ls->turn, 1, memory_order_relaxed) % ls->n;
        if (k == s->loop_index)
            return k;
        uint64_t awake = m0_loop_awake_since(ls->s[k]->loop);
        if (ls->inbox_w[k] != -1 && !atomic_load(&ls->s[k]->life.draining) && (awake == 0 || now < awake + STALLED_MS))
            return k;
    }
    return s->loop_index;
}

int m0_handoff_send(struct m0_server *s, int fd, int lidx, const void *addr, unsigned addr_len)
{
    struct m0_loops *ls = s->loops;
    if (addr_len > sizeof(struct sockaddr_storage) || lidx > 255)
        return M0_AGAIN;
    unsigned k = next_loop(s);
    if (k == s->loop_index)
        return M0_AGAIN;
    struct handed m = {.lidx = (uint8_t)lidx, .addr_len = (uint16_t)addr_len};
    memcpy(&m.addr, addr, addr_len);
    union fdbuf cm;
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t n;
    do
        n = sendmsg(ls->inbox_w[k], &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n == -1 && errno == EINTR);
    if (n != (ssize_t)sizeof m)
        return M0_AGAIN;      /* its inbox is full: that loop is stalled, this one serves it */
    close(fd);                /* the message carries a descriptor of its own */
    return M0_OK;
}
