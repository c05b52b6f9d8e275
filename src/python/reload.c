/*
 * reload.c — --reload's worker side (see reload.h). The inotify descriptor
 * is read by the loop; watches are added from the Python watcher thread
 * (inotify_add_watch is a plain system call, safe from any thread).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "m0/config.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/pyrt.h"
#include "m0/reload.h"

/* Written whole (close after write), moved into place (editors that save
 * through a temporary file), or removed. Not IN_CREATE/IN_MODIFY: a file
 * being written is not yet worth importing. */
#define WATCH_MASK (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR)

/* Per process (set once at boot, --reload only): the inotify descriptor,
 * which the Python watcher thread adds directories to without a context
 * (m0._watch), and what to call when a file changed. */
static int ino_fd = -1;

static int is_python_file(const char *name, size_t n)
{
    return n > 3 && memcmp(name + n - 3, ".py", 3) == 0;
}

struct watcher {
    void (*changed)(void *ctx);
    void *ctx;
};

static void on_inotify(struct m0_loop *l, int fd, uint32_t events, void *ctx)
{
    const struct watcher *w = ctx;
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    (void)l;
    (void)events;
    /* One request per batch of events (an editor's save is several). The
     * master ignores requests while a reload runs and from workers it is
     * retiring, so no latch is kept here: after a reload that failed (a
     * syntax error), the next save still reloads. */
    const char *changed = NULL;
    char name[256];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;           /* EAGAIN: drained */
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            size_t nl = ev->len ? strnlen(ev->name, ev->len) : 0;
            if (ev->mask & IN_Q_OVERFLOW) {
                changed = "a file";
            } else if (is_python_file(ev->name, nl)) {
                snprintf(name, sizeof name, "%.*s", (int)nl, ev->name);
                changed = name;
            }
        }
    }
    if (changed != NULL) {
        m0_info("--reload: %s changed: asking for new workers", changed);
        w->changed(w->ctx);
    }
}

int m0_reload_watch(const char *dir)
{
    if (ino_fd == -1) {
        errno = EBADF;
        return M0_ERR;
    }
    return inotify_add_watch(ino_fd, dir, WATCH_MASK) == -1 ? M0_ERR : M0_OK;
}

int m0_reload_start(struct m0_loop *l, const struct m0_config *cfg, void (*changed)(void *ctx), void *ctx)
{
    static struct watcher w;
    w.changed = changed;
    w.ctx = ctx;
    ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (ino_fd == -1) {
        m0_log_errno("--reload: inotify_init1");
        return M0_ERR;
    }
    if (m0_loop_add_fd(l, ino_fd, EPOLLIN, on_inotify, &w) == M0_ERR) {
        m0_log_errno("--reload: epoll_ctl");
        return M0_ERR;
    }
    char root[PATH_MAX];
    if (realpath(cfg->app_dir, root) == NULL) {
        m0_log_errno("--reload: %s", cfg->app_dir);
        return M0_ERR;
    }
    int rc = M0_ERR;
    m0_py_attach();
    PyObject *mod = PyImport_ImportModule("m0serve._reload");
    PyObject *res = mod ? PyObject_CallMethod(mod, "start", "s", root) : NULL;
    if (res == NULL)
        m0_py_print_exception();
    else
        rc = M0_OK;
    Py_XDECREF(res);
    Py_XDECREF(mod);
    m0_py_detach();
    return rc;
}
