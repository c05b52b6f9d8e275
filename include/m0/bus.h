/*
 * bus.h — the broadcast bus: one SOCK_DGRAM socketpair per worker, made by
 * the master before it forks, and a MAP_SHARED page holding the global
 * event-id counter (DESIGN capability 5).
 *
 * Every worker reads its own pair's read end in its loop; every process
 * holds every write end, exported to Python as M0_BUS_WRITE_FDS
 * ("fd,fd,...", worker order), so m0pub.publish() on any thread of any
 * worker writes one datagram per worker.
 *
 * Datagram layout (little-endian), then the channel name, then the payload:
 *   0  "M0"      magic
 *   2  kind      'p' publish (payload: one framed SSE event)
 *                'h' hold from a pool thread (no payload; id = Last-Event-ID)
 *   3  0
 *   4  u16       channel length
 *   6  u16       0
 *   8  u64       event id ('p') or Last-Event-ID ('h')
 *   16 u32 slot, 20 u32 gen   (hold only)
 */
#ifndef M0_BUS_H
#define M0_BUS_H

#include "m0/types.h"

#define M0_BUS_HDR 24
#define M0_BUS_MAX_PAYLOAD 65536             /* one event's frame, bytes */
#define M0_BUS_MAX_DGRAM (M0_BUS_HDR + 256 + M0_BUS_MAX_PAYLOAD)

struct m0_bus_msg {
    char kind;                 /* 'p' or 'h' */
    uint64_t id;
    uint32_t slot, gen;
    const char *channel;       /* points into the datagram; not NUL-terminated */
    size_t channel_len;
    const char *payload;
    size_t payload_len;
    uint32_t pid;              /* 'h': the worker the frame is for */
};

/* Decode a datagram. Returns M0_OK or M0_ERR (malformed: drop it). */
int m0_bus_decode(const char *p, size_t n, struct m0_bus_msg *msg);

/* Encode a hold frame for worker pid into out (M0_BUS_HDR + channel_len + 4
 * bytes). Returns the length. */
size_t m0_bus_encode_hold(char *out, uint32_t slot, uint32_t gen, uint64_t last_id,
                          const char *channel, size_t channel_len, uint32_t pid);

#include <pthread.h>

/* The MAP_SHARED page every process of the server maps. */
struct m0_bus_shared {
    uint64_t counter;          /* the last event id handed out */
    pthread_mutex_t lock;      /* process-shared, robust: held from id to last send */
    uint64_t lost[];           /* per worker: newest id a publisher could not deliver */
};

/* The bus, set up by the master (m0_bus_create) and inherited by the
 * workers. */
struct m0_bus {
    int nworkers;
    int *read_fds;             /* one per worker: its loop reads it */
    int *write_fds;            /* one per worker: anyone publishes to it */
    struct m0_bus_shared *shared;
    uint64_t *counter;         /* &shared->counter */
    uint64_t *lost;            /* shared->lost */
};

/* Create n pairs and the counter page. Returns M0_OK or M0_ERR (errno). */
int m0_bus_create(struct m0_bus *bus, int n);

/* The last id handed out so far (0 before the first). */
uint64_t m0_bus_last_id(void);

/*
 * Publish one event: take the next id and write the framed event (WHATWG
 * SSE; event may be NULL) to every worker's bus, all under the shared lock
 * so that every worker receives ids in increasing order. A worker whose bus
 * stays full for 10 ms misses the event and gets it marked lost (its
 * resumes across it report m0-gap). own_loop: the caller is this worker's
 * loop thread (never wait on our own bus). Returns M0_OK with *id_out set,
 * M0_AGAIN without a bus (not --realtime), M0_ERR for a bad channel or an
 * oversized frame. Blocking: call without the GIL.
 */
int m0_bus_publish(const char *channel, size_t clen, const char *event, const char *data, size_t dlen,
                   int own_loop, uint64_t *id_out);

/* A publisher could not write event id to worker's bus (it was full):
 * record it, so that worker reports a resume across it as a gap instead of
 * replaying a journal with a hole in it. Atomic max; any thread or process. */
void m0_bus_mark_lost(int worker, uint64_t id);
/* The newest id lost for worker (0: none). */
uint64_t m0_bus_lost(int worker);

/* The process-wide bus this worker uses (NULL without --realtime). */
extern struct m0_bus *m0_bus_current;
/* This worker's index in the bus. */
extern int m0_bus_index;

#endif
