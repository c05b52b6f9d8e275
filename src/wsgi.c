/*
 * wsgi.c — the PEP 3333 bridge.
 *
 * Called by a runner thread attached to the interpreter (the loop thread
 * when no pool serves). Per request it builds environ from a per-worker
 * template, calls the application with a fresh start_response object,
 * drives the returned iterable and frames what it yields into
 * job->resp.out; the loop writes those bytes. Nothing here touches a
 * socket.
 *
 * The WSGI subtleties, where they are handled:
 *   - start_response may be called late, from inside a generator, so the
 *     head is committed only when the first non-empty body chunk is
 *     produced, write() is called, or iteration ends (PEP 3333, "The
 *     start_response() Callable").
 *   - exc_info: a second call without it is an error; with it, before the
 *     head is committed it replaces status and headers, after it re-raises.
 *   - close() on the iterable is always called, whatever happened.
 *   - An exception before the head is committed becomes a logged traceback
 *     and a 500; after it, the connection is aborted — a truncated body is
 *     never passed off as complete.
 *   - wsgi.file_wrapper over a regular file is sent with sendfile(2).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "m0/config.h"
#include "m0/job.h"
#include "m0/log.h"
#include "m0/loop.h"
#include "m0/bus.h"
#include "m0/response.h"
#include "m0/sse.h"
#include "m0/wsgi.h"

/* Body bytes held back before the head commits, and queued per resume:
 * a response up to this size goes out with Content-Length in one write;
 * a longer one streams in pieces of about this size. */
#define STREAM_CHUNK (64 * 1024)

/* ------------------------------------------------------ interned strings */

static PyObject *s_REQUEST_METHOD, *s_SCRIPT_NAME, *s_PATH_INFO, *s_QUERY_STRING,
    *s_CONTENT_TYPE, *s_CONTENT_LENGTH, *s_SERVER_PROTOCOL, *s_REMOTE_ADDR,
    *s_REMOTE_PORT, *s_wsgi_input, *s_HTTP_1_1, *s_HTTP_1_0, *s_empty, *s_close,
    *s_fileno, *s_tell, *s_GET, *s_POST, *s_HEAD, *s_HTTP_HOST;

static const struct {
    PyObject **slot;
    const char *text;
} interned[] = {
    {&s_REQUEST_METHOD, "REQUEST_METHOD"}, {&s_SCRIPT_NAME, "SCRIPT_NAME"},
    {&s_PATH_INFO, "PATH_INFO"}, {&s_QUERY_STRING, "QUERY_STRING"},
    {&s_CONTENT_TYPE, "CONTENT_TYPE"}, {&s_CONTENT_LENGTH, "CONTENT_LENGTH"},
    {&s_SERVER_PROTOCOL, "SERVER_PROTOCOL"}, {&s_REMOTE_ADDR, "REMOTE_ADDR"},
    {&s_REMOTE_PORT, "REMOTE_PORT"}, {&s_wsgi_input, "wsgi.input"},
    {&s_HTTP_1_1, "HTTP/1.1"}, {&s_HTTP_1_0, "HTTP/1.0"}, {&s_empty, ""},
    {&s_close, "close"}, {&s_fileno, "fileno"}, {&s_tell, "tell"},
    {&s_GET, "GET"}, {&s_POST, "POST"}, {&s_HEAD, "HEAD"}, {&s_HTTP_HOST, "HTTP_HOST"},
};

static PyObject *the_app;       /* borrowed: py.c keeps it alive */
static int realtime;            /* --realtime: M0-Hold responses become held streams */
static PyObject *environ_template;

/* Environ keys for header names seen before: "user-agent" → HTTP_USER_AGENT.
 * Bounded, filled first come first served; misses build the key. */
#define KEY_CACHE 64
static struct {
    char name[40];
    uint32_t len;
    PyObject *key;
} key_cache[KEY_CACHE];
static unsigned key_cache_n;

/* ---------------------------------------------------------- wsgi.errors */

typedef struct {
    PyObject_HEAD
} ErrorsObject;

static PyObject *errors_write(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_ssize_t n;
    const char *p;
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "wsgi.errors.write() takes str, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    if ((p = PyUnicode_AsUTF8AndSize(arg, &n)) == NULL)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    m0_log_raw(p, (size_t)n);
    Py_END_ALLOW_THREADS
    return PyLong_FromSsize_t(n);
}

