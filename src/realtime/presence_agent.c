/*
 * presence_agent.c — a worker's presence agent (see presence_agent.h): one
 * thread, started by the first loop that needs it, fed by the loops'
 * notes of what changed.
 *
 * Join and leave are decided from the counts, never from the order notes
 * arrive in: a note only says "look at (channel, sub) again". The sub is
 * held somewhere (on this host: any loop block; with a broker: any live
 * part) and not announced yet: a join is published and it is announced;
 * it is held nowhere and announced: its leave becomes due after the
 * debounce, and whoever looks at it when due (any worker's agent, under
 * the announcements' lock — or a heartbeat script, with a broker) publishes
 * the leave only if it is still held nowhere. A worker that dies takes its
 * notes with it, so the master's reap (which empties its blocks) makes
 * every agent look at every announced sub again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "m0/broker_url.h"
#include "m0/buf.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/log.h"
#include "m0/presence.h"
#include "m0/presence_announce.h"
#include "m0/presence_agent.h"
#include "m0/presence_broker.h"
#include "m0/presence_loop.h"

#define LEAVE_POLL_MS 200                /* without a broker: how often due leaves are looked for */
#define RESYNC_MS (3600 * 1000)          /* with one: a full push now and then heals any drift */

struct agent {
    const struct m0_config *cfg;
    struct m0_presence *p;
    struct m0_presence_span span;        /* this worker's blocks */
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct m0_buf notes;                 /* [kind, events, clen, slen, channel, sub]... */
    int overflow;                        /* notes were dropped: look at everything */
    int stopping;
    uint64_t debounce_ms;
    uint64_t reaped;                     /* the master's reap count last swept for */
    struct m0_presence_redis *redis;     /* NULL: no broker */
    int synced;                          /* Redis has the part as the table has it */
    uint64_t next_beat, next_resync, next_leave;
};

/* Per process: the worker's one agent, made by its first loop to start
 * and stopped when it drains. */
