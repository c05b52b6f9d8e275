/*
 * xprt_tls.h — the TLS transport (issue 31): the second implementation of
 * conn.h's struct m0_xprt_ops, under the same output queue, for the
 * connections of a listener that speaks TLS (server.h accept.tls; the
 * context is the worker's cfg->tls, tls_server.h). No protocol file knows
 * which transport it speaks over: HTTP/1.1, SSE, WebSocket and GRIP holds,
 * grants, static files and the endpoints answered in C all go through it.
 *
 * A connection's TLS life, inside recv and writev (conn.h):
 *   HELLO ──first byte 0x16 (a handshake record)──▶ HANDSHAKE ──▶ OPEN
 *     │                                                 └─ failed: the alert OpenSSL sent, then closed
 *     └─ anything else: plain HTTP ──▶ REFUSED (one "400 Bad Request" line in
 *        plain text written, our side shut, the request discarded until the
 *        client closes: nginx's answer)
 * A new connection is in READ_HEAD with its head timer running, so a
 * handshake that stalls is closed after --header-timeout. The state is
 * kept by slot in the loop's extension (m0_tls_ext), never in struct
 * m0_conn: an idle plain connection pays nothing for TLS, an idle TLS one
 * its SSL object with no buffers (SSL_MODE_RELEASE_BUFFERS).
 *
 * Static files: SSL_sendfile when the kernel encrypts (kTLS, where the tls
 * module is loaded and OpenSSL was built with it), else the file read a
 * record at a time and written with SSL_write; a response head queued
 * before a file (M0_XPRT_MORE) rides in the file's first record.
 */
#ifndef M0_XPRT_TLS_H
#define M0_XPRT_TLS_H

#include "m0/conn.h"
#include "m0/server.h"

/* The transport (serve.c puts it at s->xprt[M0_XPRT_TLS]). */
extern const struct m0_xprt_ops m0_xprt_tls;

/* Its per-loop state (server.h: an extension serve.c registers): the
 * connections' TLS by slot, the file-record buffer, the counts. */
extern const struct m0_ext m0_tls_ext;

/* The loop's TLS counts since it started (for /health): handshakes
 * completed, of them resumed (a session ticket), failed (an alert or a
 * reset mid-handshake), and plain HTTP requests refused. */
struct m0_tls_counts {
    uint64_t handshakes, resumed, failed, plain_refused;
};
void m0_tls_counts(const struct m0_server *s, struct m0_tls_counts *out);

#endif
