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

struct m0_access_kept;
struct m0_endpoint;

/* Runners that can keep state in a job (struct m0_runner.id < this). */
#define M0_RUNNER_MAX 4

/* Bytes a streaming runner may have queued or unwritten before it waits. */
#define M0_JOB_WINDOW (256 * 1024)

/* A close frame's reason: at most 123 bytes (RFC 6455 §5.5: 125 - the code). */
#define M0_WS_REASON_MAX 123

/* Who may start the job: the loop submits it QUEUED; a pool thread moves it
 * to RUNNING, or the loop to CANCELLED when --request-timeout answers 503
 * first or the client left. The compare-and-swap decides; the loser leaves
 * the job alone. */
enum m0_job_state { M0_JOB_IDLE, M0_JOB_QUEUED, M0_JOB_RUNNING, M0_JOB_CANCELLED };

/* What a runner can wait for (struct m0_jobchan.waiting); the loop wakes it
 * when that happens, and always when the client leaves. */
#define M0_WAIT_CREDIT 0x01u    /* queued + unwritten bytes back under half the window */
#define M0_WAIT_BODY   0x02u    /* more of a lazy request body, or its end */
#define M0_WAIT_GONE   0x04u    /* only the client leaving */
#define M0_WAIT_MSG    0x08u    /* an inbound WebSocket message (m0_job_offer) */

/*
 * What a runner reaches of the loop its jobs belong to: one per loop,
 * filled by the loop before any runner is set up, handed to runner setup
 * (runner.h) and to the pool (pool.h), and reached from a job through
 * job->env. Nothing a runner needs of its loop is a process global, so
 * several loops can each have their own. Read-only once filled, but for
 * what draining points to.
 */
struct m0_runner_env {
    struct m0_loop *loop;             /* completions and before-sleep hooks go here */
    unsigned loop_index;              /* which of the worker's loops (--threads), 0.. */
    struct m0_pool *pool;             /* the loop's handler pool (pool.h); NULL: none */
    struct m0_job *const *jobs;       /* slot → job (an entry is set once, before its first
                                         dispatch; entries never move) */
    uint32_t njobs;
    const atomic_int *draining;       /* the loop drains: a head committed now closes after */
    /* The newest event id the loop's realtime engine knows (rt.h): where a
     * hold decided now starts. Any thread. NULL: 0. */
    uint64_t (*newest_id)(const void *ctx);
    const void *newest_ctx;
};

/* Completion kinds, runner → loop (struct m0_completion.kind). */
enum m0_cpl_kind {
    M0_CPL_DONE = 1,     /* the runner is finished with the job: it is the loop's again */
    M0_CPL_PART,         /* body bytes are waiting in the channel; the runner keeps the job */
    M0_CPL_CONTINUE,     /* the application wants the request body: send 100 Continue */
    /* An asynchronous runner accepted a WebSocket (job->head carries
     * M0-Hold: websocket, job->resp M0_RESP_HOLD): the loop answers 101 and
     * holds the socket; the runner keeps the job, sends frames through the
     * channel (m0_job_push_raw, m0_job_close_socket) and takes the
     * socket's messages from it (m0_job_offer) until it posts DONE. */
    M0_CPL_UPGRADE,
    /* The runner took every message the loop offered: offer the next. */
    M0_CPL_TAKEN,
};

/* What a request knows of its connection's TLS (issue 31), set per request
 * by the loop from the connection's transport (conn.h: describe); for the
 * runners' environ and scope. version 0: a plain connection. */
