/*
 * job.c — jobs and the runner ⇄ loop channel (see job.h).
 *
 * The runner side blocks on the channel's condition variable; the loop side
 * only ever takes the lock for a few instructions and signals, so the loop
 * never waits for a runner.
 */
#include <stdlib.h>
#include <string.h>

#include "m0/accesslog.h"
#include "m0/commit.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/target.h"

struct m0_job *m0_job_new(uint32_t slot)
{
    struct m0_job *job = m0_xmalloc(sizeof *job);
    memset(job, 0, sizeof *job);
    m0_req_init(&job->req);
    m0_resp_init(&job->resp);
    m0_head_reset(&job->head);
    m0_body_reset(&job->body);
    pthread_mutex_init(&job->ch.lock, NULL);
    pthread_cond_init(&job->ch.cond, NULL);
    job->slot = slot;
    return job;
}

void m0_job_free(struct m0_job *job)
{
    if (job == NULL)
        return;
    m0_req_free(&job->req);
    m0_resp_free(&job->resp);
    m0_head_free(&job->head);
    m0_access_kept_free(job->alog);
    m0_buf_free(&job->ch.q);
    m0_buf_free(&job->ch.inq);
    pthread_mutex_destroy(&job->ch.lock);
    pthread_cond_destroy(&job->ch.cond);
    for (int i = 0; i < M0_RUNNER_MAX; i++)
        free(job->rstate[i]);
    free(job->tls.peer);
    free(job);
}

void m0_job_reset(struct m0_job *job)
{
    m0_resp_reset(&job->resp);
    m0_head_reset(&job->head);
    m0_body_reset(&job->body);
    m0_buf_reset(&job->ch.q);
    if (job->ch.q.cap > 4 * M0_JOB_WINDOW)
        m0_buf_free(&job->ch.q);
    job->ch.unwritten = 0;
    job->ch.posted = job->ch.waiting = job->ch.gone = 0;
    job->ch.body_lazy = job->ch.body_wanted = job->ch.body_done = job->ch.body_error = 0;
    m0_buf_free(&job->ch.inq);
    job->ch.in_count = 0;
    job->ch.closing = job->ch.close_reason_len = 0;
    job->ch.close_code = job->ch.peer_code = 0;
    job->ch.peer_reason_len = 0;
    job->target = NULL;
    job->tls.version = 0;          /* its peer buffer is kept for the next request */
    job->tls.dn_len = 0;
    job->mx_mount = -1;
    job->route = NULL;
    job->route_flags = job->route_matched = 0;
    job->route_target = NULL;
    job->inl = NULL;
    job->wake = NULL;
    job->hold_start = job->hold_last_id = 0;
    job->woh = job->grip_own = 0;
    job->grant_exp = 0;
    m0_access_kept_free(job->alog);
    job->alog = NULL;
    atomic_store(&job->run_state, M0_JOB_IDLE);
}

static void post(struct m0_job *job, enum m0_cpl_kind kind)
{
    struct m0_completion c = {.slot = job->slot, .gen = job->gen, .kind = kind, .rc = M0_OK};
    m0_loop_post(job->loop, &c);
}

int m0_job_push(struct m0_job *job)
{
    struct m0_jobchan *ch = &job->ch;
    if (job->inl != NULL)
        return job->inl->flush(job, job->inl->ctx);
    if (m0_buf_unread(&job->resp.out) == 0)
        return m0_job_client_gone(job) ? M0_ERR : M0_OK;
    int notify = 0, gone;
    pthread_mutex_lock(&ch->lock);
    gone = ch->gone;
    if (!gone) {
        if (m0_buf_unread(&ch->q) == 0) {
            /* Hand the buffer over whole: no copy for the common case. */
            m0_buf_reset(&ch->q);
            struct m0_buf t = ch->q;
            ch->q = job->resp.out;
            job->resp.out = t;
        } else {
            m0_buf_append(&ch->q, job->resp.out.data + job->resp.out.off, m0_buf_unread(&job->resp.out));
        }
        notify = !ch->posted;
        ch->posted = 1;
    }
    pthread_mutex_unlock(&ch->lock);
    m0_buf_reset(&job->resp.out);
    if (gone)
        return M0_ERR;
    if (notify)
        post(job, M0_CPL_PART);
    return M0_OK;
}

