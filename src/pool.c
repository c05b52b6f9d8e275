/*
 * pool.c — the handler-thread pool: threads on a submit lane, completions
 * back through a mutex-guarded queue and one coalesced eventfd wakeup
 * (nginx's thread-pool done queue + notify, in our shape).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "m0/buf.h"
#include "m0/bus.h"
#include "m0/response.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/pool.h"
#include "m0/py.h"
#include "m0/wsgi.h"

struct m0_pool {
    struct m0_lane lane;
    struct m0_job *const *jobs;
    uint32_t njobs;
    unsigned nthreads;
    pthread_t *threads;
    atomic_uint busy;
    int hold_fd;                    /* this loop's bus write end, or -1 */

    /* Completions, threads → loop. */
    pthread_mutex_t lock;
    struct m0_completion *done;     /* growable array, guarded by lock */
    size_t ndone, cap_done;
    int wake_pending;               /* guarded by lock: an eventfd write is outstanding */
    int wake_fd;

    /* Loop-only: records the lane could not take yet. */
    struct m0_lane_rec *backlog;
    size_t nbacklog, cap_backlog, backlog_head;
};

static void post(struct m0_pool *p, const struct m0_completion *c)
{
    int wake;
    pthread_mutex_lock(&p->lock);
    if (p->ndone == p->cap_done) {
        p->cap_done = p->cap_done ? p->cap_done * 2 : 64;
        p->done = m0_xrealloc(p->done, p->cap_done * sizeof *p->done);
    }
    p->done[p->ndone++] = *c;
    wake = !p->wake_pending;
    p->wake_pending = 1;
    pthread_mutex_unlock(&p->lock);
    if (wake) {
        uint64_t one = 1;
        while (write(p->wake_fd, &one, sizeof one) == -1 && errno == EINTR) {
        }
    }
}

/*
 * The view took a hold on this thread, but subscriptions live in the loop's
 * registry. Tell the loop on its own bus channel BEFORE posting the
 * completion: the loop drains its bus before it writes a held head, so the
 * subscription is in place before the client can see the stream begin, and
 * publishes queued behind this frame on the same FIFO reach it. A frame the
 * channel will not take turns the response into a 503 — never a head with
 * no subscription behind it.
 */
static void forward_hold(struct m0_pool *p, struct m0_job *job, const struct m0_lane_rec *rec)
{
    char frame[M0_BUS_HDR + 256];
    size_t n = m0_bus_encode_hold(frame, rec->slot, rec->gen, job->hold_last_id, job->hold_channel,
                                  job->hold_channel_len, (uint32_t)getpid());
    ssize_t w = p->hold_fd == -1 ? -1 : send(p->hold_fd, frame, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w == (ssize_t)n)
        return;
    m0_warn("hold on %s refused (bus full or closed): answering 503", job->hold_channel);
    m0_resp_reset(&job->resp);
    m0_error_response(&job->resp.out, 503, "The stream could not be held; retry", 1, 0);
    job->resp.status = 503;
    job->resp.flags |= M0_RESP_HEAD_SENT | M0_RESP_DONE | M0_RESP_CLOSE;
}

/* Run one record's job step (attached to the interpreter) and post its
 * completion. */
static void run_record(struct m0_pool *p, const struct m0_lane_rec *rec)
{
    if (rec->slot >= p->njobs || p->jobs[rec->slot] == NULL)
        return;
    struct m0_job *job = p->jobs[rec->slot];
    struct m0_completion c = {.slot = rec->slot, .gen = rec->gen, .kind = rec->kind, .rc = M0_DONE};
    atomic_fetch_add(&p->busy, 1);
    switch (rec->kind) {
    case M0_RUN_START: {
        int queued = M0_JOB_QUEUED;
        /* The loop may have answered 503 already (--request-timeout) or
         * seen the client leave: whoever moves the job out of QUEUED owns it. */
        if (atomic_compare_exchange_strong(&job->run_state, &queued, M0_JOB_RUNNING)) {
            c.rc = m0_wsgi_start(job);
            if (job->resp.flags & M0_RESP_HOLD)
                forward_hold(p, job, rec);
        }
        break;
    }
    case M0_RUN_RESUME:
        c.rc = m0_wsgi_resume(job);
        break;
    case M0_RUN_ABANDON:
        m0_wsgi_abandon(job);
        break;
    default:
        break;
    }
    atomic_fetch_sub(&p->busy, 1);
    post(p, &c);
}

static void *thread_main(void *arg)
{
    struct m0_pool *p = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);   /* signals are the loop's */
    /* Handler threads do batch work for the loop: their wakeups should not
     * preempt the loop thread while it is still dispatching a batch
     * (sched(7), SCHED_BATCH). Best effort. */
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);

    void *ts = m0_py_thread_new();
    struct m0_lane_rec rec;
    int stop = 0;
    while (!stop && m0_lane_take(&p->lane, &rec) == M0_OK) {
        /* Attached once per burst: a thread that finishes a job and finds
         * the next one already queued runs it without handing the GIL
         * around (another thread waking only to contend for it). The
         * interpreter still switches threads every sys.getswitchinterval()
         * inside Python code, so a long view cannot starve the others. */
        m0_py_thread_attach(ts);
        do {
            if (rec.kind == M0_RUN_STOP) {
                stop = 1;
                break;
            }
            run_record(p, &rec);
        } while (m0_lane_poll(&p->lane, &rec) == M0_OK);
        m0_py_thread_detach(ts);
    }
    m0_py_thread_free(ts);
    return NULL;
}

