/*
 * asgi_ws.c — the ASGI WebSocket scope (ASGI WebSocket spec 2.4) on the
 * executor thread: the scope, and the _m0asgi functions behind an
 * application's receive and send (python/m0serve/_asgi.py, WebSocketCycle).
 *
 * The loop does the protocol, as for a socket a WSGI view approves
 * (wshold.c, ws.c): the handshake is checked before the application sees
 * it (an invalid one is refused 400/426 here, RFC 6455 §4.2.1), the 101 is
 * written by the loop when the application sends websocket.accept (its
 * subprotocol and headers on it), and from then on the loop parses frames,
 * answers pings, runs the close handshake and pings an idle peer. What
 * differs is who owns the job: the executor keeps it for the socket's whole
 * life (M0_CPL_UPGRADE, job.h), so
 *   - websocket.send frames a message here and hands it over through the
 *     job's channel with the body's credit window (the send waits, never
 *     the loop);
 *   - the loop offers the socket's messages into the same channel, and
 *     websocket.receive takes them in order;
 *   - websocket.close asks the loop for our close frame; the socket's end
 *     (the peer's close, our close answered, or the peer vanishing) comes
 *     back as websocket.disconnect with its code.
 * A websocket.close before websocket.accept, or an application that returns
 * or raises before accepting, gets 403 (asgi.c's fail); the denial response
 * extension (websocket.http.response.*) is an ordinary HTTP response
 * through asgi.c's start/send.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>
#include <strings.h>

#include "m0/asgi.h"
#include "m0/body.h"
#include "m0/job.h"
#include "m0/loop.h"
#include "m0/target.h"
#include "m0/ws.h"

/* Does any field line named name (lower case) list token? A list field
 * may be split over several lines (RFC 9110 §5.3). */
static int any_line_lists(const struct m0_req *r, const char *name, const char *token)
{
    size_t n = strlen(name);
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len == n && strncasecmp(h->name, name, n) == 0 && m0_http_list_has(h->value, h->value_len, token))
            return 1;
    }
    return 0;
}

int m0_asgi_is_websocket(const struct m0_req *r)
{
    return any_line_lists(r, "upgrade", "websocket") && any_line_lists(r, "connection", "upgrade");
}

/* scope["subprotocols"]: every Sec-WebSocket-Protocol field's tokens, in
 * order (RFC 6455 §4.1 item 10; lists split at commas, whitespace trimmed). */
static PyObject *subprotocols(const struct m0_req *r)
{
    PyObject *list = PyList_New(0);
    for (unsigned i = 0; list != NULL && i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len != 22 || strncasecmp(h->name, "sec-websocket-protocol", 22) != 0)
            continue;
        const char *p = h->value, *end = h->value + h->value_len;
        while (p < end) {
            const char *comma = memchr(p, ',', (size_t)(end - p));
            const char *e = comma ? comma : end;
            const char *a = p, *b = e;
            while (a < b && (*a == ' ' || *a == '\t'))
                a++;
            while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
                b--;
            if (b > a) {
                PyObject *t = PyUnicode_DecodeLatin1(a, b - a, NULL);
                if (t == NULL || PyList_Append(list, t) == -1) {
                    Py_XDECREF(t);
                    Py_CLEAR(list);
                    break;
                }
                Py_DECREF(t);
            }
            p = comma ? comma + 1 : end;
        }
    }
    return list;
}

PyObject *m0_asgi_ws_scope(struct m0_job *job, PyObject *http)
{
    struct m0_ws_handshake hs;
    const char *why;
    int status = m0_ws_handshake_check(&job->req, &hs, &why);
    if (status != 0) {
        /* Not a handshake we can complete: answered here, as a WSGI
         * view's approval of one would be (wshold.c). */
        m0_buf_reset(&job->resp.out);
        m0_ws_refusal(&job->resp.out, status, why);
        job->resp.status = status;
        job->body.committed = 1;
        job->body.keep = 0;
        m0_asgi_done(job);
        Py_RETURN_NONE;
    }
    PyObject *scope = PyDict_Copy(http), *v;
    if (scope == NULL)
        return NULL;
    PyObject *scheme = PyDict_GetItemString(http, "scheme");
    int secure = scheme != NULL && PyUnicode_Check(scheme) && PyUnicode_CompareWithASCIIString(scheme, "https") == 0;
    if (PyDict_SetItemString(scope, "type", v = PyUnicode_FromString("websocket")) == -1)
        goto fail;
    Py_DECREF(v);
    if (PyDict_SetItemString(scope, "scheme", v = PyUnicode_FromString(secure ? "wss" : "ws")) == -1)
        goto fail;
    Py_DECREF(v);
    if (PyDict_DelItemString(scope, "method") == -1)
        goto fail;
    if ((v = subprotocols(&job->req)) == NULL || PyDict_SetItemString(scope, "subprotocols", v) == -1)
        goto fail;
    Py_DECREF(v);
    if ((v = Py_BuildValue("{s:{}}", "websocket.http.response")) == NULL ||
        PyDict_SetItemString(scope, "extensions", v) == -1)
        goto fail;
    Py_DECREF(v);
    v = NULL;
    if (m0_asgi_tls_scope(scope, job) == -1)          /* a TLS listener's: extensions["tls"] */
        goto fail;
    return scope;
fail:
    Py_XDECREF(v);
    Py_DECREF(scope);
    return NULL;
}

