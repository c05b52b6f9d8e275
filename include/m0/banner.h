/*
 * banner.h — the master's startup line.
 */
#ifndef M0_BANNER_H
#define M0_BANNER_H

#include <stddef.h>

#include "m0/config.h"
#include "m0/listeners.h"

/* The handler-pool part of the banner for cfg, into dst (cap bytes):
 * "blocking-threads=2..40 (elastic) (WHY)" when the pool may apply, or ""
 * when no mount can be WSGI (--protocol asgi, or static mounts only): the
 * pool serves WSGI views only. With --protocol auto the master cannot
 * know (it never imports the application), so an unpinned pool is
 * described by each worker's boot line instead, which does (worker.c);
 * an explicit --blocking-threads is shown as configured. */
void m0_banner_pool(const struct m0_config *cfg, char *dst, size_t cap);

/* Log the banner: version, Python, the listeners ls, nworkers workers,
 * the pool, protocol, realtime, broker, the mounts. */
void m0_banner_log(const struct m0_config *cfg, const struct m0_listeners *ls, int nworkers);

#endif
