/*
 * broker.c — a worker's side of the Redis engine (see broker.h,
 * broker_engine.h, docs/broker.md): two connections on the worker's own
 * loop (rconn.h: TCP, unix or TLS; each dialled, handshaken and backed off
 * by broker_conn.c, placed by broker_sentinel.c).
 *
 *   reader    XREAD BLOCK on the all-channel log from the last id this
 *             worker saw: events arrive in id order and go to the registry
 *             (journal, fan-out) through hold.c. A reconnect resumes from
 *             that id — on the same server, or on the node a failover left
 *             (the log and the counter are replicated) — so what was
 *             published meanwhile is caught up; an id that does not follow
 *             the previous one means the log no longer had it (trimmed, or
 *             the broker lost its data): live streams get m0-gap, as with a
 *             full local bus. While fan-outs are backed up the next XREAD
 *             waits (events wait in Redis).
 *   commands  resumes (M0_BROKER_REPLAY_LUA) and a once-a-second probe of
 *             the counter, for /health's lag.
 *
 * Resumes asked while the broker is down wait (at most MAX_WAITING;
 * beyond, 503 and the client retries). Nothing here blocks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "m0/broker.h"
#include "m0/broker_engine.h"
#include "m0/broker_grip.h"
#include "m0/broker_pub.h"
#include "m0/broker_reply.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/fork.h"
#include "m0/rt.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/loop.h"
#include "m0/rconn.h"
#include "m0/sse.h"
#include "broker_int.h"

#define READ_COUNT 256              /* log entries per XREAD */
#define BLOCK_MS 5000               /* XREAD BLOCK: an idle reader hears from Redis this often */
#define SILENCE_MS (BLOCK_MS + 10000) /* no reply to an XREAD for this long: the connection is dead */
#define PROBE_MS 1000               /* counter probe, for /health's lag */
#define PACE_MS 1                   /* under load, one XREAD per reader per ms (see on_read) */
#define MAX_WAITING 1024            /* resumes queued while the command connection is down */

/* A resume waiting for (or in flight to) the broker. */
struct resume {
    struct resume *next;
    struct broker *b;
    uint32_t slot, gen;
    uint64_t last;
    size_t clen;
    char channel[];
};

/* Per process, written once by m0_broker_redis_prepare before the loop runs
 * and read-only afterwards: where the log stood at boot. */
static int boot_known;              /* the counter was read */
static uint64_t boot_position;

static void issue_read(struct broker *b);
static void send_resume(struct broker *b, struct resume *r);

static uint64_t now_ms(const struct broker *b)
{
    return m0_loop_now(b->loop);
}

static void set_position(struct broker *b, uint64_t id)
{
    __atomic_store_n(&b->position, id, __ATOMIC_SEQ_CST);
}

/* The newest event id this worker has read from the broker (0: none yet). */
static uint64_t position(const struct broker *b)
{
    return __atomic_load_n(&b->position, __ATOMIC_SEQ_CST);
}

/* The reader's check after a reconnect to the primary: the counter-raise
 * script's answer. (A reader of a replica re-reads instead: see
 * m0_broker_conn_up.) */
static void on_raise(struct m0_rconn *c, redisReply *r, void *priv)
{
    struct broker *b = priv;
    (void)c;
    if (r == NULL || b->stopped)
        return;
    uint64_t at = position(b);
    enum m0_breply k = m0_breply_classify(r, M0_BCMD_INTEGER);
    if (k == M0_BREPLY_UNEXPECTED) {
        m0_bconn_out_of_step(&b->rd, "the counter check");
        return;
    }
    if (k != M0_BREPLY_OK || r->integer != 1)
        return;
    m0_warn("broker %s came back with its counter below id %llu, which this worker had read: it lost "
            "acknowledged events; the counter was raised and live streams are told (m0-gap)",
            b->cfg->shown, (unsigned long long)at);
    b->gaps++;
    m0_rt_lost(b->rt, at);
}

static void on_position(struct m0_rconn *c, redisReply *r, void *priv);

/* Resumes answer from the counter and join at it: they go once the command
 * connection is up and the reader knows where it stands (else events
 * between the two could fall through). */
static int can_resume(const struct broker *b)
{
    return b->cmd.state == M0_BC_UP && b->positioned && !b->stopped;
}

