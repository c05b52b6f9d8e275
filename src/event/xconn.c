/*
 * xconn.c — a client transport: TCP, unix or TLS on a non-blocking socket
 * (see xconn.h).
 *
 * TLS is OpenSSL's state machine over the socket's own BIO: SSL_connect,
 * SSL_read and SSL_write return WANT_READ/WANT_WRITE where a plain socket
 * would say EAGAIN, and the caller waits for that readiness (a loop's epoll
 * or poll(2) with a deadline). OpenSSL keeps its error queue per thread:
 * it is cleared before each call, so a reason read after a failure is that
 * call's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "m0/xconn.h"

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return M0_ERR;
}

/* The reason OpenSSL queued last (its text without the "error:..." code). */
static const char *ssl_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "unknown error";
}

struct ssl_ctx_st *m0_tls_client_ctx(const struct m0_tls_opts *o, char *err, size_t cap)
{
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        fail(err, cap, "TLS: cannot make a context: %s", ssl_reason());
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    /* rconn.c retries a write from a buffer that may have grown (moved)
     * meanwhile, with more bytes than the first try. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* Redis closes without close_notify: that is an end, not an attack
     * (nothing here depends on the length of what it sent). */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    int ok = o->ca_certs ? SSL_CTX_load_verify_locations(ctx, o->ca_certs, NULL)
                         : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) {
        if (o->ca_certs != NULL)
            fail(err, cap, "TLS: cannot load the CA certificates from %s: %s", o->ca_certs, ssl_reason());
        else
            fail(err, cap, "TLS: no system CA store: %s", ssl_reason());
        goto bad;
    }
    if (o->certfile != NULL) {
        if (SSL_CTX_use_certificate_chain_file(ctx, o->certfile) != 1) {
            fail(err, cap, "TLS: cannot load the client certificate from %s: %s", o->certfile, ssl_reason());
            goto bad;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, o->keyfile ? o->keyfile : o->certfile, SSL_FILETYPE_PEM) != 1) {
            fail(err, cap, "TLS: cannot load the client key from %s: %s", o->keyfile ? o->keyfile : o->certfile,
                 ssl_reason());
            goto bad;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            fail(err, cap, "TLS: the client key does not match its certificate: %s", ssl_reason());
            goto bad;
        }
    }
    return ctx;
bad:
    SSL_CTX_free(ctx);
    return NULL;
}

void m0_tls_ctx_free(struct ssl_ctx_st *ctx)
{
    SSL_CTX_free(ctx);
}

uint64_t m0_xconn_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int is_ip_literal(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* TLS over the connected socket, with the peer's name to check and send. */
static int start_tls(struct m0_xconn *x, SSL_CTX *tls, const char *name, char *err, size_t cap)
{
    ERR_clear_error();
    x->ssl = SSL_new(tls);
    if (x->ssl == NULL || SSL_set_fd(x->ssl, x->fd) != 1)
        return fail(err, cap, "TLS: %s", ssl_reason());
    if (is_ip_literal(name)) {
        /* An address is checked against the certificate's IP entries; SNI
         * carries names only (RFC 6066 §3). */
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(x->ssl), name) != 1)
            return fail(err, cap, "TLS: cannot check the address %s", name);
    } else {
        if (SSL_set_tlsext_host_name(x->ssl, name) != 1 || SSL_set1_host(x->ssl, name) != 1)
            return fail(err, cap, "TLS: cannot use the name %s", name);
    }
    SSL_set_connect_state(x->ssl);
    return M0_OK;
}

