/*
 * cli.c — argv and M0_* environment parsing into struct m0_config.
 *
 * One table describes every option once: its flag, its variable, its type
 * and where it lands. A bad value or an unknown flag produces one line
 * naming it; main() prints it and exits 2 (EX_USAGE-like, as gunicorn and
 * uvicorn do).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "m0/accesslog.h"
#include "m0/broker_url.h"
#include "m0/cli_hint.h"
#include "m0/cli.h"
#include "m0/config.h"
#include "m0/grant.h"
#include "m0/log.h"
#include "m0/metrics_text.h"
#include "m0/tls_server.h"

/* T_CHOICE: a string that must be one of the '|'-separated words of the
 * option's metavar; T_MOUNT: a repeatable PREFIX=VALUE (handled apart). */
enum opt_type { T_STR, T_STR0, T_LONG, T_SECONDS, T_BYTES, T_BOOL, T_PROTOCOL, T_LOGLEVEL, T_CHOICE, T_MOUNT, T_PROXY,
                T_UMASK, T_ACCESSFMT, T_PREFIX, T_ORIGIN, T_BIND, T_CERTREQS };

struct opt {
    const char *flag;
    const char *env;
    enum opt_type type;
    size_t off;
    long min, max;
    const char *metavar;
    const char *help;
};

#define O(f) offsetof(struct m0_config, f)
#define STR_(x) #x
#define STR(x) STR_(x)