int m0_job_wait_credit(struct m0_job *job)
{
    struct m0_jobchan *ch = &job->ch;
    if (job->inl != NULL)
        return M0_OK;           /* m0_job_push already wrote it all */
    pthread_mutex_lock(&ch->lock);
    while (!ch->gone && m0_buf_unread(&ch->q) + ch->unwritten > M0_JOB_WINDOW) {
        ch->waiting |= M0_WAIT_CREDIT;
        pthread_cond_wait(&ch->cond, &ch->lock);
    }
    ch->waiting = 0;
    int gone = ch->gone;
    pthread_mutex_unlock(&ch->lock);
    return gone ? M0_ERR : M0_OK;
}

int m0_job_wait_body(struct m0_job *job, uint64_t want)
{
    struct m0_jobchan *ch = &job->ch;
    if (!ch->body_lazy)
        return M0_OK;           /* buffered before dispatch: all there */
    if (job->inl != NULL)
        return job->inl->read_body(job, want, job->inl->ctx);
    int ask = 0, rc;
    pthread_mutex_lock(&ch->lock);
    if (!ch->body_wanted) {
        ch->body_wanted = 1;
        ask = 1;
    }
    pthread_mutex_unlock(&ch->lock);
    if (ask)
        post(job, M0_CPL_CONTINUE);
    pthread_mutex_lock(&ch->lock);
    while (!ch->gone && !ch->body_error && !ch->body_done && job->req.body_len < want) {
        ch->waiting |= M0_WAIT_BODY;
        pthread_cond_wait(&ch->cond, &ch->lock);
    }
    ch->waiting = 0;
    rc = (ch->gone || ch->body_error) ? M0_ERR : M0_OK;
    pthread_mutex_unlock(&ch->lock);
    return rc;
}

ssize_t m0_job_body_read(struct m0_job *job, uint64_t off, void *dst, size_t n)
{
    if (!job->ch.body_lazy || job->inl != NULL)
        return m0_req_body_read(&job->req, off, dst, n);
    pthread_mutex_lock(&job->ch.lock);
    ssize_t got = m0_req_body_read(&job->req, off, dst, n);
    pthread_mutex_unlock(&job->ch.lock);
    return got;
}

uint64_t m0_job_body_len(struct m0_job *job, int *complete)
{
    if (!job->ch.body_lazy || job->inl != NULL) {
        *complete = job->ch.body_lazy ? job->ch.body_done : 1;
        return job->req.body_len;
    }
    pthread_mutex_lock(&job->ch.lock);
    uint64_t n = job->req.body_len;
    *complete = job->ch.body_done;
    pthread_mutex_unlock(&job->ch.lock);
    return n;
}

int m0_job_client_gone(struct m0_job *job)
{
    pthread_mutex_lock(&job->ch.lock);
    int gone = job->ch.gone;
    pthread_mutex_unlock(&job->ch.lock);
    return gone;
}

size_t m0_job_take(struct m0_job *job, struct m0_buf *dst)
{
    struct m0_jobchan *ch = &job->ch;
    pthread_mutex_lock(&ch->lock);
    size_t n = m0_buf_unread(&ch->q);
    if (n > 0) {
        if (m0_buf_unread(dst) == 0 && ch->q.off == 0) {
            m0_buf_reset(dst);
            struct m0_buf t = *dst;
            *dst = ch->q;
            ch->q = t;
        } else {
            m0_buf_append(dst, ch->q.data + ch->q.off, n);
            m0_buf_reset(&ch->q);
        }
    }
    ch->posted = 0;
    ch->unwritten = m0_buf_unread(dst);
    pthread_mutex_unlock(&ch->lock);
    return n;
}

/* Wake the runner waiting for one of why (under the lock). */
static void notify(struct m0_job *job, unsigned why)
{
    struct m0_jobchan *ch = &job->ch;
    if (!(ch->waiting & why))
        return;
    ch->waiting = 0;
    if (job->wake != NULL)
        job->wake(job);
    else
        pthread_cond_signal(&ch->cond);
}

void m0_job_credit(struct m0_job *job, size_t unwritten)
{
    struct m0_jobchan *ch = &job->ch;
    pthread_mutex_lock(&ch->lock);
    ch->unwritten = unwritten;
    /* Wake the runner once half the window is free again, not per write. */
    if (m0_buf_unread(&ch->q) + unwritten <= M0_JOB_WINDOW / 2)
        notify(job, M0_WAIT_CREDIT);
    pthread_mutex_unlock(&ch->lock);
}

void m0_job_gone(struct m0_job *job)
{
    struct m0_jobchan *ch = &job->ch;
    pthread_mutex_lock(&ch->lock);
    ch->gone = 1;
    notify(job, M0_WAIT_CREDIT | M0_WAIT_BODY | M0_WAIT_GONE | M0_WAIT_MSG);
    pthread_mutex_unlock(&ch->lock);
}

