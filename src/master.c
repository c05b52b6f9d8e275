/*
 * master.c — the prefork master. It never runs Python.
 *
 * It binds, forks the workers before anything touches Python, and then
 * only supervises. Signals stay blocked and are read from a signalfd;
 * workers talk over a control socket each (worker.h), so everything the
 * master reacts to is data in one poll(2).
 *
 * A worker's life as the master sees it:
 *   BOOTING ──'B'──▶ BOOTED ──'G'──▶ SERVING ──'D' or SIGTERM──▶ RETIRING ──'R'──▶ (exit)
 * Only one worker per listener slot reads that slot's bus at a time: a
 * replacement gets 'G' once its predecessor has said 'R' (or died).
 *
 * SIGHUP boots a whole new generation first and retires the old one only
 * when every new worker has booted; if one cannot load the application,
 * the new generation is dismissed and the old one keeps serving (the
 * traceback is in the log). A worker that dies is restarted, with a backoff
 * when it dies young; one that cannot load the application at first start
 * (it never served) stops the server with exit status 1.
 *
 * SIGTERM/SIGINT drain every worker with a TERM → KILL deadline; the exit
 * status is 0, or M0_EXIT_ABANDONED (4) when requests were still in flight
 * at the graceful timeout. SIGQUIT stops at once.
 *
 * TCP listeners: one SO_REUSEPORT socket per worker slot, so the kernel
 * spreads connections over the workers evenly; a replacement worker
 * inherits its slot's socket, and connections queued there wait for it.
 * A unix socket is one socket shared by every worker.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "m0/broker.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/listen.h"
#include "m0/log.h"
#include "m0/master.h"
#include "m0/py.h"
#include "m0/timer.h"
#include "m0/worker.h"

#define BOOT_TIMEOUT_MS 120000     /* a new generation that has not booted by then is dismissed */

enum wstate { W_EMPTY, W_BOOTING, W_BOOTED, W_SERVING, W_RETIRING };

struct worker {
    pid_t pid;
    enum wstate state;
    int idx;             /* listener slot */
    unsigned gen;        /* generation (SIGHUP count) */
    int ctl;             /* master's end of the control socket, -1 once closed */
    int served;          /* it said go at least once: a later exit is never a boot failure */
    uint64_t started;    /* ms */
};

struct master {
    const struct m0_config *cfg;
    int nsock;
    int *socks;
    int nworkers;
    struct worker *w;
    int cap;
    unsigned gen;            /* the generation new workers belong to */
    unsigned dismissed;      /* a reload generation that could not boot (its exits are expected) */
    int reloading;           /* a new generation is booting */
    uint64_t reload_deadline;
    int *fails;              /* consecutive early deaths per slot */
    uint64_t *respawn_at;    /* per slot: when to restart, 0 = not pending */
    int stopping;
    int exit_code;
    int abandoned;           /* a worker left requests unfinished */
    uint64_t kill_at;        /* SIGKILL stragglers at this time when stopping */
    const char *unix_path;
    int sfd;                 /* signalfd */
    struct m0_bus bus;       /* with --realtime */
};

static int live_count(const struct master *m)
{
    int n = 0;
    for (int i = 0; i < m->cap; i++)
        n += m->w[i].pid != 0;
    return n;
}

static struct worker *find(struct master *m, int idx, enum wstate st, int current_gen)
{
    for (int i = 0; i < m->cap; i++) {
        struct worker *w = &m->w[i];
        if (w->pid != 0 && w->idx == idx && w->state == st && (!current_gen || w->gen == m->gen))
            return w;
    }
    return NULL;
}

static void tell(struct worker *w, char what)
{
    if (w->ctl == -1)
        return;
    ssize_t n;
    do
        n = send(w->ctl, &what, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n == -1 && errno == EINTR);
}

static void close_ctl(struct worker *w)
{
    if (w->ctl != -1)
        close(w->ctl);
    w->ctl = -1;
}

