/*
 * m0mod.c — the built-in "m0" module the embedded interpreter imports:
 * wsgi.errors' object, the FileWrapper type, publish() (what m0pub.publish
 * calls) and the hook that cleans a process forked by a view.
 */
#include "m0/wsgi.h"

#include <stdatomic.h>

#include "m0/broker_pub.h"
#include "m0/bus.h"
#include "m0/log.h"
#include "m0/metrics.h"
#include "m0/reload.h"
#include "m0/fork.h"
#include "m0/grant.h"
#include "m0/pyrt.h"

/* The worker's grant keys (m0_module_grant_keys): per process, read-only
 * once the applications load; and the index of the one that signs, which
 * the master's 'K' moves (m0_module_grant_sign) while views read it on
 * any thread. */
static const struct m0_grant_keys *grant_keys;
static atomic_uint grant_signer;

void m0_module_grant_keys(const struct m0_grant_keys *k, unsigned sign)
{
    grant_keys = k;
    atomic_store(&grant_signer, sign);
}

void m0_module_grant_sign(unsigned index)
{
    if (grant_keys == NULL || index >= m0_grant_keys_jwt(grant_keys)->n ||
        atomic_exchange(&grant_signer, index) == index)
        return;
    m0_info("worker signs grants with key %s from now on",
            m0_grant_keys_jwt(grant_keys)->v[index].kid);
}

/* This process's metrics block (metrics.h), for any thread; NULL: none. */
static struct m0_mx_block *mx_block(void)
{
    return m0_metrics_block();
}

/* Count one publish's outcome (rc M0_OK: it published): the metrics and
 * /health's events_published. */
static void counted(int rc)
{
    m0_metrics_publish(mx_block(), rc == M0_OK);
}

static PyObject *py_publish(PyObject *self, PyObject *args)
{
    (void)self;
    const char *channel, *event, *data, *key = NULL;
    Py_ssize_t clen, dlen, klen = 0;
    if (!PyArg_ParseTuple(args, "y#zy#|z#:publish", &channel, &clen, &event, &data, &dlen, &key, &klen))
        return NULL;
    uint64_t id;
    int rc;
    if (m0_broker != NULL) {
        /* --broker: one round trip to Redis on this thread (broker.h); a
         * broker that cannot be reached raises, never drops silently. */
        char err[512];
        Py_BEGIN_ALLOW_THREADS
        rc = m0_broker_publish(channel, (size_t)clen, event, data, (size_t)dlen, key, (size_t)klen, &id, err,
                               sizeof err);
        Py_END_ALLOW_THREADS
        counted(rc);
        if (rc != M0_OK) {
            /* TimeoutError: sent, no answer (m0pub: PublishOutcomeUnknown). */
            PyErr_Format(rc == M0_BROKER_UNKNOWN ? PyExc_TimeoutError : PyExc_ConnectionError, "m0 publish: %s", err);
            return NULL;
        }
        return PyLong_FromUnsignedLongLong(id);
    }
    Py_BEGIN_ALLOW_THREADS
    rc = m0_bus_publish(channel, (size_t)clen, event, data, (size_t)dlen, &id);
    Py_END_ALLOW_THREADS
    if (rc != M0_AGAIN)       /* M0_AGAIN: no bus, nothing published */
        counted(rc);
    if (rc == M0_AGAIN)
        Py_RETURN_NONE;
    if (rc != M0_OK) {
        PyErr_SetString(PyExc_ValueError, "invalid channel or event too large for the bus");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(id);
}

static PyObject *py_enabled(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(m0_bus_current != NULL || m0_broker != NULL);
}

static PyObject *py_brokered(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(m0_broker != NULL);
}

static PyObject *py_after_fork_child(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    m0_fork_after_child();
    Py_RETURN_NONE;
}

static PyObject *py_watch(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes))
        return NULL;
    int rc = m0_reload_watch(PyBytes_AS_STRING(bytes));
    if (rc != M0_OK) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, arg);
        Py_DECREF(bytes);
        return NULL;
    }
    Py_DECREF(bytes);
    Py_RETURN_NONE;
}

static PyObject *py_loop_index(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLong(m0_py_loop());
}

/* _grant_keys(): [(kid, secret bytes)] in the key file's order, the keys
 * this worker verifies grants with; None without --grant-key-file. */
