/*
 * pool.h — the handler-thread pool of one event loop (--blocking-threads).
 *
 * The loop parks a request's slot and submits (slot, gen) to the pool's
 * queue (in memory, under a mutex: pool.c says why not a socketpair lane);
 * a pool thread takes the record, runs the target's runner on the slot's
 * job and posts the completion to the loop. A streaming response
 * stays on the thread that started it until it ends (credit from the loop,
 * job.h), like gunicorn's gthread worker: thread-local state (Django's
 * database connection, threading.local caches) sees one thread per response.
 *
 * The pool is elastic unless pinned: it starts with min threads, adds one
 * when every thread is busy and a job has waited GROW_MS (a few ms), up to
 * max, and a thread idle for idle_ms retires (never below min).
 * --blocking-threads N pins min = max = N.
 *
 * Threads never touch a struct m0_conn. Each owns one Python thread state
 * for its whole life and holds the GIL only while running Python.
 */
#ifndef M0_POOL_H
#define M0_POOL_H

#include "m0/types.h"
#include "m0/lane.h"

struct m0_pool;
struct m0_runner_env;

/* Start min threads (max >= min >= 1; idle_ms 0: never retire) serving
 * the jobs of env's loop. The caller must be detached from the interpreter. Returns
 * NULL with a reason in err. */
struct m0_pool *m0_pool_start(const struct m0_runner_env *env, unsigned min, unsigned max, uint64_t idle_ms,
                              char *err, size_t cap);

/* Loop thread: hand (slot, gen) to the pool. Never blocks for long: records
 * wait in a loop-side FIFO and go to the queue in one locked section per
 * loop pass, waking only threads that sleep (a before-sleep hook, which
 * also grows the pool when it is saturated). */
void m0_pool_submit(struct m0_pool *p, uint32_t slot, uint32_t gen);
/* The same for a record of another kind: M0_RUN_MESSAGE hands the slot's
 * inbound WebSocket message to a thread (the runner's message op). */
void m0_pool_submit_kind(struct m0_pool *p, uint32_t slot, uint32_t gen, enum m0_run_kind kind);

/* Threads the pool ever started (its floor, then each growth); p may be
 * NULL (0). Any thread. */
uint64_t m0_pool_started(const struct m0_pool *p);

/* Current threads, threads running a job, the maximum, and jobs waiting
 * for a thread. p may be NULL (all zero). */
void m0_pool_stats(const struct m0_pool *p, unsigned *threads, unsigned *busy, unsigned *max,
                   unsigned *queued);

/* Stop every thread (after its current job) and join them. The caller must
 * be detached from the interpreter. Frees p. */
void m0_pool_stop(struct m0_pool *p);

#endif
