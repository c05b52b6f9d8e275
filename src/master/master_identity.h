/*
 * master_identity.h — the master's process identity: the pid file and
 * --user/--group (master_identity.c, of the master module, private to it:
 * master_int.h).
 */
#ifndef M0_MASTER_IDENTITY_H
#define M0_MASTER_IDENTITY_H

#include "m0/config.h"

#include "master_int.h"

/* After binding, before the first fork: the pid file, then --user/--group.
 * The unix sockets we bound and the pid file are given to that user/group
 * first: the descriptors need nothing, but a proxy running in the group
 * connects by path, and the master unlinks both at exit. M0_OK, or the
 * exit status: M0_EXIT_USAGE for a user or group that does not resolve
 * (printed to stderr: nothing is logged yet), M0_EXIT_FAIL for a pid file,
 * chown or privilege drop that failed (logged). */
int m0_master_settle_identity(struct m0_master *m, const struct m0_config *cfg);

#endif
