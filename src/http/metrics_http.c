/*
 * metrics_http.c — the worker's side of the metrics: its loop samples
 * itself into its block (connections, the pool, the holds, the broker),
 * and answers the metrics endpoint in C (no Python): who may ask, the sum
 * of every process's block, the process_* numbers from /proc, and the
 * response.
 *
 * Why the workers' loops answer rather than the master: the loops already
 * speak HTTP/1.1 with every limit and timeout the main listener has, they
 * never wait for Python (views run on handler threads), and any worker
 * reads every block, so whichever accepts a scrape answers for all. The
 * master stays a small supervisor that parses nothing from the network.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <patchlevel.h>
#include <pyconfig.h>

#include "m0/body.h"
#include "m0/broker_url.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/endpoint.h"
#include "m0/rt.h"
#include "m0/job.h"
#include "m0/loops.h"
#include "m0/metrics.h"
#include "m0/metrics_http.h"
#include "m0/metrics_text.h"
#include "m0/pool.h"
#include "m0/response.h"
#include "m0/static.h"
#include "m0/target.h"

#define MAX_PROCS 256

/* The path the endpoint answers: --metrics-path, else /metrics. */
static const char *endpoint_path(const struct m0_config *cfg)
{
    return cfg->metrics_path != NULL && cfg->metrics_path[0] != '\0' ? cfg->metrics_path : "/metrics";
}

/* ------------------------------------------------------------ /proc */

static double boot_time(void)
{
    FILE *f = fopen("/proc/stat", "re");
    double bt = 0;
    char line[256];
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "btime ", 6) == 0) {
            bt = strtod(line + 6, NULL);
            break;
        }
    }
    if (f != NULL)
        fclose(f);
    return bt;
}

/* proc(5): /proc/PID/stat fields 14-15 (utime, stime), 22 (starttime),
 * 23 (vsize), 24 (rss); /proc/PID/fd; /proc/PID/limits. Returns M0_ERR
 * when the process is gone. */
static int read_proc(pid_t pid, double btime, struct m0_mx_proc *p)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return M0_ERR;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *q = strrchr(buf, ')');   /* the command name may hold spaces and parentheses */
    if (q == NULL)
        return M0_ERR;
    unsigned long long field[25] = {0};
    int i = 3;
    for (char *t = strtok(q + 2, " "); t != NULL && i < 25; t = strtok(NULL, " "), i++)
        field[i] = strtoull(t, NULL, 10);
    double tck = (double)sysconf(_SC_CLK_TCK);
    p->cpu_seconds = (double)(field[14] + field[15]) / tck;
    p->start_time = btime + (double)field[22] / tck;
    p->virtual_bytes = field[23];
    p->resident_bytes = field[24] * (uint64_t)sysconf(_SC_PAGESIZE);
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    p->open_fds = 0;
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            p->open_fds += e->d_name[0] != '.';
        closedir(d);
    }
    p->max_fds = 0;
    snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
    if ((f = fopen(path, "re")) != NULL) {
        char line[256];
        while (fgets(line, sizeof line, f) != NULL) {
            if (strncmp(line, "Max open files", 14) == 0) {
                p->max_fds = strtoull(line + 14, NULL, 10);
                break;
            }
        }
        fclose(f);
    }
    return M0_OK;
}

/* ------------------------------------------------------------- answer */

static void respond(struct m0_server *s, struct m0_conn *c, int status, const char *ctype, const struct m0_buf *body)
{
    struct m0_job *job = c->job;
    if (body != NULL) {
        m0_conn_answer_body(s, c, status, ctype, body->data, body->len);
        return;
    }
    struct m0_body_req br = m0_job_framing(job);
    m0_conn_answer(s, c, status,
                   m0_static_plain(&job->head, &job->body, &c->out, &br, status,
                                   status == 405 ? "Allow: GET, HEAD\r\n" : NULL,
                                   status == 405 ? "Method Not Allowed" : "Not Found"));
}

