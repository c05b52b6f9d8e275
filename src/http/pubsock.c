/*
 * pubsock.c — the local publish socket (see pubsock.h).
 *
 * Why in C on the workers' loops, like the GRIP control port, rather than
 * in the master or in Python: the master is no loop and never runs Python,
 * and a Python shim would take a handler thread (and the GIL) per publish.
 * The loop already parses HTTP, and the publish itself is the bus's
 * (m0_bus_publish: the shared id counter, one datagram per worker, about
 * a millisecond at most) or, with --broker, the publisher thread's
 * (broker_grip.h), so an event from outside is the same event as a view's:
 * the same ids, the same fan-out, the same journal for Last-Event-ID.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/body.h"
#include "m0/broker_grip.h"
#include "m0/broker_pub.h"
#include "m0/broker_url.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/grip_control.h"
#include "m0/server.h"
#include "m0/endpoint.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/metrics.h"
#include "m0/pubreq.h"
#include "m0/pubsock.h"
#include "m0/sse.h"

/* The id line m0pub counts a frame with ("id: " and 2**63, the longest). */
#define ID_LINE_MAX (sizeof "id: 9223372036854775808\n" - 1)

/* A small answer with one extra field (name NULL: none). */
static void reply(struct m0_server *s, struct m0_conn *c, int status, const char *ctype, const char *body,
                  const char *name, const char *value)
{
    struct m0_job *job = c->job;
    const char *why;
    size_t len = strlen(body);
    m0_head_reset(&job->head);
    m0_head_status(&job->head, status, NULL, 0);
    m0_head_add(&job->head, "Content-Type", 12, ctype, strlen(ctype), &why);
    m0_head_add(&job->head, "Cache-Control", 13, "no-store", 8, &why);
    if (name != NULL)
        m0_head_add(&job->head, name, strlen(name), value, strlen(value), &why);
    struct m0_body_req br = m0_job_framing(job);
    m0_body_reset(&job->body);
    m0_body_commit(&job->body, &c->out, &job->head, &br, (int64_t)len, 0);
    m0_body_emit(&job->body, &c->out, body, len);
    m0_conn_answer(s, c, status, len);
}

static void text(struct m0_server *s, struct m0_conn *c, int status, const char *body)
{
    reply(s, c, status, "text/plain; charset=utf-8", body, NULL, NULL);
}

static void published(struct m0_server *s, struct m0_conn *c, uint64_t id)
{
    char body[48];
    snprintf(body, sizeof body, "{\"id\": %llu}\n", (unsigned long long)id);
    m0_mx_add(m0_metrics_block(), M0_MX_PUBLISHES, 1);
    reply(s, c, 200, "application/json", body, NULL, NULL);
}

static int path_is(const struct m0_req *r, const char *p)
{
    size_t n = strlen(p);
    return r->path_len == n && memcmp(r->path, p, n) == 0;
}

/* The request body, whole (the loop read it before routing: at most
 * M0_PUBREQ_BODY_MAX, m0_pubreq_limits). NULL when it cannot be read. */
