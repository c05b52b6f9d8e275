/*
 * publish_cli.c — `m0serve publish CHANNEL DATA [--event NAME] [--key KEY]`:
 * publish one event through the broker from a shell (cron, deploy hooks),
 * framed, limited and numbered exactly as m0pub.publish does; --key makes
 * a retry safe (the broker answers a repeated key with the first id).
 *
 * The broker comes from --broker or M0_BROKER (and --broker-prefix,
 * --broker-retention, --broker-backlog or their M0_* twins, which must
 * match the servers'). DATA "-" reads the data from standard input.
 * Prints the event's id on stdout. Exit 0; 1 when the broker cannot be
 * reached or refuses the event (not published); 2 for a bad argument (one
 * line naming it); 3 when the event was sent and no answer came (it may
 * have been published: retry with the same --key).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/broker_pub.h"
#include "m0/buf.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/publish_cli.h"
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
            "[--broker URL])\n",
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
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    const char *event = NULL, *key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *flags[] = {"--event", "--broker", "--broker-prefix", "--broker-retention", "--broker-backlog",
                               "--key"};
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
        case 1: cfg.broker = v; break;
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
        }
    }
    if (npos != 2)
        return usage_error("%s", npos == 0 ? "CHANNEL and DATA are required" : "DATA is required");
    const char *why = m0_sse_channel_error(pos[0], strlen(pos[0]));
    if (why != NULL)
        return usage_error("CHANNEL: %s", why);
    if (cfg.broker == NULL)
        return usage_error("%s", "no broker: give --broker URL or set M0_BROKER");
    struct m0_broker_cfg b;
    char err[512];
    if (m0_broker_parse_url(cfg.broker, &b, err, sizeof err) != M0_OK) {
        fprintf(stderr, "m0serve publish: error: --broker: invalid value '%s' (%s)\n", cfg.broker, err);
        return M0_EXIT_USAGE;
    }
    if (!m0_broker_prefix_ok(cfg.broker_prefix))
        return usage_error("--broker-prefix: invalid value '%s'", cfg.broker_prefix);
    m0_broker_configure(&cfg);

    struct m0_buf data = {0};
    if (strcmp(pos[1], "-") == 0) {
        char chunk[8192];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0 && data.len <= M0_BUS_MAX_PAYLOAD)
            m0_buf_append(&data, chunk, n);
    } else {
        m0_buf_puts(&data, pos[1]);
    }
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
