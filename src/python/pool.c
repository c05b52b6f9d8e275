/*
 * pool.c — the handler-thread pool (see pool.h): threads on an in-memory
 * queue, completions back through the loop's queue, elastic sizing.
 *
 * Why a mutex-and-condition queue and not a socketpair lane (asgi.c keeps
 * one: its executor waits in an event loop, on a descriptor): a record put
 * while a thread is busy costs no system call at all, and a thread that
 * finishes a job finds the next one under the lock, where a lane cost a
 * recv() per job and one more to find it empty, plus a sendmmsg() per loop
 * pass and an skb per record (docs/performance.md, "The hand-off"). Only a
 * thread that sleeps is signalled (a futex wake), once per record it can
 * take.
 *
 * Why the pool grows rather than starting large: on a GIL build, threads
 * buy overlap of waiting (a view on a database, a socket, a sleep), not
 * CPU. A handful is enough while views are quick; when every thread is
 * inside a slow view, fast requests queue behind them and only another
 * thread helps. So a saturated pool with work waiting adds a thread every
 * GROW_MS, up to max, and threads idle for idle_ms leave again.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "m0/buf.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/pool.h"
#include "m0/pyrt.h"
#include "m0/runner.h"
#include "m0/target.h"

#define GROW_MS 3          /* a saturated pool with work waiting this long grows */

enum { T_EMPTY, T_LIVE, T_EXITED };

struct thread_slot {
    pthread_t th;
    atomic_int state;               /* T_* */
    struct m0_pool *pool;
};

/* The FIFO the threads take records from, under lock (a ring). */
struct queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct m0_lane_rec *ring;
    size_t head, n, cap;
    unsigned sleepers;              /* threads waiting on cond */
};

struct m0_pool {
    const struct m0_runner_env *env;
    struct queue q;
    unsigned min, max;
    uint64_t idle_ms;
    struct thread_slot *threads;    /* max entries */
    atomic_uint nthreads;           /* live threads */
    atomic_uint busy;               /* threads running a job */
    atomic_uint queued;             /* records submitted and not yet taken */
    atomic_ulong started;           /* threads ever started (metrics: growth) */
    uint64_t saturated_since;       /* loop clock; 0: not saturated */

    struct m0_lane_q backlog;       /* loop-only: this pass's records, queued at the hook */
};

/* Under q->lock: the ring grows (a power of two), never drops a record. */
static void q_put(struct queue *q, const struct m0_lane_rec *rec)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 256;
        struct m0_lane_rec *ring = m0_xmalloc(cap * sizeof *ring);
        for (size_t i = 0; i < q->n; i++)
            ring[i] = q->ring[(q->head + i) & (q->cap - 1)];
        free(q->ring);
        q->ring = ring;
        q->cap = cap;
        q->head = 0;
    }
    q->ring[(q->head + q->n++) & (q->cap - 1)] = *rec;
}

/* Under q->lock: the oldest record, if any. */
static int q_get(struct queue *q, struct m0_lane_rec *rec)
{
    if (q->n == 0)
        return 0;
    *rec = q->ring[q->head];
    q->head = (q->head + 1) & (q->cap - 1);
    q->n--;
    return 1;
}

/* Loop thread: the records in one locked section; a sleeping thread is
 * signalled for each one it can take (no system call while all are busy). */
static void q_put_many(struct queue *q, const struct m0_lane_rec *recs, size_t n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&q->lock);
    for (size_t i = 0; i < n; i++)
        q_put(q, &recs[i]);
    unsigned wake = q->sleepers < n ? q->sleepers : (unsigned)n;
    pthread_mutex_unlock(&q->lock);
    for (unsigned i = 0; i < wake; i++)
        pthread_cond_signal(&q->cond);
}

/* A handler thread: the next record without waiting (M0_OK), or M0_AGAIN. */
static int q_poll(struct queue *q, struct m0_lane_rec *rec)
{
    pthread_mutex_lock(&q->lock);
    int got = q_get(q, rec);
    pthread_mutex_unlock(&q->lock);
    return got ? M0_OK : M0_AGAIN;
}

/* A handler thread: the next record, waiting up to idle_ms (0: for ever).
 * M0_OK, or M0_AGAIN when the wait timed out with nothing queued. */
