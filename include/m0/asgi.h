/*
 * asgi.h — the ASGI runner's process-level hooks (the runner itself is
 * m0_asgi_runner in runner.h; its Python half is python/m0serve/_asgi.py).
 */
#ifndef M0_ASGI_H
#define M0_ASGI_H

#include "m0/types.h"

/* Init function of the built-in module "_m0asgi" (registered before
 * Py_Initialize): the executor's primitives. New reference. */
struct _object;
struct _object *m0_asgi_module_init(void);

/* In a process forked from the worker: close the executors' lanes. */
void m0_asgi_close_in_child(void);

#endif
