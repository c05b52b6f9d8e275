/*
 * redis_loop.h — hiredis's asynchronous API on an m0 event loop: the
 * adapter hiredis calls to start and stop watching its socket (the role
 * adapters/ae.h plays for Redis's own loop), written on m0_loop_add_fd /
 * m0_loop_mod_fd / m0_loop_del_fd. Loop thread only; no thread, no
 * blocking call.
 *
 * The adapter state lives in the caller's struct (it outlives any one
 * connection), so an event handler can tell, after hiredis ran a callback
 * that freed the context, that the context is gone (ev->ac == NULL).
 *
 * A reply nobody asked for would make hiredis abort the process (an assert
 * in its callback dispatch): the attached context's reader carries a reply
 * guard (broker_reply.h) that fails the read instead, so hiredis
 * disconnects as on any broken connection. The disconnect callback then
 * finds ev->guard.tripped set and the reason in ev->guard.why.
 */
#ifndef M0_REDIS_LOOP_H
#define M0_REDIS_LOOP_H

#include <hiredis/async.h>
#include "m0/broker_reply.h"
#include "m0/types.h"

struct m0_loop;

struct m0_redis_ev {
    struct m0_loop *loop;
    redisAsyncContext *ac;     /* attached context; NULL once hiredis cleaned it up */
    int fd;
    uint32_t events;           /* epoll interest registered (0: none) */
    struct m0_reply_guard guard;   /* in the context's reader (reset at each attach) */
};

/*
 * Attach ac (fresh from redisAsyncConnect*, no error) to loop through ev.
 * Set the connect callback after this: hiredis then watches for the
 * connect to complete. Returns M0_OK, or M0_ERR (nothing attached).
 * hiredis unregisters the socket itself (cleanup) before it closes it.
 * Installs ev->guard in ac's reader (ev must outlive ac).
 */
int m0_redis_attach(struct m0_redis_ev *ev, struct m0_loop *loop, redisAsyncContext *ac);

/*
 * Before the loop runs (it blocks on DNS): host as a numeric address in out
 * (cap bytes; "" when host is numeric already, to be used as it is).
 * Returns M0_OK, or M0_ERR with the resolver's reason in *why (static
 * text).
 */
int m0_redis_resolve(const char *host, char *out, size_t cap, const char **why);

#endif
