/*
 * hold.h — held connections (DESIGN capabilities 4 to 6): the hold
 * interface with its implementations, SSE streams (hold.c), WebSockets
 * (wshold.c) and GRIP streams and long-polls (grip_hold.c), the accounting
 * they share, and the loop's holds as the sink of its realtime engine
 * (rt.h: deliveries by slot, a corked fan-out pass, heartbeats). Loop
 * thread only.
 *
 * A hold is decided by the runner (job->resp.flags & M0_RESP_HOLD, the
 * channel in job->head) and taken by the loop when the runner's completion
 * arrives, before the head is written: the slot is subscribed in the
 * registry at once (events published meanwhile are replayed from the
 * journal from the id the runner saw when it decided), and becomes HELD
 * once the head and the view's body are out. A held connection keeps a
 * struct m0_hold and no Python object at all.
 *
 * A hold writes through its connection: its bytes go into the
 * connection's one output queue (conn.h: c->out, written by m0_conn_write,
 * which also sets the interest), and the hold keeps only the accounting —
 * what a runner owes (not counted against --outbox-limit), what a replay
 * is allowed past it, the corking of a fan-out pass. Bytes that come
 * before the head is out wait in the hold (early) and go first once it is.
 *
 * A hold is a struct m0_hold (what the stream shares with every other)
 * with its implementation's operations (struct m0_hold_ops);
 * an implementation keeps its own state around the base, which comes
 * first. The connection speaks the hold's protocol once it is HELD
 * (c->proto, conn.h); until then the response that set it up is HTTP/1's.
 *
 * A WebSocket hold (M0-Hold: websocket, DESIGN capability 6) is wshold.c's
 * implementation (its struct m0_wshold is private there): the loop checks
 * the handshake against the original request and answers 101 (or 400/426)
 * in place of the view's head, subscribes the socket like a stream, and
 * from then on speaks RFC 6455 (ws.h) on it: events go out as text frames
 * (their data, as EventSource's onmessage sees it), pings at the heartbeat
 * cadence, pongs, the close handshake; inbound messages go one at a time,
 * in order, to the runner of the target that gated the socket (runner.h,
 * "message"), and the view's answer comes back as one frame.
 *
 * An asynchronous runner (ASGI) accepts a socket itself: the loop holds it
 * the same way (the 101, the protocol, an optional channel), but the runner
 * keeps the job for the socket's whole life (M0_CPL_UPGRADE, job.h): its
 * frames come through the job's channel, the socket's messages go into it
 * in batches (m0_job_offer; the next batch when it took them all), and the
 * socket's end reaches it with the close code (m0_job_socket_gone). Such a
 * hold needs no bus: without --realtime (or without a channel) nothing is
 * subscribed.
 */
#ifndef M0_HOLD_H
#define M0_HOLD_H

#include "m0/types.h"
#include "m0/buf.h"

struct m0_completion;
struct m0_conn;
struct m0_conn_ops;
struct m0_hold;
struct m0_rt;
struct m0_rt_event;
struct m0_server;
struct m0_target;

/* What one kind of hold does (an implementation: SSE in hold.c, WebSocket
 * in wshold.c). Every operation runs on the loop thread; NULL means the
 * implementation has nothing to do there. */