int m0_xconn_open(struct m0_xconn *x, const struct m0_xconn_target *t, struct ssl_ctx_st *tls, char *err, size_t cap)
{
    x->fd = -1;
    x->ssl = NULL;
    x->state = M0_XC_CONNECTING;
    x->want = M0_XC_WANT_WRITE;
    x->closed = 0;
    struct sockaddr_storage ss;
    socklen_t slen;
    int family;
    if (t->path != NULL) {
        struct sockaddr_un *un = (struct sockaddr_un *)&ss;
        memset(un, 0, sizeof *un);
        un->sun_family = AF_UNIX;
        if (strlen(t->path) >= sizeof un->sun_path)
            return fail(err, cap, "unix socket path too long: %s", t->path);
        memcpy(un->sun_path, t->path, strlen(t->path) + 1);
        slen = sizeof *un;
        family = AF_UNIX;
    } else {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = t->resolve ? 0 : AI_NUMERICHOST;
        char port[16];
        snprintf(port, sizeof port, "%d", t->port);
        int rc = getaddrinfo(t->host, port, &hints, &res);
        if (rc != 0 || res == NULL) {
            snprintf(err, cap, "%s: %s", t->host,
                     rc == EAI_NONAME && !t->resolve ? "not a numeric address" : gai_strerror(rc));
            return M0_ERR;
        }
        memcpy(&ss, res->ai_addr, res->ai_addrlen);
        slen = res->ai_addrlen;
        family = res->ai_family;
        freeaddrinfo(res);
    }
    x->fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (x->fd < 0)
        return fail(err, cap, "socket: %s", strerror(errno));
    if (family != AF_UNIX) {
        int one = 1;
        setsockopt(x->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (tls != NULL && start_tls(x, tls, t->name ? t->name : t->host, err, cap) != M0_OK) {
        m0_xconn_close(x);
        return M0_ERR;
    }
    if (connect(x->fd, (struct sockaddr *)&ss, slen) == 0) {
        x->state = x->ssl ? M0_XC_HANDSHAKE : M0_XC_OPEN;
    } else if (errno != EINPROGRESS && errno != EAGAIN) {
        snprintf(err, cap, "connect: %s", strerror(errno));
        m0_xconn_close(x);
        return M0_ERR;
    }
    return M0_OK;
}

/* A failed TLS call's reason: the certificate check's verdict first. */
static void tls_failure(struct m0_xconn *x, int ret, const char *what, char *err, size_t cap)
{
    int e = SSL_get_error(x->ssl, ret);
    long v = SSL_get_verify_result(x->ssl);
    if (x->state == M0_XC_HANDSHAKE && v != X509_V_OK)
        snprintf(err, cap, "TLS: certificate verify failed: %s", X509_verify_cert_error_string(v));
    else if (e == SSL_ERROR_SYSCALL && errno != 0 && ERR_peek_last_error() == 0)
        snprintf(err, cap, "TLS %s: %s", what, strerror(errno));
    else if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN)
        snprintf(err, cap, "the connection closed during the TLS %s", what);
    else
        snprintf(err, cap, "TLS %s failed: %s", what, ssl_reason());
    if (e == SSL_ERROR_SYSCALL && (errno == ECONNRESET || errno == EPIPE || errno == 0))
        x->closed = 1;
}

int m0_xconn_advance(struct m0_xconn *x, char *err, size_t cap)
{
    if (x->state == M0_XC_CONNECTING) {
        int soerr = 0;
        socklen_t n = sizeof soerr;
        struct pollfd p = {.fd = x->fd, .events = POLLOUT};
        if (poll(&p, 1, 0) == 0) {
            x->want = M0_XC_WANT_WRITE;
            return M0_AGAIN;
        }
        if (getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &soerr, &n) != 0)
            soerr = errno;
        if (soerr != 0)
            return fail(err, cap, "connect: %s", strerror(soerr));
        x->state = x->ssl ? M0_XC_HANDSHAKE : M0_XC_OPEN;
    }
    if (x->state == M0_XC_HANDSHAKE) {
        ERR_clear_error();
        errno = 0;
        int r = SSL_connect(x->ssl);
        if (r == 1) {
            x->state = M0_XC_OPEN;
        } else {
            int e = SSL_get_error(x->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                x->want = e == SSL_ERROR_WANT_READ ? M0_XC_WANT_READ : M0_XC_WANT_WRITE;
                return M0_AGAIN;
            }
            tls_failure(x, r, "handshake", err, cap);
            return M0_ERR;
        }
    }
    return x->state == M0_XC_OPEN ? M0_OK : M0_ERR;
}

