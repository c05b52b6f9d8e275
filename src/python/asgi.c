/*
 * asgi.c — the ASGI runner (m0_asgi_runner; ASGI 3.0, HTTP spec 2.4,
 * lifespan 2.0): a per-target executor thread running a persistent asyncio
 * loop (python/m0serve/_asgi.py), fed by the loop through a submit lane.
 *
 * The loop parks a request and submits (slot, gen) on the target's lane, as
 * it does for the handler pool; the executor's asyncio loop reads the lane
 * (add_reader) and turns each record into a task. Everything the task does
 * to its job goes through the functions of the built-in module `_m0asgi`
 * below, on the executor thread: the scope is built here, the body read
 * here, the head and body framed here by the body encoder and handed to the
 * loop through the job channel (m0_job_push: a PART completion, then DONE).
 * The C loop never takes the GIL; the executor never blocks: what it waits
 * for (credit, a lazy body, a disconnect) it polls for (m0_job_poll) and the
 * loop answers with a WAKE record on the same lane (m0_asgi_runner.wake).
 *
 * Framing follows the WSGI runner's rules: a response whose only body
 * message has more_body False, or that declares Content-Length, keeps a
 * length; a response sent in several body messages streams as they come
 * (chunked to HTTP/1.1, close-delimited to HTTP/1.0); an M0-Hold response is
 * held back whole and becomes a held stream, exactly as from WSGI. An
 * exception after the head aborts the connection (no chunked terminator);
 * before it, a 500.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "m0/asgi.h"
#include "m0/config.h"
#include "m0/fork.h"
#include "m0/grip.h"
#include "m0/grip_item.h"
#include "m0/job.h"
#include "m0/lane.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/percent.h"
#include "m0/pyrt.h"
#include "m0/runner.h"
#include "m0/sse.h"
#include "m0/target.h"
#include "m0/wsgi.h"

enum { REC_START = M0_RUN_START, REC_WAKE = 3 };

struct m0_exec {
    struct m0_lane lane;           /* loop → executor: START, WAKE, STOP */
    struct m0_lane_q q;            /* loop side: records the lane cannot take yet */
    struct m0_target *t;
    PyObject *py;                  /* the executor object (python/m0serve/_asgi.py) */
    PyObject *scope;               /* the scope template (type, asgi, scheme, root_path, server, extensions) */
    PyObject *state;               /* what lifespan startup put in scope["state"], or NULL */
    unsigned id;                   /* the target's index in the target table */
    const struct m0_runner_env *env;   /* the loop whose jobs it runs */
};

/* A job's key as the Python side knows it: the executor's id and the
 * slot. An executor's id is its loop (--threads) times M0_MAX_TARGETS plus
 * its target's index: the executor is found from the target table, which
 * is read-only once the worker serves, so no other table is kept. */
#define KEY_SLOT(key) ((uint32_t)((key) & 0xffffffffu))
#define KEY_EXEC(key) ((unsigned long)(key) >> 32)
#define JOB_KEY(x, slot) (((unsigned long)(x)->id << 32) | (slot))

/* Per process, read-only after the first setup: interned names. */
static PyObject *k_type, *k_http, *k_http_version, *k_method, *k_path, *k_raw_path, *k_query_string,
    *k_headers, *k_client, *k_state, *v_11, *v_10, *v_GET, *v_POST, *v_https;

/* ------------------------------------------------------------ loop side */

static void exec_hook(struct m0_loop *l, void *ctx)
{
    struct m0_exec *x = ctx;
    (void)l;
    m0_lane_q_flush(&x->q, &x->lane);
}

/* A target's executors, one per event loop (t->rstate). */
struct asgi_target {
    struct m0_exec *x[M0_MAX_LOOPS];
};

/* The executor of t that runs the jobs of env's loop, or NULL. */
static struct m0_exec *exec_for(const struct m0_target *t, const struct m0_runner_env *env)
{
    const struct asgi_target *at = t->rstate;
    return at != NULL && env != NULL && env->loop_index < M0_MAX_LOOPS ? at->x[env->loop_index] : NULL;
}

static void asgi_submit(const struct m0_target *t, struct m0_job *job)
{
    struct m0_exec *x = exec_for(t, job->env);
    struct m0_lane_rec rec = {.slot = job->slot, .gen = job->gen, .kind = REC_START};
    m0_lane_q_push(&x->q, &rec);
}

/* Under the job's channel lock, on the loop thread: queue a WAKE (sent
 * before the loop sleeps). */
static void asgi_wake(struct m0_job *job)
{
    struct m0_exec *x = exec_for(job->target, job->env);
    struct m0_lane_rec rec = {.slot = job->slot, .gen = job->gen, .kind = REC_WAKE};
    m0_lane_q_push(&x->q, &rec);
}

