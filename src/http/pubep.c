/*
 * pubep.c — what the publish socket and the GRIP control port share (see
 * pubep.h).
 *
 * Why one file: both are publish endpoints answered in C on the loop,
 * with the same small answers and, with --broker, the same hand-over to
 * the loop's one publisher thread and the same completion; they differ
 * in what a request says (pubreq.h, epcp.h) and how the outcome is told.
 */
#include <string.h>

#include "m0/body.h"
#include "m0/broker_grip.h"
#include "m0/conn.h"
#include "m0/job.h"
#include "m0/loop.h"
#include "m0/pubep.h"
#include "m0/server.h"

void m0_pubep_reply(struct m0_server *s, struct m0_conn *c, int status, const char *ctype, const char *body,
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

/* ------------------------------------------------------------ --broker */

/* The loop's broker publisher (server.h: an extension), made at the first
 * publish through the broker, its thread joined when the loop ends. */
static void *publisher_init(struct m0_server *s)
{
    return m0_broker_grip_new(s->loop, s->slots.n);
}

static void publisher_fini(struct m0_server *s, void *state)
{
    (void)s;
    m0_broker_grip_free(state);
}

const struct m0_ext m0_grip_publisher_ext = {.name = "broker-publisher", .init = publisher_init,
                                             .fini = publisher_fini};

struct m0_broker_grip *m0_pubep_publisher(struct m0_server *s)
{
    return m0_ext_of(s, &m0_grip_publisher_ext);
}

void m0_pubep_hand_over(struct m0_server *s, struct m0_conn *c, struct m0_broker_grip *pub,
                        struct m0_broker_batch *b)
{
    c->job->queued_ms = m0_loop_now(s->loop);      /* --request-timeout's view-still-running note counts from here */
    c->flags |= C_RUNNER;
    m0_conn_set_state(s, c, M0_CONN_RUN);
    m0_broker_grip_submit(pub, b);
}

struct m0_broker_batch *m0_pubep_outcome(struct m0_server *s, struct m0_conn *c, const struct m0_endpoint *ep,
                                         const char *ctype)
{
    struct m0_broker_batch *b = m0_broker_grip_take(m0_ext_peek(s, &m0_grip_publisher_ext), m0_conn_slot(s, c));
    if (c->state != M0_CONN_RUN || c->job->route != ep) {
        m0_broker_batch_free(b);
        return NULL;
    }
    if (b == NULL || b->gen != c->gen) {
        m0_broker_batch_free(b);
        m0_pubep_reply(s, c, 500, ctype, "The publish's outcome was not recorded.\n", NULL, NULL);
        return NULL;
    }
    return b;
}
