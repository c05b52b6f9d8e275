/*
 * wsgi.c — the PEP 3333 runner (m0_wsgi_runner; see runner.h).
 *
 * Per request it builds environ from the target's template, calls the
 * application with a fresh start_response object, drives the returned
 * iterable and frames what it yields through the body encoder (body.h)
 * into job->resp.out. Nothing here touches a socket.
 *
 * Framing, decided at the first body block (start_response may come late,
 * from inside a generator):
 *   - a list or tuple: the length is known; Content-Length;
 *   - the application's own Content-Length: sent as declared, block by block;
 *   - a response that says it is not streaming (Django's HttpResponse:
 *     `streaming` is False), a hold, HEAD, 204/304: held back to learn the
 *     length (up to BUFFER_CAP), then Content-Length;
 *   - anything else streams: every non-empty block goes out as it is
 *     yielded (PEP 3333 "Buffering and Streaming"), chunked to HTTP/1.1,
 *     close-delimited to HTTP/1.0. The runner returns M0_AGAIN after each
 *     one; the pool thread hands it over and resumes the iterator itself.
 *
 * The WSGI subtleties, where they are handled:
 *   - start_response copies and validates status and headers into
 *     job->head at once: the application's list is not read again, so what
 *     it appends later never reaches the wire (PEP 3333 lets the server
 *     copy; latin-1 only, "The start_response() Callable").
 *   - exc_info: a second call without it is an error; with it, before the
 *     head is sent it replaces status and headers, after it re-raises.
 *   - write() sends the head, then its bytes at once, and waits for credit
 *     (without the GIL) so a client that does not read cannot grow memory.
 *   - close() on the iterable is always called, whatever happened.
 *   - An exception before the head is committed becomes a logged traceback
 *     and a 500; after it, the connection is aborted — a truncated body is
 *     never passed off as complete. SystemExit and KeyboardInterrupt are
 *     exceptions like any other here: logged, never acted upon.
 *   - wsgi.file_wrapper over a regular file is sent with sendfile(2), unless
 *     write() already committed the head.
 *   - A process forked by the application that returns into the server
 *     exits at once (it must not serve: m0_fork_check).
 *
 * WebSockets (DESIGN capability 6): a view approves an upgrade with
 * M0-Hold: websocket; under --realtime, for a 2xx answer to a GET, nothing
 * of its head or body is sent — the loop checks the handshake and answers
 * 101 itself (hold.h). Each inbound message is the message operation: the
 * loop has made job->req an ordinary POST (ws.h), the application runs it
 * like any request, and its body, collected whole instead of framed,
 * becomes the reply frame.
 */
#include "m0/wsgi.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "m0/config.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/pyrt.h"
#include "m0/runner.h"
#include "m0/target.h"
#include "m0/fork.h"

/* A large sized body is produced in pieces of this size under credit. */
#define STREAM_CHUNK (64 * 1024)
/* A response held back to learn its length goes out chunked past this. */
#define BUFFER_CAP (1024 * 1024)
/* The largest reply to a WebSocket message (it is sent as one frame). */
#define REPLY_CAP (16 * 1024 * 1024)

/* Per process, read-only after the first setup: interned names. */
static PyObject *s_close, *s_fileno, *s_tell, *s_streaming;

/* The target's state: its environ template. */
struct wsgi_target {
    PyObject *environ;
};

typedef struct start_response StartResponseObject;

/* The job's state between start and completion (job->rstate[M0_WSGI_ID]). */
struct wsgi_job {
    PyObject *result;            /* the iterable whose close() is owed, or NULL */
    PyObject *iter;              /* the iterator being drained, or NULL */
    PyObject *item;              /* a body item being sent in slices, or NULL */
    size_t item_off;             /* bytes of item already produced */
    StartResponseObject *sr;
    m0_InputObject *input;
    uint64_t produced;           /* body bytes the application produced */
    struct m0_buf pending;       /* body held back until the head commits */
    uint8_t sized_list;          /* the result is a list/tuple of known length */
    uint8_t holdback;            /* hold the body back to learn its length */
    uint8_t message;             /* an inbound WebSocket message: the body is the reply, raw */
    uint8_t too_big;             /* message: the reply passed REPLY_CAP */
};

