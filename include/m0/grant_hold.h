/*
 * grant_hold.h — the loop's answer to --grant-path (grant_hold.c, issue
 * 18): PREFIX/sse and PREFIX/ws held on a verified grant's channels with no
 * Python call, or refused (401/403/400, RFC 6750 §3). Loop thread only.
 */
#ifndef M0_GRANT_HOLD_H
#define M0_GRANT_HOLD_H

struct m0_endpoint;

/*
 * The grant endpoint (endpoint.h): a request whose path names PREFIX/sse
 * or PREFIX/ws under --grant-path (none without the flag), answered from
 * its head (a GET or OPTIONS with content is a 400: a hold cannot follow
 * unread bytes). Its answer fills job->head and job->resp as a view's
 * would (M0_EP_AS_RUNNER): a hold (M0_RESP_HOLD set, the head's channels
 * the grant's, job->target NULL or the --grant-inbound mount), which the
 * protocol takes like a view's (m0_hold_subscribe), or a complete answer
 * (a refusal, a preflight).
 */
extern const struct m0_endpoint m0_grant_endpoint;

#endif
