/*
 * tls_server.c — the server's TLS context and its session-ticket keys (see
 * tls_server.h).
 *
 * The ticket keys: one page mapped MAP_SHARED before the first fork, so
 * the master's writes reach every worker (and every worker a later reload
 * forks). Three slots, each a key name, an AES-256 key and an HMAC-SHA256
 * key (RFC 5077 §4's recommended construction), and the index of the
 * newest. The master writes a slot no worker encrypts with (the oldest)
 * under a sequence count (odd while it writes), then makes it the newest;
 * a worker copies a slot and keeps the copy only when the count was even
 * and unchanged across the copy, so a torn key is never used (a ticket it
 * could not check is a full handshake, never an error).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "m0/config.h"
#include "m0/keyfile.h"
#include "m0/tls_server.h"

#define KEYS 3

struct key {
    _Atomic uint32_t seq;       /* odd while the master writes the slot */
    unsigned char name[16];
    unsigned char aes[32];
    unsigned char hmac[32];
    int64_t born;               /* CLOCK_REALTIME seconds; 0: empty */
};

struct keys {
    _Atomic uint32_t newest;    /* the slot new tickets are encrypted with */
    struct key k[KEYS];
};

struct m0_tlsd {
    SSL_CTX *ctx;
    struct keys *keys;          /* the shared page (NULL: no tickets) */
    long rotate;                /* seconds a key is the newest */
    char *pem;                  /* the server certificate, PEM */
    char line[200];             /* m0_tlsd_describe's */
};

/* Why OpenSSL failed, in words for the log line: the system's when a file
 * could not be opened, a plain sentence for the usual mistakes, else the
 * first reason it queued (the last is a generic "PEM lib"). pw: a password
 * was given. */
static const char *reason_pw(int pw)
{
    unsigned long e;
    const char *first = NULL;
    for (int i = 0; (e = ERR_peek_error()) != 0 && i < 32; i++) {
        const char *r = ERR_reason_error_string(e);
        if (ERR_GET_LIB(e) == ERR_LIB_SYS)
            return strerror(ERR_GET_REASON(e));
        if (r != NULL && (strstr(r, "password") != NULL || strstr(r, "bad decrypt") != NULL))
            return pw ? "cannot decrypt the key: wrong password in --keyfile-password-file"
                      : "an encrypted key: its password goes in --keyfile-password-file";
        if (r != NULL && strcmp(r, "key values mismatch") == 0)
            return "the key does not match the certificate";
        if (r != NULL && strcmp(r, "no start line") == 0)
            return "no PEM data of the kind expected in it";
        if (first == NULL && r != NULL)
            first = r;
        ERR_get_error();
    }
    return first != NULL ? first : "unknown error";
}

static const char *reason(void)
{
    return reason_pw(0);
}

int m0_tlsd_listener_is_tls(const struct m0_config *cfg, const char *addr, int main)
{
    int scheme;
    const char *rest = m0_config_addr_scheme(addr, &scheme);
    if (scheme >= 0)
        return scheme;
    return main && cfg->certfile != NULL && strncmp(rest, "unix:", 5) != 0;
}

