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
 * Three parts, three headers: the URL and settings (broker_url.h, pure),
 * the blocking publisher any thread but the loop may use (broker_pub.h),
 * and the worker's loop side (this header, broker.c, loop thread only).
 */
#ifndef M0_BROKER_H
#define M0_BROKER_H

#include "m0/types.h"
#include "m0/buf.h"
#include "m0/broker_url.h"

struct m0_server;
struct m0_conn;

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