/* The accepted socket of slot, or NULL with an exception set. */
static struct m0_job *socket_of(unsigned long slot)
{
    struct m0_job *job = m0_asgi_job_of(slot);
    if (job != NULL && !((struct m0_asgi_job *)job->rstate[M0_ASGI_ID])->accepted) {
        PyErr_SetString(PyExc_RuntimeError, "the WebSocket is not accepted");
        return NULL;
    }
    return job;
}

/* ws_accept(slot, subprotocol, headers): websocket.accept. subprotocol (str
 * or None) must be one the client offered; headers go on the 101 (an
 * M0-Channel among them subscribes the socket to that channel, with
 * --realtime, as a WSGI view's approval does). */
static PyObject *py_ws_accept(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long slot;
    PyObject *proto, *headers;
    if (!PyArg_ParseTuple(args, "kOO:ws_accept", &slot, &proto, &headers))
        return NULL;
    struct m0_job *job = m0_asgi_job_of(slot);
    if (job == NULL)
        return NULL;
    struct m0_asgi_job *aj = job->rstate[M0_ASGI_ID];
    if (aj->accepted || aj->started) {
        PyErr_SetString(PyExc_RuntimeError, aj->accepted ? "websocket.accept sent twice"
                                                         : "websocket.accept after a denial response started");
        return NULL;
    }
    m0_head_reset(&job->head);
    m0_head_status(&job->head, 200, NULL, 0);     /* its lines are the 101's extra fields; the status is ours */
    if (headers != Py_None && m0_asgi_add_headers(job, headers) != M0_OK)
        return NULL;
    if (proto != Py_None) {
        Py_ssize_t n;
        const char *p = PyUnicode_Check(proto) ? PyUnicode_AsUTF8AndSize(proto, &n) : NULL;
        if (p == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "websocket.accept: subprotocol must be a str or None");
            return NULL;
        }
        const char *why = NULL;
        if (!m0_ws_protocol_offered(&job->req, p, (size_t)n)) {
            PyErr_Format(PyExc_ValueError, "websocket.accept: subprotocol %R was not offered by the client", proto);
            return NULL;
        }
        if (m0_head_add(&job->head, "M0-WebSocket-Protocol", 21, p, (size_t)n, &why) != M0_OK) {
            PyErr_Format(PyExc_ValueError, "websocket.accept: subprotocol %R: %s", proto, why);
            return NULL;
        }
    }
    if (job->head.ws_protocol_len > 0 &&
        !m0_ws_protocol_offered(&job->req, job->head.ws_protocol, job->head.ws_protocol_len)) {
        PyErr_Format(PyExc_ValueError, "websocket.accept: subprotocol %s was not offered by the client",
                     job->head.ws_protocol);
        return NULL;
    }
    if (job->head.channel_len > 0 && !job->target->realtime) {
        PyErr_SetString(PyExc_ValueError, "websocket.accept: an M0-Channel header needs --realtime");
        return NULL;
    }
    job->head.hold = M0_HOLD_WEBSOCKET;
    job->hold_last_id = 0;                        /* a socket does not resume */
    job->hold_start = m0_job_newest_id(job);
    job->resp.flags |= M0_RESP_HOLD;
    aj->accepted = 1;
    struct m0_completion c = {.slot = job->slot, .gen = job->gen, .kind = M0_CPL_UPGRADE, .rc = M0_OK};
    m0_loop_post(job->loop, &c);
    Py_RETURN_NONE;
}

/* ws_send(slot, data) -> bool: websocket.send — a str as one text frame,
 * bytes as one binary frame (RFC 6455 §5.6). False: over the credit window,
 * poll(WAIT_CREDIT) is armed. OSError when the socket is closed. */
