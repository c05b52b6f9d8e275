/*
 * grip_hold_link.c — a GRIP stream's recovery through Grip-Link rel=next
 * (grip_hold_int.h; docs/realtime.md "GRIP"), as Pushpin's HttpSession
 * does it: when an item does not chain on its channel's prev-id (one was
 * missed), or the worker's gap notice comes, or the link's timeout passes
 * without an item on every channel, the loop asks the application for the
 * link — an internal GET through the mount's runner, with Grip-Last naming
 * each channel's last id — and writes its answer on the open stream; its
 * instructions (channels, prev-ids, the next link) replace the hold's.
 * What is published meanwhile waits for the answer, and those items the
 * answer covered (they do not chain on the new prev-ids) are dropped.
 * Loop thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/accesslog.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/dispatch.h"
#include "m0/grip.h"
#include "m0/grip_hold.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/loop.h"
#include "m0/request.h"
#include "m0/response.h"
#include "m0/rt.h"
#include "m0/runner.h"
#include "m0/server.h"
#include "m0/target.h"
#include "m0/timer.h"
#include "grip_hold_int.h"
#include "grip_hold_link.h"

/* link (n bytes: a Grip-Link rel=next URL) as a target of this server,
 * resolved against base (the path it was given on, RFC 3986 §5.2 for the
 * forms a view writes: absolute, "//authority/...", "/path", "path"): its
 * path and query into out. M0_ERR: not a target (a control character, a
 * space, no path). */
static int resolve(const char *base, size_t bl, const char *link, size_t n, struct m0_buf *out)
{
    m0_buf_reset(out);
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)link[i] <= ' ' || link[i] == 0x7f)
            return M0_ERR;
    }
    const char *p = link, *end = link + n;
    const char *colon = memchr(p, ':', n), *slash = memchr(p, '/', n);
    if (colon != NULL && (slash == NULL || colon < slash))
        p = colon + 1;                      /* a scheme: http:, https: */
    if (end - p >= 2 && p[0] == '/' && p[1] == '/') {
        p += 2;                             /* an authority: this server answers it */
        while (p < end && *p != '/' && *p != '?')
            p++;
    }
    if (p < end && *p == '/') {
        m0_buf_append(out, p, (size_t)(end - p));
    } else {
        const char *dir = bl > 0 ? memrchr(base, '/', bl) : NULL;
        if (dir == NULL)
            m0_buf_append(out, "/", 1);
        else
            m0_buf_append(out, base, (size_t)(dir + 1 - base));
        m0_buf_append(out, p, (size_t)(end - p));
    }
    if (out->len == 0 || out->data[0] != '/')
        return M0_ERR;
    return M0_OK;
}

/* The instructions of g into gh (a view's, or a next link's answer): the
 * channels with their prev-ids and filters, the id_format and user meta,
 * the keep-alive of a stream, the next link (resolved against base). */
