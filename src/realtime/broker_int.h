/*
 * broker_int.h — inside the Redis engine (not for other modules): the
 * worker's loop side shared by broker.c (reader, resumes, /health),
 * broker_conn.c (one connection's dial, handshake and backoff) and
 * broker_sentinel.c (where to connect: the URL's server, or the primary
 * or a replica the sentinels name), and the engine's entry points that
 * broker_engine.c puts in its table.
 */
#ifndef M0_BROKER_INT_H
#define M0_BROKER_INT_H

#include "m0/broker_reply.h"
#include "m0/broker_seen.h"
#include "m0/broker_url.h"
#include "m0/buf.h"
#include "m0/types.h"

struct m0_config;
struct m0_loop;
struct m0_rconn;
struct m0_rt;
struct m0_rt_source_ops;
struct ssl_ctx_st;

/* ------------------------------------------------- the engine's entries */

/* The TLS context of a rediss:// broker (NULL: plain), made by
 * m0_broker_redis_init before forking; read-only afterwards. */
extern struct ssl_ctx_st *m0_broker_redis_tls;

int m0_broker_redis_init(const struct m0_broker_cfg *b, char *err, size_t cap);
int m0_broker_redis_publish(const char *channel, size_t clen, const char *frame, size_t flen, const char *key,
                            size_t klen, const char *hint, uint64_t *id_out, char *err, size_t cap);
int m0_broker_redis_counter(uint64_t *out, char *err, size_t cap);
void m0_broker_redis_prepare(void);
void *m0_broker_redis_new(struct m0_rt *rt, struct m0_loop *l, const struct m0_config *cfg);
extern const struct m0_rt_source_ops m0_broker_redis_source;

/* ---------------------------------------------------- the loop's side */

#define M0_BC_BACKOFF_MIN_MS 100
#define M0_BC_BACKOFF_MAX_MS 5000
#define M0_BC_CONNECT_MS 2000       /* a connect (and its handshake) not done by then is abandoned */
#define M0_BC_MAX_REPLICAS 8

enum { M0_BC_DOWN, M0_BC_CONNECTING, M0_BC_HELLO, M0_BC_UP };  /* HELLO: connected, handshake unanswered */

struct broker;

/* One connection of the worker's loop to Redis or to a sentinel. */
struct bconn {
    struct m0_rconn *rc;            /* the live connection, or NULL */
    struct broker *b;
    const char *role;               /* "reader" / "commands" / "sentinel" */
    int sentinel;                   /* talks to a sentinel */
    int state;                      /* M0_BC_* */
    unsigned failures;              /* attempts since the last stable connection (backoff) */
    uint64_t retry_at;              /* DOWN: next attempt */
    uint64_t deadline;              /* CONNECTING, HELLO: give up then */
    uint64_t up_since;              /* UP: since when (0: not up on this attempt) */
    int logged_down;                /* this outage was reported */
    int waiting;                    /* DOWN for want of a place to connect to (the sentinels') */
    unsigned pick;                  /* which replica next (moves on after a failure) */
    struct m0_hostport at;          /* where this attempt went (a unix socket: host is the path) */
};

struct resume;

struct broker {
    struct m0_rt *rt;               /* the loop's realtime engine, fed with what is read */
    struct m0_loop *loop;
    size_t replay_bytes;            /* --replay-bytes: what one resume replays at most */
    const struct m0_broker_cfg *cfg;
    struct bconn rd, cmd, snt;      /* reader, commands; snt: a sentinel (Sentinel only) */
    int stopped;
    int positioned;                 /* position is known (first GET of the counter done) */
    int reading;                    /* an XREAD is outstanding */
    uint64_t read_sent;             /* when it was sent */
    int stalled;                    /* the registry is backed up: next XREAD deferred */
    uint64_t paced_until;           /* the next XREAD waits until then (0: no wait) */
    int probing;
    uint64_t next_probe;
    uint64_t newest;                /* the counter, as last probed */
    struct resume *wait_head, *wait_tail;
    size_t nwait, wait_bytes;
    size_t inflight;                /* resumes sent, not answered */
    uint64_t reconnects, resumes, resume_gaps, gaps, events;
    char last_error[160];
    char seq_key[80], log_key[80];
    struct m0_buf frame;            /* scratch: one event's frame with its id line */
    uint64_t position;              /* newest id read; atomic (runners read it: m0_rt_newest) */
    struct m0_seen seen;            /* reading a replica: the last entries read, checked when it comes back */
    /* Sentinel (broker_sentinel.c) */
    int read_replica;               /* reader and commands use a replica: only replicated events are read */
    struct m0_hostport primary;     /* as the sentinels said last (port 0: not known yet) */
    struct m0_hostport replicas[M0_BC_MAX_REPLICAS];
    size_t nreplicas;
    unsigned sentinel_at;           /* which sentinel next */
    int primary_down;               /* +sdown/+odown of the primary heard, nothing since */
    int asked;                      /* the sentinel connection's answers arrived (this dial) */
    uint64_t switches;              /* +switch-master followed */
};

/* broker.c: a data connection (reader or commands) answered its handshake. */
void m0_broker_conn_up(struct bconn *bc);

/* The connections (broker_conn.c) and Sentinel (broker_sentinel.c): each
 * file's functions in a header of its own. */
#include "broker_conn.h"
#include "broker_sentinel.h"

#endif
