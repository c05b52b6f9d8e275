/*
 * master_identity.c — the master's process identity (see master_identity.h):
 * the pid file and --user/--group, settled once, after binding and before
 * the first fork.
 */
#include <stdio.h>
#include <unistd.h>

#include "m0/config.h"
#include "m0/log.h"
#include "m0/pidfile.h"
#include "m0/privs.h"

#include "master_identity.h"

int m0_master_settle_identity(struct m0_master *m, const struct m0_config *cfg)
{
    char err[512];
    struct m0_ident id;
    if (m0_privs_resolve(cfg->user, cfg->group, &id, err, sizeof err) != M0_OK) {
        fprintf(stderr, "%s\n", err);
        return M0_EXIT_USAGE;
    }
    if (cfg->pid_file != NULL && m0_pidfile_write(cfg->pid_file, err, sizeof err) != M0_OK) {
        m0_error("%s", err);
        return M0_EXIT_FAIL;
    }
    for (int l = 0; l < m->ls.n; l++) {
        if (m->ls.l[l].unix_path != NULL && m0_privs_chown(m->ls.l[l].unix_path, &id, err, sizeof err) != M0_OK) {
            m0_error("%s", err);
            return M0_EXIT_FAIL;
        }
    }
    if (cfg->pid_file != NULL && m0_privs_chown(cfg->pid_file, &id, err, sizeof err) != M0_OK) {
        m0_error("%s", err);
        return M0_EXIT_FAIL;
    }
    if (m0_privs_drop(&id, err, sizeof err) != M0_OK) {
        m0_error("%s", err);
        return M0_EXIT_FAIL;
    }
    if (id.set_uid || id.set_gid)
        m0_info("running as uid %u, gid %u", (unsigned)getuid(), (unsigned)getgid());
    return M0_OK;
}
