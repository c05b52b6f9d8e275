/*
 * broker_nats_link.c — a worker loop's link to NATS JetStream (see
 * broker_nats.h): one thread of its own that does every blocking
 * libnats call for the loop, and the queue by which it and libnats's
 * callbacks hand the loop what happened, in order.
 *
 * The thread: connect (every server of the URL, libnats reconnecting for
 * ever afterwards), make sure the stream exists, take the reader's
 * position (the newest id then, unless the worker read it before its loop
 * ran), subscribe with an ordered consumer from the id after it (libnats
 * re-creates that consumer from its last delivered id whenever it sees a
 * gap, misses its heartbeats or reconnects), then answer resumes and, once
 * a second, read the stream's state (newest id, leader, replicas) for
 * /health and as a watchdog: a reader whose position stays behind the
 * stream's newest id (as its leader says) for WATCHDOG_MS while the loop
 * takes events is subscribed again — after a leader is lost, libnats's own
 * re-creation of the consumer is tried on its heartbeat's clock and fails
 * until the stream has a new leader; this one follows the election within a
 * probe (every PROBE_STUCK_MS while the reader is stuck) — and so is one whose stream was deleted and made anew
 * (the leader says, probe after probe, its newest id is below the
 * reader's: its ids start again).
 *
 * The queue: items (struct m0_nats_item) appended under the lock; the
 * appender writes the eventfd when no wakeup is pending, and the loop takes
 * the whole list at once (m0_nats_link_take). Deliveries wait for room
 * when M0_NATS_QUEUE_MAX of them are queued (the loop's fan-outs are backed
 * up): the subscription's thread then stops answering the consumer's flow
 * control and the server stops sending, so the backlog waits in the
 * stream, not in memory. Each subscription has a generation: a new one
 * drops what the old one queued (the loop drops what it already took), so
 * ids never go backwards.
 *
 * Lifetime: libnats may run a connection's error handler after its closed
 * callback (the re-creation thread of an ordered consumer outlives it), so
 * the link's struct, which those callbacks reach, is never freed: free
 * marks it dead (callbacks then do nothing) and frees all else. One small
 * struct per worker loop, at exit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "m0/broker_pub.h"
#include "m0/log.h"
#include "m0/natsjs.h"
#include "broker_nats_link.h"

#define PROBE_MS 1000               /* the stream's state, for /health and the watchdog */
#define PROBE_STUCK_MS 250          /* ... while the reader is stuck or the stream does not answer */
#define REWOUND_PROBES 5            /* probes in a row that say the stream went back: it was made anew */
#define WATCHDOG_MS 1500            /* a reader behind the stream this long, the loop idle: subscribed again */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define HEARTBEAT_NS 1000000000LL   /* the ordered consumer's idle heartbeat: a lost one is seen in 2 s */

struct m0_nats_link {
    pthread_mutex_t lock;
    pthread_cond_t work;            /* the thread: resumes, stop, or the connection closed */
    pthread_cond_t room;            /* a delivery waits for room in the queue */
    int efd;
    int woken;                      /* an eventfd write is pending (lock) */
    struct m0_nats_item *head, *tail;   /* for the loop (lock) */
    size_t queued;                  /* deliveries among them (lock) */
    struct m0_nats_resume *rq_head, *rq_tail;   /* for the thread (lock) */
    int stopping;                   /* (lock) */
    int closed;                     /* libnats closed the connection for good (lock) */
    int dead;                       /* freed: callbacks do nothing (lock) */
    unsigned gen;                   /* the current subscription (atomic) */
    int stalled;                    /* the loop does not take events now (atomic) */
    const uint64_t *position;       /* the loop's read position (atomic) */
    int start_known;
    uint64_t start;
    long retention;
    size_t replay_bytes;
    pthread_t th;
    /* the thread's own */
    natsConnection *nc;
    jsCtx *js;
    natsSubscription *sub;
    unsigned failures;
    uint64_t wd_pos, wd_since;
    int stuck;                      /* the last probe failed or found the reader behind: probe sooner */
    unsigned behind;                /* probes in a row that found the stream's newest id below the reader's */
};

