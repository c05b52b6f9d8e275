/*
 * bus.h — the broadcast bus: one SOCK_DGRAM socketpair per worker, made by
 * the master before it forks, and a MAP_SHARED page holding the global
 * event-id counter (DESIGN capability 5).
 *
 * The worker serving listener slot k reads the pairs of its loops (one per
 * event loop, --threads): endpoint k * loops + i is loop i's (one reader at
 * a time: during a SIGHUP the new worker starts reading only after every
 * loop of the old one has stopped, master.c). Every process holds every write end, so
 * m0pub.publish() (through the built-in m0.publish) on any thread of any
 * worker writes one datagram per worker.
 *
 * Ordering and stalls (docs/realtime.md, "Ordering"): ids come from an
 * atomic counter; a publisher takes the shared lock for at most 1 ms to
 * keep ids and sends in order, never waits for room in a bus (a full bus
 * loses the event for that worker, recorded in lost[]), and a worker
 * re-orders what arrives out of order within a window (order.h). So no
 * worker and no publisher can hold up the others for more than a
 * millisecond, and a worker that misses events knows it.
 *
 * Datagram layout (little-endian), then the channel name, then the payload:
 *   0  "M0"      magic
 *   2  kind      'p' publish (payload: one framed SSE event, or a GRIP item, grip_item.h)
 *   3  0
 *   4  u16       channel length
 *   6  u16       0
 *   8  u64       event id
 *   16 u64       0 (reserved)
 */
#ifndef M0_BUS_H
#define M0_BUS_H

#include "m0/types.h"
#include "m0/buf.h"

#define M0_BUS_HDR 24
#define M0_BUS_MAX_PAYLOAD 65536             /* one event's frame, bytes */
#define M0_BUS_MAX_DGRAM (M0_BUS_HDR + 256 + M0_BUS_MAX_PAYLOAD)

struct m0_bus_msg {
    char kind;                 /* 'p' */
    uint64_t id;
    const char *channel;       /* points into the datagram; not NUL-terminated */
    size_t channel_len;
    const char *payload;
    size_t payload_len;
};

/* Decode a datagram. Returns M0_OK or M0_ERR (malformed: drop it). */
int m0_bus_decode(const char *p, size_t n, struct m0_bus_msg *msg);

/* Encode a publish datagram (header, channel, then the framed event
 * already in frame) into out, replacing its contents. */
void m0_bus_encode(struct m0_buf *out, uint64_t id, const char *channel, size_t clen,
                   const char *frame, size_t flen);

#include <pthread.h>

/* The MAP_SHARED page every process of the server maps. */
struct m0_bus_shared {
    uint64_t counter;          /* the last event id handed out */
    pthread_mutex_t lock;      /* process-shared, robust: held from id to last send, never
                                  while waiting; taken for at most 1 ms */
    uint64_t lost[];           /* per worker: newest id a publisher could not deliver */
};

/* The bus, set up by the master (m0_bus_create) and inherited by the
 * workers. */
struct m0_bus {
    int nworkers;              /* endpoints: workers × loops per worker */
    int *read_fds;             /* one per endpoint: its loop reads it */
    int *write_fds;            /* one per endpoint: anyone publishes to it */
    struct m0_bus_shared *shared;
    uint64_t *counter;         /* &shared->counter */
    uint64_t *lost;            /* shared->lost */
};

/* Create n pairs and the counter page. Returns M0_OK or M0_ERR (errno). */
int m0_bus_create(struct m0_bus *bus, int n);

/* The last id handed out so far (0 before the first). A loop with another
 * source of events knows its own newest id (rt.h, m0_rt_newest). */
uint64_t m0_bus_last_id(void);

/*
 * Publish one event: take the next id and write the framed event (WHATWG
 * SSE; event may be NULL) to every worker's bus. The shared lock keeps ids
 * and sends in order when it can be had within 1 ms; a send never waits:
 * a worker whose bus is full misses the event and gets it marked lost
 * (m0_bus_mark_lost), so its streams are told (m0-gap). Takes at most
 * about a millisecond plus one non-blocking send per worker.
 * Returns M0_OK with *id_out set, M0_AGAIN without a bus (not --realtime),
 * M0_ERR for a bad channel or an oversized frame. Call without the GIL.
 */
int m0_bus_publish(const char *channel, size_t clen, const char *event, const char *data, size_t dlen,
                   uint64_t *id_out);

/* The same for a frame made by the caller (a GRIP item, grip_item.h):
 * the next id orders it like any event, but it is sent as it is. */
int m0_bus_publish_frame(const char *channel, size_t clen, const char *frame, size_t flen, uint64_t *id_out);

/* A publisher could not write event id to worker's bus (it was full):
 * record it, so that worker reports a resume across it as a gap instead of
 * replaying a journal with a hole in it. Atomic max; any thread or process. */
void m0_bus_mark_lost(int worker, uint64_t id);
/* The newest id lost for worker (0: none). */
uint64_t m0_bus_lost(int worker);

/* The process-wide bus this worker uses (NULL without --realtime). */
extern struct m0_bus *m0_bus_current;
/* This worker's index (its listener slot), -1 outside a worker. */
extern int m0_bus_index;
/* Event loops per worker (--threads): the endpoints each worker owns. */
extern int m0_bus_loops;

/* The endpoint loop (0..m0_bus_loops-1) of this worker reads, or -1
 * without a bus. */
int m0_bus_endpoint(int loop);

#endif
