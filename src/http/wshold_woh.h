/*
 * wshold_woh.h — a WebSocket whose events go over HTTP (wshold_woh.c; the
 * protocol's codec is woh.h): private to the WebSocket hold's files
 * (wshold.c, wshold_mailbox.c, wshold_open.c).
 */
#ifndef M0_WSHOLD_WOH_H
#define M0_WSHOLD_WOH_H

#include "wshold_int.h"

struct m0_head;
struct m0_req;
struct m0_ws_snapshot;

/*
 * wshold_woh.c, for the socket and the mailbox: a socket whose events go
 * over HTTP (woh.h).
 *
 * m0_woh_begin: ws_begin of a socket its OPEN's answer accepted (the hold's
 * job): the answer's fields the protocol reads taken out of job->head (the
 * rest go on the 101), its events kept. m0_woh_enter: the 101 is out: those
 * events go (start: the newest id when the OPEN was made). m0_woh_pending:
 * is a request owed (messages, the peer's close or leaving, a
 * keep-alive)? m0_woh_owes: is an end (CLOSE, DISCONNECT) still to be
 * told? m0_woh_request: job->req becomes the next request (the queued
 * messages taken). m0_woh_answer: its view returned: the answer applied.
 * m0_woh_peer_closed / m0_woh_peer_gone: the peer's close frame (code,
 * reason) / its leaving without one, to be told once. m0_woh_detached:
 * the application let go (c:detach). m0_woh_tick: the keep-alives; the
 * next time to look (0: none). m0_woh_free, m0_woh_size (its bytes).
 */
struct m0_woh *m0_woh_begin(struct m0_job *job);
void m0_woh_enter(struct m0_server *s, struct m0_conn *c, uint64_t start);
int m0_woh_pending(const struct m0_wshold *ws);
int m0_woh_owes(const struct m0_wshold *ws);
void m0_woh_request(struct m0_server *s, struct m0_conn *c, struct m0_job *job);
void m0_woh_answer(struct m0_server *s, struct m0_conn *c);
void m0_woh_peer_closed(struct m0_wshold *ws, unsigned code, const char *reason, size_t rlen);
void m0_woh_peer_gone(struct m0_wshold *ws);
int m0_woh_detached(const struct m0_wshold *ws);
uint64_t m0_woh_tick(struct m0_server *s, struct m0_conn *c);
void m0_woh_free(struct m0_woh *w);
size_t m0_woh_size(const struct m0_woh *w);

/*
 * For the endpoint that opens such a socket (wshold_open.c), too.
 * m0_woh_events_request: r becomes the POST of the events in body (moved
 * in) for the socket snap, cid and meta describe (meta: NULL or the
 * socket's Set-Meta values): the handshake's fields, then Accept,
 * Content-Type, Connection-Id, Sec-WebSocket-Extensions: grip and Meta-*.
 * m0_woh_field: the value of the answer's field name (vl: its length), or
 * NULL. m0_woh_well_formed: is p (n bytes) a list of events (woh.h)? The
 * first one's type and their count.
 */
void m0_woh_events_request(struct m0_req *r, const struct m0_ws_snapshot *snap, const char *cid,
                           const struct m0_buf *meta, struct m0_buf *body);
const char *m0_woh_field(struct m0_head *h, const char *name, size_t *vl);
int m0_woh_well_formed(const char *p, size_t n, int *first_type, size_t *count);

#endif
