/*
 * loops.c — what the event loops of one worker show each other (see
 * loops.h): each loop's numbers in its share, and their sum.
 */
#include <stdlib.h>
#include <string.h>

#include "m0/broker_url.h"
#include "m0/buf.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/loops.h"
#include "m0/pool.h"
#include "m0/rt.h"
#include "m0/target.h"

struct m0_loops *m0_loops_new(unsigned n)
{
    struct m0_loops *ls = m0_xmalloc(sizeof *ls + n * sizeof ls->share[0]);
    memset(ls, 0, sizeof *ls + n * sizeof ls->share[0]);
    ls->n = n;
    for (unsigned i = 0; i < M0_MAX_LOOPS; i++)
        ls->inbox_w[i] = -1;
    pthread_mutex_init(&ls->sample_lock, NULL);
    return ls;
}

void m0_loops_free(struct m0_loops *ls)
{
    if (ls == NULL)
        return;
    pthread_mutex_destroy(&ls->sample_lock);
    free(ls);
}

/* s's own numbers, read on its loop thread. */
static void own(struct m0_server *s, struct m0_loop_sum *o)
{
    memset(o, 0, sizeof *o);
    unsigned threads, busy, max, queued;
    m0_pool_stats(s->run.pool, &threads, &busy, &max, &queued);
    struct m0_rt_stats rt;
    m0_rt_stats(s->rt, &rt);
    o->v[M0_LS_REQUESTS] = s->run.requests;
    o->v[M0_LS_CONNS] = s->slots.nactive;
    o->v[M0_LS_HELD] = rt.held;
    o->v[M0_LS_WEBSOCKETS] = rt.websockets;
    o->v[M0_LS_RECEIVED] = rt.received;
    o->v[M0_LS_DELIVERED] = rt.delivered;
    o->v[M0_LS_LOST] = rt.lost;
    o->v[M0_LS_SLOW_CLOSED] = rt.slow_closed;
    o->v[M0_LS_LATE] = rt.late;
    o->v[M0_LS_POOL_THREADS] = threads;
    o->v[M0_LS_POOL_BUSY] = busy;
    o->v[M0_LS_POOL_MAX] = max;
    o->v[M0_LS_POOL_QUEUED] = queued;
    o->v[M0_LS_POOL_STARTED] = m0_pool_started(s->run.pool);
    o->v[M0_LS_ORPHANS] = s->slots.norphans;
    o->v[M0_LS_UNMATCHED] = s->run.tstats.unmatched;
    if (m0_broker != NULL) {
        struct m0_rt_source_stats bs;
        m0_rt_source_stats(s->rt, &bs);
        o->v[M0_LS_BROKER_UP] = (uint64_t)bs.up;
        o->v[M0_LS_BROKER_LAG] = bs.lag;
        o->v[M0_LS_BROKER_RECONNECTS] = bs.reconnects;
    }
    for (unsigned i = 0; i < m0_targets.n && i < M0_MAX_TARGETS; i++) {
        o->v[M0_LS_T_REQUESTS + i] = s->run.tstats.t[i].requests;
        o->v[M0_LS_T_INFLIGHT + i] = s->run.tstats.t[i].in_flight;
        o->v[M0_LS_T_HELD + i] = s->run.tstats.t[i].held;
    }
}

void m0_loops_publish(struct m0_server *s)
{
    if (s->loops == NULL)
        return;
    struct m0_loop_sum o;
    own(s, &o);
    struct m0_loop_share *sh = &s->loops->share[s->loop_index];
    for (unsigned i = 0; i < M0_LS_N; i++) {
        if (atomic_load_explicit(&sh->v[i], memory_order_relaxed) != o.v[i])
            atomic_store_explicit(&sh->v[i], o.v[i], memory_order_relaxed);
    }
}

void m0_loops_begin_request(struct m0_server *s)
{
    s->run.requests++;
    if (s->loops != NULL)
        atomic_fetch_add_explicit(&s->loops->requests, 1, memory_order_relaxed);
}

uint64_t m0_loops_requests(const struct m0_server *s)
{
    if (s->loops == NULL)
        return s->run.requests;
    return atomic_load_explicit(&s->loops->requests, memory_order_relaxed);
}

int m0_loops_claim_replace(struct m0_server *s)
{
    if (s->loops == NULL)
        return 1;
    return atomic_load_explicit(&s->loops->replace_asked, memory_order_relaxed) == 0 &&
           atomic_exchange(&s->loops->replace_asked, 1) == 0;
}

void m0_loops_read(const struct m0_server *s, unsigned i, struct m0_loop_sum *out)
{
    const struct m0_loop_share *sh = &s->loops->share[i];
    for (unsigned k = 0; k < M0_LS_N; k++)
        out->v[k] = atomic_load_explicit(&sh->v[k], memory_order_relaxed);
}

void m0_loops_sum(struct m0_server *s, struct m0_loop_sum *out)
{
    if (s->loops == NULL) {
        own(s, out);
        return;
    }
    m0_loops_publish(s);
    memset(out, 0, sizeof *out);
    out->v[M0_LS_BROKER_UP] = 1;
    for (unsigned i = 0; i < s->loops->n; i++) {
        struct m0_loop_sum one;
        m0_loops_read(s, i, &one);
        for (unsigned k = 0; k < M0_LS_N; k++) {
            if (k == M0_LS_RECEIVED)        /* every loop receives every event: the worker got the most */
                out->v[k] = one.v[k] > out->v[k] ? one.v[k] : out->v[k];
            else if (k == M0_LS_BROKER_UP)
                out->v[k] = out->v[k] && one.v[k];
            else if (k == M0_LS_BROKER_LAG)
                out->v[k] = one.v[k] > out->v[k] ? one.v[k] : out->v[k];
            else
                out->v[k] += one.v[k];
        }
    }
}