static void flush_waiting(struct broker *b)
{
    if (!can_resume(b))
        return;
    while (b->wait_head != NULL) {
        struct resume *r = b->wait_head;
        b->wait_head = r->next;
        b->nwait--;
        b->wait_bytes -= sizeof *r + r->clen;
        send_resume(b, r);
    }
    b->wait_tail = NULL;
}

/* A data connection answered its handshake (broker_conn.c): the reader
 * starts or resumes reading, the command connection sends what waited. */
void m0_broker_conn_up(struct bconn *bc)
{
    struct broker *b = bc->b;
    if (bc == &b->rd) {
        b->reading = 0;
        if (!b->positioned) {
            m0_rconn_commandf(bc->rc, on_position, b, "GET %s", b->seq_key);
        } else if (b->read_replica) {
            /* A replica's counter below the position proves nothing: the
             * replica may lag (the events follow in a moment). The last
             * entries read are read again instead and compared: only an
             * entry that differs is a loss (take_entry, broker_seen.h). */
            uint64_t at = position(b), from = m0_seen_begin(&b->seen, at);
            if (from < at)
                m0_debug("broker %s: reader at %s:%d: re-reading ids %llu..%llu to check the log still holds them",
                         b->cfg->shown, bc->at.host, bc->at.port, (unsigned long long)from + 1,
                         (unsigned long long)at);
            issue_read(b);
        } else {
            char at[32];
            snprintf(at, sizeof at, "%llu", (unsigned long long)position(b));
            const char *argv[] = {"EVAL", M0_BROKER_RAISE_LUA, "1", b->seq_key, at};
            m0_rconn_command(bc->rc, on_raise, b, (int)M0_ARRAY_LEN(argv), argv, NULL);
            issue_read(b);
        }
    } else {
        b->probing = 0;
        flush_waiting(b);
    }
}

/* ---------------------------------------------------------------- reader */

static void on_position(struct m0_rconn *c, redisReply *r, void *priv)
{
    struct broker *b = priv;
    (void)c;
    if (r == NULL || b->stopped)
        return;
    char why[200];
    uint64_t p = 0;
    switch (m0_breply_classify(r, M0_BCMD_COUNTER)) {
    case M0_BREPLY_OK:
        if (r->type == REDIS_REPLY_STRING)
            m0_u64_parse(r->str, r->len, &p);
        break;
    case M0_BREPLY_ERROR:
        m0_bconn_refusal(why, sizeof why, "GET", r);
        m0_bconn_fail(&b->rd, why, 0);
        return;
    case M0_BREPLY_UNEXPECTED:
        if (r->type == REDIS_REPLY_STRING) {
            snprintf(why, sizeof why, "%s is not a counter (the key holds something else)", b->seq_key);
            m0_bconn_fail(&b->rd, why, 0);
        } else {
            m0_bconn_out_of_step(&b->rd, "GET");
        }
        return;
    }
    /* Start from the newest id: what came before is not in this worker's
     * journal (resumes from below it go to the broker). */
    b->positioned = 1;
    b->newest = p;
    set_position(b, p);
    m0_rt_floor(b->rt, p);
    struct m0_rt_stats st;
    m0_rt_stats(b->rt, &st);
    if (p != 0 && st.held > 0) {
        /* Streams held before the broker could first be reached may have
         * missed events published meanwhile: they are told (m0-gap). */
        m0_rt_lost(b->rt, p);
    }
    m0_info("broker %s: reading events after id %llu", b->cfg->shown, (unsigned long long)p);
    issue_read(b);
    flush_waiting(b);
}

/* An entry's fingerprint (broker_seen.h): its fields, names and values. */
static uint64_t entry_sum(const redisReply *fields)
{
    uint64_t h = M0_SEEN_SUM0;
    for (size_t i = 0; i < fields->elements; i++) {
        const redisReply *f = fields->element[i];
        uint64_t len = f->type == REDIS_REPLY_STRING ? (uint64_t)f->len : UINT64_MAX;
        h = m0_seen_mix(h, &len, sizeof len);
        if (f->type == REDIS_REPLY_STRING)
            h = m0_seen_mix(h, f->str, f->len);
    }
    return h;
}

