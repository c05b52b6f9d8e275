/*
 * pyrt.c — the Python runtime: one interpreter per worker, the thread
 * states of the threads that run Python, attach/detach, printing an
 * exception, finalizing. Below everything that runs Python (the pool, the
 * runners, the application loader apps.c), above nothing but core.
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

#include "m0/config.h"
#include "m0/log.h"
#include "m0/pyrt.h"

/* The calling thread's own Python thread state while it is detached (NULL
 * while attached): per thread, as the GIL is held per thread — the loop
 * thread's since m0_py_init. */
static __thread PyThreadState *main_tstate;

#define M0_STR_(x) #x
#define M0_STR(x) M0_STR_(x)
/* A free-threaded build's own directories carry a "t": lib/python3.13t
 * (sysconfig's abi_thread). */
#ifdef Py_GIL_DISABLED
#define M0_ABI_THREAD "t"
#else
#define M0_ABI_THREAD ""
#endif

/* On a free-threaded build, where the GIL stands once the applications are
 * loaded (m0_py_gil_state); set through m0_py_note_gil by the loader
 * (apps.c). Per process, written at boot only. */
static const char *gil_state = NULL;

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

/* The standard library CPython's getpath would find from bindir (the
 * directory of its executable, or a virtualenv's "home"): lib/pythonX.Y[t]
 * holding os.py or os.pyc in bindir or the nearest directory above it,
 * symlinks resolved (Debian's /lib/python3.11 is /usr/lib/python3.11), in
 * out. 0 when none is found (Python falls back to the prefix it was built
 * with). */
static int stdlib_dir(const char *bindir, char *out, size_t cap)
{
#define M0_STDLIB "/lib/python" M0_STR(PY_MAJOR_VERSION) "." M0_STR(PY_MINOR_VERSION) M0_ABI_THREAD
    static const char *const landmarks[] = {M0_STDLIB "/os.py", M0_STDLIB "/os.pyc"};
    char dir[PATH_MAX], cand[PATH_MAX + 64];
    if (bindir[0] != '/' || strlen(bindir) >= sizeof dir)
        return 0;
    snprintf(dir, sizeof dir, "%s", bindir);
    for (;;) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            dir[--n] = '\0';
        for (size_t i = 0; i < M0_ARRAY_LEN(landmarks); i++) {
            snprintf(cand, sizeof cand, "%s%s", n == 1 ? "" : dir, landmarks[i]);
            if (access(cand, F_OK) == 0) {
                snprintf(cand, sizeof cand, "%s" M0_STDLIB, n == 1 ? "" : dir);
                char *real = realpath(cand, NULL);
                int ok = real != NULL && strlen(real) < cap;
                if (ok)
                    snprintf(out, cap, "%s", real);
                free(real);
                return ok;
            }
        }
        char *slash = strrchr(dir, '/');
        if (slash == NULL || n == 1)
            return 0;
        slash[slash == dir] = '\0';       /* "/usr/bin" -> "/usr", "/usr" -> "/" */
    }
#undef M0_STDLIB
}

/* A virtualenv's base interpreter must be the one this binary embeds: its
 * "home" leads CPython to a standard library (and lib-dynload of compiled
 * modules) of its own, so a venv of the same version made from another
 * build (pyenv's, /usr/local's) runs this libpython on that build's files
 * and fails on the first compiled module ("No module named '_socket'").
 * The same standard library: M0_OK. venv is its directory, home and exe
 * what its pyvenv.cfg says ("" if absent). */
static int check_base(const char *who, const char *venv, const char *home, const char *exe, char *err, size_t cap)
{
    char ours[PATH_MAX], theirs[PATH_MAX], bindir[PATH_MAX];
    char *real = realpath(M0_PYTHON_EXE, NULL);
    snprintf(bindir, sizeof bindir, "%s", real != NULL ? real : M0_PYTHON_EXE);
    free(real);
    char *slash = strrchr(bindir, '/');
    if (slash != NULL)
        *slash = '\0';
    if (home[0] == '\0' || !stdlib_dir(bindir, ours, sizeof ours) || !stdlib_dir(home, theirs, sizeof theirs) ||
        strcmp(ours, theirs) == 0)
        return M0_OK;           /* the same, or unknown: let Python judge */
    snprintf(err, cap,
             "m0serve: error: %s%s was made from another Python of the same version (%s, its library %s), "
             "but this m0serve embeds %s (%s): install m0serve into that virtualenv (pip install), or use one "
             "made from %s",
             who, venv, exe[0] != '\0' ? exe : home, theirs, M0_PYTHON_EXE, ours, M0_PYTHON_EXE);
    return M0_ERR;
}

