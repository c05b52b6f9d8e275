/*
 * wshold_open.c — the endpoint that opens a WebSocket over HTTP (see
 * wshold_open.h): the handshake checked, its OPEN posted to the mount's
 * view, the answer made the hold's approval (the 101, the hold taken as an
 * M0-Hold: websocket approval is) or the client's answer (Pushpin's
 * "rejected": the application's own response; 502 for one it cannot
 * follow). The socket's life after it is wshold_woh.c's.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "m0/body.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/dispatch.h"
#include "m0/endpoint.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/loop.h"
#include "m0/request.h"
#include "m0/response.h"
#include "m0/rt.h"
#include "m0/runner.h"
#include "m0/server.h"
#include "m0/sse.h"
#include "m0/target.h"
#include "m0/timer.h"
#include "m0/woh.h"
#include "m0/ws.h"
#include "m0/wshold_open.h"
#include "wshold_woh.h"

static void new_cid(char out[M0_WOH_CID_LEN + 1])
{
    unsigned char r[M0_WOH_CID_LEN / 2];
    ssize_t got = getrandom(r, sizeof r, GRND_NONBLOCK);
    if (got != (ssize_t)sizeof r) {
        /* No entropy yet (early boot): the clock, the process and the
         * buffer's place, unique enough to tell sockets apart. */
        uint64_t x = m0_clock_us(), y = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)out;
        memcpy(r, &x, sizeof x);
        memcpy(r + sizeof x, &y, sizeof y);
    }
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(out + 2 * i, 3, "%02x", r[i]);
}

/* Pushpin's answer to an origin it cannot follow. */
static void bad_gateway(struct m0_job *job)
{
    static const char msg[] = "Error while proxying to origin.\n";
    const char *why;
    m0_resp_reset(&job->resp);
    m0_head_reset(&job->head);
    m0_body_reset(&job->body);
    m0_head_status(&job->head, 502, NULL, 0);
    m0_head_add(&job->head, "Content-Type", 12, "text/plain", 10, &why);
    if (m0_job_commit(job, (int64_t)sizeof msg - 1, 0) == M0_OK)
        job->resp.body_bytes += m0_body_emit(&job->body, &job->resp.out, msg, sizeof msg - 1);
    job->body.keep = 0;
}

/* The answer is not an acceptance: it is the client's, as the application
 * made it (head and body), and the connection closes after it. */
static void pass_on(struct m0_job *job)
{
    struct m0_buf body = job->resp.out;
    memset(&job->resp.out, 0, sizeof job->resp.out);
    int status = job->head.status;
    m0_body_reset(&job->body);
    job->resp.flags &= ~M0_RESP_HOLD;
    job->head.hold = M0_HOLD_NONE;
    if (m0_job_commit(job, (int64_t)m0_buf_unread(&body), 0) == M0_OK) {
        job->resp.body_bytes += m0_body_emit(&job->body, &job->resp.out, body.data + body.off, m0_buf_unread(&body));
        m0_body_finish(&job->body, &job->resp.out);
    }
    job->resp.status = status;
    job->body.keep = 0;
    m0_buf_free(&body);
}

/* The channels the OPEN answer's first c:subscribe messages name, as the
 * hold's (subscribed with it, from the OPEN's dispatch on). */
static void first_channels(struct m0_job *job, const char *p, size_t n, const char *prefix_field, size_t pfl)
{
    char prefix[M0_WOH_PREFIX_MAX];
    size_t plen = 0;
    if (prefix_field == NULL || m0_woh_grip_extension(prefix_field, pfl, prefix, &plen) != 1)
        return;
    const char *names[M0_HEAD_MAX_CHANNELS];
    size_t lens[M0_HEAD_MAX_CHANNELS];
    size_t k = 0, off = 0;
    struct m0_woh_event ev;
    struct m0_woh_ctl ctl = {0};
    struct m0_buf store = {0};
    /* Pass one: the names, into one store (their pointers taken after). */
    size_t at[M0_HEAD_MAX_CHANNELS];
    while (m0_woh_next(p, n, &off, &ev) == 1 && k < M0_HEAD_MAX_CHANNELS) {
        const char *why;
        if (ev.type != M0_WOH_TEXT || ev.len < 2 || ev.content[0] != 'c' || ev.content[1] != ':' ||
            m0_woh_control(ev.content + 2, ev.len - 2, &ctl, &why) != M0_OK || ctl.type != M0_WOH_CTL_SUBSCRIBE ||
            m0_sse_channel_error(ctl.channel.data, ctl.channel.len) != NULL)
            continue;
        int dup = 0;
        for (size_t i = 0; i < k && !dup; i++)
            dup = lens[i] == ctl.channel.len && memcmp(store.data + at[i], ctl.channel.data, lens[i]) == 0;
        if (dup)
            continue;
        at[k] = store.len;
        lens[k++] = ctl.channel.len;
        m0_buf_append(&store, ctl.channel.data, ctl.channel.len);
    }
    m0_woh_ctl_free(&ctl);
    for (size_t i = 0; i < k; i++)
        names[i] = store.data + at[i];
    if (k > 0)
        m0_head_set_channels(&job->head, names, lens, k);
    m0_buf_free(&store);
}

/* The OPEN's answer (its view returned): the hold to take, or the
 * client's answer. */
