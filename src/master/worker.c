/*
 * worker.c — worker bootstrap after fork: signals as data, Python and the
 * application, the serving loop, then an orderly exit (see worker.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "m0/apps.h"
#include "m0/broker.h"
#include "m0/bus.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/fork.h"
#include "m0/log.h"
#include "m0/pool.h"
#include "m0/pyrt.h"
#include "m0/reload.h"
#include "m0/serve.h"
#include "m0/static.h"
#include "m0/target.h"
#include "m0/worker.h"

/* Per process: the write end of the signal self-pipe (the handler below
 * needs it without a context; set once at boot). */
static int sig_pipe_w = -1;

/* Until it reports booted a worker has served nothing and owes nothing (an
 * ASGI lifespan startup has not completed): a stop signal then ends it at
 * once, rather than after a startup that may never finish. */
static volatile sig_atomic_t booting = 1;

/* Async-signal-safe: one byte per signal, read by the loop. */
static void on_signal(int signo)
{
    if (booting && m0_fork_in_worker())
        _exit(M0_EXIT_OK);
    int saved = errno;
    unsigned char b = (unsigned char)signo;
    if (write(sig_pipe_w, &b, 1) == -1) {
        /* pipe full: the loop already has signals to read */
    }
    errno = saved;
}

/* In a child forked by the application: the worker's own descriptors (its
 * bus read end and the signal pipe; the server, the pool, the executors
 * and the broker register theirs, fork.h). */
static void close_in_child(void *ctx)
{
    (void)ctx;
    if (m0_bus_current != NULL && m0_bus_index >= 0)
        close(m0_bus_current->read_fds[m0_bus_index]);
    if (sig_pipe_w != -1)
        close(sig_pipe_w);
    sig_pipe_w = -1;
}

/* --reload saw a change: the master replaces every worker. */
static void ask_reload(void *ctx)
{
    m0_serve_tell_master(ctx, M0_CTL_RELOAD);
}

/* The boot line names every mount, its protocol and its mode (the master's
 * banner cannot: protocols are detected here, by importing). */
static void log_mounts(void)
{
    char line[4096];
    const char *gil = m0_py_gil_state();     /* a free-threaded build's truth; NULL otherwise */
    size_t n = (size_t)snprintf(line, sizeof line, "worker booted (pid %d%s%s); mounts:", (int)getpid(),
                                gil ? "; free-threaded build, " : "", gil ? gil : "");
    const struct m0_pool *pool = NULL;
    for (unsigned i = 0; i < m0_targets.n && n < sizeof line; i++) {
        const struct m0_target *t = &m0_targets.t[i];
        if (t->pool != NULL)
            pool = t->pool;
        const char *extra = "";
        if (t->kind == M0_TARGET_STATIC)
            extra = t->files->resolver == M0_RESOLVE_OPENAT2 ? ", openat2" : ", openat walk";
        else if (t->kind == M0_TARGET_WSGI && t->pool == NULL)
            extra = ", no handler pool";
        n += (size_t)snprintf(line + n, sizeof line - n, "%s %s -> %s (%s, %s%s)", i ? ";" : "",
                              t->prefix_len ? t->prefix : "/", t->resolved ? t->resolved : t->spec,
                              m0_target_kind_name(t->kind), m0_target_mode(t), extra);
    }
    /* The WSGI handler pool, only where a mount runs on it (ASGI has none). */
    if (pool != NULL && n < sizeof line) {
        unsigned threads, busy, max, queued;
        m0_pool_stats(pool, &threads, &busy, &max, &queued);
        n += (size_t)snprintf(line + n, sizeof line - n, "; blocking-threads=%u", threads);
        if (max > threads && n < sizeof line)
            snprintf(line + n, sizeof line - n, "..%u (elastic)", max);
    }
    m0_info("%s", line);
}

void m0_worker_main(const struct m0_config *cfg, const int *listen_fds, int nlisten, int ctl_fd)
{
    /* Die with the master rather than linger as an orphan. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1)
        _exit(M0_EXIT_FAIL);
    m0_fork_set_worker();
    /* Every thread of a worker runs SCHED_BATCH (sched(7)); threads made
     * later inherit it. The loop, the handler threads and the executor
     * hand work to each other through sockets: under the default policy
     * each completion wakes the loop, which preempts the thread holding
     * the GIL, one pair of context switches per request. As batch tasks
     * they yield at their own blocking points instead (Django view on a
     * pinned core: +30% req/s, p99 halved; docs/performance.md). Other
     * processes keep their normal wakeup preemption. Best effort. */
    struct sched_param batch = {0};
    if (sched_setscheduler(0, SCHED_BATCH, &batch) == -1)
        m0_debug("SCHED_BATCH: %s", strerror(errno));

    int sp[2];
    if (pipe2(sp, O_NONBLOCK | O_CLOEXEC) == -1) {
        m0_log_errno("pipe2");
        _exit(M0_EXIT_FAIL);
    }
    sig_pipe_w = sp[1];
    m0_fork_on_child(close_in_child, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    signal(SIGHUP, SIG_IGN);      /* the master handles reloads */
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);   /* the master blocks its signals for its signalfd */

    if (m0_apps_register_modules() != M0_OK || m0_py_init(cfg) != M0_OK)
        _exit(M0_EXIT_BOOT);
    struct m0_server *s = m0_serve_new(cfg, listen_fds, nlisten, sp[0], ctl_fd);
    if (s == NULL)
        _exit(M0_EXIT_FAIL);
    if (m0_static_add_targets(cfg) != M0_OK || m0_apps_load(cfg, &s->env) != M0_OK) {
        fflush(NULL);
        _exit(M0_EXIT_BOOT);     /* executor threads may be alive: nothing to join */
    }
    if (m0_apps_start_pool(cfg, &s->env, &s->pool) != M0_OK)
        _exit(M0_EXIT_FAIL);
    m0_broker_prepare();       /* --broker: where the log stands, before serving */
    if (cfg->reload)
        m0_reload_start(s->loop, cfg, ask_reload, s);      /* a failure is logged; serving goes on without it */
    if (m0_serve_prepare(s) != M0_OK) {
        fflush(NULL);
        _exit(M0_EXIT_BOOT);     /* never reported booted: a boot failure to the master */
    }
    log_mounts();            /* "worker booted": everything is set up */
    booting = 0;             /* signals are the loop's from now on: a drain */
    m0_serve_booted(s);

    int rc = m0_serve_run(s);
    if (rc == M0_EXIT_ABANDONED) {
        fflush(NULL);
        _exit(rc);             /* threads are inside Python: no finalize, no join */
    }
    m0_apps_teardown();
    m0_serve_free(s);
    m0_apps_unload();
    m0_py_finalize();
    m0_info("worker exiting (pid %d)", (int)getpid());
    exit(rc);
}
