/*
 * master.c — the prefork master. It never runs Python.
 *
 * It binds, forks the workers before anything touches Python, and then
 * only supervises. Signals stay blocked and are read from a signalfd;
 * workers talk over a control socket each (control.h), so everything the
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
 * at the graceful timeout, or 1 when a worker crashed (a signal the master
 * did not send) while draining. SIGQUIT stops at once. SIGTTIN/SIGTTOU add and
 * remove a worker (resize.c). SIGUSR1 (logrotate's habit) and SIGUSR2
 * (gunicorn's re-exec) are logged and change nothing: their default action
 * would stop the server. Workers ignore all four.
 *
 * A worker that asks to be replaced ('Q': --max-requests) or grows past
 * --worker-max-rss goes through the same path for its slot alone: its
 * successor boots first, then it drains (held streams end with a FIN, so
 * their clients reconnect and resume with Last-Event-ID) and the successor
 * gets 'G' once it has said 'R'. No request is refused meanwhile.
 *
 * TCP listeners: one SO_REUSEPORT socket per worker slot, so the kernel
 * spreads connections over the workers evenly; a replacement worker
 * inherits its slot's socket, and connections queued there wait for it.
 * A unix socket is one socket shared by every worker. Sockets systemd
 * passes (socket activation) are shared too, each by every worker: one
 * inherited TCP socket cannot be split into per-worker SO_REUSEPORT ones
 * without binding anew, and the kernel's accept queue on one socket is
 * fair enough (every worker polls it; the one that wakes first accepts).
 *
 * systemd (Type=notify, notify.h): READY=1 once every slot has a serving
 * worker; RELOADING=1 with MONOTONIC_USEC on SIGHUP (or --reload), READY=1
 * when the new generation serves (or the reload failed and the old one
 * still does); STOPPING=1 when draining; STATUS= with the workers and
 * connections; WATCHDOG=1 every quarter of WATCHDOG_USEC, but only while
 * every serving worker's loop answers the master's pings.
 *
 * Privileges (--user/--group) are dropped here after binding, before the
 * first fork, in the master too (privs.c says why).
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
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "m0/banner.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/grant.h"
#include "m0/conn.h"
#include "m0/listeners.h"
#include "m0/log.h"
#include "m0/metrics.h"
#include "m0/master.h"
#include "master_int.h"
#include "master_identity.h"
#include "m0/notify.h"
#include "m0/nofile.h"
#include "m0/pidfile.h"
#include "m0/presence.h"
#include "m0/timer.h"
#include "m0/control.h"
#include "m0/worker.h"

#define BOOT_TIMEOUT_MS 120000     /* a new generation that has not booted by then is dismissed */
#define TICK_MS 1000               /* pings, STATUS=, --worker-max-rss checks */
#define REPLACE_RETRY_MS 30000     /* after a replacement could not boot */

static int live_count(const struct m0_master *m)
{
    int n = 0;
    for (int i = 0; i < m->cap; i++)
        n += m->w[i].pid != 0;
    return n;
}

struct m0_master_worker *m0_master_find(struct m0_master *m, int idx, enum m0_wstate st, int current_gen)
{
    for (int i = 0; i < m->cap; i++) {
        struct m0_master_worker *w = &m->w[i];
        if (w->pid != 0 && w->idx == idx && w->state == st && (!current_gen || w->gen == m->gen))
            return w;
    }
    return NULL;
}

void m0_master_tell(struct m0_master_worker *w, char what)
{
    if (w->ctl == -1)
        return;
    ssize_t n;
    do
        n = send(w->ctl, &what, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n == -1 && errno == EINTR);
}

void m0_master_close_ctl(struct m0_master_worker *w)
{
    if (w->ctl != -1)
        close(w->ctl);
    w->ctl = -1;
}

static void ignore_signal(int signo)
{
    (void)signo;
}

/* A worker outlives the signals meant for the master when they reach the
 * whole process group (kill -USR1 -PGID): a handler that does nothing,
 * not SIG_IGN, which the application's subprocesses would inherit. */
static void worker_signals(void)
{
    static const int sigs[] = {SIGUSR1, SIGUSR2, SIGTTIN, SIGTTOU};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ignore_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < M0_ARRAY_LEN(sigs); i++)
        sigaction(sigs[i], &sa, NULL);
}

