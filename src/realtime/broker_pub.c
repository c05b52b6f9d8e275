/*
 * broker_pub.c — publishing through the broker from any thread but a busy
 * loop (see broker.h): a blocking hiredis connection per thread, one
 * EVALSHA per event.
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
 * drops) leaves the outcome unknown: the script may have run. A key makes
 * a retry safe: the script remembers it (M0_BROKER_KEY_TTL_MS) and answers
 * a repeat with the first id.
 */
#include <errno.h>
#include <openssl/sha.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "m0/broker_pub.h"
#include "m0/broker_reply.h"
#include "m0/bus.h"
#include "m0/sse.h"

struct pubconn {
    redisContext *c;
    struct m0_reply_guard guard;  /* in c's reader: caps what a reply may make hiredis allocate */
    pid_t pid;                 /* a process forked by a view must not share it */
    struct m0_buf frame, keys; /* scratch for one publish */
};

/* Per process: the key of each publishing thread's own connection (made
 * once), and the publish script's SHA1 (computed once, then only read). */
static pthread_key_t conn_key;
static pthread_once_t conn_once = PTHREAD_ONCE_INIT;
static char publish_sha[41];

static void conn_free(void *p)
{
    struct pubconn *pc = p;
    if (pc == NULL)
        return;
    if (pc->c != NULL)
        redisFree(pc->c);
    m0_buf_free(&pc->frame);
    m0_buf_free(&pc->keys);
    free(pc);
}

static void conn_init(void)
{
    pthread_key_create(&conn_key, conn_free);
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)M0_BROKER_PUBLISH_LUA, strlen(M0_BROKER_PUBLISH_LUA), md);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(publish_sha + 2 * i, 3, "%02x", md[i]);
}

/* A synchronous connection reads only while its one command waits. */
static size_t one_pending(void *ctx)
{
    (void)ctx;
    return 1;
}

/* A fresh connection, authenticated and on the right database, its reader
 * behind guard g (which must outlive it: an impostor's "*999999999" would
 * otherwise make hiredis allocate 8 GB); NULL with err set. */