static PyObject *errors_writelines(PyObject *self, PyObject *seq)
{
    PyObject *it = PyObject_GetIter(seq), *item;
    if (it == NULL)
        return NULL;
    while ((item = PyIter_Next(it)) != NULL) {
        PyObject *r = errors_write(self, item);
        Py_DECREF(item);
        if (r == NULL) {
            Py_DECREF(it);
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *errors_flush(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_NONE;
}

static PyMethodDef errors_methods[] = {
    {"write", errors_write, METH_O, "write(str) -> int: write to the server's error log"},
    {"writelines", errors_writelines, METH_O, "writelines(iterable of str)"},
    {"flush", errors_flush, METH_NOARGS, "flush(): lines are unbuffered; a no-op"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ErrorsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "m0.ErrorStream",
    .tp_basicsize = sizeof(ErrorsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.errors: text written here goes to the server's error log (stderr).",
    .tp_methods = errors_methods,
    .tp_new = PyType_GenericNew,
};

/* ----------------------------------------------------------- wsgi.input */

typedef struct {
    PyObject_HEAD
    struct m0_job *job;    /* NULL once the request is over */
    uint64_t pos;          /* next body byte to hand out */
} InputObject;

static uint64_t input_left(InputObject *in)
{
    if (in->job == NULL || in->pos >= in->job->req.body_len)
        return 0;
    return in->job->req.body_len - in->pos;
}

/* Bytes [pos, pos+n) of the body as a bytes object; advances pos.
 * New reference. */
static PyObject *input_take(InputObject *in, uint64_t n)
{
    const struct m0_req *r = &in->job->req;
    if (in->pos + n <= r->body.len) {   /* in memory: one copy */
        PyObject *b = PyBytes_FromStringAndSize(r->body.data + in->pos, (Py_ssize_t)n);
        if (b != NULL)
            in->pos += n;
        return b;
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (b == NULL)
        return NULL;
    ssize_t got;
    Py_BEGIN_ALLOW_THREADS
    got = m0_req_body_read(r, in->pos, PyBytes_AS_STRING(b), (size_t)n);
    Py_END_ALLOW_THREADS
    if (got < 0) {
        Py_DECREF(b);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    in->pos += (uint64_t)got;
    if ((uint64_t)got < n && _PyBytes_Resize(&b, got) == -1)
        return NULL;
    return b;
}

static int size_arg(PyObject *const *args, Py_ssize_t nargs, const char *fn, Py_ssize_t *out)
{
    *out = -1;
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most 1 argument", fn);
        return -1;
    }
    if (nargs == 1 && args[0] != Py_None) {
        *out = PyLong_AsSsize_t(args[0]);
        if (*out == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

static PyObject *input_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    InputObject *in = (InputObject *)self;
    Py_ssize_t size;
    if (size_arg(args, nargs, "read", &size) == -1)
        return NULL;
    uint64_t left = input_left(in);
    uint64_t n = (size < 0 || (uint64_t)size > left) ? left : (uint64_t)size;
    if (n == 0)
        return PyBytes_FromStringAndSize("", 0);
    return input_take(in, n);
}

static PyObject *input_readline(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    InputObject *in = (InputObject *)self;
    Py_ssize_t size;
    if (size_arg(args, nargs, "readline", &size) == -1)
        return NULL;
    uint64_t left = input_left(in);
    uint64_t limit = (size < 0 || (uint64_t)size > left) ? left : (uint64_t)size;
    if (limit == 0)
        return PyBytes_FromStringAndSize("", 0);
    const struct m0_req *r = &in->job->req;
    /* Find the line end without copying: memory first, then the spill file
     * in blocks. */
    uint64_t n = 0;
    char block[8192];
    while (n < limit) {
        uint64_t at = in->pos + n;
        if (at < r->body.len) {
            size_t span = (size_t)((r->body.len - at) < (limit - n) ? (r->body.len - at) : (limit - n));
            const char *nl = memchr(r->body.data + at, '\n', span);
            if (nl != NULL) {
                n += (uint64_t)(nl - (r->body.data + at)) + 1;
                break;
            }
            n += span;
            continue;
        }
        size_t want = (size_t)((limit - n) < sizeof block ? (limit - n) : sizeof block);
        ssize_t got = m0_req_body_read(r, at, block, want);
        if (got <= 0)
            break;
        const char *nl = memchr(block, '\n', (size_t)got);
        if (nl != NULL) {
            n += (uint64_t)(nl - block) + 1;
            break;
        }
        n += (uint64_t)got;
    }
    return input_take(in, n);
}

static PyObject *input_readlines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t hint;
    if (size_arg(args, nargs, "readlines", &hint) == -1)
        return NULL;
    PyObject *lines = PyList_New(0);
    if (lines == NULL)
        return NULL;
    Py_ssize_t total = 0;
    for (;;) {
        PyObject *line = input_readline(self, NULL, 0);
        if (line == NULL) {
            Py_DECREF(lines);
            return NULL;
        }
        Py_ssize_t n = PyBytes_GET_SIZE(line);
        if (n == 0) {
            Py_DECREF(line);
            break;
        }
        int rc = PyList_Append(lines, line);
        Py_DECREF(line);
        if (rc == -1) {
            Py_DECREF(lines);
            return NULL;
        }
        total += n;
        if (hint > 0 && total >= hint)
            break;
    }
    return lines;
}

static PyObject *input_iternext(PyObject *self)
{
    PyObject *line = input_readline(self, NULL, 0);
    if (line != NULL && PyBytes_GET_SIZE(line) == 0) {
        Py_DECREF(line);
        return NULL;     /* StopIteration */
    }
    return line;
}

static PyMethodDef input_methods[] = {
    {"read", (PyCFunction)(void (*)(void))input_read, METH_FASTCALL, "read(size=-1) -> bytes"},
    {"readline", (PyCFunction)(void (*)(void))input_readline, METH_FASTCALL, "readline(size=-1) -> bytes"},
    {"readlines", (PyCFunction)(void (*)(void))input_readlines, METH_FASTCALL, "readlines(hint=-1) -> list of bytes"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject InputType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "m0.InputStream",
    .tp_basicsize = sizeof(InputObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.input: the request body (already received; chunked bodies decoded).",
    .tp_methods = input_methods,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = input_iternext,
};

/* ---------------------------------------------------- wsgi.file_wrapper */

typedef struct {
    PyObject_HEAD
    PyObject *filelike;
    Py_ssize_t blksize;
} FileWrapperObject;

static int filewrapper_init(PyObject *self, PyObject *args, PyObject *kw)
{
    FileWrapperObject *fw = (FileWrapperObject *)self;
    static char *kwlist[] = {"filelike", "blksize", NULL};
    PyObject *filelike;
    Py_ssize_t blksize = 8192;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n:file_wrapper", kwlist, &filelike, &blksize))
        return -1;
    if (blksize <= 0)
        blksize = 8192;
    Py_INCREF(filelike);
    Py_XSETREF(fw->filelike, filelike);
    fw->blksize = blksize;
    return 0;
}

static void filewrapper_dealloc(PyObject *self)
{
    Py_CLEAR(((FileWrapperObject *)self)->filelike);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *filewrapper_iternext(PyObject *self)
{
    FileWrapperObject *fw = (FileWrapperObject *)self;
    PyObject *data = PyObject_CallMethod(fw->filelike, "read", "n", fw->blksize);
    if (data == NULL)
        return NULL;
    if (PyBytes_Check(data) && PyBytes_GET_SIZE(data) == 0) {
        Py_DECREF(data);
        return NULL;
    }
    return data;
}

static PyObject *filewrapper_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    FileWrapperObject *fw = (FileWrapperObject *)self;
    if (fw->filelike != NULL && PyObject_HasAttr(fw->filelike, s_close))
        return PyObject_CallMethodNoArgs(fw->filelike, s_close);
    Py_RETURN_NONE;
}

static PyMethodDef filewrapper_methods[] = {
    {"close", filewrapper_close, METH_NOARGS, "close(): close the wrapped file"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FileWrapperType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "m0.FileWrapper",
    .tp_basicsize = sizeof(FileWrapperObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.file_wrapper(filelike, blksize=8192): a regular file is sent with sendfile(2).",
    .tp_methods = filewrapper_methods,
    .tp_init = filewrapper_init,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = filewrapper_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = filewrapper_iternext,
};

/* ------------------------------------------------------- start_response */

typedef struct {
    PyObject_HEAD
    struct m0_job *job;   /* NULL once the request is over */
    PyObject *status;     /* str, validated */
    PyObject *headers;    /* list of (str, str), validated */
    int status_code;
    int committed;        /* the head is in resp.out */
    int64_t content_length;
    int has_date, has_server, app_close;
    int hold;             /* M0-Hold: 0 none, 1 stream, 2 something we do not hold */
    size_t channel_len;   /* M0-Channel, validated */
    char channel[M0_CHANNEL_MAX + 1];
} StartResponseObject;

/* Has the head been "sent" in PEP 3333's sense? It has once a non-empty
 * body string was produced, even while we still hold it back to learn the
 * body's length. */
static int head_sent(const StartResponseObject *sr)
{
    return sr->committed || (sr->job != NULL && sr->job->produced > 0);
}

static void start_response_dealloc(PyObject *self)
{
    StartResponseObject *sr = (StartResponseObject *)self;
    Py_CLEAR(sr->status);
    Py_CLEAR(sr->headers);
    Py_TYPE(self)->tp_free(self);
}

/* Headers the server owns on a held stream's head. */
static int is_stream_owned(const char *n, Py_ssize_t len)
{
    static const char *const own[] = {"content-type", "content-length", "cache-control", "x-accel-buffering"};
    for (size_t i = 0; i < M0_ARRAY_LEN(own); i++) {
        if ((Py_ssize_t)strlen(own[i]) == len && strncasecmp(n, own[i], (size_t)len) == 0)
            return 1;
    }
    return 0;
}

static int is_hop_by_hop(const char *n, Py_ssize_t len)
{
    static const char *const hop[] = {"connection", "keep-alive", "transfer-encoding", "te",
                                      "trailer", "upgrade", "proxy-connection"};
    for (size_t i = 0; i < M0_ARRAY_LEN(hop); i++) {
        if ((Py_ssize_t)strlen(hop[i]) == len && strncasecmp(n, hop[i], (size_t)len) == 0)
            return 1;
    }
    return 0;
}

/* Latin-1 bytes of a str (PEP 3333 "native strings"). For the common ASCII
 * case this borrows the str's own buffer. *owner receives a new reference
 * to release, or NULL. */
static const char *latin1(PyObject *s, Py_ssize_t *len, PyObject **owner)
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

/* Validate status and headers as PEP 3333 requires, recording what the
 * head's framing needs. Raises and returns -1 on a violation. */
static int check_head(StartResponseObject *sr, PyObject *status, PyObject *headers)
{
    Py_ssize_t slen;
    if (!PyUnicode_Check(status)) {
        PyErr_Format(PyExc_TypeError, "status must be str, not %.100s", Py_TYPE(status)->tp_name);
        return -1;
    }
    const char *st = PyUnicode_AsUTF8AndSize(status, &slen);
    if (st == NULL)
        return -1;
    if (slen < 3 || st[0] < '2' || st[0] > '5' || st[1] < '0' || st[1] > '9' || st[2] < '0' ||
        st[2] > '9' || (slen > 3 && st[3] != ' ') || !m0_http_is_field_value(st, (size_t)slen)) {
        PyErr_Format(PyExc_ValueError, "invalid status %R (want e.g. '200 OK'; 1xx are the server's)", status);
        return -1;
    }
    if (!PyList_Check(headers)) {
        PyErr_Format(PyExc_TypeError, "headers must be a list, not %.100s", Py_TYPE(headers)->tp_name);
        return -1;
    }
    sr->status_code = (st[0] - '0') * 100 + (st[1] - '0') * 10 + (st[2] - '0');
    sr->content_length = -1;
    sr->has_date = sr->has_server = sr->app_close = 0;
    sr->hold = 0;
    sr->channel_len = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(headers); i++) {
        PyObject *t = PyList_GET_ITEM(headers, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(t, 1))) {
            PyErr_Format(PyExc_TypeError, "header %zd must be a (str, str) tuple, got %R", i, t);
            return -1;
        }
        PyObject *own_n, *own_v;
        Py_ssize_t nl, vl;
        const char *n = latin1(PyTuple_GET_ITEM(t, 0), &nl, &own_n);
        if (n == NULL)
            return -1;
        const char *v = latin1(PyTuple_GET_ITEM(t, 1), &vl, &own_v);
        if (v == NULL) {
            Py_XDECREF(own_n);
            return -1;
        }
        int ok = m0_http_is_token(n, (size_t)nl) && m0_http_is_field_value(v, (size_t)vl);
        if (ok && nl == 14 && strncasecmp(n, "content-length", 14) == 0) {
            char *end;
            char num[24];
            ok = vl > 0 && vl < (Py_ssize_t)sizeof num;
            if (ok) {
                memcpy(num, v, (size_t)vl);
                num[vl] = '\0';
                errno = 0;
                long long cl = strtoll(num, &end, 10);
                ok = errno == 0 && *end == '\0' && cl >= 0 && num[0] >= '0' && num[0] <= '9';
                sr->content_length = cl;
            }
        } else if (nl == 4 && strncasecmp(n, "date", 4) == 0) {
            sr->has_date = 1;
        } else if (nl == 6 && strncasecmp(n, "server", 6) == 0) {
            sr->has_server = 1;
        } else if (nl == 10 && strncasecmp(n, "connection", 10) == 0) {
            sr->app_close |= m0_http_list_has(v, (size_t)vl, "close");
        } else if (nl == 7 && strncasecmp(n, "m0-hold", 7) == 0) {
            sr->hold = (vl == 6 && strncasecmp(v, "stream", 6) == 0) ? 1 : 2;
        } else if (ok && nl == 10 && strncasecmp(n, "m0-channel", 10) == 0) {
            const char *why = m0_sse_channel_error(v, (size_t)vl);
            if (why != NULL) {
                Py_XDECREF(own_n);
                Py_XDECREF(own_v);
                PyErr_Format(PyExc_ValueError, "invalid M0-Channel %R: %s", PyTuple_GET_ITEM(t, 1), why);
                return -1;
            }
            memcpy(sr->channel, v, (size_t)vl);
            sr->channel_len = (size_t)vl;
        }
        Py_XDECREF(own_n);
        Py_XDECREF(own_v);
        if (!ok) {
            PyErr_Format(PyExc_ValueError, "invalid header %R", t);
            return -1;
        }
    }
    return 0;
}

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
        if (head_sent(sr)) {
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
    } else if (sr->status != NULL) {
        PyErr_SetString(PyExc_AssertionError, "start_response() called again without exc_info");
        return NULL;
    }
    if (check_head(sr, status, headers) == -1)
        return NULL;
    if (sr->hold == 1 && sr->channel_len == 0) {
        PyErr_SetString(PyExc_ValueError, "M0-Hold: stream needs an M0-Channel header");
        return NULL;
    }
    Py_INCREF(status);
    Py_XSETREF(sr->status, status);
    Py_INCREF(headers);
    Py_XSETREF(sr->headers, headers);
    return PyObject_GetAttrString(self, "write");
}

static void emit(struct m0_job *job, StartResponseObject *sr, const char *p, size_t n);
static void commit_head(struct m0_job *job, StartResponseObject *sr, int64_t body_len);

static PyObject *start_response_write(PyObject *self, PyObject *data)
{
    StartResponseObject *sr = (StartResponseObject *)self;
    Py_buffer view;
    if (sr->job == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "write() called after the request ended");
        return NULL;
    }
    if (sr->status == NULL) {
        PyErr_SetString(PyExc_AssertionError, "write() called before start_response()");
        return NULL;
    }
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "write() takes bytes, not %.100s", Py_TYPE(data)->tp_name);
        return NULL;
    }
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) == -1)
        return NULL;
    /* PEP 3333: write() must send the head before any data. */
    if (!sr->committed)
        commit_head(sr->job, sr, -1);
    emit(sr->job, sr, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyMethodDef start_response_methods[] = {
    {"write", start_response_write, METH_O, "write(bytes): the PEP 3333 write() callable"},
    {NULL, NULL, 0, NULL},
};

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

/* The head is committed: frame the body bytes held back until now. */
static void release_pending(struct m0_job *job, StartResponseObject *sr)
{
    if (job->pending.len > 0) {
        size_t n = job->pending.len;
        job->pending.len = 0;
        job->produced -= n;
        emit(job, sr, job->pending.data, n);
    }
    m0_buf_reset(&job->pending);
}

/* Serialize the status line and the application's headers, then let
 * m0_head_finish choose the framing. body_len is the whole body's size
 * when it is known (iteration is over), else -1. Called once per response. */
static void commit_head(struct m0_job *job, StartResponseObject *sr, int64_t body_len)
{
    struct m0_buf *b = &job->resp.out;
    const struct m0_req *r = &job->req;
    Py_ssize_t slen;
    const char *st = PyUnicode_AsUTF8AndSize(sr->status, &slen);
    /* A hold is taken only where it can be kept: --realtime, a 2xx, a GET
     * (not HEAD). Anywhere else the same response goes out as an ordinary
     * short one — the property that lets hold views run under any server. */
    int hold = realtime && sr->hold == 1 && sr->status_code / 100 == 2 && !(r->flags & M0_REQ_HEAD);

    m0_buf_puts(b, "HTTP/1.1 ");
    m0_buf_append(b, st, (size_t)slen);
    if (slen == 3) {     /* RFC 9112 §4: the SP before the reason is not optional */
        m0_buf_puts(b, " ");
        m0_buf_puts(b, m0_status_reason(sr->status_code));
    }
    m0_buf_puts(b, "\r\n");
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(sr->headers); i++) {
        PyObject *t = PyList_GET_ITEM(sr->headers, i), *own_n, *own_v;
        Py_ssize_t nl, vl;
        const char *n = latin1(PyTuple_GET_ITEM(t, 0), &nl, &own_n);
        const char *v = latin1(PyTuple_GET_ITEM(t, 1), &vl, &own_v);
        /* Validated in start_response; hop-by-hop fields are the server's
         * business (PEP 3333 §"Other HTTP Features"), Connection: close is
         * honoured through app_close. */
        /* M0-* instruct this server and never reach the client. */
        int internal = nl >= 3 && strncasecmp(n, "m0-", 3) == 0;
        if (n != NULL && v != NULL && !internal && !is_hop_by_hop(n, nl) &&
            !(hold && is_stream_owned(n, nl)) &&
            !(nl == 14 && strncasecmp(n, "content-length", 14) == 0)) {
            m0_buf_append(b, n, (size_t)nl);
            m0_buf_puts(b, ": ");
            m0_buf_append(b, v, (size_t)vl);
            m0_buf_puts(b, "\r\n");
        }
        Py_XDECREF(own_n);
        Py_XDECREF(own_v);
    }
    PyErr_Clear();

    if (hold) {
        /* The head of a Server-Sent-Events stream (WHATWG SSE §9.2): no
         * length, no chunking — close-delimited; proxies told not to buffer.
         * The view's body follows as the stream's first bytes. */
        m0_buf_puts(b, "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                       "X-Accel-Buffering: no\r\n");
        m0_head_server_fields(b, sr->has_date, sr->has_server);
        m0_buf_puts(b, "Connection: close\r\n\r\n");
        job->framing = M0_FRAME_CLOSE;
        job->keep = 0;
        job->app_length = -1;
        job->resp.status = sr->status_code;
        job->resp.flags |= M0_RESP_HEAD_SENT | M0_RESP_CLOSE | M0_RESP_HOLD;
        memcpy(job->hold_channel, sr->channel, sr->channel_len);
        job->hold_channel[sr->channel_len] = '\0';
        job->hold_channel_len = (uint16_t)sr->channel_len;
        const struct m0_hdr *lei = m0_req_header(r, "last-event-id");
        job->hold_last_id = lei ? m0_sse_parse_last_id(lei->value, lei->value_len) : 0;
        sr->committed = 1;
        release_pending(job, sr);
        return;
    }

    int head = (r->flags & M0_REQ_HEAD) != 0;
    int bodiless = m0_status_bodiless(sr->status_code);
    struct m0_head_info hi = {
        .status = sr->status_code,
        .http_minor = r->http_minor,
        .keepalive = (r->flags & M0_REQ_KEEPALIVE) && !job->draining,
        .head = head,
        .app_close = sr->app_close,
        .content_length = sr->content_length,
        .body_len = bodiless ? -1 : body_len,
        .has_date = sr->has_date,
        .has_server = sr->has_server,
    };
    job->framing = m0_head_finish(b, &hi, &job->keep);
    job->app_length = (job->framing == M0_FRAME_LENGTH)
                          ? (sr->content_length >= 0 ? sr->content_length : hi.body_len)
                          : -1;
    job->resp.status = sr->status_code;
    job->resp.flags |= M0_RESP_HEAD_SENT;
    if (!job->keep)
        job->resp.flags |= M0_RESP_CLOSE;
    sr->committed = 1;
    release_pending(job, sr);
}

/* One piece of body from the application. */
static void emit(struct m0_job *job, StartResponseObject *sr, const char *p, size_t n)
{
    if (n == 0)
        return;
    if (!sr->committed) {
        int discard = (job->req.flags & M0_REQ_HEAD) || m0_status_bodiless(sr->status_code);
        if (!discard)
            m0_buf_append(&job->pending, p, n);
        job->produced += n;
        return;
    }
    switch ((enum m0_framing)job->framing) {
    case M0_FRAME_NONE:
        break;
    case M0_FRAME_LENGTH: {
        uint64_t room = (uint64_t)job->app_length > job->produced ? (uint64_t)job->app_length - job->produced : 0;
        if (n > room) {
            /* More than the application declared: never send bytes past
             * Content-Length (they would be read as the next response). */
            if (!(job->resp.flags & M0_RESP_CLOSE))
                m0_warn("%s %s: body exceeds Content-Length %lld; truncated", job->req.method,
                        job->req.target, (long long)job->app_length);
            job->resp.flags |= M0_RESP_CLOSE;
            n = (size_t)room;
        }
        m0_buf_append(&job->resp.out, p, n);
        break;
    }
    case M0_FRAME_CHUNKED:
        m0_buf_append_chunk(&job->resp.out, p, n);
        break;
    case M0_FRAME_CLOSE:
        m0_buf_append(&job->resp.out, p, n);
        break;
    }
    job->produced += n;
    job->resp.body_bytes += n;
}

/* ----------------------------------------------------------- lifecycle */

static void log_app_error(struct m0_job *job, const char *when)
{
    m0_error("error %s %s %s; traceback follows", when, job->req.method, job->req.target);
    PyErr_Print();
}

/* Call the iterable's close() (always owed, PEP 3333) and drop runner
 * state. Detaches wsgi.input and start_response from the job so an
 * application that kept them cannot reach a reused request. */
static void finish(struct m0_job *job)
{
    PyObject *result = job->app_result;
    job->app_result = NULL;
    Py_CLEAR(job->app_iter);
    Py_CLEAR(job->cur_item);
    if (result != NULL) {
        if (PyObject_HasAttr(result, s_close)) {
            PyObject *r = PyObject_CallMethodNoArgs(result, s_close);
            if (r == NULL)
                log_app_error(job, "in close() of the response to");
            Py_XDECREF(r);
        }
        Py_DECREF(result);
    }
    if (job->input != NULL) {
        ((InputObject *)job->input)->job = NULL;
        Py_CLEAR(job->input);
    }
    if (job->start_response != NULL) {
        ((StartResponseObject *)job->start_response)->job = NULL;
        Py_CLEAR(job->start_response);
    }
    m0_buf_reset(&job->pending);
    if (job->pending.cap > STREAM_CHUNK * 2)
        m0_buf_free(&job->pending);
}

/* An application error: 500 when the head was not sent, else abort. */
static int fail(struct m0_job *job, size_t out_mark, const char *when)
{
    StartResponseObject *sr = job->start_response;
    log_app_error(job, when);
    if (sr != NULL && !sr->committed && head_sent(sr)) {
        /* Send what the application produced, then abort: the client sees
         * a truncated response, never one passed off as complete. */
        commit_head(job, sr, -1);
    }
    if (sr == NULL || !sr->committed) {
        job->resp.out.len = out_mark;     /* keep only a queued 100 Continue */
        m0_error_response(&job->resp.out, 500, "the application raised an error; see the server log",
                          1, (job->req.flags & M0_REQ_HEAD) != 0);
        job->resp.status = 500;
        job->resp.flags |= M0_RESP_HEAD_SENT | M0_RESP_CLOSE;
    } else {
        job->resp.flags |= M0_RESP_ABORT;
    }
    job->resp.flags |= M0_RESP_DONE;
    finish(job);
    return M0_DONE;
}

/* Iteration is over: commit the head if it is still held back, end the
 * body's framing, check the declared length. */
static int complete(struct m0_job *job, size_t out_mark)
{
    StartResponseObject *sr = job->start_response;
    Py_CLEAR(job->app_iter);
    Py_CLEAR(job->cur_item);
    if (sr->status == NULL) {
        PyErr_SetString(PyExc_AssertionError, "the application returned without calling start_response()");
        return fail(job, out_mark, "in");
    }
    if (!sr->committed)
        commit_head(job, sr, (int64_t)job->produced);
    if (job->framing == M0_FRAME_CHUNKED)
        m0_buf_puts(&job->resp.out, "0\r\n\r\n");
    else if (job->framing == M0_FRAME_LENGTH && job->produced < (uint64_t)job->app_length) {
        m0_error("%s %s: body shorter than its Content-Length (%llu of %lld bytes); aborting the connection",
                 job->req.method, job->req.target, (unsigned long long)job->produced,
                 (long long)job->app_length);
        job->resp.flags |= M0_RESP_ABORT;
    }
    job->resp.flags |= M0_RESP_DONE;
    finish(job);
    return M0_DONE;
}

/* Is everything the client will get already produced? PEP 3333: "the
 * server should stop iterating over the response when enough data has
 * been sent" — the declared Content-Length is met, or nothing is sent at
 * all (HEAD, 204, 304) once the head is committed. */
static int enough(const struct m0_job *job, const StartResponseObject *sr)
{
    if (!sr->committed)
        return 0;
    if (job->framing == M0_FRAME_NONE)
        return 1;
    return job->framing == M0_FRAME_LENGTH && job->produced >= (uint64_t)job->app_length;
}

/* After producing body bytes: commit the head when waiting longer is
 * pointless or impossible. */
static void maybe_commit(struct m0_job *job, StartResponseObject *sr)
{
    if (sr->committed)
        return;
    int discard = (job->req.flags & M0_REQ_HEAD) || m0_status_bodiless(sr->status_code);
    if (sr->content_length >= 0 && (discard || job->produced >= (uint64_t)sr->content_length))
        commit_head(job, sr, (int64_t)job->produced);   /* the declared length decides */
    else if (job->produced >= STREAM_CHUNK)
        commit_head(job, sr, -1);   /* too long to hold: stream it (HEAD: no length) */
}

/*
 * Drain the iterator until it ends, enough was sent, or a stream chunk is
 * queued. A large item is produced in STREAM_CHUNK slices, one per resume,
 * so a slow reader holds at most a chunk or two of copies, whatever the
 * application hands over.
 */
static int pump(struct m0_job *job, size_t out_mark)
{
    StartResponseObject *sr = job->start_response;

    for (;;) {
        if (job->cur_item != NULL) {
            PyObject *item = job->cur_item;
            size_t len = (size_t)PyBytes_GET_SIZE(item);
            size_t n = len - job->cur_off < STREAM_CHUNK ? len - job->cur_off : STREAM_CHUNK;
            emit(job, sr, PyBytes_AS_STRING(item) + job->cur_off, n);
            job->cur_off += n;
            if (job->cur_off == len)
                Py_CLEAR(job->cur_item);
            maybe_commit(job, sr);
            if (enough(job, sr))
                return complete(job, out_mark);
            if (sr->committed && m0_buf_unread(&job->resp.out) >= STREAM_CHUNK)
                return M0_AGAIN;            /* wait for the loop to write it */
            continue;
        }
        PyObject *item = PyIter_Next(job->app_iter);
        if (item == NULL)
            break;
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "the response iterable yielded %.100s, not bytes", Py_TYPE(item)->tp_name);
            Py_DECREF(item);
            return fail(job, out_mark, "in the body of");
        }
        if (PyBytes_GET_SIZE(item) == 0) {
            Py_DECREF(item);
            continue;
        }
        if (!sr->committed && sr->status == NULL) {
            Py_DECREF(item);
            PyErr_SetString(PyExc_AssertionError, "body yielded before start_response()");
            return fail(job, out_mark, "in");
        }
        job->cur_item = item;
        job->cur_off = 0;
    }
    if (PyErr_Occurred())
        return fail(job, out_mark, "in the body of");
    return complete(job, out_mark);
}

/* A file_wrapper over a regular file: the head now, the bytes by sendfile. */
static int try_sendfile(struct m0_job *job, PyObject *result, size_t out_mark)
{
    StartResponseObject *sr = job->start_response;
    FileWrapperObject *fw = (FileWrapperObject *)result;
    if (sr->status == NULL || !PyObject_HasAttr(fw->filelike, s_fileno))
        return M0_AGAIN;
    PyObject *fdobj = PyObject_CallMethodNoArgs(fw->filelike, s_fileno);
    int fd = fdobj ? (int)PyLong_AsLong(fdobj) : -1;
    Py_XDECREF(fdobj);
    if (fd < 0 || PyErr_Occurred()) {
        PyErr_Clear();
        return M0_AGAIN;
    }
    struct stat stt;
    if (fstat(fd, &stt) == -1 || !S_ISREG(stt.st_mode))
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
    if (pos < 0 || pos > stt.st_size)
        return M0_AGAIN;
    uint64_t len = (uint64_t)(stt.st_size - pos);
    if (sr->content_length >= 0 && (uint64_t)sr->content_length < len)
        len = (uint64_t)sr->content_length;
    int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (dupfd == -1)
        return M0_AGAIN;

    commit_head(job, sr, (int64_t)len);
    if (job->framing == M0_FRAME_LENGTH) {
        job->resp.file_fd = dupfd;
        job->resp.file_off = pos;
        job->resp.file_left = len;
        job->resp.body_bytes = len;
        if (sr->content_length >= 0 && (uint64_t)sr->content_length > len) {
            m0_error("%s %s: file shorter than its Content-Length; aborting after it",
                     job->req.method, job->req.target);
            job->resp.flags |= M0_RESP_ABORT;
        }
    } else {
        close(dupfd);
    }
    job->resp.flags |= M0_RESP_DONE;
    (void)out_mark;
    finish(job);
    return M0_DONE;
}

/* URL-decode the path (RFC 3986 §2.1) into dst as bytes; a '%' not
 * followed by two hex digits is kept as is. Returns the length. */
static size_t percent_decode(const char *s, size_t n, char *dst)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2])) {
            char hex[3] = {s[i + 1], s[i + 2], 0};
            dst[o++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            dst[o++] = s[i];
        }
    }
    return o;
}

