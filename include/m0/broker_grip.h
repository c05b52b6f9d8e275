/*
 * broker_grip.h — GRIP items through the broker (broker_grip.c): the
 * control port's publisher thread of one loop (--grip-control with
 * --broker), and how a log entry becomes the frame the engine fans out.
 *
 * The control port (grip_control.c) answers EPCP on the loop thread, but a
 * publish through Redis is a round trip the loop must not wait for. So a
 * request's items are handed over as one batch to a thread of the loop's
 * own, which publishes them in order with the blocking publisher
 * (broker_pub.h: m0_broker_publish_frame) and reports through the loop's
 * completion queue (a DONE completion for the request's slot and
 * generation, loop.h); the loop then takes the batch's outcome and
 * answers. Batches are published one after another, in the order they
 * were handed over.
 */
#ifndef M0_BROKER_GRIP_H
#define M0_BROKER_GRIP_H

#include "m0/types.h"
#include "m0/buf.h"

struct m0_loop;
struct m0_broker_grip;

/* One EPCP request's items, and once published, its outcome. */
struct m0_broker_batch {
    struct m0_broker_batch *next;   /* the thread's queue */
    uint32_t slot, gen;             /* the request's connection */
    unsigned nitems;
    struct m0_buf *channel, *frame; /* nitems each, copies */
    /* The outcome: rc M0_OK (every item published), M0_ERR (item
     * published + 1 was not, nor anything after it) or M0_BROKER_UNKNOWN
     * (that item may have been published; nothing after it was); err names
     * the broker and the reason. */
    int rc;
    unsigned published;             /* items published before the failure */
    uint64_t id;                    /* the id of the last item published (0: none) */
    char err[320];
    /* An event batch (m0_broker_batch_event; the publish socket, pubsock.h):
     * its one item's frame holds the event's data, published as
     * m0_broker_publish publishes a view's event, with its name and key. */
    uint8_t is_event, has_event_name, has_key;
    struct m0_buf event_name, key;  /* NUL-terminated when present */
};

/* A batch for the request of (slot, gen), with room for n items. */
struct m0_broker_batch *m0_broker_batch_new(uint32_t slot, uint32_t gen, unsigned n);
/* Append an item: its channel and frame (copied). At most n. */
void m0_broker_batch_add(struct m0_broker_batch *b, const char *channel, size_t clen, const char *frame,
                         size_t flen);
void m0_broker_batch_free(struct m0_broker_batch *b);

/* A batch of one event for the request of (slot, gen): channel (clen
 * bytes), data (dlen bytes, UTF-8), event (NULL: none) and key (NULL:
 * none), checked by the caller; the publisher frames and publishes it with
 * m0_broker_publish (broker_pub.h), as a view's m0pub.publish does, and
 * sets b->id. */
struct m0_broker_batch *m0_broker_batch_event(uint32_t slot, uint32_t gen, const char *channel, size_t clen,
                                              const char *data, size_t dlen, const char *event, const char *key,
                                              size_t klen);

/* The publisher of loop l, for connection slots below nslots: starts its
 * thread (signals blocked there: they are the loop's). NULL (logged) when
 * the thread cannot be made. Loop thread. */
struct m0_broker_grip *m0_broker_grip_new(struct m0_loop *l, uint32_t nslots);

/* Hand batch b over (owned by the publisher from now on): published on the
 * thread, then a DONE completion (slot, gen) is posted to the loop. A
 * batch of the same slot that nobody took (its client left) is freed.
 * Loop thread. */
void m0_broker_grip_submit(struct m0_broker_grip *g, struct m0_broker_batch *b);

/* After slot's DONE completion: its published batch (the caller frees
 * it), or NULL. Loop thread. */
struct m0_broker_batch *m0_broker_grip_take(struct m0_broker_grip *g, uint32_t slot);

/* Stop: the batch being published is finished (at most one round trip per
 * item left), queued ones are dropped without a completion, the thread is
 * joined. g may be NULL. Loop thread, before the loop is freed. */
void m0_broker_grip_free(struct m0_broker_grip *g);

/* A log entry's frame f (n bytes, as m0_broker_publish or
 * m0_broker_publish_frame appended it) as the engine takes event id: an
 * SSE event gets its id line first; a GRIP item (m0_grip_is_item) is
 * passed on byte for byte, as over the local bus. Replaces out. */
void m0_broker_entry_frame(struct m0_buf *out, uint64_t id, const char *f, size_t n);

#endif
