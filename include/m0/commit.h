/*
 * commit.h — the head decision (commit.c): how a response is framed, whether
 * it may be held, and the one commit of its head, for every path that
 * answers a request (the runners on their threads, the loop for what it
 * answers itself). Pure: a request, a head and a few facts in, the framed
 * head and the decision out; unit-tested without a loop (tests/unit/
 * test_commit.c). job.h's m0_job_framing / m0_job_may_hold / m0_job_commit
 * call these with what a job knows.
 */
#ifndef M0_COMMIT_H
#define M0_COMMIT_H

#include "m0/types.h"
#include "m0/body.h"
#include "m0/http.h"
#include "m0/response.h"

/* How r's answer is framed (body.h): keep-alive when the request allows it
 * (RFC 9112 §9.3), the loop is not draining and the request's end is known
 * (complete: a lazy body that has not arrived whole cannot be skipped);
 * HEAD (RFC 9110 §9.3.2); the request's HTTP version. */
struct m0_body_req m0_commit_framing(const struct m0_req *r, int draining, int complete);

/* Is head an M0-Hold: stream that can be kept for r — the mount holds
 * (realtime: --realtime on it), a 2xx (a GRIP hold: whatever status the view
 * chose, Grip-Status too), not HEAD? Elsewhere the same response goes out as
 * an ordinary short one. */
int m0_commit_may_hold(const struct m0_head *head, const struct m0_req *r, int realtime);

/* What a commit decided beside the bytes. */
struct m0_commit {
    uint64_t last_id;     /* a hold: the Last-Event-ID it resumes from — the request's, else the
                             view's head->resume_from (M0-Last-Event-ID); 0: none; a GRIP hold: 0,
                             its storage is the application's */
    uint8_t held;         /* the response is a hold (M0_RESP_HOLD) */
    uint8_t grip;         /* a GRIP hold: its replay starts where the view began, not now */
};

/*
 * Commit head into rs->out with framing br (body_len: the whole body's size
 * when known, else -1), body's encoder set for what follows; rs->status the
 * head's. A hold (hold set: the caller asked m0_commit_may_hold) is marked
 * M0_RESP_HOLD, with its Last-Event-ID in out->last_id (an SSE hold: the
 * request's Last-Event-ID, which wins over the view's M0-Last-Event-ID) or
 * out->grip set (a GRIP hold). A head whose GRIP instructions were refused
 * (head->grip_err) is answered 502 "Error while proxying to origin." instead,
 * as Pushpin answers, the view's body dropped (what is emitted later is
 * discarded: body->truncated). M0_OK, or M0_ERR when a head was committed
 * already (one head per response: nothing is written).
 */
int m0_commit_head(struct m0_commit *out, struct m0_head *head, struct m0_body *body, struct m0_resp *rs,
                   const struct m0_req *r, const struct m0_body_req *br, int64_t body_len, int hold);

#endif
