/*
 * grip_control.h — the GRIP control port (grip_control.c; issue 19):
 * --grip-control's listener, answered by the workers' loops in C, EPCP's
 * POST /publish/ (epcp.h) authenticated with the GRIP key (grip_item.h,
 * m0_grip_bearer_ok). Each item goes to the local bus as one GRIP frame,
 * with the next event id: the ordering and loss rules of m0pub.publish.
 * With --broker each goes through Redis instead (the same log and ids as
 * m0pub.publish there), published off the loop by its publisher thread
 * (broker_grip.h) and answered at that thread's completion.
 * Loop thread only.
 */
#ifndef M0_GRIP_CONTROL_H
#define M0_GRIP_CONTROL_H

struct m0_conn;
struct m0_server;

/* Find the control listener among the worker's listening sockets
 * (s->grip_fd, -1 without --grip-control). */
void m0_grip_control_attach(struct m0_server *s);

/* The control port's decision for a request whose head is complete, made
 * before any byte of its body is read (so that nobody without the key can
 * make a worker buffer a body: issue 27): 0 for an authenticated POST
 * /publish[/] whose Content-Length (if any) is within --grip-max-body —
 * the caller reads its body, capping a chunked one at --grip-max-body
 * (m0_http_cap_body: 413 at the byte that passes it) — else the status of
 * an answer that needs no body, Pushpin's routes in this order: 200 for
 * "/", 404 for another path, 405 for a method other than POST, 401 without
 * the key's Bearer credential (logged), 413 for a Content-Length over
 * --grip-max-body (RFC 9110 §15.5.14). Checks the credential once. */
int m0_grip_control_verdict(struct m0_server *s, struct m0_conn *c);

/* Answer a request of the control listener given its verdict: a non-zero
 * verdict is that answer (text/plain; 401 with WWW-Authenticate: Bearer,
 * 405 with Allow: POST). Verdict 0, its body read whole: 200 "Published",
 * 400 with EPCP's reason (m0_epcp_parse: the channel rule named too), 413
 * for an item larger than the bus carries (nothing of that request is
 * published), 503 without a bus; with --broker the items are handed to
 * the publisher thread and the connection waits (RUN, C_RUNNER) for
 * m0_grip_control_complete. The caller has begun the request. */
void m0_grip_control_answer(struct m0_server *s, struct m0_conn *c, int verdict);

/* With --broker, a publish is answered here, at the DONE completion of its
 * slot (h1.c routes it): 200 when every item was published; else 503 with
 * a short text naming the broker's problem and what was published (items
 * go in order and stop at the first failure: "Nothing was published", the
 * first K of N, or item K's outcome unknown when its reply did not come).
 * A connection no longer waiting for it is left as it is. */
void m0_grip_control_complete(struct m0_server *s, struct m0_conn *c);

/* Stop the loop's broker publisher (its current batch finishes) and free
 * it; before the loop is freed. */
void m0_grip_control_free(struct m0_server *s);

#endif
