/*
 * py.c — the CPython host.
 *
 * One interpreter per worker, initialised after fork and never in the
 * master (DESIGN: "fork before Py_Initialize"). Initialisation follows
 * the documented path only: PyPreConfig, then PyConfig with the Python
 * (not isolated) configuration so PYTHONPATH and a virtualenv behave as
 * under gunicorn, then Py_InitializeFromConfig. C owns the signals
 * (install_signal_handlers = 0).
 *
 * The loop thread is detached from the interpreter except inside
 * m0_py_attach()/m0_py_detach(), so threads the application starts keep
 * running while the loop sleeps in epoll_wait.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "m0/asgi.h"
#include "m0/config.h"
#include "m0/log.h"
#include "m0/py.h"
#include "m0/runner.h"
#include "m0/target.h"
#include "m0/wsgi.h"

static PyThreadState *main_tstate;   /* the loop thread's state while detached */

#define M0_STR_(x) #x
#define M0_STR(x) M0_STR_(x)

static PyObject *init_m0_module(void)
{
    return m0_module_init();
}

void m0_py_print_exception(void)
{
    /* PyErr_Print() would act on SystemExit (finalizing the interpreter
     * from a handler thread) and call sys.excepthook: a view's sys.exit()
     * is an error like any other here, printed and forgotten. */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type == NULL)
        return;
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    /* One write(2) for the whole traceback: workers failing together (an
     * import error boots every one of them) would otherwise interleave
     * their tracebacks line by line, even inside a line. */
    PyObject *text = NULL;
    PyObject *tbmod = PyImport_ImportModule("traceback");
    if (tbmod != NULL) {
        PyObject *lines = PyObject_CallMethod(tbmod, "format_exception", "OOO", type,
                                              value ? value : Py_None, tb ? tb : Py_None);
        if (lines != NULL) {
            PyObject *empty = PyUnicode_FromString("");
            text = empty ? PyUnicode_Join(empty, lines) : NULL;
            Py_XDECREF(empty);
            Py_DECREF(lines);
        }
        Py_DECREF(tbmod);
    }
    Py_ssize_t n = 0;
    const char *utf8 = text != NULL ? PyUnicode_AsUTF8AndSize(text, &n) : NULL;
    if (utf8 != NULL) {
        PyObject *err = PySys_GetObject("stderr");      /* borrowed: what is buffered goes first */
        if (err != NULL && err != Py_None) {
            PyObject *r = PyObject_CallMethod(err, "flush", NULL);
            Py_XDECREF(r);
        }
        for (Py_ssize_t off = 0; off < n;) {
            ssize_t w = write(2, utf8 + off, (size_t)(n - off));
            if (w <= 0 && errno != EINTR)
                break;
            if (w > 0)
                off += w;
        }
    } else {
        PyErr_Clear();
        PyErr_Display(type, value, tb);
    }
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyObject *err = PySys_GetObject("stderr");      /* borrowed */
    if (err != NULL && err != Py_None) {
        PyObject *r = PyObject_CallMethod(err, "flush", NULL);
        Py_XDECREF(r);
    }
    PyErr_Clear();
}

/* The directory of this executable, without the trailing slash; "" if
 * unknown. */
static void exe_dir(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    out[0] = '\0';
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    snprintf(out, cap, "%s", exe);
}

/* The virtualenv the embedded interpreter runs in: $VIRTUAL_ENV when set
 * (an activated venv, as gunicorn's would be), else the venv this binary
 * was installed into by pip (bin/m0serve beside bin/python, pyvenv.cfg one
 * level up), so `venv/bin/m0serve` works without activating anything, as
 * `venv/bin/gunicorn` does. Returns 0 and "" for none. from_env tells which. */
