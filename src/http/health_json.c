/*
 * health_json.c — /health as JSON, without Python (health_json.h): the
 * rendering alone, pure; health.c gathers the numbers.
 */
#include <string.h>

#include "m0/health_json.h"
#include "m0/static.h"
#include "m0/target.h"

void m0_health_render(struct m0_buf *b, const struct m0_health *h, const struct m0_channel_stat *top,
                      size_t ntop)
{
    m0_buf_printf(b,
                  "{\"status\": \"%s\", \"pid\": %d, \"worker\": %d, \"connections\": %u, "
                  "\"requests\": %llu, \"held_streams\": %u, \"websockets\": %u, \"events_published\": %llu, "
                  "\"events_received\": %llu, \"events_delivered\": %llu, \"events_lost\": %llu, \"slow_subscribers_closed\": %llu, "
                  "\"pool\": {\"threads\": %u, \"busy\": %u, \"idle\": %u, \"max\": %u, \"queued\": %u}, "
                  "\"channels\": [",
                  h->draining ? "draining" : h->degraded ? "degraded" : "ok", h->pid, h->worker, h->connections,
                  (unsigned long long)h->requests, h->held_streams, h->websockets, (unsigned long long)h->events_published,
                  (unsigned long long)h->events_received, (unsigned long long)h->events_delivered, (unsigned long long)h->events_lost,
                  (unsigned long long)h->slow_closed, h->pool_threads, h->pool_busy,
                  h->pool_threads - (h->pool_busy < h->pool_threads ? h->pool_busy : h->pool_threads),
                  h->pool_max, h->pool_queued);
    for (size_t i = 0; i < ntop; i++) {
        m0_buf_puts(b, i ? ", {\"channel\": " : "{\"channel\": ");
        m0_buf_json_str(b, top[i].name, top[i].len);
        m0_buf_printf(b, ", \"subscribers\": %u}", top[i].subscribers);
    }
    m0_buf_puts(b, "]");
    m0_buf_printf(b, ", \"loop\": %u", h->loop);
    if (h->nloops > 1 && h->loops != NULL) {
        m0_buf_puts(b, ", \"loops\": [");
        for (unsigned i = 0; i < h->nloops; i++) {
            const struct m0_health_loop *l = &h->loops[i];
            m0_buf_printf(b, "%s{\"loop\": %u, \"connections\": %u, \"requests\": %llu, \"held_streams\": %u, "
                          "\"websockets\": %u, \"pool_busy\": %u}", i ? ", " : "", i, l->connections,
                          (unsigned long long)l->requests, l->held_streams, l->websockets, l->pool_busy);
        }
        m0_buf_puts(b, "]");
    }
    if (h->broker != NULL)
        m0_buf_printf(b, ", \"broker\": %s", h->broker);
    if (h->targets != NULL) {
        const struct m0_targets *ts = h->targets;
        m0_buf_printf(b, ", \"unmounted\": %llu, \"mounts\": [", (unsigned long long)h->counters->unmatched);
        for (unsigned i = 0; i < ts->n; i++) {
            const struct m0_target *t = &ts->t[i];
            const struct m0_target_stats *st = &h->counters->t[i];
            m0_buf_puts(b, i ? ", {\"prefix\": " : "{\"prefix\": ");
            m0_buf_json_str(b, t->prefix_len ? t->prefix : "/", t->prefix_len ? t->prefix_len : 1);
            m0_buf_printf(b, ", \"kind\": \"%s\", \"mode\": \"%s\", \"%s\": ", m0_target_kind_name(t->kind),
                          m0_target_mode(t), t->kind == M0_TARGET_STATIC ? "dir" : "app");
            const char *what = t->resolved != NULL ? t->resolved : t->spec != NULL ? t->spec : "";
            m0_buf_json_str(b, what, strlen(what));
            m0_buf_printf(b, ", \"requests\": %llu", (unsigned long long)st->requests);
            if (t->kind == M0_TARGET_STATIC && t->files != NULL)
                m0_buf_printf(b, ", \"resolver\": \"%s\"}", m0_static_resolver_name(t->files->resolver));
            else
                m0_buf_printf(b, ", \"in_flight\": %u, \"held\": %u}", st->in_flight, st->held);
        }
        m0_buf_puts(b, "]");
    }
    m0_buf_puts(b, "}\n");
}
