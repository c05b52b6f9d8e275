/*
 * rt.h — a loop's realtime engine (DESIGN capabilities 4 and 5): the
 * registry of subscribers and its journal, the reorder window of the local
 * bus, gap notices, and the counters /health and the metrics show. It knows
 * no connection: events come from a source and go to a sink, and a
 * subscriber is a (slot, generation) pair.
 *
 *   source    where events come from: the local datagram bus (read here,
 *             put back in id order, order.h) or another source started in
 *             its place — the broker (broker.h), which feeds the engine
 *             with m0_rt_event and answers the resumes the engine hands it;
 *   sink      where they go: the holds (hold.h), which queue each delivery
 *             on the slot's connection, write a fan-out pass corked, and
 *             say whether a slot still waits for its resume.
 *   watcher   who follows the subscriptions and events without taking
 *             part in them: occupancy and presence (presence_loop.h), set
 *             by the composition root (serve.c, the loop's presence
 *             extension), so neither the engine nor the holds name it.
 *
 * A fan-out is done in slices of FANOUT_BUDGET subscribers per loop pass
 * (so one event to many thousands of streams never holds the loop), corked:
 * the sink queues each delivery and writes every connection touched once at
 * the end of the pass.
 *
 * Nothing is lost silently: when the loop learns it missed events — a
 * publisher found its bus full (the shared lost[] marker), an id never
 * arrived within the reorder window, or the source says so — every live
 * subscriber gets an "event: m0-gap" notice, and the journal's floor rises
 * so a resume across the hole gets one too.
 *
 * One engine per loop, loop thread only (but m0_rt_newest: any thread).
 */
#ifndef M0_RT_H
#define M0_RT_H

#include "m0/types.h"
#include "m0/buf.h"

struct m0_channel_stat;
struct m0_config;
struct m0_loop;
struct m0_rt;

/* Counters for /health and the metrics. The engine keeps them; the sink
 * counts its own (held, websockets, slow_closed) through m0_rt_counters. */
struct m0_rt_stats {
    uint32_t held;              /* held streams, WebSockets included */
    uint32_t websockets;        /* of which WebSockets */
    uint64_t received;          /* events this loop received (its bus or the broker) */
    uint64_t delivered;         /* event copies handed to the sink */
    uint64_t slow_closed;       /* held streams closed for exceeding --outbox-limit */
    uint64_t lost;              /* events this loop knows it missed */
    uint64_t late;              /* events dropped as out of order past the window */
};

/* What an event is, decided once by the engine where it hands it over
 * (the sink never looks at its bytes to know). */
enum m0_rt_kind {
    M0_RT_SSE,        /* a framed SSE event, its id line first (bus.h, m0pub.publish) */
    M0_RT_GRIP,       /* a GRIP item (grip_item.h: m0_grip_item_decode reads frame) */
    M0_RT_NOTICE,     /* the server's own notice to a stream (an m0-gap event, no id) */
};

/* One event as the sink gets it: typed, its bytes as they are journaled. */
struct m0_rt_event {
    uint64_t id;           /* the event's id (0: a notice) */
    uint8_t kind;          /* enum m0_rt_kind */
    uint8_t replay;        /* from a journal or a source's replay: may go past the
                              outbox limit, as a journal replay may */
    const char *frame;
    size_t n;
};

/* Where deliveries go (the holds). Every callback gets ctx. */
struct m0_rt_sink {
    void *ctx;
    /* One event for the subscriber in slot. */
    void (*deliver)(void *ctx, uint32_t slot, const struct m0_rt_event *ev);
    /* A fan-out pass begins: deliveries may be queued until flush. once:
     * no subscriber gets more than one delivery before flush (one event
     * in flight), so nothing is gained by queueing them. */
    void (*cork)(void *ctx, int once);
    /* Subscribers written to or with bytes queued since cork. */
    unsigned (*corked)(const void *ctx);
    /* After a batch of deliveries: write what a corked pass queued, then
     * close the subscribers the deliveries doomed (never during them). */
    void (*flush)(void *ctx);
    /* Is slot still the subscriber of generation gen, waiting for a
     * source's resume (not closed, not doomed)? */
    int (*awaiting)(void *ctx, uint32_t slot, uint32_t gen);
};

/* A source's numbers for the metrics (all zero without a source). */
struct m0_rt_source_stats {
    int up;                     /* connected (a broker: both connections) */
    uint64_t lag;               /* events it has that this loop has not read */
    uint64_t reconnects;
    const char *engine;         /* a broker: its engine ("redis"); NULL: none */
    char primary[280];          /* where its writes go now: "HOST:PORT" ("" not known) */
};

/* A source of events in place of the local bus (the broker). ctx is what
 * the source was made with. */
