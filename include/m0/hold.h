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
 */
#ifndef M0_HOLD_H
#define M0_HOLD_H

#include "m0/types.h"
#include "m0/buf.h"

struct m0_conn;
struct m0_server;
struct m0_target;

struct m0_hold {
    const struct m0_target *target;   /* the mount whose view gated the hold (its counters;
                                         inbound WebSocket messages go back to it) */
    struct m0_buf outbox;       /* event bytes not yet written */
    uint64_t last_write;        /* loop clock of the last write (heartbeats) */
    size_t allowance;           /* replay bytes still queued: allowed past --outbox-limit */
};

/* Counters for /health. */
struct m0_rt_stats {
    uint32_t held;              /* held streams */
    uint64_t published;         /* bus events this worker received */
    uint64_t delivered;         /* event copies queued to held streams */
    uint64_t slow_closed;       /* held streams closed for exceeding --outbox-limit */
    uint64_t lost;              /* events this worker knows it missed */
    uint64_t late;              /* events dropped as out of order past the window */
};

/* Set up --realtime for the server: registry, bus reading (registered with
 * the loop), the fan-out and reorder hooks. Returns M0_OK or M0_ERR. */
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
 * answers 503). */
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
 * client reconnects and resumes with Last-Event-ID). */
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

#endif