void m0_master_spawn(struct m0_master *m, int idx)
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
        struct m0_master_worker *w = realloc(m->w, (size_t)cap * sizeof *w);
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
    int blk = m0_master_claim_block(m, idx), sv[2];
    if (blk == M0_MX_NO_ROOM)
        return;                            /* retried once a process is reaped (resize.c) */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
        m0_log_errno("socketpair");
        m0_metrics_owned(blk, -1);
        m->respawn_at[idx] = m0_clock_ms() + 1000;
        return;
    }
    /* Loop i's sockets at fds[i * n ...]: one per listener (listeners.h). */
    int loops = m->ls.loops, *fds = calloc((size_t)(loops * (m->ls.n > 0 ? m->ls.n : 1)), sizeof *fds);
    if (fds == NULL) {
        m0_log_errno("cannot fork a worker");
        m0_metrics_owned(blk, -1);
        close(sv[0]);
        close(sv[1]);
        m->respawn_at[idx] = m0_clock_ms() + 1000;
        return;
    }
    for (int i = 0; i < loops; i++)
        m0_listeners_of(&m->ls, idx, i, fds + i * m->ls.n);
    m0_master_keys_fork(m);                 /* the grant key it signs with at first */
    pid_t pid = fork();
    m0_metrics_owned(blk, pid);
    if (pid == -1) {
        m0_log_errno("fork");
        free(fds);
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
        m0_metrics_adopt(blk);
        worker_signals();
        for (int i = 0; i < m->cap; i++) {
            if (m->w[i].ctl != -1)
                close(m->w[i].ctl);
        }
        for (int l = 0; l < m->ls.n; l++) {
            for (int i = 0; m->ls.l[l].per_slot && i < m->nworkers * loops; i++) {
                if (m->ls.l[l].fds[i] != -1 && i / loops != idx)
                    close(m->ls.l[l].fds[i]);     /* another slot's (a shared socket stays) */
            }
        }
        if (m->cfg->realtime) {
            for (int i = 0; i < m->bus.nworkers; i++) {
                if (i / loops != idx)
                    close(m->bus.read_fds[i]);
            }
            m0_bus_current = &m->bus;
            m0_bus_index = idx;
            m0_bus_loops = loops;
        }
        m0_worker_main(m->cfg, fds, m->ls.n, sv[1]);
    }
    free(fds);
    close(sv[1]);
    m->w[slot] = (struct m0_master_worker){.pid = pid, .state = M0_W_BOOTING, .idx = idx, .gen = m->gen, .ctl = sv[0],
                                 .started = m0_clock_ms(), .keys = m->cfg->grant_keys,
                                 .sign = (int)m->cfg->grant_sign};
    m0_master_keys_settle(m);
    m->respawn_at[idx] = 0;
    m0_info("booting worker %d with pid %d", idx, (int)pid);
}

static void signal_all(struct m0_master *m, int sig)
{
    for (int i = 0; i < m->cap; i++) {
        if (m->w[i].pid != 0)
            kill(m->w[i].pid, sig);
    }
}

/* The signals the master itself sends its workers (TERM to drain, QUIT to
 * stop now, KILL at the graceful timeout): a worker ended by any other one
 * crashed. */
static int sent_by_master(int sig)
{
    return sig == SIGTERM || sig == SIGQUIT || sig == SIGKILL;
}

static void begin_stop(struct m0_master *m, int code, int graceful)
{
    if (!m->stopping) {
        m->stopping = 1;
        m->reloading = 0;
        m0_publish_unlisten(&m->ls, m->cfg);    /* publishers are told at once: no server here */
        m->exit_code = code;
        m->kill_at = m0_clock_ms() + (uint64_t)(m->cfg->graceful_timeout * 1000) + 1000;
        m0_info("shutting down: %s", graceful ? "draining workers" : "stopping workers now");
        m->want_ready = 0;
        m0_notify("STOPPING=1\nSTATUS=%s", graceful ? "draining" : "stopping");
    }
    signal_all(m, graceful ? SIGTERM : SIGQUIT);
}

