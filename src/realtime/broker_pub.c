/*
 * broker_pub.c — publishing through the broker from any thread but a busy
 * loop (see broker_pub.h): the front every engine shares (the channel, key
 * and size rules, SSE framing), and the Redis engine's publisher: a
 * blocking connection per thread (TCP, unix or TLS: xconn.h), one EVALSHA
 * per event, then WAIT when --broker-min-replicas asks for replicas.
 *
 * Why blocking here: a publish returns the event's global id, which only
 * the broker knows, so the caller waits one round trip anyway. Pool
 * threads (where views run) may block; the loop thread never calls this
 * unless views run on it (--blocking-threads 0), where the view itself
 * already occupies the loop.
 *
 * Outcomes: until the command has left in full the broker cannot have run
 * it (a refused or failed connect, a write that failed: not published);
 * after that, a reply that does not come (a timeout, a connection that
 * drops) leaves the outcome unknown: the script may have run. So does a
 * WAIT that counts fewer replicas than asked: the event is on the primary,
 * and a failover now could lose it. A key makes a retry safe: the script
 * remembers it (M0_BROKER_KEY_TTL_MS), in the replicated data, and answers
 * a repeat with the first id.
 *
 * With Sentinel each new connection asks the sentinels where the primary
 * is (SENTINEL get-master-addr-by-name) and checks with ROLE that it is one
 * (mid-failover a sentinel may still name the old one).
 */
#include <errno.h>
#include <openssl/sha.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "m0/broker_engine.h"
#include "m0/broker_pub.h"
#include "m0/broker_reply.h"
#include "m0/bus.h"
#include "m0/sse.h"
#include "m0/xconn.h"
#include "broker_int.h"

/* ------------------------------------------------ a blocking connection */

struct sconn {
    struct m0_xconn x;
    redisReader *rd;
    struct m0_reply_guard guard;  /* in rd: caps what a reply may make hiredis allocate */
    size_t expect;                /* replies asked for and not read */
    int eof;                      /* the broker closed it */
};

/* Per process, written once before forking (m0_broker_redis_init). */
struct ssl_ctx_st *m0_broker_redis_tls;

static size_t expected(void *ctx)
{
    return ((const struct sconn *)ctx)->expect;
}

static void sc_close(struct sconn *c)
{
    m0_xconn_close(&c->x);
    if (c->rd != NULL)
        redisReaderFree(c->rd);
    c->rd = NULL;
}

/* Connect to t (TLS when the broker is rediss) within M0_BROKER_TIMEOUT_MS.
 * M0_OK, or M0_ERR with the reason in err. */
static int sc_open(struct sconn *c, const struct m0_xconn_target *t, char *err, size_t cap)
{
    memset(c, 0, sizeof *c);
    uint64_t deadline = m0_xconn_now_ms() + M0_BROKER_TIMEOUT_MS;
    if (m0_xconn_open(&c->x, t, m0_broker_redis_tls, err, cap) != M0_OK)
        return M0_ERR;
    for (;;) {
        int rc = m0_xconn_advance(&c->x, err, cap);
        if (rc == M0_OK)
            break;
        if (rc == M0_ERR || m0_xconn_wait(&c->x, deadline) != M0_OK) {
            if (rc != M0_ERR)
                snprintf(err, cap, "%s", c->x.state == M0_XC_HANDSHAKE ? "TLS handshake timed out" : "connect timed out");
            m0_xconn_close(&c->x);
            return M0_ERR;
        }
    }
    c->rd = redisReaderCreate();
    if (c->rd == NULL) {
        snprintf(err, cap, "out of memory");
        m0_xconn_close(&c->x);
        return M0_ERR;
    }
    m0_reply_guard_install(&c->guard, c->rd, expected, c);
    return M0_OK;
}

/* Write n bytes by deadline. M0_OK; M0_AGAIN (timed out) or M0_ERR, with
 * err. */