static const struct opt opts[] = {
    {"--bind", "M0_BIND", T_BIND, O(bind), 0, 0, "ADDR", "HOST:PORT or unix:PATH to listen on (default 127.0.0.1:8000); repeatable (M0_BIND lists several, comma-separated); with --certfile a HOST:PORT speaks TLS, http://HOST:PORT stays plain beside it, https://HOST:PORT insists on TLS"},
    {"--host", "M0_HOST", T_STR, O(host), 0, 0, "HOST", "interface to bind (default 127.0.0.1)"},
    {"--port", "M0_PORT", T_LONG, O(port), 0, 65535, "PORT", "TCP port to bind (default 8000; 0 picks a free one)"},
    {"--workers", "M0_WORKERS", T_LONG, O(workers), 1, 1024, "N", "worker processes (default 1)"},
    {"--max-workers", "M0_MAX_WORKERS", T_LONG, O(max_workers), 1, 1024, "N", "the most workers SIGTTIN adds up to, and what the metrics are sized for (default " STR(M0_MAX_WORKERS_DEFAULT) ", or --workers if more)"},
    {"--threads", "M0_THREADS", T_LONG, O(loops), 1, M0_MAX_LOOPS, "N", "event loops per worker process, each on its own thread with its own connections, pool and executors (free-threaded CPython only; default 1)"},
    {"--blocking-threads", "M0_BLOCKING_THREADS", T_LONG, O(blocking_threads), 0, 1024, "N", "handler threads per worker so slow views never stall the loop (default min(cores, 8); 0 runs views on the loop thread)"},
    {"--blocking-threads-max", "M0_BLOCKING_THREADS_MAX", T_LONG, O(blocking_threads_max), 1, 1024, "N", "the most handler threads the elastic pool grows to (default 40; ignored when --blocking-threads pins the size)"},
    {"--blocking-threads-idle-timeout", "M0_BLOCKING_THREADS_IDLE_TIMEOUT", T_SECONDS, O(blocking_threads_idle), 0, 0, "S", "an extra handler thread idle for S seconds retires (default 30)"},
    {"--request-timeout", "M0_REQUEST_TIMEOUT", T_SECONDS, O(request_timeout), 0, 0, "S", "503 for a request still queued after S seconds; log views running longer (default 0: off)"},
    {"--app-dir", "M0_APP_DIR", T_STR, O(app_dir), 0, 0, "DIR", "directory put first on sys.path (default .)"},
    {"--protocol", "M0_PROTOCOL", T_PROTOCOL, O(protocol), 0, 0, "P", "auto|wsgi|asgi (default auto: detect from the callable)"},
    {"--factory", "M0_FACTORY", T_BOOL, O(factory), 0, 0, NULL, "MODULE:ATTR is an application factory: call ATTR with no arguments, serve what it returns (uvicorn's --factory; MODULE:ATTR() or MODULE:ATTR('x', n=1) calls one with literal arguments, as gunicorn)"},
    {"--loop", "M0_LOOP", T_CHOICE, O(asgi_loop), 0, 0, "auto|asyncio|uvloop", "ASGI: the asyncio event loop of the executor (default auto: uvloop when importable)"},
    {"--lifespan", "M0_LIFESPAN", T_CHOICE, O(lifespan), 0, 0, "auto|on|off", "ASGI lifespan protocol (default auto: used when the app speaks it)"},
    {"--lifespan-timeout", "M0_LIFESPAN_TIMEOUT", T_SECONDS, O(lifespan_timeout), 0, 0, "S", "ASGI: a lifespan startup not complete after S seconds fails the boot (default 60; 0: wait forever)"},
    {"--graceful-timeout", "M0_GRACEFUL_TIMEOUT", T_SECONDS, O(graceful_timeout), 0, 0, "S", "seconds to finish in-flight requests on SIGTERM (default 30)"},
    {"--max-body", "M0_MAX_BODY", T_BYTES, O(limits.max_body), 0, 0, "BYTES", "largest request body accepted, else 413 (default 1073741824)"},
    {"--timeout-keep-alive", "M0_TIMEOUT_KEEP_ALIVE", T_SECONDS, O(keepalive_timeout), 0, 0, "S", "close idle keep-alive connections after S seconds (default 5)"},
    {"--header-timeout", "M0_HEADER_TIMEOUT", T_SECONDS, O(header_timeout), 0, 0, "S", "answer 408 when a request head takes longer (default 10)"},
    {"--body-timeout", "M0_BODY_TIMEOUT", T_SECONDS, O(body_timeout), 0, 0, "S", "answer 408 when a request body makes no progress for S seconds (default 30)"},
    {"--max-header-size", "M0_MAX_HEADER_SIZE", T_BYTES, O(limits.max_header_bytes), 0, 0, "BYTES", "request header section limit, else 431 (default 16384)"},
    {"--max-headers", "M0_MAX_HEADERS", T_LONG, O(limits.max_headers), 1, 10000, "N", "request header field limit, else 431 (default 100)"},
    {"--backlog", "M0_BACKLOG", T_LONG, O(backlog), 1, 65535, "N", "listen backlog (default 2048)"},
    {"--max-connections", "M0_MAX_CONNECTIONS", T_LONG, O(max_connections), 16, 1000000, "N", "connection slots per worker (default 16384)"},
    {"--realtime", "M0_REALTIME", T_BOOL, O(realtime), 0, 0, NULL, "enable held SSE streams (M0-Hold), the broadcast bus for m0pub.publish and /health"},
    {"--heartbeat", "M0_HEARTBEAT", T_SECONDS, O(heartbeat), 0, 0, "S", "comment line on idle held streams every S seconds (default 15)"},
    {"--replay", "M0_REPLAY", T_LONG, O(replay), 0, 1000000, "N", "events kept per channel for Last-Event-ID resume (default 100)"},
    {"--replay-bytes", "M0_REPLAY_BYTES", T_BYTES, O(replay_bytes), 0, 0, "BYTES", "journal bytes kept per channel (default 1m)"},
    {"--replay-total", "M0_REPLAY_TOTAL", T_BYTES, O(replay_total), 0, 0, "BYTES", "journal bytes kept per worker across all channels (default 64m)"},
    {"--ws-max-message", "M0_WS_MAX_MESSAGE", T_BYTES, O(ws_max_message), 0, 0, "BYTES", "largest inbound WebSocket message; larger ones close the socket with 1009 (default 1m)"},
    {"--outbox-limit", "M0_OUTBOX_LIMIT", T_BYTES, O(outbox_limit), 0, 0, "BYTES", "bytes queued for a slow held stream before it is closed (default 256k)"},
    {"--broker", "M0_BROKER", T_STR, O(broker), 0, 0, "URL", "publish and deliver through Redis: redis://[:PASSWORD@]HOST:PORT[/DB], rediss://... (TLS), redis+sentinel://HOST:PORT,.../MASTER[/DB] (rediss+sentinel:// with TLS) or unix:///path/redis.sock; or NATS JetStream: nats://HOST:PORT[,HOST:PORT...] (default: the local bus only)"},
    {"--broker-prefix", "M0_BROKER_PREFIX", T_STR, O(broker_prefix), 0, 0, "P", "key prefix in the broker (default m0:)"},
    {"--broker-retention", "M0_BROKER_RETENTION", T_LONG, O(broker_retention), 1, 10000000, "N", "events the broker keeps per channel for Last-Event-ID resume on any host (default 1000)"},
    {"--broker-backlog", "M0_BROKER_BACKLOG", T_LONG, O(broker_backlog), 100, 100000000, "N", "events the broker keeps in its all-channel log, how far a reconnecting worker catches up (default 100000)"},
    {"--broker-min-replicas", "M0_BROKER_MIN_REPLICAS", T_LONG, O(broker_min_replicas), 0, 100, "N", "a publish is acknowledged once WAIT counts N replicas holding it, else PublishOutcomeUnknown (default 1 with redis+sentinel://, else 0)"},
    {"--broker-replicas", "M0_BROKER_REPLICAS", T_LONG, O(broker_replicas), 1, 5, "N", "nats://: the stream's replicas over the cluster (default 3, or 1 on a server without clustering)"},
    {"--broker-ca-certs", "M0_BROKER_CA_CERTS", T_STR, O(broker_ca_certs), 0, 0, "FILE", "rediss://: verify the broker's certificate against the CAs in FILE (PEM; default: the system's CAs)"},
    {"--broker-certfile", "M0_BROKER_CERTFILE", T_STR, O(broker_certfile), 0, 0, "FILE", "rediss://: present this client certificate (PEM chain)"},
    {"--broker-keyfile", "M0_BROKER_KEYFILE", T_STR, O(broker_keyfile), 0, 0, "FILE", "rediss://: the client certificate's key (PEM; default: in --broker-certfile)"},
    {"--presence-events", "M0_PRESENCE_EVENTS", T_STR, O(presence_events), 0, 0, "PREFIXES", "publish a join/leave event on a channel when a sub's first connection is held on it and when its last one goes; on the channels these comma-separated prefixes start ('*': every channel; default: none)"},
    {"--presence-debounce", "M0_PRESENCE_DEBOUNCE", T_SECONDS, O(presence_debounce), 0, 0, "S", "a leave is sent once the sub has been gone S seconds: a reconnect sooner sends neither (default 5)"},
    {"--publish-socket", "M0_PUBLISH_SOCKET", T_STR0, O(publish_socket), 0, 0, "PATH", "with --realtime: the unix socket where local processes publish (m0serve publish, m0pub.publish outside a worker; POST /publish); default $XDG_RUNTIME_DIR/m0serve/publish.sock (docs/realtime.md); '' disables"},
    {"--health-path", "M0_HEALTH_PATH", T_STR0, O(health_path), 0, 0, "PATH", "path answered in C with worker health as JSON (default /health with --realtime; '' disables)"},
    {"--metrics-bind", "M0_METRICS_BIND", T_STR, O(metrics_bind), 0, 0, "ADDR", "HOST:PORT or unix:PATH of a listener that answers Prometheus scrapes (any path but --metrics-path gets 404; default: none)"},
    {"--metrics-path", "M0_METRICS_PATH", T_STR0, O(metrics_path), 0, 0, "PATH", "Prometheus metrics, summed over every worker, answered in C (default /metrics on --metrics-bind; on the main listener only for peers in --forwarded-allow-ips: a proxy is one, so it must refuse the path itself)"},
    {"--mount", "M0_MOUNTS", T_MOUNT, M0_MOUNT_APP, 0, 0, "PREFIX=SPEC", "serve the application SPEC (MODULE[:ATTR]) under PREFIX; repeatable; the positional MODULE is PREFIX /; M0_MOUNTS lists several, comma-separated"},
    {"--static", "M0_STATIC", T_MOUNT, M0_MOUNT_STATIC, 0, 0, "PREFIX=DIR", "serve the files of DIR under PREFIX from the event loop (sendfile, no Python); repeatable; M0_STATIC lists several, comma-separated"},
    {"--static-max-age", "M0_STATIC_MAX_AGE", T_LONG, O(static_max_age), 0, 315360000, "S", "static files: Cache-Control: public, max-age=S (default: no Cache-Control)"},
    {"--static-index", "M0_STATIC_INDEX", T_BOOL, O(static_index), 0, 0, NULL, "static files: a directory serves its index.html (default off: 404)"},
    {"--access-log", "M0_ACCESS_LOG", T_BOOL, O(access_log), 0, 0, NULL, "log one line per request to stdout"},
    {"--access-log-format", "M0_ACCESS_LOG_FORMAT", T_ACCESSFMT, O(access_log_format), 0, 0, "FMT", "the --access-log line: gunicorn's %(h)s %(r)s %(s)s ... atoms, or 'json' (default: combined format plus the duration)"},
    {"--forwarded-allow-ips", "M0_FORWARDED_ALLOW_IPS", T_PROXY, O(forwarded_allow_ips), 0, 0, "LIST", "peers whose X-Forwarded-For/-Proto and Forwarded headers are believed: addresses, CIDRs, 'unix', '*' (default " M0_PROXY_DEFAULT ")"},
    {"--max-requests", "M0_MAX_REQUESTS", T_LONG, O(max_requests), 0, 1000000000, "N", "replace a worker after it answered N requests, gracefully (default 0: never)"},
    {"--max-requests-jitter", "M0_MAX_REQUESTS_JITTER", T_LONG, O(max_requests_jitter), 0, 1000000000, "J", "add a random 0..J to --max-requests per worker (default 0)"},
    {"--worker-max-rss", "M0_WORKER_MAX_RSS", T_LONG, O(worker_max_rss), 0, 1048576, "MB", "replace a worker whose resident memory exceeds MB MiB, gracefully (default 0: no limit)"},
    {"--user", "M0_USER", T_STR, O(user), 0, 0, "USER", "run as USER (name or uid) after binding; the master drops too"},
    {"--group", "M0_GROUP", T_STR, O(group), 0, 0, "GROUP", "run as GROUP (name or gid) after binding (default: USER's group)"},
    {"--umask", "M0_UMASK", T_UMASK, O(umask), 0, 0, "MODE", "octal file mode mask for the process, unix sockets included (e.g. 007)"},
    {"--pid", "M0_PID", T_STR, O(pid_file), 0, 0, "FILE", "write the master's pid to FILE (removed at exit)"},
    {"--reload", "M0_RELOAD", T_BOOL, O(reload), 0, 0, NULL, "development: replace the workers when a Python file of the app changes (inotify)"},
    {"--grip-key-file", "M0_GRIP_KEY_FILE", T_STR, O(grip_key_file), 0, 0, "FILE", "GRIP: the shared key (the file's first line; not readable by other users); Grip-* instructions are honoured, requests carry Grip-Sig; implies --realtime"},
    {"--grip-control", "M0_GRIP_CONTROL", T_STR, O(grip_control), 0, 0, "ADDR", "GRIP: HOST:PORT or unix:PATH answering EPCP POST /publish/ (Bearer key or JWT); needs --grip-key-file"},
    {"--grip-max-body", "M0_GRIP_MAX_BODY", T_BYTES, O(grip_max_body), 0, 0, "BYTES", "GRIP: the largest publish body the control port reads, else 413 before reading it (default 1m)"},
    {"--ws-over-http", "M0_WS_OVER_HTTP", T_PREFIX, O(ws_over_http), 0, 0, "PREFIX", "GRIP: WebSocket handshakes under PREFIX to a WSGI mount speak Pushpin's WebSocket-over-HTTP: their events are POSTed to the view (django-grip's WebSocketContext), the answers sent back; implies --realtime"},
    {"--grant-key-file", "M0_GRANT_KEY_FILE", T_STR, O(grant_key_file), 0, 0, "FILE", "signed stream grants: HMAC keys, one 'KID SECRET' a line, mode 600 (checked at start; exit 78 when refused)"},
    {"--grant-path", "M0_GRANT_PATH", T_PREFIX, O(grant_path), 0, 0, "PREFIX", "signed stream grants: PREFIX/sse and PREFIX/ws hold a grant's channels, no Python call; needs --grant-key-file; implies --realtime"},
    {"--grant-cookie", "M0_GRANT_COOKIE", T_STR, O(grant_cookie), 0, 0, "NAME", "signed stream grants: the token may also come in cookie NAME"},
    {"--grant-cors-origin", "M0_GRANT_CORS_ORIGINS", T_ORIGIN, O(grant_cors_origins), 0, 0, "ORIGIN", "signed stream grants: an origin (https://host[:port]) that may subscribe with credentials; repeatable; M0_GRANT_CORS_ORIGINS lists several, comma-separated"},
    {"--grant-inbound", "M0_GRANT_INBOUND", T_STR, O(grant_inbound), 0, 0, "PATH", "signed stream grants: POST a granted socket's messages to PATH (default: close 1008)"},
    {"--grant-expire", "M0_GRANT_EXPIRE", T_CHOICE, O(grant_expire), 0, 0, "close|keep", "signed stream grants: close a held stream at its grant's exp (default close; keep: it stays open)"},
    {"--grant-refresh", "M0_GRANT_REFRESH", T_SECONDS, O(grant_refresh), 0, 0, "S", "signed stream grants: send m0-refresh S seconds before exp (default 30, at most half the grant's remaining life; 0: none)"},
    {"--certfile", "M0_CERTFILE", T_STR, O(certfile), 0, 0, "FILE", "TLS: the server's certificate chain (PEM, the certificate first); the TCP --bind listeners speak TLS (uvicorn's --ssl-certfile, Granian's --ssl-certificate)"},
    {"--keyfile", "M0_KEYFILE", T_STR, O(keyfile), 0, 0, "FILE", "TLS: the certificate's private key (PEM; default: in --certfile; uvicorn's and Granian's --ssl-keyfile)"},
    {"--keyfile-password-file", "M0_KEYFILE_PASSWORD_FILE", T_STR, O(keyfile_password_file), 0, 0, "FILE", "TLS: the --keyfile's password is the first line of FILE"},
    {"--ca-certs", "M0_CA_CERTS", T_STR, O(ca_certs), 0, 0, "FILE", "TLS: the CAs (PEM) that sign the client certificates --cert-reqs asks for (mutual TLS)"},
    {"--cert-reqs", "M0_CERT_REQS", T_CERTREQS, O(cert_reqs), 0, 0, "none|optional|required", "TLS: client certificates: not asked (default), verified when sent, or required (gunicorn's 0|1|2 too); needs --ca-certs unless none"},
    {"--ciphers", "M0_CIPHERS", T_STR, O(ciphers), 0, 0, "LIST", "TLS 1.2's ciphers (OpenSSL syntax; default: ECDHE with AES-GCM or ChaCha20-Poly1305; TLS 1.3's are its own three)"},
    {"--tls-ticket-rotate", "M0_TLS_TICKET_ROTATE", T_SECONDS, O(tls_ticket_rotate), 0, 0, "S", "TLS: a new session-ticket key every S seconds, made by the master for every worker; a ticket resumes for 2*S (default 3600; 0: no tickets)"},
    {"--log-level", "M0_LOG_LEVEL", T_LOGLEVEL, O(log_level), 0, 0, "L", "debug|info|warning|error|critical (default info)"},
};

