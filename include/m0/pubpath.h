/*
 * pubpath.h — where a server's local publish socket lives (pubsock.h), for
 * the server that listens there and for the publishers that look for it
 * (`m0serve publish`, python/m0pub.py, which computes the same path).
 *
 * The default path, for the user the server runs as:
 *   $XDG_RUNTIME_DIR/m0serve/publish.sock   when XDG_RUNTIME_DIR is set (absolute)
 *   /run/user/UID/m0serve/publish.sock      else when /run/user/UID is that user's directory
 *   /run/m0serve/publish.sock               else for root
 *   /tmp/m0serve-UID/publish.sock           else
 * so a shell, a cron job or a Celery worker of the same user finds it with
 * no configuration. Its directory is the user's alone (mode 0700, made by
 * the server when missing; a directory that is not a real one owned by the
 * user and writable by nobody else is not used, on either side).
 * --publish-socket PATH / M0_PUBLISH_SOCKET name another path (several
 * servers on one host, another user, a systemd RuntimeDirectory).
 */
#ifndef M0_PUBPATH_H
#define M0_PUBPATH_H

#include <sys/types.h>
#include "m0/types.h"

#define M0_PUBPATH_MAX 108          /* sun_path: the longest socket path, NUL included */

/* The default path for uid into out (cap bytes, at least M0_PUBPATH_MAX);
 * use_env: consult XDG_RUNTIME_DIR (only when the caller runs as uid:
 * another user's environment says nothing about uid's runtime dir).
 * Returns M0_OK, or M0_ERR when the path would not fit a socket address. */
int m0_pubpath_default(char *out, size_t cap, uid_t uid, int use_env);

/* The directory of a default path (sock_path's parent): M0_OK when it is a
 * directory (not a symlink) owned by uid that no one else may write; else
 * M0_ERR with the reason in err (cap bytes). create: make it first when
 * missing (mode 0700, given to uid/gid when the caller is root and they
 * differ from its own; gid (gid_t)-1 keeps the group). */
int m0_pubpath_dir_ok(const char *sock_path, uid_t uid, gid_t gid, int create, char *err, size_t cap);

/*
 * Listen on the unix stream socket at path, for a server that must not
 * take another live server's socket: first the claim on it, an fcntl(2)
 * write lock on "PATH.lock" held by the calling process alone (a forked
 * child does not hold it; it goes when the process exits or closes
 * *lock_fd), so of two servers started together one gets the path and the
 * other is told; then a socket file left by a server that is gone (killed:
 * its lock went with it) is replaced. The socket is mode 0660 less the
 * umask (--umask 007: the owner and the group may connect; the usual 022:
 * the owner only, connecting needs write permission); the lock file and the socket are given to
 * uid/gid ((uid_t)-1: unchanged) so a server that drops to them can unlink
 * and later re-claim the path. Returns the listening descriptor
 * (nonblocking, close-on-exec) with *lock_fd set, or -1 with err set and
 * *busy 1 when another process holds the claim (0 for any other failure).
 */
int m0_pubpath_listen(const char *path, int backlog, uid_t uid, gid_t gid, int *lock_fd, int *busy, char *err,
                      size_t cap);

#endif
