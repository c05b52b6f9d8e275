/*
 * fork.c — the child-after-fork registry (see fork.h).
 *
 * Per process: the worker's pid and the hooks, written at boot and
 * teardown, and when a loop starts reading its broker (go, on each loop's
 * thread with --threads: so under a lock); a hook is filled in before the
 * count that publishes it, so a fork on another thread meanwhile copies a
 * registry that is whole. in_forked_child is set by pthread_atfork in the
 * child.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <unistd.h>

#include "m0/fork.h"
#include "m0/log.h"

static struct {
    m0_fork_fn fn;
    void *ctx;
} hooks[M0_FORK_MAX_HOOKS];
static unsigned nhooks;
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;   /* writers only */
static pid_t worker_pid;
static volatile sig_atomic_t in_forked_child;

static void on_fork_child(void)
{
    in_forked_child = 1;
}

void m0_fork_set_worker(void)
{
    worker_pid = getpid();
    pthread_atfork(NULL, NULL, on_fork_child);
}

int m0_fork_in_worker(void)
{
    return worker_pid != 0 && getpid() == worker_pid;
}

void m0_fork_on_child(m0_fork_fn fn, void *ctx)
{
    pthread_mutex_lock(&hooks_lock);
    unsigned n = __atomic_load_n(&nhooks, __ATOMIC_RELAXED);
    if (n == M0_FORK_MAX_HOOKS) {
        m0_error("BUG: too many fork hooks");
        abort();
    }
    hooks[n].fn = fn;
    hooks[n].ctx = ctx;
    __atomic_store_n(&nhooks, n + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&hooks_lock);
}

void m0_fork_forget(void *ctx)
{
    pthread_mutex_lock(&hooks_lock);
    unsigned n = __atomic_load_n(&nhooks, __ATOMIC_RELAXED), kept = 0;
    for (unsigned i = 0; i < n; i++) {
        if (hooks[i].ctx != ctx)
            hooks[kept++] = hooks[i];
    }
    __atomic_store_n(&nhooks, kept, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&hooks_lock);
}

void m0_fork_after_child(void)
{
    if (worker_pid == 0 || getpid() == worker_pid)
        return;
    unsigned n = __atomic_load_n(&nhooks, __ATOMIC_ACQUIRE);
    nhooks = 0;
    /* The child owns nothing of the server: no slot table, no loop. What
     * it does next is the application's business (m0pub.publish still
     * works: the bus write ends are kept). */
    for (unsigned i = 0; i < n; i++)
        hooks[i].fn(hooks[i].ctx);
}

void m0_fork_check(void)
{
    if (!in_forked_child || worker_pid == 0 || getpid() == worker_pid)
        return;
    /* A child forked by the view came back into the server: it must not
     * serve, finish jobs or run the loop. Leave quietly. */
    m0_warn("a process forked by a view (pid %d) returned into the server: it exits", (int)getpid());
    fflush(NULL);
    _exit(0);
}
