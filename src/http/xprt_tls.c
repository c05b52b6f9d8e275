/*
 * xprt_tls.c — the TLS transport (see xprt_tls.h): OpenSSL's state machine
 * over the connection's socket (its socket BIO, so kTLS can take over),
 * called by conn.c alone, through conn.h's struct m0_xprt_ops.
 *
 * OpenSSL says WANT_READ/WANT_WRITE where a plain socket says EAGAIN: recv
 * and writev return -1/EAGAIN then, and wants names the other direction
 * when the operation waits for it (a read that must write first: EPOLLOUT;
 * a write that must read: EPOLLIN). OpenSSL keeps its error queue per
 * thread: it is cleared before each call, so SSL_get_error reads that
 * call's.
 *
 * A write OpenSSL could not finish keeps its record, encrypted, and must be
 * retried with at least the same bytes: conn.c's output queue keeps its
 * unwritten bytes in place (and may move them: partial writes from a moving
 * buffer are allowed, tls_server.c), and a file's record is read again
 * from the same offset.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "m0/config.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/metrics.h"
#include "m0/tls_server.h"
#include "m0/xprt_tls.h"

/* The largest plaintext of one record (RFC 8446 §5.1). */
#define RECORD 16384

enum phase { P_NONE, P_HELLO, P_HANDSHAKE, P_OPEN, P_REFUSED, P_FAILED };

/* A connection's TLS, by slot (NULL ssl: none). */
struct tconn {
    SSL *ssl;
    char *cork;              /* a head taken ahead of a file (M0_XPRT_MORE), written in its first record */
    uint16_t ncork;
    uint8_t phase;           /* enum phase */
    uint8_t wants;           /* EPOLLIN/EPOLLOUT the last operation waits for beside its own */
    uint8_t ktls;            /* the kernel encrypts what is sent: SSL_sendfile */
};

struct tstate {
    struct tconn **chunks;   /* by slot >> M0_CONN_CHUNK_SHIFT, each made with its first connection */
    uint32_t nchunks;
    unsigned char *fbuf;     /* a file's record, read here and written (RECORD bytes) */
    struct m0_tls_counts n;
};

#define PLAIN_400_BODY "400 Bad Request: plain HTTP sent to an HTTPS port\n"
static const char plain_400[] =
    "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 50\r\nConnection: close\r\n\r\n"
    PLAIN_400_BODY;
_Static_assert(sizeof PLAIN_400_BODY - 1 == 50, "the plain 400's Content-Length");

static void *tls_init(struct m0_server *s)
{
    struct tstate *ts = calloc(1, sizeof *ts);
    if (ts == NULL)
        return NULL;
    ts->nchunks = (s->slots.n + M0_CONN_CHUNK - 1) / M0_CONN_CHUNK;
    ts->chunks = calloc(ts->nchunks, sizeof *ts->chunks);
    if (ts->chunks == NULL) {
        free(ts);
        return NULL;
    }
    return ts;
}

static void tls_fini(struct m0_server *s, void *state)
{
    struct tstate *ts = state;
    (void)s;
    for (uint32_t k = 0; k < ts->nchunks; k++) {
        for (uint32_t i = 0; ts->chunks[k] != NULL && i < M0_CONN_CHUNK; i++) {
            SSL_free(ts->chunks[k][i].ssl);
            free(ts->chunks[k][i].cork);
        }
        free(ts->chunks[k]);
    }
    free(ts->chunks);
    free(ts->fbuf);
    free(ts);
}

const struct m0_ext m0_tls_ext = {.name = "tls", .init = tls_init, .fini = tls_fini};

void m0_tls_counts(const struct m0_server *s, struct m0_tls_counts *out)
{
    const struct tstate *ts = m0_ext_peek(s, &m0_tls_ext);
    if (ts != NULL)
        *out = ts->n;
    else
        memset(out, 0, sizeof *out);
}

static struct tstate *state_of(const struct m0_server *s)
{
    return m0_ext_peek(s, &m0_tls_ext);
}

/* c's TLS (made by tls_open, so its chunk exists). */
static struct tconn *tc_of(const struct m0_server *s, const struct m0_conn *c)
{
    return &state_of(s)->chunks[c->slot >> M0_CONN_CHUNK_SHIFT][c->slot & (M0_CONN_CHUNK - 1)];
}

/* OpenSSL's reason for the last failure (for a debug line). */
static const char *reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "connection reset or closed";
}