struct m0_rt_source_ops {
    const char *name;
    /* Begin reading (go): connect without waiting. M0_OK or M0_ERR. */
    int (*start)(void *ctx);
    /* Drain: stop reading and answering resumes. */
    void (*stop)(void *ctx);
    void (*free)(void *ctx);
    /* Resume slot (generation gen) on channel from last_id: the source
     * replays through m0_rt_replay, then m0_rt_join; later live events
     * follow with no duplicates. M0_OK (queued), or M0_ERR (too many wait:
     * the caller answers 503). */
    int (*resume)(void *ctx, uint32_t slot, uint32_t gen, const char *channel, size_t clen, uint64_t last_id);
    /* Append its /health object (JSON; a broker's carries "engine",
     * "primary", "connected" and "lag"); returns 1 when it is healthy. */
    int (*health)(const void *ctx, struct m0_buf *out);
    void (*stats)(const void *ctx, struct m0_rt_source_stats *out);
};

/* Who follows the registry without taking part in it (occupancy and
 * presence: presence_loop.h's m0_presence_loop_watch). The engine calls it
 * on its loop thread; every callback gets the ctx given to m0_rt_watch. */
struct m0_rt_watch_ops {
    /* The loop starts reading events as bus endpoint blk. */
    void (*start)(void *ctx, int blk);
    /* The loop stops reading (drains). */
    void (*stop)(void *ctx);
    /* The sub slot's next subscription is held for (m0_rt_presence). */
    void (*sub)(void *ctx, uint32_t slot, const char *sub, size_t slen);
    /* slot is subscribed to channel (a name, or a '\n'-separated list);
     * last(lctx, name, len): the newest id this loop's journal knows on
     * one of its channels. */
    void (*join)(void *ctx, uint32_t slot, const char *channel, size_t clen,
                 uint64_t (*last)(void *lctx, const char *name, size_t len), void *lctx);
    /* slot's subscription ended (or its resume was refused). */
    void (*leave)(void *ctx, uint32_t slot);
    /* An event numbered id went out on channel. */
    void (*event)(void *ctx, const char *channel, size_t clen, uint64_t id);
};

/* ------------------------------------------------------------ lifecycle */

/* The engine of loop l for nslots subscriber slots (cfg: --replay,
 * --replay-bytes, --replay-total), delivering to sink (copied). Nothing
 * is read yet. Never NULL. */
struct m0_rt *m0_rt_new(struct m0_loop *l, const struct m0_config *cfg, uint32_t nslots, const struct m0_rt_sink *sink);
/* Set the engine's watcher: ops with ctx (the caller's: it outlives the
 * watch), or ops NULL for none (the default). Set it before m0_rt_start
 * (its start is called there); unset it before ctx is freed. Loop thread. */
void m0_rt_watch(struct m0_rt *rt, const struct m0_rt_watch_ops *ops, void *ctx);
/* Which of its worker's event loops (--threads) this engine serves,
 * 0..m0_bus_loops-1 (default 0): it reads that loop's bus endpoint. Before
 * m0_rt_start. */
void m0_rt_set_loop(struct m0_rt *rt, int loop_index);
/* --realtime, before the worker reports booted: the fan-out hook. M0_OK,
 * or M0_ERR without a bus (the master made none). Idempotent. */
int m0_rt_prepare(struct m0_rt *rt);
/* Start reading (go): the local bus, or src (with src_ctx) in its place.
 * M0_OK or M0_ERR (logged). */
int m0_rt_start(struct m0_rt *rt, const struct m0_rt_source_ops *src, void *src_ctx);
/* Stop reading (drain: a replacement worker reads the bus next). */
void m0_rt_stop_reading(struct m0_rt *rt);
/* Free the engine and its source. rt may be NULL. */
void m0_rt_free(struct m0_rt *rt);

/* Is an event source being read (a channel can be subscribed)? */
int m0_rt_reading(const struct m0_rt *rt);
/* The newest event id this loop knows: the source's read position, else
 * the bus's counter (0 before the first). ctx is the engine (const void *,
 * to serve as struct m0_runner_env.newest_id). Any thread. */
uint64_t m0_rt_newest(const void *ctx);

void m0_rt_stats(const struct m0_rt *rt, struct m0_rt_stats *out);
/* The counters, for the sink to count its own in. */
struct m0_rt_stats *m0_rt_counters(struct m0_rt *rt);
/* The busiest channels, for /health (see m0_registry_top). */
size_t m0_rt_top(const struct m0_rt *rt, struct m0_channel_stat *out, size_t max);
/* The source's /health object ("null" without one); 1 when it is healthy
 * (0 without one). */
int m0_rt_source_health(const struct m0_rt *rt, struct m0_buf *out);
void m0_rt_source_stats(const struct m0_rt *rt, struct m0_rt_source_stats *out);