static redisContext *dial(const struct m0_broker_cfg *b, struct m0_reply_guard *g, char *err, size_t cap)
{
    struct timeval tv = {M0_BROKER_TIMEOUT_MS / 1000, (M0_BROKER_TIMEOUT_MS % 1000) * 1000};
    redisContext *c = b->is_unix ? redisConnectUnixWithTimeout(b->path, tv) : redisConnectWithTimeout(b->host, b->port, tv);
    if (c == NULL || c->err) {
        snprintf(err, cap, "broker %s unreachable: %s", b->shown, c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    m0_reply_guard_install(g, c->reader, one_pending, NULL);
    redisReply *r = NULL;
    if (b->password[0]) {
        r = redisCommand(c, "AUTH %s", b->password);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto bad;
        freeReplyObject(r);
    }
    if (b->db != 0) {
        r = redisCommand(c, "SELECT %d", b->db);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            goto bad;
        freeReplyObject(r);
    }
    return c;
bad:
    snprintf(err, cap, "broker %s refused the connection: %s", b->shown,
             r ? r->str : c->errstr);
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return NULL;
}

/* The connection was closed by the broker (restarted, idle timeout) as our
 * command reached it: worth sending once more on a new one (a timeout is
 * not: the broker is there, and slow). */
static int closed_under_us(const redisContext *c)
{
    if (c->err == REDIS_ERR_EOF)
        return 1;
    return c->err == REDIS_ERR_IO && (errno == ECONNRESET || errno == EPIPE);
}

/* A kept connection with something to read before we asked anything: the
 * broker closed it, or sent a reply nobody asked for (it would be taken as
 * the answer to our command). Either way it is not used again. */
static int stale(const redisContext *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    return poll(&p, 1, 0) != 0;
}

/* Send one command and read its reply (NULL: none; c->err says why).
 * *sent is set once the command left in full: from then on the broker may
 * have run it. */
static redisReply *roundtrip(redisContext *c, int argc, const char **argv, const size_t *lens, int *sent)
{
    if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK)
        return NULL;
    int done = 0;
    while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK)
            return NULL;
    *sent = 1;
    void *r = NULL;
    if (redisGetReply(c, &r) != REDIS_OK)
        return NULL;
    return r;
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

/* Run the publish script for frame f (flen bytes, as the log keeps it) on
 * channel, through pc's connection: m0_broker_publish's outcomes (hint
 * ends the "outcome unknown" text: what a retry does). */
static int publish_frame(struct pubconn *pc, const char *channel, size_t clen, const char *f, size_t flen,
                         const char *key, size_t klen, const char *hint, uint64_t *id_out, char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    struct m0_buf *keys = &pc->keys;
    if (pc->c != NULL && pc->pid != getpid()) {
        redisFree(pc->c);        /* inherited through fork: the parent's socket */
        pc->c = NULL;
    }
    if (pc->c != NULL && stale(pc->c)) {
        redisFree(pc->c);
        pc->c = NULL;
    }
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
        int fresh = pc->c == NULL;
        if (fresh) {
            pc->c = dial(b, &pc->guard, err, cap);
            if (pc->c == NULL)
                break;
            pc->pid = getpid();
        }
        int left = 0;
        redisReply *r = roundtrip(pc->c, argc, argv, lens, &left);
        if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            /* First use on this broker (or it restarted): EVAL loads it. */
            freeReplyObject(r);
            argv[0] = "EVAL";
            argv[1] = M0_BROKER_PUBLISH_LUA;
            lens[0] = 4;
            lens[1] = strlen(M0_BROKER_PUBLISH_LUA);
            left = 0;
            r = roundtrip(pc->c, argc, argv, lens, &left);
            argv[0] = "EVALSHA";
            argv[1] = publish_sha;
            lens[0] = 7;
            lens[1] = 40;
        }
        sent |= left;
        if (r == NULL) {
            int again = !fresh && closed_under_us(pc->c);
            snprintf(err, cap, "broker %s: %s", b->shown, pc->c->errstr[0] ? pc->c->errstr : "no reply");
            redisFree(pc->c);
            pc->c = NULL;
            if (again)
                continue;
            break;
        }
        int rc = M0_OK;
        if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
            *id_out = (uint64_t)r->integer;
        } else {
            snprintf(err, cap, "broker %s refused the event: %s", b->shown,
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            rc = M0_ERR;
        }
        freeReplyObject(r);
        if (pc->c->reader->pos < pc->c->reader->len) {
            redisFree(pc->c);  /* more than the one reply: out of step, not used again */
            pc->c = NULL;
        }
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

/* What both publishes check first: a broker, a valid channel. */
static int can_publish(const char *channel, size_t clen, uint64_t *id_out, char *err, size_t cap)
{
    *id_out = 0;
    if (m0_broker == NULL) {
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
    struct pubconn *pc = thread_conn(err, cap);
    if (pc == NULL)
        return M0_ERR;
    struct m0_buf *frame = &pc->frame;
    m0_buf_reset(frame);
    m0_sse_frame(frame, 0, event, data, dlen);
    if (frame->len + sizeof "id: 9223372036854775808\n" - 1 > M0_BUS_MAX_PAYLOAD) {   /* as m0pub counts */
        snprintf(err, cap, "event too large (%zu bytes framed; the limit is %d)", frame->len, M0_BUS_MAX_PAYLOAD);
        return M0_ERR;
    }
    int rc = publish_frame(pc, channel, clen, frame->data, frame->len, key, klen,
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
    struct pubconn *pc = thread_conn(err, cap);
    if (pc == NULL)
        return M0_ERR;
    return publish_frame(pc, channel, clen, frame, flen, NULL, 0, "", id_out, err, cap);
}

struct redisContext *m0_broker_connect(struct m0_reply_guard *g, char *err, size_t cap)
{
    if (m0_broker == NULL) {
        snprintf(err, cap, "no broker configured");
        return NULL;
    }
    return dial(m0_broker, g, err, cap);
}

int m0_broker_counter(uint64_t *out, char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    *out = 0;
    if (b == NULL) {
        snprintf(err, cap, "no broker configured");
        return M0_ERR;
    }
    struct m0_reply_guard guard;
    redisContext *c = dial(b, &guard, err, cap);
    if (c == NULL)
        return M0_ERR;
    redisReply *r = redisCommand(c, "GET %sseq", b->prefix);
    int rc = M0_ERR;
    if (r == NULL) {
        snprintf(err, cap, "broker %s: %s", b->shown, c->errstr);
    } else if (r->type == REDIS_REPLY_NIL) {
        rc = M0_OK;
    } else if (r->type == REDIS_REPLY_STRING) {
        char *end;
        unsigned long long v = strtoull(r->str, &end, 10);
        if (end != r->str && *end == '\0') {
            *out = v;
            rc = M0_OK;
        } else {
            snprintf(err, cap, "broker %s: the counter key holds something else", b->shown);
        }
    } else {
        snprintf(err, cap, "broker %s: %s", b->shown, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    }
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return rc;
}