static int sc_send(struct sconn *c, const char *p, size_t n, uint64_t deadline, char *err, size_t cap)
{
    while (n > 0) {
        ssize_t w = m0_xconn_write(&c->x, p, n, err, cap);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w == M0_AGAIN) {
            if (m0_xconn_wait(&c->x, deadline) != M0_OK) {
                snprintf(err, cap, "timed out sending");
                return M0_AGAIN;
            }
        } else {
            return M0_ERR;
        }
    }
    return M0_OK;
}

/* The next reply by deadline: M0_OK with *out (the caller frees it);
 * M0_ERR with err (closed, protocol error, timed out: "no reply"). */
static int sc_reply(struct sconn *c, uint64_t deadline, redisReply **out, char *err, size_t cap)
{
    for (;;) {
        void *r = NULL;
        if (redisReaderGetReply(c->rd, &r) != REDIS_OK) {
            snprintf(err, cap, "protocol error: %s", c->guard.tripped ? c->guard.why : c->rd->errstr);
            return M0_ERR;
        }
        if (r != NULL) {
            c->expect--;
            *out = r;
            return M0_OK;
        }
        char buf[16384];
        ssize_t n = m0_xconn_read(&c->x, buf, sizeof buf, err, cap);
        if (n == 0) {
            c->eof = 1;
            snprintf(err, cap, "connection closed by the broker");
            return M0_ERR;
        }
        if (n == M0_AGAIN) {
            if (m0_xconn_wait(&c->x, deadline) != M0_OK) {
                snprintf(err, cap, "no reply within %d ms", M0_BROKER_TIMEOUT_MS);
                return M0_ERR;
            }
            continue;
        }
        if (n < 0)
            return M0_ERR;
        if (redisReaderFeed(c->rd, buf, (size_t)n) != REDIS_OK) {
            snprintf(err, cap, "out of memory");
            return M0_ERR;
        }
    }
}

/* Send one formatted command (len bytes; len < 0: formatting failed) and
 * read its reply by M0_BROKER_TIMEOUT_MS: the reply, or NULL with err.
 * Frees cmd. */
static redisReply *sc_exchange(struct sconn *c, char *cmd, int len, char *err, size_t cap)
{
    if (len < 0) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    uint64_t deadline = m0_xconn_now_ms() + M0_BROKER_TIMEOUT_MS;
    c->expect++;
    redisReply *r = NULL;
    if (sc_send(c, cmd, (size_t)len, deadline, err, cap) != M0_OK || sc_reply(c, deadline, &r, err, cap) != M0_OK)
        r = NULL;
    free(cmd);
    return r;
}

/* One command (hiredis's format), its reply by M0_BROKER_TIMEOUT_MS: the
 * reply, or NULL with err. */
static redisReply *sc_command(struct sconn *c, char *err, size_t cap, const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    va_start(ap, fmt);
    int len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    return sc_exchange(c, cmd, len, err, cap);
}

/* ------------------------------------------------------------- dialling */

/* Per process: which sentinel a dial asks first (moves on after one fails
 * to answer, so a dead sentinel costs one timeout, not one per dial). */
static unsigned sentinel_first;

/* Ask the sentinels where the primary is: M0_OK with *out, or M0_ERR with
 * why (each sentinel tried once). */
static int ask_sentinels(const struct m0_broker_cfg *b, struct m0_hostport *out, char *err, size_t cap)
{
    char last[600] = "no sentinel";
    unsigned first = __atomic_load_n(&sentinel_first, __ATOMIC_RELAXED);
    for (int k = 0; k < b->nhosts; k++) {
        unsigned i = (first + (unsigned)k) % (unsigned)b->nhosts;
        const struct m0_hostport *s = &b->hosts[i];
        struct m0_xconn_target t = {.host = s->host, .port = s->port, .resolve = 1};
        struct sconn c;
        char why[200];
        if (sc_open(&c, &t, why, sizeof why) != M0_OK) {
            snprintf(last, sizeof last, "sentinel %s:%d: %s", s->host, s->port, why);
            continue;
        }
        redisReply *r = sc_command(&c, why, sizeof why, "SENTINEL get-master-addr-by-name %s", b->master);
        int rc = r == NULL ? M0_ERR : m0_breply_addr(r, out);
        if (r == NULL)
            snprintf(last, sizeof last, "sentinel %s:%d: %s", s->host, s->port, why);
        else if (rc == M0_AGAIN)
            snprintf(last, sizeof last, "sentinel %s:%d does not know master %s", s->host, s->port, b->master);
        else if (rc != M0_OK)
            snprintf(last, sizeof last, "sentinel %s:%d: %s", s->host, s->port,
                     r->type == REDIS_REPLY_ERROR ? r->str : "an unexpected reply");
        if (r != NULL)
            freeReplyObject(r);
        sc_close(&c);
        if (rc == M0_OK) {
            __atomic_store_n(&sentinel_first, i, __ATOMIC_RELAXED);
            return M0_OK;
        }
    }
    snprintf(err, cap, "%s", last);
    return M0_ERR;
}

