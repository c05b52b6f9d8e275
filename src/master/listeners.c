/*
 * listeners.c — the sockets a server listens on (see listeners.h): those
 * systemd passed, else --bind, one SO_REUSEPORT socket per worker slot and
 * event loop for TCP and one shared socket for a unix path.
 *
 * A socket per loop rather than one per worker that its loops share: a
 * loop waits for connections while its handler threads run Python, so
 * with a shared socket (EPOLLEXCLUSIVE wakes the first waiter) the first
 * loop would take every connection and its pool all the work while the
 * others sat idle. The kernel's random pick spreads them evenly. (A socket
 * that cannot be split — a unix path, systemd's — is shared, and its
 * connections are handed round the loops instead: handoff.h.)
 */
#include <errno.h>
#include <linux/filter.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "m0/config.h"
#include "m0/listen.h"
#include "m0/listeners.h"
#include "m0/log.h"
#include "m0/metrics_text.h"
#include "m0/privs.h"
#include "m0/pubpath.h"
#include "m0/tls_server.h"

void m0_listeners_of(const struct m0_listeners *ls, int idx, int i, int *out)
{
    for (int l = 0; l < ls->n; l++)
        out[l] = ls->l[l].fds[ls->l[l].per_slot ? idx * ls->loops + i : 0];
}

/* Listener i of ls speaks TLS (tls: 1): the workers' cfg->tls_listeners,
 * and the scheme of where. */
static void mark_tls(struct m0_listeners *ls, struct m0_config *cfg, int i, int tls)
{
    if (!tls)
        return;
    cfg->tls_listeners |= 1u << i;
    struct m0_listener *l = &ls->l[i];
    if (strncmp(l->where, "http://", 7) == 0) {
        char w[sizeof l->where];
        snprintf(w, sizeof w, "https://%s", l->where + 7);
        memcpy(l->where, w, sizeof w);
    } else {
        size_t n = strlen(l->where);
        snprintf(l->where + n, sizeof l->where - n, " (TLS)");
    }
}

/* One --bind address: a unix socket every worker shares, or one
 * SO_REUSEPORT socket per worker slot and loop. M0_OK, or the exit status
 * (logged). */
static int open_bind(struct m0_listeners *ls, struct m0_config *cfg, const char *addr, int nworkers)
{
    char err[512];
    struct m0_bind_parts b;
    if (m0_config_addr_parts(addr, "--bind", &b, err, sizeof err) != M0_OK) {
        fprintf(stderr, "%s\n", err);
        return M0_EXIT_USAGE;
    }
    if (ls->n == M0_MAX_LISTENERS) {
        m0_error("--bind: more than %d listening sockets", M0_MAX_LISTENERS);
        return M0_EXIT_USAGE;
    }
    const char *host = b.host, *path = b.path;
    int port = b.port;
    struct m0_listener *l = &ls->l[ls->n++];
    memset(l, 0, sizeof *l);
    if (path != NULL) {
        l->per_slot = 0;
        l->fds = calloc(1, sizeof *l->fds);
        l->unix_path = strdup(path);
        snprintf(l->where, sizeof l->where, "unix:%s", path);
        if ((l->fds[0] = m0_listen_unix(path, (int)cfg->backlog, err, sizeof err)) == -1) {
            m0_error("%s", err);
            return M0_EXIT_FAIL;
        }
        mark_tls(ls, cfg, ls->n - 1, m0_tlsd_listener_is_tls(cfg, addr, 1));
        return M0_OK;
    }
    int bound = port;
    if (port != 0) {
        /* Each worker's socket joins one SO_REUSEPORT group, which another
         * server of the same user could join too: both would then serve the
         * port, half the connections each. A socket without SO_REUSEPORT
         * cannot bind beside such a group, so binding one first makes a
         * port in use the error gunicorn and uvicorn give. */
        int probe = m0_listen_tcp(host, port, 1, 0, &bound, err, sizeof err);
        if (probe == -1) {
            m0_error("%s", err);
            return M0_EXIT_FAIL;
        }
        close(probe);
    }
    l->per_slot = 1;
    l->fds = malloc((size_t)M0_MAX_SLOTS * (size_t)ls->loops * sizeof *l->fds);
    l->host = strdup(host);
    if (l->fds == NULL || l->host == NULL) {
        m0_error("out of memory for the listeners");
        return M0_EXIT_FAIL;
    }
    for (int i = 0; i < M0_MAX_SLOTS * ls->loops; i++)
        l->fds[i] = -1;
    for (int i = 0; i < nworkers * ls->loops; i++) {
        /* Port 0: the first socket picks the port, the rest join it. */
        l->fds[i] = m0_listen_tcp(host, bound, (int)cfg->backlog, 1, &bound, err, sizeof err);
        if (l->fds[i] == -1) {
            m0_error("%s", err);
            return M0_EXIT_FAIL;
        }
    }
    snprintf(l->where, sizeof l->where, strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host, bound);
    if (cfg->bound_port == 0)
        cfg->bound_port = bound;       /* the first TCP listener's: SERVER_PORT */
    l->port = bound;
    l->backlog = cfg->backlog;
    mark_tls(ls, cfg, ls->n - 1, m0_tlsd_listener_is_tls(cfg, addr, 1));
    return M0_OK;
}

