/*
 * dispatch.h — the one place a runner is run (runner.h): on its own
 * executor (an asynchronous runner), on its target's pool, or inline on
 * the loop thread with the thread state held. Every path of the loop that
 * starts a runner, resumes an inline one, hands it a WebSocket message or
 * abandons it goes through here — h1.c for requests, wshold.c for the
 * messages of a held socket, conn.c and h1.c when a client leaves — so
 * the choice of mode and the GIL around an inline call are written once.
 * Loop thread.
 */
#ifndef M0_DISPATCH_H
#define M0_DISPATCH_H

#include "m0/types.h"
#include "m0/lane.h"

struct m0_job;
struct m0_job_inline;

/* m0_dispatch's outcome when the job went to a runner on another thread. */
#define M0_QUEUED 1

/*
 * Hand job (job->target set; job->slot, job->gen name its connection) to
 * the target's runner. kind is M0_RUN_START (run the request) or
 * M0_RUN_MESSAGE (the inbound WebSocket message in job->req.body, opcode
 * job->msg_opcode: runner->message).
 *   An asynchronous runner, or a target with a pool: the job becomes
 *   QUEUED (job->queued_ms = now, the loop clock) and M0_QUEUED is
 *   returned: the runner owns the job until its M0_CPL_DONE.
 *   Otherwise the runner runs now, attached, with inl as its inline I/O
 *   (job->inl; NULL for a message): its outcome is returned — M0_DONE, or
 *   M0_AGAIN when a start produced body bytes and owes more
 *   (m0_dispatch_resume once they are written).
 */
int m0_dispatch(struct m0_job *job, enum m0_run_kind kind, const struct m0_job_inline *inl, uint64_t now);
/* An inline runner owes more body: run it again (attached). M0_DONE or
 * M0_AGAIN. */
int m0_dispatch_resume(struct m0_job *job);
/* An inline runner will not be resumed (the client left, the hold could
 * not be taken): release its Python state, close() included (attached).
 * The response is marked ABORT. */
void m0_dispatch_abandon(struct m0_job *job);

#endif
