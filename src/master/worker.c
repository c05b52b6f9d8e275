/*
 * worker.c — worker bootstrap after fork: signals as data, Python and the
 * application, the serving loop, then an orderly exit (see worker.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#include "m0/server.h"
#include "m0/fork.h"
#include "m0/log.h"
#include "m0/loops.h"
#include "m0/pool.h"
#include "m0/pyrt.h"
#include "m0/reload.h"
#include "m0/serve.h"
#include "m0/static.h"
#include "m0/target.h"
#include "m0/worker.h"
#include "m0/control.h"

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
    for (int i = 0; i < m0_bus_loops; i++) {
        if (m0_bus_endpoint(i) >= 0)
            close(m0_bus_current->read_fds[m0_bus_endpoint(i)]);
    }
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
static void log_mounts(const struct m0_server *s, unsigned loops)
{
    char line[4096];
    const char *gil = m0_py_gil_state();     /* a free-threaded build's truth; NULL otherwise */
    char nl[32] = "";
    if (loops > 1)
        snprintf(nl, sizeof nl, "; %u event loops", loops);
    size_t n = (size_t)snprintf(line, sizeof line, "worker booted (pid %d%s%s%s); mounts:", (int)getpid(),
                                gil ? "; free-threaded build, " : "", gil ? gil : "", nl);
    const struct m0_pool *pool = NULL;
    for (unsigned i = 0; i < m0_targets.n && n < sizeof line; i++) {
        const struct m0_target *t = &m0_targets.t[i];
        if (t->on_pool)
            pool = s->run.pool;
        const char *extra = "";
        if (t->kind == M0_TARGET_STATIC)
            extra = t->files->resolver == M0_RESOLVE_OPENAT2 ? ", openat2" : ", openat walk";
        else if (t->kind == M0_TARGET_WSGI && !t->on_pool)
            extra = ", no handler pool";
        n += (size_t)snprintf(line + n, sizeof line - n, "%s %s -> %s (%s, %s%s)", i ? ";" : "",
                              t->prefix_len ? t->prefix : "/", t->resolved ? t->resolved : t->spec,
                              m0_target_kind_name(t->kind), m0_target_mode(t), extra);
    }
    /* The WSGI handler pool, only where a mount runs on it (ASGI has none). */
    if (pool != NULL && n < sizeof line) {
        unsigned threads, busy, max, queued;
        m0_pool_stats(pool, &threads, &busy, &max, &queued);
        n += (size_t)snprintf(line + n, sizeof line - n, "; blocking-threads=%u%s", threads,
                              loops > 1 ? " per loop" : "");
        if (max > threads && n < sizeof line)
            snprintf(line + n, sizeof line - n, "..%u (elastic)", max);
    }
    m0_info("%s", line);
}

/* A loop other than the first (--threads), on a thread of its own, with a
 * Python thread state of its own for what it runs inline. */
struct loop_thread {
    pthread_t tid;
    struct m0_server *s;
    int rc;
};

static void *run_loop(void *arg)
{
    struct loop_thread *lt = arg;
    m0_py_adopt_thread();
    m0_py_set_loop(lt->s->loop_index);
    lt->rc = m0_serve_run(lt->s);
    m0_serve_tell_master(lt->s, M0_CTL_EXITED);    /* to the first loop: it may be serving still */
    m0_py_release_thread();
    return NULL;
}

/* The worst of two loops' exit statuses: one that left a view running
 * decides (the process must _exit), then a failure. */
static int worse(int a, int b)
{
    if (a == M0_EXIT_ABANDONED || b == M0_EXIT_ABANDONED)
        return M0_EXIT_ABANDONED;
    return a != M0_EXIT_OK ? a : b;
}

/* Loop i's descriptors of its listening sockets: its own per-loop TCP
 * sockets (listeners.c), and its own descriptor of each shared one (a unix
 * path, systemd's, the metrics and GRIP ports), so each loop's epoll
 * registers its own and a drain closes them loop by loop while the master
 * keeps the sockets. */