/* An SSL call on c returned r <= 0: -1 with errno (EAGAIN, t->wants set,
 * when it waits; EPROTO after a TLS error; the socket's own), or 0 at the
 * peer's end of stream (reading; a write's is EPIPE). */
static ssize_t failed(struct tconn *t, int r, int reading)
{
    int e = SSL_get_error(t->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        t->wants = reading ? 0 : EPOLLIN;        /* a reader waits for its own EPOLLIN */
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        t->wants = reading ? EPOLLOUT : 0;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:                  /* close_notify, or an EOF (SSL_OP_IGNORE_UNEXPECTED_EOF) */
        if (reading)
            return 0;
        errno = EPIPE;
        return -1;
    case SSL_ERROR_SYSCALL:
        if (errno == 0 || errno == EAGAIN)
            errno = EPIPE;
        return -1;
    default:
        errno = reading ? EPROTO : EPIPE;        /* a write's failure is not logged as the socket's */
        return -1;
    }
}

/* Plain HTTP on a TLS port: one line of 400 and our side shut; what the
 * client sent is discarded until it closes (discard). */
static void refuse(struct m0_server *s, struct m0_conn *c, struct tconn *t)
{
    ssize_t w;
    do
        w = send(c->fd, plain_400, sizeof plain_400 - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w == -1 && errno == EINTR);
    shutdown(c->fd, SHUT_WR);
    t->phase = P_REFUSED;
    state_of(s)->n.plain_refused++;
    m0_mx_add(m0_metrics_block(), M0_MX_TLS_PLAIN, 1);
    m0_debug("slot %u: plain HTTP on a TLS listener: 400", c->slot);
}

/* REFUSED: read and drop (a lingering close, so our 400 is not destroyed
 * by a reset): -1/EAGAIN while the client is there, 0 once it has closed. */
static ssize_t discard(struct m0_conn *c)
{
    char sink[2048];
    for (int i = 0; i < 32; i++) {
        ssize_t n = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n > 0)
            continue;
        if (n == -1 && errno == EINTR)
            continue;
        return n == 0 ? 0 : -1;
    }
    errno = EAGAIN;
    return -1;
}

/* Bring c's TLS to OPEN (reading: for recv, else for a write): 1 open; -1
 * with errno (EAGAIN: it waits, t->wants set); 0 the peer left first. */
static int advance(struct m0_server *s, struct m0_conn *c, struct tconn *t, int reading)
{
    if (t->phase == P_HELLO) {
        /* A TLS connection starts with a handshake record (0x16; 0x80: an
         * SSLv2-format hello, refused by OpenSSL as it should be); plain
         * HTTP starts with a method. */
        unsigned char b;
        ssize_t n;
        do
            n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        while (n == -1 && errno == EINTR);
        if (n == 0)
            return 0;
        if (n == -1) {
            t->wants = reading ? 0 : EPOLLIN;
            return -1;
        }
        if (b != 0x16 && !(b & 0x80)) {
            refuse(s, c, t);
            errno = EAGAIN;
            t->wants = 0;
            return -1;
        }
        t->phase = P_HANDSHAKE;
    }
    if (t->phase == P_REFUSED || t->phase == P_FAILED) {
        errno = EPIPE;
        return -1;
    }
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        struct tstate *ts = state_of(s);
        t->phase = P_OPEN;
        t->wants = 0;
        ts->n.handshakes++;
        ts->n.resumed += SSL_session_reused(t->ssl) == 1;
        m0_mx_add(m0_metrics_block(), SSL_session_reused(t->ssl) == 1 ? M0_MX_TLS_RESUMED : M0_MX_TLS_FULL, 1);
#ifndef OPENSSL_NO_KTLS
        t->ktls = BIO_get_ktls_send(SSL_get_wbio(t->ssl)) ? 1 : 0;
#endif
        return 1;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        failed(t, r, reading);
        return -1;
    }
    /* A version below 1.2, no shared cipher, a client certificate missing
     * or from another CA (--cert-reqs required), garbage: OpenSSL sent its
     * alert; the connection closes. Scanners do this all day: debug only. */
    state_of(s)->n.failed++;
    m0_mx_add(m0_metrics_block(), M0_MX_TLS_FAILED, 1);
    m0_debug("slot %u: TLS handshake failed: %s", c->slot, reason());
    t->phase = P_FAILED;
    errno = EPROTO;
    return -1;
}

static int ensure_open(struct m0_server *s, struct m0_conn *c, struct tconn *t, int reading)
{
    if (t->phase == P_OPEN)
        return 1;
    if (t->phase == P_REFUSED) {
        errno = EPIPE;        /* nothing but the 400 goes out there */
        return -1;
    }
    int r = advance(s, c, t, reading);
    if (r == 0)
        errno = EPIPE;
    return r == 1 ? 1 : -1;
}

