/*
 * broker.h — the broadcast bus on Redis (DESIGN capability 15; docs/broker.md).
 *
 * With --broker, publishing goes through Redis instead of the local
 * datagram bus, so events reach every m0serve host that uses the same Redis
 * and carry ids that are global across hosts:
 *
 *   publish   one EVALSHA of M0_BROKER_PUBLISH_LUA: INCR the counter, XADD the
 *             event (its SSE frame without the id line) with the explicit id
 *             "<id>-0" to the all-channel log PREFIX"log" (MAXLEN ~ backlog)
 *             and to the channel's stream PREFIX"ch:"CHANNEL (MAXLEN ~
 *             retention, expiring a day after its last event); the id is
 *             the reply. With a key, PREFIX"key:"KEY remembers the id for
 *             M0_BROKER_KEY_TTL_MS and a repeat returns it without
 *             appending. One broker round trip.
 *   deliver   every worker keeps two connections on its own loop (hiredis's
 *             async API through redis_loop.h): a reader that XREAD BLOCKs the
 *             log from the last id it saw (so a reconnect catches up), and a
 *             command connection for resumes and the /health lag probe.
 *   resume    a Last-Event-ID the worker's own journal cannot prove complete
 *             is answered from the channel's stream (M0_BROKER_REPLAY_LUA:
 *             the counter and an XRANGE from that id, atomically), without
 *             blocking the loop.
 *
 * Three parts: the URL and settings (pure, broker_url.c), the blocking
 * publisher any thread but the loop may use (broker_pub.c), and the
 * worker's loop side (broker.c, loop thread only).
 */
#ifndef M0_BROKER_H
#define M0_BROKER_H

#include "m0/types.h"
#include "m0/buf.h"

struct m0_server;
struct m0_conn;

/* Defaults shared with python/m0pub.py (keep them equal). */
#define M0_BROKER_PREFIX_DEFAULT "m0:"
#define M0_BROKER_RETENTION_DEFAULT 1000     /* events kept per channel for resume */
#define M0_BROKER_BACKLOG_DEFAULT 100000     /* events kept in the all-channel log */
#define M0_BROKER_CHANNEL_TTL_MS 86400000    /* a channel's stream expires a day after its last event */
#define M0_BROKER_TIMEOUT_MS 1000            /* connect and reply timeout of a publish */
#define M0_BROKER_KEY_TTL_MS 300000          /* a publish key is remembered this long (5 minutes) */
#define M0_BROKER_KEY_MAX 200                /* bytes of a publish key */

/* m0_broker_publish: the command was sent and no reply came (a timeout, a
 * dropped connection): the event may or may not have been published. */
#define M0_BROKER_UNKNOWN -10

/* Where the broker is and how it is used. */
struct m0_broker_cfg {
    int is_unix;                 /* 1: path is a unix socket */
    char host[256];
    int port;
    char path[108];
    char password[256];        /* "" : no AUTH */
    int db;                    /* SELECT db when != 0 */
    char prefix[64];           /* key prefix, default "m0:" */
    long retention;            /* MAXLEN ~ of a channel's stream */
    long backlog;              /* MAXLEN ~ of the all-channel log */
    char shown[400];           /* the URL with the password masked, for logs and /health */
};

/*
 * Parse "redis://[:PASSWORD@]HOST[:PORT][/DB]" (port default 6379; HOST may
 * be "[v6addr]") or "unix:///path/redis.sock[?db=N]" into cfg (prefix,
 * retention and backlog are left as they are). Returns M0_OK, or M0_ERR
 * with a short reason in err (cap bytes). Pure.
 */
int m0_broker_parse_url(const char *url, struct m0_broker_cfg *cfg, char *err, size_t cap);

/* With cfg->broker set (already validated by m0_config_parse), fill a
 * process-wide struct m0_broker_cfg from cfg and point m0_broker at it;
 * without, leave m0_broker NULL. Returns M0_OK or M0_ERR. */
int m0_broker_configure(const struct m0_config *cfg);

/* A key prefix is 1..63 printable ASCII bytes without spaces. */
int m0_broker_prefix_ok(const char *prefix);

/* The Lua scripts (their text is also in python/m0pub.py: a test keeps the
 * two equal). PUBLISH: KEYS counter, log, channel stream and optionally
 * the publish key's; ARGV channel, frame without the id line, retention,
 * backlog, channel ttl ms, key ttl ms; returns the id (with a fourth key
 * that holds an id: that id, and nothing is appended). REPLAY: KEYS counter, channel stream; ARGV the client's last id
 * ("N-0"), COUNT; returns {counter, 1 if that id is still retained else 0,
 * the entries after it newest first, at most COUNT}. */
