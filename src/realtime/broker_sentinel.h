/*
 * broker_sentinel.h — the broker through Redis Sentinel (broker_sentinel.c, of
 * the broker module, private to it: broker_int.h). Moved from broker_int.h
 * as they were, so that every source has a header of its own.
 */
#ifndef M0_BROKER_SENTINEL_H
#define M0_BROKER_SENTINEL_H

#include "broker_int.h"

/* Before the loop runs: the URL host's address (DNS would block the loop). */
void m0_sentinel_prepare(void);

/* Where bc connects next: M0_OK with *to (and *name, the TLS name; *path
 * for a unix socket); M0_AGAIN with why when there is nowhere yet (the
 * sentinels have not answered, no replica to read from). */
int m0_sentinel_where(struct broker *b, struct bconn *bc, struct m0_hostport *to, const char **path, char *why,
                      size_t cap);

/* The handshake of a connection to a sentinel (queries, then SUBSCRIBE). */
void m0_sentinel_hello(struct bconn *bc);

/* After ROLE on a data connection: M0_OK when the node is what bc needs
 * (the primary, or a linked replica of it), else M0_ERR with why (and the
 * sentinels are asked again). */
int m0_sentinel_check_role(struct broker *b, struct bconn *bc, const struct redisReply *r, char *why, size_t cap);

/* The sentinel connection's pushed messages. */
void m0_sentinel_push(struct m0_rconn *c, struct redisReply *r, void *ctx);

/* A data connection failed: the next attempt tries another replica. */
void m0_sentinel_failed(struct broker *b, struct bconn *bc);

/* Once a loop pass (the broker's hook): ask the sentinels again while a
 * data connection waits for a replica to read from. */
void m0_sentinel_tend(struct broker *b, uint64_t now);

/* The sentinels' view is healthy for /health: the sentinel connection is
 * up and the primary is not reported down. */
int m0_sentinel_ok(const struct broker *b);

#endif