/* ------------------------------------------------------- start_response */

struct start_response {
    PyObject_HEAD
    struct m0_job *job;          /* NULL once the request is over */
    int called;                  /* start_response ran (status and headers are in job->head) */
};

const char *m0_latin1(PyObject *s, Py_ssize_t *len, PyObject **owner)
{
    *owner = NULL;
    if (PyUnicode_IS_ASCII(s))
        return PyUnicode_AsUTF8AndSize(s, len);
    PyObject *b = PyUnicode_AsLatin1String(s);
    if (b == NULL)
        return NULL;
    *owner = b;
    *len = PyBytes_GET_SIZE(b);
    return PyBytes_AS_STRING(b);
}

#define M0_WSGI_ID 0

static struct wsgi_job *state_of(struct m0_job *job)
{
    return job->rstate[M0_WSGI_ID];
}

/* Has the head been "sent" in PEP 3333's sense? It has once a non-empty
 * body string was produced, even while we still hold it back. */
static int head_sent(struct m0_job *job)
{
    return job->body.committed || state_of(job)->produced > 0;
}

/* Validate status and headers as PEP 3333 requires and copy them into
 * job->head. Raises and returns -1 on a violation (job->head is then not
 * to be used). */
static int copy_head(struct m0_job *job, PyObject *status, PyObject *headers)
{
    struct m0_head *h = &job->head;
    PyObject *own;
    Py_ssize_t slen;
    if (!PyUnicode_Check(status)) {
        PyErr_Format(PyExc_TypeError, "status must be str, not %.100s", Py_TYPE(status)->tp_name);
        return -1;
    }
    const char *st = m0_latin1(status, &slen, &own);
    if (st == NULL)
        return -1;
    int ok = slen >= 3 && st[0] >= '2' && st[0] <= '5' && st[1] >= '0' && st[1] <= '9' && st[2] >= '0' &&
             st[2] <= '9' && (slen == 3 || st[3] == ' ') && m0_http_is_field_value(st, (size_t)slen);
    if (!ok) {
        Py_XDECREF(own);
        PyErr_Format(PyExc_ValueError, "invalid status %R (want e.g. '200 OK'; 1xx are the server's)", status);
        return -1;
    }
    if (!PyList_Check(headers)) {
        Py_XDECREF(own);
        PyErr_Format(PyExc_TypeError, "headers must be a list, not %.100s", Py_TYPE(headers)->tp_name);
        return -1;
    }
    m0_head_reset(h);
    /* RFC 9112 §4: the SP before the reason is not optional. */
    m0_head_status(h, (st[0] - '0') * 100 + (st[1] - '0') * 10 + (st[2] - '0'), slen > 4 ? st + 4 : NULL,
                   slen > 4 ? (size_t)slen - 4 : 0);
    Py_XDECREF(own);
    /* With a GRIP key, Grip-* fields instruct this server (body.h): on a
     * response, or on the answer to a GRIP hold's next link (job.h). */
    h->grip_on = job->target->grip_key != NULL && (!state_of(job)->message || job->grip_own);
    /* Converting a str runs no Python code, so the list cannot change
     * under this loop; after it, the list is never read again. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(headers); i++) {
        PyObject *t = PyList_GET_ITEM(headers, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(t, 1))) {
            PyErr_Format(PyExc_TypeError, "header %zd must be a (str, str) tuple, got %R", i, t);
            return -1;
        }
        PyObject *own_n, *own_v;
        Py_ssize_t nl, vl;
        const char *n = m0_latin1(PyTuple_GET_ITEM(t, 0), &nl, &own_n);
        if (n == NULL)
            return -1;
        const char *v = m0_latin1(PyTuple_GET_ITEM(t, 1), &vl, &own_v);
        if (v == NULL) {
            Py_XDECREF(own_n);
            return -1;
        }
        const char *why = NULL;
        int bad = !m0_http_is_token(n, (size_t)nl) || !m0_http_is_field_value(v, (size_t)vl) ||
                  m0_head_add(h, n, (size_t)nl, v, (size_t)vl, &why) != M0_OK;
        int channel = nl == 10 && strncasecmp(n, "m0-channel", 10) == 0;
        Py_XDECREF(own_n);
        Py_XDECREF(own_v);
        if (bad && why != NULL && channel) {
            PyErr_Format(PyExc_ValueError, "invalid M0-Channel %R: %s", PyTuple_GET_ITEM(t, 1), why);
            return -1;
        }
        if (bad) {
            PyErr_Format(PyExc_ValueError, "invalid header %R%s%s", t, why ? ": " : "", why ? why : "");
            return -1;
        }
    }
    m0_head_grip_finish(h);      /* refused instructions: m0_job_commit answers 502 (grip_err) */
    if ((h->hold == M0_HOLD_STREAM || h->hold == M0_HOLD_WEBSOCKET) && h->channel_len == 0) {
        PyErr_Format(PyExc_ValueError, "M0-Hold: %s needs an M0-Channel header",
                     h->hold == M0_HOLD_STREAM ? "stream" : "websocket");
        return -1;
    }
    return 0;
}

