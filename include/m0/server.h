/*
 * server.h — the serving state of one event loop (struct m0_server), in
 * named parts, and the per-loop extension registry (server.c). Loop thread
 * only, but for what a part says runners read.
 *
 * The parts, and who writes each:
 *   slots     the slot table: connections, their lists and wheel, the job
 *             cache — conn.c and conn_slots.c alone (others read a slot
 *             through m0_conn_at / m0_conn_of);
 *   accept    the listeners and what is known of each (shared by the loops,
 *             owned by an endpoint, its parser limits), the hand-off of a
 *             shared listener's connections — conn_slots.c and handoff.c;
 *   timeouts  the deadlines of a connection's states — from the
 *             configuration, set once by serve.c;
 *   life      start, drain and stop — serve.c (draining is read by runners);
 *   run       what runs requests: the pool, the runner environment, the
 *             inline I/O, the per-mount counters.
 * The protocols, transports and endpoints are tables serve.c fills once
 * (the composition root); the holds and the realtime engine are hold.c's.
 *
 * A feature with per-loop state of its own (the WebSocket scratch, the
 * broker publisher of the GRIP control port and the publish socket, the
 * metrics sampler, the hand-off inbox) registers an extension (struct
 * m0_ext) instead of adding a field here: its state is made on first use
 * (m0_ext_of) and freed when the loop ends (h2o's per-loop module slots).
 */
#ifndef M0_SERVER_H
#define M0_SERVER_H

#include <stdatomic.h>
#include "m0/conn.h"
#include "m0/endpoint.h"
#include "m0/job.h"
#include "m0/loop.h"
#include "m0/target.h"

struct m0_config;
struct m0_holds;
struct m0_loops;
struct m0_pool;
struct m0_rt;

/* A feature's per-loop state (h2o's _config_slot): registered once by the
 * composition root, made at its first m0_ext_of. */
struct m0_ext {
    const char *name;
    /* Make the state for s (NULL: none could be made now; asked again at
     * the next m0_ext_of). NULL init: the state starts NULL. */
    void *(*init)(struct m0_server *s);
    /* The loop ends: free what init made (called only for a made state). */
    void (*fini)(struct m0_server *s, void *state);
};

/* Extensions one loop may register. */
#define M0_MAX_EXTS 8

/* The slot table (conn.c, conn_slots.c). */
struct m0_slot_table {
    /* Slots in chunks of M0_CONN_CHUNK made as the free list runs dry
     * (none before the first connection; the last may be shorter), up to
     * n (--max-connections) slots. A chunk never moves. */
    struct m0_conn **chunks;
    uint32_t nchunks;              /* made so far */
    uint32_t n;
    struct m0_job **jobs;          /* slot → job (read by pool threads; an entry changes only
                                      while no runner has the slot's job) */
    struct m0_job *job_cache;      /* jobs no connection has, for the next request */
    uint32_t njob_cache;
    struct m0_conn *free_list;
    struct m0_conn *release_list;
    struct m0_conn *doomed;        /* closed after the current fan-out */
    struct m0_conn active;         /* sentinel of the active list: every open connection not HELD */
    uint32_t nactive;              /* open connections (the active list and the wheel) */
    /* HELD connections by the time of their next tick (heartbeats, pings):
     * M0_CONN_WHEEL buckets of M0_CONN_WHEEL_MS, each a NULL-ended list
     * (made with the first hold); the sweep runs only the buckets whose
     * time has come, so an idle held connection costs nothing per sweep. */
    struct m0_conn **wheel;
    uint64_t wheel_tick;           /* the next bucket's time, in M0_CONN_WHEEL_MS units */
    uint32_t jobs_released;        /* jobs given back (holds begun, slots closed) since the last trim */
    uint64_t next_trim;            /* loop clock: the earliest next malloc_trim */
    uint32_t norphans;             /* closed slots whose job a runner still has (ORPHAN) */
    /* With --threads: the loops' one count of open connections, so
     * --max-connections bounds the worker, not each loop; NULL without. */
    _Atomic uint32_t *worker_conns;
    uint64_t next_refusal_log, next_slow_log;   /* a line at most once a second */
};