void m0_griphold_take(struct m0_griphold *gh, const struct m0_grip *g, const char *base, size_t bl)
{
    m0_buf_reset(&gh->ids);
    m0_buf_reset(&gh->id_format);
    m0_buf_reset(&gh->user);
    m0_buf_free(&gh->ka);
    gh->ka_mode = 0;
    gh->ka_ms = 0;
    gh->filters = g->channels[0].filters;
    for (unsigned i = 0; i < g->nchannels; i++) {
        const struct m0_grip_channel *ch = &g->channels[i];
        struct ent e;
        if (find(&gh->ids, m0_grip_str(g, ch->name), ch->name.len, &e))
            continue;                   /* a repeat: its first mention counts */
        put_entry(&gh->ids, m0_grip_str(g, ch->name), ch->name.len, m0_grip_str(g, ch->prev_id), ch->prev_id.len,
                  ch->has_prev_id, ch->filters);
    }
    size_t flen = 0;
    const char *fmt = m0_grip_meta_get(g, "id_format", 9, &flen);
    if (fmt != NULL && (gh->filters & M0_GRIP_F_BUILD_ID))
        m0_buf_append(&gh->id_format, fmt, flen);
    size_t ulen = 0;
    const char *user = m0_grip_meta_get(g, "user", 4, &ulen);
    if (user != NULL)
        m0_buf_append(&gh->user, user, ulen);
    if (g->ka_mode != M0_GRIP_KA_NONE && gh->kind == M0_GRIP_HOLD_STREAM) {
        gh->ka_mode = (uint8_t)g->ka_mode;
        m0_buf_append(&gh->ka, m0_grip_str(g, g->ka_data), g->ka_data.len);
        gh->ka_ms = (uint64_t)g->ka_timeout * 1000;
    }
    struct m0_buf was = gh->link;
    memset(&gh->link, 0, sizeof gh->link);
    if (gh->kind == M0_GRIP_HOLD_STREAM && g->next_link.len > 0 &&
        resolve(base, bl, m0_grip_str(g, g->next_link), g->next_link.len, &gh->link) != M0_OK) {
        m0_warn("Grip-Link %s is not a target of this server: no recovery through it",
                M0_LOG_TEXT(m0_grip_str(g, g->next_link), g->next_link.len));
        m0_buf_free(&gh->link);
    }
    m0_buf_free(&was);
    gh->link_ms = (uint32_t)g->next_timeout * 1000;
    gh->active = 0;
}


/* ------------------------------------------------------ the next link */

/* The link's request: GET the link with the hold's client and Host, and
 * Grip-Last for each channel with a last id (Pushpin's requestNextLink),
 * to the mount the link falls under; its answer is collected (job.h:
 * grip_own). M0_ERR: no mount that can answer it (an ASGI one). */
static int link_request(struct m0_conn *c, struct m0_job *job)
{
    struct m0_griphold *gh = gh_of(c);
    const char *p = gh->link.data;
    size_t n = gh->link.len;
    const char *q = memchr(p, '?', n);
    size_t plen = q != NULL ? (size_t)(q - p) : n;
    const struct m0_target *t = m0_target_match(&m0_targets, p, plen);
    if (t == NULL || t->runner == NULL || t->runner->message == NULL || t->runner->submit != NULL)
        return M0_ERR;
    struct m0_req *r = &job->req;
    m0_req_reset(r);
    r->method = "GET";
    r->method_len = 3;
    r->target = m0_arena_strndup(&r->arena, p, n);
    r->target_len = (uint32_t)n;
    r->path = m0_arena_strndup(&r->arena, p, plen);
    r->path_len = (uint32_t)plen;
    r->query = q != NULL ? m0_arena_strndup(&r->arena, q + 1, n - plen - 1) : "";
    r->query_len = q != NULL ? (uint32_t)(n - plen - 1) : 0;
    r->http_major = r->http_minor = 1;
    r->content_length = -1;
    r->body_fd = -1;
    unsigned nch = 0;
    size_t off = 0;
    struct ent e;
    while (entry(&gh->ids, &off, &e))
        nch++;
    r->hdrs_cap = nch + 1;
    r->hdrs = m0_arena_alloc(&r->arena, r->hdrs_cap * sizeof *r->hdrs);
    if (gh->host != NULL) {
        struct m0_hdr *h = &r->hdrs[r->nhdrs++];
        h->name = "Host";
        h->name_len = 4;
        h->value = m0_arena_strndup(&r->arena, gh->host, strlen(gh->host));
        h->value_len = (uint32_t)strlen(gh->host);
    }
    for (off = 0; entry(&gh->ids, &off, &e);) {
        if (!e.has_last)
            continue;
        struct m0_buf v = {0};
        m0_buf_append(&v, e.name, e.nlen);
        m0_buf_puts(&v, "; last-id=");
        m0_buf_append(&v, e.id, e.idlen);
        struct m0_hdr *h = &r->hdrs[r->nhdrs++];
        h->name = "Grip-Last";
        h->name_len = 9;
        h->value = m0_arena_strndup(&r->arena, v.data, v.len);
        h->value_len = (uint32_t)v.len;
        m0_buf_free(&v);
    }
    job->target = t;
    job->grip_own = 1;
    snprintf(job->remote_addr, sizeof job->remote_addr, "%s", gh->client != NULL ? gh->client : "");
    memcpy(job->peer_addr, job->remote_addr, sizeof job->peer_addr);
    job->remote_port = gh->client_port;
    job->https = gh->client_https;
    return M0_OK;
}

