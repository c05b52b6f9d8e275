/*
 * serve_stubs.c — what the serving core's unit tests (test_serve.c) link in
 * place of the Python layer: the dispatch of a runner and the pool's
 * numbers. The tests answer every request with endpoints of their own, so
 * no runner is ever asked to run; one that is fails the test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "m0/dispatch.h"
#include "m0/job.h"
#include "m0/pool.h"

int m0_dispatch(struct m0_job *job, enum m0_run_kind kind, const struct m0_job_inline *inl, uint64_t now)
{
    (void)job;
    (void)kind;
    (void)inl;
    (void)now;
    fprintf(stderr, "serve_stubs: a runner was dispatched\n");
    abort();
}

int m0_dispatch_resume(struct m0_job *job)
{
    (void)job;
    abort();
}

void m0_dispatch_abandon(struct m0_job *job)
{
    (void)job;
}

void m0_pool_stats(const struct m0_pool *p, unsigned *threads, unsigned *busy, unsigned *max, unsigned *waiting)
{
    (void)p;
    *threads = *busy = *max = *waiting = 0;
}

uint64_t m0_pool_started(const struct m0_pool *p)
{
    (void)p;
    return 0;
}
