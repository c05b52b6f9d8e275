/*
 * job.h — one request in flight, as handed from the loop to a runner, and
 * the channel between them while the runner streams.
 *
 * Ownership moves, it is never shared: the loop owns a job while it reads
 * the request and after the runner's final completion; a runner (on a pool
 * thread, or inline on the loop thread when no pool serves) owns it from
 * dispatch to that completion. A job names its connection only by slot and
 * generation, so a runner never touches a struct m0_conn, and a completion
 * for a slot that has since been reused is recognised and dropped.
 *
 * The one exception is the channel (struct m0_jobchan), which both sides
 * use while a runner is pinned to a streaming response or waits for a
 * request body: every field of it is read and written under its lock,
 * which is never held across a system call that can block, nor across
 * Python. Through it:
 *   - the runner hands body bytes to the loop (m0_job_push) and waits for
 *     credit: it blocks while more than M0_JOB_WINDOW bytes are queued or
 *     unwritten, so a slow reader costs a bounded amount of memory and a
 *     fast one is never stop-and-wait;
 *   - the loop reports bytes written (m0_job_credit) and a client that left
 *     (m0_job_gone), which wakes the runner at once;
 *   - for Expect: 100-continue, the runner asks for the body the first time
 *     the application reads it (m0_job_wait_body) and the loop reports its
 *     progress (m0_job_body_progress).
 */
#ifndef M0_JOB_H
#define M0_JOB_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include "m0/types.h"
#include "m0/body.h"
#include "m0/http.h"
#include "m0/response.h"

/* Bytes a streaming runner may have queued or unwritten before it waits. */
#define M0_JOB_WINDOW (256 * 1024)

/* Who may start the job: the loop submits it QUEUED; a pool thread moves it
 * to RUNNING, or the loop to CANCELLED when --request-timeout answers 503
 * first or the client left. The compare-and-swap decides; the loser leaves
 * the job alone. */
enum m0_job_state { M0_JOB_IDLE, M0_JOB_QUEUED, M0_JOB_RUNNING, M0_JOB_CANCELLED };

/* Completion kinds, runner → loop (struct m0_completion.kind). */
enum m0_cpl_kind {
    M0_CPL_DONE = 1,     /* the runner is finished with the job: it is the loop's again */
    M0_CPL_PART,         /* body bytes are waiting in the channel; the runner keeps the job */
    M0_CPL_CONTINUE,     /* the application wants the request body: send 100 Continue */
};

/* The inline environment: how a runner on the loop thread itself (no pool)
 * flushes and reads, since it cannot wait for the loop. */
struct m0_job_inline {
    /* Write everything queued in job->resp.out to the client now
     * (blocking, bounded by the write timeout). M0_OK or M0_ERR (gone). */
    int (*flush)(struct m0_job *job, void *ctx);
    /* Send 100 Continue if owed and read the request body until at least
     * want bytes are there or it is complete. M0_OK or M0_ERR. */
    int (*read_body)(struct m0_job *job, uint64_t want, void *ctx);
    void *ctx;
};

struct m0_jobchan {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct m0_buf q;            /* runner → loop: framed bytes not yet taken */
    size_t unwritten;           /* loop: taken bytes not yet written (credit) */
    uint8_t posted;             /* a PART completion is queued and not yet taken */
    uint8_t waiting;            /* the runner sleeps on cond */
    uint8_t gone;               /* the client left: the runner stops */
    /* Expect: 100-continue (lazy request body) */
    uint8_t body_lazy;          /* the body is read while the runner runs */
    uint8_t body_wanted;        /* the application asked for it: 100 is owed */
    uint8_t body_done;          /* the request message is complete */
    uint8_t body_error;         /* the body could not be received (timeout, malformed) */
};