/* One log entry, in order. */
static void take_entry(struct broker *b, const redisReply *e)
{
    if (!m0_breply_entry_ok(e))
        return;
    uint64_t id = m0_breply_entry_id(e->element[0]);
    uint64_t at = position(b);
    if (id == 0)
        return;                 /* malformed */
    uint64_t sum = b->read_replica ? entry_sum(e->element[1]) : 0;
    if (id <= at) {
        /* Already seen: re-read after a reconnect to a replica, it must be
         * the same entry, else the log lost what this worker read. */
        if (b->read_replica && m0_seen_recheck(&b->seen, id, sum) == M0_SEEN_LOST) {
            m0_warn("broker %s: the log at %s:%d holds another event under id %llu than this worker read: the "
                    "failover lost acknowledged events (up to id %llu); live streams are told (m0-gap)",
                    b->cfg->shown, b->rd.at.host, b->rd.at.port, (unsigned long long)id, (unsigned long long)at);
            b->gaps++;
            m0_rt_lost(b->rt, at);
        }
        return;
    }
    if (b->read_replica)
        m0_seen_done(&b->seen);
    const redisReply *ch = m0_breply_field(e->element[1], "c"), *f = m0_breply_field(e->element[1], "f");
    const redisReply *seeded = m0_breply_field(e->element[1], "s");
    int reseed = seeded != NULL && seeded->len == 1 && seeded->str[0] == '1';
    if (at != 0 && (id != at + 1 || reseed)) {
        /* Ids in between were issued and are no longer in the log (it was
         * trimmed while we were away), or the broker restarted its count
         * (it lost its data: what we had not read is gone). */
        b->gaps++;
        m0_rt_lost(b->rt, id - 1);
    }
    set_position(b, id);
    b->events++;
    if (b->read_replica)
        m0_seen_note(&b->seen, id, sum);
    if (ch == NULL || f == NULL || m0_sse_channel_error(ch->str, ch->len) != NULL ||
        f->len > M0_BROKER_FRAME_MAX)
        return;                 /* not ours, or malformed: skipped, its id still counted */
    m0_broker_entry_frame(&b->frame, id, f->str, f->len);     /* an SSE event's id line; a GRIP item as it is */
    m0_rt_event(b->rt, ch->str, ch->len, id, b->frame.data, b->frame.len);
}

static void on_read(struct m0_rconn *c, redisReply *r, void *priv)
{
    struct broker *b = priv;
    (void)c;
    b->reading = 0;
    if (r == NULL || b->stopped)
        return;                 /* the connection went: on_disconnect retries */
    enum m0_breply kind = m0_breply_classify(r, M0_BCMD_XREAD);
    if (kind == M0_BREPLY_ERROR) {
        char why[200];
        snprintf(why, sizeof why, "XREAD failed: %.160s", r->str);
        m0_bconn_fail(&b->rd, why, 1);
        return;
    }
    if (kind == M0_BREPLY_UNEXPECTED) {
        m0_bconn_out_of_step(&b->rd, "XREAD");
        return;
    }
    if (r->type == REDIS_REPLY_ARRAY) {
        /* [[key, [entry, ...]]] (the shape was checked) */
        for (size_t k = 0; k < r->elements; k++) {
            const redisReply *entries = r->element[k]->element[1];
            for (size_t i = 0; i < entries->elements; i++)
                take_entry(b, entries->element[i]);
        }
        m0_rt_settle(b->rt);
        if (b->frame.cap > 256 * 1024)
            m0_buf_free(&b->frame);
        /* Under a stream of publishes every reply comes back at once with
         * an event or two, and each reader's next XREAD would cost Redis a
         * command per event: one XREAD per PACE_MS lets events gather
         * instead (at most a millisecond more under load; none when the
         * XREAD had been waiting, as it has between sparse events). */
        uint64_t now = now_ms(b);
        if (now < b->read_sent + PACE_MS) {
            b->paced_until = b->read_sent + PACE_MS;
            m0_loop_wake_at(b->loop, b->paced_until);
            return;
        }
    }
    issue_read(b);              /* NIL: BLOCK timed out with nothing new */
}