static char *body_of(const struct m0_req *r, size_t *n)
{
    char *b = m0_xmalloc(r->body_len + 1);
    size_t got = 0;
    while (got < r->body_len) {
        ssize_t k = m0_req_body_read(r, got, b + got, r->body_len - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    if (got != r->body_len) {
        free(b);
        return NULL;
    }
    b[got] = '\0';
    *n = got;
    return b;
}

/* With --broker: the event to the loop's publisher thread (made at the
 * first publish); the connection waits for its completion as for a
 * runner's. M0_OK, or M0_ERR when no thread can be had. */
static int hand_over(struct m0_server *s, struct m0_conn *c, const struct m0_pubreq *p)
{
    struct m0_broker_grip *pub = m0_ext_of(s, &m0_grip_publisher_ext);
    if (pub == NULL)
        return M0_ERR;
    struct m0_broker_batch *b = m0_broker_batch_event(m0_conn_slot(s, c), c->gen, p->channel, p->channel_len,
                                                      p->data, p->data_len, p->event, p->key, p->key_len);
    c->job->queued_ms = m0_loop_now(s->loop);
    c->flags |= C_RUNNER;
    m0_conn_set_state(s, c, M0_CONN_RUN);
    m0_broker_grip_submit(pub, b);
    return M0_OK;
}

/* Publish a parsed request: answered now, or (--broker) at the completion. */
static void publish(struct m0_server *s, struct m0_conn *c, const struct m0_pubreq *p)
{
    char msg[160];
    if (p->key != NULL && !m0_broker_key_ok(p->key, p->key_len)) {
        snprintf(msg, sizeof msg, "key: 1..%d printable ASCII bytes\n", M0_BROKER_KEY_MAX);
        text(s, c, 400, msg);
        return;
    }
    struct m0_buf f = {0};
    m0_sse_frame(&f, 0, p->event, p->data, p->data_len);
    size_t size = f.len + ID_LINE_MAX;      /* as m0pub.publish counts it */
    m0_buf_free(&f);
    if (size > M0_BUS_MAX_PAYLOAD) {
        snprintf(msg, sizeof msg, "event of %zu bytes exceeds the %d-byte frame limit\n", size, M0_BUS_MAX_PAYLOAD);
        text(s, c, 413, msg);
        return;
    }
    if (m0_broker != NULL) {
        if (hand_over(s, c, p) != M0_OK) {
            m0_mx_add(m0_metrics_block(), M0_MX_PUBLISH_ERRORS, 1);
            text(s, c, 503, "The broker publisher could not be started: nothing was published.\n");
        }
        return;
    }
    uint64_t id;
    int rc = m0_bus_publish(p->channel, p->channel_len, p->event, p->data, p->data_len, &id);
    if (rc == M0_OK) {
        published(s, c, id);
        return;
    }
    m0_mx_add(m0_metrics_block(), M0_MX_PUBLISH_ERRORS, 1);
    text(s, c, 503, rc == M0_AGAIN ? "No bus to publish on: nothing was published.\n"
                                   : "The bus refused the event: nothing was published.\n");
}

static void answer(struct m0_server *s, struct m0_conn *c)
{
    const struct m0_req *r = &c->job->req;
    if (path_is(r, "/")) {
        text(s, c, 200, "m0serve publish socket: POST /publish {\"channel\": C, \"data\": D, \"event\": E, "
                        "\"key\": K}\n");
        return;
    }
    if (!path_is(r, "/publish") && !path_is(r, "/publish/")) {
        text(s, c, 404, "Not Found (POST /publish)\n");
        return;
    }
    if (strcmp(r->method, "POST") != 0) {
        reply(s, c, 405, "text/plain; charset=utf-8", "Method Not Allowed (POST /publish)\n", "Allow", "POST");
        return;
    }
    if (atomic_load(&s->life.draining)) {
        /* Stopping or being replaced: a held stream here is being closed,
         * and its readers go elsewhere. A new connection reaches a
         * serving worker (or finds the socket gone: the server stops). */
        text(s, c, 503, "Draining: this worker is stopping and published nothing; publish again on a new "
                        "connection.\n");
        return;
    }
    size_t n = 0;
    char *body = body_of(r, &n);
    if (body == NULL) {
        text(s, c, 500, "Could not read the request body.\n");
        return;
    }
    struct m0_pubreq p;
    int status = m0_pubreq_parse(&p, body, n);
    free(body);
    if (status != 200) {
        char msg[M0_PUBREQ_ERR_MAX + 2];
        snprintf(msg, sizeof msg, "%s\n", p.err);
        text(s, c, status, msg);
    } else {
        publish(s, c, &p);
    }
    m0_pubreq_free(&p);
}

static int complete(struct m0_server *s, struct m0_conn *c)
{
    struct m0_broker_batch *b = m0_broker_grip_take(m0_ext_peek(s, &m0_grip_publisher_ext), m0_conn_slot(s, c));
    if (c->state != M0_CONN_RUN || c->job->route != &m0_pubsock_endpoint) {
        m0_broker_batch_free(b);
        return M0_EP_ANSWERED;
    }
    if (b == NULL || b->gen != c->gen) {
        m0_broker_batch_free(b);
        text(s, c, 500, "The publish's outcome was not recorded.\n");
        return M0_EP_ANSWERED;
    }
    if (b->rc == M0_OK) {
        uint64_t id = b->id;
        m0_broker_batch_free(b);
        published(s, c, id);
        return M0_EP_ANSWERED;
    }
    /* Never a silent drop: not published (503), or perhaps (504). */
    char msg[sizeof b->err + 40];
    int unknown = b->rc == M0_BROKER_UNKNOWN;
    snprintf(msg, sizeof msg, unknown ? "%s\n" : "Not published: %s\n", b->err);
    m0_warn("publish socket: publish through the broker failed: %s", b->err);
    m0_broker_batch_free(b);
    m0_mx_add(m0_metrics_block(), M0_MX_PUBLISH_ERRORS, 1);
    text(s, c, unknown ? 504 : 503, msg);
    return M0_EP_ANSWERED;
}

/* ------------------------------------------------------------ the endpoint */

static int listener(const struct m0_config *cfg)
{
    return cfg->publish_listener;
}

/* Everything sent to the publish socket is its (the router asks no one
 * else there); its body is read, bounded by its own small limits. */
static unsigned claims(struct m0_server *s, struct m0_conn *c)
{
    int l = c->job->lidx;
    return l >= 0 && l == s->cfg->publish_listener ? M0_EP_CLAIMED | M0_EP_READS_BODY : 0;
}

static int answer_ep(struct m0_server *s, struct m0_conn *c, int head_only)
{
    (void)head_only;
    answer(s, c);
    return c->flags & C_RUNNER ? M0_EP_PENDING : M0_EP_ANSWERED;
}

const struct m0_endpoint m0_pubsock_endpoint = {
    .name = "publish",
    .flags = M0_EP_CLAIMED | M0_EP_READS_BODY | M0_EP_OWN_LISTENER,
    .claims = claims,
    .answer = answer_ep,
    .complete = complete,
    .listener = listener,
    .limits = &m0_pubreq_limits,       /* a 413 before a large body is read */
};