struct m0_job_tls {
    uint16_t version;           /* 0x0303 TLS 1.2, 0x0304 TLS 1.3; 0: plain */
    uint16_t cipher;            /* the cipher suite's IANA number (RFC 8446 §B.4) */
    const char *protocol;       /* "TLSv1.3": OpenSSL's static text */
    const char *cipher_name;    /* "TLS_AES_256_GCM_SHA384": OpenSSL's static text */
    const char *server_pem;     /* the server's certificate (PEM): the worker's context's, lives as long */
    /* The verified client certificate: its subject (RFC 4514) of dn_len
     * bytes, NUL, its PEM, NUL, in peer (the job's own allocation, kept
     * across requests); dn_len 0: none. A copy, not the connection's: a
     * runner may read it after the connection closed. */
    char *peer;
    size_t peer_cap;
    uint32_t dn_len;
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
    uint8_t waiting;            /* M0_WAIT_*: what the runner waits for (cond, or the runner's wake) */
    uint8_t gone;               /* the client left: the runner stops */
    /* Expect: 100-continue (lazy request body) */
    uint8_t body_lazy;          /* the body is read while the runner runs */
    uint8_t body_wanted;        /* the application asked for it: 100 is owed */
    uint8_t body_done;          /* the request message is complete */
    uint8_t body_error;         /* the body could not be received (timeout, malformed) */
    /* A WebSocket held for an asynchronous runner (M0_CPL_UPGRADE) */
    struct m0_buf inq;          /* loop → runner: messages, each (opcode u8, length u64, bytes) */
    uint32_t in_count;          /* messages in inq */
    uint8_t closing;            /* runner → loop: send our close frame (close_code, close_reason) */
    uint8_t close_reason_len;
    uint16_t close_code;        /* runner → loop: the close frame's code */
    uint16_t peer_code;         /* loop → runner, once gone: the code the socket ended with */
    uint8_t peer_reason_len;
    char close_reason[M0_WS_REASON_MAX];
    char peer_reason[M0_WS_REASON_MAX];  /* loop → runner: the reason in the peer's close frame */
};

struct m0_job {
    struct m0_req req;          /* parsed request */
    /* The connection's request parser (loop only), here rather than in the
     * slot: a held connection has no request to parse, and no job. */
    struct m0_http http;
    struct m0_head head;        /* the application's head, as the runner built it */
    struct m0_body body;        /* the body encoder's state */
    struct m0_resp resp;        /* runner → loop: framed bytes, file range, flags */
    struct m0_jobchan ch;
    uint32_t slot;              /* connection slot this job answers */
    uint32_t gen;               /* slot generation at dispatch */
    const struct m0_target *target;
    struct m0_loop *loop;       /* where completions go */
    const struct m0_runner_env *env;   /* the loop's environment (set with loop) */
    const struct m0_job_inline *inl;   /* non-NULL: running on the loop thread */
    /* An asynchronous runner's wakeup (loop thread, under the channel lock):
     * the loop calls it instead of signalling the condition variable when
     * something the runner waits for happened. NULL: threads on cond. */
    void (*wake)(struct m0_job *job);
    atomic_int run_state;       /* enum m0_job_state */
    uint64_t queued_ms;         /* loop clock at submission */
    uint64_t hold_start;        /* newest event id when the hold was decided */
    uint64_t hold_last_id;      /* the request's Last-Event-ID (0: none) */
    int64_t grant_exp;          /* a grant hold's exp, seconds since the epoch, with --grant-expire
                                   close (grant_hold.c; the hold ends then: hold.h); 0: none */
    uint64_t begin_id;          /* newest event id when the request was dispatched (a GRIP hold starts there) */
    /* Each runner's private per-job state, by runner id: a slot's job may
     * serve one target's runner now and another's later (mounts). */
    void *rstate[M0_RUNNER_MAX];
    uint8_t msg_opcode;         /* M0_RUN_MESSAGE: the inbound message's opcode (payload: req.body) */
    /* Requests the loop makes itself, run as messages are (M0_RUN_MESSAGE:
     * the answer collected, its head in job->head, its body raw in
     * job->resp.out). woh: a WebSocket-over-HTTP OPEN (woh.h), whose answer
     * opens the socket or refuses it (wshold.h). grip_own: a GRIP hold's
     * next link (grip_hold.h): the request's Grip-* fields are the server's
     * own (Grip-Last), so the application gets them, and the answer's
     * Grip-* fields are instructions. */
    uint8_t woh;
    uint8_t grip_own;
    /* The peer as accept() reported it ("" for a unix socket), and the
     * client the request speaks for: the peer, or whom a trusted proxy
     * names (proxy.h; set per request by the loop before dispatch). */
    char peer_addr[INET6_ADDRSTRLEN];
    uint16_t peer_port;
    int8_t lidx;                /* the index of the listener it was accepted on (-1: none known) */
    int8_t mx_mount;            /* metrics: the mount (target index) that answers, -1 none */
    /* Who answers the request in flight (endpoint.h), decided once when
     * its head is complete, before any of its body is read: the protocol
     * keeps the endpoint and its claim's flags (read the body or not, may
     * it start before the body) and acts on them alone. */
    uint8_t route_flags;        /* M0_EP_* of the claim */
    uint8_t route_matched;      /* route_target is the mount the path falls under (m0_endpoint_mount) */
    int16_t route_verdict;      /* the GRIP control port's verdict (m0_grip_control_verdict) */
    const struct m0_endpoint *route;        /* NULL: not decided yet */
    const struct m0_target *route_target;   /* the mount of a static or application route */
    char remote_addr[INET6_ADDRSTRLEN];
    uint16_t remote_port;
    uint8_t https;              /* the client used https: a TLS listener, or a trusted proxy says so */
    struct m0_job_tls tls;      /* the connection's TLS (version 0: plain) */
    /* An asynchronous runner has had this job: it may look it up by slot
     * at any moment (asgi.c), so it stays with its slot for good instead of
     * going back to the loop's cache (conn.h: m0_conn_job_put). */
    uint8_t pinned;
    struct m0_job *next_free;   /* the loop's job cache (conn.c) */
    /* --access-log: the request as its line shows it, kept before the loop
     * rewrote it (a granted socket's messages go to --grant-inbound's
     * path); NULL: the request itself. A hold takes it (accesslog.h). */
    struct m0_access_kept *alog;
};