static PyObject *header_key(const struct m0_hdr *h)
{
    for (unsigned i = 0; i < key_cache_n; i++) {
        if (key_cache[i].len == h->name_len && strncasecmp(key_cache[i].name, h->name, h->name_len) == 0) {
            Py_INCREF(key_cache[i].key);
            return key_cache[i].key;
        }
    }
    char small[5 + 256];
    char *key = h->name_len <= 256 ? small : m0_xmalloc(5 + h->name_len);
    memcpy(key, "HTTP_", 5);
    for (uint32_t i = 0; i < h->name_len; i++) {
        char ch = h->name[i];
        key[5 + i] = ch == '-' ? '_' : (char)toupper((unsigned char)ch);
    }
    PyObject *k = PyUnicode_FromStringAndSize(key, 5 + h->name_len);
    if (key != small)
        free(key);
    if (k == NULL)
        return NULL;
    PyUnicode_InternInPlace(&k);
    if (key_cache_n < KEY_CACHE && h->name_len < sizeof key_cache[0].name) {
        memcpy(key_cache[key_cache_n].name, h->name, h->name_len);
        key_cache[key_cache_n].len = h->name_len;
        Py_INCREF(k);
        key_cache[key_cache_n].key = k;
        key_cache_n++;
    }
    return k;
}