/* A fresh connection to the primary, authenticated and on the right
 * database (with Sentinel: where the sentinels say, checked with ROLE), its
 * reader behind the guard (an impostor's "*999999999" would otherwise make
 * hiredis allocate 8 GB). M0_OK, or M0_ERR with err: nothing was sent
 * that could publish. */
static int dial(const struct m0_broker_cfg *b, struct sconn *c, char *err, size_t cap)
{
    char why[640];
    struct m0_hostport primary;
    struct m0_xconn_target t = {.host = b->host, .port = b->port, .resolve = 1};
    if (b->is_unix) {
        t.path = b->path;
    } else if (b->sentinel) {
        if (ask_sentinels(b, &primary, why, sizeof why) != M0_OK) {
            snprintf(err, cap, "broker %s unreachable: %s", b->shown, why);
            return M0_ERR;
        }
        t.host = primary.host;
        t.port = primary.port;
    }
    if (sc_open(c, &t, why, sizeof why) != M0_OK) {
        if (b->sentinel)
            snprintf(err, cap, "broker %s unreachable: the primary %s:%d: %s", b->shown, t.host, t.port, why);
        else
            snprintf(err, cap, "broker %s unreachable: %s", b->shown, why);
        return M0_ERR;
    }
    redisReply *r = NULL;
    const char *what = "AUTH";
    if (b->password[0]) {
        r = b->username[0] ? sc_command(c, why, sizeof why, "AUTH %s %s", b->username, b->password)
                           : sc_command(c, why, sizeof why, "AUTH %s", b->password);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto bad;
        freeReplyObject(r);
    }
    if (b->db != 0) {
        what = "SELECT";
        r = sc_command(c, why, sizeof why, "SELECT %d", b->db);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto bad;
        freeReplyObject(r);
    }
    if (b->tls && !b->sentinel) {
        /* TLS 1.3: a server that refuses our certificate says so after the
         * handshake, at the first read; asked here, it is a refusal before
         * anything was sent that could publish. */
        what = "PING";
        r = sc_command(c, why, sizeof why, "PING");
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto bad;
        freeReplyObject(r);
    }
    if (b->sentinel) {
        what = "ROLE";
        r = sc_command(c, why, sizeof why, "ROLE");
        struct m0_role role;
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto bad;
        if (m0_breply_role(r, &role) != M0_OK || role.kind != M0_ROLE_PRIMARY) {
            snprintf(err, cap, "broker %s: %s:%d, named by the sentinels, is not the primary now (a failover in "
                     "progress): not published", b->shown, t.host, t.port);
            freeReplyObject(r);
            sc_close(c);
            return M0_ERR;
        }
        freeReplyObject(r);
    }
    return M0_OK;
bad:
    if (r != NULL)
        snprintf(err, cap, "broker %s refused the connection (%s): %s", b->shown, what, r->str);
    else
        snprintf(err, cap, "broker %s unreachable (%s): %s", b->shown, what, why);
    if (r)
        freeReplyObject(r);
    sc_close(c);
    return M0_ERR;
}

/* ------------------------------------------------------------ publishing */

struct pubconn {
    struct sconn c;
    int open;
    pid_t pid;                 /* a process forked by a view must not share it */
    struct m0_buf keys, out;   /* scratch for one publish */
};