/* Before every sleep: the worker's totals and gauges into its block —
 * with --threads, every loop's summed (loops.h), the sum and its stores
 * one step under the table's lock, so that a counter two loops sample one
 * after the other never goes backwards. Handler threads change the pool's
 * numbers without waking the loop: while any request is in flight the
 * loop wakes once a second to sample again, so another worker's scrape
 * sees them at most that old. */
static void sample(struct m0_loop *l, void *ctx)
{
    struct m0_server *s = ctx;
    struct m0_mx_block *b = m0_metrics_block();
    if (s->loops != NULL)
        pthread_mutex_lock(&s->loops->sample_lock);
    struct m0_loop_sum sum;
    m0_loops_sum(s, &sum);
    const uint64_t *v = sum.v;
    m0_mx_set(b, M0_MX_CONN_OPEN, v[M0_LS_CONNS]);
    m0_mx_set(b, M0_MX_POOL_THREADS, v[M0_LS_POOL_THREADS]);
    m0_mx_set(b, M0_MX_POOL_BUSY, v[M0_LS_POOL_BUSY]);
    m0_mx_set(b, M0_MX_POOL_MAX, v[M0_LS_POOL_MAX]);
    m0_mx_set(b, M0_MX_POOL_QUEUED, v[M0_LS_POOL_QUEUED]);
    m0_mx_set(b, M0_MX_POOL_STARTED, v[M0_LS_POOL_STARTED]);
    uint64_t held = v[M0_LS_HELD], ws = v[M0_LS_WEBSOCKETS];
    m0_mx_set(b, M0_MX_HELD_SSE, held - (ws < held ? ws : held));
    m0_mx_set(b, M0_MX_HELD_WS, ws);
    m0_mx_set(b, M0_MX_BUS_RECEIVED, v[M0_LS_RECEIVED]);
    m0_mx_set(b, M0_MX_DELIVERED, v[M0_LS_DELIVERED]);
    m0_mx_set(b, M0_MX_SLOW_CLOSED, v[M0_LS_SLOW_CLOSED]);
    m0_mx_set(b, M0_MX_GAPS, v[M0_LS_LOST]);
    m0_mx_set(b, M0_MX_LATE, v[M0_LS_LATE]);
    uint64_t asgi = 0;
    for (unsigned i = 0; i < m0_targets.n && i < M0_MX_MOUNTS - 1; i++) {
        m0_mx_set(b, M0_MX_INFLIGHT0 + i, v[M0_LS_T_INFLIGHT + i]);
        if (m0_targets.t[i].kind == M0_TARGET_ASGI)
            asgi += v[M0_LS_T_INFLIGHT + i];
    }
    m0_mx_set(b, M0_MX_ASGI_TASKS, asgi);
    if (m0_broker != NULL) {
        m0_mx_set(b, M0_MX_BROKER_UP, v[M0_LS_BROKER_UP]);
        m0_mx_set(b, M0_MX_BROKER_LAG, v[M0_LS_BROKER_LAG]);
        m0_mx_set(b, M0_MX_BROKER_RECONNECTS, v[M0_LS_BROKER_RECONNECTS]);
    }
    if (s->loops != NULL)
        pthread_mutex_unlock(&s->loops->sample_lock);
    if (l != NULL && (v[M0_LS_POOL_BUSY] != 0 || v[M0_LS_POOL_QUEUED] != 0 || asgi != 0 || v[M0_LS_ORPHANS] != 0))
        m0_loop_wake_at(l, m0_loop_now(l) + 1000);
}

/* The metrics' per-loop part (server.h): the sampling hook, added when
 * the process has a block (its state: the block). */
static void *metrics_init(struct m0_server *s)
{
    struct m0_mx_block *b = m0_metrics_block();
    if (b != NULL)
        m0_loop_add_hook(s->loop, sample, s);
    return b;
}

const struct m0_ext m0_metrics_ext = {.name = "metrics", .init = metrics_init};

