/*
 * listen.h — listener sockets. Made (or inherited from systemd) by the
 * master before it forks; every descriptor is non-blocking and
 * close-on-exec.
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
 * replaced). Its mode is 0777 less the process umask (--umask). Returns the
 * fd or -1 with err. */
int m0_listen_unix(const char *path, int backlog, char *err, size_t cap);

/* A socket systemd passed us (sd_listen_fds(3)). */
struct m0_inherited {
    int fd;
    int family;             /* AF_INET, AF_INET6 or AF_UNIX */
    int port;               /* TCP: the bound port */
    char addr[108];         /* TCP: the bound address; AF_UNIX: the path ("" if unnamed) */
    char name[64];          /* its LISTEN_FDNAMES entry, or "" */
};

/*
 * The sockets of socket activation: when $LISTEN_PID is this process and
 * $LISTEN_FDS is N > 0, descriptors 3..3+N-1, named by $LISTEN_FDNAMES
 * (colon-separated). Each must be a listening SOCK_STREAM socket (TCP or
 * unix); each is made non-blocking and close-on-exec. The three variables
 * are removed from the environment either way, so nothing the server
 * starts inherits them. Returns N (0: nothing passed, or passed to another
 * process), or -1 with one line in err.
 */
int m0_listen_inherited(struct m0_inherited *out, int max, char *err, size_t cap);

#endif