struct m0_hold_ops {
    uint8_t proto;              /* enum m0_conn_proto the connection speaks once HELD */
    /* The handshake's and the head's part of a hold decided by the runner:
     * a zeroed hold (its base first), or NULL when it is refused (job->resp
     * is then the refusal; nothing is held). */
    struct m0_hold *(*begin)(struct m0_server *s, struct m0_conn *c);
    /* Is the connection's input read now (EPOLLIN)? NULL: always. */
    int (*reads)(const struct m0_hold *h);
    /* Queued bytes were written (a runner that owns the socket gets credit). */
    void (*written)(struct m0_server *s, struct m0_conn *c);
    /* One event from the engine, typed (rt.h): an SSE event, a notice
     * (m0-gap), or a GRIP item, which only GRIP and WebSocket holds take. */
    void (*deliver)(struct m0_server *s, struct m0_conn *c, const struct m0_rt_event *ev);
    /* The head and the view's body are out: the connection is HELD now. */
    void (*enter)(struct m0_server *s, struct m0_conn *c);
    /* Drain: end the stream (its client reconnects and resumes). */
    void (*end)(struct m0_server *s, struct m0_conn *c);
    /* The connection closes: free what begin made around the base (the
     * base itself is hold.c's to free). */
    void (*release)(struct m0_server *s, struct m0_conn *c);
    /* A completion of the runner that owns the socket (job.h). */
    void (*complete)(struct m0_server *s, struct m0_conn *c, const struct m0_completion *done);
    /* A grant's expiry (--grant-expire close; NULL: the implementation
     * outlives its grant): refresh sends the m0-refresh notice naming exp
     * (seconds since the epoch); expire ends the stream as the grant lapses. */
    void (*refresh)(struct m0_server *s, struct m0_conn *c, int64_t exp);
    void (*expire)(struct m0_server *s, struct m0_conn *c);
};

/* The base every hold starts with. */
struct m0_hold {
    const struct m0_hold_ops *ops;
    const struct m0_target *target;   /* the mount whose view gated the hold (its counters;
                                         inbound WebSocket messages go back to it) */
    struct m0_buf *early;       /* bytes sent before the head was out (NULL: none); they go
                                   to the connection's queue when it is HELD */
    uint64_t last_write;        /* loop clock of the last write (heartbeats) */
    size_t allowance;           /* replay bytes still queued: allowed past --outbox-limit */
    size_t owed;                /* a runner's own bytes in the queue (m0_hold_send_owed): not
                                   counted against --outbox-limit; its credit window bounds them */
    uint8_t corked;             /* has bytes queued in the current fan-out pass */
    /* --access-log: the connection is logged when the hold ends (its
     * release), nginx's way: the request's line kept when it became HELD,
     * its status (a long-poll's: its answer's, m0_hold_answered), the bytes
     * after the head (the view's body, then every byte the hold wrote but
     * heads it wrote itself), the time since the request began. */
    struct m0_access_kept *alog;
    int log_status;
    uint64_t sent;              /* bytes written since the head, the view's body included */
    uint64_t heads;             /* of those, heads the hold wrote (a long-poll's answer) */
    /* A grant's end (job->grant_exp, --grant-expire close), in loop clock
     * ms: the m0-refresh notice at refresh_at (0: sent, or none), the end
     * at expire_at (0: never). Kept in the loop's timer wheel as the
     * connection's next tick (m0_hold_grant_tick): nothing scans for them. */
    uint64_t refresh_at, expire_at;
    int64_t exp;                /* the grant's exp, seconds since the epoch (the notice's) */
};

/* The loop's holds: the sink of its realtime engine. */
struct m0_holds {
    uint64_t heartbeat_ms;      /* --heartbeat (0: none) */
    uint64_t refresh_ms;        /* --grant-refresh (0: no m0-refresh notice) */
    size_t outbox_limit;        /* --outbox-limit */
    int corking;                /* inside a fan-out pass: queue, write at its end */
    int direct;                 /* this pass touches a connection once: write each delivery at once */
    uint32_t ndirect;           /* deliveries written at once this pass */
    int replaying;              /* the delivery is a replay: allowed past the limit */
    int owing;                  /* m0_hold_send_owed is sending: a runner's own bytes */
    uint32_t *corked;           /* slots with bytes queued this pass */
    uint32_t ncorked;
};

/* The SSE stream (hold.c): the implementation of M0-Hold: stream, and the
 * operations of a connection that speaks it once HELD. */
extern const struct m0_hold_ops m0_sse_hold_ops;
extern const struct m0_conn_ops m0_sse_conn_ops;

