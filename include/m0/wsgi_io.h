/*
 * wsgi_io.h — wsgi.input and wsgi.file_wrapper (wsgi_io.c, of the WSGI
 * module, wsgi.h).
 */
#ifndef M0_WSGI_IO_H
#define M0_WSGI_IO_H

#include "m0/wsgi.h"

/* Ready the three types. Returns 0 or -1 with an exception set. */
int m0_wsgi_io_ready(void);

/* A new wsgi.input for job (new reference), or NULL with an exception. */
m0_InputObject *m0_input_new(struct m0_job *job);

#endif
