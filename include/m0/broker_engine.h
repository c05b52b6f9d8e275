/*
 * broker_engine.h — the broker's engines behind one interface (docs/broker.md,
 * "Engines"). The URL alone chooses the engine (its scheme, broker_url.c);
 * everything above this header — the realtime engine (rt.h), the holds,
 * m0pub.publish, `m0serve publish`, the GRIP control port and the publish
 * socket — calls the generic entry points (broker.h, broker_pub.h) and never
 * learns which engine runs.
 *
 * An engine is one table of operations:
 *
 *   init      once per process, before any worker forks: what it needs
 *             beyond the URL (Redis: the TLS context);
 *   publish   append one frame with an optional idempotency key and answer
 *             its global id; blocks the calling thread one round trip (any
 *             thread but a busy loop's); outcomes M0_OK, M0_ERR (not
 *             published) or M0_BROKER_UNKNOWN (sent, no answer: a retry with
 *             the same key appends once);
 *   counter   where the log stands (the newest id), read before a worker's
 *             loop runs so its reader starts there;
 *   make      a worker loop's source of events (rt.h's struct
 *             m0_rt_source_ops): connect without blocking, read the log
 *             from a position in id order (m0_rt_event), resume a channel
 *             from an id (m0_rt_replay, m0_rt_join), reconnect and continue
 *             from its position after any fault;
 *   source    those operations; its health object carries "engine",
 *             "primary" (where writes go: a Redis primary, a stream leader),
 *             "connected" and "lag", and its stats the same for the metrics.
 *
 * A new engine is a file of its own (broker_ENGINE.c) with its table, a row
 * in engines[] (broker_engine.c) and its URL scheme's row in broker_url.c.
 */
#ifndef M0_BROKER_ENGINE_H
#define M0_BROKER_ENGINE_H

#include "m0/types.h"
#include "m0/broker_url.h"

struct m0_buf;
struct m0_config;
struct m0_loop;
struct m0_rt;
struct m0_rt_source_ops;

struct m0_broker_engine {
    const char *name;          /* what broker_url.c names in cfg->engine */
    /* Once per process for the process's broker b, before forking. M0_OK,
     * or M0_ERR with one line in err (cap bytes). */
    int (*init)(const struct m0_broker_cfg *b, char *err, size_t cap);
    /* Publish frame (flen bytes, as the log keeps it: an SSE event without
     * its id line, or a GRIP item) on channel (valid, clen bytes) with key
     * (klen bytes, m0_broker_key_ok; NULL: none); the id in *id_out. hint
     * ends the "outcome unknown" text (what a retry does). Blocking. */
    int (*publish)(const char *channel, size_t clen, const char *frame, size_t flen, const char *key, size_t klen,
                   const char *hint, uint64_t *id_out, char *err, size_t cap);
    /* The newest id issued (0: none yet), blocking (about 2 s at most).
     * M0_OK; M0_AGAIN when the reader takes its position once it connects
     * instead; M0_ERR with a reason. */
    int (*counter)(uint64_t *out, char *err, size_t cap);
    /* In a worker, before its loop runs (blocking lookups are allowed). */
    void (*prepare)(void);
    /* The source of loop l's events for rt (cfg: --replay-bytes). */
    void *(*make)(struct m0_rt *rt, struct m0_loop *l, const struct m0_config *cfg);
    const struct m0_rt_source_ops *source;
};

/* A worker's reader, whatever its engine, as /health's "broker" object
 * shows it (docs/broker.md). */
struct m0_broker_reading {
    uint64_t at;                   /* the newest id this worker read */
    uint64_t newest;               /* the newest id issued, as last probed */
    uint64_t events, gaps, reconnects, resumes, resume_gaps;
    size_t inflight, waiting;      /* resumes sent and not answered; waiting to be sent */
    int waiting_max;               /* beyond it a resume is a 503 */
};

/* Append r's members of the "broker" object to out: ", "last_id": N, …,
 * "resumes_waiting_max": N" ("lag": how many ids at is behind newest;
 * "newest_id" never below at). */
void m0_broker_health_reading(struct m0_buf *out, const struct m0_broker_reading *r);

/* The engine named name, or NULL. */
const struct m0_broker_engine *m0_broker_engine_named(const char *name);

/* The process's engine (m0_broker's), or NULL without a broker. */
const struct m0_broker_engine *m0_broker_engine(void);

/* Once per process after m0_broker_configure: the engine's init. M0_OK
 * (also without a broker), or M0_ERR with one line in err. */
int m0_broker_engine_init(char *err, size_t cap);

#endif