struct m0_job {
    struct m0_req req;          /* parsed request */
    struct m0_head head;        /* the application's head, as the runner built it */
    struct m0_body body;        /* the body encoder's state */
    struct m0_resp resp;        /* runner → loop: framed bytes, file range, flags */
    struct m0_jobchan ch;
    uint32_t slot;              /* connection slot this job answers */
    uint32_t gen;               /* slot generation at dispatch */
    const struct m0_target *target;
    struct m0_loop *loop;       /* where completions go */
    const struct m0_job_inline *inl;   /* non-NULL: running on the loop thread */
    atomic_int run_state;       /* enum m0_job_state */
    uint64_t queued_ms;         /* loop clock at submission */
    uint64_t hold_start;        /* newest event id when the hold was decided */
    uint64_t hold_last_id;      /* the request's Last-Event-ID (0: none) */
    void *rstate;               /* the runner's private state (opaque here) */
    /* The peer as accept() reported it ("" for a unix socket), and the
     * client the request speaks for: the peer, or whom a trusted proxy
     * names (proxy.h; set per request by the loop before dispatch). */
    char peer_addr[INET6_ADDRSTRLEN];
    uint16_t peer_port;
    int8_t peer_trusted;        /* --forwarded-allow-ips holds the peer: -1 not yet known, 0, 1 */
    char remote_addr[INET6_ADDRSTRLEN];
    uint16_t remote_port;
    uint8_t https;              /* a trusted proxy says the client used https */
};

/* Allocate a job for slot (zeroed, channel initialised). Never NULL. */
struct m0_job *m0_job_new(uint32_t slot);
void m0_job_free(struct m0_job *job);

/* Loop: prepare for a new request (keeps allocations). */
void m0_job_reset(struct m0_job *job);

/*
 * Runner side.
 *
 * m0_job_push: hand what the runner framed in job->resp.out to the loop
 * (moved into the channel; a PART completion posted unless one is already
 * pending). Inline: write it to the client now. Returns M0_OK, or M0_ERR
 * when the client is gone.
 *
 * m0_job_wait_credit: block while more than M0_JOB_WINDOW bytes are queued
 * or unwritten. Returns M0_OK, or M0_ERR when the client is gone. Call
 * without the GIL.
 *
 * m0_job_wait_body: make sure the request body holds at least want bytes
 * or is complete (the first call of a lazy body asks for 100 Continue).
 * Returns M0_OK, or M0_ERR (client gone, body timeout, malformed body).
 * Call without the GIL.
 *
 * m0_job_body_read: m0_req_body_read under the channel lock (the loop may
 * be appending a lazy body meanwhile).
 *
 * m0_job_client_gone: has the loop said the client left?
 */
int m0_job_push(struct m0_job *job);
int m0_job_wait_credit(struct m0_job *job);
int m0_job_wait_body(struct m0_job *job, uint64_t want);
ssize_t m0_job_body_read(struct m0_job *job, uint64_t off, void *dst, size_t n);
int m0_job_client_gone(struct m0_job *job);

/* Body bytes received so far, and whether the body is complete (under the
 * lock: a lazy body grows while the runner runs). */
uint64_t m0_job_body_len(struct m0_job *job, int *complete);

/*
 * Loop side.
 *
 * m0_job_take: move the channel's queued bytes to the end of dst; returns
 * how many. m0_job_credit: the loop's unwritten count is now unwritten
 * bytes (wakes a runner waiting for credit). m0_job_gone: the client left
 * (wakes the runner). m0_job_body_progress: the lazy body grew, or is
 * complete, or failed.
 */
size_t m0_job_take(struct m0_job *job, struct m0_buf *dst);
void m0_job_credit(struct m0_job *job, size_t unwritten);
void m0_job_gone(struct m0_job *job);
void m0_job_body_progress(struct m0_job *job, int done, int error);

/* Lock the channel around the loop's parsing of a lazy body (the parser
 * appends to req.body, which the runner reads). */
void m0_job_lock(struct m0_job *job);
void m0_job_unlock(struct m0_job *job);

#endif