static PyObject *start_response_write(PyObject *self, PyObject *data);

static PyMethodDef start_response_methods[] = {
    {"write", start_response_write, METH_O, "write(bytes): the PEP 3333 write() callable"},
    {NULL, NULL, 0, NULL},
};

static PyObject *start_response_call(PyObject *self, PyObject *args, PyObject *kw)
{
    StartResponseObject *sr = (StartResponseObject *)self;
    static char *kwlist[] = {"status", "headers", "exc_info", NULL};
    PyObject *status, *headers, *exc_info = Py_None;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:start_response", kwlist, &status, &headers, &exc_info))
        return NULL;
    if (sr->job == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "start_response() called after the request ended");
        return NULL;
    }
    if (exc_info != Py_None) {
        if (!PyTuple_Check(exc_info) || PyTuple_GET_SIZE(exc_info) != 3) {
            PyErr_SetString(PyExc_TypeError, "exc_info must be a (type, value, traceback) tuple");
            return NULL;
        }
        if (head_sent(sr->job)) {
            /* Too late to change the head: re-raise the application's error
             * (PEP 3333), which aborts the response. */
            PyObject *type = PyTuple_GET_ITEM(exc_info, 0), *value = PyTuple_GET_ITEM(exc_info, 1),
                     *tb = PyTuple_GET_ITEM(exc_info, 2);
            Py_INCREF(type);
            Py_INCREF(value);
            Py_INCREF(tb);
            PyErr_Restore(type, value, tb == Py_None ? NULL : tb);
            return NULL;
        }
    } else if (sr->called) {
        PyErr_SetString(PyExc_AssertionError, "start_response() called again without exc_info");
        return NULL;
    }
    sr->called = 0;
    if (copy_head(sr->job, status, headers) == -1)
        return NULL;
    sr->called = 1;
    /* PEP 3333's write(), bound to this object: made directly, not looked up
     * by name (a string made and a type's dict searched per request). */
    return PyCFunction_New(&start_response_methods[0], self);
}

static int commit(struct m0_job *job, int64_t body_len);
static void emit(struct m0_job *job, const char *p, size_t n);

static PyObject *start_response_write(PyObject *self, PyObject *data)
{
    StartResponseObject *sr = (StartResponseObject *)self;
    struct m0_job *job = sr->job;
    Py_buffer view;
    if (job == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "write() called after the request ended");
        return NULL;
    }
    if (!sr->called) {
        PyErr_SetString(PyExc_AssertionError, "write() called before start_response()");
        return NULL;
    }
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "write() takes bytes, not %.100s", Py_TYPE(data)->tp_name);
        return NULL;
    }
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) == -1)
        return NULL;
    /* PEP 3333: write() must send the head before any data, and the data
     * without delay. */
    if (!job->body.committed)
        commit(job, -1);
    emit(job, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    int rc = M0_OK;
    if (!state_of(job)->message && (m0_buf_unread(&job->resp.out) > 0 || job->inl == NULL)) {
        Py_BEGIN_ALLOW_THREADS
        rc = m0_job_push(job);
        if (rc == M0_OK)
            rc = m0_job_wait_credit(job);
        Py_END_ALLOW_THREADS
    }
    if (rc != M0_OK) {
        PyErr_SetString(PyExc_OSError, "write(): the client disconnected");
        return NULL;
    }
    Py_RETURN_NONE;
}

