/*
 * fork.h — a process the application forks (os.fork in a view,
 * multiprocessing's fork start method, a daemon library) must hold
 * nothing of the server's: not the listeners, the epoll instance, the
 * lanes, the bus, the broker's sockets nor the client connections. Each
 * module that owns descriptors registers its own clean-up once, when it
 * starts (libuv's per-subsystem uv__*_fork hooks, in a registry), and the
 * registry runs them in the child: os.register_at_fork(after_in_child=
 * m0._after_fork_child) calls m0_fork_after_child (m0mod.c). A child that
 * returns into the server instead of exiting is stopped by m0_fork_check,
 * which runners call after every call into the application.
 *
 * The registry is per process: hooks are added and removed at boot and
 * teardown (the loop thread), and only read in a forked child.
 */
#ifndef M0_FORK_H
#define M0_FORK_H

#include "m0/target.h"
#include "m0/types.h"

/* At most this many hooks: the worker's own descriptors, and for each of
 * its event loops (--threads) the server, the pool, the broker and each
 * ASGI executor. (A static table: a fork copies it whole, and the pages
 * never used are never touched.) */
#define M0_FORK_MAX_HOOKS (8 + M0_MAX_LOOPS * (4 + M0_MAX_TARGETS))

typedef void (*m0_fork_fn)(void *ctx);

/* This process is a worker: children forked from it (pthread_atfork) are
 * told apart from it without a system call per request. */
void m0_fork_set_worker(void);

/* Is this the worker itself (not a child it forked, not the master)?
 * Async-signal-safe. */
int m0_fork_in_worker(void);

/* Run fn(ctx) in a child forked from this worker (close ctx's
 * descriptors; nothing that talks to a peer). Aborts when the registry is
 * full (a bug: the registry is sized for every module). */
void m0_fork_on_child(m0_fork_fn fn, void *ctx);
/* Drop every hook registered with ctx (its owner is being freed). */
void m0_fork_forget(void *ctx);

/* In a process forked from the worker: run every hook once, in the order
 * they were registered, then forget them (a grandchild owns none of
 * them). A no-op in the worker itself and outside a worker. */
void m0_fork_after_child(void);

/* Called after every call into the application: a process forked by the
 * application that returns into the server exits here (it must never
 * serve, finish jobs or run the loop). */
void m0_fork_check(void);

#endif
