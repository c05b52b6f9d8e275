/*
 * metrics.h — the server's Prometheus numbers: a shared mapping the master
 * makes before the first fork, one block of counters per live process, and
 * the cell layout the exposition writer (metrics_text.h) reads.
 *
 * Why one block per process, not per worker slot: during a reload or a
 * --max-requests replacement two processes serve one slot at once, and a
 * process killed by SIGKILL leaves its gauges behind. So every process owns
 * its block alone (one writer: no lost updates, and gauges are plain
 * stores), and when the master reaps a worker it folds the block's counters
 * into the "retired" block and zeroes the rest — under a sequence lock, so
 * a reader summing at that moment retries instead of counting the block
 * twice or not at all. Counters are thereby per server lifetime: no worker
 * restart ever makes one go backwards.
 *
 * Cells are uint64_t, counters first (folded), gauges after (dropped with
 * their process). Indices come from the enums and macros below.
 */
#ifndef M0_METRICS_H
#define M0_METRICS_H

#include <stdatomic.h>
#include "m0/types.h"

struct m0_config;

/* Request labels, all bounded: the mounts (M0_MAX_TARGETS) plus "none"
 * (no mount answered: 404s, /health, the metrics path), the methods
 * RFC 9110 §9 defines plus PATCH and "other", the status classes 1xx..5xx. */
#define M0_MX_MOUNTS   33
#define M0_MX_METHODS  10
#define M0_MX_CLASSES  5
/* The request-duration buckets' upper bounds, in microseconds (Prometheus's
 * default buckets); one more cell counts +Inf. */
#define M0_MX_BUCKETS_US {5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000}
#define M0_MX_NBUCKETS 12

/* Scalar counters. Some are counted where they happen (adds), the others
 * copied from the worker's own totals once per loop pass (stores): a cell
 * is only ever one of the two. */
enum m0_mx_counter {
    M0_MX_ACCEPTED,          /* connections accepted */
    M0_MX_REFUSED_FDS,       /* refused: out of descriptors (ulimit -n) */
    M0_MX_REFUSED_SLOTS,     /* refused: every --max-connections slot busy */
    M0_MX_POOL_STARTED,      /* handler threads started (the floor, then growth) */
    M0_MX_PUBLISHES,         /* m0pub.publish calls that published */
    M0_MX_PUBLISH_ERRORS,    /* m0pub.publish calls that failed (broker unreachable, refused) */
    M0_MX_BUS_RECEIVED,      /* bus events a worker received */
    M0_MX_DELIVERED,         /* event copies queued to held streams */
    M0_MX_SLOW_CLOSED,       /* held streams closed for exceeding --outbox-limit */
    M0_MX_GAPS,              /* m0-gap events sent (a worker learned it missed events) */
    M0_MX_LATE,              /* bus events dropped as out of order past the window */
    M0_MX_BROKER_RECONNECTS, /* broker connections re-established */
    M0_MX_TLS_FULL,          /* TLS handshakes completed in full (xprt_tls.c) */
    M0_MX_TLS_RESUMED,       /* ... and by resuming a session (a ticket) */
    M0_MX_TLS_FAILED,        /* TLS handshakes that failed (an alert sent, or garbage) */
    M0_MX_TLS_PLAIN,         /* plain HTTP on a TLS listener: the one-line 400 */
    M0_MX_WORKER_STARTS,     /* master: workers forked */
    M0_MX_EXIT_CLEAN,        /* master: worker exits, by cause (enum order = label order) */
    M0_MX_EXIT_ERROR,
    M0_MX_EXIT_SIGNAL,
    M0_MX_EXIT_BOOT,
    M0_MX_EXIT_ABANDONED,
    M0_MX_RELOADS,           /* master: reloads begun (SIGHUP, --reload) */
    M0_MX_NSCALAR
};

/* Cell indices. */
#define M0_MX_REQ(m, me, cl)   (M0_MX_NSCALAR + ((m) * M0_MX_METHODS + (me)) * M0_MX_CLASSES + (cl))
#define M0_MX_HIST0            M0_MX_REQ(M0_MX_MOUNTS, 0, 0)
#define M0_MX_HIST(m, b)       (M0_MX_HIST0 + (m) * M0_MX_NBUCKETS + (b))
#define M0_MX_SUM0             M0_MX_HIST(M0_MX_MOUNTS, 0)
#define M0_MX_SUM_US(m)        (M0_MX_SUM0 + (m))          /* request seconds, in µs */
#define M0_MX_NCOUNTERS        M0_MX_SUM_US(M0_MX_MOUNTS)  /* cells below are folded */

enum m0_mx_gauge {
    M0_MX_CONN_OPEN = M0_MX_NCOUNTERS,
    M0_MX_POOL_THREADS,
    M0_MX_POOL_BUSY,
    M0_MX_POOL_QUEUED,
    M0_MX_POOL_MAX,
    M0_MX_ASGI_TASKS,
    M0_MX_HELD_SSE,
    M0_MX_HELD_WS,
    M0_MX_BROKER_UP,         /* 1 when the worker's broker connections are up */
    M0_MX_BROKER_LAG,        /* events the broker has that the worker has not read */
    M0_MX_INFLIGHT0,         /* + mount: requests handed to a runner, not completed */
    M0_MX_NCELLS = M0_MX_INFLIGHT0 + M0_MX_MOUNTS
};

