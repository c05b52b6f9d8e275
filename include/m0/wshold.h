/*
 * wshold.h — WebSocket holds (wshold.c; DESIGN capability 6; RFC 6455):
 * the hold implementation an M0-Hold: websocket approval takes (hold.h),
 * and the operations of a connection that speaks WebSocket once HELD
 * (conn.h). Everything else of a held socket is private to wshold.c.
 */
#ifndef M0_WSHOLD_H
#define M0_WSHOLD_H

struct m0_conn_ops;
struct m0_hold_ops;

extern const struct m0_hold_ops m0_ws_hold_ops;
extern const struct m0_conn_ops m0_ws_conn_ops;

#endif