/* Per process: the key of each publishing thread's own connection and of
 * its framing scratch (made once), and the publish script's SHA1
 * (computed once, then only read). */
static pthread_key_t conn_key, frame_key;
static pthread_once_t conn_once = PTHREAD_ONCE_INIT;
static char publish_sha[41];

static void conn_free(void *p)
{
    struct pubconn *pc = p;
    if (pc == NULL)
        return;
    if (pc->open)
        sc_close(&pc->c);
    m0_buf_free(&pc->keys);
    m0_buf_free(&pc->out);
    free(pc);
}

static void frame_free(void *p)
{
    if (p != NULL) {
        m0_buf_free(p);
        free(p);
    }
}

static void conn_init(void)
{
    pthread_key_create(&conn_key, conn_free);
    pthread_key_create(&frame_key, frame_free);
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)M0_BROKER_PUBLISH_LUA, strlen(M0_BROKER_PUBLISH_LUA), md);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(publish_sha + 2 * i, 3, "%02x", md[i]);
}

/* The connection of the calling thread (made at its first publish), or
 * NULL with err set. */
static struct pubconn *thread_conn(char *err, size_t cap)
{
    pthread_once(&conn_once, conn_init);
    struct pubconn *pc = pthread_getspecific(conn_key);
    if (pc == NULL) {
        pc = calloc(1, sizeof *pc);
        if (pc == NULL) {
            snprintf(err, cap, "out of memory");
            return NULL;
        }
        pthread_setspecific(conn_key, pc);
    }
    return pc;
}

static void drop(struct pubconn *pc)
{
    if (pc->open)
        sc_close(&pc->c);
    pc->open = 0;
}

/* The connection was closed by the broker (restarted, idle timeout) as our
 * command reached it: worth sending once more on a new one (a timeout is
 * not: the broker is there, and slow). */
static int closed_under_us(const struct sconn *c)
{
    return c->eof || c->x.closed;
}

/* A kept connection with something to read before we asked anything: the
 * broker closed it, or sent a reply nobody asked for (it would be taken as
 * the answer to our command). Either way it is not used again. (TLS's own
 * records after the handshake, session tickets, are read and are not
 * "something".) */
static int stale(struct sconn *c)
{
    if (c->rd->pos < c->rd->len)
        return 1;
    struct pollfd p = {.fd = c->x.fd, .events = POLLIN};
    if (m0_xconn_buffered(&c->x) == 0 && poll(&p, 1, 0) == 0)
        return 0;
    char b[64], err[64];
    return m0_xconn_read(&c->x, b, sizeof b, err, sizeof err) != M0_AGAIN;
}

/* Format argv (argc) into out, and WAIT when replicas are asked for. */
static void format_publish(const struct m0_broker_cfg *b, struct m0_buf *out, int argc, const char **argv,
                           const size_t *lens)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    m0_buf_reset(out);
    if (len > 0)
        m0_buf_append(out, cmd, (size_t)len);
    free(cmd);
    if (b->min_replicas > 0) {
        char n[16], ms[16];
        snprintf(n, sizeof n, "%d", b->min_replicas);
        snprintf(ms, sizeof ms, "%d", M0_BROKER_WAIT_MS);
        const char *wv[] = {"WAIT", n, ms};
        len = redisFormatCommandArgv(&cmd, 3, wv, NULL);
        if (len > 0)
            m0_buf_append(out, cmd, (size_t)len);
        free(cmd);
    }
}

/* Send what out holds (the script, and WAIT) and read the script's reply
 * and WAIT's (*replicas; -1 without WAIT). *sent once it left in full.
 * M0_OK with *r (the script's reply: the caller frees it); else M0_ERR
 * with err. */
