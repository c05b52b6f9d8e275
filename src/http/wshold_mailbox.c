/*
 * wshold_mailbox.c — a held WebSocket's inbound messages on their way to the
 * runner (wshold_int.h): queued in order and bounded (a full queue stops the
 * reading: TCP pushes back), handed one at a time to the view of the target
 * that gated the socket — each as a request made from the handshake's
 * (ws.h: m0_ws_message_request), its answer back as one frame — or in
 * batches into an owning runner's channel (ASGI, job.h: m0_job_offer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/accesslog.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/dispatch.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/server.h"
#include "m0/target.h"
#include "m0/timer.h"
#include "m0/ws.h"
#include "wshold_int.h"
#include "wshold_woh.h"
#include "wshold_mailbox.h"

/* Messages waiting behind the one in flight before the socket stops being
 * read (and their bytes: at most --ws-max-message more). */
#define QUEUE_MAX 16

void m0_wsbox_push(struct m0_wshold *ws, int opcode, struct m0_ws_parser *p)
{
    struct m0_wsmsg *m = m0_xmalloc(sizeof *m);
    m->next = NULL;
    m->opcode = (uint8_t)opcode;
    memset(&m->payload, 0, sizeof m->payload);
    m0_ws_parser_take(p, &m->payload);
    if (ws->q_tail)
        ws->q_tail->next = m;
    else
        ws->q_head = m;
    ws->q_tail = m;
    ws->q_len++;
    ws->q_bytes += m->payload.len;
    if (ws->q_len > QUEUE_MAX || ws->q_bytes > ws->parser.max_message)
        ws->paused = 1;
}

void m0_wsbox_push_copy(struct m0_wshold *ws, int opcode, const char *p, size_t n)
{
    struct m0_wsmsg *m = m0_xmalloc(sizeof *m);
    m->next = NULL;
    m->opcode = (uint8_t)opcode;
    memset(&m->payload, 0, sizeof m->payload);
    m0_buf_append(&m->payload, p, n);
    if (ws->q_tail)
        ws->q_tail->next = m;
    else
        ws->q_head = m;
    ws->q_tail = m;
    ws->q_len++;
    ws->q_bytes += n;
    if (ws->q_len > QUEUE_MAX || ws->q_bytes > ws->parser.max_message)
        ws->paused = 1;
}

void m0_wsbox_clear(struct m0_wshold *ws)
{
    while (ws->q_head != NULL) {
        struct m0_wsmsg *m = ws->q_head;
        ws->q_head = m->next;
        m0_buf_free(&m->payload);
        free(m);
    }
    ws->q_tail = NULL;
    ws->q_len = 0;
    ws->q_bytes = 0;
}

/* --access-log: the message's request, POST to the socket's path (ws.h). */
static void log_request(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    struct m0_wshold *ws = m0_wshold_of(c);
    if (!s->cfg->access_log)
        return;
    uint64_t now_us = m0_clock_us();
    struct m0_access a = {.addr = job->remote_addr[0] ? job->remote_addr : NULL, .req = &job->req,
                          .status = job->resp.status, .bytes = m0_buf_unread(&job->resp.out),
                          .duration_us = now_us > ws->msg_us ? now_us - ws->msg_us : 0};
    m0_access_log(&a);
}

/* The view answered a message: its body, if any, back to this socket (a
 * socket over HTTP: its answer's events, wshold_woh.c). */
static void reply(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    struct m0_resp *rs = &job->resp;
    struct m0_wshold *ws = m0_wshold_of(c);
    size_t n = m0_buf_unread(&rs->out);
    const char *p = rs->out.data + rs->out.off;
    log_request(s, c);
    if (ws->woh != NULL) {
        m0_woh_answer(s, c);
        return;
    }
    if (rs->flags & M0_RESP_ABORT) {
        m0_wshold_fail(s, c, M0_WS_CLOSE_INTERNAL, "the application failed");
        return;
    }
    if (rs->status / 100 != 2) {
        if (rs->status != 0)
            m0_warn("WebSocket message to %s answered %d: nothing sent to the socket",
                    M0_LOG_TEXT(ws->channel, ws->channel_len), rs->status);
        return;
    }
    if (n == 0 || ws->close_sent || ws->peer_gone)
        return;
    int op = job->head.ws_opcode;
    int utf8 = m0_ws_utf8_valid(p, n);
    if (op == 0)
        op = utf8 ? M0_WS_TEXT : M0_WS_BINARY;
    if (op == M0_WS_TEXT && !utf8) {
        m0_warn("WebSocket message reply marked text is not UTF-8: sent as binary");
        op = M0_WS_BINARY;
    }
    uint8_t head[M0_WS_FRAME_HEAD_MAX];
    size_t hl = m0_ws_frame_head(head, op, n, 1);
    /* The head, then the body in place (no copy of a large reply). */
    m0_hold_send(s, c, (const char *)head, hl);
    m0_hold_send(s, c, p, n);
}

