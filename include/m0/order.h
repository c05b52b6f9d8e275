/*
 * order.h — the bus's reorder window: a worker delivers events to its
 * registry in id order even when publishers' datagrams arrive out of order.
 *
 * Publishers number events with one shared counter and normally send them
 * in order under a lock; but a publisher may be preempted or stopped
 * between taking its id and sending it, and after a short wait the others
 * go on without it (bus.c). A worker therefore holds back an event that
 * arrives ahead of a missing one, for at most a window; then the missing
 * ids are declared lost (the caller tells its subscribers: m0-gap) and
 * delivery goes on. An id that arrives after it was declared lost, or
 * twice, is late and dropped.
 *
 * Pure, single-threaded (the loop thread). Sizes in bytes, times in ms.
 */
#ifndef M0_ORDER_H
#define M0_ORDER_H

#include "m0/types.h"

struct m0_order_item {
    uint64_t id;
    size_t len;
    char *data;              /* malloc'd copy of the datagram */
};

struct m0_order {
    uint64_t next;           /* the id expected next; 0 until the first one */
    struct m0_order_item *held;   /* ids above next, ascending */
    size_t n, cap;
    size_t bytes;            /* held datagram bytes */
    uint64_t hole_since;     /* when the oldest unfilled hole was seen; 0: none */
    uint64_t late;           /* events dropped as late */
};

#define M0_ORDER_MAX_HELD 4096
#define M0_ORDER_MAX_BYTES (16u << 20)

enum m0_order_verdict {
    M0_ORDER_NOW,            /* in order: deliver it now, then drain m0_order_pop */
    M0_ORDER_HELD,           /* ahead of a missing id: kept (copied) */
    M0_ORDER_LATE,           /* below next or a duplicate: drop it */
};

/* Start expecting next (0: whatever comes first). */
void m0_order_init(struct m0_order *o, uint64_t next);
void m0_order_free(struct m0_order *o);

/* A datagram with this id arrived at now. */
enum m0_order_verdict m0_order_offer(struct m0_order *o, uint64_t id, const char *p, size_t n, uint64_t now);

/* The next held item if it is now in order: returns 1 and fills *it (the
 * caller frees it->data), else 0. */
int m0_order_pop(struct m0_order *o, struct m0_order_item *it);

/*
 * Give up on missing ids once the oldest hole has waited window ms, or at
 * once when the held items exceed their bounds. Returns the highest id
 * declared lost (0: none); the caller then pops.
 */
uint64_t m0_order_expire(struct m0_order *o, uint64_t now, uint64_t window);

/* When m0_order_expire next needs to run (0: nothing held). */
uint64_t m0_order_deadline(const struct m0_order *o, uint64_t window);

#endif
