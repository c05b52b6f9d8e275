/*
 * broker_nats_pub.h — the NATS engine's process-wide part (broker_nats_pub.c,
 * private to the broker module: see broker_nats.h): the engine's init,
 * publish and counter, the connection settings, the stream.
 */
#ifndef M0_BROKER_NATS_PUB_H
#define M0_BROKER_NATS_PUB_H

#include <signal.h>

#include <nats/nats.h>

#include "m0/broker_url.h"
#include "m0/types.h"

/* The engine's entries (broker_engine.h: init, publish, counter). */
int m0_broker_nats_init(const struct m0_broker_cfg *b, char *err, size_t cap);
int m0_broker_nats_publish(const char *channel, size_t clen, const char *frame, size_t flen, const char *key,
                           size_t klen, const char *hint, uint64_t *id_out, char *err, size_t cap);
int m0_broker_nats_counter(uint64_t *out, char *err, size_t cap);

#define M0_NATS_API_MS 1000         /* a JetStream API request (stream info, a message get) */
#define M0_NATS_DUPLICATES_NS (300LL * 1000000000LL)   /* the de-duplication window: M0_BROKER_KEY_TTL_MS */

/* The process's subject prefix and stream name (m0_broker_nats_init,
 * before forking; read-only afterwards). */
const char *m0_nats_sprefix(void);
const char *m0_nats_stream(void);

/* Connection settings for the process's broker: its servers (tried in a
 * random order, which spreads the workers over them), credentials,
 * timeouts, reconnecting for ever. NULL with err
 * when libnats refuses them. The caller destroys it. */
natsOptions *m0_nats_options(char *err, size_t cap);

/* libnats's last error on this thread, or what status means. */
const char *m0_nats_error(natsStatus s);

/* Block every signal in the calling thread (the threads libnats starts
 * from it inherit that: signals are the loop's), the old mask in *old. */
void m0_nats_block_signals(sigset_t *old);
void m0_nats_restore_signals(const sigset_t *old);

/* The stream as the broker says. */
struct m0_nats_state {
    uint64_t first, last;           /* its first and last sequence (last: the newest id; 0: none yet) */
    int replicas;                   /* its replicas */
    char leader[64];                /* the server that leads it ("": none now) */
    int current;                    /* replicas that are current (the leader included) */
    int standalone;                 /* the server is not clustered (no leader: it holds the stream) */
};

enum { M0_NATS_FIND, M0_NATS_CREATE, M0_NATS_RECONCILE };

/*
 * The stream on js: read (M0_NATS_FIND), made when it is not there
 * (M0_NATS_CREATE), and also brought to this process's settings
 * (M0_NATS_RECONCILE: retention, backlog, the de-duplication window, and
 * the replicas when --broker-replicas was given), then read into *st.
 * Blocking (a few API requests). M0_OK; M0_AGAIN when it does not exist
 * (FIND); M0_ERR with a one-line reason.
 */
int m0_nats_stream_state(jsCtx *js, int mode, struct m0_nats_state *st, char *err, size_t cap);

#endif