static void start_response_dealloc(PyObject *self)
{
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject StartResponseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "m0.StartResponse",
    .tp_basicsize = sizeof(StartResponseObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "start_response(status, headers, exc_info=None) -> write",
    .tp_call = start_response_call,
    .tp_methods = start_response_methods,
    .tp_dealloc = start_response_dealloc,
};

/* ------------------------------------------------------------- framing */

/* A WebSocket approval the loop will take: --realtime, a 2xx, not HEAD.
 * Anywhere else it is an ordinary response (the view degrades). Any other
 * method is taken so that the loop's handshake check answers it: RFC 6455
 * §4.2.1 makes the handshake a GET, and a POST approved by a view that does
 * not look is refused with the 400 the ASGI path gives (asgi_ws.c), never
 * answered with the approval's body. HEAD asks for GET's head without a
 * connection change: it keeps the ordinary answer. */
static int ws_hold(const struct m0_job *job)
{
    const struct m0_head *h = &job->head;
    return job->target->realtime && h->hold == M0_HOLD_WEBSOCKET && h->status / 100 == 2 &&
           !state_of((struct m0_job *)job)->message && !(job->req.flags & M0_REQ_HEAD);
}

/* Commit the head (once: the encoder refuses a second one). body_len is
 * the whole body's size when known, else -1. */
static int commit(struct m0_job *job, int64_t body_len)
{
    struct wsgi_job *ws = state_of(job);
    struct m0_head *h = &job->head;
    const struct m0_req *r = &job->req;
    if (ws->message || ws_hold(job)) {
        /* A message's answer: no head, the body collected raw (CLOSE
         * framing appends bytes as they are). A WebSocket approval: no head
         * and no body (FRAME_NONE); the loop writes the 101. */
        if (job->body.committed) {
            m0_error("BUG: %s: a second head for one response refused", M0_REQ_LOG(r));
            return -1;
        }
        job->body.committed = 1;
        job->body.keep = 0;
        job->body.length = -1;
        job->body.framing = ws->message ? M0_FRAME_CLOSE : M0_FRAME_NONE;
        job->resp.status = ws->message ? h->status : 101;
        if (!ws->message) {
            job->hold_last_id = 0;               /* a socket does not resume */
            job->hold_start = m0_job_newest_id(job);
            job->resp.flags |= M0_RESP_HOLD;
        }
        size_t n = ws->pending.len;
        if (n > 0) {
            ws->pending.len = 0;
            ws->produced -= n;
            emit(job, ws->pending.data, n);
        }
        m0_buf_reset(&ws->pending);
        return 0;
    }
    /* A hold is taken only where it can be kept (--realtime, a 2xx, not
     * HEAD). Anywhere else the same response goes out as an ordinary short
     * one — the property that lets hold views run under any server. */
    if (m0_job_commit(job, body_len, m0_job_may_hold(job)) != M0_OK) {
        m0_error("BUG: %s: a second head for one response refused", M0_REQ_LOG(r));
        return -1;
    }
    if (ws->pending.len > 0) {
        /* The body held back until now. */
        size_t n = ws->pending.len;
        ws->pending.len = 0;
        ws->produced -= n;
        emit(job, ws->pending.data, n);
    }
    m0_buf_reset(&ws->pending);
    return 0;
}

/* One piece of body from the application: framed when the head is
 * committed, held back (or, for HEAD and bodiless statuses, only counted)
 * before. */
static void emit(struct m0_job *job, const char *p, size_t n)
{
    struct wsgi_job *ws = state_of(job);
    if (n == 0)
        return;
    ws->produced += n;
    if (!job->body.committed) {
        int discard = (job->req.flags & M0_REQ_HEAD) || m0_status_bodiless(job->head.status);
        if (!discard)
            m0_buf_append(&ws->pending, p, n);
        return;
    }
    if (ws->message && m0_buf_unread(&job->resp.out) + n > REPLY_CAP) {
        ws->too_big = 1;             /* dropped: complete() aborts the socket */
        return;
    }
    int was_truncated = job->body.truncated;
    size_t took = m0_body_emit(&job->body, &job->resp.out, p, n);
    if (job->body.framing != M0_FRAME_NONE)
        job->resp.body_bytes += took;
    if (job->body.truncated && !was_truncated)
        m0_warn("%s: body exceeds Content-Length %lld; truncated", M0_REQ_LOG(&job->req),
                (long long)job->body.length);
}

/* Before the first block is framed: commit now, or keep holding back? */
static void maybe_commit(struct m0_job *job)
{
    struct wsgi_job *ws = state_of(job);
    if (job->body.committed)
        return;
    const struct m0_head *h = &job->head;
    int discard = (job->req.flags & M0_REQ_HEAD) || m0_status_bodiless(h->status);
    if (ws->message || ws_hold(job)) {
        commit(job, -1);             /* nothing is framed: no length to learn */
    } else if (h->hold == M0_HOLD_STREAM) {
        /* A hold's body is the stream's first bytes: it goes out whole,
         * after the loop has subscribed the connection (and a degraded
         * hold is an ordinary short response). */
        if (ws->produced >= BUFFER_CAP)
            commit(job, -1);
    } else if (h->content_length >= 0) {
        /* The declared length decides: send as produced (HEAD: nothing). */
        commit(job, ws->produced);
    } else if (discard || ws->holdback) {
        if (ws->produced >= (discard ? STREAM_CHUNK : BUFFER_CAP))
            commit(job, -1);         /* too long to hold: stream it (HEAD: no length) */
    } else {
        commit(job, -1);             /* a stream: every block goes out as it comes */
    }
}

/* ----------------------------------------------------------- lifecycle */

static void log_app_error(struct m0_job *job, const char *when)
{
    m0_error("error %s %s; traceback follows", when, M0_REQ_LOG(&job->req));
    m0_py_print_exception();
}

/* Call the iterable's close() (always owed, PEP 3333) and drop runner
 * state. Detaches wsgi.input and start_response from the job so an
 * application that kept them cannot reach a reused request. */
static void finish(struct m0_job *job)
{
    struct wsgi_job *ws = state_of(job);
    PyObject *result = ws->result;
    ws->result = NULL;
    Py_CLEAR(ws->iter);
    Py_CLEAR(ws->item);
    if (result != NULL) {
        if (PyObject_HasAttr(result, s_close)) {
            PyObject *r = PyObject_CallMethodNoArgs(result, s_close);
            m0_fork_check();
            if (r == NULL)
                log_app_error(job, "in close() of the response to");
            Py_XDECREF(r);
        }
        Py_DECREF(result);
    }
    if (ws->input != NULL) {
        ws->input->job = NULL;
        Py_CLEAR(ws->input);
    }
    if (ws->sr != NULL) {
        ws->sr->job = NULL;
        Py_CLEAR(ws->sr);
    }
    m0_buf_reset(&ws->pending);
    if (ws->pending.cap > BUFFER_CAP)
        m0_buf_free(&ws->pending);
}

/* An application error: 500 when nothing was committed, else abort. */
static int fail(struct m0_job *job, const char *when)
{
    struct wsgi_job *ws = state_of(job);
    log_app_error(job, when);
    if (ws->message) {
        /* A message's view failed: nothing goes to the socket (it stays open). */
        m0_buf_reset(&job->resp.out);
        job->resp.status = 500;
        job->body.committed = 1;
        finish(job);
        return M0_DONE;
    }
    if (!job->body.committed && ws->produced > 0 && ws->sr != NULL && ws->sr->called) {
        /* PEP 3333's head was sent (body bytes were produced): send what the
         * application produced, then abort — never a 500 after a 200. */
        commit(job, -1);
    }
    if (!job->body.committed) {
        m0_buf_reset(&job->resp.out);
        m0_error_response(&job->resp.out, 500, "the application raised an error; see the server log",
                          1, (job->req.flags & M0_REQ_HEAD) != 0);
        job->resp.status = 500;
        job->body.committed = 1;
        job->body.keep = 0;
        job->resp.flags &= ~M0_RESP_HOLD;
    } else {
        job->resp.flags |= M0_RESP_ABORT;
    }
    finish(job);
    return M0_DONE;
}

/* Iteration is over: commit the head if it is still held back, end the
 * body's framing, check the declared length. */
static int complete(struct m0_job *job)
{
    struct wsgi_job *ws = state_of(job);
    Py_CLEAR(ws->iter);
    Py_CLEAR(ws->item);
    if (ws->sr == NULL || !ws->sr->called) {
        PyErr_SetString(PyExc_AssertionError, "the application returned without calling start_response()");
        return fail(job, "in");
    }
    if (!job->body.committed && commit(job, (int64_t)ws->produced) != 0)
        job->resp.flags |= M0_RESP_ABORT;
    if (ws->too_big) {
        m0_error("%s: the reply to a WebSocket message is over %d bytes; closing the socket",
                 M0_REQ_LOG(&job->req), REPLY_CAP);
        job->resp.flags |= M0_RESP_ABORT;
    }
    if (m0_body_finish(&job->body, &job->resp.out) != M0_OK) {
        m0_error("%s: body shorter than its Content-Length (%llu of %lld bytes); aborting the connection",
                 M0_REQ_LOG(&job->req), (unsigned long long)job->body.sent,
                 (long long)job->body.length);
        job->resp.flags |= M0_RESP_ABORT;
    }
    finish(job);
    return M0_DONE;
}

/*
 * Drain the iterator until it ends, enough was sent, or there is something
 * to hand over: a streamed block (sent at once) or STREAM_CHUNK bytes of a
 * large item (produced in slices, one per resume, so a slow reader holds at
 * most a window of copies whatever the application hands over).
 */
static int pump(struct m0_job *job)
{
    struct wsgi_job *ws = state_of(job);
    for (;;) {
        if (ws->item != NULL) {
            size_t len = (size_t)PyBytes_GET_SIZE(ws->item);
            size_t n = len - ws->item_off < STREAM_CHUNK ? len - ws->item_off : STREAM_CHUNK;
            emit(job, PyBytes_AS_STRING(ws->item) + ws->item_off, n);
            ws->item_off += n;
            if (ws->item_off == len)
                Py_CLEAR(ws->item);
            maybe_commit(job);
            if (m0_body_enough(&job->body))
                return complete(job);
            if (job->body.committed && !ws->message && m0_buf_unread(&job->resp.out) > 0 &&
                (!ws->sized_list || m0_buf_unread(&job->resp.out) >= STREAM_CHUNK))
                return M0_AGAIN;            /* hand it over, then resume here */
            continue;
        }
        PyObject *item = PyIter_Next(ws->iter);
        m0_fork_check();
        if (item == NULL)
            break;
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "the response iterable yielded %.100s, not bytes", Py_TYPE(item)->tp_name);
            Py_DECREF(item);
            return fail(job, "in the body of");
        }
        if (PyBytes_GET_SIZE(item) == 0) {
            Py_DECREF(item);
            continue;
        }
        if (!job->body.committed && (ws->sr == NULL || !ws->sr->called)) {
            Py_DECREF(item);
            PyErr_SetString(PyExc_AssertionError, "body yielded before start_response()");
            return fail(job, "in");
        }
        ws->item = item;
        ws->item_off = 0;
    }
    if (PyErr_Occurred())
        return fail(job, "in the body of");
    return complete(job);
}

