/*
 * master_tls.c — the TLS context across a reload and the ticket keys' turn
 * (see master_tls.h). The master makes contexts and never speaks TLS: a
 * context is only used after fork.
 */
#include <time.h>

#include "m0/config.h"
#include "m0/log.h"
#include "m0/tls_server.h"

#include "master_int.h"

void m0_master_tls_reread(struct m0_master *m)
{
    struct m0_config *cfg = (struct m0_config *)m->cfg;
    if (cfg->tls == NULL)
        return;
    m0_master_tls_commit(m);            /* a previous reload's context serves by now */
    char err[512], line[200];
    int usage;
    struct m0_tlsd *t = m0_tlsd_load(cfg, cfg->tls, err, sizeof err, &usage);
    if (t == NULL) {
        /* err is "m0serve: error: --certfile: PATH: why": one line, as is. */
        m0_warn("SIGHUP: %s; the certificate in use is kept", err + (sizeof "m0serve: error: " - 1));
        return;
    }
    m->prev_tls = cfg->tls;
    cfg->tls = t;
    m0_tlsd_describe(t, line, sizeof line);
    m0_info("SIGHUP: TLS certificate re-read: %s", line);
}

void m0_master_tls_commit(struct m0_master *m)
{
    m0_tlsd_free(m->prev_tls);          /* only the old workers' copies use it now */
    m->prev_tls = NULL;
}

void m0_master_tls_restore(struct m0_master *m)
{
    struct m0_config *cfg = (struct m0_config *)m->cfg;
    if (m->prev_tls == NULL)
        return;
    m0_tlsd_free(cfg->tls);
    cfg->tls = m->prev_tls;
    m->prev_tls = NULL;
}

void m0_master_tls_tick(struct m0_master *m)
{
    if (m->cfg->tls != NULL)
        m0_tlsd_rotate(m->cfg->tls, time(NULL));
}