int m0_listeners_open(struct m0_listeners *ls, struct m0_config *cfg, int nworkers)
{
    char err[512];
    ls->loops = cfg->loops > 0 ? (int)cfg->loops : 1;
    struct m0_inherited inh[M0_MAX_LISTENERS];
    int ninh = m0_listen_inherited(inh, M0_MAX_LISTENERS, err, sizeof err);
    if (ninh == -1) {
        m0_error("%s", err);
        return M0_EXIT_FAIL;
    }
    if (ninh > 0) {
        static char bind_text[200];
        bind_text[0] = '\0';
        for (int i = 0; i < ninh; i++) {
            struct m0_listener *l = &ls->l[ls->n++];
            l->per_slot = 0;
            l->fds = calloc(1, sizeof *l->fds);
            l->fds[0] = inh[i].fd;
            const char *nm = inh[i].name[0] ? inh[i].name : NULL;
            if (inh[i].family == AF_UNIX) {
                snprintf(l->where, sizeof l->where, "unix:%s (fd %d%s%s, systemd)", inh[i].addr, inh[i].fd,
                         nm ? " " : "", nm ? nm : "");
                if (bind_text[0] == '\0')
                    snprintf(bind_text, sizeof bind_text, "unix:%s", inh[i].addr);
            } else {
                int v6 = inh[i].family == AF_INET6;
                snprintf(l->where, sizeof l->where, v6 ? "http://[%s]:%d (fd %d%s%s, systemd)"
                                                       : "http://%s:%d (fd %d%s%s, systemd)",
                         inh[i].addr, inh[i].port, inh[i].fd, nm ? " " : "", nm ? nm : "");
                if (cfg->bound_port == 0) {
                    snprintf(bind_text, sizeof bind_text, v6 ? "[%s]:%d" : "%s:%d", inh[i].addr, inh[i].port);
                    cfg->bound_port = inh[i].port;
                }
                /* With --certfile a TCP socket speaks TLS, but one its unit
                 * names "http" (FileDescriptorName=http). */
                mark_tls(ls, cfg, ls->n - 1, cfg->certfile != NULL && (nm == NULL || strcmp(nm, "http") != 0));
            }
        }
        cfg->bind = bind_text;
        m0_info("socket activation: serving %d socket(s) passed by systemd (--bind is not used)", ninh);
        return M0_OK;
    }
    for (unsigned i = 0; i < cfg->nbinds; i++) {
        int rc = open_bind(ls, cfg, cfg->binds[i], nworkers);
        if (rc != M0_OK)
            return rc;
    }
    return M0_OK;
}

void m0_listeners_close(struct m0_listeners *ls, int nworkers)
{
    for (int l = 0; l < ls->n; l++) {
        for (int i = 0; i < (ls->l[l].per_slot ? nworkers * ls->loops : 1); i++) {
            if (ls->l[l].fds[i] != -1)
                close(ls->l[l].fds[i]);
        }
        /* Only a socket we bound: systemd's socket unit owns its own. */
        if (ls->l[l].unix_path != NULL && unlink(ls->l[l].unix_path) == -1 && errno != ENOENT)
            m0_log_errno("cannot remove unix:%s", ls->l[l].unix_path);
        free(ls->l[l].unix_path);
        free(ls->l[l].host);
        free(ls->l[l].fds);
    }
    ls->n = 0;
}

int m0_listeners_add_slot(struct m0_listeners *ls, int idx)
{
    char err[512];
    if (idx < 0 || idx >= M0_MAX_SLOTS)
        return M0_ERR;
    for (int l = 0; l < ls->n; l++) {
        struct m0_listener *li = &ls->l[l];
        if (!li->per_slot)
            continue;
        for (int i = 0; i < ls->loops; i++) {
            int bound, at = idx * ls->loops + i;
            li->fds[at] = m0_listen_tcp(li->host, li->port, (int)li->backlog, 1, &bound, err, sizeof err);
            if (li->fds[at] == -1) {
                m0_error("%s", err);
                m0_listeners_drop_slot(ls, idx);     /* what was added so far */
                return M0_ERR;
            }
        }
    }
    return M0_OK;
}

