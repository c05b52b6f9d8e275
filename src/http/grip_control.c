/*
 * grip_control.c — the GRIP control port (see grip_control.h).
 *
 * Why C rather than a Python shim: the body's parse (epcp.c) and the
 * publish (bus.c) are C already; the control port then needs no GIL, no
 * runner and no application import, and a publish storm cannot take the
 * application's threads.
 *
 * Nothing is read for a client without the key: the route, the method, the
 * credential and the declared size are judged from the head alone
 * (its endpoint's claim, asked once when the head is complete: endpoint.h);
 * only an authenticated publish within --grip-max-body has its body read,
 * and every other verdict is answered before a byte of it is read.
 *
 * With --broker the items go through Redis, a round trip the loop must
 * not wait for: they are handed to the loop's publisher thread
 * (broker_grip.h), the connection waits in RUN as for a runner (C_RUNNER:
 * a client that leaves meanwhile is an ORPHAN until the completion, and
 * the worker's drain waits for it), and m0_grip_control_complete answers
 * at the DONE completion.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "m0/broker_grip.h"
#include "m0/broker_pub.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/endpoint.h"
#include "m0/epcp.h"
#include "m0/grip_control.h"
#include "m0/grip_item.h"
#include "m0/http.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/pubep.h"

#define PENDING 1   /* publish_all: handed to the broker publisher, answered at its completion */

/* With --broker: the frames, in order, to the loop's publisher thread
 * (made at the first publish); the connection waits for its completion as
 * for a runner's. Returns PENDING, or 503 when no thread can be had. */
static int hand_over(struct m0_server *s, struct m0_conn *c, const struct m0_epcp_publish *pub,
                     const struct m0_buf *frames)
{
    unsigned n = 0;
    for (unsigned i = 0; i < pub->nitems; i++)
        n += frames[i].len != 0;
    struct m0_broker_grip *gp = m0_pubep_publisher(s);
    if (gp == NULL)
        return 503;
    struct m0_broker_batch *b = m0_broker_batch_new(m0_conn_slot(s, c), c->gen, n);
    for (unsigned i = 0; i < pub->nitems; i++) {
        const struct m0_epcp_item *it = &pub->items[i];
        if (frames[i].len != 0)
            m0_broker_batch_add(b, it->channel.p, it->channel.len, frames[i].data, frames[i].len);
    }
    m0_pubep_hand_over(s, c, gp, b);
    return PENDING;
}

/* Publish every item, in order, after checking that each fits the bus
 * (one too large refuses the whole request: nothing half-published).
 * Returns the status to answer: 200, 413 or 503 — or PENDING, with
 * --broker, when the publisher thread has them (answered later). */
static int publish_all(struct m0_server *s, struct m0_conn *c, const struct m0_epcp_publish *pub)
{
    struct m0_buf *frames = calloc(pub->nitems ? pub->nitems : 1, sizeof *frames);
    size_t limit = m0_broker != NULL ? M0_BROKER_FRAME_MAX : M0_BUS_MAX_PAYLOAD;
    int status = 200, any = 0;
    for (unsigned i = 0; i < pub->nitems && status == 200; i++) {
        const struct m0_epcp_item *it = &pub->items[i];
        if (m0_grip_item_encode(&frames[i], it) != M0_OK)
            continue;        /* hint, refresh, a ws-message close: nothing a hold here takes */
        any = 1;
        if (frames[i].len > limit)
            status = 413;        /* the channel name is valid: m0_epcp_parse checked it */
    }
    if (status == 200 && any && m0_broker != NULL) {
        status = hand_over(s, c, pub, frames);
    } else {
        for (unsigned i = 0; i < pub->nitems && status == 200; i++) {
            const struct m0_epcp_item *it = &pub->items[i];
            uint64_t id;
            if (frames[i].len == 0)
                continue;
            int rc = m0_bus_publish_frame(it->channel.p, it->channel.len, frames[i].data, frames[i].len, &id);
            if (rc == M0_AGAIN)
                status = 503;
            else if (rc != M0_OK)
                status = 413;
        }
    }
    for (unsigned i = 0; i < pub->nitems; i++)
        m0_buf_free(&frames[i]);
    free(frames);
    return status;
}

/* 200 "Published" (JSON when the client accepts it, as Pushpin answers). */
static void published(struct m0_server *s, struct m0_conn *c)
{
    const struct m0_hdr *acc = m0_req_header(&c->job->req, "accept");
    int json = acc != NULL && memmem(acc->value, acc->value_len, "application/json", 16) != NULL;
    if (json)
        m0_pubep_reply(s, c, 200, "application/json", "{\"message\": \"Published\"}\n", NULL, NULL);
    else
        m0_pubep_reply(s, c, 200, "text/plain", "Published\n", NULL, NULL);
}

