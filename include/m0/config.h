/*
 * config.h — struct m0_config and the CLI/environment parser.
 *
 * Every flag has an M0_* environment twin (--max-body ↔ M0_MAX_BODY);
 * the command line wins over the environment. Parsing never exits: it
 * returns M0_ERR with one line in err naming the offending flag, and the
 * caller exits 2.
 */
#ifndef M0_CONFIG_H
#define M0_CONFIG_H

#include "m0/types.h"
#include "m0/http.h"
#include "m0/proxy.h"

enum m0_protocol { M0_PROTO_AUTO, M0_PROTO_WSGI, M0_PROTO_ASGI };

/* One mount (DESIGN capabilities 8 and 10): an application (--mount, and
 * the positional MODULE as the root mount) or a directory (--static). */
enum m0_mount_kind { M0_MOUNT_APP, M0_MOUNT_STATIC };

struct m0_mount {
    const char *prefix;         /* normalised: "" (root) or "/seg[/seg...]", no trailing '/' */
    size_t prefix_len;
    const char *spec;           /* APP: MODULE[:ATTR]; STATIC: DIR */
    enum m0_mount_kind kind;
    int from_env;               /* given by M0_MOUNTS/M0_STATIC (argv replaces those) */
};

/* --max-workers when not given (or --workers, if more): SIGTTIN's ceiling,
 * which the metrics' shared blocks are sized for (metrics.h). */
#define M0_MAX_WORKERS_DEFAULT 64

/* Mounts per server, the root included (the target table's size). */
#define M0_MAX_MOUNTS 32

/* The separator of the M0_MOUNTS and M0_STATIC lists
 * ("/flask=flaskapp:app,/api=api.main:app"): a module spec holds a comma
 * only inside a factory call's parentheses ("api:make('a', 1)"), which
 * M0_MOUNTS skips; a directory whose path has one must be given with
 * --static. */
#define M0_MOUNT_LIST_SEP ','

/* --grant-cors-origin may repeat this often (M0_GRANT_CORS_ORIGINS lists
 * them, separated by M0_MOUNT_LIST_SEP: an origin holds no comma). */
#define M0_GRANT_MAX_ORIGINS 16

struct m0_grant_keys;
struct m0_tlsd;

/* --bind may be given this often (M0_BIND lists several, comma-separated). */
#define M0_MAX_BINDS 8

