/*
 * publish_cli.c — `m0serve publish CHANNEL DATA [--event NAME] [--key KEY]`:
 * publish one event from a shell (cron, deploy hooks), framed, limited and
 * numbered exactly as m0pub.publish does; --key makes a retry safe (the
 * broker answers a repeated key with the first id).
 *
 * Where it goes, the first that applies: --broker URL, or --publish-socket
 * PATH (the flags; both is an error); M0_BROKER; M0_PUBLISH_SOCKET; the
 * server's default publish socket (pubpath.h) when one is there. Through
 * the broker (and --broker-prefix, --broker-retention, --broker-backlog or
 * their M0_* twins, which must match the servers') it reaches every host;
 * through the socket (pubsock.h) the server on this host publishes it as a
 * view's publish. DATA "-" reads the data from standard input.
 * Prints the event's id on stdout. Exit 0; 1 when the event was not
 * published (the broker or the server could not be reached or refused
 * it); 2 for a bad argument (one line naming it), or when there is nowhere
 * to publish; 3 when the event was sent and no answer came (it may have
 * been published: retry with the same --key).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/broker_engine.h"
#include "m0/broker_pub.h"
#include "m0/buf.h"
#include "m0/bus.h"
#include "m0/cli.h"
#include "m0/config.h"
#include "m0/publish_cli.h"
#include "m0/pubpath.h"
#include "m0/pubreq.h"
#include "m0/sse.h"

#define EXIT_UNKNOWN 3             /* sent, not answered: the outcome is unknown */

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "m0serve publish: error: %s (usage: m0serve publish CHANNEL DATA [--event NAME] [--key KEY] "
            "[--broker URL | --publish-socket PATH])\n",
            line);
    return M0_EXIT_USAGE;
}

static int take_long(const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < lo || n > hi)
        return M0_ERR;
    (void)flag;
    *out = n;
    return M0_OK;
}

/* DATA: the argument, or standard input for "-" (read up to just past what
 * an event may hold: a larger one is refused by its size anyway). */
static int read_data(const char *arg, struct m0_buf *data)
{
    if (strcmp(arg, "-") != 0) {
        m0_buf_puts(data, arg);
        return M0_OK;
    }
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0 && data->len <= M0_BUS_MAX_PAYLOAD)
        m0_buf_append(data, chunk, n);
    return ferror(stdin) ? M0_ERR : M0_OK;
}

#define SOCK_TIMEOUT_S 5           /* the socket's answer, as m0pub.SOCKET_TIMEOUT */
#define ANSWER_MAX 65536           /* bytes of an answer read (the server's are short) */

/* Send all of req on fd. M0_OK, or M0_ERR (the server has not all of it:
 * it published nothing). */
static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return M0_ERR;
        p += w;
        n -= (size_t)w;
    }
    return M0_OK;
}

/* One publish over the socket at path: the exit status (the id printed).
 * quiet_draining: a "Draining" 503 sets *draining and prints nothing (the
 * caller tries again). */
