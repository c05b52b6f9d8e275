/*
 * fuzz_tls.c — libFuzzer driver for the TLS read path (issue 31): the
 * server context m0_tlsd_load makes (include/m0/tls_server.h: the options,
 * modes, ALPN callback and session-ticket key callback every worker uses),
 * fed a client's bytes the way xprt_tls.c feeds them: SSL_do_handshake
 * until open, then SSL_read, an SSL_write answering what was read, and
 * SSL_shutdown and SSL_free at the end. Memory BIOs stand for the socket.
 *
 * Input layout:
 *   byte 0     the mode:
 *              bit 0  0: the rest is the client's first flight, raw (a
 *                        ClientHello, truncated or not, garbage, plain HTTP);
 *                     1: a real client (OpenSSL's, in memory) completes a
 *                        handshake first, then the rest follows it;
 *              bit 1  that client offers at most TLS 1.2 (else 1.3);
 *              bit 2  after the handshake the rest is the client's
 *                     plaintext, sent in records (else raw bytes on the
 *                     wire: records under the session's keys, forged);
 *              bit 3  the client offers the session of the driver's first
 *                     handshake (a ticket: the ticket key callback decrypts);
 *              bit 4  on TLS 1.2, the client asks for a renegotiation
 *                     before the rest (refused: SSL_OP_NO_RENEGOTIATION);
 *              bits 5-7  the feeding pattern's seed (piece sizes 1..64);
 *   the rest   bytes, as they arrive.
 *
 * Checked (abort, so libFuzzer keeps the input): the server never reports
 * more plaintext than the input could carry, SSL_pending never exceeds a
 * read's buffer, an error is one of the kinds xprt_tls.c's failed() knows,
 * after a fatal error every call fails again; the real client's handshake
 * with the real context always completes; ASan/UBSan and the leak checker
 * the rest.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "m0/config.h"
#include "m0/tls_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz_tls: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static struct m0_tlsd *server;        /* the worker's context, from m0_tlsd_load */
static SSL_CTX *client13, *client12;
static SSL_SESSION *saved13, *saved12; /* the first handshakes' sessions (their tickets) */

/* ------------------------------------------------------------ the setup */

/* A P-256 key and a self-signed certificate for localhost, in files. */
static void make_pair(const char *cert_path, const char *key_path)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    CHECK(key != NULL && x != NULL);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 31);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600L * 24 * 365);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509_set_pubkey(x, key);
    CHECK(X509_sign(x, key, EVP_sha256()) > 0);
    FILE *f = fopen(cert_path, "w");
    CHECK(f != NULL && PEM_write_X509(f, x) == 1);
    fclose(f);
    f = fopen(key_path, "w");
    CHECK(f != NULL && PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) == 1);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(key);
}