/* "2 workers serving, 14 connections" (connections as of the last pings). */
static void status_text(const struct m0_master *m, char *dst, size_t cap)
{
    int n = 0;
    unsigned long long conns = 0;
    for (int i = 0; i < m->cap; i++) {
        if (m->w[i].pid != 0 && m->w[i].state == M0_W_SERVING) {
            n++;
            conns += m->w[i].conns;
        }
    }
    snprintf(dst, cap, "%d worker%s serving, %llu connection%s", n, n == 1 ? "" : "s", conns,
             conns == 1 ? "" : "s");
}

/* READY=1 is owed (at start, after a reload) and every slot now has a
 * serving worker of the current generation: send it. */
static void check_ready(struct m0_master *m)
{
    if (!m->want_ready || m->stopping)
        return;
    for (int idx = 0; idx < m->nworkers; idx++) {
        int ok = 0;
        for (int i = 0; i < m->cap && !ok; i++) {
            const struct m0_master_worker *w = &m->w[i];
            ok = w->pid != 0 && w->idx == idx && w->state == M0_W_SERVING && w->gen == m->gen;
        }
        if (!ok)
            return;
    }
    m->want_ready = 0;
    status_text(m, m->status, sizeof m->status);
    m0_notify("READY=1\nSTATUS=%s\nMAINPID=%d", m->status, (int)getpid());
}

/* Slot idx's workers that asked to be replaced go now: their successor
 * has booted (it gets 'G' once they said 'R'). */
static void retire_replaced(struct m0_master *m, int idx)
{
    for (int i = 0; i < m->cap; i++) {
        struct m0_master_worker *w = &m->w[i];
        if (w->pid != 0 && w->idx == idx && w->replace && w->state == M0_W_SERVING) {
            m0_info("worker %d (pid %d) replaced: draining it", idx, (int)w->pid);
            w->state = M0_W_RETIRING;
            m0_master_tell(w, M0_CTL_DRAIN);
            kill(w->pid, SIGTERM);
        }
    }
}

static void hand_over(struct m0_master *m, int idx);

/* Replace one serving worker: boot its successor first (the reload path
 * for one slot); why is for the log. */
static void replace_worker(struct m0_master *m, struct m0_master_worker *w, const char *why)
{
    uint64_t now = m0_clock_ms();
    /* A reload in progress replaces it anyway (and a successor booted now
     * would belong to the reload's generation: two for one slot). */
    if (m->stopping || m->reloading || w->replace || w->state != M0_W_SERVING || now < w->replace_after)
        return;
    w->replace = 1;
    if (m0_master_find(m, w->idx, M0_W_BOOTED, 1) != NULL) {
        retire_replaced(m, w->idx);      /* a successor is already waiting */
        hand_over(m, w->idx);
        return;
    }
    m0_info("worker %d (pid %d) %s: booting its replacement", w->idx, (int)w->pid, why);
    if (m0_master_find(m, w->idx, M0_W_BOOTING, 1) == NULL)
        m0_master_spawn(m, w->idx);
}

/* Slot idx's newest booted worker goes, unless another one serves the
 * slot or a retiring predecessor has not yet let go of its bus ('R'). */
static void hand_over(struct m0_master *m, int idx)
{
    if (m->stopping || (m->remove_draining && idx == m->nworkers - 1))
        return;
    struct m0_master_worker *next = NULL;
    for (int i = 0; i < m->cap; i++) {
        struct m0_master_worker *w = &m->w[i];
        if (w->pid == 0 || w->idx != idx)
            continue;
        if (w->state == M0_W_SERVING || (w->state == M0_W_RETIRING && w->ctl != -1))
            return;
        /* A reload's new generation waits until all of it has booted. */
        if (m->reloading && w->gen == m->gen)
            continue;
        if (w->state == M0_W_BOOTED && (next == NULL || w->gen > next->gen))
            next = w;
    }
    if (next != NULL) {
        next->state = M0_W_SERVING;
        next->served = 1;
        m0_master_tell(next, M0_CTL_GO);
        check_ready(m);
    }
}

/* Every worker of the new generation has booted: retire the old ones; each
 * slot's new worker goes once its predecessor has let go of the bus. */
