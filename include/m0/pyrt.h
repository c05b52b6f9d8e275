/*
 * pyrt.h — the Python runtime: one interpreter per worker process,
 * initialised after fork (PyPreConfig, PyConfig, Py_InitializeFromConfig),
 * the thread states of the threads that run Python, the attach/detach pair
 * for the loop thread, printing an exception, finalizing. Everything that
 * runs Python sits above it: the pool, the runners, the application
 * loader (apps.h), which registers the built-in modules first.
 */
#ifndef M0_PYRT_H
#define M0_PYRT_H

#include "m0/types.h"

struct m0_config;
struct m0_pool;

/* Initialise Python in this (worker) process (built-in modules are
 * registered before: m0_apps_register_modules). app_dir goes first on
 * sys.path, m0serve's python/ directory last. On failure prints why to the
 * error log and returns M0_ERR. The calling thread is left detached. */
int m0_py_init(const struct m0_config *cfg);

/* Print the pending Python exception with its traceback to sys.stderr and
 * clear it. Unlike PyErr_Print, SystemExit and KeyboardInterrupt are only
 * printed: nothing here exits or finalizes the interpreter. Attached. */
void m0_py_print_exception(void);

/* Flush Python's own sys.stderr and sys.stdout (a worker that leaves with
 * _exit on a boot failure would lose the traceback). Attached. */
void m0_py_flush_std(void);

/* Attach / detach the calling thread with its own thread state (the loop
 * thread: the GIL around a runner call). The pair asserts it is used in
 * order. */
void m0_py_attach(void);
void m0_py_detach(void);
/* Give the calling thread (an event loop of --threads other than the
 * first, which has the interpreter's own) a thread state of its own,
 * detached, for m0_py_attach/m0_py_detach. Aborts when CPython cannot
 * make one. m0_py_release_thread, detached, before the thread ends. */
void m0_py_adopt_thread(void);
void m0_py_release_thread(void);
/* The event loop (--threads: 0..N-1) the calling thread works for: set by
 * each loop thread, handler thread and ASGI executor thread when it
 * starts; read by m0.loop_index(). 0 on any other thread. */
void m0_py_set_loop(unsigned loop_index);
unsigned m0_py_loop(void);

/* A pool thread's own Python thread state, created once for the thread's
 * life (detached), attached only around Python work. Opaque to callers. */
void *m0_py_thread_new(void);
void m0_py_thread_attach(void *ts);
void m0_py_thread_detach(void *ts);
/* Delete the state; call on the thread that owns it, detached. */
void m0_py_thread_free(void *ts);

/* Finalize the interpreter (attaches first; the applications are dropped
 * before, m0_apps_unload). */
void m0_py_finalize(void);

/* Before anything starts: is the virtualenv the interpreter would run in
 * ($VIRTUAL_ENV, or the one pip installed this binary into) made from the
 * Python version this binary embeds, of the same kind (free-threaded or
 * with the GIL), and from that interpreter itself — its pyvenv.cfg "home"
 * leading to the same standard library (not pyenv's 3.11 beside Debian's)?
 * Returns M0_OK, or M0_ERR with one line in err (the caller exits
 * M0_EXIT_CONFIG): a libpython cannot run another build's standard library,
 * compiled modules and packages. */
int m0_py_check_env(char *err, size_t cap);

/* The interpreter this binary was built against ("/usr/bin/python3.11"). */
const char *m0_py_built_for(void);

/* "3.11.2", the version of the Python headers this binary was built with. */
const char *m0_py_version(void);
/* 1 when built for a free-threaded CPython (Py_GIL_DISABLED), else 0. */
int m0_py_free_threaded(void);
/* On a free-threaded build, the loader notes after each step of the boot
 * whether the GIL is still off, and cause (a static string) the first time
 * it is found on. Attached. No-op on a GIL build. */
void m0_py_note_gil(const char *cause);
/* Declare that module m (made by PyModule_Create: single-phase init, so
 * no Py_mod_gil slot) runs without the GIL: on a free-threaded build
 * (Py_GIL_DISABLED, CPython 3.13 or later) importing it then leaves the
 * GIL off. Only for modules whose C state is safe from two threads at once
 * (locks, atomics, per-thread or read-only after boot: docs/architecture.md).
 * Returns 0, or -1 with an exception set; nothing on a GIL build. */
int m0_py_module_nogil(void *m);
/* On a free-threaded build, after m0_apps_load: whether the GIL is off in
 * this worker, and if it is on, what turned it on ("GIL disabled", "GIL
 * enabled (by ...)"); a static string. NULL on a GIL build or before. */
const char *m0_py_gil_state(void);

#endif