static int sock_once(const char *path, const struct m0_buf *req, int quiet_draining, int *draining)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    *draining = 0;
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1 || connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
        int e = errno;
        fprintf(stderr, "m0serve publish: no server at unix:%s: %s%s; nothing was published\n", path, strerror(e),
                e == ECONNREFUSED ? " (a socket left by a server that is gone)" : "");
        if (fd != -1)
            close(fd);
        return M0_EXIT_FAIL;
    }
    struct timeval tv = {.tv_sec = SOCK_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (send_all(fd, req->data, req->len) != M0_OK) {
        fprintf(stderr, "m0serve publish: unix:%s: the request could not be sent (%s); nothing was published\n",
                path, strerror(errno));
        close(fd);
        return M0_EXIT_FAIL;
    }
    struct m0_buf in = {0};
    char chunk[8192];
    int timed_out = 0;
    while (in.len < ANSWER_MAX) {
        ssize_t k = recv(fd, chunk, sizeof chunk, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
        if (k <= 0)
            break;
        m0_buf_append(&in, chunk, (size_t)k);
    }
    close(fd);
    int status;
    const char *body;
    size_t blen;
    uint64_t id;
    if (m0_pubreq_answer(in.data ? in.data : "", in.len, &status, &body, &blen, &id) != M0_OK) {
        fprintf(stderr, "m0serve publish: unix:%s: %s after the event was sent: it may have been published "
                "(outcome unknown)\n", path, timed_out ? "no answer within 5 s" : "no complete answer");
        m0_buf_free(&in);
        return EXIT_UNKNOWN;
    }
    while (blen > 0 && (body[blen - 1] == '\n' || body[blen - 1] == '\r'))
        blen--;
    int rc;
    if (status == 200) {
        printf("%llu\n", (unsigned long long)id);
        rc = M0_EXIT_OK;
    } else {
        *draining = status == 503 && blen >= 8 && memcmp(body, "Draining", 8) == 0;
        if (!*draining || !quiet_draining)
            fprintf(stderr, "m0serve publish: %s%.*s\n", status == 400 || status == 413 ? "error: " : "", (int)blen,
                    body);
        rc = status == 400 || status == 413 ? M0_EXIT_USAGE : status == 504 ? EXIT_UNKNOWN : M0_EXIT_FAIL;
    }
    m0_buf_free(&in);
    return rc;
}

/* Publish through the server's publish socket at path (pubsock.h). */
static int publish_sock(const char *path, const char *channel, const char *event, const char *key,
                        const struct m0_buf *data)
{
    struct m0_buf body = {0}, req = {0};
    char err[256];
    if (m0_pubreq_encode(&body, channel, strlen(channel), data->data ? data->data : "", data->len, event, key, err,
                         sizeof err) != M0_OK) {
        m0_buf_free(&body);
        return usage_error("%s", err[0] == 'd' ? "DATA: not UTF-8 text (an event stream is UTF-8)" : err);
    }
    m0_buf_printf(&req, "POST /publish HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  "Content-Length: %zu\r\nConnection: close\r\n\r\n", body.len);
    m0_buf_append(&req, body.data, body.len);
    m0_buf_free(&body);
    int draining, rc = sock_once(path, &req, 1, &draining);
    if (draining)                 /* a worker being replaced published nothing: a new connection */
        rc = sock_once(path, &req, 0, &draining);
    m0_buf_free(&req);
    return rc;
}

int m0_publish_main(int argc, char **argv)
{
    struct m0_config cfg;
    m0_config_defaults(&cfg);
    const char *env;
    if ((env = getenv("M0_BROKER")) != NULL && env[0])
        cfg.broker = env;
    if ((env = getenv("M0_BROKER_PREFIX")) != NULL && env[0])
        cfg.broker_prefix = env;
    if ((env = getenv("M0_BROKER_RETENTION")) != NULL &&
        take_long("M0_BROKER_RETENTION", env, 1, 10000000, &cfg.broker_retention) != M0_OK)
        return usage_error("M0_BROKER_RETENTION: invalid value '%s'", env);
    if ((env = getenv("M0_BROKER_BACKLOG")) != NULL &&
        take_long("M0_BROKER_BACKLOG", env, 100, 100000000, &cfg.broker_backlog) != M0_OK)
        return usage_error("M0_BROKER_BACKLOG: invalid value '%s'", env);
    if ((env = getenv("M0_BROKER_MIN_REPLICAS")) != NULL && env[0] &&
        take_long("M0_BROKER_MIN_REPLICAS", env, 0, 100, &cfg.broker_min_replicas) != M0_OK)
        return usage_error("M0_BROKER_MIN_REPLICAS: invalid value '%s'", env);
    if ((env = getenv("M0_BROKER_REPLICAS")) != NULL && env[0] &&
        take_long("M0_BROKER_REPLICAS", env, 1, 5, &cfg.broker_replicas) != M0_OK)
        return usage_error("M0_BROKER_REPLICAS: invalid value '%s'", env);
    if ((env = getenv("M0_BROKER_CA_CERTS")) != NULL && env[0])
        cfg.broker_ca_certs = env;
    if ((env = getenv("M0_BROKER_CERTFILE")) != NULL && env[0])
        cfg.broker_certfile = env;
    if ((env = getenv("M0_BROKER_KEYFILE")) != NULL && env[0])
        cfg.broker_keyfile = env;
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    const char *event = NULL, *key = NULL, *sock = NULL;
    int broker_flag = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *flags[] = {"--event", "--broker", "--broker-prefix", "--broker-retention", "--broker-backlog",
                               "--key", "--publish-socket", "--broker-min-replicas", "--broker-ca-certs",
                               "--broker-certfile", "--broker-keyfile", "--broker-replicas"};
        int k = -1;
        for (int f = 0; f < (int)M0_ARRAY_LEN(flags); f++) {
            size_t n = strlen(flags[f]);
            if (strncmp(a, flags[f], n) == 0 && (a[n] == '\0' || a[n] == '='))
                k = f;
        }
        if (k < 0) {
            if (a[0] == '-' && a[1] != '\0')
                return usage_error("unrecognized option '%s'", a);
            if (npos == 2)
                return usage_error("unexpected argument '%s'", a);
            pos[npos++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (v == NULL)
            return usage_error("%s: expected a value", a);
        long n;
        switch (k) {
        case 0:
            if (v[0] == '\0' || strpbrk(v, "\r\n") != NULL)
                return usage_error("--event: invalid value '%s' (one line, not empty)", v);
            event = v;
            break;
        case 1:
            cfg.broker = v;
            broker_flag = 1;
            break;
        case 2: cfg.broker_prefix = v; break;
        case 3:
            if (take_long(a, v, 1, 10000000, &n) != M0_OK)
                return usage_error("--broker-retention: invalid value '%s'", v);
            cfg.broker_retention = n;
            break;
        case 4:
            if (take_long(a, v, 100, 100000000, &n) != M0_OK)
                return usage_error("--broker-backlog: invalid value '%s'", v);
            cfg.broker_backlog = n;
            break;
        case 5:
            if (!m0_broker_key_ok(v, strlen(v)))
                return usage_error("--key: invalid value '%s' (1..%d printable ASCII bytes)", v, M0_BROKER_KEY_MAX);
            key = v;
            break;
        case 6:
            if (v[0] != '\0' && v[0] != '/')
                return usage_error("--publish-socket: invalid value '%s' (an absolute path)", v);
            sock = v;
            break;
        case 7:
            if (take_long(a, v, 0, 100, &n) != M0_OK)
                return usage_error("--broker-min-replicas: invalid value '%s'", v);
            cfg.broker_min_replicas = n;
            break;
        case 8: cfg.broker_ca_certs = v; break;
        case 9: cfg.broker_certfile = v; break;
        case 10: cfg.broker_keyfile = v; break;
        case 11:
            if (take_long(a, v, 1, 5, &n) != M0_OK)
                return usage_error("--broker-replicas: invalid value '%s'", v);
            cfg.broker_replicas = n;
            break;
        }
    }
    if (npos != 2)
        return usage_error("%s", npos == 0 ? "CHANNEL and DATA are required" : "DATA is required");
    const char *why = m0_sse_channel_error(pos[0], strlen(pos[0]));
    if (why != NULL)
        return usage_error("CHANNEL: %s", why);
    if (broker_flag && sock != NULL)
        return usage_error("%s", "give --broker or --publish-socket, not both");
    char dflt[M0_PUBPATH_MAX] = "";
    if (sock == NULL && cfg.broker == NULL) {
        sock = getenv("M0_PUBLISH_SOCKET");
        if (sock == NULL) {
            /* The default path, only when a server made it (pubpath.h). */
            struct stat st;
            if (m0_pubpath_default(dflt, sizeof dflt, getuid(), 1) == M0_OK && stat(dflt, &st) == 0)
                sock = dflt;
        }
    }
    if (sock != NULL && sock[0] != '\0' && !broker_flag) {
        char err[512];
        if (sock == dflt && m0_pubpath_dir_ok(dflt, getuid(), (gid_t)-1, 0, err, sizeof err) != M0_OK) {
            fprintf(stderr, "m0serve publish: the default publish socket is not used: %s (give --publish-socket "
                    "PATH)\n", err);
            return M0_EXIT_FAIL;
        }
        struct m0_buf data = {0};
        if (read_data(pos[1], &data) != M0_OK)
            return usage_error("%s", "DATA: standard input could not be read");
        int rc = publish_sock(sock, pos[0], event, key, &data);
        m0_buf_free(&data);
        return rc;
    }
    if (cfg.broker == NULL) {
        if (dflt[0] == '\0')
            m0_pubpath_default(dflt, sizeof dflt, getuid(), 1);
        return usage_error("no broker and no server: give --broker URL or set M0_BROKER, or run the server with "
                           "--realtime (its publish socket: %s) or give --publish-socket PATH", dflt);
    }
    struct m0_broker_cfg b;
    char err[512];
    if (m0_broker_parse_url(cfg.broker, &b, err, sizeof err) != M0_OK) {
        fprintf(stderr, "m0serve publish: error: --broker: invalid value '%s' (%s)\n", cfg.broker, err);
        return M0_EXIT_USAGE;
    }
    if (!m0_broker_prefix_ok(cfg.broker_prefix))
        return usage_error("--broker-prefix: invalid value '%s'", cfg.broker_prefix);
    if (m0_broker_check_flags(&b, &cfg, err, sizeof err) != M0_OK)
        return usage_error("%s", err);
    m0_broker_configure(&cfg);
    signal(SIGPIPE, SIG_IGN);          /* a broker that closes as we write: an error, not a death */
    if (m0_broker_engine_init(err, sizeof err) != M0_OK) {
        fprintf(stderr, "m0serve publish: error: --broker: %s\n", err);
        return M0_EXIT_USAGE;
    }

    struct m0_buf data = {0};
    if (read_data(pos[1], &data) != M0_OK)
        return usage_error("%s", "DATA: standard input could not be read");
    uint64_t id;
    int rc = m0_broker_publish(pos[0], strlen(pos[0]), event, data.data ? data.data : "", data.len, key,
                               key ? strlen(key) : 0, &id, err, sizeof err);
    m0_buf_free(&data);
    if (rc != M0_OK) {
        fprintf(stderr, "m0serve publish: %s\n", err);
        return rc == M0_BROKER_UNKNOWN ? EXIT_UNKNOWN : M0_EXIT_FAIL;
    }
    printf("%llu\n", (unsigned long long)id);
    return M0_EXIT_OK;
}