static int q_take(struct queue *q, struct m0_lane_rec *rec, uint64_t idle_ms)
{
    struct timespec until;
    if (idle_ms != 0) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += (time_t)(idle_ms / 1000);
        until.tv_nsec += (long)(idle_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    int rc = M0_OK;
    pthread_mutex_lock(&q->lock);
    while (!q_get(q, rec)) {
        q->sleepers++;
        int w = idle_ms != 0 ? pthread_cond_timedwait(&q->cond, &q->lock, &until)
                             : pthread_cond_wait(&q->cond, &q->lock);
        q->sleepers--;
        if (w == ETIMEDOUT && !q_get(q, rec)) {
            rc = M0_AGAIN;
            break;
        }
        if (w == ETIMEDOUT)
            break;          /* got one after all */
    }
    pthread_mutex_unlock(&q->lock);
    return rc;
}

/* Run one job to its end on this thread (attached to the interpreter): a
 * streamed body is handed over piece by piece, waiting for credit detached,
 * and never leaves this thread. */
static void run_job(struct m0_pool *p, const struct m0_lane_rec *rec, void *ts)
{
    if (rec->slot >= p->env->njobs)
        return;
    struct m0_job *job = p->env->jobs[rec->slot];
    if (job == NULL)
        return;
    /* The loop may have answered 503 already (--request-timeout) or seen
     * the client leave: whoever moves the job out of QUEUED owns it. */
    if (!m0_job_claim(job)) {
        m0_job_post_done(job);
        return;
    }
    atomic_fetch_add(&p->busy, 1);
    const struct m0_runner *r = job->target->runner;
    if (rec->kind == M0_RUN_MESSAGE) {
        /* An inbound WebSocket message: one call, one completion. */
        r->message(job, job->msg_opcode, job->req.body.data, (size_t)job->req.body_len);
        atomic_fetch_sub(&p->busy, 1);
        m0_job_post_done(job);
        return;
    }
    int rc = r->start(job);
    while (rc == M0_AGAIN) {
        int ok = m0_job_push(job) == M0_OK;
        if (ok) {
            m0_py_thread_detach(ts);
            ok = m0_job_wait_credit(job) == M0_OK;
            m0_py_thread_attach(ts);
        }
        if (!ok) {
            r->abandon(job);         /* the client left: close() runs here, now */
            break;
        }
        rc = r->resume(job);
    }
    atomic_fetch_sub(&p->busy, 1);
    m0_job_post_done(job);
}

/* Leave if the pool has more threads than its floor (CAS: two idle threads
 * never both take the last place above it). */
static int retire(struct m0_pool *p)
{
    unsigned n = atomic_load(&p->nthreads);
    while (n > p->min) {
        if (atomic_compare_exchange_weak(&p->nthreads, &n, n - 1))
            return 1;
    }
    return 0;
}

static void *thread_main(void *arg)
{
    struct thread_slot *self = arg;
    struct m0_pool *p = self->pool;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);   /* signals are the loop's */
    /* Handler threads do batch work for the loop: their wakeups should not
     * preempt the loop thread while it is still dispatching a batch
     * (sched(7), SCHED_BATCH). Best effort. */
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);

    void *ts = m0_py_thread_new();
    m0_py_set_loop(p->env->loop_index);
    struct m0_lane_rec rec;
    int stop = 0;
    while (!stop) {
        if (q_take(&p->q, &rec, p->max > p->min ? p->idle_ms : 0) == M0_AGAIN) {
            if (retire(p))
                break;
            continue;
        }
        /* Attached once per burst: a thread that finishes a job and finds
         * the next one already queued runs it without handing the GIL
         * around. The interpreter still switches threads every
         * sys.getswitchinterval() inside Python code. */
        m0_py_thread_attach(ts);
        do {
            if (rec.kind == M0_RUN_STOP) {
                stop = 1;
                atomic_fetch_sub(&p->nthreads, 1);
                break;
            }
            atomic_fetch_sub(&p->queued, 1);
            run_job(p, &rec, ts);
        } while (q_poll(&p->q, &rec) == M0_OK);
        m0_py_thread_detach(ts);
    }
    m0_py_thread_free(ts);
    atomic_store(&self->state, T_EXITED);
    return NULL;
}

/* Start one more thread in a free table entry. Loop thread (or start). */
static int spawn(struct m0_pool *p, char *err, size_t cap)
{
    struct thread_slot *t = NULL;
    for (unsigned i = 0; i < p->max; i++) {
        int st = atomic_load(&p->threads[i].state);
        if (st == T_EXITED) {
            pthread_join(p->threads[i].th, NULL);
            atomic_store(&p->threads[i].state, T_EMPTY);
            st = T_EMPTY;
        }
        if (st == T_EMPTY) {
            t = &p->threads[i];
            break;
        }
    }
    if (t == NULL) {
        snprintf(err, cap, "no room for another handler thread");
        return M0_ERR;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8u << 20);   /* Python recursion wants room */
    t->pool = p;
    atomic_store(&t->state, T_LIVE);
    atomic_fetch_add(&p->nthreads, 1);
    int rc = pthread_create(&t->th, &attr, thread_main, t);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_store(&t->state, T_EMPTY);
        atomic_fetch_sub(&p->nthreads, 1);
        snprintf(err, cap, "cannot start a handler thread: %s", strerror(rc));
        return M0_ERR;
    }
    atomic_fetch_add(&p->started, 1);
    return M0_OK;
}

