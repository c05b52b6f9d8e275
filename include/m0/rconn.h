/*
 * rconn.h — one Redis connection on an m0 event loop: RESP commands out,
 * replies in, each reply handed to the callback of the command it answers
 * (in order, as Redis answers). The transport is xconn.h's (TCP, unix or
 * TLS, never blocking); the bytes go through hiredis's reply reader and its
 * command formatter, and nothing else of hiredis. Loop thread only.
 *
 * The reader carries the reply guard (broker_reply.h): a reply that begins
 * while no command waits for it is a protocol error — the connection
 * closes and says so — except on a connection put in subscriber mode
 * (m0_rconn_subscribed), where such replies are the pushed messages.
 *
 * Lifetimes: a callback may send commands or close the connection it runs
 * on; the connection is freed once the callback returns (never under it).
 * When it closes, every command still waiting gets its callback with a NULL
 * reply, then (unless the owner closed it) ops->closed says why.
 */
#ifndef M0_RCONN_H
#define M0_RCONN_H

#include "m0/types.h"

struct m0_loop;
struct m0_rconn;
struct m0_xconn_target;
struct ssl_ctx_st;
struct redisReply;

/* The reply r to a command sent with priv (r NULL: the connection went
 * first). r is freed after the callback returns. */
typedef void m0_rconn_reply_fn(struct m0_rconn *c, struct redisReply *r, void *priv);

struct m0_rconn_ops {
    /* The transport (and TLS) is up: send the handshake. */
    void (*connected)(struct m0_rconn *c, void *ctx);
    /* It closed, failed to connect or broke the protocol (why: one line).
     * c is freed when this returns. */
    void (*closed)(struct m0_rconn *c, void *ctx, const char *why);
    /* Subscriber mode: a reply no command waits for (a pushed message). */
    void (*push)(struct m0_rconn *c, struct redisReply *r, void *ctx);
};

/*
 * Connect to t (TLS when tls is not NULL) on loop l; ops and ctx outlive
 * the connection. Returns the connection (connecting; ops->connected or
 * ops->closed follows from the loop), or NULL with a reason in err (an
 * address that is not numeric, no socket). Never blocks.
 */
struct m0_rconn *m0_rconn_open(struct m0_loop *l, const struct m0_xconn_target *t, struct ssl_ctx_st *tls,
                               const struct m0_rconn_ops *ops, void *ctx, char *err, size_t cap);

/* Send one command (argc arguments, binary-safe with lens; lens NULL: C
 * strings); fn(c, reply, priv) follows. Written at once when the socket
 * takes it (within a callback: when the callback returns). M0_OK, or
 * M0_ERR when c is closing (fn is not called). */
int m0_rconn_command(struct m0_rconn *c, m0_rconn_reply_fn *fn, void *priv, int argc, const char **argv,
                     const size_t *lens);
/* The same, formatted as hiredis's redisCommand does ("GET %s": each %s one
 * argument, spaces inside it kept). */
int m0_rconn_commandf(struct m0_rconn *c, m0_rconn_reply_fn *fn, void *priv, const char *fmt, ...);

/* From now on, replies with no command waiting go to ops->push (after the
 * commands already sent are answered). For SUBSCRIBE. */
void m0_rconn_subscribed(struct m0_rconn *c);

/* The ctx c was opened with. */
void *m0_rconn_ctx(const struct m0_rconn *c);

/* Commands sent and not answered. */
size_t m0_rconn_pending(const struct m0_rconn *c);

/* Is the transport (and TLS) up? */
int m0_rconn_is_open(const struct m0_rconn *c);

/* Close c now (pending callbacks get NULL; ops->closed is not called).
 * Inside one of c's callbacks, c is freed when it returns. */
void m0_rconn_close(struct m0_rconn *c);

/* In a process forked by the application: close the descriptor only,
 * without a word to the peer and without freeing (the parent's). */
void m0_rconn_close_fd(struct m0_rconn *c);

#endif