static int find_venv(char *out, size_t cap, int *from_env)
{
    const char *venv = getenv("VIRTUAL_ENV");
    *from_env = 0;
    out[0] = '\0';
    if (venv != NULL && venv[0] != '\0') {
        *from_env = 1;
        snprintf(out, cap, "%s", venv);
        return 1;
    }
    char dir[PATH_MAX], cfg[PATH_MAX + 32];
    exe_dir(dir, sizeof dir);
    snprintf(cfg, sizeof cfg, "%s/../pyvenv.cfg", dir);
    if (dir[0] == '\0' || access(cfg, R_OK) != 0)
        return 0;
    snprintf(cfg, sizeof cfg, "%s/..", dir);
    char *real = realpath(cfg, NULL);
    if (real == NULL)
        return 0;
    size_t n = strlen(real);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, real, n);
    out[n] = '\0';
    free(real);
    return 1;
}

int m0_py_check_env(char *err, size_t cap)
{
    char venv[PATH_MAX], path[PATH_MAX + 32], line[512];
    int from_env;
    if (!find_venv(venv, sizeof venv, &from_env))
        return M0_OK;
    const char *who = from_env ? "VIRTUAL_ENV=" : "the virtualenv ";
    snprintf(path, sizeof path, "%s/pyvenv.cfg", venv);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        snprintf(err, cap, "m0serve: error: %s%s is not a virtualenv (no pyvenv.cfg)", who, venv);
        return M0_ERR;
    }
    int major = -1, minor = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        /* "version = 3.11.2" (venv), "version_info = 3.12.1.final.0" (virtualenv, uv) */
        char key[32];
        int a, b;
        if (sscanf(line, " %31[a-z_] = %d.%d", key, &a, &b) == 3 &&
            (strcmp(key, "version") == 0 || strcmp(key, "version_info") == 0)) {
            major = a;
            minor = b;
            break;
        }
    }
    fclose(f);
    if (major == -1)
        return M0_OK;           /* no version recorded: let Python judge */
    if (major != PY_MAJOR_VERSION || minor != PY_MINOR_VERSION) {
        snprintf(err, cap,
                 "m0serve: error: %s%s is a Python %d.%d virtualenv, but this m0serve was built for Python %d.%d "
                 "(%s): install m0serve into that virtualenv (pip install), or use one made from %s",
                 who, venv, major, minor, PY_MAJOR_VERSION, PY_MINOR_VERSION, M0_PYTHON_EXE, M0_PYTHON_EXE);
        return M0_ERR;
    }
    return M0_OK;
}

const char *m0_py_built_for(void)
{
    return M0_PYTHON_EXE;
}

/* Where m0serve's own Python files live: beside the binary in a build tree
 * (./python), the site-packages of the virtualenv pip installed the binary
 * into (found even when VIRTUAL_ENV names another one), else the installed
 * share directory (make install). */
static void python_dir(char *out, size_t cap)
{
    static const char *const rel[] = {
        "/python", "/../../python",
        "/../lib/python" M0_STR(PY_MAJOR_VERSION) "." M0_STR(PY_MINOR_VERSION) "/site-packages",
        "/../share/m0serve/python"};
    char exe[PATH_MAX];
    exe_dir(exe, sizeof exe);
    for (size_t i = 0; exe[0] != '\0' && i < M0_ARRAY_LEN(rel); i++) {
        char cand[PATH_MAX + 64];
        int len = snprintf(cand, sizeof cand, "%s%s/m0serve/_boot.py", exe, rel[i]);
        if (len <= 0 || (size_t)len >= sizeof cand || (size_t)len >= cap || access(cand, R_OK) != 0)
            continue;
        cand[strlen(cand) - strlen("/m0serve/_boot.py")] = '\0';
        char *real = realpath(cand, NULL);
        const char *found = real != NULL ? real : cand;
        size_t fl = strlen(found);
        if (fl >= cap)
            fl = cap - 1;
        memcpy(out, found, fl);
        out[fl] = '\0';
        free(real);
        return;
    }
    snprintf(out, cap, "%s", M0_PYTHONDIR);
}