static void issue_read(struct broker *b)
{
    if (b->stopped || b->rd.state != M0_BC_UP || b->reading || !b->positioned)
        return;
    if (m0_rt_busy(b->rt)) {
        b->stalled = 1;         /* the hook reads again once fan-outs caught up */
        return;
    }
    b->stalled = 0;
    b->paced_until = 0;
    uint64_t after = position(b);
    m0_seen_rereading(&b->seen, &after);        /* re-reading after a reconnect: from the next to check */
    char from[32];
    snprintf(from, sizeof from, "%llu-0", (unsigned long long)after);
    if (m0_rconn_commandf(b->rd.rc, on_read, b, "XREAD COUNT %d BLOCK %d STREAMS %s %s", READ_COUNT, BLOCK_MS,
                          b->log_key, from) == M0_OK) {
        b->reading = 1;
        b->read_sent = now_ms(b);
    }
}

/* --------------------------------------------------------------- resumes */

static void deliver_gap(struct broker *b, const struct resume *res, uint64_t last, uint64_t from, int unknown)
{
    b->resume_gaps++;
    m0_rt_replay_gap(b->rt, res->slot, last, from, unknown);
}

/*
 * The broker's answer to a resume from last: {counter, found, entries after
 * last newest first (at most retention + 1)}. Replays what the client
 * missed, oldest first, with an m0-gap first when something after last is
 * no longer retained, then subscribes the slot with the filter set past
 * everything the reply covered (events the worker reads later pass it; ones
 * it already journaled after the counter are replayed by the registry).
 */
static void finish_resume(struct broker *b, struct resume *res, const redisReply *r)
{
    if (!m0_rt_awaiting(b->rt, res->slot, res->gen))
        return;                 /* the client left meanwhile */
    if (m0_breply_classify(r, M0_BCMD_RESUME) != M0_BREPLY_OK) {
        /* The broker answered something else (an error): resync from now. */
        uint64_t at = position(b);
        deliver_gap(b, res, res->last, at + 1, 0);
        m0_rt_join(b->rt, res->slot, res->gen, res->channel, res->clen, at);
        return;
    }
    uint64_t top = 0;
    m0_u64_parse(r->element[0]->str, r->element[0]->len, &top);
    int found = r->element[1]->integer == 1;
    const redisReply *entries = r->element[2];
    if (res->last > top) {
        /* An id the broker never issued: the client resyncs, the stream
         * starts from now. */
        deliver_gap(b, res, 0, 0, 1);
        m0_rt_join(b->rt, res->slot, res->gen, res->channel, res->clen, top);
        return;
    }
    /* Newest first: keep what fits in --replay-bytes. */
    size_t n = entries->elements, keep = 0, bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (!m0_breply_entry_ok(entries->element[i]))
            n = i;                  /* malformed: treat the rest as not retained */
    }
    while (keep < n) {
        const redisReply *f = m0_breply_field(entries->element[keep]->element[1], "f");
        size_t len = f ? f->len + 32 : 0;
        if (bytes + len > b->replay_bytes)
            break;
        bytes += len;
        keep++;
    }
    int whole = found && (long)n <= b->cfg->retention && keep == n;
    uint64_t oldest = keep > 0 ? m0_breply_entry_id(entries->element[keep - 1]->element[0]) : top + 1;
    if (!whole)
        deliver_gap(b, res, res->last, oldest, 0);
    uint64_t through = res->last;
    for (size_t i = keep; i-- > 0;) {
        const redisReply *e = entries->element[i];
        uint64_t id = m0_breply_entry_id(e->element[0]);
        const redisReply *f = m0_breply_field(e->element[1], "f");
        if (id <= through || f == NULL)
            continue;
        m0_broker_entry_frame(&b->frame, id, f->str, f->len);
        m0_rt_replay(b->rt, res->slot, b->frame.data, b->frame.len);
        through = id;
    }
    /* Nothing of this channel exists between the last replayed event and
     * the counter: the filter starts at the counter. */
    m0_rt_join(b->rt, res->slot, res->gen, res->channel, res->clen, through > top ? through : top);
}