static void finish_reload(struct m0_master *m)
{
    for (int idx = 0; idx < m->nworkers; idx++) {
        if (m0_master_find(m, idx, M0_W_BOOTED, 1) == NULL)
            return;
    }
    m->reloading = 0;
    m0_master_keys_commit(m);
    m0_info("SIGHUP: new workers booted; retiring the old ones");
    for (int i = 0; i < m->cap; i++) {
        struct m0_master_worker *w = &m->w[i];
        if (w->pid != 0 && w->gen != m->gen && w->state != M0_W_RETIRING) {
            w->state = M0_W_RETIRING;
            m0_master_tell(w, M0_CTL_DRAIN);
            kill(w->pid, SIGTERM);
        }
    }
    for (int idx = 0; idx < m->nworkers; idx++)
        hand_over(m, idx);
}

/* The new generation cannot serve: dismiss it, keep the old one. */
static void abort_reload(struct m0_master *m, const char *why)
{
    m0_error("reload failed (%s): the workers already serving keep serving", why);
    m->reloading = 0;
    m0_master_keys_restore(m);
    m->want_ready = 0;
    m0_notify("READY=1\nSTATUS=reload failed (%s); the previous workers serve", why);
    m->dismissed = m->gen;
    for (int i = 0; i < m->cap; i++) {
        struct m0_master_worker *w = &m->w[i];
        if (w->pid != 0 && w->gen == m->gen && w->state != M0_W_SERVING) {
            w->state = M0_W_RETIRING;
            m0_master_close_ctl(w);
            kill(w->pid, SIGKILL);        /* it never served: nothing to drain */
        }
    }
    for (int idx = 0; idx < m->nworkers; idx++)
        hand_over(m, idx);                /* old workers that booted meanwhile go */
}

void m0_master_reload(struct m0_master *m)
{
    if (m->adding || m->removing) {
        /* finish_reload wants a booted worker per slot: not while slots change. */
        m0_info("SIGHUP: reloading once the worker being added or removed is done");
        m->hup_pending = 1;
        return;
    }
    if (m->reloading) {
        m0_warn("SIGHUP: a reload is already in progress");
        return;
    }
    m0_master_keys_reread(m);       /* key rotation: the new generation's keys */
    m0_info("SIGHUP: booting %d new worker(s)", m->nworkers);
    m0_notify("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading: booting %d new worker(s)",
              (unsigned long long)m0_notify_monotonic_usec(), m->nworkers);
    m->gen++;
    m->reloading = 1;
    m0_mx_add(m0_metrics_master(), M0_MX_RELOADS, 1);
    m->want_ready = 1;
    m->reload_deadline = m0_clock_ms() + BOOT_TIMEOUT_MS;
    for (int idx = 0; idx < m->nworkers; idx++)
        m0_master_spawn(m, idx);
}

static void on_ctl(struct m0_master *m, struct m0_master_worker *w)
{
    char msg[16];
    ssize_t n = recv(w->ctl, msg, sizeof msg, MSG_DONTWAIT);
    if (n == -1 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        m0_master_close_ctl(w);              /* it exits; SIGCHLD tells the rest */
        hand_over(m, w->idx);
        return;
    }
    if (msg[0] == M0_CTL_PONG && n == 5) {
        /* One message: the loop answered a ping, with its connections. */
        memcpy(&w->conns, msg + 1, sizeof w->conns);
        w->ping_pending = 0;
        if (w->ping_missed)
            m0_info("worker %d (pid %d) answers again", w->idx, (int)w->pid);
        w->ping_missed = 0;
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        switch (msg[i]) {
        case M0_CTL_BOOTED:
            if (w->state != M0_W_BOOTING)
                break;
            w->state = M0_W_BOOTED;
            if (m->stopping) {
                kill(w->pid, SIGTERM);
            } else if (m->reloading && w->gen == m->gen) {
                finish_reload(m);
            } else {
                retire_replaced(m, w->idx);
                hand_over(m, w->idx);
            }
            break;
        case M0_CTL_REPLACE:
            replace_worker(m, w, "answered its --max-requests");
            return;          /* m0_master_spawn() may have moved the table: w is stale */
        case M0_CTL_RELOAD:
            /* --reload: a serving worker saw a file change; all are
             * replaced. Requests during a reload, or from workers already
             * retiring, are the same change seen twice. */
            if (!m->stopping && !m->reloading && w->state == M0_W_SERVING) {
                m0_info("--reload: an application file changed");
                m0_master_reload(m);
            }
            return;          /* as above */
        case M0_CTL_RETIRED:
            /* It stopped accepting and reading the bus: the successor may. */
            w->state = M0_W_RETIRING;
            m0_master_close_ctl(w);
            hand_over(m, w->idx);
            break;
        default:
            break;
        }
    }
}