int m0_listeners_steer(struct m0_listeners *ls, int n)
{
    /* A = a random u32; A %= n; return A: the index of the socket in the
     * group (bpf(4)'s SO_ATTACH_REUSEPORT_CBPF, in socket(7)). */
    struct sock_filter code[] = {
        {BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM)},
        {BPF_ALU | BPF_MOD | BPF_K, 0, 0, (uint32_t)(n * ls->loops)},
        {BPF_RET | BPF_A, 0, 0, 0},
    };
    struct sock_fprog prog = {.len = (unsigned short)M0_ARRAY_LEN(code), .filter = code};
    if (n < 1)
        return M0_ERR;
    for (int l = 0; l < ls->n; l++) {
        const struct m0_listener *li = &ls->l[l];
        if (li->per_slot && setsockopt(li->fds[0], SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) == -1) {
            m0_log_errno("SO_ATTACH_REUSEPORT_CBPF on %s", li->where);
            return M0_ERR;
        }
    }
    return M0_OK;
}

int m0_listeners_pending(const struct m0_listeners *ls, int idx)
{
    for (int l = 0; l < ls->n; l++) {
        const struct m0_listener *li = &ls->l[l];
        for (int i = 0; li->per_slot && i < ls->loops; i++) {
            /* A listening socket polls readable while its accept queue is not empty. */
            struct pollfd p = {.fd = li->fds[idx * ls->loops + i], .events = POLLIN};
            if (p.fd != -1 && poll(&p, 1, 0) == 1)
                return 1;
        }
    }
    return 0;
}

void m0_listeners_drop_slot(struct m0_listeners *ls, int idx)
{
    for (int l = 0; l < ls->n; l++) {
        struct m0_listener *li = &ls->l[l];
        /* The last first: a group's other sockets keep their places. */
        for (int i = ls->loops - 1; li->per_slot && i >= 0; i--) {
            int at = idx * ls->loops + i;
            if (li->fds[at] != -1) {
                close(li->fds[at]);
                li->fds[at] = -1;
            }
        }
    }
}

/* A listener of its own for flag (spec HOST:PORT or unix:PATH; what names
 * it in logs): one socket every worker accepts on (no SO_REUSEPORT:
 * whichever worker is free answers, and each answers for all). Sets *idx
 * to its index. M0_OK, or the exit status to return (logged). */
static int side_listen(struct m0_listeners *ls, struct m0_config *cfg, const char *spec, const char *flag,
                       const char *what, int *idx)
{
    char host[256], err[512];
    int port, bound = 0, scheme;
    const char *path, *bare = m0_config_addr_scheme(spec, &scheme);
    if (m0_mx_addr_split(bare, host, sizeof host, &port, &path) != M0_OK || (scheme >= 0 && path != NULL)) {
        m0_error("%s: invalid address '%s' (want HOST:PORT, https://HOST:PORT or unix:PATH)", flag, spec);
        return M0_EXIT_USAGE;
    }
    if (ls->n == M0_MAX_LISTENERS) {
        m0_error("%s: more than %d listening sockets", flag, M0_MAX_LISTENERS);
        return M0_EXIT_USAGE;
    }
    struct m0_listener *l = &ls->l[ls->n];
    memset(l, 0, sizeof *l);
    l->fds = calloc(1, sizeof *l->fds);
    if (path != NULL) {
        l->fds[0] = m0_listen_unix(path, 64, err, sizeof err);
        l->unix_path = strdup(path);
        snprintf(l->where, sizeof l->where, "unix:%s (%s)", path, what);
    } else {
        l->fds[0] = m0_listen_tcp(host, port, 64, 0, &bound, err, sizeof err);
        snprintf(l->where, sizeof l->where, strchr(host, ':') ? "http://[%s]:%d (%s)" : "http://%s:%d (%s)",
                 host, bound, what);
    }
    if (l->fds[0] == -1) {
        m0_error("%s: %s", flag, err);
        free(l->fds);
        free(l->unix_path);
        memset(l, 0, sizeof *l);
        return M0_EXIT_FAIL;
    }
    *idx = ls->n++;
    mark_tls(ls, cfg, *idx, m0_tlsd_listener_is_tls(cfg, spec, 0));
    return M0_OK;
}

/* The length of a side listener's where without its " (what)" (the
 * line that names the listener says what it is already). */
static int bare_len(const char *where, const char *what)
{
    size_t n = strlen(where), tail = strlen(what) + 3;
    return (int)(n > tail ? n - tail : n);
}