static void on_resume(struct m0_rconn *c, redisReply *r, void *priv)
{
    struct resume *res = priv;
    struct broker *b = res->b;
    (void)c;
    if (b == NULL || b->stopped) {
        free(res);
        return;
    }
    b->inflight--;
    enum m0_breply k = m0_breply_classify(r, M0_BCMD_RESUME);
    if (r == NULL || k == M0_BREPLY_UNEXPECTED) {
        /* The connection went before the answer (or answered out of step):
         * ask again after reconnecting. */
        res->next = b->wait_head;
        b->wait_head = res;
        if (b->wait_tail == NULL)
            b->wait_tail = res;
        b->nwait++;
        b->wait_bytes += sizeof *res + res->clen;
        if (r != NULL)
            m0_bconn_out_of_step(&b->cmd, "a resume");
        return;
    }
    if (k == M0_BREPLY_ERROR) {
        m0_error("broker %s: resume on %s failed: %s", b->cfg->shown, M0_LOG_TEXT(res->channel, res->clen),
                 M0_LOG_TEXT(r->str, strlen(r->str)));
        m0_bconn_note_error(b, r->str);
    }
    finish_resume(b, res, r);
    free(res);
}

static void send_resume(struct broker *b, struct resume *res)
{
    char key[320], from[32], count[24];
    snprintf(key, sizeof key, "%sch:%.*s", b->cfg->prefix, (int)res->clen, res->channel);
    snprintf(from, sizeof from, "%llu-0", (unsigned long long)res->last);
    snprintf(count, sizeof count, "%ld", b->cfg->retention + 1);
    const char *argv[] = {"EVAL", M0_BROKER_REPLAY_LUA, "2", b->seq_key, key, from, count};
    if (m0_rconn_command(b->cmd.rc, on_resume, res, (int)M0_ARRAY_LEN(argv), argv, NULL) != M0_OK) {
        res->next = NULL;
        if (b->wait_tail)
            b->wait_tail->next = res;
        else
            b->wait_head = res;
        b->wait_tail = res;
        b->nwait++;
        b->wait_bytes += sizeof *res + res->clen;
        return;
    }
    b->inflight++;
    b->resumes++;
}

/* The engine's resume (rt.h, struct m0_rt_source_ops.resume): replayed
 * from the channel's stream when the reply arrives. */
static int broker_resume(void *ctx, uint32_t slot, uint32_t gen, const char *channel, size_t clen, uint64_t last_id)
{
    struct broker *b = ctx;
    if (b->stopped)
        return M0_ERR;
    if (!can_resume(b) && b->nwait >= MAX_WAITING)
        return M0_ERR;
    struct resume *res = m0_xmalloc(sizeof *res + clen);
    res->next = NULL;
    res->b = b;
    res->slot = slot;
    res->gen = gen;
    res->last = last_id;
    res->clen = clen;
    memcpy(res->channel, channel, clen);
    if (can_resume(b)) {
        send_resume(b, res);
    } else {
        if (b->wait_tail)
            b->wait_tail->next = res;
        else
            b->wait_head = res;
        b->wait_tail = res;
        b->nwait++;
        b->wait_bytes += sizeof *res + clen;
    }
    return M0_OK;
}

/* ------------------------------------------------------------------ hook */

static void on_probe(struct m0_rconn *c, redisReply *r, void *priv)
{
    struct broker *b = priv;
    (void)c;
    if (b->stopped)
        return;
    b->probing = 0;
    if (r == NULL)
        return;
    enum m0_breply k = m0_breply_classify(r, M0_BCMD_COUNTER);
    if (k == M0_BREPLY_UNEXPECTED && r->type != REDIS_REPLY_STRING)
        m0_bconn_out_of_step(&b->cmd, "GET");
    else if (k == M0_BREPLY_OK && r->type == REDIS_REPLY_STRING)
        m0_u64_parse(r->str, r->len, &b->newest);
}

