/*
 * grant_hold.c — signed stream grants on the loop (issue 18, grant.h):
 * GET PREFIX/sse and a WebSocket handshake to PREFIX/ws under --grant-path
 * are answered here, before any target is matched, with no Python call.
 * The grant (an HS256 JWT) is verified in C at the wall clock's second;
 * the request becomes the same hold a view's M0-Hold would have made (the
 * job's head and response filled as m0_job_commit fills them for a view),
 * on the grant's channels — all of them, or the ones the "channel" query
 * parameter picks among them — so Last-Event-ID resume, the journal, the
 * --outbox-limit and the m0-gap notices are the view holds' own. With
 * --grant-expire close (the default) the hold carries the grant's exp
 * (job->grant_exp): an m0-refresh notice --grant-refresh before it, the
 * stream's end at it (hold.h: m0_hold_grant_tick).
 *
 * Refusals (RFC 6750 §3): 401 with WWW-Authenticate: Bearer
 * error="invalid_token" and a one-line public reason (the same for a bad
 * signature and an unknown kid: jwt.h), 400 invalid_request for a token
 * sent twice, 403 for a valid grant that does not cover the channel asked
 * or a cross-origin request from an origin not listed. Never a hold. The
 * operator's reason (the jwt code's name, the kid, sub) is logged at debug.
 *
 * CORS (Fetch §3.2): an Origin listed by --grant-cors-origin gets
 * Access-Control-Allow-Origin: ORIGIN, Access-Control-Allow-Credentials:
 * true and Vary: Origin (EventSource withCredentials sends cookies); an
 * OPTIONS preflight to PREFIX/sse is answered too (an EventSource sends
 * none, a fetch() reader with Authorization does). An Origin neither
 * listed nor the request's own (its Host) is refused with 403, for the
 * stream as for the WebSocket (RFC 6455 §10.2: the server checks Origin).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "m0/body.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/server.h"
#include "m0/endpoint.h"
#include "m0/grant.h"
#include "m0/grant_hold.h"
#include "m0/http.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/origin.h"
#include "m0/percent.h"
#include "m0/response.h"
#include "m0/rt.h"
#include "m0/runner.h"
#include "m0/sse.h"
#include "m0/target.h"

enum which { NONE_, SSE, WS };

/* The path, kid and sub of a debug line, escaped (log_text.h): a sub is
 * whatever the minting application put there, newlines included. */
#define LOG_PATH(r) M0_LOG_TARGET((r)->path, (r)->path_len)
#define LOG_KID(g)  M0_LOG_TEXT((g)->jwt.kid, strlen((g)->jwt.kid))
#define LOG_SUB(g)  M0_LOG_TEXT((g)->jwt.sub, (g)->jwt.sub_len)

/* Which grant endpoint r's path names (PREFIX/sse, PREFIX/ws), if any. */
static enum which endpoint(const struct m0_config *cfg, const struct m0_req *r)
{
    size_t pl = strlen(cfg->grant_path);
    if (r->path_len < pl + 3 || memcmp(r->path, cfg->grant_path, pl) != 0)
        return NONE_;
    const char *rest = r->path + pl;
    size_t rl = r->path_len - pl;
    if (rl == 4 && memcmp(rest, "/sse", 4) == 0)
        return SSE;
    if (rl == 3 && memcmp(rest, "/ws", 3) == 0)
        return WS;
    return NONE_;
}

/* PREFIX/sse and PREFIX/ws under --grant-path: verified and held in C,
 * never the application's; answered from the head (a grant request has no
 * content to read). */
static unsigned claims(struct m0_server *s, struct m0_conn *c)
{
    return s->cfg->grant_path != NULL && endpoint(s->cfg, &c->job->req) != NONE_ ? M0_EP_CLAIMED : 0;
}

/* The request's Origin when it is listed, else NULL; *cross: it is neither
 * listed nor the request's own origin (RFC 6454: scheme, host and port of
 * its Host, on the scheme it arrived on — https only from a trusted
 * proxy, m0_proxy_client — origin.h). */
static const char *allowed_origin(const struct m0_config *cfg, const struct m0_req *r, int https, int *cross)
{
    *cross = 0;
    const struct m0_hdr *o = m0_req_header(r, "origin");
    if (o == NULL)
        return NULL;
    for (unsigned i = 0; i < cfg->ngrant_cors_origins; i++) {
        const char *a = cfg->grant_cors_origins[i];
        if (strlen(a) == o->value_len && memcmp(a, o->value, o->value_len) == 0)
            return a;
    }
    const struct m0_hdr *host = m0_req_header(r, "host");
    if (host != NULL && m0_origin_same(o->value, o->value_len, host->value, host->value_len, https))
        return NULL;                    /* same origin: no CORS needed */
    *cross = 1;
    return NULL;
}