/* gunicorn's short flags for the options that mean the same here: -w 2,
 * -b HOST:PORT, -u/-g USER/GROUP, -p FILE, -m MODE (its umask). The value
 * follows, or is glued on ("-w2"). gunicorn's -t, -k, -c, -D mean something
 * m0serve does not have: cli_hint.c explains them instead. */
static const struct {
    char letter;
    const char *flag;
} shorts[] = {
    {'w', "--workers"}, {'b', "--bind"}, {'u', "--user"}, {'g', "--group"}, {'p', "--pid"}, {'m', "--umask"},
};

/* Other servers' spellings of the same options, accepted as they are:
 * uvicorn's and Granian's TLS flags (hypercorn and gunicorn share ours). */
static const struct {
    const char *alias, *flag;
} aliases[] = {
    {"--ssl-certfile", "--certfile"}, {"--ssl-certificate", "--certfile"}, {"--ssl-keyfile", "--keyfile"},
    {"--ssl-ca-certs", "--ca-certs"}, {"--ssl-ca", "--ca-certs"}, {"--ssl-cert-reqs", "--cert-reqs"},
    {"--ssl-ciphers", "--ciphers"},
};

static const struct opt *find_opt(const char *name, size_t n)
{
    for (size_t k = 0; k < M0_ARRAY_LEN(aliases); k++) {
        if (strlen(aliases[k].alias) == n && strncmp(aliases[k].alias, name, n) == 0) {
            name = aliases[k].flag;
            n = strlen(name);
        }
    }
    for (size_t k = 0; k < M0_ARRAY_LEN(opts); k++) {
        if (strlen(opts[k].flag) == n && strncmp(opts[k].flag, name, n) == 0)
            return &opts[k];
    }
    return NULL;
}