static void reap(struct m0_master *m)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        struct m0_master_worker *w = NULL;
        for (int i = 0; i < m->cap; i++) {
            if (m->w[i].pid == pid) {
                w = &m->w[i];
                break;
            }
        }
        if (w == NULL)
            continue;
        m0_metrics_reaped(pid, status);
        m0_presence_reaped(m0_presence_current, (int32_t)pid);     /* its holds stop counting now */
        int idx = w->idx, served = w->served, retiring = w->state == M0_W_RETIRING;
        unsigned gen = w->gen;
        uint64_t lived = m0_clock_ms() - w->started;
        m0_master_close_ctl(w);
        w->pid = 0;
        w->state = M0_W_EMPTY;
        m0_master_keys_settle(m);           /* its keys no longer hold the others back */
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (code == M0_EXIT_ABANDONED)
            m->abandoned = 1;
        if (code == M0_EXIT_BOOT && !served && m->adding && idx == m->nworkers - 1) {
            /* Nothing was steered to its socket yet: nothing is lost. */
            m0_error("SIGTTIN: the new worker %d (pid %d) could not load the application: staying at %d "
                     "worker(s)", idx, (int)pid, m->nworkers - 1);
            m0_listeners_drop_slot(&m->ls, idx);
            m->respawn_at[idx] = 0;
            m->fails[idx] = 0;
            m->want = --m->nworkers;
            m->adding = 0;
            continue;
        }
        if (code == M0_EXIT_BOOT && !served) {
            if (m->reloading && gen == m->gen) {
                abort_reload(m, "a new worker could not load the application");
                continue;
            }
            if (m->dismissed != 0 && gen == m->dismissed)
                continue;                 /* its reload was already given up */
            struct m0_master_worker *cur = m0_master_find(m, idx, M0_W_SERVING, 0);
            if (!m->stopping && cur == NULL) {
                m0_error("worker %d (pid %d) could not load the application: stopping", idx, (int)pid);
                begin_stop(m, M0_EXIT_FAIL, 0);
            } else if (cur != NULL && cur->replace) {
                m0_error("the replacement of worker %d could not load the application: pid %d keeps serving",
                         idx, (int)cur->pid);
                cur->replace = 0;
                cur->replace_after = m0_clock_ms() + REPLACE_RETRY_MS;
            }
            continue;
        }
        if (m->stopping || retiring || (m->dismissed != 0 && gen == m->dismissed) ||
            (m->remove_draining && idx == m->nworkers - 1)) {
            if (WIFSIGNALED(status) && !sent_by_master(WTERMSIG(status))) {
                /* A crash while draining is still a crash: the requests and
                 * streams it held were cut, so the stop is not clean. */
                m0_error("worker %d (pid %d) crashed while draining: %s", idx, (int)pid,
                         strsignal(WTERMSIG(status)));
                if (m->stopping)
                    m->crashed = 1;
            } else if (WIFSIGNALED(status)) {
                m0_info("worker %d (pid %d) ended by signal %d", idx, (int)pid, WTERMSIG(status));
            }
            hand_over(m, idx);
            continue;
        }
        if (WIFSIGNALED(status))
            m0_warn("worker %d (pid %d) was killed by signal %d: restarting", idx, (int)pid, WTERMSIG(status));
        else
            m0_warn("worker %d (pid %d) exited with status %d: restarting", idx, (int)pid, code);
        if (m0_master_find(m, idx, M0_W_BOOTING, 1) != NULL || m0_master_find(m, idx, M0_W_BOOTED, 1) != NULL) {
            /* Its successor (a replacement, a reload) is already on the way. */
            hand_over(m, idx);
            continue;
        }
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
static int covered(const struct m0_master *m, int idx)
{
    for (int i = 0; i < m->cap; i++) {
        const struct m0_master_worker *w = &m->w[i];
        if (w->pid != 0 && w->idx == idx && w->state != M0_W_RETIRING)
            return 1;
    }
    return 0;
}