/* --------------------------------------------------------- job lookup */

/* The executor of id (a target's index), or NULL. */
static struct m0_exec *exec_of(unsigned long id)
{
    unsigned long t = id % M0_MAX_TARGETS, loop = id / M0_MAX_TARGETS;
    if (loop >= M0_MAX_LOOPS || m0_targets.t[t].runner != &m0_asgi_runner || m0_targets.t[t].rstate == NULL)
        return NULL;
    return ((const struct asgi_target *)m0_targets.t[t].rstate)->x[loop];
}

struct m0_job *m0_asgi_job_of(unsigned long key)
{
    struct m0_exec *x = exec_of(KEY_EXEC(key));
    uint32_t slot = KEY_SLOT(key);
    struct m0_job *job = x != NULL && slot < x->env->njobs ? x->env->jobs[slot] : NULL;
    if (job == NULL || job->target == NULL || job->target->runner != &m0_asgi_runner ||
        job->rstate[M0_ASGI_ID] == NULL || ((struct m0_asgi_job *)job->rstate[M0_ASGI_ID])->done ||
        atomic_load(&job->run_state) != M0_JOB_RUNNING) {
        PyErr_Format(PyExc_RuntimeError, "ASGI: slot %lu has no request in flight", (unsigned long)slot);
        return NULL;
    }
    return job;
}

void m0_asgi_done(struct m0_job *job)
{
    struct m0_asgi_job *aj = job->rstate[M0_ASGI_ID];
    aj->done = 1;
    m0_job_post_done(job);
}

/* ---------------------------------------------------------- _m0asgi module */

/* take(exec_id) -> list of (kind, key): the lane's records, each naming
 * its job by a key (the executor's id and the slot) that every other
 * function takes back. A START for a
 * request nobody waits for any more (the client left before the task began)
 * is completed here and not reported. */
