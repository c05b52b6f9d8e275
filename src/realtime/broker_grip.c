/*
 * broker_grip.c — GRIP items through the broker (see broker_grip.h).
 *
 * Why a thread with the blocking publisher, not an async command on the
 * loop's own Redis connections (rconn.h): a publish is the same
 * script m0pub.publish runs, and broker_pub.c already carries everything
 * its outcome depends on — the dial with its timeouts, AUTH and SELECT,
 * the script loaded on NOSCRIPT, a kept connection the broker closed
 * replaced once, and the line between "not published" (nothing left) and
 * "outcome unknown" (sent, no reply). Done again asynchronously it would be
 * a third connection per loop with its own dial, handshake, backoff and
 * reply deadlines beside broker.c's two. The thread blocks where the loop
 * must not: the loop only copies the frames, hands them over and, at the
 * completion, answers; its other connections never wait. One thread per
 * loop, made at the first publish through the control port: batches (and
 * the items of each) keep their order, as the log numbers them.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/broker_grip.h"
#include "m0/broker_pub.h"
#include "m0/grip_item.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"

struct m0_broker_grip {
    struct m0_loop *loop;
    pthread_t th;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct m0_broker_batch *head, *tail;   /* waiting to be published (lock) */
    struct m0_broker_batch **done;         /* per slot: published, not taken yet (lock) */
    uint32_t nslots;
    int stopping;                          /* (lock) */
};

struct m0_broker_batch *m0_broker_batch_new(uint32_t slot, uint32_t gen, unsigned n)
{
    struct m0_broker_batch *b = m0_xmalloc(sizeof *b);
    memset(b, 0, sizeof *b);
    b->slot = slot;
    b->gen = gen;
    b->channel = m0_xmalloc((n ? n : 1) * sizeof *b->channel);
    b->frame = m0_xmalloc((n ? n : 1) * sizeof *b->frame);
    memset(b->channel, 0, (n ? n : 1) * sizeof *b->channel);
    memset(b->frame, 0, (n ? n : 1) * sizeof *b->frame);
    return b;
}

void m0_broker_batch_add(struct m0_broker_batch *b, const char *channel, size_t clen, const char *frame,
                         size_t flen)
{
    m0_buf_append(&b->channel[b->nitems], channel, clen);
    m0_buf_append(&b->frame[b->nitems], frame, flen);
    b->nitems++;
}

struct m0_broker_batch *m0_broker_batch_event(uint32_t slot, uint32_t gen, const char *channel, size_t clen,
                                              const char *data, size_t dlen, const char *event, const char *key,
                                              size_t klen)
{
    struct m0_broker_batch *b = m0_broker_batch_new(slot, gen, 1);
    m0_broker_batch_add(b, channel, clen, data, dlen);
    b->is_event = 1;
    if (event != NULL) {
        b->has_event_name = 1;
        m0_buf_puts(&b->event_name, event);
        m0_buf_append(&b->event_name, "", 1);
    }
    if (key != NULL) {
        b->has_key = 1;
        m0_buf_append(&b->key, key, klen);
        m0_buf_append(&b->key, "", 1);
    }
    return b;
}

void m0_broker_batch_free(struct m0_broker_batch *b)
{
    if (b == NULL)
        return;
    m0_buf_free(&b->event_name);
    m0_buf_free(&b->key);
    for (unsigned i = 0; i < b->nitems; i++) {
        m0_buf_free(&b->channel[i]);
        m0_buf_free(&b->frame[i]);
    }
    free(b->channel);
    free(b->frame);
    free(b);
}

/* Publish b's items in order, stopping at the first that fails (the ones
 * after it are not sent: their order could not be kept). */
