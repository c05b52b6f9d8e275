/*
 * pubsock.h — the server's local publish socket (pubsock.c): how a process
 * on the same host that is not a worker (a shell, a cron job, a Celery
 * worker) publishes to the server's held streams without a broker.
 * docs/realtime.md, "Publishing from outside the server".
 *
 * A unix stream socket the master makes before the first fork
 * (listeners.h, m0_publish_listen; its path: pubpath.h), which the loops
 * of every worker accept on and answer in C — no Python, no application —
 * as HTTP/1.1 (so `curl --unix-socket` works):
 *
 *   POST /publish   {"channel": C, "data": D, "event": E?, "key": K?}   (pubreq.h)
 *   → 200 {"id": N}   the event's global id
 *
 * The event goes out exactly as a view's m0pub.publish(C, D, event=E,
 * key=K) would send it: on the local bus with the next id of the shared
 * counter (bus.h: every worker's held streams, the same ordering and loss
 * rules), or with --broker through Redis (broker_pub.h, on the loop's
 * publisher thread, broker_grip.h) with the key. Who may publish is who
 * may connect: the socket file's permissions (no token).
 *
 * Answers (text/plain but the 200): 400 naming the member and the rule it
 * breaks (pubreq.h; the key: broker_url.h); 404 for another path (GET /
 * answers what this is); 405 for another method; 413 for a body over
 * M0_PUBREQ_BODY_MAX (before it is read) or an event over the bus's frame
 * limit; 503 "draining" when the worker is stopping (nothing published:
 * publish again, on a new connection), or with --broker when the broker
 * could not take it (not published); 504 with --broker when it was sent
 * and no answer came (it may have been published; the same key again
 * publishes it at most once). Loop thread only.
 */
#ifndef M0_PUBSOCK_H
#define M0_PUBSOCK_H

struct m0_endpoint;

/* The publish socket's endpoint (endpoint.h): it owns its listener
 * (config.h: publish_listener) and answers every request there, as above;
 * with --broker the event is handed to the publisher thread and the
 * connection waits (RUN, C_RUNNER) for the DONE completion of its slot,
 * answered then: 200 with the id, 503 (not published) or 504 (outcome
 * unknown); a connection no longer waiting for it is left as it is. */
extern const struct m0_endpoint m0_pubsock_endpoint;

#endif
