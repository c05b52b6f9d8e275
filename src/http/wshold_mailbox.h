/*
 * wshold_mailbox.h — a held WebSocket's inbound messages (wshold_mailbox.c,
 * of the WebSocket hold's module, private to it: wshold_int.h).
 */
#ifndef M0_WSHOLD_MAILBOX_H
#define M0_WSHOLD_MAILBOX_H

#include "wshold_int.h"

/*
 * Complete inbound messages, in order.
 *
 * m0_wsbox_push: queue the message the parser p completed (its payload
 * taken); a full queue (more than QUEUE_MAX messages, or more bytes than
 * --ws-max-message behind the one in flight) pauses the reading.
 * m0_wsbox_clear: drop every queued message.
 * m0_wsbox_offer_all: an owned socket's every queued message into its
 * runner's channel at once (m0_job_offer); the next batch when it took them
 * all (M0_CPL_TAKEN).
 * m0_wsbox_drive: hand queued messages on — to an owning runner in
 * batches, or one at a time to the runner of the target that gated the
 * socket (on its pool, or inline), each answer back as one frame; over
 * HTTP (wshold_woh.c) all of them and what is owed as one request of
 * events, one at a time — and read what waited while the queue was full.
 * m0_wsbox_message_done: a message's view returned (its DONE): its answer
 * to the socket, the job given back, the next message.
 */
void m0_wsbox_push(struct m0_wshold *ws, int opcode, struct m0_ws_parser *p);
/* The same for a copy of n bytes at p (a ping the socket posts over HTTP). */
void m0_wsbox_push_copy(struct m0_wshold *ws, int opcode, const char *p, size_t n);
void m0_wsbox_clear(struct m0_wshold *ws);
void m0_wsbox_offer_all(struct m0_conn *c);
void m0_wsbox_drive(struct m0_server *s, struct m0_conn *c);
void m0_wsbox_message_done(struct m0_server *s, struct m0_conn *c);

#endif
