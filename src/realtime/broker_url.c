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
 *    whose reply was lost); else it is set to the new id for ARGV[6] ms.
 *    The answer rewrites the key as it is (KEEPTTL: the window still runs
 *    from the first publish) so that it is a write: a WAIT after it counts
 *    the replicas that have the key, and with it the event (Sentinel);
 *  - ids are formatted with %d: Lua 5.1's tostring prints 14 significant
 *    digits only.
 */
const char M0_BROKER_PUBLISH_LUA[] =
    "if KEYS[4] then\n"
    "  local first = redis.call('GET', KEYS[4])\n"
    "  if first then\n"
    "    redis.call('SET', KEYS[4], first, 'KEEPTTL')\n"
    "    return tonumber(first)\n"
    "  end\n"
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

/* The URL schemes and the engine each names (broker_engine.h). A new
 * engine adds its rows here and its file beside broker.c. */
static const struct scheme {
    const char *prefix;
    const char *engine;
    int tls, sentinel, port;        /* default port of HOST */
    int multi;                      /* HOST:PORT,HOST:PORT,... allowed (nodes or sentinels) */
    int path;                       /* /DB (or /MASTER[/DB]) after the hosts */
} schemes[] = {
    {"redis://", "redis", 0, 0, 6379, 0, 1},
    {"rediss://", "redis", 1, 0, 6379, 0, 1},
    {"redis+sentinel://", "redis", 0, 1, 26379, 1, 1},
    {"rediss+sentinel://", "redis", 1, 1, 26379, 1, 1},
    {"nats://", "nats", 0, 0, 4222, 1, 0},
};

/* One HOST[:PORT] or [V6]:PORT of n bytes at p into *out (port default
 * dport). */
static int parse_host(const char *p, size_t n, int dport, struct m0_hostport *out, char *err, size_t cap)
{
    const char *hend = p + n, *host = p, *port = NULL;
    size_t hlen;
    long v;
    if (n > 0 && p[0] == '[') {
        const char *close = memchr(p, ']', n);
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
        const char *colon = memchr(p, ':', n);
        hlen = colon ? (size_t)(colon - p) : n;
        if (colon)
            port = colon + 1;
    }
    if (hlen == 0 || hlen >= sizeof out->host)
        return fail(err, cap, "missing or overlong host");
    for (size_t i = 0; i < hlen; i++) {
        if (!isgraph((unsigned char)host[i]))
            return fail(err, cap, "bad character in host");
    }
    memcpy(out->host, host, hlen);
    out->host[hlen] = '\0';
    out->port = dport;
    if (port != NULL) {
        if (parse_int(port, (size_t)(hend - port), 1, 65535, &v) != M0_OK)
            return fail(err, cap, "port must be 1..65535");
        out->port = (int)v;
    }
    return M0_OK;
}

/* HOST:PORT as shown: an IPv6 address in brackets. */
static void show_host(char *out, size_t cap, const struct m0_hostport *h)
{
    snprintf(out, cap, strchr(h->host, ':') ? "[%s]:%d" : "%s:%d", h->host, h->port);
}