/* Set up s->holds and the loop's realtime engine s->rt with the holds as
 * its sink (every worker: a socket an ASGI app accepts is held with or
 * without --realtime). m0_holds_free frees both. */
void m0_holds_init(struct m0_server *s);
void m0_holds_free(struct m0_server *s);

/* The loop's side of a hold decided by the runner, with implementation
 * ops: subscribe the slot to the job's channel (before its head is
 * written). Returns M0_OK, or M0_ERR when the worker is draining or no bus
 * is read for the channel (the caller answers 503). When ops->begin
 * refuses (a WebSocket handshake that fails: job->resp is the 400/426,
 * M0_RESP_HOLD cleared) M0_OK is returned with nothing held. */
int m0_hold_subscribe(struct m0_server *s, struct m0_conn *c, const struct m0_hold_ops *ops);
/* The head and the view's body are out: the connection becomes HELD and
 * speaks the hold's protocol; everything per-request is released. */
void m0_hold_enter(struct m0_server *s, struct m0_conn *c);
/* A completion of the runner that owns the held socket, before it is
 * HELD (h1.c passes it on). */
void m0_hold_complete(struct m0_server *s, struct m0_conn *c, const struct m0_completion *done);
/* The connection closes (or a long-poll's goes back to HTTP/1.1):
 * unsubscribe and free its hold (a no-op without one); with --access-log a
 * hold that was HELD writes its line now (accesslog.h). */
void m0_hold_release(struct m0_server *s, struct m0_conn *c);
/* A hold answers its request itself (a GRIP long-poll): its line's status
 * is code, and the first head_len bytes it sends next are a head, not body. */
void m0_hold_answered(struct m0_conn *c, int code, size_t head_len);
/* Drain: flush what each held stream has queued and end it with a FIN (its
 * client reconnects and resumes with Last-Event-ID); a WebSocket gets a
 * close frame (1001) first. */
void m0_hold_end_all(struct m0_server *s);

/* A grant's expiry (--grant-expire close; docs/realtime.md "Expiry and refresh"),
 * called from the tick of an implementation with refresh/expire ops
 * (SSE, WebSocket): the m0-refresh notice once refresh_at has come, then
 * the end once expire_at has. Returns 1 when the hold was ended (c may be
 * closed: touch nothing more), else 0. */
int m0_hold_grant_tick(struct m0_server *s, struct m0_conn *c);
/* After an implementation's tick set c->deadline (its heartbeat): bring it
 * forward to the grant's next moment, if that is sooner. */
void m0_hold_grant_due(struct m0_server *s, struct m0_conn *c);

/* Send n bytes on a held (or about to be held) connection: written at
 * once when nothing is waiting, else queued on the connection (one more
 * than --outbox-limit behind is doomed: conn.h's slow-client policy). */
void m0_hold_send(struct m0_server *s, struct m0_conn *c, const char *p, size_t n);
/* One whole delivery of a fan-out pass (one buffer, the hold's deliver):
 * in a pass that touches each connection at most once (one event in
 * flight: nothing to merge) it is written at once, from the caller's
 * buffer, when nothing is queued — no copy into the queue, no second walk
 * at the pass's end; otherwise as m0_hold_send. */
void m0_hold_deliver(struct m0_server *s, struct m0_conn *c, const char *p, size_t n);
/* The same for bytes a runner owes its socket (an ASGI app's frames): they
 * are bounded by the runner's credit window (job.h), not --outbox-limit. */
void m0_hold_send_owed(struct m0_server *s, struct m0_conn *c, const char *p, size_t n);
/* The operations of a held connection (conn.h) every implementation's
 * share: its written bytes' accounting (wrote) and the input it watches
 * (watch: read unless the implementation stops reading). */
void m0_hold_wrote(struct m0_server *s, struct m0_conn *c, size_t n);
uint32_t m0_hold_watch(struct m0_server *s, const struct m0_conn *c);

#endif
