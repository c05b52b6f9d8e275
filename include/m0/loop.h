/*
 * loop.h — a worker's event loop: one epoll instance, descriptors that
 * register a handler, connection slots, before-sleep hooks, and the
 * completion queue other threads post to (redis ae's file events and
 * beforesleep; h2o's multithread receiver).
 *
 * Everything here runs on the loop thread except m0_loop_post(), which any
 * thread may call. Handlers may add and remove descriptors, including their
 * own.
 */
#ifndef M0_LOOP_H
#define M0_LOOP_H

#include <pthread.h>
#include "m0/types.h"

struct m0_loop;

/* A registered descriptor is ready: events are EPOLL* bits. */
typedef void (*m0_fd_cb)(struct m0_loop *l, int fd, uint32_t events, void *ctx);
/* A connection slot's descriptor is ready. gen is the generation the
 * registration carried: compare it with the slot's to drop stale events. */
typedef void (*m0_slot_cb)(struct m0_loop *l, uint32_t slot, uint32_t gen, uint32_t events, void *ctx);
/* Called once per pass, before the loop sleeps. */
typedef void (*m0_hook_cb)(struct m0_loop *l, void *ctx);

/* What a thread reports back about a slot's job (enum m0_cpl_kind). */
struct m0_completion {
    uint32_t slot;
    uint32_t gen;
    uint32_t kind;
    int32_t rc;
};
typedef void (*m0_complete_cb)(struct m0_loop *l, const struct m0_completion *c, void *ctx);

/* Create a loop (epoll instance and the completion queue's eventfd).
 * Returns NULL with errno set. */
struct m0_loop *m0_loop_new(void);
void m0_loop_free(struct m0_loop *l);

/* Register fd (epoll events: EPOLLIN, EPOLLOUT, ...) with a handler.
 * Returns M0_OK or M0_ERR (errno). */
int m0_loop_add_fd(struct m0_loop *l, int fd, uint32_t events, m0_fd_cb cb, void *ctx);
int m0_loop_mod_fd(struct m0_loop *l, int fd, uint32_t events);
/* Unregister fd (before closing it, or to stop watching it). */
void m0_loop_del_fd(struct m0_loop *l, int fd);

/* Connection descriptors: epoll data carries (slot, gen); gen uses its low
 * 31 bits. Every slot event goes to the one slot handler. */
void m0_loop_on_slot(struct m0_loop *l, m0_slot_cb cb, void *ctx);
int m0_loop_add_slot(struct m0_loop *l, int fd, uint32_t slot, uint32_t gen, uint32_t events);
int m0_loop_mod_slot(struct m0_loop *l, int fd, uint32_t slot, uint32_t gen, uint32_t events);

/* Completions go to the one completion handler, in the order posted. */
void m0_loop_on_complete(struct m0_loop *l, m0_complete_cb cb, void *ctx);
/* Any thread: queue a completion; the loop wakes (one eventfd write per
 * batch: a poster skips it while a wakeup is pending). Never blocks beyond
 * a short mutex. */
void m0_loop_post(struct m0_loop *l, const struct m0_completion *c);

/* A thread that produces many completions per wakeup of its own (the ASGI
 * executor) may defer them: between m0_loop_defer(l, 1) and
 * m0_loop_defer(l, 0), m0_loop_post() from this thread only collects, and
 * m0_loop_flush() posts what was collected with one lock and at most one
 * wakeup — so the loop is woken once per batch, not once per response.
 * m0_loop_defer(l, 0) flushes and frees the thread's buffer.
 * Thread-local; one loop per thread. */
void m0_loop_defer(struct m0_loop *l, int on);
void m0_loop_flush(struct m0_loop *l);

/* Run hook once per pass, before sleeping (in registration order). Any
 * number may be added, also from a hook (the table grows; aborts only when
 * memory is exhausted, as m0_xmalloc does). */
void m0_loop_add_hook(struct m0_loop *l, m0_hook_cb cb, void *ctx);
/* The next sleep ends no later than at (loop clock, ms). Reset every pass:
 * hooks that need a deadline set it each time. */
void m0_loop_wake_at(struct m0_loop *l, uint64_t at);

/* The loop clock (monotonic ms), refreshed after every wakeup. */
uint64_t m0_loop_now(const struct m0_loop *l);
/* Any thread: the loop clock when l last woke, or 0 while it waits for
 * events — how long it has been busy (a view inline on it, a long pass). */
uint64_t m0_loop_awake_since(const struct m0_loop *l);

/* Run until m0_loop_stop(). Returns M0_OK, or M0_ERR if epoll failed. */
int m0_loop_run(struct m0_loop *l);
void m0_loop_stop(struct m0_loop *l);

/* The descriptors the loop itself owns (epoll, eventfd), closed in a
 * process forked from a worker (it must not share them). */
void m0_loop_close_in_child(struct m0_loop *l);

#endif