static PyObject *py_grant_keys(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (grant_keys == NULL)
        Py_RETURN_NONE;
    const struct m0_jwt_keys *set = m0_grant_keys_jwt(grant_keys);
    PyObject *list = PyList_New((Py_ssize_t)set->n);
    for (size_t i = 0; list != NULL && i < set->n; i++) {
        PyObject *pair = Py_BuildValue("(sy#)", set->v[i].kid, (const char *)set->v[i].secret,
                                       (Py_ssize_t)set->v[i].len);
        if (pair == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, pair);
    }
    return list;
}

/* _grant_signer(): the kid grants are signed with now (control.h 'K'),
 * None without --grant-key-file. */
static PyObject *py_grant_signer(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (grant_keys == NULL)
        Py_RETURN_NONE;
    const struct m0_jwt_keys *set = m0_grant_keys_jwt(grant_keys);
    unsigned i = atomic_load(&grant_signer);
    return PyUnicode_FromString(set->v[i < set->n ? i : set->n - 1].kid);
}

static PyMethodDef m0_functions[] = {
    {"loop_index", py_loop_index, METH_NOARGS,
     "loop_index() -> int: which of the worker's event loops (--threads N: 0..N-1) the calling "
     "thread serves: a view's loop on its handler, loop or executor thread; 0 elsewhere."},
    {"_watch", py_watch, METH_O,
     "_watch(directory): --reload watches directory for changed Python files (inotify); "
     "OSError when it cannot (or without --reload)."},
    {"publish", py_publish, METH_VARARGS,
     "publish(channel: bytes, event: str | None, data: bytes, key: str | None = None) -> int | None: "
     "frame one SSE event "
     "and write it to every worker's bus; returns its global id, None without --realtime. Blocks "
     "for at most about a millisecond (never waits for a full bus: that worker misses the event "
     "and tells its streams). With --broker the event goes through Redis instead (one round trip, "
     "at most about 3 s when the broker is down), ConnectionError is raised when it was not "
     "published and TimeoutError when it was sent but not answered (it may have been published); "
     "a key (broker only) makes a retry return the first id. m0pub.publish is the documented API."},
    {"enabled", py_enabled, METH_NOARGS,
     "enabled() -> bool: publish() reaches held streams (the server runs with --realtime or --broker)."},
    {"_brokered", py_brokered, METH_NOARGS,
     "_brokered() -> bool: publish() goes through the broker (--broker), one network round trip."},
    {"_grant_keys", py_grant_keys, METH_NOARGS,
     "_grant_keys() -> list[tuple[str, bytes]] | None: the (kid, secret) pairs this worker verifies grants "
     "with (--grant-key-file as it was when the worker started); None without it. m0pub.grant signs with "
     "the one _grant_signer() names."},
    {"_grant_signer", py_grant_signer, METH_NOARGS,
     "_grant_signer() -> str | None: the kid of the key grants are signed with now: the newest of "
     "_grant_keys() that every live worker of the server verifies (during a rotation, an older one until "
     "the workers that lack the newest have exited); None without --grant-key-file."},
    {"_after_fork_child", py_after_fork_child, METH_NOARGS,
     "_after_fork_child(): close the server's descriptors in a process forked by a view "
     "(registered with os.register_at_fork)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef m0_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "m0",
    .m_doc = "m0serve's built-in module: wsgi.errors, the file wrapper type and the bus publisher.",
    .m_size = -1,
    .m_methods = m0_functions,
};

PyObject *m0_module_init(void)
{
    if (m0_wsgi_io_ready() == -1)
        return NULL;
    PyObject *m = PyModule_Create(&m0_module);
    if (m == NULL || m0_py_module_nogil(m) != 0) {
        Py_XDECREF(m);
        return NULL;
    }
    /* AddObjectRef, never AddObject: errors stays ours whether it was added
     * or not, so one release fits every path (AddObject steals only on
     * success — the next failure would have released it a second time). */
    PyObject *errors = PyObject_CallNoArgs((PyObject *)&m0_ErrorsType);
    int bad = errors == NULL || PyModule_AddObjectRef(m, "errors", errors) == -1 ||
              PyModule_AddObjectRef(m, "FileWrapper", (PyObject *)&m0_FileWrapperType) == -1;
    Py_XDECREF(errors);
    if (bad) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