void m0_metrics_attach(struct m0_server *s)
{
    m0_ext_register(s, &m0_metrics_ext);
    m0_ext_of(s, &m0_metrics_ext);
}

/* Accepted on --metrics-bind's listener (which the endpoint owns)? */
static int on_own(const struct m0_server *s, const struct m0_job *job)
{
    return job->lidx >= 0 && job->lidx == s->cfg->metrics_listener;
}

static int answer(struct m0_server *s, struct m0_conn *c, int head_only)
{
    struct m0_job *job = c->job;
    const struct m0_req *r = &job->req;
    (void)head_only;                 /* it reads no body either way */
    /* A peer outside the trust list learns nothing: the path is a 404 as
     * if nothing were there (the application never sees it either). */
    int ours = on_own(s, job) ? m0_req_path_is(r, endpoint_path(s->cfg))
                              : m0_proxy_trusted(&s->cfg->forwarded_trust, job->peer_addr);
    if (!ours || m0_metrics_block() == NULL) {
        respond(s, c, 404, NULL, NULL);
        return M0_EP_ANSWERED;
    }
    if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0) {
        respond(s, c, 405, NULL, NULL);
        return M0_EP_ANSWERED;
    }
    uint64_t cells[M0_MX_NCELLS];
    struct m0_mx_who who[MAX_PROCS];
    size_t nwho = 0;
    sample(NULL, s);                 /* this worker's own cells, fresh (this pass has not ended yet) */
    m0_mx_sum(cells, who, &nwho, MAX_PROCS);
    struct m0_mx_proc procs[MAX_PROCS];
    size_t np = 0;
    double bt = boot_time();
    for (size_t i = 0; i < nwho; i++) {
        if (read_proc(who[i].pid, bt, &procs[np]) == M0_OK)
            procs[np++].worker = who[i].worker;
    }
    struct m0_mx_view v = {.v = cells, .version = M0_VERSION, .python = PY_VERSION,
                           .workers = s->cfg->workers, .procs = procs, .nprocs = np};
#ifdef Py_GIL_DISABLED
    v.free_threaded = 1;
#endif
    for (unsigned i = 0; i < m0_targets.n && i < M0_MX_MOUNTS - 1; i++)
        v.mounts[i] = m0_targets.t[i].prefix[0] != '\0' ? m0_targets.t[i].prefix : "/";
    v.mounts[M0_MX_MOUNTS - 1] = "none";
    struct m0_rt_source_stats bs;
    if (m0_broker != NULL) {
        m0_rt_source_stats(s->rt, &bs);
        v.broker_engine = bs.engine;
        v.broker_primary = bs.primary;
    }
    const struct m0_hdr *acc = m0_req_header(r, "accept");
    int om = acc != NULL && m0_mx_wants_openmetrics(acc->value, acc->value_len);
    struct m0_buf body = {0};
    m0_mx_render(&body, &v, om);
    respond(s, c, 200, om ? M0_MX_CT_OPENMETRICS : M0_MX_CT_TEXT, &body);
    m0_buf_free(&body);
    return M0_EP_ANSWERED;
}

/* ------------------------------------------------------------ the endpoint */

static int listener(const struct m0_config *cfg)
{
    return cfg->metrics_listener;
}

/* Everything on --metrics-bind's listener; on the others, --metrics-path
 * (when the metrics are kept). Answered from the head: no body is read. */
static unsigned claims(struct m0_server *s, struct m0_conn *c)
{
    const struct m0_job *job = c->job;
    if (on_own(s, job))
        return M0_EP_CLAIMED;
    const char *mp = s->cfg->metrics_path;
    if (mp == NULL || mp[0] == '\0' || m0_metrics_block() == NULL)
        return 0;
    return m0_req_path_is(&job->req, mp) ? M0_EP_CLAIMED : 0;
}

const struct m0_endpoint m0_metrics_endpoint = {
    .name = "metrics",
    .flags = M0_EP_CLAIMED | M0_EP_OWN_LISTENER,
    .claims = claims,
    .answer = answer,
    .listener = listener,
};
