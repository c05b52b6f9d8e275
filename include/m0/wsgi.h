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

/* Ready the three types. Returns 0 or -1 with an exception set. */
int m0_wsgi_io_ready(void);
/* A new wsgi.input for job (new reference), or NULL with an exception. */
m0_InputObject *m0_input_new(struct m0_job *job);

/* ------------------------------------------------------- wsgi_environ.c */

/* The environ template of target t (SCRIPT_NAME = its prefix, SERVER_*,
 * wsgi.*): a new reference, or NULL with an exception set. */
PyObject *m0_environ_template(const struct m0_target *t, const struct m0_config *cfg, int multithread);
/* environ for job (PEP 3333 "environ Variables"): a copy of template plus
 * the request, with input as wsgi.input. New reference, or NULL. */
PyObject *m0_environ_build(struct m0_job *job, PyObject *template, PyObject *input);

/* -------------------------------------------------------------- m0mod.c */

/* The built-in "m0" module's init function (registered before
 * Py_Initialize). New reference. */
PyObject *m0_module_init(void);
/* The keys m0._grant_keys() hands m0pub.grant: the worker's own
 * --grant-key-file set, the one it verifies grants with (NULL: none), and
 * sign, the index of the one m0._grant_signer() names (config.h
 * grant_sign). Set once per worker before the applications load; k must
 * stay. m0_module_grant_sign: the master's 'K' (control.h): sign with
 * key index from now on (logged; an index out of range is ignored); any
 * thread. */
struct m0_grant_keys;
void m0_module_grant_keys(const struct m0_grant_keys *k, unsigned sign);
void m0_module_grant_sign(unsigned index);

/* ------------------------------------------------------------- wsgi.c */

/* Latin-1 bytes of a str (PEP 3333 "native strings"): for the common ASCII
 * case the str's own buffer. *owner receives a new reference to release, or
 * NULL. Raises UnicodeEncodeError for text that is not latin-1. */
const char *m0_latin1(PyObject *s, Py_ssize_t *len, PyObject **owner);

#endif
