/*
 * cli_hint.c — what to say about a flag m0serve does not know (see
 * cli_hint.h): what the flags of gunicorn, uvicorn and Granian that users
 * type by habit become here, or that m0serve does not do it; else the known
 * flag that is a slip of the keyboard away — and only when it means the
 * same thing: "--proxy-headers" is not a misspelt "--max-headers", nor
 * "--preload" a misspelt "--reload".
 */
#include <string.h>

#include "m0/cli_hint.h"
#include "m0/proxy.h"
#include "m0/types.h"

#define MAX_FLAG 64

/* Optimal string alignment distance between a (na) and b (nb), both at
 * most MAX_FLAG bytes: insertions, deletions, substitutions and swaps of
 * two neighbours cost one each. */
static size_t distance(const char *a, size_t na, const char *b, size_t nb)
{
    static const size_t W = MAX_FLAG + 1;
    size_t d[(MAX_FLAG + 1) * (MAX_FLAG + 1)];
    for (size_t i = 0; i <= na; i++)
        d[i * W] = i;
    for (size_t j = 0; j <= nb; j++)
        d[j] = j;
    for (size_t i = 1; i <= na; i++) {
        for (size_t j = 1; j <= nb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[(i - 1) * W + j] + 1;
            if (d[i * W + j - 1] + 1 < v)
                v = d[i * W + j - 1] + 1;
            if (d[(i - 1) * W + j - 1] + cost < v)
                v = d[(i - 1) * W + j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[(i - 2) * W + j - 2] + 1 < v)
                v = d[(i - 2) * W + j - 2] + 1;
            d[i * W + j] = v;
        }
    }
    return d[na * W + nb];
}

/* Is b a slip of a, word by word ('-' separates words, the leading dashes
 * are none)? The same number of words, each at most one edit away (two
 * for a word longer than five letters): "--acces-log" is "--access-log",
 * but "--proxy-headers" (proxy/max) is not "--max-headers" nor
 * "--root-path" (root/grant) "--grant-path". */
static int same_words(const char *a, size_t na, const char *b, size_t nb)
{
    while (na > 0 && *a == '-') {
        a++;
        na--;
    }
    while (nb > 0 && *b == '-') {
        b++;
        nb--;
    }
    for (;;) {
        const char *ea = memchr(a, '-', na), *eb = memchr(b, '-', nb);
        size_t wa = ea ? (size_t)(ea - a) : na, wb = eb ? (size_t)(eb - b) : nb;
        size_t longer = wa > wb ? wa : wb;
        if (distance(a, wa, b, wb) > (longer > 5 ? 2u : 1u))
            return 0;
        if ((ea == NULL) != (eb == NULL))
            return 0;
        if (ea == NULL)
            return 1;
        a += wa + 1;
        na -= wa + 1;
        b += wb + 1;
        nb -= wb + 1;
    }
}

/* m0_cli_nearest, and how many edits away it is in *edits (0 for a flag
 * given begins). */
static const char *nearest(const char *given, size_t len, const char *const *known, size_t n, size_t *edits)
{
    size_t letters = len;
    while (letters > 0 && given[len - letters] == '-')
        letters--;
    if (letters == 0 || len > MAX_FLAG)
        return NULL;
    const char *best = NULL;
    *edits = 0;
    if (letters >= 4) {
        for (size_t i = 0; i < n; i++) {
            size_t kn = strlen(known[i]);
            if (kn > len && strncmp(known[i], given, len) == 0 && (best == NULL || kn < strlen(best)))
                best = known[i];
        }
        if (best != NULL)
            return best;
    }
    size_t limit = letters / 3 > 1 ? letters / 3 : 1, bestd = limit + 1;
    for (size_t i = 0; i < n; i++) {
        size_t kn = strlen(known[i]);
        if (kn > MAX_FLAG)
            continue;
        size_t dd = distance(given, len, known[i], kn);
        /* One edit is a slip whatever it touches ("--accesslog"); more
         * must leave every word recognisable. */
        if (dd < bestd && (dd <= 1 || same_words(given, len, known[i], kn))) {
            bestd = dd;
            best = known[i];
        }
    }
    *edits = bestd;
    return best;
}

