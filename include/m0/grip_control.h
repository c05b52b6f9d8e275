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

struct m0_endpoint;

/*
 * The control port's endpoint (endpoint.h): it owns --grip-control's
 * listener and answers every request there. Its claim decides from the
 * head, before any byte of the body is read (so that nobody without the
 * key can make a worker buffer a body: issue 27): an authenticated POST
 * /publish[/] whose Content-Length (if any) is within --grip-max-body has
 * its body read (a chunked one capped at --grip-max-body by
 * m0_http_cap_body: 413 at the byte that passes it); anything else is
 * answered from the head, Pushpin's routes in this order: 200 for "/", 404
 * for another path, 405 for a method other than POST (Allow: POST), 401
 * without the key's Bearer credential (logged; WWW-Authenticate: Bearer),
 * 413 for a Content-Length over --grip-max-body (RFC 9110 §15.5.14). The
 * credential is checked once.
 *
 * A publish, its body read whole: 200 "Published", 400 with EPCP's reason
 * (m0_epcp_parse: the channel rule named too), 413 for an item larger than
 * the bus carries (nothing of that request is published), 503 without a
 * bus. With --broker the items are handed to the publisher thread and the
 * connection waits (RUN, C_RUNNER) for the DONE completion of its slot,
 * answered then: 200 when every item was published; else 503 with a short
 * text naming the broker's problem and what was published (items go in
 * order and stop at the first failure: "Nothing was published", the first
 * K of N, or item K's outcome unknown when its reply did not come). A
 * connection no longer waiting for it is left as it is.
 */
extern const struct m0_endpoint m0_grip_control_endpoint;

#endif