static int check(PyStatus st, PyConfig *config)
{
    if (!PyStatus_Exception(st))
        return M0_OK;
    m0_error("python: %s%s%s", st.func ? st.func : "", st.func ? ": " : "",
             st.err_msg ? st.err_msg : "initialisation failed");
    if (config != NULL)
        PyConfig_Clear(config);
    return M0_ERR;
}

int m0_py_init(const struct m0_config *cfg)
{
    PyPreConfig pre;
    PyConfig config;

    if (PyImport_AppendInittab("m0", init_m0_module) == -1 ||
        PyImport_AppendInittab("_m0asgi", (PyObject * (*)(void)) m0_asgi_module_init) == -1) {
        m0_error("python: cannot register the m0 module");
        return M0_ERR;
    }
    PyPreConfig_InitPythonConfig(&pre);
    if (check(Py_PreInitialize(&pre), NULL) != M0_OK)
        return M0_ERR;

    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    config.parse_argv = 0;
    /* The program name decides where the standard library and a virtualenv
     * (pyvenv.cfg beside it) are found: use the interpreter we were built
     * against, or the active virtualenv's python, as gunicorn would run. */
    char prog[PATH_MAX + 32], venv[PATH_MAX];
    int from_env;
    if (find_venv(venv, sizeof venv, &from_env))
        snprintf(prog, sizeof prog, "%s/bin/python3", venv);
    else
        snprintf(prog, sizeof prog, "%s", M0_PYTHON_EXE);
    if (check(PyConfig_SetBytesString(&config, &config.program_name, prog), &config) != M0_OK)
        return M0_ERR;
    /* sys.argv[1] names the root application (or the first mount). */
    const char *first = cfg->app != NULL ? cfg->app : cfg->nmounts > 0 ? cfg->mounts[0].spec : "";
    char *argv0[] = {(char *)"m0serve", (char *)first};
    if (check(PyConfig_SetBytesArgv(&config, 2, argv0), &config) != M0_OK)
        return M0_ERR;
    if (check(Py_InitializeFromConfig(&config), &config) != M0_OK)
        return M0_ERR;
    PyConfig_Clear(&config);

    /* sys.path: the app directory first (as gunicorn's --chdir/cwd), our
     * own package last so it can never shadow the application's modules. */
    int rc = M0_ERR;
    char appdir[PATH_MAX], pydir[PATH_MAX];
    if (realpath(cfg->app_dir, appdir) == NULL) {
        m0_log_errno("--app-dir %s", cfg->app_dir);
        goto out;
    }
    python_dir(pydir, sizeof pydir);
    PyObject *path = PySys_GetObject("path");    /* borrowed */
    PyObject *a = PyUnicode_DecodeFSDefault(appdir);
    PyObject *p = PyUnicode_DecodeFSDefault(pydir);
    if (path == NULL || a == NULL || p == NULL || PyList_Insert(path, 0, a) == -1 ||
        PyList_Append(path, p) == -1) {
        m0_py_print_exception();
        Py_XDECREF(a);
        Py_XDECREF(p);
        goto out;
    }
    Py_DECREF(a);
    Py_DECREF(p);
    rc = M0_OK;
out:
    main_tstate = PyEval_SaveThread();
    return rc;
}

/* The worker leaves with _exit on boot failure: flush Python's own
 * sys.stderr/sys.stdout buffers first so the traceback is not lost. */
static void flush_std(void)
{
    static const char *const names[] = {"stderr", "stdout"};
    for (size_t i = 0; i < M0_ARRAY_LEN(names); i++) {
        PyObject *f = PySys_GetObject(names[i]);   /* borrowed */
        if (f != NULL && f != Py_None) {
            PyObject *r = PyObject_CallMethod(f, "flush", NULL);
            Py_XDECREF(r);
        }
        PyErr_Clear();
    }
}

