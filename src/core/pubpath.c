/*
 * pubpath.c — the publish socket's path, its directory and the claim on it
 * (see pubpath.h).
 *
 * Why a lock file beside the socket rather than "connect, and if refused,
 * unlink": two servers starting together would both find the old socket
 * dead and both unlink and bind, the second removing the first's fresh
 * socket (which then serves no one). A write lock decides it: whoever holds
 * it owns the path. fcntl(2) locks, not flock(2): they belong to the
 * process, not to the open file, so the workers the master forks (which
 * inherit the descriptor) do not hold the path after the master is gone,
 * and the master can give it up at the start of a stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "m0/pubpath.h"

int m0_pubpath_default(char *out, size_t cap, uid_t uid, int use_env)
{
    const char *xdg = use_env ? getenv("XDG_RUNTIME_DIR") : NULL;
    char run[64];
    struct stat st;
    int n;
    snprintf(run, sizeof run, "/run/user/%u", (unsigned)uid);
    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(out, cap, "%s/m0serve/publish.sock", xdg);
    else if (lstat(run, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid)
        n = snprintf(out, cap, "%s/m0serve/publish.sock", run);
    else if (uid == 0)
        n = snprintf(out, cap, "/run/m0serve/publish.sock");
    else
        n = snprintf(out, cap, "/tmp/m0serve-%u/publish.sock", (unsigned)uid);
    return n > 0 && (size_t)n < cap && n < M0_PUBPATH_MAX ? M0_OK : M0_ERR;
}

int m0_pubpath_dir_ok(const char *sock_path, uid_t uid, gid_t gid, int create, char *err, size_t cap)
{
    char dir[M0_PUBPATH_MAX];
    const char *slash = strrchr(sock_path, '/');
    if (slash == NULL || slash == sock_path || (size_t)(slash - sock_path) >= sizeof dir) {
        snprintf(err, cap, "%s: not an absolute socket path", sock_path);
        return M0_ERR;
    }
    memcpy(dir, sock_path, (size_t)(slash - sock_path));
    dir[slash - sock_path] = '\0';
    if (create && mkdir(dir, 0700) == 0 && geteuid() == 0 && (uid != 0 || gid != (gid_t)-1) &&
        chown(dir, uid, gid) == -1) {
        snprintf(err, cap, "cannot give %s to uid %u: %s", dir, (unsigned)uid, strerror(errno));
        return M0_ERR;
    }
    struct stat st;
    if (lstat(dir, &st) == -1) {
        snprintf(err, cap, "%s: %s", dir, strerror(errno));
        return M0_ERR;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, cap, "%s is not a directory", dir);
        return M0_ERR;
    }
    if (st.st_uid != uid) {
        snprintf(err, cap, "%s belongs to uid %u, not %u", dir, (unsigned)st.st_uid, (unsigned)uid);
        return M0_ERR;
    }
    if (st.st_mode & 022) {
        snprintf(err, cap, "%s may be written by other users (mode %04o)", dir, (unsigned)(st.st_mode & 07777));
        return M0_ERR;
    }
    return M0_OK;
}

/* 1 when something accepts connections at path (a live socket). */
static int live(const struct sockaddr_un *sun)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1)
        return 0;
    int rc = connect(fd, (const struct sockaddr *)sun, sizeof *sun);
    int e = errno;
    close(fd);
    return rc == 0 || e == EAGAIN;          /* EAGAIN: its backlog is full, but it is there */
}

int m0_pubpath_listen(const char *path, int backlog, uid_t uid, gid_t gid, int *lock_fd, int *busy, char *err,
                      size_t cap)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    *busy = 0;
    *lock_fd = -1;
    if (strlen(path) >= sizeof sun.sun_path) {
        snprintf(err, cap, "unix socket path too long (%zu bytes, at most %zu): %s", strlen(path),
                 sizeof sun.sun_path - 1, path);
        return -1;
    }
    strcpy(sun.sun_path, path);
    char lockp[M0_PUBPATH_MAX + 8];
    snprintf(lockp, sizeof lockp, "%s.lock", path);
    int lk = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lk == -1) {
        snprintf(err, cap, "cannot open %s: %s", lockp, strerror(errno));
        return -1;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(lk, F_SETLK, &fl) == -1) {
        int e = errno;
        struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (e == EACCES || e == EAGAIN) {
            *busy = 1;
            if (fcntl(lk, F_GETLK, &who) == 0 && who.l_type != F_UNLCK)
                snprintf(err, cap, "unix:%s is another server's (pid %d)", path, (int)who.l_pid);
            else
                snprintf(err, cap, "unix:%s is another server's", path);
        } else {
            snprintf(err, cap, "cannot lock %s: %s", lockp, strerror(e));
        }
        close(lk);
        return -1;
    }
    if ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(lk, uid, gid) == -1) {
        snprintf(err, cap, "cannot give %s to uid %u: %s", lockp, (unsigned)uid, strerror(errno));
        close(lk);
        return -1;
    }
    /* The claim is ours: a socket here is no live server's — unless a
     * program that takes no claim listens on it. */
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, cap, "%s exists and is not a socket", path);
            close(lk);
            return -1;
        }
        if (live(&sun)) {
            *busy = 1;
            snprintf(err, cap, "unix:%s is in use by another program", path);
            close(lk);
            return -1;
        }
        unlink(path);        /* a killed server's */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    mode_t old = umask(0);
    umask(old | 0117);                       /* born 0660 less the umask: no moment with a wider mode */
    int rc = fd == -1 ? -1 : bind(fd, (struct sockaddr *)&sun, sizeof sun);
    umask(old);
    if (rc == -1 || listen(fd, backlog) == -1) {
        snprintf(err, cap, "cannot listen on unix:%s: %s", path, strerror(errno));
        if (fd != -1)
            close(fd);
        if (rc == 0)
            unlink(path);
        close(lk);
        return -1;
    }
    *lock_fd = lk;
    return fd;
}
