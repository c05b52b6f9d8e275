/*
 * grip_hold.h — GRIP holds (grip_hold.c; issue 19, docs/realtime.md
 * "GRIP"): the hold implementation a view's Grip-Hold takes (hold.h), and
 * the operations of a connection that speaks it once HELD (conn.h).
 *
 *   Grip-Hold: stream    the view's head and body are the stream's start
 *                        (its media type, its bytes: not SSE-framed by the
 *                        server); each http-stream item on the channel is
 *                        written as it is (its %I rendered with the
 *                        subscription's id_format when build-id applies);
 *                        the skip-self, skip-users and require-sub filters
 *                        drop what is not for this subscriber;
 *                        "action": "close" ends the stream; Grip-Keep-Alive
 *                        is written idle or on an interval.
 *   Grip-Hold: response  nothing is written: the first http-response item
 *                        on the channel is the answer, or the view's own
 *                        response when Grip-Timeout passes. Either is
 *                        followed by a close (Connection: close).
 *
 * Sequencing: a channel given with prev-id takes only an item whose
 * prev-id is the last id it saw (then that item's id is the last). A
 * replayed item that does not chain was in the view's body already and is
 * dropped; a live one means an item was missed, as does the worker's gap
 * notice: the stream ends (its client reconnects with Last-Event-ID and the
 * application answers from its storage), a long-poll is answered with the
 * view's response (its client asks again).
 */
#ifndef M0_GRIP_HOLD_H
#define M0_GRIP_HOLD_H

struct m0_conn_ops;
struct m0_hold_ops;

extern const struct m0_hold_ops m0_grip_hold_ops;
extern const struct m0_conn_ops m0_grip_conn_ops;

#endif