/* Before the loop sleeps: this pass's submissions in one locked section,
 * and growth when every thread is busy and work has waited GROW_MS. */
static void pool_hook(struct m0_loop *l, void *ctx)
{
    struct m0_pool *p = ctx;
    q_put_many(&p->q, p->backlog.recs + p->backlog.head, p->backlog.n - p->backlog.head);
    p->backlog.head = p->backlog.n = 0;
    unsigned n = atomic_load(&p->nthreads), busy = atomic_load(&p->busy);
    if (atomic_load(&p->queued) == 0 || busy < n || n >= p->max) {
        p->saturated_since = 0;
        return;
    }
    uint64_t now = m0_loop_now(l);
    if (p->saturated_since == 0) {
        p->saturated_since = now;
    } else if (now - p->saturated_since >= GROW_MS) {
        char err[128];
        if (spawn(p, err, sizeof err) != M0_OK)
            m0_warn("pool: %s", err);
        else
            m0_debug("pool: grew to %u threads (%u busy, %u waiting)", n + 1, busy, atomic_load(&p->queued));
        p->saturated_since = now;
    }
    m0_loop_wake_at(l, p->saturated_since + GROW_MS);
}

struct m0_pool *m0_pool_start(const struct m0_runner_env *env, unsigned min, unsigned max, uint64_t idle_ms,
                              char *err, size_t cap)
{
    struct m0_pool *p = m0_xmalloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->env = env;
    p->min = min;
    p->max = max < min ? min : max;
    p->idle_ms = idle_ms;
    p->threads = m0_xmalloc(p->max * sizeof *p->threads);
    memset(p->threads, 0, p->max * sizeof *p->threads);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);    /* idle_ms: a clock step does not retire */
    pthread_mutex_init(&p->q.lock, NULL);
    pthread_cond_init(&p->q.cond, &ca);
    pthread_condattr_destroy(&ca);
    for (unsigned i = 0; i < min; i++) {
        if (spawn(p, err, cap) != M0_OK) {
            m0_pool_stop(p);
            return NULL;
        }
    }
    m0_loop_add_hook(env->loop, pool_hook, p);
    return p;
}

void m0_pool_submit(struct m0_pool *p, uint32_t slot, uint32_t gen)
{
    m0_pool_submit_kind(p, slot, gen, M0_RUN_START);
}

void m0_pool_submit_kind(struct m0_pool *p, uint32_t slot, uint32_t gen, enum m0_run_kind kind)
{
    struct m0_lane_rec rec = {.slot = slot, .gen = gen, .kind = kind};
    atomic_fetch_add(&p->queued, 1);
    m0_lane_q_push(&p->backlog, &rec);
}

void m0_pool_stats(const struct m0_pool *p, unsigned *threads, unsigned *busy, unsigned *max, unsigned *queued)
{
    if (p == NULL) {
        *threads = *busy = *max = *queued = 0;
        return;
    }
    *threads = atomic_load(&p->nthreads);
    *busy = atomic_load(&p->busy);
    *max = p->max;
    *queued = atomic_load(&p->queued);
}

uint64_t m0_pool_started(const struct m0_pool *p)
{
    return p != NULL ? atomic_load(&p->started) : 0;
}

void m0_pool_stop(struct m0_pool *p)
{
    if (p == NULL)
        return;
    /* The queue is FIFO: stop records go behind any remaining work,
     * including records still waiting loop-side. One per live thread,
     * counted before any is queued (a thread that takes one exits at once,
     * and must not be counted out); a thread retiring meanwhile leaves its
     * record unread, which is harmless. */
    q_put_many(&p->q, p->backlog.recs + p->backlog.head, p->backlog.n - p->backlog.head);
    unsigned live = 0;
    for (unsigned i = 0; i < p->max; i++)
        live += atomic_load(&p->threads[i].state) == T_LIVE;
    pthread_mutex_lock(&p->q.lock);
    for (unsigned i = 0; i < live; i++)
        q_put(&p->q, &(struct m0_lane_rec){.kind = M0_RUN_STOP});
    pthread_cond_broadcast(&p->q.cond);
    pthread_mutex_unlock(&p->q.lock);
    for (unsigned i = 0; i < p->max; i++) {
        if (atomic_load(&p->threads[i].state) != T_EMPTY)
            pthread_join(p->threads[i].th, NULL);
    }
    pthread_mutex_destroy(&p->q.lock);
    pthread_cond_destroy(&p->q.cond);
    free(p->q.ring);
    free(p->threads);
    m0_lane_q_free(&p->backlog);
    free(p);
}