static void cors_lines(struct m0_head *h, const char *origin)
{
    const char *why;
    if (origin == NULL)
        return;
    m0_head_add(h, "Access-Control-Allow-Origin", 27, origin, strlen(origin), &why);
    m0_head_add(h, "Access-Control-Allow-Credentials", 32, "true", 4, &why);
    m0_head_add(h, "Vary", 4, "Origin", 6, &why);
}

/* A refusal with a one-line body (and a challenge for 401/400). */
static void refuse(struct m0_server *s, struct m0_conn *c, int status, const char *challenge, const char *origin,
                   const char *reason)
{
    struct m0_job *job = c->job;
    struct m0_head *h = &job->head;
    const char *why;
    char line[160];
    int n = snprintf(line, sizeof line, "%s\n", reason);
    m0_head_reset(h);
    m0_head_status(h, status, NULL, 0);
    m0_head_add(h, "Content-Type", 12, "text/plain; charset=utf-8", 25, &why);
    m0_head_add(h, "Cache-Control", 13, "no-store", 8, &why);
    if (challenge != NULL)
        m0_head_add(h, "WWW-Authenticate", 16, challenge, strlen(challenge), &why);
    if (status == 405)
        m0_head_add(h, "Allow", 5, "GET", 3, &why);
    cors_lines(h, origin);
    if (endpoint(s->cfg, &job->req) == WS)
        h->app_close = 1;               /* a refused upgrade: Connection: close, as ws.c's refusals */
    m0_job_commit(job, n, 0);
    if (!(job->req.flags & M0_REQ_HEAD)) {
        m0_buf_append(&job->resp.out, line, (size_t)n);
        job->resp.body_bytes = (uint64_t)n;     /* the access log's bytes */
    }
}

/* Answer a CORS preflight for PREFIX/sse (Fetch §3.2.3). */
static void preflight(struct m0_server *s, struct m0_conn *c, const char *origin)
{
    struct m0_job *job = c->job;
    struct m0_head *h = &job->head;
    const char *why;
    m0_head_reset(h);
    m0_head_status(h, 204, NULL, 0);
    cors_lines(h, origin);
    m0_head_add(h, "Access-Control-Allow-Methods", 28, "GET", 3, &why);
    m0_head_add(h, "Access-Control-Allow-Headers", 28, "Authorization, Last-Event-ID", 28, &why);
    m0_head_add(h, "Access-Control-Max-Age", 22, "600", 3, &why);
    m0_job_commit(job, 0, 0);
    (void)s;
}

/* The channels asked for ("channel", comma-separated, percent-decoded into
 * buf) among the grant's: into name/len. 0 when all are granted (n set),
 * else -1 (not covered: 403) or -2 (malformed: 400). */
static int pick(const struct m0_req *r, const struct m0_grant *g, char *buf, size_t cap, const char **name,
                size_t *len, size_t *n)
{
    const char *v;
    size_t vl;
    *n = 0;
    if (r->query == NULL || m0_http_query_param(r->query, r->query_len, "channel", &v, &vl) == 0) {
        for (unsigned i = 0; i < g->nchannels; i++) {
            name[*n] = g->channels[i];
            len[(*n)++] = g->channel_len[i];
        }
        return 0;
    }
    if (vl >= cap)
        return -2;
    for (size_t i = 0; i < vl; i++)
        if (v[i] == '+')
            return -2;                  /* a channel name has no space to spell */
    size_t dl = m0_percent_decode(v, vl, buf);
    const char *p = buf, *end = buf + dl;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t l = (size_t)((comma ? comma : end) - p);
        if (l > 0) {
            if (!m0_grant_covers(g, p, l))
                return -1;
            int dup = 0;
            for (size_t i = 0; i < *n && !dup; i++)
                dup = len[i] == l && memcmp(name[i], p, l) == 0;
            if (!dup) {
                name[*n] = p;
                len[(*n)++] = l;
            }
        }
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return *n > 0 ? 0 : -2;
}

/* Headers a message POST of a granted socket carries (--grant-inbound):
 * M0-Grant-Sub and M0-Grant-Channels, and the inbound view's path as its
 * target; the token's places (Authorization, the query) are not kept. */