const char *m0_cli_nearest(const char *given, size_t len, const char *const *known, size_t n)
{
    size_t edits;
    return nearest(given, len, known, n, &edits);
}

#define TLS "m0serve's TLS flags are --certfile, --keyfile, --keyfile-password-file, --ca-certs, --cert-reqs, " \
            "--ciphers (TLS 1.2 and 1.3 only; docs/deploy.md)"
#define APP_DIR "did you mean '--app-dir'? (it puts DIR first on sys.path; m0serve does not change directory)"
#define LOGS "m0serve logs one format to stderr and the access log to stdout (--log-level, --access-log-format)"
#define STATSD "m0serve exports Prometheus metrics instead, summed over the workers: --metrics-bind HOST:PORT"
#define METRICS "did you mean '--metrics-bind HOST:PORT'? (Prometheus metrics, summed over the workers, answered in C)"
#define ENV_FILE "m0serve reads no env file: systemd's EnvironmentFile=, or 'set -a; . FILE; set +a' in the shell"
#define RELOAD "m0serve's --reload watches the directories of the application's modules under --app-dir " \
               "(inotify): it takes no paths, patterns or delay"
#define HTTP "m0serve speaks HTTP/1.1 with its own parser in C: there is nothing to choose (HTTP/2: nginx in front)"
#define WS "m0serve speaks WebSockets in C: there is nothing to choose (see --ws-max-message, --heartbeat)"
#define WS_PING "m0serve pings an idle WebSocket every --heartbeat seconds and closes it when a ping stays " \
                "unanswered for two"
#define INTERFACE "did you mean '--protocol'? (auto|wsgi|asgi; ASGI 2 is detected and wrapped; no RSGI)"
#define ROOT_PATH "m0serve sets root_path (SCRIPT_NAME) from a mount: --mount PREFIX=MODULE:ATTR, with the proxy " \
                  "passing the path unstripped"
#define PROXY_PROTO "m0serve does not speak the PROXY protocol: it believes X-Forwarded-For/-Proto and Forwarded " \
                    "from the peers in --forwarded-allow-ips"
#define NAME "m0serve does not set process titles (ps shows m0serve and its arguments)"

/* Flags of gunicorn (g), uvicorn (u) and Granian (G) that m0serve spells
 * differently or lacks. Ones m0serve spells the same (--workers, --bind,
 * --backlog, --loop, --lifespan, --blocking-threads, ...) are known flags
 * and never get here, nor do the TLS aliases (--ssl-certfile, ...: cli.c).
 * A flag ending in '*' is a prefix: "--ssl-*" is every other one of
 * uvicorn's and Granian's TLS flags. */