static int set_str(PyObject *d, PyObject *key, const char *s, size_t n)
{
    PyObject *v = PyUnicode_DecodeLatin1(s, (Py_ssize_t)n, NULL);
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItem(d, key, v);
    Py_DECREF(v);
    return rc;
}

/* environ for job: a copy of the template plus the request (PEP 3333
 * "environ Variables"). New reference. */
static PyObject *build_environ(struct m0_job *job, InputObject *input)
{
    const struct m0_req *r = &job->req;
    PyObject *env = PyDict_Copy(environ_template);
    if (env == NULL)
        return NULL;

    PyObject *method = strcmp(r->method, "GET") == 0 ? s_GET : strcmp(r->method, "POST") == 0 ? s_POST
                       : strcmp(r->method, "HEAD") == 0 ? s_HEAD : NULL;
    if (method != NULL ? PyDict_SetItem(env, s_REQUEST_METHOD, method) : set_str(env, s_REQUEST_METHOD, r->method, r->method_len))
        goto fail;
    char small[1024];
    char *path = r->path_len < sizeof small ? small : m0_xmalloc(r->path_len + 1);
    size_t plen = percent_decode(r->path, r->path_len, path);
    int rc = set_str(env, s_PATH_INFO, path, plen);
    if (path != small)
        free(path);
    if (rc == -1)
        goto fail;
    if (r->query_len == 0 ? PyDict_SetItem(env, s_QUERY_STRING, s_empty) : set_str(env, s_QUERY_STRING, r->query, r->query_len))
        goto fail;
    if (PyDict_SetItem(env, s_SERVER_PROTOCOL, r->http_minor ? s_HTTP_1_1 : s_HTTP_1_0) == -1)
        goto fail;
    if (set_str(env, s_REMOTE_ADDR, job->remote_addr, strlen(job->remote_addr)) == -1)
        goto fail;
    char port[8];
    int pn = snprintf(port, sizeof port, "%u", job->remote_port);
    if (set_str(env, s_REMOTE_PORT, port, (size_t)pn) == -1)
        goto fail;

    int have_cl = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len == 12 && strncasecmp(h->name, "content-type", 12) == 0) {
            if (set_str(env, s_CONTENT_TYPE, h->value, h->value_len) == -1)
                goto fail;
            continue;
        }
        if (h->name_len == 14 && strncasecmp(h->name, "content-length", 14) == 0) {
            have_cl = 1;
            if (set_str(env, s_CONTENT_LENGTH, h->value, h->value_len) == -1)
                goto fail;
            continue;
        }
        /* A header whose name has '_' would collide with its '-' twin after
         * the CGI transform; drop it rather than let a client spoof one
         * (the choice nginx and gunicorn make). */
        if (memchr(h->name, '_', h->name_len) != NULL)
            continue;
        PyObject *key = header_key(h);
        if (key == NULL)
            goto fail;
        PyObject *prev = PyDict_GetItemWithError(env, key);   /* borrowed */
        PyObject *val;
        if (prev != NULL) {
            /* Repeated field lines combine with ", " (RFC 9110 §5.3);
             * Cookie lines with "; " (RFC 6265 §5.4). */
            int cookie = h->name_len == 6 && strncasecmp(h->name, "cookie", 6) == 0;
            PyObject *more = PyUnicode_DecodeLatin1(h->value, h->value_len, NULL);
            val = more ? PyUnicode_FromFormat(cookie ? "%U; %U" : "%U, %U", prev, more) : NULL;
            Py_XDECREF(more);
        } else if (PyErr_Occurred()) {
            val = NULL;
        } else {
            val = PyUnicode_DecodeLatin1(h->value, h->value_len, NULL);
        }
        rc = val ? PyDict_SetItem(env, key, val) : -1;
        Py_XDECREF(val);
        Py_DECREF(key);
        if (rc == -1)
            goto fail;
    }
    /* A chunked body has no Content-Length on the wire; it is fully received
     * and decoded by now, so tell frameworks (which read CONTENT_LENGTH
     * bytes) its real size. */
    if (!have_cl && (r->flags & M0_REQ_CHUNKED)) {
        int cn = snprintf(small, sizeof small, "%llu", (unsigned long long)r->body_len);
        if (set_str(env, s_CONTENT_LENGTH, small, (size_t)cn) == -1)
            goto fail;
    }
    /* RFC 9112 §3.2.2: an absolute-form target's authority replaces Host. */
    if (r->authority != NULL && set_str(env, s_HTTP_HOST, r->authority, r->authority_len) == -1)
        goto fail;
    if (PyDict_SetItem(env, s_wsgi_input, (PyObject *)input) == -1)
        goto fail;
    return env;
