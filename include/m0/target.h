/*
 * target.h — the applications a worker serves, in a table (DESIGN
 * capabilities 8 and 10: mounts; the positional app is the root mount, the
 * empty prefix).
 *
 * A target names its application, the runner for its protocol, the
 * runner's per-target state (the WSGI environ template; an ASGI target's
 * executors, one per event loop) and whether its jobs run on a handler
 * pool (each loop has its own: the runner env's) or inline on the loop
 * thread. A STATIC target has no
 * runner: the loop answers it from the directory in `files` (static.h).
 * Nothing else in the server keeps a "current app": a job carries its
 * target from dispatch on, and a hold keeps the target that gated it.
 *
 * The table is per process: built at worker start (worker.c:
 * m0_static_add_targets, m0_apps_load) and read-only afterwards (any
 * thread may read it). The counters are per loop (struct
 * m0_target_counters, in the loop's server), indexed like the table.
 */
#ifndef M0_TARGET_H
#define M0_TARGET_H

#include "m0/types.h"

struct m0_pool;
struct m0_runner;
struct m0_static;

enum m0_target_kind { M0_TARGET_WSGI, M0_TARGET_ASGI, M0_TARGET_STATIC };

struct m0_target {
    const char *prefix;              /* "" for the root mount; no trailing '/' */
    size_t prefix_len;
    enum m0_target_kind kind;
    const char *spec;                /* what was mounted: MODULE[:ATTR] as given, or DIR */
    const char *resolved;            /* APP: the MODULE:ATTR discovery found (for logs); else spec */
    const struct m0_runner *runner;  /* NULL for STATIC */
    void *app;                       /* the callable (a strong PyObject reference) */
    void *rstate;                    /* the runner's per-target state */
    int on_pool;                     /* its jobs run on their loop's handler pool (the
                                        runner env's); 0: on the loop thread */
    struct m0_static *files;         /* STATIC: the directory served (static.h) */
    int realtime;                    /* M0-Hold responses become held streams */
    const unsigned char *grip_key;   /* GRIP (--grip-key-file): Grip-* instruct, Grip-Sig signed; NULL: off */
    size_t grip_key_len;
};

/* Per-target counters for /health. Loop thread only. */
struct m0_target_stats {
    uint64_t requests;               /* requests routed to the target */
    uint32_t in_flight;              /* jobs handed to its runner and not completed */
    uint32_t held;                   /* held streams it gated, open now */
};

#define M0_MAX_TARGETS 32

struct m0_targets {
    struct m0_target t[M0_MAX_TARGETS];
    unsigned n;
};

/* The worker's table (per process: filled at boot, read-only after). */
extern struct m0_targets m0_targets;

/* One loop's counters of the targets (loop thread only). */
struct m0_target_counters {
    struct m0_target_stats t[M0_MAX_TARGETS];    /* by the target's index in the table */
    uint64_t unmatched;              /* requests no target claimed: 404 in C, no Python */
};

/* The target serving path (path_len bytes, raw request path): the longest
 * prefix that matches on a segment boundary ("/app" serves "/app" and
 * "/app/x", never "/application"). NULL when none does. */
const struct m0_target *m0_target_match(const struct m0_targets *ts, const char *path, size_t path_len);

/* The next free entry of ts, zeroed with the given prefix and kind, or NULL
 * when the table is full. The caller fills it and then calls
 * m0_targets_commit to make it visible to m0_target_match. */
struct m0_target *m0_targets_next(struct m0_targets *ts, const char *prefix, size_t prefix_len,
                                  enum m0_target_kind kind);
void m0_targets_commit(struct m0_targets *ts);

/* The counters of t (an entry of the table m0_targets) in tc. */
static inline struct m0_target_stats *m0_target_stats_of(struct m0_target_counters *tc, const struct m0_target *t)
{
    return &tc->t[t - m0_targets.t];
}

/* "wsgi", "asgi", "static". */
const char *m0_target_kind_name(enum m0_target_kind k);
/* Where the target's requests run: "pool" (the handler pool), "loop"
 * (inline on the loop thread: --blocking-threads 0), "executor" (an ASGI
 * executor), "sendfile" (static files, answered by the loop). */
const char *m0_target_mode(const struct m0_target *t);


#endif