/* ------------------------------------------------------------ the sink */

/*
 * Subscribe slot (generation gen) to channel (or a '\n'-separated list of
 * up to 32 channels, registry.h; a list is resumed from this loop's
 * journals, never the source) for a hold decided when the
 * newest id was start, with the client's Last-Event-ID last (0: none).
 * What the journal holds after it is delivered now (a resume), or, when
 * last is ahead of this loop or behind its journal and a source can
 * answer, the source resumes it later. An id never issued gets an m0-gap
 * notice and a fresh start. Returns M0_OK, or M0_ERR when the source
 * cannot take the resume (the caller answers 503).
 */
int m0_rt_subscribe(struct m0_rt *rt, uint32_t slot, uint32_t gen, const char *channel, size_t clen, uint64_t last,
                    uint64_t start);
void m0_rt_unsubscribe(struct m0_rt *rt, uint32_t slot);
/* The sub slot's next subscription is held for, for occupancy and presence
 * (presence.h): a grant's "sub", a view's M0-Presence (slen 0: none).
 * Before m0_rt_subscribe; forgotten at m0_rt_unsubscribe. Passed to the
 * watcher (nothing without one). */
void m0_rt_presence(struct m0_rt *rt, uint32_t slot, const char *sub, size_t slen);

/* ---------------------------------------------------------- queries */

/* A view's question to its loop's journal (m0pub.history, channel_info's
 * last id): the events of a channel after since (or with tail the newest
 * limit), as records of a u64 id and a u32 length (little-endian) and the
 * SSE frame, oldest first; whether nothing after since is missing
 * (registry.h, m0_registry_history); the channel's newest id. */
struct m0_rt_history {
    uint64_t since;
    int tail;
    size_t limit;
    struct m0_buf events;           /* out: the caller frees it */
    size_t count;
    int complete;
    uint64_t last_id;
};
#define M0_RT_QUERY_TIMEOUT_MS 2000
/* Ask loop loop_index's engine (any thread; the loop's own answers at
 * once). Waits for the loop's next pass, at most M0_RT_QUERY_TIMEOUT_MS.
 * M0_OK, or M0_ERR: no such loop reads events, or no answer in time. */
int m0_rt_history(unsigned loop_index, const char *channel, size_t clen, struct m0_rt_history *h);

/* A held slot's channels become channel (a '\n'-separated list of up to
 * 32; empty: none), from this loop's journals only (registry.h:
 * m0_registry_set_channels): the ones it keeps go on, a new one starts now;
 * a slot with none is subscribed from start (the newest id when the
 * request that subscribes it was made). */
void m0_rt_set_channels(struct m0_rt *rt, uint32_t slot, const char *channel, size_t clen, uint64_t start);

/* ---------------------------------------------------------- a source */

/* Its read position (atomic, read by any thread), or NULL: the bus's. */
void m0_rt_set_position(struct m0_rt *rt, const uint64_t *position);
/* One event, in id order: journal it and fan it out (frame is the whole
 * SSE event, id line included). */
void m0_rt_event(struct m0_rt *rt, const char *channel, size_t clen, uint64_t id, const char *frame, size_t flen);
/* Events up to id will never arrive: m0-gap to live subscribers, resumes
 * from below go to the source. */
void m0_rt_lost(struct m0_rt *rt, uint64_t id);
/* Events up to id were published before this loop read them: its journal
 * cannot prove a resume from below them whole. */
void m0_rt_floor(struct m0_rt *rt, uint64_t id);
/* Fan-outs are backed up: stop reading for now. */
int m0_rt_busy(const struct m0_rt *rt);
/* Does slot (generation gen) still wait for its resume? */
int m0_rt_awaiting(struct m0_rt *rt, uint32_t slot, uint32_t gen);
/* Replayed bytes (an event or a gap notice) for a waiting slot. */
void m0_rt_replay(struct m0_rt *rt, uint32_t slot, const char *p, size_t n);
/* Replay an m0-gap notice to a waiting slot: what the client resuming from
 * last missed is no longer kept, the replay starts at from; unknown: last
 * is an id never issued ("last_event_id": null, the client resyncs). The
 * engines' resumes (broker.c, broker_nats.c) answer with it. */
void m0_rt_replay_gap(struct m0_rt *rt, uint32_t slot, uint64_t last, uint64_t from, int unknown);
/* The replay is out: subscribe the slot (if it still waits) with filter
 * last (journal events after it follow, then live ones). */
void m0_rt_join(struct m0_rt *rt, uint32_t slot, uint32_t gen, const char *channel, size_t clen, uint64_t last);
/* After a batch of events: the sink writes and closes what they doomed. */
void m0_rt_settle(struct m0_rt *rt);

#endif
