/*
 * listeners.h — the master's listening sockets, made before the first fork
 * and handed to every worker it starts.
 */
#ifndef M0_LISTENERS_H
#define M0_LISTENERS_H

#include "m0/conn.h"
#include "m0/config.h"

/* The most worker slots a server can have (--workers and SIGTTIN). */
#define M0_MAX_SLOTS 1024

struct m0_listener {
    int per_slot;        /* TCP: one SO_REUSEPORT socket per worker slot and event loop */
    int *fds;            /* per_slot: M0_MAX_SLOTS × loops entries (slot k's loop i at
                            k * loops + i), -1 where no slot; else 1 */
    char *host;          /* per_slot: the address the slots' sockets bind */
    int port;            /* per_slot: the port they share */
    long backlog;        /* per_slot: listen(2) backlog of each */
    char *unix_path;     /* bound here: unlinked at exit */
    int lock_fd;         /* the publish socket's only: the claim on its path (pubpath.h) */
    char where[200];     /* for the banner */
};

struct m0_listeners {
    int n;
    int loops;           /* event loops per worker (--threads): sockets per slot */
    struct m0_listener l[M0_MAX_LISTENERS];
};

/* Slot idx's sockets for loop i of its worker (0 <= i < ls->loops), one
 * per listener, into out (ls->n entries): a per-slot listener's own
 * socket for that loop, a shared listener's one socket. */
void m0_listeners_of(const struct m0_listeners *ls, int idx, int i, int *out);

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

/*
 * Worker slots added and removed while serving (SIGTTIN/SIGTTOU, master.c).
 * Only per-slot (TCP --bind) listeners change; shared ones serve any slot.
 *
 * m0_listeners_add_slot: new SO_REUSEPORT sockets for slot idx (the
 * current slot count, < M0_MAX_SLOTS), one per event loop, on every
 * per-slot listener, joining its group. M0_OK, or M0_ERR (logged; nothing
 * added).
 *
 * m0_listeners_steer: the kernel hands new connections only to the
 * per-slot sockets of slots 0..n-1 (a classic BPF program on each
 * SO_REUSEPORT group picks one at random, so the loops of the workers
 * share them evenly; the group's sockets are in slot order because slots
 * are added and removed only at the end). A socket
 * left out keeps what is already queued on it for its worker to accept.
 * M0_OK, or M0_ERR (logged).
 *
 * m0_listeners_pending: 1 while a connection waits in the accept queue of
 * a per-slot socket of slot idx, else 0.
 *
 * m0_listeners_drop_slot: close slot idx's per-slot sockets (idx is the
 * last slot; steer first, and wait until nothing is pending, or the
 * connections still queued are reset).
 */
int m0_listeners_add_slot(struct m0_listeners *ls, int idx);
int m0_listeners_steer(struct m0_listeners *ls, int n);
int m0_listeners_pending(const struct m0_listeners *ls, int idx);
void m0_listeners_drop_slot(struct m0_listeners *ls, int idx);

/* --grip-control: the same for the GRIP control port (EPCP publishes,
 * grip_control.c), never the public listener; sets cfg->grip_listener.
 * M0_OK, or the exit status to return (logged). */
int m0_grip_listen(struct m0_listeners *ls, struct m0_config *cfg);

/* The local publish socket (pubsock.h), with --realtime, after the other
 * listeners: at cfg->publish_socket, or (NULL) at the default path for the
 * user the server runs as (pubpath.h; its directory made when missing).
 * Claimed as pubpath.h says; cfg->publish_listener set to its index, and
 * M0_PUBLISH_SOCKET to its path for the workers (a view's subprocess finds
 * it). The default path another server holds, or a directory unfit for it,
 * leaves this server without one (logged); an explicit path that cannot be
 * had is an error. M0_OK, or the exit status to return (logged). */
int m0_publish_listen(struct m0_listeners *ls, struct m0_config *cfg);

/* At the start of a stop: unlink the publish socket and close the master's
 * descriptor of it and its claim, so a publisher is told at once that no
 * server is there (instead of waiting in a backlog no worker accepts from
 * any more) and a new server may take the path while this one drains. */
void m0_publish_unlisten(struct m0_listeners *ls, const struct m0_config *cfg);

#endif
