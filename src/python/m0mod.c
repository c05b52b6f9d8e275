/*
 * m0mod.c — the built-in "m0" module the embedded interpreter imports:
 * wsgi.errors' object, the FileWrapper type, publish() (what m0pub.publish
 * calls) and the hook that cleans a process forked by a view.
 */
#include "m0/wsgi.h"

#include <stdatomic.h>

#include "m0/broker_pub.h"
#include "m0/broker_url.h"
#include "m0/bus.h"
#include "m0/log.h"
#include "m0/metrics.h"
#include "m0/reload.h"
#include "m0/fork.h"
#include "m0/grant.h"
#include "m0/presence.h"
#include "m0/pyrt.h"
#include "m0/rt.h"

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


/* ------------------------------------------ occupancy, presence, history */

/* _presence_info(channel: bytes) -> (int, int) | None: held connections on
 * the channel over every worker of this host, and the newest event id the
 * loops holding it noted (0: none) — both from the shared table
 * (presence.h), no loop asked; None without it. */
static PyObject *py_presence_info(PyObject *self, PyObject *args)
{
    (void)self;
    const char *ch;
    Py_ssize_t cl;
    if (!PyArg_ParseTuple(args, "y#:_presence_info", &ch, &cl))
        return NULL;
    if (m0_presence_current == NULL)
        Py_RETURN_NONE;
    uint64_t n, last;
    struct m0_presence_span all = {0, 0};
    Py_BEGIN_ALLOW_THREADS
    n = m0_presence_count(m0_presence_current, ch, (size_t)cl, all);
    last = n > 0 ? m0_presence_last_id(m0_presence_current, ch, (size_t)cl, all) : 0;
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(KK)", (unsigned long long)n, (unsigned long long)last);
}

static void gather_sub(void *ctx, const char *sub, size_t slen, uint64_t count)
{
    struct m0_buf *b = ctx;
    unsigned char h[9];
    h[0] = (unsigned char)slen;
    for (int i = 0; i < 8; i++)
        h[1 + i] = (unsigned char)(count >> (8 * i));
    m0_buf_append(b, h, sizeof h);
    m0_buf_append(b, sub, slen);
}

/* A sub as the server kept its bytes: UTF-8 (a grant's), else latin-1 (an
 * M0-Presence a WSGI view set, latin-1 by PEP 3333). */
static PyObject *sub_text(const char *p, size_t n)
{
    PyObject *u = PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, NULL);
    if (u == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        u = PyUnicode_DecodeLatin1(p, (Py_ssize_t)n, NULL);
    }
    return u;
}

/* _presence_list(channel: bytes, limit: int) -> dict[str, int] | None: up
 * to limit distinct subs held on the channel on this host, with their
 * connections. */
static PyObject *py_presence_list(PyObject *self, PyObject *args)
{
    (void)self;
    const char *ch;
    Py_ssize_t cl, limit;
    if (!PyArg_ParseTuple(args, "y#n:_presence_list", &ch, &cl, &limit))
        return NULL;
    if (m0_presence_current == NULL)
        Py_RETURN_NONE;
    struct m0_buf b = {0};
    struct m0_presence_span all = {0, 0};
    Py_BEGIN_ALLOW_THREADS
    m0_presence_list(m0_presence_current, ch, (size_t)cl, limit > 0 ? (size_t)limit : 0, all, gather_sub, &b);
    Py_END_ALLOW_THREADS
    PyObject *dict = PyDict_New();
    for (size_t at = 0; dict != NULL && at + 9 <= b.len;) {
        const unsigned char *h = (const unsigned char *)b.data + at;
        uint64_t count = 0;
        for (int i = 0; i < 8; i++)
            count |= (uint64_t)h[1 + i] << (8 * i);
        PyObject *k = sub_text((const char *)h + 9, h[0]), *v = PyLong_FromUnsignedLongLong(count);
        if (k == NULL || v == NULL || PyDict_SetItem(dict, k, v) != 0)
            Py_CLEAR(dict);
        Py_XDECREF(k);
        Py_XDECREF(v);
        at += 9 + h[0];
    }
    m0_buf_free(&b);
    return dict;
}

/* _history(channel: bytes, since: int, tail: bool, limit: int) ->
 * ([(id, frame bytes)], complete, last_id) | None: the calling thread's
 * loop's journal (rt.h, m0_rt_history); None when no loop reads events. */