static void spawn(struct master *m, int idx)
{
    int slot = -1;
    for (int i = 0; i < m->cap; i++) {
        if (m->w[i].pid == 0) {
            slot = i;
            break;
        }
    }
    if (slot == -1) {
        /* Old generations still draining (repeated SIGHUPs): grow the table. */
        int cap = m->cap * 2;
        struct worker *w = realloc(m->w, (size_t)cap * sizeof *w);
        if (w == NULL) {
            m0_error("no room to spawn a worker; retrying");
            m->respawn_at[idx] = m0_clock_ms() + 1000;
            return;
        }
        memset(w + m->cap, 0, (size_t)(cap - m->cap) * sizeof *w);
        for (int i = m->cap; i < cap; i++)
            w[i].ctl = -1;
        slot = m->cap;
        m->w = w;
        m->cap = cap;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
        m0_log_errno("socketpair");
        m->respawn_at[idx] = m0_clock_ms() + 1000;
        return;
    }
    int fd = m->socks[m->nsock == 1 ? 0 : idx];
    pid_t pid = fork();
    if (pid == -1) {
        m0_log_errno("fork");
        close(sv[0]);
        close(sv[1]);
        m->respawn_at[idx] = m0_clock_ms() + 1000;
        return;
    }
    if (pid == 0) {
        /* The child keeps its listener, its control socket, every bus
         * write end (publishers reach every worker) and its own bus read
         * end; nothing else of the master's. */
        close(sv[0]);
        close(m->sfd);
        for (int i = 0; i < m->cap; i++) {
            if (m->w[i].ctl != -1)
                close(m->w[i].ctl);
        }
        for (int i = 0; i < m->nsock; i++) {
            if (m->socks[i] != fd)
                close(m->socks[i]);
        }
        if (m->cfg->realtime) {
            for (int i = 0; i < m->bus.nworkers; i++) {
                if (i != idx)
                    close(m->bus.read_fds[i]);
            }
            m0_bus_current = &m->bus;
            m0_bus_index = idx;
        }
        m0_worker_main(m->cfg, fd, sv[1]);
    }
    close(sv[1]);
    m->w[slot] = (struct worker){.pid = pid, .state = W_BOOTING, .idx = idx, .gen = m->gen, .ctl = sv[0],
                                 .started = m0_clock_ms()};
    m->respawn_at[idx] = 0;
    m0_info("booting worker %d with pid %d", idx, (int)pid);
}

static void signal_all(struct master *m, int sig)
{
    for (int i = 0; i < m->cap; i++) {
        if (m->w[i].pid != 0)
            kill(m->w[i].pid, sig);
    }
}

static void begin_stop(struct master *m, int code, int graceful)
{
    if (!m->stopping) {
        m->stopping = 1;
        m->reloading = 0;
        m->exit_code = code;
        m->kill_at = m0_clock_ms() + (uint64_t)(m->cfg->graceful_timeout * 1000) + 1000;
        m0_info("shutting down: %s", graceful ? "draining workers" : "stopping workers now");
    }
    signal_all(m, graceful ? SIGTERM : SIGQUIT);
}

/* Slot idx's newest booted worker goes, unless another one serves the
 * slot or a retiring predecessor has not yet let go of its bus ('R'). */
static void hand_over(struct master *m, int idx)
{
    if (m->stopping)
        return;
    struct worker *next = NULL;
    for (int i = 0; i < m->cap; i++) {
        struct worker *w = &m->w[i];
        if (w->pid == 0 || w->idx != idx)
            continue;
        if (w->state == W_SERVING || (w->state == W_RETIRING && w->ctl != -1))
            return;
        /* A reload's new generation waits until all of it has booted. */
        if (m->reloading && w->gen == m->gen)
            continue;
        if (w->state == W_BOOTED && (next == NULL || w->gen > next->gen))
            next = w;
    }
    if (next != NULL) {
        next->state = W_SERVING;
        next->served = 1;
        tell(next, M0_CTL_GO);
    }
}

/* Every worker of the new generation has booted: retire the old ones; each
 * slot's new worker goes once its predecessor has let go of the bus. */
static void finish_reload(struct master *m)
{
    for (int idx = 0; idx < m->nworkers; idx++) {
        if (find(m, idx, W_BOOTED, 1) == NULL)
            return;
    }
    m->reloading = 0;
    m0_info("SIGHUP: new workers booted; retiring the old ones");
    for (int i = 0; i < m->cap; i++) {
        struct worker *w = &m->w[i];
        if (w->pid != 0 && w->gen != m->gen && w->state != W_RETIRING) {
            w->state = W_RETIRING;
            tell(w, M0_CTL_DRAIN);
            kill(w->pid, SIGTERM);
        }
    }
    for (int idx = 0; idx < m->nworkers; idx++)
        hand_over(m, idx);
}