void m0_job_body_progress(struct m0_job *job, int done, int error)
{
    struct m0_jobchan *ch = &job->ch;
    pthread_mutex_lock(&ch->lock);
    ch->body_done |= (uint8_t)(done != 0);
    ch->body_error |= (uint8_t)(error != 0);
    notify(job, M0_WAIT_BODY);
    pthread_mutex_unlock(&ch->lock);
}

unsigned m0_job_poll(struct m0_job *job, unsigned want)
{
    struct m0_jobchan *ch = &job->ch;
    unsigned have = 0;
    int ask = 0;
    pthread_mutex_lock(&ch->lock);
    if (ch->gone) {
        have = want;        /* nothing more will come: every wait ends */
    } else {
        if ((want & M0_WAIT_CREDIT) && m0_buf_unread(&ch->q) + ch->unwritten <= M0_JOB_WINDOW)
            have |= M0_WAIT_CREDIT;
        if ((want & M0_WAIT_MSG) && ch->in_count > 0)
            have |= M0_WAIT_MSG;
        if (want & M0_WAIT_BODY) {
            if (!ch->body_lazy || ch->body_done || ch->body_error) {
                have |= M0_WAIT_BODY;
            } else if (!ch->body_wanted) {
                ch->body_wanted = 1;
                ask = 1;
            }
        }
        ch->waiting |= (uint8_t)(want & ~have);    /* several waits may be armed at once */
    }
    pthread_mutex_unlock(&ch->lock);
    if (ask)
        post(job, M0_CPL_CONTINUE);
    return have;
}

void m0_job_lock(struct m0_job *job)
{
    pthread_mutex_lock(&job->ch.lock);
}

void m0_job_unlock(struct m0_job *job)
{
    pthread_mutex_unlock(&job->ch.lock);
}

/* ------------------------------------------------ a runner's WebSocket */

/* Queue for the loop, under the lock: bytes (head, then body), then our
 * close frame when code is not 0. Nothing after a close. */
static int put(struct m0_job *job, const void *head, size_t hn, const void *body, size_t bn, unsigned code,
               const char *reason, size_t len)
{
    struct m0_jobchan *ch = &job->ch;
    int notify_loop = 0, gone;
    pthread_mutex_lock(&ch->lock);
    gone = ch->gone || ch->closing;
    if (!gone) {
        m0_buf_append(&ch->q, head, hn);
        m0_buf_append(&ch->q, body, bn);
        if (code != 0) {
            ch->closing = 1;
            ch->close_code = (uint16_t)code;
            memcpy(ch->close_reason, reason, len);
            ch->close_reason_len = (uint8_t)len;
        }
        notify_loop = !ch->posted;
        ch->posted = 1;
    }
    pthread_mutex_unlock(&ch->lock);
    if (notify_loop)
        post(job, M0_CPL_PART);
    return gone ? M0_ERR : M0_OK;
}

int m0_job_push_raw(struct m0_job *job, const void *head, size_t hn, const void *body, size_t bn)
{
    return put(job, head, hn, body, bn, 0, NULL, 0);
}

int m0_job_close_socket(struct m0_job *job, unsigned code, const char *reason, size_t len)
{
    return put(job, NULL, 0, NULL, 0, code, reason, len > M0_WS_REASON_MAX ? M0_WS_REASON_MAX : len);
}

/* A message in inq: opcode (1 byte), length (8 bytes, host order), bytes. */
#define MSG_HEAD 9

int m0_job_msg_take(struct m0_job *job, int (*take)(void *ctx, int opcode, const char *p, size_t n), void *ctx,
                    unsigned *code, char *reason, size_t *rlen)
{
    struct m0_jobchan *ch = &job->ch;
    int rc, taken_all = 0;
    pthread_mutex_lock(&ch->lock);
    if (ch->in_count == 0) {
        rc = ch->gone ? -1 : 0;
        *code = ch->peer_code ? ch->peer_code : 1006;
        *rlen = ch->peer_reason_len;
        memcpy(reason, ch->peer_reason, ch->peer_reason_len);
    } else {
        const char *m = ch->inq.data + ch->inq.off;
        uint64_t len;
        memcpy(&len, m + 1, sizeof len);
        if (take(ctx, (unsigned char)m[0], m + MSG_HEAD, len) != 0) {
            rc = -2;
        } else {
            rc = 1;
            m0_buf_consume(&ch->inq, MSG_HEAD + (size_t)len);
            if (--ch->in_count == 0) {
                m0_buf_reset(&ch->inq);
                if (ch->inq.cap > 64 * 1024)
                    m0_buf_free(&ch->inq);
                taken_all = !ch->gone;
            }
        }
    }
    pthread_mutex_unlock(&ch->lock);
    if (taken_all)
        post(job, M0_CPL_TAKEN);     /* the loop offers the next batch */
    return rc;
}

