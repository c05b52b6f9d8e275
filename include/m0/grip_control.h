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

/* Answer the complete request of a connection accepted on the control
 * listener (Pushpin's routes and answers): POST /publish[/] → 200
 * "Published", 400 with EPCP's reason, 401 without the key's Bearer
 * credential, 405 for another method, 413 past M0_EPCP_BODY_MAX or for
 * an item larger than the bus carries (nothing of that request is
 * published), 503 without a bus; with --broker the items are handed to
 * the publisher thread and the connection waits (RUN, C_RUNNER) for
 * m0_grip_control_complete; GET / → 200; anything else → 404. */
void m0_grip_control_answer(struct m0_server *s, struct m0_conn *c);

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