static PyObject *py_ws_send(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long slot;
    PyObject *data;
    if (!PyArg_ParseTuple(args, "kO:ws_send", &slot, &data))
        return NULL;
    struct m0_job *job = socket_of(slot);
    if (job == NULL)
        return NULL;
    Py_buffer view = {0};
    const char *p;
    Py_ssize_t n;
    int op;
    if (PyUnicode_Check(data)) {
        if ((p = PyUnicode_AsUTF8AndSize(data, &n)) == NULL)
            return NULL;
        op = M0_WS_TEXT;
    } else {
        if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) == -1)
            return NULL;
        p = view.buf;
        n = view.len;
        op = M0_WS_BINARY;
    }
    uint8_t head[M0_WS_FRAME_HEAD_MAX];
    size_t hl = m0_ws_frame_head(head, op, (uint64_t)n, 1);
    int rc = m0_job_push_raw(job, head, hl, p, (size_t)n);
    if (view.obj != NULL)
        PyBuffer_Release(&view);
    if (rc != M0_OK) {
        PyErr_SetString(PyExc_OSError, "the WebSocket is closed");
        return NULL;
    }
    return PyBool_FromLong((m0_job_poll(job, M0_WAIT_CREDIT) & M0_WAIT_CREDIT) != 0);
}

/* May an endpoint send code in a close frame (RFC 6455 §7.4.1, §7.4.2)? */
static int code_sendable(long code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

/* ws_close(slot, code, reason): websocket.close after accept — our close
 * frame (reason: str, at most 123 bytes of UTF-8) after everything sent
 * before it. A socket already closed ignores it. */
static PyObject *py_ws_close(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long slot;
    long code;
    const char *reason;
    Py_ssize_t rlen;
    if (!PyArg_ParseTuple(args, "kls#:ws_close", &slot, &code, &reason, &rlen))
        return NULL;
    if (!code_sendable(code)) {
        PyErr_Format(PyExc_ValueError, "websocket.close: %ld is not a close code an endpoint may send", code);
        return NULL;
    }
    if (rlen > M0_WS_REASON_MAX) {
        PyErr_SetString(PyExc_ValueError, "websocket.close: the reason is over 123 bytes of UTF-8");
        return NULL;
    }
    struct m0_job *job = socket_of(slot);
    if (job == NULL)
        return NULL;
    m0_job_close_socket(job, (unsigned)code, reason, (size_t)rlen);
    Py_RETURN_NONE;
}

static int take_message(void *ctx, int opcode, const char *p, size_t n)
{
    PyObject **out = ctx;
    PyObject *data = opcode == M0_WS_TEXT ? PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, "strict")   /* checked by the parser */
                                          : PyBytes_FromStringAndSize(p, (Py_ssize_t)n);
    if (data == NULL)
        return -1;
    *out = Py_BuildValue("(iN)", opcode, data);
    return *out == NULL ? -1 : 0;
}

/* ws_receive(slot) -> (opcode, str | bytes) | [code, reason] | None: the
 * socket's next message (1 text as str, 2 binary as bytes); a list: the
 * socket ended with that close code and the reason of the peer's close
 * frame (str, "" without one); None: nothing yet, poll(WAIT_MSG) is armed. */
static PyObject *py_ws_receive(PyObject *self, PyObject *arg)
{
    (void)self;
    struct m0_job *job = socket_of(PyLong_AsUnsignedLong(arg));
    if (job == NULL)
        return NULL;
    for (;;) {
        PyObject *msg = NULL;
        unsigned code = 0;
        char reason[M0_WS_REASON_MAX];
        size_t rlen = 0;
        int rc = m0_job_msg_take(job, take_message, &msg, &code, reason, &rlen);
        if (rc == 1)
            return msg;
        if (rc == -2)
            return NULL;
        if (rc == -1)   /* the reason was checked as UTF-8 by the frame parser (1007) */
            return Py_BuildValue("[Is#]", code, reason, (Py_ssize_t)rlen);
        if (!(m0_job_poll(job, M0_WAIT_MSG) & M0_WAIT_MSG))
            Py_RETURN_NONE;
    }
}

/* ws_end(slot): the application is done with an accepted socket; the job
 * is the loop's again, which closes the socket (1000) unless ws_close asked
 * for another code first. */
static PyObject *py_ws_end(PyObject *self, PyObject *arg)
{
    (void)self;
    struct m0_job *job = socket_of(PyLong_AsUnsignedLong(arg));
    if (job == NULL)
        return NULL;
    m0_asgi_done(job);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"ws_accept", py_ws_accept, METH_VARARGS, "ws_accept(slot, subprotocol, headers): websocket.accept"},
    {"ws_send", py_ws_send, METH_VARARGS, "ws_send(slot, str | bytes) -> bool (False: wait for credit)"},
    {"ws_close", py_ws_close, METH_VARARGS, "ws_close(slot, code, reason): websocket.close after accept"},
    {"ws_receive", py_ws_receive, METH_O, "ws_receive(slot) -> (opcode, data) | close code | None (wait)"},
    {"ws_end", py_ws_end, METH_O, "ws_end(slot): the application is done with the socket"},
    {NULL, NULL, 0, NULL},
};

PyMethodDef *const m0_asgi_ws_methods = methods;