static void inbound_request(struct m0_job *job, const struct m0_grant *g, const char *path)
{
    struct m0_req *r = &job->req;
    struct m0_hdr *hd = m0_arena_alloc(&r->arena, (r->nhdrs + 2) * sizeof *hd);
    unsigned n = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        if (r->hdrs[i].name_len == 13 && strncasecmp(r->hdrs[i].name, "authorization", 13) == 0)
            continue;
        hd[n++] = r->hdrs[i];
    }
    char list[M0_GRANT_MAX_CHANNELS * (M0_CHANNEL_MAX + 1)];
    size_t ll = 0;
    for (unsigned i = 0; i < g->nchannels; i++) {
        if (i > 0)
            list[ll++] = ',';
        memcpy(list + ll, g->channels[i], g->channel_len[i]);
        ll += g->channel_len[i];
    }
    hd[n++] = (struct m0_hdr){.name = "M0-Grant-Channels", .name_len = 17,
                              .value = m0_arena_strndup(&r->arena, list, ll), .value_len = (uint32_t)ll};
    if (g->jwt.sub != NULL && m0_http_is_field_value(g->jwt.sub, g->jwt.sub_len))
        hd[n++] = (struct m0_hdr){.name = "M0-Grant-Sub", .name_len = 12,
                                  .value = m0_arena_strndup(&r->arena, g->jwt.sub, g->jwt.sub_len),
                                  .value_len = (uint32_t)g->jwt.sub_len};
    r->hdrs = hd;
    r->nhdrs = r->hdrs_cap = n;
    size_t pl = strlen(path);
    r->target = r->path = m0_arena_strndup(&r->arena, path, pl);
    r->target_len = r->path_len = (uint32_t)pl;
    r->query = "";
    r->query_len = 0;
}

/* Issue 32: the grant's sub is whom the hold counts for in presence (a
 * longer one than a presence list takes is counted, not listed). */
static void hold_extras(struct m0_head *h, const struct m0_grant *g)
{
    if (g->jwt.sub != NULL && g->jwt.sub_len > 0 && g->jwt.sub_len <= M0_HEAD_PRESENCE_MAX) {
        memcpy(h->presence, g->jwt.sub, g->jwt.sub_len);
        h->presence[g->jwt.sub_len] = '\0';
        h->presence_len = (uint8_t)g->jwt.sub_len;
    }
}

/* Where a stream resumes: the Last-Event-ID header's id (read by the
 * commit: from), else the query's last_event_id (or lastEventId,
 * Pushpin's and Mercure's spelling) — a page that rendered the history up
 * to N, or that replaces its EventSource with one on a fresh grant, cannot
 * send the header (WHATWG SSE §9.2.2: only an EventSource's own
 * reconnection does), so it puts the last id it saw in the URL. The header
 * wins: the EventSource's own reconnections of that URL send a newer one. */
static uint64_t last_id(const struct m0_req *r, uint64_t from)
{
    const char *v;
    size_t vl;
    if (m0_req_header(r, "last-event-id") != NULL || r->query == NULL)
        return from;
    if (m0_http_query_param(r->query, r->query_len, M0_GRANT_LAST_ID_PARAM, &v, &vl) == 0 &&
        m0_http_query_param(r->query, r->query_len, "lastEventId", &v, &vl) == 0)
        return from;
    return m0_sse_parse_last_id(v, vl);
}

/* The grant answered: job->head and job->resp a hold on the grant's
 * channels (GRANT_HOLD), or a refusal or preflight (GRANT_ANSWERED). */
enum { GRANT_ANSWERED = 1, GRANT_HOLD = 2 };