/* "unrecognized option 'X'" plus what a gunicorn/uvicorn/Granian flag is
 * here, or the nearest flag (cli_hint.h). */
static void unknown_flag(const char *a, size_t n, char *err, size_t cap)
{
    const char *known[M0_ARRAY_LEN(opts) + 2];
    for (size_t k = 0; k < M0_ARRAY_LEN(opts); k++)
        known[k] = opts[k].flag;
    known[M0_ARRAY_LEN(opts)] = "--help";
    known[M0_ARRAY_LEN(opts) + 1] = "--version";
    const char *hint, *near;
    m0_cli_explain(a, n, known, M0_ARRAY_LEN(known), &hint, &near);
    if (hint != NULL)
        snprintf(err, cap, "m0serve: error: unrecognized option '%.*s'; %s", (int)n, a, hint);
    else if (near != NULL)
        snprintf(err, cap, "m0serve: error: unrecognized option '%.*s'; did you mean '%s'?", (int)n, a, near);
    else
        snprintf(err, cap, "m0serve: error: unrecognized option '%.*s' (see --help)", (int)n, a);
}

/* The mounts' strings (normalised prefixes, copied specs): a bump arena
 * that lives as long as the process's one configuration, reset by
 * m0_config_defaults. Per process, read-only once parsed (boot). */
static char mount_text[M0_MAX_MOUNTS * 2 * 512 + 8192];
static size_t mount_text_used;

static const char *mount_strdup(const char *s, size_t n)
{
    if (n + 1 > sizeof mount_text - mount_text_used)
        return NULL;
    char *p = mount_text + mount_text_used;
    memcpy(p, s, n);
    p[n] = '\0';
    mount_text_used += n + 1;
    return p;
}

void m0_config_defaults(struct m0_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    mount_text_used = 0;
    cfg->static_max_age = -1;
    cfg->host = "127.0.0.1";
    cfg->port = 8000;
    cfg->workers = 1;
    cfg->loops = 1;
    cfg->blocking_threads = -1;
    cfg->blocking_threads_max = 40;
    cfg->blocking_threads_idle = 30;
    cfg->app_dir = ".";
    cfg->protocol = M0_PROTO_AUTO;
    cfg->graceful_timeout = 30;
    cfg->asgi_loop = "auto";
    cfg->lifespan = "auto";
    cfg->lifespan_timeout = 60;
    cfg->keepalive_timeout = 5;
    cfg->header_timeout = 10;
    cfg->body_timeout = 30;
    cfg->log_level = "info";
    cfg->heartbeat = 15;
    cfg->presence_debounce = 5;
    cfg->grant_refresh = -1;             /* M0_GRANT_REFRESH_DEFAULT unless given */
    cfg->replay = 100;
    cfg->replay_bytes = 1024 * 1024;
    cfg->replay_total = 64 * 1024 * 1024;
    cfg->outbox_limit = 256 * 1024;
    cfg->broker_prefix = M0_BROKER_PREFIX_DEFAULT;
    cfg->broker_retention = M0_BROKER_RETENTION_DEFAULT;
    cfg->broker_backlog = M0_BROKER_BACKLOG_DEFAULT;
    cfg->broker_min_replicas = -1;
    cfg->broker_replicas = -1;
    cfg->ws_max_message = 1024 * 1024;
    cfg->backlog = 2048;
    cfg->max_connections = 16384;
    cfg->limits.max_target = 8192;
    cfg->limits.max_header_bytes = 16384;
    cfg->limits.max_headers = 100;
    cfg->limits.max_body = 1073741824ull;
    cfg->limits.body_mem = 256 * 1024;
    cfg->forwarded_allow_ips = M0_PROXY_DEFAULT;
    char err[128];
    m0_proxy_parse(&cfg->forwarded_trust, M0_PROXY_DEFAULT, err, sizeof err);
    cfg->umask = -1;
    cfg->metrics_listener = -1;
    cfg->grip_listener = -1;
    cfg->grip_max_body = 1024 * 1024;   /* Pushpin's publishes are an item of a few hundred KiB */
    cfg->publish_listener = -1;
    cfg->tls_ticket_rotate = 3600;
}

