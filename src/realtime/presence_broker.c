/*
 * presence_broker.c — a worker's part of the occupancy in Redis (see
 * presence_broker.h). Runs on the presence agent's thread, which may block:
 * a blocking connection of the broker's (broker_pub.h: Sentinel, TLS and
 * the reply guard as a publish has them), one script per batch of changes,
 * a heartbeat script once a second. A command that fails drops the
 * connection; the next attempt dials again (with Sentinel: asks the
 * sentinels, so the part follows the primary after a failover) and resyncs.
 *
 * Every script reads Redis's own clock (TIME), so the hosts' clocks never
 * decide who is live. Scripts name keys they build from the prefix (as the
 * broker's scripts do for the channel's stream): one Redis, not Cluster.
 */
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "m0/broker_pub.h"
#include "m0/broker_url.h"
#include "m0/buf.h"
#include "m0/config.h"
#include "m0/log.h"
#include "m0/presence_agent.h"
#include "m0/presence_broker.h"

#define BATCH 512                        /* changes per script call */
#define RETRY_MIN_MS 500
#define RETRY_MAX_MS 5000

/* What every script starts with: its settings, Redis's clock, the live
 * parts (this one always among them), a sub's connections over them, the
 * publish of a join/leave event (the broker's publish script, inline:
 * M0_BROKER_PUBLISH_LUA), the join/leave decision, a part's removal. */