/* A subscription's closure: its link and generation. */
struct subctx {
    struct m0_nats_link *k;
    unsigned gen;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct m0_nats_item *item_new(int kind, const char *text, size_t tlen)
{
    struct m0_nats_item *it = m0_xmalloc(sizeof *it + tlen + 1);
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->slen = tlen;
    memcpy(it->bytes, text, tlen);
    it->bytes[tlen] = '\0';
    return it;
}

static void item_free(struct m0_nats_item *it)
{
    if (it->res != NULL)
        m0_nats_resume_free(it->res);
    free(it);
}

void m0_nats_resume_free(struct m0_nats_resume *r)
{
    free(r->seq);
    free(r->off);
    free(r->len);
    m0_buf_free(&r->frames);
    free(r);
}

/* Append it for the loop (lock held) and wake the loop unless a wakeup is
 * pending. The write is made under the lock: free closes the eventfd. */
static void append_locked(struct m0_nats_link *k, struct m0_nats_item *it)
{
    it->next = NULL;
    if (k->tail != NULL)
        k->tail->next = it;
    else
        k->head = it;
    k->tail = it;
    if (it->kind == M0_NI_MSG)
        k->queued++;
    if (!k->woken) {
        uint64_t one = 1;
        k->woken = 1;
        if (write(k->efd, &one, sizeof one) < 0 && errno != EAGAIN)
            k->woken = 0;
    }
}

static void post(struct m0_nats_link *k, struct m0_nats_item *it)
{
    pthread_mutex_lock(&k->lock);
    if (k->dead)
        item_free(it);
    else
        append_locked(k, it);
    pthread_mutex_unlock(&k->lock);
}

static void post_text(struct m0_nats_link *k, int kind, const char *text)
{
    post(k, item_new(kind, text, strlen(text)));
}

/* ------------------------------------------------- libnats's callbacks */

/* A delivery of the ordered consumer (the subscription's thread). */
static void on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    struct subctx *sc = closure;
    struct m0_nats_link *k = sc->k;
    (void)nc;
    (void)sub;
    jsMsgMetaData *meta = NULL;
    uint64_t seq = 0;
    if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
        seq = meta->Sequence.Stream;
        jsMsgMetaData_Destroy(meta);
    }
    if (seq == 0) {
        natsMsg_Destroy(msg);
        return;                     /* not a stream's message */
    }
    const char *subject = natsMsg_GetSubject(msg);
    size_t slen = subject != NULL ? strlen(subject) : 0;
    int n = natsMsg_GetDataLength(msg);
    size_t dlen = n > 0 && (size_t)n <= M0_BROKER_FRAME_MAX ? (size_t)n : 0;
    if (n > 0 && dlen == 0)
        slen = 0;                   /* oversized: the loop counts its id and skips it */
    struct m0_nats_item *it = m0_xmalloc(sizeof *it + slen + dlen + 1);
    memset(it, 0, sizeof *it);
    it->kind = M0_NI_MSG;
    it->gen = sc->gen;
    it->seq = seq;
    it->slen = slen;
    it->dlen = dlen;
    memcpy(it->bytes, subject, slen);
    memcpy(it->bytes + slen, natsMsg_GetData(msg), dlen);
    natsMsg_Destroy(msg);
    pthread_mutex_lock(&k->lock);
    while (k->queued >= M0_NATS_QUEUE_MAX && !k->stopping && !k->dead &&
           __atomic_load_n(&k->gen, __ATOMIC_SEQ_CST) == sc->gen)
        pthread_cond_wait(&k->room, &k->lock);
    if (k->dead || k->stopping || __atomic_load_n(&k->gen, __ATOMIC_SEQ_CST) != sc->gen)
        free(it);                   /* stopping, or a newer subscription reads from here on */
    else
        append_locked(k, it);
    pthread_mutex_unlock(&k->lock);
}

/* The subscription's thread ends: nothing calls on_msg with sc again. */
static void on_sub_done(void *closure)
{
    free(closure);
}

static void on_disconnected(natsConnection *nc, void *closure)
{
    (void)nc;
    post_text(closure, M0_NI_DOWN, "");
}