/* The new generation cannot serve: dismiss it, keep the old one. */
static void abort_reload(struct master *m, const char *why)
{
    m0_error("reload failed (%s): the workers already serving keep serving", why);
    m->reloading = 0;
    m->dismissed = m->gen;
    for (int i = 0; i < m->cap; i++) {
        struct worker *w = &m->w[i];
        if (w->pid != 0 && w->gen == m->gen && w->state != W_SERVING) {
            w->state = W_RETIRING;
            close_ctl(w);
            kill(w->pid, SIGKILL);        /* it never served: nothing to drain */
        }
    }
    for (int idx = 0; idx < m->nworkers; idx++)
        hand_over(m, idx);                /* old workers that booted meanwhile go */
}

static void reload(struct master *m)
{
    if (m->reloading) {
        m0_warn("SIGHUP: a reload is already in progress");
        return;
    }
    m0_info("SIGHUP: booting %d new worker(s)", m->nworkers);
    m->gen++;
    m->reloading = 1;
    m->reload_deadline = m0_clock_ms() + BOOT_TIMEOUT_MS;
    for (int idx = 0; idx < m->nworkers; idx++)
        spawn(m, idx);
}

static void on_ctl(struct master *m, struct worker *w)
{
    char msg[16];
    ssize_t n = recv(w->ctl, msg, sizeof msg, MSG_DONTWAIT);
    if (n == -1 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close_ctl(w);              /* it exits; SIGCHLD tells the rest */
        hand_over(m, w->idx);
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        switch (msg[i]) {
        case M0_CTL_BOOTED:
            if (w->state != W_BOOTING)
                break;
            w->state = W_BOOTED;
            if (m->stopping) {
                kill(w->pid, SIGTERM);
            } else if (m->reloading && w->gen == m->gen) {
                finish_reload(m);
            } else {
                hand_over(m, w->idx);
            }
            break;
        case M0_CTL_RETIRED:
            /* It stopped accepting and reading the bus: the successor may. */
            w->state = W_RETIRING;
            close_ctl(w);
            hand_over(m, w->idx);
            break;
        default:
            break;
        }
    }
}

static void reap(struct master *m)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        struct worker *w = NULL;
        for (int i = 0; i < m->cap; i++) {
            if (m->w[i].pid == pid) {
                w = &m->w[i];
                break;
            }
        }
        if (w == NULL)
            continue;
        int idx = w->idx, served = w->served, retiring = w->state == W_RETIRING;
        unsigned gen = w->gen;
        uint64_t lived = m0_clock_ms() - w->started;
        close_ctl(w);
        w->pid = 0;
        w->state = W_EMPTY;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (code == M0_EXIT_ABANDONED)
            m->abandoned = 1;
        if (code == M0_EXIT_BOOT && !served) {
            if (m->reloading && gen == m->gen) {
                abort_reload(m, "a new worker could not load the application");
                continue;
            }
            if (m->dismissed != 0 && gen == m->dismissed)
                continue;                 /* its reload was already given up */
            if (!m->stopping && find(m, idx, W_SERVING, 0) == NULL) {
                m0_error("worker %d (pid %d) could not load the application: stopping", idx, (int)pid);
                begin_stop(m, M0_EXIT_FAIL, 0);
            }
            continue;
        }
        if (m->stopping || retiring || (m->dismissed != 0 && gen == m->dismissed)) {
            if (WIFSIGNALED(status))
                m0_info("worker %d (pid %d) ended by signal %d", idx, (int)pid, WTERMSIG(status));
            hand_over(m, idx);
            continue;
        }
        if (WIFSIGNALED(status))
            m0_warn("worker %d (pid %d) was killed by signal %d: restarting", idx, (int)pid, WTERMSIG(status));
        else
            m0_warn("worker %d (pid %d) exited with status %d: restarting", idx, (int)pid, code);
        /* Dying young again and again (a crash during startup) backs off
         * exponentially, up to 10 s, instead of spinning. */
        if (lived < 1000)
            m->fails[idx] = m->fails[idx] < 7 ? m->fails[idx] + 1 : 7;
        else
            m->fails[idx] = 0;
        uint64_t delay = m->fails[idx] ? (uint64_t)78 << m->fails[idx] : 0;
        m->respawn_at[idx] = m0_clock_ms() + (delay > 10000 ? 10000 : delay);
    }
}

