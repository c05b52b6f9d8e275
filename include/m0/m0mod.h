/*
 * m0mod.h — the m0 module applications import (m0mod.c, of the WSGI
 * module, wsgi.h).
 */
#ifndef M0_M0MOD_H
#define M0_M0MOD_H

#include "m0/wsgi.h"

/* The built-in "m0" module's init function (registered before
 * Py_Initialize). New reference. */
PyObject *m0_module_init(void);

void m0_module_grant_keys(const struct m0_grant_keys *k);

#endif
