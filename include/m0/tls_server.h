/*
 * tls_server.h — the server's TLS context (issue 31): what --certfile,
 * --keyfile, --keyfile-password-file, --ca-certs, --cert-reqs, --ciphers
 * and --tls-ticket-rotate make of OpenSSL's libssl, and the session-ticket
 * keys every worker shares. The transport that speaks it on a connection
 * is xprt_tls.c (conn.h's struct m0_xprt_ops); this file reads files and
 * makes contexts, and never touches a socket.
 *
 * Made by main before the first fork (a worker inherits it: fork copies
 * the context, nothing is re-read in a worker) and again by the master on
 * SIGHUP (master_tls.c): the new generation of workers gets the new
 * context, the old one keeps its own until it has drained, so no
 * connection is dropped; a file that cannot be read keeps the context in
 * use, with one line.
 *
 * What the context speaks: TLS 1.2 and 1.3 only; TLS 1.2 with ECDHE and an
 * AEAD (AES-GCM, ChaCha20-Poly1305) unless --ciphers says otherwise, the
 * server's order preferred; TLS 1.3's three suites; X25519, P-256, P-384;
 * no renegotiation (RFC 5746: a client's attempt is refused with a
 * no_renegotiation warning, the connection goes on), no compression; ALPN
 * http/1.1 (RFC 7301: a client offering only other protocols gets the
 * no_application_protocol alert); partial writes from a buffer that may
 * move (conn.c's output queue grows), buffers released while idle
 * (SSL_MODE_RELEASE_BUFFERS: a held stream keeps no 34 KiB of them), kTLS
 * asked for (SSL_OP_ENABLE_KTLS: used where the kernel has the tls module).
 *
 * Session resumption (RFC 5077, RFC 8446 §4.6.1) is by tickets only, so it
 * works across workers: their keys live in one page the master maps
 * shared before the first fork. The master makes a new key every
 * --tls-ticket-rotate seconds (m0_tlsd_rotate); a worker encrypts with the
 * newest and decrypts with any of the last three (an older key's ticket is
 * renewed), and a session lives 2 × the period. No session cache: a
 * worker's cache would resume only on that worker.
 */
#ifndef M0_TLS_SERVER_H
#define M0_TLS_SERVER_H

#include <stddef.h>
#include <time.h>
#include "m0/types.h"

struct m0_config;
struct ssl_ctx_st;
struct m0_tlsd;

/* The TLS 1.2 cipher list when --ciphers is not given (Mozilla's
 * "intermediate" less the DHE suites: ECDHE, AEAD, forward secrecy). */
#define M0_TLS_CIPHERS_DEFAULT "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:" \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:" \
    "ECDHE-RSA-CHACHA20-POLY1305"

/* The flags agree (cli.c, after parsing): the TLS flags need --certfile,
 * --cert-reqs optional/required needs --ca-certs, an https:// listener
 * needs --certfile, --tls-ticket-rotate is 0 or at least 1 s. M0_OK, or
 * M0_ERR with one line in err (cap bytes) naming the flag. */
int m0_tlsd_check_flags(const struct m0_config *cfg, char *err, size_t cap);

/* Does a listener given as addr (a --bind, --metrics-bind or
 * --grip-control value) speak TLS? A --bind's bare HOST:PORT does when
 * --certfile is given (main: 1); a side listener only when written
 * https:// (main: 0); http:// and unix:PATH never. */
int m0_tlsd_listener_is_tls(const struct m0_config *cfg, const char *addr, int main);

/*
 * A server context from cfg's files. prev: the context in use (its ticket
 * keys are kept: a reload resumes the sessions the old workers made), or
 * NULL at start (the key page is made: before the first fork). Returns it,
 * or NULL with one line in err naming the flag and file and OpenSSL's
 * reason ("--certfile: /x.pem: no start line", "--keyfile: the key does
 * not match the certificate"); *usage is 1 when the fault is a flag's
 * value rather than a file (--ciphers matching nothing).
 */
struct m0_tlsd *m0_tlsd_load(const struct m0_config *cfg, struct m0_tlsd *prev, char *err, size_t cap, int *usage);

/* Free a context made by m0_tlsd_load (the key page stays: another
 * context, or a worker, shares it). NULL is fine. */
void m0_tlsd_free(struct m0_tlsd *t);

/* The master, about once a second: a new ticket key once the newest is
 * --tls-ticket-rotate seconds old (now: CLOCK_REALTIME seconds). The
 * oldest of the three is wiped as it is replaced. */
void m0_tlsd_rotate(struct m0_tlsd *t, time_t now);

/* OpenSSL's context (shared by a worker's loops: SSL_new is safe on it
 * from any thread once it is made). */
struct ssl_ctx_st *m0_tlsd_ctx(const struct m0_tlsd *t);

/* The server's certificate in PEM (the ASGI TLS extension's server_cert),
 * NUL-terminated; lives as long as t. */
const char *m0_tlsd_server_pem(const struct m0_tlsd *t);

/* One line for the log: the certificate's subject and expiry
 * ("CN=example.com, expires 2027-01-01"), into buf (cap bytes). */
void m0_tlsd_describe(const struct m0_tlsd *t, char *buf, size_t cap);

#endif