/* Does any worker of the current generation stand for slot idx? */
static int covered(const struct master *m, int idx)
{
    for (int i = 0; i < m->cap; i++) {
        const struct worker *w = &m->w[i];
        if (w->pid != 0 && w->idx == idx && w->state != W_RETIRING)
            return 1;
    }
    return 0;
}

static void banner(const struct master *m, const char *host, int port)
{
    char where[512];
    if (m->unix_path != NULL)
        snprintf(where, sizeof where, "unix:%s", m->unix_path);
    else
        snprintf(where, sizeof where, strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host, port);
    static const char *const protos[] = {"auto", "wsgi", "asgi"};
    const struct m0_config *cfg = m->cfg;
    char pool[96];
    if (cfg->blocking_threads == 0)
        snprintf(pool, sizeof pool, "0");
    else if (cfg->threads_explicit)
        snprintf(pool, sizeof pool, "%ld (pinned)", cfg->blocking_threads);
    else
        snprintf(pool, sizeof pool, "%ld..%ld (elastic)", cfg->blocking_threads, cfg->blocking_threads_max);
    const char *why = cfg->threads_explicit ? "as configured"
                      : cfg->workers_explicit ? "default pool"
                                              : "default topology: 1 worker, an elastic pool";
    /* Every mount as given; each worker's boot line adds the protocol it
     * detected and the mode it runs in. */
    char mounts[2048] = "";
    size_t n = 0;
    for (unsigned i = 0; i < cfg->nmounts && n < sizeof mounts; i++) {
        const struct m0_mount *mt = &cfg->mounts[i];
        n += (size_t)snprintf(mounts + n, sizeof mounts - n, "%s%s=%s%s", i ? "," : "",
                              mt->prefix_len ? mt->prefix : "/", mt->kind == M0_MOUNT_STATIC ? "static:" : "",
                              mt->spec);
    }
    m0_info("m0serve %s (Python %s, GIL %s) listening on %s workers=%d blocking-threads=%s (%s) "
            "protocol=%s realtime=%s%s%s app=%s mounts=%s",
            M0_VERSION, m0_py_version(), m0_py_gil_enabled() ? "enabled" : "disabled", where,
            m->nworkers, pool, why, protos[cfg->protocol], cfg->realtime ? "on" : "off",
            m0_broker ? " broker=" : "", m0_broker ? m0_broker->shown : "", cfg->app != NULL ? cfg->app : "-",
            mounts);
}