fail:
    Py_DECREF(env);
    return NULL;
}

int m0_wsgi_start(struct m0_job *job)
{
    size_t out_mark = job->resp.out.len;     /* a 100 Continue may be queued */
    PyObject *env = NULL, *result = NULL;

    job->app_length = -1;
    job->produced = 0;
    job->framing = M0_FRAME_NONE;
    InputObject *input = PyObject_New(InputObject, &InputType);
    StartResponseObject *sr = PyObject_New(StartResponseObject, &StartResponseType);
    if (input == NULL || sr == NULL) {
        Py_XDECREF(input);
        Py_XDECREF(sr);
        return fail(job, out_mark, "preparing");
    }
    input->job = job;
    input->pos = 0;
    sr->job = job;
    sr->status = sr->headers = NULL;
    sr->committed = 0;
    sr->status_code = 0;
    sr->content_length = -1;
    sr->has_date = sr->has_server = sr->app_close = 0;
    job->input = input;
    job->start_response = sr;

    env = build_environ(job, input);
    if (env == NULL)
        return fail(job, out_mark, "building environ for");
    result = PyObject_CallFunctionObjArgs(the_app, env, (PyObject *)sr, NULL);
    Py_DECREF(env);
    if (result == NULL)
        return fail(job, out_mark, "in");
    job->app_result = result;

    if (Py_IS_TYPE(result, &FileWrapperType)) {
        int rc = try_sendfile(job, result, out_mark);
        if (rc != M0_AGAIN)
            return rc;
        if (PyErr_Occurred())
            return fail(job, out_mark, "in the file_wrapper of");
    }
    if (PyList_CheckExact(result) || PyTuple_CheckExact(result)) {
        /* The common case: the whole body is here; frame it in one go. */
        PyObject *seq = result;
        Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
        PyObject **items = PySequence_Fast_ITEMS(seq);
        if (sr->status == NULL) {
            PyErr_SetString(PyExc_AssertionError, "the application returned without calling start_response()");
            return fail(job, out_mark, "in");
        }
        uint64_t total = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            if (!PyBytes_Check(items[i])) {
                PyErr_Format(PyExc_TypeError, "the response iterable yielded %.100s, not bytes",
                             Py_TYPE(items[i])->tp_name);
                return fail(job, out_mark, "in the body of");
            }
            total += (uint64_t)PyBytes_GET_SIZE(items[i]);
        }
        if (!sr->committed)
            commit_head(job, sr, (int64_t)total);
        if (total > 4 * STREAM_CHUNK && !enough(job, sr)) {
            /* Too big to copy whole for a reader of unknown speed: the
             * length is known, the bytes go out in slices under credit. */
            job->app_iter = PyObject_GetIter(result);
            if (job->app_iter == NULL)
                return fail(job, out_mark, "iterating the response of");
            return pump(job, out_mark);
        }
        for (Py_ssize_t i = 0; i < count; i++)
            emit(job, sr, PyBytes_AS_STRING(items[i]), (size_t)PyBytes_GET_SIZE(items[i]));
        if ((job->req.flags & M0_REQ_HEAD) || m0_status_bodiless(sr->status_code))
            job->produced = total;
        return complete(job, out_mark);
    }
    job->app_iter = PyObject_GetIter(result);
    if (job->app_iter == NULL)
        return fail(job, out_mark, "iterating the response of");
    return pump(job, out_mark);
}