static void fetched(struct m0_server *s, struct m0_conn *c);

/* Ask the application for the link (Pushpin: a missed item, or the
 * link's timeout). Outside a fan-out pass (the tick). */
void m0_griphold_fetch(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    gh->want = 0;
    struct m0_job *job = m0_conn_job(s, c);       /* a held connection has none */
    m0_job_reset(job);
    job->gen = c->gen;
    if (link_request(c, job) != M0_OK) {
        m0_conn_job_put(s, c);
        m0_warn("Grip-Link %s: no WSGI mount answers it: the stream ends",
                M0_LOG_TEXT(gh->link.data, gh->link.len));
        m0_griphold_finish(s, c);
        return;
    }
    gh->fetching = 1;
    gh->fetch_from = m0_rt_newest(s->rt);
    gh->fetch_us = m0_clock_us();
    m0_debug("slot %u: GRIP next link %s", m0_conn_slot(s, c), M0_LOG_TEXT(gh->link.data, gh->link.len));
    if (m0_dispatch(job, M0_RUN_MESSAGE, NULL, m0_loop_now(s->loop)) == M0_QUEUED) {
        c->flags |= C_RUNNER | C_WS_MSG;
        m0_target_stats_of(&s->run.tstats, job->target)->in_flight++;      /* until its completion */
        return;
    }
    fetched(s, c);
}

/* The job is the loop's again: drop the link's request and answer. */
static void link_done(struct m0_server *s, struct m0_conn *c)
{
    struct m0_job *job = c->job;
    if (s->cfg->access_log) {
        uint64_t now = m0_clock_us(), since = c->hold != NULL ? gh_of(c)->fetch_us : now;
        struct m0_access a = {.addr = job->remote_addr[0] ? job->remote_addr : NULL, .req = &job->req,
                              .status = job->resp.status, .bytes = m0_buf_unread(&job->resp.out),
                              .duration_us = now > since ? now - since : 0};
        m0_access_log(&a);
    }
    m0_req_free(&job->req);          /* its arena too: a held stream keeps none */
    m0_req_init(&job->req);
    m0_resp_reset(&job->resp);
    m0_buf_free(&job->resp.out);
    m0_head_free(&job->head);
    m0_body_reset(&job->body);
    m0_conn_job_put(s, c);
}

/* The hold's channels as the registry takes them ('\n'-joined). */
static void channel_list(const struct m0_buf *ids, struct m0_buf *out)
{
    size_t off = 0;
    struct ent e;
    while (entry(ids, &off, &e)) {
        if (out->len > 0)
            m0_buf_append(out, "\n", 1);
        m0_buf_append(out, e.name, e.nlen);
    }
}

/* The link's answer (Pushpin's next-link response): a 2xx whose body goes
 * on the stream (the new instructions' content filters applied) and whose
 * instructions replace the hold's — a stream hold goes on with its
 * channels and prev-ids, no hold with a next link asks that one, no hold
 * without one ends the stream; anything else ends it too. Then what
 * waited, those that do not chain dropped from the front. */
