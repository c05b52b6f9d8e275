/*
 * grant_hold.h — the loop's answer to --grant-path (grant_hold.c, issue
 * 18): PREFIX/sse and PREFIX/ws held on a verified grant's channels with no
 * Python call, or refused (401/403/400, RFC 6750 §3). Loop thread only.
 */
#ifndef M0_GRANT_HOLD_H
#define M0_GRANT_HOLD_H

struct m0_conn;
struct m0_server;

enum { M0_GRANT_ANSWERED = 1, M0_GRANT_HOLD = 2 };

/* Does c's complete request (its head parsed) name PREFIX/sse or PREFIX/ws
 * under --grant-path? 0 when the flag is not given. */
int m0_grant_claims(const struct m0_server *s, const struct m0_conn *c);

/*
 * Answer c's request for a grant endpoint: fills job->head and job->resp
 * as a view's answer would be. M0_GRANT_HOLD: a hold (M0_RESP_HOLD set,
 * the head's channels the grant's, job->target NULL or the --grant-inbound
 * mount), which the caller takes like a view's (m0_hold_subscribe);
 * M0_GRANT_ANSWERED: a complete answer in job->resp (a refusal, a
 * preflight). Either way the caller writes job->resp.out.
 */
int m0_grant_answer(struct m0_server *s, struct m0_conn *c);

#endif