static void on_signal(struct m0_master *m)
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
                m0_master_reload(m);
            break;
        case SIGUSR1:
            /* logrotate's postrotate habit (gunicorn, nginx: reopen the log files). */
            m0_info("SIGUSR1: logs go to stdout/stderr, nothing to reopen");
            break;
        case SIGUSR2:
            m0_warn("SIGUSR2: re-executing the binary is not supported; ignored (SIGHUP reloads the "
                    "application without dropping a connection)");
            break;
        case SIGTTIN:
        case SIGTTOU:
            if (!m->stopping)
                m0_master_ask_resize(m, si.ssi_signo == SIGTTIN ? +1 : -1);
            break;
        default:
            break;       /* SIGCHLD: reaped below; SIGWINCH: nothing to do */
        }
    }
}

/* Resident set size of pid in MiB, or 0 if unknown. */
static uint64_t rss_mib(pid_t pid)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    unsigned long long size, resident;
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return 0;
    return resident * (uint64_t)sysconf(_SC_PAGESIZE) / (1024 * 1024);
}

/* Once a tick: --worker-max-rss, then pings (watchdog, STATUS=). */
static void tick(struct m0_master *m, uint64_t now)
{
    if (now < m->next_tick)
        return;
    m->next_tick = now + m->tick_ms;
    m0_master_tls_tick(m);                  /* the session-ticket keys' turn */
    const struct m0_config *cfg = m->cfg;
    if (cfg->worker_max_rss > 0 && !m->stopping) {
        for (int i = 0; i < m->cap; i++) {
            struct m0_master_worker *w = &m->w[i];
            if (w->pid == 0 || w->state != M0_W_SERVING || w->replace)
                continue;
            uint64_t mib = rss_mib(w->pid);
            if (mib > (uint64_t)cfg->worker_max_rss) {
                char why[96];
                snprintf(why, sizeof why, "uses %llu MiB (over --worker-max-rss %ld)", (unsigned long long)mib,
                         cfg->worker_max_rss);
                replace_worker(m, w, why);
            }
        }
    }
    if (!m0_notify_enabled())
        return;
    /* Every serving worker answered the previous round: its loop turns. */
    int healthy = 1;
    for (int i = 0; i < m->cap; i++) {
        struct m0_master_worker *w = &m->w[i];
        if (w->pid == 0 || w->state != M0_W_SERVING || !w->ping_pending)
            continue;
        healthy = 0;
        if (!w->ping_missed)
            m0_warn("worker %d (pid %d) did not answer a ping within %llu ms (its loop is blocked)", w->idx,
                    (int)w->pid, (unsigned long long)m->tick_ms);
        w->ping_missed = 1;
    }
    if (healthy && m0_notify_watchdog_usec() != 0 && !m->want_ready)
        m0_notify("WATCHDOG=1");
    for (int i = 0; i < m->cap; i++) {
        struct m0_master_worker *w = &m->w[i];
        if (w->pid != 0 && w->state == M0_W_SERVING && w->ctl != -1) {
            m0_master_tell(w, M0_CTL_PING);
            w->ping_pending = 1;
        }
    }
    char st[sizeof m->status];
    status_text(m, st, sizeof st);
    if (!m->want_ready && !m->stopping && !m->reloading && strcmp(st, m->status) != 0) {
        memcpy(m->status, st, sizeof st);
        m0_notify("STATUS=%s", st);
    }
}