/* A forked child must not keep the server's descriptors (the listener
 * above all): os.register_at_fork(after_in_child=m0._after_fork_child). */
static int register_fork_hook(void)
{
    PyObject *os = PyImport_ImportModule("os"), *m0 = PyImport_ImportModule("m0");
    PyObject *hook = m0 ? PyObject_GetAttrString(m0, "_after_fork_child") : NULL;
    PyObject *reg = os ? PyObject_GetAttrString(os, "register_at_fork") : NULL;
    PyObject *kw = hook ? Py_BuildValue("{s:O}", "after_in_child", hook) : NULL;
    PyObject *args = PyTuple_New(0);
    PyObject *r = (reg && kw && args) ? PyObject_Call(reg, args, kw) : NULL;
    int rc = r != NULL ? M0_OK : M0_ERR;
    Py_XDECREF(r);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_XDECREF(reg);
    Py_XDECREF(hook);
    Py_XDECREF(m0);
    Py_XDECREF(os);
    return rc;
}

/* Print why spec could not be loaded: one line for "nothing found"
 * (m0serve._boot.LoadError), the traceback for an error inside the app. */
static void report_load_error(PyObject *boot, const char *where, const char *spec)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *load_error = PyObject_GetAttrString(boot, "LoadError");
    PyErr_Clear();
    if (load_error != NULL && value != NULL && PyObject_IsInstance(value, load_error) == 1) {
        PyObject *msg = PyObject_Str(value);
        m0_error("cannot load the application%s: %s", where, msg ? PyUnicode_AsUTF8(msg) : "?");
        PyErr_Clear();
        Py_XDECREF(msg);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    } else {
        m0_error("cannot load the application %s%s; traceback follows", spec, where);
        PyErr_Restore(type, value, tb);
        m0_py_print_exception();
    }
    Py_XDECREF(load_error);
    flush_std();
}

/* Give t (its kind detected) its runner. This is the one place a
 * protocol picks its mode: WSGI runs on the handler pool (assigned when the
 * pool starts, m0_serve_start_pools; inline without one), ASGI on its own
 * asyncio executor, started by the runner's setup. */
static void bind_runner(struct m0_target *t, const struct m0_config *cfg)
{
    t->runner = t->kind == M0_TARGET_ASGI ? &m0_asgi_runner : &m0_wsgi_runner;
    t->realtime = cfg->realtime;
}

/* Load one application mount into the target table. Attached. */
static int load_mount(PyObject *boot, const struct m0_config *cfg, const struct m0_mount *m)
{
    static const char *const protos[] = {"auto", "wsgi", "asgi"};
    char where[600] = "";
    if (m->prefix_len != 0)
        snprintf(where, sizeof where, " (mount %s)", m->prefix);
    /* --app-dir as sys.path has it, for the message when nothing is found. */
    char appdir[PATH_MAX];
    if (realpath(cfg->app_dir, appdir) == NULL)
        snprintf(appdir, sizeof appdir, "%s", cfg->app_dir);
    PyObject *res = PyObject_CallMethod(boot, "load", "sss", m->spec, protos[cfg->protocol], appdir);
    if (res == NULL) {
        report_load_error(boot, where, m->spec);
        return M0_ERR;
    }
    int rc = M0_ERR;
    PyObject *app = NULL;
    const char *kind = NULL, *found = NULL;
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 3 || (app = PyTuple_GET_ITEM(res, 0)) == NULL ||
        (kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(res, 1))) == NULL ||
        (found = PyUnicode_AsUTF8(PyTuple_GET_ITEM(res, 2))) == NULL) {
        m0_py_print_exception();
        flush_std();
        goto out;
    }
    struct m0_target *t = m0_targets_next(&m0_targets, m->prefix, m->prefix_len,
                                          strcmp(kind, "asgi") == 0 ? M0_TARGET_ASGI : M0_TARGET_WSGI);
    if (t == NULL) {
        m0_error("mount %s: the mount table is full", m->prefix);
        goto out;
    }
    t->spec = m->spec;
    t->resolved = strdup(found);        /* lives as long as the table */
    if (t->resolved == NULL)
        goto out;
    bind_runner(t, cfg);
    Py_INCREF(app);
    t->app = app;
    if (t->runner->setup(t, cfg) != M0_OK) {
        if (PyErr_Occurred()) {
            m0_error("cannot start the application %s%s; traceback follows", found, where);
            m0_py_print_exception();
        }   /* else the runner said why (a lifespan startup failure) */
        flush_std();
        Py_CLEAR(t->app);
        goto out;
    }
    m0_targets_commit(&m0_targets);
    rc = M0_OK;
