/*
 * presence_broker.h — a worker's part of the occupancy in Redis
 * (presence_broker.c), kept by its presence agent with a blocking
 * connection of its own (broker_pub.h, m0_broker_conn_open). Keys, under
 * the broker prefix P (docs/realtime.md, "Occupancy and presence"):
 *
 *   Ppr:live             zset: part -> the time it expires (ms, Redis's
 *                        clock); a part is HOST.PID, HOST the server's
 *                        presence host id (presence.h)
 *   Ppr:n:CHANNEL        hash: part -> its connections on the channel
 *   Ppr:s:PART:CHANNEL   hash: sub -> the part's connections of that sub
 *   Ppr:c:PART           set: the channels the part has keys for
 *   Ppr:j:CHANNEL        hash: sub -> 1, a join was published (events)
 *   Ppr:pend             zset: "CHANNEL\nSUB" -> when its leave is due
 *
 * Readers (m0pub: channel_info, presence) count the live parts only, so
 * a dead host drops out M0_PRESENCE_PART_TTL_MS after its last heartbeat
 * by itself; the next heartbeat of any live part removes its keys. The
 * join/leave decisions are made inside the scripts, so one join (and one
 * leave) is published per sub and channel however many hosts hold it.
 */
#ifndef M0_PRESENCE_BROKER_H
#define M0_PRESENCE_BROKER_H

#include "m0/types.h"

struct m0_config;
struct m0_presence_redis;

/* One change to push: channel (and sub, for a sub's count), the part's
 * count now, and whether it takes part in join/leave. */
struct m0_presence_rec {
    char kind;                           /* 'c' channel, 's' sub */
    int events;
    const char *channel, *sub;
    size_t clen, slen;
    uint64_t count;
};

/* The part of this worker (its name: host.pid). Not connected yet. */
struct m0_presence_redis *m0_presence_redis_new(const struct m0_config *cfg, const char *part);
void m0_presence_redis_free(struct m0_presence_redis *r);

/* Connected (dialled now if not, with a backoff after a failure)? The
 * first success after none returns 2: the caller resyncs (reset, then a
 * full push). 0: not connected (err says why). */
int m0_presence_redis_ready(struct m0_presence_redis *r, uint64_t now_ms, char *err, size_t cap);

/* Push n changes (one script per batch). M0_OK, or M0_ERR: the connection
 * is dropped (the caller resyncs once it is back). */
int m0_presence_redis_push(struct m0_presence_redis *r, const struct m0_presence_rec *recs, size_t n);

/* The part's heartbeat: it stays live; due leaves go out; dead parts'
 * keys go. *lost: the part had been taken for dead (its keys dropped: the
 * caller resyncs). *wake_ms: when the next leave is due (0: none). */
int m0_presence_redis_beat(struct m0_presence_redis *r, int *lost, uint64_t *wake_ms);

/* Remove the part's keys (before a full push, and with final when the
 * worker goes: the part leaves the live set too). */
int m0_presence_redis_reset(struct m0_presence_redis *r, int final);

#endif
