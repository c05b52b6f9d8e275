/*
 * asgi_ws.h — the ASGI WebSocket protocol (asgi_ws.c, of the ASGI module,
 * asgi.h): whether a request is a WebSocket handshake, and its scope.
 */
#ifndef M0_ASGI_WS_H
#define M0_ASGI_WS_H

#include "m0/asgi.h"

/* Is the request an attempt to open a WebSocket (Upgrade: websocket with
 * Connection: upgrade, RFC 6455 §4.1)? Such a request gets a websocket
 * scope, or a 400/426 without reaching the application. */
int m0_asgi_is_websocket(const struct m0_req *r);

/* The websocket scope (ASGI WebSocket spec 2.4) made from the request's
 * HTTP scope (a new dict; scope is not changed), or Py_None when the
 * handshake is invalid: the refusal is then the job's response and the job
 * is the loop's again. NULL with an exception set on failure. */
struct _object *m0_asgi_ws_scope(struct m0_job *job, struct _object *scope);

#endif
