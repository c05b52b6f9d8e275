/*
 * listen.h — listener sockets. Made by the master before it forks; every
 * descriptor is non-blocking and close-on-exec.
 */
#ifndef M0_LISTEN_H
#define M0_LISTEN_H

#include "m0/types.h"

/* Bind and listen on host:port (port 0 picks a free port; *bound_port
 * receives the real one). reuseport sets SO_REUSEPORT so several sockets can
 * share the port, one per worker, for kernel-side load balancing. Returns
 * the fd, or -1 with a one-line reason in err. */
int m0_listen_tcp(const char *host, int port, int backlog, int reuseport, int *bound_port,
                  char *err, size_t cap);

/* Bind and listen on a unix socket at path (a stale socket file is
 * replaced). Returns the fd or -1 with err. */
int m0_listen_unix(const char *path, int backlog, char *err, size_t cap);

#endif