static pthread_mutex_t agent_mu = PTHREAD_MUTEX_INITIALIZER;
static struct agent *the_agent;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void m0_presence_agent_note(void *ctx, char kind, int events, const char *channel, size_t clen, const char *sub,
                            size_t slen)
{
    struct agent *a = ctx;
    if (clen > 255 || slen > 255)
        return;
    pthread_mutex_lock(&a->mu);
    if (a->stopping) {
        /* the worker drains: its part is withdrawn already */
    } else if (a->notes.len + 4 + clen + slen > M0_PRESENCE_NOTE_MAX) {
        a->overflow = 1;
    } else {
        int wake = a->notes.len == 0;
        unsigned char h[4] = {(unsigned char)kind, (unsigned char)(events != 0), (unsigned char)clen,
                              (unsigned char)slen};
        m0_buf_append(&a->notes, h, 4);
        m0_buf_append(&a->notes, channel, clen);
        m0_buf_append(&a->notes, sub, slen);
        if (wake)
            pthread_cond_signal(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
}

/* ------------------------------------------------------- a set of keys */

/* Distinct (kind, channel, sub) keys of one batch, in first-seen order:
 * a note repeated in a burst is looked at once. */
struct keyset {
    uint32_t *slots;                     /* 1 + record offset; 0: empty */
    size_t cap, n;
    struct m0_buf recs;                  /* [kind, events, clen, slen, channel, sub]... */
};

static uint32_t key_hash(const unsigned char *rec)
{
    uint32_t h = 2166136261u;
    size_t n = 4 + rec[2] + rec[3];
    for (size_t i = 0; i < n; i++) {
        if (i == 1)
            continue;                    /* the events flag is not part of the key */
        h ^= rec[i];
        h *= 16777619u;
    }
    return h;
}

static void keyset_grow(struct keyset *ks)
{
    size_t cap = ks->cap ? ks->cap * 2 : 1024;
    uint32_t *slots = m0_xcalloc(cap * sizeof *slots);
    for (size_t i = 0; i < ks->cap; i++) {
        uint32_t at = ks->slots[i];
        if (at == 0)
            continue;
        size_t j = key_hash((const unsigned char *)ks->recs.data + at - 1) & (cap - 1);
        while (slots[j] != 0)
            j = (j + 1) & (cap - 1);
        slots[j] = at;
    }
    free(ks->slots);
    ks->slots = slots;
    ks->cap = cap;
}

static void keyset_add(struct keyset *ks, const unsigned char *rec)
{
    size_t n = 4 + rec[2] + rec[3];
    if ((ks->n + 1) * 2 > ks->cap)
        keyset_grow(ks);
    size_t j = key_hash(rec) & (ks->cap - 1);
    for (;; j = (j + 1) & (ks->cap - 1)) {
        uint32_t at = ks->slots[j];
        if (at == 0)
            break;
        unsigned char *q = (unsigned char *)ks->recs.data + at - 1;
        if (q[0] == rec[0] && q[2] == rec[2] && q[3] == rec[3] && memcmp(q + 4, rec + 4, n - 4) == 0) {
            q[1] |= rec[1];              /* an events note wins */
            return;
        }
    }
    ks->slots[j] = (uint32_t)ks->recs.len + 1;
    m0_buf_append(&ks->recs, rec, n);
    ks->n++;
}

static void keyset_clear(struct keyset *ks)
{
    if (ks->slots != NULL)
        memset(ks->slots, 0, ks->cap * sizeof *ks->slots);
    ks->n = 0;
    m0_buf_reset(&ks->recs);
}

static void keyset_free(struct keyset *ks)
{
    free(ks->slots);
    m0_buf_free(&ks->recs);
}

/* Every key of the worker's blocks (a full resync), as notes. */
static void add_each(void *ctx, const char *channel, size_t clen, const char *sub, size_t slen)
{
    void **pair = ctx;
    struct keyset *ks = pair[0];
    const char *events = pair[1];
    unsigned char rec[4 + 256 + 256];
    rec[0] = sub != NULL ? 's' : 'c';
    rec[1] = sub != NULL && m0_presence_events_match(events, channel, clen);
    rec[2] = (unsigned char)clen;
    rec[3] = (unsigned char)slen;
    memcpy(rec + 4, channel, clen);
    if (slen > 0)
        memcpy(rec + 4 + clen, sub, slen);
    keyset_add(ks, rec);
}

/* ------------------------------------------------- without a broker */

static void publish_event(const char *channel, size_t clen, const char *event, const char *sub, size_t slen)
{
    struct m0_buf data = {0};
    m0_buf_puts(&data, "{\"sub\": ");
    m0_buf_json_str(&data, sub, slen);
    m0_buf_puts(&data, "}");
    uint64_t id;
    if (m0_bus_publish(channel, clen, event, data.data, data.len, &id) != M0_OK)
        m0_warn("presence: the %s of a sub on a channel could not be published", event);
    m0_buf_free(&data);
}

/* Look at (channel, sub) again: announce and join, or make its leave due,
 * or cancel a due leave. The announcements' lock is held. */
static void reconcile(struct agent *a, const char *channel, size_t clen, const char *sub, size_t slen,
                      struct m0_buf *joins)
{
    struct m0_presence_span all = {0, 0};
    uint64_t held = m0_presence_sub_count(a->p, channel, clen, sub, slen, all);
    uint32_t e = m0_presence_announced(a->p, channel, clen, sub, slen);
    if (held > 0) {
        if (e == M0_PRESENCE_NONE) {
            if (m0_presence_announce(a->p, channel, clen, sub, slen) != M0_PRESENCE_NONE) {
                unsigned char h[2] = {(unsigned char)clen, (unsigned char)slen};
                m0_buf_append(joins, h, 2);
                m0_buf_append(joins, channel, clen);
                m0_buf_append(joins, sub, slen);
            }
        } else if (m0_presence_due(a->p, e) != 0) {
            m0_presence_set_due(a->p, e, 0);     /* back before the debounce ran out */
        }
    } else if (e != M0_PRESENCE_NONE && m0_presence_due(a->p, e) == 0) {
        m0_presence_set_due(a->p, e, now_ms() + a->debounce_ms);
    }
}

struct sweep {
    struct agent *a;
    struct m0_buf *out;                  /* leaves to publish (due), joins (reconcile) */
    int due;
};

static void sweep_one(void *ctx, uint32_t e, const char *channel, size_t clen, const char *sub, size_t slen)
{
    struct sweep *sw = ctx;
    if (!sw->due) {
        reconcile(sw->a, channel, clen, sub, slen, sw->out);
        return;
    }
    struct m0_presence_span all = {0, 0};
    if (m0_presence_sub_count(sw->a->p, channel, clen, sub, slen, all) > 0) {
        m0_presence_set_due(sw->a->p, e, 0);
        return;
    }
    unsigned char h[2] = {(unsigned char)clen, (unsigned char)slen};
    m0_buf_append(sw->out, h, 2);
    m0_buf_append(sw->out, channel, clen);
    m0_buf_append(sw->out, sub, slen);
    m0_presence_unannounce(sw->a->p, e);
}

static void publish_all(struct m0_buf *b, const char *event)
{
    for (size_t at = 0; at + 2 <= b->len;) {
        size_t cl = (unsigned char)b->data[at], sl = (unsigned char)b->data[at + 1];
        publish_event(b->data + at + 2, cl, event, b->data + at + 2 + cl, sl);
        at += 2 + cl + sl;
    }
    m0_buf_reset(b);
}

static void local_round(struct agent *a, struct keyset *ks, int everything)
{
    struct m0_buf joins = {0}, leaves = {0};
    uint64_t reaped = m0_presence_reap_count(a->p);
    m0_presence_announce_lock(a->p);
    for (size_t at = 0; at < ks->recs.len;) {
        const unsigned char *r = (const unsigned char *)ks->recs.data + at;
        if (r[0] == 's' && r[1])
            reconcile(a, (const char *)r + 4, r[2], (const char *)r + 4 + r[2], r[3], &joins);
        at += 4 + r[2] + r[3];
    }
    if (everything || reaped != a->reaped) {
        /* A worker died (its notes with it), or ours were dropped. */
        a->reaped = reaped;
        struct sweep sw = {.a = a, .out = &joins, .due = 0};
        m0_presence_announced_each(a->p, 0, 0, sweep_one, &sw);
    }
    struct sweep sw = {.a = a, .out = &leaves, .due = 1};
    m0_presence_announced_each(a->p, 1, now_ms(), sweep_one, &sw);
    m0_presence_announce_unlock(a->p);
    publish_all(&joins, "join");
    publish_all(&leaves, "leave");
    m0_buf_free(&joins);
    m0_buf_free(&leaves);
}

/* ---------------------------------------------------- with a broker */

/* Push the keys' counts as the worker's blocks have them now. */
static int push(struct agent *a, const struct keyset *ks)
{
    size_t n = 0, cap = ks->n ? ks->n : 1;
    struct m0_presence_rec *recs = m0_xmalloc(cap * sizeof *recs);
    for (size_t at = 0; at < ks->recs.len;) {
        const unsigned char *r = (const unsigned char *)ks->recs.data + at;
        const char *ch = (const char *)r + 4, *sub = (const char *)r + 4 + r[2];
        struct m0_presence_rec *x = &recs[n++];
        *x = (struct m0_presence_rec){.kind = (char)r[0], .events = r[1], .channel = ch, .clen = r[2]};
        if (r[0] == 's') {
            x->sub = sub;
            x->slen = r[3];
            x->count = m0_presence_sub_count(a->p, ch, r[2], sub, r[3], a->span);
        } else {
            x->count = m0_presence_count(a->p, ch, r[2], a->span);
        }
        at += 4 + r[2] + r[3];
    }
    int rc = m0_presence_redis_push(a->redis, recs, n);
    free(recs);
    return rc;
}

static void broker_round(struct agent *a, struct keyset *ks, int overflow)
{
    char err[256];
    uint64_t now = now_ms();
    int ready = m0_presence_redis_ready(a->redis, now, err, sizeof err);
    if (ready == 0) {
        a->synced = 0;
        return;
    }
    if (ready == 2 || overflow || now >= a->next_resync)
        a->synced = 0;
    int resynced = 0;
    if (!a->synced) {
        /* Everything again: the part's keys go, then the table's counts
         * (their join/leave reconciled as they go back: no leave for a sub
         * that is still here). Before the heartbeat, so that a leave it
         * finds due is weighed against this part's counts. */
        keyset_clear(ks);
        const void *pair[2] = {ks, a->cfg->presence_events};
        m0_presence_each(a->p, a->span, add_each, pair);
        if (m0_presence_redis_reset(a->redis, 0) != M0_OK || push(a, ks) != M0_OK)
            return;
        a->synced = resynced = 1;
        a->next_resync = now + RESYNC_MS;
    } else if (ks->n > 0 && push(a, ks) != M0_OK) {
        return;                          /* the connection is dropped: the next round resyncs */
    }
    if (resynced || now >= a->next_beat || (a->next_leave != 0 && now >= a->next_leave)) {
        int lost;
        uint64_t wake;
        if (m0_presence_redis_beat(a->redis, &lost, &wake) != M0_OK)
            return;
        if (lost && !resynced)
            a->synced = 0;               /* taken for dead meanwhile: its keys were dropped */
        a->next_beat = now + M0_PRESENCE_BEAT_MS;
        a->next_leave = wake != 0 ? now + wake : 0;
    }
}

/* -------------------------------------------------------------- thread */

static void take_notes(struct agent *a, struct keyset *ks)
{
    for (size_t at = 0; at + 4 <= a->notes.len;) {
        const unsigned char *r = (const unsigned char *)a->notes.data + at;
        keyset_add(ks, r);
        at += 4 + r[2] + r[3];
    }
    m0_buf_reset(&a->notes);
    if (a->notes.cap > 1 << 20)
        m0_buf_free(&a->notes);
}

static void *agent_main(void *arg)
{
    struct agent *a = arg;
    struct keyset ks = {0};
    pthread_mutex_lock(&a->mu);
    while (!a->stopping) {
        uint64_t now = now_ms(), wake = now + LEAVE_POLL_MS;
        if (a->redis != NULL) {
            wake = a->synced ? a->next_beat : now + 100;
            if (a->next_leave != 0 && a->next_leave < wake)
                wake = a->next_leave;
        }
        if (a->notes.len == 0 && !a->overflow && now < wake) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            uint64_t ns = (uint64_t)until.tv_nsec + (wake - now) * 1000000;
            until.tv_sec += (time_t)(ns / 1000000000);
            until.tv_nsec = (long)(ns % 1000000000);
            pthread_cond_timedwait(&a->cv, &a->mu, &until);
            if (a->stopping)
                break;
            if (a->notes.len > 0 && a->redis != NULL) {
                /* A burst: let the changes of a few milliseconds go in one script. */
                pthread_mutex_unlock(&a->mu);
                struct timespec pause = {0, M0_PRESENCE_PUSH_MS * 1000000L};
                nanosleep(&pause, NULL);
                pthread_mutex_lock(&a->mu);
            }
        }
        keyset_clear(&ks);
        take_notes(a, &ks);
        int overflow = a->overflow;
        a->overflow = 0;
        pthread_mutex_unlock(&a->mu);
        if (a->redis != NULL)
            broker_round(a, &ks, overflow);
        else
            local_round(a, &ks, overflow);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    if (a->redis != NULL) {
        char err[256];
        if (m0_presence_redis_ready(a->redis, now_ms(), err, sizeof err))
            m0_presence_redis_reset(a->redis, 1);     /* the part goes: other hosts stop counting it now */
        m0_presence_redis_free(a->redis);
        a->redis = NULL;
    }
    keyset_free(&ks);
    return NULL;
}

void *m0_presence_agent_start(const struct m0_config *cfg)
{
    pthread_mutex_lock(&agent_mu);
    struct agent *a = the_agent;
    int wanted = cfg != NULL && m0_presence_current != NULL && m0_bus_index >= 0 &&
                 (m0_broker != NULL || (cfg->presence_events != NULL && cfg->presence_events[0]));
    if (a == NULL && wanted) {
        a = m0_xcalloc(sizeof *a);
        a->cfg = cfg;
        a->p = m0_presence_current;
        a->span = (struct m0_presence_span){(uint32_t)(m0_bus_index * m0_bus_loops), (uint32_t)m0_bus_loops};
        a->debounce_ms = (uint64_t)(cfg->presence_debounce * 1000);
        a->reaped = UINT64_MAX;          /* the first round looks at every announced sub */
        pthread_mutex_init(&a->mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&a->cv, &ca);
        pthread_condattr_destroy(&ca);
        /* Each host's part lives in Redis (presence_broker.c); the NATS
         * engine has no such table yet: there, counts and presence are
         * this host's, join/leave published through the engine as any
         * event (docs/realtime.md). */
        if (m0_broker != NULL && strcmp(m0_broker->engine, "redis") == 0) {
            char part[64];
            snprintf(part, sizeof part, "%s.%d", m0_presence_host(a->p), (int)getpid());
            a->redis = m0_presence_redis_new(cfg, part);
        }
        int e = pthread_create(&a->tid, NULL, agent_main, a);
        if (e != 0) {
            m0_error("presence: cannot start the agent thread: %s (no join/leave, no other hosts' counts)",
                     strerror(e));
            m0_presence_redis_free(a->redis);
            free(a);
            a = NULL;
        } else {
            the_agent = a;
        }
    }
    pthread_mutex_unlock(&agent_mu);
    return a;
}

void m0_presence_agent_stop(void)
{
    pthread_mutex_lock(&agent_mu);
    struct agent *a = the_agent;
    the_agent = NULL;
    pthread_mutex_unlock(&agent_mu);
    if (a == NULL)
        return;
    /* Not joined: the loop that drains must not wait for Redis. The agent
     * withdraws the part and ends on its own; a process that exits first
     * leaves the part to expire (M0_PRESENCE_PART_TTL_MS). Loops may still
     * note (their last holds closing): the agent stays allocated for the
     * process's life and drops their notes. */
    pthread_mutex_lock(&a->mu);
    a->stopping = 1;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_detach(a->tid);
}
