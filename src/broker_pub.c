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
 */
#include <errno.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "m0/broker_pub.h"
#include "m0/bus.h"
#include "m0/sse.h"

struct pubconn {
    redisContext *c;
    pid_t pid;                 /* a process forked by a view must not share it */
    struct m0_buf frame, key;  /* scratch for one publish */
};

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
    m0_buf_free(&pc->key);
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

/* A fresh connection, authenticated and on the right database; NULL with
 * err set. */
static redisContext *dial(const struct m0_broker_cfg *b, char *err, size_t cap)
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

/* The connection was closed by the broker (restarted, idle timeout) before
 * our command reached it: safe to send again on a new one. A timeout is
 * not: the broker may have run the script. */
static int closed_before_use(const redisContext *c)
{
    if (c->err == REDIS_ERR_EOF)
        return 1;
    return c->err == REDIS_ERR_IO && (errno == ECONNRESET || errno == EPIPE);
}

int m0_broker_publish(const char *channel, size_t clen, const char *event, const char *data, size_t dlen,
                      uint64_t *id_out, char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    *id_out = 0;
    if (b == NULL) {
        snprintf(err, cap, "no broker configured");
        return M0_ERR;
    }
    if (m0_sse_channel_error(channel, clen) != NULL) {
        snprintf(err, cap, "invalid channel name");
        return M0_ERR;
    }
    pthread_once(&conn_once, conn_init);
    struct pubconn *pc = pthread_getspecific(conn_key);
    if (pc == NULL) {
        pc = calloc(1, sizeof *pc);
        if (pc == NULL) {
            snprintf(err, cap, "out of memory");
            return M0_ERR;
        }
        pthread_setspecific(conn_key, pc);
    }
    struct m0_buf *frame = &pc->frame, *key = &pc->key;
    m0_buf_reset(frame);
    m0_sse_frame(frame, 0, event, data, dlen);
    if (frame->len + sizeof "id: 9223372036854775808\n" - 1 > M0_BUS_MAX_PAYLOAD) {   /* as m0pub counts */
        snprintf(err, cap, "event too large (%zu bytes framed; the limit is %d)", frame->len, M0_BUS_MAX_PAYLOAD);
        return M0_ERR;
    }
    if (pc->c != NULL && pc->pid != getpid()) {
        redisFree(pc->c);        /* inherited through fork: the parent's socket */
        pc->c = NULL;
    }
    /* Keys: PREFIXseq, PREFIXlog, PREFIXch:CHANNEL (one buffer, three spans). */
    m0_buf_reset(key);
    m0_buf_printf(key, "%sseq%slog%sch:", b->prefix, b->prefix, b->prefix);
    m0_buf_append(key, channel, clen);
    size_t pl = strlen(b->prefix);
    char ret[24], back[24], ttl[24];
    snprintf(ret, sizeof ret, "%ld", b->retention);
    snprintf(back, sizeof back, "%ld", b->backlog);
    snprintf(ttl, sizeof ttl, "%d", M0_BROKER_CHANNEL_TTL_MS);
    const char *argv[] = {"EVALSHA", publish_sha, "3", key->data, key->data + pl + 3, key->data + 2 * pl + 6,
                          channel, frame->data, ret, back, ttl};
    size_t lens[] = {7, 40, 1, pl + 3, pl + 3, pl + 3 + clen, clen, frame->len, strlen(ret), strlen(back), strlen(ttl)};

    for (int attempt = 0; attempt < 2; attempt++) {
        int fresh = pc->c == NULL;
        if (fresh) {
            pc->c = dial(b, err, cap);
            if (pc->c == NULL)
                return M0_ERR;
            pc->pid = getpid();
        }
        redisReply *r = redisCommandArgv(pc->c, (int)M0_ARRAY_LEN(argv), argv, lens);
        if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            /* First use on this broker (or it restarted): EVAL loads it. */
            freeReplyObject(r);
            argv[0] = "EVAL";
            argv[1] = M0_BROKER_PUBLISH_LUA;
            lens[0] = 4;
            lens[1] = strlen(M0_BROKER_PUBLISH_LUA);
            r = redisCommandArgv(pc->c, (int)M0_ARRAY_LEN(argv), argv, lens);
            argv[0] = "EVALSHA";
            argv[1] = publish_sha;
            lens[0] = 7;
            lens[1] = 40;
        }
        if (r == NULL) {
            int retry = !fresh && closed_before_use(pc->c);
            snprintf(err, cap, "broker %s: %s", b->shown, pc->c->errstr[0] ? pc->c->errstr : "no reply");
            redisFree(pc->c);
            pc->c = NULL;
            if (retry)
                continue;
            return M0_ERR;
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
        if (frame->cap > 256 * 1024)
            m0_buf_free(frame);
        return rc;
    }
    return M0_ERR;
}

int m0_broker_counter(uint64_t *out, char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    *out = 0;
    if (b == NULL) {
        snprintf(err, cap, "no broker configured");
        return M0_ERR;
    }
    redisContext *c = dial(b, err, cap);
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
