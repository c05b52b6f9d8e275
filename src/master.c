/*
 * master.c — the prefork master.
 *
 * It binds, forks the workers before anything touches Python, and then
 * only supervises: signals are taken synchronously with sigtimedwait (they
 * stay blocked, so they are data, never handlers), dead workers are reaped
 * and restarted with a backoff when they die young, SIGTERM/SIGINT drain
 * every worker with a TERM → KILL deadline, SIGHUP replaces them.
 *
 * A worker that cannot load the application exits M0_EXIT_BOOT; restarting
 * it would only print the same traceback forever, so the master stops the
 * others and exits 1.
 *
 * TCP listeners: one SO_REUSEPORT socket per worker slot, so the kernel
 * spreads connections over the workers evenly; a replacement worker
 * inherits its slot's socket, and connections queued there wait for it.
 * A unix socket is one socket shared by every worker.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "m0/bus.h"
#include "m0/config.h"
#include "m0/listen.h"
#include "m0/log.h"
#include "m0/master.h"
#include "m0/py.h"
#include "m0/timer.h"
#include "m0/worker.h"

struct worker {
    pid_t pid;           /* 0: slot empty */
    int idx;             /* listener slot */
    uint64_t started;    /* ms */
    int retiring;        /* replaced by SIGHUP: not restarted */
};

struct master {
    const struct m0_config *cfg;
    int nsock;
    int *socks;
    int nworkers;
    struct worker *w;        /* 2 * workers entries: old and new overlap on SIGHUP */
    int cap;
    int *fails;              /* consecutive early deaths per slot */
    uint64_t *respawn_at;    /* per slot: when to restart, 0 = not pending */
    int stopping;
    int exit_code;
    uint64_t kill_at;        /* SIGKILL stragglers at this time when stopping */
    const char *unix_path;
    struct m0_bus bus;       /* with --realtime */
};

static int live_count(const struct master *m)
{
    int n = 0;
    for (int i = 0; i < m->cap; i++)
        n += m->w[i].pid != 0;
    return n;
}

/* Is a current (not retiring) worker serving listener slot idx? */
static int serving(const struct master *m, int idx)
{
    for (int i = 0; i < m->cap; i++) {
        if (m->w[i].pid != 0 && m->w[i].idx == idx && !m->w[i].retiring)
            return 1;
    }
    return 0;
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
        slot = m->cap;
        m->w = w;
        m->cap = cap;
    }
    int fd = m->socks[m->nsock == 1 ? 0 : idx];
    pid_t pid = fork();
    if (pid == -1) {
        m0_log_errno("fork");
        m->respawn_at[idx] = m0_clock_ms() + 1000;
        return;
    }
    if (pid == 0) {
        for (int i = 0; i < m->nsock; i++) {
            if (m->socks[i] != fd)
                close(m->socks[i]);
        }
        if (m->cfg->realtime) {
            /* Keep every write end (publishers reach every worker) and only
             * this worker's read end. */
            for (int i = 0; i < m->bus.nworkers; i++) {
                if (i != idx)
                    close(m->bus.read_fds[i]);
            }
            m0_bus_current = &m->bus;
            m0_bus_index = idx;
        }
        m0_worker_main(m->cfg, fd);
    }
    m->w[slot] = (struct worker){.pid = pid, .idx = idx, .started = m0_clock_ms()};
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
        m->exit_code = code;
        m->kill_at = m0_clock_ms() + (uint64_t)(m->cfg->graceful_timeout * 1000) + 1000;
        m0_info("shutting down: %s", graceful ? "draining workers" : "stopping workers now");
    }
    signal_all(m, graceful ? SIGTERM : SIGQUIT);
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
        int idx = w->idx, retiring = w->retiring;
        uint64_t lived = m0_clock_ms() - w->started;
        w->pid = 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == M0_EXIT_BOOT) {
            m0_error("worker %d (pid %d) could not load the application: stopping", idx, (int)pid);
            begin_stop(m, M0_EXIT_FAIL, 0);
            continue;
        }
        if (m->stopping || retiring) {
            if (WIFSIGNALED(status))
                m0_info("worker %d (pid %d) ended by signal %d", idx, (int)pid, WTERMSIG(status));
            continue;
        }
        if (WIFSIGNALED(status))
            m0_warn("worker %d (pid %d) was killed by signal %d: restarting", idx, (int)pid, WTERMSIG(status));
        else
            m0_warn("worker %d (pid %d) exited with status %d: restarting", idx, (int)pid, WEXITSTATUS(status));
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