static void on_reconnected(natsConnection *nc, void *closure)
{
    char url[256] = "";
    natsConnection_GetConnectedUrl(nc, url, sizeof url);
    post_text(closure, M0_NI_UP, url);
}

static void on_closed(natsConnection *nc, void *closure)
{
    struct m0_nats_link *k = closure;
    (void)nc;
    pthread_mutex_lock(&k->lock);
    k->closed = 1;
    pthread_cond_broadcast(&k->work);
    pthread_mutex_unlock(&k->lock);
}

static void on_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *closure)
{
    const char *text = NULL;
    char line[300];
    (void)sub;
    natsConnection_GetLastError(nc, &text);
    snprintf(line, sizeof line, "%s%s%s", natsStatus_GetText(err), text != NULL && text[0] ? ": " : "",
             text != NULL ? text : "");
    post_text(closure, M0_NI_ERROR, line);
}

/* ---------------------------------------------------------- the thread */

/* Wait until ms from now, a resume, a stop or a closed connection. */
static void nap(struct m0_nats_link *k, unsigned ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&k->lock);
    if (!k->stopping && !k->closed && k->rq_head == NULL)
        pthread_cond_timedwait(&k->work, &k->lock, &ts);
    pthread_mutex_unlock(&k->lock);
}

static void backoff(struct m0_nats_link *k)
{
    unsigned ms = BACKOFF_MIN_MS << (k->failures < 6 ? k->failures : 6);
    k->failures++;
    nap(k, ms < BACKOFF_MAX_MS ? ms : BACKOFF_MAX_MS);
}

static int stopping(struct m0_nats_link *k)
{
    pthread_mutex_lock(&k->lock);
    int s = k->stopping;
    pthread_mutex_unlock(&k->lock);
    return s;
}