/* A file_wrapper over a regular file: the head now, the bytes by sendfile.
 * Returns M0_AGAIN when it cannot be sent that way (iterate it instead). */
static int try_sendfile(struct m0_job *job, PyObject *result)
{
    struct wsgi_job *ws = state_of(job);
    m0_FileWrapperObject *fw = (m0_FileWrapperObject *)result;
    /* write() already committed a head and sent bytes: the file follows
     * them in the same body, framed by iteration (one head per response). */
    if (ws->sr == NULL || !ws->sr->called || job->body.committed || ws->produced > 0 || ws->message ||
        !PyObject_HasAttr(fw->filelike, s_fileno))
        return M0_AGAIN;
    PyObject *fdobj = PyObject_CallMethodNoArgs(fw->filelike, s_fileno);
    int fd = fdobj ? (int)PyLong_AsLong(fdobj) : -1;
    Py_XDECREF(fdobj);
    if (fd < 0 || PyErr_Occurred()) {
        PyErr_Clear();
        return M0_AGAIN;
    }
    struct stat st;
    if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode))
        return M0_AGAIN;
    off_t pos = -1;
    if (PyObject_HasAttr(fw->filelike, s_tell)) {
        PyObject *t = PyObject_CallMethodNoArgs(fw->filelike, s_tell);
        pos = t ? (off_t)PyLong_AsLongLong(t) : -1;
        Py_XDECREF(t);
        PyErr_Clear();
    }
    if (pos < 0)
        pos = lseek(fd, 0, SEEK_CUR);
    if (pos < 0 || pos > st.st_size)
        return M0_AGAIN;
    uint64_t len = (uint64_t)(st.st_size - pos);
    int64_t declared = job->head.content_length;
    if (declared >= 0 && (uint64_t)declared < len)
        len = (uint64_t)declared;
    int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dupfd == -1)
        return M0_AGAIN;
    if (commit(job, (int64_t)len) != 0) {
        close(dupfd);
        return fail(job, "committing the file response of");
    }
    if (job->body.framing == M0_FRAME_LENGTH) {
        job->resp.file_fd = dupfd;
        job->resp.file_off = pos;
        job->resp.file_left = len;
        job->resp.body_bytes = len;
        if (declared >= 0 && (uint64_t)declared > len) {
            m0_error("%s: file shorter than its Content-Length; aborting after it", M0_REQ_LOG(&job->req));
            job->resp.flags |= M0_RESP_ABORT;
        }
    } else {
        close(dupfd);            /* HEAD, or a bodiless status: nothing to send */
    }
    finish(job);
    return M0_DONE;
}