static int exchange(const struct m0_broker_cfg *b, struct sconn *c, const struct m0_buf *out, redisReply **r,
                    long long *replicas, int *sent, char *err, size_t cap)
{
    uint64_t deadline = m0_xconn_now_ms() + M0_BROKER_TIMEOUT_MS;
    int waits = b->min_replicas > 0;
    *r = NULL;
    *replicas = -1;
    c->expect += 1 + (size_t)waits;
    if (sc_send(c, out->data, out->len, deadline, err, cap) != M0_OK)
        return M0_ERR;
    *sent = 1;
    if (sc_reply(c, deadline, r, err, cap) != M0_OK)
        return M0_ERR;
    if (waits) {
        redisReply *w = NULL;
        if (sc_reply(c, deadline + M0_BROKER_WAIT_MS, &w, err, cap) != M0_OK) {
            freeReplyObject(*r);
            *r = NULL;
            return M0_ERR;
        }
        *replicas = w->type == REDIS_REPLY_INTEGER ? w->integer : -1;
        freeReplyObject(w);
    }
    return M0_OK;
}

int m0_broker_redis_publish(const char *channel, size_t clen, const char *f, size_t flen, const char *key,
                            size_t klen, const char *hint, uint64_t *id_out, char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    struct pubconn *pc = thread_conn(err, cap);
    if (pc == NULL)
        return M0_ERR;
    struct m0_buf *keys = &pc->keys;
    if (pc->open && pc->pid != getpid())
        drop(pc);                /* inherited through fork: the parent's socket (closed without a word) */
    if (pc->open && stale(&pc->c))
        drop(pc);
    /* Keys: PREFIXseq, PREFIXlog, PREFIXch:CHANNEL and, with a key,
     * PREFIXkey:KEY (one buffer, four spans). */
    m0_buf_reset(keys);
    m0_buf_printf(keys, "%sseq%slog%sch:", b->prefix, b->prefix, b->prefix);
    m0_buf_append(keys, channel, clen);
    size_t pl = strlen(b->prefix), kat = keys->len;
    if (key != NULL) {
        m0_buf_printf(keys, "%skey:", b->prefix);
        m0_buf_append(keys, key, klen);
    }
    char ret[24], back[24], ttl[24], kttl[24];
    snprintf(ret, sizeof ret, "%ld", b->retention);
    snprintf(back, sizeof back, "%ld", b->backlog);
    snprintf(ttl, sizeof ttl, "%d", M0_BROKER_CHANNEL_TTL_MS);
    snprintf(kttl, sizeof kttl, "%d", M0_BROKER_KEY_TTL_MS);
    const char *argv[] = {"EVALSHA", publish_sha, key ? "4" : "3", keys->data, keys->data + pl + 3,
                          keys->data + 2 * pl + 6, keys->data + kat, channel, f, ret, back, ttl, kttl};
    size_t lens[] = {7, 40, 1, pl + 3, pl + 3, pl + 3 + clen, keys->len - kat, clen, flen,
                     strlen(ret), strlen(back), strlen(ttl), strlen(kttl)};
    /* Without a key the fourth key is left out (argv shifts by one). */
    int argc = (int)M0_ARRAY_LEN(argv);
    if (key == NULL) {
        memmove(&argv[6], &argv[7], sizeof argv[0] * (M0_ARRAY_LEN(argv) - 7));
        memmove(&lens[6], &lens[7], sizeof lens[0] * (M0_ARRAY_LEN(lens) - 7));
        argc--;
    }

    int sent = 0;              /* some attempt's command left: it may have run */
    for (int attempt = 0; attempt < 2; attempt++) {
        int fresh = !pc->open;
        if (fresh) {
            if (dial(b, &pc->c, err, cap) != M0_OK)
                break;
            pc->open = 1;
            pc->pid = getpid();
        }
        int left = 0;
        long long replicas;
        redisReply *r;
        format_publish(b, &pc->out, argc, argv, lens);
        int rc = exchange(b, &pc->c, &pc->out, &r, &replicas, &left, err, cap);
        if (rc == M0_OK && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            /* First use on this broker (or it restarted, or failed over):
             * EVAL loads it (the WAIT that followed counted nothing new). */
            freeReplyObject(r);
            argv[0] = "EVAL";
            argv[1] = M0_BROKER_PUBLISH_LUA;
            lens[0] = 4;
            lens[1] = strlen(M0_BROKER_PUBLISH_LUA);
            left = 0;
            format_publish(b, &pc->out, argc, argv, lens);
            rc = exchange(b, &pc->c, &pc->out, &r, &replicas, &left, err, cap);
            argv[0] = "EVALSHA";
            argv[1] = publish_sha;
            lens[0] = 7;
            lens[1] = 40;
        }
        sent |= left;
        if (rc != M0_OK) {
            int again = !fresh && closed_under_us(&pc->c);
            char why[256];
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, cap, "broker %s: %s", b->shown, why);
            drop(pc);
            if (again)
                continue;
            break;
        }
        rc = M0_OK;
        if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
            *id_out = (uint64_t)r->integer;
            if (replicas >= 0 && replicas < b->min_replicas) {
                /* On the primary, not (yet) on enough replicas: a failover
                 * now would lose it; the key is there with it. */
                snprintf(err, cap, "broker %s: event %llu is on the primary but WAIT counted %lld of %d replicas "
                         "within %d ms: a failover could lose it (outcome unknown%s)", b->shown,
                         (unsigned long long)*id_out, replicas, b->min_replicas, M0_BROKER_WAIT_MS, hint);
                rc = M0_BROKER_UNKNOWN;
            }
        } else {
            snprintf(err, cap, "broker %s refused the event: %s", b->shown,
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            rc = M0_ERR;
        }
        freeReplyObject(r);
        if (pc->c.rd->pos < pc->c.rd->len || rc != M0_OK)
            drop(pc);          /* more than the replies asked for (out of step), or a primary in doubt */
        return rc;
    }
    if (!sent)
        return M0_ERR;
    /* err holds the last failure; say what it means. */
    char why[256];
    snprintf(why, sizeof why, "%s", err);
    snprintf(err, cap, "%s, after the event was sent: it may have been published (outcome unknown%s)", why, hint);
    return M0_BROKER_UNKNOWN;
}