out:
    Py_DECREF(res);
    return rc;
}

int m0_py_load_apps(const struct m0_config *cfg)
{
    int rc = M0_ERR;
    PyObject *boot = NULL;

    m0_py_attach();
    if (register_fork_hook() != M0_OK) {
        m0_py_print_exception();
        goto out;
    }
    boot = PyImport_ImportModule("m0serve._boot");
    if (boot == NULL) {
        m0_py_print_exception();
        goto out;
    }
    int wsgi = 0, apps = 0;
    for (unsigned i = 0; i < cfg->nmounts; i++) {
        if (cfg->mounts[i].kind != M0_MOUNT_APP)
            continue;
        if (load_mount(boot, cfg, &cfg->mounts[i]) != M0_OK)
            goto out;
        apps++;
    }
    for (unsigned i = 0; i < m0_targets.n; i++)
        wsgi |= m0_targets.t[i].kind == M0_TARGET_WSGI;
    if (apps > 0 && !wsgi && cfg->threads_explicit && cfg->blocking_threads > 0) {
        m0_error("%s: ASGI applications run on their asyncio executor; --blocking-threads applies to "
                 "WSGI applications only (drop the flag, or name the WSGI callable, e.g. mysite.wsgi "
                 "for a Django project, to run it on the pool)", cfg->app != NULL ? cfg->app : "every mount");
        goto out;
    }
    rc = M0_OK;
out:
    Py_XDECREF(boot);
    m0_py_detach();
    return rc;
}

void m0_py_attach(void)
{
    if (main_tstate == NULL) {
        m0_error("BUG: m0_py_attach while attached");
        abort();
    }
    PyEval_RestoreThread(main_tstate);
    main_tstate = NULL;
}

void m0_py_detach(void)
{
    if (main_tstate != NULL) {
        m0_error("BUG: m0_py_detach while detached");
        abort();
    }
    main_tstate = PyEval_SaveThread();
}

void *m0_py_thread_new(void)
{
    PyThreadState *ts = PyThreadState_New(PyInterpreterState_Main());
    if (ts == NULL) {
        m0_error("python: cannot create a thread state");
        abort();
    }
    return ts;
}

void m0_py_thread_attach(void *ts)
{
    PyEval_RestoreThread(ts);
}

void m0_py_thread_detach(void *ts)
{
    PyThreadState *saved = PyEval_SaveThread();
    if (saved != ts) {
        m0_error("BUG: detached a thread state that was not attached here");
        abort();
    }
}

void m0_py_thread_free(void *ts)
{
    PyEval_RestoreThread(ts);
    PyThreadState_Clear(ts);
    PyThreadState_DeleteCurrent();
}

void m0_py_finalize(void)
{
    m0_py_attach();
    for (unsigned i = 0; i < m0_targets.n; i++)
        Py_CLEAR(m0_targets.t[i].app);
    m0_targets.n = 0;
    if (Py_FinalizeEx() < 0)
        m0_warn("python: errors while finalizing");
}

const char *m0_py_version(void)
{
    return PY_VERSION;
}

int m0_py_gil_enabled(void)
{
#ifdef Py_GIL_DISABLED
    return 0;
#else
    return 1;
#endif
}
