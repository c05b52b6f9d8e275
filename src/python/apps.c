/*
 * apps.c — the application loader, above the runners: registers the
 * built-in modules the runners need ("m0", "_m0asgi") before the
 * interpreter starts, imports every application mount (m0serve._boot.load:
 * discovery and protocol detection), binds each target to its runner and
 * sets it up (an ASGI mount starts its executor and lifespan), starts the
 * handler pool for the WSGI targets, and at the end runs every runner's
 * teardown and drops the applications.
 *
 * The target table it fills (target.h) is per process and read-only once
 * the worker serves.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/apps.h"
#include "m0/asgi.h"
#include "m0/config.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/pool.h"
#include "m0/pyrt.h"
#include "m0/runner.h"
#include "m0/target.h"
#include "m0/wsgi.h"

static PyObject *init_m0_module(void)
{
    return m0_module_init();
}

int m0_apps_register_modules(void)
{
    if (PyImport_AppendInittab("m0", init_m0_module) == -1 ||
        PyImport_AppendInittab("_m0asgi", (PyObject * (*)(void)) m0_asgi_module_init) == -1) {
        m0_error("python: cannot register the m0 module");
        return M0_ERR;
    }
    return M0_OK;
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
    m0_py_flush_std();
}

/* Give t (its kind detected) its runner. This is the one place a
 * protocol picks its mode: WSGI runs on the handler pool (assigned when the
 * pool starts, m0_apps_start_pool; inline without one), ASGI on its own
 * asyncio executor, started by the runner's setup. */
static void bind_runner(struct m0_target *t, const struct m0_config *cfg)
{
    t->runner = t->kind == M0_TARGET_ASGI ? &m0_asgi_runner : &m0_wsgi_runner;
    t->realtime = cfg->realtime;
    t->grip_key = cfg->grip_key;
    t->grip_key_len = cfg->grip_key_len;
}

/* Load one application mount into the target table. Attached. */
static int load_mount(PyObject *boot, const struct m0_config *cfg, const struct m0_runner_env *const *envs,
                      unsigned nenvs, const struct m0_mount *m)
{
    static const char *const protos[] = {"auto", "wsgi", "asgi"};
    char where[600] = "";
    if (m->prefix_len != 0)
        snprintf(where, sizeof where, " (mount %s)", m->prefix);
    /* --app-dir as sys.path has it, for the message when nothing is found. */
    char appdir[PATH_MAX];
    if (realpath(cfg->app_dir, appdir) == NULL)
        snprintf(appdir, sizeof appdir, "%s", cfg->app_dir);
    PyObject *res = PyObject_CallMethod(boot, "load", "sssi", m->spec, protos[cfg->protocol], appdir, cfg->factory);
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
        m0_py_flush_std();
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
    for (unsigned i = 0; i < nenvs; i++) {
        if (t->runner->setup(t, cfg, envs[i]) != M0_OK) {
            if (PyErr_Occurred()) {
                m0_error("cannot start the application %s%s; traceback follows", found, where);
                m0_py_print_exception();
            }   /* else the runner said why (a lifespan startup failure) */
            m0_py_flush_std();
            Py_CLEAR(t->app);
            goto out;
        }
    }
    m0_targets_commit(&m0_targets);
    rc = M0_OK;
out:
    Py_DECREF(res);
    return rc;
}

int m0_apps_load(const struct m0_config *cfg, const struct m0_runner_env *const *envs, unsigned nenvs)
{
    int rc = M0_ERR;
    PyObject *boot = NULL;

    m0_module_grant_keys(cfg->grant_keys, cfg->grant_sign);    /* before any import: an app may mint at import */
    m0_py_attach();
    m0_py_note_gil("GIL enabled at startup, by PYTHON_GIL=1, -X gil=1 or a module that site imported");
    if (register_fork_hook() != M0_OK) {
        m0_py_print_exception();
        goto out;
    }
    m0_py_note_gil("GIL enabled by registering the fork hook (importing 'os' or m0serve's module 'm0')");
    boot = PyImport_ImportModule("m0serve._boot");
    if (boot == NULL) {
        m0_py_print_exception();
        goto out;
    }
    int wsgi = 0, apps = 0;
    for (unsigned i = 0; i < cfg->nmounts; i++) {
        if (cfg->mounts[i].kind != M0_MOUNT_APP)
            continue;
        if (load_mount(boot, cfg, envs, nenvs, &cfg->mounts[i]) != M0_OK)
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
    m0_py_note_gil("GIL enabled while loading the applications, by an extension module that does not declare "
                   "that it runs without the GIL (CPython's RuntimeWarning names it)");
    rc = M0_OK;
out:
    Py_XDECREF(boot);
    m0_py_detach();
    return rc;
}


void m0_apps_unload(void)
{
    m0_py_attach();
    for (unsigned i = 0; i < m0_targets.n; i++)
        Py_CLEAR(m0_targets.t[i].app);
    m0_targets.n = 0;
    m0_py_detach();
}

int m0_apps_start_pool(const struct m0_config *cfg, const struct m0_runner_env *env, struct m0_pool **out)
{
    int wsgi = 0;
    *out = NULL;
    for (unsigned i = 0; i < m0_targets.n; i++)
        wsgi |= m0_targets.t[i].runner != NULL && m0_targets.t[i].runner->start != NULL;
    if (wsgi && cfg->blocking_threads > 0) {
        char err[256];
        unsigned min = (unsigned)cfg->blocking_threads;
        unsigned max = cfg->threads_explicit ? min : (unsigned)cfg->blocking_threads_max;
        *out = m0_pool_start(env, min, max, (uint64_t)(cfg->blocking_threads_idle * 1000), err, sizeof err);
        if (*out == NULL) {
            m0_error("%s", err);
            return M0_ERR;
        }
    }
    for (unsigned i = 0; i < m0_targets.n; i++) {
        if (m0_targets.t[i].runner != NULL && m0_targets.t[i].runner->start != NULL)
            m0_targets.t[i].on_pool = *out != NULL;    /* the same for every loop */
    }
    return M0_OK;
}

void m0_apps_grant_sign(unsigned index)
{
    m0_module_grant_sign(index);
}

void m0_apps_teardown(void)
{
    for (unsigned i = 0; i < m0_targets.n; i++) {
        struct m0_target *t = &m0_targets.t[i];
        if (t->runner != NULL && t->runner->teardown != NULL) {
            m0_py_attach();
            t->runner->teardown(t);
            m0_py_detach();
        }
    }
}
