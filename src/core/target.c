/*
 * target.c — the target table and its prefix rule (see target.h).
 */
#include <string.h>

#include "m0/target.h"

/* Per process, read-only once the worker serves (target.h). */
struct m0_targets m0_targets;

const struct m0_target *m0_target_match(const struct m0_targets *ts, const char *path, size_t path_len)
{
    const struct m0_target *best = NULL;
    for (unsigned i = 0; i < ts->n; i++) {
        const struct m0_target *t = &ts->t[i];
        if (t->prefix_len > path_len || memcmp(t->prefix, path, t->prefix_len) != 0)
            continue;
        /* A segment boundary: the prefix is the whole path or is followed
         * by '/'. The root mount ("") matches everything. */
        if (t->prefix_len != 0 && path_len != t->prefix_len && path[t->prefix_len] != '/')
            continue;
        if (best == NULL || t->prefix_len > best->prefix_len)
            best = t;
    }
    return best;
}

struct m0_target *m0_targets_next(struct m0_targets *ts, const char *prefix, size_t prefix_len,
                                  enum m0_target_kind kind)
{
    if (ts->n >= M0_MAX_TARGETS)
        return NULL;
    struct m0_target *t = &ts->t[ts->n];
    memset(t, 0, sizeof *t);
    t->prefix = prefix;
    t->prefix_len = prefix_len;
    t->kind = kind;
    return t;
}

void m0_targets_commit(struct m0_targets *ts)
{
    ts->n++;
}

const char *m0_target_kind_name(enum m0_target_kind k)
{
    switch (k) {
    case M0_TARGET_WSGI: return "wsgi";
    case M0_TARGET_ASGI: return "asgi";
    case M0_TARGET_STATIC: return "static";
    }
    return "?";
}

const char *m0_target_mode(const struct m0_target *t)
{
    switch (t->kind) {
    case M0_TARGET_STATIC: return "sendfile";
    case M0_TARGET_ASGI: return "executor";
    case M0_TARGET_WSGI: break;
    }
    return t->on_pool ? "pool" : "loop";
}
