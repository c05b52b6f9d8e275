/*
 * worker.c — worker bootstrap after fork: signals as data, Python and the
 * application, then the event loop, then an orderly exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "m0/bus.h"
#include "m0/config.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/py.h"
#include "m0/worker.h"

static int sig_pipe_w = -1;

/* Async-signal-safe: one byte per signal, read by the loop. */
static void on_signal(int signo)
{
    int saved = errno;
    unsigned char b = (unsigned char)signo;
    if (write(sig_pipe_w, &b, 1) == -1) {
        /* pipe full: the loop already has signals to read */
    }
    errno = saved;
}

void m0_worker_main(const struct m0_config *cfg, int listen_fd)
{
    /* Die with the master rather than linger as an orphan. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1)
        _exit(M0_EXIT_FAIL);

    int sp[2];
    if (pipe2(sp, O_NONBLOCK | O_CLOEXEC) == -1) {
        m0_log_errno("pipe2");
        _exit(M0_EXIT_FAIL);
    }
    sig_pipe_w = sp[1];
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
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);   /* the master blocks these for sigtimedwait */

    if (m0_bus_current != NULL) {
        /* m0pub.publish() writes one datagram to each of these. */
        char fds[4096];
        size_t n = 0;
        for (int i = 0; i < m0_bus_current->nworkers && n + 12 < sizeof fds; i++)
            n += (size_t)snprintf(fds + n, sizeof fds - n, i ? ",%d" : "%d", m0_bus_current->write_fds[i]);
        setenv("M0_BUS_WRITE_FDS", fds, 1);
    } else {
        unsetenv("M0_BUS_WRITE_FDS");
    }
    if (m0_py_init(cfg) != M0_OK || m0_py_load_app(cfg, cfg->blocking_threads > 0) != M0_OK)
        _exit(M0_EXIT_BOOT);
    m0_info("worker booted (pid %d)", (int)getpid());

    int rc = m0_loop_run(cfg, listen_fd, sp[0]);
    if (rc == M0_EXIT_ABANDON)
        _exit(M0_EXIT_OK);     /* threads are inside Python: no finalize, no join */
    m0_py_finalize();
    m0_info("worker exiting (pid %d)", (int)getpid());
    exit(rc);
}