int m0_broker_redis_counter(uint64_t *out, char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    *out = 0;
    if (b->sentinel && b->min_replicas > 0)
        return M0_AGAIN;       /* the reader reads a replica: it takes its position there (broker_sentinel.c) */
    struct sconn c;
    if (dial(b, &c, err, cap) != M0_OK)
        return M0_ERR;
    char why[200];
    redisReply *r = sc_command(&c, why, sizeof why, "GET %sseq", b->prefix);
    int rc = M0_ERR;
    if (r == NULL) {
        snprintf(err, cap, "broker %s: %s", b->shown, why);
    } else if (r->type == REDIS_REPLY_NIL) {
        rc = M0_OK;
    } else if (r->type == REDIS_REPLY_STRING) {
        if (m0_u64_parse(r->str, r->len, out) == M0_OK)
            rc = M0_OK;
        else
            snprintf(err, cap, "broker %s: the counter key holds something else", b->shown);
    } else {
        snprintf(err, cap, "broker %s: %s", b->shown, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    }
    if (r)
        freeReplyObject(r);
    sc_close(&c);
    return rc;
}

int m0_broker_redis_init(const struct m0_broker_cfg *b, char *err, size_t cap)
{
    if (!b->tls || m0_broker_redis_tls != NULL)
        return M0_OK;
    struct m0_tls_opts o = {.ca_certs = b->ca_certs, .certfile = b->certfile, .keyfile = b->keyfile};
    m0_broker_redis_tls = m0_tls_client_ctx(&o, err, cap);
    return m0_broker_redis_tls != NULL ? M0_OK : M0_ERR;
}

/* ------------------------------------------------------------ the front */

/* What both publishes check first: a broker, a valid channel. */
static int can_publish(const char *channel, size_t clen, uint64_t *id_out, char *err, size_t cap)
{
    *id_out = 0;
    if (m0_broker == NULL || m0_broker_engine() == NULL) {
        snprintf(err, cap, "no broker configured");
        return M0_ERR;
    }
    if (m0_sse_channel_error(channel, clen) != NULL) {
        snprintf(err, cap, "invalid channel name");
        return M0_ERR;
    }
    return M0_OK;
}

int m0_broker_publish(const char *channel, size_t clen, const char *event, const char *data, size_t dlen,
                      const char *key, size_t klen, uint64_t *id_out, char *err, size_t cap)
{
    if (can_publish(channel, clen, id_out, err, cap) != M0_OK)
        return M0_ERR;
    if (key != NULL && !m0_broker_key_ok(key, klen)) {
        snprintf(err, cap, "invalid key (1..%d printable ASCII bytes)", M0_BROKER_KEY_MAX);
        return M0_ERR;
    }
    pthread_once(&conn_once, conn_init);
    struct m0_buf *frame = pthread_getspecific(frame_key);
    if (frame == NULL) {
        frame = calloc(1, sizeof *frame);
        if (frame == NULL) {
            snprintf(err, cap, "out of memory");
            return M0_ERR;
        }
        pthread_setspecific(frame_key, frame);
    }
    m0_buf_reset(frame);
    m0_sse_frame(frame, 0, event, data, dlen);
    if (frame->len + sizeof "id: 9223372036854775808\n" - 1 > M0_BUS_MAX_PAYLOAD) {   /* as m0pub counts */
        snprintf(err, cap, "event too large (%zu bytes framed; the limit is %d)", frame->len, M0_BUS_MAX_PAYLOAD);
        return M0_ERR;
    }
    int rc = m0_broker_engine()->publish(channel, clen, frame->data, frame->len, key, klen,
                                         "; a retry with the same key publishes it at most once", id_out, err, cap);
    if (frame->cap > 256 * 1024)
        m0_buf_free(frame);
    return rc;
}

int m0_broker_publish_frame(const char *channel, size_t clen, const char *frame, size_t flen, uint64_t *id_out,
                            char *err, size_t cap)
{
    if (can_publish(channel, clen, id_out, err, cap) != M0_OK)
        return M0_ERR;
    if (flen > M0_BROKER_FRAME_MAX) {
        snprintf(err, cap, "item too large (%zu bytes encoded; the limit is %d)", flen, M0_BROKER_FRAME_MAX);
        return M0_ERR;
    }
    return m0_broker_engine()->publish(channel, clen, frame, flen, NULL, 0, "", id_out, err, cap);
}

/* ------------------------------------- a blocking connection of a caller */

struct m0_broker_conn {
    struct sconn c;
    int broken;                /* a command failed: only m0_broker_conn_close now */
};

struct m0_broker_conn *m0_broker_conn_open(char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    if (b == NULL || m0_broker_engine() == NULL) {
        snprintf(err, cap, "no broker configured");
        return NULL;
    }
    if (strcmp(b->engine, "redis") != 0) {
        snprintf(err, cap, "the broker's engine (%s) is not Redis", b->engine);
        return NULL;
    }
    struct m0_broker_conn *bc = calloc(1, sizeof *bc);
    if (bc == NULL) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    if (dial(b, &bc->c, err, cap) != M0_OK) {
        free(bc);
        return NULL;
    }
    return bc;
}

redisReply *m0_broker_conn_command_argv(struct m0_broker_conn *bc, int argc, const char **argv, const size_t *lens,
                                        char *err, size_t cap)
{
    if (bc->broken) {
        snprintf(err, cap, "the connection failed earlier");
        return NULL;
    }
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    redisReply *r = sc_exchange(&bc->c, cmd, len, err, cap);
    if (r == NULL && len >= 0)
        bc->broken = 1;        /* sent in part, or its reply lost: out of step */
    else if (r != NULL && bc->c.rd->pos < bc->c.rd->len)
        bc->broken = 1;        /* more than the reply asked for: out of step */
    return r;
}

void m0_broker_conn_close(struct m0_broker_conn *bc)
{
    if (bc == NULL)
        return;
    sc_close(&bc->c);
    free(bc);
}

int m0_broker_counter(uint64_t *out, char *err, size_t cap)
{
    *out = 0;
    if (m0_broker == NULL || m0_broker_engine() == NULL) {
        snprintf(err, cap, "no broker configured");
        return M0_ERR;
    }
    return m0_broker_engine()->counter(out, err, cap);
}
