/*
 * worker.h — a worker process's life after fork: Python, the app, the loop.
 */
#ifndef M0_WORKER_H
#define M0_WORKER_H

#include "m0/types.h"

struct m0_config;

/* Runs in the child right after fork; never returns. Exits 0 after a
 * graceful drain, M0_EXIT_BOOT when Python or the application could not
 * be loaded (the master then stops instead of restarting it). */
void m0_worker_main(const struct m0_config *cfg, int listen_fd) __attribute__((noreturn));

#endif
