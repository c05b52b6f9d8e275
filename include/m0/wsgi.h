/*
 * wsgi.h — the PEP 3333 bridge: environ, start_response, wsgi.input,
 * write(), iterable driving with close(), wsgi.file_wrapper.
 *
 * Called with the calling thread attached to the interpreter (holding the
 * GIL): the loop thread when no pool serves, a pool thread otherwise.
 * Output is framed bytes appended to job->resp; the caller writes them.
 */
#ifndef M0_WSGI_H
#define M0_WSGI_H

#include "m0/types.h"
#include "m0/job.h"

struct m0_config;

/* Build the per-worker state: interned strings, the environ template for
 * app (a borrowed reference that must stay alive), the m0 types. multithread
 * is the truthful wsgi.multithread value. Returns M0_OK or M0_ERR with a
 * Python exception set. */
int m0_wsgi_setup(void *app, const struct m0_config *cfg, int multithread);

/*
 * Run the application for job->req and produce the first part of the
 * response in job->resp. Returns:
 *   M0_DONE   the response is complete in resp (flags DONE, maybe CLOSE/ABORT);
 *   M0_AGAIN  more body will follow: write out what is queued, then call
 *             m0_wsgi_resume() (credit: the runner stops once about 64 KB
 *             are queued, so a slow reader bounds the memory it costs).
 * Application errors never propagate: they are logged with their traceback
 * and become a 500 (head not sent yet) or an aborted connection.
 */
int m0_wsgi_start(struct m0_job *job);
int m0_wsgi_resume(struct m0_job *job);

/* The connection is gone: close the iterable and drop runner state. */
void m0_wsgi_abandon(struct m0_job *job);

/* Module init for the built-in "m0" module (registered before
 * Py_Initialize). New reference. */
void *m0_wsgi_module_init(void);

#endif
