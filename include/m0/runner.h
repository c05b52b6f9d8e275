/*
 * runner.h — a protocol's operations on a job (nginx unit's
 * nxt_python_proto_t, in our shape): the WSGI bridge (wsgi.c, synchronous)
 * and the ASGI executor (asgi.c, asynchronous) implement them. The loop
 * runs them through one place, dispatch.h; the application loader (apps.c)
 * binds each target to its runner and sets it up.
 *
 * Every operation of a synchronous runner runs on the thread that runs the
 * target's jobs — a pool thread, or the loop thread when no pool serves —
 * attached to the interpreter; an asynchronous runner's submit and wake
 * run on the loop thread, everything else on its executor. The runner's per-job state lives behind job->rstate[id] and
 * is private to its file. A runner never touches a connection: it frames bytes
 * into job->resp.out (through job->body) and hands them over with
 * m0_job_push().
 *
 * A runner is synchronous (WSGI: start/resume/abandon, run by the target's
 * pool threads or inline on the loop thread) or asynchronous (ASGI: submit,
 * wake, teardown — it schedules jobs on its own executor and reports
 * through the same completions, m0_loop_post).
 *
 * Outcomes of start/resume:
 *   M0_DONE   the response is complete in job->resp (flags say ABORT when
 *             it must not be passed off as complete); every Python object
 *             of the job is released, close() included;
 *   M0_AGAIN  body bytes were produced and more will follow: the caller
 *             hands them to the loop (m0_job_push), waits for credit
 *             (m0_job_wait_credit) and calls resume — on the same thread,
 *             so a streaming response stays on the thread that started it.
 *
 * Inbound WebSocket messages (DESIGN capability 6) are the message
 * operation, on the same threads as start: the pool of the target that
 * gated the socket (a M0_RUN_MESSAGE lane record), or the loop thread when
 * that target has no pool. The loop hands over one message at a time per
 * socket, in order; the others wait in the socket's bounded queue.
 * An asynchronous runner accepts sockets itself and keeps the job for the
 * socket's life (M0_CPL_UPGRADE in job.h): its messages go through the job's
 * channel (m0_job_offer / m0_job_msg_take), not through message.
 */
#ifndef M0_RUNNER_H
#define M0_RUNNER_H

#include "m0/types.h"

struct m0_config;
struct m0_runner_env;
struct m0_target;

struct m0_runner {
    const char *name;                               /* "wsgi", "asgi" */
    int id;                                         /* its index in job->rstate[] (< M0_RUNNER_MAX) */
    /* Prepare t (its app is set) for the jobs of env's loop, called once
     * per event loop of the worker (--threads), loop 0 first: per-target
     * state such as the environ template (WSGI, made by the first call), or
     * the loop's executor with its lifespan startup (ASGI). Attached. M0_OK; or M0_ERR with a
     * Python exception set, or with none when the runner has logged why
     * itself (an ASGI lifespan startup failure: the application's message,
     * one line). */
    int (*setup)(struct m0_target *t, const struct m0_config *cfg, const struct m0_runner_env *env);
    int (*start)(struct m0_job *job);               /* M0_DONE | M0_AGAIN */
    int (*resume)(struct m0_job *job);              /* M0_DONE | M0_AGAIN */
    /* The client left (or the server stops) while a response is owed:
     * release the job's Python state, close() included; the response is
     * marked ABORT. Idempotent. */
    void (*abandon)(struct m0_job *job);

    /* Asynchronous runners. submit (loop thread): take the job, which the
     * loop set QUEUED, onto the target's executor; the runner owns it until
     * it posts M0_CPL_DONE. wake (loop thread, under the job's channel
     * lock, must not block): something the runner polled for happened
     * (m0_job_poll). */
    void (*submit)(const struct m0_target *t, struct m0_job *job);
    void (*wake)(struct m0_job *job);
    /* Worker shutdown, after the drain (ASGI: lifespan shutdown), attached
     * to the interpreter. May be NULL. */
    void (*teardown)(struct m0_target *t);
    /*
     * One complete inbound WebSocket message of the socket job->slot
     * answers (a WebSocket hold, hold.h). opcode is M0_WS_TEXT or
     * M0_WS_BINARY (text is valid UTF-8); payload is len bytes, valid until
     * the completion. The loop has also made job->req the ordinary request
     * the message stands for (ws.h, m0_ws_message_request): POST to the
     * target of the handshake, its headers, the payload as the body and
     * M0-Channel / M0-Slot / M0-Opcode — a runner whose protocol has no
     * message event of its own (WSGI) runs that request; one that has
     * (ASGI's websocket.receive) uses opcode and payload.
     *
     * The answer: job->resp.out holds the reply payload, raw (no HTTP
     * framing), sent back to this socket only as one frame when non-empty
     * and job->resp.status is 2xx; job->head.ws_opcode picks its opcode
     * (0: text when the bytes are UTF-8, else binary). M0_RESP_ABORT in
     * job->resp.flags closes the socket with 1011. Returns M0_DONE; the
     * job's Python state is released before it returns. NULL: the
     * runner's targets cannot hold WebSockets (the upgrade is refused).
     */
    int (*message)(struct m0_job *job, int opcode, const void *payload, size_t len);
};

extern const struct m0_runner m0_wsgi_runner;
extern const struct m0_runner m0_asgi_runner;

#endif
