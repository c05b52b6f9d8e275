/*
 * privs.c — --user/--group (see privs.h).
 *
 * Decision: the master drops as well as the workers. It never needs root
 * after binding: SIGHUP and worker replacement reuse the sockets it holds,
 * and nothing else it does is privileged. The one cost is at exit: a master
 * that is no longer root may not be allowed to unlink its unix socket or
 * pid file in a root-owned directory (put them in a directory the user
 * owns, e.g. systemd's RuntimeDirectory=; a failed unlink is logged, and a
 * stale socket file is replaced at the next start anyway).
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "m0/privs.h"

static int numeric(const char *s, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v > 0x7fffffffUL)
        return 0;
    *out = v;
    return 1;
}

int m0_privs_resolve(const char *user, const char *group, struct m0_ident *id, char *err, size_t cap)
{
    memset(id, 0, sizeof *id);
    if (user != NULL) {
        unsigned long v;
        struct passwd *pw = numeric(user, &v) ? getpwuid((uid_t)v) : getpwnam(user);
        if (pw == NULL && !numeric(user, &v)) {
            snprintf(err, cap, "m0serve: error: --user: no such user '%s'", user);
            return M0_ERR;
        }
        id->set_uid = 1;
        id->uid = pw ? pw->pw_uid : (uid_t)v;
        if (pw != NULL) {
            snprintf(id->user, sizeof id->user, "%s", pw->pw_name);
            id->gid = pw->pw_gid;
            id->set_gid = 1;
        }
    }
    if (group != NULL) {
        unsigned long v;
        struct group *gr = numeric(group, &v) ? getgrgid((gid_t)v) : getgrnam(group);
        if (gr == NULL && !numeric(group, &v)) {
            snprintf(err, cap, "m0serve: error: --group: no such group '%s'", group);
            return M0_ERR;
        }
        id->gid = gr ? gr->gr_gid : (gid_t)v;
        id->set_gid = 1;
    }
    if (id->set_uid && !id->set_gid) {
        snprintf(err, cap, "m0serve: error: --user: uid %s has no passwd entry: give --group too", user);
        return M0_ERR;
    }
    return M0_OK;
}

int m0_privs_chown(const char *path, const struct m0_ident *id, char *err, size_t cap)
{
    if (!id->set_uid && !id->set_gid)
        return M0_OK;
    if (chown(path, id->set_uid ? id->uid : (uid_t)-1, id->set_gid ? id->gid : (gid_t)-1) == -1) {
        snprintf(err, cap, "cannot give %s to --user/--group: %s", path, strerror(errno));
        return M0_ERR;
    }
    return M0_OK;
}

int m0_privs_drop(const struct m0_ident *id, char *err, size_t cap)
{
    if (!id->set_uid && !id->set_gid)
        return M0_OK;
    if (id->set_gid) {
        /* Supplementary groups first (it needs root): root's would
         * otherwise survive the switch. */
        int rc = id->set_uid && id->user[0] ? initgroups(id->user, id->gid) : setgroups(1, &id->gid);
        if (rc == -1 && geteuid() == 0) {
            snprintf(err, cap, "cannot set supplementary groups: %s", strerror(errno));
            return M0_ERR;
        }
        if (setgid(id->gid) == -1) {
            snprintf(err, cap, "--group: cannot switch to gid %u: %s", (unsigned)id->gid, strerror(errno));
            return M0_ERR;
        }
    }
    if (id->set_uid) {
        if (setuid(id->uid) == -1) {
            snprintf(err, cap, "--user: cannot switch to uid %u: %s", (unsigned)id->uid, strerror(errno));
            return M0_ERR;
        }
        /* setuid(2) from root changes all three ids; prove it. */
        if (id->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
            snprintf(err, cap, "--user: root could be regained after the switch; refusing to run");
            return M0_ERR;
        }
    }
    return M0_OK;
}
