/*
 * pidfile.c — --pid FILE (see pidfile.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "m0/log.h"
#include "m0/pidfile.h"

static long read_pid(const char *path)
{
    char buf[32];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return strtol(buf, NULL, 10);
}

int m0_pidfile_write(const char *path, char *err, size_t cap)
{
    long old = read_pid(path);
    if (old > 0 && old != (long)getpid() && (kill((pid_t)old, 0) == 0 || errno == EPERM)) {
        snprintf(err, cap, "--pid %s: process %ld is running (another m0serve?)", path, old);
        return M0_ERR;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd == -1) {
        snprintf(err, cap, "--pid %s: %s", path, strerror(errno));
        return M0_ERR;
    }
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    int ok = write(fd, line, (size_t)n) == n;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) == -1) {
        snprintf(err, cap, "--pid %s: %s", path, strerror(errno));
        unlink(tmp);
        return M0_ERR;
    }
    return M0_OK;
}

void m0_pidfile_remove(const char *path)
{
    if (read_pid(path) != (long)getpid())
        return;
    if (unlink(path) == -1)
        m0_log_errno("cannot remove the pid file %s", path);
}
