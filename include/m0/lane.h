/*
 * lane.h — submit lanes: SOCK_DGRAM socketpairs that carry job records
 * from a loop to the threads that run them (DESIGN: "Process and thread
 * shape"). One datagram is one record, so several reader threads can share
 * a lane and each record reaches exactly one of them, in FIFO order.
 */
#ifndef M0_LANE_H
#define M0_LANE_H

#include "m0/types.h"

/* What a record asks the thread that takes it to do. */
enum m0_run_kind {
    M0_RUN_START = 1,    /* run the slot's job */
    M0_RUN_STOP,         /* the reading thread exits */
    M0_RUN_MESSAGE,      /* deliver the slot's inbound WebSocket message (runner->message) */
};

struct m0_lane_rec {
    uint32_t slot;
    uint32_t gen;
    uint32_t kind;       /* enum m0_run_kind */
};

struct m0_lane {
    int submit_fd;       /* loop side: non-blocking, send only */
    int take_fd;         /* thread side: blocking, recv only */
};

/* Create a lane. sndbuf_bytes enlarges the socket buffer so bursts of
 * records queue in the kernel. Returns M0_OK or M0_ERR (errno set). */
int m0_lane_open(struct m0_lane *lane, int sndbuf_bytes);
void m0_lane_close(struct m0_lane *lane);

/* Send one record without blocking. Returns M0_OK, M0_AGAIN when the lane
 * is full (retry later), or M0_ERR. */
int m0_lane_send(const struct m0_lane *lane, const struct m0_lane_rec *rec);

/* Send up to n records in one call (sendmmsg). Returns how many were sent
 * (0 when the lane is full), or -1 on error. */
int m0_lane_send_many(const struct m0_lane *lane, const struct m0_lane_rec *recs, size_t n);

/* Take a record if one is queued, without blocking. Returns M0_OK or
 * M0_AGAIN (lane empty). */
int m0_lane_poll(const struct m0_lane *lane, struct m0_lane_rec *rec);

/* Block until a record arrives (EINTR retried), or the lane's receive
 * timeout (m0_lane_set_timeout) passes. Returns M0_OK, M0_AGAIN (timed out)
 * or M0_ERR. */
int m0_lane_take(const struct m0_lane *lane, struct m0_lane_rec *rec);

/* Make m0_lane_take give up after ms of waiting (0: wait forever). It is a
 * property of the lane, shared by every thread reading it. */
int m0_lane_set_timeout(struct m0_lane *lane, uint64_t ms);

/*
 * A loop-side FIFO in front of a lane: records are queued without a system
 * call and sent in sendmmsg batches once per loop pass; what the lane cannot
 * take yet (its reader is behind) waits here, in order. Loop thread only.
 */
struct m0_lane_q {
    struct m0_lane_rec *recs;
    size_t n, cap, head;
};

void m0_lane_q_push(struct m0_lane_q *q, const struct m0_lane_rec *rec);
/* Send what the lane takes, oldest first. Returns M0_OK when the queue is
 * empty afterwards, M0_AGAIN when records remain. */
int m0_lane_q_flush(struct m0_lane_q *q, const struct m0_lane *lane);
void m0_lane_q_free(struct m0_lane_q *q);

#endif
