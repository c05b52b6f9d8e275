/*
 * broker_reply.h — what the broker's connections accept from Redis (pure:
 * hiredis's reply reader and reply objects, nothing else; fuzzed by
 * tests/fuzz/fuzz_broker.c).
 *
 *   guard     hiredis aborts the process (an assert in its callback
 *             dispatch) when a reply arrives with no command waiting for it.
 *             The guard sits in the connection's reader: a reply that starts
 *             while nothing is pending makes the reader fail instead, which
 *             hiredis turns into an ordinary disconnect; the caller reads the
 *             reason from the guard and reconnects with its backoff.
 *   shapes    each command's reply is checked against the shape that command
 *             returns (a reply out of step with its commands has the wrong
 *             shape), and the values are decoded without trusting lengths or
 *             types.
 */
#ifndef M0_BROKER_REPLY_H
#define M0_BROKER_REPLY_H

#include <hiredis/hiredis.h>

#include "m0/types.h"

/* ----------------------------------------------------------------- guard */

/* How many commands wait for a reply on this connection now (ctx is the
 * guard's ctx). */
typedef size_t m0_reply_pending_fn(void *ctx);

struct m0_reply_guard {
    redisReplyObjectFunctions fns;          /* installed in the reader: the inner ones, wrapped */
    const redisReplyObjectFunctions *inner; /* what the reader had (hiredis's reply objects) */
    m0_reply_pending_fn *pending;
    void *ctx;
    int tripped;                            /* a reply came that nobody asked for */
    char why[160];                          /* then: what it was, one line */
};

/*
 * Install g in reader r (its reply functions are wrapped; objects are still
 * built by the ones r had). From then on, a top-level reply that begins
 * while pending(ctx) is 0 is refused: r fails ("Out of memory" in its
 * errstr, as hiredis has no other way to say it), g->tripped is set and
 * g->why describes the reply (an error reply's text is quoted). g must
 * outlive r; install again after g is reused for another reader. Replies
 * that fit are untouched.
 */
void m0_reply_guard_install(struct m0_reply_guard *g, redisReader *r, m0_reply_pending_fn *pending, void *ctx);

/* ---------------------------------------------------------------- shapes */

/* What a reply says, checked against the command it answers. */
enum m0_breply {
    M0_BREPLY_OK,            /* the shape that command returns */
    M0_BREPLY_ERROR,         /* an error reply (its text: r->str) */
    M0_BREPLY_UNEXPECTED,    /* anything else: the connection is out of step */
};

enum m0_bcmd {
    M0_BCMD_STATUS,          /* AUTH, SELECT: +OK */
    M0_BCMD_PING,            /* +PONG */
    M0_BCMD_COUNTER,         /* GET of the counter: a decimal string, or nil */
    M0_BCMD_INTEGER,         /* the counter-raise script: an integer */
    M0_BCMD_XREAD,           /* XREAD: [[key, [entry, ...]], ...] or nil */
    M0_BCMD_RESUME,          /* the replay script: {counter, found, [entry, ...]} */
    M0_BCMD_ROLE,            /* ROLE: [kind, ...] (m0_breply_role reads it) */
    M0_BCMD_ADDR,            /* SENTINEL get-master-addr-by-name: [host, port] or nil */
    M0_BCMD_REPLICAS,        /* SENTINEL replicas: [[field, value, ...], ...] */
};

/* Classify reply r (NULL: none, UNEXPECTED) as an answer to cmd. The check
 * covers the reply's outer shape; entries inside are checked one by one
 * (m0_breply_entry_ok) as they are used. */
enum m0_breply m0_breply_classify(const redisReply *r, enum m0_bcmd cmd);

/* A stream entry as Redis sends it: [id string, [field, value, ...]]. */
int m0_breply_entry_ok(const redisReply *e);

/* A stream entry id "N-0" (or "N") → N; 0 when r is not a string holding
 * one. */
uint64_t m0_breply_entry_id(const redisReply *r);

/* The string value of field name in an entry's field array; NULL when
 * absent, when fields is no array or the value is no string. */
const redisReply *m0_breply_field(const redisReply *fields, const char *name);

/* ---------------------------------------------------- Sentinel and ROLE */

/* A node's address as Redis and Sentinel give it: a host of printable
 * bytes without spaces (an IP address unless announce-hostnames is on). */
struct m0_hostport {
    char host[256];
    int port;
};

enum m0_role_kind { M0_ROLE_OTHER, M0_ROLE_PRIMARY, M0_ROLE_REPLICA };

/* What ROLE says of a node. */
struct m0_role {
    enum m0_role_kind kind;
    struct m0_hostport primary;  /* a replica: the primary it follows */
    int linked;                  /* a replica: its link to the primary is up ("connected") */
};

/* ROLE's reply r → *out: ["master", offset, [...]] or ["slave", host,
 * port, state, offset]; any other first word is M0_ROLE_OTHER ("sentinel").
 * M0_OK, or M0_ERR when r is not a ROLE reply (or names a bad address). */
int m0_breply_role(const redisReply *r, struct m0_role *out);

/* SENTINEL get-master-addr-by-name's reply r: M0_OK with the primary in
 * *out; M0_AGAIN for nil (the sentinel does not monitor that name);
 * M0_ERR when r has another shape or a bad address. */
int m0_breply_addr(const redisReply *r, struct m0_hostport *out);

/* SENTINEL replicas' reply r (one flat field/value array per replica):
 * the replicas a reader may use — not flagged s_down, o_down or
 * disconnected, not reporting the role of a primary (an old primary back
 * and not converted yet) — into out (at most max), those whose
 * master-link-status is "ok" first. Returns how many; entries of another shape are skipped. */
size_t m0_breply_replicas(const redisReply *r, struct m0_hostport *out, size_t max);

/* What a subscriber connection was pushed. */
enum m0_push {
    M0_PUSH_BAD,             /* not a pub/sub reply: a protocol error */
    M0_PUSH_CONFIRM,         /* ["subscribe", channel, count] */
    M0_PUSH_MESSAGE,         /* ["message", channel, payload]: *channel and *payload set */
};
enum m0_push m0_breply_push(const redisReply *r, const redisReply **channel, const redisReply **payload);

/* What a Sentinel event says of the primary named master. */
enum m0_sentinel_event {
    M0_SEV_NONE,             /* another master, another instance type, or unreadable */
    M0_SEV_SWITCH,           /* +switch-master: the new primary is in *to */
    M0_SEV_DOWN,             /* +sdown / +odown of the primary at *to */
    M0_SEV_UP,               /* -sdown / -odown of the primary at *to */
};

/* Read the event pushed on channel (clen bytes) with payload (plen
 * bytes), for the primary named master. Pure; any bytes. */
enum m0_sentinel_event m0_sentinel_event(const char *channel, size_t clen, const char *payload, size_t plen,
                                         const char *master, struct m0_hostport *to);

/* An error reply's text (r->str, len bytes) says the credentials were
 * refused or are missing (NOAUTH, WRONGPASS, older servers' "invalid
 * password"). */
int m0_breply_auth_failed(const char *str, size_t len);

#endif