int m0_tlsd_check_flags(const struct m0_config *cfg, char *err, size_t cap)
{
    if (cfg->certfile == NULL) {
        const char *stray = cfg->keyfile ? "--keyfile" : cfg->keyfile_password_file ? "--keyfile-password-file"
                            : cfg->ca_certs ? "--ca-certs" : cfg->cert_reqs ? "--cert-reqs" : cfg->ciphers ? "--ciphers"
                            : NULL;
        if (stray != NULL) {
            snprintf(err, cap, "m0serve: error: %s: needs --certfile (the server's certificate)", stray);
            return M0_ERR;
        }
        const char *side[2][2] = {{"--metrics-bind", cfg->metrics_bind}, {"--grip-control", cfg->grip_control}};
        for (unsigned i = 0; i < cfg->nbinds + 2; i++) {
            const char *flag = i < cfg->nbinds ? "--bind" : side[i - cfg->nbinds][0];
            const char *a = i < cfg->nbinds ? cfg->binds[i] : side[i - cfg->nbinds][1];
            if (a != NULL && strncmp(a, "https://", 8) == 0) {
                snprintf(err, cap, "m0serve: error: %s %s: needs --certfile (the server's certificate)", flag, a);
                return M0_ERR;
            }
        }
        return M0_OK;
    }
    if (cfg->cert_reqs > 0 && cfg->ca_certs == NULL) {
        snprintf(err, cap, "m0serve: error: --cert-reqs %s: needs --ca-certs (the CAs that sign client certificates)",
                 cfg->cert_reqs == 1 ? "optional" : "required");
        return M0_ERR;
    }
    if (cfg->tls_ticket_rotate > 0 && cfg->tls_ticket_rotate < 1) {
        snprintf(err, cap, "m0serve: error: --tls-ticket-rotate: invalid value '%g' (0, or at least 1 second)",
                 cfg->tls_ticket_rotate);
        return M0_ERR;
    }
    return M0_OK;
}

/* ---------------------------------------------------------------- tickets */

static void fill_key(struct key *k, int64_t now)
{
    atomic_fetch_add_explicit(&k->seq, 1, memory_order_acq_rel);      /* odd: being written */
    atomic_thread_fence(memory_order_release);
    if (RAND_bytes(k->name, sizeof k->name) != 1 || RAND_bytes(k->aes, sizeof k->aes) != 1 ||
        RAND_bytes(k->hmac, sizeof k->hmac) != 1)
        k->born = 0;                    /* no randomness: no key (a full handshake every time) */
    else
        k->born = now;
    atomic_thread_fence(memory_order_release);
    atomic_fetch_add_explicit(&k->seq, 1, memory_order_acq_rel);
}

static struct keys *keys_new(void)
{
    struct keys *ks = mmap(NULL, sizeof *ks, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ks == MAP_FAILED)
        return NULL;
    madvise(ks, sizeof *ks, MADV_DONTDUMP);       /* the keys stay out of core dumps */
    memset(ks, 0, sizeof *ks);
    fill_key(&ks->k[0], (int64_t)time(NULL));
    atomic_store(&ks->newest, 0);
    return ks;
}

void m0_tlsd_rotate(struct m0_tlsd *t, time_t now)
{
    if (t == NULL || t->keys == NULL)
        return;
    struct keys *ks = t->keys;
    uint32_t cur = atomic_load(&ks->newest);
    if (ks->k[cur].born != 0 && (int64_t)now - ks->k[cur].born < t->rotate && (int64_t)now >= ks->k[cur].born)
        return;
    uint32_t next = (cur + 1) % KEYS;
    fill_key(&ks->k[next], (int64_t)now);
    atomic_store(&ks->newest, next);
}

/* A consistent copy of slot i (0: it changed under us, or it is empty). */
static int read_key(const struct keys *ks, unsigned i, struct key *out)
{
    for (int tries = 0; tries < 4; tries++) {
        uint32_t a = atomic_load_explicit(&ks->k[i].seq, memory_order_acquire);
        if (a & 1)
            continue;
        memcpy(out->name, ks->k[i].name, sizeof out->name);
        memcpy(out->aes, ks->k[i].aes, sizeof out->aes);
        memcpy(out->hmac, ks->k[i].hmac, sizeof out->hmac);
        out->born = ks->k[i].born;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&ks->k[i].seq, memory_order_relaxed) == a)
            return out->born != 0;
    }
    return 0;
}

/* OpenSSL's ticket key callback (SSL_CTX_set_tlsext_ticket_key_evp_cb):
 * enc 1, a new ticket with the newest key; enc 0, the key named name:
 * 1 (it is the newest), 2 (an older one: use it, and send a new ticket),
 * 0 (unknown or expired: a full handshake), -1 on an error. */
