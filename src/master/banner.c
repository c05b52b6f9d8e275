/*
 * banner.c — the master's startup line (see banner.h).
 */
#include <stdio.h>

#include "m0/banner.h"
#include "m0/broker_url.h"
#include "m0/log.h"
#include "m0/pyrt.h"

void m0_banner_pool(const struct m0_config *cfg, char *dst, size_t cap)
{
    int apps = 0;
    for (unsigned i = 0; i < cfg->nmounts; i++)
        apps += cfg->mounts[i].kind == M0_MOUNT_APP;
    dst[0] = '\0';
    if (apps == 0 || cfg->protocol == M0_PROTO_ASGI)
        return;                          /* ASGI runs on its executor; no pool */
    if (cfg->threads_explicit) {
        snprintf(dst, cap, " blocking-threads=%ld%s (as configured)", cfg->blocking_threads,
                 cfg->blocking_threads == 0 ? "" : " (pinned)");
        return;
    }
    if (cfg->protocol != M0_PROTO_WSGI)
        return;                          /* auto: the workers' boot lines say it */
    if (cfg->blocking_threads == 0)
        snprintf(dst, cap, " blocking-threads=0 (%s)", cfg->workers_explicit ? "default pool" : "default topology");
    else
        snprintf(dst, cap, " blocking-threads=%ld..%ld (elastic) (%s)", cfg->blocking_threads,
                 cfg->blocking_threads_max,
                 cfg->workers_explicit ? "default pool" : "default topology: 1 worker, an elastic pool");
}

void m0_banner_log(const struct m0_config *cfg, const struct m0_listeners *ls, int nworkers)
{
    char where[1024];
    size_t n = 0;
    where[0] = '\0';
    for (int l = 0; l < ls->n && n < sizeof where; l++)
        n += (size_t)snprintf(where + n, sizeof where - n, "%s%s", l ? ", " : "", ls->l[l].where);
    static const char *const protos[] = {"auto", "wsgi", "asgi"};
    char pool[160];
    m0_banner_pool(cfg, pool, sizeof pool);
    const char *why = "";
    if (pool[0] == '\0')
        why = cfg->workers_explicit ? " (as configured)" : " (default topology: 1 worker)";
    /* Every mount as given; each worker's boot line adds the protocol it
     * detected and the mode it runs in. */
    char mounts[2048] = "";
    size_t mn = 0;
    for (unsigned i = 0; i < cfg->nmounts && mn < sizeof mounts; i++) {
        const struct m0_mount *mt = &cfg->mounts[i];
        mn += (size_t)snprintf(mounts + mn, sizeof mounts - mn, "%s%s=%s%s", i ? "," : "",
                               mt->prefix_len ? mt->prefix : "/", mt->kind == M0_MOUNT_STATIC ? "static:" : "",
                               mt->spec);
    }
    /* The master runs no Python: a free-threaded build's GIL state is each
     * worker's, on its boot line. */
    m0_info("m0serve %s (Python %s, %s) listening on %s workers=%d%s%s "
            "protocol=%s realtime=%s%s%s app=%s mounts=%s",
            M0_VERSION, m0_py_version(), m0_py_free_threaded() ? "free-threaded build" : "GIL enabled", where,
            nworkers, why, pool, protos[cfg->protocol], cfg->realtime ? "on" : "off",
            m0_broker ? " broker=" : "", m0_broker ? m0_broker->shown : "", cfg->app != NULL ? cfg->app : "-",
            mounts);
}
