/*
 * notify.c — sd_notify(3) on the documented socket protocol (see notify.h).
 *
 * The protocol (systemd.service(5) Type=notify, sd_notify(3) "Notes"):
 * $NOTIFY_SOCKET names an AF_UNIX SOCK_DGRAM socket — a filesystem path
 * starting with '/', or an abstract-namespace name written with a leading
 * '@' that stands for the NUL byte. Each notification is one datagram of
 * newline-separated assignments. Nothing is ever read back.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "m0/notify.h"

/* Per process (the master's): systemd's notification socket, found once at
 * start ($NOTIFY_SOCKET, $WATCHDOG_USEC). */
static struct sockaddr_un addr;
static socklen_t addr_len;     /* 0: notifications off */
static int sock = -1;
static uint64_t watchdog_usec;

int m0_notify_init(char *err, size_t cap)
{
    const char *path = getenv("NOTIFY_SOCKET");
    const char *wd = getenv("WATCHDOG_USEC"), *wd_pid = getenv("WATCHDOG_PID");
    addr_len = 0;
    watchdog_usec = 0;
    if (wd != NULL && (wd_pid == NULL || strtol(wd_pid, NULL, 10) == (long)getpid())) {
        char *end;
        unsigned long long v = strtoull(wd, &end, 10);
        if (*wd != '\0' && *end == '\0')
            watchdog_usec = v;
    }
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    if (path == NULL || path[0] == '\0') {
        watchdog_usec = 0;    /* a watchdog nobody can be told about */
        unsetenv("NOTIFY_SOCKET");
        return M0_OK;
    }
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof addr.sun_path || n < 2) {
        snprintf(err, cap, "NOTIFY_SOCKET=%s: not a socket path or @abstract name", path);
        unsetenv("NOTIFY_SOCKET");
        return M0_ERR;
    }
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path, n);
    if (path[0] == '@')
        addr.sun_path[0] = '\0';      /* abstract: the length, not a NUL, ends the name */
    addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/' ? 1 : 0));
    unsetenv("NOTIFY_SOCKET");
    sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sock == -1) {
        snprintf(err, cap, "NOTIFY_SOCKET: socket: %s", strerror(errno));
        addr_len = 0;
        return M0_ERR;
    }
    return M0_OK;
}

int m0_notify_enabled(void)
{
    return addr_len != 0;
}

uint64_t m0_notify_watchdog_usec(void)
{
    return watchdog_usec;
}

int m0_notify(const char *fmt, ...)
{
    if (addr_len == 0)
        return M0_OK;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return M0_ERR;
    if ((size_t)n >= sizeof msg)
        n = sizeof msg - 1;
    ssize_t w;
    do
        w = sendto(sock, msg, (size_t)n, MSG_NOSIGNAL, (const struct sockaddr *)&addr, addr_len);
    while (w == -1 && errno == EINTR);
    return w == n ? M0_OK : M0_ERR;
}

uint64_t m0_notify_monotonic_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