static int ticket_key(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx,
                      int enc)
{
    const struct m0_tlsd *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    struct key k;
    int rc = -1;
    unsigned newest = atomic_load(&t->keys->newest) % KEYS, found = KEYS;
    if (enc) {
        if (!read_key(t->keys, newest, &k) || RAND_bytes(iv, 16) != 1)
            goto out;
        memcpy(name, k.name, 16);
        found = newest;
    } else {
        for (unsigned i = 0; i < KEYS && found == KEYS; i++) {
            if (read_key(t->keys, i, &k) && CRYPTO_memcmp(k.name, name, 16) == 0)
                found = i;
        }
        if (found == KEYS) {
            rc = 0;
            goto out;
        }
    }
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, k.hmac, sizeof k.hmac),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (EVP_MAC_CTX_set_params(hctx, params) != 1)
        goto out;
    if ((enc ? EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k.aes, iv)
             : EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k.aes, iv)) != 1)
        goto out;
    rc = enc || found == newest ? 1 : 2;
out:
    OPENSSL_cleanse(&k, sizeof k);
    return rc;
}

/* ---------------------------------------------------------------- context */

/* RFC 7301 §3.2: http/1.1 or nothing (a client that offers only protocols
 * we do not speak gets the fatal no_application_protocol alert). */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned inlen, void *arg)
{
    static const unsigned char ours[] = "\x08http/1.1";
    (void)ssl;
    (void)arg;
    unsigned char *sel;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* The key's password (the first line of --keyfile-password-file). */
struct password {
    char *text;
    size_t n, size;             /* the line's bytes; the file's (wiped at the end) */
};

static int give_password(char *buf, int size, int rwflag, void *u)
{
    const struct password *p = u;
    (void)rwflag;
    if (p == NULL || p->text == NULL || (int)p->n >= size)
        return -1;
    memcpy(buf, p->text, p->n);
    return (int)p->n;
}

static int read_password(const struct m0_config *cfg, struct password *p, char *err, size_t cap)
{
    p->text = NULL;
    p->n = p->size = 0;
    if (cfg->keyfile_password_file == NULL)
        return M0_OK;
    size_t n;
    char *text = m0_keyfile_read("--keyfile-password-file", cfg->keyfile_password_file, 4096, &n, err, cap);
    if (text == NULL)
        return M0_ERR;
    p->text = text;
    p->size = n;
    p->n = strcspn(text, "\r\n");
    return M0_OK;
}

static char *cert_pem(SSL_CTX *ctx)
{
    X509 *x = SSL_CTX_get0_certificate(ctx);
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL, *p;
    if (x != NULL && b != NULL && PEM_write_bio_X509(b, x) == 1) {
        long n = BIO_get_mem_data(b, &p);
        if (n > 0 && (out = malloc((size_t)n + 1)) != NULL) {
            memcpy(out, p, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

static void describe(struct m0_tlsd *t)
{
    X509 *x = SSL_CTX_get0_certificate(t->ctx);
    char subject[120] = "?", until[40] = "?";
    BIO *b = BIO_new(BIO_s_mem());
    char *p;
    if (x != NULL && b != NULL && X509_NAME_print_ex(b, X509_get_subject_name(x), 0, XN_FLAG_RFC2253) >= 0) {
        long n = BIO_get_mem_data(b, &p);
        snprintf(subject, sizeof subject, "%.*s", (int)(n < 119 ? n : 119), p);
    }
    struct tm tm;
    if (x != NULL && ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) == 1)
        strftime(until, sizeof until, "%Y-%m-%d", &tm);
    BIO_free(b);
    snprintf(t->line, sizeof t->line, "%s, expires %s", subject, until);
}

struct m0_tlsd *m0_tlsd_load(const struct m0_config *cfg, struct m0_tlsd *prev, char *err, size_t cap, int *usage)
{
    struct password pw;
    *usage = 0;
    if (read_password(cfg, &pw, err, cap) != M0_OK)
        return NULL;
    ERR_clear_error();
    struct m0_tlsd *t = calloc(1, sizeof *t);
    SSL_CTX *ctx = t != NULL ? SSL_CTX_new(TLS_server_method()) : NULL;
    const char *keyfile = cfg->keyfile ? cfg->keyfile : cfg->certfile;
    if (ctx == NULL) {
        snprintf(err, cap, "m0serve: error: TLS: cannot make a context: %s", reason());
        goto bad;
    }
    t->ctx = ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA |
                                 SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF
#ifdef SSL_OP_ENABLE_KTLS
                                 | SSL_OP_ENABLE_KTLS
#endif
    );
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_default_passwd_cb(ctx, give_password);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, &pw);
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->certfile) != 1) {
        snprintf(err, cap, "m0serve: error: --certfile: %s: %s", cfg->certfile, reason());
        goto bad;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, keyfile, SSL_FILETYPE_PEM) != 1) {
        snprintf(err, cap, "m0serve: error: %s: %s: %s", cfg->keyfile ? "--keyfile" : "--certfile (its key)", keyfile,
                 reason_pw(pw.text != NULL));
        goto bad;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, cap, "m0serve: error: --keyfile: the key does not match the certificate of --certfile %s",
                 cfg->certfile);
        goto bad;
    }
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    const char *ciphers = cfg->ciphers ? cfg->ciphers : M0_TLS_CIPHERS_DEFAULT;
    if (SSL_CTX_set_cipher_list(ctx, ciphers) != 1) {
        snprintf(err, cap, "m0serve: error: --ciphers: invalid value '%s' (no TLS 1.2 cipher matches)", ciphers);
        *usage = 1;
        goto bad;
    }
    if (SSL_CTX_set1_groups_list(ctx, "X25519:P-256:P-384") != 1) {
        snprintf(err, cap, "m0serve: error: TLS: cannot set the key exchange groups: %s", reason());
        goto bad;
    }
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    if (cfg->ca_certs != NULL) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->ca_certs);
        if (SSL_CTX_load_verify_locations(ctx, cfg->ca_certs, NULL) != 1 || names == NULL) {
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            snprintf(err, cap, "m0serve: error: --ca-certs: %s: %s", cfg->ca_certs, reason());
            goto bad;
        }
        SSL_CTX_set_client_CA_list(ctx, names);      /* the CAs a client is told to pick from */
    }
    SSL_CTX_set_verify(ctx, cfg->cert_reqs == 2   ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                            : cfg->cert_reqs == 1 ? SSL_VERIFY_PEER
                                                  : SSL_VERIFY_NONE,
                       NULL);
    /* Resumption by tickets only (tls_server.h); a resumed session keeps
     * the client certificate it was verified with. */
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"m0serve", 7);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    t->rotate = (long)cfg->tls_ticket_rotate;
    if (t->rotate > 0) {
        t->keys = prev != NULL && prev->keys != NULL ? prev->keys : keys_new();
        if (t->keys == NULL) {
            snprintf(err, cap, "m0serve: error: TLS: cannot map the session-ticket keys: %s", strerror(errno));
            goto bad;
        }
        SSL_CTX_set_app_data(ctx, t);
        SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key);
        SSL_CTX_set_timeout(ctx, 2 * t->rotate);
        SSL_CTX_set_num_tickets(ctx, 1);
    } else {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
    }
    t->pem = cert_pem(ctx);
    if (t->pem == NULL) {
        snprintf(err, cap, "m0serve: error: --certfile: %s: cannot encode the certificate", cfg->certfile);
        goto bad;
    }
    describe(t);
    m0_keyfile_free(pw.text, pw.size);
    return t;
bad:
    m0_keyfile_free(pw.text, pw.size);
    if (t != NULL)
        SSL_CTX_free(t->ctx);
    free(t);
    return NULL;
}

void m0_tlsd_free(struct m0_tlsd *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx);
    free(t->pem);
    free(t);
}

struct ssl_ctx_st *m0_tlsd_ctx(const struct m0_tlsd *t)
{
    return t->ctx;
}

const char *m0_tlsd_server_pem(const struct m0_tlsd *t)
{
    return t->pem;
}

void m0_tlsd_describe(const struct m0_tlsd *t, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", t->line);
}