static const struct {
    const char *flag;
    const char *hint;
} foreign[] = {
    /* Processes and sockets. */
    {"--uds", "did you mean '--bind unix:PATH'?"},                                       /* u G */
    {"--fd", "m0serve serves the sockets systemd passes (socket activation: LISTEN_FDS) instead of --bind; "
             "not one descriptor by number (docs/deploy.md)"},                           /* u */
    {"--uds-permissions", "did you mean '--umask'? (--umask 007 makes a unix socket srwxrwx---)"}, /* G */
    {"--reuse-port", "m0serve always listens with one SO_REUSEPORT socket per worker"},  /* g */
    {"--worker-connections", "did you mean '--max-connections'? (connection slots per worker)"}, /* g */
    {"--limit-concurrency", "did you mean '--max-connections'? (connection slots per worker)"},  /* u */
    {"--runtime-threads", "did you mean '--threads'? (event loops per worker, on free-threaded CPython)"}, /* G */
    {"--preload", "m0serve has nothing to preload: the master never runs Python, each worker imports the "
                  "application after fork (and SIGHUP imports it afresh)"},              /* g */
    {"--worker-tmp-dir", "m0serve's workers keep no heartbeat file: the master pings them over a socket"}, /* g */
    {"--respawn-failed-workers", "m0serve always restarts a worker that dies (with a backoff when it dies young)"}, /* G */
    {"--workers-lifetime", "m0serve replaces a worker by requests answered (--max-requests) or memory "
                           "(--worker-max-rss), not by age"},                            /* G */
    {"--workers-max-rss", "did you mean '--worker-max-rss'? (MiB)"},                     /* G */
    {"--pid-file", "did you mean '--pid'?"},                                              /* G */
    {"-n", NAME}, {"--name", NAME}, {"--process-name", NAME},                              /* g, g, G */
    {"-e", "set the variable in m0serve's own environment (systemd's Environment=): the workers inherit it"}, /* g */
    {"--env", "set the variable in m0serve's own environment (systemd's Environment=): the workers inherit it"},
    {"--env-file", ENV_FILE}, {"--env-files", ENV_FILE},                                   /* u, G */
    {"-c", "m0serve reads no configuration file: flags and their M0_* environment variables (see --help)"}, /* g */
    {"--config", "m0serve reads no configuration file: flags and their M0_* environment variables (see --help)"},
    {"-D", "m0serve stays in the foreground: run it under systemd or another supervisor (see --pid)"}, /* g */
    {"--daemon", "m0serve stays in the foreground: run it under systemd or another supervisor (see --pid)"},
    {"--chdir", APP_DIR}, {"--working-dir", APP_DIR},                                      /* g, G */
    {"--pythonpath", "did you mean '--app-dir'? (or set PYTHONPATH)"},                    /* g */
    /* The application. */
    {"-k", "m0serve has one kind of worker: it detects WSGI or ASGI by itself (see --protocol)"}, /* g */
    {"--worker-class", "m0serve has one kind of worker: it detects WSGI or ASGI by itself (see --protocol)"},
    {"--interface", INTERFACE},                                                           /* u G */
    {"--asgi-loop", "did you mean '--loop'?"},                                            /* g */
    {"--asgi-lifespan", "did you mean '--lifespan'?"},                                    /* g */
    {"--root-path", ROOT_PATH}, {"--url-path-prefix", ROOT_PATH},                          /* g u, G */
    {"--paste", "m0serve loads MODULE:ATTR: for a PasteDeploy app, a module that calls paste.deploy.loadapp()"},
    {"--paster", "m0serve loads MODULE:ATTR: for a PasteDeploy app, a module that calls paste.deploy.loadapp()"},
    {"--check-config", "start m0serve: a bad flag exits 2, an application that cannot be imported exits 1"}, /* g */
    {"--static-path-mount", "did you mean '--static PREFIX=DIR'?"},                       /* G */
    {"--static-path-route", "did you mean '--static PREFIX=DIR'?"},                       /* G */
    {"--static-path-expires", "did you mean '--static-max-age'?"},                        /* G */
    {"--reload-*", RELOAD},                                              /* u: -dir -include ...; G: -paths ...; g */
    /* Timeouts and limits. */
    {"-t", "m0serve has no worker timeout (gunicorn's restarts a silent worker): see --request-timeout"}, /* g */
    {"--timeout", "m0serve has no worker timeout (gunicorn's restarts a silent worker): see --request-timeout"},
    {"--keep-alive", "did you mean '--timeout-keep-alive'?"},                             /* g */
    {"--timeout-graceful-shutdown", "did you mean '--graceful-timeout'?"},                /* u */
    {"--workers-kill-timeout", "did you mean '--graceful-timeout'? (after it, SIGKILL)"}, /* G */
    {"--http1-header-read-timeout", "did you mean '--header-timeout'? (in seconds; Granian's is in milliseconds)"},
    {"--limit-max-requests", "did you mean '--max-requests'?"},                           /* u */
    {"--limit-max-requests-jitter", "did you mean '--max-requests-jitter'?"},             /* u */
    {"--limit-request-line", "m0serve counts the request line in --max-header-size (a target over 8 KiB gets 414)"},
    {"--limit-request-fields", "did you mean '--max-headers'?"},                          /* g */
    {"--limit-request-field_size", "did you mean '--max-header-size'?"},                  /* g */
    {"--limit-request-field-size", "did you mean '--max-header-size'?"},
    {"--h11-max-incomplete-event-size", "did you mean '--max-header-size'?"},             /* u */
    /* HTTP, WebSockets, proxies, TLS. */
    {"--http", HTTP}, {"--http-protocols", HTTP}, {"--http2-*", HTTP},                     /* u G, g, g G */
    {"--ws", WS}, {"--no-ws", WS},                                                         /* u G, G */
    {"--ws-max-size", "did you mean '--ws-max-message'?"},                                /* u */
    {"--ws-ping-interval", WS_PING}, {"--ws-ping-timeout", WS_PING},                       /* u */
    {"--ws-per-message-deflate", "m0serve does not compress WebSocket messages (permessage-deflate)"}, /* u */
    {"--proxy-headers", "m0serve always believes X-Forwarded-For/-Proto and Forwarded from the peers in "
                        "--forwarded-allow-ips (default " M0_PROXY_DEFAULT ")"},         /* u */
    {"--no-proxy-headers", "to believe no proxy's headers: --forwarded-allow-ips ''"},    /* u */
    {"--proxy-protocol", PROXY_PROTO}, {"--proxy-allow-from", PROXY_PROTO},                /* g */
    {"--header", "m0serve adds no configured response header: set it in the application or in nginx (add_header)"},
    {"--ssl-keyfile-password", "did you mean '--keyfile-password-file'? (the password is read from a file, "
                               "never the command line)"},                               /* u G */
    {"--ssl-version", "m0serve speaks TLS 1.2 and 1.3 only, whatever the client offers"}, /* u g */
    {"--ssl-*", TLS},               /* u G: the ones not spelled as aliases (cli.c) */
    {"--do-handshake-on-connect", "m0serve's handshake runs on the event loop, bounded by --header-timeout"}, /* g */
    /* Logs and metrics. */
    {"--access-logfile", "did you mean '--access-log'? (it logs to stdout)"},             /* g */
    {"--access-logformat", "did you mean '--access-log-format'?"},                        /* g */
    {"--access-log-fmt", "did you mean '--access-log-format'?"},                          /* G */
    {"--no-access-log", "the access log is off unless --access-log"},                     /* u G */
    {"--error-logfile", "m0serve logs to stderr"}, {"--log-file", "m0serve logs to stderr"}, /* g */
    {"--log-config", LOGS}, {"--log-config-json", LOGS}, {"--logger-class", LOGS},         /* g u G */
    {"--log-syslog", "m0serve logs to stderr: under systemd, journald collects it"},      /* g */
    {"--capture-output", "the application's stdout and stderr already go to m0serve's"},  /* g */
    {"--statsd-host", STATSD}, {"--statsd-prefix", STATSD}, {"--dogstatsd-tags", STATSD}, /* g */
    {"--metrics", METRICS}, {"--metrics-address", METRICS}, {"--metrics-port", METRICS},   /* G */
};

