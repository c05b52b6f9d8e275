/*
 * conn_slots.h — the loop's slot table (conn_slots.c; server.h: struct
 * m0_slot_table): slots made in chunks, the states and the deadlines they
 * imply, the active list and the wheel of held connections, the job cache,
 * the accept path, closing (now, or doomed for after a fan-out), the sweep
 * of timeouts and the routing of runners' completions. Loop thread only.
 */
#ifndef M0_CONN_SLOTS_H
#define M0_CONN_SLOTS_H

#include <stdint.h>
#include "m0/conn.h"      /* the connection and its states (it includes this header last) */

/* Make the next chunk of slots and put them on the free list. M0_OK, or
 * M0_ERR: every slot is made already, or out of memory (logged). */
int m0_conn_grow(struct m0_server *s);

/* Every slot made so far (serve.c: at a fork, at the end), through fn. */
void m0_conn_each(struct m0_server *s, void (*fn)(struct m0_conn *c, void *ctx), void *ctx);

/* Enter st and the deadline it implies (READ_HEAD: keep-alive or head
 * timeout; READ_BODY: body timeout; WRITE: write timeout; LINGER: 2 s;
 * others: none). The one place a connection changes state. */
void m0_conn_set_state(struct m0_server *s, struct m0_conn *c, enum m0_conn_state st);

/* Close now: unsubscribe, close the fd, tell a runner that holds the job.
 * The slot is released later (end of batch, or the runner's completion). */
void m0_conn_close(struct m0_server *s, struct m0_conn *c);

/* The one slow-client policy: a client that does not read what is queued
 * for it — a held stream further behind than its hold allows (hold.c), a
 * response that made no progress for the write timeout (the sweep) — is
 * doomed (closed after the current pass, never under a fan-out's feet),
 * with a line at most once a second saying why. */
void m0_conn_too_slow(struct m0_server *s, struct m0_conn *c, const char *why);

/* Close the connections a fan-out doomed (after it, never during);
 * doom one for that. */
void m0_conn_close_doomed(struct m0_server *s);
void m0_conn_doom(struct m0_server *s, struct m0_conn *c);

/* Runners' completions (the loop's completion handler: slot lookup, the
 * runner check, an ORPHAN's release, then the protocol's complete), and
 * the periodic sweep (the protocols' ticks, the deadlines, the wheel). */
void m0_conn_on_complete(struct m0_loop *l, const struct m0_completion *done, void *ctx);
void m0_conn_sweep(struct m0_server *s);

/* Accept what is pending on the listener (a shared one's connections go
 * to the loops in turn: s->accept.hand_off). */
void m0_conn_accept(struct m0_loop *l, int fd, uint32_t events, void *ctx);

/* Serve the accepted connection fd (ownership passes: closed on every
 * failure) from listener lidx (its index among the worker's, or -1) with
 * the peer address addr (a struct sockaddr of its family): a slot, the
 * first read. M0_OK, or M0_ERR: no slot (--max-connections, counted and
 * logged) or epoll refused it. Loop thread. */
int m0_conn_take(struct m0_server *s, int fd, int lidx, const void *addr);

/* A HELD connection's next tick at due (loop clock ms; at or before now:
 * the next sweep), moved in the wheel. Outside a tick, where setting
 * c->deadline would lose it in the wheel. */
void m0_conn_tick_at(struct m0_server *s, struct m0_conn *c, uint64_t due);

/* Close every open connection (the loop ends). */
void m0_conn_close_all(struct m0_server *s);

/* Call fn for every HELD connection (a drain ends the holds); fn may
 * change the connection's state. */
void m0_conn_each_held(struct m0_server *s, void (*fn)(struct m0_server *s, struct m0_conn *c));

/* Return closed slots to the free list (a before-sleep hook). */
void m0_conn_release_closed(struct m0_server *s);

/* The job c's request uses: its own, or one from the loop's cache (at most
 * M0_JOB_CACHE kept), or a new one; set in s->jobs for the slot and the
 * parser pointed at its request. Never NULL. */
struct m0_job *m0_conn_job(struct m0_server *s, struct m0_conn *c);

/* The connection is done with its job (a hold began, the slot closed, a
 * WebSocket message answered): back to the cache (beyond M0_JOB_CACHE:
 * freed), c->job NULL. No-op while a runner has it (C_RUNNER, C_MORE) or
 * when it is pinned (job.h). The per-connection client address goes with
 * it: a hold that needs it later keeps its own copy. */
void m0_conn_job_put(struct m0_server *s, struct m0_conn *c);

/* Free the cache (serve.c, at the end; the pool stopped). */
void m0_conn_job_cache_free(struct m0_server *s);

/* The loop ends, every connection gone (closed and released, or freed
 * through m0_conn_each): free the slot chunks, the wheel and the slots'
 * job table (serve.c, and the unit tests' rigs). */
void m0_conn_slots_free(struct m0_server *s);

#endif
