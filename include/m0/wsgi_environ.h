/*
 * wsgi_environ.h — the WSGI environ (wsgi_environ.c, of the WSGI module,
 * wsgi.h): a template per mount, copied and filled per request.
 */
#ifndef M0_WSGI_ENVIRON_H
#define M0_WSGI_ENVIRON_H

#include "m0/wsgi.h"

/* The environ template of target t (SCRIPT_NAME = its prefix, SERVER_*,
 * wsgi.*): a new reference, or NULL with an exception set. */
PyObject *m0_environ_template(const struct m0_target *t, const struct m0_config *cfg, int multithread);

/* environ for job (PEP 3333 "environ Variables"): a copy of template plus
 * the request, with input as wsgi.input. New reference, or NULL. */
PyObject *m0_environ_build(struct m0_job *job, PyObject *template, PyObject *input);

#endif