/* pyvenv.cfg's value for key (a "key = value" line) into out; "" if none. */
static void cfg_value(const char *line, const char *key, char *out, size_t cap)
{
    size_t k = strlen(key);
    while (*line == ' ' || *line == '\t')
        line++;
    if (strncmp(line, key, k) != 0)
        return;
    line += k;
    while (*line == ' ' || *line == '\t')
        line++;
    if (*line++ != '=')
        return;
    while (*line == ' ' || *line == '\t')
        line++;
    size_t n = strcspn(line, "\r\n");
    while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t'))
        n--;
    if (n < cap) {
        memcpy(out, line, n);
        out[n] = '\0';
    }
}

int m0_py_check_env(char *err, size_t cap)
{
    char venv[PATH_MAX], path[PATH_MAX + 32], line[512], home[PATH_MAX] = "", exe[PATH_MAX] = "";
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
        if (major == -1 && sscanf(line, " %31[a-z_] = %d.%d", key, &a, &b) == 3 &&
            (strcmp(key, "version") == 0 || strcmp(key, "version_info") == 0)) {
            major = a;
            minor = b;
        }
        /* "home = /usr/bin" (all of them); the interpreter it was made
         * from: "executable" (venv, 3.11+), "base-executable" (virtualenv). */
        cfg_value(line, "home", home, sizeof home);
        cfg_value(line, "executable", exe, sizeof exe);
        cfg_value(line, "base-executable", exe, sizeof exe);
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
    /* Same version, other ABI: a venv of 3.13 (lib/python3.13) under a
     * 3.13t libpython (which looks in lib/python3.13t) would run without
     * its packages. Judged only when the venv has the other one's lib. */
    char mine[PATH_MAX + 64], other[PATH_MAX + 64];
    const char *ours = m0_py_free_threaded() ? "t" : "", *theirs = m0_py_free_threaded() ? "" : "t";
    snprintf(mine, sizeof mine, "%s/lib/python%d.%d%s", venv, major, minor, ours);
    snprintf(other, sizeof other, "%s/lib/python%d.%d%s", venv, major, minor, theirs);
    if (access(mine, F_OK) != 0 && access(other, F_OK) == 0) {
        snprintf(err, cap,
                 "m0serve: error: %s%s is a virtualenv of a Python %d.%d %s, but this m0serve was built for "
                 "a %s one (%s): install m0serve into that virtualenv (pip install), or use one made from %s",
                 who, venv, major, minor, m0_py_free_threaded() ? "with the GIL" : "free-threaded build",
                 m0_py_free_threaded() ? "free-threaded" : "GIL", M0_PYTHON_EXE, M0_PYTHON_EXE);
        return M0_ERR;
    }
    return check_base(who, venv, home, exe, err, cap);
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
        "/../lib/python" M0_STR(PY_MAJOR_VERSION) "." M0_STR(PY_MINOR_VERSION) M0_ABI_THREAD "/site-packages",
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

void m0_py_flush_std(void)
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

#ifdef Py_GIL_DISABLED
/* sys._is_gil_enabled() (3.13+): 1 on, 0 off, -1 unknown (error cleared).
 * Called attached. */
static int gil_on(void)
{
    PyObject *f = PySys_GetObject("_is_gil_enabled");   /* borrowed */
    PyObject *r = f != NULL ? PyObject_CallNoArgs(f) : NULL;
    int on = r != NULL ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    if (on < 0)
        PyErr_Clear();
    return on;
}
#endif

/* A free-threaded CPython turns the GIL back on when it imports an
 * extension module that does not declare Py_mod_gil (with a RuntimeWarning
 * naming it), unless PYTHON_GIL=0 / -X gil=0. Looked at after each step of
 * the boot: the first step that found it on is named. Attached. */
static const char gil_off[] = "GIL disabled";
void m0_py_note_gil(const char *cause)
{
#ifdef Py_GIL_DISABLED
    if (gil_state != NULL && gil_state != gil_off)
        return;
    int on = gil_on();
    gil_state = on == 0 ? gil_off : on < 0 ? "GIL state unknown" : cause;
#else
    (void)cause;
    (void)gil_off;
#endif
}

int m0_py_module_nogil(void *m)
{
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030D0000
    return PyUnstable_Module_SetGIL((PyObject *)m, Py_MOD_GIL_NOT_USED);
#else
    (void)m;
    return 0;
#endif
}

const char *m0_py_gil_state(void)
{
    return gil_state;
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

static __thread unsigned current_loop;

void m0_py_set_loop(unsigned loop_index)
{
    current_loop = loop_index;
}

unsigned m0_py_loop(void)
{
    return current_loop;
}

void m0_py_adopt_thread(void)
{
    main_tstate = m0_py_thread_new();
}

void m0_py_release_thread(void)
{
    if (main_tstate != NULL)
        m0_py_thread_free(main_tstate);
    main_tstate = NULL;
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
    if (Py_FinalizeEx() < 0)
        m0_warn("python: errors while finalizing");
}

const char *m0_py_version(void)
{
    return PY_VERSION;
}

int m0_py_free_threaded(void)
{
#ifdef Py_GIL_DISABLED
    return 1;
#else
    return 0;
#endif
}
