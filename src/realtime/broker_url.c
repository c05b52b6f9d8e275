/*
 * broker_url.c — the broker's URL, key prefix and scripts (see broker.h).
 * Pure: no I/O.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/broker_url.h"
#include "m0/config.h"

/* Per process, read-only after start (broker_url.h). */
const struct m0_broker_cfg *m0_broker;

/*
 * One publish, atomically (a script runs alone in Redis):
 *  - the next id: INCR of the counter; a counter that did not exist (first
 *    publish ever, or a Redis that lost its data) starts from the broker's
 *    clock in microseconds instead of 1, so ids keep increasing across a
 *    data loss and no client ever sees an id reused; that first entry is
 *    marked s=1 so readers know the ids before it are not in this log;
 *  - the event (frame without its id line) into the all-channel log and the
 *    channel's stream under the explicit id "<id>-0", both trimmed
 *    approximately (MAXLEN ~: whole nodes, cheap);
 *  - with a fourth key (a publish key, PREFIX"key:"KEY): an id it holds
 *    is answered as is and nothing is appended (the retry of a publish
 *    whose reply was lost); else it is set to the new id for ARGV[6] ms;
 *  - ids are formatted with %d: Lua 5.1's tostring prints 14 significant
 *    digits only.
 */
const char M0_BROKER_PUBLISH_LUA[] =
    "if KEYS[4] then\n"
    "  local first = redis.call('GET', KEYS[4])\n"
    "  if first then return tonumber(first) end\n"
    "end\n"
    "local id = redis.call('INCR', KEYS[1])\n"
    "local seeded = '0'\n"
    "if id == 1 then\n"
    "  local t = redis.call('TIME')\n"
    "  id = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "  redis.call('SET', KEYS[1], string.format('%d', id))\n"
    "  seeded = '1'\n"
    "end\n"
    "local sid = string.format('%d-0', id)\n"
    "redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], sid, 'c', ARGV[1], 'f', ARGV[2], 's', seeded)\n"
    "redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], sid, 'f', ARGV[2])\n"
    "redis.call('PEXPIRE', KEYS[3], ARGV[5])\n"
    "if KEYS[4] then redis.call('SET', KEYS[4], string.format('%d', id), 'PX', ARGV[6]) end\n"
    "return id\n";

/* A resume, in one atomic step: the counter; whether the client's own last
 * event (ARGV[1], "N-0") is still in the channel's stream (if it is,
 * nothing after it was trimmed); and the events after it, newest first, at
 * most ARGV[2] of them (a full count means older ones were cut). Needs
 * Redis >= 6.2 (exclusive ranges). */
const char M0_BROKER_REPLAY_LUA[] =
    "local top = redis.call('GET', KEYS[1]) or '0'\n"
    "local found = #redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1])\n"
    "return {top, found, redis.call('XREVRANGE', KEYS[2], '+', '(' .. ARGV[1], 'COUNT', ARGV[2])}\n";

int m0_broker_key_ok(const char *key, size_t klen)
{
    if (klen == 0 || klen > M0_BROKER_KEY_MAX)
        return 0;
    for (size_t i = 0; i < klen; i++)
        if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e)
            return 0;
    return 1;
}

/* A Redis that comes back with a counter below an id a worker already read
 * lost writes it had acknowledged (a partial persistence loss): the worker
 * raises the counter past that id when it reconnects, so no id is ever
 * issued twice, and tells its live streams that events may be missing. (A
 * counter that is gone altogether restarts from the clock in the publish
 * script instead.) */
const char M0_BROKER_RAISE_LUA[] =
    "local c = redis.call('GET', KEYS[1])\n"
    "if c and tonumber(c) < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) return 1 end\n"
    "return 0\n";

static int fail(char *err, size_t cap, const char *why)
{
    snprintf(err, cap, "%s", why);
    return M0_ERR;
}

static int parse_int(const char *p, size_t n, long lo, long hi, long *out)
{
    long v = 0;
    if (n == 0 || n > 9)
        return M0_ERR;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)p[i]))
            return M0_ERR;
        v = v * 10 + (p[i] - '0');
    }
    if (v < lo || v > hi)
        return M0_ERR;
    *out = v;
    return M0_OK;
}