static int opened(struct m0_server *s, struct m0_conn *c)
{
    (void)s;
    struct m0_job *job = c->job;
    struct m0_resp *rs = &job->resp;
    if ((rs->flags & M0_RESP_ABORT) || rs->status == 0 || (rs->status == 500 && m0_buf_unread(&rs->out) == 0 &&
                                                          job->head.lines.len == 0)) {
        m0_resp_reset(rs);
        m0_error_response(&rs->out, 500, "the application raised an error; see the server log", 1, 0);
        rs->status = 500;
        job->body.keep = 0;
        return M0_EP_AS_RUNNER;
    }
    size_t ctl = 0;
    const char *ct = m0_woh_field(&job->head, "content-type", &ctl);
    if (job->head.status != 200 || ct == NULL || !m0_woh_is_content_type(ct, ctl)) {
        pass_on(job);
        return M0_EP_AS_RUNNER;
    }
    const char *p = rs->out.data != NULL ? rs->out.data + rs->out.off : "";
    size_t n = m0_buf_unread(&rs->out), count, kal = 0;
    int first;
    if (!m0_woh_well_formed(p, n, &first, &count) ||
        (count > 0 ? first != M0_WOH_OPEN : m0_woh_field(&job->head, "keep-alive-interval", &kal) == NULL)) {
        /* Pushpin: the first event of the answer must be OPEN (or none, with
         * keep-alives). */
        m0_warn("%s: the application's answer to a WebSocket's OPEN %s: 502", M0_REQ_LOG(&job->req),
                count > 0 || n > 0 ? "does not begin with OPEN" : "has no OPEN");
        bad_gateway(job);
        return M0_EP_AS_RUNNER;
    }
    size_t el = 0;
    const char *ext = m0_woh_field(&job->head, "sec-websocket-extensions", &el);
    first_channels(job, p, n, ext, el);
    job->head.hold = M0_HOLD_WEBSOCKET;
    rs->flags |= M0_RESP_HOLD;
    rs->status = 101;
    job->hold_start = job->begin_id;     /* what is published meanwhile reaches it (the journal) */
    job->hold_last_id = 0;
    return M0_EP_AS_RUNNER;
}

/* Is path under prefix (a mount prefix: "" or "/seg...", on a segment
 * boundary)? */
static int under(const char *prefix, const char *path, size_t n)
{
    size_t pl = strlen(prefix);
    return pl == 0 || (n >= pl && memcmp(path, prefix, pl) == 0 && (n == pl || path[pl] == '/'));
}

/* A WebSocket handshake under --ws-over-http, to a mount whose runner
 * takes messages (WSGI: an ASGI application speaks WebSocket itself). */
static unsigned woh_claims(struct m0_server *s, struct m0_conn *c)
{
    const char *prefix = s->cfg->ws_over_http;
    const struct m0_req *r = &c->job->req;
    if (prefix == NULL || !under(prefix, r->path, r->path_len))
        return 0;
    const struct m0_hdr *up = m0_req_header(r, "upgrade");
    if (up == NULL || !m0_http_list_has(up->value, up->value_len, "websocket"))
        return 0;
    const struct m0_target *t = m0_endpoint_mount(c);
    if (t == NULL || t->runner == NULL || t->runner->message == NULL || t->runner->submit != NULL)
        return 0;
    return M0_EP_CLAIMED | M0_EP_READS_BODY;
}

static int woh_answer(struct m0_server *s, struct m0_conn *c, int head_only)
{
    (void)head_only;                   /* it reads the whole request */
    struct m0_job *job = c->job;
    const struct m0_target *t = job->route_target;
    struct m0_ws_handshake hs;
    const char *why;
    int status = m0_ws_handshake_check(&job->req, &hs, &why);
    if (status != 0) {
        m0_ws_refusal(&job->resp.out, status, why);
        job->resp.status = status;
        job->body.keep = 0;
        return M0_EP_AS_RUNNER;
    }
    if (s->cfg->access_log)
        m0_job_keep_access(job);        /* the socket's line: the handshake as it came */
    struct m0_target_stats *ts = m0_target_stats_of(&s->run.tstats, t);
    ts->requests++;
    job->target = t;
    job->begin_id = m0_rt_newest(s->rt);
    char cid[M0_WOH_CID_LEN + 1];
    new_cid(cid);
    struct m0_ws_snapshot *snap = m0_ws_snapshot_for(&job->req, 1);
    struct m0_buf body = {0};
    m0_woh_put(&body, M0_WOH_OPEN, NULL, 0);
    m0_woh_events_request(&job->req, snap, cid, NULL, &body);
    m0_buf_free(&body);
    m0_ws_snapshot_free(snap);
    job->woh = 1;
    job->msg_opcode = M0_WS_TEXT;
    m0_conn_set_state(s, c, M0_CONN_RUN);
    if (m0_dispatch(job, M0_RUN_MESSAGE, NULL, m0_loop_now(s->loop)) == M0_QUEUED) {
        c->flags |= C_RUNNER;
        ts->in_flight++;                /* until its completion */
        return M0_EP_PENDING;
    }
    return opened(s, c);
}

static int woh_complete(struct m0_server *s, struct m0_conn *c)
{
    if (c->state != M0_CONN_RUN || atomic_load(&c->job->run_state) == M0_JOB_CANCELLED)
        return M0_EP_ANSWERED;           /* answered 503 by the loop; the view never ran */
    return opened(s, c);
}

const struct m0_endpoint m0_woh_endpoint = {
    .name = "ws-over-http",
    .flags = M0_EP_CLAIMED | M0_EP_READS_BODY,
    .claims = woh_claims,
    .answer = woh_answer,
    .complete = woh_complete,
};
