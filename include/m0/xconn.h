/*
 * xconn.h — a client connection's transport: TCP, a unix socket, or TLS
 * over TCP (OpenSSL's libssl), on a non-blocking socket. The broker's
 * connections use it twice: on a worker's loop (rconn.h: every call returns
 * at once, M0_AGAIN saying what to wait for) and on publishing threads,
 * which wait with m0_xconn_wait and a deadline.
 *
 * Why our own TLS and not hiredis's: Debian 12's hiredis 0.14 has none (its
 * TLS arrived in 1.0); its reply reader and command formatter are kept, and
 * are given the bytes this transport reads and writes.
 *
 * TLS: the peer's certificate chain is verified against the system's store
 * or a given CA file, and its name (a DNS name or an IP address) against the
 * certificate (RFC 6125; OpenSSL's own check); the name goes out as SNI
 * (RFC 6066 §3) unless it is an IP literal. An optional client certificate
 * is presented. TLS 1.2 or later.
 */
#ifndef M0_XCONN_H
#define M0_XCONN_H

#include "m0/types.h"

struct ssl_ctx_st;
struct ssl_st;

/* What a TLS client context is made from. */
struct m0_tls_opts {
    const char *ca_certs;      /* PEM file of trusted CAs; NULL: the system's store */
    const char *certfile;      /* client certificate chain (PEM), or NULL */
    const char *keyfile;       /* its key (PEM); NULL: in certfile */
};

/*
 * A client TLS context for o: verification on, TLS >= 1.2, partial writes
 * and moving write buffers allowed (rconn.c appends to a growing buffer).
 * NULL with a one-line reason in err (cap bytes): a CA or certificate file
 * that cannot be read or a key that does not match. Make it once per
 * process, before any thread uses it (it is then only read); free it with
 * m0_tls_ctx_free.
 */
struct ssl_ctx_st *m0_tls_client_ctx(const struct m0_tls_opts *o, char *err, size_t cap);
void m0_tls_ctx_free(struct ssl_ctx_st *ctx);

/* Where to connect. */
struct m0_xconn_target {
    const char *host;          /* address (numeric unless resolve), or NULL with path */
    int port;
    const char *path;          /* a unix socket, or NULL */
    const char *name;          /* TLS: the name checked and sent as SNI (NULL: host) */
    int resolve;               /* 1: host may be a name looked up now (blocks: never on a loop) */
};

enum { M0_XC_CONNECTING, M0_XC_HANDSHAKE, M0_XC_OPEN, M0_XC_CLOSED };
enum { M0_XC_WANT_READ = 1, M0_XC_WANT_WRITE = 2 };

struct m0_xconn {
    int fd;                    /* -1: none */
    struct ssl_st *ssl;        /* NULL: plain */
    int state;                 /* M0_XC_* */
    int want;                  /* after M0_AGAIN: M0_XC_WANT_READ or M0_XC_WANT_WRITE */
    int closed;                /* the last failure was the peer closing or resetting it */
};

/* Start connecting x to t (with TLS when tls is not NULL). Non-blocking;
 * host must be numeric unless t->resolve. Returns M0_OK (x->state says
 * how far it got: go on with m0_xconn_advance) or M0_ERR with a reason in
 * err (x holds nothing). */
int m0_xconn_open(struct m0_xconn *x, const struct m0_xconn_target *t, struct ssl_ctx_st *tls, char *err, size_t cap);

/* Drive the connect and the TLS handshake: M0_OK once open; M0_AGAIN
 * (x->want says what to wait for); M0_ERR with a one-line reason (refused,
 * timed out by the caller, "TLS: certificate verify failed: certificate
 * has expired", ...). */
int m0_xconn_advance(struct m0_xconn *x, char *err, size_t cap);

/* Read up to cap bytes of an open x: > 0 bytes; 0 the peer closed it;
 * M0_AGAIN (x->want); M0_ERR with a reason (x->closed when it was reset). */
ssize_t m0_xconn_read(struct m0_xconn *x, void *buf, size_t cap, char *err, size_t ecap);

/* Write up to n bytes of an open x: the count written (> 0); M0_AGAIN
 * (x->want); M0_ERR with a reason (x->closed when the peer had gone). */
ssize_t m0_xconn_write(struct m0_xconn *x, const void *p, size_t n, char *err, size_t ecap);

/* Bytes TLS already decrypted and holds (a read returns them without
 * touching the socket); 0 for plain. */
int m0_xconn_buffered(const struct m0_xconn *x);

/* Close: the socket and the TLS state, without a word to the peer (a
 * process forked by the application must not talk on its parent's
 * connections either: m0_xconn_close_fd). */
void m0_xconn_close(struct m0_xconn *x);

/* Blocking callers: wait until x is ready for x->want, or until the
 * monotonic clock reaches deadline_ms (m0_xconn_now_ms). M0_OK, M0_AGAIN
 * (the deadline passed), or M0_ERR. */
int m0_xconn_wait(const struct m0_xconn *x, uint64_t deadline_ms);
uint64_t m0_xconn_now_ms(void);

/*
 * Before a loop runs (it blocks on DNS): host as a numeric address in out
 * (cap bytes; "" when host is numeric already, to be used as it is).
 * Returns M0_OK, or M0_ERR with the resolver's reason in *why (static
 * text).
 */
int m0_xconn_resolve(const char *host, char *out, size_t cap, const char **why);

#endif