static void fetched(struct m0_server *s, struct m0_conn *c)
{
    struct m0_griphold *gh = gh_of(c);
    struct m0_job *job = c->job;
    const struct m0_grip *g = job->head.grip;
    gh->fetching = 0;
    const char *bad = (job->resp.flags & M0_RESP_ABORT) || job->head.status / 100 != 2 ? "its status is not 2xx"
                      : job->head.grip_err != NULL                                    ? job->head.grip_err
                      : job->head.grip_hold == M0_GRIP_HOLD_RESPONSE                  ? "a response hold"
                                                                                      : NULL;
    if (bad != NULL) {
        m0_warn("GRIP next link %s answered %d (%s): the stream ends", M0_LOG_TEXT(gh->link.data, gh->link.len),
                job->head.status, bad);
        link_done(s, c);
        m0_griphold_finish(s, c);
        return;
    }
    struct m0_buf old = {0};
    channel_list(&gh->ids, &old);
    struct m0_buf base = gh->link;
    memset(&gh->link, 0, sizeof gh->link);
    if (g != NULL && g->nchannels > 0) {
        m0_griphold_take(gh, g, base.data, base.len);
    } else {
        m0_buf_reset(&gh->link);
        if (g != NULL && g->next_link.len > 0 &&
            resolve(base.data, base.len, m0_grip_str(g, g->next_link), g->next_link.len, &gh->link) != M0_OK)
            m0_buf_free(&gh->link);
    }
    m0_buf_free(&base);
    const char *p = job->resp.out.data != NULL ? job->resp.out.data + job->resp.out.off : "";
    size_t n = m0_buf_unread(&job->resp.out);
    if (n > 0) {
        struct m0_buf out = {0};
        if ((gh->filters & CONTENT_FILTERS) && m0_griphold_render(gh, &out, p, n) == M0_OK)
            m0_hold_send(s, c, out.data, out.len);
        else
            m0_hold_send(s, c, p, n);
        m0_buf_free(&out);
    }
    int hold = g != NULL && job->head.grip_hold == M0_GRIP_HOLD_STREAM;
    link_done(s, c);
    if (c->state != M0_CONN_HELD || (c->flags & C_DOOMED)) {
        m0_buf_free(&old);
        return;
    }
    if (!hold) {
        m0_buf_free(&old);
        if (gh->link.len > 0)
            gh->want = 1;         /* more: its next link */
        else
            m0_griphold_finish(s, c);         /* no hold, no link: the stream's end */
        return;
    }
    struct m0_buf now = {0};
    channel_list(&gh->ids, &now);
    /* The lists as text: the same channels in another order only costs a
     * set_channels that keeps every one of them. */
    if (old.len != now.len || (now.len > 0 && memcmp(old.data, now.data, now.len) != 0))
        m0_rt_set_channels(s->rt, m0_conn_slot(s, c), now.data, now.len, gh->fetch_from);
    m0_buf_free(&now);
    m0_buf_free(&old);
    gh->link_due = m0_loop_now(s->loop) + gh->link_ms;
    /* What came while the link was asked, in order. */
    struct m0_buf w = gh->waiting;
    memset(&gh->waiting, 0, sizeof gh->waiting);
    gh->front = 1;
    for (size_t off = 0; off + 4 <= w.len && !gh->finishing && !gh->want && c->state == M0_CONN_HELD;) {
        uint32_t len;
        memcpy(&len, w.data + off, 4);
        m0_griphold_deliver(s, c, w.data + off + 4, len);
        off += 4u + len;
    }
    gh->front = 0;
    m0_buf_free(&w);
}

/* A runner's completion for the held connection: the link's answer. */
void m0_griphold_complete(struct m0_server *s, struct m0_conn *c, const struct m0_completion *done)
{
    if (done->kind != M0_CPL_DONE || !(c->flags & C_WS_MSG))
        return;
    c->flags &= ~C_WS_MSG;
    if (c->state == M0_CONN_HELD && c->hold != NULL)
        fetched(s, c);
    else
        link_done(s, c);
    m0_conn_close_doomed(s);
}