static void restore_client(const struct m0_wshold *ws, struct m0_job *job)    /* the handshake's client */
{
    snprintf(job->remote_addr, sizeof job->remote_addr, "%s", ws->channel + ws->channel_len + 1);
    memcpy(job->peer_addr, job->remote_addr, sizeof job->peer_addr);
    job->remote_port = ws->remote_port;
    job->https = ws->https;
}

/* The job is the loop's again: drop the message's request and answer. */
static void job_done(struct m0_job *job)
{
    m0_req_free(&job->req);          /* its arena too: an idle socket keeps none */
    m0_req_init(&job->req);
    m0_resp_reset(&job->resp);
    if (job->resp.out.cap > 64 * 1024)
        m0_buf_free(&job->resp.out);
    m0_head_free(&job->head);
    m0_body_reset(&job->body);
}

void m0_wsbox_offer_all(struct m0_conn *c)
{
    struct m0_wshold *ws = m0_wshold_of(c);
    while (ws->q_head != NULL) {
        struct m0_wsmsg *m = ws->q_head;
        ws->q_head = m->next;
        m0_job_offer(c->job, m->opcode, m->payload.data, m->payload.len);
        m0_buf_free(&m->payload);
        free(m);
    }
    ws->q_tail = NULL;
    ws->q_len = 0;
    ws->q_bytes = 0;
    ws->in_flight = 1;
}

/* The next request of the socket (its oldest message's; over HTTP, the
 * queued events as one) to the runner of the target that gated it: on the
 * target's pool, or (no pool) here on the loop thread, as its requests
 * run — then its answer at once. */
static void drive_one(struct m0_server *s, struct m0_conn *c)
{
    struct m0_wshold *ws = m0_wshold_of(c);
    struct m0_job *job = m0_conn_job(s, c);      /* an idle socket has none */
    m0_job_reset(job);
    job->gen = c->gen;
    restore_client(ws, job);
    job->target = ws->target;
    if (ws->woh != NULL) {
        m0_woh_request(s, c, job);
    } else {
        struct m0_wsmsg *m = ws->q_head;
        ws->q_head = m->next;
        if (ws->q_head == NULL)
            ws->q_tail = NULL;
        ws->q_len--;
        ws->q_bytes -= m->payload.len;
        job->msg_opcode = m->opcode;
        m0_ws_message_request(&job->req, ws->req, ws->channel, ws->channel_len, m0_conn_slot(s, c), m->opcode,
                              &m->payload);
        m0_buf_free(&m->payload);
        free(m);
    }
    ws->in_flight = 1;
    ws->msg_us = m0_clock_us();
    if (m0_dispatch(job, M0_RUN_MESSAGE, NULL, m0_loop_now(s->loop)) == M0_QUEUED) {
        c->flags |= C_RUNNER | C_WS_MSG;
        m0_target_stats_of(&s->run.tstats, ws->target)->in_flight++;      /* until its completion */
        return;
    }
    ws->in_flight = 0;
    reply(s, c);
    job_done(job);
    m0_conn_job_put(s, c);
    m0_wshold_settle(s, c);
}

/* A target without a pool runs a message here, on the loop thread, as its
 * requests run. */
void m0_wsbox_drive(struct m0_server *s, struct m0_conn *c)
{
    for (;;) {
        if (c->state != M0_CONN_HELD || c->hold == NULL || (c->flags & C_DOOMED))
            return;
        struct m0_wshold *ws = m0_wshold_of(c);
        if (ws->runner_done) {
            m0_wsbox_clear(ws);            /* nobody will take them */
            return;
        }
        if (ws->in_flight)
            return;
        if (ws->woh != NULL && !ws->owned) {
            if (m0_woh_pending(ws)) {
                drive_one(s, c);    /* the queued messages and what is owed, as one request */
                continue;           /* in flight now, or answered inline (the socket may be gone) */
            }
            m0_wsbox_clear(ws);     /* nothing is posted any more: what the peer sends is dropped */
        }
        if (ws->q_head == NULL) {
            if (ws->paused) {
                /* Room again: what was read meanwhile first, then the socket. */
                ws->paused = 0;
                m0_conn_rearm(s, c);
                if (m0_buf_unread(&c->in) > 0) {
                    struct m0_buf in = c->in;
                    memset(&c->in, 0, sizeof c->in);
                    m0_wshold_input(s, c, in.data + in.off, m0_buf_unread(&in));
                    m0_buf_free(&in);
                    continue;
                }
            }
            return;
        }
        if (ws->owned) {
            m0_wsbox_offer_all(c);
            return;
        }
        drive_one(s, c);            /* in flight now, or answered inline (the socket may be gone) */
    }
}

void m0_wsbox_message_done(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    c->flags &= ~C_WS_MSG;
    if (c->state == M0_CONN_HELD && c->hold != NULL && m0_wshold_of(c) != NULL) {
        m0_wshold_of(c)->in_flight = 0;
        reply(s, c);
    }
    job_done(job);
    m0_conn_job_put(s, c);           /* idle again: no job (ORPHAN: a no-op, the release puts it) */
    if (c->state == M0_CONN_HELD && c->hold != NULL) {
        m0_wsbox_drive(s, c);
        m0_wshold_settle(s, c);
    }
    m0_conn_close_doomed(s);
}
