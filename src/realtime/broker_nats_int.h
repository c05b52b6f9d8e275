/*
 * broker_nats_int.h — inside the NATS JetStream engine (not for other
 * modules): what broker_nats_pub.c (the connection settings, the stream,
 * the blocking publisher), broker_nats_link.c (a worker loop's link: the
 * thread that talks to NATS and the queue its deliveries reach the loop
 * by) and broker_nats.c (the loop's side: the source of events) share, and
 * the engine's entry points broker_engine.c puts in its table.
 *
 * libnats has threads of its own and calls back on them (deliveries, a
 * connection lost or back). Nothing of a loop is touched from those
 * threads: each callback copies what it got into a lock-protected queue and
 * wakes the loop through an eventfd the loop watches, as the pool's
 * completions reach it (loop.h). Every blocking libnats call (connect,
 * the stream's info, a resume's message gets, subscribing) runs on the
 * link's own thread, never on the loop.
 */
#ifndef M0_BROKER_NATS_INT_H
#define M0_BROKER_NATS_INT_H

#include <pthread.h>
#include <signal.h>

#include <nats/nats.h>

#include "m0/broker_url.h"
#include "m0/buf.h"
#include "m0/natsjs.h"
#include "m0/types.h"

struct m0_config;
struct m0_loop;
struct m0_rt;
struct m0_rt_source_ops;

/* ------------------------------------------------- the engine's entries */

int m0_broker_nats_init(const struct m0_broker_cfg *b, char *err, size_t cap);
int m0_broker_nats_publish(const char *channel, size_t clen, const char *frame, size_t flen, const char *key,
                           size_t klen, const char *hint, uint64_t *id_out, char *err, size_t cap);
int m0_broker_nats_counter(uint64_t *out, char *err, size_t cap);
void m0_broker_nats_prepare(void);
void *m0_broker_nats_new(struct m0_rt *rt, struct m0_loop *l, const struct m0_config *cfg);
extern const struct m0_rt_source_ops m0_broker_nats_source;

/* ------------------------------------------------------ broker_nats_pub.c */

#define M0_NATS_API_MS 1000         /* a JetStream API request (stream info, a message get) */
#define M0_NATS_DUPLICATES_NS (300LL * 1000000000LL)   /* the de-duplication window: M0_BROKER_KEY_TTL_MS */

/* The process's subject prefix and stream name (m0_broker_nats_init,
 * before forking; read-only afterwards). */
const char *m0_nats_sprefix(void);
const char *m0_nats_stream(void);

/* Connection settings for the process's broker: its servers (tried in the
 * URL's order), credentials, timeouts, reconnecting for ever. NULL with err
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

/* ----------------------------------------------------- broker_nats_link.c */

#define M0_NATS_QUEUE_MAX 4096      /* deliveries waiting for the loop before the delivering thread waits */

enum {
    M0_NI_MSG = 1,                  /* an event read: seq, subject, data */
    M0_NI_UP,                       /* connected (text: the server's URL) */
    M0_NI_DOWN,                     /* the connection was lost; libnats reconnects */
    M0_NI_POSITIONED,               /* the reader reads after seq (the newest id when it first connected) */
    M0_NI_READING,                  /* the ordered consumer is in place */
    M0_NI_PROBE,                    /* the stream's state (st), or a failed probe (text) */
    M0_NI_REWOUND,                  /* the stream was made anew: read from its newest id (seq) on */
    M0_NI_ERROR,                    /* something the loop logs and shows in /health (text) */
    M0_NI_RESUME,                   /* a resume's answer (res) */
};

struct m0_nats_resume;

/* One thing for the loop, in the order it happened. */
struct m0_nats_item {
    struct m0_nats_item *next;
    int kind;
    unsigned gen;                   /* MSG: the subscription that read it */
    uint64_t seq;
    struct m0_nats_state st;        /* PROBE */
    struct m0_nats_resume *res;     /* RESUME */
    size_t slen, dlen;              /* MSG: subject and data; else text (slen) */
    char bytes[];
};

/* A resume asked of the link, and its answer. */
struct m0_nats_resume {
    struct m0_nats_resume *next;
    uint32_t slot, gen;
    uint64_t last;                  /* the client's Last-Event-ID */
    /* the answer */
    int rc;                         /* M0_OK, or M0_ERR (why) */
    char why[200];
    uint64_t top;                   /* the stream's newest id when asked */
    int found;                      /* the entry at last is this channel's and still kept */
    size_t total;                   /* entries after last, up to top (at most retention + 1 read) */
    size_t n;                       /* of which kept (the newest that fit in --replay-bytes), oldest first */
    uint64_t *seq;
    size_t *off, *len;              /* each frame's place in frames */
    struct m0_buf frames;
    size_t clen;
    char channel[];
};

void m0_nats_resume_free(struct m0_nats_resume *r);

struct m0_nats_link;

/* A worker loop's link to NATS: its thread connects (to the process's
 * servers), makes sure of the stream, positions the reader (after start,
 * or after the newest id when start_known is 0), reads with an ordered
 * consumer, answers resumes (retention: their bound; replay_bytes: the
 * frames they keep) and probes the stream once a second. position: the loop's read position (atomic), for a
 * re-subscription. NULL with err when the thread or the eventfd cannot be
 * made. */
struct m0_nats_link *m0_nats_link_new(int start_known, uint64_t start, const uint64_t *position, long retention,
                                      size_t replay_bytes, char *err, size_t cap);
/* The descriptor the loop watches (readable: items wait). */
int m0_nats_link_fd(const struct m0_nats_link *k);
/* The loop takes what waits (oldest first; NULL: nothing) and drains the
 * eventfd. */
struct m0_nats_item *m0_nats_link_take(struct m0_nats_link *k);
/* The loop asks a resume (the link owns r until it answers with it). */
void m0_nats_link_resume(struct m0_nats_link *k, struct m0_nats_resume *r);
/* The loop cannot take events now (its fan-outs are backed up): the link's
 * watchdog does not take a still reader for a broken one. */
void m0_nats_link_stalled(struct m0_nats_link *k, int stalled);
/* The subscription whose messages the loop takes (messages of an older one
 * are dropped). */
unsigned m0_nats_link_gen(const struct m0_nats_link *k);
/* Stop: the thread leaves (closing its connection) without being waited
 * for. Loop thread; never blocks. */
void m0_nats_link_stop(struct m0_nats_link *k);
/* Wait for the thread, then let go of the link (it is freed once libnats's
 * last callback returned). Blocks up to about a request timeout. */
void m0_nats_link_free(struct m0_nats_link *k);
/* In a process forked from the worker: close the eventfd (no thread is
 * there to use the rest). */
void m0_nats_link_close_in_child(struct m0_nats_link *k);

#endif