/* Allocate a job for slot (zeroed, channel initialised). Never NULL. */
struct m0_job *m0_job_new(uint32_t slot);
void m0_job_free(struct m0_job *job);

/* Loop: prepare for a new request (keeps allocations). */
void m0_job_reset(struct m0_job *job);

/* Loop, with --access-log: keep the request's access-log line as it is now
 * in job->alog (accesslog.h: its client and request line), for a caller
 * about to rewrite the request, or a hold whose line is written when it
 * ends; a no-op when one is kept already. */
void m0_job_keep_access(struct m0_job *job);

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

/*
 * The run state (enum m0_job_state), from either side.
 *
 * m0_job_claim: a runner takes a QUEUED job (→ RUNNING). 1 when it did;
 * 0 when the loop cancelled it first (the runner then posts DONE and
 * leaves the job alone). m0_job_cancel: the loop takes back a job no
 * runner started (→ CANCELLED). 1 when it did; 0 when a runner has it.
 * m0_job_post_done: the runner is finished with the job (M0_CPL_DONE for
 * job->slot, job->gen); no call on the job after it.
 */
int m0_job_claim(struct m0_job *job);
int m0_job_cancel(struct m0_job *job);
void m0_job_post_done(struct m0_job *job);

/*
 * Committing the head, for every path that answers a request (the runners
 * on their threads, the loop for what it answers itself): one decision of
 * keep-alive and one of hold.
 *
 * m0_job_framing: how job->req's answer is framed (body.h): keep-alive when
 * the request allows it (RFC 9112 §9.3), the loop is not draining and the
 * request's end is known (a lazy body that has not arrived whole cannot be
 * skipped); HEAD; the request's HTTP version.
 * m0_job_may_hold: is the head an M0-Hold: stream that can be kept — the
 * target holds (--realtime), a 2xx, not HEAD? Elsewhere the same response
 * goes out as an ordinary short one.
 * m0_job_commit: commit job->head into job->resp.out with that framing
 * (body_len: the whole body's size when known, else -1); a hold (hold set:
 * the caller asked m0_job_may_hold) takes its Last-Event-ID and the newest
 * id now, and marks the response M0_RESP_HOLD (a GRIP hold: no
 * Last-Event-ID, the id at dispatch, begin_id). A head whose GRIP
 * instructions were refused (head.grip_err) is answered 502 "Error while
 * proxying to origin." instead, as Pushpin answers, the view's body
 * dropped. M0_OK, or M0_ERR when a head
 * was committed already (one head per response: nothing is written).
 * m0_job_newest_id: the newest event id the job's loop knows (0: none).
 */