int m0_broker_parse_url(const char *url, struct m0_broker_cfg *cfg, char *err, size_t cap)
{
    cfg->is_unix = 0;
    cfg->host[0] = cfg->path[0] = cfg->password[0] = '\0';
    cfg->port = 6379;
    cfg->db = 0;
    long v;
    if (strncmp(url, "unix://", 7) == 0) {
        const char *p = url + 7;
        const char *q = strchr(p, '?');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n == 0 || p[0] != '/')
            return fail(err, cap, "want unix:///absolute/path/redis.sock");
        if (n >= sizeof cfg->path)
            return fail(err, cap, "unix socket path too long");
        memcpy(cfg->path, p, n);
        cfg->path[n] = '\0';
        if (q != NULL) {
            if (strncmp(q, "?db=", 4) != 0 || parse_int(q + 4, strlen(q + 4), 0, 100000, &v) != M0_OK)
                return fail(err, cap, "the only query is ?db=N");
            cfg->db = (int)v;
        }
        cfg->is_unix = 1;
        snprintf(cfg->shown, sizeof cfg->shown, "%s", url);
        return M0_OK;
    }
    if (strncmp(url, "redis://", 8) != 0)
        return fail(err, cap, "want redis://[:PASSWORD@]HOST:PORT[/DB] or unix:///path/redis.sock");
    const char *p = url + 8;
    const char *at = strrchr(p, '@');
    if (at != NULL) {
        /* userinfo: ":password" (Redis < 6 style) or "user:password"; only
         * the password is used (AUTH password). */
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : p;
        size_t n = (size_t)(at - pw);
        if (n == 0 || n >= sizeof cfg->password)
            return fail(err, cap, "empty or overlong password");
        memcpy(cfg->password, pw, n);
        cfg->password[n] = '\0';
        p = at + 1;
    }
    const char *slash = strchr(p, '/');
    size_t hp = slash ? (size_t)(slash - p) : strlen(p);
    const char *hend = p + hp;
    const char *host = p, *port = NULL;
    size_t hlen;
    if (hp > 0 && p[0] == '[') {
        const char *close = memchr(p, ']', hp);
        if (close == NULL)
            return fail(err, cap, "unterminated [IPv6 address]");
        host = p + 1;
        hlen = (size_t)(close - host);
        if (close + 1 < hend) {
            if (close[1] != ':')
                return fail(err, cap, "want [ADDR]:PORT");
            port = close + 2;
        }
    } else {
        const char *colon = memchr(p, ':', hp);
        hlen = colon ? (size_t)(colon - p) : hp;
        if (colon)
            port = colon + 1;
    }
    if (hlen == 0 || hlen >= sizeof cfg->host)
        return fail(err, cap, "missing or overlong host");
    for (size_t i = 0; i < hlen; i++) {
        if (!isgraph((unsigned char)host[i]))
            return fail(err, cap, "bad character in host");
    }
    memcpy(cfg->host, host, hlen);
    cfg->host[hlen] = '\0';
    if (port != NULL) {
        if (parse_int(port, (size_t)(hend - port), 1, 65535, &v) != M0_OK)
            return fail(err, cap, "port must be 1..65535");
        cfg->port = (int)v;
    }
    if (slash != NULL && slash[1] != '\0') {
        if (parse_int(slash + 1, strlen(slash + 1), 0, 100000, &v) != M0_OK)
            return fail(err, cap, "database must be a number");
        cfg->db = (int)v;
    }
    snprintf(cfg->shown, sizeof cfg->shown, strchr(cfg->host, ':') ? "redis://%s[%s]:%d/%d" : "redis://%s%s:%d/%d",
             cfg->password[0] ? ":***@" : "", cfg->host, cfg->port, cfg->db);
    return M0_OK;
}

int m0_broker_prefix_ok(const char *prefix)
{
    size_t n = strlen(prefix);
    if (n == 0 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!isgraph((unsigned char)prefix[i]))
            return 0;
    }
    return 1;
}

int m0_broker_configure(const struct m0_config *cfg)
{
    static struct m0_broker_cfg the;
    char why[160];
    if (cfg->broker == NULL)
        return M0_OK;
    if (m0_broker_parse_url(cfg->broker, &the, why, sizeof why) != M0_OK || !m0_broker_prefix_ok(cfg->broker_prefix))
        return M0_ERR;
    snprintf(the.prefix, sizeof the.prefix, "%s", cfg->broker_prefix);
    the.retention = cfg->broker_retention;
    the.backlog = cfg->broker_backlog;
    m0_broker = &the;
    return M0_OK;
}