void m0_config_resolve(struct m0_config *cfg)
{
    /* /health is the realtime mode's, unless asked for: a plain WSGI site
     * keeps its own /health route. */
    if (!cfg->health_explicit)
        cfg->health_path = cfg->realtime ? "/health" : "";
    if (cfg->blocking_threads < 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        cfg->blocking_threads = cores < 1 ? 1 : cores > 8 ? 8 : cores;
    }
    if (cfg->threads_explicit || cfg->blocking_threads_max < cfg->blocking_threads)
        cfg->blocking_threads_max = cfg->blocking_threads;
}

void m0_config_usage(void)
{
    printf("usage: m0serve [MODULE[:ATTR]] [--mount PREFIX=SPEC]... [--static PREFIX=DIR]... [options]\n"
           "       m0serve publish CHANNEL DATA [--event NAME] [--key KEY] [--broker URL | --publish-socket PATH]\n"
           "                                    (DATA '-': stdin; without a broker: the server's publish socket)\n\n"
           "Serve WSGI (PEP 3333) and ASGI applications over HTTP/1.1 with prefork workers.\n"
           "A bare MODULE tries MODULE.asgi:application, MODULE.wsgi:application,\n"
           "MODULE:application, MODULE:app and MODULE.main:app, in that order (a\n"
           "candidate whose module does not exist is skipped). MODULE is the root mount;\n"
           "other mounts answer under their prefix (the longest one that matches on a\n"
           "segment boundary wins); a path no mount claims is answered 404.\n\noptions:\n");
    for (size_t i = 0; i < M0_ARRAY_LEN(opts); i++) {
        char left[64], sh[8] = "";
        for (size_t k = 0; k < M0_ARRAY_LEN(shorts); k++) {
            if (strcmp(shorts[k].flag, opts[i].flag) == 0)
                snprintf(sh, sizeof sh, "-%c, ", shorts[k].letter);
        }
        snprintf(left, sizeof left, "%s%s%s%s", sh, opts[i].flag, opts[i].metavar ? " " : "",
                 opts[i].metavar ? opts[i].metavar : "");
        printf("  %-26s %s [%s]\n", left, opts[i].help, opts[i].env);
    }
    printf("  %-26s %s\n  %-26s %s\n", "-h, --help", "show this help and exit",
           "-v, --version", "print the version and exit");
}

static int parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return M0_ERR;
    *out = v;
    return M0_OK;
}

static int parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)s[0]))
        return M0_ERR;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return M0_ERR;
    unsigned long long mul = 1;
    if (*end != '\0') {
        switch (tolower((unsigned char)*end)) {
        case 'k': mul = 1024ull; break;
        case 'm': mul = 1024ull * 1024; break;
        case 'g': mul = 1024ull * 1024 * 1024; break;
        default: return M0_ERR;
        }
        end++;
        if (*end == 'b' || *end == 'B')
            end++;
        if (*end != '\0')
            return M0_ERR;
    }
    if (v > UINT64_MAX / mul)
        return M0_ERR;
    *out = v * mul;
    return M0_OK;
}

/* RFC 3986 pchar without '%' (prefixes are compared with the raw path,
 * so an encoded prefix could never match as written), ',' (the list
 * separator) and '=' (the PREFIX=SPEC separator). */
static int prefix_char(unsigned char ch)
{
    return isalnum(ch) || (ch != '\0' && strchr("-._~!$&'()*+;:@", ch) != NULL);
}

/* Normalise prefix (n bytes) into out: "" or "/seg/seg". M0_OK or M0_ERR. */
static int normalise_prefix(const char *p, size_t n, char *out, size_t cap, size_t *outlen)
{
    if (n == 0 || p[0] != '/')
        return M0_ERR;
    while (n > 1 && p[n - 1] == '/')
        n--;                        /* "/app/" is "/app"; "/" is the root */
    if (n == 1) {
        *outlen = 0;
        out[0] = '\0';
        return M0_OK;
    }
    if (n >= cap)
        return M0_ERR;
    size_t seg = 0;                 /* start of the current segment */
    for (size_t i = 1; i <= n; i++) {
        if (i == n || p[i] == '/') {
            size_t len = i - seg - 1;
            const char *sp = p + seg + 1;
            if (len == 0 || (len == 1 && sp[0] == '.') || (len == 2 && sp[0] == '.' && sp[1] == '.'))
                return M0_ERR;
            seg = i;
            continue;
        }
        if (!prefix_char((unsigned char)p[i]))
            return M0_ERR;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    *outlen = n;
    return M0_OK;
}

/* Add one PREFIX=SPEC (n bytes at item) of kind to cfg's mounts. */
static int add_mount(struct m0_config *cfg, enum m0_mount_kind kind, const char *item, size_t n, int from_env,
                     const char *who, char *err, size_t cap)
{
    const char *eq = memchr(item, '=', n);
    char prefix[512];
    size_t plen;
    const char *what = kind == M0_MOUNT_APP ? "PREFIX=MODULE[:ATTR]" : "PREFIX=DIR";
    if (eq == NULL || eq + 1 == item + n) {
        snprintf(err, cap, "m0serve: error: %s: invalid value '%.*s' (want %s)", who, (int)n, item, what);
        return M0_ERR;
    }
    if (normalise_prefix(item, (size_t)(eq - item), prefix, sizeof prefix, &plen) != M0_OK) {
        snprintf(err, cap, "m0serve: error: %s: invalid prefix '%.*s' (want /path: no empty, '.' or '..' "
                 "segment, no '%%', ',' or '=')", who, (int)(eq - item), item);
        return M0_ERR;
    }
    for (unsigned i = 0; i < cfg->nmounts; i++) {
        if (cfg->mounts[i].prefix_len == plen && memcmp(cfg->mounts[i].prefix, prefix, plen) == 0) {
            snprintf(err, cap, "m0serve: error: %s: '%s' is mounted twice", who, plen ? prefix : "/");
            return M0_ERR;
        }
    }
    if (cfg->nmounts == M0_MAX_MOUNTS) {
        snprintf(err, cap, "m0serve: error: %s: more than %d mounts", who, M0_MAX_MOUNTS);
        return M0_ERR;
    }
    struct m0_mount *m = &cfg->mounts[cfg->nmounts];
    m->prefix = mount_strdup(prefix, plen);
    m->prefix_len = plen;
    m->spec = mount_strdup(eq + 1, (size_t)(item + n - eq - 1));
    m->kind = kind;
    m->from_env = from_env;
    if (m->prefix == NULL || m->spec == NULL) {
        snprintf(err, cap, "m0serve: error: %s: the mounts are too long", who);
        return M0_ERR;
    }
    cfg->nmounts++;
    return M0_OK;
}

/* The end of the list item at p: the next separator, or NULL. In an
 * application list a separator inside a factory call's parentheses or
 * quotes ("/a=api:make('x,y', n=1),/b=b") belongs to the item. */
static const char *list_item_end(const char *p, enum m0_mount_kind kind)
{
    if (kind != M0_MOUNT_APP)
        return strchr(p, M0_MOUNT_LIST_SEP);
    int depth = 0;
    char quote = 0;
    for (; *p; p++) {
        if (quote != 0) {
            if (*p == '\\' && p[1] != '\0')
                p++;
            else if (*p == quote)
                quote = 0;
        } else if (*p == '\'' || *p == '"') {
            quote = *p;
        } else if (*p == '(' || *p == '[' || *p == '{') {
            depth++;
        } else if ((*p == ')' || *p == ']' || *p == '}') && depth > 0) {
            depth--;
        } else if (*p == M0_MOUNT_LIST_SEP && depth == 0) {
            return p;
        }
    }
    return NULL;
}

/* --mount/--static (one item) or M0_MOUNTS/M0_STATIC (a list). The first
 * item of a kind on the command line drops that kind's environment items. */
static int apply_mounts(struct m0_config *cfg, enum m0_mount_kind kind, const char *val, int from_env,
                        const char *who, char *err, size_t cap)
{
    if (!from_env) {
        unsigned k = 0;
        for (unsigned i = 0; i < cfg->nmounts; i++) {
            if (!(cfg->mounts[i].from_env && cfg->mounts[i].kind == kind))
                cfg->mounts[k++] = cfg->mounts[i];
        }
        cfg->nmounts = k;
        return add_mount(cfg, kind, val, strlen(val), 0, who, err, cap);
    }
    const char *p = val;
    for (;;) {
        const char *end = list_item_end(p, kind);
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n > 0 && isspace((unsigned char)*p)) {
            p++;
            n--;
        }
        while (n > 0 && isspace((unsigned char)p[n - 1]))
            n--;
        if (n > 0 && add_mount(cfg, kind, p, n, 1, who, err, cap) != M0_OK)
            return M0_ERR;
        if (end == NULL)
            return M0_OK;
        p = end + 1;
    }
}

