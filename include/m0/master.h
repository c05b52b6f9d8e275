/*
 * master.h — the prefork master. It never runs Python.
 */
#ifndef M0_MASTER_H
#define M0_MASTER_H

#include "m0/types.h"

struct m0_config;

/* Bind, print the banner, fork cfg->workers workers, supervise them until
 * SIGTERM/SIGINT (graceful) or SIGQUIT (immediate). SIGHUP replaces the
 * workers gracefully. Returns the process exit status: 0 after a clean
 * stop, 1 when a worker could not load the application, 2 for a bind
 * error. */
int m0_master_run(struct m0_config *cfg);

#endif
