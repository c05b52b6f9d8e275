/*
 * static_http.c — the endpoints of the mount table answered on the loop
 * (static_http.h): a static mount's files (DESIGN capability 10), and the
 * 404 for a path no mount claims. No Python; the body of a file is a file
 * range the connection's one writer sends (conn.h).
 */
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/endpoint.h"
#include "m0/job.h"
#include "m0/static.h"
#include "m0/static_http.h"
#include "m0/target.h"

static unsigned static_claims(struct m0_server *s, struct m0_conn *c)
{
    (void)s;
    const struct m0_target *t = m0_endpoint_mount(c);
    return t != NULL && t->runner == NULL ? M0_EP_CLAIMED : 0;
}

static int static_answer(struct m0_server *s, struct m0_conn *c, int head_only)
{
    struct m0_job *job = c->job;
    const struct m0_target *t = job->route_target;
    struct m0_static_out o;
    (void)head_only;                   /* it reads no body either way */
    m0_target_stats_of(&s->run.tstats, t)->requests++;
    struct m0_body_req br = m0_job_framing(job);
    m0_static_respond(t->files, &job->req, t->prefix_len, &br, &job->head, &job->body, &c->out, &o);
    if (o.fd != -1) {
        c->file_fd = o.fd;
        c->file_off = o.off;
        c->file_left = o.len;
    }
    m0_conn_answer(s, c, o.status, o.body_bytes);
    return M0_EP_ANSWERED;
}

const struct m0_endpoint m0_static_endpoint = {
    .name = "static",
    .flags = M0_EP_CLAIMED,
    .claims = static_claims,
    .answer = static_answer,
};

static unsigned unmounted_claims(struct m0_server *s, struct m0_conn *c)
{
    (void)s;
    (void)c;
    return M0_EP_CLAIMED;              /* the last resort: whatever no one else claimed */
}

static int unmounted_answer(struct m0_server *s, struct m0_conn *c, int head_only)
{
    struct m0_job *job = c->job;
    (void)head_only;
    s->run.tstats.unmatched++;
    struct m0_body_req br = m0_job_framing(job);
    uint64_t n = m0_static_plain(&job->head, &job->body, &c->out, &br, 404, NULL,
                                 "No application is mounted at this path");
    m0_conn_answer(s, c, 404, n);
    return M0_EP_ANSWERED;
}

const struct m0_endpoint m0_unmounted_endpoint = {
    .name = "404",
    .flags = M0_EP_CLAIMED,
    .claims = unmounted_claims,
    .answer = unmounted_answer,
};