/* ------------------------------------------------------------ the ops */

static int tls_open(struct m0_server *s, struct m0_conn *c)
{
    struct tstate *ts = m0_ext_of(s, &m0_tls_ext);
    uint32_t k = c->slot >> M0_CONN_CHUNK_SHIFT;
    if (ts == NULL || s->cfg->tls == NULL || k >= ts->nchunks) {
        m0_error("TLS: no context for a TLS listener's connection");
        return M0_ERR;
    }
    if (ts->chunks[k] == NULL && (ts->chunks[k] = calloc(M0_CONN_CHUNK, sizeof **ts->chunks)) == NULL) {
        m0_log_errno("TLS: cannot make the state of %u connections", M0_CONN_CHUNK);
        return M0_ERR;
    }
    struct tconn *t = tc_of(s, c);
    ERR_clear_error();
    SSL *ssl = SSL_new(m0_tlsd_ctx(s->cfg->tls));
    if (ssl == NULL || SSL_set_fd(ssl, c->fd) != 1) {
        m0_error("TLS: cannot make a connection's state: %s", reason());
        SSL_free(ssl);
        return M0_ERR;
    }
    SSL_set_accept_state(ssl);
    *t = (struct tconn){.ssl = ssl, .phase = P_HELLO};
    return M0_OK;
}

static void tls_close(struct m0_server *s, struct m0_conn *c)
{
    struct tconn *t = tc_of(s, c);
    if (t->ssl == NULL)
        return;
    /* An orderly end tells the client its data is whole (RFC 8446 §6.1);
     * not after it left, nor when nothing was ever spoken. */
    if (t->phase == P_OPEN && !(c->flags & C_PEER_GONE) && !(SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN)) {
        ERR_clear_error();
        SSL_shutdown(t->ssl);
    }
    SSL_free(t->ssl);
    free(t->cork);
    *t = (struct tconn){.phase = P_NONE};
}

