/*
 * h1.h — HTTP/1.1 on a connection (h1.c, RFC 9112): the protocol every
 * connection speaks until a hold is entered. conn.c reaches it only
 * through these operations (conn.h), which the composition root (serve.c)
 * puts at s->proto[M0_CONN_PROTO_H1].
 */
#ifndef M0_H1_H
#define M0_H1_H

struct m0_conn_ops;

extern const struct m0_conn_ops m0_h1_conn_ops;

#endif