struct m0_config {
    const char *app;            /* MODULE[:ATTR] of the root mount, or NULL when no app is at "" */
    const char *bind;           /* the first of binds (after host/port folding): SERVER_NAME/PORT */
    const char *binds[M0_MAX_BINDS];   /* every --bind: [http://|https://]HOST:PORT or unix:PATH */
    unsigned nbinds;
    int binds_from_env;         /* binds came from M0_BIND (argv replaces them) */
    const char *host;           /* --host, default 127.0.0.1 */
    long port;                  /* --port, default 8000 */
    long workers;               /* processes, >= 1 */
    long max_workers;           /* --max-workers: SIGTTIN's ceiling (>= workers; 0 until parsed: 64 or workers) */
    long loops;                 /* --threads: event loops per worker process, >= 1 (> 1: free-threaded only) */
    long blocking_threads;      /* handler threads per loop (the elastic pool's floor); -1 until resolved */
    long blocking_threads_max;  /* the elastic pool's ceiling */
    double blocking_threads_idle; /* seconds an extra thread may idle before it retires */
    double request_timeout;     /* seconds; 0 = off */
    const char *app_dir;        /* put first on sys.path; default "." */
    enum m0_protocol protocol;
    int factory;                /* --factory: MODULE:ATTR names an application factory, called with no arguments */
    const char *asgi_loop;      /* --loop: auto | asyncio | uvloop */
    const char *lifespan;       /* --lifespan: auto | on | off */
    double lifespan_timeout;    /* seconds lifespan startup may take; 0 = no limit */
    double graceful_timeout;    /* seconds */
    double keepalive_timeout;   /* seconds an idle keep-alive connection lives */
    double header_timeout;      /* seconds to receive a complete request head */
    double body_timeout;        /* seconds a request body may go without progress */
    int access_log;             /* bool */
    const char *log_level;
    long backlog;               /* listen(2) backlog */
    int realtime;               /* --realtime: the bus, holds, /health */
    double heartbeat;           /* seconds between comment lines on idle held streams */
    long replay;                /* journaled events per channel for Last-Event-ID resume */
    uint64_t replay_bytes;      /* journal bytes per channel */
    uint64_t replay_total;      /* journal bytes per worker, all channels */
    uint64_t outbox_limit;      /* bytes queued for one held stream before it is closed */
    const char *broker;         /* --broker URL (NULL: the local bus only) */
    const char *broker_prefix;  /* key prefix in the broker */
    long broker_retention;      /* events kept per channel in the broker (resume) */
    long broker_backlog;        /* events kept in the broker's all-channel log (catch-up) */
    long broker_min_replicas;   /* WAIT for this many replicas per publish (-1: 1 with Sentinel, else 0) */
    long broker_replicas;       /* nats://: the stream's replicas (-1: 3, or 1 on a server without clustering) */
    const char *broker_ca_certs;   /* TLS to the broker: CA file (NULL: the system's) */
    const char *broker_certfile;   /* TLS client certificate and key (NULL: none) */
    const char *broker_keyfile;
    /* Occupancy and presence (issue 32, presence.h): join/leave events on
     * the channels these comma-separated prefixes start ("*": every one;
     * NULL: none), a leave sent once a sub has been gone this long. */
    const char *presence_events;      /* --presence-events PREFIXES */
    double presence_debounce;         /* --presence-debounce seconds */
    uint64_t ws_max_message;    /* bytes of one inbound WebSocket message (reassembled); over → close 1009 */
    const char *health_path;    /* answered in C; "" disables */
    int health_explicit;
    long max_connections;       /* connection slots per worker */
    struct m0_limits limits;
    struct m0_mount mounts[M0_MAX_MOUNTS];   /* every mount, the positional app first when given */
    unsigned nmounts;
    long static_max_age;        /* --static-max-age: Cache-Control max-age in seconds; -1: none sent */
    int static_index;           /* --static-index: a directory serves its index.html */
    int show_help, show_version;
    int workers_explicit;       /* --workers or M0_WORKERS was given */
    int threads_explicit;       /* --blocking-threads or M0_BLOCKING_THREADS was given */
    int bound_port;             /* set by the master after binding (port 0 resolved) */
    /* Production (deploy.md): proxies, worker lifecycle, process identity. */
    const char *forwarded_allow_ips;          /* as given; parsed into forwarded_trust */
    struct m0_proxy_trust forwarded_trust;
    long max_requests;          /* a worker that answered this many asks to be replaced; 0 = never */
    long max_requests_jitter;   /* plus a random 0..J per worker, so workers do not all go at once */
    long worker_max_rss;        /* MiB; a worker above it is replaced; 0 = no limit */
    const char *user, *group;   /* drop to these after binding (NULL: stay) */
    long umask;                 /* -1: keep the inherited umask */
    const char *pid_file;       /* the master's pid, written after binding */
    int reload;                 /* --reload: replace the workers when the app's Python files change */
    const char *access_log_format;            /* accesslog.h; NULL: the default line */
    const char *metrics_bind;   /* --metrics-bind HOST:PORT or unix:PATH; NULL: none */
    const char *metrics_path;   /* --metrics-path; NULL: /metrics on metrics_bind only; "": none on the main listener */
    int metrics_listener;       /* set by the master: the workers' listener index of metrics_bind, -1 */
    /* Signed stream grants (issue 18, grant.h): answered by the loop
     * (grant_hold.c); the keys re-read on SIGHUP (master.c). */
    const char *grant_key_file; /* --grant-key-file PATH */
    const char *grant_path;     /* normalised like a mount prefix: "" (root) or "/seg..."; NULL: off */
    const char *grant_cookie;   /* --grant-cookie NAME: a token may come in this cookie */
    const char *grant_cors_origins[M0_GRANT_MAX_ORIGINS];    /* serialized origins (RFC 6454 §6.2) */
    unsigned ngrant_cors_origins;
    int grant_cors_from_env;    /* the origins came from M0_GRANT_CORS_ORIGINS (argv replaces them) */
    const char *grant_inbound;  /* --grant-inbound PATH: where a granted socket's messages are POSTed */
    const char *grant_expire;   /* --grant-expire close|keep (NULL: close): a held stream ends at its grant's exp */
    double grant_refresh;       /* --grant-refresh S: the m0-refresh notice S seconds before exp (< 0: the
                                   default, M0_GRANT_REFRESH_DEFAULT; 0: no notice) */
    struct m0_grant_keys *grant_keys;   /* loaded by main from grant_key_file; NULL without one */
    unsigned grant_sign;        /* set by the master before each fork: the index of grant_keys the
                                   worker signs with at first (master_keys.c) */
    /* GRIP (issue 19, docs/realtime.md "GRIP"): the shared key, read by
     * main from grip_key_file before the fork, and the control listener. */
    const char *grip_key_file;  /* --grip-key-file PATH; implies --realtime */
    unsigned char *grip_key;    /* its first line's bytes; NULL: GRIP off */
    size_t grip_key_len;
    const char *grip_control;   /* --grip-control HOST:PORT or unix:PATH; NULL: none */
    int grip_listener;          /* set by the master: the workers' listener index of grip_control, -1 */
    uint64_t grip_max_body;     /* --grip-max-body: the control port's request body limit (default 1 MiB) */
    const char *ws_over_http;   /* --ws-over-http PREFIX (normalised like a mount prefix): WebSocket
                                   handshakes under it to a WSGI mount go over HTTP (wshold_woh.h);
                                   implies --realtime; NULL: off */
    /* The local publish socket (pubsock.h, pubpath.h): NULL the default
     * path with --realtime, "" none. */
    const char *publish_socket; /* --publish-socket PATH */
    int publish_listener;       /* set by the master: the workers' listener index of the publish socket, -1 */
    /* TLS (issue 31, tls_server.h): the files, read by main before the
     * first fork and again on SIGHUP (master_tls.c), and the listeners
     * that speak it. */
    const char *certfile;       /* --certfile: the certificate chain (PEM); NULL: no TLS */
    const char *keyfile;        /* --keyfile: its key (PEM; NULL: in certfile) */
    const char *keyfile_password_file;   /* the key's password: the file's first line */
    const char *ca_certs;       /* --ca-certs: CAs that sign client certificates (PEM) */
    long cert_reqs;             /* --cert-reqs: 0 none, 1 optional, 2 required (gunicorn's numbers) */
    const char *ciphers;        /* --ciphers: TLS 1.2's cipher list (OpenSSL syntax); NULL: the default */
    double tls_ticket_rotate;   /* --tls-ticket-rotate: seconds a session-ticket key encrypts; 0: no tickets */
    struct m0_tlsd *tls;        /* made by main from the files; NULL: no TLS */
    uint32_t tls_listeners;     /* set by the master: bit i, the workers' listener i speaks TLS */
};