int m0_broker_parse_url(const char *url, struct m0_broker_cfg *cfg, char *err, size_t cap)
{
    cfg->is_unix = cfg->tls = cfg->sentinel = 0;
    cfg->host[0] = cfg->path[0] = cfg->password[0] = cfg->master[0] = cfg->username[0] = '\0';
    cfg->port = 6379;
    cfg->db = 0;
    cfg->nhosts = 0;
    snprintf(cfg->engine, sizeof cfg->engine, "redis");
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
    const struct scheme *sc = NULL;
    for (size_t i = 0; i < M0_ARRAY_LEN(schemes); i++)
        if (strncmp(url, schemes[i].prefix, strlen(schemes[i].prefix)) == 0)
            sc = &schemes[i];
    if (sc == NULL)
        return fail(err, cap, "want redis://[:PASSWORD@]HOST:PORT[/DB], rediss://..., "
                              "redis+sentinel://HOST:PORT,.../MASTER[/DB], unix:///path/redis.sock "
                              "or nats://HOST:PORT[,HOST:PORT...]");
    snprintf(cfg->engine, sizeof cfg->engine, "%s", sc->engine);
    cfg->tls = sc->tls;
    cfg->sentinel = sc->sentinel;
    const char *p = url + strlen(sc->prefix);
    const char *at = strrchr(p, '@');
    if (at != NULL) {
        /* userinfo: ":password" (Redis < 6 style: AUTH password) or
         * "user:password" (an ACL user: AUTH user password). */
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : p;
        size_t n = (size_t)(at - pw), un = colon ? (size_t)(colon - p) : 0;
        if (n == 0 || n >= sizeof cfg->password)
            return fail(err, cap, "empty or overlong password");
        if (un >= sizeof cfg->username)
            return fail(err, cap, "overlong user name");
        for (size_t i = 0; i < un; i++)
            if (!isgraph((unsigned char)p[i]))
                return fail(err, cap, "bad character in the user name");
        memcpy(cfg->username, p, un);
        cfg->username[un] = '\0';
        memcpy(cfg->password, pw, n);
        cfg->password[n] = '\0';
        p = at + 1;
    }
    const char *slash = strchr(p, '/');
    const char *hend = slash ? slash : p + strlen(p);
    if (slash != NULL && !sc->path)
        return fail(err, cap, "no path after the hosts (nats://HOST:PORT,HOST:PORT,...)");
    /* HOST[:PORT], comma-separated (sentinels only). */
    for (const char *h = p;;) {
        const char *comma = memchr(h, ',', (size_t)(hend - h));
        const char *e = comma ? comma : hend;
        if (cfg->nhosts == M0_BROKER_MAX_HOSTS)
            return fail(err, cap, "too many hosts");
        if (parse_host(h, (size_t)(e - h), sc->port, &cfg->hosts[cfg->nhosts], err, cap) != M0_OK)
            return M0_ERR;
        cfg->nhosts++;
        if (comma == NULL)
            break;
        h = comma + 1;
    }
    if (!sc->multi && cfg->nhosts > 1)
        return fail(err, cap, "one HOST:PORT (several are sentinels: redis+sentinel://)");
    memcpy(cfg->host, cfg->hosts[0].host, sizeof cfg->host);
    cfg->port = cfg->hosts[0].port;
    const char *db = slash != NULL && slash[1] != '\0' ? slash + 1 : NULL;
    if (cfg->sentinel) {
        /* /MASTER[/DB] */
        const char *name = db, *end = name ? strchr(name, '/') : NULL;
        size_t n = name ? (end ? (size_t)(end - name) : strlen(name)) : 0;
        if (n == 0)
            return fail(err, cap, "want redis+sentinel://HOST:PORT,.../MASTER[/DB] (the name the sentinels monitor)");
        if (n >= sizeof cfg->master)
            return fail(err, cap, "overlong master name");
        for (size_t i = 0; i < n; i++)
            if (!isgraph((unsigned char)name[i]))
                return fail(err, cap, "bad character in the master name");
        memcpy(cfg->master, name, n);
        cfg->master[n] = '\0';
        db = end != NULL && end[1] != '\0' ? end + 1 : NULL;
    }
    if (db != NULL) {
        if (parse_int(db, strlen(db), 0, 100000, &v) != M0_OK)
            return fail(err, cap, "database must be a number");
        cfg->db = (int)v;
    }
    size_t o = (size_t)snprintf(cfg->shown, sizeof cfg->shown, "%.*s://%s%s", (int)(strlen(sc->prefix) - 3),
                                sc->prefix, cfg->username, cfg->password[0] ? ":***@" : "");
    for (int i = 0; i < cfg->nhosts && o < sizeof cfg->shown; i++) {
        char one[300];
        show_host(one, sizeof one, &cfg->hosts[i]);
        o += (size_t)snprintf(cfg->shown + o, sizeof cfg->shown - o, "%s%s", i ? "," : "", one);
    }
    if (o < sizeof cfg->shown && sc->path)
        snprintf(cfg->shown + o, sizeof cfg->shown - o, cfg->sentinel ? "/%s/%d" : "%s/%d", cfg->master, cfg->db);
    return M0_OK;
}

int m0_broker_check_flags(const struct m0_broker_cfg *b, const struct m0_config *cfg, char *err, size_t cap)
{
    int nats = b != NULL && strcmp(b->engine, "nats") == 0;
    if (cfg->broker_replicas >= 0 && !nats) {
        snprintf(err, cap, "--broker-replicas: only with a NATS broker (nats://)");
        return M0_ERR;
    }
    if (nats && cfg->presence_events != NULL && cfg->presence_events[0] != '\0') {
        /* Join/leave are published by each host's part of the presence
         * table, which lives in Redis (presence_broker.c); NATS has none
         * yet, and a host publishing them on its own would race the
         * stream's sequence. */
        snprintf(err, cap, "--presence-events: not with a NATS broker yet (Redis, or no broker)");
        return M0_ERR;
    }
    if (cfg->broker_min_replicas >= 0 && nats) {
        snprintf(err, cap, "--broker-min-replicas: only with Redis (a NATS stream acknowledges once its "
                 "replicas' quorum has an event: --broker-replicas)");
        return M0_ERR;
    }
    const char *given = cfg->broker_ca_certs ? "--broker-ca-certs"
                        : cfg->broker_certfile ? "--broker-certfile"
                        : cfg->broker_keyfile ? "--broker-keyfile" : NULL;
    if (given == NULL)
        return M0_OK;
    if (b == NULL || !b->tls) {
        snprintf(err, cap, "%s: only with a TLS broker (rediss:// or rediss+sentinel://)", given);
        return M0_ERR;
    }
    if (cfg->broker_keyfile != NULL && cfg->broker_certfile == NULL) {
        snprintf(err, cap, "--broker-keyfile: needs --broker-certfile");
        return M0_ERR;
    }
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
    the.min_replicas = cfg->broker_min_replicas >= 0 ? (int)cfg->broker_min_replicas : the.sentinel ? 1 : 0;
    the.replicas = (int)cfg->broker_replicas;
    the.ca_certs = cfg->broker_ca_certs;
    the.certfile = cfg->broker_certfile;
    the.keyfile = cfg->broker_keyfile;
    m0_broker = &the;
    return M0_OK;
}
