/*
 * dispatch.c — running a target's runner from the loop (see dispatch.h).
 *
 * The mode is the target's: an asynchronous runner schedules the job on
 * its executor (runner->submit), a target on a pool has its job taken by
 * a thread of its loop's pool (pool.h), and a target without one runs on the loop
 * thread, between m0_py_attach and m0_py_detach. A queued job is QUEUED
 * before it is submitted, so whoever moves it out of that state owns it
 * (m0_job_claim on the runner's side, m0_job_cancel on the loop's).
 */
#include <stdatomic.h>

#include "m0/dispatch.h"
#include "m0/job.h"
#include "m0/pool.h"
#include "m0/pyrt.h"
#include "m0/runner.h"
#include "m0/target.h"

int m0_dispatch(struct m0_job *job, enum m0_run_kind kind, const struct m0_job_inline *inl, uint64_t now)
{
    const struct m0_target *t = job->target;
    const struct m0_runner *r = t->runner;
    if (r->submit != NULL || t->on_pool) {
        job->inl = NULL;
        job->queued_ms = now;
        atomic_store(&job->run_state, M0_JOB_QUEUED);
        if (r->submit != NULL) {
            job->pinned = 1;           /* found by slot from now on (job.h) */
            job->wake = r->wake;       /* it polls (m0_job_poll): woken through its executor */
            r->submit(t, job);
        } else {
            m0_pool_submit_kind(job->env->pool, job->slot, job->gen, kind);
        }
        return M0_QUEUED;
    }
    int rc;
    m0_py_attach();
    if (kind == M0_RUN_MESSAGE) {
        rc = r->message(job, job->msg_opcode, job->req.body.data, (size_t)job->req.body_len);
    } else {
        job->inl = inl;
        rc = r->start(job);
    }
    m0_py_detach();
    return rc;
}

int m0_dispatch_resume(struct m0_job *job)
{
    m0_py_attach();
    int rc = job->target->runner->resume(job);
    m0_py_detach();
    return rc;
}

void m0_dispatch_abandon(struct m0_job *job)
{
    m0_py_attach();
    job->target->runner->abandon(job);
    m0_py_detach();
}