void m0_job_offer(struct m0_job *job, int opcode, const void *p, size_t n)
{
    struct m0_jobchan *ch = &job->ch;
    char head[MSG_HEAD];
    uint64_t len = n;
    head[0] = (char)opcode;
    memcpy(head + 1, &len, sizeof len);
    pthread_mutex_lock(&ch->lock);
    m0_buf_append(&ch->inq, head, sizeof head);
    m0_buf_append(&ch->inq, p, n);
    ch->in_count++;
    notify(job, M0_WAIT_MSG);
    pthread_mutex_unlock(&ch->lock);
}

int m0_job_take_close(struct m0_job *job, unsigned *code, char *reason, size_t *rlen)
{
    struct m0_jobchan *ch = &job->ch;
    pthread_mutex_lock(&ch->lock);
    int closing = ch->closing;
    if (closing) {
        *code = ch->close_code;
        *rlen = ch->close_reason_len;
        memcpy(reason, ch->close_reason, ch->close_reason_len);
    }
    pthread_mutex_unlock(&ch->lock);
    return closing;
}

void m0_job_peer_reason(struct m0_job *job, const char *reason, size_t len)
{
    struct m0_jobchan *ch = &job->ch;
    if (len > M0_WS_REASON_MAX)
        len = M0_WS_REASON_MAX;
    pthread_mutex_lock(&ch->lock);
    memcpy(ch->peer_reason, reason, len);
    ch->peer_reason_len = (uint8_t)len;
    pthread_mutex_unlock(&ch->lock);
}

void m0_job_socket_gone(struct m0_job *job, unsigned code)
{
    struct m0_jobchan *ch = &job->ch;
    pthread_mutex_lock(&ch->lock);
    if (!ch->gone && ch->peer_code == 0)
        ch->peer_code = (uint16_t)code;
    pthread_mutex_unlock(&ch->lock);
    m0_job_gone(job);
}

void m0_job_keep_access(struct m0_job *job)
{
    if (job->alog == NULL)
        job->alog = m0_access_keep(&(struct m0_access){.addr = job->remote_addr, .req = &job->req});
}

/* ------------------------------------------------------------ run state */

int m0_job_claim(struct m0_job *job)
{
    int queued = M0_JOB_QUEUED;
    return atomic_compare_exchange_strong(&job->run_state, &queued, M0_JOB_RUNNING);
}

int m0_job_cancel(struct m0_job *job)
{
    int queued = M0_JOB_QUEUED;
    return atomic_compare_exchange_strong(&job->run_state, &queued, M0_JOB_CANCELLED);
}

void m0_job_post_done(struct m0_job *job)
{
    struct m0_completion c = {.slot = job->slot, .gen = job->gen, .kind = M0_CPL_DONE, .rc = M0_DONE};
    m0_loop_post(job->loop, &c);
}

/* ------------------------------------------------------------ the head */

uint64_t m0_job_newest_id(const struct m0_job *job)
{
    const struct m0_runner_env *env = job->env;
    return env != NULL && env->newest_id != NULL ? env->newest_id(env->newest_ctx) : 0;
}

struct m0_body_req m0_job_framing(struct m0_job *job)
{
    int complete;
    m0_job_body_len(job, &complete);
    int draining = job->env != NULL && atomic_load(job->env->draining);
    return m0_commit_framing(&job->req, draining, complete);
}

int m0_job_may_hold(const struct m0_job *job)
{
    return job->target != NULL && m0_commit_may_hold(&job->head, &job->req, job->target->realtime);
}

int m0_job_commit(struct m0_job *job, int64_t body_len, int hold)
{
    struct m0_body_req br = m0_job_framing(job);
    struct m0_commit d;
    if (m0_commit_head(&d, &job->head, &job->body, &job->resp, &job->req, &br, body_len, hold) != M0_OK)
        return M0_ERR;
    if (d.held) {
        job->hold_last_id = d.last_id;
        job->hold_start = d.grip ? job->begin_id : m0_job_newest_id(job);
    }
    return M0_OK;
}