int m0_wsgi_resume(struct m0_job *job)
{
    if (job->app_iter == NULL)
        return M0_DONE;
    return pump(job, job->resp.out.len);
}

void m0_wsgi_abandon(struct m0_job *job)
{
    if (job->app_result != NULL || job->app_iter != NULL || job->cur_item != NULL || job->input != NULL)
        finish(job);
}

/* --------------------------------------------------------------- setup */

int m0_wsgi_setup(void *app, const struct m0_config *cfg, int multithread)
{
    the_app = app;
    realtime = cfg->realtime;
    for (size_t i = 0; i < M0_ARRAY_LEN(interned); i++) {
        if (*interned[i].slot == NULL && (*interned[i].slot = PyUnicode_InternFromString(interned[i].text)) == NULL)
            return M0_ERR;
    }
    char *host, *path;
    int port;
    char err[256];
    if (m0_config_bind_parts(cfg, &host, &port, &path, err, sizeof err) != M0_OK) {
        PyErr_SetString(PyExc_ValueError, err);
        return M0_ERR;
    }
    PyObject *m = PyImport_ImportModule("m0");
    if (m == NULL)
        return M0_ERR;
    PyObject *errors = PyObject_GetAttrString(m, "errors");
    Py_DECREF(m);
    if (errors == NULL)
        return M0_ERR;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%d", cfg->bound_port ? cfg->bound_port : port);
    Py_CLEAR(environ_template);
    environ_template = Py_BuildValue(
        "{s:(ii),s:s,s:O,s:O,s:O,s:O,s:O,s:s,s:s,s:s}",
        "wsgi.version", 1, 0,
        "wsgi.url_scheme", "http",
        "wsgi.errors", errors,
        "wsgi.multithread", multithread ? Py_True : Py_False,
        "wsgi.multiprocess", cfg->workers > 1 ? Py_True : Py_False,
        "wsgi.run_once", Py_False,
        "wsgi.file_wrapper", (PyObject *)&FileWrapperType,
        "SERVER_NAME", path ? "localhost" : host,
        "SERVER_PORT", path ? "" : portstr,
        "SCRIPT_NAME", "");
    Py_DECREF(errors);
    return environ_template ? M0_OK : M0_ERR;
}

