/*
 * job.h — one request in flight, as handed from the loop to a runner.
 *
 * Ownership moves, it is never shared: the loop owns a job while it reads
 * the request and while it writes the response; a runner (the WSGI bridge,
 * on the loop thread or on a pool thread) owns it between dispatch and
 * completion. A job names its connection only by slot and generation, so
 * a runner never touches a struct m0_conn, and a completion for a slot
 * that has since been reused is recognised and dropped.
 */
#ifndef M0_JOB_H
#define M0_JOB_H

#include <netinet/in.h>
#include <stdatomic.h>
#include "m0/types.h"
#include "m0/http.h"
#include "m0/response.h"

/* Who may start the job: the loop submits it QUEUED; a pool thread moves it
 * to RUNNING, or the loop to CANCELLED when --request-timeout answers 503
 * first. The compare-and-swap decides; the loser leaves the job alone. */
enum m0_job_state { M0_JOB_IDLE, M0_JOB_QUEUED, M0_JOB_RUNNING, M0_JOB_CANCELLED };

struct m0_job {
    struct m0_req req;          /* parsed request (owned by the job) */
    struct m0_resp resp;        /* produced response (owned by the job) */
    uint32_t slot;              /* connection slot this job answers */
    uint32_t gen;               /* slot generation at dispatch */
    int draining;               /* server is shutting down: answer Connection: close */
    atomic_int run_state;       /* enum m0_job_state */
    uint64_t queued_ms;         /* loop clock at submission */
    char remote_addr[INET6_ADDRSTRLEN];
    uint16_t remote_port;
    /* Runner state between start and completion (PyObject * in wsgi.c;
     * opaque here so the loop needs no Python headers). */
    void *app_iter;             /* the iterator being drained, or NULL */
    void *cur_item;             /* a body item being sent in credit-sized slices, or NULL */
    size_t cur_off;             /* bytes of cur_item already produced */
    void *app_result;           /* the iterable whose close() is owed, or NULL */
    void *start_response;       /* the per-request start_response object */
    void *input;                /* the wsgi.input object */
    struct m0_buf pending;      /* body bytes held back until the head commits */
    int64_t app_length;         /* the application's Content-Length, or -1 */
    uint64_t produced;          /* body bytes produced so far */
    int framing;                /* enum m0_framing once the head is committed */
    int keep;                   /* connection persists after this response */
    /* Set with M0_RESP_HOLD: the stream's channel and resume point. */
    uint64_t hold_last_id;      /* the request's Last-Event-ID, or 0 */
    uint16_t hold_channel_len;
    char hold_channel[201];     /* M0_CHANNEL_MAX + 1 */
};

#endif
