/*
 * broker_url.h — where the broker is and how it is used (docs/broker.md):
 * the URL and its settings, the key prefix rule, the Lua scripts every
 * part of the broker runs, and the process's broker configuration. Pure:
 * parsed by the command line (cli.c) and read by the publisher
 * (broker_pub.h) and the worker's loop side (broker.h).
 */
#ifndef M0_BROKER_URL_H
#define M0_BROKER_URL_H

#include "m0/types.h"
#include "m0/broker_reply.h"

struct m0_config;

/* Defaults shared with python/m0pub.py (keep them equal). */
#define M0_BROKER_PREFIX_DEFAULT "m0:"
#define M0_BROKER_RETENTION_DEFAULT 1000     /* events kept per channel for resume */
#define M0_BROKER_BACKLOG_DEFAULT 100000     /* events kept in the all-channel log */
#define M0_BROKER_CHANNEL_TTL_MS 86400000    /* a channel's stream expires a day after its last event */
#define M0_BROKER_TIMEOUT_MS 1000            /* connect and reply timeout of a publish */
#define M0_BROKER_KEY_TTL_MS 300000          /* a publish key is remembered this long (5 minutes) */
#define M0_BROKER_KEY_MAX 200                /* bytes of a publish key */

#define M0_BROKER_WAIT_MS 500                /* WAIT: how long a publish waits for its replicas */
#define M0_BROKER_MAX_HOSTS 16               /* sentinels (or an engine's nodes) in one URL */

/* Where the broker is and how it is used. */
struct m0_broker_cfg {
    char engine[16];           /* the engine the URL's scheme names: "redis", "nats" (broker_engine.h) */
    int tls;                   /* rediss://, rediss+sentinel:// */
    int sentinel;              /* +sentinel: hosts[] are sentinels, master names the primary */
    int is_unix;               /* 1: path is a unix socket */
    char host[256];            /* redis://: the server (also hosts[0]) */
    int port;
    struct m0_hostport hosts[M0_BROKER_MAX_HOSTS];   /* every HOST:PORT of the URL */
    int nhosts;
    char master[128];          /* +sentinel: the name the sentinels monitor */
    char path[108];
    char username[128];        /* ACL user (Redis 6): AUTH username password; "": AUTH password */
    char password[256];        /* "" : no AUTH (the data nodes'; sentinels are asked without) */
    int db;                    /* SELECT db when != 0 */
    char prefix[64];           /* key prefix, default "m0:" */
    long retention;            /* MAXLEN ~ of a channel's stream */
    long backlog;              /* MAXLEN ~ of the all-channel log */
    int min_replicas;          /* a publish is acknowledged once WAIT counts this many replicas (0: no WAIT) */
    int replicas;              /* nats://: the stream's replicas (-1: 3, or 1 on a server without clustering) */
    const char *ca_certs;      /* TLS: --broker-ca-certs (NULL: the system's CAs) */
    const char *certfile;      /* TLS: --broker-certfile / --broker-keyfile (NULL: none) */
    const char *keyfile;
    char shown[400];           /* the URL with the password masked, for logs and /health */
};

/*
 * Parse a broker URL into cfg (prefix, retention, backlog, min_replicas and
 * the TLS files are left as they are):
 *   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] (port 6379; HOST may be "[v6addr]";
 *                                              USER: an ACL user, AUTH USER PASSWORD)
 *   rediss://...                               the same over TLS
 *   redis+sentinel://[:PASSWORD@]HOST[:PORT],HOST[:PORT],.../MASTER[/DB]
 *                                              sentinels (port 26379), the primary's name
 *   rediss+sentinel://...                      the same, every connection over TLS
 *   unix:///path/redis.sock[?db=N]
 *   nats://[[USER:]PASSWORD@]HOST[:PORT],...   NATS JetStream servers (port 4222; no path;
 *                                              USER:PASSWORD, or a token alone)
 * Returns M0_OK, or M0_ERR with a short reason in err (cap bytes). Pure.
 */
int m0_broker_parse_url(const char *url, struct m0_broker_cfg *cfg, char *err, size_t cap);

/* With cfg->broker set (already validated by m0_config_parse), fill a
 * process-wide struct m0_broker_cfg from cfg and point m0_broker at it;
 * without, leave m0_broker NULL. --broker-min-replicas unset (-1) is 1
 * with Sentinel, else 0. Returns M0_OK or M0_ERR. Pure: the engine's
 * own setup (TLS) is m0_broker_engine_init's (broker_engine.h). */
int m0_broker_configure(const struct m0_config *cfg);

/* The engine's flags fit the broker b (NULL: none): --broker-replicas only
 * with nats://, --broker-min-replicas only with Redis, --presence-events
 * not with NATS (its presence parts live in Redis); the TLS flags
 * (--broker-ca-certs, --broker-certfile, --broker-keyfile) only with a TLS
 * URL, a key only with a certificate. M0_OK, or M0_ERR with "--flag: why"
 * in err. Pure. */
int m0_broker_check_flags(const struct m0_broker_cfg *b, const struct m0_config *cfg, char *err, size_t cap);

/* A key prefix is 1..63 printable ASCII bytes without spaces. */
int m0_broker_prefix_ok(const char *prefix);

/* A publish key: 1..M0_BROKER_KEY_MAX bytes of printable ASCII (0x20..0x7e). */
int m0_broker_key_ok(const char *key, size_t klen);

/* The Lua scripts (their text is also in python/m0pub.py: a test keeps the
 * two equal). PUBLISH: KEYS counter, log, channel stream and optionally
 * the publish key's; ARGV channel, frame without the id line, retention,
 * backlog, channel ttl ms, key ttl ms; returns the id (with a fourth key
 * that holds an id: that id, and nothing is appended). REPLAY: KEYS counter, channel stream; ARGV the client's last id
 * ("N-0"), COUNT; returns {counter, 1 if that id is still retained else 0,
 * the entries after it newest first, at most COUNT}. */
extern const char M0_BROKER_PUBLISH_LUA[];
extern const char M0_BROKER_REPLAY_LUA[];
/* RAISE: KEYS counter; ARGV an id; sets the counter to that id when it is
 * below it and returns 1, else 0 (a worker's check when it reconnects). */
extern const char M0_BROKER_RAISE_LUA[];

/* The process's broker (NULL: none configured). Set once at start (by the
 * master before forking, or by `m0serve publish`) and never changed. */
extern const struct m0_broker_cfg *m0_broker;

#endif