static int dial(struct m0_nats_link *k, char *why, size_t cap)
{
    natsOptions *o = m0_nats_options(why, cap);
    if (o == NULL)
        return M0_ERR;
    natsOptions_SetDisconnectedCB(o, on_disconnected, k);
    natsOptions_SetReconnectedCB(o, on_reconnected, k);
    natsOptions_SetClosedCB(o, on_closed, k);
    natsOptions_SetErrorHandler(o, on_error, k);
    natsStatus s = natsConnection_Connect(&k->nc, o);
    natsOptions_Destroy(o);
    if (s != NATS_OK) {
        k->nc = NULL;
        snprintf(why, cap, "broker %.120s unreachable: %.200s", m0_broker->shown, m0_nats_error(s));
        return M0_ERR;
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = M0_NATS_API_MS;
    if ((s = natsConnection_JetStream(&k->js, k->nc, &jo)) != NATS_OK) {
        snprintf(why, cap, "broker %.120s: %.200s", m0_broker->shown, m0_nats_error(s));
        return M0_ERR;
    }
    pthread_mutex_lock(&k->lock);
    k->closed = 0;
    pthread_mutex_unlock(&k->lock);
    char url[256] = "";
    natsConnection_GetConnectedUrl(k->nc, url, sizeof url);
    post_text(k, M0_NI_UP, url);
    return M0_OK;
}

/* A new generation: what the old subscription queued is dropped. */
static unsigned next_gen(struct m0_nats_link *k)
{
    pthread_mutex_lock(&k->lock);
    unsigned gen = __atomic_add_fetch(&k->gen, 1, __ATOMIC_SEQ_CST);
    struct m0_nats_item **p = &k->head;
    k->tail = NULL;
    while (*p != NULL) {
        struct m0_nats_item *it = *p;
        if (it->kind == M0_NI_MSG && it->gen != gen) {
            *p = it->next;
            k->queued--;
            item_free(it);
        } else {
            k->tail = it;
            p = &it->next;
        }
    }
    pthread_cond_broadcast(&k->room);
    pthread_mutex_unlock(&k->lock);
    return gen;
}

static void unsubscribe(struct m0_nats_link *k)
{
    if (k->sub == NULL)
        return;
    natsSubscription_Unsubscribe(k->sub);
    natsSubscription_Destroy(k->sub);
    k->sub = NULL;
}

/* Read the stream with an ordered consumer from id from (a new generation). */
static int subscribe(struct m0_nats_link *k, uint64_t from, char *why, size_t cap)
{
    unsubscribe(k);
    struct subctx *sc = m0_xmalloc(sizeof *sc);
    sc->k = k;
    sc->gen = next_gen(k);
    char subject[M0_NATS_PREFIX_MAX + 4];
    snprintf(subject, sizeof subject, "%s.>", m0_nats_sprefix());
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = m0_nats_stream();
    so.Ordered = true;
    so.Config.DeliverPolicy = js_DeliverByStartSequence;
    so.Config.OptStartSeq = from;
    so.Config.Heartbeat = HEARTBEAT_NS;
    jsErrCode jerr = 0;
    natsStatus s = js_Subscribe(&k->sub, k->js, subject, on_msg, sc, NULL, &so, &jerr);
    if (s != NATS_OK) {
        k->sub = NULL;
        free(sc);
        snprintf(why, cap, "broker %.120s: reading stream %.80s failed: %.150s", m0_broker->shown, m0_nats_stream(),
                 m0_nats_error(s));
        return M0_ERR;
    }
    /* No pending limit of libnats's: flow control bounds what waits (a
     * message dropped there would be a gap the ordered consumer cannot see). */
    natsSubscription_SetPendingLimits(k->sub, -1, -1);
    if (natsSubscription_SetOnCompleteCB(k->sub, on_sub_done, sc) != NATS_OK)
        m0_debug("broker: the subscription closed at once (its closure is left)");
    k->wd_pos = from - 1;
    k->wd_since = now_ms();
    post_text(k, M0_NI_READING, "");
    return M0_OK;
}

static void teardown(struct m0_nats_link *k)
{
    unsubscribe(k);
    jsCtx_Destroy(k->js);
    k->js = NULL;
    if (k->nc != NULL) {
        natsConnection_Close(k->nc);
        natsConnection_Destroy(k->nc);
        k->nc = NULL;
    }
}

/* Keep the newest entries whose frames (and 32 bytes each) fit in cap:
 * drop from the oldest. */
static void keep_newest(struct m0_nats_resume *r, size_t *first, size_t *bytes, size_t cap)
{
    while (*first < r->n && *bytes > cap) {
        *bytes -= r->len[*first] + 32;
        (*first)++;
    }
    if (*first > 0 && *first * 2 >= r->n) {
        /* compact: the dropped frames' bytes go */
        size_t from = *first < r->n ? r->off[*first] : r->frames.len;
        memmove(r->frames.data, r->frames.data + from, r->frames.len - from);
        r->frames.len -= from;
        for (size_t i = *first; i < r->n; i++) {
            r->seq[i - *first] = r->seq[i];
            r->off[i - *first] = r->off[i] - from;
            r->len[i - *first] = r->len[i];
        }
        r->n -= *first;
        *first = 0;
    }
}

/*
 * Answer a resume (blocking): the stream's newest id (top), then the
 * channel's messages from the client's id on, one message get each
 * ($JS.API.STREAM.MSG.GET, answered by the stream's leader: every
 * acknowledged event is there), oldest first, up to top and at most
 * retention + 1 of them; the newest that fit in replay_bytes are kept.
 */
static void answer(struct m0_nats_link *k, struct m0_nats_resume *r)
{
    size_t replay_bytes = k->replay_bytes;
    struct m0_nats_state st;
    r->rc = M0_ERR;
    int rc = m0_nats_stream_state(k->js, M0_NATS_FIND, &st, r->why, sizeof r->why);
    if (rc == M0_AGAIN)
        snprintf(r->why, sizeof r->why, "stream %s does not exist", m0_nats_stream());
    if (rc != M0_OK)
        return;
    r->top = st.last;
    if (r->last > st.last) {
        r->rc = M0_OK;              /* an id the stream never issued */
        return;
    }
    struct m0_buf subject = {0}, api = {0};
    m0_nats_subject(&subject, m0_nats_sprefix(), r->channel, r->clen);
    m0_buf_printf(&api, "$JS.API.STREAM.MSG.GET.%s", m0_nats_stream());
    m0_buf_append(&api, "", 1);
    struct m0_nats_got got = {0};
    size_t first = 0, bytes = 0, room = 0;
    uint64_t at = r->last;
    for (;;) {
        char body[M0_NATS_PREFIX_MAX + 700];
        int blen = snprintf(body, sizeof body, "{\"seq\":%llu,\"next_by_subj\":\"%.*s\"}", (unsigned long long)at,
                            (int)subject.len, subject.data);
        natsMsg *reply = NULL;
        natsStatus s = natsConnection_Request(&reply, k->nc, api.data, body, blen, M0_NATS_API_MS);
        if (s != NATS_OK) {
            snprintf(r->why, sizeof r->why, "broker %.60s: reading %.*s's history: %.80s", m0_broker->shown,
                     (int)(r->clen > 40 ? 40 : r->clen), r->channel, m0_nats_error(s));
            goto out;
        }
        int g = m0_nats_msg_get_reply(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply),
                                      M0_BROKER_FRAME_MAX, &got);
        natsMsg_Destroy(reply);
        if (g == M0_AGAIN || (g == M0_OK && got.seq > st.last))
            break;                  /* no more of it, or newer than top: the reader's */
        if (g == M0_OK && (got.seq < at || got.subject.len != subject.len ||
                           memcmp(got.subject.data, subject.data, subject.len) != 0)) {
            snprintf(got.why, sizeof got.why, "an answer for another message");
            g = M0_ERR;
        }
        if (g != M0_OK) {
            snprintf(r->why, sizeof r->why, "broker %.60s: reading %.*s's history: %.80s", m0_broker->shown,
                     (int)(r->clen > 40 ? 40 : r->clen), r->channel, got.why);
            goto out;
        }
        if (got.seq == r->last) {
            r->found = 1;
        } else {
            if (r->n == room) {
                room = room ? 2 * room : 16;
                r->seq = m0_xrealloc(r->seq, room * sizeof *r->seq);
                r->off = m0_xrealloc(r->off, room * sizeof *r->off);
                r->len = m0_xrealloc(r->len, room * sizeof *r->len);
            }
            r->seq[r->n] = got.seq;
            r->off[r->n] = r->frames.len;
            r->len[r->n] = got.data.len;
            m0_buf_append(&r->frames, got.data.data, got.data.len);
            r->n++;
            r->total++;
            bytes += got.data.len + 32;
            keep_newest(r, &first, &bytes, replay_bytes);
            if (r->total > (size_t)k->retention)
                break;              /* more than the retention: what is missing, the gap says */
        }
        at = got.seq + 1;
    }
    keep_newest(r, &first, &bytes, replay_bytes);
    if (first > 0) {
        /* the last compaction left a few dropped in front */
        for (size_t i = first; i < r->n; i++) {
            r->seq[i - first] = r->seq[i];
            r->off[i - first] = r->off[i];
            r->len[i - first] = r->len[i];
        }
        r->n -= first;
    }
    r->rc = M0_OK;
out:
    m0_buf_free(&got.subject);
    m0_buf_free(&got.data);
    m0_buf_free(&subject);
    m0_buf_free(&api);
}

