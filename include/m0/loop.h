/*
 * loop.h — a worker's event loop: one epoll instance, the connection slot
 * table, HTTP/1.1 connection handling, timeouts and graceful drain.
 * Everything here runs on the loop thread.
 */
#ifndef M0_LOOP_H
#define M0_LOOP_H

#include <pthread.h>
#include "m0/types.h"

struct m0_config;

/* Serve on listen_fd until a SIGTERM/SIGINT read from sig_fd (the
 * worker's signal self-pipe, one byte per signal number)
 * has drained every in-flight request, or the graceful timeout passes.
 * Returns the process exit status. */
int m0_loop_run(const struct m0_config *cfg, int listen_fd, int sig_fd);

/* The thread running the loop (valid once m0_loop_run started). */
extern pthread_t m0_loop_thread;

#endif
