/*
 * broker_nats.h — inside the NATS JetStream engine (not for other
 * modules): what broker_nats_pub.c (the connection settings, the stream,
 * the blocking publisher), broker_nats_link.c (a worker loop's link: the
 * thread that talks to NATS and the queue its deliveries reach the loop
 * by) and broker_nats.c (the loop's side: the source of events) share, and
 * the engine's entry points broker_engine.c puts in its table.
 *
 * libnats has threads of its own and calls back on them (deliveries, a
 * connection lost or back). Nothing of a loop is touched from those
 * threads: each callback copies what it got into a lock-protected queue and
 * wakes the loop through an eventfd the loop watches, as the pool's
 * completions reach it (loop.h). Every blocking libnats call (connect,
 * the stream's info, a resume's message gets, subscribing) runs on the
 * link's own thread, never on the loop.
 *
 * broker_nats_pub.h and broker_nats_link.h declare the other two files'
 * parts; this header, broker_nats.c's, the engine's entry points.
 */
#ifndef M0_BROKER_NATS_H
#define M0_BROKER_NATS_H

#include "m0/types.h"
#include "broker_nats_link.h"
#include "broker_nats_pub.h"

struct m0_config;
struct m0_loop;
struct m0_rt;
struct m0_rt_source_ops;

/* ------------------------------------------------- the engine's entries */

/* broker_nats.c's (init, publish and counter: broker_nats_pub.h) */
void m0_broker_nats_prepare(void);
void *m0_broker_nats_new(struct m0_rt *rt, struct m0_loop *l, const struct m0_config *cfg);
extern const struct m0_rt_source_ops m0_broker_nats_source;

#endif
