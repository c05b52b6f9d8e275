/*
 * hold.h — held connections and the worker's realtime state (DESIGN
 * capabilities 4 and 5): M0-Hold streams, the loop side of the broadcast
 * bus (drain, reorder window, fan-out to the registry), heartbeats, gap
 * notices and the counters /health shows. Loop thread only.
 *
 * A hold is decided by the runner (job->resp.flags & M0_RESP_HOLD, the
 * channel in job->head) and taken by the loop when the runner's completion
 * arrives, before the head is written: the slot is subscribed in the
 * registry at once (events published meanwhile are replayed from the
 * journal from the id the runner saw when it decided), and becomes HELD
 * once the head and the view's body are out. A held connection keeps a
 * struct m0_hold (its outbox) and no Python object at all.
 *
 * A WebSocket hold (M0-Hold: websocket, DESIGN capability 6) is the same
 * hold with a struct m0_wshold beside it (src/wshold.c): the loop checks
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
#include "m0/ws.h"

struct m0_conn;
struct m0_server;
struct m0_target;
struct m0_wsmsg;

struct m0_hold {
    const struct m0_target *target;   /* the mount whose view gated the hold (its counters;
                                         inbound WebSocket messages go back to it) */
    struct m0_buf outbox;       /* event bytes not yet written */
    uint64_t last_write;        /* loop clock of the last write (heartbeats) */
    size_t allowance;           /* replay bytes still queued: allowed past --outbox-limit */
    size_t owed;                /* a runner's own bytes in the outbox (m0_hold_send_owed): not
                                   counted against --outbox-limit; its credit window bounds them */
    uint8_t corked;             /* has bytes queued in the current fan-out pass (hold.c) */
    struct m0_wshold *ws;       /* a WebSocket's protocol state; NULL for an SSE stream */
};

/*
 * What a held WebSocket keeps (about 400 bytes and its handshake's
 * snapshot while idle; a message being reassembled or queued costs its
 * bytes, bounded by --ws-max-message).
 */
struct m0_wshold {
    struct m0_ws_parser parser;     /* frames in: head state, masking, fragment buffer, UTF-8 state */
    const struct m0_target *target; /* the target whose view gated the socket: messages go back to it */
    struct m0_ws_snapshot *req;     /* the handshake request, for the messages' requests */
    struct m0_wsmsg *q_head, *q_tail;   /* complete messages waiting their turn, oldest first */
    uint32_t q_len;
    size_t q_bytes;
    uint8_t in_flight;              /* a message is with the runner (the conn has C_WS_MSG) */
    uint8_t paused;                 /* the queue is full: the socket is not read */
    uint8_t close_sent;             /* our close frame is queued: nothing else is sent */
    uint8_t close_received;         /* the peer's close frame arrived */
    uint8_t owned;                  /* an asynchronous runner keeps the job (ASGI): see above */
    uint8_t runner_done;            /* owned: the runner posted its DONE */
    uint8_t peer_gone;              /* the peer left while views still owed it messages (not owned) */
    uint16_t end_code;              /* the close code the socket ends with (the peer's, or ours) */
    uint64_t ping_at;               /* loop clock of our unanswered ping; 0: none */
    uint64_t last_pong;             /* loop clock of the last pong */
    uint16_t channel_len;
    char channel[];                 /* M0-Channel of the approval, for the messages' requests */
};

/* Counters for /health. */
struct m0_rt_stats {
    uint32_t held;              /* held streams, WebSockets included */
    uint32_t websockets;        /* of which WebSockets */
    uint64_t published;         /* bus events this worker received */
    uint64_t delivered;         /* event copies queued to held streams */
    uint64_t slow_closed;       /* held streams closed for exceeding --outbox-limit */
    uint64_t lost;              /* events this worker knows it missed */
    uint64_t late;              /* events dropped as out of order past the window */
};

/* The holds' state without a bus (counters, outbox limit, heartbeat, an
 * empty registry): every worker has it, so a socket an ASGI app accepts is
 * held with or without --realtime. Idempotent. */
void m0_rt_init(struct m0_server *s);
/* What --realtime needs before the worker reports booted (m0_rt_init, the
 * fan-out and reorder hook): M0_OK, or M0_ERR when there is no bus.
 * Idempotent. */
int m0_rt_prepare(struct m0_server *s);
/* Start --realtime once the master says go (m0_rt_prepare if not done):
 * bus reading registered with the loop, or the broker started. Returns
 * M0_OK or M0_ERR. */
int m0_rt_start(struct m0_server *s);
/* Stop reading the bus (drain: a replacement worker reads it next). */
void m0_rt_stop_reading(struct m0_server *s);
void m0_rt_free(struct m0_server *s);
void m0_rt_stats(const struct m0_server *s, struct m0_rt_stats *out);
/* The busiest channels, for /health (see m0_registry_top). */
size_t m0_rt_top(const struct m0_server *s, struct m0_channel_stat *out, size_t max);

/* The loop's side of a hold decided by the runner: subscribe the slot to
 * the job's channel (before its head is written). Returns M0_OK, or
 * M0_ERR when the worker is draining or has no realtime state (the caller
 * answers 503). A WebSocket hold's handshake is checked here first: when it
 * fails, job->resp becomes the refusal (400/426; M0_RESP_HOLD cleared, the
 * connection closes after it) and M0_OK is returned with nothing held. */
int m0_hold_subscribe(struct m0_server *s, struct m0_conn *c);
/* The head and the view's body are out: the connection becomes HELD and
 * everything per-request is released. */
