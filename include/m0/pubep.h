/*
 * pubep.h — what the two publish endpoints answered in C share (pubep.c):
 * the publish socket (pubsock.h) and the GRIP control port
 * (grip_control.h). Their small answers, and with --broker the loop's
 * publisher thread (broker_grip.h) they hand a publish to and take its
 * outcome back from. Loop thread only.
 */
#ifndef M0_PUBEP_H
#define M0_PUBEP_H

struct m0_broker_batch;
struct m0_broker_grip;
struct m0_conn;
struct m0_endpoint;
struct m0_ext;
struct m0_server;

/* The loop's broker publisher (broker_grip.h), shared by both endpoints:
 * an extension (server.h) made at the first publish through the broker;
 * when the loop ends its current batch finishes and its thread is
 * joined. Registered by the composition root (serve.c). */
extern const struct m0_ext m0_grip_publisher_ext;

/* Answer c now with a small body (NUL-terminated, copied), Content-Type
 * ctype, Cache-Control: no-store, and one more field name: value (name
 * NULL: none), framed as c's request allows (m0_job_framing). */
void m0_pubep_reply(struct m0_server *s, struct m0_conn *c, int status, const char *ctype, const char *body,
                    const char *name, const char *value);

/* s's publisher thread, made at the first call; NULL when none can be
 * had (the caller answers 503: nothing was published). */
struct m0_broker_grip *m0_pubep_publisher(struct m0_server *s);

/* Hand b (made for c's slot and generation) to the publisher pub; c
 * waits in RUN as for a runner (C_RUNNER: a client that leaves is an
 * ORPHAN until the completion, and the worker's drain waits for it), and
 * its endpoint's complete answers at the DONE completion. Takes b. */
void m0_pubep_hand_over(struct m0_server *s, struct m0_conn *c, struct m0_broker_grip *pub,
                        struct m0_broker_batch *b);

/* At the DONE completion of c's slot: the batch with its outcome (the
 * caller answers and frees it), or NULL when there is nothing left to
 * answer — c no longer waits for ep's publish (left as it is), or the
 * outcome was not recorded (answered 500 here, in ctype). */
struct m0_broker_batch *m0_pubep_outcome(struct m0_server *s, struct m0_conn *c, const struct m0_endpoint *ep,
                                         const char *ctype);

#endif
