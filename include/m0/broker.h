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
 *   deliver   every worker keeps two connections on its own loop (rconn.h:
 *             TCP, unix or TLS): a reader that XREAD BLOCKs the log from the
 *             last id it saw (so a reconnect catches up), and a command
 *             connection for resumes and the /health lag probe; with
 *             Sentinel a third, to a sentinel, and the two read a replica.
 *   resume    a Last-Event-ID the worker's own journal cannot prove complete
 *             is answered from the channel's stream (M0_BROKER_REPLAY_LUA:
 *             the counter and an XRANGE from that id, atomically), without
 *             blocking the loop.
 *
 * Four parts: the URL and settings (broker_url.h, pure), the engines and
 * their interface (broker_engine.h), the blocking publisher any thread but
 * the loop may use (broker_pub.h), and the worker's loop side (this
 * header: the generic entry points, which pass through to the engine).
 */
#ifndef M0_BROKER_H
#define M0_BROKER_H

#include "m0/types.h"
#include "m0/buf.h"
#include "m0/broker_url.h"

struct m0_config;
struct m0_loop;
struct m0_rt;
struct m0_rt_source_ops;

/* ------------------------------------------------------- loop side (worker) */

/* In a worker, before its loop serves anything (after the application
 * loaded): read where the broker's log stands, so that the reader starts
 * there and streams held before it first connects miss nothing. A broker
 * that cannot be reached now is not an error: the reader finds the
 * position when it connects (and streams held before that are told of a
 * possible gap). */
void m0_broker_prepare(void);

/* The worker's broker side for loop l, feeding the realtime engine rt
 * (cfg: --replay-bytes): a source of events in place of the local bus
 * (rt.h), started with m0_rt_start(rt, &m0_broker_source, it) — which
 * connects without waiting (an unreachable broker is retried with backoff
 * while the server serves), reads the log and answers resumes. The engine
 * stops and frees it. Never NULL. */
void *m0_broker_new(struct m0_rt *rt, struct m0_loop *l, const struct m0_config *cfg);
extern const struct m0_rt_source_ops m0_broker_source;

#endif