static void on_signal(struct master *m)
{
    struct signalfd_siginfo si;
    while (read(m->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        switch (si.ssi_signo) {
        case SIGTERM:
        case SIGINT:
            /* A second one while draining means "now". */
            begin_stop(m, m->stopping ? m->exit_code : M0_EXIT_OK, !m->stopping);
            break;
        case SIGQUIT:
            begin_stop(m, m->stopping ? m->exit_code : M0_EXIT_OK, 0);
            break;
        case SIGHUP:
            if (!m->stopping)
                reload(m);
            break;
        default:
            break;       /* SIGCHLD: reaped below */
        }
    }
}

int m0_master_run(struct m0_config *cfg)
{
    struct master mst;
    struct master *m = &mst;
    char err[512];
    char *host, *path;
    int port, bound = 0;

    memset(m, 0, sizeof *m);
    m->cfg = cfg;
    m->nworkers = (int)cfg->workers;
    if (m0_config_bind_parts(cfg, &host, &port, &path, err, sizeof err) != M0_OK) {
        fprintf(stderr, "%s\n", err);
        return M0_EXIT_USAGE;
    }
    m->nsock = path != NULL ? 1 : m->nworkers;
    m->socks = calloc((size_t)m->nsock, sizeof *m->socks);
    if (path != NULL) {
        m->unix_path = path;
        if ((m->socks[0] = m0_listen_unix(path, (int)cfg->backlog, err, sizeof err)) == -1) {
            m0_error("%s", err);
            return M0_EXIT_FAIL;
        }
    } else {
        bound = port;
        for (int i = 0; i < m->nsock; i++) {
            /* Port 0: the first socket picks the port, the rest join it. */
            m->socks[i] = m0_listen_tcp(host, bound, (int)cfg->backlog, 1, &bound, err, sizeof err);
            if (m->socks[i] == -1) {
                m0_error("%s", err);
                return M0_EXIT_FAIL;
            }
        }
    }

    if (cfg->realtime && m0_bus_create(&m->bus, m->nworkers) != M0_OK) {
        m0_log_errno("cannot create the broadcast bus");
        return M0_EXIT_FAIL;
    }
    m->cap = m->nworkers * 2;
    m->w = calloc((size_t)m->cap, sizeof *m->w);
    for (int i = 0; i < m->cap; i++)
        m->w[i].ctl = -1;
    m->fails = calloc((size_t)m->nworkers, sizeof *m->fails);
    m->respawn_at = calloc((size_t)m->nworkers, sizeof *m->respawn_at);

    /* Signals stay blocked in the master and are read from a signalfd;
     * workers unblock them after fork. SIGPIPE is ignored everywhere. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    m->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (m->sfd == -1) {
        m0_log_errno("signalfd");
        return M0_EXIT_FAIL;
    }

    cfg->bound_port = bound;
    banner(m, host, bound);
    for (int idx = 0; idx < m->nworkers; idx++)
        spawn(m, idx);

    struct pollfd *pfds = NULL;
    struct worker **who = NULL;
    int cap_p = 0;
    for (;;) {
        reap(m);
        uint64_t now = m0_clock_ms();
        if (m->stopping) {
            if (live_count(m) == 0)
                break;
            if (now >= m->kill_at) {
                m0_warn("graceful timeout: killing %d worker(s)", live_count(m));
                m->abandoned = 1;
                signal_all(m, SIGKILL);
                m->kill_at = now + 1000;
            }
        } else {
            if (m->reloading && now >= m->reload_deadline)
                abort_reload(m, "the new workers did not boot in time");
            for (int idx = 0; idx < m->nworkers; idx++) {
                if (m->respawn_at[idx] != 0 && now >= m->respawn_at[idx])
                    spawn(m, idx);
                else if (m->respawn_at[idx] == 0 && !covered(m, idx))
                    spawn(m, idx);   /* nothing serves this slot and nothing is scheduled */
            }
        }
        uint64_t wait_ms = 1000;
        for (int idx = 0; idx < m->nworkers && !m->stopping; idx++) {
            if (m->respawn_at[idx] != 0 && m->respawn_at[idx] - now < wait_ms)
                wait_ms = m->respawn_at[idx] > now ? m->respawn_at[idx] - now : 0;
        }
        if (cap_p < m->cap + 1) {
            cap_p = m->cap + 1;
            pfds = realloc(pfds, (size_t)cap_p * sizeof *pfds);
            who = realloc(who, (size_t)cap_p * sizeof *who);
        }
        int np = 0;
        pfds[np++] = (struct pollfd){.fd = m->sfd, .events = POLLIN};
        for (int i = 0; i < m->cap; i++) {
            if (m->w[i].pid != 0 && m->w[i].ctl != -1) {
                who[np] = &m->w[i];
                pfds[np++] = (struct pollfd){.fd = m->w[i].ctl, .events = POLLIN};
            }
        }
        int rc = poll(pfds, (nfds_t)np, (int)wait_ms);
        if (rc == -1 && errno != EINTR) {
            m0_log_errno("poll");
            break;
        }
        if (rc <= 0)
            continue;
        if (pfds[0].revents)
            on_signal(m);
        for (int i = 1; i < np; i++) {
            if (pfds[i].revents && who[i]->pid != 0 && who[i]->ctl == pfds[i].fd)
                on_ctl(m, who[i]);
        }
    }
    free(pfds);
    free(who);
    for (int i = 0; i < m->nsock; i++)
        close(m->socks[i]);
    if (m->unix_path != NULL)
        unlink(m->unix_path);
    if (m->exit_code == M0_EXIT_OK && m->abandoned) {
        m0_warn("shutdown complete, but requests were still in flight at the graceful timeout");
        m->exit_code = M0_EXIT_ABANDONED;
    } else {
        m0_info("shutdown complete");
    }
    close(m->sfd);
    free(m->socks);
    free(m->w);
    free(m->fails);
    free(m->respawn_at);
    return m->exit_code;
}
