/*
 * listeners.h — the master's listening sockets, made before the first fork
 * and handed to every worker it starts.
 */
#ifndef M0_LISTENERS_H
#define M0_LISTENERS_H

#include "m0/conn.h"
#include "m0/config.h"

struct m0_listener {
    int per_slot;        /* TCP: one SO_REUSEPORT socket per worker slot */
    int *fds;            /* nworkers entries if per_slot, else 1 */
    char *unix_path;     /* bound here: unlinked at exit */
    char where[200];     /* for the banner */
};

struct m0_listeners {
    int n;
    struct m0_listener l[M0_MAX_LISTENERS];
};

/*
 * Open the listeners: the sockets systemd passed (socket activation,
 * listen.h), else cfg->bind. A TCP port another server already serves is
 * refused ("Address already in use"), even when that server's sockets
 * use SO_REUSEPORT. Sets cfg->bind/bound_port to the first TCP one so the
 * environ's SERVER_NAME and SERVER_PORT name it. Returns M0_OK, or the
 * exit status to stop with (M0_EXIT_USAGE for a bad --bind, M0_EXIT_FAIL
 * when a socket cannot be had); the reason is logged.
 */
int m0_listeners_open(struct m0_listeners *ls, struct m0_config *cfg, int nworkers);

/* Before the first fork, after the main listeners: open --metrics-bind
 * (when given) as one more listener every worker accepts on, and set
 * cfg->metrics_listener to its index. Returns M0_OK, or the exit status to
 * stop with (logged). */
int m0_metrics_listen(struct m0_listeners *ls, struct m0_config *cfg);

/* Close every listener and unlink the unix sockets this server bound. */
void m0_listeners_close(struct m0_listeners *ls, int nworkers);

#endif
