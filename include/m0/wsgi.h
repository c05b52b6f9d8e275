/*
 * wsgi.h — the PEP 3333 bridge's parts, shared by its files:
 *   wsgi.c          the runner (m0_wsgi_runner): start_response, the
 *                   iterable, framing through the body encoder, close();
 *   wsgi_environ.c  the environ template of a target and the per-request
 *                   environ;
 *   wsgi_io.c       wsgi.input, wsgi.errors and wsgi.file_wrapper;
 *   m0mod.c         the built-in "m0" module.
 *
 * Everything here is called with the calling thread attached to the
 * interpreter: the pool thread running the job, or the loop thread when no
 * pool serves.
 */
#ifndef M0_WSGI_H
#define M0_WSGI_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "m0/types.h"
#include "m0/job.h"

struct m0_config;
struct m0_target;

/* ------------------------------------------------------------ wsgi_io.c */

extern PyTypeObject m0_ErrorsType, m0_InputType, m0_FileWrapperType;

/* wsgi.input of one request. job is NULL once the request is over. */
typedef struct {
    PyObject_HEAD
    struct m0_job *job;
    uint64_t pos;          /* next body byte to hand out */
    int ready;             /* a lazy body (Expect: 100-continue) has arrived whole */
} m0_InputObject;

/* wsgi.file_wrapper(filelike, blksize). */
typedef struct {
    PyObject_HEAD
    PyObject *filelike;
    Py_ssize_t blksize;
} m0_FileWrapperObject;

/* ------------------------------------------------------- wsgi_environ.c */

/* -------------------------------------------------------------- m0mod.c */


/* ------------------------------------------------------------- wsgi.c */

/* Latin-1 bytes of a str (PEP 3333 "native strings"): for the common ASCII
 * case the str's own buffer. *owner receives a new reference to release, or
 * NULL. Raises UnicodeEncodeError for text that is not latin-1. */
const char *m0_latin1(PyObject *s, Py_ssize_t *len, PyObject **owner);

#include "m0/m0mod.h"

#include "m0/wsgi_io.h"

#include "m0/wsgi_environ.h"

#endif
