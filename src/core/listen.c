/*
 * listen.c — TCP and unix listener sockets, bound here or inherited from
 * systemd (socket activation, sd_listen_fds(3)).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>

#include "m0/listen.h"

int m0_listen_tcp(const char *host, int port, int backlog, int reuseport, int *bound_port,
                  char *err, size_t cap)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%d", port);
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0) {
        snprintf(err, cap, "cannot resolve %s: %s", host, gai_strerror(gai));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd == -1) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (reuseport)
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0)
            break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd == -1) {
        snprintf(err, cap, "cannot listen on %s:%d: %s", host, port, strerror(saved));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            *bound_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            *bound_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return fd;
}

int m0_listen_unix(const char *path, int backlog, char *err, size_t cap)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sun.sun_path) {
        snprintf(err, cap, "unix socket path too long: %s", path);
        return -1;
    }
    strcpy(sun.sun_path, path);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path);      /* a previous run's socket */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1 || bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1 || listen(fd, backlog) == -1) {
        snprintf(err, cap, "cannot listen on unix:%s: %s", path, strerror(errno));
        if (fd != -1)
            close(fd);
        return -1;
    }
    return fd;
}

int m0_listen_inherited(struct m0_inherited *out, int max, char *err, size_t cap)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS"), *names = getenv("LISTEN_FDNAMES");
    long n = 0;
    int mine = pid != NULL && fds != NULL && strtol(pid, NULL, 10) == (long)getpid();
    if (mine) {
        char *end;
        n = strtol(fds, &end, 10);
        if (*fds == '\0' || *end != '\0' || n < 0)
            n = -1;
    }
    char namebuf[1024];
    snprintf(namebuf, sizeof namebuf, "%s", names ? names : "");
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if (!mine)
        return 0;
    if (n == -1) {
        snprintf(err, cap, "socket activation: LISTEN_FDS=%s is not a count", fds);
        return -1;
    }
    if (n > max) {
        snprintf(err, cap, "socket activation: %ld sockets passed, at most %d served", n, max);
        return -1;
    }
    char *save = NULL, *name = strtok_r(namebuf, ":", &save);
    for (int i = 0; i < n; i++) {
        struct m0_inherited *l = &out[i];
        memset(l, 0, sizeof *l);
        l->fd = 3 + i;          /* SD_LISTEN_FDS_START */
        if (name != NULL) {
            snprintf(l->name, sizeof l->name, "%s", name);
            name = strtok_r(NULL, ":", &save);
        }
        int type = 0, acc = 0;
        socklen_t tl = sizeof type, al = sizeof acc;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockopt(l->fd, SOL_SOCKET, SO_TYPE, &type, &tl) == -1 ||
            getsockopt(l->fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) == -1 ||
            getsockname(l->fd, (struct sockaddr *)&ss, &sl) == -1) {
            snprintf(err, cap, "socket activation: fd %d%s%s%s is not a socket: %s", l->fd,
                     l->name[0] ? " (" : "", l->name, l->name[0] ? ")" : "", strerror(errno));
            return -1;
        }
        if (type != SOCK_STREAM || !acc ||
            (ss.ss_family != AF_INET && ss.ss_family != AF_INET6 && ss.ss_family != AF_UNIX)) {
            snprintf(err, cap, "socket activation: fd %d%s%s%s is not a listening TCP or unix stream socket "
                     "(ListenStream= in the .socket unit, Accept=no)", l->fd,
                     l->name[0] ? " (" : "", l->name, l->name[0] ? ")" : "");
            return -1;
        }
        l->family = ss.ss_family;
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &in->sin_addr, l->addr, sizeof l->addr);
            l->port = ntohs(in->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &in6->sin6_addr, l->addr, sizeof l->addr);
            l->port = ntohs(in6->sin6_port);
        } else {
            struct sockaddr_un *un = (struct sockaddr_un *)&ss;
            size_t pl = sl > offsetof(struct sockaddr_un, sun_path) ? sl - offsetof(struct sockaddr_un, sun_path) : 0;
            if (pl > 0 && un->sun_path[0] == '\0') {
                l->addr[0] = '@';          /* abstract */
                memcpy(l->addr + 1, un->sun_path + 1, pl - 1 < sizeof l->addr - 2 ? pl - 1 : sizeof l->addr - 2);
            } else {
                snprintf(l->addr, sizeof l->addr, "%.*s", (int)strnlen(un->sun_path, pl), un->sun_path);
            }
        }
        int fl = fcntl(l->fd, F_GETFL);
        if (fl == -1 || fcntl(l->fd, F_SETFL, fl | O_NONBLOCK) == -1 || fcntl(l->fd, F_SETFD, FD_CLOEXEC) == -1) {
            snprintf(err, cap, "socket activation: fd %d: %s", l->fd, strerror(errno));
            return -1;
        }
    }
    return (int)n;
}