static PyObject *py_take(PyObject *self, PyObject *arg)
{
    (void)self;
    unsigned long id = PyLong_AsUnsignedLong(arg);
    if (PyErr_Occurred())
        return NULL;
    struct m0_exec *x = exec_of(id);
    if (x == NULL) {
        PyErr_SetString(PyExc_ValueError, "no such executor");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    struct m0_lane_rec rec;
    for (int i = 0; i < 1024 && m0_lane_poll(&x->lane, &rec) == M0_OK; i++) {
        if (rec.kind == REC_START) {
            struct m0_job *job = x->env->jobs[rec.slot];
            if (!m0_job_claim(job)) {
                m0_job_post_done(job);
                continue;
            }
            if (job->rstate[M0_ASGI_ID] == NULL) {
                job->rstate[M0_ASGI_ID] = m0_xmalloc(sizeof(struct m0_asgi_job));
                memset(job->rstate[M0_ASGI_ID], 0, sizeof(struct m0_asgi_job));
            }
            struct m0_asgi_job *aj = job->rstate[M0_ASGI_ID];
            m0_buf_free(&aj->held);
            memset(aj, 0, sizeof *aj);
            m0_head_reset(&job->head);
            m0_body_reset(&job->body);
        }
        PyObject *t = Py_BuildValue("(ik)", (int)rec.kind, JOB_KEY(x, rec.slot));
        if (t == NULL || PyList_Append(out, t) == -1) {
            Py_XDECREF(t);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(t);
    }
    return out;
}

static int set_bytes(PyObject *d, PyObject *key, const char *p, size_t n)
{
    PyObject *v = PyBytes_FromStringAndSize(p, (Py_ssize_t)n);
    int rc = v ? PyDict_SetItem(d, key, v) : -1;
    Py_XDECREF(v);
    return rc;
}

/* scope["headers"]: the request's field lines as (name lower-cased, value)
 * byte pairs, in order; an absolute-form target's authority stands for
 * Host (RFC 9112 §3.2.2). M0_OK, or M0_ERR with an exception set. */
static int scope_headers(PyObject *scope, const struct m0_req *r, const struct m0_target *t)
{
    int grip = t != NULL && t->grip_key != NULL;
    PyObject *headers = PyList_New(0);
    if (headers == NULL || PyDict_SetItem(scope, k_headers, headers) == -1) {
        Py_XDECREF(headers);
        return M0_ERR;
    }
    Py_DECREF(headers);          /* the scope holds it */
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (grip && m0_grip_is_field(h->name, h->name_len))
            continue;        /* a client's Grip-* never reach the app (as WSGI's environ) */
        char lower[256];
        char *name = h->name_len <= sizeof lower ? lower : m0_xmalloc(h->name_len);
        for (uint32_t k = 0; k < h->name_len; k++)
            name[k] = (char)(h->name[k] >= 'A' && h->name[k] <= 'Z' ? h->name[k] + 32 : h->name[k]);
        int host = r->authority != NULL && h->name_len == 4 && memcmp(name, "host", 4) == 0;
        PyObject *pair = Py_BuildValue("(y#y#)", name, (Py_ssize_t)h->name_len, host ? r->authority : h->value,
                                       (Py_ssize_t)(host ? r->authority_len : h->value_len));
        if (name != lower)
            free(name);
        if (pair == NULL || PyList_Append(headers, pair) == -1) {
            Py_XDECREF(pair);
            return M0_ERR;
        }
        Py_DECREF(pair);
    }
    if (grip) {
        size_t n = 0;
        const char *sig = m0_grip_sig_cached(t->grip_key, t->grip_key_len, (int64_t)time(NULL), &n);
        PyObject *pair = sig != NULL ? Py_BuildValue("(yy#)", "grip-sig", sig, (Py_ssize_t)n) : NULL;
        if (sig != NULL && (pair == NULL || PyList_Append(headers, pair) == -1)) {
            Py_XDECREF(pair);
            return M0_ERR;
        }
        Py_XDECREF(pair);
    }
    if (r->authority != NULL && m0_req_header(r, "host") == NULL) {
        PyObject *pair = Py_BuildValue("(yy#)", "host", r->authority, (Py_ssize_t)r->authority_len);
        if (pair == NULL || PyList_Append(headers, pair) == -1) {
            Py_XDECREF(pair);
            return M0_ERR;
        }
        Py_DECREF(pair);
    }
    return M0_OK;
}

/* scope(slot) -> dict | None: the connection scope — HTTP (ASGI HTTP 2.4),
 * or websocket for an opening handshake (asgi_ws.c; None when the handshake
 * is invalid: the 400/426 is answered and the job is the loop's again). */
static PyObject *py_scope(PyObject *self, PyObject *arg)
{
    (void)self;
    unsigned long key = PyLong_AsUnsignedLong(arg);
    struct m0_job *job = m0_asgi_job_of(key);
    struct m0_exec *x = job != NULL ? exec_of(KEY_EXEC(key)) : NULL;
    if (x == NULL)
        return NULL;      /* m0_asgi_job_of found the executor: it set the error otherwise */
    const struct m0_req *r = &job->req;
    PyObject *scope = PyDict_Copy(x->scope), *v = NULL;
    if (scope == NULL)
        return NULL;
    if (PyDict_SetItem(scope, k_http_version, r->http_minor ? v_11 : v_10) == -1)
        goto fail;
    v = strcmp(r->method, "GET") == 0 ? Py_NewRef(v_GET) : strcmp(r->method, "POST") == 0 ? Py_NewRef(v_POST)
        : PyUnicode_DecodeLatin1(r->method, r->method_len, NULL);
    if (v == NULL || PyDict_SetItem(scope, k_method, v) == -1)
        goto fail;
    Py_CLEAR(v);
    /* path: percent-decoded, UTF-8 (undecodable bytes replaced); raw_path:
     * the bytes as received; the whole path, whatever the mount (root_path
     * in the template is the mount's prefix). */
    char small[1024];
    char *path = r->path_len < sizeof small ? small : m0_xmalloc(r->path_len + 1);
    size_t plen = m0_percent_decode(r->path, r->path_len, path);
    v = PyUnicode_DecodeUTF8(path, (Py_ssize_t)plen, "replace");
    if (path != small)
        free(path);
    if (v == NULL || PyDict_SetItem(scope, k_path, v) == -1)
        goto fail;
    Py_CLEAR(v);
    if (set_bytes(scope, k_raw_path, r->path, r->path_len) == -1 ||
        set_bytes(scope, k_query_string, r->query, r->query_len) == -1)
        goto fail;
    if (scope_headers(scope, r, job->target) != M0_OK)
        goto fail;
    if ((job->https && PyDict_SetItemString(scope, "scheme", v_https) == -1) || m0_asgi_tls_scope(scope, job) == -1)
        goto fail;                          /* a TLS listener, or a trusted proxy says so (proxy.h) */
    if (job->remote_addr[0] != '\0') {
        v = Py_BuildValue("(si)", job->remote_addr, (int)job->remote_port);
        if (v == NULL || PyDict_SetItem(scope, k_client, v) == -1)
            goto fail;
        Py_CLEAR(v);
    }
    if (x->state != NULL) {
        v = PyDict_Copy(x->state);       /* shallow: the app's objects are shared */
        if (v == NULL || PyDict_SetItem(scope, k_state, v) == -1)
            goto fail;
        Py_CLEAR(v);
    }
    if (m0_asgi_is_websocket(r)) {
        v = m0_asgi_ws_scope(job, scope);
        Py_DECREF(scope);
        return v;
    }
    return scope;
fail:
    Py_XDECREF(v);
    Py_DECREF(scope);
    return NULL;
}

/* read(slot, max) -> (bytes, more_body) | None: the next piece of the
 * request body (at most max bytes). None: a lazy body (Expect:
 * 100-continue) is not there yet — 100 Continue was asked for and a WAKE
 * comes when it has arrived (or the client left). */
static PyObject *py_read(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long slot;
    Py_ssize_t max;
    if (!PyArg_ParseTuple(args, "kn:read", &slot, &max))
        return NULL;
    struct m0_job *job = m0_asgi_job_of(slot);
    if (job == NULL)
        return NULL;
    struct m0_asgi_job *aj = job->rstate[M0_ASGI_ID];
    if (job->ch.body_lazy && !(m0_job_poll(job, M0_WAIT_BODY) & M0_WAIT_BODY))
        Py_RETURN_NONE;
    if (job->ch.body_error || (job->ch.body_lazy && !job->ch.body_done)) {
        PyErr_SetString(PyExc_OSError, "the request body was not received (the client left, stalled or "
                                       "sent a malformed body)");
        return NULL;
    }
    uint64_t left = job->req.body_len - aj->read_off;
    size_t n = left < (uint64_t)max ? (size_t)left : (size_t)max;
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (b == NULL)
        return NULL;
    ssize_t got = n ? m0_req_body_read(&job->req, aj->read_off, PyBytes_AS_STRING(b), n) : 0;
    if (got < 0) {
        Py_DECREF(b);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    aj->read_off += (uint64_t)got;
    if ((size_t)got < n && _PyBytes_Resize(&b, got) == -1)
        return NULL;
    PyObject *more = aj->read_off < job->req.body_len ? Py_True : Py_False;
    PyObject *r = PyTuple_Pack(2, b, more);
    Py_DECREF(b);
    return r;
}

/* poll(slot, want) -> have: M0_WAIT_* bits that hold now; the others are
 * armed: a WAKE comes when one of them happens (the client leaving ends
 * every wait). */
static PyObject *py_poll(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long slot;
    unsigned int want;
    if (!PyArg_ParseTuple(args, "kI:poll", &slot, &want))
        return NULL;
    struct m0_job *job = m0_asgi_job_of(slot);
    if (job == NULL)
        return NULL;
    return PyLong_FromUnsignedLong(m0_job_poll(job, want));
}

int m0_asgi_add_headers(struct m0_job *job, PyObject *headers)
{
    PyObject *it = PyObject_GetIter(headers);
    if (it == NULL)
        return M0_ERR;
    PyObject *pair;
    while ((pair = PyIter_Next(it)) != NULL) {
        PyObject *seq = PySequence_Fast(pair, "a header must be a (name, value) pair of bytes");
        Py_DECREF(pair);
        if (seq == NULL || PySequence_Fast_GET_SIZE(seq) != 2 ||
            !PyBytes_Check(PySequence_Fast_GET_ITEM(seq, 0)) || !PyBytes_Check(PySequence_Fast_GET_ITEM(seq, 1))) {
            if (seq != NULL)
                PyErr_SetString(PyExc_TypeError, "a header must be a (name, value) pair of bytes");
            Py_XDECREF(seq);
            Py_DECREF(it);
            return M0_ERR;
        }
        PyObject *n = PySequence_Fast_GET_ITEM(seq, 0), *v = PySequence_Fast_GET_ITEM(seq, 1);
        const char *why = NULL;
        int bad = !m0_http_is_token(PyBytes_AS_STRING(n), (size_t)PyBytes_GET_SIZE(n)) ||
                  !m0_http_is_field_value(PyBytes_AS_STRING(v), (size_t)PyBytes_GET_SIZE(v)) ||
                  m0_head_add(&job->head, PyBytes_AS_STRING(n), (size_t)PyBytes_GET_SIZE(n),
                              PyBytes_AS_STRING(v), (size_t)PyBytes_GET_SIZE(v), &why) != M0_OK;
        if (bad) {
            PyErr_Format(PyExc_ValueError, "invalid header %R%s%s", seq, why ? ": " : "", why ? why : "");
            Py_DECREF(seq);
            Py_DECREF(it);
            return M0_ERR;
        }
        Py_DECREF(seq);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? M0_ERR : M0_OK;
}

/* start(slot, status, headers): http.response.start — the head, validated
 * and copied into C (names as tokens, values as field values, RFC 9110
 * §5.1, §5.5). Raises ValueError/TypeError for a bad one. */
static PyObject *py_start(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long slot;
    int status;
    PyObject *headers;
    if (!PyArg_ParseTuple(args, "kiO:start", &slot, &status, &headers))
        return NULL;
    struct m0_job *job = m0_asgi_job_of(slot);
    if (job == NULL)
        return NULL;
    struct m0_asgi_job *aj = job->rstate[M0_ASGI_ID];
    if (aj->started || aj->accepted) {
        PyErr_SetString(PyExc_RuntimeError, aj->accepted ? "an HTTP response after websocket.accept"
                                                          : "http.response.start sent twice");
        return NULL;
    }
    if (status < 200 || status > 599) {
        PyErr_Format(PyExc_ValueError, "invalid status %d (200..599; 1xx are the server's)", status);
        return NULL;
    }
    m0_head_reset(&job->head);
    m0_head_status(&job->head, status, NULL, 0);
    job->head.grip_on = job->target->grip_key != NULL;      /* Grip-* instruct this server (body.h) */
    if (m0_asgi_add_headers(job, headers) != M0_OK)
        return NULL;
    m0_head_grip_finish(&job->head);     /* refused instructions: m0_job_commit answers 502 (grip_err) */
    if (job->head.hold == M0_HOLD_STREAM && job->head.channel_len == 0) {
        PyErr_SetString(PyExc_ValueError, "M0-Hold: stream needs an M0-Channel header");
        return NULL;
    }
    aj->started = 1;
    Py_RETURN_NONE;
}

/* Commit the head (once: a second commit writes nothing), held where it
 * can be kept (m0_job_may_hold). */
static void commit(struct m0_job *job, int64_t body_len)
{
    m0_job_commit(job, body_len, m0_job_may_hold(job));
}

/* One body message's bytes, framed. What goes past the declared
 * Content-Length is cut, and said once, as the WSGI runner says it. */
static void emit(struct m0_job *job, const char *p, size_t n)
{
    int was_truncated = job->body.truncated;
    size_t took = m0_body_emit(&job->body, &job->resp.out, p, n);
    if (job->body.framing != M0_FRAME_NONE)
        job->resp.body_bytes += took;
    if (job->body.truncated && !was_truncated)
        m0_warn("%s: body exceeds Content-Length %lld; truncated", M0_REQ_LOG(&job->req),
                (long long)job->body.length);
}

/* The response is complete: end the framing and give the job back. */
static void finish_response(struct m0_job *job)
{
    if (m0_body_finish(&job->body, &job->resp.out) != M0_OK) {
        m0_error("%s: body shorter than its Content-Length (%llu of %lld bytes); aborting the connection",
                 M0_REQ_LOG(&job->req), (unsigned long long)job->body.sent, (long long)job->body.length);
        job->resp.flags |= M0_RESP_ABORT;
    }
    m0_asgi_done(job);
}

/* send(slot, body, more_body) -> bool: http.response.body. True: go on;
 * False: over the credit window — poll(M0_WAIT_CREDIT) was armed, wait for
 * the WAKE. Raises OSError when the client has left (ASGI 2.4: send on a
 * closed connection). A body with more_body False completes the response:
 * the job is the loop's again. */
static PyObject *py_send(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long slot;
    Py_buffer body;
    int more;
    if (!PyArg_ParseTuple(args, "ky*p:send", &slot, &body, &more))
        return NULL;
    struct m0_job *job = m0_asgi_job_of(slot);
    if (job == NULL) {
        PyBuffer_Release(&body);
        return NULL;
    }
    struct m0_asgi_job *aj = job->rstate[M0_ASGI_ID];
    if (!aj->started) {
        PyBuffer_Release(&body);
        PyErr_SetString(PyExc_RuntimeError, "http.response.body before http.response.start");
        return NULL;
    }
    if (m0_job_client_gone(job)) {   /* under the channel lock: the loop sets it */
        PyBuffer_Release(&body);
        PyErr_SetString(PyExc_OSError, "the client disconnected");
        return NULL;
    }
    const struct m0_head *h = &job->head;
    if (!job->body.committed) {
        if (m0_job_may_hold(job)) {
            /* The hold's first bytes go out whole, after the subscription. */
            m0_buf_append(&aj->held, body.buf, (size_t)body.len);
            if (!more) {
                commit(job, (int64_t)aj->held.len);
                emit(job, aj->held.data, aj->held.len);
                m0_buf_free(&aj->held);
                finish_response(job);
            }
            PyBuffer_Release(&body);
            Py_RETURN_TRUE;
        }
        commit(job, more || h->content_length >= 0 ? -1 : (int64_t)body.len);
    }
    emit(job, body.buf, (size_t)body.len);
    PyBuffer_Release(&body);
    if (!more) {
        finish_response(job);
        Py_RETURN_TRUE;
    }
    if (m0_job_push(job) != M0_OK) {
        PyErr_SetString(PyExc_OSError, "the client disconnected");
        return NULL;
    }
    if (m0_job_poll(job, M0_WAIT_CREDIT) & M0_WAIT_CREDIT)
        Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

/* pathsend(slot, path): http.response.pathsend — the file's bytes by
 * sendfile(2), with its length. Raises OSError when it cannot be opened. */
static PyObject *py_pathsend(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long slot;
    PyObject *path;
    if (!PyArg_ParseTuple(args, "kO&:pathsend", &slot, PyUnicode_FSConverter, &path))
        return NULL;
    struct m0_job *job = m0_asgi_job_of(slot);
    if (job == NULL || !((struct m0_asgi_job *)job->rstate[M0_ASGI_ID])->started) {
        if (job != NULL)
            PyErr_SetString(PyExc_RuntimeError, "http.response.pathsend before http.response.start");
        Py_DECREF(path);
        return NULL;
    }
    int fd;
    Py_BEGIN_ALLOW_THREADS
    fd = open(PyBytes_AS_STRING(path), O_RDONLY | O_CLOEXEC);
    Py_END_ALLOW_THREADS
    struct stat st;
    if (fd == -1 || fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        if (fd != -1)
            close(fd);
        Py_DECREF(path);
        return NULL;
    }
    Py_DECREF(path);
    commit(job, (int64_t)st.st_size);
    if (job->body.framing == M0_FRAME_LENGTH) {
        job->resp.file_fd = fd;
        job->resp.file_off = 0;
        job->resp.file_left = (uint64_t)st.st_size;
        job->resp.body_bytes = (uint64_t)st.st_size;
        job->body.sent = (uint64_t)st.st_size;
    } else {
        close(fd);
    }
    finish_response(job);
    Py_RETURN_NONE;
}

/* fail(slot, status=500): the application raised or returned without
 * completing the response: status (500; 403 for a WebSocket it did not
 * accept, ASGI WebSocket spec 2.4 "Close") when no head went out, else the
 * connection is aborted. */
static PyObject *py_fail(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long slot;
    int status = 500;
    if (!PyArg_ParseTuple(args, "k|i:fail", &slot, &status))
        return NULL;
    struct m0_job *job = m0_asgi_job_of(slot);
    if (job == NULL)
        return NULL;
    m0_buf_free(&((struct m0_asgi_job *)job->rstate[M0_ASGI_ID])->held);
    if (!job->body.committed) {
        m0_buf_reset(&job->resp.out);
        m0_error_response(&job->resp.out, status,
                          status == 403 ? "the application did not accept the WebSocket"
                                        : "the application raised an error; see the server log",
                          1, (job->req.flags & M0_REQ_HEAD) != 0);
        job->resp.status = status;
        job->body.committed = 1;
        job->body.keep = 0;
        job->resp.flags &= ~M0_RESP_HOLD;
    } else {
        job->resp.flags |= M0_RESP_ABORT;
    }
    m0_asgi_done(job);
    Py_RETURN_NONE;
}

/* flush(exec_id): post the completions this executor collected since the last
 * flush, waking the C loop at most once (m0_loop_defer). The executor
 * calls it once per batch of its own work. */
static PyObject *py_flush(PyObject *self, PyObject *arg)
{
    (void)self;
    struct m0_exec *x = exec_of(PyLong_AsUnsignedLong(arg));
    if (x == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "no such executor");
        return NULL;
    }
    m0_loop_flush(x->env->loop);
    Py_RETURN_NONE;
}

/* defer(exec_id, on): the calling thread (the executor) collects its
 * completions until flush(). */
static PyObject *py_defer(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long id;
    int on;
    if (!PyArg_ParseTuple(args, "kp:defer", &id, &on))
        return NULL;
    struct m0_exec *x = exec_of(id);
    if (x == NULL) {
        PyErr_SetString(PyExc_ValueError, "no such executor");
        return NULL;
    }
    m0_loop_defer(x->env->loop, on);
    m0_py_set_loop(x->env->loop_index);     /* the executor thread's loop (m0.loop_index) */
    Py_RETURN_NONE;
}

/* debug(text): one line at the server's DEBUG level (--log-level debug),
 * nothing otherwise; escaped (log_text.h): it holds a decoded path. */
static PyObject *py_debug(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *text = PyUnicode_AsUTF8(arg);
    if (text == NULL)
        return NULL;
    m0_debug("%s", M0_LOG_TEXT(text, strlen(text)));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"debug", py_debug, METH_O, "debug(text): a line in the server log at DEBUG level"},
    {"flush", py_flush, METH_O, "flush(exec_id): post the collected completions (one loop wakeup)"},
    {"defer", py_defer, METH_VARARGS, "defer(exec_id, on): collect this thread's completions until flush()"},
    {"take", py_take, METH_O, "take(exec_id) -> [(kind, key)]: the records on the executor's lane "
                              "(START: a request to run; WAKE: something it polled for happened)"},
    {"scope", py_scope, METH_O, "scope(slot) -> dict | None: the HTTP or websocket scope (None: refused)"},
    {"read", py_read, METH_VARARGS, "read(slot, max) -> (bytes, more_body) | None (wait for a WAKE)"},
    {"poll", py_poll, METH_VARARGS, "poll(slot, want) -> have: M0_WAIT_* bits; the rest armed"},
    {"start", py_start, METH_VARARGS, "start(slot, status, headers): http.response.start"},
    {"send", py_send, METH_VARARGS, "send(slot, body, more_body) -> bool (False: wait for credit)"},
    {"pathsend", py_pathsend, METH_VARARGS, "pathsend(slot, path): the file by sendfile"},
    {"fail", py_fail, METH_VARARGS, "fail(slot, status=500): status before the head, an aborted connection after"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_m0asgi",
    .m_doc = "m0serve's ASGI executor primitives (used by m0serve._asgi only).",
    .m_size = -1,
    .m_methods = methods,
};

PyObject *m0_asgi_module_init(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL || m0_py_module_nogil(m) != 0) {
        Py_XDECREF(m);
        return NULL;
    }
    if (PyModule_AddFunctions(m, m0_asgi_ws_methods) == -1 || PyModule_AddIntConstant(m, "START", REC_START) || PyModule_AddIntConstant(m, "WAKE", REC_WAKE) ||
        PyModule_AddIntConstant(m, "WAIT_CREDIT", M0_WAIT_CREDIT) ||
        PyModule_AddIntConstant(m, "WAIT_BODY", M0_WAIT_BODY) || PyModule_AddIntConstant(m, "WAIT_GONE", M0_WAIT_GONE) ||
        PyModule_AddIntConstant(m, "WAIT_MSG", M0_WAIT_MSG)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* ------------------------------------------------------------- runner */

static int intern_all(void)
{
    static const struct {
        PyObject **slot;
        const char *text;
    } names[] = {
        {&k_type, "type"}, {&k_http, "http"}, {&k_http_version, "http_version"}, {&k_method, "method"},
        {&k_path, "path"}, {&k_raw_path, "raw_path"}, {&k_query_string, "query_string"},
        {&k_headers, "headers"}, {&k_client, "client"}, {&k_state, "state"}, {&v_11, "1.1"},
        {&v_10, "1.0"}, {&v_GET, "GET"}, {&v_POST, "POST"}, {&v_https, "https"},
    };
    for (size_t i = 0; i < M0_ARRAY_LEN(names); i++) {
        if (*names[i].slot == NULL && (*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL)
            return M0_ERR;
    }
    return M0_OK;
}

/* In a child forked by the application (fork.h): the executor's lane. */
static void close_in_child(void *ctx)
{
    struct m0_exec *x = ctx;
    m0_lane_close(&x->lane);
}

/* Undo a setup that failed part way (x is the newest executor, if
 * registered): a started executor is stopped, everything it built freed.
 * The setup's exception, when one is set, is kept for the caller. */
static void exec_discard(struct m0_target *t, struct m0_exec *x)
{
    if (x->py != NULL) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *r = PyObject_CallMethod(x->py, "stop", NULL);
        if (r == NULL)
            m0_py_print_exception();
        Py_XDECREF(r);
        PyErr_Restore(type, value, tb);
    }
    Py_CLEAR(x->py);
    Py_CLEAR(x->scope);
    Py_CLEAR(x->state);
    m0_lane_close(&x->lane);
    m0_lane_q_free(&x->q);
    m0_fork_forget(x);
    struct asgi_target *at = t->rstate;
    if (at != NULL && at->x[x->env->loop_index] == x)
        at->x[x->env->loop_index] = NULL;
    free(x);
}

/* The scope every request of t copies (type, asgi, scheme, root_path,
 * server, extensions): a new reference, or NULL with an exception set. */
static PyObject *scope_template(const struct m0_target *t, const struct m0_config *cfg)
{
    struct m0_bind_parts b;
    char err[256];
    if (m0_config_bind_parts(cfg, &b, err, sizeof err) != M0_OK) {
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    PyObject *server = b.path ? Py_BuildValue("(sO)", b.path, Py_None)
                              : Py_BuildValue("(si)", b.host, cfg->bound_port ? cfg->bound_port : b.port);
    return server == NULL ? NULL : Py_BuildValue(
        "{s:s,s:{s:s,s:s},s:s,s:s#,s:N,s:O,s:{s:{}}}",
        "type", "http",
        "asgi", "version", "3.0", "spec_version", "2.4",
        "scheme", "http",
        "root_path", t->prefix, (Py_ssize_t)t->prefix_len,
        "server", server,
        "client", Py_None,
        "extensions", "http.response.pathsend");
}

/* The executor did not start (the exception is set). startup.failed, or
 * an error with --lifespan on: the executor already printed the
 * application's own message or traceback, so one line here, not m0serve's
 * frames around it a second time (the exception is cleared). Anything else
 * stays set for the caller to print. */
static void startup_failed(PyObject *mod, const struct m0_target *t)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *failed = PyObject_GetAttrString(mod, "LifespanFailed");
    if (failed != NULL && value != NULL && PyErr_GivenExceptionMatches(value, failed)) {
        PyObject *msg = PyObject_Str(value);
        m0_error("%s: lifespan startup failed: %s", t->resolved ? t->resolved : t->spec,
                 msg != NULL && PyUnicode_Check(msg) ? PyUnicode_AsUTF8(msg) : "?");
        PyErr_Clear();
        Py_XDECREF(msg);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    } else {
        PyErr_Clear();
        PyErr_Restore(type, value, tb);   /* the caller prints it */
    }
    Py_XDECREF(failed);
}

/* Start the target's executor for env's loop (its thread, its asyncio loop, lifespan startup, bounded by
 * --lifespan-timeout): called once per event loop (--threads), so each loop has its own asyncio loop, and the
 * lifespan state an app builds there (connection pools, sessions bound to their asyncio loop) is that loop's;
 * a lifespan that ran on loop 0 and not on this loop, or the reverse, is a failure. On failure the app's
 * message is logged (or its exception left set) and M0_ERR returned, with nothing of the executor left behind. */
static int asgi_setup(struct m0_target *t, const struct m0_config *cfg, const struct m0_runner_env *env)
{
    if (intern_all() != M0_OK || env->loop_index >= M0_MAX_LOOPS)
        return M0_ERR;
    if (t->rstate == NULL)
        t->rstate = m0_xcalloc(sizeof(struct asgi_target));    /* kept for the process's life, as the executors */
    struct m0_exec *x = m0_xcalloc(sizeof *x);
    x->t = t;
    x->id = env->loop_index * M0_MAX_TARGETS + (unsigned)(t - m0_targets.t);
    x->env = env;
    if (m0_lane_open(&x->lane, 4 * 1024 * 1024) != M0_OK) {
        free(x);
        PyErr_SetFromErrno(PyExc_OSError);
        return M0_ERR;
    }
    x->scope = scope_template(t, cfg);
    if (x->scope == NULL) {
        exec_discard(t, x);
        return M0_ERR;
    }
    ((struct asgi_target *)t->rstate)->x[env->loop_index] = x;
    m0_fork_on_child(close_in_child, x);
    PyObject *mod = PyImport_ImportModule("m0serve._asgi");
    if (mod == NULL) {
        exec_discard(t, x);
        return M0_ERR;
    }
    struct m0_exec *x0 = ((struct asgi_target *)t->rstate)->x[0];     /* loop 0's, with --threads */
    x->py = PyObject_CallMethod(mod, "start", "OIissddsOI", (PyObject *)t->app, x->id, x->lane.take_fd,
                                cfg->asgi_loop, cfg->lifespan, cfg->graceful_timeout, cfg->lifespan_timeout,
                                t->resolved ? t->resolved : t->spec, x0 != x && x0 && x0->py ? x0->py : Py_None,
                                env->loop_index);
    if (x->py == NULL) {
        startup_failed(mod, t);
        Py_DECREF(mod);
        exec_discard(t, x);
        return M0_ERR;
    }
    Py_DECREF(mod);
    PyObject *state = PyObject_GetAttrString(x->py, "state");
    if (state == NULL) {
        exec_discard(t, x);
        return M0_ERR;
    }
    if (PyDict_Check(state) && PyDict_GET_SIZE(state) > 0)
        x->state = state;
    else
        Py_DECREF(state);
    m0_loop_add_hook(env->loop, exec_hook, x);
    return M0_OK;
}

/* After the drain: lifespan shutdown, then the executor's thread ends —
 * for each loop's executor of t. */
static void exec_teardown(struct m0_exec *x)
{
    if (x == NULL || x->py == NULL)
        return;
    PyObject *r = PyObject_CallMethod(x->py, "stop", NULL);
    if (r == NULL)
        m0_py_print_exception();
    Py_XDECREF(r);
    Py_CLEAR(x->py);
    Py_CLEAR(x->scope);
    Py_CLEAR(x->state);
    m0_fork_forget(x);
    m0_lane_close(&x->lane);
    m0_lane_q_free(&x->q);
}

static void asgi_teardown(struct m0_target *t)
{
    struct asgi_target *at = t->rstate;
    for (unsigned i = 0; at != NULL && i < M0_MAX_LOOPS; i++)
        exec_teardown(at->x[i]);
}

const struct m0_runner m0_asgi_runner = {
    .name = "asgi",
    .id = M0_ASGI_ID,
    .setup = asgi_setup,
    .submit = asgi_submit,
    .wake = asgi_wake,
    .teardown = asgi_teardown,
};
