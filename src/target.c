/*
 * target.c — the target table and its prefix rule (see target.h).
 */
#include <string.h>

#include "m0/target.h"

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
