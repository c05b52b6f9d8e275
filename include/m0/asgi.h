/*
 * asgi.h — the ASGI runner's process-level hooks (the runner itself is
 * m0_asgi_runner in runner.h; its Python half is python/m0serve/_asgi.py).
 */
#ifndef M0_ASGI_H
#define M0_ASGI_H

#include "m0/types.h"
#include "m0/buf.h"
#include "m0/http.h"

/* Init function of the built-in module "_m0asgi" (registered before
 * Py_Initialize): the executor's primitives. New reference. */
struct _object;
struct _object *m0_asgi_module_init(void);

/*
 * Shared by the ASGI runner's files (asgi.c: HTTP and lifespan; asgi_ws.c:
 * the WebSocket scope). Executor thread, with the GIL.
 */
#define M0_ASGI_ID 1                 /* the runner's index in job->rstate[] */

/* The job's ASGI state (job->rstate[M0_ASGI_ID]). */
struct m0_asgi_job {
    uint64_t read_off;               /* request body bytes handed to receive() */
    struct m0_buf held;              /* a hold's body, held back until its last message */
    uint8_t started;                 /* http.response.start was sent (job->head is set) */
    uint8_t accepted;                /* websocket.accept was sent (the job is a socket's now) */
    uint8_t done;                    /* the job is the loop's again */
};

struct m0_job;

/* The running ASGI job of slot, or NULL with RuntimeError set. */
struct m0_job *m0_asgi_job_of(unsigned long slot);
/* Give the job back to the loop (M0_CPL_DONE): no call on it after this. */
void m0_asgi_done(struct m0_job *job);
/* Copy an ASGI headers iterable of (bytes, bytes) pairs into job->head,
 * each name checked as a token and value as a field value (RFC 9110 §5.1,
 * §5.5). M0_OK, or M0_ERR with TypeError/ValueError set. */
int m0_asgi_add_headers(struct m0_job *job, struct _object *headers);

/* The _m0asgi functions of the WebSocket scope (a NULL-terminated
 * PyMethodDef array, for PyModule_AddFunctions). */
extern struct PyMethodDef *const m0_asgi_ws_methods;

#include "m0/asgi_ws.h"
#include "m0/asgi_tls.h"

#endif
