/*
 * broker_pub.h — the blocking publisher of the broker (broker_pub.c): any
 * thread but a loop's may publish through Redis (m0pub.publish with
 * --broker, `m0serve publish`), and a worker reads where the log stands
 * at boot. See broker.h for the whole design.
 */
#ifndef M0_BROKER_PUB_H
#define M0_BROKER_PUB_H

#include "m0/types.h"
#include "m0/broker_url.h"
#include "m0/bus.h"

/* m0_broker_publish: the command was sent and no reply came (a timeout, a
 * dropped connection): the event may or may not have been published. */
#define M0_BROKER_UNKNOWN -10

/*
 * Publish one event through the broker from the calling thread: frame it
 * (event may be NULL; data is UTF-8, the caller checked the channel and the
 * size), run the publish script, and return its global id in *id_out.
 * key (klen bytes, m0_broker_key_ok; NULL: none) makes the publish
 * idempotent for M0_BROKER_KEY_TTL_MS: a publish with a key the broker
 * remembers returns the id it got then and appends nothing.
 * Blocks the calling thread for one round trip: at most M0_BROKER_TIMEOUT_MS
 * to connect and as much for the reply (a connection kept from an earlier
 * call that the broker closed meanwhile is replaced once: about 3 s in the
 * worst case, a refused connection fails at once). Never call it on a loop
 * thread that has other work (it blocks).
 * Each thread keeps its own connection (freed when the thread exits).
 * Returns M0_OK; M0_ERR with a one-line reason in err (cap bytes) when
 * the broker is unreachable, refused the connection or the script, or
 * answered something else: the event is then not published (never a
 * silent drop); or M0_BROKER_UNKNOWN when the command was sent and its
 * reply did not come (timeout, dropped connection): the script may have
 * run, err says so, and a retry with the same key is safe.
 */
int m0_broker_publish(const char *channel, size_t clen, const char *event, const char *data, size_t dlen,
                      const char *key, size_t klen, uint64_t *id_out, char *err, size_t cap);

/* The largest frame m0_broker_publish_frame takes: what a worker's
 * reader passes on with room for the id line it adds to SSE frames. */
#define M0_BROKER_FRAME_MAX (M0_BUS_MAX_PAYLOAD - 32)

/*
 * Publish a frame the caller made (a GRIP item, grip_item.h: its first
 * bytes tell the readers to pass it on as it is, without an id line) on
 * channel, as m0_broker_publish publishes an event: the next global id in
 * *id_out, the same log, the same blocking, outcomes and errors (no key).
 * frame is binary (flen bytes, at most M0_BROKER_FRAME_MAX). Any thread
 * that may block for a round trip; never a busy loop's.
 */
int m0_broker_publish_frame(const char *channel, size_t clen, const char *frame, size_t flen, uint64_t *id_out,
                            char *err, size_t cap);

/*
 * A blocking connection of the caller's own to the broker (the presence
 * agent's, presence_broker.c), dialled as a publish dials: through the
 * sentinels to the primary (checked with ROLE) when the URL names
 * Sentinel, TLS for rediss://, authenticated and on the URL's database,
 * its reader behind a reply guard (broker_reply.h) so a reply cannot make
 * hiredis allocate without bound. Blocks at most M0_BROKER_TIMEOUT_MS per
 * step (about 2 s each for the sentinel, the connect, each handshake
 * command). Any thread but a busy loop's; one thread at a time per
 * connection. Returns it, or NULL with a one-line reason in err (cap
 * bytes): no broker, an engine other than Redis, unreachable, refused.
 */
struct m0_broker_conn;
struct redisReply;
struct m0_broker_conn *m0_broker_conn_open(char *err, size_t cap);

/*
 * One command (argc arguments, argv[i] of lens[i] bytes, binary-safe) and
 * its reply within M0_BROKER_TIMEOUT_MS: the reply (the caller
 * freeReplyObject()s it; an error reply is a reply), or NULL with a reason
 * in err. After a NULL (or a reply with bytes after it) the connection is
 * out of step: every later command fails at once, and the caller closes
 * it and opens a new one — which, with Sentinel, asks the sentinels again
 * and so follows the primary after a failover.
 */
struct redisReply *m0_broker_conn_command_argv(struct m0_broker_conn *c, int argc, const char **argv,
                                               const size_t *lens, char *err, size_t cap);

/* Close it and free it (c may be NULL). */
void m0_broker_conn_close(struct m0_broker_conn *c);

/* The broker's counter (the newest id issued; 0 when none yet), read with
 * a blocking connection of its own (at most about 2 s). Returns M0_OK or
 * M0_ERR with a reason in err. */
int m0_broker_counter(uint64_t *out, char *err, size_t cap);

#endif