/* The stream's state for the loop, and the watchdog (see the top). */
static void probe(struct m0_nats_link *k)
{
    struct m0_nats_state st;
    char why[300];
    int rc = m0_nats_stream_state(k->js, M0_NATS_FIND, &st, why, sizeof why);
    if (rc == M0_AGAIN)
        snprintf(why, sizeof why, "broker %.120s: stream %.80s does not exist", m0_broker->shown, m0_nats_stream());
    struct m0_nats_item *it = item_new(M0_NI_PROBE, rc == M0_OK ? "" : why, rc == M0_OK ? 0 : strlen(why));
    if (rc == M0_OK)
        it->st = st;
    else
        it->seq = 1;                /* failed */
    post(k, it);
    uint64_t pos = __atomic_load_n(k->position, __ATOMIC_SEQ_CST), now = now_ms();
    m0_debug("broker: probe %d: stream at %llu (leader %s), the reader at %llu", rc, (unsigned long long)st.last,
             rc == M0_OK ? st.leader : "?", (unsigned long long)pos);
    if (rc != M0_OK || k->sub == NULL) {
        k->stuck = 1;               /* probed again soon: the reader follows the election */
        return;
    }
    if (st.last < pos && (st.leader[0] != '\0' || st.standalone)) {
        /* The stream's newest id below the reader's, as its leader says,
         * probe after probe: it was deleted and made anew, its ids start
         * again. (Once is no sign: mid-election a stale state may answer,
         * and each server keeps its own creation time.) */
        if (++k->behind < REWOUND_PROBES)
            return;
        k->behind = 0;
        next_gen(k);
        struct m0_nats_item *w = item_new(M0_NI_REWOUND, "", 0);
        w->seq = st.last;
        post(k, w);
        if (subscribe(k, st.last + 1, why, sizeof why) != M0_OK)
            post_text(k, M0_NI_ERROR, why);
        return;
    }
    k->behind = 0;
    int behind = st.last > pos, stalled = __atomic_load_n(&k->stalled, __ATOMIC_SEQ_CST);
    if (!behind || stalled || pos != k->wd_pos) {
        k->wd_pos = pos;            /* reading, or not asked to: the clock starts again */
        k->wd_since = now;
        k->stuck = behind && !stalled;
        return;
    }
    k->stuck = 1;
    if (st.leader[0] == '\0' && !st.standalone)
        return;                     /* mid-election: nothing can be read before it ends */
    if (now - k->wd_since >= WATCHDOG_MS) {
        m0_info("broker %s: the reader stayed at id %llu for %llu ms while stream %s is at %llu (leader %s): "
                "reading again", m0_broker->shown, (unsigned long long)pos, (unsigned long long)(now - k->wd_since),
                m0_nats_stream(), (unsigned long long)st.last, st.leader[0] ? st.leader : "this server");
        if (subscribe(k, pos + 1, why, sizeof why) != M0_OK)
            post_text(k, M0_NI_ERROR, why);
    }
}

