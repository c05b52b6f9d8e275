/*
 * health.c — /health, answered in C on the loop (health.h): it must stay
 * readable while every Python thread is busy (DESIGN capability 11). The
 * worker's numbers are gathered here — every loop's summed (--threads;
 * loops.h), the busiest channels the answering loop's, the broker's state
 * — and rendered by health_json.c.
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "m0/broker_url.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/endpoint.h"
#include "m0/health.h"
#include "m0/health_json.h"
#include "m0/job.h"
#include "m0/loops.h"
#include "m0/metrics.h"
#include "m0/rt.h"
#include "m0/target.h"

static int answer(struct m0_server *s, struct m0_conn *c, int head_only)
{
    struct m0_channel_stat top[20];
    (void)head_only;                 /* it reads no body either way */
    /* The worker's numbers: every loop's summed (--threads; loops.h). */
    struct m0_loop_sum sum;
    m0_loops_sum(s, &sum);
    const uint64_t *v = sum.v;
    struct m0_health h = {
        .pid = (int)getpid(),
        .worker = m0_bus_index,
        .loop = s->loop_index,
        .connections = (uint32_t)v[M0_LS_CONNS],
        .held_streams = (uint32_t)v[M0_LS_HELD],
        .websockets = (uint32_t)v[M0_LS_WEBSOCKETS],
        .events_published = m0_metrics_published(),
        .events_received = v[M0_LS_RECEIVED],
        .events_delivered = v[M0_LS_DELIVERED],
        .events_lost = v[M0_LS_LOST],
        .slow_closed = v[M0_LS_SLOW_CLOSED],
        .requests = v[M0_LS_REQUESTS],
        .draining = atomic_load(&s->life.draining),
        .pool_threads = (unsigned)v[M0_LS_POOL_THREADS],
        .pool_busy = (unsigned)v[M0_LS_POOL_BUSY],
        .pool_max = (unsigned)v[M0_LS_POOL_MAX],
        .pool_queued = (unsigned)v[M0_LS_POOL_QUEUED],
    };
    struct m0_health_loop each[M0_MAX_LOOPS];
    if (s->loops != NULL && s->loops->n > 1) {
        for (unsigned i = 0; i < s->loops->n; i++) {
            struct m0_loop_sum one;
            m0_loops_read(s, i, &one);
            each[i] = (struct m0_health_loop){.connections = (uint32_t)one.v[M0_LS_CONNS],
                                              .held_streams = (uint32_t)one.v[M0_LS_HELD],
                                              .websockets = (uint32_t)one.v[M0_LS_WEBSOCKETS],
                                              .requests = one.v[M0_LS_REQUESTS],
                                              .pool_busy = (unsigned)one.v[M0_LS_POOL_BUSY]};
        }
        h.loops = each;
        h.nloops = s->loops->n;
    }
    struct m0_target_counters counters = {.unmatched = v[M0_LS_UNMATCHED]};
    for (unsigned i = 0; i < m0_targets.n && i < M0_MAX_TARGETS; i++)
        counters.t[i] = (struct m0_target_stats){.requests = v[M0_LS_T_REQUESTS + i],
                                                 .in_flight = (uint32_t)v[M0_LS_T_INFLIGHT + i],
                                                 .held = (uint32_t)v[M0_LS_T_HELD + i]};
    h.targets = &m0_targets;
    h.counters = &counters;
    struct m0_buf body = {0}, broker = {0};
    if (m0_broker != NULL) {
        h.degraded = !m0_rt_source_health(s->rt, &broker);
        m0_buf_append(&broker, "", 1);
        h.broker = broker.data;
    }
    m0_health_render(&body, &h, top, m0_rt_top(s->rt, top, M0_ARRAY_LEN(top)));
    m0_buf_free(&broker);
    m0_conn_answer_body(s, c, 200, "application/json", body.data, body.len);
    m0_buf_free(&body);
    return M0_EP_ANSWERED;
}

/* The health path (--health-path; none when it is empty), whatever the
 * method: answered from the head, no body read. */
static unsigned claims(struct m0_server *s, struct m0_conn *c)
{
    const char *hp = s->cfg->health_path;
    const struct m0_req *r = &c->job->req;
    if (hp == NULL || hp[0] == '\0')
        return 0;
    size_t n = strlen(hp);
    return r->path_len == n && memcmp(r->path, hp, n) == 0 ? M0_EP_CLAIMED : 0;
}

const struct m0_endpoint m0_health_endpoint = {
    .name = "health",
    .flags = M0_EP_CLAIMED,
    .claims = claims,
    .answer = answer,
};