struct m0_pool *m0_pool_start(unsigned nthreads, struct m0_job *const *jobs, uint32_t njobs,
                              int hold_fd, char *err, size_t cap)
{
    struct m0_pool *p = m0_xmalloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->hold_fd = hold_fd;
    p->jobs = jobs;
    p->njobs = njobs;
    p->lane.submit_fd = p->lane.take_fd = -1;
    pthread_mutex_init(&p->lock, NULL);
    p->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->wake_fd == -1 || m0_lane_open(&p->lane, 4 * 1024 * 1024) != M0_OK) {
        snprintf(err, cap, "cannot create the pool's channels: %s", strerror(errno));
        goto fail;
    }
    p->threads = m0_xmalloc(nthreads * sizeof *p->threads);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 8u << 20);   /* Python recursion wants room */
    for (unsigned i = 0; i < nthreads; i++) {
        int rc = pthread_create(&p->threads[i], &attr, thread_main, p);
        if (rc != 0) {
            snprintf(err, cap, "cannot start handler thread %u: %s", i, strerror(rc));
            pthread_attr_destroy(&attr);
            p->nthreads = i;
            m0_pool_stop(p);
            return NULL;
        }
        p->nthreads = i + 1;
    }
    pthread_attr_destroy(&attr);
    return p;
fail:
    if (p->wake_fd != -1)
        close(p->wake_fd);
    m0_lane_close(&p->lane);
    free(p);
    return NULL;
}

static void backlog_push(struct m0_pool *p, const struct m0_lane_rec *rec)
{
    if (p->backlog_head > 0 && p->backlog_head == p->nbacklog) {
        p->backlog_head = p->nbacklog = 0;
    }
    if (p->nbacklog == p->cap_backlog) {
        p->cap_backlog = p->cap_backlog ? p->cap_backlog * 2 : 256;
        p->backlog = m0_xrealloc(p->backlog, p->cap_backlog * sizeof *p->backlog);
    }
    p->backlog[p->nbacklog++] = *rec;
}

/* Send queued records, oldest first, in sendmmsg batches, until the lane
 * refuses (it is full: the rest wait for the next flush). Keeps order. */
static void backlog_flush(struct m0_pool *p)
{
    while (p->backlog_head < p->nbacklog) {
        size_t n = p->nbacklog - p->backlog_head;
        int sent = m0_lane_send_many(&p->lane, &p->backlog[p->backlog_head], n > 64 ? 64 : n);
        if (sent <= 0)
            return;
        p->backlog_head += (size_t)sent;
    }
    p->backlog_head = p->nbacklog = 0;
}

void m0_pool_submit(struct m0_pool *p, uint32_t slot, uint32_t gen, enum m0_run_kind kind)
{
    /* Queued loop-side; m0_pool_flush() sends the pass's records at once. */
    struct m0_lane_rec rec = {.slot = slot, .gen = gen, .kind = kind};
    backlog_push(p, &rec);
}

void m0_pool_flush(struct m0_pool *p)
{
    if (p != NULL)
        backlog_flush(p);
}

int m0_pool_wake_fd(const struct m0_pool *p)
{
    return p->wake_fd;
}

size_t m0_pool_drain(struct m0_pool *p, struct m0_completion *out, size_t max)
{
    uint64_t v;
    while (read(p->wake_fd, &v, sizeof v) == -1 && errno == EINTR) {
    }
    pthread_mutex_lock(&p->lock);
    size_t n = p->ndone < max ? p->ndone : max;
    memcpy(out, p->done, n * sizeof *out);
    memmove(p->done, p->done + n, (p->ndone - n) * sizeof *out);
    p->ndone -= n;
    /* Anything left (more than max) keeps the wakeup armed. */
    p->wake_pending = p->ndone > 0;
    pthread_mutex_unlock(&p->lock);
    if (p->ndone > 0) {
        uint64_t one = 1;
        while (write(p->wake_fd, &one, sizeof one) == -1 && errno == EINTR) {
        }
    }
    backlog_flush(p);
    return n;
}

unsigned m0_pool_busy(const struct m0_pool *p)
{
    return atomic_load(&p->busy);
}

unsigned m0_pool_size(const struct m0_pool *p)
{
    return p->nthreads;
}

void m0_pool_stop(struct m0_pool *p)
{
    if (p == NULL)
        return;
    /* The lane is FIFO: stop records queue behind any remaining work,
     * including records still waiting loop-side (bounded wait). */
    for (int i = 0; i < 5000 && p->backlog_head < p->nbacklog; i++) {
        backlog_flush(p);
        if (p->backlog_head < p->nbacklog)
            usleep(1000);
    }
    for (unsigned i = 0; i < p->nthreads; i++) {
        struct m0_lane_rec rec = {.kind = M0_RUN_STOP};
        while (m0_lane_send(&p->lane, &rec) == M0_AGAIN)
            usleep(1000);
    }
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    m0_lane_close(&p->lane);
    close(p->wake_fd);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p->done);
    free(p->backlog);
    free(p);
}