/* The hint of the flag of foreign[] that given is, or (slips: 1) is one
 * edit away from, given and it at least 6 letters long; NULL if none. */
static const char *foreign_hint(const char *given, size_t len, int slips)
{
    for (size_t i = 0; i < M0_ARRAY_LEN(foreign); i++) {
        const char *f = foreign[i].flag;
        size_t fn = strlen(f);
        int hit;
        if (f[fn - 1] == '*')
            hit = !slips && len >= fn && strncmp(f, given, fn - 1) == 0;
        else if (!slips)
            hit = fn == len && strncmp(f, given, len) == 0;
        else
            hit = fn >= 8 && len >= 8 && len <= MAX_FLAG && distance(given, len, f, fn) <= 1;
        if (hit)
            return foreign[i].hint;
    }
    return NULL;
}

void m0_cli_explain(const char *given, size_t len, const char *const *known, size_t n, const char **hint,
                    const char **near)
{
    size_t edits = 0;
    *near = NULL;
    if ((*hint = foreign_hint(given, len, 0)) != NULL)
        return;
    if (len > 2 && given[0] == '-' && given[1] == '-')
        *near = nearest(given, len, known, n, &edits);
    /* "--prelaod" is gunicorn's --preload mistyped before it is two edits
     * from "--reload"; a slip of a known flag wins a tie. */
    if (*near == NULL || edits > 1) {
        const char *slip = foreign_hint(given, len, 1);
        if (slip != NULL) {
            *hint = slip;
            *near = NULL;
        }
    }
}
