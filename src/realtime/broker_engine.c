/*
 * broker_engine.c — the engines and the generic entry points every caller
 * uses (see broker_engine.h): the process's engine is the one its URL
 * named, and m0_broker_new / m0_broker_source / m0_broker_prepare pass
 * through to it, so serve.c, rt.c and the holds are the same whatever
 * engine runs.
 */
#include <stdio.h>
#include <string.h>

#include "m0/broker.h"
#include "m0/buf.h"
#include "m0/broker_engine.h"
#include "m0/rt.h"
#include "broker_int.h"
#include "broker_nats.h"

static const struct m0_broker_engine redis_engine = {
    .name = "redis",
    .init = m0_broker_redis_init,
    .publish = m0_broker_redis_publish,
    .counter = m0_broker_redis_counter,
    .prepare = m0_broker_redis_prepare,
    .make = m0_broker_redis_new,
    .source = &m0_broker_redis_source,
};

static const struct m0_broker_engine nats_engine = {
    .name = "nats",
    .init = m0_broker_nats_init,
    .publish = m0_broker_nats_publish,
    .counter = m0_broker_nats_counter,
    .prepare = m0_broker_nats_prepare,
    .make = m0_broker_nats_new,
    .source = &m0_broker_nats_source,
};

/* Every engine there is (a new engine adds its table here). */
static const struct m0_broker_engine *const engines[] = {&redis_engine, &nats_engine};

void m0_broker_health_reading(struct m0_buf *out, const struct m0_broker_reading *r)
{
    uint64_t newest = r->newest > r->at ? r->newest : r->at;
    m0_buf_printf(out,
                  ", \"last_id\": %llu, \"newest_id\": %llu, \"lag\": %llu, \"events\": %llu, \"gaps\": %llu, "
                  "\"reconnects\": %llu, \"resumes\": %llu, \"resume_gaps\": %llu, \"resumes_in_flight\": %zu, "
                  "\"resumes_waiting\": %zu, \"resumes_waiting_max\": %d",
                  (unsigned long long)r->at, (unsigned long long)newest, (unsigned long long)(newest - r->at),
                  (unsigned long long)r->events, (unsigned long long)r->gaps, (unsigned long long)r->reconnects,
                  (unsigned long long)r->resumes, (unsigned long long)r->resume_gaps, r->inflight, r->waiting,
                  r->waiting_max);
}

const struct m0_broker_engine *m0_broker_engine_named(const char *name)
{
    for (size_t i = 0; i < M0_ARRAY_LEN(engines); i++)
        if (strcmp(engines[i]->name, name) == 0)
            return engines[i];
    return NULL;
}

const struct m0_broker_engine *m0_broker_engine(void)
{
    return m0_broker != NULL ? m0_broker_engine_named(m0_broker->engine) : NULL;
}

int m0_broker_engine_init(char *err, size_t cap)
{
    if (m0_broker == NULL)
        return M0_OK;
    const struct m0_broker_engine *e = m0_broker_engine();
    if (e == NULL) {
        snprintf(err, cap, "no engine %s in this build", m0_broker->engine);
        return M0_ERR;
    }
    return e->init != NULL ? e->init(m0_broker, err, cap) : M0_OK;
}

void m0_broker_prepare(void)
{
    const struct m0_broker_engine *e = m0_broker_engine();
    if (e != NULL && e->prepare != NULL)
        e->prepare();
}

/* The process's engine, where one is known to run (its name came from
 * broker_url.c's table, whose engines all are in engines[]). */
static const struct m0_broker_engine *running(void)
{
    const struct m0_broker_engine *e = m0_broker_engine();
    return e != NULL ? e : engines[0];
}

void *m0_broker_new(struct m0_rt *rt, struct m0_loop *l, const struct m0_config *cfg)
{
    return running()->make(rt, l, cfg);
}

/* ------------------------------------------- the source, passed through */

static const struct m0_rt_source_ops *src(void)
{
    return running()->source;
}

static int pass_start(void *ctx)
{
    return src()->start(ctx);
}

static void pass_stop(void *ctx)
{
    src()->stop(ctx);
}

static void pass_free(void *ctx)
{
    src()->free(ctx);
}

static int pass_resume(void *ctx, uint32_t slot, uint32_t gen, const char *channel, size_t clen, uint64_t last_id)
{
    return src()->resume(ctx, slot, gen, channel, clen, last_id);
}

static int pass_health(const void *ctx, struct m0_buf *out)
{
    return src()->health(ctx, out);
}

static void pass_stats(const void *ctx, struct m0_rt_source_stats *out)
{
    src()->stats(ctx, out);
}

const struct m0_rt_source_ops m0_broker_source = {
    .name = "broker",
    .start = pass_start,
    .stop = pass_stop,
    .free = pass_free,
    .resume = pass_resume,
    .health = pass_health,
    .stats = pass_stats,
};
