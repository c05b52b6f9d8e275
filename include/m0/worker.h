/*
 * worker.h — a worker process's life after fork: Python, the application,
 * the serving loop, the conversation with the master, and the rules for a
 * process a view forks.
 *
 * The master and a worker talk over a control socket (one byte per
 * message), so a reload never has two workers of one listener slot reading
 * its bus at once, and a broken reload never stops the old workers:
 *   worker → master  'B'  booted: the application imported, ready to serve;
 *                    'R'  retired: no longer accepting nor reading the bus;
 *   master → worker  'G'  go: accept and read the bus;
 *                    'D'  drain (as SIGTERM).
 */
#ifndef M0_WORKER_H
#define M0_WORKER_H

#include "m0/types.h"

struct m0_config;

#define M0_CTL_BOOTED  'B'
#define M0_CTL_RETIRED 'R'
#define M0_CTL_GO      'G'
#define M0_CTL_DRAIN   'D'

/* Runs in the child right after fork; never returns. Exits 0 after a
 * graceful drain, M0_EXIT_ABANDONED when the graceful timeout left requests
 * unfinished, M0_EXIT_BOOT when Python or the application could not be
 * loaded (the master then keeps the old workers, or stops at first start).
 * ctl_fd is the worker's end of its control socket. */
void m0_worker_main(const struct m0_config *cfg, int listen_fd, int ctl_fd) __attribute__((noreturn));

/* In a process forked by a view (os.register_at_fork): close the server's
 * descriptors — listener, epoll, lanes, bus, client connections — so the
 * child holds nothing of the server's. */
void m0_worker_after_fork_child(void);

/* Called after every call into the application: a process forked by the
 * view that returns into the server exits here (it must never serve). */
void m0_worker_check_forked(void);

#endif
