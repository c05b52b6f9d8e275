/*
 * metrics_text.c — the Prometheus exposition (see metrics_text.h).
 *
 * Names follow Prometheus's conventions: the m0serve_ prefix, _total on
 * counters, base units (_seconds, _bytes) in the name. Every label takes a
 * value from a closed set: mounts (the configured prefixes), methods,
 * status classes, exit causes, process roles. The two formats differ only
 * in where _total goes (OpenMetrics names the counter family without it),
 * in build_info's type (info) and in the closing "# EOF".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "m0/config.h"
#include "m0/metrics_text.h"

const char *const m0_mx_method_names[M0_MX_METHODS] = {"GET",     "HEAD",  "POST",  "PUT",   "DELETE",
                                                       "CONNECT", "OPTIONS", "TRACE", "PATCH", "other"};

static const char *const class_names[M0_MX_CLASSES] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
static const char *const exit_causes[] = {"clean", "error", "signal", "boot_failure", "abandoned"};
static const uint64_t bucket_us[M0_MX_NBUCKETS - 1] = M0_MX_BUCKETS_US;

unsigned m0_mx_method_index(const char *method)
{
    for (unsigned i = 0; method != NULL && i < M0_MX_METHODS - 1; i++) {
        if (strcmp(method, m0_mx_method_names[i]) == 0)
            return i;
    }
    return M0_MX_METHODS - 1;
}

unsigned m0_mx_bucket(uint64_t us)
{
    unsigned i = 0;
    while (i < M0_MX_NBUCKETS - 1 && us > bucket_us[i])
        i++;
    return i;
}

/* ------------------------------------------------------------ writing */

/* A label value (text format §"Comments, help text, and type information"):
 * backslash, double quote and line feed escaped. */
static void label_value(struct m0_buf *b, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\\')
            m0_buf_puts(b, "\\\\");
        else if (*p == '"')
            m0_buf_puts(b, "\\\"");
        else if (*p == '\n')
            m0_buf_puts(b, "\\n");
        else
            m0_buf_append(b, p, 1);
    }
}

enum kind { COUNTER, GAUGE, HISTOGRAM, INFO };

/* HELP and TYPE of a family. name is the family's base: a counter's
 * samples add _total, and 0.0.4 names the family with it too. */
static void family(struct m0_buf *b, int om, const char *name, enum kind k, const char *help)
{
    static const char *const types[] = {"counter", "gauge", "histogram", "info"};
    const char *suffix = "";
    if (!om && k == COUNTER)
        suffix = "_total";
    else if (!om && k == INFO)
        suffix = "_info";
    const char *type = !om && k == INFO ? "gauge" : types[k];
    m0_buf_printf(b, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, suffix, help, name, suffix, type);
}

static void scalar(struct m0_buf *b, int om, const char *name, enum kind k, const char *help, uint64_t v)
{
    family(b, om, name, k, help);
    m0_buf_printf(b, "%s%s %llu\n", name, k == COUNTER ? "_total" : "", (unsigned long long)v);
}