static void broker_hook(struct m0_loop *l, void *ctx)
{
    struct broker *b = ctx;
    if (b->stopped)
        return;
    uint64_t now = m0_loop_now(l);
    if (b->cfg->sentinel) {
        m0_sentinel_tend(b, now);
        m0_bconn_tend(&b->snt, now);
    }
    m0_bconn_tend(&b->rd, now);
    m0_bconn_tend(&b->cmd, now);
    if (b->rd.state == M0_BC_UP && b->reading) {
        if (now - b->read_sent > SILENCE_MS) {
            char why[80];
            snprintf(why, sizeof why, "no reply to XREAD for %d s", SILENCE_MS / 1000);
            m0_bconn_fail(&b->rd, why, 1);
        } else {
            m0_loop_wake_at(l, b->read_sent + SILENCE_MS + 1);
        }
    }
    if (b->stalled || (b->paced_until != 0 && now >= b->paced_until))
        issue_read(b);
    else if (b->paced_until != 0)
        m0_loop_wake_at(l, b->paced_until);
    if (b->cmd.state == M0_BC_UP && now >= b->next_probe) {
        if (!b->probing && m0_rconn_commandf(b->cmd.rc, on_probe, b, "GET %s", b->seq_key) == M0_OK)
            b->probing = 1;
        b->next_probe = now + PROBE_MS;
    }
    if (b->cmd.state == M0_BC_UP)
        m0_loop_wake_at(l, b->next_probe);
}

/* ------------------------------------------------------------- lifecycle */

void m0_broker_redis_prepare(void)
{
    char err[256];
    /* Once, before the loop runs: a DNS lookup on the loop would stall it. */
    m0_sentinel_prepare();
    int rc = m0_broker_counter(&boot_position, err, sizeof err);
    boot_known = rc == M0_OK;
    if (rc == M0_ERR)
        m0_debug("%s (the worker reads the log once it connects)", err);
}

/* In a child forked by the application (fork.h): the two sockets, without
 * a word to Redis (they are the parent's conversations). */
static void close_in_child(void *ctx)
{
    struct broker *b = ctx;
    struct bconn *each[] = {&b->rd, &b->cmd, &b->snt};
    for (size_t i = 0; i < M0_ARRAY_LEN(each); i++)
        if (each[i]->rc != NULL)
            m0_rconn_close_fd(each[i]->rc);   /* the rest is left alone: freeing it would talk */
}

void *m0_broker_redis_new(struct m0_rt *rt, struct m0_loop *l, const struct m0_config *cfg)
{
    struct broker *b = m0_xmalloc(sizeof *b);
    memset(b, 0, sizeof *b);
    b->rt = rt;
    b->loop = l;
    b->replay_bytes = (size_t)cfg->replay_bytes;
    b->cfg = m0_broker;
    m0_bconn_init(&b->rd, b, "reader", 0);
    m0_bconn_init(&b->cmd, b, "commands", 0);
    m0_bconn_init(&b->snt, b, "sentinel", 1);
    b->read_replica = b->cfg->sentinel && b->cfg->min_replicas > 0;
    snprintf(b->seq_key, sizeof b->seq_key, "%sseq", b->cfg->prefix);
    snprintf(b->log_key, sizeof b->log_key, "%slog", b->cfg->prefix);
    return b;
}

/* Begin (rt.h, start): the engine reads this position from now on. */
static int broker_start(void *ctx)
{
    struct broker *b = ctx;
    set_position(b, 0);
    m0_rt_set_position(b->rt, &b->position);
    if (boot_known) {
        b->positioned = 1;
        b->newest = boot_position;
        set_position(b, boot_position);
        m0_rt_floor(b->rt, boot_position);
        m0_info("broker %s: reading events after id %llu", b->cfg->shown, (unsigned long long)boot_position);
    }
    if (b->cfg->sentinel)
        m0_bconn_tend(&b->snt, m0_loop_now(b->loop));
    m0_bconn_tend(&b->rd, m0_loop_now(b->loop));
    m0_bconn_tend(&b->cmd, m0_loop_now(b->loop));
    m0_loop_add_hook(b->loop, broker_hook, b);
    m0_fork_on_child(close_in_child, b);
    return M0_OK;
}

/* Drain (rt.h, stop): stop reading and answering resumes. */
static void broker_stop(void *ctx)
{
    struct broker *b = ctx;
    if (b->stopped)
        return;
    b->stopped = 1;
    m0_bconn_hang_up(&b->rd);
    m0_bconn_hang_up(&b->cmd);
    m0_bconn_hang_up(&b->snt);
    while (b->wait_head != NULL) {
        struct resume *r = b->wait_head;
        b->wait_head = r->next;
        free(r);
    }
    b->wait_tail = NULL;
    b->nwait = b->wait_bytes = 0;
}

