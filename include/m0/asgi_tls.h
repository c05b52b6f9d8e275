/*
 * asgi_tls.h — the ASGI TLS extension (asgi_tls.c, of the ASGI module,
 * asgi.h): scope["extensions"]["tls"] for a request that came over one of
 * m0serve's TLS listeners (issue 31; the ASGI spec's "TLS" extension:
 * server_cert, client_cert_chain, client_cert_name, client_cert_error,
 * tls_version, cipher_suite).
 */
#ifndef M0_ASGI_TLS_H
#define M0_ASGI_TLS_H

#include "m0/asgi.h"

/* When job->tls says the connection is TLS (job.h), give scope (an HTTP or
 * websocket scope being built) an "extensions" dict of its own with "tls"
 * added; nothing on a plain one. 0, or -1 with an exception set. */
int m0_asgi_tls_scope(struct _object *scope, const struct m0_job *job);

#endif