static ssize_t tls_recv(struct m0_server *s, struct m0_conn *c, void *buf, size_t n)
{
    struct tconn *t = tc_of(s, c);
    if (t->phase != P_OPEN) {
        if (t->phase == P_REFUSED)
            return discard(c);
        int r = advance(s, c, t, 1);
        if (r <= 0)
            return r;
    }
    ERR_clear_error();
    int r = SSL_read(t->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    if (r > 0) {
        t->wants = 0;
        return r;
    }
    return failed(t, r, 1);
}

/* One SSL_write of n bytes (at most a record goes per call: partial writes
 * are on): what it took, or -1 with errno. */
static ssize_t put(struct tconn *t, const void *p, size_t n)
{
    ERR_clear_error();
    int w = SSL_write(t->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
    if (w > 0) {
        t->wants = 0;
        return w;
    }
    return failed(t, w, 0);
}

static ssize_t tls_writev(struct m0_server *s, struct m0_conn *c, const struct iovec *iov, int n, unsigned flags)
{
    struct tconn *t = tc_of(s, c);
    if (ensure_open(s, c, t, 0) != 1)
        return -1;
    if ((flags & M0_XPRT_MORE) && n == 1 && t->cork == NULL && !t->ktls && iov[0].iov_len <= RECORD / 4) {
        /* A head before a file: taken now, written with the file's first
         * record (tls_sendfile), one record and one segment rather than two. */
        if ((t->cork = malloc(iov[0].iov_len)) != NULL) {
            memcpy(t->cork, iov[0].iov_base, iov[0].iov_len);
            t->ncork = (uint16_t)iov[0].iov_len;
            return (ssize_t)iov[0].iov_len;
        }
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const char *p = iov[i].iov_base;
        size_t left = iov[i].iov_len;
        while (left > 0) {
            ssize_t w = put(t, p, left);
            if (w == -1)
                return total > 0 && errno == EAGAIN ? (ssize_t)total : -1;
            total += (size_t)w;
            p += w;
            left -= (size_t)w;
        }
    }
    return (ssize_t)total;
}

static ssize_t tls_sendfile(struct m0_server *s, struct m0_conn *c, int fd, off_t *off, size_t n)
{
    struct tconn *t = tc_of(s, c);
    if (ensure_open(s, c, t, 0) != 1)
        return -1;
#ifndef OPENSSL_NO_KTLS
    if (t->ktls) {
        ERR_clear_error();
        ossl_ssize_t w = SSL_sendfile(t->ssl, fd, *off, n, 0);
        if (w > 0) {
            *off += w;
            return w;
        }
        if (w == 0)
            return 0;
        return failed(t, (int)w, 0);
    }
#endif
    struct tstate *ts = state_of(s);
    if (ts->fbuf == NULL && (ts->fbuf = malloc(RECORD)) == NULL)
        return -1;
    /* The cork, then as much of the file as fills the record. Retried
     * after EAGAIN with the same bytes: the cork is kept until the record
     * is out, and the file is read again from the same offset. */
    size_t room = RECORD - t->ncork, want = n < room ? n : room;
    if (t->ncork > 0)
        memcpy(ts->fbuf, t->cork, t->ncork);
    ssize_t r;
    do
        r = pread(fd, ts->fbuf + t->ncork, want, *off);
    while (r == -1 && errno == EINTR);
    if (r <= 0)
        return r;
    ssize_t w = put(t, ts->fbuf, t->ncork + (size_t)r);
    if (w == -1)
        return -1;
    /* A record goes whole or not at all (at most RECORD bytes, partial
     * writes per record): w is the cork and r. */
    free(t->cork);
    t->cork = NULL;
    t->ncork = 0;
    *off += r;
    return r;
}

static int tls_shutdown(struct m0_server *s, struct m0_conn *c)
{
    struct tconn *t = tc_of(s, c);
    if (t->phase == P_OPEN && !(SSL_get_shutdown(t->ssl) & SSL_SENT_SHUTDOWN)) {
        ERR_clear_error();
        SSL_shutdown(t->ssl);          /* close_notify; the peer's is not waited for */
    }
    return shutdown(c->fd, SHUT_WR);
}

static size_t tls_pending(struct m0_server *s, const struct m0_conn *c)
{
    const struct tconn *t = tc_of(s, c);
    return t->phase == P_OPEN ? (size_t)SSL_pending(t->ssl) : 0;
}

static uint32_t tls_wants(struct m0_server *s, const struct m0_conn *c)
{
    return tc_of(s, c)->wants;
}

/* The verified client certificate's subject (RFC 4514) and PEM into
 * out->peer. */
static void describe_peer(SSL *ssl, struct m0_job_tls *out)
{
    X509 *x = SSL_get0_peer_certificate(ssl);
    if (x == NULL || SSL_get_verify_result(ssl) != X509_V_OK)
        return;
    BIO *b = BIO_new(BIO_s_mem());
    char *p;
    if (b == NULL || X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253) < 0)
        goto out;
    long dn_len = BIO_get_mem_data(b, &p);      /* p moves as the BIO grows: read it last */
    if (BIO_write(b, "", 1) != 1 || PEM_write_bio_X509(b, x) != 1)
        goto out;
    long all = BIO_get_mem_data(b, &p);
    if (dn_len <= 0 || all <= dn_len + 1)
        goto out;
    if ((size_t)all + 1 > out->peer_cap) {
        char *grown = realloc(out->peer, (size_t)all + 1);
        if (grown == NULL)
            goto out;
        out->peer = grown;
        out->peer_cap = (size_t)all + 1;
    }
    memcpy(out->peer, p, (size_t)all);          /* subject, NUL, PEM */
    out->peer[all] = '\0';
    out->dn_len = (uint32_t)dn_len;
out:
    BIO_free(b);
}

static void tls_describe(struct m0_server *s, struct m0_conn *c, struct m0_job_tls *out)
{
    struct tconn *t = tc_of(s, c);
    if (t->phase != P_OPEN)
        return;
    const SSL_CIPHER *ci = SSL_get_current_cipher(t->ssl);
    out->version = (uint16_t)SSL_version(t->ssl);
    out->protocol = SSL_get_version(t->ssl);
    out->cipher = ci != NULL ? SSL_CIPHER_get_protocol_id(ci) : 0;
    out->cipher_name = ci != NULL ? SSL_CIPHER_get_name(ci) : "";
    out->server_pem = m0_tlsd_server_pem(s->cfg->tls);
    describe_peer(t->ssl, out);
}

const struct m0_xprt_ops m0_xprt_tls = {
    .name = "tls",
    .recv = tls_recv,
    .writev = tls_writev,
    .sendfile = tls_sendfile,
    .shutdown = tls_shutdown,
    .pending = tls_pending,
    .wants = tls_wants,
    .open = tls_open,
    .close = tls_close,
    .describe = tls_describe,
};
