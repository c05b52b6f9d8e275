/*
 * wsgi_io.c — wsgi.errors, wsgi.input and wsgi.file_wrapper (PEP 3333
 * "Input and Error Streams", "Optional Platform-Specific File Handling").
 *
 * wsgi.input serves the request body the loop received (chunked bodies
 * decoded; bodies over the in-memory limit from an unlinked temporary
 * file, read without the GIL). It returns EOF at the body's end, so it is
 * safe to read without CONTENT_LENGTH (wsgi.input_terminated).
 */
#include "m0/wsgi.h"

#include <string.h>

#include "m0/log.h"

/* Per process, read-only once interned: "close". */
static PyObject *s_close_str;

/* ---------------------------------------------------------- wsgi.errors */

typedef struct {
    PyObject_HEAD
} m0_ErrorsObject;

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

PyTypeObject m0_ErrorsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "m0.ErrorStream",
    .tp_basicsize = sizeof(m0_ErrorsObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.errors: text written here goes to the server's error log (stderr).",
    .tp_methods = errors_methods,
    .tp_new = PyType_GenericNew,
};

/* ----------------------------------------------------------- wsgi.input */

/* A lazy body (Expect: 100-continue) is asked for on the first read: 100
 * Continue goes out then, and the read waits (without the GIL) until the
 * body is in whole. Returns 0, or -1 with OSError set. */
static int input_ready(m0_InputObject *in)
{
    if (in->ready || in->job == NULL || !in->job->ch.body_lazy) {
        in->ready = 1;
        return 0;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = m0_job_wait_body(in->job, UINT64_MAX);
    Py_END_ALLOW_THREADS
    if (rc != M0_OK) {
        PyErr_SetString(PyExc_OSError, "the request body was not received (the client left, stalled "
                                       "or sent a malformed body)");
        return -1;
    }
    in->ready = 1;
    return 0;
}

static uint64_t input_left(m0_InputObject *in)
{
    if (in->job == NULL || in->pos >= in->job->req.body_len)
        return 0;
    return in->job->req.body_len - in->pos;
}

/* Bytes [pos, pos+n) of the body as a bytes object; advances pos.
 * New reference. */
static PyObject *input_take(m0_InputObject *in, uint64_t n)
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
    m0_InputObject *in = (m0_InputObject *)self;
    Py_ssize_t size;
    if (size_arg(args, nargs, "read", &size) == -1 || input_ready(in) == -1)
        return NULL;
    uint64_t left = input_left(in);
    uint64_t n = (size < 0 || (uint64_t)size > left) ? left : (uint64_t)size;
    if (n == 0)
        return PyBytes_FromStringAndSize("", 0);
    return input_take(in, n);
}

static PyObject *input_readline(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    m0_InputObject *in = (m0_InputObject *)self;
    Py_ssize_t size;
    if (size_arg(args, nargs, "readline", &size) == -1 || input_ready(in) == -1)
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

PyTypeObject m0_InputType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "m0.InputStream",
    .tp_basicsize = sizeof(m0_InputObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.input: the request body (already received; chunked bodies decoded).",
    .tp_methods = input_methods,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = input_iternext,
};

/* ---------------------------------------------------- wsgi.file_wrapper */

static int filewrapper_init(PyObject *self, PyObject *args, PyObject *kw)
{
    m0_FileWrapperObject *fw = (m0_FileWrapperObject *)self;
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
    Py_CLEAR(((m0_FileWrapperObject *)self)->filelike);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *filewrapper_iternext(PyObject *self)
{
    m0_FileWrapperObject *fw = (m0_FileWrapperObject *)self;
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
    m0_FileWrapperObject *fw = (m0_FileWrapperObject *)self;
    if (fw->filelike != NULL && PyObject_HasAttr(fw->filelike, s_close_str))
        return PyObject_CallMethodNoArgs(fw->filelike, s_close_str);
    Py_RETURN_NONE;
}

static PyMethodDef filewrapper_methods[] = {
    {"close", filewrapper_close, METH_NOARGS, "close(): close the wrapped file"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject m0_FileWrapperType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "m0.FileWrapper",
    .tp_basicsize = sizeof(m0_FileWrapperObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.file_wrapper(filelike, blksize=8192): a regular file is sent with sendfile(2).",
    .tp_methods = filewrapper_methods,
    .tp_init = filewrapper_init,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = filewrapper_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = filewrapper_iternext,
};


int m0_wsgi_io_ready(void)
{
    if (s_close_str == NULL && (s_close_str = PyUnicode_InternFromString("close")) == NULL)
        return -1;
    PyTypeObject *types[] = {&m0_ErrorsType, &m0_InputType, &m0_FileWrapperType};
    for (size_t i = 0; i < M0_ARRAY_LEN(types); i++) {
        if (PyType_Ready(types[i]) < 0)
            return -1;
    }
    return 0;
}

m0_InputObject *m0_input_new(struct m0_job *job)
{
    m0_InputObject *in = PyObject_New(m0_InputObject, &m0_InputType);
    if (in != NULL) {
        in->job = job;
        in->pos = 0;
        in->ready = 0;
    }
    return in;
}