static SSL_CTX *client_ctx(int max)
{
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    CHECK(c != NULL);
    SSL_CTX_set_verify(c, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_max_proto_version(c, max);
    SSL_CTX_set_alpn_protos(c, (const unsigned char *)"\x08http/1.1", 9);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
    return c;
}

/* ----------------------------------------------------- one connection */

struct side {
    SSL *ssl;
    BIO *in, *out;     /* what it reads (we write), what it wrote (we read) */
};

static void side_new(struct side *s, SSL_CTX *ctx, int server_side)
{
    s->ssl = SSL_new(ctx);
    s->in = BIO_new(BIO_s_mem());
    s->out = BIO_new(BIO_s_mem());
    CHECK(s->ssl != NULL && s->in != NULL && s->out != NULL);
    BIO_set_mem_eof_return(s->in, -1);          /* empty: "retry", as a non-blocking socket says EAGAIN */
    SSL_set_bio(s->ssl, s->in, s->out);
    if (server_side)
        SSL_set_accept_state(s->ssl);
    else
        SSL_set_connect_state(s->ssl);
}

/* What from wrote, to to's input (the wire between them). */
static void carry(struct side *from, struct side *to)
{
    char buf[4096];
    int n;
    while ((n = BIO_read(from->out, buf, sizeof buf)) > 0)
        CHECK(BIO_write(to->in, buf, n) == n);
}

static void drain(struct side *s)
{
    char buf[4096];
    while (BIO_read(s->out, buf, sizeof buf) > 0)
        ;
}

/* An SSL call's failure is one xprt_tls.c's failed() sorts out; 1 when it
 * is fatal (the connection is over). */
static int fatal(SSL *ssl, int r)
{
    int e = SSL_get_error(ssl, r);
    CHECK(e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_ZERO_RETURN ||
          e == SSL_ERROR_SYSCALL || e == SSL_ERROR_SSL);
    return e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE;
}

struct srv {
    struct side s;
    int open, dead;
    size_t plain;      /* plaintext read so far */
};

/* The server's turn, as xprt_tls.c's recv takes it: the handshake, then
 * reads (each answered by a small write, as a response would be). */
static void serve(struct srv *v, size_t fed)
{
    static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    unsigned char buf[1500];
    if (v->dead)
        return;
    ERR_clear_error();
    if (!v->open) {
        int r = SSL_do_handshake(v->s.ssl);
        if (r == 1)
            v->open = 1;
        else {
            v->dead = fatal(v->s.ssl, r);
            return;
        }
    }
    for (int i = 0; i < 64; i++) {
        ERR_clear_error();
        int r = SSL_read(v->s.ssl, buf, sizeof buf);
        if (r <= 0) {
            v->dead = fatal(v->s.ssl, r);
            return;
        }
        CHECK((size_t)r <= sizeof buf);
        v->plain += (size_t)r;
        CHECK(v->plain <= fed);            /* records carry less than their bytes */
        CHECK((size_t)SSL_pending(v->s.ssl) <= fed);
        ERR_clear_error();
        int w = SSL_write(v->s.ssl, answer, sizeof answer - 1);
        if (w <= 0 && fatal(v->s.ssl, w)) {
            v->dead = 1;
            return;
        }
    }
}

/* A full handshake between a real client and the server (both open), or
 * abort: the context must speak to OpenSSL's own client. */
static void handshake(struct side *c, struct srv *v)
{
    for (int i = 0; i < 16 && !(v->open && SSL_is_init_finished(c->ssl)); i++) {
        ERR_clear_error();
        int r = SSL_do_handshake(c->ssl);
        CHECK(r == 1 || !fatal(c->ssl, r));
        carry(c, &v->s);
        serve(v, 0);
        CHECK(!v->dead);
        carry(&v->s, c);
    }
    CHECK(v->open && SSL_is_init_finished(c->ssl));
    /* TLS 1.3's tickets come after the handshake: the client reads them. */
    unsigned char b[16];
    ERR_clear_error();
    CHECK(SSL_read(c->ssl, b, sizeof b) <= 0);
}

static void end(struct side *s, int open)
{
    if (open) {
        ERR_clear_error();
        SSL_shutdown(s->ssl);
    }
    SSL_free(s->ssl);           /* frees its BIOs */
}

static void setup(void)
{
    char dir[] = "/tmp/fuzz_tls.XXXXXX", cert[64], key[64], err[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    make_pair(cert, key);
    struct m0_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.certfile = cert;
    cfg.keyfile = key;
    cfg.tls_ticket_rotate = 3600;     /* tickets on, as by default: the key callback runs */
    int usage;
    server = m0_tlsd_load(&cfg, NULL, err, sizeof err, &usage);
    if (server == NULL) {
        fprintf(stderr, "fuzz_tls: %s\n", err);
        abort();
    }
    unlink(cert);
    unlink(key);
    rmdir(dir);
    client13 = client_ctx(TLS1_3_VERSION);
    client12 = client_ctx(TLS1_2_VERSION);
    /* One handshake each, their sessions kept for the resuming inputs. */
    for (int k = 0; k < 2; k++) {
        struct side c;
        struct srv v = {0};
        side_new(&c, k ? client12 : client13, 0);
        side_new(&v.s, m0_tlsd_ctx(server), 1);
        handshake(&c, &v);
        SSL_SESSION *sess = SSL_get1_session(c.ssl);
        CHECK(sess != NULL);
        *(k ? &saved12 : &saved13) = sess;
        end(&c, 1);
        end(&v.s, 1);
    }
}

/* ------------------------------------------------------------ the input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (server == NULL)
        setup();
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    uint32_t rng = 0x9e3779b9u * ((mode >> 5) + 1);
    data++;
    size--;

    struct srv v = {0};
    struct side c = {0};
    side_new(&v.s, m0_tlsd_ctx(server), 1);
    int tls12 = (mode & 2) != 0;
    if (mode & 1) {
        side_new(&c, tls12 ? client12 : client13, 0);
        if (mode & 8)
            CHECK(SSL_set_session(c.ssl, tls12 ? saved12 : saved13) == 1);
        handshake(&c, &v);
        if ((mode & 8) && tls12)
            CHECK(SSL_session_reused(c.ssl) == 1);  /* the ticket decrypted with the shared key */
        if ((mode & 16) && tls12) {
            ERR_clear_error();
            CHECK(SSL_renegotiate(c.ssl) == 1);
            int r = SSL_do_handshake(c.ssl);         /* its ClientHello, under the session's keys */
            CHECK(r == 1 || !fatal(c.ssl, r));
            carry(&c, &v.s);
            serve(&v, 0);
            CHECK(!v.dead);                           /* refused with a warning: the connection goes on */
            drain(&v.s);
        }
    }
    size_t fed = 0;
    for (size_t at = 0; at < size;) {
        rng = rng * 1103515245u + 12345u;
        size_t piece = 1 + (rng >> 16) % 64;
        if (piece > size - at)
            piece = size - at;
        if ((mode & 1) && (mode & 4) && !(mode & 16)) {
            /* The client's plaintext, in records of its own. */
            ERR_clear_error();
            int w = SSL_write(c.ssl, data + at, (int)piece);
            CHECK(w == (int)piece);
            carry(&c, &v.s);
        } else {
            CHECK(BIO_write(v.s.in, data + at, (int)piece) == (int)piece);
        }
        fed += piece;
        at += piece;
        serve(&v, fed);
        drain(&v.s);
        if (v.dead) {
            /* Over: a further read fails too, and reads nothing. */
            unsigned char b[64];
            ERR_clear_error();
            CHECK(SSL_read(v.s.ssl, b, sizeof b) <= 0);
            break;
        }
    }
    /* The client leaves: the end of the stream (SSL_OP_IGNORE_UNEXPECTED_EOF). */
    BIO_set_mem_eof_return(v.s.in, 0);
    serve(&v, fed);
    drain(&v.s);
    end(&v.s, v.open && !v.dead);
    if (mode & 1) {
        /* Freed as if closed cleanly: else OpenSSL marks the shared saved
         * session (a resuming client's own) not resumable. */
        SSL_set_shutdown(c.ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
        end(&c, 0);
    }
    ERR_clear_error();
    return 0;
}