static void broker_free(void *ctx)
{
    struct broker *b = ctx;
    broker_stop(b);
    m0_fork_forget(b);
    m0_buf_free(&b->frame);
    free(b);
    /* the hook stays registered with the loop, which is freed next: it
     * must not run again (the loop has stopped). */
}

/* The primary as HOST:PORT: the sentinels' (unknown: ""), or the URL's. */
static void primary_of(const struct broker *b, char *out, size_t cap)
{
    const struct m0_hostport *p = b->cfg->sentinel ? &b->primary : &b->cfg->hosts[0];
    if (b->cfg->is_unix)
        snprintf(out, cap, "%s", b->cfg->path);
    else if (p->port == 0)
        out[0] = '\0';
    else
        snprintf(out, cap, strchr(p->host, ':') ? "[%s]:%d" : "%s:%d", p->host, p->port);
}

static int healthy(const struct broker *b)
{
    return b->rd.state == M0_BC_UP && b->cmd.state == M0_BC_UP && m0_sentinel_ok(b);
}

/* The /health "broker" object (rt.h, health); 1 when both connections are
 * up and, with Sentinel, the sentinels answer and see the primary up (else
 * /health says "degraded"). */
static int broker_health(const void *ctx, struct m0_buf *out)
{
    const struct broker *b = ctx;
    int connected = healthy(b);
    uint64_t at = position(b);
    char primary[300], from[300] = "";
    primary_of(b, primary, sizeof primary);
    if (b->rd.state == M0_BC_UP && b->cfg->sentinel)
        snprintf(from, sizeof from, strchr(b->rd.at.host, ':') ? "[%s]:%d" : "%s:%d", b->rd.at.host, b->rd.at.port);
    else if (b->rd.state == M0_BC_UP)
        snprintf(from, sizeof from, "%s", primary);
    m0_buf_puts(out, "{\"engine\": \"redis\", \"url\": ");
    m0_buf_json_str(out, b->cfg->shown, strlen(b->cfg->shown));
    m0_buf_printf(out, ", \"mode\": \"%s\", \"tls\": %s, \"primary\": ", b->cfg->sentinel ? "sentinel" : "standalone",
                  b->cfg->tls ? "true" : "false");
    m0_buf_json_str(out, primary, strlen(primary));
    m0_buf_puts(out, ", \"reading_from\": ");
    m0_buf_json_str(out, from, strlen(from));
    m0_buf_printf(out, ", \"min_replicas\": %d", b->cfg->min_replicas);
    if (b->cfg->sentinel)
        m0_buf_printf(out, ", \"sentinel\": \"%s\", \"primary_down\": %s, \"switches\": %llu",
                      m0_bconn_state_name(b->snt.state), b->primary_down ? "true" : "false",
                      (unsigned long long)b->switches);
    m0_buf_printf(out, ", \"connected\": %s, \"reader\": \"%s\", \"commands\": \"%s\"", connected ? "true" : "false",
                  m0_bconn_state_name(b->rd.state), m0_bconn_state_name(b->cmd.state));
    m0_broker_health_reading(out, &(struct m0_broker_reading){
        .at = at, .newest = b->newest, .events = b->events, .gaps = b->gaps, .reconnects = b->reconnects,
        .resumes = b->resumes, .resume_gaps = b->resume_gaps, .inflight = b->inflight, .waiting = b->nwait,
        .waiting_max = MAX_WAITING});
    m0_buf_printf(out, ", \"waiting_bytes\": %zu, \"last_error\": ", b->wait_bytes);
    m0_buf_json_str(out, b->last_error, strlen(b->last_error));
    m0_buf_puts(out, "}");
    return connected;
}

static void broker_stats(const void *ctx, struct m0_rt_source_stats *out)
{
    const struct broker *b = ctx;
    uint64_t at = position(b);
    out->up = healthy(b);
    out->lag = b->newest > at ? b->newest - at : 0;
    out->reconnects = b->reconnects;
    out->engine = "redis";
    primary_of(b, out->primary, sizeof out->primary);
}

const struct m0_rt_source_ops m0_broker_redis_source = {
    .name = "broker",
    .start = broker_start,
    .stop = broker_stop,
    .free = broker_free,
    .resume = broker_resume,
    .health = broker_health,
    .stats = broker_stats,
};
