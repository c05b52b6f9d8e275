/*
 * apps.h — the application loader (apps.c), above the runners: the
 * built-in modules, the application mounts and their runners.
 */
#ifndef M0_APPS_H
#define M0_APPS_H

#include "m0/types.h"

struct m0_config;

/* Register the built-in modules the runners need ("m0", "_m0asgi"), before
 * m0_py_init. Returns M0_OK or M0_ERR (logged). */
int m0_apps_register_modules(void);

/* Import every application mount of cfg (the positional app is the root
 * mount; --mount adds the others), each with its own discovery (MODULE[:
 * ATTR], bare MODULE tried as in DESIGN capability 2) and protocol
 * detection (m0serve._boot.load; --protocol forces one for all), and add
 * each to the target table with its runner set up: an ASGI mount starts its
 * executor and lifespan here; WSGI mounts get the pool afterwards
 * (m0_serve_start_pools). On failure the reason (one line, or the
 * application's traceback) is printed and M0_ERR returned. Leaves the
 * thread detached. */
int m0_apps_load(const struct m0_config *cfg);

/* Drop every application (the target table is empty afterwards), before
 * m0_py_finalize. Attaches itself (call detached). */
void m0_apps_unload(void);

#endif
