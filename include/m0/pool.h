/*
 * pool.h — the handler-thread pool of one event loop (--blocking-threads N).
 *
 * The loop parks a request's slot and submits (slot, gen, kind) on the
 * pool's submit lane; a pool thread takes the record, runs the WSGI bridge
 * on the slot's job, and posts a completion. Completions wake the loop
 * through one eventfd write per batch (a writer skips the write while a
 * wakeup is already pending), and the loop drains them all at once.
 *
 * Threads never touch a struct m0_conn: they reach a job through the jobs
 * table (slot → job), and a job belongs to exactly one side at a time.
 * Each thread owns one Python thread state for its whole life and holds
 * the GIL only while running Python.
 */
#ifndef M0_POOL_H
#define M0_POOL_H

#include "m0/types.h"
#include "m0/lane.h"

struct m0_pool;

struct m0_completion {
    uint32_t slot;
    uint32_t gen;
    uint32_t kind;      /* enum m0_run_kind that ran */
    int rc;             /* M0_DONE or M0_AGAIN (more body owed) */
};

/* Start nthreads threads reading one submit lane. jobs is the loop's
 * slot → job table (njobs entries); entries are created by the loop before
 * a slot is first submitted and never move. hold_fd is the loop's own bus
 * write end (holds taken on pool threads are forwarded there), or -1.
 * The caller must be detached from the interpreter. Returns NULL with a
 * reason in err. */
struct m0_pool *m0_pool_start(unsigned nthreads, struct m0_job *const *jobs, uint32_t njobs,
                              int hold_fd, char *err, size_t cap);

/* Loop thread: hand (slot, gen, kind) to the pool. Never blocks: records
 * wait in a loop-side FIFO until m0_pool_flush(), which the loop calls once
 * per pass before it sleeps (one sendmmsg for the pass's records). */
void m0_pool_submit(struct m0_pool *p, uint32_t slot, uint32_t gen, enum m0_run_kind kind);
/* Loop thread: send queued records; what the lane cannot take yet stays
 * queued for the next flush (completions free room). NULL is a no-op. */
void m0_pool_flush(struct m0_pool *p);

/* The descriptor the loop polls for completions (readable = drain). */
int m0_pool_wake_fd(const struct m0_pool *p);

/* Loop thread: move up to max completions into out; returns how many.
 * Call again while it returns max. */
size_t m0_pool_drain(struct m0_pool *p, struct m0_completion *out, size_t max);

/* Threads currently running a job, and the pool size. */
unsigned m0_pool_busy(const struct m0_pool *p);
unsigned m0_pool_size(const struct m0_pool *p);

/* Stop every thread (after its current job) and join them. The caller must
 * be detached from the interpreter. Frees p. */
void m0_pool_stop(struct m0_pool *p);

#endif
