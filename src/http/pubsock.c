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

#include "m0/broker_grip.h"
#include "m0/broker_pub.h"
#include "m0/broker_url.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/endpoint.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/metrics.h"
#include "m0/pubep.h"
#include "m0/pubreq.h"
#include "m0/pubsock.h"
#include "m0/sse.h"

/* The id line m0pub counts a frame with ("id: " and 2**63, the longest). */
#define ID_LINE_MAX (sizeof "id: 9223372036854775808\n" - 1)

/* Every answer but the 200's is text. */
#define TEXT "text/plain; charset=utf-8"

static void text(struct m0_server *s, struct m0_conn *c, int status, const char *body)
{
    m0_pubep_reply(s, c, status, TEXT, body, NULL, NULL);
}

static void published(struct m0_server *s, struct m0_conn *c, uint64_t id)
{
    char body[48];
    snprintf(body, sizeof body, "{\"id\": %llu}\n", (unsigned long long)id);
    m0_mx_add(m0_metrics_block(), M0_MX_PUBLISHES, 1);
    m0_pubep_reply(s, c, 200, "application/json", body, NULL, NULL);
}

/* With --broker: the event to the loop's publisher thread (made at the
 * first publish); the connection waits for its completion as for a
 * runner's. M0_OK, or M0_ERR when no thread can be had. */
static int hand_over(struct m0_server *s, struct m0_conn *c, const struct m0_pubreq *p)
{
    struct m0_broker_grip *pub = m0_pubep_publisher(s);
    if (pub == NULL)
        return M0_ERR;
    m0_pubep_hand_over(s, c, pub, m0_broker_batch_event(m0_conn_slot(s, c), c->gen, p->channel, p->channel_len,
                                                        p->data, p->data_len, p->event, p->key, p->key_len));
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
    if (m0_req_path_is(r, "/")) {
        text(s, c, 200, "m0serve publish socket: POST /publish {\"channel\": C, \"data\": D, \"event\": E, "
                        "\"key\": K}\n");
        return;
    }
    if (!m0_req_path_is(r, "/publish") && !m0_req_path_is(r, "/publish/")) {
        text(s, c, 404, "Not Found (POST /publish)\n");
        return;
    }
    if (strcmp(r->method, "POST") != 0) {
        m0_pubep_reply(s, c, 405, TEXT, "Method Not Allowed (POST /publish)\n", "Allow", "POST");
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
    char *body = m0_req_body_whole(r, &n);
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
    struct m0_broker_batch *b = m0_pubep_outcome(s, c, &m0_pubsock_endpoint, TEXT);
    if (b == NULL)
        return M0_EP_ANSWERED;
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