/* One process's cells in the shared mapping. pid 0: free; -1: claimed by
 * the master for a worker being forked. */
struct m0_mx_block {
    _Atomic int32_t pid;
    int32_t worker;          /* listener slot; -1 for the master and the retired block */
    uint64_t born;           /* spawn order: the newest of a slot is the one labelled */
    _Atomic uint64_t v[M0_MX_NCELLS];
};

/* Add n to counter cell i of block b (NULL: this process records nothing).
 * Any thread of the block's process. */
static inline void m0_mx_add(struct m0_mx_block *b, unsigned i, uint64_t n)
{
    if (b != NULL)
        atomic_fetch_add_explicit(&b->v[i], n, memory_order_relaxed);
}

/* Store v into cell i (a sampled total or a gauge): the block's one
 * writer, the loop thread. */
static inline void m0_mx_set(struct m0_mx_block *b, unsigned i, uint64_t v)
{
    if (b != NULL)
        atomic_store_explicit(&b->v[i], v, memory_order_relaxed);
}

/* ------------------------------------------------------------- master */

/* Before the first fork: map the shared blocks for the most processes the
 * master runs at once: 4 × cfg->max_workers + 4 (every slot SIGTTIN may add,
 * a reload's or a replacement's successor, retirees still draining). A
 * process never runs without one: the master waits for a free block before
 * it forks (m0_metrics_claim). Returns M0_OK, or M0_ERR (errno; logged) —
 * the server then runs without metrics. A no-op returning M0_OK when
 * neither --metrics-bind nor --metrics-path is set (and
 * PROMETHEUS_MULTIPROC_DIR is remembered either way). */
int m0_metrics_create(const struct m0_config *cfg);


/* The master's own block (worker starts, exits, reloads), or NULL. */
struct m0_mx_block *m0_metrics_master(void);

/* Master, before fork(): claim a block for a worker of listener slot idx
 * (counted as a start). Returns its index; -1 with no metrics (fork
 * anyway); M0_MX_NO_ROOM when every block is a live process's (fork later,
 * once one has been reaped: a worker without a block would go uncounted). */
#define M0_MX_NO_ROOM (-2)
int m0_metrics_claim(int idx);

/* After fork() returned pid (blk from claim; -1 is ignored): in the
 * parent the block is the child's; pid -1: the fork failed, the block is
 * freed; pid 0 (the child): nothing. */
void m0_metrics_owned(int blk, pid_t pid);

/* Child, right after fork(): this process records into block blk (-1:
 * nowhere). Read by m0_metrics_block. */
void m0_metrics_adopt(int blk);

/* Master, after waitpid() reaped a worker: count its exit by cause (from
 * the wait status), fold its block into the retired one, and — with
 * PROMETHEUS_MULTIPROC_DIR set — remove its live-gauge files
 * (gauge_live*_PID.db), as prometheus_client.multiprocess.mark_process_dead
 * does. */
void m0_metrics_reaped(pid_t pid, int wait_status);

/* ------------------------------------------------------------- worker */

/* This process's block (NULL: it records nothing): set once, right after
 * fork (m0_metrics_adopt). Any thread. */
struct m0_mx_block *m0_metrics_block(void);

/* An m0.publish call's outcome (ok: it published), from any thread:
 * counted into b (m0serve_publishes_total or _publish_errors_total; NULL:
 * not there) and into this process's own count, which is kept without
 * metrics too. */
void m0_metrics_publish(struct m0_mx_block *b, int ok);

/* The publishes m0_metrics_publish counted ok in this process (/health's
 * events_published). Any thread. */
uint64_t m0_metrics_published(void);

/* A request answered (status 100..599; others are not counted): by mount
 * (target index, or -1 for none), method and status class, and — unless
 * held (an SSE stream or WebSocket's duration is its whole life) — its
 * duration in µs in the mount's histogram. Loop thread. */
void m0_metrics_request(struct m0_mx_block *b, int mount, const char *method, int status, uint64_t us, int held);

/* ------------------------------------------------ between metrics*.c */

/* A live server process, for the process_* families. */
struct m0_mx_who {
    int32_t pid;
    int32_t worker;          /* -1: the master */
    uint64_t born;
};

/* Sum every block into out (M0_MX_NCELLS cells; the broker lag is the
 * largest, not a sum) and list the processes to label: the master first,
 * then the newest process of each worker slot (up to maxwho). Consistent
 * with any fold: retried while the master folds. Returns M0_OK, or M0_ERR
 * when there are no shared blocks. */
int m0_mx_sum(uint64_t *out, struct m0_mx_who *who, size_t *nwho, size_t maxwho);

#endif