extern const char M0_BROKER_PUBLISH_LUA[];
extern const char M0_BROKER_REPLAY_LUA[];
/* RAISE: KEYS counter; ARGV an id; sets the counter to that id when it is
 * below it and returns 1, else 0 (a worker's check when it reconnects). */
extern const char M0_BROKER_RAISE_LUA[];

/* ------------------------------------------------------------ publisher */

/* The process's broker (NULL: none configured). Set once at start (by the
 * master before forking, or by `m0serve publish`) and never changed. */
extern const struct m0_broker_cfg *m0_broker;

/*
 * Publish one event through the broker from the calling thread: frame it
 * (event may be NULL; data is UTF-8, the caller checked the channel and the
 * size), run the publish script, and return its global id in *id_out.
 * key (klen bytes, m0_broker_key_ok; NULL: none) makes the publish
 * idempotent for M0_BROKER_KEY_TTL_MS: a publish with a key the broker
 * remembers returns the id it got then and appends nothing.
 * Blocks the calling thread for one round trip: at most M0_BROKER_TIMEOUT_MS
 * to connect and as much for the reply (a connection kept from an earlier
 * call that the broker closed meanwhile is replaced once: about 3 s in the
 * worst case, a refused connection fails at once). Never call it on a loop
 * thread that has other work (it blocks).
 * Each thread keeps its own connection (freed when the thread exits).
 * Returns M0_OK; M0_ERR with a one-line reason in err (cap bytes) when
 * the broker is unreachable, refused the connection or the script, or
 * answered something else: the event is then not published (never a
 * silent drop); or M0_BROKER_UNKNOWN when the command was sent and its
 * reply did not come (timeout, dropped connection): the script may have
 * run, err says so, and a retry with the same key is safe.
 */
int m0_broker_publish(const char *channel, size_t clen, const char *event, const char *data, size_t dlen,
                      const char *key, size_t klen, uint64_t *id_out, char *err, size_t cap);

/* A publish key: 1..M0_BROKER_KEY_MAX bytes of printable ASCII (0x20..0x7e). */
int m0_broker_key_ok(const char *key, size_t klen);

/* The broker's counter (the newest id issued; 0 when none yet), read with
 * a blocking connection of its own (at most about 2 s). Returns M0_OK or
 * M0_ERR with a reason in err. */
int m0_broker_counter(uint64_t *out, char *err, size_t cap);

/* ------------------------------------------------------- loop side (worker) */

/* In a worker, before its loop serves anything (after the application
 * loaded): read where the broker's log stands, so that the reader starts
 * there and streams held before it first connects miss nothing. A broker
 * that cannot be reached now is not an error: the reader finds the
 * position when it connects (and streams held before that are told of a
 * possible gap). */
void m0_broker_prepare(void);

/* Start the worker's broker side on s's loop (after m0_rt_start set up the
 * registry): connect (without waiting: an unreachable broker is retried
 * with backoff while the server serves), read the log, feed the registry.
 * Returns M0_OK or M0_ERR. */
int m0_broker_start(struct m0_server *s);
/* Drain: stop reading and answering resumes. */
void m0_broker_stop(struct m0_server *s);
void m0_broker_free(struct m0_server *s);

/* The newest event id this worker has read from the broker (0: none yet).
 * Any thread. */
uint64_t m0_broker_position(void);

/*
 * Resume slot (generation gen; its hold is set, its head not necessarily
 * written) on channel from the client's last_id through the broker: the
 * reply replays the events after last_id (or an m0-gap notice when the
 * broker no longer has them all), then subscribes the slot, after which
 * live events follow with no duplicates. Returns M0_OK (queued: the stream
 * starts when the reply arrives), or M0_ERR when too many resumes already
 * wait for a broker that is down (the caller answers 503; the client
 * retries).
 */
int m0_broker_resume(struct m0_server *s, struct m0_conn *c, const char *channel, size_t clen, uint64_t last_id);

/* In a process forked by a view: close the worker's broker sockets
 * (without a word to Redis: they are the parent's conversations). */
void m0_broker_close_in_child(void);

/* Append the /health "broker" object (JSON, no trailing newline). Returns
 * 1 when both of the worker's connections are up, 0 otherwise (/health's
 * status is then "degraded"). */
int m0_broker_health(const struct m0_server *s, struct m0_buf *out);

/* The worker's broker numbers for the metrics (metrics.h); all zero
 * without a broker. Loop thread. */
struct m0_broker_stats {
    int up;                 /* both connections up */
    uint64_t lag;           /* events the broker has that this worker has not read */
    uint64_t reconnects;
};
void m0_broker_stats(struct m0_broker_stats *out);

#endif