/* -------------------------------------------------------------- runner */

/* The common case: the application returned a list or a tuple, so the
 * whole body is here and its length is known. */
static int run_sequence(struct m0_job *job, PyObject *result)
{
    struct wsgi_job *ws = state_of(job);
    Py_ssize_t count = PySequence_Fast_GET_SIZE(result);
    PyObject **items = PySequence_Fast_ITEMS(result);
    uint64_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyBytes_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "the response iterable yielded %.100s, not bytes",
                         Py_TYPE(items[i])->tp_name);
            return fail(job, "in the body of");
        }
        total += (uint64_t)PyBytes_GET_SIZE(items[i]);
    }
    if (!ws->sr->called) {
        PyErr_SetString(PyExc_AssertionError, "the application returned without calling start_response()");
        return fail(job, "in");
    }
    if (!job->body.committed && commit(job, (int64_t)(ws->produced + total)) != 0)
        return fail(job, "committing the head of");
    if (total > 4 * STREAM_CHUNK && !m0_body_enough(&job->body)) {
        /* Too big to copy whole for a reader of unknown speed: the
         * length is known, the bytes go out in slices under credit. */
        ws->sized_list = 1;
        ws->iter = PyObject_GetIter(result);
        if (ws->iter == NULL)
            return fail(job, "iterating the response of");
        return pump(job);
    }
    for (Py_ssize_t i = 0; i < count && !m0_body_enough(&job->body); i++)
        emit(job, PyBytes_AS_STRING(items[i]), (size_t)PyBytes_GET_SIZE(items[i]));
    return complete(job);
}