/* The next item of a repeatable flag's value: the whole value given on
 * the command line, or one M0_MOUNT_LIST_SEP-separated item of the
 * environment's list; without surrounding spaces, n bytes (not
 * terminated). *next moves past it, NULL after the last. */
static const char *list_item(const char **next, int from_env, size_t *n)
{
    const char *p = *next;
    const char *end = from_env ? strchr(p, M0_MOUNT_LIST_SEP) : NULL;
    size_t len = end ? (size_t)(end - p) : strlen(p);
    while (len > 0 && isspace((unsigned char)*p)) {
        p++;
        len--;
    }
    while (len > 0 && isspace((unsigned char)p[len - 1]))
        len--;
    *n = len;
    *next = end ? end + 1 : NULL;
    return p;
}

/* --grant-cors-origin (one origin) or M0_GRANT_CORS_ORIGINS (a list); the
 * first one on the command line drops the environment's. */
static int add_origins(struct m0_config *cfg, const char *val, int from_env, const char *who, char *err, size_t cap)
{
    if (!from_env && cfg->grant_cors_from_env) {
        cfg->ngrant_cors_origins = 0;
        cfg->grant_cors_from_env = 0;
    }
    cfg->grant_cors_from_env = from_env;
    const char *next = val;
    while (next != NULL) {
        size_t n;
        const char *p = list_item(&next, from_env, &n);
        if (n > 0 || !from_env) {
            const char *why = m0_grant_origin_error(p, n);
            if (why == NULL && cfg->ngrant_cors_origins == M0_GRANT_MAX_ORIGINS)
                why = "more than 16 origins";
            const char *copy = why == NULL ? mount_strdup(p, n) : NULL;
            if (why == NULL && copy == NULL)
                why = "too long";
            if (why != NULL) {
                snprintf(err, cap, "m0serve: error: %s: invalid value '%.*s' (%s)", who, (int)n, p, why);
                return M0_ERR;
            }
            cfg->grant_cors_origins[cfg->ngrant_cors_origins++] = copy;
        }
    }
    return M0_OK;
}

/* --bind (one address, repeatable: gunicorn listens on every -b) or
 * M0_BIND (a list); the first one on the command line drops the
 * environment's. Each is checked here (m0_config_addr_parts). */
static int add_binds(struct m0_config *cfg, const char *val, int from_env, const char *who, char *err, size_t cap)
{
    if (!from_env && cfg->binds_from_env)
        cfg->nbinds = 0;
    cfg->binds_from_env = from_env;
    const char *next = val;
    while (next != NULL) {
        size_t n;
        const char *p = list_item(&next, from_env, &n);
        if (n > 0 || !from_env) {
            const char *copy = mount_strdup(p, n);
            struct m0_bind_parts b;
            if (copy == NULL || cfg->nbinds == M0_MAX_BINDS) {
                snprintf(err, cap, "m0serve: error: %s: more than %d addresses", who, M0_MAX_BINDS);
                return M0_ERR;
            }
            if (m0_config_addr_parts(copy, who, &b, err, cap) != M0_OK)
                return M0_ERR;
            for (unsigned i = 0; i < cfg->nbinds; i++) {
                if (strcmp(cfg->binds[i], copy) == 0) {
                    snprintf(err, cap, "m0serve: error: %s: '%s' given twice", who, copy);
                    return M0_ERR;
                }
            }
            cfg->binds[cfg->nbinds++] = copy;
            cfg->bind = cfg->binds[0];
        }
    }
    return M0_OK;
}

