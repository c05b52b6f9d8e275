/*
 * master_tls.h — the master's TLS context across a SIGHUP reload, and its
 * session-ticket keys (master_tls.c, of the master module, private to it:
 * master_int.h).
 */
#ifndef M0_MASTER_TLS_H
#define M0_MASTER_TLS_H

#include <stdint.h>

#include "master_int.h"

/* master_tls.c. tls_reread: SIGHUP re-reads --certfile, --keyfile,
 * --keyfile-password-file and --ca-certs for the new generation (a file
 * that cannot be read: one warning, the context in use stays); the serving
 * generation's context is kept until tls_commit (the new generation
 * serves) or put back by tls_restore (it could not boot), like the keys
 * (master_keys.h). The old workers keep the context they were forked
 * with until they have drained: no connection is dropped. tls_tick: about
 * once a second, a new session-ticket key when the newest is
 * --tls-ticket-rotate seconds old (tls_server.h). */
void m0_master_tls_reread(struct m0_master *m);
void m0_master_tls_commit(struct m0_master *m);
void m0_master_tls_restore(struct m0_master *m);
void m0_master_tls_tick(struct m0_master *m);

#endif