static PyObject *py_history(PyObject *self, PyObject *args)
{
    (void)self;
    const char *ch;
    Py_ssize_t cl, limit;
    unsigned long long since;
    int tail;
    if (!PyArg_ParseTuple(args, "y#Kpn:_history", &ch, &cl, &since, &tail, &limit))
        return NULL;
    struct m0_rt_history h = {.since = since, .tail = tail, .limit = limit > 0 ? (size_t)limit : 0};
    int rc;
    unsigned loop = m0_py_loop();
    Py_BEGIN_ALLOW_THREADS
    rc = m0_rt_history(loop, ch, (size_t)cl, &h);
    Py_END_ALLOW_THREADS
    if (rc != M0_OK) {
        m0_buf_free(&h.events);
        Py_RETURN_NONE;
    }
    PyObject *list = PyList_New(0);
    for (size_t at = 0; list != NULL && at + 12 <= h.events.len;) {
        const unsigned char *p = (const unsigned char *)h.events.data + at;
        uint64_t id = 0;
        uint32_t n = 0;
        for (int i = 0; i < 8; i++)
            id |= (uint64_t)p[i] << (8 * i);
        for (int i = 0; i < 4; i++)
            n |= (uint32_t)p[8 + i] << (8 * i);
        PyObject *item = Py_BuildValue("(Ky#)", (unsigned long long)id, (const char *)p + 12, (Py_ssize_t)n);
        if (item == NULL || PyList_Append(list, item) != 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
        at += 12 + n;
    }
    m0_buf_free(&h.events);
    if (list == NULL)
        return NULL;
    return Py_BuildValue("(NOK)", list, h.complete ? Py_True : Py_False, (unsigned long long)h.last_id);
}

/* _presence_host() -> str | None: this host's id in the broker's presence
 * keys (parts are HOST.PID). */
static PyObject *py_presence_host(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (m0_presence_current == NULL)
        Py_RETURN_NONE;
    return PyUnicode_FromString(m0_presence_host(m0_presence_current));
}

/* _broker_settings() -> (cfg, prefix, retention, backlog, min_replicas,
 * ca_certs, certfile, keyfile) | None: the server's --broker, cfg the dict
 * m0pub.parse_broker_url makes of a URL (m0pub._read_settings builds the
 * settings M0_BROKER would give from it). */
static PyObject *py_broker_settings(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    const struct m0_broker_cfg *b = m0_broker;
    if (b == NULL)
        Py_RETURN_NONE;
    PyObject *hosts = PyList_New(0);
    for (int i = 0; hosts != NULL && !b->is_unix && i < b->nhosts; i++) {
        PyObject *h = Py_BuildValue("(si)", b->hosts[i].host, b->hosts[i].port);
        if (h == NULL || PyList_Append(hosts, h) != 0) {
            Py_XDECREF(h);
            Py_CLEAR(hosts);
            break;
        }
        Py_DECREF(h);
    }
    if (hosts == NULL)
        return NULL;
    PyObject *cfg = Py_BuildValue("{s:s,s:O,s:O,s:N,s:z,s:z,s:i,s:z,s:z,s:z,s:i,s:s}", "engine", b->engine, "tls",
                                  b->tls ? Py_True : Py_False, "sentinel", b->sentinel ? Py_True : Py_False, "hosts",
                                  hosts, "master", b->sentinel ? b->master : NULL, "host",
                                  b->is_unix ? NULL : b->host, "port", b->port, "path", b->is_unix ? b->path : NULL,
                                  "username", b->username[0] ? b->username : NULL, "password",
                                  b->password[0] ? b->password : NULL, "db", b->db, "shown", b->shown);
    if (cfg == NULL)
        return NULL;
    return Py_BuildValue("(Nsllizzz)", cfg, b->prefix, b->retention, b->backlog, b->min_replicas, b->ca_certs,
                         b->certfile, b->keyfile);
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
    {"_presence_info", py_presence_info, METH_VARARGS,
     "_presence_info(channel: bytes) -> tuple[int, int] | None: connections held on channel by every worker of "
     "this host, and the newest event id their loops noted on it (0: none), from the shared table "
     "(m0pub.channel_info adds the other hosts'); None without --realtime."},
    {"_presence_list", py_presence_list, METH_VARARGS,
     "_presence_list(channel: bytes, limit: int) -> dict[str, int] | None: up to limit distinct subs held on "
     "channel on this host (UTF-8, else latin-1), with their connections (m0pub.presence)."},
    {"_history", py_history, METH_VARARGS,
     "_history(channel: bytes, since: int, tail: bool, limit: int) -> tuple[list[tuple[int, bytes]], bool, int] "
     "| None: the calling thread's event loop's journal of channel (m0pub.history); None when no loop reads "
     "events."},
    {"_presence_host", py_presence_host, METH_NOARGS,
     "_presence_host() -> str | None: this host's id in the broker's presence keys."},
    {"_broker_settings", py_broker_settings, METH_NOARGS,
     "_broker_settings() -> tuple | None: the server's --broker (its parsed URL as m0pub.parse_broker_url "
     "gives, prefix, retention, backlog, min_replicas, TLS files) for m0pub's reads."},
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
