/*
 * apps.h — the application loader (apps.c), above the runners: the
 * built-in modules, the application mounts and their runners.
 */
#ifndef M0_APPS_H
#define M0_APPS_H

#include "m0/types.h"

struct m0_config;
struct m0_pool;
struct m0_runner_env;

/* Register the built-in modules the runners need ("m0", "_m0asgi"), before
 * m0_py_init. Returns M0_OK or M0_ERR (logged). */
int m0_apps_register_modules(void);

/* Import every application mount of cfg (the positional app is the root
 * mount; --mount adds the others), each with its own discovery (MODULE[:
 * ATTR], bare MODULE tried as in DESIGN capability 2) and protocol
 * detection (m0serve._boot.load; --protocol forces one for all), and add
 * each to the target table with its runner set up for the jobs of each of
 * the nenvs loops (envs[i] is loop i's; --threads): an ASGI mount starts
 * one executor and lifespan per loop here; WSGI mounts get their pools
 * afterwards (m0_apps_start_pool). On failure the reason (one line, or the
 * application's traceback) is printed and M0_ERR returned. Leaves the
 * thread detached. */
int m0_apps_load(const struct m0_config *cfg, const struct m0_runner_env *const *envs, unsigned nenvs);

/* After the applications are loaded: the handler pool serving env's loop
 * for the WSGI targets (when any, and --blocking-threads > 0), which then
 * run on it; *out is the pool (NULL: none, they run inline on the loop
 * thread), which the caller puts in env->pool and stops (m0_pool_stop).
 * Once per loop. Returns M0_OK or M0_ERR (logged). Detached. */
int m0_apps_start_pool(const struct m0_config *cfg, const struct m0_runner_env *env, struct m0_pool **out);

/* The master's 'K' (control.h): m0pub.grant signs with the worker's grant
 * key index (its --grant-key-file set, file order) from now on; logged.
 * Per process: any loop, no attach needed. */
void m0_apps_grant_sign(unsigned index);

/* After the drain: every runner's teardown (ASGI lifespan shutdown).
 * Attaches itself (call detached). */
void m0_apps_teardown(void);

/* Drop every application (the target table is empty afterwards), before
 * m0_py_finalize. Attaches itself (call detached). */
void m0_apps_unload(void);

#endif