static PyObject *py_publish(PyObject *self, PyObject *args)
{
    (void)self;
    const char *channel, *event, *data;
    Py_ssize_t clen, dlen;
    if (!PyArg_ParseTuple(args, "y#zy#:publish", &channel, &clen, &event, &data, &dlen))
        return NULL;
    uint64_t id;
    int rc, own = pthread_equal(pthread_self(), m0_loop_thread);
    Py_BEGIN_ALLOW_THREADS
    rc = m0_bus_publish(channel, (size_t)clen, event, data, (size_t)dlen, own, &id);
    Py_END_ALLOW_THREADS
    if (rc == M0_AGAIN)
        Py_RETURN_NONE;
    if (rc != M0_OK) {
        PyErr_SetString(PyExc_ValueError, "invalid channel or event too large for the bus");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(id);
}

static PyMethodDef m0_functions[] = {
    {"publish", py_publish, METH_VARARGS,
     "publish(channel: bytes, event: str | None, data: bytes) -> int | None: frame one SSE event "
     "and write it to every worker's bus under the shared lock; returns its global id, None "
     "without --realtime. m0pub.publish is the documented API."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef m0_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "m0",
    .m_doc = "m0serve's built-in module: the WSGI bridge's types and the bus's event counter.",
    .m_size = -1,
    .m_methods = m0_functions,
};

void *m0_wsgi_module_init(void)
{
    PyTypeObject *types[] = {&ErrorsType, &InputType, &FileWrapperType, &StartResponseType};
    for (size_t i = 0; i < M0_ARRAY_LEN(types); i++) {
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    }
    PyObject *m = PyModule_Create(&m0_module);
    if (m == NULL)
        return NULL;
    PyObject *errors = PyObject_CallNoArgs((PyObject *)&ErrorsType);
    if (errors == NULL || PyModule_AddObject(m, "errors", errors) == -1 ||
        PyModule_AddObjectRef(m, "FileWrapper", (PyObject *)&FileWrapperType) == -1) {
        Py_XDECREF(errors);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
