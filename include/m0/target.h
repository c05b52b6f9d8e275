/*
 * target.h — the applications a worker serves, in a table (DESIGN
 * capability 8: the positional app is the root mount, the empty prefix).
 *
 * A target names its application, the runner for its protocol, the
 * runner's per-target state (the WSGI environ template) and the pool its
 * jobs run on (NULL: inline on the loop thread). Nothing else in the server
 * keeps a "current app": a job carries its target from dispatch on.
 * Built at worker start, read-only afterwards (any thread may read it).
 */
#ifndef M0_TARGET_H
#define M0_TARGET_H

#include "m0/types.h"

struct m0_pool;
struct m0_runner;

enum m0_target_kind { M0_TARGET_WSGI, M0_TARGET_ASGI };

struct m0_target {
    const char *prefix;              /* "" for the root mount; no trailing '/' */
    size_t prefix_len;
    enum m0_target_kind kind;
    const struct m0_runner *runner;
    void *app;                       /* the callable (a strong PyObject reference) */
    void *rstate;                    /* the runner's per-target state */
    struct m0_pool *pool;            /* where its jobs run; NULL: the loop thread */
    int realtime;                    /* M0-Hold responses become held streams */
};

#define M0_MAX_TARGETS 32

struct m0_targets {
    struct m0_target t[M0_MAX_TARGETS];
    unsigned n;
};

/* The target serving path (path_len bytes, raw request path): the longest
 * prefix that matches on a segment boundary ("/app" serves "/app" and
 * "/app/x", never "/application"). NULL when none does. */
const struct m0_target *m0_target_match(const struct m0_targets *ts, const char *path, size_t path_len);

/* The worker's table (filled by py.c at boot). */
extern struct m0_targets m0_targets;

#endif