static void requests(struct m0_buf *b, int om, const struct m0_mx_view *v)
{
    family(b, om, "m0serve_requests", COUNTER, "Requests answered, by mount, method and status class.");
    for (unsigned m = 0; m < M0_MX_MOUNTS; m++) {
        if (v->mounts[m] == NULL)
            continue;
        for (unsigned me = 0; me < M0_MX_METHODS; me++) {
            for (unsigned cl = 0; cl < M0_MX_CLASSES; cl++) {
                uint64_t n = v->v[M0_MX_REQ(m, me, cl)];
                if (n == 0)
                    continue;      /* a series appears with its first request */
                m0_buf_puts(b, "m0serve_requests_total{mount=\"");
                label_value(b, v->mounts[m]);
                m0_buf_printf(b, "\",method=\"%s\",status=\"%s\"} %llu\n", m0_mx_method_names[me], class_names[cl],
                              (unsigned long long)n);
            }
        }
    }
    family(b, om, "m0serve_request_duration_seconds", HISTOGRAM,
           "Time from a request's start to its last byte queued (held streams are not observed), by mount.");
    for (unsigned m = 0; m < M0_MX_MOUNTS; m++) {
        if (v->mounts[m] == NULL)
            continue;
        uint64_t cum = 0;
        for (unsigned i = 0; i < M0_MX_NBUCKETS; i++) {
            cum += v->v[M0_MX_HIST(m, i)];
            m0_buf_puts(b, "m0serve_request_duration_seconds_bucket{mount=\"");
            label_value(b, v->mounts[m]);
            if (i < M0_MX_NBUCKETS - 1)
                m0_buf_printf(b, "\",le=\"%g\"} %llu\n", (double)bucket_us[i] / 1e6, (unsigned long long)cum);
            else
                m0_buf_printf(b, "\",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
        }
        m0_buf_puts(b, "m0serve_request_duration_seconds_sum{mount=\"");
        label_value(b, v->mounts[m]);
        m0_buf_printf(b, "\"} %.6f\n", (double)v->v[M0_MX_SUM_US(m)] / 1e6);
        m0_buf_puts(b, "m0serve_request_duration_seconds_count{mount=\"");
        label_value(b, v->mounts[m]);
        m0_buf_printf(b, "\"} %llu\n", (unsigned long long)cum);
    }
    family(b, om, "m0serve_requests_in_flight", GAUGE, "Requests handed to an application and not completed, by mount.");
    for (unsigned m = 0; m < M0_MX_MOUNTS; m++) {
        if (v->mounts[m] == NULL)
            continue;
        m0_buf_puts(b, "m0serve_requests_in_flight{mount=\"");
        label_value(b, v->mounts[m]);
        m0_buf_printf(b, "\"} %llu\n", (unsigned long long)v->v[M0_MX_INFLIGHT0 + m]);
    }
}

static void processes(struct m0_buf *b, int om, const struct m0_mx_view *v)
{
    static const struct {
        const char *name;
        enum kind k;
        const char *help;
    } fam[] = {
        {"process_cpu_seconds", COUNTER, "User and system CPU time of the server process, in seconds."},
        {"process_resident_memory_bytes", GAUGE, "Resident memory of the server process, in bytes."},
        {"process_virtual_memory_bytes", GAUGE, "Virtual memory of the server process, in bytes."},
        {"process_open_fds", GAUGE, "Open file descriptors of the server process."},
        {"process_max_fds", GAUGE, "The server process's limit of open file descriptors."},
        {"process_start_time_seconds", GAUGE, "Start time of the server process, in seconds since the epoch."},
    };
    for (size_t f = 0; f < M0_ARRAY_LEN(fam); f++) {
        family(b, om, fam[f].name, fam[f].k, fam[f].help);
        for (size_t i = 0; i < v->nprocs; i++) {
            const struct m0_mx_proc *p = &v->procs[i];
            char label[48];
            if (p->worker < 0)
                snprintf(label, sizeof label, "{process=\"master\"}");
            else
                snprintf(label, sizeof label, "{process=\"worker\",worker=\"%d\"}", p->worker);
            const char *nm = fam[f].name, *tot = fam[f].k == COUNTER ? "_total" : "";
            switch (f) {
            case 0: m0_buf_printf(b, "%s%s%s %.2f\n", nm, tot, label, p->cpu_seconds); break;
            case 1: m0_buf_printf(b, "%s%s %llu\n", nm, label, (unsigned long long)p->resident_bytes); break;
            case 2: m0_buf_printf(b, "%s%s %llu\n", nm, label, (unsigned long long)p->virtual_bytes); break;
            case 3: m0_buf_printf(b, "%s%s %llu\n", nm, label, (unsigned long long)p->open_fds); break;
            case 4:
                if (p->max_fds != 0)
                    m0_buf_printf(b, "%s%s %llu\n", nm, label, (unsigned long long)p->max_fds);
                break;
            default: m0_buf_printf(b, "%s%s %.2f\n", nm, label, p->start_time); break;
            }
        }
    }
}

void m0_mx_render(struct m0_buf *b, const struct m0_mx_view *v, int om)
{
    const uint64_t *c = v->v;
    requests(b, om, v);

    scalar(b, om, "m0serve_connections_open", GAUGE, "Client connections open.", c[M0_MX_CONN_OPEN]);
    scalar(b, om, "m0serve_connections_accepted", COUNTER, "Client connections accepted.", c[M0_MX_ACCEPTED]);
    family(b, om, "m0serve_connections_refused", COUNTER,
           "Connections refused: out of file descriptors, or every --max-connections slot busy.");
    m0_buf_printf(b, "m0serve_connections_refused_total{reason=\"descriptors\"} %llu\n"
                     "m0serve_connections_refused_total{reason=\"max_connections\"} %llu\n",
                  (unsigned long long)c[M0_MX_REFUSED_FDS], (unsigned long long)c[M0_MX_REFUSED_SLOTS]);

    family(b, om, "m0serve_tls_handshakes", COUNTER,
           "TLS handshakes on the TLS listeners: completed in full, resumed (a session ticket), or failed.");
    m0_buf_printf(b, "m0serve_tls_handshakes_total{result=\"full\"} %llu\n"
                     "m0serve_tls_handshakes_total{result=\"resumed\"} %llu\n"
                     "m0serve_tls_handshakes_total{result=\"failed\"} %llu\n",
                  (unsigned long long)c[M0_MX_TLS_FULL], (unsigned long long)c[M0_MX_TLS_RESUMED],
                  (unsigned long long)c[M0_MX_TLS_FAILED]);
    scalar(b, om, "m0serve_tls_plain_http_refused", COUNTER,
           "Plain HTTP sent to a TLS listener (answered with a one-line 400).", c[M0_MX_TLS_PLAIN]);

    scalar(b, om, "m0serve_pool_threads", GAUGE, "Handler-pool threads alive.", c[M0_MX_POOL_THREADS]);
    scalar(b, om, "m0serve_pool_threads_busy", GAUGE, "Handler-pool threads running a view.", c[M0_MX_POOL_BUSY]);
    scalar(b, om, "m0serve_pool_threads_max", GAUGE, "The handler pools' ceilings, summed.", c[M0_MX_POOL_MAX]);
    scalar(b, om, "m0serve_pool_queued_jobs", GAUGE, "Requests waiting for a handler thread.", c[M0_MX_POOL_QUEUED]);
    scalar(b, om, "m0serve_pool_threads_started", COUNTER,
           "Handler threads started: the pools' floors, then every growth.", c[M0_MX_POOL_STARTED]);
    scalar(b, om, "m0serve_asgi_tasks_in_flight", GAUGE, "ASGI application tasks running (WebSockets included).",
           c[M0_MX_ASGI_TASKS]);

    family(b, om, "m0serve_held_streams", GAUGE, "Held connections: SSE streams and WebSockets.");
    m0_buf_printf(b, "m0serve_held_streams{kind=\"sse\"} %llu\nm0serve_held_streams{kind=\"websocket\"} %llu\n",
                  (unsigned long long)c[M0_MX_HELD_SSE], (unsigned long long)c[M0_MX_HELD_WS]);
    scalar(b, om, "m0serve_publishes", COUNTER, "Events the applications published (m0pub.publish).",
           c[M0_MX_PUBLISHES]);
    scalar(b, om, "m0serve_publish_errors", COUNTER, "m0pub.publish calls that failed (broker unreachable or refusing).",
           c[M0_MX_PUBLISH_ERRORS]);
    scalar(b, om, "m0serve_bus_events_received", COUNTER, "Bus events received, summed over the workers.",
           c[M0_MX_BUS_RECEIVED]);
    scalar(b, om, "m0serve_deliveries", COUNTER, "Event copies queued to held streams.", c[M0_MX_DELIVERED]);
    scalar(b, om, "m0serve_slow_subscribers_closed", COUNTER, "Held streams closed for exceeding --outbox-limit.",
           c[M0_MX_SLOW_CLOSED]);
    scalar(b, om, "m0serve_gaps", COUNTER, "m0-gap events sent: a worker learned it missed events.", c[M0_MX_GAPS]);
    scalar(b, om, "m0serve_bus_late_events", COUNTER, "Bus events dropped as out of order past the reorder window.",
           c[M0_MX_LATE]);
    scalar(b, om, "m0serve_broker_connected_workers", GAUGE, "Workers whose broker connections are up.",
           c[M0_MX_BROKER_UP]);
    scalar(b, om, "m0serve_broker_lag_events", GAUGE,
           "Events the broker holds that a worker has not read yet (the largest over the workers).",
           c[M0_MX_BROKER_LAG]);
    scalar(b, om, "m0serve_broker_reconnects", COUNTER, "Broker connections re-established.",
           c[M0_MX_BROKER_RECONNECTS]);
    if (v->broker_engine != NULL) {
        family(b, om, "m0serve_broker", INFO,
               "The broker: its engine and its primary (where publishes go), as the answering worker sees it.");
        m0_buf_puts(b, "m0serve_broker_info{engine=\"");
        label_value(b, v->broker_engine);
        m0_buf_puts(b, "\",primary=\"");
        label_value(b, v->broker_primary ? v->broker_primary : "");
        m0_buf_puts(b, "\"} 1\n");
    }

    scalar(b, om, "m0serve_workers", GAUGE, "Worker processes configured (--workers).", (uint64_t)v->workers);
    scalar(b, om, "m0serve_worker_starts", COUNTER, "Worker processes started by the master.", c[M0_MX_WORKER_STARTS]);
    family(b, om, "m0serve_worker_exits", COUNTER, "Worker processes that ended, by cause.");
    for (unsigned i = 0; i < M0_ARRAY_LEN(exit_causes); i++)
        m0_buf_printf(b, "m0serve_worker_exits_total{cause=\"%s\"} %llu\n", exit_causes[i],
                      (unsigned long long)c[M0_MX_EXIT_CLEAN + i]);
    scalar(b, om, "m0serve_reloads", COUNTER, "Reloads begun (SIGHUP or --reload).", c[M0_MX_RELOADS]);

    family(b, om, "m0serve_build", INFO, "The m0serve build: its version and the Python it embeds.");
    m0_buf_puts(b, "m0serve_build_info{version=\"");
    label_value(b, v->version);
    m0_buf_puts(b, "\",python=\"");
    label_value(b, v->python);
    m0_buf_printf(b, "\",free_threaded=\"%s\"} 1\n", v->free_threaded ? "true" : "false");

    processes(b, om, v);
    if (om)
        m0_buf_puts(b, "# EOF\n");
}

/* ------------------------------------------------------------- Accept */

static const char *skip_ows(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* A qvalue (RFC 9110 §12.4.2): "0", "0.x", "1", "1.000"; anything else is 0. */
static double qvalue(const char *p, const char *end)
{
    char tmp[8];
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= sizeof tmp)
        return 0;
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    char *stop;
    double q = strtod(tmp, &stop);
    return (*stop == '\0' && q >= 0 && q <= 1) ? q : 0;
}

/* The first ch in [p, end), or end. */
static const char *find(const char *p, const char *end, char ch)
{
    while (p < end && *p != ch)
        p++;
    return p;
}

static const char *trim_end(const char *p, const char *end)
{
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return end;
}

int m0_mx_wants_openmetrics(const char *accept, size_t len)
{
    double q_om = 0, q_text = 0;
    const char *p = accept, *end = accept + len;
    while (p < end) {
        const char *elem_end = find(p, end, ',');
        p = skip_ows(p, elem_end);
        const char *semi = find(p, elem_end, ';');
        const char *type_end = trim_end(p, semi);
        size_t tlen = (size_t)(type_end - p);
        double q = 1;
        for (const char *a = semi; a < elem_end;) {
            a = skip_ows(a + 1, elem_end);
            const char *next = find(a, elem_end, ';');
            const char *pend = trim_end(a, next);
            if (pend - a >= 2 && (a[0] == 'q' || a[0] == 'Q') && a[1] == '=')
                q = qvalue(a + 2, pend);
            a = next;
        }
        if (tlen == 28 && strncasecmp(p, "application/openmetrics-text", 28) == 0)
            q_om = q > q_om ? q : q_om;
        else if (tlen == 10 && strncasecmp(p, "text/plain", 10) == 0)
            q_text = q > q_text ? q : q_text;
        p = elem_end < end ? elem_end + 1 : end;
    }
    return q_om > 0 && q_om >= q_text;
}

/* -------------------------------------------------------------- flags */

int m0_mx_addr_split(const char *addr, char *hostbuf, size_t hostcap, int *port, const char **path)
{
    *path = NULL;
    *port = 0;
    if (strncmp(addr, "unix:", 5) == 0) {
        if (addr[5] == '\0' || strlen(addr + 5) >= 108)
            return M0_ERR;
        *path = addr + 5;
        return M0_OK;
    }
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon[1] == '\0')
        return M0_ERR;
    char *stop;
    long v = strtol(colon + 1, &stop, 10);
    if (*stop != '\0' || v < 0 || v > 65535)
        return M0_ERR;
    const char *h = addr;
    size_t n = (size_t)(colon - addr);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    } else if (memchr(h, ':', n) != NULL) {
        return M0_ERR;      /* an IPv6 address needs its brackets */
    }
    if (n == 0) {
        h = "0.0.0.0";
        n = 7;
    }
    if (n >= hostcap)
        return M0_ERR;
    memcpy(hostbuf, h, n);
    hostbuf[n] = '\0';
    *port = (int)v;
    return M0_OK;
}

int m0_metrics_check_flags(const struct m0_config *cfg, char *err, size_t cap)
{
    if (cfg->metrics_bind != NULL) {
        char host[256];
        int port;
        const char *path;
        int scheme;
        const char *bare = m0_config_addr_scheme(cfg->metrics_bind, &scheme);
        if (m0_mx_addr_split(bare, host, sizeof host, &port, &path) != M0_OK || (scheme >= 0 && path != NULL)) {
            snprintf(err, cap, "m0serve: error: --metrics-bind: invalid address '%s' (want HOST:PORT, https://HOST:PORT "
                     "or unix:PATH)", cfg->metrics_bind);
            return M0_ERR;
        }
    }
    const char *p = cfg->metrics_path;
    if (p != NULL && p[0] != '\0' && (p[0] != '/' || strpbrk(p, "?# \t") != NULL)) {
        snprintf(err, cap, "m0serve: error: --metrics-path: invalid value '%s' (an absolute path, e.g. /metrics)", p);
        return M0_ERR;
    }
    return M0_OK;
}