static void publish(struct m0_broker_batch *b)
{
    b->rc = M0_OK;
    for (unsigned i = 0; i < b->nitems; i++) {
        uint64_t id;
        int rc;
        if (b->is_event)
            rc = m0_broker_publish(b->channel[i].data, b->channel[i].len,
                                   b->has_event_name ? b->event_name.data : NULL,
                                   b->frame[i].data ? b->frame[i].data : "", b->frame[i].len,
                                   b->has_key ? b->key.data : NULL, b->has_key ? b->key.len - 1 : 0, &id, b->err,
                                   sizeof b->err);
        else
            rc = m0_broker_publish_frame(b->channel[i].data, b->channel[i].len, b->frame[i].data, b->frame[i].len,
                                         &id, b->err, sizeof b->err);
        if (rc != M0_OK) {
            b->rc = rc;
            return;
        }
        b->published++;
        b->id = id;
    }
}

static void *thread_main(void *arg)
{
    struct m0_broker_grip *g = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);     /* signals are the loop's */
    pthread_mutex_lock(&g->lock);
    for (;;) {
        while (g->head == NULL && !g->stopping)
            pthread_cond_wait(&g->cond, &g->lock);
        if (g->stopping)
            break;
        struct m0_broker_batch *b = g->head;
        g->head = b->next;
        if (g->head == NULL)
            g->tail = NULL;
        b->next = NULL;
        pthread_mutex_unlock(&g->lock);
        publish(b);
        pthread_mutex_lock(&g->lock);
        if (b->slot >= g->nslots) {
            m0_broker_batch_free(b);               /* no such connection */
            continue;
        }
        m0_broker_batch_free(g->done[b->slot]);    /* never left there: submit freed any */
        g->done[b->slot] = b;
        struct m0_completion c = {.slot = b->slot, .gen = b->gen, .kind = M0_CPL_DONE, .rc = M0_DONE};
        m0_loop_post(g->loop, &c);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

struct m0_broker_grip *m0_broker_grip_new(struct m0_loop *l, uint32_t nslots)
{
    struct m0_broker_grip *g = m0_xmalloc(sizeof *g);
    memset(g, 0, sizeof *g);
    g->loop = l;
    g->nslots = nslots;
    g->done = m0_xmalloc((nslots ? nslots : 1) * sizeof *g->done);
    memset(g->done, 0, (nslots ? nslots : 1) * sizeof *g->done);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    int rc = pthread_create(&g->th, NULL, thread_main, g);
    if (rc != 0) {
        m0_error("cannot start the broker publisher thread (GRIP control, publish socket): %s", strerror(rc));
        pthread_cond_destroy(&g->cond);
        pthread_mutex_destroy(&g->lock);
        free(g->done);
        free(g);
        return NULL;
    }
    return g;
}

void m0_broker_grip_submit(struct m0_broker_grip *g, struct m0_broker_batch *b)
{
    pthread_mutex_lock(&g->lock);
    if (b->slot < g->nslots) {
        /* A batch left by a connection closed before its answer: the slot
         * was released at that completion, so nothing will take it. */
        m0_broker_batch_free(g->done[b->slot]);
        g->done[b->slot] = NULL;
    }
    b->next = NULL;
    if (g->tail != NULL)
        g->tail->next = b;
    else
        g->head = b;
    g->tail = b;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

struct m0_broker_batch *m0_broker_grip_take(struct m0_broker_grip *g, uint32_t slot)
{
    if (g == NULL || slot >= g->nslots)
        return NULL;
    pthread_mutex_lock(&g->lock);
    struct m0_broker_batch *b = g->done[slot];
    g->done[slot] = NULL;
    pthread_mutex_unlock(&g->lock);
    return b;
}

void m0_broker_grip_free(struct m0_broker_grip *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    g->stopping = 1;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->th, NULL);
    while (g->head != NULL) {
        struct m0_broker_batch *b = g->head;
        g->head = b->next;
        m0_broker_batch_free(b);
    }
    for (uint32_t k = 0; k < g->nslots; k++)
        m0_broker_batch_free(g->done[k]);
    free(g->done);
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

void m0_broker_entry_frame(struct m0_buf *out, uint64_t id, const char *f, size_t n)
{
    m0_buf_reset(out);
    if (!m0_grip_is_item(f, n))
        m0_buf_printf(out, "id: %llu\n", (unsigned long long)id);
    m0_buf_append(out, f, n);
}