struct m0_body_req m0_job_framing(struct m0_job *job);
int m0_job_may_hold(const struct m0_job *job);
int m0_job_commit(struct m0_job *job, int64_t body_len, int hold);
uint64_t m0_job_newest_id(const struct m0_job *job);

/*
 * For asynchronous runners, which must not block: take what is ready and
 * arm the wakeup for what is not (all under the lock, so nothing is missed).
 *
 * m0_job_poll: want is M0_WAIT_* bits. Returns the bits of want that hold
 * now (CREDIT: under the window; BODY: the lazy body is complete or failed;
 * GONE: the client left), and arms job->wake for the others. A first BODY
 * poll asks for the body (100 Continue) like m0_job_wait_body.
 */
unsigned m0_job_poll(struct m0_job *job, unsigned want);

/*
 * A WebSocket held for an asynchronous runner (after M0_CPL_UPGRADE).
 *
 * Runner side. m0_job_push_raw: append head (hn bytes) then body (bn bytes)
 * — an encoded frame — to what the loop takes next, posting a PART unless
 * one is pending. m0_job_close_socket: ask for our close frame (code;
 * reason at most M0_WS_REASON_MAX bytes, longer is cut), sent after every
 * byte pushed before it; nothing is sent after it. Both return M0_OK, or
 * M0_ERR when the socket is gone. Credit as for a body (m0_job_poll
 * M0_WAIT_CREDIT).
 *
 * m0_job_msg_take: the oldest offered message, handed to take(ctx,
 * opcode, p, n) under the channel lock (p valid only during the call; take
 * must not block) and then dropped. Returns 1 (taken), 0 (none waiting:
 * poll M0_WAIT_MSG to be woken), -1 (none waiting and the socket is gone:
 * *code is the close code it ended with, RFC 6455 §7.1.5 — the peer's,
 * 1005 for a close frame without one, 1006 when it vanished, and reason
 * (M0_WS_REASON_MAX bytes of room) / *rlen the UTF-8 reason of the peer's
 * close frame, empty without one) or -2 (take
 * returned nonzero; the message stays). Taking the last message of an offer
 * posts M0_CPL_TAKEN.
 *
 * Loop side. m0_job_offer: queue one complete message (copied; wakes a
 * runner polling for M0_WAIT_MSG). m0_job_take_close: after m0_job_take,
 * whether the runner asked for the close frame (1: *code, *reason filled;
 * reason at most M0_WS_REASON_MAX bytes, *rlen its length).
 * m0_job_peer_reason: the reason of the peer's close frame (len bytes,
 * truncated to M0_WS_REASON_MAX), for the runner's disconnect event.
 * m0_job_socket_gone: the socket ended with code (then as m0_job_gone).
 */
int m0_job_push_raw(struct m0_job *job, const void *head, size_t hn, const void *body, size_t bn);
int m0_job_close_socket(struct m0_job *job, unsigned code, const char *reason, size_t len);
int m0_job_msg_take(struct m0_job *job, int (*take)(void *ctx, int opcode, const char *p, size_t n), void *ctx,
                    unsigned *code, char *reason, size_t *rlen);
void m0_job_offer(struct m0_job *job, int opcode, const void *p, size_t n);
int m0_job_take_close(struct m0_job *job, unsigned *code, char *reason, size_t *rlen);
void m0_job_peer_reason(struct m0_job *job, const char *reason, size_t len);
void m0_job_socket_gone(struct m0_job *job, unsigned code);

#endif