ssize_t m0_xconn_read(struct m0_xconn *x, void *buf, size_t cap, char *err, size_t ecap)
{
    if (x->ssl == NULL) {
        ssize_t n = recv(x->fd, buf, cap, 0);
        if (n >= 0)
            return n;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            x->want = M0_XC_WANT_READ;
            return M0_AGAIN;
        }
        x->closed = errno == ECONNRESET;
        snprintf(err, ecap, "%s", strerror(errno));
        return M0_ERR;
    }
    ERR_clear_error();
    errno = 0;
    int n = SSL_read(x->ssl, buf, cap > INT32_MAX ? INT32_MAX : (int)cap);
    if (n > 0)
        return n;
    int e = SSL_get_error(x->ssl, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        x->want = e == SSL_ERROR_WANT_READ ? M0_XC_WANT_READ : M0_XC_WANT_WRITE;
        return M0_AGAIN;
    }
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    tls_failure(x, n, "read", err, ecap);
    return M0_ERR;
}

ssize_t m0_xconn_write(struct m0_xconn *x, const void *p, size_t n, char *err, size_t ecap)
{
    if (x->ssl == NULL) {
        ssize_t w = send(x->fd, p, n, MSG_NOSIGNAL);
        if (w >= 0)
            return w;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            x->want = M0_XC_WANT_WRITE;
            return M0_AGAIN;
        }
        x->closed = errno == ECONNRESET || errno == EPIPE;
        snprintf(err, ecap, "%s", strerror(errno));
        return M0_ERR;
    }
    ERR_clear_error();
    errno = 0;
    int w = SSL_write(x->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
    if (w > 0)
        return w;
    int e = SSL_get_error(x->ssl, w);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        x->want = e == SSL_ERROR_WANT_READ ? M0_XC_WANT_READ : M0_XC_WANT_WRITE;
        return M0_AGAIN;
    }
    tls_failure(x, w, "write", err, ecap);
    return M0_ERR;
}

int m0_xconn_buffered(const struct m0_xconn *x)
{
    return x->ssl != NULL ? SSL_pending(x->ssl) : 0;
}

void m0_xconn_close(struct m0_xconn *x)
{
    if (x->ssl != NULL) {
        SSL_free(x->ssl);       /* no close_notify: SSL_shutdown would write */
        x->ssl = NULL;
    }
    if (x->fd >= 0) {
        close(x->fd);
        x->fd = -1;
    }
    x->state = M0_XC_CLOSED;
}

int m0_xconn_wait(const struct m0_xconn *x, uint64_t deadline_ms)
{
    if (x->want == M0_XC_WANT_READ && m0_xconn_buffered(x) > 0)
        return M0_OK;
    for (;;) {
        uint64_t now = m0_xconn_now_ms();
        if (now >= deadline_ms)
            return M0_AGAIN;
        struct pollfd p = {.fd = x->fd, .events = x->want == M0_XC_WANT_READ ? POLLIN : POLLOUT};
        int n = poll(&p, 1, (int)(deadline_ms - now));
        if (n > 0)
            return M0_OK;
        if (n < 0 && errno != EINTR)
            return M0_ERR;
    }
}

int m0_xconn_resolve(const char *host, char *out, size_t cap, const char **why)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST;
    out[0] = '\0';
    if (getaddrinfo(host, NULL, &hints, &res) == 0) {
        freeaddrinfo(res);
        return M0_OK;           /* already numeric */
    }
    hints.ai_flags = 0;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || res == NULL) {
        *why = rc != 0 ? gai_strerror(rc) : "no address";
        return M0_ERR;
    }
    const void *addr = res->ai_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr
                                                 : (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr;
    if (inet_ntop(res->ai_family, addr, out, (socklen_t)cap) == NULL)
        out[0] = '\0';
    freeaddrinfo(res);
    return M0_OK;
}