static void *run(void *arg)
{
    struct m0_nats_link *k = arg;
    sigset_t old;
    m0_nats_block_signals(&old);    /* signals are the loop's; libnats's threads start from here */
    int positioned = k->start_known, subscribed_once = 0;
    uint64_t at = k->start, next_probe = 0;
    char why[400];
    while (!stopping(k)) {
        pthread_mutex_lock(&k->lock);
        int closed = k->closed;
        pthread_mutex_unlock(&k->lock);
        if (closed && k->nc != NULL) {
            post_text(k, M0_NI_DOWN, "");
            teardown(k);            /* libnats gave up on it: start over */
        }
        if (k->nc == NULL && dial(k, why, sizeof why) != M0_OK) {
            post_text(k, M0_NI_ERROR, why);
            teardown(k);
            backoff(k);
            continue;
        }
        if (k->sub == NULL) {
            struct m0_nats_state st;
            if (m0_nats_stream_state(k->js, M0_NATS_CREATE, &st, why, sizeof why) != M0_OK) {
                post_text(k, M0_NI_ERROR, why);
                backoff(k);
                continue;
            }
            if (!positioned) {
                at = st.last;
                positioned = 1;
                struct m0_nats_item *p = item_new(M0_NI_POSITIONED, "", 0);
                p->seq = at;
                post(k, p);
            } else if (subscribed_once) {
                at = __atomic_load_n(k->position, __ATOMIC_SEQ_CST);
            }
            if (subscribe(k, at + 1, why, sizeof why) != M0_OK) {
                post_text(k, M0_NI_ERROR, why);
                backoff(k);
                continue;
            }
            subscribed_once = 1;
            k->failures = 0;
        }
        /* Up: resumes, and the probe once a second. */
        pthread_mutex_lock(&k->lock);
        struct m0_nats_resume *todo = k->rq_head;
        k->rq_head = k->rq_tail = NULL;
        pthread_mutex_unlock(&k->lock);
        while (todo != NULL) {
            struct m0_nats_resume *r = todo;
            todo = r->next;
            r->next = NULL;
            answer(k, r);
            struct m0_nats_item *it = item_new(M0_NI_RESUME, "", 0);
            it->res = r;
            post(k, it);
        }
        uint64_t now = now_ms();
        if (now >= next_probe) {
            probe(k);
            next_probe = now + (k->stuck ? PROBE_STUCK_MS : PROBE_MS);
        } else {
            nap(k, (unsigned)(next_probe - now));
        }
    }
    teardown(k);
    m0_nats_restore_signals(&old);
    return NULL;
}