/* The accept path (conn_slots.c, handoff.c). */
struct m0_accept {
    int fds[M0_MAX_LISTENERS];     /* the sockets this worker accepts on, by listener index */
    int n;
    int on;                        /* accepting; cleared when a drain closes the listeners */
    int reserve_fd;                /* spare descriptor for the EMFILE trick */
    uint32_t shared;               /* bit i: fds[i] is a socket every loop accepts on (a unix
                                      path, systemd's), not one of this loop's own */
    uint32_t tls;                  /* bit i: listener i speaks TLS (cfg->tls_listeners): its
                                      connections get the TLS transport (conn.h) */
    uint32_t owned;                /* bit i: an endpoint owns listener i (endpoint.h): its
                                      connections are never handed to another loop */
    const struct m0_limits *limits[M0_MAX_LISTENERS];   /* the parser's limits there; NULL: --limit-* */
    /* --threads: give an accepted connection of shared listener lidx to
     * another loop (handoff.h); M0_OK: it is theirs (fd closed here), else
     * this loop takes it. NULL: a lone loop. */
    int (*hand_off)(struct m0_server *s, int fd, int lidx, const void *addr, unsigned addr_len);
};

/* A connection's deadlines (ms), from the configuration. */
struct m0_timeouts {
    uint64_t keepalive_ms, header_ms, body_ms, write_ms, request_ms;
};

/* Start, drain, stop (serve.c). */
struct m0_life {
    atomic_int draining;           /* read by runners when they commit a head */
    uint64_t drain_deadline;
    int abandoned;                 /* the graceful timeout left requests unfinished */
    uint64_t next_sweep;
};

/* What runs requests. */
struct m0_runners {
    struct m0_pool *pool;          /* NULL: runners run on the loop thread */
    struct m0_runner_env env;      /* what runners reach of this loop (job.h) */
    struct m0_job_inline inline_io;    /* a runner on the loop thread does its own I/O (h1.c) */
    struct m0_target_counters tstats;   /* per-target counters (target.h) */
    uint64_t requests;             /* requests answered (for /health) */
};

struct m0_server {
    const struct m0_config *cfg;
    struct m0_loop *loop;
    /* The worker's loops (--threads; loops.h), this one at loop_index;
     * NULL: a lone loop that no other sees. Set before serving. */
    struct m0_loops *loops;
    unsigned loop_index;
    struct m0_slot_table slots;
    struct m0_accept accept;
    struct m0_timeouts timeouts;
    struct m0_life life;
    struct m0_runners run;
    /* Filled once by serve.c: the protocols a connection may speak, the
     * transports under them, and who answers a request (endpoint.h, in its
     * fixed order). */
    const struct m0_conn_ops *proto[M0_CONN_PROTOS];
    const struct m0_xprt_ops *xprt[M0_XPRTS];
    const struct m0_endpoint *routes[M0_MAX_ENDPOINTS];
    unsigned nroutes;
    struct m0_holds *holds;        /* the holds' state (hold.h) */
    struct m0_rt *rt;              /* the realtime engine (rt.h), the holds its sink */
    /* The extensions (m0_ext_of), in registration order. */
    struct {
        const struct m0_ext *ext;
        void *state;
    } ext[M0_MAX_EXTS];
    unsigned next;
};

/* Register ext with s (the composition root, before serving; once each). */
void m0_ext_register(struct m0_server *s, const struct m0_ext *ext);
/* ext's state on s, made by its init at the first call (NULL: not
 * registered, or init could not make it). */
void *m0_ext_of(struct m0_server *s, const struct m0_ext *ext);
/* ext's state if it was made, else NULL (never makes it). */
void *m0_ext_peek(const struct m0_server *s, const struct m0_ext *ext);
/* The loop ends: every made state goes to its fini, last registered
 * first. */
void m0_ext_fini_all(struct m0_server *s);

/* The connection of slot, or NULL when the slot was never made (or is
 * beyond --max-connections). */
static inline struct m0_conn *m0_conn_at(const struct m0_server *s, uint32_t slot)
{
    if (slot >= s->slots.n || (slot >> M0_CONN_CHUNK_SHIFT) >= s->slots.nchunks)
        return NULL;
    return &s->slots.chunks[slot >> M0_CONN_CHUNK_SHIFT][slot & (M0_CONN_CHUNK - 1)];
}

/* The connection of a slot known to be made (a job's, a subscriber's). */
static inline struct m0_conn *m0_conn_of(const struct m0_server *s, uint32_t slot)
{
    return &s->slots.chunks[slot >> M0_CONN_CHUNK_SHIFT][slot & (M0_CONN_CHUNK - 1)];
}

#endif