int m0_master_run(struct m0_config *cfg)
{
    struct m0_master mst;
    struct m0_master *m = &mst;
    char err[512];

    memset(m, 0, sizeof *m);
    m->cfg = cfg;
    m->nworkers = (int)cfg->workers;
    if (m0_notify_init(err, sizeof err) != M0_OK)
        m0_warn("%s: not notifying the service manager", err);
    m0_nofile_raise(cfg->max_connections);      /* the workers inherit it */
    int rc = m0_listeners_open(&m->ls, cfg, m->nworkers);
    if (rc == M0_OK)
        rc = m0_metrics_listen(&m->ls, cfg);
    if (rc == M0_OK)
        rc = m0_grip_listen(&m->ls, cfg);
    if (rc == M0_OK)
        rc = m0_publish_listen(&m->ls, cfg);
    if (rc != M0_OK)
        return rc;
    m0_metrics_create(cfg);      /* before the first fork; without it: no metrics, logged */
    if ((rc = m0_master_settle_identity(m, cfg)) != M0_OK)
        return rc;
    m->want_ready = 1;
    m->tick_ms = TICK_MS;
    if (m0_notify_watchdog_usec() != 0 && m0_notify_watchdog_usec() / 4000 < m->tick_ms)
        m->tick_ms = m0_notify_watchdog_usec() / 4000 > 10 ? m0_notify_watchdog_usec() / 4000 : 10;

    if (cfg->realtime && m0_bus_create(&m->bus, m->nworkers * (int)cfg->loops) != M0_OK) {
        m0_log_errno("cannot create the broadcast bus");
        return M0_EXIT_FAIL;
    }
    /* Occupancy and presence (issue 32): a block per bus endpoint. */
    if (cfg->realtime &&
        (m0_presence_current = m0_presence_create((uint32_t)(m->nworkers * cfg->loops),
                                                  m0_presence_cells_for((uint32_t)cfg->max_connections))) == NULL)
        m0_log_errno("cannot map the occupancy table: m0pub.channel_info and presence count nothing");
    m->cap = m->nworkers * 2;
    m->w = calloc((size_t)m->cap, sizeof *m->w);
    for (int i = 0; i < m->cap; i++)
        m->w[i].ctl = -1;
    m->fails = calloc(M0_MAX_SLOTS, sizeof *m->fails);
    m->respawn_at = calloc(M0_MAX_SLOTS, sizeof *m->respawn_at);
    m->want = m->nworkers;

    /* Signals stay blocked in the master and are read from a signalfd;
     * workers unblock them after fork. SIGPIPE is ignored everywhere. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGHUP);
    /* Operators' habits must not stop the server (their default action):
     * USR1 (logrotate), USR2 (gunicorn's re-exec), TTIN/TTOU (resize). */
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGTTIN);
    sigaddset(&set, SIGTTOU);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    m->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (m->sfd == -1) {
        m0_log_errno("signalfd");
        return M0_EXIT_FAIL;
    }

    m0_banner_log(cfg, &m->ls, m->nworkers);
    m->next_tick = m0_clock_ms() + m->tick_ms;
    for (int idx = 0; idx < m->nworkers; idx++)
        m0_master_spawn(m, idx);

    struct pollfd *pfds = NULL;
    struct m0_master_worker **who = NULL;
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
            m0_master_resize(m, now);
            for (int idx = 0; idx < m->nworkers - (m->remove_draining ? 1 : 0); idx++) {
                if (m->respawn_at[idx] != 0 && now >= m->respawn_at[idx])
                    m0_master_spawn(m, idx);
                else if (m->respawn_at[idx] == 0 && !covered(m, idx))
                    m0_master_spawn(m, idx);   /* nothing serves this slot and nothing is scheduled */
            }
        }
        tick(m, now);
        uint64_t wait_ms = m->next_tick > now ? m->next_tick - now : 0;
        if (wait_ms > 1000)
            wait_ms = 1000;
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
        int ready = poll(pfds, (nfds_t)np, (int)wait_ms);
        if (ready == -1 && errno != EINTR) {
            m0_log_errno("poll");
            break;
        }
        if (ready <= 0)
            continue;
        /* A spawn (a reload, a replacement) may grow the worker table and
         * move it: who[] then points into freed memory. Stop; what is left
         * is still readable at the next poll. */
        const struct m0_master_worker *table = m->w;
        if (pfds[0].revents)
            on_signal(m);
        for (int i = 1; i < np && m->w == table; i++) {
            if (pfds[i].revents && who[i]->pid != 0 && who[i]->ctl == pfds[i].fd)
                on_ctl(m, who[i]);
        }
    }
    free(pfds);
    free(who);
    m0_listeners_close(&m->ls, m->nworkers);
    if (cfg->pid_file != NULL)
        m0_pidfile_remove(cfg->pid_file);
    if (m->exit_code == M0_EXIT_OK && m->crashed) {
        m0_error("shutdown complete, but a worker crashed while draining");
        m->exit_code = M0_EXIT_FAIL;
    } else if (m->exit_code == M0_EXIT_OK && m->abandoned) {
        m0_warn("shutdown complete, but requests were still in flight at the graceful timeout");
        m->exit_code = M0_EXIT_ABANDONED;
    } else {
        m0_info("shutdown complete");
    }
    close(m->sfd);
    free(m->w);
    free(m->fails);
    free(m->respawn_at);
    return m->exit_code;
}