void m0_hold_enter(struct m0_server *s, struct m0_conn *c);
/* Epoll events on a held connection. */
void m0_hold_on_event(struct m0_server *s, struct m0_conn *c, uint32_t events);
/* Periodic: a heartbeat comment on an idle stream. */
void m0_hold_sweep(struct m0_server *s, struct m0_conn *c);
/* The connection closes: unsubscribe and free its hold. */
void m0_hold_release(struct m0_server *s, struct m0_conn *c);
/* Drain: flush what each held stream has queued and end it with a FIN (its
 * client reconnects and resumes with Last-Event-ID); a WebSocket gets a
 * close frame (1001) first. */
void m0_hold_end_all(struct m0_server *s);

/* ---- the broker's side of the loop (broker.c; loop thread) ---- */

/* One event read from the broker, in id order: journal it and fan it out
 * (frame is the whole SSE event, id line included). */
void m0_rt_event(struct m0_server *s, const char *channel, size_t clen, uint64_t id, const char *frame, size_t flen);
/* Events up to id will never arrive (announce_lost: m0-gap to live streams,
 * resumes from below go to the broker). */
void m0_rt_lost(struct m0_server *s, uint64_t id);
/* Events up to id were published before this worker read the broker: its
 * journal cannot prove a resume from below them whole. */
void m0_rt_floor(struct m0_server *s, uint64_t id);
/* Fan-outs are backed up: stop reading the broker for now. */
int m0_rt_busy(const struct m0_server *s);
/* The connection of slot if it is still the one (generation gen) whose
 * hold waits for a broker resume; NULL when it left or was subscribed. */
struct m0_conn *m0_rt_awaiting(struct m0_server *s, uint32_t slot, uint32_t gen);
/* Queue replayed bytes (an event or a gap notice) on a waiting hold; a
 * replay may exceed --outbox-limit, as a journal replay may. */
void m0_rt_replay(struct m0_server *s, struct m0_conn *c, const char *p, size_t n);
/* The replay is out: subscribe the hold's slot to channel with filter
 * last (journal events after it follow, then live ones). */
void m0_rt_join(struct m0_server *s, struct m0_conn *c, const char *channel, size_t clen, uint64_t last);
/* Queue n bytes on a held (or about to be held) connection: written at
 * once when nothing is waiting, else appended to its bounded outbox (one
 * more than --outbox-limit behind is doomed). */
void m0_hold_send(struct m0_server *s, struct m0_conn *c, const char *p, size_t n);
/* The same for bytes a runner owes its socket (an ASGI app's frames): they
 * are bounded by the runner's credit window (job.h), not --outbox-limit. */
void m0_hold_send_owed(struct m0_server *s, struct m0_conn *c, const char *p, size_t n);
/* Write the outbox. M0_OK (empty), M0_AGAIN (EPOLLOUT armed) or M0_ERR. */
int m0_hold_flush(struct m0_server *s, struct m0_conn *c);
/* The epoll interest of a held connection, with EPOLLOUT when want_out. */
uint32_t m0_hold_interest(const struct m0_conn *c, int want_out);

/*
 * wshold.c — the WebSocket side, called by hold.c and h1.c (loop thread).
 *
 * m0_ws_hold_begin: the handshake check and the 101 for the job's
 *   request (see m0_hold_subscribe); allocates c->hold with its wshold.
 *   M0_OK, or M0_DONE when refused (job->resp is the refusal).
 * m0_ws_hold_enter: the 101 is out: read what the client sent meanwhile.
 * m0_ws_hold_on_event, m0_ws_hold_sweep (pings; a peer silent for two
 *   heartbeats after a ping is closed), m0_ws_hold_deliver (one framed SSE
 *   event from the registry → text frames), m0_ws_hold_end (drain: 1001),
 *   m0_ws_hold_free (with the hold).
 * m0_ws_hold_on_complete: the runner finished a message of this slot
 *   (C_WS_MSG; any state: the socket may have closed meanwhile).
 * For an owned socket (h1.c's completions): m0_ws_hold_on_part (frames or
 * our close from the runner's channel), m0_ws_hold_on_taken (it took the
 * offered messages), m0_ws_hold_on_done (the runner ended: its last frames,
 * then our close, 1000 unless it asked for another code). m0_ws_hold_release
 * (from m0_hold_release): tells an owning runner the socket ended, frees.
 */
int m0_ws_hold_begin(struct m0_server *s, struct m0_conn *c);
void m0_ws_hold_enter(struct m0_server *s, struct m0_conn *c);
void m0_ws_hold_on_event(struct m0_server *s, struct m0_conn *c, uint32_t events);
void m0_ws_hold_sweep(struct m0_server *s, struct m0_conn *c, uint64_t heartbeat_ms);
void m0_ws_hold_deliver(struct m0_server *s, struct m0_conn *c, const char *frame, size_t n);
void m0_ws_hold_end(struct m0_server *s, struct m0_conn *c);
void m0_ws_hold_release(struct m0_server *s, struct m0_conn *c);
void m0_ws_hold_on_complete(struct m0_server *s, struct m0_conn *c);
void m0_ws_hold_on_part(struct m0_server *s, struct m0_conn *c);
void m0_ws_hold_on_taken(struct m0_server *s, struct m0_conn *c);
void m0_ws_hold_on_done(struct m0_server *s, struct m0_conn *c);

#endif
