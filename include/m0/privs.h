/*
 * privs.h — the process's identity: --user/--group resolved at startup,
 * the unix socket handed to them, and the switch made in the master after
 * binding and before the first fork, so no worker — and no process a view
 * starts — ever runs with the privileges the binding needed.
 */
#ifndef M0_PRIVS_H
#define M0_PRIVS_H

#include <sys/types.h>
#include "m0/types.h"

struct m0_ident {
    int set_uid, set_gid;     /* which of uid/gid to switch to */
    uid_t uid;
    gid_t gid;
    char user[64];            /* for initgroups(3); "" when --user was numeric without an entry */
};

/* Resolve user and group (names, or numeric ids; either may be NULL). A
 * user without a group takes the user's primary group. Returns M0_OK, or
 * M0_ERR with one line in err naming the flag. */
int m0_privs_resolve(const char *user, const char *group, struct m0_ident *id, char *err, size_t cap);

/* Give path (a unix socket, a pid file) to id's uid/gid where they are
 * set. Returns M0_OK or M0_ERR with err. */
int m0_privs_chown(const char *path, const struct m0_ident *id, char *err, size_t cap);

/* Switch the process for good: supplementary groups (the user's, or just
 * the group), then the gid, then the uid; then check that root cannot be
 * regained. Returns M0_OK or M0_ERR with err (e.g. not running as root). */
int m0_privs_drop(const struct m0_ident *id, char *err, size_t cap);

#endif
