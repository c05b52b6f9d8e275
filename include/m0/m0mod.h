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

#endif
