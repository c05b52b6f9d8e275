/*
 * health_json.h — the /health document as JSON (health_json.c): what the
 * loop gathers (health.c) rendered, pure, unit-tested without a loop.
 */
#ifndef M0_HEALTH_JSON_H
#define M0_HEALTH_JSON_H

#include "m0/types.h"
#include "m0/buf.h"
#include "m0/registry.h"

struct m0_targets;
struct m0_target_counters;

/* One event loop of the worker (--threads), as it last showed itself. */
struct m0_health_loop {
    uint32_t connections;
    uint32_t held_streams;
    uint32_t websockets;
    uint64_t requests;
    unsigned pool_busy;
};

/* The worker's numbers: with --threads, every loop's summed (loops.h),
 * each loop's in "loops", the busiest channels the answering loop's. */
struct m0_health {
    int pid;
    int worker;                    /* bus index, -1 without --realtime */
    unsigned loop;                 /* the loop answering */
    unsigned nloops;               /* loops listed in "loops" when more than one */
    const struct m0_health_loop *loops;
    uint32_t connections;          /* open client connections */
    uint32_t held_streams;         /* connections held (SSE streams and WebSockets) */
    uint32_t websockets;           /* of which WebSockets */
    uint64_t events_published;     /* events this worker's application published (m0pub.publish
                                      calls that published: m0serve_publishes_total's share) */
    uint64_t events_received;      /* events this worker's bus (or broker reader) gave it; with
                                      --threads the most any loop got, as each loop gets each */
    uint64_t events_delivered;     /* event copies queued to held streams */
    uint64_t events_lost;          /* times this worker learned it missed events (m0-gap sent) */
    uint64_t slow_closed;          /* held streams closed for exceeding --outbox-limit */
    uint64_t requests;             /* requests answered by this worker */
    unsigned pool_threads;         /* current handler threads (0: views run on the loop thread) */
    unsigned pool_busy;
    unsigned pool_max;             /* the elastic pool's ceiling */
    unsigned pool_queued;          /* jobs waiting for a thread */
    int draining;
    int degraded;                  /* serving, but a dependency is down (--broker disconnected) */
    const char *broker;            /* --broker: the "broker" object (JSON), else NULL */
    const struct m0_targets *targets;   /* the mounts (target.h); NULL: none listed */
    const struct m0_target_counters *counters;   /* their counters (with targets) */
};

/* Append the JSON body: "status" ("draining" while the worker drains, else
 * "degraded" when h->degraded, else "ok"), the fields above ("loops": each
 * event loop's numbers, when nloops > 1), "mounts" (each mount's prefix,
 * kind, what it serves, mode and counters: requests, and for application
 * mounts in_flight — jobs on the pool now — and held streams; "unmounted"
 * counts the 404s no mount claimed), plus "channels", the busiest channels
 * with their subscriber counts (up to ntop). */
void m0_health_render(struct m0_buf *b, const struct m0_health *h, const struct m0_channel_stat *top,
                      size_t ntop);

#endif
