/*
 * lane.c — the submit-lane record codec over a SOCK_DGRAM socketpair.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "m0/buf.h"
#include "m0/lane.h"

int m0_lane_open(struct m0_lane *lane, int sndbuf_bytes)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == -1)
        return M0_ERR;
    if (sndbuf_bytes > 0) {
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf_bytes, sizeof sndbuf_bytes);
        setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sndbuf_bytes, sizeof sndbuf_bytes);
    }
    int fl = fcntl(sv[0], F_GETFL);
    if (fl == -1 || fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) == -1) {
        close(sv[0]);
        close(sv[1]);
        return M0_ERR;
    }
    lane->submit_fd = sv[0];
    lane->take_fd = sv[1];
    return M0_OK;
}

void m0_lane_close(struct m0_lane *lane)
{
    if (lane->submit_fd != -1)
        close(lane->submit_fd);
    if (lane->take_fd != -1)
        close(lane->take_fd);
    lane->submit_fd = lane->take_fd = -1;
}

int m0_lane_send(const struct m0_lane *lane, const struct m0_lane_rec *rec)
{
    for (;;) {
        ssize_t n = send(lane->submit_fd, rec, sizeof *rec, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof *rec)
            return M0_OK;
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS))
            return M0_AGAIN;
        return M0_ERR;
    }
}

int m0_lane_take(const struct m0_lane *lane, struct m0_lane_rec *rec)
{
    for (;;) {
        ssize_t n = recv(lane->take_fd, rec, sizeof *rec, 0);
        if (n == (ssize_t)sizeof *rec)
            return M0_OK;
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return M0_AGAIN;
        return M0_ERR;
    }
}

int m0_lane_set_timeout(struct m0_lane *lane, uint64_t ms)
{
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
    return setsockopt(lane->take_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == -1 ? M0_ERR : M0_OK;
}

int m0_lane_poll(const struct m0_lane *lane, struct m0_lane_rec *rec)
{
    for (;;) {
        ssize_t n = recv(lane->take_fd, rec, sizeof *rec, MSG_DONTWAIT);
        if (n == (ssize_t)sizeof *rec)
            return M0_OK;
        if (n == -1 && errno == EINTR)
            continue;
        return M0_AGAIN;
    }
}

int m0_lane_send_many(const struct m0_lane *lane, const struct m0_lane_rec *recs, size_t n)
{
    struct mmsghdr msgs[64];
    struct iovec iov[64];
    if (n > 64)
        n = 64;
    for (size_t i = 0; i < n; i++) {
        iov[i].iov_base = (void *)&recs[i];
        iov[i].iov_len = sizeof recs[i];
        memset(&msgs[i], 0, sizeof msgs[i]);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    for (;;) {
        int sent = sendmmsg(lane->submit_fd, msgs, (unsigned)n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent >= 0)
            return sent;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
            return 0;
        return -1;
    }
}

void m0_lane_q_push(struct m0_lane_q *q, const struct m0_lane_rec *rec)
{
    if (q->head > 0 && q->head == q->n)
        q->head = q->n = 0;
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 256;
        q->recs = m0_xrealloc(q->recs, q->cap * sizeof *q->recs);
    }
    q->recs[q->n++] = *rec;
}

int m0_lane_q_flush(struct m0_lane_q *q, const struct m0_lane *lane)
{
    while (q->head < q->n) {
        size_t n = q->n - q->head;
        int sent = m0_lane_send_many(lane, &q->recs[q->head], n > 64 ? 64 : n);
        if (sent <= 0)
            return M0_AGAIN;
        q->head += (size_t)sent;
    }
    q->head = q->n = 0;
    return M0_OK;
}

void m0_lane_q_free(struct m0_lane_q *q)
{
    free(q->recs);
    q->recs = NULL;
    q->n = q->cap = q->head = 0;
}