/* Run the application on job->req: an HTTP request, or (message) the
 * POST an inbound WebSocket message became. */
static int run(struct m0_job *job, int message)
{
    struct wsgi_target *wt = job->target->rstate;
    if (job->rstate[M0_WSGI_ID] == NULL) {
        job->rstate[M0_WSGI_ID] = m0_xmalloc(sizeof(struct wsgi_job));
        memset(job->rstate[M0_WSGI_ID], 0, sizeof(struct wsgi_job));
    }
    struct wsgi_job *ws = state_of(job);
    ws->produced = 0;
    ws->sized_list = ws->holdback = 0;
    ws->message = (uint8_t)message;
    ws->too_big = 0;
    m0_head_reset(&job->head);
    m0_body_reset(&job->body);

    ws->input = m0_input_new(job);
    ws->sr = PyObject_New(StartResponseObject, &StartResponseType);
    if (ws->input == NULL || ws->sr == NULL) {
        if (ws->sr != NULL)
            ws->sr->job = NULL;
        return fail(job, "preparing");
    }
    ws->sr->job = job;
    ws->sr->called = 0;

    PyObject *env = m0_environ_build(job, wt->environ, (PyObject *)ws->input);
    if (env == NULL)
        return fail(job, "building environ for");
    PyObject *result = PyObject_CallFunctionObjArgs(job->target->app, env, (PyObject *)ws->sr, NULL);
    m0_fork_check();
    Py_DECREF(env);
    if (result == NULL)
        return fail(job, "in");
    ws->result = result;

    if (Py_IS_TYPE(result, &m0_FileWrapperType)) {
        int rc = try_sendfile(job, result);
        if (rc != M0_AGAIN)
            return rc;
        if (PyErr_Occurred())
            return fail(job, "in the file_wrapper of");
    }
    if (PyList_CheckExact(result) || PyTuple_CheckExact(result))
        return run_sequence(job, result);
    /* A response that says it is not streaming (Django's HttpResponse) is
     * one body in disguise: learn its length. */
    /* Looked up without raising: most responses (Flask's, Werkzeug's) have
     * no such attribute, and an AttributeError made and dropped per request
     * cost more than the lookup (issue 29). */
    PyObject *streaming = NULL;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyObject_GetOptionalAttr(result, s_streaming, &streaming) < 0)
