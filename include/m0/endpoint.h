/*
 * endpoint.h — who answers a request: the loop's table of endpoints (h2o's
 * handler list), asked once per request when its head is complete
 * (endpoint.c). Loop thread only.
 *
 * The table is filled once by the composition root (serve.c) in a fixed
 * order, which is the precedence: the publish socket, the GRIP control
 * port, the metrics, /health, the grants, the static mounts, the
 * application mounts, the 404 nothing else claims. An endpoint that owns a
 * listener (--metrics-bind, --grip-control, the publish socket) answers
 * everything sent to it, and nothing else answers there; its listener is
 * never handed to another loop.
 *
 * The HTTP/1.1 protocol (h1.c) keeps the endpoint and the flags its claim
 * gave on the job, and acts on them alone: whether the body is read at
 * all (an answer from the head alone closes the connection after it, RFC
 * 9112 §9.6), whether the answerer may start before the body arrives
 * (Expect: 100-continue, RFC 9110 §10.1.1), and who answers. A new
 * endpoint answered in C is a new entry here and in serve.c; the protocol
 * file does not change.
 */
#ifndef M0_ENDPOINT_H
#define M0_ENDPOINT_H

#include <stdint.h>

struct m0_config;
struct m0_conn;
struct m0_limits;
struct m0_server;
struct m0_target;

/* What an endpoint does with a request (struct m0_endpoint.flags, and per
 * request what its claim returns). */
#define M0_EP_CLAIMED      0x01u  /* the request is this endpoint's (every claim says so) */
#define M0_EP_READS_BODY   0x02u  /* its answer reads the body: received (whole, or while it runs) first */
#define M0_EP_EARLY        0x04u  /* it may start before the body: with Expect: 100-continue and a
                                     Content-Length, it runs at the head and the body is read meanwhile */
#define M0_EP_OWN_LISTENER 0x08u  /* it owns a listener (listener()): everything sent there is its */

/* What an answer did (answer's return). */
enum {
    M0_EP_ANSWERED = 0,     /* answered: its response is written through conn.h (m0_conn_answer...) */
    M0_EP_AS_RUNNER,        /* job->resp holds its answer as a runner's would (a hold, too): the
                               protocol writes it (a grant) */
    M0_EP_PENDING,          /* handed on (C_RUNNER: a runner, the broker publisher): complete answers */
};

struct m0_endpoint {
    const char *name;
    unsigned flags;            /* M0_EP_*: what it may do */
    /* Is c's request (its head complete, the client known) this
     * endpoint's? 0: no; else the M0_EP_* it is answered with (CLAIMED,
     * and READS_BODY or EARLY only when this request's answer does: a
     * refusal from the head alone reads nothing). Asked once per request,
     * before any byte of its body is read. */
    unsigned (*claims)(struct m0_server *s, struct m0_conn *c);
    /* Answer c's request: whole (READS_BODY), or from its head alone
     * (head_only: its body is not read, and the connection closes after
     * the answer). Returns M0_EP_ANSWERED, M0_EP_AS_RUNNER or
     * M0_EP_PENDING. */
    int (*answer)(struct m0_server *s, struct m0_conn *c, int head_only);
    /* PENDING: the DONE completion of what it handed on: M0_EP_ANSWERED,
     * or M0_EP_AS_RUNNER (job->resp holds the answer, a hold too: the
     * protocol writes it, as a runner's). NULL: never. */
    int (*complete)(struct m0_server *s, struct m0_conn *c);
    /* OWN_LISTENER: the index of its listener among the worker's (config:
     * -1 when it is not bound). */
    int (*listener)(const struct m0_config *cfg);
    /* OWN_LISTENER: the request parser's limits on it (NULL: --limit-*). */
    const struct m0_limits *limits;
};

/* The most endpoints a loop's table holds. */
#define M0_MAX_ENDPOINTS 16

/* Add ep at the end of s's table (serve.c, before serving; its listener,
 * if it owns one, is marked answered in C: not handed to other loops, its
 * parser limits set at accept). */
void m0_endpoint_add(struct m0_server *s, const struct m0_endpoint *ep);

/* Who answers c's request (its head complete): the first endpoint of the
 * table that claims it — on a listener an endpoint owns, that endpoint —
 * and *flags its claim. Never NULL once the table ends with a catch-all. */
const struct m0_endpoint *m0_endpoint_route(struct m0_server *s, struct m0_conn *c, unsigned *flags);

/* The mount c's request path falls under (target.h: the longest prefix),
 * matched once per request; NULL: none. For the mounts' claims. */
const struct m0_target *m0_endpoint_mount(struct m0_conn *c);

#endif
