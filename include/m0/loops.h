/*
 * loops.h — the event loops of one worker process (--threads N): what each
 * loop shows the others, so that /health, the metrics and the master's
 * ping speak for the whole process (DESIGN: free-threaded loops).
 *
 * Each loop owns its connections, jobs, pool, executors and holds; nothing
 * of one is reached from another's thread. What crosses is this table:
 * every loop writes its own numbers into its share once per pass (relaxed
 * atomic stores, its one writer) and any loop reads them all. The table is
 * made before the first loop serves and is read-only after, but for the
 * shares and the sample lock.
 */
#ifndef M0_LOOPS_H
#define M0_LOOPS_H

#include <pthread.h>
#include <stdatomic.h>

#include "m0/target.h"
#include "m0/types.h"

struct m0_server;

/* The numbers a loop shows (a share's and a sum's cells). */
enum {
    M0_LS_REQUESTS,           /* requests answered */
    M0_LS_CONNS,              /* open connections */
    M0_LS_HELD,               /* held streams, WebSockets included */
    M0_LS_WEBSOCKETS,
    M0_LS_RECEIVED,           /* bus events received (summed as the maximum: each loop gets each) */
    M0_LS_DELIVERED,
    M0_LS_LOST,
    M0_LS_SLOW_CLOSED,
    M0_LS_LATE,
    M0_LS_POOL_THREADS,
    M0_LS_POOL_BUSY,
    M0_LS_POOL_MAX,
    M0_LS_POOL_QUEUED,
    M0_LS_POOL_STARTED,
    M0_LS_ORPHANS,
    M0_LS_UNMATCHED,          /* requests no mount claimed */
    M0_LS_BROKER_UP,          /* summed as the minimum: up only if every loop's is */
    M0_LS_BROKER_LAG,         /* summed as the maximum */
    M0_LS_BROKER_RECONNECTS,
    M0_LS_T_REQUESTS,         /* + target index: per-mount counters (target.h) */
    M0_LS_T_INFLIGHT = M0_LS_T_REQUESTS + M0_MAX_TARGETS,
    M0_LS_T_HELD = M0_LS_T_INFLIGHT + M0_MAX_TARGETS,
    M0_LS_N = M0_LS_T_HELD + M0_MAX_TARGETS
};

struct m0_loop_share {
    _Atomic uint64_t v[M0_LS_N];
};

/* A loop's numbers, or every loop's summed. */
struct m0_loop_sum {
    uint64_t v[M0_LS_N];
};

struct m0_loops {
    unsigned n;                       /* loops, 1..M0_MAX_LOOPS */
    struct m0_server *s[M0_MAX_LOOPS];
    pthread_mutex_t sample_lock;      /* a metrics sample sums and stores as one step, so a
                                         counter never goes backwards (metrics_http.c) */
    _Atomic uint32_t conns;           /* connections open on every loop (each server's
                                         worker_conns): --max-connections is the worker's */
    _Atomic unsigned turn;            /* the loop whose turn the next handed connection is */
    _Atomic uint64_t requests;        /* requests begun on every loop: --max-requests counts the
                                         process, each loop adds as it begins one */
    _Atomic int replace_asked;        /* --max-requests: a loop has asked for the process's
                                         replacement (serve.c): the others do not */
    int inbox_w[M0_MAX_LOOPS];        /* each loop's hand-off inbox, the sending end (handoff.h) */
    struct m0_loop_share share[];     /* by loop index */
};

/* A table for n loops (1..M0_MAX_LOOPS), servers unset. Aborts when out of
 * memory (m0_xmalloc). Freed with m0_loops_free, after every loop. */
struct m0_loops *m0_loops_new(unsigned n);
void m0_loops_free(struct m0_loops *ls);

/* Loop thread of s: its own numbers into its share (a no-op without a
 * table). Called once per pass (serve.c) and before a sum. */
void m0_loops_publish(struct m0_server *s);

/* Loop thread of s: one more request begun on it (s->run.requests), added to
 * the worker's count in the table too. */
void m0_loops_begin_request(struct m0_server *s);

/* The requests begun by s's worker so far: every loop's (the table's
 * count, exact at once), or s's own without a table. Any loop thread. */
uint64_t m0_loops_requests(const struct m0_server *s);

/* --max-requests: 1 for the first loop that calls it (its ask for the
 * process's replacement is the one that goes to the master), 0 for every
 * later call; always 1 without a table. Any loop thread. */
int m0_loops_claim_replace(struct m0_server *s);

/* Every loop of s's worker, summed (s's own numbers fresh: it publishes
 * first). Without a table: s's alone. Loop thread of s. */
void m0_loops_sum(struct m0_server *s, struct m0_loop_sum *out);

/* Loop i's numbers as it last published them (i < the table's n). */
void m0_loops_read(const struct m0_server *s, unsigned i, struct m0_loop_sum *out);

#endif