static int complete(struct m0_server *s, struct m0_conn *c)
{
    struct m0_broker_batch *b = m0_pubep_outcome(s, c, &m0_grip_control_endpoint, "text/plain");
    if (b == NULL)
        return M0_EP_ANSWERED;
    if (b->rc == M0_OK) {
        m0_broker_batch_free(b);
        published(s, c);
        return M0_EP_ANSWERED;
    }
    /* Never a silent drop: what was published, and what may have been. */
    char msg[sizeof b->err + 200];
    if (b->rc == M0_BROKER_UNKNOWN)
        snprintf(msg, sizeof msg, "Broker error: %s. Item %u of %u: outcome unknown; %u before it published, none "
                 "after it.\n", b->err, b->published + 1, b->nitems, b->published);
    else if (b->published == 0)
        snprintf(msg, sizeof msg, "Broker unavailable: %s. Nothing was published.\n", b->err);
    else
        snprintf(msg, sizeof msg, "Broker unavailable: %s. The first %u of %u items were published, the rest "
                 "not.\n", b->err, b->published, b->nitems);
    m0_warn("GRIP control: publish through the broker failed after %u of %u items: %s", b->published, b->nitems,
            b->err);
    m0_broker_batch_free(b);
    m0_pubep_reply(s, c, 503, "text/plain", msg, NULL, NULL);
    return M0_EP_ANSWERED;
}

static int verdict(struct m0_server *s, struct m0_conn *c)
{
    const struct m0_req *r = &c->job->req;
    if (m0_req_path_is(r, "/"))
        return 200;
    if (!m0_req_path_is(r, "/publish") && !m0_req_path_is(r, "/publish/"))
        return 404;
    if (strcmp(r->method, "POST") != 0)
        return 405;
    const struct m0_hdr *auth = m0_req_header(r, "authorization");
    if (auth == NULL ||
        !m0_grip_bearer_ok(auth->value, auth->value_len, s->cfg->grip_key, s->cfg->grip_key_len, (int64_t)time(NULL))) {
        m0_warn("GRIP control: publish refused (%s credential) from %s", auth == NULL ? "no" : "a bad",
                c->job->remote_addr[0] ? c->job->remote_addr : "a unix socket");
        return 401;
    }
    if (r->content_length > 0 && (uint64_t)r->content_length > s->cfg->grip_max_body)
        return 413;
    return 0;
}

static void answer(struct m0_server *s, struct m0_conn *c, int verdict)
{
    const struct m0_req *r = &c->job->req;
    const char *tp = "text/plain";
    switch (verdict) {
    case 0:
        break;                   /* an authenticated publish: its body is read */
    case 200:
        m0_pubep_reply(s, c, 200, tp, "m0serve GRIP control\n", NULL, NULL);
        return;
    case 401:
        m0_pubep_reply(s, c, 401, tp, "Unauthorized\n", "WWW-Authenticate", "Bearer");
        return;
    case 405:
        m0_pubep_reply(s, c, 405, tp, "Method Not Allowed\n", "Allow", "POST");
        return;
    case 413:
        m0_pubep_reply(s, c, 413, tp, "Request body too large.\n", NULL, NULL);
        return;
    default:
        m0_pubep_reply(s, c, 404, tp, "Not Found\n", NULL, NULL);
        return;
    }
    size_t n;
    char *body = m0_req_body_whole(r, &n);
    if (body == NULL) {
        m0_pubep_reply(s, c, 500, tp, "Could not read the request body.\n", NULL, NULL);
        return;
    }
    struct m0_epcp_publish pub;
    int status = m0_epcp_parse(&pub, body, n);
    free(body);
    if (status != 200) {
        char msg[M0_EPCP_ERR_MAX + 2];
        snprintf(msg, sizeof msg, "%s\n", pub.err[0] ? pub.err : "Invalid request.");
        m0_epcp_free(&pub);
        m0_pubep_reply(s, c, status, tp, msg, NULL, NULL);
        return;
    }
    status = publish_all(s, c, &pub);
    m0_epcp_free(&pub);
    if (status == PENDING)
        return;              /* m0_grip_control_complete answers */
    if (status == 413)
        m0_pubep_reply(s, c, 413, tp, "Item too large.\n", NULL, NULL);
    else if (status == 503)
        m0_pubep_reply(s, c, 503, tp, m0_broker != NULL ? "The broker publisher could not be started.\n"
                                                        : "No bus to publish on.\n", NULL, NULL);
    else
        published(s, c);
}

/* ------------------------------------------------------------ the endpoint */

static int listener(const struct m0_config *cfg)
{
    return cfg->grip_listener;
}

/* Everything sent to the control port is its; the verdict is reached once,
 * from the head (the credential checked before any byte of the body is
 * read), and only an authenticated publish within --grip-max-body reads
 * its body (a chunked one capped there too). */
static unsigned claims(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    if (job->lidx < 0 || job->lidx != s->cfg->grip_listener)
        return 0;
    job->route_verdict = (int16_t)verdict(s, c);
    if (job->route_verdict != 0)
        return M0_EP_CLAIMED;
    m0_http_cap_body(&job->http, s->cfg->grip_max_body);
    return M0_EP_CLAIMED | M0_EP_READS_BODY;
}

static int answer_ep(struct m0_server *s, struct m0_conn *c, int head_only)
{
    (void)head_only;
    answer(s, c, c->job->route_verdict);
    return c->flags & C_RUNNER ? M0_EP_PENDING : M0_EP_ANSWERED;
}

const struct m0_endpoint m0_grip_control_endpoint = {
    .name = "grip-control",
    .flags = M0_EP_CLAIMED | M0_EP_READS_BODY | M0_EP_OWN_LISTENER,
    .claims = claims,
    .answer = answer_ep,
    .complete = complete,
    .listener = listener,
};
