/*
 * commit.c — the head decision (see commit.h): one decision of keep-alive
 * and one of hold, whoever answers.
 */
#include <string.h>

#include "m0/commit.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/sse.h"

struct m0_body_req m0_commit_framing(const struct m0_req *r, int draining, int complete)
{
    return (struct m0_body_req){
        .http_minor = r->http_minor,
        .keepalive = (r->flags & M0_REQ_KEEPALIVE) && !draining && complete,
        .head = (r->flags & M0_REQ_HEAD) != 0,
    };
}

int m0_commit_may_hold(const struct m0_head *head, const struct m0_req *r, int realtime)
{
    /* A GRIP hold keeps whatever status the view chose (Grip-Status too). */
    return realtime && head->hold == M0_HOLD_STREAM && (head->status / 100 == 2 || head->grip_hold) &&
           !(r->flags & M0_REQ_HEAD);
}

/* Pushpin's answer to an origin response whose instructions it cannot
 * follow (its proxysession.cpp): 502, a fixed text, the view's body
 * dropped (emitting past the promised length writes nothing). */
static int commit_grip_refusal(struct m0_head *head, struct m0_body *body, struct m0_resp *rs,
                               const struct m0_req *r, const struct m0_body_req *br)
{
    static const char msg[] = "Error while proxying to origin.\n";
    const char *why = head->grip_err, *ignored;
    m0_warn("%s: GRIP instructions not followed (%s): answering 502", M0_REQ_LOG(r), why);
    m0_head_reset(head);
    m0_head_status(head, 502, NULL, 0);
    m0_head_add(head, "Content-Type", 12, "text/plain", 10, &ignored);
    if (m0_body_commit(body, &rs->out, head, br, (int64_t)sizeof msg - 1, 0) != M0_OK)
        return M0_ERR;
    size_t took = m0_body_emit(body, &rs->out, msg, sizeof msg - 1);
    if (body->framing != M0_FRAME_NONE)
        rs->body_bytes += took;
    body->truncated = 1;    /* what the view still writes is dropped without a warning each */
    rs->status = 502;
    return M0_OK;
}

int m0_commit_head(struct m0_commit *out, struct m0_head *head, struct m0_body *body, struct m0_resp *rs,
                   const struct m0_req *r, const struct m0_body_req *br, int64_t body_len, int hold)
{
    memset(out, 0, sizeof *out);
    if (head->grip_err != NULL)
        return commit_grip_refusal(head, body, rs, r, br);
    if (m0_body_commit(body, &rs->out, head, br, body_len, hold) != M0_OK)
        return M0_ERR;
    rs->status = head->status;
    if (hold && head->grip_hold) {
        /* GRIP: Last-Event-ID is the application's (its storage answers
         * it); events since the view began are replayed from the journal,
         * and the hold drops those its prev-id says the view already had. */
        out->held = out->grip = 1;
        rs->flags |= M0_RESP_HOLD;
    } else if (hold) {
        /* A reconnect's Last-Event-ID wins over where the view said the
         * stream starts (M0-Last-Event-ID, or a grant's ?lastEventId: a
         * page that rendered the history up to it). */
        const struct m0_hdr *lei = m0_req_header(r, "last-event-id");
        out->last_id = lei ? m0_sse_parse_last_id(lei->value, lei->value_len) : head->resume_from;
        out->held = 1;
        rs->flags |= M0_RESP_HOLD;
    }
    return M0_OK;
}
