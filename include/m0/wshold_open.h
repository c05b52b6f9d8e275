/*
 * wshold_open.h — WebSocket-over-HTTP (Pushpin's protocol, woh.h) on
 * m0serve's WebSocket holds (wshold_open.c opens a socket, wshold_woh.c
 * leads its life): a WebSocket whose handshake comes under --ws-over-http
 * to a WSGI mount is held by the loop, and its
 * events go to the application as ordinary POSTs through the mount's
 * runner; the answers come back as frames and GRIP control messages
 * (subscribe, unsubscribe, detach, keep-alive). django-grip's
 * WebSocketContext and websocket_only views run unchanged.
 *
 * The endpoint that claims such a handshake (endpoint.h): its OPEN is the
 * first request; the answer opens the socket (a 101 with the answer's
 * fields, the hold taken as a view's M0-Hold: websocket approval is) or
 * refuses it (the answer itself, as Pushpin gives it). The rest of the
 * socket's life is private to the WebSocket hold's module (wshold_woh.h).
 */
#ifndef M0_WSHOLD_OPEN_H
#define M0_WSHOLD_OPEN_H

struct m0_endpoint;

extern const struct m0_endpoint m0_woh_endpoint;

#endif