static int loop_listeners(const int *mine, const int *first, int nlisten, int *out)
{
    for (int k = 0; k < nlisten; k++) {
        out[k] = mine[k] != first[k] ? mine[k] : fcntl(mine[k], F_DUPFD_CLOEXEC, 0);
        if (out[k] == -1) {
            m0_log_errno("dup(listener)");
            return M0_ERR;
        }
    }
    return M0_OK;
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
    /* --threads N: N loops, each with its connections, pool, executors and
     * holds; the first has the signals and the master (serve.c). */
    unsigned n = (unsigned)cfg->loops;
    struct m0_server *loops[M0_MAX_LOOPS];
    const struct m0_runner_env *envs[M0_MAX_LOOPS];
    for (unsigned i = 0; i < n; i++) {
        int fds[M0_MAX_LISTENERS];
        if (i > 0 && loop_listeners(listen_fds + i * nlisten, listen_fds, nlisten, fds) != M0_OK)
            _exit(M0_EXIT_FAIL);
        loops[i] = m0_serve_new(cfg, i == 0 ? listen_fds : fds, nlisten, i == 0 ? sp[0] : -1, i == 0 ? ctl_fd : -1);
        if (loops[i] == NULL)
            _exit(M0_EXIT_FAIL);
        envs[i] = &loops[i]->run.env;
    }
    struct m0_server *s = loops[0];
    if (m0_serve_group(loops, n) != M0_OK)
        _exit(M0_EXIT_FAIL);
    /* The listeners every loop shares (the same socket for loop 1 as for
     * loop 0): their connections are handed round the loops (handoff.h). */
    uint32_t shared = 0;
    for (int k = 0; n > 1 && k < nlisten; k++)
        shared |= listen_fds[nlisten + k] == listen_fds[k] ? 1u << k : 0;
    for (unsigned i = 0; i < n; i++)
        loops[i]->accept.shared = shared;
    if (m0_static_add_targets(cfg) != M0_OK || m0_apps_load(cfg, envs, n) != M0_OK) {
        fflush(NULL);
        _exit(M0_EXIT_BOOT);     /* executor threads may be alive: nothing to join */
    }
    for (unsigned i = 0; i < n; i++) {
        if (m0_apps_start_pool(cfg, envs[i], &loops[i]->run.pool) != M0_OK)
            _exit(M0_EXIT_FAIL);
        loops[i]->run.env.pool = loops[i]->run.pool;
    }
    m0_broker_prepare();       /* --broker: where the log stands, before serving */
    if (cfg->reload)
        m0_reload_start(s->loop, cfg, ask_reload, s);      /* a failure is logged; serving goes on without it */
    for (unsigned i = 0; i < n; i++) {
        if (m0_serve_prepare(loops[i]) != M0_OK) {
            fflush(NULL);
            _exit(M0_EXIT_BOOT);     /* never reported booted: a boot failure to the master */
        }
    }
    struct loop_thread threads[M0_MAX_LOOPS];
    for (unsigned i = 1; i < n; i++) {
        threads[i] = (struct loop_thread){.s = loops[i]};
        int e = pthread_create(&threads[i].tid, NULL, run_loop, &threads[i]);
        if (e != 0) {
            m0_error("cannot start event loop %u: %s", i, strerror(e));
            _exit(M0_EXIT_FAIL);
        }
    }
    log_mounts(s, n);           /* "worker booted": everything is set up */
    booting = 0;             /* signals are the loop's from now on: a drain */
    m0_serve_booted(s);

    int rc = m0_serve_run(s);
    if (rc == M0_EXIT_ABANDONED) {
        fflush(NULL);
        _exit(rc);             /* threads are inside Python: no finalize, no join */
    }
    /* The first loop has drained; the others drain on their own deadline. */
    for (unsigned i = 1; i < n; i++) {
        pthread_join(threads[i].tid, NULL);
        rc = worse(rc, threads[i].rc);
    }
    if (rc == M0_EXIT_ABANDONED) {
        fflush(NULL);
        _exit(rc);
    }
    m0_apps_teardown();
    struct m0_loops *table = s->loops;
    for (unsigned i = 0; i < n; i++)
        m0_serve_free(loops[i]);
    m0_loops_free(table);
    m0_apps_unload();
    m0_py_finalize();
    m0_info("worker exiting (pid %d)", (int)getpid());
    exit(rc);
}