static void reload(struct master *m)
{
    m0_info("SIGHUP: replacing %d worker(s)", m->nworkers);
    for (int i = 0; i < m->cap; i++) {
        if (m->w[i].pid != 0 && !m->w[i].retiring) {
            m->w[i].retiring = 1;
            kill(m->w[i].pid, SIGTERM);
        }
    }
    for (int idx = 0; idx < m->nworkers; idx++)
        spawn(m, idx);
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
    const char *why = cfg->threads_explicit ? "as configured"
                      : cfg->workers_explicit ? "default blocking-threads min(cores, 8)"
                                              : "default topology: 1 worker, min(cores, 8) threads";
    m0_info("m0serve %s (Python %s, GIL %s) listening on %s workers=%d blocking-threads=%ld (%s) "
            "protocol=%s realtime=%s app=%s",
            M0_VERSION, m0_py_version(), m0_py_gil_enabled() ? "enabled" : "disabled", where,
            m->nworkers, cfg->blocking_threads, why, protos[cfg->protocol], cfg->realtime ? "on" : "off",
            cfg->app);
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
    m->fails = calloc((size_t)m->nworkers, sizeof *m->fails);
    m->respawn_at = calloc((size_t)m->nworkers, sizeof *m->respawn_at);

    /* Signals stay blocked in the master and are taken with sigtimedwait;
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

    cfg->bound_port = bound;
    banner(m, host, bound);
    for (int idx = 0; idx < m->nworkers; idx++)
        spawn(m, idx);

    for (;;) {
        reap(m);
        uint64_t now = m0_clock_ms();
        if (m->stopping) {
            if (live_count(m) == 0)
                break;
            if (now >= m->kill_at) {
                m0_warn("graceful timeout: killing %d worker(s)", live_count(m));
                signal_all(m, SIGKILL);
                m->kill_at = now + 1000;
            }
        } else {
            for (int idx = 0; idx < m->nworkers; idx++) {
                if (m->respawn_at[idx] != 0 && now >= m->respawn_at[idx])
                    spawn(m, idx);
                else if (m->respawn_at[idx] == 0 && !serving(m, idx))
                    spawn(m, idx);   /* nothing serves this slot and nothing is scheduled */
            }
        }
        uint64_t wait_ms = 1000;
        for (int idx = 0; idx < m->nworkers && !m->stopping; idx++) {
            if (m->respawn_at[idx] != 0 && m->respawn_at[idx] - now < wait_ms)
                wait_ms = m->respawn_at[idx] > now ? m->respawn_at[idx] - now : 0;
        }
        struct timespec ts = {.tv_sec = (time_t)(wait_ms / 1000), .tv_nsec = (long)(wait_ms % 1000) * 1000000L};
        siginfo_t si;
        int sig = sigtimedwait(&set, &si, &ts);
        switch (sig) {
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
            break;   /* SIGCHLD or timeout: reaped at the top */
        }
    }
    for (int i = 0; i < m->nsock; i++)
        close(m->socks[i]);
    if (m->unix_path != NULL)
        unlink(m->unix_path);
    m0_info("shutdown complete");
    free(m->socks);
    free(m->w);
    free(m->fails);
    free(m->respawn_at);
    return m->exit_code;
}