/* A listening address split up; the caller owns it (host and path point
 * into its own text, or at a string literal). */
struct m0_bind_parts {
    char text[512];             /* a copy of the address, cut up */
    const char *host;           /* TCP: the host without brackets; NULL for unix */
    int port;                   /* TCP: 0..65535; 0 for unix */
    const char *path;           /* unix: the socket path; NULL for TCP */
    int scheme;                 /* -1 none given, 0 "http://", 1 "https://" (TCP only) */
};

/* Split cfg->bind into a host and port, or a unix path, in *out (which
 * nothing else shares: two calls never overwrite each other's result).
 * Returns M0_OK, or M0_ERR with a message in err (cap bytes) naming --bind
 * when the address is malformed or longer than out->text. */
int m0_config_bind_parts(const struct m0_config *cfg, struct m0_bind_parts *out, char *err, size_t cap);
/* The same for any address a listener flag takes (flag names it in err):
 * [http://|https://]HOST:PORT, [HOST]:PORT for IPv6, or unix:PATH (no
 * scheme: a unix socket speaks what its bare form says, docs/deploy.md). */
int m0_config_addr_parts(const char *addr, const char *flag, struct m0_bind_parts *out, char *err, size_t cap);
/* addr without its "http://" or "https://" (*scheme 0 or 1; -1 and addr
 * itself when it has none). */
const char *m0_config_addr_scheme(const char *addr, int *scheme);

#endif