/* ------------------------------------------------------------ the loop's */

struct m0_nats_link *m0_nats_link_new(int start_known, uint64_t start, const uint64_t *position, long retention,
                                      size_t replay_bytes, char *err, size_t cap)
{
    struct m0_nats_link *k = m0_xcalloc(sizeof *k);
    k->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (k->efd < 0) {
        snprintf(err, cap, "eventfd: %s", strerror(errno));
        free(k);
        return NULL;
    }
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->work, NULL);
    pthread_cond_init(&k->room, NULL);
    k->start_known = start_known;
    k->start = start;
    k->position = position;
    k->retention = retention;
    k->replay_bytes = replay_bytes;
    int rc = pthread_create(&k->th, NULL, run, k);
    if (rc != 0) {
        snprintf(err, cap, "cannot start the broker's thread: %s", strerror(rc));
        close(k->efd);
        pthread_cond_destroy(&k->room);
        pthread_cond_destroy(&k->work);
        pthread_mutex_destroy(&k->lock);
        free(k);
        return NULL;
    }
    return k;
}

int m0_nats_link_fd(const struct m0_nats_link *k)
{
    return k->efd;
}

struct m0_nats_item *m0_nats_link_take(struct m0_nats_link *k)
{
    uint64_t v;
    pthread_mutex_lock(&k->lock);
    if (read(k->efd, &v, sizeof v) < 0 && errno != EAGAIN)
        m0_debug("broker: eventfd read: %s", strerror(errno));
    k->woken = 0;
    struct m0_nats_item *all = k->head;
    k->head = k->tail = NULL;
    k->queued = 0;
    pthread_cond_broadcast(&k->room);
    pthread_mutex_unlock(&k->lock);
    return all;
}

void m0_nats_link_resume(struct m0_nats_link *k, struct m0_nats_resume *r)
{
    r->next = NULL;
    pthread_mutex_lock(&k->lock);
    if (k->rq_tail != NULL)
        k->rq_tail->next = r;
    else
        k->rq_head = r;
    k->rq_tail = r;
    pthread_cond_broadcast(&k->work);
    pthread_mutex_unlock(&k->lock);
}

void m0_nats_link_stalled(struct m0_nats_link *k, int stalled)
{
    __atomic_store_n(&k->stalled, stalled, __ATOMIC_SEQ_CST);
}

unsigned m0_nats_link_gen(const struct m0_nats_link *k)
{
    return __atomic_load_n(&k->gen, __ATOMIC_SEQ_CST);
}

void m0_nats_link_stop(struct m0_nats_link *k)
{
    pthread_mutex_lock(&k->lock);
    k->stopping = 1;
    pthread_cond_broadcast(&k->work);
    pthread_cond_broadcast(&k->room);
    pthread_mutex_unlock(&k->lock);
}

void m0_nats_link_free(struct m0_nats_link *k)
{
    m0_nats_link_stop(k);
    pthread_join(k->th, NULL);
    pthread_mutex_lock(&k->lock);
    k->dead = 1;
    struct m0_nats_item *it = k->head;
    k->head = k->tail = NULL;
    struct m0_nats_resume *r = k->rq_head;
    k->rq_head = k->rq_tail = NULL;
    close(k->efd);
    k->efd = -1;
    pthread_mutex_unlock(&k->lock);
    while (it != NULL) {
        struct m0_nats_item *next = it->next;
        item_free(it);
        it = next;
    }
    while (r != NULL) {
        struct m0_nats_resume *next = r->next;
        m0_nats_resume_free(r);
        r = next;
    }
    /* k itself stays (see the top): libnats may still call on_error. */
}

void m0_nats_link_close_in_child(struct m0_nats_link *k)
{
    if (k->efd >= 0)
        close(k->efd);
    k->efd = -1;
}