#define PRELUDE                                                                                          \
    "local pfx, part = ARGV[1], ARGV[2]\n"                                                               \
    "local deb, ret, back, chttl = tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]\n"                       \
    "local t = redis.call('TIME')\n"                                                                     \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"                            \
    "local live\n"                                                                                       \
    "local function lives()\n"                                                                           \
    "  if not live then\n"                                                                               \
    "    live = redis.call('ZRANGEBYSCORE', pfx .. 'pr:live', now, '+inf')\n"                            \
    "    local mine = false\n"                                                                           \
    "    for _, p in ipairs(live) do if p == part then mine = true end end\n"                            \
    "    if not mine then live[#live + 1] = part end\n"                                                  \
    "  end\n"                                                                                            \
    "  return live\n"                                                                                    \
    "end\n"                                                                                              \
    "local function total(ch, sub)\n"                                                                    \
    "  local n = 0\n"                                                                                    \
    "  for _, p in ipairs(lives()) do\n"                                                                 \
    "    n = n + (tonumber(redis.call('HGET', pfx .. 'pr:s:' .. p .. ':' .. ch, sub)) or 0)\n"           \
    "  end\n"                                                                                            \
    "  return n\n"                                                                                       \
    "end\n"                                                                                              \
    "local function publish(ch, ev, sub)\n"                                                              \
    "  local seq = pfx .. 'seq'\n"                                                                       \
    "  local id = redis.call('INCR', seq)\n"                                                             \
    "  local seeded = '0'\n"                                                                             \
    "  if id == 1 then\n"                                                                                \
    "    local tt = redis.call('TIME')\n"                                                                \
    "    id = tonumber(tt[1]) * 1000000 + tonumber(tt[2])\n"                                             \
    "    redis.call('SET', seq, string.format('%d', id))\n"                                              \
    "    seeded = '1'\n"                                                                                 \
    "  end\n"                                                                                            \
    "  local sid = string.format('%d-0', id)\n"                                                          \
    "  local f = 'event: ' .. ev .. '\\ndata: {\"sub\": ' .. cjson.encode(sub) .. '}\\n\\n'\n"           \
    "  redis.call('XADD', pfx .. 'log', 'MAXLEN', '~', back, sid, 'c', ch, 'f', f, 's', seeded)\n"       \
    "  local ck = pfx .. 'ch:' .. ch\n"                                                                  \
    "  redis.call('XADD', ck, 'MAXLEN', '~', ret, sid, 'f', f)\n"                                        \
    "  redis.call('PEXPIRE', ck, chttl)\n"                                                               \
    "end\n"                                                                                              \
    "local function reconcile(ch, sub)\n"                                                                \
    "  local jk, m = pfx .. 'pr:j:' .. ch, ch .. '\\n' .. sub\n"                                         \
    "  if total(ch, sub) > 0 then\n"                                                                     \
    "    if redis.call('HSETNX', jk, sub, '1') == 1 then publish(ch, 'join', sub) end\n"                 \
    "    redis.call('ZREM', pfx .. 'pr:pend', m)\n"                                                      \
    "  elseif redis.call('HEXISTS', jk, sub) == 1 then\n"                                                \
    "    redis.call('ZADD', pfx .. 'pr:pend', 'NX', now + deb, m)\n"                                     \
    "  end\n"                                                                                            \
    "end\n"                                                                                              \
    "local function drop(d, budget)\n"                                                                   \
    "  local ck = pfx .. 'pr:c:' .. d\n"                                                                 \
    "  for _, ch in ipairs(redis.call('SPOP', ck, budget)) do\n"                                         \
    "    redis.call('HDEL', pfx .. 'pr:n:' .. ch, d)\n"                                                  \
    "    local sk = pfx .. 'pr:s:' .. d .. ':' .. ch\n"                                                  \
    "    local subs = redis.call('HKEYS', sk)\n"                                                         \
    "    redis.call('DEL', sk)\n"                                                                        \
    "    for _, sub in ipairs(subs) do\n"                                                                \
    "      if redis.call('HEXISTS', pfx .. 'pr:j:' .. ch, sub) == 1 then reconcile(ch, sub) end\n"       \
    "    end\n"                                                                                          \
    "  end\n"                                                                                            \
    "  return redis.call('SCARD', ck)\n"                                                                 \
    "end\n"

/* Changes: ARGV[7..] five at a time (kind, channel, sub, count, events). */
static const char PUSH_LUA[] = PRELUDE
    "local i = 7\n"
    "while i + 4 <= #ARGV do\n"
    "  local kind, ch, sub, n, ev = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), ARGV[i + 4]\n"
    "  local ck, sk = pfx .. 'pr:c:' .. part, pfx .. 'pr:s:' .. part .. ':' .. ch\n"
    "  if kind == 'c' then\n"
    "    if n > 0 then\n"
    "      redis.call('HSET', pfx .. 'pr:n:' .. ch, part, n)\n"
    "      redis.call('SADD', ck, ch)\n"
    "    else\n"
    "      redis.call('HDEL', pfx .. 'pr:n:' .. ch, part)\n"
    "    end\n"
    "  else\n"
    "    if n > 0 then\n"
    "      redis.call('HSET', sk, sub, n)\n"
    "      redis.call('SADD', ck, ch)\n"
    "    else\n"
    "      redis.call('HDEL', sk, sub)\n"
    "    end\n"
    "    if ev == '1' then reconcile(ch, sub) end\n"
    "  end\n"
    "  if n == 0 and redis.call('HEXISTS', pfx .. 'pr:n:' .. ch, part) == 0 and redis.call('EXISTS', sk) == 0 then\n"
    "    redis.call('SREM', ck, ch)\n"
    "  end\n"
    "  i = i + 5\n"
    "end\n"
    "return 1\n";

/* ARGV[7]: the part's time to live (ms). Returns {lost, next leave due in
 * ms from now or -1}. */
static const char BEAT_LUA[] = PRELUDE
    "local lk = pfx .. 'pr:live'\n"
    "local prev = redis.call('ZSCORE', lk, part)\n"
    "local lost = (not prev or tonumber(prev) < now) and 1 or 0\n"
    "redis.call('ZADD', lk, now + tonumber(ARGV[7]), part)\n"
    "local pk = pfx .. 'pr:pend'\n"
    "for _, m in ipairs(redis.call('ZRANGEBYSCORE', pk, '-inf', now, 'LIMIT', 0, 100)) do\n"
    "  redis.call('ZREM', pk, m)\n"
    "  local at = string.find(m, '\\n', 1, true)\n"
    "  if at then\n"
    "    local ch, sub = string.sub(m, 1, at - 1), string.sub(m, at + 1)\n"
    "    if total(ch, sub) == 0 and redis.call('HDEL', pfx .. 'pr:j:' .. ch, sub) == 1 then\n"
    "      publish(ch, 'leave', sub)\n"
    "    end\n"
    "  end\n"
    "end\n"
    "for _, d in ipairs(redis.call('ZRANGEBYSCORE', lk, '-inf', '(' .. now, 'LIMIT', 0, 4)) do\n"
    "  if drop(d, 64) == 0 then\n"
    "    redis.call('ZREM', lk, d)\n"
    "    redis.call('DEL', pfx .. 'pr:c:' .. d)\n"
    "  end\n"
    "end\n"
    "local first = redis.call('ZRANGE', pk, 0, 0, 'WITHSCORES')\n"
    "local due = -1\n"
    "if first[2] then due = math.max(0, tonumber(first[2]) - now) end\n"
    "return {lost, due}\n";

/* ARGV[7]: '1' when the part goes for good. Returns the channels left. */
static const char RESET_LUA[] = PRELUDE
    "local left = drop(part, 256)\n"
    "if left == 0 and ARGV[7] == '1' then\n"
    "  redis.call('ZREM', pfx .. 'pr:live', part)\n"
    "  redis.call('DEL', pfx .. 'pr:c:' .. part)\n"
    "end\n"
    "return left\n";

struct script {
    const char *lua;
    char sha[41];
};

struct m0_presence_redis {
    struct m0_broker_conn *c;
    char part[64];
    char debounce[24], retention[24], backlog[24], chttl[24], ttl[24];
    const char *prefix;
    uint64_t retry_at;
    unsigned failures;
    int logged;
    struct script push, beat, reset;
    struct m0_buf args;                  /* one call's argument bytes */
};

static void script_init(struct script *s, const char *lua)
{
    unsigned char md[SHA_DIGEST_LENGTH];
    s->lua = lua;
    SHA1((const unsigned char *)lua, strlen(lua), md);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(s->sha + 2 * i, 3, "%02x", md[i]);
}

struct m0_presence_redis *m0_presence_redis_new(const struct m0_config *cfg, const char *part)
{
    struct m0_presence_redis *r = m0_xcalloc(sizeof *r);
    snprintf(r->part, sizeof r->part, "%s", part);
    snprintf(r->debounce, sizeof r->debounce, "%llu", (unsigned long long)(cfg->presence_debounce * 1000));
    snprintf(r->retention, sizeof r->retention, "%ld", m0_broker->retention);
    snprintf(r->backlog, sizeof r->backlog, "%ld", m0_broker->backlog);
    snprintf(r->chttl, sizeof r->chttl, "%d", M0_BROKER_CHANNEL_TTL_MS);
    snprintf(r->ttl, sizeof r->ttl, "%d", M0_PRESENCE_PART_TTL_MS);
    r->prefix = m0_broker->prefix;
    script_init(&r->push, PUSH_LUA);
    script_init(&r->beat, BEAT_LUA);
    script_init(&r->reset, RESET_LUA);
    return r;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The connection failed (why) or is dropped: the next attempt waits 500 ms
 * doubling to 5 s per failure since the last script that succeeded; the
 * outage is logged once. */
static void fail(struct m0_presence_redis *r, const char *why)
{
    m0_broker_conn_close(r->c);
    r->c = NULL;
    unsigned shift = r->failures < 5 ? r->failures : 5;
    uint64_t delay = (uint64_t)RETRY_MIN_MS << shift;
    r->retry_at = mono_ms() + (delay > RETRY_MAX_MS ? RETRY_MAX_MS : delay);
    r->failures++;
    if (!r->logged) {
        m0_warn("presence: broker %s: %s: this worker's part of the occupancy is pushed once it answers "
                "(retrying with backoff up to %d s)", m0_broker->shown, why, RETRY_MAX_MS / 1000);
        r->logged = 1;
    }
}

void m0_presence_redis_free(struct m0_presence_redis *r)
{
    if (r == NULL)
        return;
    m0_broker_conn_close(r->c);
    m0_buf_free(&r->args);
    free(r);
}

int m0_presence_redis_ready(struct m0_presence_redis *r, uint64_t now_ms, char *err, size_t cap)
{
    (void)now_ms;
    if (r->c != NULL)
        return 1;
    if (mono_ms() < r->retry_at) {
        snprintf(err, cap, "waiting to reconnect");
        return 0;
    }
    r->c = m0_broker_conn_open(err, cap);
    if (r->c != NULL) {
        /* Up once it answers: a Redis at maxclients accepts, then refuses. */
        const char *ping[] = {"PING"};
        size_t plen[] = {4};
        char why[200];
        redisReply *pong = m0_broker_conn_command_argv(r->c, 1, ping, plen, why, sizeof why);
        if (pong == NULL || pong->type != REDIS_REPLY_STATUS || strcmp(pong->str, "PONG") != 0)
            snprintf(err, cap, "refused PING: %.160s",
                     pong == NULL ? why : pong->type == REDIS_REPLY_ERROR ? pong->str : "an unexpected reply");
        else
            err[0] = '\0';
        if (pong != NULL)
            freeReplyObject(pong);
        if (err[0] != '\0') {
            fail(r, err);
            return 0;
        }
    } else {
        fail(r, err);
        return 0;
    }
    if (r->logged)
        m0_info("presence: broker %s: connected again", m0_broker->shown);
    r->logged = 0;
    return 2;
}

/* Run script s with the settings and then extra arguments (n of them, in
 * the bytes of args at offsets off/len). The reply, or NULL (the
 * connection is dropped). */
static redisReply *run(struct m0_presence_redis *r, struct script *s, const char *const *extra, const size_t *elen,
                       size_t n)
{
    if (r->c == NULL)
        return NULL;
    size_t argc = 9 + n;
    const char **argv = m0_xmalloc(argc * sizeof *argv);
    size_t *lens = m0_xmalloc(argc * sizeof *lens);
    const char *fixed[] = {"EVALSHA", s->sha, "0", r->prefix, r->part, r->debounce, r->retention, r->backlog,
                           r->chttl};
    for (size_t i = 0; i < 9; i++) {
        argv[i] = fixed[i];
        lens[i] = strlen(fixed[i]);
    }
    for (size_t i = 0; i < n; i++) {
        argv[9 + i] = extra[i];
        lens[9 + i] = elen[i];
    }
    char why[240];
    redisReply *rep = m0_broker_conn_command_argv(r->c, (int)argc, argv, lens, why, sizeof why);
    if (rep != NULL && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(rep);
        argv[0] = "EVAL";
        lens[0] = 4;
        argv[1] = s->lua;
        lens[1] = strlen(s->lua);
        rep = m0_broker_conn_command_argv(r->c, (int)argc, argv, lens, why, sizeof why);
    }
    free(argv);
    free(lens);
    if (rep == NULL) {
        fail(r, why);
        return NULL;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        snprintf(why, sizeof why, "refused a script: %.200s", rep->str);
        freeReplyObject(rep);
        fail(r, why);
        return NULL;
    }
    r->failures = 0;
    return rep;
}

int m0_presence_redis_push(struct m0_presence_redis *r, const struct m0_presence_rec *recs, size_t n)
{
    const char *argv[BATCH * 5];
    size_t lens[BATCH * 5];
    char counts[BATCH][24];
    static const char *const kinds[] = {"c", "s"}, *const evs[] = {"0", "1"};
    for (size_t at = 0; at < n; at += BATCH) {
        size_t k = n - at < BATCH ? n - at : BATCH;
        for (size_t i = 0; i < k; i++) {
            const struct m0_presence_rec *x = &recs[at + i];
            int cn = snprintf(counts[i], sizeof counts[i], "%llu", (unsigned long long)x->count);
            argv[5 * i] = kinds[x->kind == 's'];
            lens[5 * i] = 1;
            argv[5 * i + 1] = x->channel;
            lens[5 * i + 1] = x->clen;
            argv[5 * i + 2] = x->sub != NULL ? x->sub : "";
            lens[5 * i + 2] = x->sub != NULL ? x->slen : 0;
            argv[5 * i + 3] = counts[i];
            lens[5 * i + 3] = (size_t)cn;
            argv[5 * i + 4] = evs[x->events != 0];
            lens[5 * i + 4] = 1;
        }
        redisReply *rep = run(r, &r->push, argv, lens, 5 * k);
        if (rep == NULL)
            return M0_ERR;
        freeReplyObject(rep);
    }
    return M0_OK;
}

int m0_presence_redis_beat(struct m0_presence_redis *r, int *lost, uint64_t *wake_ms)
{
    *lost = 0;
    *wake_ms = 0;
    const char *argv[] = {r->ttl};
    size_t lens[] = {strlen(r->ttl)};
    redisReply *rep = run(r, &r->beat, argv, lens, 1);
    if (rep == NULL)
        return M0_ERR;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[0]->type == REDIS_REPLY_INTEGER &&
        rep->element[1]->type == REDIS_REPLY_INTEGER) {
        *lost = rep->element[0]->integer != 0;
        *wake_ms = rep->element[1]->integer >= 0 ? (uint64_t)rep->element[1]->integer + 1 : 0;
    }
    freeReplyObject(rep);
    return M0_OK;
}

int m0_presence_redis_reset(struct m0_presence_redis *r, int final)
{
    const char *argv[] = {final ? "1" : "0"};
    size_t lens[] = {1};
    for (int rounds = 0; rounds < 100000; rounds++) {
        redisReply *rep = run(r, &r->reset, argv, lens, 1);
        if (rep == NULL)
            return M0_ERR;
        long long left = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
        freeReplyObject(rep);
        if (left == 0)
            return M0_OK;
    }
    return M0_OK;
}
