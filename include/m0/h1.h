/*
 * h1.h — HTTP/1.1 on a connection (h1.c, RFC 9112): the protocol every
 * connection speaks until a hold is entered. conn.c reaches it only
 * through these operations (conn.h), which the composition root (serve.c)
 * puts at s->proto[M0_CONN_PROTO_H1].
 */
#ifndef M0_H1_H
#define M0_H1_H

struct m0_conn_ops;
struct m0_endpoint;

extern const struct m0_conn_ops m0_h1_conn_ops;

/* The application mounts (endpoint.h): a path under a mount with a runner
 * (target.h) is run by it (dispatch.h) once its request is whole, or at its
 * head when the client waits for 100 Continue with a Content-Length (the
 * body is read while the application runs, M0_EP_EARLY). */
extern const struct m0_endpoint m0_h1_app_endpoint;

#endif
