/*
 * worker.h — a worker process's life after fork: Python, the application,
 * the serving loop and the conversation with the master (its protocol:
 * control.h).
 */
#ifndef M0_WORKER_H
#define M0_WORKER_H

#include "m0/types.h"
#include "m0/control.h"

struct m0_config;

/* Runs in the child right after fork; never returns. Exits 0 after a
 * graceful drain, M0_EXIT_ABANDONED when the graceful timeout left requests
 * unfinished, M0_EXIT_BOOT when Python or the application could not be
 * loaded (the master then keeps the old workers, or stops at first start).
 * listen_fds are the sockets it accepts on, nlisten for each of its
 * cfg->loops event loops (loop i's at listen_fds + i * nlisten; a shared
 * listener's socket repeats); ctl_fd is the worker's end of its control
 * socket. */
void m0_worker_main(const struct m0_config *cfg, const int *listen_fds, int nlisten, int ctl_fd)
    __attribute__((noreturn));

#endif