int m0_metrics_listen(struct m0_listeners *ls, struct m0_config *cfg)
{
    if (cfg->metrics_bind == NULL)
        return M0_OK;
    int rc = side_listen(ls, cfg, cfg->metrics_bind, "--metrics-bind", "metrics", &cfg->metrics_listener);
    if (rc != M0_OK)
        return rc;
    const char *where = ls->l[cfg->metrics_listener].where;
    m0_info("metrics at %.*s%s", bare_len(where, "metrics"), where,
            cfg->metrics_path != NULL && cfg->metrics_path[0] ? cfg->metrics_path : "/metrics");
    return M0_OK;
}

int m0_grip_listen(struct m0_listeners *ls, struct m0_config *cfg)
{
    if (cfg->grip_control == NULL)
        return M0_OK;
    int rc = side_listen(ls, cfg, cfg->grip_control, "--grip-control", "GRIP control", &cfg->grip_listener);
    if (rc == M0_OK) {
        const char *where = ls->l[cfg->grip_listener].where;
        m0_info("GRIP control (EPCP POST /publish/) at %.*s", bare_len(where, "GRIP control"), where);
    }
    return rc;
}

int m0_publish_listen(struct m0_listeners *ls, struct m0_config *cfg)
{
    const char *given = cfg->publish_socket;
    if (!cfg->realtime) {
        if (given != NULL && given[0] != '\0')
            m0_warn("--publish-socket %s is not used without --realtime (nothing to publish to)", given);
        return M0_OK;
    }
    if (given != NULL && given[0] == '\0')
        return M0_OK;                            /* '' : none */
    char err[512], path[M0_PUBPATH_MAX];
    struct m0_ident id;
    if (m0_privs_resolve(cfg->user, cfg->group, &id, err, sizeof err) != M0_OK) {
        fprintf(stderr, "%s\n", err);
        return M0_EXIT_USAGE;
    }
    uid_t uid = id.set_uid ? id.uid : geteuid();
    uid_t give_uid = id.set_uid ? id.uid : (uid_t)-1;
    gid_t give_gid = id.set_gid ? id.gid : (gid_t)-1;
    if (ls->n == M0_MAX_LISTENERS) {
        m0_error("--publish-socket: more than %d listening sockets", M0_MAX_LISTENERS);
        return M0_EXIT_USAGE;
    }
    if (given == NULL) {
        /* The default: found by publishers of the same user with no
         * configuration; one server per user has it (a second is told). */
        if (m0_pubpath_default(path, sizeof path, uid, uid == geteuid()) != M0_OK) {
            m0_warn("no publish socket: the default path is too long for a unix socket (give --publish-socket PATH)");
            return M0_OK;
        }
        if (m0_pubpath_dir_ok(path, uid, give_gid, 1, err, sizeof err) != M0_OK) {
            m0_warn("no publish socket: %s (give --publish-socket PATH)", err);
            return M0_OK;
        }
    } else {
        snprintf(path, sizeof path, "%s", given);
    }
    int lock_fd, busy;
    int fd = m0_pubpath_listen(path, 64, give_uid, give_gid, &lock_fd, &busy, err, sizeof err);
    if (fd == -1 && given == NULL) {
        m0_info("no publish socket for this server: %s (give --publish-socket PATH)", err);
        return M0_OK;
    }
    if (fd == -1) {
        m0_error("--publish-socket: %s", err);
        return M0_EXIT_FAIL;
    }
    struct m0_listener *l = &ls->l[ls->n];
    memset(l, 0, sizeof *l);
    l->fds = calloc(1, sizeof *l->fds);
    l->unix_path = strdup(path);
    if (l->fds == NULL || l->unix_path == NULL) {
        m0_error("out of memory for the listeners");
        return M0_EXIT_FAIL;
    }
    l->fds[0] = fd;
    l->lock_fd = lock_fd;
    snprintf(l->where, sizeof l->where, "unix:%s (publish)", path);
    cfg->publish_listener = ls->n++;
    setenv("M0_PUBLISH_SOCKET", path, 1);
    m0_info("publish socket (POST /publish; m0serve publish, m0pub.publish) at unix:%s", path);
    return M0_OK;
}

void m0_publish_unlisten(struct m0_listeners *ls, const struct m0_config *cfg)
{
    int k = cfg->publish_listener;
    if (k < 0 || k >= ls->n || ls->l[k].unix_path == NULL)
        return;
    struct m0_listener *l = &ls->l[k];
    if (unlink(l->unix_path) == -1 && errno != ENOENT)
        m0_log_errno("cannot remove unix:%s", l->unix_path);
    free(l->unix_path);
    l->unix_path = NULL;                         /* m0_listeners_close: nothing left to unlink */
    if (l->fds[0] != -1)
        close(l->fds[0]);
    l->fds[0] = -1;
    close(l->lock_fd);                           /* the claim: a new server may take the path */
    l->lock_fd = -1;
}
