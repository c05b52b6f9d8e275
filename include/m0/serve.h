/*
 * serve.h — a worker's serving lifecycle: build the server (loop, slot
 * table, pool), run it once the master says go, drain on SIGTERM or the
 * master's word, tear it down. See server.h for struct m0_server.
 */
#ifndef M0_SERVE_H
#define M0_SERVE_H

#include "m0/types.h"

struct m0_config;
struct m0_server;

/* Build the server for the nlisten sockets listen_fds (not yet accepting;
 * 1..M0_MAX_LISTENERS), reading signals from sig_fd (one byte per signal)
 * and the master from ctl_fd (-1: none). Returns NULL after logging why. */
struct m0_server *m0_serve_new(const struct m0_config *cfg, const int *listen_fds, int nlisten, int sig_fd,
                               int ctl_fd);

/* Join the n loops of one worker process (--threads; 1..M0_MAX_LOOPS,
 * each made by m0_serve_new, loops[0] with the signals and the master's
 * socket, the others with -1 for both): their loops.h table, their
 * indexes (the runner env's, the realtime engine's bus endpoint) and a
 * control pair between the first and each other (control.h). Before the
 * applications load (n == 1: nothing to join, no table). M0_OK or M0_ERR
 * (logged). The table is freed with m0_loops_free after every
 * m0_serve_free. */
int m0_serve_group(struct m0_server **loops, unsigned n);

/* Send the master one control byte (worker.h: M0_CTL_REPLACE, M0_CTL_RELOAD;
 * from a loop other than the first: to the first, which relays what is
 * the master's). A no-op without a master. Loop thread. */
void m0_serve_tell_master(struct m0_server *s, char what);

/* The last of a worker's setup, before it reports booted: what go needs
 * that can fail (--realtime's state and hooks). M0_OK, or M0_ERR (logged):
 * the worker then exits M0_EXIT_BOOT, never having said booted. */
int m0_serve_prepare(struct m0_server *s);

/* Tell the master the application is loaded and the worker set up
 * (M0_CTL_BOOTED): after m0_serve_prepare succeeded. */
void m0_serve_booted(struct m0_server *s);

/* Run until drained. Returns M0_EXIT_OK, or M0_EXIT_ABANDONED when the
 * graceful timeout (or SIGQUIT) left requests in flight — then handler
 * threads may still be inside Python and the caller must _exit at once. */
int m0_serve_run(struct m0_server *s);

/* Stop the pool (joining its threads) and free everything. Detached. */
void m0_serve_free(struct m0_server *s);

#endif
