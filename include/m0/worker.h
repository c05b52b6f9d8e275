/*
 * worker.h — a worker process's life after fork: Python, the application,
 * the serving loop, the conversation with the master, and the rules for a
 * process a view forks.
 *
 * The master and a worker talk over a control socket (SOCK_SEQPACKET; one
 * byte per message but for the pong), so a reload never has two workers of
 * one listener slot reading its bus at once, and a broken reload never
 * stops the old workers:
 *   worker → master  'B'  booted: the application imported and the worker
 *                         set up (m0_serve_prepare), ready to serve;
 *                    'R'  retired: no longer accepting nor reading the bus;
 *                    'Q'  replace me: --max-requests reached (the master
 *                         boots a successor for the slot, then drains it);
 *                    'H'  reload: --reload saw an application file change
 *                         (the master replaces every worker, as on SIGHUP);
 *                    'A'  + uint32 (host order) open connections: the
 *                         loop's answer to a ping (one 5-byte message);
 *   master → worker  'G'  go: accept and read the bus;
 *                    'D'  drain (as SIGTERM);
 *                    'P'  ping: answer 'A' (the watchdog and STATUS=).
 */
#ifndef M0_WORKER_H
#define M0_WORKER_H

#include "m0/types.h"

struct m0_config;

#define M0_CTL_BOOTED  'B'
#define M0_CTL_RETIRED 'R'
#define M0_CTL_GO      'G'
#define M0_CTL_DRAIN   'D'
#define M0_CTL_REPLACE 'Q'
#define M0_CTL_RELOAD  'H'
#define M0_CTL_PING    'P'
#define M0_CTL_PONG    'A'

/* Runs in the child right after fork; never returns. Exits 0 after a
 * graceful drain, M0_EXIT_ABANDONED when the graceful timeout left requests
 * unfinished, M0_EXIT_BOOT when Python or the application could not be
 * loaded (the master then keeps the old workers, or stops at first start).
 * listen_fds are the nlisten sockets it accepts on; ctl_fd is the worker's
 * end of its control socket. */
void m0_worker_main(const struct m0_config *cfg, const int *listen_fds, int nlisten, int ctl_fd)
    __attribute__((noreturn));

/* In a process forked by a view (os.register_at_fork): close the server's
 * descriptors — listener, epoll, lanes, bus, client connections — so the
 * child holds nothing of the server's. */
void m0_worker_after_fork_child(void);

/* Called after every call into the application: a process forked by the
 * view that returns into the server exits here (it must never serve). */
void m0_worker_check_forked(void);

#endif
