/*
 * reload.h — --reload, for development: a worker watches the directories
 * of the application's modules (those imported from --app-dir) with one
 * inotify descriptor in its loop, and when a Python file there is written,
 * renamed into place or removed it says so to whoever started it — the
 * worker, which asks the master to replace every worker (M0_CTL_RELOAD, the
 * SIGHUP path: the new generation imports the code afresh and serves before
 * the old one drains).
 *
 * Which directories: python/m0serve/_reload.py walks sys.modules once at
 * boot and again every second (one thread, to see modules imported lazily,
 * e.g. Django views on the first request) and hands new directories to
 * m0_reload_watch(). No file is polled: changes arrive as inotify events.
 */
#ifndef M0_RELOAD_H
#define M0_RELOAD_H

#include "m0/types.h"

struct m0_config;
struct m0_loop;

/* Create the inotify descriptor, register it with loop l and start the
 * Python side's watcher over cfg->app_dir; changed(ctx) runs on the loop
 * thread once per batch of changes to Python files. Once per process.
 * Attaches to Python itself (call detached, after the application loaded).
 * Returns M0_OK or M0_ERR (logged; the worker serves without reloading). */
int m0_reload_start(struct m0_loop *l, const struct m0_config *cfg, void (*changed)(void *ctx), void *ctx);

/* Watch directory dir (any thread). Returns M0_OK, or M0_ERR with errno. */
int m0_reload_watch(const char *dir);

#endif