static int apply(struct m0_config *cfg, const struct opt *o, const char *val, const char *who,
                 char *err, size_t cap)
{
    if (o->type == T_MOUNT)
        return apply_mounts(cfg, (enum m0_mount_kind)o->off, val, who == o->env, who, err, cap);
    char *dst = (char *)cfg + o->off;
    switch (o->type) {
    case T_STR:
        if (val[0] == '\0')
            goto bad;
        *(const char **)dst = val;
        break;
    case T_STR0:             /* may be empty */
        *(const char **)dst = val;
        break;
    case T_LONG: {
        long v;
        if (parse_long(val, &v) != M0_OK || v < o->min || v > o->max)
            goto bad;
        if (o->off == O(limits.max_headers))
            cfg->limits.max_headers = (unsigned)v;
        else
            *(long *)dst = v;
        break;
    }
    case T_SECONDS: {
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (errno != 0 || end == val || *end != '\0' || !isfinite(v) || v < 0 || v > 86400 * 365)
            goto bad;
        *(double *)dst = v;
        break;
    }
    case T_BYTES: {
        uint64_t v;
        if (parse_bytes(val, &v) != M0_OK)
            goto bad;
        if (o->off == O(limits.max_header_bytes)) {
            if (v < 256 || v > 1024 * 1024)
                goto bad;
            cfg->limits.max_header_bytes = (size_t)v;
        } else if ((o->off == O(ws_max_message) || o->off == O(grip_max_body)) && v == 0) {
            goto bad;            /* a socket must be able to receive something; a publish has a body */
        } else {
            *(uint64_t *)dst = v;
        }
        break;
    }
    case T_BOOL:
        if (strcmp(val, "1") == 0 || strcasecmp(val, "true") == 0 || strcasecmp(val, "yes") == 0)
            *(int *)dst = 1;
        else if (strcmp(val, "0") == 0 || strcasecmp(val, "false") == 0 || strcasecmp(val, "no") == 0)
            *(int *)dst = 0;
        else
            goto bad;
        break;
    case T_PROTOCOL:
        if (strcmp(val, "auto") == 0)
            cfg->protocol = M0_PROTO_AUTO;
        else if (strcmp(val, "wsgi") == 0)
            cfg->protocol = M0_PROTO_WSGI;
        else if (strcmp(val, "asgi") == 0)
            cfg->protocol = M0_PROTO_ASGI;
        else
            goto bad;
        break;
    case T_CHOICE: {
        size_t n = strlen(val);
        const char *p = o->metavar;
        int found = 0;
        while (*p && !found) {
            size_t w = strcspn(p, "|");
            found = w == n && strncmp(p, val, n) == 0;
            p += w + (p[w] == '|');
        }
        if (!found)
            goto bad;
        *(const char **)dst = val;
        break;
    }
    case T_MOUNT:
        break;                  /* handled above */
    case T_PROXY:
        if (m0_proxy_parse(&cfg->forwarded_trust, val, err, cap) != M0_OK)
            return M0_ERR;     /* err names the element */
        *(const char **)dst = val;
        break;
    case T_UMASK: {
        /* Octal, as gunicorn's --umask and umask(1): "007", "0o007", "0". */
        const char *v = val;
        if (v[0] == '0' && (v[1] == 'o' || v[1] == 'O'))
            v += 2;
        char *end;
        errno = 0;
        long m = *v ? strtol(v, &end, 8) : -1;
        if (errno != 0 || *v == '\0' || *end != '\0' || m < 0 || m > 0777)
            goto bad;
        *(long *)dst = m;
        break;
    }
    case T_PREFIX: {            /* normalised as a mount prefix is */
        char norm[512];
        size_t plen;
        if (normalise_prefix(val, strlen(val), norm, sizeof norm, &plen) != M0_OK ||
            (*(const char **)dst = mount_strdup(norm, plen)) == NULL) {
            snprintf(err, cap, "m0serve: error: %s: invalid value '%s' (want /path: no empty, '.' or '..' segment, "
                     "no '%%', ',' or '=')", who, val);
            return M0_ERR;
        }
        break;
    }
    case T_ORIGIN:
        return add_origins(cfg, val, who == o->env, who, err, cap);
    case T_BIND:
        return add_binds(cfg, val, who == o->env, who, err, cap);
    case T_CERTREQS:
        /* Python's ssl.CERT_NONE/OPTIONAL/REQUIRED, by name or number
         * (gunicorn's and uvicorn's --cert-reqs take the number). */
        if (strcmp(val, "none") == 0 || strcmp(val, "0") == 0)
            cfg->cert_reqs = 0;
        else if (strcmp(val, "optional") == 0 || strcmp(val, "1") == 0)
            cfg->cert_reqs = 1;
        else if (strcmp(val, "required") == 0 || strcmp(val, "2") == 0)
            cfg->cert_reqs = 2;
        else
            goto bad;
        break;
    case T_ACCESSFMT:
        if (m0_access_compile(val, err, cap) != M0_OK)
            return M0_ERR;
        *(const char **)dst = val;
        break;
    case T_LOGLEVEL: {
        enum m0_log_level lvl;
        if (m0_log_parse_level(val, &lvl) != M0_OK)
            goto bad;
        *(const char **)dst = val;
        m0_log_threshold = lvl;
        break;
    }
    }
    if (o->off == O(workers))
        cfg->workers_explicit = 1;
    if (o->off == O(blocking_threads))
        cfg->threads_explicit = 1;
    if (o->off == O(health_path))
        cfg->health_explicit = 1;
    return M0_OK;
bad:
    snprintf(err, cap, "m0serve: error: %s: invalid value '%s'", who, val);
    return M0_ERR;
}