#else
    if (_PyObject_LookupAttr(result, s_streaming, &streaming) < 0)
#endif
        PyErr_Clear();
    ws->holdback = streaming == Py_False;
    Py_XDECREF(streaming);
    ws->iter = PyObject_GetIter(result);
    if (ws->iter == NULL)
        return fail(job, "iterating the response of");
    return pump(job);
}

static int wsgi_start(struct m0_job *job)
{
    return run(job, 0);
}

static int wsgi_resume(struct m0_job *job);

/* runner.h: the loop made job->req the message's POST (payload as its
 * body, which wsgi.input reads); the view's body is the reply. A body that
 * says it streams is collected all the same: the reply is one frame. */
static int wsgi_message(struct m0_job *job, int opcode, const void *payload, size_t len)
{
    (void)opcode;
    (void)payload;
    (void)len;
    int rc = run(job, 1);
    while (rc == M0_AGAIN)
        rc = wsgi_resume(job);       /* not reached: message bodies are never handed over */
    return M0_DONE;
}

static int wsgi_resume(struct m0_job *job)
{
    struct wsgi_job *ws = state_of(job);
    if (ws == NULL || ws->iter == NULL)
        return M0_DONE;
    return pump(job);
}

static void wsgi_abandon(struct m0_job *job)
{
    struct wsgi_job *ws = state_of(job);
    if (ws != NULL && (ws->result != NULL || ws->iter != NULL || ws->item != NULL || ws->input != NULL))
        finish(job);
    job->resp.flags |= M0_RESP_ABORT;
}

static int wsgi_setup(struct m0_target *t, const struct m0_config *cfg, const struct m0_runner_env *env)
{
    static const struct {
        PyObject **slot;
        const char *text;
    } names[] = {{&s_close, "close"}, {&s_fileno, "fileno"}, {&s_tell, "tell"}, {&s_streaming, "streaming"}};
    for (size_t i = 0; i < M0_ARRAY_LEN(names); i++) {
        if (*names[i].slot == NULL && (*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL)
            return M0_ERR;
    }
    (void)env;          /* everything it needs of the loop comes with each job (job->env) */
    if (t->rstate != NULL)
        return M0_OK;   /* another loop's call made the template: the loops share it */
    if (PyType_Ready(&StartResponseType) < 0)
        return M0_ERR;
    struct wsgi_target *wt = m0_xmalloc(sizeof *wt);
    wt->environ = m0_environ_template(t, cfg, cfg->blocking_threads > 0 || cfg->loops > 1);
    if (wt->environ == NULL) {
        free(wt);
        return M0_ERR;
    }
    t->rstate = wt;
    return M0_OK;
}

const struct m0_runner m0_wsgi_runner = {
    .name = "wsgi",
    .id = M0_WSGI_ID,
    .setup = wsgi_setup,
    .start = wsgi_start,
    .resume = wsgi_resume,
    .abandon = wsgi_abandon,
    .message = wsgi_message,
};