static int grant(struct m0_server *s, struct m0_conn *c)
{
    const struct m0_config *cfg = s->cfg;
    struct m0_job *job = c->job;
    const struct m0_req *r = &job->req;
    enum which w = endpoint(cfg, r);
    int cross;
    const char *origin = allowed_origin(cfg, r, job->https, &cross);
    if (w == SSE && strcmp(r->method, "OPTIONS") == 0 && origin != NULL) {
        preflight(s, c, origin);
        return GRANT_ANSWERED;
    }
    if (strcmp(r->method, "GET") != 0) {
        refuse(s, c, 405, NULL, origin, "Method Not Allowed");       /* Allow: GET */
        return GRANT_ANSWERED;
    }
    if (cross) {
        m0_debug("grant %s refused: Origin not allowed (--grant-cors-origin)", LOG_PATH(r));
        refuse(s, c, 403, NULL, NULL, "this origin may not subscribe");
        return GRANT_ANSWERED;
    }
    const char *tok;
    size_t tlen;
    char challenge[256];
    int code = m0_grant_token(r, cfg->grant_cookie, &tok, &tlen);
    struct m0_grant g;
    memset(&g, 0, sizeof g);
    if (code == M0_OK)
        code = m0_grant_verify(tok, tlen, cfg->grant_keys, (int64_t)time(NULL), &g);
    if (code != M0_JWT_OK) {
        m0_debug("grant %s refused: %s (%zu bytes)", LOG_PATH(r),
                 code >= M0_GRANT_NO_TOKEN ? "grant" : m0_jwt_error_name(code), code == M0_OK ? 0 : tlen);
        m0_grant_challenge(code, challenge, sizeof challenge);
        refuse(s, c, m0_grant_http_status(code), challenge, origin, m0_grant_error_reason(code));
        return GRANT_ANSWERED;
    }
    const char *name[M0_GRANT_MAX_CHANNELS];
    size_t len[M0_GRANT_MAX_CHANNELS], n;
    char asked[M0_GRANT_MAX_CHANNELS * (M0_CHANNEL_MAX + 1)];
    int p = pick(r, &g, asked, sizeof asked, name, len, &n);
    if (p != 0) {
        m0_debug("grant %s (kid %s, sub %s) refused: %s", LOG_PATH(r), LOG_KID(&g), LOG_SUB(&g),
                 p == -1 ? "a channel the grant lacks" : "bad channel parameter");
        if (p == -1)
            refuse(s, c, 403, "Bearer error=\"insufficient_scope\"", origin, "the grant does not cover this channel");
        else
            refuse(s, c, 400, NULL, origin, "bad channel parameter");
        m0_grant_clear(&g);
        return GRANT_ANSWERED;
    }
    if (w == WS && cfg->grant_inbound != NULL) {
        job->target = m0_target_match(&m0_targets, cfg->grant_inbound, strlen(cfg->grant_inbound));
        if (job->target == NULL || job->target->runner == NULL || job->target->runner->message == NULL) {
            m0_error("--grant-inbound %s: no mount there takes WebSocket messages: 500", cfg->grant_inbound);
            refuse(s, c, 500, NULL, origin, "this socket cannot take messages");
            m0_grant_clear(&g);
            return GRANT_ANSWERED;
        }
        if (cfg->access_log)
            m0_job_keep_access(job);     /* its access-log line: the request as it came */
        inbound_request(job, &g, cfg->grant_inbound);
    }
    struct m0_head *h = &job->head;
    m0_head_reset(h);
    m0_head_status(h, 200, NULL, 0);
    cors_lines(h, origin);
    m0_head_set_channels(h, name, len, n);
    hold_extras(h, &g);
    m0_debug("grant %s held: kid %s, sub %s, %zu channel(s)", LOG_PATH(r), LOG_KID(&g), LOG_SUB(&g), n);
    /* --grant-expire close: the hold ends at exp (hold.h: m0_hold_grant_*),
     * after an m0-refresh notice; keep: the stream outlives its grant. */
    if (cfg->grant_expire == NULL || strcmp(cfg->grant_expire, "keep") != 0)
        job->grant_exp = g.jwt.exp > 0 ? g.jwt.exp : 1;
    m0_grant_clear(&g);
    if (w == WS) {
        h->hold = M0_HOLD_WEBSOCKET;
        job->resp.status = 200;
        job->hold_last_id = 0;              /* a socket does not resume */
        job->resp.flags |= M0_RESP_HOLD;
    } else {
        h->hold = M0_HOLD_STREAM;
        m0_job_commit(job, -1, 1);        /* the view holds' head; Last-Event-ID read */
        job->hold_last_id = last_id(r, job->hold_last_id);
    }
    job->hold_start = m0_rt_newest(s->rt);
    return GRANT_HOLD;
}

/* The endpoint's answer: as a view's would be, in job->resp (a hold, or
 * a refusal), which the protocol writes and holds (M0_EP_AS_RUNNER). */
static int answer(struct m0_server *s, struct m0_conn *c, int head_only)
{
    const struct m0_req *r = &c->job->req;
    if (head_only && (strcmp(r->method, "GET") == 0 || strcmp(r->method, "OPTIONS") == 0)) {
        /* A stream or a socket with content: nothing would read it, and a
         * hold cannot follow unread bytes (RFC 9110 §9.3.1 lets a server
         * refuse a GET with content). Other methods get the endpoint's 405. */
        m0_conn_error(s, c, 400, "A grant request has no content");
        return M0_EP_ANSWERED;
    }
    m0_conn_set_state(s, c, M0_CONN_RUN);
    grant(s, c);
    return M0_EP_AS_RUNNER;
}

const struct m0_endpoint m0_grant_endpoint = {
    .name = "grant",
    .flags = M0_EP_CLAIMED,
    .claims = claims,
    .answer = answer,
};