int m0_config_parse(struct m0_config *cfg, int argc, char **argv, char *err, size_t cap)
{
    int host_port_given = 0;

    for (size_t i = 0; i < M0_ARRAY_LEN(opts); i++) {
        const char *v = getenv(opts[i].env);
        if (v == NULL)
            continue;
        if (apply(cfg, &opts[i], v, opts[i].env, err, cap) != M0_OK)
            return M0_ERR;
        if (opts[i].off == O(host) || opts[i].off == O(port))
            host_port_given = 1;
    }
    const char *app_env = getenv("M0_APP");
    if (app_env != NULL && app_env[0] != '\0')
        cfg->app = app_env;

    const char *positional = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cfg->show_help = 1;
            return M0_OK;
        }
        if (strcmp(a, "--version") == 0 || strcmp(a, "-v") == 0) {
            cfg->show_version = 1;
            return M0_OK;
        }
        if (strcmp(a, "--") == 0) {
            if (i + 1 < argc && positional == NULL)
                positional = argv[++i];
            continue;
        }
        if (a[0] != '-' || a[1] == '\0') {
            if (positional != NULL) {
                snprintf(err, cap, "m0serve: error: unexpected argument '%s' (the app is already '%s')", a, positional);
                return M0_ERR;
            }
            positional = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        const struct opt *o = NULL;
        if (a[1] != '-') {
            /* A short flag: -w 2 or -w2 (the value glued on, as argparse). */
            for (size_t k = 0; k < M0_ARRAY_LEN(shorts) && o == NULL; k++) {
                if (shorts[k].letter == a[1])
                    o = find_opt(shorts[k].flag, strlen(shorts[k].flag));
            }
            if (o == NULL) {
                unknown_flag(a, 2, err, cap);
                return M0_ERR;
            }
            eq = a[2] != '\0' ? a + 1 : NULL;    /* the value starts at eq + 1 */
        } else {
            o = find_opt(a, nlen);
        }
        if (o == NULL) {
            unknown_flag(a, nlen, err, cap);
            return M0_ERR;
        }
        const char *val;
        if (o->type == T_BOOL && eq == NULL) {
            val = "1";
        } else if (eq != NULL) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            snprintf(err, cap, "m0serve: error: %s: expected a value", o->flag);
            return M0_ERR;
        }
        if (apply(cfg, o, val, o->flag, err, cap) != M0_OK)
            return M0_ERR;
        if (o->off == O(host) || o->off == O(port))
            host_port_given = 1;
    }
    if (positional != NULL)
        cfg->app = positional;
    if (cfg->app != NULL) {
        /* The positional application is the root mount, first in the list. */
        for (unsigned i = 0; i < cfg->nmounts; i++) {
            if (cfg->mounts[i].prefix_len == 0) {
                snprintf(err, cap, "m0serve: error: %s: '/' is mounted twice (MODULE is the root mount)",
                         cfg->mounts[i].kind == M0_MOUNT_APP ? "--mount" : "--static");
                return M0_ERR;
            }
        }
        if (cfg->nmounts == M0_MAX_MOUNTS) {
            snprintf(err, cap, "m0serve: error: --mount: more than %d mounts", M0_MAX_MOUNTS);
            return M0_ERR;
        }
        memmove(&cfg->mounts[1], &cfg->mounts[0], cfg->nmounts * sizeof cfg->mounts[0]);
        cfg->mounts[0] = (struct m0_mount){.prefix = "", .prefix_len = 0, .spec = cfg->app, .kind = M0_MOUNT_APP};
        cfg->nmounts++;
    } else {
        for (unsigned i = 0; i < cfg->nmounts; i++) {
            if (cfg->mounts[i].prefix_len == 0 && cfg->mounts[i].kind == M0_MOUNT_APP)
                cfg->app = cfg->mounts[i].spec;      /* --mount /=SPEC names the root app */
        }
    }
    if (cfg->nmounts == 0) {
        snprintf(err, cap, "m0serve: error: MODULE[:ATTR]: the application is required (or --mount/--static; see --help)");
        return M0_ERR;
    }
    if (cfg->max_workers == 0)
        cfg->max_workers = cfg->workers > M0_MAX_WORKERS_DEFAULT ? cfg->workers : M0_MAX_WORKERS_DEFAULT;
    else if (cfg->max_workers < cfg->workers) {
        snprintf(err, cap, "m0serve: error: --max-workers: %ld is fewer than --workers %ld", cfg->max_workers,
                 cfg->workers);
        return M0_ERR;
    }
    if (cfg->bind != NULL && host_port_given) {
        snprintf(err, cap, "m0serve: error: --bind: cannot be combined with --host/--port");
        return M0_ERR;
    }
    if (cfg->bind == NULL) {
        static char folded[300];
        int ipv6 = strchr(cfg->host, ':') != NULL;
        snprintf(folded, sizeof folded, ipv6 ? "[%s]:%ld" : "%s:%ld", cfg->host, cfg->port);
        cfg->bind = cfg->binds[0] = folded;
        cfg->nbinds = 1;
    }
    if (m0_tlsd_check_flags(cfg, err, cap) != M0_OK)
        return M0_ERR;
    if (cfg->broker != NULL) {
        struct m0_broker_cfg b;
        char why[160];
        if (m0_broker_parse_url(cfg->broker, &b, why, sizeof why) != M0_OK) {
            snprintf(err, cap, "m0serve: error: --broker: invalid value '%s' (%s)", cfg->broker, why);
            return M0_ERR;
        }
        if (m0_broker_check_flags(&b, cfg, why, sizeof why) != M0_OK) {
            snprintf(err, cap, "m0serve: error: %s", why);
            return M0_ERR;
        }
    } else if (m0_broker_check_flags(NULL, cfg, err, cap) != M0_OK) {
        char why[160];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, cap, "m0serve: error: %s", why);
        return M0_ERR;
    }
    if (!m0_broker_prefix_ok(cfg->broker_prefix)) {
        snprintf(err, cap, "m0serve: error: --broker-prefix: invalid value '%s' (1..63 printable bytes, no spaces)",
                 cfg->broker_prefix);
        return M0_ERR;
    }
    if (m0_metrics_check_flags(cfg, err, cap) != M0_OK)
        return M0_ERR;
    if (m0_grant_check_flags(cfg, err, cap) != M0_OK)
        return M0_ERR;
    if (cfg->grip_control != NULL && cfg->grip_key_file == NULL) {
        snprintf(err, cap, "m0serve: error: --grip-control: needs --grip-key-file (publishes are authenticated with the key)");
        return M0_ERR;
    }
    /* GRIP holds and grants are held streams: either flag implies
     * --realtime, as the realtime flags a user would not think to add. */
    if (cfg->grip_key_file != NULL || cfg->grant_path != NULL || cfg->ws_over_http != NULL)
        cfg->realtime = 1;
    if (cfg->presence_events != NULL && cfg->presence_events[0] != '\0')
        cfg->realtime = 1;           /* join/leave are events on held streams' channels */
    if (cfg->publish_socket != NULL && cfg->publish_socket[0] != '\0' && cfg->publish_socket[0] != '/') {
        snprintf(err, cap, "m0serve: error: --publish-socket: invalid value '%s' (an absolute path, or '' for none)",
                 cfg->publish_socket);
        return M0_ERR;
    }
    struct m0_bind_parts parts;
    if (m0_config_bind_parts(cfg, &parts, err, cap) != M0_OK)
        return M0_ERR;
    return M0_OK;
}
